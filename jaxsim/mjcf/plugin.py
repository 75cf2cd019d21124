"""Engine plugins in MJCF: <extension> declarations, plugin instances and their <config>.

jaxsim computes two engine plugins, the mujoco.sensor.touch_grid sensor (jaxsim.touchgrid) and the
mujoco.pid actuator (jaxsim.actuation); the others that mujoco's Python package registers may be
declared but not instantiated, and names it does not register are refused as mujoco refuses them.
"""

from __future__ import annotations

import math
import re

from jaxsim.mjcf import schema
from jaxsim.mjcf.parse import Element

# the engine plugins mujoco's Python package registers (its libactuator, libsdf_plugin, libsensor)
FIRST_PARTY = (
  'mujoco.pid',
  'mujoco.sensor.touch_grid',
  'mujoco.sdf.bolt',
  'mujoco.sdf.bowl',
  'mujoco.sdf.gear',
  'mujoco.sdf.nut',
  'mujoco.sdf.torus',
)


TOUCH_GRID = 'mujoco.sensor.touch_grid'
PID = 'mujoco.pid'
# the plugins jaxsim computes, and the <config> keys (plugin attributes) of each
KEYS = {
  TOUCH_GRID: ('nchannel', 'size', 'fov', 'gamma'),
  PID: ('kp', 'ki', 'kd', 'imax', 'slewmax'),
}
_STRTOD = re.compile(r'\s*[-+]?(?:inf(?:inity)?|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)', re.I)


def read_config(elem: Element, plugin: str) -> dict[str, tuple[str, Element]]:
  """A plugin instance's <config key value> pairs, each value with its element; the keys are
  the plugin's attributes."""
  schema.only_children(elem, {'config'})
  out = {}
  for c in elem.children:
    a = schema.read_attrs(c, {'key': 's', 'value': 's'})
    for req in ('key', 'value'):
      if req not in a:
        raise c.error('required attribute missing', attribute=req)
    if a['key'] not in KEYS[plugin]:
      raise c.error(f"unrecognized attribute 'plugin:{a['key']}' of {plugin}", attribute='key')
    if a['key'] in out:
      raise c.error(f"duplicate config key '{a['key']}'", attribute='key')
    out[a['key']] = (a['value'], c)
  return out


def read_extension(
  elem: Element, instances: dict[str, tuple[str, dict, Element]], declared: set[str]
):
  """Reads <extension>: declared plugins (into `declared`) and their named instances (into
  `instances`); an element may use only a declared plugin.

  A declared plugin does nothing until an element uses it. jaxsim computes the touch_grid sensor
  and pid actuator plugins; instances of the other plugins mujoco registers are refused by name,
  as is every element that would use them (<plugin> in a body, mesh or geom).
  """
  schema.only_children(elem, {'plugin'})
  for p in elem.children:
    attrs = schema.read_attrs(p, {'plugin': 's'})
    if 'plugin' not in attrs:
      raise p.error('required attribute missing', attribute='plugin')
    name = attrs['plugin']
    if name not in FIRST_PARTY:
      raise p.error(f'plugin {name} not found', attribute='plugin')
    declared.add(name)
    schema.only_children(p, {'instance'})
    for inst in p.children:
      if name not in KEYS:
        raise inst.error(f'instances of the {name} plugin are not supported by jaxsim')
      a = schema.read_attrs(inst, {'name': 's'})
      if 'name' not in a:
        raise inst.error('required attribute missing', attribute='name')
      if a['name'] in instances:
        raise inst.error(f"repeated plugin instance name '{a['name']}'", attribute='name')
      config = read_config(inst, name)
      # mujoco initialises every instance, used or not (a pid instance's check needs its
      # actuators: compile_actuators)
      (touch_grid_params if name == TOUCH_GRID else pid_params)(inst, config)
      instances[a['name']] = (name, config, inst)


def _number(value: str) -> float | None:
  """A <config> value as PidConfig reads it: None when empty, else strtod's (0 without digits)."""
  if not value:
    return None
  m = _STRTOD.match(value)
  return float(m.group()) if m else 0.0


def pid_params(e: Element, config: dict[str, tuple[str, Element]]) -> tuple[float, ...]:
  """(kp, ki, kd, integral clamp, slewmax) of a mujoco.pid instance `e`, as PidConfig::FromModel
  reads them and Pid::Create checks them: the clamp is imax / ki (inf without imax or ki) and
  slewmax is -1 where not given."""

  def get(key):
    return _number(config[key][0]) if key in config else None

  kp, ki, kd = (get(k) or 0.0 for k in ('kp', 'ki', 'kd'))
  imax, slew = get('imax'), get('slewmax')
  clamp = imax / ki if imax is not None and ki else math.inf
  if clamp < 0:
    raise config['imax'][1].error('mujoco.pid: negative imax', attribute='value')
  if slew is not None and slew < 0:
    raise config['slewmax'][1].error('mujoco.pid: slewmax must be non-negative', 'value')
  return (kp, ki, kd, clamp, -1.0 if slew is None else slew)


def pid_actdim(prm: tuple[float, ...]) -> int:
  """Activations a mujoco.pid actuator keeps (Pid::ActDim): the error integral where ki is
  nonzero, then the previous setpoint where slewmax is given."""
  return int(prm[1] != 0) + int(prm[4] >= 0)


def touch_grid_params(
  e: Element, config: dict[str, tuple[str, Element]]
) -> tuple[int, int, int, float, float, float]:
  """(nchannel, horizontal, vertical resolution, fov x, fov y in degrees, gamma) of a touch_grid
  sensor `e`, checked as TouchGrid::Create checks them; errors name the <config> at fault."""

  def fail(key, message):
    if key in config:
      raise config[key][1].error(f'touch_grid: {message}', attribute='value')
    raise e.error(f'touch_grid: {message}')

  def numbers(key):
    try:
      return [float(v) for v in config.get(key, ('',))[0].split()]
    except ValueError:
      fail(key, f'config {key!r} must be numbers')

  def scalar(key):
    v = numbers(key)
    if len(v) > 1:
      fail(key, f'config {key!r} must be one number')
    return v[0] if v else 0.0

  nchannel = int(scalar('nchannel')) or 1
  if not 1 <= nchannel <= 6:
    fail('nchannel', 'nchannel must be between 1 and 6')
  size = [int(v) for v in numbers('size')]
  if len(size) != 2:
    fail('size', 'both horizontal and vertical resolutions must be specified')
  if size[0] <= 0 or size[1] <= 0:
    fail('size', 'horizontal and vertical resolutions must be positive')
  fov = numbers('fov')
  if len(fov) != 2:
    fail('fov', 'both horizontal and vertical fields of view must be specified')
  if not 0 < fov[0] <= 180:
    fail('fov', 'fov[0] must be in (0, 180] degrees')
  if not 0 < fov[1] <= 90:
    fail('fov', 'fov[1] must be in (0, 90] degrees')
  gamma = scalar('gamma')
  if not 0 <= gamma <= 1:
    fail('gamma', 'gamma must be in [0, 1]')
  return (nchannel, size[0], size[1], fov[0], fov[1], gamma)

"""Engine plugins in MJCF: <extension> declarations, plugin instances and their <config>.

jaxsim computes one engine plugin, mujoco.sensor.touch_grid (jaxsim.touchgrid); the others that
mujoco's Python package registers may be declared but not instantiated, and names it does not
register are refused as mujoco refuses them.
"""

from __future__ import annotations

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
TOUCH_GRID_KEYS = ('nchannel', 'size', 'fov', 'gamma')


def read_config(elem: Element, plugin: str) -> dict[str, tuple[str, Element]]:
  """A plugin instance's <config key value> pairs, each value with its element; touch_grid's
  keys are its attributes."""
  schema.only_children(elem, {'config'})
  out = {}
  for c in elem.children:
    a = schema.read_attrs(c, {'key': 's', 'value': 's'})
    for req in ('key', 'value'):
      if req not in a:
        raise c.error('required attribute missing', attribute=req)
    if a['key'] not in TOUCH_GRID_KEYS:
      raise c.error(f"unrecognized attribute 'plugin:{a['key']}' of {plugin}", attribute='key')
    if a['key'] in out:
      raise c.error(f"duplicate config key '{a['key']}'", attribute='key')
    out[a['key']] = (a['value'], c)
  return out


def read_extension(elem: Element, instances: dict[str, tuple[str, dict, Element]]):
  """Reads <extension>: declared plugins and their named instances (into `instances`).

  A declared plugin does nothing until an element uses it. jaxsim computes the touch_grid sensor
  plugin; instances of the other plugins mujoco registers are refused by name, as is every
  element that would use them (<plugin> in a body, mesh or actuator).
  """
  schema.only_children(elem, {'plugin'})
  for p in elem.children:
    attrs = schema.read_attrs(p, {'plugin': 's'})
    if 'plugin' not in attrs:
      raise p.error('required attribute missing', attribute='plugin')
    name = attrs['plugin']
    if name not in FIRST_PARTY:
      raise p.error(f'plugin {name} not found', attribute='plugin')
    schema.only_children(p, {'instance'})
    for inst in p.children:
      if name != TOUCH_GRID:
        raise inst.error(f'instances of the {name} plugin are not supported by jaxsim')
      a = schema.read_attrs(inst, {'name': 's'})
      if 'name' not in a:
        raise inst.error('required attribute missing', attribute='name')
      if a['name'] in instances:
        raise inst.error(f"repeated plugin instance name '{a['name']}'", attribute='name')
      config = read_config(inst, name)
      touch_grid_params(inst, config)  # mujoco initialises every instance, used or not
      instances[a['name']] = (name, config, inst)


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

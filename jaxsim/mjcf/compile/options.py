"""The model's global settings: the <mujoco> root, <extension>, <compiler>, <option> (and its
<flag>), <size>, <statistic> and <visual> (mjXReader::Compiler, Option, Size, Statistic, Visual,
Extension in xml_native_reader.cc; the defaults are mj_defaultOption's and mjs_defaultSpec's).

Reads the root and these sections; writes the state's model_name, comp, elem_comp,
lengthrange_opt, opt, size, nkey_elem, statistic, znear and the plugin tables (plugin_instances,
plugins_declared), and notes what jaxsim ignores. plugin_ref resolves the plugin an actuator or
sensor names against those tables.
"""

from __future__ import annotations

import json
import re

import numpy as np

from jaxsim.mjcf import plugin, schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element

# the sections <mujoco> may hold
_TOP_LEVEL = {
  'compiler',
  'option',
  'size',
  'statistic',
  'visual',
  'default',
  'asset',
  'worldbody',
  'contact',
  'tendon',
  'equality',
  'actuator',
  'sensor',
  'custom',
  'keyframe',
  'extension',
  # MuJoCo's schema admits these directly in <mujoco>; its compiler ignores them
  # (tree.check_ignored_tree)
  'body',
  'frame',
}

_MEMORY = re.compile(r'\s*(-1|\+?([0-9]+)([KkMmGgTtPpEe]?))\s*')
_MEMORY_BITS = {'': 0, 'k': 10, 'm': 20, 'g': 30, 't': 40, 'p': 50, 'e': 60}


def read_root(s: CompileState, root: Element) -> None:
  """<mujoco>: its attributes (the model name; `_compilers`, set by attach.py) and which sections
  it may hold."""
  if root.tag != 'mujoco':
    raise root.error(f'root element must be <mujoco>, got <{root.tag}>')
  extra = set(root.attrs) - {'model', '_compilers'}
  if extra:
    raise root.error('unknown attribute of <mujoco>', attribute=sorted(extra)[0])
  s.model_name = root.attrs.get('model', 'MuJoCo Model')
  util.only(root, _TOP_LEVEL)


def read_extension(s: CompileState, e: Element) -> None:
  """One <extension>: the plugins it declares and their named instances."""
  plugin.read_extension(e, s.plugin_instances, s.plugins_declared)


def read_compiler(s: CompileState, e: Element):
  """One <compiler> and its <lengthrange>: merged into the state's comp and lengthrange_opt."""
  util.only(e, {'lengthrange'})
  schema.unique_children(e, {'lengthrange'})
  attrs = schema.read_attrs(e, schema.COMPILER)
  if attrs.get('coordinate', 0) == 1:
    raise e.error(
      "global coordinates are not supported (MuJoCo removed them); use 'local'",
      attribute='coordinate',
    )
  if 'eulerseq' in attrs:
    seq = attrs['eulerseq']
    if len(seq) != 3 or any(c not in 'xyzXYZ' for c in seq):
      raise e.error(f'eulerseq must be 3 characters from xyzXYZ, got {seq!r}', 'eulerseq')
  if 'assetdir' in attrs:
    attrs.setdefault('meshdir', attrs['assetdir'])
    attrs.setdefault('texturedir', attrs['assetdir'])
  s.comp.update(attrs)
  for lr in e.find('lengthrange'):
    util.only(lr, set())
    s.lengthrange_opt = schema.read_attrs(lr, schema.LENGTHRANGE, s.lengthrange_opt)


def read_attached_compilers(s: CompileState, root: Element) -> None:
  """Attached models' elements compile with their own angle, eulerseq and autolimits: attach.py
  lists them by file in the root's `_compilers`, on top of this model's settings."""
  for f, c in json.loads(root.attrs.get('_compilers', '{}')).items():
    s.elem_comp[f] = {**s.comp, **c}


def read_option(s: CompileState, e: Element):
  """One <option> and its <flag>: merged into the state's opt (flags as disable/enable bits)."""
  util.only(e, {'flag'})
  schema.unique_children(e, {'flag'})
  attrs = schema.read_attrs(e, schema.OPTION)
  if attrs.get('timestep', 1.0) <= 0:
    raise e.error('timestep must be positive', attribute='timestep')
  for key in ('iterations', 'ls_iterations'):
    if attrs.get(key, 1) < 0:
      raise e.error(f'{key} must be non-negative', attribute=key)
  groups = attrs.pop('actuatorgroupdisable', None)
  if groups is not None:
    groups = np.atleast_1d(np.asarray(groups, dtype=int))
    if ((groups < 0) | (groups > 30)).any():
      raise e.error('actuator groups must be in 0..30', attribute='actuatorgroupdisable')
    s.opt['disableactuator'] = int(np.bitwise_or.reduce(1 << groups, initial=0))
  s.opt.update(attrs)
  for f in e.find('flag'):
    util.only(f, set())
    flags = schema.read_attrs(f, schema.FLAG)
    for name, value in flags.items():
      if name in schema.DISABLE_FLAGS:
        bit = 1 << schema.DISABLE_FLAGS.index(name)
        if value == 0:
          s.opt['disableflags'] |= bit
        else:
          s.opt['disableflags'] &= ~bit
      else:
        bit = 1 << schema.ENABLE_FLAGS.index(name)
        if value == 1:
          s.opt['enableflags'] |= bit
        else:
          s.opt['enableflags'] &= ~bit


def note_option(s: CompileState) -> None:
  """Notes the options jaxsim reads but does not follow."""
  if s.opt['disableflags'] & (1 << schema.DISABLE_FLAGS.index('nativeccd')):
    s.note_unsupported('libccd for convex pairs (flag nativeccd="disable"); jaxsim uses native CCD')


def read_size(s: CompileState, e: Element) -> None:
  """One <size>: its attributes, checked, merged into the earlier ones."""
  given = schema.read_attrs(e, schema.SIZE)
  util.only(e, set())
  _check_size(e, given)
  s.size = {**s.size, **given}
  if 'nkey' in e.attrs:
    s.nkey_elem = e


def _check_size(e: Element, given: dict) -> None:
  """mjXReader::Size's checks of one <size> (`given`: its attributes as read): counts at least
  -1 (auto), mjData's nuserdata at least 0, and memory an unsigned byte count with an optional
  binary suffix."""
  for key in ('nconmax', 'nstack', 'njmax'):
    # read with ReadAttrInt, which refuses an empty value
    if key in e.attrs and key not in given:
      raise e.error('expected an integer, got an empty value', attribute=key)
  for key, value in given.items():
    if key == 'nuserdata' and value < 0:
      raise e.error('nuserdata must be >= 0', attribute=key)
    if key in ('nconmax', 'nstack', 'njmax') or key.startswith('nuser_'):
      if value < -1:
        raise e.error(f'{key} must be >= -1', attribute=key)
  if 'memory' in e.attrs:
    m = _MEMORY.fullmatch(e.attrs['memory'])
    big = m and m.group(2) and int(m.group(2)) << _MEMORY_BITS[m.group(3).lower()] >= 2**64
    if not m or big:
      raise e.error(
        'expected an unsigned integer with an optional suffix K, M, G, T, P or E, or -1',
        attribute='memory',
      )


def read_statistic(s: CompileState, e: Element) -> None:
  """One <statistic>: its attributes, merged into the earlier ones (mjXReader::Statistic)."""
  s.statistic = schema.read_attrs(e, schema.STATISTIC, s.statistic)
  util.only(e, set())
  if 'extent' in e.attrs and 'extent' in s.statistic and not s.statistic['extent'] > 0:
    raise e.error('extent must be strictly positive', attribute='extent')


def read_visual(s: CompileState, e: Element):
  """<visual> (mjXReader::Visual): its grammar is checked; only map/znear is kept, as the
  focal length of a camera without a sensor size."""
  util.only(e, set(schema.VISUAL))
  schema.unique_children(e, schema.VISUAL)
  for child in e.children:
    util.only(child, set())
    attrs = schema.read_attrs(child, schema.VISUAL[child.tag])
    # C's `<= 0`: nan passes, as in mjXReader
    if child.tag == 'global' and attrs.get('realtime', 1.0) <= 0:
      raise child.error('realtime must be greater than 0', attribute='realtime')
    if child.tag == 'map' and 'znear' in attrs:
      if attrs['znear'] <= 0:
        raise child.error('znear must be strictly positive', attribute='znear')
      s.znear = float(np.float32(attrs['znear']))  # mjVisual is single precision


def plugin_ref(
  s: CompileState, e: Element, a: dict, want: str, kind: str
) -> tuple[int | str, str, dict, Element]:
  """The plugin an actuator or sensor element uses (mjXReader, mjCModel): (instance, a named
  one's index or 'implicit'; plugin name; its <config>; the element holding it). A named
  instance wins over the element's own <config>; its plugin must be the element's `plugin`."""
  if 'plugin' not in a and 'instance' not in a:
    raise e.error(f"neither 'plugin' nor 'instance' is specified for {kind}", 'plugin')
  name = a.get('plugin')
  if name is not None and name not in s.plugins_declared:
    raise e.error(f"unrecognized plugin '{name}' (not declared in <extension>)", 'plugin')
  if 'instance' in a:
    if a['instance'] not in s.plugin_instances:
      raise e.error(f"unknown plugin instance '{a['instance']}'", attribute='instance')
    iname, config, inst = s.plugin_instances[a['instance']]
    if name is not None and name != iname:
      raise e.error(f"instance '{a['instance']}' is of plugin {iname}, not {name}", 'plugin')
    name, ref = iname, list(s.plugin_instances).index(a['instance'])
  else:
    ref, inst = 'implicit', e
  if name != want:
    if name in plugin.KEYS:
      raise e.error(f"plugin '{name}' does not support {kind}s", attribute='plugin')
    raise e.error(f'{kind} plugin {name} is not supported by jaxsim', attribute='plugin')
  if ref == 'implicit':
    config = plugin.read_config(e, name)
  return ref, name, config, inst

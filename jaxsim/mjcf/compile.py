"""Element tree -> compiled model arrays, in MuJoCo's element order (mjCModel::Compile).

Everything here is plain Python and NumPy. The result is a flat dict of MuJoCo-named arrays and
counts (`Compiled`), which `jaxsim._src.types.Model` wraps; quantities that need the dynamics
pipeline at qpos0 (MuJoCo's mj_setConst: tendon_length0, dof_invweight0, ...) are filled in later.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
from collections.abc import Callable

import numpy as np

from jaxsim._src.enums import MAXVAL, MINVAL
from jaxsim.errors import ModelError
from jaxsim.mjcf import frames, fuse, inertia, plugin, schema
from jaxsim.mjcf.attach import expand as expand_attachments
from jaxsim.mjcf.defaults import BUILTIN, Defaults
from jaxsim.mjcf.parse import Element
from jaxsim.mjcf.replicate import expand as expand_replicates

EPS = 1e-14
# Most numbers an array sized by the model (hfield samples, numeric data, activations, keyframe
# values) may hold: larger requests are refused with a ModelError rather than a MemoryError.
MAX_ARRAY = 10**8
# mj_defaultLROpt: the <compiler><lengthrange> settings
LENGTHRANGE_DEFAULTS = {
  'mode': 1,
  'useexisting': True,
  'uselimit': False,
  'accel': 20.0,
  'maxforce': 0.0,
  'timeconst': 1.0,
  'timestep': 0.01,
  'inttotal': 10.0,
  'interval': 2.0,
  'tolrange': 0.05,
}

# contact sensors: matching attributes of each side, data fields (mjtConDataField) with their
# sizes, reductions
CONTACT_SIDE1 = ('geom1', 'body1', 'subtree1', 'site')
CONTACT_SIDE2 = ('geom2', 'body2', 'subtree2')
RAYDATA = ('dist', 'dir', 'origin', 'point', 'normal', 'depth')  # mjtRayDataField
RAYDATA_SIZE = (1, 3, 3, 3, 3, 1)
CONDATA = ('found', 'force', 'torque', 'dist', 'pos', 'normal', 'tangent', 'linvel', 'angvel')
CONDATA_SIZE = (1, 3, 3, 1, 3, 3, 3, 3, 3)
CONTACT_REDUCE = ('none', 'mindist', 'maxforce', 'netforce')
OBJ = {'body': 1, 'xbody': 2, 'joint': 3, 'dof': 4, 'geom': 5, 'site': 6, 'camera': 7}
OBJ.update({'mesh': 10, 'hfield': 12, 'equality': 17, 'tendon': 18, 'actuator': 19, 'sensor': 20})
TRN_JOINT, TRN_JOINTINPARENT, TRN_SLIDERCRANK, TRN_TENDON, TRN_SITE, TRN_BODY = range(6)
TRN_UNDEFINED = 1000
WRAP_NONE, WRAP_JOINT, WRAP_PULLEY, WRAP_SITE, WRAP_SPHERE, WRAP_CYLINDER = range(6)
EQ_CONNECT, EQ_WELD, EQ_JOINT, EQ_TENDON = range(4)
NEQDATA = 12
JNT_FREE, JNT_BALL, JNT_SLIDE, JNT_HINGE = range(4)
DYN_NONE, DYN_INTEGRATOR, DYN_FILTER, DYN_FILTEREXACT, DYN_MUSCLE = range(5)
DYN_USER = 7
GAIN_MUSCLE, BIAS_MUSCLE = 2, 2
GAIN_USER, BIAS_USER = 6, 5  # mjGAIN_USER, mjBIAS_USER (MuJoCo 4 numbering)

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
  # MuJoCo's schema admits these directly in <mujoco>; its compiler ignores them (_ignored_tree)
  'body',
  'frame',
}


class Compiled(dict):
  """MuJoCo-named arrays and counts of one compiled model, plus names and meta information."""

  def __getattr__(self, name):
    try:
      return self[name]
    except KeyError:
      raise AttributeError(name) from None


_only = schema.only_children


_CUBE_FILES = ('fileright', 'fileleft', 'fileup', 'filedown', 'filefront', 'fileback')
_BODY_SCHEMA = {
  'body': schema.BODY,
  'frame': schema.FRAME,
  'inertial': schema.INERTIAL,
  'joint': schema.JOINT,
  'freejoint': schema.FREEJOINT,
  'geom': schema.GEOM,
  'site': schema.SITE,
  'camera': schema.CAMERA,
  'light': schema.LIGHT,
}


def _ignored_tree(elem: Element):
  """Checks the element and attribute names of a <body> or <frame> placed directly in <mujoco>
  against the schema, reading nothing: mjXReader's schema accepts them there and its compiler
  never looks at them."""
  table = _BODY_SCHEMA[elem.tag]
  for attr in elem.attrs:
    if attr not in table:
      raise elem.error(f'unknown attribute of <{elem.tag}>', attribute=attr)
  nested = elem.tag in ('body', 'frame')
  _only(elem, set(_BODY_SCHEMA) | {'replicate'} if nested else set())
  for child in elem.children:
    if child.tag != 'replicate':  # whose contents MuJoCo's schema check does not reach
      _ignored_tree(child)


_MEMORY = re.compile(r'\s*(-1|\+?([0-9]+)([KkMmGgTtPpEe]?))\s*')
_MEMORY_BITS = {'': 0, 'k': 10, 'm': 20, 'g': 30, 't': 40, 'p': 50, 'e': 60}


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


class _Compiler:
  """One compilation: holds the partial model while sections are read in MuJoCo's order."""

  def __init__(self, root: Element, directory: str, read: Callable[[str], bytes], model_file: str):
    self.root = root
    self.dir = directory
    self.read = read
    self.file = model_file
    self.defaults = Defaults()
    self.elem_comp: dict[str, dict] = {}
    self.comp = {
      'autolimits': True,
      'boundmass': 0.0,
      'boundinertia': 0.0,
      'settotalmass': -1.0,
      'balanceinertia': False,
      'angle': 1,
      'eulerseq': 'xyz',
      'meshdir': '',
      'texturedir': '',
      'inertiafromgeom': 2,
      'inertiagrouprange': np.array([0, 5]),
      'fitaabb': False,
      'alignfree': False,
      'discardvisual': False,
      'fusestatic': False,
      'strippath': False,
    }
    self.opt = {
      'timestep': 0.002,
      'impratio': 1.0,
      'tolerance': 1e-8,
      'ls_tolerance': 0.01,
      'noslip_tolerance': 1e-6,
      'ccd_tolerance': 1e-6,
      'sleep_tolerance': 1e-3,
      'gravity': np.array([0, 0, -9.81]),
      'wind': np.zeros(3),
      'magnetic': np.array([0, -0.5, 0]),
      'density': 0.0,
      'viscosity': 0.0,
      'o_margin': 0.0,
      'o_solref': np.array([0.02, 1.0]),
      'o_solimp': np.array([0.9, 0.95, 0.001, 0.5, 2.0]),
      'o_friction': np.array([1, 1, 0.005, 0.0001, 0.0001]),
      'integrator': 0,
      'cone': 0,
      'jacobian': 2,
      'solver': 2,
      'iterations': 100,
      'ls_iterations': 50,
      'noslip_iterations': 0,
      'ccd_iterations': 35,
      'sdf_iterations': 10,
      'sdf_initpoints': 40,
      'disableflags': 0,
      'enableflags': 0,
      'disableactuator': 0,
    }
    self.size = {}
    self.statistic = {}
    # name -> index maps, per namespace
    self.names: dict[str, dict[str, int]] = {}
    self.name_lists: dict[str, list[str]] = {}
    self.unsupported: list[str] = []
    self.lengthrange_opt: dict = dict(LENGTHRANGE_DEFAULTS)
    self.lengthrange_sim: list[tuple[int, str, int, str]] = []

  # ---------------------------------------------------------------- utilities

  def _comp_of(self, e: Element | None) -> dict:
    """The compiler settings an element compiles with: its model's (attach.py) or this one's."""
    if e is not None and e.file in self.elem_comp:
      return self.elem_comp[e.file]
    return self.comp

  def degree(self, e: Element | None = None) -> bool:
    return self._comp_of(e)['angle'] == 1

  def eulerseq(self, e: Element | None = None) -> str:
    return self._comp_of(e)['eulerseq']

  def autolimits(self, e: Element | None = None) -> bool:
    return self._comp_of(e)['autolimits']

  def register(self, ns: str, elem: Element, index: int, attribute='name'):
    name = elem.attrs.get(attribute, '')
    self.name_lists.setdefault(ns, []).append(name)
    if not name:
      return
    table = self.names.setdefault(ns, {})
    if name in table:
      raise elem.error(f'repeated name {name!r} in {ns} namespace', attribute=attribute)
    table[name] = index

  def lookup(self, ns: str, elem: Element, attribute: str, name: str | None = None) -> int:
    name = elem.attrs[attribute] if name is None else name
    table = self.names.get(ns, {})
    if name not in table:
      raise elem.error(f'unknown {ns} {name!r}', attribute=attribute)
    return table[name]

  def cls_of(self, elem: Element, inherited: str) -> str:
    name = elem.attrs.get('class', inherited)
    if name not in self.defaults.classes:
      raise elem.error(f'unknown default class {name!r}', attribute='class')
    return name

  def read_element(self, elem: Element, table: dict, kind: str, cls: str) -> dict:
    base = self.defaults.get(cls, kind, elem)
    return schema.read_attrs(elem, table, base)

  def _length_range(self, a: Element, index: int, attrs, trntype: int, trnid) -> None:
    """actuator lengthrange as MuJoCo's mj_setLengthRange decides it, short of simulating.

    Which actuators need one (lengthrange mode), keeping a given one (useexisting), copying the
    joint's or tendon's range (uselimit); the rest are listed in `lengthrange_sim` for the
    simulation-based search (jaxsim/lengthrange.py), which runs on the built Model.
    """
    lr = self.lengthrange_opt
    ismuscle = attrs.get('gaintype') == GAIN_MUSCLE or attrs.get('biastype') == BIAS_MUSCLE
    isuser = attrs.get('gaintype') == GAIN_USER or attrs.get('biastype') == BIAS_USER
    mode = int(lr['mode'])
    if mode == 0 or (mode == 1 and not ismuscle) or (mode == 2 and not ismuscle and not isuser):
      return
    rng = attrs['lengthrange']
    if lr['useexisting'] and rng[0] < rng[1]:
      return
    if lr['uselimit']:
      if trntype in (TRN_JOINT, TRN_JOINTINPARENT) and self.joints[trnid[0]]['limited_c']:
        attrs['lengthrange'] = np.array(self.joints[trnid[0]]['range_c'], dtype=float)
        return
      if trntype == TRN_TENDON and self.tendons[trnid[0]]['limited_c']:
        attrs['lengthrange'] = np.array(self.tendons[trnid[0]]['range'], dtype=float)
        return
    self.lengthrange_sim.append((index, a.file, a.line, a.tag))

  def note_unsupported(self, feature: str):
    if feature not in self.unsupported:
      self.unsupported.append(feature)

  # ---------------------------------------------------------------- top level

  def run(self) -> Compiled:
    root = self.root
    if root.tag != 'mujoco':
      raise root.error(f'root element must be <mujoco>, got <{root.tag}>')
    extra = set(root.attrs) - {'model', '_compilers'}
    if extra:
      raise root.error('unknown attribute of <mujoco>', attribute=sorted(extra)[0])
    self.model_name = root.attrs.get('model', 'MuJoCo Model')
    _only(root, _TOP_LEVEL)
    for e in root.children:
      if e.tag in ('body', 'frame'):
        _ignored_tree(e)
    self.plugin_instances: dict[str, tuple[str, dict, Element]] = {}
    self.implicit_actuator_plugins = 0
    self.plugins_declared: set[str] = set()
    for e in root.find('extension'):
      plugin.read_extension(e, self.plugin_instances, self.plugins_declared)
    for e in root.find('compiler'):
      self.read_compiler(e)
    # attached models' elements compile with their own angle, eulerseq and autolimits (attach.py)
    for f, c in json.loads(root.attrs.get('_compilers', '{}')).items():
      self.elem_comp[f] = {**self.comp, **c}
    for e in root.find('option'):
      self.read_option(e)
    if self.opt['disableflags'] & (1 << schema.DISABLE_FLAGS.index('nativeccd')):
      self.note_unsupported(
        'libccd for convex pairs (flag nativeccd="disable"); jaxsim uses native CCD'
      )
    for e in root.find('size'):
      given = schema.read_attrs(e, schema.SIZE)
      _only(e, set())
      _check_size(e, given)
      self.size = {**self.size, **given}
      if 'nkey' in e.attrs:
        self.nkey_elem = e
    for e in root.find('statistic'):
      self.statistic = schema.read_attrs(e, schema.STATISTIC, self.statistic)
      _only(e, set())
      if 'extent' in e.attrs and 'extent' in self.statistic and not self.statistic['extent'] > 0:
        raise e.error('extent must be strictly positive', attribute='extent')
    self.znear = 0.01  # visual/map znear
    for e in root.find('visual'):
      self.read_visual(e)
    # every top-level <default> is class 'main' again: MuJoCo merges its attributes into main,
    # and classes defined before a later one keep the main they copied
    for e in root.find('default'):
      # '_root': an attached model's default tree, its own root class (attach.py)
      parent = '' if '_root' in e.attrs else None
      self.defaults.read(e, parent, self.apply_actuator_shortcut)
    self.assets = {'mesh': [], 'hfield': [], 'material': [], 'texture': [], 'skin': []}
    for e in root.find('asset'):
      self.read_assets(e)
    self.bodies: list[dict] = []
    self.joints: list[dict] = []
    self.geoms: list[dict] = []
    self.sites: list[dict] = []
    self.cameras: list[dict] = []
    self.lights: list[dict] = []
    worlds = root.find('worldbody')
    world = {
      'id': 0,
      'parent': -1,
      'pos': np.zeros(3),
      'quat': np.array([1.0, 0, 0, 0]),
      'elem': worlds[0] if worlds else root,
      'mocap': False,
      'gravcomp': 0.0,
      'joints': [],
      'geoms': [],
      'sites': [],
      'children': [],
      'explicit_inertial': False,
      'inertial': None,
      'depth': 0,
    }
    self.bodies.append(world)
    self.register('body', Element('worldbody', {'name': 'world'}, [], self.file, 0), 0)
    for w in worlds:
      if w.attrs:
        raise w.error('the world body cannot have attributes', attribute=next(iter(w.attrs)))
      self.read_body_children(w, world, 'main', np.zeros(3), np.array([1.0, 0, 0, 0]))
    self.order_tree()
    self.compile_meshes(self.meshes_needing_hulls(root))
    self.check_texture_files()
    self.resolve_references()
    self.compile_bodies()
    self.contact = root.find('contact')
    self.compile_tendons(root.find('tendon'))
    self.compile_actuators(root.find('actuator'))
    self.compile_equality(root.find('equality'))
    self.compile_contact(root.find('contact'))
    self.compile_sensors(root.find('sensor'))
    self.compile_custom(root.find('custom'))
    self.compile_keyframes(root.find('keyframe'))
    return self.out

  # ---------------------------------------------------------------- compiler/option

  def read_compiler(self, e: Element):
    _only(e, {'lengthrange'})
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
    self.comp.update(attrs)
    for lr in e.find('lengthrange'):
      _only(lr, set())
      self.lengthrange_opt = schema.read_attrs(lr, schema.LENGTHRANGE, self.lengthrange_opt)

  def read_option(self, e: Element):
    _only(e, {'flag'})
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
      self.opt['disableactuator'] = int(np.bitwise_or.reduce(1 << groups, initial=0))
    self.opt.update(attrs)
    for f in e.find('flag'):
      _only(f, set())
      flags = schema.read_attrs(f, schema.FLAG)
      for name, value in flags.items():
        if name in schema.DISABLE_FLAGS:
          bit = 1 << schema.DISABLE_FLAGS.index(name)
          if value == 0:
            self.opt['disableflags'] |= bit
          else:
            self.opt['disableflags'] &= ~bit
        else:
          bit = 1 << schema.ENABLE_FLAGS.index(name)
          if value == 1:
            self.opt['enableflags'] |= bit
          else:
            self.opt['enableflags'] &= ~bit

  def read_visual(self, e: Element):
    """<visual> (mjXReader::Visual): its grammar is checked; only map/znear is kept, as the
    focal length of a camera without a sensor size."""
    _only(e, set(schema.VISUAL))
    schema.unique_children(e, schema.VISUAL)
    for child in e.children:
      _only(child, set())
      attrs = schema.read_attrs(child, schema.VISUAL[child.tag])
      # C's `<= 0`: nan passes, as in mjXReader
      if child.tag == 'global' and attrs.get('realtime', 1.0) <= 0:
        raise child.error('realtime must be greater than 0', attribute='realtime')
      if child.tag == 'map' and 'znear' in attrs:
        if attrs['znear'] <= 0:
          raise child.error('znear must be strictly positive', attribute='znear')
        self.znear = float(np.float32(attrs['znear']))  # mjVisual is single precision

  # ---------------------------------------------------------------- actuator shortcuts

  def apply_actuator_shortcut(self, elem: Element, base: dict) -> dict:
    """Reads an actuator element of any kind on top of `base` (mjXReader::OneActuator)."""
    tag = elem.tag
    table = schema.ACTUATORS[tag]
    general_only = {k: v for k, v in table.items() if k in schema.GENERAL}
    params = {k: v for k, v in table.items() if k not in schema.GENERAL}
    a = schema.read_attrs(
      Element(
        tag, {k: v for k, v in elem.attrs.items() if k in general_only}, [], elem.file, elem.line
      ),
      general_only,
      base,
    )
    for attr in elem.attrs:
      if attr not in table:
        raise elem.error(f'unknown attribute of <{tag}>', attribute=attr)
    p = {k: schema.convert(elem, k, elem.attrs[k], params[k]) for k in params if k in elem.attrs}
    a = copy.deepcopy(a)
    gain, bias, dyn = a['gainprm'], a['biasprm'], a['dynprm']

    def nonneg(key):
      if key in p and p[key] < 0:
        raise elem.error(f'{key} cannot be negative', attribute=key)

    # A shortcut sets the whole gain/bias/dynamics description: parameters it does not read are
    # reset to MuJoCo's general defaults rather than inherited (as mujoco 4.0.0 does).
    keep_dyn = tag == 'cylinder' or (
      tag in ('position', 'intvelocity') and a['dyntype'] == DYN_FILTEREXACT
    )
    damper_kv = p.get('kv', -gain[2] if a['gaintype'] == 1 else 0.0)
    if tag != 'muscle':
      gain[1:] = 0
      dyn[1:] = 0
      if not keep_dyn:
        dyn[0] = 1
        a['dyntype'] = DYN_NONE
    if tag == 'motor':
      gain[0] = 1
      bias[:] = 0
      a.update(dyntype=0, gaintype=0, biastype=0)
    elif tag in ('position', 'intvelocity'):
      kp = p.get('kp', gain[0])
      if 'kv' in p and 'dampratio' in p:
        raise elem.error('kv and dampratio cannot both be defined', attribute='dampratio')
      gain[0] = kp
      bias[0] = 0
      bias[3:] = 0
      bias[1] = -kp
      nonneg('kv')
      nonneg('dampratio')
      nonneg('timeconst')
      if 'kv' in p:
        bias[2] = -p['kv']
      if 'dampratio' in p:
        bias[2] = p['dampratio']
      if 'timeconst' in p:
        dyn[0] = 1 if p['timeconst'] == 0 else p['timeconst']
        a['dyntype'] = DYN_NONE if p['timeconst'] == 0 else DYN_FILTEREXACT
      a['inheritrange'] = p.get('inheritrange', a['inheritrange'])
      if a['inheritrange'] > 0 and (a['ctrlrange'][0] or a['ctrlrange'][1]):
        raise elem.error('ctrlrange and inheritrange cannot both be defined', 'inheritrange')
      a.update(gaintype=0, biastype=1)
      if tag == 'intvelocity':
        a['dyntype'] = DYN_INTEGRATOR
        if 'actlimited' in p:
          a['actlimited'] = p['actlimited']
        if 'actrange' in p:
          a['actrange'] = p['actrange']
        if a['inheritrange'] > 0 and (a['actrange'][0] or a['actrange'][1]):
          raise elem.error('actrange and inheritrange cannot both be defined', 'inheritrange')
    elif tag == 'velocity':
      kv = p.get('kv', gain[0])
      bias[:] = 0
      gain[0] = kv
      bias[2] = -kv
      a.update(dyntype=0, gaintype=0, biastype=1)
    elif tag == 'damper':
      kv = damper_kv
      gain[:] = 0
      bias[:] = 0
      gain[2] = -kv
      a.update(ctrllimited=1, dyntype=0, gaintype=1, biastype=0)
      if kv < 0:
        raise elem.error('damping coefficient cannot be negative', attribute='kv')
      if a['ctrlrange'][0] < 0 or a['ctrlrange'][1] < 0:
        raise elem.error('damper control range cannot be negative', attribute='ctrlrange')
    elif tag == 'cylinder':
      dyn[0] = p.get('timeconst', dyn[0])
      b = p.get('bias', bias[:3].copy())
      gain[0] = p.get('area', gain[0])
      if 'diameter' in p:
        gain[0] = math.pi / 4 * p['diameter'] ** 2
      bias[:3] = b
      bias[3:] = 0
      a.update(dyntype=DYN_FILTER, gaintype=0, biastype=1)
    elif tag == 'muscle':
      for i, (v, d) in enumerate(((1, 0.01), (0, 0.04))):
        if dyn[i] == v:
          dyn[i] = d
      muscle_defaults = ((1, 0.75), (0, 1.05), (0, -1), (0, 200), (0, 0.5), (0, 1.6), (0, 1.5))
      muscle_defaults += ((0, 1.3), (0, 1.2))
      for i, (v, d) in enumerate(muscle_defaults):
        if gain[i] == v:
          gain[i] = d
      tausmooth = p.get('tausmooth', dyn[2])
      if tausmooth < 0:
        raise elem.error('muscle tausmooth cannot be negative', attribute='tausmooth')
      dyn[2] = tausmooth
      tc = p.get('timeconst', np.array([-1.0, -1.0]))
      for i in range(2):
        if tc[i] >= 0:
          dyn[i] = tc[i]
      rng = p.get('range', np.array([-1.0, -1.0]))
      for i in range(2):
        if rng[i] >= 0:
          gain[i] = rng[i]
      for i, key in enumerate(('force', 'scale', 'lmin', 'lmax', 'vmax', 'fpmax', 'fvmax')):
        if p.get(key, -1) >= 0:
          gain[2 + i] = p[key]
      bias[:9] = gain[:9]
      a.update(dyntype=DYN_MUSCLE, gaintype=2, biastype=2)
    elif tag == 'adhesion':
      gain[0] = p.get('gain', gain[0])
      bias[:] = 0
      a.update(ctrllimited=1, gaintype=0, biastype=0)
      if gain[0] < 0:
        raise elem.error('adhesion gain cannot be negative', attribute='gain')
      if a['ctrlrange'][0] < 0 or a['ctrlrange'][1] < 0:
        raise elem.error('adhesion control range cannot be negative', attribute='ctrlrange')
    return a

  # ---------------------------------------------------------------- assets

  def read_assets(self, e: Element):
    allowed = {'mesh', 'hfield', 'material', 'texture', 'skin'}
    _only(e, allowed)
    for child in e.children:
      if child.tag == 'mesh':
        _only(child, set())
        cls = self.cls_of(child, 'main')
        attrs = self.read_element(child, schema.MESH, 'mesh', cls)
        self.assets['mesh'].append((child, attrs))
      elif child.tag == 'hfield':
        _only(child, set())
        self.assets['hfield'].append((child, schema.read_attrs(child, schema.HFIELD)))
      elif child.tag == 'material':
        _only(child, {'layer'})
        cls = self.cls_of(child, 'main')
        attrs = self.read_element(child, schema.MATERIAL, 'material', cls)
        self.assets['material'].append((child, attrs))
      elif child.tag == 'texture':
        _only(child, set())
        self.assets['texture'].append((child, schema.read_attrs(child, schema.TEXTURE)))
      elif child.tag == 'skin':
        _only(child, {'bone'})
        self.assets['skin'].append((child, schema.read_attrs(child, schema.SKIN)))
    for kind in ('material', 'texture'):
      for i, (elem, _) in enumerate(self.assets[kind]):
        if kind == 'texture' and 'name' not in elem.attrs and 'file' in elem.attrs:
          elem = Element(
            elem.tag, {**elem.attrs, 'name': _stem(elem.attrs['file'])}, [], elem.file, elem.line
          )
        if len(self.name_lists.get(kind, [])) <= i:
          self.register(kind, elem, i)

  def resolve_references(self):
    """Looks up the materials, textures and target bodies that elements name, as MuJoCo does.

    jaxsim does not render, but a name that refers to nothing is an error in MuJoCo
    (mjCModel::ResolveReferences, mjCCamera/mjCLight::ResolveReferences).
    """
    mesh_names = self.name_lists.get('mesh', [])
    mesh_material = {n: a.get('material', '') for n, (_, a) in zip(mesh_names, self.assets['mesh'])}
    for g in self.geoms:
      e = g['elem']
      if g.get('material'):
        self.lookup('material', e, 'material', g['material'])
      elif g.get('mesh') in self.names.get('mesh', {}):
        # A geom without a material of its own takes its mesh's material.
        name = mesh_material.get(g['mesh'], '')
        if name and name not in self.names.get('material', {}):
          raise e.error(f'unknown material {name!r} (the material of mesh {g["mesh"]!r})', 'mesh')
    for elem, attrs in self.assets['skin']:
      if attrs.get('material'):
        self.lookup('material', elem, 'material', attrs['material'])
      self.check_skin(elem, attrs)
    for s in self.sites:
      if s.get('material'):
        self.lookup('material', s['elem'], 'material', s['material'])
    for elem, attrs in self.assets['material']:
      layers = elem.find('layer')
      if attrs.get('texture'):
        if layers:
          raise layers[0].error('a material with a texture attribute cannot have <layer> elements')
        self.lookup('texture', elem, 'texture', attrs['texture'])
      for layer in layers:
        _only(layer, set())
        a = schema.read_attrs(layer, schema.LAYER)
        for req in ('role', 'texture'):
          if req not in a:
            raise layer.error('missing required attribute', attribute=req)
        self.lookup('texture', layer, 'texture', a['texture'])
    for c in self.cameras:
      c['targetbody'] = -1
      if c.get('target'):
        c['targetbody'] = self.lookup('body', c['elem'], 'target', c['target'])
    for lt in self.lights:
      if lt.get('target'):
        self.lookup('body', lt['elem'], 'target', lt['target'])
      if lt.get('texture'):
        self.lookup('texture', lt['elem'], 'texture', lt['texture'])

  def check_skin(self, elem: Element, attrs: dict) -> None:
    """mjCSkin::Compile's checks of a skin (kept for rendering only): bones name bodies, and an
    inline skin's faces and bone vertices index its vertex list, every vertex weighted."""
    bones = []
    for bone in elem.children:
      _only(bone, set())
      b = schema.read_attrs(bone, schema.BONE)
      for req in schema.BONE:
        if req not in b:
          raise bone.error('missing required attribute', attribute=req)
      if bone.attrs['body'] not in self.names.get('body', {}):
        raise bone.error(f'unknown body {bone.attrs["body"]!r} in skin', attribute='body')
      if len(b['vertid']) != len(b['vertweight']) or not len(b['vertid']):
        raise bone.error('vertid and vertweight must have same non-zero size', 'vertweight')
      bones.append((bone, b))
    if attrs.get('file'):
      return  # vertices and faces come from the file, which jaxsim does not read
    vert, face = attrs.get('vertex', ()), attrs.get('face', ())
    if not len(vert) or not len(face) or not bones:
      raise elem.error('missing data in skin: vertex, face and at least one bone')
    if len(vert) % 3 or len(face) % 3:
      key = 'vertex' if len(vert) % 3 else 'face'
      raise elem.error('skin vertex and face data must be multiples of 3', attribute=key)
    nvert = len(vert) // 3
    bad = [int(i) for i in face if not 0 <= i < nvert]
    if bad:
      raise elem.error(f'face vertex index {bad[0]} out of range in skin', attribute='face')
    weight = np.zeros(nvert, np.float32)
    for bone, b in bones:
      ids = np.asarray(b['vertid'])
      out = ids[(ids < 0) | (ids >= nvert)]
      if len(out):
        raise bone.error(f'vertid {int(out[0])} out of range in skin', attribute='vertid')
      np.add.at(weight, ids, np.asarray(b['vertweight'], np.float32))
    light = np.flatnonzero(weight <= MINVAL)
    if len(light):
      raise elem.error(f'vertex {int(light[0])} must have positive total weight in skin')

  def check_texture_files(self):
    """Opens the image files of textures that are not builtin, as mjCTexture::Compile does.

    jaxsim does not render, but a texture file MuJoCo cannot open or decode fails its compile.
    Only the PNG signature is checked, not the image.
    """
    for elem, attrs in self.assets['texture']:
      if attrs.get('builtin', 0):
        # a builtin texture ignores its files, but is drawn at its size (mjCTexture::Builtin*):
        # a 2D one needs a height too, a cube or skybox (the default type) only a width
        keys = ('width', 'height') if attrs.get('type', 1) == 0 else ('width',)
        for key in keys:
          if not attrs.get(key, 0) > 0:
            raise elem.error(f'invalid {key} of builtin texture', attribute=key)
        continue
      if not attrs.get('file'):
        if attrs.get('type', 1) == 0:
          raise elem.error('a 2D texture needs a file (or a builtin)', attribute='file')
        if not any(attrs.get(k) for k in _CUBE_FILES):
          raise elem.error('a cube or skybox texture needs a file, cube files or a builtin')
      for key in ('file',) + _CUBE_FILES:
        if not attrs.get(key):
          continue
        path = self.asset_path('texturedir', attrs[key])
        try:
          data = self.read(path)
        except OSError as err:
          raise elem.error(f'cannot read texture file {path!r}: {err.strerror}', key) from err
        kind = attrs.get('content_type') or {'.png': 'image/png', '.ktx': 'image/ktx'}.get(
          os.path.splitext(path)[1].lower(), ''
        )
        if kind not in ('image/png', 'image/ktx'):
          raise elem.error(f'unsupported content type {kind!r} of {path!r}', attribute=key)
        if kind == 'image/png' and data[:8] != b'\x89PNG\r\n\x1a\n':
          raise elem.error(f'{path!r} is not a PNG file', attribute=key)

  def asset_path(self, directory_key: str, filename: str) -> str:
    base = self.comp.get(directory_key) or ''
    if self.comp['strippath']:
      filename = os.path.basename(filename.replace('\\', '/'))
    if os.path.isabs(filename):
      return filename
    return os.path.normpath(os.path.join(self.dir, base, filename))

  def meshes_needing_hulls(self, root: Element) -> set[str]:
    """Names of meshes used by colliding mesh geoms; MuJoCo builds convex hulls only for those."""
    in_pairs = set()
    for sec in root.find('contact'):
      for p in sec.find('pair'):
        in_pairs.update(p.attrs.get(k) for k in ('geom1', 'geom2'))
    need = set()
    for g in self.geoms:
      if 'mesh' in g and g['type'] == 7:
        if g['contype'] or g['conaffinity'] or g['elem'].attrs.get('name') in in_pairs:
          need.add(g['mesh'])
    return need

  def compile_meshes(self, need_hull: set[str]):
    from jaxsim.mjcf import mesh as meshlib
    from jaxsim.mjcf import mesh_builtin

    self.meshes = []
    for i, (elem, attrs) in enumerate(self.assets['mesh']):
      name = attrs.get('name')
      if not name and 'file' in attrs:
        name = _stem(attrs['file'])
      self.register('mesh', Element('mesh', {'name': name or ''}, [], elem.file, elem.line), i)
      forced_inertia = None
      if 'builtin' in attrs:
        # mjs_makeMesh: the compiler makes the vertices (and faces) as user vertex data.
        for other in ('file', 'vertex'):
          if other in attrs:
            raise elem.error(
              f"Schema violation: at most one of 'builtin', '{other}' can be specified", other
            )
        if 'params' not in attrs or not len(attrs['params']):
          raise elem.error('required attribute missing', attribute='params')
        kind = {v: k for k, v in schema.ENUMS['meshbuiltin'].items()}[attrs['builtin']]
        vert, face, forced_inertia = mesh_builtin.make(elem, kind, attrs['params'])
        if face is None and 'face' in attrs:
          if len(attrs['face']) % 3:
            raise elem.error('face data must be triples of vertex indices', attribute='face')
          face = attrs['face'].reshape(-1, 3)
      elif 'file' in attrs:
        if 'vertex' in attrs:
          raise elem.error('a mesh cannot have both a file and vertex data', attribute='vertex')
        path = self.asset_path('meshdir', attrs['file'])
        try:
          data = self.read(path)
        except OSError as err:
          raise elem.error(f'cannot read mesh file {path!r}: {err.strerror}', 'file') from err
        try:
          vert, face = meshlib.read_mesh(data, path, attrs.get('content_type'))
        except ModelError as err:
          raise elem.error(f'bad mesh file {path!r}: {err.reason}', attribute='file') from err
      elif 'vertex' in attrs:
        v = attrs['vertex']
        if len(v) % 3 or len(v) < 12:
          raise elem.error('vertex data must be at least 4 points of 3 numbers', 'vertex')
        if 'face' in attrs and len(attrs['face']) % 3:
          raise elem.error('face data must be triples of vertex indices', attribute='face')
        vert = v.reshape(-1, 3)
        face = attrs['face'].reshape(-1, 3) if 'face' in attrs else None
      else:
        raise elem.error('a mesh needs a file or vertex data', attribute='file')
      if face is not None and len(face) and (face.min() < 0 or face.max() >= len(vert)):
        raise elem.error('face index out of range', attribute='face')
      inertia_mode = {v: k for k, v in schema.ENUMS['meshinertia'].items()}[attrs['inertia']]
      inertia_mode = forced_inertia or inertia_mode
      try:
        md = meshlib.compile_mesh(
          vert,
          face,
          scale=attrs['scale'],
          refpos=attrs.get('refpos', np.zeros(3)),
          refquat=attrs.get('refquat', np.array([1.0, 0, 0, 0])),
          inertia=inertia_mode,
          maxhullvert=attrs['maxhullvert'],
          name=name,
          need_hull=name in need_hull,
        )
      except ModelError as err:
        attr = 'file' if 'file' in attrs else 'params' if 'builtin' in attrs else 'vertex'
        raise elem.error(err.reason, attribute=attr) from err
      self.meshes.append(md)
    self.compile_hfields()

  def compile_hfields(self):
    self.hfields = []
    for i, (elem, a) in enumerate(self.assets['hfield']):
      # a nameless hfield is named by its file's stem, as a mesh or texture is (mjCHField)
      name = a.get('name') or (_stem(a['file']) if 'file' in a else '')
      self.register('hfield', Element('hfield', {'name': name}, [], elem.file, elem.line), i)
      if 'size' not in a:
        raise elem.error('missing required attribute', attribute='size')
      size = a['size']
      if (size <= 0).any():
        raise elem.error('hfield sizes must be positive', attribute='size')
      nrow, ncol = a.get('nrow', 0), a.get('ncol', 0)
      if 'file' in a:
        if 'elevation' in a or nrow or ncol:
          raise elem.error('an hfield file excludes nrow, ncol and elevation', attribute='file')
        path = self.asset_path('meshdir', a['file'])
        try:
          raw = self.read(path)
        except OSError as err:
          raise elem.error(f'cannot read hfield file {path!r}: {err.strerror}', 'file') from err
        content = a.get('content_type') or (
          'image/png' if path.lower().endswith('.png') else 'image/vnd.mujoco.hfield'
        )
        if content not in ('image/png', 'image/vnd.mujoco.hfield'):
          raise elem.error(f'unsupported content type: {content!r}', attribute='content_type')
        data, nrow, ncol = _read_hfield(elem, raw, path, content == 'image/png')
      else:
        if nrow <= 0 or ncol <= 0:
          raise elem.error('hfield nrow and ncol must be positive', attribute='nrow')
        if nrow * ncol > MAX_ARRAY:
          raise elem.error(
            f'hfield is too large: nrow*ncol = {nrow * ncol} exceeds {MAX_ARRAY:.0e} samples',
            attribute='nrow',
          )
        data = np.zeros(nrow * ncol)
        if 'elevation' in a:
          if len(a['elevation']) != nrow * ncol:
            raise elem.error(f'expected nrow*ncol = {nrow * ncol} values', attribute='elevation')
          data = a['elevation'].astype(float)
          lo, hi = data.min(), data.max()
          data = (data - lo) / (hi - lo) if hi > lo else np.zeros_like(data)
          # MuJoCo stores rows bottom-up: the first row of the attribute is the top (max y) row.
          data = data.reshape(nrow, ncol)[::-1].reshape(-1)
      if nrow < 2 or ncol < 2:
        raise elem.error(
          f'hfield dimensions must be at least 2 (nrow {nrow}, ncol {ncol})',
          attribute='nrow' if nrow < 2 else 'ncol',
        )
      self.hfields.append({'size': size, 'nrow': nrow, 'ncol': ncol, 'data': data})

  # ---------------------------------------------------------------- bodies

  def read_body_children(self, elem: Element, body: dict, cls: str, fpos, fquat, lax: bool = False):
    """Reads a body's (or frame's) children; `fpos, fquat` is the enclosing frame's pose.

    lax: inside a <frame> or <replicate> of the model's own XML, where MuJoCo 4's schema check
    does not reach: unknown attributes and children of leaf elements are ignored (and listed).
    """
    allowed = {'body', 'frame', 'inertial', 'joint', 'freejoint', 'geom', 'site', 'camera'}
    allowed |= {'light', 'replicate'}
    _only(elem, allowed)
    framed = elem.tag == 'frame'
    lax = lax or (framed and '_attach' not in elem.attrs)
    for child in elem.children:
      tag = child.tag
      if body['id'] == 0 and tag in ('inertial', 'joint', 'freejoint'):
        raise child.error(f'the world body cannot have <{tag}>')
      if tag == 'body':
        sub = self.lenient(child, schema.BODY, keep=True) if lax else child
        self.read_body(sub, body, cls, fpos, fquat, lax)
      elif tag == 'frame':
        _only(child, allowed)
        attrs = schema.read_attrs(self.lenient(child, schema.FRAME, True, ''), schema.FRAME)
        sub = attrs.get('childclass', cls)
        if sub not in self.defaults.classes:
          raise child.error(f'unknown default class {sub!r}', attribute='childclass')
        q = frames.resolve_orientation(attrs, self.degree(child), self.eulerseq(child), child)
        p, q = frames.frame_accum(fpos, fquat, attrs.get('pos', np.zeros(3)), q)
        self.read_body_children(child, body, sub, p, q, lax)
      elif tag == 'replicate':
        self.replicate(child, body, cls, fpos, fquat)
      elif lax:
        leaf = self.lenient(child, _BODY_SCHEMA[tag], keep=False)
        self.read_leaf(leaf, body, cls, fpos, fquat, framed)
      else:
        self.read_leaf(child, body, cls, fpos, fquat, framed)

  def lenient(
    self, elem: Element, table: dict, keep: bool, where: str = ' inside a <frame>'
  ) -> Element:
    """elem without the attributes MuJoCo ignores (those not in `table`; names starting with '_'
    are jaxsim's own markers, dropped silently) and, unless keep, without the children it ignores
    (all but a geom's plugin); each one listed as unsupported. `where` ends the note."""
    drop = sorted(k for k in elem.attrs if k not in table and not k.startswith('_'))
    kids = elem.children if keep else [c for c in elem.children if c.tag == 'plugin']
    for k in drop:
      self.note_unsupported(
        f'attribute {k!r} of <{elem.tag}> ({elem.file}:{elem.line}) is ignored, as MuJoCo does'
        + where
      )
    for c in elem.children:
      if c not in kids:
        self.note_unsupported(
          f'<{c.tag}> inside <{elem.tag}> ({c.file}:{c.line}) is ignored, as MuJoCo does' + where
        )
    attrs = {k: v for k, v in elem.attrs.items() if k in table}
    if len(attrs) == len(elem.attrs) and len(kids) == len(elem.children):
      return elem
    return Element(elem.tag, attrs, kids, elem.file, elem.line)

  def read_leaf(self, child: Element, body: dict, cls: str, fpos, fquat, framed: bool):
    """One <inertial>, <joint>, <freejoint>, <geom>, <site>, <camera> or <light> of a body."""
    tag = child.tag
    if tag == 'inertial':
      if framed:
        raise child.error('<inertial> cannot be inside a <frame>')
      if body['inertial'] is not None:
        raise child.error('a body can have only one <inertial>')
      _only(child, set())
      attrs = schema.read_attrs(child, schema.INERTIAL)
      for req in ('pos', 'mass'):
        if req not in attrs:
          raise child.error('missing required attribute', attribute=req)
      attrs['elem'] = child
      body['inertial'] = attrs
      body['explicit_inertial'] = True
    elif tag in ('joint', 'freejoint'):
      _only(child, set())
      if tag == 'freejoint':
        # Free joints take MuJoCo's built-in joint values, never a default class.
        attrs = schema.read_attrs(child, schema.FREEJOINT, copy.deepcopy(BUILTIN['joint']))
        attrs['type'] = JNT_FREE
      else:
        c = self.cls_of(child, cls)
        attrs = self.read_element(child, schema.JOINT, 'joint', c)
      attrs['elem'] = child
      attrs['frame'] = (fpos, fquat) if framed else None
      body['joints'].append(attrs)
    elif tag in ('geom', 'site', 'camera', 'light'):
      _only(child, {'plugin'} if tag == 'geom' else set())
      if tag == 'geom' and child.children:
        raise child.children[0].error('geom plugins are not supported by jaxsim')
      c = self.cls_of(child, cls)
      table = {
        'geom': schema.GEOM,
        'site': schema.SITE,
        'camera': schema.CAMERA,
        'light': schema.LIGHT,
      }[tag]
      attrs = self.read_element(child, table, tag, c)
      attrs['elem'] = child
      attrs['frame'] = (fpos, fquat) if framed else None
      body.setdefault(tag + 's', []).append(attrs)

  def replicate(self, elem: Element, body: dict, cls: str, fpos, fquat):
    """Expands `<replicate>`: `count` copies, each offset and rotated from the previous one.

    Names get this replicate's suffix, then those of the replicates around it (`_post`, set by
    _suffixed): MuJoCo expands the innermost replicate first. MuJoCo ignores attributes of
    `<replicate>` it does not know; jaxsim loads such a model too and lists them as unsupported.
    """
    post = elem.attrs.get('_post', '')
    attrs = schema.read_attrs(self.lenient(elem, schema.REPLICATE, True, ''), schema.REPLICATE)
    if 'count' not in attrs:
      raise elem.error('missing required attribute', attribute='count')
    count = attrs['count']
    if count <= 0:
      raise elem.error('count must be positive', attribute='count')
    sub = attrs.get('childclass', cls)
    if sub not in self.defaults.classes:
      raise elem.error(f'unknown default class {sub!r}', attribute='childclass')
    offset = attrs.get('offset', np.zeros(3))
    euler = attrs.get('euler', np.zeros(3))
    seq = self.eulerseq(elem)
    step = frames.resolve_orientation({'euler': euler}, self.degree(elem), seq, elem)
    pos, quat = np.zeros(3), np.array([1.0, 0, 0, 0])
    digits = len(str(count))
    for i in range(count):
      # The orientation is recomputed from i*euler rather than accumulated, as MuJoCo does.
      quat = frames.resolve_orientation({'euler': i * euler}, self.degree(elem), seq, elem)
      suffix = attrs.get('sep', '') + str(i).rjust(digits, '0') + post
      copy_elem = _suffixed(Element('frame', {}, elem.children, elem.file, elem.line), suffix)
      p, q = frames.frame_accum(fpos, fquat, pos, quat)
      self.read_body_children(copy_elem, body, sub, p, q)
      pos, _ = frames.frame_accum(pos, quat, offset, step)

  def read_body(self, elem: Element, parent: dict, cls: str, fpos, fquat, lax: bool = False):
    attrs = schema.read_attrs(elem, schema.BODY)
    sub = attrs.get('childclass', cls)
    if sub not in self.defaults.classes:
      raise elem.error(f'unknown default class {sub!r}', attribute='childclass')
    q = frames.resolve_orientation(attrs, self.degree(elem), self.eulerseq(elem), elem)
    p = attrs.get('pos', np.zeros(3))
    p, q = frames.frame_accum(fpos, fquat, p, q)
    body = {
      'id': -1,
      'elem': elem,
      'parent_ref': parent,
      'pos': p,
      'quat': q,
      'mocap': attrs.get('mocap', False),
      'gravcomp': attrs.get('gravcomp', 0.0),
      'joints': [],
      'geoms': [],
      'sites': [],
      'children': [],
      'explicit_inertial': False,
      'inertial': None,
      'depth': parent['depth'] + 1,
    }
    parent['children'].append(body)
    self.read_body_children(elem, body, sub, np.zeros(3), np.array([1.0, 0, 0, 0]), lax)

  def order_tree(self):
    """Assigns ids in depth-first order and registers names (MuJoCo's element order)."""
    world = self.bodies[0]
    order = []

    def visit(b):
      for c in b['children']:
        order.append(c)
        visit(c)

    visit(world)
    for i, b in enumerate(order, start=1):
      b['id'] = i
      b['parent'] = b['parent_ref']['id']
      self.bodies.append(b)
      self.register('body', b['elem'], i)
    for b in self.bodies:
      for j in b['joints']:
        j['body'] = b['id']
        j['id'] = len(self.joints)
        self.register('joint', j['elem'], len(self.joints))
        self.joints.append(j)
    for b in self.bodies:
      for g in b['geoms']:
        g['body'] = b['id']
        self.register('geom', g['elem'], len(self.geoms))
        self.geoms.append(g)
    for b in self.bodies:
      for s in b['sites']:
        s['body'] = b['id']
        self.register('site', s['elem'], len(self.sites))
        self.sites.append(s)
    for b in self.bodies:
      for c in b.get('cameras', []):
        c['body'] = b['id']
        self.register('camera', c['elem'], len(self.cameras))
        self.cameras.append(c)
      for lt in b.get('lights', []):
        lt['body'] = b['id']
        self.register('light', lt['elem'], len(self.lights))
        self.lights.append(lt)

  def compile_geom(self, g: dict):
    e = g['elem']
    typ = g['type']
    size = np.array(g['size'], dtype=np.float64)
    pos = np.array(g['pos'], dtype=np.float64)
    if typ == 8:
      raise e.error('SDF geoms are not supported by jaxsim', attribute='type')
    if g['condim'] not in (1, 3, 4, 6):
      raise e.error(f'condim must be 1, 3, 4 or 6, got {g["condim"]}', attribute='condim')
    if 'fromto' in g:
      if typ not in (3, 4, 5, 6):
        raise e.error('fromto requires a capsule, cylinder, box or ellipsoid', attribute='fromto')
      if np.any(pos != 0):  # mjCGeom: an explicit pos="0 0 0" is allowed
        raise e.error('both pos and fromto are given', attribute='fromto')
      pos, quat, size = _fromto(e, g['fromto'], typ, size)
    else:
      quat = frames.resolve_orientation(g, self.degree(e), self.eulerseq(e), e)
    shell = bool(g['shellinertia'])
    mesh = None
    mesh_volume = None
    if 'mesh' in g:
      mid = self.lookup('mesh', e, 'mesh', g['mesh'])
      mesh = self.meshes[mid]
      if typ == 7 and 'shellinertia' in e.attrs and shell:
        raise e.error('for mesh geoms, shell inertia is set on the mesh asset', 'shellinertia')
      from jaxsim.mjcf import mesh as meshlib

      info = meshlib.mesh_geom(
        mesh, typ, g['fitscale'], bool(self.comp['fitaabb']), pos=pos, quat=quat, size=size
      )
      pos, quat = info['pos'], info['quat']
      size = np.asarray(info['size'], dtype=np.float64)
      if typ == 7:
        g['dataid'] = mid
        g['aabb_c'] = info['aabb']
        mesh_volume = info
    elif typ == 7:
      raise e.error('a mesh geom needs a mesh', attribute='mesh')
    if typ == 1:
      if 'hfield' not in g:
        raise e.error('an hfield geom needs an hfield', attribute='hfield')
      hid = self.lookup('hfield', e, 'hfield', g['hfield'])
      hs = self.hfields[hid]['size']
      size = np.array([hs[0], hs[1], 0.25 * hs[2] + 0.5 * hs[3]])
      g['dataid'] = hid
    elif 'hfield' in g:
      raise e.error('only hfield geoms can reference an hfield', attribute='hfield')
    if typ == 0:
      if size[2] <= 0:
        raise e.error('plane size[2] (grid spacing) must be positive', attribute='size')
    elif typ not in (1, 7):
      nsize = {2: 1, 3: 2, 4: 3, 5: 2, 6: 3}[typ]
      for i in range(nsize):
        if np.isnan(size[i]):
          # a mesh-fitted size from a NaN inertia box (a flat shell mesh), as mjCGeom refuses
          raise e.error(f'size[{i}] is NaN for a {_GEOM_NAMES[typ]}', attribute='size')
        if size[i] <= 0:
          raise e.error(f'size[{i}] must be positive for a {_GEOM_NAMES[typ]}', attribute='size')
    if g['frame'] is not None:
      pos, quat = frames.frame_accum(*g['frame'], pos, quat)
    g['pos_c'], g['quat_c'], g['size_c'] = pos, quat, size
    # mass and inertia
    g['mass_c'] = 0.0
    g['inertia_c'] = np.zeros(3)
    if g.get('infer', False):
      if mesh_volume is not None:
        volume = mesh_volume['volume']
      else:
        with np.errstate(over='ignore', invalid='ignore'):
          volume = float(inertia.geom_volume(typ, size, shell))
      density = g['density']
      if 'mass' in g:
        if g['mass'] == 0:
          mass = 0.0
          density = 0.0
        elif volume > EPS:
          mass = g['mass']
          density = mass / volume
        else:
          mass = 0.0
      else:
        mass = density * volume
      if mass < 0 or density < 0:
        raise e.error(
          'mass, inertia or density are negative', attribute='mass' if 'mass' in g else 'density'
        )
      g['mass_c'] = mass
      with np.errstate(over='ignore', invalid='ignore'):
        if mass != 0:
          if mesh_volume is not None:
            g['inertia_c'] = inertia.box_inertia(mesh_volume['box'], mass)
          else:
            g['inertia_c'] = inertia.geom_inertia(typ, size, mass, shell)
      if not (math.isfinite(mass) and np.isfinite(g['inertia_c']).all()):
        attr = 'mesh' if mesh_volume is not None else 'size'
        if math.isfinite(volume) and not math.isfinite(mass):
          attr = 'mass' if 'mass' in g else 'density'
        raise e.error(
          'geom mass or inertia is not finite (too large sizes, mass or density)', attribute=attr
        )

  def compile_bodies(self):
    lo, hi = self.comp['inertiagrouprange']
    ifg = self.comp['inertiafromgeom']
    nq = nv = 0
    for b in self.bodies:
      bid = b['id']
      e = b['elem']
      # geoms
      for g in b['geoms']:
        g['infer'] = bid > 0 and (not b['explicit_inertial'] or ifg == 1) and lo <= g['group'] <= hi
        self.compile_geom(g)
      # inertial frame
      ipos, iquat, mass, inert = None, np.array([1.0, 0, 0, 0]), 0.0, np.zeros(3)
      if b['inertial'] is not None:
        ia = b['inertial']
        ie = ia['elem']
        ipos = ia['pos']
        mass = ia['mass']
        if mass < 0:
          raise ie.error('mass and inertia cannot be negative', attribute='mass')
        if 'diaginertia' in ia and (ia['diaginertia'] < 0).any():
          raise ie.error('mass and inertia cannot be negative', attribute='diaginertia')
        if 'fullinertia' in ia:
          if any(k in ia for k in frames.ORIENTATIONS):
            raise ie.error(
              'fullinertia and an inertial orientation cannot both be given',
              attribute='fullinertia',
            )
          if 'diaginertia' in ia:
            raise ie.error('fullinertia and diaginertia cannot both be given', 'fullinertia')
          fi = ia['fullinertia']
          tensor = np.array([[fi[0], fi[3], fi[4]], [fi[3], fi[1], fi[5]], [fi[4], fi[5], fi[2]]])
          w, iquat = inertia.principal_frame(tensor)
          if w.min() < 0 and w.min() < -1e-12 * max(1.0, w.max()):
            raise ie.error('fullinertia is not positive semi-definite', attribute='fullinertia')
          inert = np.maximum(w, 0.0)
        else:
          # mjsBody's inertia defaults to zero: an <inertial> with a mass only is a point mass.
          inert = np.array(ia.get('diaginertia', np.zeros(3)))
          iquat = frames.resolve_orientation(ia, self.degree(ie), self.eulerseq(ie), ie)
      if bid > 0 and (ifg == 1 or (ipos is None and ifg == 2)):
        sel = [g for g in b['geoms'] if lo <= g['group'] <= hi and g['mass_c'] > EPS]
        if len(sel) == 1:
          g = sel[0]
          ipos, iquat, mass, inert = g['pos_c'], g['quat_c'], g['mass_c'], g['inertia_c']
        elif len(sel) > 1:
          with np.errstate(over='ignore', invalid='ignore'):
            mass = sum(g['mass_c'] for g in sel)
            com = sum(g['mass_c'] * g['pos_c'] for g in sel) / mass
            tensor = np.zeros((3, 3))
            for g in sel:
              r = frames.quat_to_mat(g['quat_c'])
              tensor += r @ np.diag(g['inertia_c']) @ r.T
              d = g['pos_c'] - com
              tensor += g['mass_c'] * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
          if not (math.isfinite(mass) and np.isfinite(tensor).all()):
            raise e.error(
              'body mass or inertia from its geoms is not finite (too large sizes or positions)'
            )
          w, iquat = inertia.principal_frame(tensor)
          ipos, inert = com, w
      if ipos is None:
        # MuJoCo copies the body's own frame (relative to its parent) into an undefined inertial
        # frame; massless bodies thus get ipos = pos, which shows in xipos.
        ipos, iquat = np.array(b['pos'], dtype=float), np.array(b['quat'], dtype=float)
      if bid > 0:
        mass = max(mass, self.comp['boundmass'])
        inert = np.maximum(inert, self.comp['boundinertia'])
        where = b['inertial']['elem'] if b['inertial'] is not None else e
        if not (math.isfinite(mass) and np.isfinite(inert).all() and np.isfinite(iquat).all()):
          raise where.error('mass or inertia is not finite (overflow)')
        if mass < 0 or (inert < 0).any():
          raise where.error('mass and inertia cannot be negative')
        a, bb, c = inert
        tol = 1e-12 * max(1.0, a + bb + c)
        if a + bb + tol < c or a + c + tol < bb or bb + c + tol < a:
          if self.comp['balanceinertia']:
            inert = np.full(3, (a + bb + c) / 3)
          else:
            raise where.error("inertia must satisfy A + B >= C; use 'balanceinertia' to fix")
      b['ipos'], b['iquat'], b['mass'], b['inertia'] = (
        ipos,
        frames.normvec(iquat),
        mass,
        inert,
      )
      self.align_free(b)
      # joints
      b['dofnum'] = 0
      has_ball = False
      for j in b['joints']:
        je = j['elem']
        typ = j['type']
        if typ == JNT_FREE:
          j['limited'] = 0
        elif j['limited'] == 2 and not self.autolimits(je) and (j['range'] != 0).any():
          raise je.error(
            "joint has 'range' but not 'limited'; set limited or autolimits", attribute='range'
          )
        rng = np.array(j['range'], dtype=np.float64)
        lim = j['limited'] == 1 or (j['limited'] == 2 and rng[0] < rng[1])
        if j['limited'] == 2 and typ == JNT_BALL:
          lim = rng[0] < rng[1] or (rng != 0).any()
        if lim:
          if rng[0] >= rng[1] and typ != JNT_BALL:
            raise je.error('range[0] must be smaller than range[1]', attribute='range')
          if typ == JNT_BALL and rng[0] != 0:
            raise je.error('range[0] must be 0 for a ball joint', attribute='range')
          if self.degree(je) and typ in (JNT_HINGE, JNT_BALL):
            rng = rng * math.pi / 180.0
        j['limited_c'] = int(lim)
        sd = j.get('springdamper', np.zeros(2))
        if (sd != 0).any() and (sd <= 0).any():
          raise je.error('springdamper values must be positive', attribute='springdamper')
        afl = j['actuatorfrclimited']
        afr = np.array(j['actuatorfrcrange'])
        if typ in (JNT_FREE, JNT_BALL):
          afl = 0
        elif afl == 2 and not self.autolimits(je) and (afr != 0).any():
          raise je.error(
            "joint has 'actuatorfrcrange' but not 'actuatorfrclimited'",
            attribute='actuatorfrcrange',
          )
        alim = afl == 1 or (afl == 2 and afr[0] < afr[1])
        if alim and afr[0] >= afr[1]:
          raise je.error('actuatorfrcrange[0] must be smaller than [1]', 'actuatorfrcrange')
        j['actfrclimited_c'] = int(alim)
        j['range_c'] = rng
        axis = np.array(j['axis'], dtype=np.float64)
        pos = np.array(j['pos'], dtype=np.float64)
        if typ in (JNT_FREE, JNT_BALL):
          axis = np.array([0.0, 0, 1])
        elif j['frame'] is not None:
          axis = frames.quat_rotate(j['frame'][1], axis)
        n = np.linalg.norm(axis)
        if n < EPS:
          raise je.error('joint axis is too small', attribute='axis')
        axis = axis / n
        if typ == JNT_FREE:
          pos = np.zeros(3)
        elif j['frame'] is not None:
          pos = j['frame'][0] + frames.quat_rotate(j['frame'][1], pos)
        j['axis_c'], j['pos_c'] = axis, pos
        ref, springref = j['ref'], j['springref']
        if typ == JNT_HINGE and self.degree(je):
          ref, springref = ref * math.pi / 180, springref * math.pi / 180
        j['ref_c'], j['springref_c'] = ref, springref
        if has_ball and typ in (JNT_BALL, JNT_HINGE):
          raise je.error('a ball joint cannot be followed by a rotational joint in the same body')
        has_ball |= typ == JNT_BALL
        j['qposadr'], j['dofadr'] = nq, nv
        ndof = {JNT_FREE: 6, JNT_BALL: 3}.get(typ, 1)
        nq += {JNT_FREE: 7, JNT_BALL: 4}.get(typ, 1)
        nv += ndof
        b['dofnum'] += ndof
        if typ == JNT_FREE and b['parent'] != 0:
          raise je.error('free joint can only be used on top level (in a child of the world)')
      if b['dofnum'] > 6:
        raise e.error('a body cannot have more than 6 degrees of freedom')
      if b['mocap'] and (b['joints'] or b['parent'] != 0):
        raise e.error('a mocap body must be a fixed child of the world', attribute='mocap')
      # global pose at qpos0 without joint transforms, as MuJoCo's compiler computes it
      if bid > 0:
        par = self.bodies[b['parent']]
        b['xpos0'] = par['xpos0'] + frames.quat_rotate(par['xquat0'], b['pos'])
        b['xquat0'] = frames.quat_mul(par['xquat0'], b['quat'])
      else:
        b['xpos0'], b['xquat0'] = np.zeros(3), np.array([1.0, 0, 0, 0])
      for s in b['sites']:
        self.compile_site(s)
      for c in b.get('cameras', []):
        self.compile_frame_only(c)
      for lt in b.get('lights', []):
        lt['quat'] = lt.get('quat', np.array([1.0, 0, 0, 0]))
        self.compile_frame_only(lt, orient=False)
      self._align_children(b)
    self.nq, self.nv = nq, nv
    # settotalmass
    total = self.comp['settotalmass']
    if total > 0:
      cur = sum(b['mass'] for b in self.bodies[1:])
      if cur > 0:
        scale = total / cur
        for b in self.bodies[1:]:
          b['mass'] *= scale
          b['inertia'] = b['inertia'] * scale
    for b in self.bodies[1:]:
      if b['joints'] and not _has_mass(b):
        raise b['elem'].error(
          'mass and inertia of moving bodies must be larger than 1e-15 (in the body or a '
          'static child welded to it)'
        )
    if self.comp['fusestatic']:
      fuse.fuse_static(self)
    if self.comp['discardvisual']:
      fuse.discard_visual(self)
    self.build_body_arrays()

  def align_free(self, b: dict):
    """Free-joint alignment (mjCBody::Compile): a childless body whose only joint is a free
    joint with align="true" (or "auto" under compiler alignfree) moves its frame to its inertial
    frame; its geoms, sites, cameras and lights keep their world placement."""
    js = b['joints']
    if len(js) != 1 or js[0]['type'] != JNT_FREE or b['children']:
      return
    align = js[0].get('align', 2)
    if not (align == 1 or (align == 2 and self.comp['alignfree'])):
      return
    ipos, iquat = b['ipos'], b['iquat']
    b['pos'], b['quat'] = frames.frame_accum(np.asarray(b['pos'], float), b['quat'], ipos, iquat)
    inv_quat = frames.quat_conj(iquat)
    inv_pos = -frames.quat_rotate(inv_quat, ipos)
    b['ipos'], b['iquat'] = np.zeros(3), np.array([1.0, 0, 0, 0])
    for g in b['geoms']:
      g['pos_c'], g['quat_c'] = frames.frame_accum(inv_pos, inv_quat, g['pos_c'], g['quat_c'])
    b['align_inv'] = (inv_pos, inv_quat)  # sites, cameras and lights: after their compile

  def _align_children(self, b: dict):
    """Phase 2 of align_free: the body's sites, cameras and lights."""
    if 'align_inv' not in b:
      return
    inv_pos, inv_quat = b['align_inv']
    for obj in list(b['sites']) + list(b.get('cameras', [])):
      obj['pos_c'], obj['quat_c'] = frames.frame_accum(
        inv_pos, inv_quat, obj['pos_c'], obj['quat_c']
      )
    for lt in b.get('lights', []):
      lt['pos_c'] = frames.frame_accum(inv_pos, inv_quat, lt['pos_c'], np.array([1.0, 0, 0, 0]))[0]
      lt['dir'] = frames.quat_rotate(inv_quat, np.asarray(lt['dir'], float))

  def compile_site(self, s: dict):
    e = s['elem']
    typ = s['type']
    if typ in (0, 1, 7, 8):
      raise e.error('sites cannot be planes, hfields or meshes', attribute='type')
    size = np.array(s['size'], dtype=np.float64)
    if 'fromto' in s:
      if typ not in (3, 4, 5, 6):
        raise e.error('fromto requires a capsule, cylinder, box or ellipsoid', attribute='fromto')
      if np.any(np.asarray(s['pos']) != 0):
        raise e.error('both pos and fromto are given', attribute='fromto')
      pos, quat, size = _fromto(e, s['fromto'], typ, size)
    else:
      pos = np.array(s['pos'], dtype=np.float64)
      quat = frames.resolve_orientation(s, self.degree(e), self.eulerseq(e), e)
    nsize = {2: 1, 3: 2, 4: 3, 5: 2, 6: 3}[typ]
    for i in range(nsize):
      if size[i] <= 0:
        raise e.error(f'size[{i}] must be positive', attribute='size')
    if s['frame'] is not None:
      pos, quat = frames.frame_accum(*s['frame'], pos, quat)
    s['pos_c'], s['quat_c'], s['size_c'] = pos, quat, size

  def compile_frame_only(self, obj: dict, orient=True):
    e = obj['elem']
    pos = np.array(obj['pos'], dtype=np.float64)
    quat = (
      frames.resolve_orientation(obj, self.degree(e), self.eulerseq(e), e)
      if orient
      else np.array([1.0, 0, 0, 0])
    )
    if obj['frame'] is not None:
      pos, quat = frames.frame_accum(*obj['frame'], pos, quat)
    obj['pos_c'], obj['quat_c'] = pos, quat

  def build_body_arrays(self):
    out = Compiled()
    self.out = out
    bodies, joints, geoms, sites = self.bodies, self.joints, self.geoms, self.sites
    nbody = len(bodies)
    out.update(
      nbody=nbody,
      njnt=len(joints),
      ngeom=len(geoms),
      nsite=len(sites),
      ncam=len(self.cameras),
      nlight=len(self.lights),
      nq=self.nq,
      nv=self.nv,
      nmesh=len(self.meshes),
    )
    parent = np.array([b.get('parent', -1) for b in bodies])
    parent[0] = 0
    out['body_parentid'] = parent
    rootid = np.zeros(nbody, int)
    weldid = np.zeros(nbody, int)
    for b in bodies[1:]:
      i = b['id']
      p = b['parent']
      rootid[i] = i if p == 0 else rootid[p]
      weldid[i] = i if (b['joints'] or b['mocap']) else weldid[p]
    out['body_rootid'] = rootid
    out['body_weldid'] = weldid
    mocapid = -np.ones(nbody, int)
    nmocap = 0
    for b in bodies:
      if b['mocap']:
        mocapid[b['id']] = nmocap
        nmocap += 1
    out['body_mocapid'] = mocapid
    out['nmocap'] = nmocap
    out['body_jntnum'] = np.array([len(b['joints']) for b in bodies])
    out['body_jntadr'] = _adr(out['body_jntnum'], empty=-1)
    out['body_dofnum'] = np.array([b.get('dofnum', 0) for b in bodies])
    out['body_dofadr'] = _adr(out['body_dofnum'], empty=-1)
    out['body_geomnum'] = np.array([len(b['geoms']) for b in bodies])
    out['body_geomadr'] = _adr(out['body_geomnum'], empty=-1)
    out['body_pos'] = np.array([b['pos'] for b in bodies])
    out['body_quat'] = np.array([frames.normvec(b['quat']) for b in bodies])
    out['body_ipos'] = np.array([b.get('ipos', np.zeros(3)) for b in bodies])
    out['body_iquat'] = np.array([b.get('iquat', np.array([1.0, 0, 0, 0])) for b in bodies])
    out['body_mass'] = np.array([b.get('mass', 0.0) for b in bodies])
    out['body_inertia'] = np.array([b.get('inertia', np.zeros(3)) for b in bodies])
    out['body_gravcomp'] = np.array([b['gravcomp'] for b in bodies])
    sub = out['body_mass'].copy()
    for i in range(nbody - 1, 0, -1):
      sub[parent[i]] += sub[i]
    out['body_subtreemass'] = sub
    out['body_depth'] = np.array([b['depth'] for b in bodies])
    # joints
    out['jnt_type'] = np.array([j['type'] for j in joints], dtype=int)
    out['jnt_qposadr'] = np.array([j['qposadr'] for j in joints], dtype=int)
    out['jnt_dofadr'] = np.array([j['dofadr'] for j in joints], dtype=int)
    out['jnt_bodyid'] = np.array([j['body'] for j in joints], dtype=int)
    out['jnt_group'] = np.array([j.get('group', 0) for j in joints], dtype=int)
    out['jnt_limited'] = np.array([j['limited_c'] for j in joints], dtype=int)
    out['jnt_actfrclimited'] = np.array([j['actfrclimited_c'] for j in joints], dtype=int)
    out['jnt_actgravcomp'] = np.array([int(j['actuatorgravcomp']) for j in joints], dtype=int)
    out['jnt_solref'] = _rows([j['solreflimit'] for j in joints], 2)
    out['jnt_solimp'] = _rows([j['solimplimit'] for j in joints], 5)
    out['jnt_pos'] = _rows([j['pos_c'] for j in joints], 3)
    out['jnt_axis'] = _rows([j['axis_c'] for j in joints], 3)
    out['jnt_range'] = _rows([j['range_c'] for j in joints], 2)
    out['jnt_actfrcrange'] = _rows([j['actuatorfrcrange'] for j in joints], 2)
    out['jnt_margin'] = np.array([j['margin'] for j in joints], dtype=float)
    stiff = [
      (np.array([j['springdamper'][0], 0, 0]) if _has_sd(j) else j['stiffness']) for j in joints
    ]
    damp = [
      (np.array([j['springdamper'][1], 0, 0]) if _has_sd(j) else j['damping']) for j in joints
    ]
    out['jnt_stiffness'] = np.array([s[0] for s in stiff], dtype=float)
    out['jnt_stiffnesspoly'] = _rows([s[1:] for s in stiff], 2)
    # springdamper: stiffness and damping from time constant and damping ratio need the mass
    # matrix (mj_setConst); recorded here, applied when constants are set.
    out['jnt_springdamper'] = _rows([j.get('springdamper', np.zeros(2)) for j in joints], 2)
    qpos0, qpos_spring = [], []
    for j in joints:
      b = bodies[j['body']]
      if j['type'] == JNT_FREE:
        pose = np.concatenate([b['xpos0'], frames.normvec(b['xquat0'])])
        qpos0.append(pose)
        qpos_spring.append(pose)
      elif j['type'] == JNT_BALL:
        qpos0.append(np.array([1.0, 0, 0, 0]))
        qpos_spring.append(np.array([1.0, 0, 0, 0]))
      else:
        qpos0.append(np.array([j['ref_c']]))
        qpos_spring.append(np.array([j['springref_c']]))
    out['qpos0'] = np.concatenate(qpos0) if qpos0 else np.zeros(0)
    out['qpos_spring'] = np.concatenate(qpos_spring) if qpos_spring else np.zeros(0)
    # dofs
    dof_body, dof_jnt, dof_parent = [], [], []
    last_dof = -np.ones(nbody, int)  # last dof of each body's subtree path
    for b in bodies:
      i = b['id']
      prev = last_dof[b['parent']] if i > 0 else -1
      for j in b['joints']:
        nd = {JNT_FREE: 6, JNT_BALL: 3}.get(j['type'], 1)
        for _ in range(nd):
          dof_body.append(i)
          dof_jnt.append(j['id'])
          dof_parent.append(prev)
          prev = len(dof_body) - 1
      last_dof[i] = prev
    out['dof_bodyid'] = np.array(dof_body, dtype=int)
    out['dof_jntid'] = np.array(dof_jnt, dtype=int)
    out['dof_parentid'] = np.array(dof_parent, dtype=int)
    per_dof = lambda f: np.array([f(joints[k]) for k in dof_jnt], dtype=float)  # noqa: E731
    out['dof_armature'] = per_dof(lambda j: j['armature'])
    out['dof_damping'] = per_dof(lambda j: damp[j['id']][0])
    out['dof_dampingpoly'] = _rows([damp[k][1:] for k in dof_jnt], 2)
    out['dof_frictionloss'] = per_dof(lambda j: j['frictionloss'])
    out['dof_solref'] = _rows([joints[k]['solreffriction'] for k in dof_jnt], 2)
    out['dof_solimp'] = _rows([joints[k]['solimpfriction'] for k in dof_jnt], 5)
    # geoms
    out['geom_type'] = np.array([g['type'] for g in geoms], dtype=int)
    out['geom_contype'] = np.array([g['contype'] for g in geoms], dtype=int)
    out['geom_conaffinity'] = np.array([g['conaffinity'] for g in geoms], dtype=int)
    out['geom_condim'] = np.array([g['condim'] for g in geoms], dtype=int)
    out['geom_bodyid'] = np.array([g['body'] for g in geoms], dtype=int)
    out['geom_dataid'] = np.array([g.get('dataid', -1) for g in geoms], dtype=int)
    out['geom_group'] = np.array([g['group'] for g in geoms], dtype=int)
    out['geom_priority'] = np.array([g['priority'] for g in geoms], dtype=int)
    out['geom_size'] = _rows([g['size_c'] for g in geoms], 3)
    out['geom_pos'] = _rows([g['pos_c'] for g in geoms], 3)
    out['geom_quat'] = _rows([frames.normvec(g['quat_c']) for g in geoms], 4)
    out['geom_friction'] = _rows([g['friction'] for g in geoms], 3)
    out['geom_solmix'] = np.array([g['solmix'] for g in geoms], dtype=float)
    out['geom_solref'] = _rows([g['solref'] for g in geoms], 2)
    out['geom_solimp'] = _rows([g['solimp'] for g in geoms], 5)
    out['geom_margin'] = np.array([g['margin'] for g in geoms], dtype=float)
    out['geom_gap'] = np.array([g['gap'] for g in geoms], dtype=float)
    out['geom_rgba'] = _rows([g['rgba'] for g in geoms], 4)
    out['geom_rbound'] = np.array([_rbound(g, self) for g in geoms], dtype=float)
    out['geom_aabb'] = _rows([_aabb(g, self) for g in geoms], 6)
    out['geom_fluidshape'] = np.array([g['fluidshape'] for g in geoms], dtype=int)
    out['geom_fluidcoef'] = _rows([g['fluidcoef'] for g in geoms], 5)
    out['geom_surfacevel'] = _rows([g['surfacevel'] for g in geoms], 6)
    out['geom_adhesion'] = np.array([g['adhesion'] for g in geoms], dtype=float)
    for g in geoms:
      if g['type'] == 0 and weldid[g['body']] != 0 and not bodies[weldid[g['body']]]['mocap']:
        raise g['elem'].error('planes are only allowed in static bodies', attribute='type')
    # sites
    out['site_type'] = np.array([s['type'] for s in sites], dtype=int)
    out['site_bodyid'] = np.array([s['body'] for s in sites], dtype=int)
    out['site_group'] = np.array([s['group'] for s in sites], dtype=int)
    out['site_size'] = _rows([s['size_c'] for s in sites], 3)
    out['site_pos'] = _rows([s['pos_c'] for s in sites], 3)
    out['site_quat'] = _rows([frames.normvec(s['quat_c']) for s in sites], 4)
    out['site_rgba'] = _rows([s['rgba'] for s in sites], 4)
    # cameras and lights (kept for rendering)
    out['cam_bodyid'] = np.array([c['body'] for c in self.cameras], dtype=int)
    out['cam_mode'] = np.array([c['mode'] for c in self.cameras], dtype=int)
    out['cam_targetbodyid'] = np.array([c.get('targetbody', -1) for c in self.cameras], dtype=int)
    out['cam_pos'] = _rows([c['pos_c'] for c in self.cameras], 3)
    out['cam_quat'] = _rows([c['quat_c'] for c in self.cameras], 4)
    lens = [_camera_lens(c, self.znear) for c in self.cameras]
    out['cam_fovy'] = np.array([x[0] for x in lens], dtype=float)
    out['cam_resolution'] = np.array([x[1] for x in lens], dtype=np.int32).reshape(-1, 2)
    out['cam_sensorsize'] = _rows([x[2] for x in lens], 2)
    out['cam_intrinsic'] = _rows([x[3] for x in lens], 4)
    out['light_bodyid'] = np.array([lt['body'] for lt in self.lights], dtype=int)
    out['light_pos'] = _rows([lt['pos_c'] for lt in self.lights], 3)
    out['light_dir'] = _rows([lt['dir'] for lt in self.lights], 3)
    out['body_sameframe'] = _sameframe(out['body_ipos'], out['body_iquat'])
    for kind in ('geom', 'site'):
      body = out[f'{kind}_bodyid']
      out[f'{kind}_sameframe'] = _sameframe(
        out[f'{kind}_pos'], out[f'{kind}_quat'], out['body_ipos'][body], out['body_iquat'][body]
      )
    # meshes
    self.build_mesh_arrays(out)

  def build_mesh_arrays(self, out):
    ms = self.meshes
    out['mesh_vertnum'] = np.array([len(m.vert) for m in ms], dtype=int)
    out['mesh_vertadr'] = _adr(out['mesh_vertnum'])
    out['mesh_facenum'] = np.array([len(m.face) for m in ms], dtype=int)
    out['mesh_faceadr'] = _adr(out['mesh_facenum'])
    out['mesh_vert'] = np.concatenate([m.vert for m in ms]) if ms else np.zeros((0, 3))
    out['mesh_face'] = (
      np.concatenate([m.face for m in ms]).astype(int) if ms else np.zeros((0, 3), int)
    )
    out['mesh_pos'] = _rows([m.pos for m in ms], 3)
    out['mesh_quat'] = _rows([m.quat for m in ms], 4)
    out['mesh_data'] = tuple(ms)
    from jaxsim.mjcf import polygon

    out.update(polygon.model_arrays(ms))
    hf = self.hfields
    out['nhfield'] = len(hf)
    out['hfield_size'] = _rows([h['size'] for h in hf], 4)
    out['hfield_nrow'] = np.array([h['nrow'] for h in hf], dtype=int)
    out['hfield_ncol'] = np.array([h['ncol'] for h in hf], dtype=int)
    out['hfield_adr'] = _adr(out['hfield_nrow'] * out['hfield_ncol'])
    out['hfield_data'] = np.concatenate([h['data'] for h in hf]) if hf else np.zeros(0)

  # ---------------------------------------------------------------- tendons

  def compile_tendons(self, sections: list[Element]):
    out = self.out
    tendons = []
    wraps = []
    for sec in sections:
      _only(sec, {'spatial', 'fixed'})
      for t in sec.children:
        cls = self.cls_of(t, 'main')
        table = (
          schema.TENDON
          if t.tag == 'spatial'
          else {k: v for k, v in schema.TENDON.items() if k not in ('width', 'material', 'rgba')}
        )
        attrs = self.read_element(t, table, 'tendon', cls)
        attrs['elem'] = t
        if attrs.get('material'):
          self.lookup('material', t, 'material', attrs['material'])
        self.register('tendon', t, len(tendons))
        tendons.append(attrs)
    for attrs in tendons:
      t = attrs['elem']
      attrs['adr'] = len(wraps)
      if t.tag == 'fixed':
        _only(t, {'joint'})
        for w in t.children:
          _only(w, set())
          a = schema.read_attrs(w, {'joint': 's', 'coef': 'f'})
          if 'joint' not in a or 'coef' not in a:
            raise w.error(
              'missing required attribute', attribute='coef' if 'joint' in a else 'joint'
            )
          jid = self.lookup('joint', w, 'joint')
          if self.joints[jid]['type'] not in (JNT_SLIDE, JNT_HINGE):
            raise w.error('fixed tendons can only use hinge and slide joints', attribute='joint')
          if any(k == WRAP_JOINT and o == jid for k, o, _ in wraps[attrs['adr'] :]):
            i = len(wraps) - attrs['adr']
            raise w.error(f'joint at path element {i} is repeated', attribute='joint')
          wraps.append((WRAP_JOINT, jid, a['coef']))
      else:
        _only(t, {'site', 'geom', 'pulley'})
        for w in t.children:
          _only(w, set())
          if w.tag == 'site':
            a = schema.read_attrs(w, {'site': 's'})
            if 'site' not in a:
              raise w.error('missing required attribute', attribute='site')
            wraps.append((WRAP_SITE, self.lookup('site', w, 'site'), 0.0))
          elif w.tag == 'geom':
            a = schema.read_attrs(w, {'geom': 's', 'sidesite': 's'})
            if 'geom' not in a:
              raise w.error('missing required attribute', attribute='geom')
            gid = self.lookup('geom', w, 'geom')
            gt = self.geoms[gid]['type']
            if gt not in (2, 5):
              raise w.error('tendons can only wrap around sphere and cylinder geoms', 'geom')
            side = self.lookup('site', w, 'sidesite') if 'sidesite' in a else -1
            wraps.append((WRAP_SPHERE if gt == 2 else WRAP_CYLINDER, gid, float(side)))
          else:
            a = schema.read_attrs(w, {'divisor': 'f'})
            if a.get('divisor', 0) <= 0:
              raise w.error('pulley divisor must be positive', attribute='divisor')
            wraps.append((WRAP_PULLEY, -1, a['divisor']))
        self.check_spatial(t, wraps[attrs['adr'] :])
      attrs['num'] = len(wraps) - attrs['adr']
      if attrs['num'] == 0:
        raise t.error('a tendon needs at least one path element')
      geom_wrap = any(w[0] in (WRAP_SPHERE, WRAP_CYLINDER) for w in wraps[attrs['adr'] :])
      if attrs['armature'] < 0:
        raise t.error('tendon armature cannot be negative', attribute='armature')
      if attrs['armature'] > 0 and geom_wrap:
        raise t.error('geom wrapping not supported by tendon armature', attribute='armature')
      rng = np.array(attrs['range'])
      if attrs['limited'] == 2 and not self.autolimits(t) and (rng != 0).any():
        raise t.error("tendon has 'range' but not 'limited'", attribute='range')
      lim = attrs['limited'] == 1 or (attrs['limited'] == 2 and rng[0] < rng[1])
      if lim and rng[0] >= rng[1]:
        raise t.error('range[0] must be smaller than range[1]', attribute='range')
      attrs['limited_c'] = int(lim)
      afr = np.array(attrs['actuatorfrcrange'])
      afl = attrs['actuatorfrclimited']
      alim = afl == 1 or (afl == 2 and afr[0] < afr[1])
      attrs['actfrclimited_c'] = int(alim)
    out['ntendon'] = len(tendons)
    out['nwrap'] = len(wraps)
    out['tendon_adr'] = np.array([t['adr'] for t in tendons], dtype=int)
    out['tendon_num'] = np.array([t['num'] for t in tendons], dtype=int)
    out['tendon_limited'] = np.array([t['limited_c'] for t in tendons], dtype=int)
    out['tendon_actfrclimited'] = np.array([t['actfrclimited_c'] for t in tendons], dtype=int)
    out['tendon_range'] = _rows([t['range'] for t in tendons], 2)
    out['tendon_actfrcrange'] = _rows([t['actuatorfrcrange'] for t in tendons], 2)
    out['tendon_solref_lim'] = _rows([t['solreflimit'] for t in tendons], 2)
    out['tendon_solimp_lim'] = _rows([t['solimplimit'] for t in tendons], 5)
    out['tendon_solref_fri'] = _rows([t['solreffriction'] for t in tendons], 2)
    out['tendon_solimp_fri'] = _rows([t['solimpfriction'] for t in tendons], 5)
    out['tendon_margin'] = np.array([t['margin'] for t in tendons], dtype=float)
    out['tendon_stiffness'] = np.array([t['stiffness'][0] for t in tendons], dtype=float)
    out['tendon_stiffnesspoly'] = _rows([t['stiffness'][1:] for t in tendons], 2)
    out['tendon_damping'] = np.array([t['damping'][0] for t in tendons], dtype=float)
    out['tendon_dampingpoly'] = _rows([t['damping'][1:] for t in tendons], 2)
    out['tendon_armature'] = np.array([t['armature'] for t in tendons], dtype=float)
    out['tendon_frictionloss'] = np.array([t['frictionloss'] for t in tendons], dtype=float)
    out['tendon_group'] = np.array([t['group'] for t in tendons], dtype=int)
    out['tendon_width'] = np.array([t.get('width', 0.003) for t in tendons], dtype=float)
    # springlength: -1 means "the length at qpos0" (filled in with tendon_length0).
    sl = []
    for t in tendons:
      s = np.array(t['springlength'], dtype=float)
      if s[0] > s[1]:
        raise t['elem'].error('springlength[0] must not exceed springlength[1]', 'springlength')
      sl.append(s)
    out['tendon_lengthspring'] = _rows(sl, 2)
    out['wrap_type'] = np.array([w[0] for w in wraps], dtype=int)
    out['wrap_objid'] = np.array([w[1] for w in wraps], dtype=int)
    out['wrap_prm'] = np.array([w[2] for w in wraps], dtype=float)
    self.tendons = tendons

  def check_spatial(self, t: Element, wraps):
    """Validates a spatial tendon path with MuJoCo's rules (mjCTendon::Compile)."""
    n = len(wraps)
    for i, (w, obj, _) in enumerate(wraps):
      prev = wraps[i - 1][0] if i > 0 else None
      nxt = wraps[i + 1][0] if i < n - 1 else None
      if w == WRAP_PULLEY:
        if prev == WRAP_PULLEY:
          raise t.error(f'consecutive pulleys in a spatial tendon (path element {i})')
        if nxt is None:
          raise t.error('a spatial tendon path must not end with a pulley')
      elif w == WRAP_SITE:
        if prev in (None, WRAP_PULLEY) and nxt in (None, WRAP_PULLEY):
          raise t.error(f'site at path element {i} needs a neighbour that is not a pulley')
        if nxt == WRAP_SITE and wraps[i + 1][1] == obj:
          raise t.error(f'site at path element {i} is repeated')
      elif prev != WRAP_SITE or nxt != WRAP_SITE:
        raise t.error(f'wrapping geom at path element {i} is not between two sites')

  # ---------------------------------------------------------------- actuators

  def compile_actuators(self, sections: list[Element]):
    out = self.out
    acts = []
    for sec in sections:
      for a in sec.children:
        if a.tag in schema.UNSUPPORTED_ACTUATORS:
          raise a.error(f'actuator type <{a.tag}> is not supported by jaxsim')
        if a.tag not in schema.ACTUATORS and a.tag != 'plugin':
          raise a.error(f'unknown element <{a.tag}> in <actuator>')
        _only(a, {'config'} if a.tag == 'plugin' else set())
        cls = self.cls_of(a, 'main')
        base = self.defaults.get(cls, 'general', a)
        if a.tag == 'plugin':
          attrs = schema.read_attrs(a, schema.ACTUATOR_PLUGIN, base)
          attrs['pid'] = self._plugin_actuator(a, attrs)
        elif a.tag != 'general':
          attrs = self.apply_actuator_shortcut(a, base)
        else:
          attrs = schema.read_attrs(a, schema.GENERAL, base)
        attrs['elem'] = a
        self.register('actuator', a, len(acts))
        acts.append(attrs)
    rows = []
    na_total = 0
    for attrs in acts:
      a = attrs['elem']
      targets = [
        k for k in ('joint', 'jointinparent', 'tendon', 'cranksite', 'site', 'body') if k in a.attrs
      ]
      if not targets:
        raise a.error('actuator has no transmission target (joint, tendon, site, body, ...)')
      if len(targets) > 1:
        raise a.error('actuator has more than one transmission target', attribute=targets[1])
      tk = targets[0]
      trnid = [-1, -1]
      if tk in ('joint', 'jointinparent'):
        trntype = TRN_JOINT if tk == 'joint' else TRN_JOINTINPARENT
        trnid[0] = self.lookup('joint', a, tk)
      elif tk == 'tendon':
        trntype = TRN_TENDON
        trnid[0] = self.lookup('tendon', a, tk)
      elif tk == 'cranksite':
        trntype = TRN_SLIDERCRANK
        trnid[0] = self.lookup('site', a, tk)
        if 'slidersite' not in a.attrs:
          raise a.error('slider-crank transmission needs a slidersite', attribute='slidersite')
        trnid[1] = self.lookup('site', a, 'slidersite')
        if attrs['cranklength'] <= 0:
          raise a.error('cranklength must be positive', attribute='cranklength')
      elif tk == 'site':
        trntype = TRN_SITE
        trnid[0] = self.lookup('site', a, tk)
        if 'refsite' in a.attrs:
          trnid[1] = self.lookup('site', a, 'refsite')
      else:
        trntype = TRN_BODY
        trnid[0] = self.lookup('body', a, tk)
      if tk != 'cranksite' and ('slidersite' in a.attrs or 'cranklength' in a.attrs):
        raise a.error('cranklength and slidersite need a slider-crank transmission', 'slidersite')
      if tk != 'site' and 'refsite' in a.attrs:
        raise a.error('refsite can only be used with a site transmission', attribute='refsite')
      # limits
      lim = {}
      for key, rk in (
        ('ctrllimited', 'ctrlrange'),
        ('forcelimited', 'forcerange'),
        ('actlimited', 'actrange'),
      ):
        rng = np.array(attrs[rk], dtype=float)
        flag = attrs[key]
        if flag == 2 and not self.autolimits(a) and (rng != 0).any():
          raise a.error(f"actuator has '{rk}' but not '{key}'", attribute=rk)
        on = flag == 1 or (flag == 2 and rng[0] < rng[1])
        if (
          on
          and rng[0] >= rng[1]
          and not (key == 'ctrllimited' and attrs.get('inheritrange', 0) > 0)
        ):
          raise a.error(f'{rk}[0] must be smaller than {rk}[1]', attribute=rk)
        lim[key] = int(on)
        lim[rk] = rng
      if attrs.get('inheritrange', 0) > 0:
        self.inherit_range(attrs, trntype, trnid, lim)
      dyn = attrs['dyntype']
      actdim = attrs['actdim']
      if actdim < 0:
        actnum = 0 if dyn == DYN_NONE else 1
      elif 'pid' in attrs:
        actnum = actdim
      else:
        actnum = actdim
        if dyn == DYN_NONE and actdim > 0:
          raise a.error('actdim > 0 requires dynamics', attribute='actdim')
        if actdim > 1 and dyn != DYN_USER:
          raise a.error("actdim > 1 is only allowed for dyntype 'user'", attribute='actdim')
        if actdim == 0 and dyn != DYN_NONE:
          raise a.error('invalid actdim 0 in stateful actuator', attribute='actdim')
      if 'pid' in attrs:
        # Pid::Create: the plugin's activations, then one for a filter or an integrator
        want = plugin.pid_actdim(attrs['pid'][1])
        want += int(dyn in (DYN_INTEGRATOR, DYN_FILTER, DYN_FILTEREXACT))
        if actnum != want:
          raise a.error(
            f'actuator {len(rows)} has actdim {actnum}, expected {want}. Add actdim="{want}" '
            'to the actuator plugin element.',
            attribute='actdim',
          )
      na_total += actnum
      if na_total > MAX_ARRAY:
        raise a.error(f'actdim is too large: more than {MAX_ARRAY:.0e} activations', 'actdim')
      if 'nsample' in attrs or 'delay' in attrs:
        self.note_unsupported('actuator delay (nsample/delay)')
      self._length_range(a, len(rows), attrs, trntype, trnid)
      rows.append((attrs, trntype, trnid, lim, actnum))
    nu = len(rows)
    actnum = np.array([r[4] for r in rows], dtype=int)
    actadr = np.where(actnum > 0, _adr(actnum), -1) if nu else np.zeros(0, int)
    out['nu'] = nu
    out['na'] = int(actnum.sum()) if nu else 0
    out['actuator_trntype'] = np.array([r[1] for r in rows], dtype=int)
    out['actuator_dyntype'] = np.array([r[0]['dyntype'] for r in rows], dtype=int)
    out['actuator_gaintype'] = np.array([r[0]['gaintype'] for r in rows], dtype=int)
    out['actuator_biastype'] = np.array([r[0]['biastype'] for r in rows], dtype=int)
    out['actuator_trnid'] = np.array([r[2] for r in rows], dtype=int).reshape(nu, 2)
    out['actuator_actadr'] = actadr
    out['actuator_actnum'] = actnum
    out['actuator_group'] = np.array([r[0]['group'] for r in rows], dtype=int)
    out['actuator_ctrllimited'] = np.array([r[3]['ctrllimited'] for r in rows], dtype=int)
    out['actuator_forcelimited'] = np.array([r[3]['forcelimited'] for r in rows], dtype=int)
    out['actuator_actlimited'] = np.array([r[3]['actlimited'] for r in rows], dtype=int)
    out['actuator_actearly'] = np.array([int(r[0]['actearly']) for r in rows], dtype=int)
    out['actuator_dynprm'] = _rows([r[0]['dynprm'] for r in rows], 10)
    out['actuator_gainprm'] = _rows([r[0]['gainprm'] for r in rows], 10)
    out['actuator_biasprm'] = _rows([r[0]['biasprm'] for r in rows], 10)
    out['actuator_ctrlrange'] = _rows([r[3]['ctrlrange'] for r in rows], 2)
    out['actuator_forcerange'] = _rows([r[3]['forcerange'] for r in rows], 2)
    out['actuator_actrange'] = _rows([r[3]['actrange'] for r in rows], 2)
    out['actuator_gear'] = _rows([r[0]['gear'] for r in rows], 6)
    out['actuator_cranklength'] = np.array([r[0]['cranklength'] for r in rows], dtype=float)
    out['actuator_lengthrange'] = _rows([r[0]['lengthrange'] for r in rows], 2)
    out['actuator_damping'] = np.array([r[0]['damping'][0] for r in rows], dtype=float)
    out['actuator_dampingpoly'] = _rows(
      [np.resize(np.append(r[0]['damping'][1:], [0.0, 0.0]), 2) for r in rows], 2
    )
    out['actuator_armature'] = np.array([r[0]['armature'] for r in rows], dtype=float)
    # plugin instances: the named ones of <extension>, then one per actuator that names a plugin
    # (then one per such sensor: compile_sensors)
    named = len(self.plugin_instances)
    inst = []
    for r in rows:
      ref = r[0].get('pid', (None,))[0]
      if ref == 'implicit':
        inst.append(named + self.implicit_actuator_plugins)
        self.implicit_actuator_plugins += 1
      else:
        inst.append(-1 if ref is None else ref)
    out['actuator_plugin'] = np.array(inst, dtype=int)
    prm = [r[0]['pid'][1] if 'pid' in r[0] else (0.0,) * 5 for r in rows]
    out['actuator_plugin_prm'] = np.array(prm, dtype=float).reshape(-1, 5)
    # Pid::Create fails for an instance no actuator uses
    for k, (name, _, e) in enumerate(self.plugin_instances.values()):
      if name == plugin.PID and k not in inst:
        raise e.error(f'actuator not found for plugin instance {k}')

  def _plugin_actuator(self, a: Element, attrs: dict) -> tuple[int | str, tuple[float, ...]]:
    """An actuator computed by an engine plugin (mujoco.pid): (its instance, named (an index) or
    'implicit' (one of its own, numbered in compile_actuators); the pid parameters)."""
    ref, name, config, at = self._plugin_ref(a, attrs, plugin.PID, 'actuator')
    return ref, plugin.pid_params(at, config)

  def _plugin_ref(
    self, e: Element, a: dict, want: str, kind: str
  ) -> tuple[int | str, str, dict, Element]:
    """The plugin an actuator or sensor element uses (mjXReader, mjCModel): (instance, a named
    one's index or 'implicit'; plugin name; its <config>; the element holding it). A named
    instance wins over the element's own <config>; its plugin must be the element's `plugin`."""
    if 'plugin' not in a and 'instance' not in a:
      raise e.error(f"neither 'plugin' nor 'instance' is specified for {kind}", 'plugin')
    name = a.get('plugin')
    if name is not None and name not in self.plugins_declared:
      raise e.error(f"unrecognized plugin '{name}' (not declared in <extension>)", 'plugin')
    if 'instance' in a:
      if a['instance'] not in self.plugin_instances:
        raise e.error(f"unknown plugin instance '{a['instance']}'", attribute='instance')
      iname, config, inst = self.plugin_instances[a['instance']]
      if name is not None and name != iname:
        raise e.error(f"instance '{a['instance']}' is of plugin {iname}, not {name}", 'plugin')
      name, ref = iname, list(self.plugin_instances).index(a['instance'])
    else:
      ref, inst = 'implicit', e
    if name != want:
      if name in plugin.KEYS:
        raise e.error(f"plugin '{name}' does not support {kind}s", attribute='plugin')
      raise e.error(f'{kind} plugin {name} is not supported by jaxsim', attribute='plugin')
    if ref == 'implicit':
      config = plugin.read_config(e, name)
    return ref, name, config, inst

  def inherit_range(self, attrs, trntype, trnid, lim):
    a = attrs['elem']
    if trntype in (TRN_JOINT, TRN_JOINTINPARENT):
      j = self.joints[trnid[0]]
      if j['type'] not in (JNT_HINGE, JNT_SLIDE) or not j['limited_c']:
        raise a.error('inheritrange needs a limited hinge or slide joint', 'inheritrange')
      rng = j['range_c']
    elif trntype == TRN_TENDON:
      t = self.tendons[trnid[0]]
      if not t['limited_c']:
        raise a.error('inheritrange needs a limited tendon', attribute='inheritrange')
      rng = np.array(t['range'])
    else:
      raise a.error('inheritrange needs a joint or tendon transmission', 'inheritrange')
    mid = (rng[0] + rng[1]) / 2
    half = (rng[1] - rng[0]) / 2 * attrs['inheritrange']
    key = 'actrange' if attrs['dyntype'] == DYN_INTEGRATOR else 'ctrlrange'
    lim[key] = np.array([mid - half, mid + half])
    lim['actlimited' if key == 'actrange' else 'ctrllimited'] = 1

  # ---------------------------------------------------------------- equality

  def compile_equality(self, sections: list[Element]):
    out = self.out
    rows = []
    for sec in sections:
      _only(sec, {'connect', 'weld', 'joint', 'tendon', 'flex', 'flexvert', 'flexstrain'})
      for e in sec.children:
        if e.tag.startswith('flex'):
          raise e.error('flex equality constraints are not supported by jaxsim')
        _only(e, set())
        cls = self.cls_of(e, 'main')
        table = {
          'connect': schema.EQ_CONNECT,
          'weld': schema.EQ_WELD,
          'joint': schema.EQ_JOINT,
          'tendon': schema.EQ_TENDON,
        }[e.tag]
        attrs = self.read_element(e, table, 'equality', cls)
        self.register('equality', e, len(rows))
        data = np.zeros(NEQDATA)
        data[10] = 1.0
        obj1 = obj2 = -1
        objtype = OBJ['body']
        if e.tag in ('connect', 'weld'):
          has_site = 'site1' in attrs or 'site2' in attrs
          has_body = 'body1' in attrs or 'body2' in attrs
          if has_site and has_body:
            raise e.error('use either body1/body2 or site1/site2, not both', attribute='site1')
          if has_site:
            if 'site1' not in attrs or 'site2' not in attrs:
              raise e.error('site1 and site2 must be given together', attribute='site2')
            if 'anchor' in attrs or 'relpose' in attrs:
              raise e.error('anchor/relpose cannot be used with sites', attribute='anchor')
            objtype = OBJ['site']
            obj1 = self.lookup('site', e, 'site1')
            obj2 = self.lookup('site', e, 'site2')
          else:
            if 'body1' not in attrs:
              raise e.error('missing required attribute', attribute='body1')
            obj1 = self.lookup('body', e, 'body1')
            obj2 = self.lookup('body', e, 'body2') if 'body2' in attrs else 0
            if e.tag == 'connect' and 'anchor' not in attrs:
              raise e.error('missing required attribute', attribute='anchor')
          if e.tag == 'connect':
            typ = EQ_CONNECT
            data[0:3] = attrs.get('anchor', np.zeros(3))
          else:
            typ = EQ_WELD
            data[0:3] = attrs.get('anchor', np.zeros(3))
            relpose = attrs.get('relpose', np.array([0, 1, 0, 0, 0, 0, 0.0]))
            if 'relpose' in attrs and np.linalg.norm(relpose[3:]) < EPS:
              pass
            data[3:10] = relpose if 'relpose' in attrs else np.array([0, 0, 0, 1, 0, 0, 0.0])
            data[10] = attrs.get('torquescale', 1.0)
            # data[11] = 1: relative pose to be computed at qpos0 (mj_setConst).
            data[11] = 0.0 if 'relpose' in attrs and np.linalg.norm(relpose[3:]) > EPS else 1.0
        else:
          typ = EQ_JOINT if e.tag == 'joint' else EQ_TENDON
          ns = 'joint' if e.tag == 'joint' else 'tendon'
          objtype = 0  # MuJoCo leaves the object type of joint/tendon equalities unset
          k1, k2 = f'{ns}1', f'{ns}2'
          if k1 not in attrs:
            raise e.error('missing required attribute', attribute=k1)
          obj1 = self.lookup(ns, e, k1)
          obj2 = self.lookup(ns, e, k2) if k2 in attrs else -1
          poly = np.array([0, 1, 0, 0, 0.0])
          if 'polycoef' in attrs:
            poly[: len(attrs['polycoef'])] = attrs['polycoef']
          data[0:5] = attrs.get('polycoef', poly) if len(attrs.get('polycoef', poly)) == 5 else poly
          if ns == 'joint':
            for jid in (obj1, obj2):
              if jid >= 0 and self.joints[jid]['type'] not in (JNT_SLIDE, JNT_HINGE):
                raise e.error('joint equality needs hinge or slide joints', attribute=k1)
        rows.append((typ, obj1, obj2, objtype, attrs, data))
    out['neq'] = len(rows)
    out['eq_type'] = np.array([r[0] for r in rows], dtype=int)
    out['eq_obj1id'] = np.array([r[1] for r in rows], dtype=int)
    out['eq_obj2id'] = np.array([r[2] for r in rows], dtype=int)
    out['eq_objtype'] = np.array([r[3] for r in rows], dtype=int)
    out['eq_active0'] = np.array([int(r[4]['active']) for r in rows], dtype=int)
    out['eq_solref'] = _rows([r[4]['solref'] for r in rows], 2)
    out['eq_solimp'] = _rows([r[4]['solimp'] for r in rows], 5)
    out['eq_data'] = _rows([r[5] for r in rows], NEQDATA)

  # ---------------------------------------------------------------- contact

  def compile_contact(self, sections: list[Element]):
    out = self.out
    pairs, excludes = [], []
    for sec in sections:
      _only(sec, {'pair', 'exclude'})
      for e in sec.children:
        _only(e, set())
        if e.tag == 'pair':
          cls = self.cls_of(e, 'main')
          base = self.defaults.get(cls, 'pair', e)
          # MuJoCo 4 gives unspecified pair parameters the pair defaults (no geom mixing).
          attrs = schema.read_attrs(e, schema.PAIR, base)
          for req in ('geom1', 'geom2'):
            if req not in attrs:
              raise e.error('missing required attribute', attribute=req)
          g1 = self.lookup('geom', e, 'geom1')
          g2 = self.lookup('geom', e, 'geom2')
          if self.geoms[g1]['body'] > self.geoms[g2]['body']:
            g1, g2 = g2, g1
          if attrs['condim'] not in (1, 3, 4, 6):
            raise e.error(f'condim must be 1, 3, 4 or 6, got {attrs["condim"]}', 'condim')
          b1, b2 = self.geoms[g1]['body'], self.geoms[g2]['body']
          p = {**attrs, 'geom1': g1, 'geom2': g2, 'signature': (b1 << 16) + b2, 'elem': e}
          pairs.append(p)
        else:
          attrs = schema.read_attrs(e, schema.EXCLUDE)
          for req in ('body1', 'body2'):
            if req not in attrs:
              raise e.error('missing required attribute', attribute=req)
          b1 = self.lookup('body', e, 'body1')
          b2 = self.lookup('body', e, 'body2')
          excludes.append(((min(b1, b2) << 16) + max(b1, b2), e))
    # MuJoCo orders pairs and excludes by body signature (stable), then assigns ids.
    pairs.sort(key=lambda p: p['signature'])
    excludes.sort(key=lambda x: x[0])
    for i, p in enumerate(pairs):
      self.register('pair', p['elem'], i)
    for i, (_, e) in enumerate(excludes):
      self.register('exclude', e, i)
    excludes = [x[0] for x in excludes]
    out['npair'] = len(pairs)
    out['nexclude'] = len(excludes)
    out['pair_geom1'] = np.array([p['geom1'] for p in pairs], dtype=int)
    out['pair_geom2'] = np.array([p['geom2'] for p in pairs], dtype=int)
    out['pair_dim'] = np.array([p['condim'] for p in pairs], dtype=int)
    out['pair_signature'] = np.array([p['signature'] for p in pairs], dtype=int)
    out['pair_friction'] = _rows([p['friction'] for p in pairs], 5)
    out['pair_solref'] = _rows([p['solref'] for p in pairs], 2)
    out['pair_solreffriction'] = _rows([p['solreffriction'] for p in pairs], 2)
    out['pair_solimp'] = _rows([p['solimp'] for p in pairs], 5)
    out['pair_margin'] = np.array([p['margin'] for p in pairs], dtype=float)
    out['pair_gap'] = np.array([p['gap'] for p in pairs], dtype=float)
    out['pair_adhesion'] = np.array([p['adhesion'] for p in pairs], dtype=float)
    out['exclude_signature'] = np.array(excludes, dtype=int)

  # ---------------------------------------------------------------- sensors

  def compile_sensors(self, sections: list[Element]):
    out = self.out
    rows = []
    for sec in sections:
      for e in sec.children:
        if e.tag in schema.UNSUPPORTED_SENSORS:
          raise e.error(f'sensor type <{e.tag}> is not supported by jaxsim')
        if e.tag not in schema.SENSORS:
          raise e.error(f'unknown element <{e.tag}> in <sensor>')
        _only(e, {'config'} if e.tag == 'plugin' else set())
        attrs = schema.read_attrs(e, schema.SENSORS[e.tag])
        self.register('sensor', e, len(rows))
        rows.append(self.compile_sensor(e, attrs))
    dims = np.array([r['dim'] for r in rows], dtype=int)
    out['nsensor'] = len(rows)
    out['nsensordata'] = int(dims.sum()) if rows else 0
    out['sensor_type'] = np.array([r['type'] for r in rows], dtype=int)
    out['sensor_datatype'] = np.array([r['datatype'] for r in rows], dtype=int)
    out['sensor_needstage'] = np.array([r['needstage'] for r in rows], dtype=int)
    out['sensor_objtype'] = np.array([r['objtype'] for r in rows], dtype=int)
    out['sensor_objid'] = np.array([r['objid'] for r in rows], dtype=int)
    out['sensor_reftype'] = np.array([r['reftype'] for r in rows], dtype=int)
    out['sensor_refid'] = np.array([r['refid'] for r in rows], dtype=int)
    out['sensor_dim'] = dims
    out['sensor_adr'] = _adr(dims)
    out['sensor_intprm'] = np.array([r['intprm'] for r in rows], dtype=int).reshape(-1, 3)
    out['sensor_cutoff'] = np.array([r['cutoff'] for r in rows], dtype=float)
    out['sensor_noise'] = np.array([r['noise'] for r in rows], dtype=float)
    # plugin instances: the named ones of <extension>, then one per sensor that names a plugin
    implicit = np.array([r.get('implicit', False) for r in rows], dtype=bool)
    first = len(self.plugin_instances) + self.implicit_actuator_plugins
    made = first + np.cumsum(implicit) - 1
    inst = [made[i] if implicit[i] else r.get('plugin', -1) for i, r in enumerate(rows)]
    out['nplugin'] = first + int(implicit.sum())
    out['sensor_plugin'] = np.array(inst, dtype=int)
    prm = [r.get('plugin_prm', (0.0,) * 6) for r in rows]
    out['sensor_plugin_prm'] = np.array(prm, dtype=float).reshape(-1, 6)

  def compile_sensor(self, e: Element, a: dict) -> dict:
    tag = e.tag
    typ = schema.SENSOR_TYPES[tag][0]
    r = {'type': typ, 'datatype': 0, 'needstage': 1, 'objtype': 0, 'objid': -1, 'reftype': 0}
    r.update(refid=-1, cutoff=a.get('cutoff', 0.0), noise=a.get('noise', 0.0), dim=1)
    r['intprm'] = (0, 0, 0)
    if r['cutoff'] < 0:
      raise e.error('cutoff cannot be negative', attribute='cutoff')

    def need(attr):
      if attr not in a:
        raise e.error('missing required attribute', attribute=attr)

    def obj(ns, attr):
      need(attr)
      r['objtype'] = OBJ[ns]
      r['objid'] = self.lookup(ns, e, attr)

    def frame_obj(type_attr, name_attr, message):
      """(mjtObj, id) of a frame object given by type and name ((x)body, geom, site, camera)."""
      need(type_attr)
      need(name_attr)
      ot = a[type_attr]
      ns = {1: 'body', 2: 'body', 5: 'geom', 6: 'site', 7: 'camera'}.get(ot)
      if ns is None:
        raise e.error(message, type_attr)
      return ot, self.lookup(ns, e, name_attr)

    acc = 3
    vel = 2
    pos = 1
    if tag in ('touch', 'accelerometer', 'velocimeter', 'gyro', 'force', 'torque', 'magnetometer'):
      obj('site', 'site')
      r['dim'] = 1 if tag == 'touch' else 3
      r['datatype'] = 1 if tag == 'touch' else 0
      r['needstage'] = {
        'touch': acc,
        'accelerometer': acc,
        'force': acc,
        'torque': acc,
        'velocimeter': vel,
        'gyro': vel,
        'magnetometer': pos,
      }[tag]
    elif tag == 'rangefinder':
      if 'camera' in a:
        raise e.error('rangefinders on cameras are not supported by jaxsim', attribute='camera')
      obj('site', 'site')
      fields = _data_fields(e, a.get('data', 'dist'), RAYDATA)
      if RAYDATA.index('normal') in fields:
        raise e.error('rangefinder surface normals are not supported by jaxsim', attribute='data')
      r['intprm'] = (sum(1 << f for f in fields), 0, 0)  # the mjtRayDataField bits
      r['dim'] = sum(RAYDATA_SIZE[f] for f in fields)
    elif tag == 'camprojection':
      obj('site', 'site')
      need('camera')
      r['reftype'] = OBJ['camera']
      r['refid'] = self.lookup('camera', e, 'camera')
      res = np.asarray(self.cameras[r['refid']].get('resolution', (1, 1)))
      if (res <= 0).any():
        raise e.error('camera projection sensor requires camera resolution', attribute='camera')
      r['dim'] = 2
    elif tag in (
      'jointpos',
      'jointvel',
      'jointactuatorfrc',
      'jointlimitpos',
      'jointlimitvel',
      'jointlimitfrc',
    ):
      obj('joint', 'joint')
      if self.joints[r['objid']]['type'] not in (JNT_SLIDE, JNT_HINGE):
        raise e.error(f'{tag} sensors need a hinge or slide joint', attribute='joint')
      r['needstage'] = {
        'jointpos': pos,
        'jointlimitpos': pos,
        'jointvel': vel,
        'jointlimitvel': vel,
      }.get(tag, acc)
    elif tag in ('ballquat', 'ballangvel'):
      obj('joint', 'joint')
      if self.joints[r['objid']]['type'] != JNT_BALL:
        raise e.error(f'{tag} sensors need a ball joint', attribute='joint')
      r['dim'] = 4 if tag == 'ballquat' else 3
      r['datatype'] = 3 if tag == 'ballquat' else 0
      r['needstage'] = pos if tag == 'ballquat' else vel
    elif tag in (
      'tendonpos',
      'tendonvel',
      'tendonactuatorfrc',
      'tendonlimitpos',
      'tendonlimitvel',
      'tendonlimitfrc',
    ):
      obj('tendon', 'tendon')
      r['needstage'] = {
        'tendonpos': pos,
        'tendonlimitpos': pos,
        'tendonvel': vel,
        'tendonlimitvel': vel,
      }.get(tag, acc)
    elif tag in ('actuatorpos', 'actuatorvel', 'actuatorfrc'):
      obj('actuator', 'actuator')
      r['needstage'] = {'actuatorpos': pos, 'actuatorvel': vel, 'actuatorfrc': acc}[tag]
    elif tag.startswith('frame'):
      r['objtype'], r['objid'] = frame_obj(
        'objtype', 'objname', 'frame sensors need a body, xbody, geom, site or camera'
      )
      if 'reftype' in a or 'refname' in a:
        r['reftype'], r['refid'] = frame_obj(
          'reftype', 'refname', 'reftype must be a body, xbody, geom, site or camera'
        )
      r['dim'] = 4 if tag == 'framequat' else 3
      r['datatype'] = {'framequat': 3, 'framexaxis': 2, 'frameyaxis': 2, 'framezaxis': 2}.get(
        tag, 0
      )
      r['needstage'] = {
        'framelinvel': vel,
        'frameangvel': vel,
        'framelinacc': acc,
        'frameangacc': acc,
      }.get(tag, pos)
    elif tag == 'insidesite':
      for attr in ('objtype', 'objname', 'site'):  # all required before any lookup
        need(attr)
      r['objtype'], r['objid'] = frame_obj(
        'objtype', 'objname', 'sensor must be attached to (x)body, geom, site or camera'
      )
      r['reftype'], r['refid'] = OBJ['site'], self.lookup('site', e, 'site')
      r['datatype'] = 1  # mjDATATYPE_POSITIVE
    elif tag.startswith('subtree'):
      obj('body', 'body')
      r['dim'] = 3
      r['needstage'] = pos if tag == 'subtreecom' else vel
    elif tag in ('distance', 'normal', 'fromto'):
      # each side a geom or all geoms of a body (mjSENS_GEOMDIST/GEOMNORMAL/GEOMFROMTO)
      for k, (gattr, battr) in enumerate((('geom1', 'body1'), ('geom2', 'body2'))):
        if gattr in a and battr in a:
          raise e.error(
            f"Schema violation: at most one of '{gattr}', '{battr}' can be specified", battr
          )
        if gattr not in a and battr not in a:
          raise e.error(f"Schema violation: one of '{gattr}', '{battr}' must be specified", gattr)
        ns, attr = ('body', battr) if battr in a else ('geom', gattr)
        oid = self.lookup(ns, e, attr)
        if ns == 'geom' and self.geoms[oid]['type'] == 1:  # mjGEOM_HFIELD
          raise e.error('height fields are not supported in geom distance sensors', attr)
        r['objtype' if k == 0 else 'reftype'] = OBJ[ns]
        r['objid' if k == 0 else 'refid'] = oid
      if (r['objtype'], r['objid']) == (r['reftype'], r['refid']):
        raise e.error('1st body/geom must be different from 2nd body/geom')
      r['dim'] = {'distance': 1, 'normal': 3, 'fromto': 6}[tag]
      r['datatype'] = 2 if tag == 'normal' else 0
    elif tag == 'contact':
      self._contact_sensor(e, a, r)
    elif tag in ('e_potential', 'e_kinetic', 'clock'):
      # mujoco 4.0.0 marks e_kinetic as a position-stage sensor (computed with the energy)
      r['needstage'] = {'e_potential': pos, 'e_kinetic': pos, 'clock': pos}[tag]
    elif tag == 'plugin':
      self._plugin_sensor(e, a, r)
    elif tag == 'user':
      need('dim')
      r['dim'] = a['dim']
      r['datatype'] = a.get('datatype', 0)
      r['needstage'] = a.get('needstage', 3)
      if r['dim'] <= 0:
        raise e.error('user sensor dim must be positive', attribute='dim')
      if r['dim'] > MAX_ARRAY:
        raise e.error(f'user sensor dim is too large (at most {MAX_ARRAY:.0e})', 'dim')
      self.note_unsupported('user sensors (computed by a callback)')
    else:
      raise e.error(f'sensor type <{tag}> is not supported by jaxsim')
    return r

  def _plugin_sensor(self, e: Element, a: dict, r: dict) -> None:
    """A sensor computed by an engine plugin (mjSENS_PLUGIN): the touch_grid plugin, its instance
    named or made for this sensor; `plugin_prm` holds its parameters (plugin.touch_grid_params)."""
    ref, _, config, _ = self._plugin_ref(e, a, plugin.TOUCH_GRID, 'sensor')
    if ref == 'implicit':
      r['implicit'] = True  # an instance of its own, numbered in compile_sensors
    else:
      r['plugin'] = ref
    if a.get('objtype') != 'site' or 'objname' not in a:
      raise e.error('Touch Grid sensor must be attached to a site', attribute='objtype')
    r['objtype'] = OBJ['site']
    r['objid'] = self.lookup('site', e, 'objname')
    r['plugin_prm'] = plugin.touch_grid_params(e, config)
    nchannel, sx, sy = r['plugin_prm'][:3]
    r['dim'] = nchannel * sx * sy
    r['needstage'] = 3
    if r['dim'] > MAX_ARRAY:
      raise e.error(f'touch_grid sensor dim is too large (at most {MAX_ARRAY:.0e})', 'plugin')

  def _contact_sensor(self, e: Element, a: dict, r: dict) -> None:
    """A <contact> sensor's matching criteria, data fields, reduction and size (mjSENS_CONTACT as
    mjXReader::Sensor and mjCSensor::Compile read it): intprm is (dataspec, reduce, num)."""
    for k, sides in enumerate((CONTACT_SIDE1, CONTACT_SIDE2)):
      given = [attr for attr in sides if attr in a]
      if len(given) > 1:
        names = ', '.join(f"'{attr}'" for attr in sides)
        raise e.error(f'Schema violation: at most one of {names} can be specified', given[1])
      if given:
        ns = {'site': 'site', 'geom': 'geom', 'body': 'body', 'subt': 'xbody'}[given[0][:4]]
        r['objtype' if k == 0 else 'reftype'] = OBJ[ns]
        r['objid' if k == 0 else 'refid'] = self.lookup(
          'body' if ns == 'xbody' else ns, e, given[0]
        )
    fields = _data_fields(e, a.get('data', ''), CONDATA)
    reduce = a.get('reduce', 'none')
    if reduce not in CONTACT_REDUCE:
      raise e.error(f'invalid keyword: {reduce!r}', attribute='reduce')
    reduce = CONTACT_REDUCE.index(reduce)
    num = a.get('num', 1)
    if num <= 0:
      raise e.error("'num' must be positive in sensor", attribute='num')
    vel = {CONDATA.index('linvel'), CONDATA.index('angvel')} & set(fields)
    if reduce == CONTACT_REDUCE.index('netforce') and vel:
      raise e.error('netforce reduction is incompatible with linvel or angvel', 'reduce')
    r['intprm'] = (sum(1 << f for f in fields), reduce, num)
    r['dim'] = num * sum(CONDATA_SIZE[f] for f in fields)
    if r['dim'] > MAX_ARRAY:
      raise e.error(f'contact sensor dim is too large (at most {MAX_ARRAY:.0e})', 'num')
    # the stage its data needs (mujoco 4): forces at acc, velocities at vel, the rest at pos
    force = {CONDATA.index('force'), CONDATA.index('torque')} & set(fields) or reduce >= 2
    r['needstage'] = 3 if force else 2 if vel else 1

  # ---------------------------------------------------------------- custom, keyframes

  def compile_custom(self, sections: list[Element]):
    numeric = []
    texts = []
    for sec in sections:
      _only(sec, {'numeric', 'text', 'tuple'})
      for e in sec.children:
        if e.tag == 'numeric':
          _only(e, set())
          a = schema.read_attrs(e, schema.NUMERIC)
          if 'name' not in a:
            raise e.error('missing required attribute', attribute='name')
          data = a.get('data', np.zeros(0))
          size = a.get('size', len(data))
          if size < len(data) or size <= 0:
            raise e.error('numeric size must be positive and hold the data', attribute='size')
          if size > MAX_ARRAY:
            raise e.error(f'numeric size {size} is too large (at most {MAX_ARRAY:.0e})', 'size')
          full = np.zeros(size)
          full[: len(data)] = data
          self.register('numeric', e, len(numeric))
          numeric.append(full)
        elif e.tag == 'text':
          _only(e, set())
          a = schema.read_attrs(e, schema.TEXT)
          if 'name' not in a or 'data' not in a:
            raise e.error('missing required attribute', attribute='data' if 'name' in a else 'name')
          self.register('text', e, len(texts))
          texts.append(a['data'])
        else:
          _only(e, {'element'})
          schema.read_attrs(e, schema.TUPLE)
          for el in e.children:
            _only(el, set())
            schema.read_attrs(el, schema.TUPLE_ELEMENT)
    out = self.out
    out['nnumeric'] = len(numeric)
    out['numeric_size'] = np.array([len(n) for n in numeric], dtype=int)
    out['numeric_adr'] = _adr(out['numeric_size'])
    out['numeric_data'] = np.concatenate(numeric) if numeric else np.zeros(0)
    out['text_data'] = tuple(texts)

  def _attached_key(self, k: dict, values: dict) -> None:
    """An attached model's keyframe values on its joints and actuators (attach.py), by name."""
    jt = self.names.get('joint', {})
    for name, (qpos, qvel) in values['joints'].items():
      if name in jt:
        j = self.joints[jt[name]]
        k['qpos'][j['qposadr'] : j['qposadr'] + len(qpos)] = qpos
        k['qvel'][j['dofadr'] : j['dofadr'] + len(qvel)] = qvel
    at = self.names.get('actuator', {})
    actadr = self.out['actuator_actadr']
    for name, (ctrl, act) in values['actuators'].items():
      if name in at:
        i = at[name]
        k['ctrl'][i] = ctrl
        if len(act):
          k['act'][actadr[i] : actadr[i] + len(act)] = act

  def compile_keyframes(self, sections: list[Element]):
    out = self.out
    keys = []
    nq, nv, na, nu, nmocap = out['nq'], out['nv'], out['na'], out['nu'], out['nmocap']
    mocap_bodies = [b for b in self.bodies if b['mocap']]
    default_key = {
      'time': 0.0,
      'qpos': out['qpos0'].copy(),
      'qvel': np.zeros(nv),
      'act': np.zeros(na),
      'ctrl': np.zeros(nu),
      'mpos': np.array([b['pos'] for b in mocap_bodies]).reshape(nmocap * 3),
      'mquat': np.array([b['quat'] for b in mocap_bodies]).reshape(nmocap * 4),
    }
    for sec in sections:
      _only(sec, {'key'})
      for e in sec.children:
        _only(e, set())
        attached = e.attrs.get('_attached')
        if attached is not None:
          e = Element(
            e.tag, {k: v for k, v in e.attrs.items() if k != '_attached'}, [], e.file, e.line
          )
        a = schema.read_attrs(e, schema.KEY)
        k = {
          'time': a.get('time', 0.0),
          'qpos': out['qpos0'].copy(),
          'qvel': np.zeros(nv),
          'act': np.zeros(na),
          'ctrl': np.zeros(nu),
          'mpos': np.array([b['pos'] for b in mocap_bodies]).reshape(nmocap * 3),
          'mquat': np.array([b['quat'] for b in mocap_bodies]).reshape(nmocap * 4),
        }
        for field, n in (
          ('qpos', nq),
          ('qvel', nv),
          ('act', na),
          ('ctrl', nu),
          ('mpos', 3 * nmocap),
          ('mquat', 4 * nmocap),
        ):
          if field in a:
            v = np.asarray(a[field], dtype=float)
            if len(v) > n:
              raise e.error(f'expected {n} values, got {len(v)}', attribute=field)
            # MuJoCo 4 pads a short qpos/qvel/act/ctrl with the defaults and keeps the
            # default mocap poses when mpos/mquat are short
            if len(v) == n:
              k[field] = v
            elif field not in ('mpos', 'mquat'):
              k[field][: len(v)] = v
        if attached is not None:
          self._attached_key(k, json.loads(attached))
        # MuJoCo normalises the quaternions of ball and free joints (and mocap bodies).
        for j in self.joints:
          if j['type'] in (JNT_FREE, JNT_BALL):
            adr = j['qposadr'] + (3 if j['type'] == JNT_FREE else 0)
            k['qpos'][adr : adr + 4] = _normalized(k['qpos'][adr : adr + 4])
        for i in range(nmocap):
          k['mquat'][4 * i : 4 * i + 4] = _normalized(k['mquat'][4 * i : 4 * i + 4])
        self.register('key', e, len(keys))
        keys.append(k)
    nkey = self.size.get('nkey', 0)
    if nkey > len(keys) and nkey * (1 + nq + nv + na + nu + 7 * nmocap) > MAX_ARRAY:
      raise self.nkey_elem.error(
        f'nkey is too large: {nkey} keyframes exceed {MAX_ARRAY:.0e} values', attribute='nkey'
      )
    while len(keys) < nkey:
      keys.append(copy.deepcopy(default_key))
      self.name_lists.setdefault('key', []).append('')
    out['nkey'] = len(keys)
    out['key_time'] = np.array([k['time'] for k in keys], dtype=float)
    for field, n in (
      ('qpos', nq),
      ('qvel', nv),
      ('act', na),
      ('ctrl', nu),
      ('mpos', 3 * nmocap),
      ('mquat', 4 * nmocap),
    ):
      out[f'key_{field}'] = _rows([k[field] for k in keys], n)
    self.finish()

  def finish(self):
    out = self.out
    out['opt'] = dict(self.opt)
    out['compiler'] = {k: v for k, v in self.comp.items()}
    out['size'] = dict(self.size)
    out['statistic'] = dict(self.statistic)
    out['names'] = {k: tuple(v) for k, v in self.name_lists.items()}
    out['model_name'] = self.model_name
    out['unsupported'] = tuple(self.unsupported)
    out['lengthrange_opt'] = dict(self.lengthrange_opt)
    out['lengthrange_sim'] = tuple(self.lengthrange_sim)


# ------------------------------------------------------------------ helpers

_GEOM_NAMES = ['plane', 'hfield', 'sphere', 'capsule', 'ellipsoid', 'cylinder', 'box', 'mesh']


def _read_hfield(elem: Element, raw: bytes, path: str, png: bool):
  """Height data, rows bottom-up and scaled to [0, 1] (mjCHField::Compile), from a PNG or from
  MuJoCo's binary hfield format (int32 nrow, ncol, then float32 data)."""
  if png:
    grey = _png_grey(elem, raw, path)
    nrow, ncol = grey.shape
    data = grey.astype(np.float32).reshape(-1)
  else:
    if len(raw) < 8:
      raise elem.error(f'hfield file {path!r} is too short', attribute='file')
    nrow, ncol = (int(x) for x in np.frombuffer(raw[:8], dtype='<i4'))
    if nrow <= 0 or ncol <= 0 or len(raw) != 8 + 4 * nrow * ncol:
      raise elem.error(f'hfield file {path!r} has an inconsistent size', attribute='file')
    data = np.frombuffer(raw[8:], dtype='<f4')
  # in single precision, as MuJoCo's float elevation data
  lo, hi = data.min(), data.max()
  data = data - lo
  if hi - lo > 1e-14:  # mjEPS
    data = data / (hi - lo)
  return data.astype(float).reshape(nrow, ncol)[::-1].reshape(-1), nrow, ncol


def _png_grey(elem: Element, raw: bytes, path: str) -> np.ndarray:
  """A PNG as MuJoCo reads it for a height field (lodepng to 8-bit grey): the grey or red
  channel, the high byte of 16-bit samples, (rows, columns) top-down."""
  # Pillow decodes every PNG variant (bit depths, palettes, Adam7 interlacing) in C
  from PIL import Image, UnidentifiedImageError

  try:
    img = Image.open(io.BytesIO(raw))
    img.load()
  except (OSError, UnidentifiedImageError, ValueError) as err:
    raise elem.error(f'error decoding PNG file {path!r}: {err}', attribute='file') from None
  if img.mode.startswith('I'):  # 16-bit grey
    return (np.asarray(img).astype(np.int64) >> 8).astype(np.uint8)
  return np.asarray(img.convert('RGBA'))[..., 0]


def _sameframe(pos, quat, ipos=None, iquat=None) -> np.ndarray:
  """mjtSameFrame of objects whose frame coincides (within 1e-6) with their body's or inertia's."""

  def same_quat(a, b):
    return (np.abs(a - b) < 1e-6).all(-1) | (np.abs(a + b) < 1e-6).all(-1)

  unit = np.array([1.0, 0, 0, 0])
  nullpos = (np.abs(pos) < 1e-6).all(-1)
  nullrot = same_quat(quat, unit)
  out = np.zeros(len(pos), dtype=int)
  if ipos is not None:
    inertiarot = same_quat(quat, iquat)
    out[inertiarot] = 4
    out[inertiarot & (np.abs(pos - ipos) < 1e-6).all(-1)] = 2
  out[nullrot] = 3
  out[nullrot & nullpos] = 1
  return out


def _data_fields(e: Element, text: str, names: tuple[str, ...]) -> list[int]:
  """The indices of a sensor's `data` keywords (rangefinder, contact): known, each once, in the
  canonical order of `names`; the first field when none is given."""
  keys = text.split()
  for key in keys:
    if key not in names:
      raise e.error(f'invalid keyword: {key!r}', attribute='data')
  if len(set(keys)) < len(keys):
    dup = next(k for i, k in enumerate(keys) if k in keys[:i])
    raise e.error(f'duplicate keyword: {dup!r}', attribute='data')
  fields = [names.index(key) for key in keys] or [0]
  if fields != sorted(fields):
    raise e.error('data attributes must be in order: ' + ', '.join(names), attribute='data')
  return fields


def _fromto(e: Element, ft: np.ndarray, typ: int, size: np.ndarray):
  """Pos, quat and size of a capsule/cylinder/box/ellipsoid given by its two end points."""
  vec = ft[:3] - ft[3:]
  half = np.linalg.norm(vec) / 2
  if half < EPS:
    raise e.error('fromto points are too close', attribute='fromto')
  size = size.copy()
  if typ in (4, 6):
    size[2] = half
    size[1] = size[0]
  else:
    size[1] = half
  return (ft[:3] + ft[3:]) / 2, frames.z_to_quat(vec / np.linalg.norm(vec)), size


def _has_mass(b: dict) -> bool:
  """Mass and inertia above MINVAL in the body or a jointless descendant (CheckBodyMassInertia)."""
  if b['mass'] >= MINVAL and (np.asarray(b['inertia']) >= MINVAL).all():
    return True
  return any(_has_mass(c) for c in b['children'] if not c['joints'])


def _suffixed(elem: Element, suffix: str) -> Element:
  """A copy of a body subtree whose element names carry `suffix` (replicate's naming)."""
  attrs = dict(elem.attrs)
  if elem.tag == 'replicate':
    # a nested replicate appends its own suffix first (see _Compiler.replicate)
    attrs['_post'] = suffix
    return Element(elem.tag, attrs, elem.children, elem.file, elem.line)
  if attrs.get('name'):
    attrs['name'] += suffix
  kids = [_suffixed(c, suffix) for c in elem.children]
  return Element(elem.tag, attrs, kids, elem.file, elem.line)


def _normalized(q: np.ndarray) -> np.ndarray:
  n = np.linalg.norm(q)
  return q / n if n > MINVAL else np.array([1.0, 0, 0, 0])


def _stem(path: str) -> str:
  return os.path.splitext(os.path.basename(path))[0]


def _adr(nums: np.ndarray, empty: int | None = None) -> np.ndarray:
  """Start addresses of consecutive blocks of the given sizes (`empty` where a size is 0)."""
  nums = np.asarray(nums, dtype=int)
  adr = np.concatenate([[0], np.cumsum(nums)[:-1]]).astype(int) if len(nums) else nums
  return adr if empty is None else np.where(nums > 0, adr, empty)


def _camera_lens(c: dict, znear: float):
  """(fovy, resolution, sensorsize, intrinsic) of a camera (mjCCamera::Compile).

  The lens attributes are single precision in MuJoCo (mjsCamera, mjModel.cam_intrinsic), so
  they are computed and rounded in float32 here too.
  """
  e = c['elem']
  f32 = np.float32
  fovy = float(c['fovy'])
  if fovy >= 180:
    raise e.error(f'fovy too large ({fovy:g}): must be below 180 degrees', attribute='fovy')
  res = np.array(c.get('resolution', (1, 1)), dtype=np.int64)
  ssize = np.array(c.get('sensorsize', (0, 0)), dtype=f32)
  lens = {k: np.array(c.get(k, (0, 0)), dtype=f32) for k in schema.CAMERA_LENS}
  has_intrinsic = any(v.any() for v in lens.values())
  has_ssize = bool(ssize[0] > 0 and ssize[1] > 0)
  if has_intrinsic and not has_ssize:
    raise e.error('focal/principal require sensorsize', attribute='sensorsize')
  if has_ssize and (res <= 0).any():
    raise e.error('sensorsize requires a positive resolution', attribute='resolution')
  intr = np.zeros(4, dtype=f32)
  if has_ssize:
    density = res.astype(f32) / ssize  # pixels per unit length
    for k, (length, pixel) in enumerate((('focal', 'focalpixel'), ('principal', 'principalpixel'))):
      for a in range(2):
        px = lens[pixel][a]
        intr[2 * k + a] = px / density[a] if px else lens[length][a]
    # atan2f (correctly rounded), then double
    fovy = float(f32(math.atan2(float(ssize[1] / f32(2)), float(intr[1])))) * 360.0 / math.pi
  else:
    intr[:2] = znear
  return fovy, res, ssize.astype(float), intr.astype(float)


def _rows(items, width: int) -> np.ndarray:
  if not items:
    return np.zeros((0, width))
  return np.array([np.asarray(x, dtype=np.float64) for x in items]).reshape(len(items), width)


def _has_sd(j: dict) -> bool:
  return 'springdamper' in j and bool((np.asarray(j['springdamper']) != 0).any())


def _rbound(g: dict, comp: _Compiler) -> float:
  s = g['size_c']
  t = g['type']
  if t == 2:
    return s[0]
  if t == 3:
    return s[0] + s[1]
  if t == 5:
    return math.hypot(s[0], s[1])
  if t == 4:
    return max(s)
  if t == 6:
    return float(np.linalg.norm(s))
  if t == 7:
    return float(np.linalg.norm(s))
  if t == 1:
    hs = comp.hfields[g['dataid']]['size']
    return math.sqrt(hs[0] ** 2 + hs[1] ** 2 + max(hs[2] ** 2, hs[3] ** 2))
  return 0.0


def _aabb(g: dict, comp: _Compiler) -> np.ndarray:
  """geom_aabb (6,): centre and half-sizes of the bounding box in the geom frame
  (mjCGeom::ComputeAABB); planes are infinite, as mjMAXVAL boxes below their surface."""
  s, t = g['size_c'], g['type']
  if t == 7:
    return np.asarray(g['aabb_c'], dtype=float)
  if t == 0:
    return np.array([0.0, 0.0, -MAXVAL / 2, MAXVAL, MAXVAL, MAXVAL / 2])
  if t == 1:
    hs = comp.hfields[g['dataid']]['size']
    return np.array([0.0, 0.0, (hs[2] - hs[3]) / 2, hs[0], hs[1], (hs[2] + hs[3]) / 2])
  half = {2: (s[0], s[0], s[0]), 3: (s[0], s[0], s[0] + s[1]), 5: (s[0], s[0], s[1])}
  return np.concatenate([np.zeros(3), half.get(t, s[:3])])


def compile_tree(
  root: Element, directory: str, read: Callable[[str], bytes], model_file: str
) -> Compiled:
  """Compiles a parsed, include-expanded MJCF tree into MuJoCo-named arrays."""
  root = expand_attachments(root, directory, read)
  return _Compiler(expand_replicates(root), directory, read, model_file).run()

"""Default classes: MuJoCo's built-in values, nested `<default>` classes and `childclass`."""

from __future__ import annotations

import copy

import numpy as np

from jaxsim._src.enums import BiasType, CamLight, DynType, GainType, GeomType, JointType
from jaxsim.mjcf import schema
from jaxsim.mjcf.parse import Element

_SOLREF = np.array([0.02, 1.0])
_SOLIMP = np.array([0.9, 0.95, 0.001, 0.5, 2.0])


def _a(*values) -> np.ndarray:
  return np.array(values, dtype=np.float64)


# MuJoCo's values for anything the user leaves out (mjs_default* in user_init.c).
BUILTIN: dict[str, dict] = {
  'joint': {
    'type': int(JointType.HINGE),
    'group': 0,
    'pos': _a(0, 0, 0),
    'axis': _a(0, 0, 1),
    'limited': 2,
    'actuatorfrclimited': 2,
    'solreflimit': _SOLREF,
    'solimplimit': _SOLIMP,
    'solreffriction': _SOLREF,
    'solimpfriction': _SOLIMP,
    'stiffness': _a(0, 0, 0),
    'range': _a(0, 0),
    'actuatorfrcrange': _a(0, 0),
    'actuatorgravcomp': False,
    'margin': 0.0,
    'ref': 0.0,
    'springref': 0.0,
    'armature': 0.0,
    'damping': _a(0, 0, 0),
    'frictionloss': 0.0,
  },
  'geom': {
    'type': int(GeomType.SPHERE),
    'contype': 1,
    'conaffinity': 1,
    'condim': 3,
    'group': 0,
    'priority': 0,
    'size': _a(0, 0, 0),
    'friction': _a(1, 0.005, 0.0001),
    'density': 1000.0,
    'shellinertia': False,
    'solmix': 1.0,
    'solref': _SOLREF,
    'solimp': _SOLIMP,
    'margin': 0.0,
    'gap': 0.0,
    'surfacevel': _a(0, 0, 0, 0, 0, 0),
    'adhesion': 0.0,
    'pos': _a(0, 0, 0),
    'fitscale': 1.0,
    'rgba': _a(0.5, 0.5, 0.5, 1),
    'fluidshape': 0,
    'fluidcoef': _a(0.5, 0.25, 1.5, 1.0, 1.0),
  },
  'site': {
    'type': 2,
    'group': 0,
    'pos': _a(0, 0, 0),
    'size': _a(0.005, 0.005, 0.005),
    'rgba': _a(0.5, 0.5, 0.5, 1),
  },
  'camera': {'pos': _a(0, 0, 0), 'fovy': 45.0, 'ipd': 0.068, 'mode': int(CamLight.FIXED)},
  'light': {'pos': _a(0, 0, 0), 'dir': _a(0, 0, -1), 'mode': int(CamLight.FIXED)},
  'pair': {
    'condim': 3,
    'friction': _a(1, 1, 0.005, 0.0001, 0.0001),
    'solref': _SOLREF,
    'solreffriction': _a(0, 0),
    'solimp': _SOLIMP,
    'gap': 0.0,
    'margin': 0.0,
    'adhesion': 0.0,
  },
  'equality': {'active': True, 'solref': _SOLREF, 'solimp': _SOLIMP},
  'tendon': {
    'group': 0,
    'limited': 2,
    'actuatorfrclimited': 2,
    'range': _a(0, 0),
    'actuatorfrcrange': _a(0, 0),
    'solreflimit': _SOLREF,
    'solimplimit': _SOLIMP,
    'solreffriction': _SOLREF,
    'solimpfriction': _SOLIMP,
    'frictionloss': 0.0,
    'springlength': _a(-1, -1),
    'width': 0.003,
    'margin': 0.0,
    'stiffness': _a(0, 0, 0),
    'damping': _a(0, 0, 0),
    'armature': 0.0,
  },
  # All actuator kinds share one default actuator, as in MuJoCo: shortcuts are views of 'general'.
  'general': {
    'group': 0,
    'ctrllimited': 2,
    'forcelimited': 2,
    'actlimited': 2,
    'ctrlrange': _a(0, 0),
    'forcerange': _a(0, 0),
    'actrange': _a(0, 0),
    'lengthrange': _a(0, 0),
    'gear': _a(1, 0, 0, 0, 0, 0),
    'damping': _a(0, 0, 0),
    'armature': 0.0,
    'cranklength': 0.0,
    'actdim': -1,
    'dyntype': int(DynType.NONE),
    'gaintype': int(GainType.FIXED),
    'biastype': int(BiasType.NONE),
    'dynprm': _a(1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    'gainprm': _a(1, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    'biasprm': _a(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
    'actearly': False,
    'inheritrange': 0.0,
  },
  'mesh': {'scale': _a(1, 1, 1), 'maxhullvert': -1, 'inertia': 2},
  'material': {},
  # mjs_defaultTexture's values of the attributes the compiler reads
  'texture': {'type': 1, 'builtin': 0, 'gridsize': np.array([1, 1]), 'embed': 2},
}


def default_kind(tag: str) -> str:
  """The default-table key an element tag reads from (every actuator tag maps to 'general')."""
  return 'general' if tag in schema.ACTUATORS else tag


class Defaults:
  """The tree of default classes: class name -> {element kind -> attribute dict}."""

  def __init__(self):
    self.classes: dict[str, dict[str, dict]] = {'main': copy.deepcopy(BUILTIN)}
    self.elements: dict[str, Element] = {}

  def get(self, name: str, kind: str, elem: Element, attribute: str = 'class') -> dict:
    """The attribute dict of `kind` in class `name`; an unknown class raises ModelError."""
    if name not in self.classes:
      raise elem.error(f'unknown default class {name!r}', attribute=attribute)
    return self.classes[name][kind]

  def read(self, elem: Element, parent: str | None, apply_shortcut) -> None:
    """Reads one `<default>` element (and its nested classes) below class `parent` (None: the
    top-level class 'main'; '': a class of its own on MuJoCo's built-in values)."""
    extra = set(elem.attrs) - {'class', '_root'}
    if extra:
      raise elem.error('unknown attribute of <default>', attribute=sorted(extra)[0])
    if parent == '':
      # the root of an attached model's classes: MuJoCo's built-in values below it
      name = elem.attrs['class']
      if name in self.classes:
        raise elem.error(f'duplicate default class {name!r}', attribute='class')
      self.classes[name] = copy.deepcopy(BUILTIN)
    elif parent is None:
      # an empty name is the unnamed main class, as in mjXReader
      name = elem.attrs.get('class', 'main') or 'main'
      if name != 'main':
        raise elem.error("the top-level default class must be 'main'", attribute='class')
    else:
      if 'class' not in elem.attrs:
        raise elem.error('a nested <default> needs a class name', attribute='class')
      name = elem.attrs['class']
      if not name:
        raise elem.error('empty class name', attribute='class')
      if name in self.classes:
        raise elem.error(f'duplicate default class {name!r}', attribute='class')
      self.classes[name] = copy.deepcopy(self.classes[parent])
    self.elements[name] = elem
    cls = self.classes[name]
    seen = set()
    for child in elem.children:
      if child.tag == 'default':
        continue
      if child.tag in schema.UNSUPPORTED_ACTUATORS:
        raise child.error(f'actuator type <{child.tag}> is not supported by jaxsim')
      if child.tag not in schema.DEFAULT_CHILDREN:
        raise child.error('unknown element in <default>')
      if child.tag in seen:
        raise child.error(f'<{child.tag}> given twice in one default class')
      seen.add(child.tag)
      # no element in a default class has children but a material's texture layers
      schema.only_children(child, {'layer'} if child.tag == 'material' else set())
      for attr in child.attrs:
        if attr in schema.NODEFAULT:
          raise child.error('attribute cannot be set in a default class', attribute=attr)
      kind = default_kind(child.tag)
      if kind == 'general' and child.tag != 'general':
        cls[kind] = apply_shortcut(child, cls[kind])
      else:
        cls[kind] = schema.read_attrs(child, schema.DEFAULT_CHILDREN[child.tag], cls[kind])
    for child in elem.children:
      if child.tag == 'default':
        self.read(child, name, apply_shortcut)

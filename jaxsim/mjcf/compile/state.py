"""The state of one compilation: what mjCModel holds while mjCModel::Compile runs.

`CompileState` declares every field the sections read and write, each with its MuJoCo default
(mjs_defaultSpec's compiler settings, mj_defaultOption, mj_defaultLROpt) or empty; the sections
fill it in the order jaxsim.mjcf.compile runs them. Its methods are the name tables and
per-element settings every section consults (mjCModel's namespaces, default classes, per-model
compiler settings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxsim.mjcf import schema
from jaxsim.mjcf.defaults import Defaults
from jaxsim.mjcf.mesh import MeshData
from jaxsim.mjcf.parse import AssetFiles, Element

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


class Compiled(dict):
  """MuJoCo-named arrays and counts of one compiled model, plus names and meta information."""

  def __getattr__(self, name):
    try:
      return self[name]
    except KeyError:
      raise AttributeError(name) from None


def default_compiler() -> dict[str, Any]:
  """<compiler>'s settings before the model's own (mjs_defaultSpec)."""
  return {
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
    'passthrough': 0,
  }


def default_option() -> dict[str, Any]:
  """<option>'s settings before the model's own (mj_defaultOption), fresh arrays each call."""
  return {
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


def _field(factory: Callable[[], Any]) -> Any:
  """A dataclass field whose default each instance makes afresh."""
  return dataclasses.field(default_factory=factory)


@dataclasses.dataclass(eq=False)
class CompileState:
  """One compilation: the partial model, filled section by section in MuJoCo's order.

  Element dicts (bodies, joints, geoms, ...) are the attributes read from the XML, under their
  MJCF names, plus what the compiler adds under `_c`-suffixed or MuJoCo-named keys ('pos_c',
  'qposadr', ...): the sections that compile them document which.
  """

  # ---- inputs
  root: Element  # the model tree, attachments and replicates expanded (fuse reads references)
  directory: str  # where relative asset files resolve, after meshdir/texturedir
  read: AssetFiles  # reads an asset file (from the assets dict or the disk)
  model_file: str  # the model's file, named by the world body's element in errors

  # ---- global settings (options.py)
  model_name: str = 'MuJoCo Model'  # <mujoco model>
  comp: dict[str, Any] = _field(default_compiler)  # <compiler> settings of this model
  # attached models' angle, eulerseq and autolimits, by the file their elements come from
  elem_comp: dict[str, dict] = _field(dict)
  lengthrange_opt: dict[str, Any] = _field(lambda: dict(LENGTHRANGE_DEFAULTS))  # <lengthrange>
  opt: dict[str, Any] = _field(default_option)  # <option> and its <flag>s
  size: dict[str, Any] = _field(dict)  # <size> attributes, as given
  nkey_elem: Element | None = None  # the <size> that set nkey, named when nkey is too large
  statistic: dict[str, Any] = _field(dict)  # <statistic> attributes, as given
  znear: float = 0.01  # <visual><map znear>: the focal length of cameras without a sensor
  # <extension> plugin instances by name: (plugin, config, element); declared plugin names
  plugin_instances: dict[str, tuple[str, dict, Element]] = _field(dict)
  plugins_declared: set[str] = _field(set)
  implicit_actuator_plugins: int = 0  # instances made for actuators naming a plugin (actuators)

  # ---- names, notes (every section)
  defaults: Defaults = _field(Defaults)  # <default> classes
  names: dict[str, dict[str, int]] = _field(dict)  # namespace -> name -> index
  name_lists: dict[str, list[str]] = _field(dict)  # namespace -> names by index ('' unnamed)
  unsupported: list[str] = _field(list)  # notes on what jaxsim ignores, each once
  # actuators whose lengthrange needs MuJoCo's simulation: (index, file, line, tag)
  lengthrange_sim: list[tuple[int, str, int, str]] = _field(list)

  # ---- assets (assets.py)
  # asset kind -> (element, attributes) in document order
  assets: dict[str, list[tuple[Element, dict]]] = _field(
    lambda: {'mesh': [], 'hfield': [], 'material': [], 'texture': [], 'skin': []}
  )
  meshes: list[MeshData] = _field(list)  # compiled meshes, by mesh id
  hfields: list[dict] = _field(list)  # compiled hfields: size, nrow, ncol, data

  # ---- the body tree (tree.py, bodies.py, fuse.py), by id; the world is bodies[0]
  bodies: list[dict] = _field(list)
  joints: list[dict] = _field(list)
  geoms: list[dict] = _field(list)
  sites: list[dict] = _field(list)
  cameras: list[dict] = _field(list)
  lights: list[dict] = _field(list)
  nq: int = 0  # qpos size (bodies.py)
  nv: int = 0  # dof count (bodies.py)

  # ---- later sections
  tendons: list[dict] = _field(list)  # compiled tendons (actuators read their limits)
  out: Compiled = _field(Compiled)  # the result, written from build_body_arrays on

  # ---------------------------------------------------------------- per-element settings

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

  # ---------------------------------------------------------------- names and classes

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

  def note_unsupported(self, feature: str):
    if feature not in self.unsupported:
      self.unsupported.append(feature)

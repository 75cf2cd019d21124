"""Option, Model, Data and Contact: declared dataclasses that are JAX pytrees.

Every field is declared in its class with its type, its shape in MuJoCo's notation and a one-line
doc (`field('(nbody,) mass')`: the shape, then the doc; no shape for scalars, dicts and names;
`fields_doc(cls)` lists them). Shapes name MuJoCo's sizes (nbody, nv, nu, ...; see each class).

Static or dynamic is decided by the declaration, not by a value's dtype: a field declared
`static=True` (counts, integer arrays of types, ids and addresses, names, solver and integrator
settings, and the few float arrays that are structure: wrap_prm, sensor_plugin_prm,
actuator_plugin_prm) lives in the pytree's treedef (hashed by content, so two loads of one file
share a jit cache; never traced); every other field is a child: a `jax.Array` leaf (a Model's
physical parameters, all of Data and Contact) or a pytree node (Model.opt, Data.contact). So
`jax.vmap` over a batch of models and `jax.grad` with respect to masses or frictions work without
recompiling (see DESIGN.md).

Every Model has every declared field: a model without a feature has its empty value (zero-length
arrays, count 0). The instances are immutable; `.replace(**changes)` makes a changed copy.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.enums import NWARNING, DisableBit, TrnType, WrapType


class _Static:
  """Wraps a static value so that it can sit in a treedef: hashed and compared by content."""

  __slots__ = ('value', '_hash')

  def __init__(self, value):
    self.value = value
    self._hash = hash(_key(value))

  def __hash__(self):
    return self._hash

  def __eq__(self, other):
    return (
      isinstance(other, _Static)
      and self._hash == other._hash
      and _key(self.value) == _key(other.value)
    )


def _key(v):
  if isinstance(v, np.ndarray):
    return ('nd', v.shape, v.dtype.str, v.tobytes())
  if isinstance(v, (tuple, list)):
    return ('seq', tuple(_key(x) for x in v))
  if isinstance(v, Mapping):
    return ('map', tuple(sorted((k, _key(x)) for k, x in v.items())))
  try:
    hash(v)
    return v
  except TypeError:
    return ('id', id(v))


def field(doc: str, *, static: bool = False, **kwargs) -> Any:
  """Declares a field: `doc` is its shape in MuJoCo's notation, then a one-line description
  ('(nbody, 3) local position'; no shape for scalars and non-arrays); static fields go into the
  treedef, the others are pytree children. kwargs go to dataclasses.field (e.g. default)."""
  shape, text = '', doc
  if doc.startswith('('):
    depth = 0
    for i, ch in enumerate(doc):
      depth += {'(': 1, ')': -1}.get(ch, 0)
      if depth == 0:
        shape, text = doc[: i + 1], doc[i + 1 :].strip()
        break
  meta = {'static': static, 'shape': shape, 'doc': text}
  return dataclasses.field(metadata=meta, **kwargs)


def fields_doc(cls) -> dict[str, dict[str, Any]]:
  """name -> {'static', 'shape', 'doc'} of every declared field of Option, Model, Data, Contact."""
  return {f.name: dict(f.metadata) for f in dataclasses.fields(cls)}


def static_fields(cls) -> frozenset[str]:
  """Names of the static fields of a declared class."""
  return frozenset(cls._static_names)


class Impl(str, enum.Enum):
  """MJX's implementation names (mjx.Impl). jaxsim's Models and Data are its own JAX engine:
  their `impl` is Impl.JAX, so MJX code reading `model.impl.value` runs; jaxsim.mjx refuses the
  others."""

  JAX = 'jax'
  C = 'c'
  CPP = 'cpp'
  WARP = 'warp'


class _Struct:
  """Base of the declared pytrees: attribute access, immutability, replace, repr."""

  @property
  def impl(self) -> Impl:
    """Impl.JAX: which engine runs this (MJX's Model.impl and Data.impl)."""
    return Impl.JAX

  _names: tuple[str, ...] = ()
  _static_names: tuple[str, ...] = ()
  _child_names: tuple[str, ...] = ()

  def __getattr__(self, name):
    # only reached for names that are not fields (or methods)
    raise AttributeError(f'{type(self).__name__} has no field {name!r}')

  def _immutable(self, name, value=None):
    raise AttributeError(f'{type(self).__name__} is immutable; use .replace({name}=...)')

  def fields(self) -> Iterator[str]:
    """Field names, in declaration order."""
    return iter(self._names)

  def replace(self, **changes):
    """A copy with some fields replaced (AttributeError for a name that is not a field)."""
    unknown = changes.keys() - set(self._names)
    if unknown:
      raise AttributeError(f'{type(self).__name__} has no field {sorted(unknown)[0]!r}')
    new = object.__new__(type(self))
    state = dict(self.__dict__)
    state.update(changes)
    if not changes.keys().isdisjoint(self._static_names):
      state.pop('_cached_aux', None)
    new.__dict__.update(state)
    return new

  def tree_replace(self, params: Mapping[str, Any]):
    """A copy with fields replaced by dotted paths into nested structs, e.g.
    `m.tree_replace({'opt.timestep': 0.001, 'geom_friction': f})` (MJX's
    PyTreeNode.tree_replace; domain randomisation builds its Models and in_axes trees so)."""
    new = self
    for path, value in params.items():
      new = _tree_replace(new, path.split('.'), value)
    return new

  def _static_aux(self) -> tuple[_Static, ...]:
    """The treedef's part of this object: its static fields, content-hashed (cached)."""
    aux = self.__dict__.get('_cached_aux')
    if aux is None:
      aux = tuple(_Static(self.__dict__[k]) for k in self._static_names)
      self.__dict__['_cached_aux'] = aux
    return aux

  def _flatten(self):
    return tuple(self.__dict__[k] for k in self._child_names), self._static_aux()

  def _flatten_with_keys(self):
    keyed = tuple((jax.tree_util.GetAttrKey(k), self.__dict__[k]) for k in self._child_names)
    return keyed, self._static_aux()

  @classmethod
  def _unflatten(cls, aux, children):
    obj = object.__new__(cls)
    state = dict(zip(cls._child_names, children, strict=True))
    state.update(zip(cls._static_names, (s.value for s in aux), strict=True))
    state['_cached_aux'] = aux
    obj.__dict__.update(state)
    return obj

  def __repr__(self):
    parts = []
    for k in self._names:
      v = self.__dict__[k]
      if isinstance(v, (np.ndarray, jax.Array, jax.ShapeDtypeStruct)):
        parts.append(f'{k}={v.dtype}{list(v.shape)}')
      elif isinstance(v, (int, float, str, bool)):
        parts.append(f'{k}={v!r}')
    return f'{type(self).__name__}({", ".join(parts)})'


def _tree_replace(base: _Struct, path: list[str], value: Any) -> _Struct:
  if len(path) == 1:
    return base.replace(**{path[0]: value})
  inner = getattr(base, path[0])
  return base.replace(**{path[0]: _tree_replace(inner, path[1:], value)})


def _declared(cls):
  """Makes a declared class a frozen keyword-only dataclass and registers it as a pytree."""
  cls = dataclasses.dataclass(frozen=True, eq=False, repr=False, kw_only=True)(cls)
  fs = dataclasses.fields(cls)
  cls._names = tuple(f.name for f in fs)
  cls._static_names = tuple(f.name for f in fs if f.metadata['static'])
  cls._child_names = tuple(f.name for f in fs if not f.metadata['static'])
  cls.__setattr__ = _Struct._immutable
  cls.__delattr__ = _Struct._immutable
  jax.tree_util.register_pytree_with_keys(
    cls, cls._flatten_with_keys, cls._unflatten, flatten_func=cls._flatten
  )
  return cls


@_declared
class Option(_Struct):
  """Physics options (mjOption). Solver, integrator and flag settings are static; tolerances and
  physical constants are dynamic (scalars and small vectors)."""

  # timing and solver parameters
  timestep: jax.Array = field('() timestep')
  impratio: jax.Array = field('() ratio of friction-to-normal contact impedance')
  tolerance: jax.Array = field('() main solver tolerance')
  ls_tolerance: jax.Array = field('() CG/Newton linesearch tolerance')
  noslip_tolerance: jax.Array = field('() noslip solver tolerance')
  ccd_tolerance: jax.Array = field('() convex collision solver tolerance')
  sleep_tolerance: jax.Array = field('() sleep velocity tolerance')
  # physical constants
  gravity: jax.Array = field('(3,) gravitational acceleration')
  wind: jax.Array = field('(3,) wind (for lift, drag and viscosity)')
  magnetic: jax.Array = field('(3,) global magnetic flux')
  density: jax.Array = field('() density of medium')
  viscosity: jax.Array = field('() viscosity of medium')
  # override contact solver parameters (if enabled)
  o_margin: jax.Array = field('() margin')
  o_solref: jax.Array = field('(2,) solref')
  o_solimp: jax.Array = field('(5,) solimp')
  o_friction: jax.Array = field('(5,) friction')
  # discrete settings
  integrator: int = field('integration mode (mjtIntegrator)', static=True)
  cone: int = field('type of friction cone (mjtCone)', static=True)
  jacobian: int = field('type of Jacobian (mjtJacobian)', static=True)
  solver: int = field('solver algorithm (mjtSolver)', static=True)
  iterations: int = field('maximum number of main solver iterations', static=True)
  ls_iterations: int = field('maximum number of CG/Newton linesearch iterations', static=True)
  noslip_iterations: int = field('maximum number of noslip solver iterations', static=True)
  ccd_iterations: int = field('maximum number of convex collision solver iterations', static=True)
  sdf_iterations: int = field('max number of iterations for gradient descent', static=True)
  sdf_initpoints: int = field('number of starting points for gradient descent', static=True)
  disableflags: int = field(
    'bit flags for disabling standard features (mjtDisableBit)', static=True
  )
  enableflags: int = field('bit flags for enabling optional features (mjtEnableBit)', static=True)
  disableactuator: int = field('bit flags for disabling actuators by group id', static=True)
  # jaxsim
  has_fluid_params: int = field(
    '1 if density or viscosity > 0: fluid forces are traced only then (as in MJX)', static=True
  )


@_declared
class Model(_Struct):
  """A compiled model: MuJoCo's mjModel fields with MuJoCo's names and element order.

  Counts (`nq nv nu na nbody njnt ngeom nsite nmesh neq ntendon nsensor ...`), integer arrays
  (types, ids, addresses, flags), names and `opt`'s solver settings are static; floating-point
  arrays (`body_mass (nbody,)`, `geom_size (ngeom, 3)`, `qpos0 (nq,)`, ...) are jax.Array leaves.
  Sizes in shapes that are not fields: nmeshvert, nmeshface, nmeshpoly, nmeshpolyvert,
  nmeshpolymap (sums of the mesh_*num arrays), nhfielddata (sum of hfield_nrow * hfield_ncol),
  nnumericdata (sum of numeric_size), ntext (custom texts), ndepth and nwidth (tree_levels).
  """

  # sizes
  nq: int = field('number of generalized coordinates = dim(qpos)', static=True)
  nv: int = field('number of degrees of freedom = dim(qvel)', static=True)
  nu: int = field('number of actuators/controls = dim(ctrl)', static=True)
  na: int = field('number of activation states = dim(act)', static=True)
  nbody: int = field('number of bodies', static=True)
  njnt: int = field('number of joints', static=True)
  ngeom: int = field('number of geoms', static=True)
  nsite: int = field('number of sites', static=True)
  ncam: int = field('number of cameras', static=True)
  nlight: int = field('number of lights', static=True)
  nmesh: int = field('number of meshes', static=True)
  nhfield: int = field('number of heightfields', static=True)
  nmocap: int = field('number of mocap bodies', static=True)
  ntendon: int = field('number of tendons', static=True)
  nwrap: int = field('number of wrap objects in all tendon paths', static=True)
  neq: int = field('number of equality constraints', static=True)
  npair: int = field('number of predefined geom pairs', static=True)
  nexclude: int = field('number of excluded geom pairs', static=True)
  nsensor: int = field('number of sensors', static=True)
  nsensordata: int = field('number of mjtNums in sensor data vector', static=True)
  nplugin: int = field('number of plugin instances', static=True)
  nnumeric: int = field('number of numeric custom fields', static=True)
  nkey: int = field('number of keyframes', static=True)
  # options
  opt: Option = field('physics options (mjOption)')
  # bodies
  body_parentid: np.ndarray = field("(nbody,) id of body's parent", static=True)
  body_rootid: np.ndarray = field('(nbody,) ancestor that is direct child of world', static=True)
  body_weldid: np.ndarray = field('(nbody,) top dof-less ancestor; mocap: own root', static=True)
  body_mocapid: np.ndarray = field('(nbody,) id of mocap data; -1: none', static=True)
  body_jntnum: np.ndarray = field('(nbody,) number of joints for this body', static=True)
  body_jntadr: np.ndarray = field('(nbody,) start addr of joints; -1: no joints', static=True)
  body_dofnum: np.ndarray = field('(nbody,) number of motion degrees of freedom', static=True)
  body_dofadr: np.ndarray = field('(nbody,) start addr of dofs; -1: no dofs', static=True)
  body_geomnum: np.ndarray = field('(nbody,) number of geoms', static=True)
  body_geomadr: np.ndarray = field('(nbody,) start addr of geoms; -1: no geoms', static=True)
  body_sameframe: np.ndarray = field('(nbody,) same frame as inertia (mjtSameframe)', static=True)
  body_depth: np.ndarray = field('(nbody,) depth in the kinematic tree (world: 0)', static=True)
  body_pos: jax.Array = field('(nbody, 3) position offset rel. to parent body')
  body_quat: jax.Array = field('(nbody, 4) orientation offset rel. to parent body')
  body_ipos: jax.Array = field('(nbody, 3) local position of center of mass')
  body_iquat: jax.Array = field('(nbody, 4) local orientation of inertia ellipsoid')
  body_mass: jax.Array = field('(nbody,) mass')
  body_subtreemass: jax.Array = field('(nbody,) mass of subtree starting at this body')
  body_inertia: jax.Array = field('(nbody, 3) diagonal inertia in ipos/iquat frame')
  body_gravcomp: jax.Array = field('(nbody,) antigravity force, units of body weight')
  # joints
  jnt_type: np.ndarray = field('(njnt,) type of joint (mjtJoint)', static=True)
  jnt_qposadr: np.ndarray = field("(njnt,) start addr in 'qpos' for joint's data", static=True)
  jnt_dofadr: np.ndarray = field("(njnt,) start addr in 'qvel' for joint's data", static=True)
  jnt_bodyid: np.ndarray = field("(njnt,) id of joint's body", static=True)
  jnt_group: np.ndarray = field('(njnt,) group for visibility', static=True)
  jnt_limited: np.ndarray = field('(njnt,) does joint have limits', static=True)
  jnt_actfrclimited: np.ndarray = field('(njnt,) has actuator force limits', static=True)
  jnt_actgravcomp: np.ndarray = field('(njnt,) gravcomp force applied via actuators', static=True)
  jnt_solref: jax.Array = field('(njnt, 2) constraint solver reference: limit')
  jnt_solimp: jax.Array = field('(njnt, 5) constraint solver impedance: limit')
  jnt_pos: jax.Array = field('(njnt, 3) local anchor position')
  jnt_axis: jax.Array = field('(njnt, 3) local joint axis')
  jnt_stiffness: jax.Array = field('(njnt,) linear stiffness coefficient')
  jnt_stiffnesspoly: jax.Array = field('(njnt, 2) high-order stiffness coefficients')
  jnt_springdamper: jax.Array = field(
    '(njnt, 2) springdamper (timeconst, dampratio), made jnt_stiffness, dof_damping by set_const'
  )
  jnt_range: jax.Array = field('(njnt, 2) joint limits')
  jnt_actfrcrange: jax.Array = field('(njnt, 2) range of total actuator force')
  jnt_margin: jax.Array = field('(njnt,) min distance for limit detection')
  qpos0: jax.Array = field('(nq,) qpos values at default pose')
  qpos_spring: jax.Array = field('(nq,) reference pose for springs')
  # dofs
  dof_bodyid: np.ndarray = field("(nv,) id of dof's body", static=True)
  dof_jntid: np.ndarray = field("(nv,) id of dof's joint", static=True)
  dof_parentid: np.ndarray = field("(nv,) id of dof's parent; -1: none", static=True)
  dof_solref: jax.Array = field('(nv, 2) constraint solver reference: frictionloss')
  dof_solimp: jax.Array = field('(nv, 5) constraint solver impedance: frictionloss')
  dof_frictionloss: jax.Array = field('(nv,) dof friction loss')
  dof_armature: jax.Array = field('(nv,) dof armature inertia/mass')
  dof_damping: jax.Array = field('(nv,) linear damping coefficient')
  dof_dampingpoly: jax.Array = field('(nv, 2) high-order damping coefficients')
  # geoms
  geom_type: np.ndarray = field('(ngeom,) geometric type (mjtGeom)', static=True)
  geom_contype: np.ndarray = field('(ngeom,) geom contact type', static=True)
  geom_conaffinity: np.ndarray = field('(ngeom,) geom contact affinity', static=True)
  geom_condim: np.ndarray = field('(ngeom,) contact dimensionality (1, 3, 4, 6)', static=True)
  geom_bodyid: np.ndarray = field("(ngeom,) id of geom's body", static=True)
  geom_dataid: np.ndarray = field("(ngeom,) id of geom's mesh/hfield; -1: none", static=True)
  geom_group: np.ndarray = field('(ngeom,) group for visibility', static=True)
  geom_priority: np.ndarray = field('(ngeom,) geom contact priority', static=True)
  geom_sameframe: np.ndarray = field('(ngeom,) same frame as body (mjtSameframe)', static=True)
  geom_fluidshape: np.ndarray = field(
    '(ngeom,) fluid interaction model: 0 none, 1 ellipsoid (geom_fluid[0])', static=True
  )
  geom_solmix: jax.Array = field('(ngeom,) mixing coef for solref/imp in geom pair')
  geom_solref: jax.Array = field('(ngeom, 2) constraint solver reference: contact')
  geom_solimp: jax.Array = field('(ngeom, 5) constraint solver impedance: contact')
  geom_size: jax.Array = field('(ngeom, 3) geom-specific size parameters')
  geom_aabb: jax.Array = field('(ngeom, 6) bounding box, (center, size)')
  geom_rbound: jax.Array = field('(ngeom,) radius of bounding sphere')
  geom_pos: jax.Array = field('(ngeom, 3) local position offset rel. to body')
  geom_quat: jax.Array = field('(ngeom, 4) local orientation offset rel. to body')
  geom_friction: jax.Array = field('(ngeom, 3) friction for (slide, spin, roll)')
  geom_margin: jax.Array = field('(ngeom,) geometric inflation for contact')
  geom_gap: jax.Array = field('(ngeom,) additional contact detection buffer')
  geom_fluidcoef: jax.Array = field(
    '(ngeom, 5) ellipsoid fluid model: blunt, slender, angular drag, Kutta, Magnus lift'
  )
  geom_surfacevel: jax.Array = field('(ngeom, 6) surface velocity in local frame: lin,ang')
  geom_adhesion: jax.Array = field('(ngeom,) adhesive force of contacts')
  geom_rgba: jax.Array = field('(ngeom, 4) rgba when material is omitted')
  # sites
  site_type: np.ndarray = field('(nsite,) geom type for rendering (mjtGeom)', static=True)
  site_bodyid: np.ndarray = field("(nsite,) id of site's body", static=True)
  site_group: np.ndarray = field('(nsite,) group for visibility', static=True)
  site_sameframe: np.ndarray = field('(nsite,) same frame as body (mjtSameframe)', static=True)
  site_size: jax.Array = field('(nsite, 3) geom size for rendering')
  site_pos: jax.Array = field('(nsite, 3) local position offset rel. to body')
  site_quat: jax.Array = field('(nsite, 4) local orientation offset rel. to body')
  site_rgba: jax.Array = field('(nsite, 4) rgba when material is omitted')
  # cameras
  cam_mode: np.ndarray = field('(ncam,) camera tracking mode (mjtCamLight)', static=True)
  cam_bodyid: np.ndarray = field("(ncam,) id of camera's body", static=True)
  cam_targetbodyid: np.ndarray = field('(ncam,) id of targeted body; -1: none', static=True)
  cam_pos: jax.Array = field('(ncam, 3) position rel. to body frame')
  cam_quat: jax.Array = field('(ncam, 4) orientation rel. to body frame')
  cam_poscom0: jax.Array = field('(ncam, 3) global position rel. to sub-com in qpos0')
  cam_pos0: jax.Array = field('(ncam, 3) global position rel. to body in qpos0')
  cam_mat0: jax.Array = field('(ncam, 9) global orientation in qpos0')
  cam_resolution: np.ndarray = field('(ncam, 2) resolution: pixels [width, height]', static=True)
  cam_fovy: jax.Array = field('(ncam,) y field-of-view (ortho ? len : deg)')
  cam_intrinsic: jax.Array = field('(ncam, 4) [focal length; principal point]')
  cam_sensorsize: jax.Array = field('(ncam, 2) sensor size: length [width, height]')
  # lights
  light_bodyid: np.ndarray = field("(nlight,) id of light's body", static=True)
  light_pos: jax.Array = field('(nlight, 3) position rel. to body frame')
  light_dir: jax.Array = field('(nlight, 3) direction rel. to body frame')
  # meshes
  mesh_vertadr: np.ndarray = field('(nmesh,) first vertex address', static=True)
  mesh_vertnum: np.ndarray = field('(nmesh,) number of vertices', static=True)
  mesh_faceadr: np.ndarray = field('(nmesh,) first face address', static=True)
  mesh_facenum: np.ndarray = field('(nmesh,) number of faces', static=True)
  mesh_polynum: np.ndarray = field('(nmesh,) number of polygons per mesh', static=True)
  mesh_polyadr: np.ndarray = field('(nmesh,) first polygon address per mesh', static=True)
  mesh_pos: jax.Array = field('(nmesh, 3) translation applied to asset vertices')
  mesh_quat: jax.Array = field('(nmesh, 4) rotation applied to asset vertices')
  mesh_vert: jax.Array = field('(nmeshvert, 3) vertex positions for all meshes')
  mesh_face: np.ndarray = field('(nmeshface, 3) vertex face data', static=True)
  mesh_polynormal: jax.Array = field('(nmeshpoly, 3) all polygon normals')
  mesh_polyvertadr: np.ndarray = field('(nmeshpoly,) polygon vertex start address', static=True)
  mesh_polyvertnum: np.ndarray = field('(nmeshpoly,) number of vertices per polygon', static=True)
  mesh_polyvert: np.ndarray = field('(nmeshpolyvert,) all polygon vertices', static=True)
  mesh_polymapadr: np.ndarray = field('(nmeshvert,) first polygon address per vertex', static=True)
  mesh_polymapnum: np.ndarray = field('(nmeshvert,) number of polygons per vertex', static=True)
  mesh_polymap: np.ndarray = field('(nmeshpolymap,) vertex to polygon map', static=True)
  mesh_data: tuple = field(
    '(nmesh,) compiled meshes (jaxsim.mjcf.mesh.MeshData: vertices, faces, hull graph)',
    static=True,
  )
  # height fields
  hfield_size: jax.Array = field('(nhfield, 4) (x, y, z_top, z_bottom)')
  hfield_nrow: np.ndarray = field('(nhfield,) number of rows in grid', static=True)
  hfield_ncol: np.ndarray = field('(nhfield,) number of columns in grid', static=True)
  hfield_adr: np.ndarray = field('(nhfield,) address in hfield_data', static=True)
  hfield_data: jax.Array = field('(nhfielddata,) elevation data')
  # equality constraints
  eq_type: np.ndarray = field('(neq,) constraint type (mjtEq)', static=True)
  eq_obj1id: np.ndarray = field('(neq,) id of object 1', static=True)
  eq_obj2id: np.ndarray = field('(neq,) id of object 2', static=True)
  eq_objtype: np.ndarray = field('(neq,) type of both objects (mjtObj)', static=True)
  eq_active0: np.ndarray = field('(neq,) initial enable/disable constraint state', static=True)
  eq_solref: jax.Array = field('(neq, 2) constraint solver reference')
  eq_solimp: jax.Array = field('(neq, 5) constraint solver impedance')
  eq_data: jax.Array = field('(neq, 12) numeric data for constraint')
  # tendons
  tendon_adr: np.ndarray = field("(ntendon,) address of first object in tendon's path", static=True)
  tendon_num: np.ndarray = field("(ntendon,) number of objects in tendon's path", static=True)
  tendon_group: np.ndarray = field('(ntendon,) group for visibility', static=True)
  tendon_limited: np.ndarray = field('(ntendon,) does tendon have length limits', static=True)
  tendon_actfrclimited: np.ndarray = field('(ntendon,) has actuator force limits', static=True)
  tendon_width: jax.Array = field('(ntendon,) width for rendering')
  tendon_solref_lim: jax.Array = field('(ntendon, 2) constraint solver reference: limit')
  tendon_solimp_lim: jax.Array = field('(ntendon, 5) constraint solver impedance: limit')
  tendon_solref_fri: jax.Array = field('(ntendon, 2) constraint solver reference: friction')
  tendon_solimp_fri: jax.Array = field('(ntendon, 5) constraint solver impedance: friction')
  tendon_range: jax.Array = field('(ntendon, 2) tendon length limits')
  tendon_actfrcrange: jax.Array = field('(ntendon, 2) range of total actuator force')
  tendon_margin: jax.Array = field('(ntendon,) min distance for limit detection')
  tendon_stiffness: jax.Array = field('(ntendon,) linear stiffness coefficient')
  tendon_stiffnesspoly: jax.Array = field('(ntendon, 2) high-order stiffness coefficients')
  tendon_damping: jax.Array = field('(ntendon,) linear damping coefficient')
  tendon_dampingpoly: jax.Array = field('(ntendon, 2) high-order damping coefficients')
  tendon_armature: jax.Array = field('(ntendon,) inertia associated with tendon velocity')
  tendon_frictionloss: jax.Array = field('(ntendon,) loss due to friction')
  tendon_lengthspring: jax.Array = field('(ntendon, 2) spring resting length range')
  # tendon path (wrap objects); wrap_prm is structure (side-site ids and pulley divisors)
  wrap_type: np.ndarray = field('(nwrap,) wrap object type (mjtWrap)', static=True)
  wrap_objid: np.ndarray = field('(nwrap,) object id: geom, site, joint', static=True)
  wrap_prm: np.ndarray = field('(nwrap,) divisor, joint coef, or site id (float64)', static=True)
  # actuators
  actuator_trntype: np.ndarray = field('(nu,) transmission type (mjtTrn)', static=True)
  actuator_dyntype: np.ndarray = field('(nu,) dynamics type (mjtDyn)', static=True)
  actuator_gaintype: np.ndarray = field('(nu,) gain type (mjtGain)', static=True)
  actuator_biastype: np.ndarray = field('(nu,) bias type (mjtBias)', static=True)
  actuator_trnid: np.ndarray = field('(nu, 2) transmission id: joint, tendon, site', static=True)
  actuator_actadr: np.ndarray = field('(nu,) first activation address; -1: stateless', static=True)
  actuator_actnum: np.ndarray = field('(nu,) number of activation variables', static=True)
  actuator_group: np.ndarray = field('(nu,) group for visibility', static=True)
  actuator_ctrllimited: np.ndarray = field('(nu,) is control limited', static=True)
  actuator_forcelimited: np.ndarray = field('(nu,) is force limited', static=True)
  actuator_actlimited: np.ndarray = field('(nu,) is activation limited', static=True)
  actuator_actearly: np.ndarray = field('(nu,) step activation before force', static=True)
  actuator_dynprm: jax.Array = field('(nu, 10) dynamics parameters')
  actuator_gainprm: jax.Array = field('(nu, 10) gain parameters')
  actuator_biasprm: jax.Array = field('(nu, 10) bias parameters')
  actuator_ctrlrange: jax.Array = field('(nu, 2) range of controls')
  actuator_forcerange: jax.Array = field('(nu, 2) range of forces')
  actuator_actrange: jax.Array = field('(nu, 2) range of activations')
  actuator_gear: jax.Array = field('(nu, 6) scale length and transmitted force')
  actuator_cranklength: jax.Array = field('(nu,) crank length for slider-crank')
  actuator_acc0: jax.Array = field('(nu,) acceleration from unit force in qpos0')
  actuator_length0: jax.Array = field('(nu,) actuator length in qpos0')
  actuator_lengthrange: jax.Array = field('(nu, 2) feasible actuator length range')
  actuator_damping: jax.Array = field('(nu,) linear damping coefficient')
  actuator_dampingpoly: jax.Array = field('(nu, 2) high-order damping coefficients')
  actuator_armature: jax.Array = field('(nu,) armature added to target (joint, tendon)')
  actuator_plugin: np.ndarray = field('(nu,) plugin instance id; -1: not a plugin', static=True)
  actuator_plugin_prm: np.ndarray = field(
    '(nu, 5) mujoco.pid parameters: kp, ki, kd, integral clamp, slewmax (float64)', static=True
  )
  # predefined geom pairs and excluded body pairs
  pair_dim: np.ndarray = field('(npair,) contact dimensionality', static=True)
  pair_geom1: np.ndarray = field('(npair,) id of geom1', static=True)
  pair_geom2: np.ndarray = field('(npair,) id of geom2', static=True)
  pair_signature: np.ndarray = field('(npair,) body1 << 16 + body2', static=True)
  pair_solref: jax.Array = field('(npair, 2) solver reference: contact normal')
  pair_solreffriction: jax.Array = field('(npair, 2) solver reference: contact friction')
  pair_solimp: jax.Array = field('(npair, 5) solver impedance: contact')
  pair_margin: jax.Array = field('(npair,) geometric inflation for contact')
  pair_gap: jax.Array = field('(npair,) additional contact detection buffer')
  pair_friction: jax.Array = field('(npair, 5) tangent1, 2, spin, roll1, 2')
  pair_adhesion: jax.Array = field('(npair,) adhesive force of contacts')
  exclude_signature: np.ndarray = field('(nexclude,) body1 << 16 + body2', static=True)
  # sensors
  sensor_type: np.ndarray = field('(nsensor,) sensor type (mjtSensor)', static=True)
  sensor_datatype: np.ndarray = field('(nsensor,) numeric data type (mjtDataType)', static=True)
  sensor_needstage: np.ndarray = field('(nsensor,) required compute stage (mjtStage)', static=True)
  sensor_objtype: np.ndarray = field('(nsensor,) type of sensorized object (mjtObj)', static=True)
  sensor_objid: np.ndarray = field('(nsensor,) id of sensorized object', static=True)
  sensor_reftype: np.ndarray = field('(nsensor,) type of reference frame (mjtObj)', static=True)
  sensor_refid: np.ndarray = field('(nsensor,) id of reference frame; -1: global', static=True)
  sensor_intprm: np.ndarray = field('(nsensor, 3) sensor parameters', static=True)
  sensor_dim: np.ndarray = field('(nsensor,) number of scalar outputs', static=True)
  sensor_adr: np.ndarray = field('(nsensor,) address in sensor array', static=True)
  sensor_cutoff: jax.Array = field('(nsensor,) cutoff for real and positive; 0: ignore')
  sensor_noise: jax.Array = field('(nsensor,) noise standard deviation')
  sensor_plugin: np.ndarray = field('(nsensor,) plugin instance id; -1: not a plugin', static=True)
  sensor_plugin_prm: np.ndarray = field(
    '(nsensor, 6) touch_grid parameters: nchannel, resolution (2), fov (2), gamma (float64)',
    static=True,
  )
  # custom numeric and text fields
  numeric_adr: np.ndarray = field('(nnumeric,) address of field in numeric_data', static=True)
  numeric_size: np.ndarray = field('(nnumeric,) size of numeric field', static=True)
  numeric_data: jax.Array = field('(nnumericdata,) array of all numeric fields')
  text_data: tuple = field('(ntext,) the text of each <custom><text>', static=True)
  # keyframes
  key_time: jax.Array = field('(nkey,) key time')
  key_qpos: jax.Array = field('(nkey, nq) key position')
  key_qvel: jax.Array = field('(nkey, nv) key velocity')
  key_act: jax.Array = field('(nkey, na) key activation')
  key_mpos: jax.Array = field('(nkey, 3 * nmocap) key mocap position')
  key_mquat: jax.Array = field('(nkey, 4 * nmocap) key mocap quaternion')
  key_ctrl: jax.Array = field('(nkey, nu) key control')
  # constants at qpos0, computed once per load by set_const (mj_setConst)
  dof_M0: jax.Array = field('(nv,) diag. inertia in qpos0')
  dof_invweight0: jax.Array = field('(nv,) diag. inverse inertia in qpos0')
  dof_length: jax.Array = field('(nv,) linear: 1; angular: approx. length scale')
  body_invweight0: jax.Array = field('(nbody, 2) mean inv inert in qpos0 (trn, rot)')
  body_simple: np.ndarray = field('(nbody,) 1: diag M; 2: diag M, sliders only', static=True)
  tendon_length0: jax.Array = field('(ntendon,) tendon length in qpos0')
  tendon_invweight0: jax.Array = field('(ntendon,) inv. weight in qpos0')
  stat: dict[str, Any] = field(
    'model statistics (mjStatistic: meaninertia, meanmass, meansize, extent, center)',
    static=True,
  )
  # the MJCF's own settings, names and notes
  compiler: dict[str, Any] = field(
    '<compiler> settings as compiled (angle, eulerseq, autolimits, meshdir, ...)', static=True
  )
  size: dict[str, Any] = field(
    '<size> attributes the MJCF gives (memory, nconmax, nkey, nuser_*, ...)', static=True
  )
  statistic: dict[str, Any] = field(
    '<statistic> attributes the MJCF gives (meansize, extent, center); set_const fills stat',
    static=True,
  )
  names: dict[str, tuple[str, ...]] = field(
    "object kind ('body', 'joint', 'geom', ...) -> its names in id order ('': unnamed)",
    static=True,
  )
  model_name: str = field('<mujoco model=...>', static=True)
  unsupported: tuple[str, ...] = field(
    'MJCF features compiled but not simulated, as `jaxsim info` lists them', static=True
  )
  # jaxsim: static structure derived once per Model (make_model, jaxsim._src.model.build)
  collision_pairs: dict[str, Any] = field(
    'candidate geom pairs (collision.pairs.candidate_pairs): geom1, geom2, ipair, window (n, 2);'
    ' max_geom_pairs and nconmax where set (with_max_geom_pairs, with_ncon_max)',
    static=True,
  )
  nconmax: int = field('contact slots in Data.contact (collision.driver.ncon_max)', static=True)
  nefcmax: int = field('constraint rows in Data.efc_* (constraint.layout(m).nefc)', static=True)
  tree_levels: np.ndarray = field(
    '(ndepth, nwidth) bodies at each depth >= 1, padded with nbody (a scratch slot)', static=True
  )
  tree_subtree: np.ndarray = field(
    '(nbody, nbody) int8: [i, j] = 1 if body j is in the subtree of i (i included)', static=True
  )
  tree_body_dof: np.ndarray = field(
    '(nbody, nv) int8: [b, d] = 1 if dof d moves body b (a dof of b or of an ancestor)',
    static=True,
  )
  tree_dof_dof: np.ndarray = field(
    '(nv, nv) int8: [i, j] = 1 if dof j is i or an ancestor of i (dof_parentid chain)',
    static=True,
  )
  constraint_counts: dict[str, int] = field(
    'objects that can make constraint rows: jnt_limited, tendon_limited, dof_frictionloss,'
    ' tendon_frictionloss, contact_pairs (nonzero entries / candidate pairs)',
    static=True,
  )
  dof_hasfrictionloss: np.ndarray = field(
    '(nv,) int8: 1 where dof_frictionloss != 0 (a friction-loss row; static row layout)',
    static=True,
  )
  tendon_hasfrictionloss: np.ndarray = field(
    '(ntendon,) int8: 1 where tendon_frictionloss > 0 (a friction-loss row)', static=True
  )
  ngravcomp: int = field('number of bodies with nonzero gravcomp', static=True)
  nsurfacevel: int = field(
    'number of geoms with nonzero surface velocity (0: contacts skip that term)', static=True
  )
  flg_adhesion: int = field('whether any geom or pair has nonzero adhesion', static=True)
  layout: Any = field(
    'static layout (collider groups, contact slots, constraint rows), computed once per Model'
    ' by jaxsim._src.layout',
    static=True,
    default=None,
  )

  def name2id(self, kind: str, name: str) -> int:
    """Id of the object of `kind` ('body', 'joint', 'geom', ...) called `name` (mj_name2id)."""
    names = self.names.get(kind, ())
    if name not in names:
      raise KeyError(f'no {kind} named {name!r}')
    return names.index(name)


@_declared
class Contact(_Struct):
  """Contacts in fixed slots (mjContact fields); inactive slots are masked, never removed.

  ncon in shapes: the number of slots (Model.nconmax for make_data's Data).
  """

  dist: jax.Array = field('(ncon,) distance between nearest points; neg: penetration')
  pos: jax.Array = field('(ncon, 3) position of contact point: midpoint between geoms')
  frame: jax.Array = field('(ncon, 3, 3) contact frame: row 0 the normal (geom1 to geom2)')
  includemargin: jax.Array = field('(ncon,) margin for force generation')
  friction: jax.Array = field('(ncon, 5) tangent1, 2, spin, roll1, 2')
  solref: jax.Array = field('(ncon, 2) constraint solver reference, normal direction')
  solreffriction: jax.Array = field('(ncon, 2) constraint solver reference, friction directions')
  solimp: jax.Array = field('(ncon, 5) constraint solver impedance')
  adhesion: jax.Array = field('(ncon,) adhesive force along the contact normal')
  dim: jax.Array = field(
    '(ncon,) contact space dimensionality: 1, 3, 4 or 6 (1: adhesive contact in its gap band)'
  )
  geom1: jax.Array = field('(ncon,) id of geom 1; -1: empty slot')
  geom2: jax.Array = field('(ncon,) id of geom 2; -1: empty slot')
  geom: jax.Array = field('(ncon, 2) geom ids')
  efc_address: jax.Array = field('(ncon,) address in efc; -1: not included')
  mu: jax.Array = field('(ncon,) friction of regularized cone, set by the constraint stage')
  active: jax.Array = field('(ncon,) bool: the slot holds a contact (jaxsim)')


@_declared
class Data(_Struct):
  """The simulation state and everything derived from it (mjData fields, all dynamic).

  Sizes in shapes: nefc, the constraint rows (Model.nefcmax for make_data's Data); ncon, the
  contact slots (Model.nconmax); nwarning, the mjtWarning kinds; nld, the entries of qLD's longest
  row (qld_width); nmom, the columns of an actuator's moment row (moment_cols). qLD and
  actuator_moment are in compact rows (`jaxsim.qLD_dense`, `jaxsim.actuator_moment_dense` give
  the dense forms); qM and ten_J, which MuJoCo keeps sparse, are dense here; efc_J is dense or in
  compact rows
  (sparse.py; `jaxsim.efc_J_dense` gives the dense form): njcol, its columns, nv dense or
  Model.layout.efc_width compact; njbody, the bodies named per compact row, 0 dense or 2.
  """

  # state and control
  time: jax.Array = field('() simulation time')
  qpos: jax.Array = field('(nq,) position')
  qvel: jax.Array = field('(nv,) velocity')
  act: jax.Array = field('(na,) actuator activation')
  ctrl: jax.Array = field('(nu,) control')
  mocap_pos: jax.Array = field('(nmocap, 3) positions of mocap bodies')
  mocap_quat: jax.Array = field('(nmocap, 4) orientations of mocap bodies')
  eq_active: jax.Array = field('(neq,) bool: enable/disable constraints')
  qacc: jax.Array = field('(nv,) acceleration')
  qacc_warmstart: jax.Array = field('(nv,) acceleration used for warmstart')
  act_dot: jax.Array = field('(na,) time-derivative of actuator activation')
  qfrc_applied: jax.Array = field('(nv,) applied generalized force')
  xfrc_applied: jax.Array = field('(nbody, 6) applied Cartesian force/torque')
  # kinematics (mj_kinematics, mj_comPos, mj_comVel)
  xpos: jax.Array = field('(nbody, 3) Cartesian position of body frame')
  xquat: jax.Array = field('(nbody, 4) Cartesian orientation of body frame')
  xmat: jax.Array = field('(nbody, 3, 3) Cartesian orientation of body frame')
  xipos: jax.Array = field('(nbody, 3) Cartesian position of body com')
  ximat: jax.Array = field('(nbody, 3, 3) Cartesian orientation of body inertia')
  xanchor: jax.Array = field('(njnt, 3) Cartesian position of joint anchor')
  xaxis: jax.Array = field('(njnt, 3) Cartesian joint axis')
  geom_xpos: jax.Array = field('(ngeom, 3) Cartesian geom position')
  geom_xmat: jax.Array = field('(ngeom, 3, 3) Cartesian geom orientation')
  site_xpos: jax.Array = field('(nsite, 3) Cartesian site position')
  site_xmat: jax.Array = field('(nsite, 3, 3) Cartesian site orientation')
  subtree_com: jax.Array = field('(nbody, 3) center of mass of each subtree')
  cinert: jax.Array = field('(nbody, 10) com-based body inertia and mass')
  cdof: jax.Array = field('(nv, 6) com-based motion axis of each dof (rot:lin)')
  cvel: jax.Array = field('(nbody, 6) com-based velocity (rot:lin)')
  cdof_dot: jax.Array = field('(nv, 6) time-derivative of cdof (rot:lin)')
  # tendons and actuators (mj_tendon, mj_transmission, mj_fwdActuation)
  ten_length: jax.Array = field('(ntendon,) tendon lengths')
  ten_velocity: jax.Array = field('(ntendon,) tendon velocities')
  ten_J: jax.Array = field('(ntendon, nv) tendon Jacobian')
  ten_wrapadr: jax.Array = field("(ntendon,) start address of tendon's path")
  ten_wrapnum: jax.Array = field('(ntendon,) number of wrap points in path')
  wrap_obj: jax.Array = field('(2 * nwrap,) geom id; -1: site; -2: pulley')
  wrap_xpos: jax.Array = field('(2 * nwrap, 3) Cartesian 3D points in all paths')
  actuator_length: jax.Array = field('(nu,) actuator lengths')
  actuator_velocity: jax.Array = field('(nu,) actuator velocities')
  actuator_moment: jax.Array = field(
    '(nu, nmom) actuator moments at the columns types.moment_cols (MuJoCo keeps them sparse too);'
    ' jaxsim.actuator_moment_dense gives the dense (nu, nv)'
  )
  actuator_force: jax.Array = field('(nu,) actuator force in actuation space')
  # inertia and forces
  qM: jax.Array = field('(nv, nv) total inertia')
  M: jax.Array = field(
    "(nv, nld) qM's lower triangle in qLD's compact rows: row i holds M[i, j] for the ancestor"
    " dofs j of i, root first, then M[i, i] (MuJoCo's mjData.M on M_rowadr, M_colind,"
    ' left-aligned), zero after; what the factor and the solvers read'
  )
  qLD: jax.Array = field(
    "(nv, nld) L'*D*L factor of qM in compact rows, MuJoCo's values and layout: row i holds "
    "L[i, j] for the ancestor dofs j of i, root first, then D[i] (MuJoCo's row i of qLD on "
    'M_rowadr, M_colind, left-aligned), zero after; jaxsim.qLD_dense gives the dense (nv, nv)'
  )
  qfrc_bias: jax.Array = field('(nv,) C(qpos,qvel)')
  qfrc_passive: jax.Array = field('(nv,) total passive force')
  qfrc_spring: jax.Array = field('(nv,) passive spring force')
  qfrc_damper: jax.Array = field('(nv,) passive damper force')
  qfrc_gravcomp: jax.Array = field('(nv,) passive gravity compensation force')
  qfrc_fluid: jax.Array = field('(nv,) passive fluid force')
  qfrc_adhesion: jax.Array = field('(nv,) passive contact adhesion force')
  qfrc_actuator: jax.Array = field('(nv,) actuator force')
  qfrc_smooth: jax.Array = field('(nv,) net unconstrained force')
  qacc_smooth: jax.Array = field('(nv,) unconstrained acceleration')
  qfrc_constraint: jax.Array = field('(nv,) constraint force')
  qfrc_inverse: jax.Array = field('(nv,) net external force (mj_inverse)')
  # contacts and constraints
  contact: Contact = field('contact slots (ncon of them)')
  ncon: jax.Array = field('() number of detected contacts (active slots)')
  efc_J: jax.Array = field(
    '(nefc, njcol) constraint Jacobian: dense (njcol nv) or the values of compact rows'
  )
  efc_J_body: jax.Array = field(
    '(nefc, njbody) int32 two bodies whose dof chains hold each compact efc_J row (sparse.py)'
  )
  efc_pos: jax.Array = field('(nefc,) constraint position (equality, contact)')
  efc_margin: jax.Array = field('(nefc,) inclusion margin (contact)')
  efc_frictionloss: jax.Array = field('(nefc,) frictionloss (friction)')
  efc_D: jax.Array = field('(nefc,) constraint mass')
  efc_R: jax.Array = field('(nefc,) inverse constraint mass')
  efc_KBIP: jax.Array = field("(nefc, 4) stiffness, damping, impedance, imp'")
  efc_vel: jax.Array = field('(nefc,) velocity in constraint space: J*qvel')
  efc_aref: jax.Array = field('(nefc,) reference pseudo-acceleration')
  efc_force: jax.Array = field('(nefc,) constraint force in constraint space')
  efc_state: jax.Array = field('(nefc,) constraint state (mjtConstraintState)')
  efc_active: jax.Array = field('(nefc,) bool: the row is in the constraint (jaxsim)')
  efc_type: jax.Array = field('(nefc,) constraint type (mjtConstraint)')
  efc_id: jax.Array = field('(nefc,) id of object of specified type')
  # sensors, energy, diagnostics
  solver_niter: jax.Array = field('() number of solver iterations')
  solver_neval: jax.Array = field(
    '() line-search cost evaluations of the last solve (Newton, CG: mjSolverStat.neval summed over'
    ' its iterations and islands; PGS: 0)'
  )
  sensordata: jax.Array = field('(nsensordata,) sensor data array')
  energy: jax.Array = field('(2,) potential, kinetic energy')
  warning: jax.Array = field('(nwarning,) int: times each mjtWarning was raised')
  # computed on demand (mj_subtreeVel, mj_rnePostConstraint)
  subtree_linvel: jax.Array = field('(nbody, 3) linear velocity of subtree com')
  subtree_angmom: jax.Array = field('(nbody, 3) angular momentum about subtree com')
  cacc: jax.Array = field('(nbody, 6) com-based acceleration')
  cfrc_int: jax.Array = field('(nbody, 6) com-based interaction force with parent')
  cfrc_ext: jax.Array = field('(nbody, 6) com-based external force on body')
  # mj_compareFwdInv (fwdinv enable flag)
  solver_fwdinv: jax.Array = field('(2,) forward-inverse comparison: qfrc, efc')


def m_sparsity(m: Model) -> np.ndarray:
  """(nv, nv) bool: the lower triangle of MuJoCo's sparse qM and qLD (M_rownnz, M_colind): [i, j]
  where dof j is i or an ancestor of i, except that the dofs of a simple body (body_simple: its
  inertia is diagonal in its dofs) have their diagonal only."""
  anc = np.asarray(m.tree_dof_dof).astype(bool)
  simple = np.asarray(m.body_simple)[np.asarray(m.dof_bodyid)] > 0
  return anc & (~simple[:, None] | np.eye(len(simple), dtype=bool))


def qld_width(m: Model) -> int:
  """Entries in the longest compact row of qLD (nld): MuJoCo's largest M_rownnz."""
  return int(m_sparsity(m).sum(axis=1).max(initial=0))


def joint_dofs(m: Model) -> np.ndarray:
  """(njnt, nv) bool static: [j, d] where dof d belongs to joint j."""
  return np.arange(m.njnt)[:, None] == np.asarray(m.dof_jntid)[None, :]


def tendon_reach(m: Model) -> np.ndarray:
  """(ntendon, nv) bool static: the dofs a tendon's Jacobian row can reach: its joints' dofs
  (fixed), or the dofs that move the bodies of its sites and wrap geoms (spatial)."""
  moves = np.asarray(m.tree_body_dof).astype(bool)  # [b, d]: dof d moves body b
  jnt_dofs = joint_dofs(m)
  site_body, geom_body = np.asarray(m.site_bodyid), np.asarray(m.geom_bodyid)
  wtype, wobj = np.asarray(m.wrap_type), np.asarray(m.wrap_objid)
  adr, num = np.asarray(m.tendon_adr), np.asarray(m.tendon_num)
  reach = np.zeros((m.ntendon, m.nv), bool)
  for t in range(m.ntendon):
    for w in range(adr[t], adr[t] + num[t]):
      if wtype[w] == WrapType.JOINT:
        reach[t] |= jnt_dofs[wobj[w]]
      elif wtype[w] == WrapType.SITE:
        reach[t] |= moves[site_body[wobj[w]]]
      elif wtype[w] in (WrapType.SPHERE, WrapType.CYLINDER):
        reach[t] |= moves[geom_body[wobj[w]]]
  return reach


def moment_cols(m: Model) -> np.ndarray:
  """(nu, nmom) static: the dofs each actuator's moment arm row can reach, ascending, padded
  with nv: Data.actuator_moment's columns.

  A joint transmission reaches its joint's dofs; site and slider-crank transmissions the dofs
  that move their sites' bodies; a tendon those of tendon_reach. Where a body (adhesion)
  transmission is present, or some row reaches more than half of the dofs, the rows are dense:
  nmom = nv, row k's columns 0 .. nv - 1.
  """
  nu, nv = m.nu, m.nv
  dense = np.tile(np.arange(nv, dtype=np.int32), (nu, 1))
  trn, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
  if not nu or not nv or (trn == TrnType.BODY).any():
    return dense
  moves = np.asarray(m.tree_body_dof).astype(bool)  # [b, d]: dof d moves body b
  site_body = np.asarray(m.site_bodyid)
  jnt_dofs = joint_dofs(m)
  ten = tendon_reach(m) if m.ntendon else None
  reach = np.zeros((nu, nv), bool)
  for k in range(nu):
    t, i0, i1 = trn[k], trnid[k, 0], trnid[k, 1]
    if t in (TrnType.JOINT, TrnType.JOINTINPARENT):
      reach[k] = jnt_dofs[i0]
    elif t in (TrnType.SITE, TrnType.SLIDERCRANK):
      reach[k] = moves[site_body[i0]] | (moves[site_body[i1]] if i1 >= 0 else False)
    elif t == TrnType.TENDON:
      reach[k] = ten[i0]
  width = int(reach.sum(axis=1).max())
  if 2 * width > nv:
    return dense
  cols = np.full((nu, width), nv, np.int32)
  for k in range(nu):
    c = np.flatnonzero(reach[k])
    cols[k, : len(c)] = c
  return cols


def tree_structure(parentid: np.ndarray, dof_bodyid: np.ndarray, dof_parentid: np.ndarray):
  """Static masks and level lists of the kinematic tree, for dense and scanned tree passes.

  tree_levels (ndepth, width): bodies at each depth >= 1, padded with nbody (a scratch slot);
  tree_subtree (nbody, nbody): [i, j] = 1 if j is in the subtree of i (i included);
  tree_body_dof (nbody, nv): [b, d] = 1 if dof d moves body b (d of b or of an ancestor);
  tree_dof_dof (nv, nv): [i, j] = 1 if dof j is i or an ancestor of i (dof_parentid chain).
  """
  nbody, nv = len(parentid), len(dof_bodyid)
  depth = np.zeros(nbody, dtype=np.int64)
  anc = np.eye(nbody, dtype=np.int8)  # anc[i, j]: j is an ancestor of i or i
  for i in range(1, nbody):
    p = parentid[i]
    depth[i] = depth[p] + 1
    anc[i] |= anc[p]
  ndepth = int(depth.max()) if nbody > 1 else 0
  groups = [np.flatnonzero(depth == k) for k in range(1, ndepth + 1)]
  width = max((len(g) for g in groups), default=0)
  levels = np.full((ndepth, width), nbody, dtype=np.int32)
  for k, g in enumerate(groups):
    levels[k, : len(g)] = g
  dof_dof = np.eye(nv, dtype=np.int8)
  for i in range(nv):
    p = dof_parentid[i]
    if p >= 0:
      dof_dof[i] |= dof_dof[p]
  body_dof = anc[:, dof_bodyid] if nv else np.zeros((nbody, 0), np.int8)
  return {
    'tree_levels': levels,
    'tree_subtree': np.ascontiguousarray(anc.T),
    'tree_body_dof': body_dof.astype(np.int8),
    'tree_dof_dof': dof_dof,
  }


def contact_candidates(c: Mapping[str, Any]) -> np.ndarray:
  """(n, 2) geom pairs that may collide by MuJoCo's dynamic-pair rules, plus explicit <pair>s.

  Rules of mj_collision's broadphase filter: different weld bodies, contype/conaffinity
  compatible, not parent and child (unless the parent is the world or filterparent is off), not
  excluded by body signature.
  """
  ngeom = len(c['geom_type'])
  weld = np.asarray(c['body_weldid'])
  parent = np.asarray(c['body_parentid'])
  gb = np.asarray(c['geom_bodyid'])
  ct, ca = np.asarray(c['geom_contype']), np.asarray(c['geom_conaffinity'])
  i, j = np.triu_indices(ngeom, k=1)
  b1, b2 = weld[gb[i]], weld[gb[j]]
  ok = (b1 != b2) & (((ct[i] & ca[j]) != 0) | ((ct[j] & ca[i]) != 0))
  filterparent = not (int(c['opt']['disableflags']) & DisableBit.FILTERPARENT)
  if filterparent:
    wp1, wp2 = weld[parent[b1]], weld[parent[b2]]
    related = ((wp1 == b2) & (b2 != 0)) | ((wp2 == b1) & (b1 != 0))
    ok &= ~related
  lo, hi = np.minimum(gb[i], gb[j]), np.maximum(gb[i], gb[j])
  excluded = np.isin((lo << 16) + hi, np.asarray(c['exclude_signature'], dtype=np.int64))
  ok &= ~excluded
  dyn = np.stack([i[ok], j[ok]], axis=1)
  explicit = np.stack(
    [np.asarray(c['pair_geom1'], int), np.asarray(c['pair_geom2'], int)], axis=1
  ).reshape(-1, 2)
  return np.concatenate([explicit, dyn]).astype(np.int32)


def _constraint_counts(c: Mapping[str, Any]) -> dict[str, int]:
  """Static counts of objects that can generate constraint rows, from the compiled arrays."""
  count = lambda k: int(np.count_nonzero(np.asarray(c[k])))  # noqa: E731
  return {
    'jnt_limited': count('jnt_limited'),
    'tendon_limited': count('tendon_limited'),
    'dof_frictionloss': count('dof_frictionloss'),
    'tendon_frictionloss': count('tendon_frictionloss'),
    'contact_pairs': len(contact_candidates(c)),
  }


def derived(c: Mapping[str, Any]) -> dict[str, Any]:
  """The static fields make_model derives from the compiled arrays (whatever `c` says of them)."""
  out = tree_structure(c['body_parentid'], c['dof_bodyid'], c['dof_parentid'])
  out['constraint_counts'] = _constraint_counts(c)
  # which dofs and tendons have friction-loss rows is structure (constraint row layout)
  out['dof_hasfrictionloss'] = (np.asarray(c['dof_frictionloss']) != 0).astype(np.int8)
  out['tendon_hasfrictionloss'] = (np.asarray(c['tendon_frictionloss']) > 0).astype(np.int8)
  # static, as MuJoCo's ngravcomp: gravity compensation is traced only where some body has it
  out['ngravcomp'] = int(np.count_nonzero(np.asarray(c['body_gravcomp'])))
  # likewise surface velocities (MuJoCo 4's flg_surfacevel): contact rows read them only if any
  surfacevel = np.asarray(c['geom_surfacevel'])
  out['nsurfacevel'] = int(np.count_nonzero(np.any(surfacevel != 0, axis=-1)))
  # and contact adhesion (MuJoCo 4's flg_adhesion): passive pull and aref bias only if any
  adhesion = [np.asarray(c[k]) for k in ('geom_adhesion', 'pair_adhesion')]
  out['flg_adhesion'] = int(any(np.any(a != 0) for a in adhesion))
  return out


def uncomputed(c: Mapping[str, Any]) -> dict[str, Any]:
  """The Model fields computed after compilation, as they are until then: set_const's constants
  at qpos0 (zero; actuator_acc0 NaN, which muscles with force < 0 divide by), and build's
  candidate pairs (none) and Data sizes (0). set_const's own Model has these values."""
  nbody, nv, nu, ntendon, ncam = (int(c[k]) for k in ('nbody', 'nv', 'nu', 'ntendon', 'ncam'))
  none = np.zeros(0, np.int32)
  return {
    'dof_M0': np.zeros(nv),
    'dof_invweight0': np.zeros(nv),
    'dof_length': np.zeros(nv),
    'body_invweight0': np.zeros((nbody, 2)),
    'body_simple': np.zeros(nbody, np.int32),
    'tendon_length0': np.zeros(ntendon),
    'tendon_invweight0': np.zeros(ntendon),
    'actuator_length0': np.zeros(nu),
    'actuator_acc0': np.full(nu, np.nan),
    'cam_pos0': np.zeros((ncam, 3)),
    'cam_poscom0': np.zeros((ncam, 3)),
    'cam_mat0': np.zeros((ncam, 9)),
    'stat': {},
    'collision_pairs': {'geom1': none, 'geom2': none, 'ipair': none, 'window': none.reshape(0, 2)},
    'nconmax': 0,
    'nefcmax': 0,
  }


def _check_names(cls, given: Mapping[str, Any], optional: frozenset[str] = frozenset()) -> None:
  """TypeError naming the first undeclared or missing field of `cls` in `given`."""
  declared = set(cls._names)
  unknown = sorted(given.keys() - declared)
  if unknown:
    raise TypeError(
      f'{cls.__name__} has no field {unknown[0]!r} (declare it in jaxsim/_src/types.py)'
    )
  missing = sorted(declared - given.keys() - optional)
  if missing:
    raise TypeError(f'{cls.__name__} fields missing: {", ".join(missing)}')


def _static_array(v: np.ndarray) -> np.ndarray:
  """A read-only copy: int32 (int8 masks kept), float64 for the structural float arrays."""
  if np.issubdtype(v.dtype, np.floating):
    dtype = np.float64
  else:
    dtype = np.int8 if v.dtype == np.int8 else np.int32
  v = v.astype(dtype, copy=True)
  v.setflags(write=False)
  return v


def make_option(opt: Mapping[str, Any], dtype) -> Option:
  """Builds an Option from compiled option values (every mjOption field)."""
  opt = dict(opt)
  # static, as MJX's: fluid forces are traced only for models that have a fluid
  opt['has_fluid_params'] = bool(float(opt['density']) > 0 or float(opt['viscosity']) > 0)
  _check_names(Option, opt)
  static = static_fields(Option)
  return Option(
    **{k: int(v) if k in static else jnp.asarray(v, dtype=dtype) for k, v in opt.items()}
  )


def make_model(compiled: Mapping[str, Any]) -> Model:
  """Wraps compiled arrays into a Model (default float dtype for the leaves).

  `compiled` holds every field the compiler makes; the fields computed later (set_const's, the
  candidate pairs, nconmax, nefcmax) take their not-yet-computed values where it lacks them, and
  make_model derives the tree masks, constraint counts and feature flags. Static arrays become
  read-only NumPy arrays, dynamic ones jax.Arrays; TypeError for an undeclared or missing field.
  """
  dtype = jnp.asarray(0.0).dtype
  c = {**uncomputed(compiled), **compiled}
  c.update(derived(c))
  _check_names(Model, c, optional=frozenset({'layout'}))
  static = static_fields(Model)
  fields: dict[str, Any] = {}
  for k, v in c.items():
    if k == 'opt':
      fields[k] = make_option(v, dtype)
    elif k not in static:
      fields[k] = jnp.asarray(v, dtype=dtype)
    elif isinstance(v, np.ndarray):
      fields[k] = _static_array(v)
    else:
      fields[k] = v
  return Model(**fields)


def make_contact(ncon: int, dtype, xp=jnp) -> Contact:
  """Empty contact slots, as `xp` arrays (jax.numpy, or NumPy for make_data's host path)."""
  z = lambda *s: xp.zeros(s, dtype=dtype)  # noqa: E731
  i = lambda *s: xp.full(s, -1, dtype=np.int32)  # noqa: E731
  return Contact(
    dist=z(ncon),
    pos=z(ncon, 3),
    frame=z(ncon, 3, 3),
    includemargin=z(ncon),
    friction=z(ncon, 5),
    solref=z(ncon, 2),
    solreffriction=z(ncon, 2),
    solimp=z(ncon, 5),
    adhesion=z(ncon),
    dim=xp.zeros(ncon, dtype=np.int32),
    geom1=i(ncon),
    geom2=i(ncon),
    geom=i(ncon, 2),
    efc_address=i(ncon),
    mu=z(ncon),
    active=xp.zeros(ncon, dtype=bool),
  )


def _input_shapes(m: Model) -> dict[str, tuple[tuple[int, ...], str]]:
  """The Data fields a user sets: their shapes for this model, and what the sizes are."""
  nv, nu, na, nmocap = m.nv, m.nu, m.na, m.nmocap
  return {
    'time': ((), 'a scalar'),
    'qpos': ((m.nq,), 'nq'),
    'qvel': ((nv,), 'nv'),
    'act': ((na,), 'na'),
    'ctrl': ((nu,), 'nu'),
    'qacc': ((nv,), 'nv'),
    'qacc_warmstart': ((nv,), 'nv'),
    'qfrc_applied': ((nv,), 'nv'),
    'xfrc_applied': ((m.nbody, 6), 'nbody, 6'),
    'mocap_pos': ((nmocap, 3), 'nmocap, 3'),
    'mocap_quat': ((nmocap, 4), 'nmocap, 4'),
  }


def check_inputs(m: Model, d: Data) -> None:
  """Refuses a Data whose user-set fields (qpos, qvel, ctrl, ...) do not fit the model.

  Runs at trace time on static shapes (free under jit); inside vmap it sees one world's shapes.
  Raises ValueError naming the field, instead of an error from deep inside the pipeline.
  """
  if not isinstance(d, Data):
    raise TypeError(f'expected a jaxsim.Data, got {type(d).__name__} (see jaxsim.make_data)')
  for name, (shape, what) in _input_shapes(m).items():
    x = getattr(d, name)
    if isinstance(x, (list, tuple, str)):
      raise TypeError(f'Data.{name} must be an array (np.asarray), got {type(x).__name__}')
    dtype = x.dtype if isinstance(x, (np.ndarray, np.generic, jax.Array)) else np.asarray(x).dtype
    if not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)):
      raise TypeError(f'Data.{name} must be a numeric array, got {type(x).__name__}')
    got = tuple(np.shape(x))
    if got != shape:
      hint = ''
      if got[1:] == shape:
        hint = ' Batches of worlds go through jax.vmap (or jaxsim.rollout), not a leading axis.'
      raise ValueError(f'Data.{name} has shape {got}; this model needs {shape} ({what}).{hint}')


def make_data(m: Model, ncon: int | None = None, nefc: int | None = None) -> Data:
  """A Data at the model's qpos0 with zero velocity (mj_makeData + mj_resetData).

  Contact slots and constraint rows have the model's static counts (`m.nconmax`, `m.nefcmax`)
  unless given. Outside a trace the fields are made in NumPy and put on the device in one call:
  jnp.zeros would compile a program per new shape (about 40 per model, a second in all).
  """
  dtype = m.qpos0.dtype
  if ncon is None:
    ncon = int(m.nconmax)
  if nefc is None:
    nefc = int(m.nefcmax)
  lay = m.layout
  width = lay.efc_width if lay is not None and nefc == lay.nefc else 0
  leaves = (m.qpos0, m.body_pos, m.body_quat, jnp.zeros(()))  # the zeros: a tracer under jit
  traced = any(isinstance(x, jax.core.Tracer) for x in leaves)
  xp = jnp if traced else np
  z = lambda *s: xp.zeros(s, dtype=dtype)  # noqa: E731
  nv, nu, na = m.nv, m.nu, m.na
  nbody, ngeom, nsite, njnt = m.nbody, m.ngeom, m.nsite, m.njnt
  ntendon, nmocap = m.ntendon, m.nmocap
  eye = lambda n: xp.tile(xp.eye(3, dtype=dtype), (n, 1, 1))  # noqa: E731
  quat = lambda n: xp.tile(xp.array([1.0, 0, 0, 0], dtype=dtype), (n, 1))  # noqa: E731
  mocap = np.asarray(m.body_mocapid) >= 0
  body_pos, body_quat = (
    (m.body_pos, m.body_quat) if traced else map(np.asarray, (m.body_pos, m.body_quat))
  )
  d = Data(
    time=xp.zeros((), dtype=dtype),
    qpos=xp.asarray(m.qpos0, dtype=dtype),
    qvel=z(nv),
    act=z(na),
    ctrl=z(nu),
    mocap_pos=body_pos[mocap] if nmocap else z(0, 3),
    mocap_quat=body_quat[mocap] if nmocap else z(0, 4),
    eq_active=xp.asarray(np.asarray(m.eq_active0, dtype=bool)),
    qacc=z(nv),
    qacc_warmstart=z(nv),
    act_dot=z(na),
    qfrc_applied=z(nv),
    xfrc_applied=z(nbody, 6),
    xpos=z(nbody, 3),
    xquat=quat(nbody),
    xmat=eye(nbody),
    xipos=z(nbody, 3),
    ximat=eye(nbody),
    xanchor=z(njnt, 3),
    xaxis=z(njnt, 3),
    geom_xpos=z(ngeom, 3),
    geom_xmat=eye(ngeom),
    site_xpos=z(nsite, 3),
    site_xmat=eye(nsite),
    subtree_com=z(nbody, 3),
    cinert=z(nbody, 10),
    cdof=z(nv, 6),
    cvel=z(nbody, 6),
    cdof_dot=z(nv, 6),
    ten_length=z(ntendon),
    ten_velocity=z(ntendon),
    ten_J=z(ntendon, nv),
    ten_wrapadr=xp.zeros(ntendon, dtype=np.int32),
    ten_wrapnum=xp.zeros(ntendon, dtype=np.int32),
    wrap_obj=xp.zeros(2 * m.nwrap, dtype=np.int32),
    wrap_xpos=z(2 * m.nwrap, 3),
    actuator_length=z(nu),
    actuator_velocity=z(nu),
    actuator_moment=z(nu, moment_cols(m).shape[1]),
    actuator_force=z(nu),
    qM=z(nv, nv),
    M=z(nv, qld_width(m)),
    qLD=z(nv, qld_width(m)),
    qfrc_bias=z(nv),
    qfrc_passive=z(nv),
    qfrc_spring=z(nv),
    qfrc_damper=z(nv),
    qfrc_gravcomp=z(nv),
    qfrc_fluid=z(nv),
    qfrc_adhesion=z(nv),
    qfrc_actuator=z(nv),
    qfrc_smooth=z(nv),
    qacc_smooth=z(nv),
    qfrc_constraint=z(nv),
    qfrc_inverse=z(nv),
    contact=make_contact(ncon, dtype, xp),
    ncon=xp.zeros((), dtype=np.int32),
    efc_J=z(nefc, width or nv),
    efc_J_body=xp.zeros((nefc, 2 if width else 0), np.int32),
    efc_pos=z(nefc),
    efc_margin=z(nefc),
    efc_frictionloss=z(nefc),
    efc_D=z(nefc),
    efc_R=z(nefc),
    efc_KBIP=z(nefc, 4),
    efc_vel=z(nefc),
    efc_aref=z(nefc),
    efc_force=z(nefc),
    efc_state=xp.zeros(nefc, dtype=np.int32),
    efc_active=xp.zeros(nefc, dtype=bool),
    efc_type=xp.zeros(nefc, dtype=np.int32),
    efc_id=xp.zeros(nefc, dtype=np.int32),
    solver_niter=xp.zeros((), dtype=np.int32),
    solver_neval=xp.zeros((), dtype=np.int32),
    sensordata=z(m.nsensordata),
    energy=z(2),
    warning=xp.zeros(NWARNING, dtype=np.int32),  # mjtWarning order
    # computed lazily, for the sensors that need them (mj_subtreeVel, mj_rnePostConstraint)
    subtree_linvel=z(nbody, 3),
    subtree_angmom=z(nbody, 3),
    cacc=z(nbody, 6),
    cfrc_int=z(nbody, 6),
    cfrc_ext=z(nbody, 6),
    solver_fwdinv=z(2),  # mj_compareFwdInv, with the fwdinv enable flag
  )
  return d if traced else jax.device_put(d)

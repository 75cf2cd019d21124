"""Option, Model, Data, Contact and MuJoCo's enums, as JAX pytrees.

Structure is static, physical parameters are dynamic (see DESIGN.md): a Model's integer arrays,
counts, names and solver settings live in the pytree's treedef (hashable, never traced), and its
floating-point arrays are `jax.Array` leaves, so `jax.vmap` over a batch of models and `jax.grad`
with respect to masses or frictions work without recompiling.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.enums import NWARNING, DisableBit


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


class _Struct:
  """A pytree of named fields: names in `_dynamic` are leaves, all others are static."""

  __slots__ = ('_fields', '_dynamic')

  def __init__(self, fields: dict[str, Any], dynamic: tuple[str, ...]):
    object.__setattr__(self, '_fields', dict(fields))
    object.__setattr__(self, '_dynamic', tuple(dynamic))

  def __getattr__(self, name):
    try:
      return object.__getattribute__(self, '_fields')[name]
    except KeyError:
      raise AttributeError(f'{type(self).__name__} has no field {name!r}') from None

  def __setattr__(self, name, value):
    raise AttributeError(f'{type(self).__name__} is immutable; use .replace({name}=...)')

  def __dir__(self):
    return list(self._fields) + ['replace', 'fields']

  def fields(self) -> Iterator[str]:
    """Field names."""
    return iter(self._fields)

  def replace(self, **changes):
    """A copy with some fields replaced."""
    unknown = set(changes) - set(self._fields)
    if unknown:
      raise AttributeError(f'{type(self).__name__} has no field {sorted(unknown)[0]!r}')
    return type(self)({**self._fields, **changes}, self._dynamic)

  def _flatten(self):
    children = tuple(self._fields[k] for k in self._dynamic)
    statics = tuple((k, _Static(v)) for k, v in self._fields.items() if k not in self._dynamic)
    return children, (self._dynamic, statics)

  @classmethod
  def _unflatten(cls, aux, children):
    dynamic, statics = aux
    fields = {k: s.value for k, s in statics}
    fields.update(zip(dynamic, children, strict=True))
    obj = object.__new__(cls)
    object.__setattr__(obj, '_fields', fields)
    object.__setattr__(obj, '_dynamic', dynamic)
    return obj

  def __repr__(self):
    parts = []
    for k, v in self._fields.items():
      if hasattr(v, 'shape'):
        parts.append(f'{k}={getattr(v, "dtype", "")}{list(v.shape)}')
      elif isinstance(v, (int, float, str, bool)):
        parts.append(f'{k}={v!r}')
    return f'{type(self).__name__}({", ".join(parts)})'


def _register(cls):
  jax.tree_util.register_pytree_node(cls, cls._flatten, cls._unflatten)
  return cls


@_register
class Option(_Struct):
  """Physics options (mjOption). Solver and integrator choices are static; the rest dynamic.

  Fields: timestep, impratio, tolerance, ls_tolerance, noslip_tolerance, gravity (3,), wind (3,),
  magnetic (3,), density, viscosity, o_margin, o_solref (2,), o_solimp (5,), o_friction (5,);
  static: integrator, cone, jacobian, solver, iterations, ls_iterations, noslip_iterations,
  disableflags, enableflags.
  """

  STATIC = (
    'integrator',
    'cone',
    'jacobian',
    'solver',
    'iterations',
    'ls_iterations',
    'noslip_iterations',
    'ccd_iterations',
    'sdf_iterations',
    'sdf_initpoints',
    'disableflags',
    'enableflags',
    'disableactuator',
    'has_fluid_params',
  )


@_register
class Model(_Struct):
  """A compiled model: MuJoCo's mjModel fields with MuJoCo's names and element order.

  Counts (`nq nv nu na nbody njnt ngeom nsite nmesh neq ntendon nsensor ...`), integer arrays
  (types, ids, addresses, flags), names and `opt`'s solver settings are static; floating-point
  arrays (`body_mass (nbody,)`, `geom_size (ngeom, 3)`, `qpos0 (nq,)`, ...) are jax.Array leaves.
  `names` maps an object kind ('body', 'joint', ...) to the tuple of its names in id order.
  """

  def name2id(self, kind: str, name: str) -> int:
    """Id of the object of `kind` ('body', 'joint', 'geom', ...) called `name` (mj_name2id)."""
    names = self.names.get(kind, ())
    if name not in names:
      raise KeyError(f'no {kind} named {name!r}')
    return names.index(name)


@_register
class Contact(_Struct):
  """Contacts in fixed slots (mjContact fields); inactive slots are masked, never removed.

  Fields: dist (ncon,), pos (ncon, 3), frame (ncon, 3, 3), includemargin (ncon,),
  friction (ncon, 5), solref (ncon, 2), solreffriction (ncon, 2), solimp (ncon, 5),
  adhesion (ncon,), dim (ncon,), geom1 (ncon,), geom2 (ncon,), geom (ncon, 2), efc_address (ncon,),
  active (ncon,). dim is MuJoCo's: 1 for an adhesive contact in its gap band (where the slot's
  constraint rows, sized for the pair's condim, hold one frictionless row).
  """


@_register
class Data(_Struct):
  """The simulation state and everything derived from it (mjData fields, all dynamic)."""


def make_option(opt: Mapping[str, Any], dtype) -> Option:
  """Builds an Option from compiled option values."""
  fields = {}
  opt = dict(opt)
  # static, as MJX's: fluid forces are traced only for models that have a fluid
  opt['has_fluid_params'] = bool(
    float(opt.get('density', 0)) > 0 or float(opt.get('viscosity', 0)) > 0
  )
  for k, v in opt.items():
    fields[k] = int(v) if k in Option.STATIC else jnp.asarray(v, dtype=dtype)
  dynamic = tuple(k for k in fields if k not in Option.STATIC)
  return Option(fields, dynamic)


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
  excluded = np.isin((lo << 16) + hi, np.asarray(c.get('exclude_signature', ()), dtype=np.int64))
  ok &= ~excluded
  dyn = np.stack([i[ok], j[ok]], axis=1)
  explicit = np.stack(
    [np.asarray(c.get('pair_geom1', ()), int), np.asarray(c.get('pair_geom2', ()), int)], axis=1
  ).reshape(-1, 2)
  return np.concatenate([explicit, dyn]).astype(np.int32)


def _constraint_counts(c: Mapping[str, Any]) -> dict[str, int]:
  """Static counts of objects that can generate constraint rows, from the compiled arrays."""
  count = lambda k: int(np.count_nonzero(np.asarray(c.get(k, ()))))  # noqa: E731
  return {
    'jnt_limited': count('jnt_limited'),
    'tendon_limited': count('tendon_limited'),
    'dof_frictionloss': count('dof_frictionloss'),
    'tendon_frictionloss': count('tendon_frictionloss'),
    'contact_pairs': len(contact_candidates(c)),
  }


# float arrays that are structure, not physics: wrap_prm holds side-site ids and pulley divisors,
# sensor_plugin_prm the touch grids' resolutions and bin angles, actuator_plugin_prm the pid
# plugins' gains (their activation layout follows from them)
_STATIC_FLOAT = frozenset({'wrap_prm', 'sensor_plugin_prm', 'actuator_plugin_prm'})


def make_model(compiled: Mapping[str, Any]) -> Model:
  """Wraps compiled arrays into a Model; float arrays become jax.Array leaves (default dtype)."""
  dtype = jnp.asarray(0.0).dtype
  fields: dict[str, Any] = {}
  dynamic = []
  compiled = dict(compiled)
  compiled.update(
    tree_structure(compiled['body_parentid'], compiled['dof_bodyid'], compiled['dof_parentid'])
  )
  compiled['constraint_counts'] = _constraint_counts(compiled)
  # which dofs and tendons have friction-loss rows is structure (constraint row layout)
  compiled['dof_hasfrictionloss'] = (np.asarray(compiled['dof_frictionloss']) != 0).astype(np.int8)
  compiled['tendon_hasfrictionloss'] = (np.asarray(compiled['tendon_frictionloss']) > 0).astype(
    np.int8
  )
  # static, as MuJoCo's ngravcomp: gravity compensation is traced only where some body has it
  compiled['ngravcomp'] = int(np.count_nonzero(np.asarray(compiled['body_gravcomp'])))
  # likewise surface velocities (MuJoCo 4's flg_surfacevel): contact rows read them only if any
  surfacevel = np.asarray(compiled.get('geom_surfacevel', np.zeros((0, 6))))
  compiled['nsurfacevel'] = int(np.count_nonzero(np.any(surfacevel != 0, axis=-1)))
  # and contact adhesion (MuJoCo 4's flg_adhesion): passive pull and aref bias only if any
  adhesion = [np.asarray(compiled.get(k, ())) for k in ('geom_adhesion', 'pair_adhesion')]
  compiled['flg_adhesion'] = int(any(np.any(a != 0) for a in adhesion))
  for k, v in compiled.items():
    if k == 'opt':
      fields[k] = make_option(v, dtype)
      dynamic.append(k)
    elif (
      isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.floating) and k not in _STATIC_FLOAT
    ):
      fields[k] = jnp.asarray(v, dtype=dtype)
      dynamic.append(k)
    elif isinstance(v, np.ndarray) and k in _STATIC_FLOAT:
      v = v.astype(np.float64, copy=True)
      v.setflags(write=False)
      fields[k] = v
    elif isinstance(v, np.ndarray):
      v = v.astype(np.int8 if v.dtype == np.int8 else np.int32, copy=True)
      v.setflags(write=False)
      fields[k] = v
    else:
      fields[k] = v
  return Model(fields, tuple(dynamic))


def make_contact(ncon: int, dtype) -> Contact:
  """Empty contact slots."""
  z = lambda *s: jnp.zeros(s, dtype=dtype)  # noqa: E731
  i = lambda *s: jnp.full(s, -1, dtype=jnp.int32)  # noqa: E731
  fields = {
    'dist': z(ncon),
    'pos': z(ncon, 3),
    'frame': z(ncon, 3, 3),
    'includemargin': z(ncon),
    'friction': z(ncon, 5),
    'solref': z(ncon, 2),
    'solreffriction': z(ncon, 2),
    'solimp': z(ncon, 5),
    'adhesion': z(ncon),
    'dim': jnp.zeros(ncon, dtype=jnp.int32),
    'geom1': i(ncon),
    'geom2': i(ncon),
    'geom': i(ncon, 2),
    'efc_address': i(ncon),
    'mu': z(ncon),
    'active': jnp.zeros(ncon, dtype=bool),
  }
  return Contact(fields, tuple(fields))


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
  have = set(d.fields())
  for name, (shape, what) in _input_shapes(m).items():
    if name not in have:
      continue
    x = getattr(d, name)
    if isinstance(x, (list, tuple, str)):
      raise TypeError(f'Data.{name} must be an array (np.asarray), got {type(x).__name__}')
    dtype = x.dtype if hasattr(x, 'dtype') else np.asarray(x).dtype
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
  unless given.
  """
  dtype = m.qpos0.dtype
  fields_ = set(m.fields())
  if ncon is None:
    ncon = int(m.nconmax) if 'nconmax' in fields_ else 0
  if nefc is None:
    nefc = int(m.nefcmax) if 'nefcmax' in fields_ else 0
  z = lambda *s: jnp.zeros(s, dtype=dtype)  # noqa: E731
  nv, nu, na = m.nv, m.nu, m.na
  nbody, ngeom, nsite, njnt = m.nbody, m.ngeom, m.nsite, m.njnt
  ntendon, nmocap = m.ntendon, m.nmocap
  eye = lambda n: jnp.tile(jnp.eye(3, dtype=dtype), (n, 1, 1))  # noqa: E731
  quat = lambda n: jnp.tile(jnp.array([1.0, 0, 0, 0], dtype=dtype), (n, 1))  # noqa: E731
  mocap = np.asarray(m.body_mocapid) >= 0
  fields = {
    'time': jnp.zeros((), dtype=dtype),
    'qpos': jnp.asarray(m.qpos0, dtype=dtype),
    'qvel': z(nv),
    'act': z(na),
    'ctrl': z(nu),
    'mocap_pos': m.body_pos[mocap] if nmocap else z(0, 3),
    'mocap_quat': m.body_quat[mocap] if nmocap else z(0, 4),
    'eq_active': jnp.asarray(np.asarray(m.eq_active0, dtype=bool)),
    'qacc': z(nv),
    'qacc_warmstart': z(nv),
    'act_dot': z(na),
    'qfrc_applied': z(nv),
    'xfrc_applied': z(nbody, 6),
    'xpos': z(nbody, 3),
    'xquat': quat(nbody),
    'xmat': eye(nbody),
    'xipos': z(nbody, 3),
    'ximat': eye(nbody),
    'xanchor': z(njnt, 3),
    'xaxis': z(njnt, 3),
    'geom_xpos': z(ngeom, 3),
    'geom_xmat': eye(ngeom),
    'site_xpos': z(nsite, 3),
    'site_xmat': eye(nsite),
    'subtree_com': z(nbody, 3),
    'cinert': z(nbody, 10),
    'cdof': z(nv, 6),
    'cvel': z(nbody, 6),
    'cdof_dot': z(nv, 6),
    'ten_length': z(ntendon),
    'ten_velocity': z(ntendon),
    'ten_J': z(ntendon, nv),
    'ten_wrapadr': jnp.zeros(ntendon, dtype=jnp.int32),
    'ten_wrapnum': jnp.zeros(ntendon, dtype=jnp.int32),
    'wrap_obj': jnp.zeros(2 * m.nwrap, dtype=jnp.int32),
    'wrap_xpos': z(2 * m.nwrap, 3),
    'actuator_length': z(nu),
    'actuator_velocity': z(nu),
    'actuator_moment': z(nu, nv),
    'actuator_force': z(nu),
    'qM': z(nv, nv),
    'qLD': z(nv, nv),
    'qfrc_bias': z(nv),
    'qfrc_passive': z(nv),
    'qfrc_spring': z(nv),
    'qfrc_damper': z(nv),
    'qfrc_gravcomp': z(nv),
    'qfrc_fluid': z(nv),
    'qfrc_adhesion': z(nv),
    'qfrc_actuator': z(nv),
    'qfrc_smooth': z(nv),
    'qacc_smooth': z(nv),
    'qfrc_constraint': z(nv),
    'qfrc_inverse': z(nv),
    'contact': make_contact(ncon, dtype),
    'ncon': jnp.zeros((), dtype=jnp.int32),
    'efc_J': z(nefc, nv),
    'efc_pos': z(nefc),
    'efc_margin': z(nefc),
    'efc_frictionloss': z(nefc),
    'efc_D': z(nefc),
    'efc_R': z(nefc),
    'efc_KBIP': z(nefc, 4),
    'efc_vel': z(nefc),
    'efc_aref': z(nefc),
    'efc_force': z(nefc),
    'efc_state': jnp.zeros(nefc, dtype=jnp.int32),
    'efc_active': jnp.zeros(nefc, dtype=bool),
    'efc_type': jnp.zeros(nefc, dtype=jnp.int32),
    'efc_id': jnp.zeros(nefc, dtype=jnp.int32),
    'solver_niter': jnp.zeros((), dtype=jnp.int32),
    'sensordata': z(m.nsensordata),
    'energy': z(2),
    'warning': jnp.zeros(NWARNING, dtype=jnp.int32),  # mjtWarning order
    # computed lazily, for the sensors that need them (mj_subtreeVel, mj_rnePostConstraint)
    'subtree_linvel': z(nbody, 3),
    'subtree_angmom': z(nbody, 3),
    'cacc': z(nbody, 6),
    'cfrc_int': z(nbody, 6),
    'cfrc_ext': z(nbody, 6),
    'solver_fwdinv': z(2),  # mj_compareFwdInv, with the fwdinv enable flag
  }
  return Data(fields, tuple(fields))

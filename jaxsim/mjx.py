"""MJX's public API over jaxsim: code written for `mujoco.mjx` runs by changing its import.

    import jaxsim.mjx as mjx          # instead of: from mujoco import mjx

    mj_model = mujoco.MjModel.from_xml_string(xml)
    mjx_model = mjx.put_model(mj_model)            # a jaxsim.Model
    mjx_data = mjx.make_data(mjx_model)            # a jaxsim.Data, or mjx.put_data(mj_model, d)
    mjx_data = jax.jit(mjx.step)(mjx_model, mjx_data)
    mj_data = mjx.get_data(mj_model, mjx_data)     # back to mujoco.MjData, e.g. to render

The Model and Data are jaxsim's own (`jaxsim.Model`, `jaxsim.Data`): MuJoCo's field names, shapes
and element order, as MJX's (`xmat` (nbody, 3, 3), `qM` dense (nv, nv), ...), `replace` and
`tree_replace({'opt.timestep': ...})`; `jax.vmap` over batches of Data, or of Models with an
in_axes tree (domain randomisation), works as with MJX.

What differs from MJX: `impl` is 'jax' (or None) only; Warp's and C's sizing arguments
(naconmax, njmax, ...) are accepted and ignored, as MJX's JAX implementation ignores them
(jaxsim sizes contacts and constraint rows from the model: `jaxsim.with_ncon_max`); `put_data`
carries the state and the smooth derived quantities but not MuJoCo's contacts and constraint rows
(run `forward`); `get_data` writes the contacts but no constraint rows; `put_model` refuses
flexes, SDF geoms and plugins other than mujoco.pid actuators and touch-grid sensors.

`mujoco` is an optional dependency: it is imported only inside the functions that take or make
MuJoCo objects or read its enums (model_arrays and so put_model or make_data of an MjModel,
put_data, get_data, get_data_into, state_size, get_state, set_state).
"""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from jaxsim._src import actuation, dynamics
from jaxsim.mjcf import plugin
from jaxsim.mjcf.mesh import MeshData

Model = jaxsim.Model
Data = jaxsim.Data
Option = jaxsim.Option
Contact = jaxsim.Contact
Impl = jaxsim.Impl  # MJX's implementation names; Model.impl and Data.impl are Impl.JAX


def _check_impl(impl: Any) -> None:
  """ValueError for an impl other than None or 'jax' (MJX's Impl.JAX or its string)."""
  if impl is None:
    return
  value = getattr(impl, 'value', impl)
  if isinstance(value, str) and value.lower() == 'jax':
    return
  raise ValueError(
    f"jaxsim.mjx supports impl='jax' (or None, the same); got {value!r}. "
    "MJX's 'warp', 'c' and 'cpp' implementations are MuJoCo's own: use mujoco.mjx for them."
  )


def _put(tree, device):
  return tree if device is None else jax.device_put(tree, device)


# ------------------------------------------------------------------------------------------------
# Model


# Model fields that put_model does not take from mujoco.MjModel by name: built below, derived by
# jaxsim.build from the arrays, or MuJoCo arrays of the same name that hold something else
# (names and text_data are MuJoCo's character blobs, stat an MjStatistic struct).
_NOT_BY_NAME = frozenset(
  {
    'opt',
    'stat',
    'names',
    'text_data',
    'model_name',
    'mesh_data',
    'nconmax',
    'nefcmax',
    'collision_pairs',
    'layout',
    'compiler',
    'size',
    'statistic',
    'unsupported',
  }
)

_NAME_KINDS = (
  ('texture', 'mjOBJ_TEXTURE'),
  ('material', 'mjOBJ_MATERIAL'),
  ('mesh', 'mjOBJ_MESH'),
  ('hfield', 'mjOBJ_HFIELD'),
  ('body', 'mjOBJ_BODY'),
  ('joint', 'mjOBJ_JOINT'),
  ('geom', 'mjOBJ_GEOM'),
  ('site', 'mjOBJ_SITE'),
  ('camera', 'mjOBJ_CAMERA'),
  ('light', 'mjOBJ_LIGHT'),
  ('tendon', 'mjOBJ_TENDON'),
  ('actuator', 'mjOBJ_ACTUATOR'),
  ('equality', 'mjOBJ_EQUALITY'),
  ('pair', 'mjOBJ_PAIR'),
  ('exclude', 'mjOBJ_EXCLUDE'),
  ('sensor', 'mjOBJ_SENSOR'),
  ('numeric', 'mjOBJ_NUMERIC'),
  ('text', 'mjOBJ_TEXT'),
  ('key', 'mjOBJ_KEY'),
)
_NAME_COUNTS = {
  'texture': 'ntex',
  'material': 'nmat',
  'mesh': 'nmesh',
  'hfield': 'nhfield',
  'body': 'nbody',
  'joint': 'njnt',
  'geom': 'ngeom',
  'site': 'nsite',
  'camera': 'ncam',
  'light': 'nlight',
  'tendon': 'ntendon',
  'actuator': 'nu',
  'equality': 'neq',
  'pair': 'npair',
  'exclude': 'nexclude',
  'sensor': 'nsensor',
  'numeric': 'nnumeric',
  'text': 'ntext',
  'key': 'nkey',
}


# <geom fluidcoef> defaults: blunt drag, slender drag, angular drag, Kutta lift, Magnus lift
_FLUIDCOEF_DEFAULT = (0.5, 0.25, 1.5, 1.0, 1.0)


def _refuse_unsupported(mujoco, m) -> None:
  """NotImplementedError naming what jaxsim's compiler refuses in MJCF, found in m's arrays:
  flexes, SDF geoms, flex equalities, and plugins other than mujoco.pid actuators and
  touch_grid sensors (the ones jaxsim simulates)."""
  why = []
  if m.nflex:
    why.append('flexes (deformable bodies)')
  used = set(np.asarray(m.actuator_plugin).tolist()) | set(np.asarray(m.sensor_plugin).tolist())
  if any(i not in used for i in range(m.nplugin)):
    why.append('engine plugins other than mujoco.pid actuators and touch_grid sensors')
  if np.any(m.geom_type == mujoco.mjtGeom.mjGEOM_SDF):
    why.append('SDF geoms')
  if np.any(m.eq_type == mujoco.mjtEq.mjEQ_FLEX):
    why.append('flex equality constraints')
  if why:
    raise NotImplementedError('jaxsim does not simulate ' + '; '.join(why))


def _names(mujoco, m) -> dict[str, tuple[str, ...]]:
  """Object kind -> names in id order ('' unnamed), for the kinds the model has."""
  out = {}
  for kind, obj in _NAME_KINDS:
    n = int(getattr(m, _NAME_COUNTS[kind]))
    if n:
      objtype = getattr(mujoco.mjtObj, obj)
      out[kind] = tuple(mujoco.mj_id2name(m, objtype, i) or '' for i in range(n))
  return out


def _texts(m) -> tuple[str, ...]:
  blob = bytes(m.text_data)
  return tuple(
    blob[a : a + s].split(b'\0', 1)[0].decode()
    for a, s in zip(m.text_adr, m.text_size, strict=True)
  )


def _meshes(m) -> tuple[MeshData, ...]:
  """The compiled meshes: MuJoCo's vertices, faces, frames and convex-hull graph (mesh_graph,
  the one part the engine reads; None where MuJoCo built no hull)."""
  out = []
  for i in range(m.nmesh):
    va, vn = int(m.mesh_vertadr[i]), int(m.mesh_vertnum[i])
    fa, fn = int(m.mesh_faceadr[i]), int(m.mesh_facenum[i])
    vert = np.array(m.mesh_vert[va : va + vn], dtype=np.float32)
    ga = int(m.mesh_graphadr[i])
    graph = None
    if ga >= 0:
      # MuJoCo packs the graphs one after another: this one ends where the next begins
      nxt = [int(a) for a in m.mesh_graphadr if a > ga]
      end = min(nxt) if nxt else len(m.mesh_graph)
      graph = np.array(m.mesh_graph[ga:end], dtype=np.int32)
    lo, hi = vert.min(axis=0), vert.max(axis=0)
    out.append(
      MeshData(
        name=None,
        vert=vert,
        face=np.array(m.mesh_face[fa : fa + fn], dtype=np.int32),
        pos=np.array(m.mesh_pos[i], dtype=np.float64),
        quat=np.array(m.mesh_quat[i], dtype=np.float64),
        scale=np.array(m.mesh_scale[i], dtype=np.float64),
        inertia_mode='convex',
        volume=float('nan'),
        inertia=np.full(3, np.nan),
        boxsz=np.full(3, np.nan),
        aamm=np.concatenate([lo, hi]).astype(np.float64),
        hull_vert=None,
        hull_face=None,
        graph=graph,
      )
    )
  return tuple(out)


# the attributes of the plugins jaxsim simulates, in the order MuJoCo registers them (pid.cc,
# touch_grid.cc): an instance's values lie in plugin_attr in this order, each ending with a NUL
_PID_ATTRIBUTES = ('kp', 'ki', 'kd', 'imax', 'slewmax')
_TOUCH_GRID_ATTRIBUTES = ('nchannel', 'size', 'fov', 'gamma')


def _plugin_config(m, instance: int, keys: tuple[str, ...]) -> dict[str, tuple[str, None]]:
  """key -> (value, no element) of a plugin instance's configuration, as jaxsim.mjcf.plugin
  reads a <config> (empty: not given)."""
  blob = bytes(m.plugin_attr)[int(m.plugin_attradr[instance]) :]
  values = blob.split(b'\0')[: len(keys)]
  if len(values) != len(keys):
    raise NotImplementedError(f'plugin instance {instance}: unexpected configuration')
  return {k: (v.decode(), None) for k, v in zip(keys, values, strict=True)}


def _plugin_params(m) -> tuple[np.ndarray, np.ndarray]:
  """actuator_plugin_prm (nu, 5) for mujoco.pid actuators and sensor_plugin_prm (nsensor, 6)
  for touch_grid sensors, from the instances' configuration as jaxsim's compiler reads it."""
  act = np.zeros((m.nu, 5))
  for i, inst in enumerate(np.asarray(m.actuator_plugin)):
    if inst >= 0:
      act[i] = plugin.pid_params(None, _plugin_config(m, int(inst), _PID_ATTRIBUTES))
  sen = np.zeros((m.nsensor, 6))
  for i, inst in enumerate(np.asarray(m.sensor_plugin)):
    if inst >= 0:
      sen[i] = plugin.touch_grid_params(None, _plugin_config(m, int(inst), _TOUCH_GRID_ATTRIBUTES))
  return act, sen


def _unsupported_notes(mujoco, m) -> tuple[str, ...]:
  """What the model asks for that jaxsim ignores, as the compiler notes it (Model.unsupported)."""
  notes = []
  if np.any(m.sensor_type == mujoco.mjtSensor.mjSENS_USER):
    notes.append('user sensors (computed by a callback)')
  if np.any(m.actuator_delay > 0) or np.any(m.actuator_history[:, 0] > 0):
    notes.append('actuator delay (nsample/delay)')
  if m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_NATIVECCD:
    notes.append('libccd for convex pairs (flag nativeccd="disable"); jaxsim uses native CCD')
  return tuple(notes)


def model_arrays(m) -> dict[str, Any]:
  """The compiled arrays of a mujoco.MjModel, as jaxsim.mjcf's compiler returns them for the same
  MJCF (the input of jaxsim.build). MuJoCo's values are taken as they are in `m`, including any
  changes made to `m` after it was loaded.

  Arguments:
    m: a mujoco.MjModel.
  Returns:
    name -> value for every field jaxsim's compiler makes.
  Raises:
    NotImplementedError: a feature jaxsim does not load (flexes, SDF geoms, plugins other than
      mujoco.pid actuators and touch_grid sensors).
  """
  import mujoco

  _refuse_unsupported(mujoco, m)
  out: dict[str, Any] = {}
  for f in dataclasses.fields(Model):
    k = f.name
    if k in _NOT_BY_NAME or not hasattr(m, k):
      continue
    v = getattr(m, k)
    out[k] = np.array(v) if isinstance(v, np.ndarray) else v
  opt_names = [f.name for f in dataclasses.fields(Option) if f.name != 'has_fluid_params']
  out['opt'] = {k: np.array(getattr(m.opt, k)) for k in opt_names}
  # fields MuJoCo stores under another form
  parent = np.asarray(m.body_parentid)
  depth = np.zeros(m.nbody, np.int32)
  for b in range(1, m.nbody):  # compile time, NumPy: parents come before children
    depth[b] = depth[parent[b]] + 1
  out['body_depth'] = depth
  # springdamper is already folded into jnt_stiffness and dof_damping by MuJoCo's set_const
  out['jnt_springdamper'] = np.zeros((m.njnt, 2))
  fluid = np.asarray(m.geom_fluid).reshape(m.ngeom, -1)
  out['geom_fluidshape'] = fluid[:, 0].astype(np.int32)
  # MuJoCo zeroes the coefficients of geoms without the fluid model; jaxsim's compiler keeps
  # the defaults there (unused either way)
  coef = np.array(fluid[:, 1:6])
  coef[out['geom_fluidshape'] == 0] = _FLUIDCOEF_DEFAULT
  out['geom_fluidcoef'] = coef
  out['mesh_data'] = _meshes(m)
  out['actuator_plugin_prm'], out['sensor_plugin_prm'] = _plugin_params(m)
  out['names'] = _names(mujoco, m)
  out['model_name'] = bytes(m.names).split(b'\0', 1)[0].decode()
  out['text_data'] = _texts(m)
  out['compiler'] = {}
  # <size nconmax> is a contact budget for jaxsim's layout (MuJoCo keeps -1 for none)
  out['size'] = {k: int(getattr(m, k)) for k in ('nconmax', 'njmax') if int(getattr(m, k)) >= 0}
  if m.nuserdata:
    out['size']['nuserdata'] = int(m.nuserdata)
  # MuJoCo's final statistics, given as the user's: set_const then keeps them
  out['statistic'] = {
    'meansize': float(m.stat.meansize),
    'extent': float(m.stat.extent),
    'center': np.array(m.stat.center),
  }
  out['unsupported'] = _unsupported_notes(mujoco, m)
  return out


# MjModel -> (fingerprint of its arrays, Model): MJX code calls make_data (and Playground's
# reset does, under jit) with the MjModel; building once per MjModel, and again only if its
# arrays or options changed, keeps that cheap and gives every such Data the same layout
_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fingerprint(m) -> str:
  """A digest of what put_model reads from m: the arrays and the options (about 30 ms for
  dm_control's dog; MuJoCo's own binary save of it would take a second)."""
  h = hashlib.blake2b(digest_size=16)
  for k in [f.name for f in dataclasses.fields(Model)] + ['mesh_graph', 'geom_fluid', 'names']:
    v = getattr(m, k, None)
    if isinstance(v, np.ndarray):
      h.update(k.encode())
      h.update(np.ascontiguousarray(v).data)
    elif isinstance(v, (int, float)):
      h.update(f'{k}={v!r}'.encode())
  for f in dataclasses.fields(Option):
    if hasattr(m.opt, f.name):
      h.update(np.asarray(getattr(m.opt, f.name)).tobytes())
  h.update(f'{m.nconmax} {m.njmax}'.encode())
  return h.hexdigest()


def _built(m) -> Model:
  """The jaxsim.Model of a mujoco.MjModel, built once per MjModel and state of its arrays."""
  key = _fingerprint(m)
  hit = _BUILT.get(m)
  if hit is not None and hit[0] == key:
    return hit[1]
  model = jaxsim.build(model_arrays(m))
  _BUILT[m] = (key, model)
  return model


def put_model(
  m,
  device: jax.Device | None = None,
  impl: str | Impl | None = None,
  graph_mode: Any = None,
  keepalive_refs: dict | None = None,
  batch_sizes: dict | None = None,
) -> Model:
  """A jaxsim.Model from a mujoco.MjModel (mjx.put_model).

  How: from MuJoCo's compiled arrays, not through MJCF text. The MjModel's arrays are MuJoCo's
  compiler's output, which jaxsim's own compiler reproduces (tests/test_mjx.py checks both give
  the same Model on the dm_control suite); jaxsim.build then completes them (set_const's
  constants, contact pairs, layout). This is exact and works for any MjModel, however it was made
  (file, string with assets, MjSpec, binary) and with the changes MJX code makes to it before
  put_model (`mj_model.opt.timestep = ...`). Saving the XML back (mj_saveLastXML) and compiling it
  is not: it works only for the model parsed last and writes numbers with 6 significant digits.
  The Model is built once per MjModel and state of its arrays (an MjModel changed since is built
  again), so make_data(mj_model) under jit, as Playground's reset does, is cheap.

  Arguments:
    m: a mujoco.MjModel.
    device: where to put the Model's arrays (jax.device_put); None: the default device.
    impl: 'jax' or None; others are refused (ValueError).
    graph_mode, keepalive_refs, batch_sizes: MJX's Warp and C options, accepted and ignored.
  Returns:
    the jaxsim.Model.
  Raises:
    ValueError: impl other than 'jax'. NotImplementedError: a feature jaxsim does not simulate.
  """
  del graph_mode, keepalive_refs, batch_sizes
  _check_impl(impl)
  if isinstance(m, Model):
    return _put(m, device)
  return _put(_built(m), device)


# ------------------------------------------------------------------------------------------------
# Data


def make_data(
  m,
  device: jax.Device | None = None,
  impl: str | Impl | None = None,
  _full_compat: bool = False,  # noqa: FBT001, FBT002 (MJX's signature)
  naconmax: int | None = None,
  naccdmax: int | None = None,
  njmax: int | None = None,
  nvmax: int | None = None,
  keepalive_refs: dict | None = None,
) -> Data:
  """A jaxsim.Data at qpos0 with zero velocity (mjx.make_data).

  Arguments:
    m: a jaxsim.Model or a mujoco.MjModel (put_model'd first).
    device: where to put the arrays; None: the default device.
    impl: 'jax' or None.
    _full_compat, naconmax, naccdmax, njmax, nvmax, keepalive_refs: MJX's Warp and C sizing
      options, accepted and ignored: jaxsim sizes contact slots and constraint rows from the
      model (jaxsim.with_ncon_max changes them).
  Returns:
    the Data (run forward for the derived quantities).
  """
  del _full_compat, naconmax, naccdmax, njmax, nvmax, keepalive_refs
  _check_impl(impl)
  if not isinstance(m, Model):
    m = _built(m)
  return _put(jaxsim.make_data(m), device)


# Data fields put_data and get_data do not copy by name: MuJoCo keeps them sparse or in another
# layout (contacts and the efc_* constraint rows in MuJoCo's variable-size arrays, qLD's rows),
# or in a struct (warning).
_DATA_SPECIAL = frozenset(
  {'qM', 'M', 'qLD', 'ten_J', 'actuator_moment', 'contact', 'ncon', 'warning', 'solver_niter'}
)


def _dense_moment(mujoco, m, d) -> np.ndarray:
  out = np.zeros((m.nu, m.nv))
  if m.nu and m.nv:
    mujoco.mju_sparse2dense(out, d.actuator_moment, d.moment_rownnz, d.moment_rowadr,
                            d.moment_colind)  # fmt: skip
  return out


def _dense_ten_j(mujoco, m, d) -> np.ndarray:
  out = np.zeros((m.ntendon, m.nv))
  if m.ntendon and m.nv:
    mujoco.mju_sparse2dense(out, d.ten_J, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind)
  return out


def _dense_qld(mujoco, m, d) -> np.ndarray:
  """MuJoCo's qLD (L'DL factor of M on M's compressed rows) as a dense (nv, nv) matrix."""
  out = np.zeros((m.nv, m.nv))
  if m.nv:
    mujoco.mju_sparse2dense(out, d.qLD, m.M_rownnz, m.M_rowadr, m.M_colind)
  return out


def put_data(
  m,
  d,
  device: jax.Device | None = None,
  impl: str | Impl | None = None,
  naconmax: int | None = None,
  naccdmax: int | None = None,
  njmax: int | None = None,
  nvmax: int | None = None,
  dummy_arg_for_batching: jax.Array | None = None,
  keepalive_refs: dict | None = None,
) -> Data:
  """A jaxsim.Data holding a mujoco.MjData's state and derived quantities (mjx.put_data).

  Copied: the state (time, qpos, qvel, act, ctrl, qacc_warmstart, qfrc_applied, xfrc_applied,
  mocap_pos, mocap_quat, eq_active), qacc, and every derived array jaxsim shares with MuJoCo
  (frames, com quantities, tendons, actuators, forces, sensordata, energy), sparse ones made dense
  (qM from MuJoCo's M, ten_J) or put in jaxsim's compact rows (qLD, actuator_moment), and warning
  counts. Not copied: MuJoCo's contacts and constraint rows (variable-size there, fixed slots
  here): the Data has empty slots until the next forward or step fills them.

  Arguments:
    m: the mujoco.MjModel.
    d: the mujoco.MjData.
    device: where to put the arrays; None: the default device.
    impl: 'jax' or None.
    naconmax, naccdmax, njmax, nvmax, dummy_arg_for_batching, keepalive_refs: MJX's Warp and C
      options, accepted and ignored.
  Returns:
    the Data, in the default float dtype.
  """
  import mujoco

  del naconmax, naccdmax, njmax, nvmax, dummy_arg_for_batching, keepalive_refs
  _check_impl(impl)
  if isinstance(m, Model):
    raise TypeError('put_data needs the mujoco.MjModel that d belongs to, as mjx.put_data')
  out = jaxsim.make_data(_built(m))
  dtype = out.qpos.dtype
  changes: dict[str, Any] = {}
  for k in out.fields():
    if k in _DATA_SPECIAL or k.startswith('efc_') or not hasattr(d, k):
      continue
    ours = getattr(out, k)
    v = np.array(getattr(d, k))
    changes[k] = jnp.asarray(v.reshape(ours.shape), dtype=ours.dtype)
  qm = np.zeros((m.nv, m.nv))
  if m.nv:
    mujoco.mju_sym2dense(qm, d.M, m.M_rownnz, m.M_rowadr, m.M_colind)
  changes['qM'] = jnp.asarray(qm, dtype)
  changes['M'] = dynamics.ld_compact(_built(m), changes['qM'])
  changes['qLD'] = dynamics.ld_compact(_built(m), jnp.asarray(_dense_qld(mujoco, m, d), dtype))
  changes['ten_J'] = jnp.asarray(_dense_ten_j(mujoco, m, d), dtype)
  dense_moment = jnp.asarray(_dense_moment(mujoco, m, d), dtype)
  changes['actuator_moment'] = actuation.moment_compact(_built(m), dense_moment)
  nwarn = out.warning.shape[0]
  counts = [d.warning[i].number for i in range(min(nwarn, len(d.warning)))]
  changes['warning'] = jnp.asarray(counts + [0] * (nwarn - len(counts)), jnp.int32)
  changes['time'] = jnp.asarray(d.time, dtype)
  return _put(out.replace(**changes), device)


def _sparse_from_dense(dense: np.ndarray, rownnz, rowadr, colind, size: int) -> np.ndarray:
  """MuJoCo's compressed rows of a dense matrix, on a given sparsity pattern."""
  out = np.zeros(size)
  for i in range(dense.shape[0]):
    a, n = int(rowadr[i]), int(rownnz[i])
    out[a : a + n] = dense[i, np.asarray(colind[a : a + n])]
  return out


def _get_one(mujoco, m, d, result) -> None:
  """Writes one (unbatched, NumPy) Data into an MjData."""
  for k in d.fields():
    if k in _DATA_SPECIAL or k.startswith('efc_') or not hasattr(result, k):
      continue
    target = getattr(result, k)
    v = np.asarray(getattr(d, k))
    if not isinstance(target, np.ndarray):
      setattr(result, k, v.item())
      continue
    target[...] = v.reshape(target.shape)
  if m.nv:
    # MuJoCo 4 keeps qM as M, its lower triangle in compressed rows (M_rowadr, M_colind), and
    # its L'DL factor qLD on the same rows (jaxsim's compact rows of qLD hold the same values)
    qm = np.asarray(d.qM, dtype=np.float64)
    result.M[:] = _sparse_from_dense(qm, m.M_rownnz, m.M_rowadr, m.M_colind, len(result.M))
    qld = np.asarray(dynamics.ld_dense(_built(m), np.asarray(d.qLD, np.float64)))
    result.qLD[:] = _sparse_from_dense(qld, m.M_rownnz, m.M_rowadr, m.M_colind, len(result.qLD))
    diag = np.diagonal(qld)
    # qLDiagInv = 1 / D; a Data never factorized (make_data) has D = 0 and MuJoCo's reset 0
    result.qLDiagInv[:] = np.divide(1.0, diag, out=np.zeros_like(diag), where=diag != 0)
  if m.ntendon:
    ten_j = np.asarray(d.ten_J, dtype=np.float64)
    size = len(result.ten_J)
    result.ten_J[:] = _sparse_from_dense(
      ten_j, m.ten_J_rownnz, m.ten_J_rowadr, m.ten_J_colind, size
    )
  if m.nu and m.nv:
    moment = np.asarray(actuation.moment_dense(_built(m), d.actuator_moment), dtype=np.float64)
    rownnz = np.zeros(m.nu, np.int32)
    rowadr = np.zeros(m.nu, np.int32)
    colind = np.zeros(len(result.moment_colind), np.int32)
    values = np.zeros(len(result.actuator_moment))
    mujoco.mju_dense2sparse(values, moment, rownnz, rowadr, colind)
    result.moment_rownnz[:] = rownnz
    result.moment_rowadr[:] = rowadr
    result.moment_colind[:] = colind
    result.actuator_moment[:] = values
  _get_contacts(mujoco, d, result)
  warning = np.asarray(d.warning)
  for i in range(min(len(warning), len(result.warning))):
    result.warning[i].number = int(warning[i])


_CONTACT_FIELDS = (
  'dist pos includemargin friction solref solreffriction solimp mu dim geom1 geom2 geom adhesion'
).split()


def _get_contacts(mujoco, d, result) -> None:
  """The active contact slots into result.contact, in slot order (MuJoCo's order), without
  constraint rows (efc_address -1, nefc 0): MuJoCo's lists are resized as MJX's get_data does."""
  idx = np.flatnonzero(np.asarray(d.contact.active))
  # MjData's contact and constraint arrays have variable size; MJX resizes them the same way
  mujoco._functions._realloc_con_efc(result, ncon=len(idx), nefc=0, nJ=0)  # noqa: SLF001
  if not len(idx):
    return
  c = result.contact
  for k in _CONTACT_FIELDS:
    target = getattr(c, k)
    target[...] = np.asarray(getattr(d.contact, k))[idx].reshape(target.shape)
  c.frame[...] = np.asarray(d.contact.frame)[idx].reshape(len(idx), 9)
  c.efc_address[...] = -1


def get_data_into(result, m, d: Data, keepalive_refs: dict | None = None) -> None:
  """Writes a jaxsim.Data into an existing mujoco.MjData, or a batched one into a list of them
  (mjx.get_data_into).

  Written: the state, qacc and every derived array MuJoCo shares with jaxsim (qM, qLD with
  qLDiagInv, ten_J and actuator_moment in MuJoCo's sparse forms), the contacts (the active slots,
  in MuJoCo's order) and warning counts. Not written: constraint rows (nefc is 0 and the contacts'
  efc_address -1; mujoco.mj_forward on the result recomputes them).

  Arguments:
    result: a mujoco.MjData, or a list of them for a batched d (leading axis).
    m: the mujoco.MjModel.
    d: the jaxsim.Data.
    keepalive_refs: MJX's C option, ignored.
  """
  import mujoco

  del keepalive_refs
  batched = isinstance(result, list)
  if batched and d.qpos.ndim < 2:
    raise ValueError('destination is a list, but d is not batched.')
  if not batched and d.qpos.ndim >= 2:
    raise ValueError('destination is an MjData, but d is batched.')
  d = jax.device_get(d)
  if not batched:
    _get_one(mujoco, m, d, result)
    return
  for i, r in enumerate(result):
    _get_one(mujoco, m, jax.tree_util.tree_map(lambda x, i=i: x[i], d), r)


def get_data(m, d: Data, keepalive_refs: dict | None = None):
  """A mujoco.MjData holding a jaxsim.Data (mjx.get_data), or a list of them for a batched d.

  Arguments:
    m: the mujoco.MjModel the Data's model was put from.
    d: the jaxsim.Data, or a batch of them (leading axis).
    keepalive_refs: MJX's C option, ignored.
  Returns:
    a mujoco.MjData, or a list of them; see get_data_into for what is written.
  """
  import mujoco

  batched = d.qpos.ndim > 1
  if batched:
    result = [mujoco.MjData(m) for _ in range(d.qpos.shape[0])]
  else:
    result = mujoco.MjData(m)
  get_data_into(result, m, d, keepalive_refs)
  return result


# ------------------------------------------------------------------------------------------------
# the pipeline: jaxsim's, under MJX's names


def forward(m: Model, d: Data) -> Data:
  """Every derived quantity and qacc from the state (mjx.forward, mj_forward)."""
  return jaxsim.forward(m, d)


def step(m: Model, d: Data) -> Data:
  """One timestep with m.opt.integrator (mjx.step, mj_step)."""
  return jaxsim.step(m, d)


def inverse(m: Model, d: Data) -> Data:
  """qfrc_inverse from qpos, qvel and qacc (mjx.inverse, mj_inverse)."""
  return jaxsim.inverse(m, d)


def kinematics(m: Model, d: Data) -> Data:
  """Global frames of bodies, joints, geoms and sites from qpos (mjx.kinematics)."""
  return jaxsim.kinematics(m, d)


def name2id(m: Model, typ, name: str) -> int:
  """Id of the object of type `typ` (a mujoco.mjtObj, or a kind such as 'body') called `name`,
  -1 if none (mjx.name2id)."""
  kind = typ if isinstance(typ, str) else _kind_of(typ)
  names = m.names.get(kind, ())
  return names.index(name) if name in names else -1


def id2name(m: Model, typ, i: int) -> str | None:
  """Name of object i of type `typ` (a mujoco.mjtObj, or a kind such as 'body'), None if unnamed
  (mjx.id2name)."""
  kind = typ if isinstance(typ, str) else _kind_of(typ)
  names = m.names.get(kind, ())
  return names[i] or None if 0 <= i < len(names) else None


def _kind_of(typ) -> str:
  name = getattr(typ, 'name', str(typ))
  for kind, obj in _NAME_KINDS:
    if obj == name:
      return kind
  raise ValueError(f'unknown object type {typ!r}')


def full_m(m: Model, d: Data) -> jax.Array:
  """The joint-space inertia matrix (nv, nv) (mjx.full_m): jaxsim keeps qM dense."""
  del m
  return d.qM


# ------------------------------------------------------------------------------------------------
# state vectors (mj_getState, mj_setState)


# mjtState component (its name without mjSTATE_) -> the Data field holding it; components jaxsim
# does not hold have size 0 (no actuator history, plugin state or plasticity is simulated), except
# userdata, refused where the model declares some
_STATE_FIELDS = {
  'TIME': 'time',
  'QPOS': 'qpos',
  'QVEL': 'qvel',
  'ACT': 'act',
  'HISTORY': None,
  'WARMSTART': 'qacc_warmstart',
  'CTRL': 'ctrl',
  'QFRC_APPLIED': 'qfrc_applied',
  'XFRC_APPLIED': 'xfrc_applied',
  'EQ_ACTIVE': 'eq_active',
  'MOCAP_POS': 'mocap_pos',
  'MOCAP_QUAT': 'mocap_quat',
  'USERDATA': None,
  'PLUGIN': None,
  'PLASTIC': None,
}


def _state_components(m: Model, spec) -> list[tuple[str | None, int]]:
  """(Data field or None, size) of each component in spec, in MuJoCo's order."""
  import mujoco

  spec = int(spec)
  if spec < 0 or spec >= 1 << int(mujoco.mjtState.mjNSTATE):
    raise ValueError(f'Invalid state spec {spec}')
  out = []
  for i in range(int(mujoco.mjtState.mjNSTATE)):
    if not spec & (1 << i):
      continue
    name = mujoco.mjtState(1 << i).name.removeprefix('mjSTATE_')
    if name not in _STATE_FIELDS:
      raise ValueError(f'state component {name} is not known to jaxsim.mjx')
    if name == 'USERDATA' and m.size.get('nuserdata', 0):
      raise NotImplementedError('jaxsim.Data holds no userdata')
    field = _STATE_FIELDS[name]
    size = 1 if field == 'time' else 0
    if field not in (None, 'time'):
      shapes = {'qpos': (m.nq,), 'qvel': (m.nv,), 'act': (m.na,), 'qacc_warmstart': (m.nv,)}
      shapes.update(ctrl=(m.nu,), qfrc_applied=(m.nv,), xfrc_applied=(m.nbody, 6))
      shapes.update(eq_active=(m.neq,), mocap_pos=(m.nmocap, 3), mocap_quat=(m.nmocap, 4))
      size = int(np.prod(shapes[field]))
    out.append((field, size))
  return out


def state_size(m: Model, spec) -> int:
  """Size of the state vector of components `spec` (an mjtState bit mask; mjx.state_size)."""
  return sum(size for _, size in _state_components(m, spec))


def get_state(m: Model, d: Data, spec) -> jax.Array:
  """The state components in `spec` (mjtState bits), flat, in MuJoCo's order (mj_getState);
  eq_active as 0/1 in the Data's float dtype."""
  parts = [
    jnp.ravel(getattr(d, f)).astype(d.qpos.dtype)
    for f, size in _state_components(m, spec)
    if f is not None and size
  ]
  return jnp.concatenate(parts) if parts else jnp.zeros(0, d.qpos.dtype)


def set_state(m: Model, d: Data, state: jax.Array, spec) -> Data:
  """d with the state components in `spec` (mjtState bits) taken from a flat vector in MuJoCo's
  order (mj_setState)."""
  comps = _state_components(m, spec)
  expected = sum(size for _, size in comps)
  if state.size != expected:
    raise ValueError(f'state has size {state.size} but expected {expected}')
  changes, offset = {}, 0
  for field, size in comps:
    if field is not None and size:
      old = getattr(d, field)
      value = state[offset : offset + size].reshape(old.shape)
      changes[field] = value.astype(old.dtype) if field == 'eq_active' else value
    offset += size
  return d.replace(**changes)

"""Model constants that MuJoCo computes by running the dynamics at qpos0 (mj_setConst).

The compiler (jaxsim/mjcf, NumPy only) leaves these to this pass, which runs jaxsim's own pipeline
stages once, eagerly, in float64: dof_M0, the inverse weights, tendon_length0, actuator_length0,
actuator_acc0, eq_data anchors and relative poses, dampratio -> kv of position actuators,
tendon spring lengths, joint springdamper -> stiffness/damping, and the model statistics.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import actuation, dynamics, kinematics, math, tendon
from jaxsim._src.enums import MINVAL, EqType, JointType, ObjType
from jaxsim._src.types import Data, Model, make_data, make_model


def _position(m: Model, d: Data) -> Data:
  """Position stage: kinematics, com, tendons, inertia and actuator transmission."""
  d = kinematics.kinematics(m, d)
  d = kinematics.com_pos(m, d)
  d = tendon.tendon(m, d)
  d = dynamics.crb(m, d)
  # adhesion (body) transmissions need contacts; their constants stay zero (forward names them)
  return actuation.transmission(m, d, skip_body=True)


# runs once per load: cheaper compilation matters more than the speed of the compiled code
FAST_COMPILE = {'xla_backend_optimization_level': 0, 'xla_llvm_disable_expensive_passes': True}


@functools.partial(jax.jit, compiler_options=FAST_COMPILE)
def _position_at(m: Model, qpos: jax.Array) -> tuple[Data, jax.Array]:
  """Data after the position stage at qpos, and its actuator moments as dense (nu, nv) rows: one
  program per model structure (models that differ in values only, as a randomised mass, share
  it; the dense rows are made here because eager jnp would compile a program per op)."""
  d = _position(m, make_data(m, ncon=0, nefc=0).replace(qpos=qpos))
  return d, actuation.moment_dense(m, d.actuator_moment)


# the MJCF's names and notes: static fields of Model, so part of jit's cache key, but read by no
# stage of the position pass; without them a model loaded again under other names (or from
# another file) finds the program compiled before
_NOTES = {'names': {}, 'model_name': '', 'compiler': {}, 'size': {}, 'statistic': {}, 'stat': {}}


def _position_fn(m: Model):
  """qpos -> (Data after the position stage, dense actuator moments (nu, nv))."""
  plain = m.replace(**_NOTES)
  return lambda qpos: _position_at(plain, jnp.asarray(qpos, m.qpos0.dtype))


def body_simple(m: Model) -> np.ndarray:
  """body_simple (nbody,): 1 for bodies whose inertia is diagonal in their dofs, 2 if they also
  have only (axis-aligned) slide joints, 0 otherwise (mjCModel::CopyObjects)."""
  parent, root = np.asarray(m.body_parentid), np.asarray(m.body_rootid)
  dofnum, sameframe = np.asarray(m.body_dofnum), np.asarray(m.body_sameframe)
  jntadr, jntnum = np.asarray(m.body_jntadr), np.asarray(m.body_jntnum)
  jt = np.asarray(m.jnt_type)
  jpos, jaxis = np.asarray(m.jnt_pos), np.asarray(m.jnt_axis)
  simple = np.zeros(m.nbody, dtype=np.int64)
  for i in range(m.nbody):
    p = parent[i]
    simple[i] = sameframe[i] == 1 and (root[i] == i or (parent[p] == 0 and dofnum[p] == 0))
  simple[np.unique(parent[parent > 0])] = 0
  for i in range(1, m.nbody):
    rotfound = False
    for j in range(jntadr[i], jntadr[i] + jntnum[i]) if jntnum[i] else ():
      aligned = np.count_nonzero(np.abs(jaxis[j]) > 1e-14) == 1
      if (
        rotfound
        or np.any(jpos[j] != 0)
        or (jt[j] in (JointType.HINGE, JointType.SLIDE) and not aligned)
      ):
        simple[i] = 0
      rotfound |= jt[j] in (JointType.BALL, JointType.HINGE)
    if simple[i] and dofnum[i]:
      slides = jt[jntadr[i] : jntadr[i] + jntnum[i]] == JointType.SLIDE
      simple[i] = 2 if slides.all() else 1
  return simple


def _invweights(m: Model, d: Data, minv: np.ndarray, simple: np.ndarray):
  """body_invweight0 (nbody, 2) and dof_invweight0 (nv,) from M^-1 at qpos0 (set0)."""
  nv = m.nv
  body_iw = np.zeros((m.nbody, 2))
  weld = np.asarray(m.body_weldid)
  dofnum = np.asarray(m.body_dofnum)
  mass = np.asarray(m.body_mass)
  # mj_jac in NumPy on each body's own dof chain: eager JAX calls per body, or dense
  # (nbody, 6, nv) Jacobians, take minutes on a scene of 100 humanoids
  tree = np.asarray(m.tree_body_dof)
  cdof, xipos = np.asarray(d.cdof), np.asarray(d.xipos)
  com = np.asarray(d.subtree_com)[np.asarray(m.body_rootid)]
  for b in range(1, m.nbody):
    if dofnum[weld[b]] == 0 or not nv:
      continue
    if simple[b] == 2:
      body_iw[b] = (1 / max(MINVAL, mass[b]), 0.0)
      continue
    dofs = np.flatnonzero(tree[b])
    c = cdof[dofs]
    jacr = c[:, :3].T
    jacp = (c[:, 3:] + np.cross(c[:, :3], xipos[b] - com[b])).T
    sub = minv[np.ix_(dofs, dofs)]
    body_iw[b] = (((jacp @ sub) * jacp).sum() / 3, ((jacr @ sub) * jacr).sum() / 3)
  dof_iw = np.zeros(nv)
  jt, dofadr = np.asarray(m.jnt_type), np.asarray(m.jnt_dofadr)
  for j in range(m.njnt):
    adr = dofadr[j]
    if simple[m.jnt_bodyid[j]] == 2:
      dof_iw[adr] = 1 / max(MINVAL, mass[m.jnt_bodyid[j]])
    elif jt[j] == JointType.FREE:
      a = minv[adr : adr + 6, adr : adr + 6]
      dof_iw[adr : adr + 3] = np.trace(a[:3, :3]) / 3
      dof_iw[adr + 3 : adr + 6] = np.trace(a[3:, 3:]) / 3
    elif jt[j] == JointType.BALL:
      dof_iw[adr : adr + 3] = np.trace(minv[adr : adr + 3, adr : adr + 3]) / 3
    else:
      dof_iw[adr] = minv[adr, adr]
  return body_iw, dof_iw


def _eq_data(m: Model, d: Data) -> np.ndarray:
  """eq_data with the anchors and relative poses MuJoCo computes at qpos0."""
  data = np.array(m.eq_data, dtype=np.float64, copy=True)
  xpos, xmat, xquat = (np.asarray(x) for x in (d.xpos, d.xmat, d.xquat))
  for i, t in enumerate(np.asarray(m.eq_type)):
    if int(np.asarray(m.eq_objtype)[i]) != ObjType.BODY:
      if t in (EqType.CONNECT,) and m.eq_objtype[i] != ObjType.BODY:
        data[i] = 0.0
      continue
    id1, id2 = int(m.eq_obj1id[i]), int(m.eq_obj2id[i])
    if t == EqType.CONNECT:
      pos = xpos[id1] + xmat[id1] @ data[i, 0:3]
      data[i, 3:6] = xmat[id2].T @ (pos - xpos[id2])
    elif t == EqType.WELD:
      quat = data[i, 6:10]
      user_set = np.any(quat != 0) and data[i, 11] == 0
      if user_set:
        data[i, 6:10] = quat / max(np.linalg.norm(quat), MINVAL)
        continue
      pos = xpos[id2] + xmat[id2] @ data[i, 0:3]
      data[i, 3:6] = xmat[id1].T @ (pos - xpos[id1])
      q = math.quat_mul(math.quat_neg(jnp.asarray(xquat[id1])), jnp.asarray(xquat[id2]))
      data[i, 6:10] = np.asarray(q)
  return data


def _dampratio(m: Model, moment: np.ndarray, minv: np.ndarray) -> np.ndarray:
  """biasprm with biasprm[2] > 0 of position-like actuators turned into -kv (set0).

  mujoco 4 takes the reflected inertia 1 / (J M^-1 J') at qpos0, not the sum of dof_M0 over
  the squared transmission (refsite.xml, tendon_dampratio.xml of MuJoCo's tests tell).
  """
  biasprm = np.array(m.actuator_biasprm, dtype=np.float64, copy=True)
  gainprm = np.asarray(m.actuator_gainprm)
  for i in range(m.nu):
    if gainprm[i, 0] != -biasprm[i, 1] or biasprm[i, 2] <= 0:
      continue
    mass = 1.0 / max(MINVAL, float(moment[i] @ minv @ moment[i]))
    biasprm[i, 2] = -biasprm[i, 2] * 2 * np.sqrt(gainprm[i, 0] * mass)
  return biasprm


def _springdamper(m: Model, dof_iw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Joint stiffness and dof damping from springdamper (timeconst, dampratio)."""
  stiffness = np.array(m.jnt_stiffness, dtype=np.float64, copy=True)
  damping = np.array(m.dof_damping, dtype=np.float64, copy=True)
  sd = np.asarray(m.jnt_springdamper)
  ndim = {JointType.FREE: 6, JointType.BALL: 3}
  for j in range(m.njnt):
    timeconst, dampratio = sd[j]
    if timeconst <= 0 or dampratio <= 0:
      continue
    adr, n = int(m.jnt_dofadr[j]), ndim.get(int(m.jnt_type[j]), 1)
    inertia = n / max(MINVAL, dof_iw[adr : adr + n].sum())
    stiffness[j] = inertia / max(MINVAL, timeconst**2 * dampratio**2)
    damping[adr : adr + n] = 2 * inertia / max(MINVAL, timeconst)
  return stiffness, damping


def _statistics(m: Model, d: Data, qm: np.ndarray, user: dict[str, Any]) -> dict[str, Any]:
  """meaninertia, meanmass, meansize, extent, center and dof_length (setStat)."""
  xpos, xipos = np.asarray(d.xpos), np.asarray(d.xipos)
  xanchor, gxpos = np.asarray(d.xanchor), np.asarray(d.geom_xpos)
  rbound = np.array(m.geom_rbound, dtype=np.float64)
  gtype, gsize = np.asarray(m.geom_type), np.asarray(m.geom_size)
  r = np.where(rbound > 0, rbound, 0.0)
  plane = (gtype == 0) & (rbound <= 0)
  finite = np.maximum(gsize[:, 0], gsize[:, 1])
  r = np.where(plane, np.where(finite > 0, finite * 0.1, 0.01), r)
  hf = (gtype == 1) & (rbound <= 0)
  if hf.any():
    hsize = np.asarray(m.hfield_size)
    r[hf] = hsize[np.asarray(m.geom_dataid)[hf]].max(axis=1) * 0.1
  pts = [xpos[1:], xipos[1:], xanchor, np.asarray(d.site_xpos)]
  lo = np.min([p.min(axis=0) for p in pts if len(p)] + [np.full(3, 1e10)], axis=0)
  hi = np.max([p.max(axis=0) for p in pts if len(p)] + [np.full(3, -1e10)], axis=0)
  if len(gxpos):
    lo = np.minimum(lo, (gxpos - r[:, None]).min(axis=0))
    hi = np.maximum(hi, (gxpos + r[:, None]).max(axis=0))
  stat = {'center': (lo + hi) / 2, 'extent': 2.0, 'meansize': 0.2, 'meanmass': 1.0}
  stat['meaninertia'] = 1.0
  if hi[0] > lo[0]:
    stat['extent'] = max(1e-5, float(np.max(hi - lo)))
  body = np.zeros(m.nbody)
  jb, parent = np.asarray(m.jnt_bodyid), np.asarray(m.body_parentid)
  for j in range(m.njnt):
    for b in (jb[j], parent[jb[j]]):
      body[b] = max(body[b], np.linalg.norm(xipos[b] - xanchor[j]))
  body[0] = 0
  gb = np.asarray(m.geom_bodyid)
  for g in range(m.ngeom):
    if gb[g] > 0 and rbound[g] > 0:
      body[gb[g]] = max(body[gb[g]], rbound[g] + np.linalg.norm(xipos[gb[g]] - gxpos[g]))
  if m.nbody > 1:
    body[1:] = np.maximum(body[1:], 1e-5)
    stat['meansize'] = float(np.sum(body[1:] / (m.nbody - 1)))
    stat['meanmass'] = float(np.mean(np.asarray(m.body_mass)[1:]))
  jid = np.asarray(m.dof_jntid)
  jt = np.asarray(m.jnt_type)[jid]
  k = np.arange(m.nv) - np.asarray(m.jnt_dofadr)[jid]
  rot = (jt == JointType.BALL) | (jt == JointType.HINGE) | ((jt == JointType.FREE) & (k >= 3))
  dof_length = np.where(rot, body[np.asarray(m.dof_bodyid)], 1.0)
  stat['extent'] = max(stat['extent'], 2 * stat['meansize'])
  if m.nv:
    stat['meaninertia'] = float(np.trace(qm) / m.nv)
  for key in ('extent', 'meaninertia', 'meanmass', 'meansize', 'center'):
    if key in user:
      stat[key] = np.asarray(user[key], dtype=np.float64)
  stat['center'] = np.asarray(stat['center'], dtype=np.float64)
  return {'stat': stat, 'dof_length': dof_length}


def _camera0(m: Model, d) -> dict[str, np.ndarray]:
  """cam_pos0, cam_poscom0 (ncam, 3), cam_mat0 (ncam, 9): camera offsets at qpos0 (setConst)."""
  body, target = np.asarray(m.cam_bodyid), np.asarray(m.cam_targetbodyid)
  xpos, xmat = np.asarray(d.xpos), np.asarray(d.xmat)
  quat = np.asarray(m.cam_quat)
  w, x, y, z = quat.T
  # cam_quat as a rotation matrix (rows), then composed with the body's frame (mj_local2Global)
  local = np.stack(
    [
      [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
  ).transpose(2, 0, 1)
  cam_xpos = xpos[body] + np.einsum('nij,nj->ni', xmat[body], np.asarray(m.cam_pos))
  cam_xmat = np.einsum('nij,njk->nik', xmat[body], local)
  com = np.asarray(d.subtree_com)[np.where(target >= 0, target, body)]
  return {
    'cam_pos0': cam_xpos - xpos[body],
    'cam_poscom0': cam_xpos - com,
    'cam_mat0': cam_xmat.reshape(-1, 9),
  }


def _inv_m(qm: np.ndarray) -> np.ndarray:
  """M^-1 (nv, nv); for a singular M as MuJoCo 4's mj_factorM, pivots clamped at MINVAL."""
  try:
    if (np.diag(np.linalg.cholesky(qm)) ** 2 >= MINVAL).all():
      return np.linalg.inv(qm)
  except np.linalg.LinAlgError:
    pass
  # L'DL from the last dof back (mj_factorI), each pivot at least MINVAL (MuJoCo warns of an
  # inertia matrix "too close to singular" and goes on)
  a = np.array(qm, dtype=np.float64, copy=True)
  n = len(a)
  diag = np.zeros(n)
  for k in range(n - 1, -1, -1):
    diag[k] = max(a[k, k], MINVAL)
    row = a[k, :k] / diag[k]
    a[:k, :k] -= np.outer(a[k, :k], row)
    a[k, :k] = row
  low = np.tril(a, -1) + np.eye(n)  # M = low' diag low
  inv_low = np.linalg.inv(low)
  return inv_low @ (inv_low.T / diag[:, None])


def set_const(compiled: dict[str, Any]) -> dict[str, Any]:
  """Every qpos0-dependent constant (mj_setConst + AutoSpringDamper), as float64 NumPy arrays.

  Runs the position stage once, in float64 whatever the default precision; the caller adds the
  result to the compiled arrays and builds the final Model.
  """
  with jax.enable_x64(True):
    m64 = make_model(compiled)
    simple = body_simple(m64)
    at = _position_fn(m64)
    d, moment = at(m64.qpos0)
    moment = np.asarray(moment)
    qm = np.asarray(d.qM)
    minv = _inv_m(qm)
    # dof_M0: the diagonal of the composite-inertia pass, armature included (mj_setM0)
    dof_m0 = np.diag(qm).copy()
    if m64.ntendon:
      arm = np.asarray(dynamics.tendon_armature(m64))
      ten_j = np.asarray(d.ten_J)
      dof_m0 -= np.einsum('t,ti,ti->i', arm, ten_j, ten_j)
    body_iw, dof_iw = _invweights(m64, d, minv, simple)
    ten_j = np.asarray(d.ten_J)
    tendon_iw = ((ten_j @ minv) * ten_j).sum(axis=1) if m64.nv else np.zeros(m64.ntendon)
    acc0 = np.linalg.norm(moment @ minv, axis=1) if m64.nv else np.zeros(m64.nu)
    eq_data = _eq_data(m64, d)
    biasprm = _dampratio(m64, moment, minv)
    stats = _statistics(m64, d, qm, m64.statistic)
    fields: dict[str, Any] = {
      'dof_M0': dof_m0,
      'body_invweight0': body_iw,
      'dof_invweight0': dof_iw,
      'tendon_invweight0': tendon_iw,
      'tendon_length0': np.asarray(d.ten_length),
      'actuator_length0': np.asarray(d.actuator_length),
      'actuator_acc0': acc0,
      'eq_data': eq_data,
      'actuator_biasprm': biasprm,
      'dof_length': stats['dof_length'],
      'body_simple': simple,
    }
    # tendon springs without a given length rest at their length at qpos_spring (setSpring)
    if m64.ntendon:
      ls = np.array(m64.tendon_lengthspring, dtype=np.float64, copy=True)
      unset = (ls[:, 0] == -1) & (ls[:, 1] == -1)
      if unset.any():
        ds, _ = at(m64.qpos_spring)
        ls[unset] = np.asarray(ds.ten_length)[unset, None]
      fields['tendon_lengthspring'] = ls
    fields.update(_camera0(m64, d))
    stiffness, damping = _springdamper(m64, dof_iw)
    fields['jnt_stiffness'] = stiffness
    fields['dof_damping'] = damping
  fields['stat'] = stats['stat']
  return fields

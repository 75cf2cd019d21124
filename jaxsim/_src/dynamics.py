"""Mass matrix by composite rigid bodies, its factorisation and solves, RNE bias forces.

All tree sums are products with the static masks in `Model.tree_*` (dense, matmul-shaped).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from jaxsim._src import math
from jaxsim._src.enums import MINVAL, DisableBit, TrnType
from jaxsim._src.types import Data, Model


def _gear2_sum(m: Model, values: jax.Array, trntypes: tuple[int, ...], size: int) -> jax.Array:
  """Sum over actuators of values * gear[0]^2 onto their joint/tendon (mj_actuatorArmature)."""
  trn = np.asarray(m.actuator_trntype)
  sel = np.flatnonzero(np.isin(trn, trntypes))
  out = jnp.zeros(size, dtype=values.dtype)
  if sel.size == 0 or size == 0:
    return out
  target = np.asarray(m.actuator_trnid)[sel, 0]
  gear = m.actuator_gear[sel, 0]
  return out.at[target].add(values[sel] * gear * gear)


def dof_armature(m: Model) -> jax.Array:
  """Armature (nv,): dof_armature plus actuator armature times gear squared."""
  arm = m.dof_armature
  if m.nu:
    jnt = _gear2_sum(
      m, m.actuator_armature, (int(TrnType.JOINT), int(TrnType.JOINTINPARENT)), m.njnt
    )
    arm = arm + jnt[np.asarray(m.dof_jntid)]
  return arm


def tendon_armature(m: Model) -> jax.Array:
  """Tendon armature (ntendon,): tendon_armature plus actuator armature times gear squared."""
  arm = m.tendon_armature
  if m.nu:
    arm = arm + _gear2_sum(m, m.actuator_armature, (int(TrnType.TENDON),), m.ntendon)
  return arm


def dof_chain(m: Model) -> np.ndarray:
  """(nv, nv) bool: dof pairs on one ancestor chain, the sparsity of MuJoCo's qM and qDeriv."""
  anc = np.asarray(m.tree_dof_dof).astype(bool)  # [i, j]: j ancestor-or-self of i
  return anc | anc.T


def crb(m: Model, d: Data) -> Data:
  """Dense joint-space inertia qM (nv, nv), armature included (mj_crb + mj_tendonArmature)."""
  if not m.nv:
    return d
  dtype = d.cinert.dtype
  crb_body = jnp.asarray(m.tree_subtree, dtype=dtype) @ d.cinert
  buf = math.inert_mul(crb_body[np.asarray(m.dof_bodyid)], d.cdof)
  # raw[i, j] = cdof_i . (crb_body(j) cdof_j): valid where i is an ancestor dof of j
  raw = d.cdof @ buf.T
  anc = np.asarray(m.tree_dof_dof).astype(bool)  # [i, j]: j ancestor-or-self of i
  lower = jnp.where(anc, raw.T, 0.0)
  qm = lower + lower.T - jnp.diag(jnp.diag(lower))
  qm = qm + jnp.diag(dof_armature(m))
  if m.ntendon:
    arm = tendon_armature(m)
    # only within M's sparsity (dof pairs on one ancestor chain): MuJoCo's sparse qM has no
    # room for the terms of a tendon that couples two branches or two trees, and drops them
    chain = jnp.asarray(dof_chain(m), dtype=dtype)
    qm = qm + jnp.einsum('t,ti,tj->ij', arm, d.ten_J, d.ten_J) * chain
  return d.replace(qM=qm)


def factor_m(m: Model, d: Data) -> Data:
  """Cholesky factor of qM, lower triangular, in qLD (mj_factorM; dense, not MuJoCo's layout)."""
  if not m.nv:
    return d
  qld = jnp.linalg.cholesky(d.qM)
  # MuJoCo 4 clamps L'DL pivots below mjMINVAL and counts mjWARN_INERTIA (0); a dense Cholesky
  # of a singular M (redundant joints, no armature) has no pivot to clamp and leaves NaN (as
  # MJX does), so only the warning is mirrored
  # (a NaN qM, from a NaN qpos, is not counted: MuJoCo's pivot test is false for NaN)
  piv = jnp.diagonal(qld)
  singular = jnp.any(piv**2 < MINVAL) | (jnp.all(jnp.isfinite(d.qM)) & ~jnp.all(jnp.isfinite(piv)))
  warning = d.warning.at[0].add(singular.astype(d.warning.dtype))
  return d.replace(qLD=qld, warning=warning)


def solve_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
  """M^-1 x for x (nv,) or (nv, n), using the factor in qLD (mj_solveM)."""
  if not m.nv:
    return x
  return jsl.cho_solve((d.qLD, True), x)


def rne(m: Model, d: Data, flg_acc: bool = False) -> jax.Array:
  """M(qpos) qacc + C(qpos, qvel), or C alone without flg_acc (mj_rne); returns (nv,)."""
  if not m.nv:
    return jnp.zeros(0, dtype=d.qvel.dtype)
  dtype = d.cdof.dtype
  body_dof = jnp.asarray(m.tree_body_dof, dtype=dtype)
  acc = d.cdof_dot * d.qvel[:, None]
  if flg_acc:
    acc = acc + d.cdof * d.qacc[:, None]
  cacc = body_dof @ acc
  if not m.opt.disableflags & DisableBit.GRAVITY:
    cacc = cacc.at[:, 3:].add(-m.opt.gravity)
  cfrc = math.inert_mul(d.cinert, cacc)
  cfrc = cfrc + math.cross_force(d.cvel, math.inert_mul(d.cinert, d.cvel))
  cfrc = jnp.asarray(m.tree_subtree, dtype=dtype) @ cfrc
  return jnp.sum(d.cdof * cfrc[np.asarray(m.dof_bodyid)], axis=-1)


def bias(m: Model, d: Data) -> Data:
  """qfrc_bias: Coriolis, centrifugal and gravity forces (mj_rne without acceleration)."""
  return d.replace(qfrc_bias=rne(m, d))

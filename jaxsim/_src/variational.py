"""Linear-time variational integrator: DEL equations on SE(3) by DRNEA, solved by RIQN.

After Lee, Liu, Park and Srinivasa, "A Linear-Time Variational Integrator for Multibody Systems"
(WAFR 2016). Each body has the trapezoidal discrete Lagrangian
  L_d(T_k, T_k+1) = h (1/2 V'GV) - h/2 (P(T_k) + P(T_k+1)),  V = log(T_k^-1 T_k+1) / h,
and the forced discrete Euler-Lagrange (DEL) equation of joint i at time k is
  f_i = S_i' F_i + armature/damping terms - h Q_i = 0,
where F_i is the impulse transmitted through joint i. `residual` evaluates f by the discrete
recursive Newton-Euler algorithm (DRNEA: a forward pass for the relative displacements and average
twists, a backward pass for the transmitted impulses), and `step` solves f(q_k+1) = 0 by the
recursive impulse-based quasi-Newton method (RIQN): q <- q - h M^-1 f, with M^-1 applied by an
articulated-body impulse algorithm factored once per step. Every recursion is a `lax.scan` over
bodies in tree order, so the work per iteration is O(nbody) and compile time does not grow with the
model.

State convention: after a step, qvel is the average velocity (q_k+1 - q_k) / h of the step, as after
MuJoCo's Euler step, so (qpos, qvel) also gives the previous configuration q_k-1 = q_k - h qvel (on
the group for quaternions). `energy` estimates the velocity at q_k from the discrete Legendre
transform, which is second-order accurate where qvel itself is first-order.

Conventions: body-frame twists V = (w, v) (rotation first, as MuJoCo's spatial vectors), wrenches
(torque, force), G the spatial inertia about the body origin in the body frame, S_i (6, nd) the
body-frame twist per unit velocity of each dof of body i (free joints: world-frame linear and
body-frame angular velocity, as MuJoCo's qvel).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import dynamics, kinematics, math
from jaxsim._src.enums import (
  NPOLY,
  BiasType,
  DisableBit,
  DynType,
  GainType,
  IntegratorType,
  JointType,
  TrnType,
)
from jaxsim._src.integrate import integrate_pos
from jaxsim._src.types import Data, Model, make_data

FREE, BALL, SLIDE, HINGE = (
  int(t) for t in (JointType.FREE, JointType.BALL, JointType.SLIDE, JointType.HINGE)
)
MAX_ITER = 20  # RIQN iterations after the initial guess; converged iterations are skipped
UNROLL = int(__import__('os').environ.get('VI_UNROLL', '1'))

# B_j / j! for the even Bernoulli numbers of dexp^-1 (B_1 = -1/2 is applied separately); a
# truncation at j = 12 leaves a relative error below 2 (|h w| / 2 pi)^14: 1e-11 at 1 rad per step
_DEXPINV = {2: 1 / 12, 4: -1 / 720, 6: 1 / 30240, 8: -1 / 1209600, 10: 1 / 47900160}
_DEXPINV[12] = -691 / 1307674368000


# ---------------------------------------------------------------------------------------------
# SE(3) algebra on (quaternion, position) pairs


def _mm(a: jax.Array, b: jax.Array) -> jax.Array:
  """Batched small matrix product (..., i, j) x (..., j, k); XLA:CPU runs dots this small far
  slower than the equivalent fused multiply-and-sum, most of all inside the scans."""
  return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def _mv(a: jax.Array, v: jax.Array) -> jax.Array:
  """Batched small matrix-vector product (..., i, j) x (..., j)."""
  return jnp.sum(a * v[..., None, :], axis=-1)


def _skew(v: jax.Array) -> jax.Array:
  """Cross-product matrix (..., 3, 3) of v (..., 3)."""
  z = jnp.zeros_like(v[..., 0])
  x, y, w = v[..., 0], v[..., 1], v[..., 2]
  return jnp.stack(
    [jnp.stack([z, -w, y], -1), jnp.stack([w, z, -x], -1), jnp.stack([-y, x, z], -1)], -2
  )


def _log(t: jax.Array) -> jax.Array:
  """Twist (..., 6) with exp(twist) = t (..., 4, 4): the SE(3) logarithm, NaN-free at identity."""
  r, dp = t[..., :3, :3], t[..., :3, 3]
  a = 0.5 * jnp.stack([r[..., 2, 1] - r[..., 1, 2], r[..., 0, 2] - r[..., 2, 0],
                       r[..., 1, 0] - r[..., 0, 1]], axis=-1)  # fmt: skip
  cos = 0.5 * (r[..., 0, 0] + r[..., 1, 1] + r[..., 2, 2] - 1.0)
  sin = math.safe_norm(a)
  small = sin < 1e-6
  sin_ = jnp.where(small, 1.0, sin)
  angle = jnp.arctan2(sin, cos)
  r2 = (sin / cos) ** 2
  ratio = jnp.where(small, (1.0 - r2 / 3.0) / cos, angle / sin_)
  omega = a * ratio[..., None]
  # v = J^-1(omega) dp with J the left Jacobian of SO(3): J^-1 = I - [w]/2 + c [w]^2,
  # c = (1 - (t/2) cot(t/2)) / t^2; its Taylor series avoids the cancellation at small angles
  th2 = jnp.sum(omega * omega, axis=-1)
  taylor = th2 < 1e-2
  th2_ = jnp.where(taylor, 1.0, th2)
  c_big = (1.0 - 0.5 * angle * (1.0 + cos) / sin_) / th2_
  c_small = 1 / 12 + th2 * (1 / 720 + th2 * (1 / 30240 + th2 / 1209600))
  c = jnp.where(taylor, c_small, c_big)[..., None]
  wxp = jnp.cross(omega, dp)
  v = dp - 0.5 * wxp + c * jnp.cross(omega, wxp)
  return jnp.concatenate([omega, v], axis=-1)


def _homogeneous(quat: jax.Array, pos: jax.Array, inverse: bool = False) -> jax.Array:
  """4x4 matrices (..., 4, 4) of the transforms (quat, pos), or of their inverses."""
  r = math.quat_to_mat(quat)
  if inverse:
    r = jnp.swapaxes(r, -1, -2)
    pos = -_mv(r, pos)
  top = jnp.concatenate([r, pos[..., None]], axis=-1)
  bottom = jnp.broadcast_to(jnp.array([0.0, 0, 0, 1], r.dtype), top.shape[:-2] + (1, 4))
  return jnp.concatenate([top, bottom], axis=-2)


def _momenta(gv: jax.Array, hv: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Discrete momenta dexp_{+hV}^-T G V and dexp_{-hV}^-T G V (..., 6) by the Bernoulli series."""
  w, v = _skew(hv[..., :3]), _skew(hv[..., 3:])
  adt = -jnp.concatenate(
    [jnp.concatenate([w, v], axis=-1), jnp.concatenate([jnp.zeros_like(w), w], axis=-1)], axis=-2
  )  # ad_{hV}' = [[-[w], -[v]], [0, -[w]]]
  t1 = _mv(adt, gv)
  even, t = gv, t1
  for j in range(2, max(_DEXPINV) + 1):
    t = _mv(adt, t)
    if j in _DEXPINV:
      even = even + _DEXPINV[j] * t
  return even - 0.5 * t1, even + 0.5 * t1


def _spatial_inertia(m: Model) -> jax.Array:
  """G (nbody, 6, 6): spatial inertia about each body origin, in the body frame."""
  ri = math.quat_to_mat(m.body_iquat)
  ic = jnp.einsum('bij,bj,bkj->bik', ri, m.body_inertia, ri)
  mass = m.body_mass[:, None, None]
  ch = _skew(m.body_ipos)
  eye = jnp.eye(3, dtype=ic.dtype)
  top = jnp.concatenate([ic - mass * _mm(ch, ch), mass * ch], axis=-1)
  bottom = jnp.concatenate([-mass * ch, mass * eye], axis=-1)
  return jnp.concatenate([top, bottom], axis=-2)


def _spd_inv(a: jax.Array) -> jax.Array:
  """Inverse of small symmetric positive-definite matrices (..., n, n), unrolled Gauss-Jordan."""
  n = a.shape[-1]
  if n == 1:
    return 1.0 / a
  inv = jnp.broadcast_to(jnp.eye(n, dtype=a.dtype), a.shape)
  for k in range(n):
    piv = a[..., k : k + 1, k : k + 1]
    rowa, rowi = a[..., k : k + 1, :] / piv, inv[..., k : k + 1, :] / piv
    col = a[..., :, k : k + 1]
    sel = (jnp.arange(n) == k)[:, None]
    a = jnp.where(sel, rowa, a - col * rowa)
    inv = jnp.where(sel, rowi, inv - col * rowi)
  return inv


# ---------------------------------------------------------------------------------------------
# static tree structure and scans over bodies


class _Tree(NamedTuple):
  """Static structure: bodies 1..nbody-1 in tree order, their parents, the dof layout."""

  parent: np.ndarray  # (nb,) parent body id of bodies 1..nbody-1
  chain: bool  # every body's parent is the previous body: scans carry one value, no buffer
  nd: int  # most dofs of any body; per-body dof arrays are padded to it
  dofmap: np.ndarray  # (nb, nd) dof ids of bodies 1.., nv where padded
  nbody: int


def _tree(m: Model) -> _Tree:
  parent = np.asarray(m.body_parentid)[1:]
  chain = bool(np.all(parent == np.arange(len(parent))))
  dofnum, dofadr = np.asarray(m.body_dofnum)[1:], np.asarray(m.body_dofadr)[1:]
  nd = max(int(dofnum.max(initial=0)), 1)
  k = np.arange(nd)
  dofmap = np.where(k < dofnum[:, None], dofadr[:, None] + k, m.nv).astype(np.int32)
  return _Tree(parent, chain, nd, dofmap, m.nbody)


def _tmap(f, *trees):
  return jax.tree_util.tree_map(f, *trees)


def _scan_down(t: _Tree, fn, root, xs):
  """Values of bodies 1.. (stacked): value_i = fn(value_parent(i), xs_i); the world's is root."""
  if t.chain:

    def body(prev, x):
      v = fn(prev, x)
      return v, v

    return jax.lax.scan(body, root, xs, unroll=UNROLL)[1]
  buf = _tmap(lambda r: jnp.broadcast_to(r, (t.nbody,) + r.shape), root)
  ids = np.arange(1, t.nbody, dtype=np.int32)

  def body(buf, x):
    i, p, x = x
    v = fn(_tmap(lambda b: b[p], buf), x)
    return _tmap(lambda b, vv: b.at[i].set(vv), buf, v), v

  return jax.lax.scan(body, buf, (ids, t.parent.astype(np.int32), xs), unroll=UNROLL)[1]


def _scan_up(t: _Tree, fn, zero, xs):
  """Outputs of bodies 1.. in reverse tree order: (out_i, up_i) = fn(sum of children's up, xs_i)."""
  if t.chain:

    def body(acc, x):
      out, up = fn(acc, x)
      return up, out

    return jax.lax.scan(body, zero, xs, reverse=True, unroll=UNROLL)[1]
  buf = _tmap(lambda z: jnp.broadcast_to(z, (t.nbody,) + z.shape), zero)
  ids = np.arange(1, t.nbody, dtype=np.int32)

  def body(buf, x):
    i, p, x = x
    out, up = fn(_tmap(lambda b: b[i], buf), x)
    return _tmap(lambda b, u: b.at[p].add(u), buf, up), out

  return jax.lax.scan(body, buf, (ids, t.parent.astype(np.int32), xs), reverse=True, unroll=UNROLL)[
    1
  ]


def _gather(t: _Tree, x: jax.Array) -> jax.Array:
  """Dof vector (nv,) -> per-body padded (nb, nd)."""
  return jnp.concatenate([x, jnp.zeros(1, x.dtype)])[t.dofmap]


def _scatter(t: _Tree, x: jax.Array, nv: int) -> jax.Array:
  """Per-body padded (nb, nd) -> dof vector (nv,)."""
  return jnp.zeros(nv + 1, x.dtype).at[t.dofmap].set(x)[:nv]


# ---------------------------------------------------------------------------------------------
# support checks


def _constraint_features(m: Model) -> list[str]:
  flags = m.opt.disableflags
  if flags & DisableBit.CONSTRAINT:
    return []
  c, out = m.constraint_counts, []
  if not flags & DisableBit.EQUALITY and m.neq:
    out.append(f'{m.neq} equality constraint(s)')
  if not flags & DisableBit.FRICTIONLOSS and (c['dof_frictionloss'] or c['tendon_frictionloss']):
    out.append('friction loss')
  if not flags & DisableBit.LIMIT and (c['jnt_limited'] or c['tendon_limited']):
    out.append('joint or tendon limits')
  if not flags & DisableBit.CONTACT and c['contact_pairs']:
    out.append('contacts')
  return out


def _supported_actuators(m: Model) -> np.ndarray:
  """Ids of actuators the integrator applies; raises for the kinds it does not model."""
  if not m.nu or m.opt.disableflags & DisableBit.ACTUATION:
    return np.zeros(0, dtype=np.int64)
  trn, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
  jt = np.asarray(m.jnt_type)
  names = m.names.get('actuator', ()) if isinstance(m.names, dict) else ()
  for a in range(m.nu):
    name = names[a] if a < len(names) and names[a] else f'#{a}'
    ok = (
      trn[a] in (TrnType.JOINT, TrnType.JOINTINPARENT)
      and int(np.asarray(m.actuator_dyntype)[a]) == DynType.NONE
      and int(np.asarray(m.actuator_gaintype)[a]) in (GainType.FIXED, GainType.AFFINE)
      and int(np.asarray(m.actuator_biastype)[a]) in (BiasType.NONE, BiasType.AFFINE)
      and jt[trnid[a, 0]] in (HINGE, SLIDE)
    )
    if not ok:
      raise NotImplementedError(
        f'the variational integrator applies only actuators without activation dynamics, with '
        f'fixed or affine gain and bias, on hinge or slide joints; actuator {name} is not one'
      )
  return np.arange(m.nu)


def check_supported(m: Model) -> None:
  """Raises NotImplementedError, naming the feature, for models the integrator cannot simulate."""
  if m.opt.has_fluid_params:
    raise NotImplementedError('the variational integrator does not include fluid forces')
  missing = _constraint_features(m)
  if missing:
    raise NotImplementedError(
      'the variational integrator does not handle constraints; this model has '
      + ', '.join(missing)
      + '. Disable them (<flag constraint="disable"/>) or use another integrator.'
    )
  if m.ntendon:
    raise NotImplementedError('the variational integrator does not support tendons')
  if m.na:
    raise NotImplementedError('the variational integrator does not support actuator activations')
  jt = np.asarray(m.jnt_type)
  jnt_body = np.asarray(m.jnt_bodyid)
  adr, num = np.asarray(m.body_jntadr), np.asarray(m.body_jntnum)
  parent = np.asarray(m.body_parentid)
  for j in np.flatnonzero((jt == FREE) | (jt == BALL)):
    b = jnt_body[j]
    last = adr[b] + num[b] - 1
    if jt[j] == FREE and (num[b] != 1 or parent[b] != 0):
      raise NotImplementedError(
        f'the variational integrator needs free joints alone in top-level bodies (body {b})'
      )
    if jt[j] == BALL and j != last:
      raise NotImplementedError(
        f'the variational integrator needs a ball joint to be the last joint of its body (body {b})'
      )
  if np.any(np.asarray(m.jnt_actfrclimited)):
    raise NotImplementedError('the variational integrator does not support actuatorfrcrange')
  _supported_actuators(m)


# ---------------------------------------------------------------------------------------------
# generalized forces


def _poly(linear: jax.Array, poly: jax.Array, x: jax.Array) -> jax.Array:
  """linear + poly_1 x + poly_2 x^2 (mju_polyForce coefficient)."""
  return linear + sum(poly[..., i] * x ** (i + 1) for i in range(NPOLY))


def _springs(m: Model, qpos: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Joint spring forces (nv,) and their potential (mj_springdamper, mj_energyPos)."""
  qfrc = jnp.zeros(m.nv, dtype=qpos.dtype)
  energy = jnp.zeros((), dtype=qpos.dtype)
  if m.opt.disableflags & DisableBit.SPRING:
    return qfrc, energy
  jt = np.asarray(m.jnt_type)
  qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
  k, kp = m.jnt_stiffness, m.jnt_stiffnesspoly

  def potential(j, x):
    return 0.5 * k[j] * x * x + sum(kp[j, i] / (i + 3) * x ** (i + 3) for i in range(NPOLY))

  j = np.flatnonzero(np.isin(jt, (HINGE, SLIDE)))
  if j.size:
    x = qpos[qadr[j]] - m.qpos_spring[qadr[j]]
    qfrc = qfrc.at[dadr[j]].set(-x * _poly(k[j], kp[j], x))
    energy = energy + jnp.sum(potential(j, x))
  for jtype in (FREE, BALL):
    j = np.flatnonzero(jt == jtype)
    if not j.size:
      continue
    pa, da = qadr[j], dadr[j]
    if jtype == FREE:
      dif = qpos[pa[:, None] + np.arange(3)] - m.qpos_spring[pa[:, None] + np.arange(3)]
      r = math.safe_norm(dif)
      qfrc = qfrc.at[da[:, None] + np.arange(3)].add(-_poly(k[j], kp[j], r)[:, None] * dif)
      energy = energy + jnp.sum(potential(j, r))
      pa, da = pa + 3, da + 3
    idx = pa[:, None] + np.arange(4)
    dif = math.quat_sub(math.quat_normalize(qpos[idx]), m.qpos_spring[idx])
    r = math.safe_norm(dif)
    qfrc = qfrc.at[da[:, None] + np.arange(3)].add(-_poly(k[j], kp[j], r)[:, None] * dif)
    energy = energy + jnp.sum(potential(j, r))
  return qfrc, energy


def _damping(m: Model) -> tuple[jax.Array, jax.Array]:
  """Dof damping (nv,) and polynomial (nv, NPOLY), joint-actuator damping times gear^2 included."""
  damping, poly = m.dof_damping, m.dof_dampingpoly
  if m.opt.disableflags & DisableBit.DAMPER:
    return jnp.zeros_like(damping), jnp.zeros_like(poly)
  if m.nu:
    trn = np.asarray(m.actuator_trntype)
    sel = np.flatnonzero(np.isin(trn, (TrnType.JOINT, TrnType.JOINTINPARENT)))
    jnt = np.asarray(m.actuator_trnid)[sel, 0]
    gear2 = m.actuator_gear[sel, 0] ** 2
    dof = np.asarray(m.jnt_dofadr)[jnt]
    ok = np.isin(np.asarray(m.jnt_type)[jnt], (HINGE, SLIDE))
    damping = damping.at[dof[ok]].add((m.actuator_damping[sel] * gear2)[ok])
    poly = poly.at[dof[ok]].add((m.actuator_dampingpoly[sel] * gear2[:, None])[ok])
  return damping, poly


def _damper_force(damping: jax.Array, poly: jax.Array, qvel: jax.Array) -> jax.Array:
  """Damping force (nv,) at velocity qvel (mju_polyForce with odd symmetry)."""
  return -qvel * _poly(damping, poly, jnp.abs(qvel))


def _actuator_force(m: Model, d: Data, qpos: jax.Array, qvel: jax.Array) -> jax.Array:
  """qfrc_actuator (nv,) of joint-transmission actuators on hinges and slides (mj_fwdActuation)."""
  acts = _supported_actuators(m)
  if not acts.size:
    return jnp.zeros(m.nv, dtype=qpos.dtype)
  jnt = np.asarray(m.actuator_trnid)[:, 0]
  dof, qadr = np.asarray(m.jnt_dofadr)[jnt], np.asarray(m.jnt_qposadr)[jnt]
  gear = m.actuator_gear[:, 0]
  length, velocity = gear * qpos[qadr], gear * qvel[dof]
  ctrl = d.ctrl
  if not m.opt.disableflags & DisableBit.CLAMPCTRL:
    lim = np.asarray(m.actuator_ctrllimited).astype(bool)
    rng = m.actuator_ctrlrange
    ctrl = jnp.where(lim, jnp.clip(ctrl, rng[:, 0], rng[:, 1]), ctrl)
  affine_g = np.asarray(m.actuator_gaintype) == GainType.AFFINE
  affine_b = np.asarray(m.actuator_biastype) == BiasType.AFFINE
  g, b = m.actuator_gainprm, m.actuator_biasprm
  gain = g[:, 0] + jnp.where(affine_g, g[:, 1] * length + g[:, 2] * velocity, 0.0)
  bias = jnp.where(affine_b, b[:, 0] + b[:, 1] * length + b[:, 2] * velocity, 0.0)
  force = gain * ctrl + bias
  flim = np.asarray(m.actuator_forcelimited).astype(bool)
  frng = m.actuator_forcerange
  force = jnp.where(flim, jnp.clip(force, frng[:, 0], frng[:, 1]), force)
  return jnp.zeros(m.nv, dtype=qpos.dtype).at[dof].add(gear * force)


def _body_wrenches(m: Model, d: Data, xmat: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Gravity and xfrc_applied as body-frame wrenches (nbody, 6) about the body origins."""
  c = m.body_ipos
  rt = jnp.swapaxes(xmat, -1, -2)
  grav = jnp.zeros_like(c)
  if not m.opt.disableflags & DisableBit.GRAVITY:
    scale = m.body_mass * (1.0 - m.body_gravcomp)
    grav = scale[:, None] * _mv(rt, m.opt.gravity)
  fb = _mv(rt, d.xfrc_applied[:, :3])
  tb = _mv(rt, d.xfrc_applied[:, 3:])
  gravity = jnp.concatenate([jnp.cross(c, grav), grav], axis=-1)
  applied = jnp.concatenate([tb + jnp.cross(c, fb), fb], axis=-1)
  return gravity, applied


def _gravity_potential(m: Model, world: jax.Array) -> jax.Array:
  """-sum m g'x_com (mj_energyPos, gravity part) from the world frames (nbody, 4, 4)."""
  xipos = _mv(world[:, :3, :3], m.body_ipos) + world[:, :3, 3]
  if m.opt.disableflags & DisableBit.GRAVITY or m.nbody < 2:
    return jnp.zeros((), dtype=xipos.dtype)
  mass = m.body_mass[1:] * (1.0 - m.body_gravcomp[1:])
  return -jnp.sum(mass * (xipos[1:] @ m.opt.gravity))


# ---------------------------------------------------------------------------------------------
# configuration-dependent quantities


class _Frames(NamedTuple):
  """Kinematics at one configuration, from the bodies' local frames."""

  local: jax.Array  # T_{p,i} (nbody, 4, 4)
  world: jax.Array  # T_i (nbody, 4, 4)
  s: jax.Array  # motion subspaces (nb, 6, nd)


def _local(m: Model, d: Data, qpos: jax.Array) -> jax.Array:
  """Each body's frame relative to its parent (nbody, 4, 4) at qpos (mj_kinematics, local part)."""
  pos, quat, _, _ = kinematics.local_frames(m, d.replace(qpos=qpos))
  return _homogeneous(quat, pos)


def _frames(m: Model, t: _Tree, d: Data, qpos: jax.Array) -> _Frames:
  """Local and world frames and the motion subspaces S (nb, 6, nd) at qpos."""
  pos, quat, jpos, jquat = kinematics.local_frames(m, d.replace(qpos=qpos))
  local = _homogeneous(quat, pos)
  world = _scan_down(t, lambda prev, x: _mm(prev, x), jnp.eye(4, dtype=pos.dtype), local[1:])
  world = jnp.concatenate([jnp.eye(4, dtype=pos.dtype)[None], world])
  return _Frames(local, world, _motion_subspace(m, t, pos, quat, jpos, jquat))


def _motion_subspace(m: Model, t: _Tree, pos, quat, jpos, jquat) -> jax.Array:
  """S (nb, 6, nd): body-frame twist per unit dof velocity of bodies 1.., from local frames."""
  dtype = pos.dtype
  jt, jb = np.asarray(m.jnt_type), np.asarray(m.jnt_bodyid)
  # one 6-column per dof, assembled in dof order by a static permutation, then padded per body
  cols, order = [], []
  eye = jnp.eye(3, dtype=dtype)
  for jtype in (HINGE, SLIDE, BALL, FREE):
    j = np.flatnonzero(jt == jtype)
    if not j.size:
      continue
    b = jb[j]
    if jtype in (HINGE, SLIDE):
      # the joint's axis and anchor in the parent frame, then in the body's (final) frame
      inv = math.quat_neg(quat[b])
      axis = math.rot_vec_quat(math.rot_vec_quat(m.jnt_axis[j], jquat[j]), inv)
      if jtype == HINGE:
        anchor = jpos[j] + math.rot_vec_quat(m.jnt_pos[j], jquat[j])
        r = math.rot_vec_quat(anchor - pos[b], inv)
        col = jnp.concatenate([axis, jnp.cross(r, axis)], axis=-1)
      else:
        col = jnp.concatenate([jnp.zeros_like(axis), axis], axis=-1)
      cols.append(col)
      order.append(np.asarray(m.jnt_dofadr)[j])
    elif jtype == BALL:
      # the ball is its body's last joint: its local rotation is the body frame's
      rot = jnp.broadcast_to(eye, (len(j), 3, 3))
      lin = jnp.swapaxes(_skew(m.jnt_pos[j]), 1, 2)  # column k: jnt_pos x e_k
      cols.append(jnp.concatenate([rot, lin], axis=-1).reshape(-1, 6))
      order.append((np.asarray(m.jnt_dofadr)[j][:, None] + np.arange(3)).ravel())
    else:
      rt = jnp.swapaxes(math.quat_to_mat(quat[b]), 1, 2)  # top-level: local frame = world frame
      z = jnp.zeros((len(j), 3, 3), dtype)
      lin = jnp.concatenate([z, jnp.swapaxes(rt, 1, 2)], axis=-1)  # column k: (0, R' e_k)
      ang = jnp.concatenate([jnp.broadcast_to(eye, (len(j), 3, 3)), z], axis=-1)
      cols.append(jnp.concatenate([lin, ang], axis=1).reshape(-1, 6))
      order.append((np.asarray(m.jnt_dofadr)[j][:, None] + np.arange(6)).ravel())
  if not cols:
    return jnp.zeros((t.nbody - 1, 6, t.nd), dtype)
  cols = jnp.concatenate(cols + [jnp.zeros((1, 6), dtype)])
  inv_order = np.empty(m.nv + 1, dtype=np.int64)
  inv_order[np.concatenate(order)] = np.arange(m.nv)
  inv_order[m.nv] = m.nv
  return jnp.swapaxes(cols[inv_order[t.dofmap]], 1, 2)


def _displacements(t: _Tree, ainv: jax.Array, b: jax.Array) -> jax.Array:
  """DRNEA forward pass: dT_i = (T^a_{p,i})^-1 dT_p T^b_{p,i} (nb, 4, 4), given the inverses."""
  return _scan_down(
    t, lambda prev, x: _mm(_mm(x[0], prev), x[1]), jnp.eye(4, dtype=b.dtype), (ainv, b)
  )


def _linear_down(t: _Tree, a: jax.Array, r: jax.Array, n: int) -> jax.Array:
  """Affine forward pass: y_i = a_i y_p(i) + r_i (a (nb, k, n), r (nb, k)); returns y_i[n:]."""

  def fn(prev, x):
    y = _mv(x[0], prev[0]) + x[1]
    return y[:n], y[n:]

  root = (jnp.zeros(n, r.dtype), jnp.zeros(r.shape[1] - n, r.dtype))
  return _scan_down(t, fn, root, (a, r))[1]


def _linear_up(t: _Tree, a: jax.Array, r: jax.Array, n: int) -> jax.Array:
  """Affine backward pass: y_i = a_i (sum of children's y_c[:n]) + r_i; returns y_i[n:]."""

  def fn(acc, x):
    y = _mv(x[0], acc) + x[1]
    return y[n:], y[:n]

  return _scan_up(t, fn, jnp.zeros(n, r.dtype), (a, r))


def difference(m: Model, qpos1: jax.Array, qpos0: jax.Array, h: jax.Array) -> jax.Array:
  """Velocity (nv,) that moves qpos0 to qpos1 in time h (mj_differentiatePos)."""
  jt = np.asarray(m.jnt_type)
  qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
  v = jnp.zeros(m.nv, dtype=qpos1.dtype)
  j = np.flatnonzero(np.isin(jt, (HINGE, SLIDE)))
  if j.size:
    v = v.at[dadr[j]].set(qpos1[qadr[j]] - qpos0[qadr[j]])
  j = np.flatnonzero(jt == FREE)
  if j.size:
    q, dv = qadr[j][:, None] + np.arange(3), dadr[j][:, None] + np.arange(3)
    v = v.at[dv].set(qpos1[q] - qpos0[q])
  j = np.flatnonzero(np.isin(jt, (FREE, BALL)))
  if j.size:
    off = np.where(jt[j] == FREE, 3, 0)
    q = (qadr[j] + off)[:, None] + np.arange(4)
    dv = (dadr[j] + off)[:, None] + np.arange(3)
    q1, q0 = math.quat_normalize(qpos1[q]), math.quat_normalize(qpos0[q])
    v = v.at[dv].set(math.quat_sub(q1, q0))
  return v / h


class Context(NamedTuple):
  """What one step's DEL residual needs that does not depend on q_k+1 (all at q_k)."""

  qpos: jax.Array  # q_k (nq,)
  qvel: jax.Array  # average velocity of the previous step (nv,)
  ainv: jax.Array  # T_{p,i}^-1 at q_k (nb, 4, 4)
  xt: jax.Array  # Ad_{T_{p,i}^-1}': child-to-parent wrench transform (nb, 6, 6)
  s: jax.Array  # motion subspaces (nb, 6, nd)
  g: jax.Array  # spatial inertias (nb, 6, 6)
  const: jax.Array  # mu^-(V_k-1) + h (gravity + applied wrench) per body (nb, 6)
  armature: jax.Array  # (nv,)
  damping: jax.Array  # (nv,)
  dampingpoly: jax.Array  # (nv, NPOLY)
  qfrc: jax.Array  # spring, actuator and applied generalized forces at q_k (nv,)
  aba: tuple  # articulated-body impulse solver, see _aba


def _factor(t: _Tree, g: jax.Array, s: jax.Array, xt: jax.Array, diag: jax.Array):
  """Articulated-body inertias: K = I^A S D^-1 and D^-1 per body (backward pass of the ABA)."""

  def fn(acc, xs):
    g, s, xt, diag = xs
    ia = g + acc
    u = _mm(ia, s)
    dinv = _spd_inv(_mm(s.T, u) + jnp.diag(diag))
    # keep D^-1 and the articulated inertia exactly symmetric: an asymmetric rounding residue is
    # amplified level by level and ruins long chains of multi-dof bodies
    dinv = 0.5 * (dinv + dinv.T)
    k = _mm(u, dinv)
    ia = _mm(_mm(xt, ia - _mm(k, u.T)), xt.T)
    return (k, dinv), 0.5 * (ia + ia.T)

  return _scan_up(t, fn, jnp.zeros((6, 6), g.dtype), (g, s, xt, diag))


def _aba(t: _Tree, g: jax.Array, s: jax.Array, xt: jax.Array, diag: jax.Array) -> tuple:
  """Per-body affine maps of the impulse ABA and of the DRNEA backward pass fused with it.

  Backward, carrying the children's transmitted impulse F and articulated bias impulse P (12):
    F_i = own_i + F_c; f_i = S'F_i + e_i; u_i = f_i - S'P_c; P_i = P_c + K u_i;
    up = (X'F_i, X'P_i), out = (f_i, u_i),
  forward, carrying the velocity change a (6): a' = X a_p; dv_i = D^-1 u_i - K'a'; a = a' + S dv_i.
  Returns (xt, s, k, dinv, up (nb, 12 + 2 nd, 12), down (nb, 6 + nd, 6)).
  """
  k, dinv = _factor(t, g, s, xt, diag)
  st = jnp.swapaxes(s, 1, 2)
  x = jnp.swapaxes(xt, 1, 2)
  xks = _mm(_mm(xt, k), st)
  z6, zd = jnp.zeros_like(xt), jnp.zeros_like(st)
  up = jnp.concatenate(
    [
      jnp.concatenate([xt, z6], axis=2),
      jnp.concatenate([xks, xt - xks], axis=2),
      jnp.concatenate([st, zd], axis=2),
      jnp.concatenate([st, -st], axis=2),
    ],
    axis=1,
  )
  ktx = _mm(jnp.swapaxes(k, 1, 2), x)
  down = jnp.concatenate([x - _mm(s, ktx), -ktx], axis=1)
  return xt, s, k, dinv, up, down


def _aba_solve(t: _Tree, aba: tuple, own: jax.Array, e: jax.Array):
  """(f, M^-1 f) per body (nb, nd) where f = S'(own + children's impulses) + e: three scans."""
  xt, s, k, dinv, up, down = aba
  w = _mv(jnp.swapaxes(s, 1, 2), own) + e
  r = jnp.concatenate([_mv(xt, own), _mv(_mm(xt, k), w), w, w], axis=1)
  out = _linear_up(t, up, r, 12)
  nd = s.shape[2]
  f, u = out[:, :nd], out[:, nd:]
  du = _mv(dinv, u)
  dv = _linear_down(t, down, jnp.concatenate([_mv(s, du), du], 1), 6)
  return f, dv


def _padded_diag(t: _Tree, diag: jax.Array) -> jax.Array:
  """Per-body (nb, nd) diagonal additions to D, one on padded slots so that D stays invertible."""
  return jnp.where(t.dofmap < diag.shape[0], _gather(t, diag), 1.0)


def _previous_momenta(m: Model, t: _Tree, d: Data, g: jax.Array, local: jax.Array):
  """mu^-(V_k-1) (nb, 6) of the step that ended at qpos, from q_k-1 = qpos - h qvel."""
  h = m.opt.timestep
  qprev = integrate_pos(m, d.qpos, d.qvel, -h)
  vprev = _log(_displacements(t, _hinv(_local(m, d, qprev)[1:]), local[1:])) / h
  return _momenta(_mv(g, vprev), h * vprev)[1]


def _hinv(t: jax.Array) -> jax.Array:
  """Inverses of rigid transforms (..., 4, 4)."""
  rt = jnp.swapaxes(t[..., :3, :3], -1, -2)
  top = jnp.concatenate([rt, -_mv(rt, t[..., :3, 3])[..., None]], axis=-1)
  return jnp.concatenate([top, t[..., 3:, :]], axis=-2)


def _xt(local: jax.Array) -> jax.Array:
  """Ad_{T^-1}' (nb, 6, 6) of the local frames of bodies 1..: child-to-parent wrench transform."""
  r, p = local[1:, :3, :3], local[1:, :3, 3]
  z = jnp.zeros_like(r)
  top = jnp.concatenate([r, _mm(_skew(p), r)], axis=-1)
  return jnp.concatenate([top, jnp.concatenate([z, r], axis=-1)], axis=-2)


def prepare(m: Model, d: Data) -> Context:
  """Everything of one step that is fixed while RIQN iterates on q_k+1 (DRNEA at q_k-1, q_k)."""
  t = _tree(m)
  h = m.opt.timestep
  q, v = d.qpos, d.qvel
  fr = _frames(m, t, d, q)
  xt = _xt(fr.local)
  g = _spatial_inertia(m)[1:]
  gravity, applied = _body_wrenches(m, d, fr.world[:, :3, :3])
  const = _previous_momenta(m, t, d, g, fr.local) + h * (gravity + applied)[1:]
  armature = dynamics.dof_armature(m)
  damping, poly = _damping(m)
  qfrc = _springs(m, q)[0] + _actuator_force(m, d, q, v) + d.qfrc_applied
  aba = _aba(t, g, fr.s, xt, _padded_diag(t, armature + 0.5 * h * damping))
  ainv = _hinv(fr.local[1:])
  return Context(q, v, ainv, xt, fr.s, g, const, armature, damping, poly, qfrc, aba)


def _dof_terms(m: Model, c: Context, qnext: jax.Array) -> jax.Array:
  """Armature, damping (trapezoidal Lagrange-d'Alembert) and h Q terms of the residual (nv,)."""
  h = m.opt.timestep
  vnew = difference(m, qnext, c.qpos, h)
  damp = _damper_force(c.damping, c.dampingpoly, vnew)
  damp = damp + _damper_force(c.damping, c.dampingpoly, c.qvel)
  return c.armature * (vnew - c.qvel) - 0.5 * h * damp - h * c.qfrc


def _body_terms(m: Model, c: Context, qnext: jax.Array, d: Data) -> jax.Array:
  """Per-body impulse residuals mu^+(V_k) - mu^-(V_k-1) - h W (nb, 6) (DRNEA forward pass)."""
  h = m.opt.timestep
  t = _tree(m)
  vk = _log(_displacements(t, c.ainv, _local(m, d, qnext)[1:])) / h
  mu_plus, _ = _momenta(_mv(c.g, vk), h * vk)
  return mu_plus - c.const


def residual(m: Model, c: Context, qnext: jax.Array, d: Data) -> jax.Array:
  """DEL residual f(q_k+1) (nv,) by DRNEA: joint impulses S'F + dof terms - h Q."""
  t = _tree(m)
  own = _body_terms(m, c, qnext, d)
  e = _gather(t, _dof_terms(m, c, qnext))
  a = jnp.concatenate([c.xt, jnp.swapaxes(c.s, 1, 2)], axis=1)
  r = _mv(a, own) + jnp.pad(e, ((0, 0), (6, 0)))
  return _scatter(t, _linear_up(t, a, r, 6), m.nv)


def _residual_and_update(m: Model, c: Context, qnext: jax.Array, d: Data):
  """(f (nv,), M^-1 f (nv,)): DRNEA's backward pass fused with the ABA impulse backward pass."""
  t = _tree(m)
  own = _body_terms(m, c, qnext, d)
  e = _gather(t, _dof_terms(m, c, qnext))
  f, dv = _aba_solve(t, c.aba, own, e)
  return _scatter(t, f, m.nv), _scatter(t, dv, m.nv)


def solve_impulse(m: Model, c: Context, tau: jax.Array) -> jax.Array:
  """(M + armature + h/2 damping)^-1 tau (nv,) at q_k by the articulated-body impulse algorithm."""
  t = _tree(m)
  own = jnp.zeros((m.nbody - 1, 6), tau.dtype)
  return _scatter(t, _aba_solve(t, c.aba, own, _gather(t, tau))[1], m.nv)


# ---------------------------------------------------------------------------------------------
# the step


def step_with_info(
  m: Model, d: Data, max_iter: int = MAX_ITER, tolerance: jax.Array | float | None = None
) -> tuple[Data, dict[str, Any]]:
  """One variational step and solver statistics (iterations, converged, last norms).

  The initial guess is semi-implicit Euler: the constant-velocity prediction q_k + h qvel corrected
  by one quasi-Newton update, which is q_k + h (qvel + h qacc) with qacc from the discrete dynamics.
  Then RIQN updates q <- q - h M^-1 f until max|M^-1 f| <= tolerance (opt.tolerance, a velocity) or
  max_iter updates: a fixed-length scan whose converged iterations are skipped by lax.cond (a select
  under vmap), so reverse-mode differentiation works.
  """
  check_supported(m)
  h = m.opt.timestep
  tol = m.opt.tolerance if tolerance is None else tolerance
  c = prepare(m, d)

  def update(q):
    f, dv = _residual_and_update(m, c, q, d)
    norm = lambda x: jnp.max(jnp.abs(x), initial=0.0)  # noqa: E731
    return integrate_pos(m, q, dv, -h), norm(dv), norm(f)

  def body(carry, _):
    q, dvn, fn, it = carry
    done = dvn <= tol
    q, dvn, fn = jax.lax.cond(done, lambda q: (q, dvn, fn), update, q)
    return (q, dvn, fn, it + jnp.where(done, 0, 1)), None

  # iteration 0 is the predictor's correction (the semi-implicit Euler guess): never skipped
  q = integrate_pos(m, d.qpos, d.qvel, h)
  inf = jnp.full((), jnp.inf, q.dtype)
  carry = (q, inf, inf, jnp.full((), -1, jnp.int32))
  (q, dvn, fn, it), _ = jax.lax.scan(body, carry, None, length=max_iter + 1)
  qvel = difference(m, q, d.qpos, h)
  out = d.replace(qpos=q, qvel=qvel, qacc=(qvel - d.qvel) / h, time=d.time + h)
  info = {'iterations': it, 'converged': dvn <= tol, 'update': dvn, 'residual': fn}
  return out, info


def step(m: Model, d: Data) -> Data:
  """Advances the state one timestep with the linear-time variational integrator (mj_step)."""
  return step_with_info(m, d)[0]


# ---------------------------------------------------------------------------------------------
# discrete mechanics helpers: residual, action, energy, momentum


def del_residual(m: Model, qprev: jax.Array, q: jax.Array, qnext: jax.Array, d: Data | None = None):
  """DEL residual f (nv,) at q for the triple (q_k-1, q_k, q_k+1); controls and forces from d."""
  d = d if d is not None else make_data(m)
  d = d.replace(qpos=q, qvel=difference(m, q, qprev, m.opt.timestep))
  return residual(m, prepare(m, d), qnext, d)


def discrete_lagrangian(m: Model, q0: jax.Array, q1: jax.Array, d: Data | None = None) -> jax.Array:
  """L_d(q0, q1): h (sum 1/2 V'GV + 1/2 armature v^2) - h/2 (P(q0) + P(q1)), trapezoidal."""
  h = m.opt.timestep
  d = d if d is not None else make_data(m)
  t = _tree(m)
  v = _log(_displacements(t, _hinv(_local(m, d, q0)[1:]), _local(m, d, q1)[1:])) / h
  g = _spatial_inertia(m)[1:]
  kinetic = 0.5 * jnp.sum(v * _mv(g, v))
  dv = difference(m, q1, q0, h)
  kinetic = kinetic + 0.5 * jnp.sum(dynamics.dof_armature(m) * dv * dv)

  def potential(q):
    return _gravity_potential(m, _frames(m, t, d, q).world) + _springs(m, q)[1]

  return h * kinetic - 0.5 * h * (potential(q0) + potential(q1))


def discrete_action(m: Model, qs: jax.Array, d: Data | None = None) -> jax.Array:
  """Action sum over a trajectory qs (T+1, nq): sum_k L_d(q_k, q_k+1)."""
  return jnp.sum(jax.vmap(lambda a, b: discrete_lagrangian(m, a, b, d))(qs[:-1], qs[1:]))


def momentum(m: Model, d: Data) -> jax.Array:
  """Discrete spatial momentum (6,) of the last step: (angular about the world origin, linear).

  sum_i Ad*_{T_i} mu_i with mu_i = dexp_{-hV}^-T G_i V_i of the step that ended at qpos; exactly
  conserved by the DEL equations when no external impulse acts.
  """
  t = _tree(m)
  fr = _frames(m, t, d, d.qpos)
  mu = _previous_momenta(m, t, d, _spatial_inertia(m)[1:], fr.local)
  r, p = fr.world[1:, :3, :3], fr.world[1:, :3, 3]
  f = _mv(r, mu[:, 3:])
  tau = _mv(r, mu[:, :3]) + jnp.cross(p, f)
  return jnp.concatenate([jnp.sum(tau, 0), jnp.sum(f, 0)])


def energy(m: Model, d: Data) -> jax.Array:
  """Total energy at qpos with the velocity of the discrete Legendre transform (scalar).

  p = D2 L_d(q_k-1, q_k) and v = (M + armature)^-1 p; E = p'v / 2 + gravity and spring potential.
  Second-order accurate along a variational trajectory, where qvel (an average) is first-order.
  """
  t = _tree(m)
  h = m.opt.timestep
  fr = _frames(m, t, d, d.qpos)
  g = _spatial_inertia(m)[1:]
  gravity, _ = _body_wrenches(m, d, fr.world[:, :3, :3])
  spring_frc, spring_pot = _springs(m, d.qpos)
  own = _previous_momenta(m, t, d, g, fr.local) + 0.5 * h * gravity[1:]
  xt = _xt(fr.local)
  armature = dynamics.dof_armature(m)
  e = _gather(t, armature * d.qvel + 0.5 * h * spring_frc)
  aba = _aba(t, g, fr.s, xt, _padded_diag(t, armature))
  p, v = _aba_solve(t, aba, own, e)
  return 0.5 * jnp.sum(p * v) + _gravity_potential(m, fr.world) + spring_pot


def kinetic_energy(m: Model, d: Data) -> jax.Array:
  """1/2 qvel' (M + armature) qvel at qpos by a forward pass over body twists (mj_energyVel)."""
  t = _tree(m)
  fr = _frames(m, t, d, d.qpos)
  x = jnp.swapaxes(_xt(fr.local), 1, 2)
  r = _mv(fr.s, _gather(t, d.qvel))
  v = _linear_down(t, jnp.concatenate([x, x], 1), jnp.concatenate([r, r], 1), 6)
  g = _spatial_inertia(m)[1:]
  arm = dynamics.dof_armature(m)
  return 0.5 * jnp.sum(v * _mv(g, v)) + 0.5 * jnp.sum(arm * d.qvel**2)


def potential_energy(m: Model, d: Data) -> jax.Array:
  """Gravity and joint-spring potential at qpos (mj_energyPos without tendons)."""
  fr = _frames(m, _tree(m), d, d.qpos)
  return _gravity_potential(m, fr.world) + _springs(m, d.qpos)[1]


def is_variational(m: Model) -> bool:
  """Whether the model selects this integrator (opt.integrator == IntegratorType.VARIATIONAL)."""
  return m.opt.integrator == IntegratorType.VARIATIONAL

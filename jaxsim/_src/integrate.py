"""Integrators: semi-implicit Euler (implicit joint damping), implicit, implicitfast and RK4.

Each takes a Data on which `forward` has run and returns the Data one timestep later. RK4 needs
the forward pass itself for its intermediate stages; forward.py passes it in, so this module stays
below forward.py in the import graph.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import actuation, dynamics, kinematics, math, passive
from jaxsim._src.enums import (
  MINVAL,
  BiasType,
  DisableBit,
  DynType,
  GainType,
  IntegratorType,
  TrnType,
)
from jaxsim._src.enums import JointType as JT
from jaxsim._src.types import Data, Model


def integrate_pos(m: Model, qpos: jax.Array, qvel: jax.Array, dt: jax.Array) -> jax.Array:
  """qpos advanced by qvel over dt; quaternions by rotation on the sphere (mj_integratePos)."""
  qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
  jt = np.asarray(m.jnt_type)
  qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
  scalar = np.isin(jt, (JT.HINGE, JT.SLIDE))
  if scalar.any():
    qpos = qpos.at[qadr[scalar]].add(dt * qvel[dadr[scalar]])
  free = jt == JT.FREE
  if free.any():
    q, v = qadr[free][:, None] + np.arange(3), dadr[free][:, None] + np.arange(3)
    qpos = qpos.at[q].add(dt * qvel[v])
  # ball joints and the rotational part of free joints: mju_quatIntegrate
  rot = np.isin(jt, (JT.BALL, JT.FREE))
  if rot.any():
    off = np.where(free, 3, 0)[rot]
    q = (qadr[rot] + off)[:, None] + np.arange(4)
    v = (dadr[rot] + off)[:, None] + np.arange(3)
    qpos = qpos.at[q].set(math.quat_integrate(qpos[q], qvel[v], dt))
  return qpos


def advance(
  m: Model, d: Data, act_dot: jax.Array, qacc: jax.Array, qvel: jax.Array | None = None
) -> Data:
  """Advances act, qvel, qpos and time by one timestep (mj_advance)."""
  h = m.opt.timestep
  act = d.act
  if m.na and not m.opt.disableflags & DisableBit.ACTUATION:
    act = actuation.next_activation(m, d, d.act, act_dot)
  new_qvel = d.qvel + h * qacc
  qpos = integrate_pos(m, d.qpos, new_qvel if qvel is None else qvel, h)
  return d.replace(act=act, qvel=new_qvel, qpos=qpos, time=d.time + h, qacc_warmstart=d.qacc)


def poly_force_deriv(linear: jax.Array, poly: jax.Array, x: jax.Array) -> jax.Array:
  """d(x * polyforce(x))/dx for an odd polynomial in |x| (mjd_xPolyForce)."""
  ax = jnp.abs(x)
  powers = ax[..., None] ** jnp.arange(1, poly.shape[-1] + 1)
  coef = jnp.arange(2, poly.shape[-1] + 2, dtype=poly.dtype)
  return linear + jnp.sum(coef * poly * powers, axis=-1)


def euler(m: Model, d: Data) -> Data:
  """Semi-implicit Euler with implicit joint damping unless eulerdamp is off (mj_Euler)."""
  flags = m.opt.disableflags
  qacc = d.qacc
  if m.nv and not flags & DisableBit.EULERDAMP and not flags & DisableBit.DAMPER:
    damping, poly = passive.dof_damping(m)
    b = poly_force_deriv(damping, poly, d.qvel)
    qh = d.qM + jnp.diag(m.opt.timestep * b)
    qfrc = d.qfrc_smooth + d.qfrc_constraint
    # MuJoCo factors M + hB only where some dof is damped; otherwise its qacc is d->qacc. The
    # damping values are dynamic here, so select rather than branch.
    damped = jnp.any(b != 0)
    # MuJoCo's L'DL (mj_factorI) on M's sparsity (hB is diagonal): its pivot clamp keeps a
    # singular M + hB finite; mjWARN_INERTIA is counted only where the factor is used, as MuJoCo
    # factors only then
    qld, warning = dynamics.factor_warn(qh, d.warning, damped, m)
    qacc = jnp.where(damped, dynamics.solve_sparse(dynamics.ld_layout(m), qld, qfrc), d.qacc)
    d = d.replace(warning=warning)
  return advance(m, d, d.act_dot, qacc)


def _muscle_gain_vel(length, vel, lengthrange, acc0, prm):
  """d(muscle gain)/d(velocity) per actuator (mjd_muscleGain_vel)."""
  rng0, rng1, force, scale = prm[:, 0], prm[:, 1], prm[:, 2], prm[:, 3]
  lmin, lmax, vmax, fvmax = prm[:, 4], prm[:, 5], prm[:, 6], prm[:, 8]
  force = jnp.where(force < 0, scale / jnp.maximum(MINVAL, acc0), force)
  l0 = (lengthrange[:, 1] - lengthrange[:, 0]) / jnp.maximum(MINVAL, rng1 - rng0)
  l = rng0 + (length - lengthrange[:, 0]) / jnp.maximum(MINVAL, l0)
  v = vel / jnp.maximum(MINVAL, l0 * vmax)
  fl = actuation.muscle_gain_length(l, lmin, lmax)
  y = fvmax - 1
  dfv = jnp.where(
    v <= -1,
    0.0,
    jnp.where(v <= 0, 2 * v + 2, jnp.where(v <= y, (-2 * v + 2 * y) / jnp.maximum(MINVAL, y), 0.0)),
  )
  return -force * fl * dfv / jnp.maximum(MINVAL, l0 * vmax)


def _actuator_vel_deriv(m: Model, d: Data) -> jax.Array:
  """d qfrc_actuator / d qvel (nv, nv) as MuJoCo's analytic mjd_actuator_vel."""
  if not m.nu or m.opt.disableflags & DisableBit.ACTUATION:
    return jnp.zeros((m.nv, m.nv), d.qvel.dtype)
  biastype, gaintype = np.asarray(m.actuator_biastype), np.asarray(m.actuator_gaintype)
  dyntype = np.asarray(m.actuator_dyntype)
  bias_vel = jnp.where(biastype == BiasType.AFFINE, m.actuator_biasprm[:, 2], 0.0)
  gain_vel = jnp.where(gaintype == GainType.AFFINE, m.actuator_gainprm[:, 2], 0.0)
  if (gaintype == GainType.MUSCLE).any():
    mus = _muscle_gain_vel(
      d.actuator_length,
      d.actuator_velocity,
      m.actuator_lengthrange,
      m.actuator_acc0,
      m.actuator_gainprm,
    )
    gain_vel = jnp.where(gaintype == GainType.MUSCLE, mus, gain_vel)
  # the gain multiplies ctrl (unclamped, as MuJoCo reads d->ctrl here) or the activation
  if m.na:
    actadr = np.asarray(m.actuator_actadr) + np.asarray(m.actuator_actnum) - 1
    act = d.act[np.maximum(actadr, 0)]
    early = np.asarray(m.actuator_actearly).astype(bool)
    if early.any():
      nxt = actuation.next_activation(m, d, d.act, d.act_dot)[np.maximum(actadr, 0)]
      act = jnp.where(early, nxt, act)
    inp = jnp.where(dyntype == DynType.NONE, d.ctrl, act)
  else:
    inp = d.ctrl
  b = bias_vel + gain_vel * inp
  # saturated actuators contribute nothing
  lo, hi = m.actuator_forcerange[:, 0], m.actuator_forcerange[:, 1]
  f = d.actuator_force
  clamped = np.asarray(m.actuator_forcelimited).astype(bool) & ((f <= lo) | (f >= hi))
  # ... nor do joint actuators whose joint's actfrcrange clamps qfrc_actuator (measured on
  # MuJoCo 4.0.0: Booster T1's hip actuators at its 30 N m joint limit have no qDeriv entry)
  trn, jid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)[:, 0]
  joint = np.isin(trn, (TrnType.JOINT, TrnType.JOINTINPARENT)) & (jid >= 0)
  if m.njnt and joint.any():
    jid = np.where(joint, jid, 0)
    limited = joint & np.asarray(m.jnt_actfrclimited).astype(bool)[jid]
    if limited.any():
      q = d.qfrc_actuator[np.asarray(m.jnt_dofadr)[jid]]
      rng = m.jnt_actfrcrange[jid]
      clamped = clamped | (limited & ((q <= rng[:, 0]) | (q >= rng[:, 1])))
  b = jnp.where(clamped, 0.0, b)
  mom = actuation.moment_dense(m, d.actuator_moment)
  return mom.T @ (b[:, None] * mom)


def _passive_vel_deriv(m: Model, d: Data) -> jax.Array:
  """d qfrc_passive / d qvel (nv, nv) as mjd_passive_vel: damping, tendon damping, fluid."""
  flags = m.opt.disableflags
  out = jnp.zeros((m.nv, m.nv), d.qvel.dtype)
  if flags & DisableBit.SPRING and flags & DisableBit.DAMPER:
    return out
  if passive.has_fluid(m):
    # MuJoCo differentiates its fluid model by hand; here the same force is differentiated
    # exactly by forward-mode AD.
    out = out + jax.jacfwd(lambda v: passive.fluid(m, kinematics.com_vel(m, d.replace(qvel=v))))(
      d.qvel
    )
  if flags & DisableBit.DAMPER:
    return out
  damping, poly = passive.dof_damping(m)
  out = out - jnp.diag(poly_force_deriv(damping, poly, d.qvel))
  if m.ntendon:
    tdamp, tpoly = passive.tendon_damping(m)
    b = poly_force_deriv(tdamp, tpoly, d.ten_velocity)
    out = out - d.ten_J.T @ (b[:, None] * d.ten_J)
  return out


def smooth_vel_deriv(m: Model, d: Data) -> jax.Array:
  """qDeriv (nv, nv): d (qfrc_actuator + qfrc_passive) / d qvel, as mjd_smooth_vel without the
  bias term, within MuJoCo's sparse qDeriv (dof pairs on one ancestor chain): a tendon or tendon
  actuator across sibling branches (the Panda's fingers) couples them in J'BJ only."""
  qderiv = _actuator_vel_deriv(m, d) + _passive_vel_deriv(m, d)
  return qderiv * jnp.asarray(dynamics.dof_chain(m), dtype=qderiv.dtype)


def rne_vel_deriv(m: Model, d: Data, bias_fn: Callable[[Data], jax.Array]) -> jax.Array:
  """d qfrc_bias / d qvel (nv, nv), exact, by forward-mode AD of the RNE pass (mjd_rne_vel)."""
  return jax.jacfwd(lambda v: bias_fn(d.replace(qvel=v)))(d.qvel)


def free_bodies(m: Model) -> np.ndarray:
  """Dof addresses (static) of the free joints of standalone free bodies, which get MuJoCo's
  local unsymmetric 6x6 solve in implicitfast (mj_isFreeBody): the body's only joint, no dof
  below it. Masses below it do not count: MuJoCo 4.0.0 solves a free body with a massive welded
  child locally too (its qvel matches mj_step only so; MuJoCo's source also compares subtree
  and body mass).
  """
  jt = np.asarray(m.jnt_type)
  body = np.asarray(m.jnt_bodyid)
  subtree_dofs = np.asarray(m.tree_subtree).astype(bool) @ np.asarray(m.body_dofnum)
  joints = [
    j
    for j in np.flatnonzero(jt == JT.FREE)
    if m.body_jntnum[body[j]] == 1 and subtree_dofs[body[j]] == 6
  ]
  return np.asarray(m.jnt_dofadr)[np.asarray(joints, dtype=np.int64)]


def free_mhat(
  m: Model, d: Data, qderiv: jax.Array, bias_fn: Callable[[Data], jax.Array], blocks: np.ndarray
) -> jax.Array:
  """(n, 6, 6) implicitfast's local matrices M - h (qDeriv - d bias / d qvel) of the standalone
  free bodies whose dofs are `blocks` (n, 6): unsymmetric, the gyroscopic derivative included
  (mjd_freeMhat)."""
  dbias = rne_vel_deriv(m, d, bias_fn)
  idx = (blocks[:, :, None], blocks[:, None, :])
  return d.qM[idx] - m.opt.timestep * (qderiv[idx] - dbias[idx])


def implicitfast_qderiv(qderiv: jax.Array) -> jax.Array:
  """The qDeriv (nv, nv) implicitfast factors: its symmetric part, as mjd_passive_vel
  symmetrizes the fluid forces' derivative body by body (J'BJ with B's symmetric part)."""
  return 0.5 * (qderiv + qderiv.T)


def implicit(m: Model, d: Data, bias_fn: Callable[[Data], jax.Array]) -> Data:
  """Implicit-in-velocity integration, implicit or implicitfast (mj_implicit).

  `bias_fn(d) -> qfrc_bias (nv,)` recomputes the bias force for a new qvel (the velocity stage),
  so that its derivative can be taken.
  """
  h = m.opt.timestep
  qfrc = d.qfrc_smooth + d.qfrc_constraint
  if not m.nv:
    return advance(m, d, d.act_dot, d.qacc)
  qderiv = smooth_vel_deriv(m, d)
  if m.opt.integrator == IntegratorType.IMPLICIT:
    qderiv = qderiv - rne_vel_deriv(m, d, bias_fn)
    qacc = dynamics.solve_lu(dynamics.factor_lu(d.qM - h * qderiv), qfrc)
    return advance(m, d, d.act_dot, qacc)

  # implicitfast: the symmetric part of qDeriv (only the fluid forces' derivative is
  # unsymmetric: MuJoCo symmetrizes each body's, ellipsoid lift included), factored by MuJoCo's
  # clamped L'DL (mj_factorI), which keeps a singular M - h qDeriv finite and counts it
  sym = implicitfast_qderiv(qderiv)
  free = free_bodies(m)
  if free.size:
    blocks = free[:, None] + np.arange(6)
    rows = blocks.reshape(-1)
    # standalone free bodies: rows reset to M in the global solve (decoupled blocks)
    sym = sym.at[rows].set(jnp.zeros((rows.size, m.nv), sym.dtype))
    sym = sym.at[:, rows].set(0.0)
  qh = d.qM - h * sym
  qld, warning = dynamics.factor_warn(qh, d.warning)
  qacc = dynamics.solve_ld(qld, qfrc)
  d = d.replace(warning=warning)
  if free.size:
    # ... and solved locally with the full unsymmetric 6x6 block (free_mhat). MuJoCo's
    # mju_factorLU6 pivots; this block is M's less h times a velocity derivative, diagonally
    # dominant, and factor_lu (no pivoting, no LAPACK call) agrees with it to round-off. Where
    # the block is singular MuJoCo keeps the global solve's qacc; so does a non-finite x here.
    a = free_mhat(m, d, qderiv, bias_fn, blocks)
    x = jax.vmap(lambda a, b: dynamics.solve_lu(dynamics.factor_lu(a), b))(a, qfrc[blocks])
    x = jnp.where(jnp.all(jnp.isfinite(x), axis=-1, keepdims=True), x, qacc[blocks])
    qacc = qacc.at[blocks].set(x)
  return advance(m, d, d.act_dot, qacc)


def _rotation_dofs(m: Model) -> np.ndarray:
  """(n, 3) static dof addresses of the angular velocities of ball and free joints."""
  jt, adr = np.asarray(m.jnt_type), np.asarray(m.jnt_dofadr)
  start = np.concatenate([adr[jt == JT.BALL], adr[jt == JT.FREE] + 3])
  return np.sort(start)[:, None] + np.arange(3)


def _munthe_kaas(m: Model, theta: jax.Array, qvel: jax.Array) -> jax.Array:
  """qvel (nv,) with each ball/free angular velocity w replaced by dexp^-1(theta) w, theta the
  rotation (nv,) the stage took from the step's start: w + theta x w / 2 + c theta x (theta x w),
  c = (1 - (t / 2) cot(t / 2)) / t^2 (RKMK; its series 1/12 + t^2/720 near t = 0)."""
  rot = _rotation_dofs(m)
  if not rot.size:
    return qvel
  th, w = theta[rot], qvel[rot]
  t2 = jnp.sum(th * th, axis=-1, keepdims=True)
  small = t2 < 1e-6
  t = jnp.sqrt(jnp.where(small, 1.0, t2))
  half = 0.5 * t
  c = jnp.where(small, 1.0 / 12 + t2 / 720, (1 - half * jnp.cos(half) / jnp.sin(half)) / (t * t))
  cross = jnp.cross(th, w)
  return qvel.at[rot].set(w + 0.5 * cross + c * jnp.cross(th, cross))


def rk4(m: Model, d: Data, forward_fn: Callable[[Model, Data], Data]) -> Data:
  """Classic 4th-order Runge-Kutta on (qpos, qvel, act) (mj_RungeKutta with N=4).

  `forward_fn` evaluates qacc and act_dot at an intermediate state (forward without sensors).
  """
  h = m.opt.timestep
  a_coef = (0.5, 0.5, 1.0)
  b_coef = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
  # position slopes: qvel, but on ball and free rotations the Munthe-Kaas correction of the stage
  # angular velocity, dexp^-1 of the stage's rotation (MuJoCo 4: fourth order on orientations)

  def stage(carry, c):
    # stage i+1 is X[0] '+' h * A[i, i] * F[i] (the tableau is diagonal)
    slope, qacc, act_dot, _ = carry
    dq = c * slope
    qpos = integrate_pos(m, d.qpos, dq, h)
    qvel = d.qvel + h * c * qacc
    act = d.act + h * c * act_dot
    di = forward_fn(m, d.replace(qpos=qpos, qvel=qvel, act=act, time=d.time + c * h))
    out = (_munthe_kaas(m, h * dq, qvel), di.qacc, di.act_dot)
    return (*out, di), out

  # the three stages as one scan: one forward pass in the program, not three (compile time)
  coef = jnp.asarray(a_coef, d.qpos.dtype)
  (*_, di), ys = jax.lax.scan(stage, (d.qvel, d.qacc, d.act_dot, d), coef)
  first = (d.qvel, d.qacc, d.act_dot)
  slopes, qaccs, act_dots = ([x0] + list(y) for x0, y in zip(first, ys, strict=True))
  dqvel = sum(b * v for b, v in zip(b_coef, slopes, strict=True))
  dqacc = sum(b * a for b, a in zip(b_coef, qaccs, strict=True))
  dact = sum(b * a for b, a in zip(b_coef, act_dots, strict=True))
  # MuJoCo's Data holds the last stage's derived quantities with the state restored to the start
  # of the step, and the tableau-weighted acceleration as qacc (which becomes the warm start)
  di = di.replace(qpos=d.qpos, qvel=d.qvel, act=d.act, time=d.time, qacc=dqacc)
  return advance(m, di, dact, dqacc, dqvel)

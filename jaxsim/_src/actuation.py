"""Transmissions, activation dynamics and actuator forces (mj_transmission, mj_fwdActuation).

Every actuator kind is handled by one vectorised branch over the static index set of actuators of
that kind (transmission type, joint type, dynamics type); the moment arm matrix is dense (nu, nv).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import kinematics, math
from jaxsim._src.enums import (
  MAXVAL,
  MINVAL,
  BiasType,
  DisableBit,
  DynType,
  GainType,
  JointType,
  TrnType,
)
from jaxsim._src.types import Data, Model, moment_cols

FREE, BALL, SLIDE, HINGE = (
  int(t) for t in (JointType.FREE, JointType.BALL, JointType.SLIDE, JointType.HINGE)
)
TRN_JOINT, TRN_JOINTINPARENT, TRN_SLIDERCRANK, TRN_TENDON, TRN_SITE, TRN_BODY = (
  int(t)
  for t in (
    TrnType.JOINT,
    TrnType.JOINTINPARENT,
    TrnType.SLIDERCRANK,
    TrnType.TENDON,
    TrnType.SITE,
    TrnType.BODY,
  )
)
DYN_NONE, DYN_INTEGRATOR, DYN_FILTER, DYN_FILTEREXACT, DYN_MUSCLE = (
  int(t)
  for t in (DynType.NONE, DynType.INTEGRATOR, DynType.FILTER, DynType.FILTEREXACT, DynType.MUSCLE)
)
GAIN_FIXED, GAIN_AFFINE, GAIN_MUSCLE = (
  int(t) for t in (GainType.FIXED, GainType.AFFINE, GainType.MUSCLE)
)
BIAS_NONE, BIAS_AFFINE, BIAS_MUSCLE = (
  int(t) for t in (BiasType.NONE, BiasType.AFFINE, BiasType.MUSCLE)
)


# ------------------------------------------------------------------------------ muscle model


def _muscle_force(prm: jax.Array, acc0: jax.Array) -> jax.Array:
  """Peak muscle force; a negative force means scale / acc0."""
  neg = prm[..., 2] < 0
  # acc0 only enters where it is used, so a missing (NaN) acc0 cannot poison gradients elsewhere
  acc0 = jnp.where(neg, jnp.maximum(MINVAL, acc0), 1.0)
  return jnp.where(neg, prm[..., 3] / acc0, prm[..., 2])


def _normalized_length(
  length: jax.Array, lengthrange: jax.Array, prm: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """Normalised muscle length L and optimum length L0."""
  r0, r1 = prm[..., 0], prm[..., 1]
  l0 = (lengthrange[..., 1] - lengthrange[..., 0]) / jnp.maximum(MINVAL, r1 - r0)
  return r0 + (length - lengthrange[..., 0]) / jnp.maximum(MINVAL, l0), l0


def muscle_gain_length(length: jax.Array, lmin: jax.Array, lmax: jax.Array) -> jax.Array:
  """Normalised muscle length-gain curve (mju_muscleGainLength)."""
  a = 0.5 * (lmin + 1)
  b = 0.5 * (1 + lmax)
  x1 = (length - lmin) / jnp.maximum(MINVAL, a - lmin)
  x2 = (1 - length) / jnp.maximum(MINVAL, 1 - a)
  x3 = (length - 1) / jnp.maximum(MINVAL, b - 1)
  x4 = (lmax - length) / jnp.maximum(MINVAL, lmax - b)
  out = jnp.where(
    length <= a,
    0.5 * x1 * x1,
    jnp.where(
      length <= 1, 1 - 0.5 * x2 * x2, jnp.where(length <= b, 1 - 0.5 * x3 * x3, 0.5 * x4 * x4)
    ),
  )
  return jnp.where((lmin <= length) & (length <= lmax), out, 0.0)


def muscle_gain(
  length: jax.Array, velocity: jax.Array, lengthrange: jax.Array, acc0: jax.Array, prm: jax.Array
) -> jax.Array:
  """Muscle active force gain, prm = (range[2], force, scale, lmin, lmax, vmax, fpmax, fvmax).

  Mirrors mju_muscleGain; lengthrange (..., 2), prm (..., >= 9), the rest (...).
  """
  force = _muscle_force(prm, acc0)
  lmin, lmax, vmax, fvmax = prm[..., 4], prm[..., 5], prm[..., 6], prm[..., 8]
  big_l, l0 = _normalized_length(length, lengthrange, prm)
  v = velocity / jnp.maximum(MINVAL, l0 * vmax)
  fl = muscle_gain_length(big_l, lmin, lmax)
  y = fvmax - 1
  fv = jnp.where(
    v <= -1,
    0.0,
    jnp.where(
      v <= 0,
      (v + 1) * (v + 1),
      jnp.where(v <= y, fvmax - (y - v) * (y - v) / jnp.maximum(MINVAL, y), fvmax),
    ),
  )
  return -force * fl * fv


def muscle_bias(
  length: jax.Array, lengthrange: jax.Array, acc0: jax.Array, prm: jax.Array
) -> jax.Array:
  """Muscle passive force (mju_muscleBias); shapes as muscle_gain."""
  force = _muscle_force(prm, acc0)
  lmax, fpmax = prm[..., 5], prm[..., 7]
  big_l, _ = _normalized_length(length, lengthrange, prm)
  b = 0.5 * (1 + lmax)
  x_quad = (big_l - 1) / jnp.maximum(MINVAL, b - 1)
  x_lin = (big_l - b) / jnp.maximum(MINVAL, b - 1)
  return jnp.where(
    big_l <= 1,
    0.0,
    jnp.where(big_l <= b, -force * fpmax * 0.5 * x_quad * x_quad, -force * fpmax * (0.5 + x_lin)),
  )


def _sigmoid(x: jax.Array) -> jax.Array:
  """Quintic smoothstep on [0, 1] (mju_sigmoid)."""
  xc = jnp.clip(x, 0.0, 1.0)
  return xc * xc * xc * (3 * xc * (2 * xc - 5) + 10)


def muscle_dynamics_timescale(
  dctrl: jax.Array, tau_act: jax.Array, tau_deact: jax.Array, smoothing_width: jax.Array
) -> jax.Array:
  """Muscle time constant, hard or sigmoid-smoothed switch (mju_muscleDynamicsTimescale)."""
  hard = jnp.where(dctrl > 0, tau_act, tau_deact)
  smooth = smoothing_width >= MINVAL
  x = dctrl / jnp.where(smooth, smoothing_width, 1.0) + 0.5
  soft = tau_deact + (tau_act - tau_deact) * _sigmoid(x)
  return jnp.where(smooth, soft, hard)


def muscle_dynamics(ctrl: jax.Array, act: jax.Array, prm: jax.Array) -> jax.Array:
  """Muscle activation derivative, prm = (tau_act, tau_deact, tausmooth) (mju_muscleDynamics)."""
  ctrlclamp = jnp.clip(ctrl, 0.0, 1.0)
  actclamp = jnp.clip(act, 0.0, 1.0)
  # Millard et al. (2013): activation slows and deactivation speeds up with activation
  tau_act = prm[..., 0] * (0.5 + 1.5 * actclamp)
  tau_deact = prm[..., 1] / (0.5 + 1.5 * actclamp)
  dctrl = ctrlclamp - act
  tau = muscle_dynamics_timescale(dctrl, tau_act, tau_deact, prm[..., 2])
  return dctrl / jnp.maximum(MINVAL, tau)


# ------------------------------------------------------------------------------ transmission


def _common_dof_chain(m: Model, site0: np.ndarray, site1: np.ndarray) -> np.ndarray:
  """(n, nv) mask: dofs on the chain above the deepest dof shared by two sites' bodies.

  Static; the columns MuJoCo clears from a site-minus-refsite Jacobian.
  """
  weld = np.asarray(m.body_weldid)
  dofadr, dofnum = np.asarray(m.body_dofadr), np.asarray(m.body_dofnum)
  parent = np.asarray(m.dof_parentid)
  bodyid = np.asarray(m.site_bodyid)
  out = np.zeros((len(site0), m.nv), dtype=bool)
  for k, (s0, s1) in enumerate(zip(site0, site1, strict=True)):
    b0, b1 = weld[bodyid[s0]], weld[bodyid[s1]]
    a0, a1 = dofadr[b0] + dofnum[b0] - 1, dofadr[b1] + dofnum[b1] - 1
    common = -1
    if a0 >= 0 and a1 >= 0:
      while a0 != a1:
        if a0 < a1:
          a1 = parent[a1]
        else:
          a0 = parent[a0]
        if a0 == -1 or a1 == -1:
          break
      if a0 == a1:
        common = a0
    while common >= 0:
      out[k, common] = True
      common = parent[common]
  return out


def _joint_transmission(m: Model, d: Data, acts: np.ndarray, length, moment):
  """Joint and jointinparent transmissions, one vectorised branch per joint type."""
  trn = np.asarray(m.actuator_trntype)
  jnt = np.asarray(m.actuator_trnid)[:, 0]
  jnt_type = np.asarray(m.jnt_type)
  qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
  for jt in (HINGE, SLIDE, BALL, FREE):
    i = acts[jnt_type[jnt[acts]] == jt]
    if not i.size:
      continue
    j = jnt[i]
    gear = m.actuator_gear[i]
    inparent = (trn[i] == TRN_JOINTINPARENT)[:, None]
    if jt in (HINGE, SLIDE):
      length = length.at[i].set(d.qpos[qadr[j]] * gear[:, 0])
      moment = moment.at[i, dadr[j]].set(gear[:, 0])
    elif jt == BALL:
      quat = math.quat_normalize(d.qpos[qadr[j][:, None] + np.arange(4)])
      axis = math.quat_to_vel(quat)
      # jointinparent: gear is given in the parent frame, rotate it into the child frame
      gear_axis = jnp.where(
        inparent, math.rot_vec_quat(gear[:, :3], math.quat_neg(quat)), gear[:, :3]
      )
      length = length.at[i].set(jnp.sum(axis * gear_axis, axis=-1))
      moment = moment.at[i[:, None], dadr[j][:, None] + np.arange(3)].set(gear_axis)
    else:
      quat = math.quat_normalize(d.qpos[qadr[j][:, None] + np.arange(3, 7)])
      gear_axis = jnp.where(
        inparent, math.rot_vec_quat(gear[:, 3:], math.quat_neg(quat)), gear[:, 3:]
      )
      # a free joint has no meaningful length: it stays 0
      row = jnp.concatenate([gear[:, :3], gear_axis], axis=-1)
      moment = moment.at[i[:, None], dadr[j][:, None] + np.arange(6)].set(row)
  return length, moment


def _slidercrank_transmission(m: Model, d: Data, i: np.ndarray, length, moment):
  """Slider-crank transmissions: length = a'v - sqrt((a'v)^2 + r^2 - v'v), times gear."""
  crank, slider = np.asarray(m.actuator_trnid)[i, 0], np.asarray(m.actuator_trnid)[i, 1]
  rod = m.actuator_cranklength[i]
  gear = m.actuator_gear[i, 0]
  axis = d.site_xmat[slider, :, 2]
  vec = d.site_xpos[crank] - d.site_xpos[slider]
  av = jnp.sum(vec * axis, axis=-1)
  det = av * av + rod * rod - jnp.sum(vec * vec, axis=-1)
  ok = det > 0
  sdet = jnp.sqrt(jnp.where(ok, det, 1.0))
  lng = jnp.where(ok, av - sdet, av)
  okc = ok[:, None]
  dldv = jnp.where(okc, axis * (1 - av / sdet)[:, None] + vec / sdet[:, None], axis)
  dlda = jnp.where(okc, vec * (1 - av / sdet)[:, None], vec)

  bodyid = np.asarray(m.site_bodyid)
  jac_s, jacr_s = kinematics.jac_batch(m, d, d.site_xpos[slider], bodyid[slider])
  jac_c, _ = kinematics.jac_batch(m, d, d.site_xpos[crank], bodyid[crank])
  # Jacobian of the slider axis: its columns are jacr columns crossed with the axis
  jac_a = jnp.cross(jacr_s, axis[:, :, None], axisa=1, axisb=1, axisc=1)
  jac_v = jac_c - jac_s
  row = jnp.einsum('nk,nkv->nv', dlda, jac_a) + jnp.einsum('nk,nkv->nv', dldv, jac_v)
  length = length.at[i].set(lng * gear)
  moment = moment.at[i].set(row * gear[:, None])
  return length, moment


def _site_transmission(m: Model, d: Data, i: np.ndarray, length, moment):
  """Site transmissions, without a reference site (wrench in the site frame) and with one."""
  trnid = np.asarray(m.actuator_trnid)
  bodyid = np.asarray(m.site_bodyid)
  noref, ref = i[trnid[i, 1] < 0], i[trnid[i, 1] >= 0]
  if noref.size:
    sid = trnid[noref, 0]
    jacp, jacr = kinematics.jac_batch(m, d, d.site_xpos[sid], bodyid[sid])
    gear = m.actuator_gear[noref]
    xmat = d.site_xmat[sid]
    wrench_t = jnp.einsum('nij,nj->ni', xmat, gear[:, :3])
    wrench_r = jnp.einsum('nij,nj->ni', xmat, gear[:, 3:])
    row = jnp.einsum('nkv,nk->nv', jacp, wrench_t) + jnp.einsum('nkv,nk->nv', jacr, wrench_r)
    length = length.at[noref].set(0.0)
    moment = moment.at[noref].set(row)
  if ref.size:
    sid, rid = trnid[ref, 0], trnid[ref, 1]
    gear = m.actuator_gear[ref]
    keep = jnp.asarray(~_common_dof_chain(m, sid, rid))[:, None, :]
    jacp, jacr = kinematics.jac_batch(m, d, d.site_xpos[sid], bodyid[sid])
    jacp_ref, jacr_ref = kinematics.jac_batch(m, d, d.site_xpos[rid], bodyid[rid])
    jacp = jnp.where(keep, jacp - jacp_ref, 0.0)
    jacr = jnp.where(keep, jacr - jacr_ref, 0.0)
    xmat_ref = d.site_xmat[rid]

    # translation: site position in the reference site frame
    vec = jnp.einsum('nji,nj->ni', xmat_ref, d.site_xpos[sid] - d.site_xpos[rid])
    lng = jnp.sum(vec * gear[:, :3], axis=-1)
    wrench_t = jnp.einsum('nij,nj->ni', xmat_ref, gear[:, :3])
    row = jnp.einsum('nkv,nk->nv', jacp, wrench_t)

    # rotation: site orientations from their bodies' quaternions, avoiding a mat2quat
    quat = math.quat_mul(d.xquat[bodyid[sid]], m.site_quat[sid])
    refquat = math.quat_mul(d.xquat[bodyid[rid]], m.site_quat[rid])
    rot = gear[:, 3:]
    rot_on = jnp.any(rot != 0, axis=-1)
    vec = math.quat_sub(quat, refquat)
    lng = lng + jnp.where(rot_on, jnp.sum(vec * rot, axis=-1), 0.0)
    wrench_r = jnp.einsum('nij,nj->ni', xmat_ref, rot)
    row = row + jnp.einsum('nkv,nk->nv', jacr, wrench_r)
    length = length.at[ref].set(lng)
    moment = moment.at[ref].set(row)
  return length, moment


def moment_compact(m: Model, dense: jax.Array) -> jax.Array:
  """Actuator moment rows (nu, nv) in Data's compact form (nu, nmom) at types.moment_cols."""
  cols = moment_cols(m)
  if cols.shape[1] == m.nv:
    return dense
  valid = cols < m.nv
  return jnp.where(valid, dense[np.arange(m.nu)[:, None], np.minimum(cols, m.nv - 1)], 0.0)


def moment_dense(m: Model, moment: jax.Array) -> jax.Array:
  """Data's actuator_moment (..., nu, nmom) as dense rows (..., nu, nv)."""
  cols = moment_cols(m)
  if cols.shape[1] == m.nv:
    return moment
  out = jnp.zeros(moment.shape[:-1] + (m.nv,), moment.dtype)
  return out.at[..., np.arange(m.nu)[:, None], cols].set(moment, mode='drop')


def actuator_moment_dense(m: Model, d: Data) -> jax.Array:
  """Data's actuator moments as MuJoCo's dense (..., nu, nv) matrix (mju_sparse2dense of its
  actuator_moment), for one world or a batch (leading axes); Data keeps them in compact rows
  (types.moment_cols) where the actuators reach few dofs."""
  return moment_dense(m, d.actuator_moment)


def moment_mul(m: Model, moment: jax.Array, x: jax.Array) -> jax.Array:
  """moment @ x (nu,) for compact rows (nu, nmom) and x (nv,) (actuator velocities)."""
  cols = moment_cols(m)
  if cols.shape[1] == m.nv:
    return moment @ x
  xp = jnp.concatenate([x, jnp.zeros(1, x.dtype)])  # padding columns read zero
  return jnp.sum(moment * xp[cols], axis=-1)


def moment_tmul(m: Model, moment: jax.Array, f: jax.Array) -> jax.Array:
  """f @ moment (nv,) for compact rows (nu, nmom) and f (nu,) (actuator forces in dof space)."""
  cols = moment_cols(m)
  if cols.shape[1] == m.nv:
    return f @ moment
  return jnp.zeros(m.nv, moment.dtype).at[cols].add(f[:, None] * moment, mode='drop')


def transmission(
  m: Model, d: Data, skip_body: bool = False, body_moment: jax.Array | None = None
) -> Data:
  """Actuator lengths (nu,) and moment arms (nu, nmom: compact rows, types.moment_cols)
  (mj_transmission).

  Reads qpos, kinematics (site frames, xquat), com frames (subtree_com, cdof) and, for tendon
  transmissions, ten_length and ten_J. Body (adhesion) transmissions take their moment arms
  from contacts, which this layer does not see: `body_moment` (nbody_transmissions, nv), in
  actuator order, comes from `constraint.adhesion_moment` (the pipeline passes it); their
  length is zero. Without it they raise NotImplementedError, or, with skip_body (the qpos0
  constants pass), keep zero length and moment.
  """
  if not m.nu:
    return d
  trn = np.asarray(m.actuator_trntype)
  body = np.flatnonzero(trn == TRN_BODY)
  if body.size and not skip_body and body_moment is None:
    names = m.names.get('actuator', ())
    which = ', '.join(repr(names[k]) if k < len(names) and names[k] else f'#{k}' for k in body)
    raise NotImplementedError(
      f'actuator {which}: body (adhesion) transmission needs contacts and is not supported'
    )
  dtype = d.qpos.dtype
  length = jnp.zeros(m.nu, dtype)
  moment = jnp.zeros((m.nu, m.nv), dtype)

  jnt = np.flatnonzero((trn == TRN_JOINT) | (trn == TRN_JOINTINPARENT))
  if jnt.size:
    length, moment = _joint_transmission(m, d, jnt, length, moment)
  crank = np.flatnonzero(trn == TRN_SLIDERCRANK)
  if crank.size:
    length, moment = _slidercrank_transmission(m, d, crank, length, moment)
  ten = np.flatnonzero(trn == TrnType.TENDON)
  if ten.size:
    tid = np.asarray(m.actuator_trnid)[ten, 0]
    gear = m.actuator_gear[ten, 0]
    length = length.at[ten].set(d.ten_length[tid] * gear)
    moment = moment.at[ten].set(d.ten_J[tid] * gear[:, None])
  site = np.flatnonzero(trn == TRN_SITE)
  if site.size:
    length, moment = _site_transmission(m, d, site, length, moment)
  if body.size and body_moment is not None:
    moment = moment.at[body].set(body_moment)
  return d.replace(actuator_length=length, actuator_moment=moment_compact(m, moment))


# ------------------------------------------------------------------------------ activation


def _act_actuator(m: Model) -> np.ndarray:
  """(na,) static: the actuator each activation belongs to."""
  actnum = np.asarray(m.actuator_actnum)
  return np.repeat(np.arange(m.nu), actnum).astype(np.int32)


def _act_last(m: Model) -> np.ndarray:
  """(nu,) static: address of each actuator's last activation, -1 for stateless actuators."""
  adr, num = np.asarray(m.actuator_actadr), np.asarray(m.actuator_actnum)
  return np.where(num > 0, adr + num - 1, -1)


def _actuator_disabled(m: Model) -> np.ndarray:
  """(nu,) static: actuators of groups disabled by opt.disableactuator (mj_actuatorDisabled)."""
  flags = int(m.opt.disableactuator)
  group = np.asarray(m.actuator_group)
  ok = (group >= 0) & (group <= 30)
  return ok & ((flags >> np.clip(group, 0, 30)) & 1).astype(bool)


def _integrate_act(m: Model, act: jax.Array, act_dot: jax.Array) -> jax.Array:
  """Each activation after one timestep, clamped to actrange (mj_nextActivation), (na,)."""
  owner = _act_actuator(m)
  h = m.opt.timestep
  tau = jnp.maximum(MINVAL, m.actuator_dynprm[owner, 0])
  exact = np.asarray(m.actuator_dyntype)[owner] == DYN_FILTEREXACT
  # filterexact: act(h) = act + act_dot * tau * (1 - exp(-h / tau)), exact for a first-order filter
  scale = jnp.where(exact, tau * (-jnp.expm1(-h / tau)), h)
  nxt = act + act_dot * scale
  limited = np.asarray(m.actuator_actlimited)[owner].astype(bool)
  if limited.any():
    rng = m.actuator_actrange[owner]
    nxt = jnp.where(limited, jnp.clip(nxt, rng[:, 0], rng[:, 1]), nxt)
  return nxt


def _round(x: jax.Array) -> jax.Array:
  """Round half away from zero, as C round (mju_round)."""
  return jnp.sign(x) * jnp.floor(jnp.abs(x) + 0.5)


def _wrap_period(m: Model) -> tuple[np.ndarray, jax.Array | None]:
  """Rotational servos: static candidate actuators, their setpoint periods (wrapPeriod).

  A servo (fixed gain, affine bias with gainprm[0] == -biasprm[1], no or integrator dynamics) on
  a ball joint or on a purely rotational site-refsite transmission has a periodic setpoint; the
  period is 0 where the dynamic parameters do not make it such a servo.
  """
  dyn, gain = np.asarray(m.actuator_dyntype), np.asarray(m.actuator_gaintype)
  bias, trn = np.asarray(m.actuator_biastype), np.asarray(m.actuator_trntype)
  trnid = np.asarray(m.actuator_trnid)
  shape = (gain == GAIN_FIXED) & (bias == BIAS_AFFINE) & np.isin(dyn, (DYN_NONE, DYN_INTEGRATOR))
  jointlike = (trn == TRN_JOINT) | (trn == TRN_JOINTINPARENT)
  jtype = np.full(m.nu, -1)
  jtype[jointlike] = np.asarray(m.jnt_type)[trnid[jointlike, 0]]
  ball = jointlike & (jtype == BALL)
  siteref = (trn == TRN_SITE) & (trnid[:, 1] >= 0)
  cand = np.flatnonzero(shape & (ball | siteref))
  if not cand.size:
    return cand, None
  gear = m.actuator_gear[cand]
  servo = m.actuator_gainprm[cand, 0] == -m.actuator_biasprm[cand, 1]
  is_ball = ball[cand]
  valid = servo & (is_ball | jnp.all(gear[:, :3] == 0, axis=-1))
  period = 2 * jnp.pi * math.safe_norm(jnp.where(is_ball[:, None], gear[:, :3], gear[:, 3:]))
  return cand, jnp.where(valid, period, 0.0)


def _wrap_setpoint(u: jax.Array, length: jax.Array, period: jax.Array) -> jax.Array:
  """The representative of setpoint u nearest the length, where period > 0 (wrapSetpoint)."""
  on = period > 0
  p = jnp.where(on, period, 1.0)
  return jnp.where(on, u - p * _round((u - length) / p), u)


def next_activation(m: Model, d: Data, act: jax.Array, act_dot: jax.Array) -> jax.Array:
  """Activations (na,) after one timestep, as mj_advance updates act (mj_nextActivation).

  Euler, or the exact exponential for filterexact; clamped to actrange where actlimited;
  actuators of disabled groups hold still; integrator servos on rotations are wrapped to the
  setpoint nearest actuator_length. With actuation disabled, act is returned unchanged.
  """
  if not m.na or m.opt.disableflags & DisableBit.ACTUATION:
    return act
  owner = _act_actuator(m)
  disabled = _actuator_disabled(m)[owner]
  if disabled.any():
    act_dot = jnp.where(disabled, 0.0, act_dot)
  nxt = _integrate_act(m, act, act_dot)
  cand, period = _wrap_period(m)
  integ = np.asarray(m.actuator_dyntype)[cand] == DYN_INTEGRATOR
  if integ.any():
    i = cand[integ]
    adr = _act_last(m)[i]
    nxt = nxt.at[adr].set(_wrap_setpoint(nxt[adr], d.actuator_length[i], period[integ]))
  return nxt


# ------------------------------------------------------------------------------ mujoco.pid


def _plugin_actuators(m: Model) -> np.ndarray:
  """Static ids of the actuators an engine plugin computes (mujoco.pid, the only one)."""
  return np.flatnonzero(np.asarray(m.actuator_plugin) >= 0)


def _pid(
  m: Model, d: Data, ctrl: jax.Array, act_dot: jax.Array, i: np.ndarray
) -> tuple[jax.Array, jax.Array]:
  """(act_dot (na,) of the pid activations, force (len(i),)) of mujoco.pid actuators i.

  Mirrors the plugin's ActDot and Compute: the setpoint is ctrl (clamped to ctrlrange) or the
  actuator's own activation, slew-limited against the previous setpoint after the first step;
  the error integral is Euler-integrated and clamped, and act_dot moves each plugin activation
  onto its new value within one timestep. act_dot holds the built-in dynamics' derivatives.
  """
  prm = np.asarray(m.actuator_plugin_prm)[i]
  kp, ki, kd, clamp, slew = (prm[:, k] for k in range(5))
  dyn = np.asarray(m.actuator_dyntype)[i]
  adr = np.asarray(m.actuator_actadr)[i]
  last = _act_last(m)[i]
  integ = np.flatnonzero(ki != 0)
  slewed = np.flatnonzero(slew >= 0)
  int_adr = adr[integ]
  slew_adr = adr[slewed] + (ki[slewed] != 0)
  h = m.opt.timestep
  limited = np.asarray(m.actuator_ctrllimited)[i].astype(bool)
  u = clamp_range(ctrl[i], limited, m.actuator_ctrlrange[i])
  stateful = dyn != DYN_NONE
  after = _integrate_act(m, d.act, act_dot)[np.maximum(last, 0)]

  def setpoint(early: np.ndarray) -> jax.Array:
    sp = u
    if stateful.any():
      own = jnp.where(early, after, d.act[np.maximum(last, 0)])
      sp = jnp.where(stateful, own, u)
    if slewed.size:
      prev = d.act[slew_adr]
      step = slew[slewed] * h
      lim = jnp.clip(sp[slewed], prev - step, prev + step)
      sp = sp.at[slewed].set(jnp.where(d.time > 0, lim, sp[slewed]))
    return sp

  def integral(err: jax.Array) -> jax.Array:
    # the error integral after this step, clamped (the integrating actuators' entries)
    return jnp.clip(d.act[int_adr] + err[integ] * h, -clamp[integ], clamp[integ])

  length, velocity = d.actuator_length[i], d.actuator_velocity[i]
  out = jnp.zeros(m.na, ctrl.dtype)
  sp = setpoint(np.zeros(len(i), bool))
  if integ.size:
    out = out.at[int_adr].set((integral(sp - length) - d.act[int_adr]) / h)
  if slewed.size:
    out = out.at[slew_adr].set((sp[slewed] - d.act[slew_adr]) / h)

  early = np.asarray(m.actuator_actearly)[i].astype(bool)
  err = setpoint(early) - length
  ctrl_dot = jnp.where(stateful, act_dot[np.maximum(last, 0)], 0.0)
  force = kp * err + kd * (ctrl_dot - velocity)
  if integ.size:
    force = force.at[integ].add(ki[integ] * integral(err))
  return out, force


# ------------------------------------------------------------------------------ forces


def clamp_range(x: jax.Array, limited: np.ndarray, rng: jax.Array) -> jax.Array:
  """Clips x to rng where the static `limited` flag is set (clampVec)."""
  limited = np.asarray(limited).astype(bool)
  if not limited.any():
    return x
  return jnp.where(limited, jnp.clip(x, rng[:, 0], rng[:, 1]), x)


def _acc0(m: Model) -> jax.Array:
  """actuator_acc0 (nu,) from set_const (NaN before it; used by muscles with force < 0)."""
  return m.actuator_acc0


def actuation(m: Model, d: Data) -> Data:
  """act_dot (na,), actuator_force (nu,) and qfrc_actuator (nv,) (mj_fwdActuation).

  Reads ctrl, act, actuator_length, actuator_velocity, actuator_moment and, where joints route
  gravity compensation through actuators (jnt_actgravcomp), qfrc_gravcomp from the passive stage.
  """
  dtype = d.qpos.dtype
  if not m.nu or m.opt.disableflags & DisableBit.ACTUATION:
    return d.replace(actuator_force=jnp.zeros(m.nu, dtype), qfrc_actuator=jnp.zeros(m.nv, dtype))
  dyn, gain_t = np.asarray(m.actuator_dyntype), np.asarray(m.actuator_gaintype)
  bias_t, trn = np.asarray(m.actuator_biastype), np.asarray(m.actuator_trntype)
  length, velocity = d.actuator_length, d.actuator_velocity

  ctrl = d.ctrl
  if not m.opt.disableflags & DisableBit.CLAMPCTRL:
    ctrl = clamp_range(ctrl, m.actuator_ctrllimited, m.actuator_ctrlrange)
  # one bad control zeroes them all (mjWARN_BADCTRL)
  bad = jnp.any(jnp.isnan(ctrl) | (jnp.abs(ctrl) > MAXVAL))
  ctrl = jnp.where(bad, 0.0, ctrl)

  # activation derivatives, computed per actuator and stored at its last activation (plugin
  # actuators without dynamics keep only the plugin's own activations)
  last = _act_last(m)
  plug = _plugin_actuators(m)
  own = np.zeros(m.nu, bool)
  own[plug] = dyn[plug] == DYN_NONE
  stateful = np.flatnonzero((last >= 0) & ~own)
  act_dot = jnp.zeros(m.na, dtype)
  act = jnp.zeros(m.nu, dtype)
  if stateful.size:
    cur = d.act[last[stateful]]
    u = ctrl[stateful]
    dynprm = m.actuator_dynprm[stateful]
    sdyn = dyn[stateful]
    tau = jnp.maximum(MINVAL, dynprm[:, 0])
    filt = np.isin(sdyn, (DYN_FILTER, DYN_FILTEREXACT))
    ad = jnp.where(filt, (u - cur) / tau, u)
    if (sdyn == DYN_MUSCLE).any():
      ad = jnp.where(sdyn == DYN_MUSCLE, muscle_dynamics(u, cur, dynprm), ad)
    act_dot = act_dot.at[last[stateful]].set(ad)
    # actearly: the force already uses the activation after this step
    early = np.asarray(m.actuator_actearly)[stateful].astype(bool)
    if early.any():
      nxt = _integrate_act(m, d.act, act_dot)[last[stateful]]
      cur = jnp.where(early, nxt, cur)
    act = act.at[stateful].set(cur)

  # force = gain * (ctrl or act) + bias
  gainprm, biasprm = m.actuator_gainprm, m.actuator_biasprm
  gain = gainprm[:, 0]
  if (gain_t == GAIN_AFFINE).any():
    affine = gainprm[:, 0] + gainprm[:, 1] * length + gainprm[:, 2] * velocity
    gain = jnp.where(gain_t == GAIN_AFFINE, affine, gain)
  acc0 = None
  if (gain_t == GAIN_MUSCLE).any():
    acc0 = _acc0(m)
    mg = muscle_gain(length, velocity, m.actuator_lengthrange, acc0, gainprm)
    gain = jnp.where(gain_t == GAIN_MUSCLE, mg, gain)
  inp = jnp.where(last >= 0, act, ctrl)
  cand, period = _wrap_period(m)
  if cand.size:
    inp = inp.at[cand].set(_wrap_setpoint(inp[cand], length[cand], period))
  force = gain * inp

  bias = jnp.zeros(m.nu, dtype)
  if (bias_t == BIAS_AFFINE).any():
    affine = biasprm[:, 0] + biasprm[:, 1] * length + biasprm[:, 2] * velocity
    bias = jnp.where(bias_t == BIAS_AFFINE, affine, bias)
  if (bias_t == BIAS_MUSCLE).any():
    acc0 = _acc0(m) if acc0 is None else acc0
    mb = muscle_bias(length, m.actuator_lengthrange, acc0, biasprm)
    bias = jnp.where(bias_t == BIAS_MUSCLE, mb, bias)
  force = force + bias
  disabled = _actuator_disabled(m)
  if disabled.any():
    force = jnp.where(disabled, 0.0, force)
  if plug.size:
    # plugins compute after the built-in actuators, disabled groups included (mj_fwdActuation)
    pid_dot, pid_force = _pid(m, d, ctrl, act_dot, plug)
    act_dot = act_dot + pid_dot
    force = force.at[plug].set(pid_force)

  # tendon actfrcrange: scale all actuators on a tendon so that their total is in range
  trnid = np.asarray(m.actuator_trnid)[:, 0]
  if m.ntendon:
    ten_lim = np.asarray(m.tendon_actfrclimited).astype(bool)
    on = np.flatnonzero(
      (trn == TrnType.TENDON) & ten_lim[np.where(trn == TrnType.TENDON, trnid, 0)]
    )
    if on.size:
      tid = trnid[on]
      total = jnp.zeros(m.ntendon, dtype).at[tid].add(force[on])[tid]
      rng = m.tendon_actfrcrange[tid]
      safe = jnp.where(total == 0, 1.0, total)
      ratio = jnp.where(
        total < rng[:, 0], rng[:, 0] / safe, jnp.where(total > rng[:, 1], rng[:, 1] / safe, 1.0)
      )
      force = force.at[on].set(force[on] * jnp.where(total == 0, 1.0, ratio))

  force = clamp_range(force, m.actuator_forcelimited, m.actuator_forcerange)
  qfrc = moment_tmul(m, d.actuator_moment, force)

  # gravity compensation routed through actuators: qfrc_gravcomp comes from the passive stage
  agc = np.asarray(m.jnt_actgravcomp).astype(bool) if m.njnt else np.zeros(0, bool)
  if agc.any() and not m.opt.disableflags & DisableBit.GRAVITY:
    dofs = agc[np.asarray(m.dof_jntid)]
    qfrc = qfrc + jnp.where(dofs, d.qfrc_gravcomp, 0.0)

  # joint actfrcrange clamps the first dof of each limited joint, as MuJoCo's clampVec does
  jlim = np.asarray(m.jnt_actfrclimited).astype(bool) if m.njnt else np.zeros(0, bool)
  if jlim.any():
    j = np.flatnonzero(jlim)
    adr = np.asarray(m.jnt_dofadr)[j]
    rng = m.jnt_actfrcrange[j]
    qfrc = qfrc.at[adr].set(jnp.clip(qfrc[adr], rng[:, 0], rng[:, 1]))

  return d.replace(act_dot=act_dot, actuator_force=force, qfrc_actuator=qfrc)

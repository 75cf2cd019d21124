"""Passive forces: springs, dampers, gravity compensation, fluid forces; potential/kinetic energy.

Mirrors MuJoCo's engine_passive.c (mj_passive) and mj_energyPos / mj_energyVel. Every object kind is
handled vectorised: joints by type with static index arrays, dofs and tendons as whole arrays,
bodies and geoms as batches pushed through one Jacobian-transpose product each.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import kinematics, math
from jaxsim._src.enums import MINVAL, NPOLY, DisableBit, GeomType, JointType, TrnType
from jaxsim._src.types import Data, Model

FREE, BALL, SLIDE, HINGE = (
  int(t) for t in (JointType.FREE, JointType.BALL, JointType.SLIDE, JointType.HINGE)
)
EPS = 1e-14  # mjEPS of the model compiler

# 15-point Gauss-Kronrod weights, abscissae l = x^3 / (1 - x)^2 and dl/dx, as in
# mjCGeom::GetAddedMassKappa (kappa integral of the ellipsoid added-mass model)
_KRONROD_W = np.array([
  0.01146766, 0.03154605, 0.05239501, 0.07032663, 0.08450236,
  0.09517529, 0.10221647, 0.10474107, 0.10221647, 0.09517529,
  0.08450236, 0.07032663, 0.05239501, 0.03154605, 0.01146766,
])  # fmt: skip
_KRONROD_L = np.array([
  7.865151709349917e-08, 1.7347976913907274e-05, 0.0003548008144506193,
  0.002846636252924549, 0.014094260903596077, 0.053063261727396636,
  0.17041978741317773, 0.5, 1.4036301548686991, 3.9353484827022642,
  11.644841677041734, 39.53187807410903, 177.5711362220801,
  1429.4772912937397, 54087.416549217705,
])  # fmt: skip
_KRONROD_D = np.array([
  5.538677720489877e-05, 0.002080868285293228, 0.016514126520723166,
  0.07261900344370877, 0.23985243401862602, 0.6868318249020725,
  1.8551129519182894, 5.0, 14.060031152313941, 43.28941239611009,
  156.58546376397112, 747.9826085305024, 5827.4042950027115,
  116754.0197944512, 25482945.327264845,
])  # fmt: skip


def poly_force(linear: jax.Array, poly: jax.Array, x: jax.Array, odd: bool) -> jax.Array:
  """Force coefficient k(x) with force = -x k(x) (mju_polyForce); poly (..., NPOLY)."""
  x = jnp.abs(x) if odd else x
  res = linear
  xpow = jnp.ones_like(x)
  for i in range(NPOLY):
    xpow = xpow * x
    res = res + poly[..., i] * xpow
  return res


def _poly_potential(linear: jax.Array, poly: jax.Array, x: jax.Array) -> jax.Array:
  """Integral from 0 to x of t k(t) dt (mju_polyPotential, even form)."""
  res = 0.5 * linear * x * x
  xpow = x
  for i in range(NPOLY):
    xpow = xpow * x
    res = res + poly[..., i] / (i + 3) * (xpow * x)
  return res


def _safe_sqrt(x: jax.Array) -> jax.Array:
  """sqrt with a zero (not infinite) gradient at 0."""
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _actuator_damping(m: Model, trntypes: tuple[int, ...], size: int, like: jax.Array):
  """Damping (size,) and polynomial (size, NPOLY) from actuators times gear^2 (mj_actuatorDamping).

  Sums over every actuator with one of `trntypes` on each target, which is what MuJoCo's single
  actuator (jnt_actuatorid >= 0) and scan (< -1) branches both compute.
  """
  damping = jnp.zeros(size, dtype=like.dtype)
  poly = jnp.zeros((size, NPOLY), dtype=like.dtype)
  sel = np.flatnonzero(np.isin(np.asarray(m.actuator_trntype), trntypes)) if m.nu else []
  if len(sel) == 0 or size == 0:
    return damping, poly
  target = np.asarray(m.actuator_trnid)[sel, 0]
  gear2 = m.actuator_gear[sel, 0] ** 2
  damping = damping.at[target].add(m.actuator_damping[sel] * gear2)
  poly = poly.at[target].add(m.actuator_dampingpoly[sel] * gear2[:, None])
  return damping, poly


def _joints_of(m: Model, jtype: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(joint ids, qpos addresses, dof addresses) of all joints of one type."""
  j = np.flatnonzero(np.asarray(m.jnt_type) == jtype)
  return j, np.asarray(m.jnt_qposadr)[j], np.asarray(m.jnt_dofadr)[j]


def _ball_dif(qpos: jax.Array, qpos_spring: jax.Array, adr: np.ndarray) -> jax.Array:
  """Rotation from the spring's reference to the current orientation, as a 3-vector (n, 3)."""
  idx = adr[:, None] + np.arange(4)
  return math.quat_sub(math.quat_normalize(qpos[idx]), qpos_spring[idx])


def tendon_spring_x(m: Model, d: Data) -> jax.Array:
  """Tendon spring displacement (ntendon,) outside the dead band [lengthspring low, high]."""
  length = d.ten_length
  lower, upper = m.tendon_lengthspring[:, 0], m.tendon_lengthspring[:, 1]
  return jnp.where(length > upper, length - upper, jnp.where(length < lower, length - lower, 0.0))


def _spring(m: Model, d: Data) -> jax.Array:
  """Joint and tendon spring forces (nv,) (the spring half of mj_springdamper)."""
  qfrc = jnp.zeros(m.nv, dtype=d.qpos.dtype)
  stiffness, spoly = m.jnt_stiffness, m.jnt_stiffnesspoly
  for jt in (FREE, BALL, SLIDE, HINGE):
    j, padr, dadr = _joints_of(m, jt)
    if not j.size:
      continue
    k, p = stiffness[j], spoly[j]
    if jt in (SLIDE, HINGE):
      x = d.qpos[padr] - m.qpos_spring[padr]
      qfrc = qfrc.at[dadr].set(-x * poly_force(k, p, x, False))
      continue
    if jt == FREE:
      idx = padr[:, None] + np.arange(3)
      dif = d.qpos[idx] - m.qpos_spring[idx]
      r = math.safe_norm(dif)
      qfrc = qfrc.at[dadr[:, None] + np.arange(3)].add(-poly_force(k, p, r, False)[:, None] * dif)
      padr, dadr = padr + 3, dadr + 3
    dif = _ball_dif(d.qpos, m.qpos_spring, padr)
    r = math.safe_norm(dif)
    qfrc = qfrc.at[dadr[:, None] + np.arange(3)].add(-poly_force(k, p, r, False)[:, None] * dif)
  if m.ntendon:
    x = tendon_spring_x(m, d)
    frc = -x * poly_force(m.tendon_stiffness, m.tendon_stiffnesspoly, x, False)
    qfrc = qfrc + d.ten_J.T @ frc
  return qfrc


def dof_damping(m: Model) -> tuple[jax.Array, jax.Array]:
  """Per-dof damping (nv,) and polynomial (nv, NPOLY), actuator damping included."""
  jnt = (int(TrnType.JOINT), int(TrnType.JOINTINPARENT))
  act, act_poly = _actuator_damping(m, jnt, m.njnt, m.dof_damping)
  dof_jntid = np.asarray(m.dof_jntid)
  return m.dof_damping + act[dof_jntid], m.dof_dampingpoly + act_poly[dof_jntid]


def tendon_damping(m: Model) -> tuple[jax.Array, jax.Array]:
  """Per-tendon damping (ntendon,) and polynomial (ntendon, NPOLY), actuator damping included."""
  act, act_poly = _actuator_damping(m, (int(TrnType.TENDON),), m.ntendon, m.tendon_damping)
  return m.tendon_damping + act, m.tendon_dampingpoly + act_poly


def _damper(m: Model, d: Data) -> jax.Array:
  """Dof and tendon damping forces (nv,), actuator damping included (mj_springdamper)."""
  damping, poly = dof_damping(m)
  qfrc = -d.qvel * poly_force(damping, poly, d.qvel, True)
  if m.ntendon:
    damping, poly = tendon_damping(m)
    v = d.ten_velocity
    qfrc = qfrc + d.ten_J.T @ (-v * poly_force(damping, poly, v, True))
  return qfrc


def _gravcomp(m: Model, d: Data) -> jax.Array:
  """Gravity compensation forces (nv,) of bodies with body_gravcomp (mj_gravcomp)."""
  # body_gravcomp is a dynamic leaf, so every body is pushed through; zero gravcomp adds zero
  bodies = np.arange(1, m.nbody)
  force = -m.opt.gravity * (m.body_mass[bodies] * m.body_gravcomp[bodies])[:, None]
  return kinematics.apply_ft(m, d, force, jnp.zeros_like(force), d.xipos[bodies], bodies)


def _local_velocity(m: Model, d: Data, body: np.ndarray, pos: jax.Array, mat: jax.Array):
  """6D velocity (n, 6) of frames (pos, mat) on bodies, in the frame (mj_objectVelocity, local)."""
  # bodies without dofs have zero cvel, which is MuJoCo's dof-less quick return
  cvel = d.cvel[body]
  ang, lin = cvel[:, :3], cvel[:, 3:]
  lin = lin - jnp.cross(pos - d.subtree_com[np.asarray(m.body_rootid)[body]], ang)
  ang = jnp.einsum('nji,nj->ni', mat, ang)
  lin = jnp.einsum('nji,nj->ni', mat, lin)
  # the wind is a pure translation, so it only shifts the local linear velocity
  lin = lin - jnp.einsum('nji,j->ni', mat, m.opt.wind)
  return ang, lin


def _inertia_box(m: Model, d: Data, bodies: np.ndarray):
  """Inertia-box fluid force and torque (n, 3) in world axes at xipos (mj_inertiaBoxFluidModel)."""
  mass = m.body_mass[bodies]
  valid = mass >= MINVAL
  mass = jnp.where(valid, mass, 1.0)
  inertia = m.body_inertia[bodies]
  i0, i1, i2 = inertia[:, 0], inertia[:, 1], inertia[:, 2]
  box = jnp.stack(
    [
      jnp.sqrt(jnp.maximum(MINVAL, i1 + i2 - i0) / mass * 6.0),
      jnp.sqrt(jnp.maximum(MINVAL, i0 + i2 - i1) / mass * 6.0),
      jnp.sqrt(jnp.maximum(MINVAL, i0 + i1 - i2) / mass * 6.0),
    ],
    axis=-1,
  )
  mat = d.ximat[bodies]
  ang, lin = _local_velocity(m, d, bodies, d.xipos[bodies], mat)
  density, viscosity = m.opt.density, m.opt.viscosity

  # viscous (Stokes) drag of the sphere with the box's mean diameter; only for viscosity > 0
  diam = jnp.mean(box, axis=-1, keepdims=True)
  visc = jnp.where(viscosity > 0, viscosity, 0.0)
  torque = -jnp.pi * diam**3 * visc * ang
  force = -3.0 * jnp.pi * diam * visc * lin

  # quadratic drag on the box faces; only for density > 0
  dens = jnp.where(density > 0, density, 0.0)
  b0, b1, b2 = box[:, 0], box[:, 1], box[:, 2]
  area = jnp.stack([b1 * b2, b0 * b2, b0 * b1], axis=-1)
  force = force - 0.5 * dens * area * jnp.abs(lin) * lin
  arm = jnp.stack([b0 * (b1**4 + b2**4), b1 * (b0**4 + b2**4), b2 * (b0**4 + b1**4)], axis=-1)
  torque = torque - dens * arm * jnp.abs(ang) * ang / 64.0

  force = jnp.where(valid[:, None], jnp.einsum('nij,nj->ni', mat, force), 0.0)
  torque = jnp.where(valid[:, None], jnp.einsum('nij,nj->ni', mat, torque), 0.0)
  return force, torque


def _semiaxes(m: Model, geoms: np.ndarray) -> jax.Array:
  """Semi-axes (n, 3) of the geoms' equivalent ellipsoids (mju_geomSemiAxes)."""
  size = m.geom_size[geoms]
  gtype = np.asarray(m.geom_type)[geoms][:, None]
  r = size[:, :1]
  sphere = jnp.concatenate([r, r, r], axis=-1)
  capsule = jnp.concatenate([r, r, size[:, 1:2] + r], axis=-1)
  cylinder = jnp.concatenate([r, r, size[:, 1:2]], axis=-1)
  out = jnp.where(gtype == int(GeomType.SPHERE), sphere, size)
  out = jnp.where(gtype == int(GeomType.CAPSULE), capsule, out)
  return jnp.where(gtype == int(GeomType.CYLINDER), cylinder, out)


def _added_mass_kappa(dx: jax.Array, dy: jax.Array, dz: jax.Array) -> jax.Array:
  """Added-mass kappa integral by Gauss-Kronrod quadrature (mjCGeom::GetAddedMassKappa)."""
  invdx2, invdy2, invdz2 = 1.0 / (dx * dx), 1.0 / (dy * dy), 1.0 / (dz * dz)
  # l is non-dimensionalised by the ellipsoid's scale for numerical stability
  scale = jnp.power(dx**3 * dy * dz, 0.4)[..., None]
  lam = scale * _KRONROD_L
  ax, ay, az = 1 + lam * invdx2[..., None], 1 + lam * invdy2[..., None], 1 + lam * invdz2[..., None]
  denom = ax * jnp.sqrt(ax * ay * az)
  return jnp.sum(scale * _KRONROD_D / denom * _KRONROD_W, axis=-1) * invdx2


def geom_fluid(m: Model, geoms: np.ndarray) -> jax.Array:
  """MuJoCo's geom_fluid (n, 12) of ellipsoid-model geoms (mjCGeom::SetFluidCoefs).

  (interaction coef, blunt drag, slender drag, angular drag, Kutta lift, Magnus lift,
  virtual mass (3), virtual inertia (3)); computed from geom_size so gradients reach it.
  """
  s = _semiaxes(m, geoms)
  dx, dy, dz = s[:, 0], s[:, 1], s[:, 2]
  volume = 4.0 / 3.0 * jnp.pi * dx * dy * dz
  # the kappa integral is symmetric in its last two arguments
  kx, ky, kz = (
    _added_mass_kappa(dx, dy, dz),
    _added_mass_kappa(dy, dz, dx),
    _added_mass_kappa(dz, dx, dy),
  )

  def ifac(a, b, ka, kb):
    # numerator and denominator change sign together: both taken in absolute value
    num = (a * a - b * b) ** 2 * jnp.abs(kb - ka)
    den = jnp.abs(2 * (a * a - b * b) + (a * a + b * b) * (ka - kb))
    return num / jnp.maximum(EPS, den)

  vmass = jnp.stack([volume * k / jnp.maximum(EPS, 2 - k) for k in (kx, ky, kz)], axis=-1)
  ifacs = (ifac(dy, dz, ky, kz), ifac(dz, dx, kz, kx), ifac(dx, dy, kx, ky))
  vinertia = jnp.stack([volume * f / 5 for f in ifacs], axis=-1)
  coef = (np.asarray(m.geom_fluidshape)[geoms] == 1).astype(float)[:, None]
  return jnp.concatenate(
    [jnp.asarray(coef, dtype=s.dtype), m.geom_fluidcoef[geoms], vmass, vinertia], axis=-1
  )


def _ellipsoid(m: Model, d: Data, geoms: np.ndarray):
  """Ellipsoid-model fluid force and torque (n, 3) in world axes at geom_xpos.

  Added mass, viscous and quadratic drag, Kutta and Magnus lift (mj_ellipsoidFluidModel).
  """
  fluid = geom_fluid(m, geoms)
  coef, blunt, slender, angdrag, kutta, magnus = (fluid[:, i] for i in range(6))
  vmass, vinertia = fluid[:, 6:9], fluid[:, 9:12]
  size = _semiaxes(m, geoms)
  body = np.asarray(m.geom_bodyid)[geoms]
  mat = d.geom_xmat[geoms]
  ang, lin = _local_velocity(m, d, body, d.geom_xpos[geoms], mat)
  density, viscosity = m.opt.density, m.opt.viscosity

  # added mass (mj_addedMassForces without the acceleration term)
  lin_mom = density * vmass * lin
  ang_mom = density * vinertia * ang
  force = jnp.cross(lin_mom, ang)
  torque = jnp.cross(lin_mom, lin) + jnp.cross(ang_mom, ang)

  # lift and drag (mj_viscousForces)
  s0, s1, s2 = size[:, 0], size[:, 1], size[:, 2]
  volume = 4.0 / 3.0 * jnp.pi * s0 * s1 * s2
  d_max = jnp.max(size, axis=-1)
  d_min = jnp.min(size, axis=-1)
  d_mid = s0 + s1 + s2 - d_max - d_min
  a_max = jnp.pi * d_max * d_mid
  magnus_force = jnp.cross(ang, lin) * (magnus * density * volume)[:, None]

  # projection of the ellipsoid along the velocity direction: area and the cosine to its
  # normal. mujoco 4 computes these scale-free (its force is exactly quadratic in the speed,
  # down to 1e-12 m/s on a 1 mm thin card): from the unit direction, not clamped at mjMINVAL
  speed = math.safe_norm(lin)
  unit = lin / jnp.where(speed > 0, speed, 1.0)[:, None]
  p = jnp.stack([s1 * s2, s2 * s0, s0 * s1], axis=-1)
  proj_denom = jnp.sum(p**4 * unit**2, axis=-1)
  proj_num = jnp.sum((p * unit) ** 2, axis=-1)
  a_proj = jnp.pi * _safe_sqrt(proj_denom / jnp.where(proj_num > 0, proj_num, 1.0))
  norm = p**2 * unit
  cos_alpha = proj_num / jnp.where(proj_denom > 0, proj_denom, 1.0)
  kutta_circ = jnp.cross(norm, lin) * (kutta * density * cos_alpha * a_proj)[:, None]
  kutta_force = jnp.cross(kutta_circ, lin)

  # Stokes drag, analytical for a sphere of the mean diameter
  eq_d = 2.0 / 3.0 * (s0 + s1 + s2)
  lin_visc_force = 3.0 * jnp.pi * eq_d
  lin_visc_torque = jnp.pi * eq_d**3

  # quadratic angular drag from the moments of inertia about each axis
  i_max = 8.0 / 15.0 * jnp.pi * d_mid * d_max**4
  other = jnp.maximum(size[:, [1, 2, 0]], size[:, [2, 0, 1]])
  ii = 8.0 / 15.0 * jnp.pi * size * other**4
  mom_visc = ang * (angdrag[:, None] * ii + slender[:, None] * (i_max[:, None] - ii))
  drag_lin = viscosity * lin_visc_force + density * speed * (
    a_proj * blunt + slender * (a_max - a_proj)
  )
  drag_ang = viscosity * lin_visc_torque + density * math.safe_norm(mom_visc)
  torque = torque - drag_ang[:, None] * ang
  force = force + magnus_force + kutta_force - drag_lin[:, None] * lin

  # the interaction coefficient scales everything; bodies without mass are skipped
  scale = jnp.where(m.body_mass[body] >= MINVAL, coef, 0.0)[:, None]
  force = jnp.einsum('nij,nj->ni', mat, force * scale)
  torque = jnp.einsum('nij,nj->ni', mat, torque * scale)
  return force, torque


def has_fluid(m: Model) -> bool:
  """Whether the model's fluid forces are traced (static opt.has_fluid_params, as MJX's)."""
  return bool(m.opt.has_fluid_params)


def fluid(m: Model, d: Data) -> jax.Array:
  """Fluid forces (nv,): inertia-box or ellipsoid model per body (mj_fluid)."""
  ellipsoid = np.asarray(m.geom_fluidshape) == 1 if m.ngeom else np.zeros(0, bool)
  body_ell = np.zeros(m.nbody, dtype=bool)
  body_ell[np.asarray(m.geom_bodyid)[ellipsoid]] = True
  # the world body never moves, so its forces map to nothing
  bodies = np.flatnonzero(~body_ell)
  bodies = bodies[bodies > 0]
  geoms = np.flatnonzero(ellipsoid)
  # one Jacobian-transpose product for both models: (force, torque, point, body) per row
  parts = []
  if bodies.size:
    parts.append((*_inertia_box(m, d, bodies), d.xipos[bodies], bodies))
  if geoms.size:
    body = np.asarray(m.geom_bodyid)[geoms]
    parts.append((*_ellipsoid(m, d, geoms), d.geom_xpos[geoms], body))
  if not parts:
    return jnp.zeros(m.nv, dtype=d.qvel.dtype)
  force, torque, point = (jnp.concatenate([p[i] for p in parts]) for i in range(3))
  return kinematics.apply_ft(m, d, force, torque, point, np.concatenate([p[3] for p in parts]))


def _actgravcomp_mask(m: Model) -> np.ndarray:
  """(nv,) bool: dofs of joints whose gravity compensation goes through the actuators."""
  return np.asarray(m.jnt_actgravcomp).astype(bool)[np.asarray(m.dof_jntid)]


def adhesion(m: Model, d: Data) -> jax.Array:
  """qfrc_adhesion (nv,): every adhesive contact pulls its geoms together along its normal with
  its adhesion force, in its gap band too (mj_adhesion): -adhesion times the normal row of the
  contact Jacobian, jac(body2) - jac(body1) at the contact point."""
  con = d.contact
  zero = jnp.zeros(m.nv, dtype=d.qvel.dtype)
  flags = m.opt.disableflags
  if not m.flg_adhesion or not con.dist.shape[0] or flags & DisableBit.CONTACT:
    return zero
  gb = jnp.asarray(m.geom_bodyid)
  b1, b2 = gb[jnp.maximum(con.geom1, 0)], gb[jnp.maximum(con.geom2, 0)]
  normal, _ = kinematics.jac_dif_frame(m, d, con.frame[:, :1], con.pos, b1, b2)
  pull = jnp.where(con.active, -con.adhesion, 0.0)
  return pull @ normal[:, 0]


def passive(m: Model, d: Data) -> Data:
  """qfrc_spring, qfrc_damper, qfrc_gravcomp, qfrc_fluid, qfrc_adhesion and their sum
  qfrc_passive (mj_passive).

  All (nv,). qfrc_passive leaves out qfrc_gravcomp on joints with actuatorgravcomp, which
  `gravcomp_actuated` hands to the actuation stage instead. Contact adhesion reads the contacts
  of the position stage.
  """
  zero = jnp.zeros(m.nv, dtype=d.qvel.dtype)
  flags = m.opt.disableflags
  if not m.nv or (flags & DisableBit.SPRING and flags & DisableBit.DAMPER):
    return d.replace(
      qfrc_spring=zero,
      qfrc_damper=zero,
      qfrc_gravcomp=zero,
      qfrc_fluid=zero,
      qfrc_adhesion=zero,
      qfrc_passive=zero,
    )
  spring = zero if flags & DisableBit.SPRING else _spring(m, d)
  damper = zero if flags & DisableBit.DAMPER else _damper(m, d)
  # static shortcuts (MuJoCo's ngravcomp, MJX's has_fluid_params)
  has_gravcomp = m.ngravcomp and not flags & DisableBit.GRAVITY
  gravcomp = _gravcomp(m, d) if has_gravcomp else zero
  fluid_frc = fluid(m, d) if has_fluid(m) else zero
  adhesion_frc = adhesion(m, d)
  passive_frc = spring + damper + fluid_frc + adhesion_frc
  passive_frc = passive_frc + jnp.where(_actgravcomp_mask(m), 0.0, gravcomp)
  return d.replace(
    qfrc_spring=spring,
    qfrc_damper=damper,
    qfrc_gravcomp=gravcomp,
    qfrc_fluid=fluid_frc,
    qfrc_adhesion=adhesion_frc,
    qfrc_passive=passive_frc,
  )


def gravcomp_actuated(m: Model, d: Data) -> jax.Array:
  """Gravity compensation (nv,) routed to qfrc_actuator (jnt_actgravcomp; mj_fwdActuation).

  Reads qfrc_gravcomp from `passive`; MuJoCo adds it before the jnt_actfrcrange clamp.
  """
  return jnp.where(_actgravcomp_mask(m), d.qfrc_gravcomp, 0.0)


def energy_pos(m: Model, d: Data) -> jax.Array:
  """Potential energy: gravity plus joint and tendon springs (mj_energyPos); a scalar."""
  flags = m.opt.disableflags
  energy = jnp.zeros((), dtype=d.qpos.dtype)
  if not flags & DisableBit.GRAVITY and m.nbody > 1:
    energy = energy - jnp.sum(m.body_mass[1:] * (d.xipos[1:] @ m.opt.gravity))
  if flags & DisableBit.SPRING:
    return energy
  stiffness, spoly = m.jnt_stiffness, m.jnt_stiffnesspoly
  for jt in (FREE, BALL, SLIDE, HINGE):
    j, padr, _ = _joints_of(m, jt)
    if not j.size:
      continue
    k, p = stiffness[j], spoly[j]
    if jt in (SLIDE, HINGE):
      energy = energy + jnp.sum(_poly_potential(k, p, d.qpos[padr] - m.qpos_spring[padr]))
      continue
    if jt == FREE:
      idx = padr[:, None] + np.arange(3)
      r = math.safe_norm(d.qpos[idx] - m.qpos_spring[idx])
      energy = energy + jnp.sum(_poly_potential(k, p, r))
      padr = padr + 3
    # mju_subQuat is invariant to the quaternion's scale, so no normalisation is needed
    idx = padr[:, None] + np.arange(4)
    r = math.safe_norm(math.quat_sub(d.qpos[idx], m.qpos_spring[idx]))
    energy = energy + jnp.sum(_poly_potential(k, p, r))
  if m.ntendon:
    x = tendon_spring_x(m, d)
    energy = energy + jnp.sum(_poly_potential(m.tendon_stiffness, m.tendon_stiffnesspoly, x))
  return energy


def energy_vel(m: Model, d: Data) -> jax.Array:
  """Kinetic energy 0.5 qvel' qM qvel (mj_energyVel); a scalar. Needs qM from dynamics.crb."""
  if not m.nv:
    return jnp.zeros((), dtype=d.qvel.dtype)
  return 0.5 * d.qvel @ (d.qM @ d.qvel)

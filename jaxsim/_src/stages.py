"""The forward pipeline's stages (mj_fwdPosition, mj_fwdVelocity, mj_fwdAcceleration,
mj_fwdConstraint) and their compositions, for forward.py and inverse.py to call.

forward.py alone knows how the stages make a step; inverse.py reuses the position and velocity
stages. Keeping them here lets both import them without importing each other.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import (
  actuation,
  check,
  constraint,
  dynamics,
  kinematics,
  passive,
  sensors,
  solver,
  tendon,
  variational,
)
from jaxsim._src.collision import driver
from jaxsim._src.enums import DisableBit, EnableBit, IntegratorType, TrnType
from jaxsim._src.layout import layout_of
from jaxsim._src.types import Data, Model


def unsupported(m: Model) -> list[str]:
  """What jaxsim does not simulate yet in this model, each named (empty when nothing is missing):
  the compiler's list (Model.unsupported), geom pairs without a collider, uncomputed sensors."""
  out = list(m.unsupported)
  out += [f'collisions of {a} with {b} geoms' for a, b in driver.unsupported_pairs(m)]
  return out + sensors.unsupported(m)


def check_supported(m: Model) -> None:
  """Raises NotImplementedError, naming what is missing, for models jaxsim cannot yet simulate."""
  if not m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
    missing = driver.unsupported_pairs(m)
    if missing:
      names = ', '.join(f'{a}-{b}' for a, b in missing)
      raise NotImplementedError(
        f'no collider yet for geom type pairs {names}; set their contype/conaffinity to 0 or '
        'disable contacts (<flag contact="disable"/>)'
      )
  sensors.check_supported(m)
  if m.opt.integrator == IntegratorType.VARIATIONAL:
    variational.check_supported(m)


def fwd_position(m: Model, d: Data) -> Data:
  """Position-dependent stages: kinematics, inertia, tendons, transmission (mj_fwdPosition)."""
  d = kinematics.kinematics(m, d)
  d = kinematics.com_pos(m, d)
  d = tendon.tendon(m, d)
  d = dynamics.crb(m, d)
  d = dynamics.factor_m(m, d)

  d = driver.collision(m, d)
  d = constraint.make_constraint(m, d)
  body = np.flatnonzero(np.asarray(m.actuator_trntype) == TrnType.BODY) if m.nu else []
  if len(body):
    ids = np.asarray(m.actuator_trnid)[body, 0]
    return actuation.transmission(m, d, body_moment=constraint.adhesion_moment(m, d, ids))
  return actuation.transmission(m, d)


def bias(m: Model, d: Data) -> jax.Array:
  """qfrc_bias (nv,): RNE without acceleration plus the tendon armature bias."""
  qfrc = dynamics.rne(m, d)
  if m.ntendon:
    qfrc = qfrc + tendon.tendon_bias(m, d)
  return qfrc


def fwd_velocity(m: Model, d: Data) -> Data:
  """Velocity-dependent stages: tendon/actuator velocities, cvel, passive, bias (mj_fwdVelocity)."""
  ten_velocity = d.ten_J @ d.qvel
  if m.opt.disableflags & DisableBit.ACTUATION:
    actuator_velocity = jnp.zeros_like(d.actuator_velocity)
  else:
    actuator_velocity = actuation.moment_mul(m, d.actuator_moment, d.qvel)
  d = d.replace(ten_velocity=ten_velocity, actuator_velocity=actuator_velocity)
  d = kinematics.com_vel(m, d)
  d = passive.passive(m, d)

  d = constraint.reference(m, d)
  return d.replace(qfrc_bias=bias(m, d))


def bias_of_qvel(m: Model, d: Data) -> jax.Array:
  """The RNE bias recomputed from d.qvel, for its velocity derivative (mjd_rne_vel).

  The tendon armature bias is left out, as mjd_rne_vel leaves it out.
  """
  return dynamics.rne(m, kinematics.com_vel(m, d))


def xfrc_accumulate(m: Model, d: Data) -> jax.Array:
  """Generalized force (nv,) of the Cartesian wrenches xfrc_applied at body coms."""
  body = np.arange(1, m.nbody)
  if not body.size:
    return jnp.zeros(m.nv, d.qvel.dtype)
  xfrc = d.xfrc_applied[body]
  return kinematics.apply_ft(m, d, xfrc[:, :3], xfrc[:, 3:], d.xipos[body], body)


def fwd_acceleration(m: Model, d: Data) -> Data:
  """qfrc_smooth and the unconstrained acceleration qacc_smooth (mj_fwdAcceleration)."""
  qfrc_smooth = d.qfrc_passive - d.qfrc_bias + d.qfrc_applied + d.qfrc_actuator
  qfrc_smooth = qfrc_smooth + xfrc_accumulate(m, d)
  qacc_smooth = dynamics.solve_m(m, d, qfrc_smooth)
  return d.replace(qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth)


def fwd_constraint(m: Model, d: Data) -> Data:
  """Constraint forces and qacc from the solver; qacc_smooth without rows (mj_fwdConstraint)."""

  if not layout_of(m).nefc:
    return d.replace(qacc=d.qacc_smooth, qfrc_constraint=jnp.zeros_like(d.qfrc_smooth))
  return solver.solve(m, d)


def fwd_energy(m: Model, d: Data) -> Data:
  """energy (2,): potential and kinetic energy where the energy flag asks (mj_energyPos/Vel)."""
  if not m.opt.enableflags & EnableBit.ENERGY:
    # zero unless energy sensors computed it (mj_sensorPos, mj_sensorVel)
    return d.replace(energy=sensors.energy(m, d))
  return d.replace(energy=jnp.stack([passive.energy_pos(m, d), passive.energy_vel(m, d)]))


def forward_pos_vel(m: Model, d: Data, energy: bool = True, sensor: bool = True) -> Data:
  d = fwd_position(m, d)
  if sensor:
    d = sensors.sensor_pos(m, d)
  d = fwd_velocity(m, d)
  if sensor:
    d = sensors.sensor_vel(m, d)
  if energy:
    d = fwd_energy(m, d)
  return d


def forward_acc(m: Model, d: Data, sensor: bool = True) -> Data:
  d = actuation.actuation(m, d)
  d = check.check_ctrl(m, d)
  d = fwd_acceleration(m, d)
  d = fwd_constraint(m, d)
  if sensor:
    d = sensors.sensor_acc(m, d)
  return d


def forward_all(m: Model, d: Data, energy: bool = True, sensor: bool = True) -> Data:
  return forward_acc(m, forward_pos_vel(m, d, energy, sensor), sensor)

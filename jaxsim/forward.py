"""The pipeline: forward dynamics, one step with the model's integrator, in MuJoCo's stage order.

This is the only module that knows the order of the stages (mj_forward, mj_step).
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import actuation, check, dynamics, integrate, kinematics, passive, sensors, tendon
from jaxsim.types import Data, DisableBit, EnableBit, IntegratorType, Model, TrnType, check_inputs


def check_supported(m: Model) -> None:
  """Raises NotImplementedError, naming what is missing, for models jaxsim cannot yet simulate."""
  from jaxsim.collision import driver

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
    from jaxsim import variational

    variational.check_supported(m)


def fwd_position(m: Model, d: Data) -> Data:
  """Position-dependent stages: kinematics, inertia, tendons, transmission (mj_fwdPosition)."""
  d = kinematics.kinematics(m, d)
  d = kinematics.com_pos(m, d)
  d = tendon.tendon(m, d)
  d = dynamics.crb(m, d)
  d = dynamics.factor_m(m, d)
  from jaxsim import constraint
  from jaxsim.collision import driver

  d = driver.collision(m, d)
  d = constraint.make_constraint(m, d)
  body = np.flatnonzero(np.asarray(m.actuator_trntype) == TrnType.BODY) if m.nu else []
  if len(body):
    ids = np.asarray(m.actuator_trnid)[body, 0]
    return actuation.transmission(m, d, body_moment=constraint.adhesion_moment(m, d, ids))
  return actuation.transmission(m, d)


def _bias(m: Model, d: Data) -> jax.Array:
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
    actuator_velocity = d.actuator_moment @ d.qvel
  d = d.replace(ten_velocity=ten_velocity, actuator_velocity=actuator_velocity)
  d = kinematics.com_vel(m, d)
  d = passive.passive(m, d)
  from jaxsim import constraint

  d = constraint.reference(m, d)
  return d.replace(qfrc_bias=_bias(m, d))


def _bias_of_qvel(m: Model, d: Data) -> jax.Array:
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
  from jaxsim import constraint, solver

  if not constraint.layout(m).nefc:
    return d.replace(qacc=d.qacc_smooth, qfrc_constraint=jnp.zeros_like(d.qfrc_smooth))
  return solver.solve(m, d)


def _energy(m: Model, d: Data) -> Data:
  if not m.opt.enableflags & EnableBit.ENERGY:
    # zero unless energy sensors computed it (mj_sensorPos, mj_sensorVel)
    return d.replace(energy=sensors.energy(m, d))
  return d.replace(energy=jnp.stack([passive.energy_pos(m, d), passive.energy_vel(m, d)]))


def _forward_pos_vel(m: Model, d: Data, energy: bool = True, sensor: bool = True) -> Data:
  d = fwd_position(m, d)
  if sensor:
    d = sensors.sensor_pos(m, d)
  d = fwd_velocity(m, d)
  if sensor:
    d = sensors.sensor_vel(m, d)
  if energy:
    d = _energy(m, d)
  return d


def _forward_acc(m: Model, d: Data, sensor: bool = True) -> Data:
  d = actuation.actuation(m, d)
  d = check.check_ctrl(m, d)
  d = fwd_acceleration(m, d)
  d = fwd_constraint(m, d)
  if sensor:
    d = sensors.sensor_acc(m, d)
  return d


def _forward(m: Model, d: Data, energy: bool = True, sensor: bool = True) -> Data:
  return _forward_acc(m, _forward_pos_vel(m, d, energy, sensor), sensor)


def forward(m: Model, d: Data) -> Data:
  """Every derived quantity and qacc from the state; the state is unchanged (mj_forward)."""
  check_supported(m)
  check_inputs(m, d)
  return _forward(m, d)


def step(m: Model, d: Data) -> Data:
  """Advances the simulation one timestep with m.opt.integrator (mj_step).

  Bad (NaN, huge) qpos and qvel are counted in d.warning and reset before the forward pass, a bad
  qacc after it (jaxsim.check; unless the autoreset disable flag is set).
  """
  check_supported(m)
  check_inputs(m, d)
  d = check.check_pos(m, d)
  d = check.check_vel(m, d)
  integrator = m.opt.integrator
  if integrator == IntegratorType.VARIATIONAL:
    from jaxsim import variational

    # the variational step evaluates its own discrete dynamics; no forward pass first
    return check.check_acc(m, variational.step(m, d))
  d = _forward(m, d)
  if m.opt.enableflags & EnableBit.FWDINV:
    # the package's `inverse` is the function; the module is imported by name
    inverse = importlib.import_module('jaxsim.inverse')
    d = inverse.compare_fwd_inv(m, d)
  return check.check_acc(m, _integrate(m, d), qacc=d.qacc)


def step1(m: Model, d: Data) -> Data:
  """First half of a step: state checks, position and velocity stages (mj_step1).

  Controls and applied forces set on the result act in `step2`, as between MuJoCo's two halves.
  """
  check_supported(m)
  check_inputs(m, d)
  if m.opt.integrator == IntegratorType.VARIATIONAL:
    raise NotImplementedError('the variational integrator has no split step (step1/step2)')
  d = check.check_pos(m, d)
  d = check.check_vel(m, d)
  return _forward_pos_vel(m, d)


def step2(m: Model, d: Data) -> Data:
  """Second half of a step after `step1`: actuation, acceleration, constraint forces, then Euler
  or implicit integration; RK4 integrates with Euler here, as mj_step2 does."""
  check_supported(m)
  check_inputs(m, d)
  if m.opt.integrator == IntegratorType.VARIATIONAL:
    raise NotImplementedError('the variational integrator has no split step (step1/step2)')
  d = _forward_acc(m, d)
  if m.opt.enableflags & EnableBit.FWDINV:
    inverse = importlib.import_module('jaxsim.inverse')
    d = inverse.compare_fwd_inv(m, d)
  if m.opt.integrator == IntegratorType.RK4:
    out = integrate.euler(m, d)
  else:
    out = _integrate(m, d)
  return check.check_acc(m, out, qacc=d.qacc)


def _integrate(m: Model, d: Data) -> Data:
  """One timestep of m.opt.integrator from a Data on which forward has run."""
  integrator = m.opt.integrator
  if integrator == IntegratorType.EULER:
    return integrate.euler(m, d)
  if integrator == IntegratorType.RK4:
    return integrate.rk4(m, d, lambda m_, d_: _forward(m_, d_, energy=False, sensor=False))
  if integrator in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
    return integrate.implicit(m, d, lambda d_: _bias_of_qvel(m, d_))
  raise NotImplementedError(f'integrator {integrator} is not supported')

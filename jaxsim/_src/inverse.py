"""Inverse dynamics: the generalized force that produces a given acceleration (engine_inverse.c).

`inverse` runs the position and velocity stages of the forward pipeline, turns qacc into
constraint forces with the soft-constraint force law (no solve: the forces of a soft constraint
are an explicit function of J qacc - aref) and returns qfrc_inverse = M qacc + qfrc_bias -
qfrc_passive - qfrc_constraint. At a state where `forward` produced qacc, qfrc_inverse recovers
qfrc_applied + qfrc_actuator + J' xfrc_applied, up to the solver's convergence (mj_compareFwdInv).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import dynamics, integrate, math, passive, sensors, solver, stages
from jaxsim._src.enums import DisableBit, EnableBit, IntegratorType
from jaxsim._src.layout import layout_of, row_classes
from jaxsim._src.types import Data, Model, check_inputs


def inv_constraint(m: Model, d: Data, layout: Any = None) -> Data:
  """efc_force, efc_state (nefc,) and qfrc_constraint (nv,) from qacc (mj_invConstraint).

  The force of each row is the soft-constraint law at jar = J qacc - aref (mj_constraintUpdate):
  -D jar for equalities, the Huber law of friction loss, one-sided rows and pyramidal contacts
  active where jar < 0, and elliptic contacts by the cone's three zones. Inactive rows carry no
  force. `layout` is the static row layout (default the Model's, `m.layout`; any object with the
  fields of layout.EfcRows).
  """
  lay = layout_of(m) if layout is None else layout
  if not lay.nefc or not m.nv:
    return d.replace(qfrc_constraint=jnp.zeros(m.nv, d.qacc.dtype))
  rows = lay.rows if layout is None else row_classes(lay)
  p = solver.problem(m, d, rows)
  jar = p.J @ d.qacc - d.efc_aref
  upd = solver.update_constraint(p, rows, jar, False)
  return d.replace(
    efc_force=upd.force,
    efc_state=upd.state.astype(jnp.int32),
    qfrc_constraint=p.J.tmul(upd.force),
  )


def _check_discrete(m: Model) -> None:
  """Refuses invdiscrete for integrators without a discrete-time inverse, as MuJoCo does."""
  integrator = m.opt.integrator
  if integrator in (IntegratorType.RK4, IntegratorType.VARIATIONAL):
    name = 'RK4' if integrator == IntegratorType.RK4 else 'the variational'
    raise ValueError(
      f'discrete inverse dynamics (invdiscrete) is not supported by {name} integrator'
    )


def discrete_acc(m: Model, d: Data) -> jax.Array:
  """Continuous-time qacc (nv,) of the discrete-time d.qacc of m.opt.integrator (mj_discreteAcc).

  The integrators solve (M + h B) qacc = f (Euler with implicit damping) or (M - h qDeriv) qacc
  = f (implicit, implicitfast) where forward dynamics solves M qacc = f; this maps the former
  qacc to the latter: M^-1 (M + h B) qacc, M^-1 (M - h qDeriv) qacc.
  """
  integrator = m.opt.integrator
  h = m.opt.timestep
  qacc = d.qacc
  if not m.nv:
    return qacc
  _check_discrete(m)
  if integrator == IntegratorType.EULER:
    if m.opt.disableflags & DisableBit.EULERDAMP:
      return qacc
    damping, poly = passive.dof_damping(m)
    b = integrate.poly_force_deriv(damping, poly, d.qvel)
    qfrc = d.qM @ qacc + h * b * qacc
    # MuJoCo leaves qacc untouched where no dof is damped
    return jnp.where(jnp.any(b != 0), dynamics.solve_m(m, d, qfrc), qacc)
  qderiv = integrate.smooth_vel_deriv(m, d)
  if integrator == IntegratorType.IMPLICIT:
    qderiv = qderiv - integrate.rne_vel_deriv(m, d, lambda d_: stages.bias_of_qvel(m, d_))
    return dynamics.solve_m(m, d, (d.qM - h * qderiv) @ qacc)
  # implicitfast: the symmetric part of qDeriv, as the integrator uses
  qfrc = (d.qM - h * integrate.implicitfast_qderiv(qderiv)) @ qacc
  free = integrate.free_bodies(m)
  if free.size:
    # standalone free bodies: the unsymmetric local 6x6 block with the gyroscopic derivative
    # (mjd_freeMhat), as the integrator solves them
    blocks = free[:, None] + np.arange(6)
    a = integrate.free_mhat(m, d, qderiv, lambda d_: stages.bias_of_qvel(m, d_), blocks)
    qfrc = qfrc.at[blocks].set(jnp.einsum('bij,bj->bi', a, qacc[blocks]))
  return dynamics.solve_m(m, d, qfrc)


def inverse_acc(m: Model, d: Data, sensor: bool, layout: Any = None) -> Data:
  """Inverse dynamics from the velocity stage on (mj_inverseSkip with mjSTAGE_VEL)."""
  qacc = d.qacc
  if m.opt.enableflags & EnableBit.INVDISCRETE:
    d = d.replace(qacc=discrete_acc(m, d))
  d = inv_constraint(m, d, layout)
  # qfrc_bias is RNE without acceleration plus the tendon armature bias (fwd_velocity)
  qfrc = d.qfrc_bias + d.qM @ d.qacc - d.qfrc_passive - d.qfrc_constraint
  d = d.replace(qfrc_inverse=qfrc)
  if sensor:
    d = sensors.sensor_acc(m, d)
  return d.replace(qacc=qacc)


@math.full_precision
def inverse(m: Model, d: Data) -> Data:
  """qfrc_inverse (nv,) from qpos, qvel and qacc, and every quantity it needs (mj_inverse).

  Position and velocity stages (and sensors) as forward's, then the analytic constraint forces of
  qacc (efc_force, efc_state, qfrc_constraint) and qfrc_inverse = M qacc + qfrc_bias -
  qfrc_passive - qfrc_constraint. With the invdiscrete enable flag, qacc is read as the
  discrete-time acceleration of m.opt.integrator (mj_discreteAcc); d.qacc itself is returned
  unchanged. The actuation stage does not run: qfrc_actuator and actuator_force are left as
  they are, as MuJoCo leaves them.
  """
  stages.check_supported(m)
  check_inputs(m, d)
  if m.opt.enableflags & EnableBit.INVDISCRETE:
    _check_discrete(m)
  d = stages.fwd_position(m, d)
  d = sensors.sensor_pos(m, d)
  d = stages.fwd_velocity(m, d)
  d = sensors.sensor_vel(m, d)
  d = stages.fwd_energy(m, d)
  return inverse_acc(m, d, sensor=True)


def compare_fwd_inv(m: Model, d: Data) -> Data:
  """solver_fwdinv (2,): how well inverse dynamics reproduces a forward solution (mj_compareFwdInv).

  d is the output of forward. solver_fwdinv[0] = |qfrc_constraint(forward) -
  qfrc_constraint(inverse)|, [1] = |qfrc_applied + qfrc_actuator + J' xfrc_applied -
  qfrc_inverse|, both zero without constraint rows. As MuJoCo does, qfrc_inverse and efc_state
  are left as inverse dynamics set them and efc_force and qfrc_constraint are restored.
  """
  dtype = d.qacc.dtype
  if not layout_of(m).nefc or not m.nv:
    return d.replace(solver_fwdinv=jnp.zeros(2, dtype))
  qforce = d.qfrc_applied + d.qfrc_actuator + stages.xfrc_accumulate(m, d)
  inv = inverse_acc(m, d, sensor=False)
  fwdinv = jnp.stack(
    [
      math.safe_norm(d.qfrc_constraint - inv.qfrc_constraint),
      math.safe_norm(qforce - inv.qfrc_inverse),
    ]
  )
  return inv.replace(
    qfrc_constraint=d.qfrc_constraint, efc_force=d.efc_force, solver_fwdinv=fwdinv.astype(dtype)
  )

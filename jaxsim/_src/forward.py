"""The pipeline: forward dynamics, one step with the model's integrator, in MuJoCo's stage order.

This is the only module that knows the order of the stages (mj_forward, mj_step).
"""

from __future__ import annotations

import warnings

import jax

from jaxsim._src import check, integrate, inverse, stages, variational
from jaxsim._src.enums import EnableBit, IntegratorType
from jaxsim._src.math import full_precision
from jaxsim._src.types import Data, Model, check_inputs


def hint_jit(name: str, d: Data) -> None:
  """Warns (once per call site) when a pipeline function runs eagerly, op by op: a first eager
  call takes seconds where the jitted one takes milliseconds after its compile. Traced means any
  field is a tracer (`make_data(m).replace(qvel=v)` under jit has a concrete qpos)."""
  if not any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(d)):
    warnings.warn(
      f'jaxsim.{name} is running eagerly (op by op), which is slow; wrap it in jax.jit, e.g. '
      f'jax.jit(jaxsim.{name})(model, data)',
      stacklevel=4,  # hint_jit < the stage < full_precision's wrapper < the caller
    )


@full_precision
def forward(m: Model, d: Data) -> Data:
  """Every derived quantity and qacc from the state; the state is unchanged (mj_forward)."""
  stages.check_supported(m)
  check_inputs(m, d)
  hint_jit('forward', d)
  return stages.forward_all(m, d)


@full_precision
def step(m: Model, d: Data) -> Data:
  """Advances the simulation one timestep with m.opt.integrator (mj_step).

  Bad (NaN, huge) qpos and qvel are counted in d.warning and reset before the forward pass, a bad
  qacc after it (jaxsim.check; unless the autoreset disable flag is set).
  """
  stages.check_supported(m)
  check_inputs(m, d)
  hint_jit('step', d)
  d = check.check_pos(m, d)
  d = check.check_vel(m, d)
  integrator = m.opt.integrator
  if integrator == IntegratorType.VARIATIONAL:
    # the variational step evaluates its own discrete dynamics; no forward pass first
    return check.check_acc(m, variational.step(m, d))
  d = stages.forward_all(m, d)
  if m.opt.enableflags & EnableBit.FWDINV:
    d = inverse.compare_fwd_inv(m, d)
  return check.check_acc(m, integrate_step(m, d), qacc=d.qacc)


@full_precision
def step1(m: Model, d: Data) -> Data:
  """First half of a step: state checks, position and velocity stages (mj_step1).

  Controls and applied forces set on the result act in `step2`, as between MuJoCo's two halves.
  """
  stages.check_supported(m)
  check_inputs(m, d)
  if m.opt.integrator == IntegratorType.VARIATIONAL:
    raise NotImplementedError('the variational integrator has no split step (step1/step2)')
  d = check.check_pos(m, d)
  d = check.check_vel(m, d)
  return stages.forward_pos_vel(m, d)


@full_precision
def step2(m: Model, d: Data) -> Data:
  """Second half of a step after `step1`: actuation, acceleration, constraint forces, then Euler
  or implicit integration; RK4 integrates with Euler here, as mj_step2 does."""
  stages.check_supported(m)
  check_inputs(m, d)
  if m.opt.integrator == IntegratorType.VARIATIONAL:
    raise NotImplementedError('the variational integrator has no split step (step1/step2)')
  d = stages.forward_acc(m, d)
  if m.opt.enableflags & EnableBit.FWDINV:
    d = inverse.compare_fwd_inv(m, d)
  if m.opt.integrator == IntegratorType.RK4:
    out = integrate.euler(m, d)
  else:
    out = integrate_step(m, d)
  return check.check_acc(m, out, qacc=d.qacc)


def integrate_step(m: Model, d: Data) -> Data:
  """One timestep of m.opt.integrator from a Data on which forward has run."""
  integrator = m.opt.integrator
  if integrator == IntegratorType.EULER:
    return integrate.euler(m, d)
  if integrator == IntegratorType.RK4:
    return integrate.rk4(
      m, d, lambda m_, d_: stages.forward_all(m_, d_, energy=False, sensor=False)
    )
  if integrator in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
    return integrate.implicit(m, d, lambda d_: stages.bias_of_qvel(m, d_))
  raise NotImplementedError(f'integrator {integrator} is not supported')

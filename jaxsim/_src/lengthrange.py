"""Actuator length ranges found by simulation, for muscles given none (mj_setLengthRange).

MuJoCo's compiler finds the range of a muscle's length by pushing the model to each end: from
qpos0, a force along the actuator's moment that accelerates it at `accel`, velocity decaying with
`timeconst`, for `inttotal` seconds of `timestep`; the range is the smallest length seen on one
side and the largest on the other during the last `interval` seconds. The settings are MJCF's
<compiler><lengthrange>; the model runs with friction loss, contacts, springs, dampers, gravity
and actuation off (mjCModel::LengthRange), limits and equalities on.

Here every (actuator, side) is a world of one `jax.vmap`, all stepped together by one compiled
`lax.scan`, in float64. One difference: mujoco's test for an unstable simulation (time back at
zero after a step) cannot trigger, since mj_step2 integrates after any reset; a reset here (a bad
qpos, qvel or qacc counted in Data.warning) raises the error mujoco's message names.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import actuation, dynamics
from jaxsim._src.enums import MINVAL, DisableBit, IntegratorType, WarningType
from jaxsim._src.forward import step1, step2
from jaxsim._src.layout import with_layout
from jaxsim._src.setconst import FAST_COMPILE
from jaxsim._src.types import Data, Model, make_data
from jaxsim.errors import ModelError

# mjCModel::LengthRange replaces the model's disable flags by these (sensors are ours: no effect
# on the state, and unsupported sensors must not stop the search)
_DISABLE = (
  DisableBit.FRICTIONLOSS
  | DisableBit.CONTACT
  | DisableBit.SPRING
  | DisableBit.DAMPER
  | DisableBit.GRAVITY
  | DisableBit.ACTUATION
  | DisableBit.SENSOR
)


def _search_model(m: Model, opt: dict[str, Any]) -> Model:
  """m with the options of the search: flags and timestep (step2 integrates RK4 with Euler, as
  mj_step2; jaxsim's variational integrator, which MuJoCo lacks, is replaced by Euler too)."""
  integrator = m.opt.integrator
  if integrator == IntegratorType.VARIATIONAL:
    integrator = IntegratorType.EULER
  o = m.opt.replace(disableflags=int(_DISABLE), enableflags=0, integrator=integrator)
  if opt['timestep'] > 0:
    o = o.replace(timestep=jnp.asarray(opt['timestep'], m.opt.timestep.dtype))
  # the flags decide which rows exist (limits may have been disabled in the model)
  return with_layout(m.replace(opt=o))


def _nsteps(timestep: float, inttotal: float) -> np.ndarray:
  """The times after each step of `while (time < inttotal) time += timestep`, in float64."""
  times, t = [], 0.0
  while t < inttotal:
    t = float(np.float64(t) + np.float64(timestep))
    times.append(t)
    if len(times) > 10**7:
      raise ValueError('lengthrange inttotal / timestep is above 1e7 steps')
  return np.asarray(times)


def _lengths(m: Model, d0: Data, index: jax.Array, sign: jax.Array, prm: jax.Array, nstep: int):
  """(nstep,) actuator lengths seen before each step and whether any step reset the world.

  prm: (accel, maxforce, timeconst) of the search.
  """
  accel, maxforce, timeconst = prm
  decay = jnp.exp(-m.opt.timestep / jnp.maximum(0.01, timeconst))

  def body(d, _):
    d = step1(m, d.replace(qvel=d.qvel * decay))
    moment = actuation.moment_dense(m, d.actuator_moment)[index]
    x = dynamics.solve_m(m, d, moment)
    force = moment * (sign * accel / jnp.maximum(MINVAL, jnp.sqrt(x @ x)))
    nrm = jnp.sqrt(force @ force)
    cap = (maxforce > 0) & (nrm > maxforce)
    force = jnp.where(cap, force * (maxforce / jnp.where(cap, nrm, 1.0)), force)
    length = d.actuator_length[index]
    return step2(m, d.replace(qfrc_applied=force)), length

  d, length = jax.lax.scan(body, d0, None, length=nstep)
  bad = d.warning[WarningType.BADQPOS] + d.warning[WarningType.BADQVEL]
  return length, bad + d.warning[WarningType.BADQACC] > 0


# runs once per load: cheaper compilation matters more than the speed of the compiled code
@functools.partial(jax.jit, static_argnames='nstep', compiler_options=FAST_COMPILE)
def _search(m: Model, d0: Data, index: jax.Array, sign: jax.Array, prm: jax.Array, nstep: int):
  """_lengths for a batch of (actuator index, side sign)."""
  return jax.vmap(_lengths, in_axes=(None, None, 0, 0, None, None))(m, d0, index, sign, prm, nstep)


def length_range(m: Model, sim: tuple, opt: dict[str, Any]) -> np.ndarray:
  """actuator_lengthrange (nu, 2) with the ranges of the actuators in `sim` found by simulation.

  `m` is a float64 Model (built under jax.enable_x64).

  `sim` lists (actuator index, file, line, element) of the actuators to search, as the compiler
  found them; an actuator whose search fails raises ModelError there, as mujoco's compiler does.
  """
  out = np.array(m.actuator_lengthrange, dtype=np.float64)
  if not sim:
    return out
  with jax.enable_x64(True):
    ms = _search_model(m, opt)
    times = _nsteps(float(ms.opt.timestep), float(opt['inttotal']))
    ids = np.array([s[0] for s in sim])
    index = jnp.asarray(np.repeat(ids, 2))
    sign = jnp.asarray(np.tile([-1.0, 1.0], len(ids)))
    prm = jnp.asarray([opt['accel'], opt['maxforce'], opt['timeconst']], jnp.float64)
    out_ = _search(ms, make_data(ms), index, sign, prm, nstep=len(times))
    length, bad = (np.asarray(x) for x in out_)
  window = times > opt['inttotal'] - opt['interval']
  for k, (i, file, line, tag) in enumerate(sim):

    def error(msg, file=file, line=line, tag=tag):
      return ModelError(msg, file=file, line=line, element=tag, attribute='lengthrange')

    if bad[2 * k : 2 * k + 2].any():
      raise error(f'Unstable lengthrange simulation in actuator {i}')
    # mujoco's lmin, lmax start at 0 and stay there when no step falls in the window
    seen = length[2 * k : 2 * k + 2][:, window] if window.any() else np.zeros((2, 1))
    lmin, lmax = seen.min(axis=1), seen.max(axis=1)
    out[i] = lmin[0], lmax[1]
    dif = out[i, 1] - out[i, 0]
    if dif <= 0:
      raise error(f'Invalid lengthrange ({out[i, 0]:g}, {out[i, 1]:g}) in actuator {i}')
    for side in (0, 1):
      if lmax[side] - lmin[side] > opt['tolrange'] * dif:
        raise error(
          f'Lengthrange computation did not converge in actuator {i}: eval ({lmin[side]:g}, '
          f'{lmax[side]:g}), range ({out[i, 0]:g}, {out[i, 1]:g})'
        )
  return out

"""Building a Model from compiled arrays, and the Data that goes with it (mj_makeData)."""

from __future__ import annotations

import jax

from jaxsim._src import constraint, lengthrange
from jaxsim._src.collision import driver, pairs
from jaxsim._src.setconst import set_const
from jaxsim._src.types import Data, Model, make_model
from jaxsim._src.types import make_data as _make_data


def make_data(m: Model) -> Data:
  """A Data at the model's qpos0, zero velocity, with contact slots and constraint rows sized for
  the model as its options are now (mj_makeData + mj_resetData)."""
  return _make_data(m, ncon=driver.ncon_max(m), nefc=constraint.layout(m).nefc)


def build(compiled: dict) -> Model:
  """Model from compiled arrays, completed by the qpos0 pass (mj_setConst) and the actuator
  length-range search (mj_setLengthRange)."""
  compiled = dict(compiled)
  lr_sim = compiled.pop('lengthrange_sim', ())
  lr_opt = compiled.pop('lengthrange_opt', None)
  compiled.update(set_const(compiled))
  compiled['collision_pairs'] = pairs.candidate_pairs(compiled)
  compiled['nconmax'] = 0
  compiled['nefcmax'] = 0

  def model() -> Model:
    m = make_model(compiled)
    m = m.replace(nconmax=driver.ncon_max(m))
    return m.replace(nefcmax=constraint.layout(m).nefc)

  if lr_sim:
    with jax.enable_x64(True):
      compiled['actuator_lengthrange'] = lengthrange.length_range(model(), lr_sim, lr_opt)
  return model()

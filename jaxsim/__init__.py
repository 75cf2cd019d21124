"""jaxsim: a MuJoCo-class physics simulator in JAX with its own MJCF compiler."""

from __future__ import annotations

from collections.abc import Mapping

import jax

from jaxsim import (
  _xla,  # noqa: F401  (first: sets XLA flags before JAX starts its backend)
  envs,
  mjcf,
)
from jaxsim.errors import ModelError
from jaxsim.forward import forward, step
from jaxsim.inverse import inverse
from jaxsim.rollout import rollout
from jaxsim.types import (
  BiasType,
  ConeType,
  Contact,
  Data,
  DisableBit,
  DynType,
  EnableBit,
  EqType,
  GainType,
  GeomType,
  IntegratorType,
  JointType,
  Model,
  Option,
  SolverType,
  TrnType,
  WrapType,
  make_model,
)
from jaxsim.types import make_data as _make_data

__version__ = '0.1.0'

__all__ = [
  'BiasType',
  'ConeType',
  'Contact',
  'Data',
  'DisableBit',
  'DynType',
  'EnableBit',
  'EqType',
  'GainType',
  'GeomType',
  'IntegratorType',
  'JointType',
  'Model',
  'ModelError',
  'Option',
  'SolverType',
  'TrnType',
  'WrapType',
  'envs',
  'forward',
  'inverse',
  'load',
  'load_string',
  'make_data',
  'rollout',
  'step',
]


def make_data(m: Model) -> Data:
  """A Data at the model's qpos0, zero velocity, with contact slots and constraint rows sized for
  the model as its options are now (mj_makeData + mj_resetData)."""
  from jaxsim import constraint
  from jaxsim.collision import driver

  return _make_data(m, ncon=driver.ncon_max(m), nefc=constraint.layout(m).nefc)


def _build(compiled: dict) -> Model:
  """Model from compiled arrays, completed by the qpos0 pass (mj_setConst) and the actuator
  length-range search (mj_setLengthRange)."""
  from jaxsim import constraint, lengthrange
  from jaxsim.collision import driver, pairs
  from jaxsim.setconst import set_const

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


def load(path: str, assets: Mapping[str, bytes] | None = None) -> Model:
  """Loads an MJCF model file into a Model."""
  return _build(mjcf.compile_file(path, assets))


def load_string(xml: str | bytes, assets: Mapping[str, bytes] | None = None) -> Model:
  """Loads MJCF text into a Model; `assets` maps file names to bytes for meshes and includes."""
  return _build(mjcf.compile_string(xml, assets))

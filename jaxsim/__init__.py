"""jaxsim: a MuJoCo-class physics simulator in JAX with its own MJCF compiler."""

from __future__ import annotations

from collections.abc import Mapping

from jaxsim import mjcf
from jaxsim.errors import ModelError
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
  make_data,
)

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
  'load',
  'load_string',
  'make_data',
]


def load(path: str, assets: Mapping[str, bytes] | None = None) -> Model:
  """Loads an MJCF model file into a Model."""
  from jaxsim.types import make_model

  return make_model(mjcf.compile_file(path, assets))


def load_string(xml: str | bytes, assets: Mapping[str, bytes] | None = None) -> Model:
  """Loads MJCF text into a Model; `assets` maps file names to bytes for meshes and includes."""
  from jaxsim.types import make_model

  return make_model(mjcf.compile_string(xml, assets))

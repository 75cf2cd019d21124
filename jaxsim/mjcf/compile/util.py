"""Small helpers every section of the compiler uses: array layout (MuJoCo's *_adr, fixed-width
rows) and the grammar check of an element's children."""

from __future__ import annotations

import os

import numpy as np

from jaxsim.mjcf import schema

# Most numbers an array sized by the model (hfield samples, numeric data, activations, keyframe
# values) may hold: larger requests are refused with a ModelError rather than a MemoryError.
MAX_ARRAY = 10**8

# which child tags an element may hold (mjXSchema's check, run by every section)
only = schema.only_children


def stem(path: str) -> str:
  """A file name without directory and extension: the name of an unnamed mesh, hfield, texture."""
  return os.path.splitext(os.path.basename(path))[0]


def adr(nums: np.ndarray, empty: int | None = None) -> np.ndarray:
  """Start addresses of consecutive blocks of the given sizes (`empty` where a size is 0)."""
  nums = np.asarray(nums, dtype=int)
  adr = np.concatenate([[0], np.cumsum(nums)[:-1]]).astype(int) if len(nums) else nums
  return adr if empty is None else np.where(nums > 0, adr, empty)


def rows(items, width: int) -> np.ndarray:
  """(len(items), width) float64 array of per-element vectors; (0, width) when there are none."""
  if not items:
    return np.zeros((0, width))
  return np.array([np.asarray(x, dtype=np.float64) for x in items]).reshape(len(items), width)

"""Batched rollouts: `lax.scan` over time, `vmap` over worlds."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from jaxsim.forward import step as _step
from jaxsim.types import Data, Model

DEFAULT_RECORD = ('qpos', 'qvel', 'act', 'time')


def _single(
  m: Model, d: Data, ctrls: jax.Array, record: Sequence[str]
) -> tuple[Data, dict[str, jax.Array]]:
  def body(d, ctrl):
    d = _step(m, d.replace(ctrl=ctrl))
    return d, {k: getattr(d, k) for k in record}

  return jax.lax.scan(body, d, ctrls)


def rollout(
  m: Model,
  d: Data,
  ctrls: jax.Array,
  record: Sequence[str] = DEFAULT_RECORD,
) -> tuple[Data, dict[str, jax.Array]]:
  """Steps T times with ctrls (T, nu), or a batch with ctrls (B, T, nu) and d batched or not.

  Returns the final Data and the recorded fields, each (T, ...) or (B, T, ...), holding the
  state after each step. Only the fields named in `record` are kept, so long rollouts stay small.
  """
  ctrls = jnp.asarray(ctrls)
  if ctrls.ndim == 2:
    return _single(m, d, ctrls, tuple(record))
  # an unbatched Data has a scalar time
  in_axes = (None, 0 if jnp.ndim(d.time) else None, 0)
  return jax.vmap(lambda m, d, c: _single(m, d, c, tuple(record)), in_axes=in_axes)(m, d, ctrls)

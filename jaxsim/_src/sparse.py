"""The constraint Jacobian, dense or in compact rows (MuJoCo's engine_util_sparse.c).

A contact row is nonzero only on the dofs of its two bodies' kinematic chains, so in a scene of
many robots the dense (nefc, nv) efc_J is mostly zeros and grows with the square of the scene.
The compact form keeps `width` entries per row: efc_J (nefc, width) holds the values and
efc_J_colind (nefc, width) their columns (dofs). Entries beyond a row's nonzeros hold 0 (at any
column), and a column may repeat within a row (the values add): every product below is a sum over
entries, so neither changes a result. The layout decides the form once per model
(layout.efc_width, from opt.jacobian); Data.efc_J_colind has zero columns when efc_J is dense.

`Jacobian` wraps either form for the solver: J x, J' f, |J|' |f|, dense rows picked by index and
the whole dense matrix (`efc_J_dense`, the documented way back to MuJoCo's (nefc, nv)).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxsim._src.types import Data


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Jacobian:
  """A constraint Jacobian (nrow, ncol): dense (`ind` None, `val` (nrow, ncol)) or compact
  (`val` and `ind` (nrow, width): the value and column of each entry)."""

  val: jax.Array
  ind: jax.Array | None
  ncol: int = dataclasses.field(metadata=dict(static=True))

  @property
  def shape(self) -> tuple[int, int]:
    return (self.val.shape[0], self.ncol)

  @property
  def dtype(self):
    return self.val.dtype

  def __matmul__(self, x: jax.Array) -> jax.Array:
    """J x (nrow,) for x (ncol,)."""
    if self.ind is None:
      return self.val @ x
    return jnp.sum(self.val * x[self.ind], axis=-1)

  def tmul(self, f: jax.Array) -> jax.Array:
    """J' f (ncol,) for f (nrow,)."""
    if self.ind is None:
      return self.val.T @ f
    return self._scatter(self.val * f[:, None])

  def abs_tmul(self, f: jax.Array) -> jax.Array:
    """|J|' |f| (ncol,): the sum over rows of |J_ij f_i|, the rounding scale of J' f."""
    if self.ind is None:
      # one fused reduction: |J| alone is loop-invariant, and XLA would store it for a matmul
      return jnp.sum(jnp.abs(self.val * f[:, None]), axis=0)
    return self._scatter(jnp.abs(self.val * f[:, None]))

  def _scatter(self, v: jax.Array) -> jax.Array:
    out = jnp.zeros(self.ncol, v.dtype)
    return out.at[self.ind.reshape(-1)].add(v.reshape(-1))

  def rows(self, pick: jax.Array) -> jax.Array:
    """Dense rows (k, ncol) of the row ids pick (k,); ids out of range give zero rows."""
    val = jnp.take(self.val, pick, axis=0, mode='fill', fill_value=0)
    if self.ind is None:
      return val
    ind = jnp.take(self.ind, pick, axis=0, mode='fill', fill_value=0)
    return _dense(val, ind, self.ncol)

  def dense(self) -> jax.Array:
    """The dense matrix (nrow, ncol)."""
    return self.val if self.ind is None else _dense(self.val, self.ind, self.ncol)


def _dense(val: jax.Array, ind: jax.Array, ncol: int) -> jax.Array:
  n = val.shape[0]
  out = jnp.zeros((n, ncol), val.dtype)
  return out.at[jnp.arange(n)[:, None], ind].add(val)


def merge(
  cols1: jax.Array, v1: jax.Array, cols2: jax.Array, v2: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """The sum of two compact row sets: columns (n, C1 + C2) and values (n, k, C1 + C2).

  cols1 (n, C1), cols2 (n, C2): distinct columns within each, -1 for padding (its value 0);
  v1 (n, k, C1), v2 (n, k, C2). A column of both keeps v1 + v2 in the first half and 0 in the
  second (the dense sum's value, bitwise: only exact zeros are added to it), so that a row's
  entries are its dense nonzeros once each. Padding comes out as column 0, value 0.
  """
  same = (cols1[:, :, None] == cols2[:, None, :]) & (cols1 >= 0)[:, :, None]  # (n, C1, C2)
  v1 = v1 + jnp.einsum('nkj,nij->nki', v2, same.astype(v2.dtype))
  v2 = jnp.where(jnp.any(same, axis=1)[:, None, :], 0.0, v2)
  cols = jnp.maximum(jnp.concatenate([cols1, cols2], axis=1), 0)
  return cols, jnp.concatenate([v1, v2], axis=2)


def jacobian(d: Data) -> Jacobian:
  """Data's constraint Jacobian (one world)."""
  ind = d.efc_J_colind
  return Jacobian(d.efc_J, ind if ind.shape[-1] else None, d.qvel.shape[-1])


def efc_J_dense(d: Data) -> jax.Array:
  """The constraint Jacobian as MuJoCo's dense efc_J (..., nefc, nv), whichever form Data holds.

  Arguments:
    d: Data of one world or of a batch (leading axes).

  Returns:
    efc_J (..., nefc, nv): d.efc_J itself when dense; else the compact rows' values scattered to
    their columns (layout.efc_width: a model whose rows reach few of its dofs keeps them compact).
  """
  ind = d.efc_J_colind
  if not ind.shape[-1]:
    return d.efc_J
  fn = lambda v, i: _dense(v, i, d.qvel.shape[-1])  # noqa: E731
  for _ in range(d.efc_J.ndim - 2):
    fn = jax.vmap(fn)
  return fn(d.efc_J, ind)

"""The constraint Jacobian, dense or in compact rows (MuJoCo's engine_util_sparse.c).

A constraint row is nonzero only on the dofs that move its bodies: a contact's two bodies'
kinematic chains, a limit's joint. In a scene of many robots the dense (nefc, nv) efc_J is
mostly zeros and grows with the square of the scene. The compact form keeps, per row, the values
on the dofs of two bodies' chains: efc_J (nefc, 2C) holds them, efc_J_body (nefc, 2) the two
bodies; entry k < C of row i is at dof chain[efc_J_body[i, 0], k], entry C + k at
chain[efc_J_body[i, 1], k], where chain is the layout's static table layout.body_dofs
(nbody, C: the dofs moving each body, ascending, -1 padded). Padding entries hold 0; a dof both
chains share has its value in one half and 0 in the other (sums over entries give the dense
row's). A row of one body (a limit, friction loss) has the world (no dofs) as its second body.
The layout decides the form once per model (layout.efc_width, from opt.jacobian);
Data.efc_J_body has zero columns when efc_J is dense.

Products gather x over the static chain table once (nbody, C), then by the rows' bodies, and
scatter J' f per body then over the table: the per-row indices are two body ids, not a column
per entry. `Jacobian` wraps either form for the solver: J x, J' f, |J|' |f|, dense rows picked
by index and the whole dense matrix (`efc_J_dense`, the documented way back to MuJoCo's
(nefc, nv)).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.types import Data, Model


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Jacobian:
  """A constraint Jacobian (nrow, ncol): dense (`body` None, `val` (nrow, ncol)) or compact
  (`val` (nrow, 2C) on the chains (`chain` (nbody, C), -1 padded) of the bodies `body`
  (nrow, 2), module docstring)."""

  val: jax.Array
  body: jax.Array | None
  chain: jax.Array | None
  ncol: int = dataclasses.field(metadata=dict(static=True))

  @property
  def shape(self) -> tuple[int, int]:
    return (self.val.shape[0], self.ncol)

  @property
  def dtype(self):
    return self.val.dtype

  @property
  def compact(self) -> bool:
    return self.body is not None

  def _scatter(self, v: jax.Array) -> jax.Array:
    """The sum of entries v (nrow, 2C) per dof, (ncol,)."""
    nbody, c = self.chain.shape
    per = jax.ops.segment_sum(v[:, :c], self.body[:, 0], nbody)
    per = per + jax.ops.segment_sum(v[:, c:], self.body[:, 1], nbody)  # (nbody, C)
    valid = self.chain >= 0
    out = jnp.zeros(self.ncol, v.dtype)
    return out.at[jnp.maximum(self.chain, 0)].add(jnp.where(valid, per, 0.0))

  def cols(self) -> jax.Array:
    """Each entry's column (nrow, 2C), -1 on padding (compact only)."""
    return _cols(self.body, self.chain)

  def __matmul__(self, x: jax.Array) -> jax.Array:
    """J x (nrow,) for x (ncol,)."""
    if self.body is None:
      return self.val @ x
    xc = jnp.where(self.chain >= 0, x[jnp.maximum(self.chain, 0)], 0.0)  # (nbody, C)
    c = self.chain.shape[1]
    # per half, so that XLA fuses each gather into its sum rather than storing (nrow, 2C)
    out = jnp.sum(self.val[:, :c] * xc[self.body[:, 0]], axis=-1)
    return out + jnp.sum(self.val[:, c:] * xc[self.body[:, 1]], axis=-1)

  def tmul(self, f: jax.Array) -> jax.Array:
    """J' f (ncol,) for f (nrow,)."""
    if self.body is None:
      return self.val.T @ f
    return self._scatter(self.val * f[:, None])

  def abs_tmul(self, f: jax.Array) -> jax.Array:
    """|J|' |f| (ncol,): the sum over rows of |J_ij f_i|, the rounding scale of J' f."""
    if self.body is None:
      # one fused reduction: |J| alone is loop-invariant, and XLA would store it for a matmul
      return jnp.sum(jnp.abs(self.val * f[:, None]), axis=0)
    return self._scatter(jnp.abs(self.val * f[:, None]))

  def rows(self, pick: jax.Array) -> jax.Array:
    """Dense rows (k, ncol) of the row ids pick (k,); ids out of range give zero rows."""
    val = jnp.take(self.val, pick, axis=0, mode='fill', fill_value=0)
    if self.body is None:
      return val
    body = jnp.take(self.body, pick, axis=0, mode='fill', fill_value=0)
    return _dense(val, body, self.chain, self.ncol)

  def dense(self) -> jax.Array:
    """The dense matrix (nrow, ncol)."""
    if self.body is None:
      return self.val
    return _dense(self.val, self.body, self.chain, self.ncol)


def _cols(body: jax.Array, chain: jax.Array) -> jax.Array:
  """The columns (nrow, 2C) of compact rows on bodies body (nrow, 2), -1 on padding."""
  return jnp.concatenate([chain[body[:, 0]], chain[body[:, 1]]], axis=1)


def _dense(val: jax.Array, body: jax.Array, chain: jax.Array, ncol: int) -> jax.Array:
  n = val.shape[0]
  cols = _cols(body, chain)
  out = jnp.zeros((n, ncol), val.dtype)
  return out.at[jnp.arange(n)[:, None], jnp.maximum(cols, 0)].add(jnp.where(cols >= 0, val, 0.0))


def chain_position(chain: np.ndarray, body: np.ndarray, dof: np.ndarray) -> np.ndarray:
  """Entry of each dof (n,) in its body's chain row (static): chain[body[i], k] == dof[i]."""
  return np.argmax(chain[body] == np.asarray(dof)[:, None], axis=1)


def merge(cols1: jax.Array, v1: jax.Array, cols2: jax.Array, v2: jax.Array) -> jax.Array:
  """The sum of two compact row sets on two chains, as one row set on both: (n, k, C1 + C2).

  cols1 (n, C1), cols2 (n, C2): the chains' dofs (distinct within each, -1 padding, value 0);
  v1 (n, k, C1), v2 (n, k, C2). A dof of both keeps v1 + v2 in the first half and 0 in the
  second (the dense sum's value, bitwise: only exact zeros are added to it), so that a row's
  entries are its dense nonzeros once each.
  """
  same = (cols1[:, :, None] == cols2[:, None, :]) & (cols1 >= 0)[:, :, None]  # (n, C1, C2)
  v1 = v1 + jnp.einsum('nkj,nij->nki', v2, same.astype(v2.dtype))
  v2 = jnp.where(jnp.any(same, axis=1)[:, None, :], 0.0, v2)
  return jnp.concatenate([v1, v2], axis=2)


def jacobian(m: Model, d: Data) -> Jacobian:
  """Data's constraint Jacobian (one world); m's layout holds the chain table if compact."""
  body = d.efc_J_body
  if not body.shape[-1]:
    return Jacobian(d.efc_J, None, None, d.qvel.shape[-1])
  return Jacobian(d.efc_J, body, jnp.asarray(m.layout.body_dofs), d.qvel.shape[-1])


def efc_J_dense(m: Model, d: Data) -> jax.Array:
  """The constraint Jacobian as MuJoCo's dense efc_J (..., nefc, nv), whichever form Data holds.

  Arguments:
    m: the Model d belongs to (its layout's chain table, layout.body_dofs).
    d: Data of one world or of a batch (leading axes).

  Returns:
    efc_J (..., nefc, nv): d.efc_J itself when dense; else the compact rows' values scattered to
    their columns (layout.efc_width: a model whose rows reach few of its dofs keeps them compact).
  """
  body = d.efc_J_body
  if not body.shape[-1]:
    return d.efc_J
  chain = jnp.asarray(m.layout.body_dofs)
  fn = lambda v, b: _dense(v, b, chain, d.qvel.shape[-1])  # noqa: E731
  for _ in range(d.efc_J.ndim - 2):
    fn = jax.vmap(fn)
  return fn(d.efc_J, body)

"""Mass matrix by composite rigid bodies, its factorisation and solves, RNE bias forces.

All tree sums are products with the static masks in `Model.tree_*` (dense, matmul-shaped).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import math
from jaxsim._src.enums import MINVAL, DisableBit, TrnType, WarningType
from jaxsim._src.types import Data, Model, m_sparsity


def _gear2_sum(m: Model, values: jax.Array, trntypes: tuple[int, ...], size: int) -> jax.Array:
  """Sum over actuators of values * gear[0]^2 onto their joint/tendon (mj_actuatorArmature)."""
  trn = np.asarray(m.actuator_trntype)
  sel = np.flatnonzero(np.isin(trn, trntypes))
  out = jnp.zeros(size, dtype=values.dtype)
  if sel.size == 0 or size == 0:
    return out
  target = np.asarray(m.actuator_trnid)[sel, 0]
  gear = m.actuator_gear[sel, 0]
  return out.at[target].add(values[sel] * gear * gear)


def dof_armature(m: Model) -> jax.Array:
  """Armature (nv,): dof_armature plus actuator armature times gear squared."""
  arm = m.dof_armature
  if m.nu:
    jnt = _gear2_sum(
      m, m.actuator_armature, (int(TrnType.JOINT), int(TrnType.JOINTINPARENT)), m.njnt
    )
    arm = arm + jnt[np.asarray(m.dof_jntid)]
  return arm


def tendon_armature(m: Model) -> jax.Array:
  """Tendon armature (ntendon,): tendon_armature plus actuator armature times gear squared."""
  arm = m.tendon_armature
  if m.nu:
    arm = arm + _gear2_sum(m, m.actuator_armature, (int(TrnType.TENDON),), m.ntendon)
  return arm


def dof_chain(m: Model) -> np.ndarray:
  """(nv, nv) bool: dof pairs on one ancestor chain, the sparsity of MuJoCo's qM and qDeriv."""
  anc = np.asarray(m.tree_dof_dof).astype(bool)  # [i, j]: j ancestor-or-self of i
  return anc | anc.T


def crb(m: Model, d: Data) -> Data:
  """Joint-space inertia, armature included (mj_crb + mj_tendonArmature): qM dense (nv, nv)
  and M, its lower triangle in qLD's compact rows (nv, nld).

  M is computed on its own from the same terms, not gathered from qM, so that the steps after
  (the factor, the solvers) do not read the dense matrix: XLA then forms qM where Data's output
  needs it (after the solver, for 8 humanoids 182 KiB per world less at the solver's peak).
  """
  if not m.nv:
    return d
  dtype = d.cinert.dtype
  crb_body = jnp.asarray(m.tree_subtree, dtype=dtype) @ d.cinert
  buf = math.inert_mul(crb_body[np.asarray(m.dof_bodyid)], d.cdof)
  d = d.replace(M=_m_rows(m, d, buf))
  # raw[i, j] = cdof_i . (crb_body(j) cdof_j): valid where i is an ancestor dof of j
  raw = d.cdof @ buf.T
  anc = np.asarray(m.tree_dof_dof).astype(bool)  # [i, j]: j ancestor-or-self of i
  lower = jnp.where(anc, raw.T, 0.0)
  qm = lower + lower.T - jnp.diag(jnp.diag(lower))
  qm = qm + jnp.diag(dof_armature(m))
  if m.ntendon:
    arm = tendon_armature(m)
    # only within M's sparsity (dof pairs on one ancestor chain): MuJoCo's sparse qM has no
    # room for the terms of a tendon that couples two branches or two trees, and drops them
    chain = jnp.asarray(dof_chain(m), dtype=dtype)
    qm = qm + jnp.einsum('t,ti,tj->ij', arm, d.ten_J, d.ten_J) * chain
  return d.replace(qM=qm)


def _m_rows(m: Model, d: Data, buf: jax.Array) -> jax.Array:
  """M's compact rows (nv, nld) from buf (nv, 6) = crb(body of i) cdof_i: M[i, j] = cdof_j . buf_i
  for j = ld_layout's columns of row i, the armature on the diagonal, the tendon armature."""
  ld = ld_layout(m)
  cols, _, diag = ld
  # a contraction, which XLA stores once: as a sum of products it fused the sum into each of
  # M's readers (the solver's loops) and kept the gathered cdof (nv, nld, 6) alive through them
  rows = jnp.einsum('ikc,ic->ik', d.cdof[cols], buf)
  rows = rows + jnp.where(np.arange(cols.shape[1])[None, :] == diag[:, None],
                          dof_armature(m)[:, None], 0.0)  # fmt: skip
  if m.ntendon:
    arm = tendon_armature(m)
    rows = rows + jnp.einsum('t,ti,tik->ik', arm, d.ten_J, d.ten_J[:, cols])
  return jnp.where(ld.entry, rows, 0.0)


def mul_rows(ld: LDLayout, rows: jax.Array, x: jax.Array) -> jax.Array:
  """A x for a symmetric A (n, n) given by its lower triangle's compact rows (n, w) on ld's
  pattern (Data.M: mj_mulM); x (n,).

  Each row's entries left of its diagonal act twice: on x at their column (lower) and, at
  their column, on x[i] (upper), summed there by a segment sum."""
  cols = ld.cols
  n = rows.shape[0]
  lower = jnp.sum(rows * x[cols], axis=1)
  upper = jnp.where(ld.below, rows, 0.0) * x[:, None]
  return lower + jax.ops.segment_sum(upper.reshape(-1), cols.reshape(-1), n)


def rows_dense(ld: LDLayout, rows: jax.Array) -> jax.Array:
  """The dense symmetric (n, n) matrix of compact lower rows (n, w) on ld's pattern."""
  lower = lower_dense(ld, rows)
  return lower + lower.T - jnp.diag(jnp.diagonal(lower))


def add_rows(ld: LDLayout, a: jax.Array, rows: jax.Array) -> jax.Array:
  """a (n, n) plus the symmetric matrix of compact lower rows (n, w) on ld's pattern, added
  entry by entry into a (no dense copy of the rows' matrix is formed)."""
  cols, keep, off = ld.cols, ld.entry, ld.below
  i = np.broadcast_to(np.arange(rows.shape[0])[:, None], cols.shape)
  a = a.at[i[keep], cols[keep]].add(rows[keep])
  return a.at[cols[off], i[off]].add(rows[off])


def rows_diag(ld: LDLayout, rows: jax.Array) -> jax.Array:
  """The diagonal (n,) of compact rows on ld's pattern."""
  return rows[np.arange(rows.shape[0]), ld.diag]


def _eliminate(a: jax.Array, lo: int, clamped: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Rows k = n-1 .. lo of factor_ld's elimination on a (n, n) (rows > n-1 done before)."""
  n = a.shape[0]
  idx = jnp.arange(n)

  def row(t, carry):
    a, clamped = carry  # rows > k: factor rows; rows <= k: M with the updates of rows > k
    k = n - 1 - t
    ak = a[k]
    piv = ak[k]
    small = piv < MINVAL
    piv = jnp.where(small, MINVAL, piv)
    below = idx < k
    lrow = jnp.where(below, ak * (1 / piv), 0.0)  # L[k, :k] (MuJoCo: times qLDiagInv)
    # rows i < k: A[i, :] += A[k, :] * -L[k, i]; the other rows as they are (no 0 * inf)
    a = jnp.where(below[:, None], a + ak[None, :] * (-lrow)[:, None], a)
    a = a.at[k].set(jnp.where(below, lrow, jnp.where(idx == k, piv, 0.0)))
    return a, clamped | small

  return jax.lax.fori_loop(0, n - lo, row, (a, clamped))


def factor_ld(qm: jax.Array) -> tuple[jax.Array, jax.Array]:
  """MuJoCo's L'DL factorization of an inertia-like matrix (mj_factorI), dense.

  qm = L' D L with L unit lower triangular, eliminated as MuJoCo does from the last dof to the
  first (leaf to root), so that a tree's sparsity has no fill-in and the pivots are MuJoCo's. A
  pivot below MINVAL (a singular or near-singular qm: redundant joints without armature) is set
  to MINVAL, as MuJoCo 4 does, so that the solves stay finite; a NaN pivot is left NaN (the test
  is false for NaN, as MuJoCo's).

  MuJoCo's right-looking elimination, operation for operation: row k scaled by 1 / D_k, and
  every row i < k updated by A[i, :] += A[k, :] * -(A[k, i] / D_k), the updates of an entry in
  MuJoCo's order (k descending), so the factor rounds as MuJoCo's (bit for bit on a CPU without
  FMA contraction, `configure_cpu(mujoco_rounding=True)`). That matters where a pivot is clamped:
  the row over it is round-off divided by MINVAL, and a left-looking order (one product per row,
  half the memory traffic) gave L entries of 0.1 where MuJoCo's are 0. fori_loops over the rows:
  they vectorise over a batch and are differentiable, and they are no LAPACK call (see
  xla.REQUIRED_ENV for why that matters on the CPU). The rows go in chunks of halving size, each
  chunk's loop on the leading block its rows still update (rows >= the chunk's end are final):
  0.6x the memory traffic of one loop on the whole matrix (humanoid, batch 1024: 8.0 -> 5.4
  us/world, LAPACK's Cholesky 1.7).

  Arguments:
    qm: (n, n) symmetric matrix; only its lower triangle is read (as MuJoCo stores it), so a
      gradient with respect to qm lands there.
  Returns:
    qLD (n, n): D on the diagonal, L strictly below it, zero above (MuJoCo's qLD values, dense);
    clamped: () bool, some pivot was below MINVAL (mjWARN_INERTIA).
  """
  n = qm.shape[0]
  bounds = [n]  # chunk ends: n, n/2, n/4, ... while the block is 8 or more, then 0 (log2 n)
  while bounds[-1] >= 8:
    bounds.append(bounds[-1] // 2)
  bounds.append(0)
  clamped = jnp.zeros((), bool)
  blocks = []
  a = qm
  for lo in bounds[1:]:
    a, clamped = _eliminate(a, lo, clamped)
    blocks.append(a)
    a = a[:lo, :lo]  # what rows < lo still update
  out = blocks[-1]
  for block in reversed(blocks[:-1]):
    out = block.at[: out.shape[0], : out.shape[0]].set(out)
  return jnp.tril(out), clamped


def solve_ld(qld: jax.Array, x: jax.Array) -> jax.Array:
  """(L' D L)^-1 x from a factor made by factor_ld (mj_solveLD), dense.

  The same passes as MuJoCo: x <- L'^-1 x (last row to first), x <- D^-1 x, x <- L^-1 x (first
  row to last), each a fori_loop over the rows (no LAPACK call).

  Arguments:
    qld: (n, n) factor from factor_ld (D on the diagonal, L strictly below).
    x: (n,) or (n, k) right-hand sides.
  Returns:
    (n,) or (n, k), the shape of x.
  """
  n = qld.shape[0]
  if not n:
    return x
  shape = x.shape
  x = x.reshape(n, -1)
  low = jnp.tril(qld, -1)

  def back(t, x):  # x[j] -= L[i, j] x[i] for j < i
    i = n - 1 - t
    return x - low[i][:, None] * x[i][None, :]

  def fwd(i, x):  # x[i] -= sum_j L[i, j] x[j] for j < i
    return x.at[i].add(-(low[i] @ x))

  x = jax.lax.fori_loop(0, n, back, x)
  x = x * (1 / jnp.diagonal(qld))[:, None]
  x = jax.lax.fori_loop(0, n, fwd, x)
  return x.reshape(shape)


# ------------------------------------------------------------------------------ qLD, compact rows


class LDLayout(NamedTuple):
  """Static layout of an L'DL factor in compact rows (ld_layout_of)."""

  cols: np.ndarray  # (n, w) the column of each entry (i itself in the padding)
  pos: np.ndarray  # (n, n) [i, j] the entry of column j in row i; -1: not in row i's pattern
  diag: np.ndarray  # (n,) the entry of D[i] in row i

  @property
  def entry(self) -> np.ndarray:
    """(n, w) bool: a row's real entries, the diagonal included (the rest is padding)."""
    return np.arange(self.cols.shape[1])[None, :] <= self.diag[:, None]

  @property
  def below(self) -> np.ndarray:
    """(n, w) bool: a row's entries left of its diagonal (L's, or the strict lower triangle)."""
    return np.arange(self.cols.shape[1])[None, :] < self.diag[:, None]


def ld_layout_of(pattern: np.ndarray) -> LDLayout:
  """The compact rows of an L'DL factor with a given (filled) sparsity: row i holds its entries
  at the columns of pattern[i] in ascending order, D[i] last (MuJoCo's compressed rows,
  left-aligned), padded to the longest row.

  Arguments:
    pattern: (n, n) bool, lower triangular with the diagonal, closed under factor_sparse's
      elimination (no fill outside it: an ancestor pattern, or hessian_pattern's).
  """
  n = pattern.shape[0]
  width = int(pattern.sum(axis=1).max(initial=0))
  pos = np.where(pattern, np.cumsum(pattern, axis=1) - 1, -1).astype(np.int32)
  cols = np.tile(np.arange(n, dtype=np.int32)[:, None], (1, width))
  i, j = np.nonzero(pattern)
  cols[i, pos[i, j]] = j
  return LDLayout(cols, pos, (pattern.sum(axis=1) - 1).astype(np.int32))


def ld_layout(m: Model) -> LDLayout:
  """Static layout of qLD's compact rows (Data.qLD, (nv, nld)): MuJoCo's rows of qLD
  (M_rowadr, M_colind), left-aligned: row i holds L[i, j] for the ancestor dofs j of i
  (dof_parentid chain; none for a simple body's dofs: types.m_sparsity), root first, then D[i].
  A tree's L'DL has no fill-in, so these are all of L's entries."""
  return ld_layout_of(m_sparsity(m))


def compact(ld: LDLayout, dense: jax.Array) -> jax.Array:
  """The compact rows (n, w) of a dense (n, n) matrix's lower triangle on ld's pattern."""
  return jnp.where(ld.entry, jnp.asarray(dense)[np.arange(len(ld.diag))[:, None], ld.cols], 0.0)


def ld_compact(m: Model, dense: jax.Array) -> jax.Array:
  """qLD's compact rows (nv, nld) of a dense (nv, nv) factor (D on the diagonal, L below), or
  the entries of a symmetric matrix's lower triangle on M's sparsity."""
  return compact(ld_layout(m), dense)


def ld_dense(m: Model, qld: jax.Array) -> jax.Array:
  """The dense (nv, nv) form of qLD's compact rows: D on the diagonal, L below, zero above.

  Arguments:
    qld: (..., nv, nld) compact rows (Data.qLD, batched or not).
  Returns:
    (..., nv, nv).
  """
  return lower_dense(ld_layout(m), qld)


def lower_dense(ld: LDLayout, rows: jax.Array) -> jax.Array:
  """The dense lower triangle (..., n, n) of compact rows (..., n, w) on ld's pattern (zero
  above the diagonal and outside the pattern)."""
  rows = jnp.asarray(rows)
  pos = ld.pos
  entries = rows[..., np.arange(pos.shape[0])[:, None], np.maximum(pos, 0)]
  return jnp.where(pos >= 0, entries, 0.0)


def qLD_dense(m: Model, d: Data) -> jax.Array:
  """Data's qLD as a dense (..., nv, nv) matrix (D on the diagonal, L below, zero above), for one
  world or a batch (leading axes): MuJoCo's factor values, Data keeps them in compact rows."""
  return ld_dense(m, d.qLD)


def factor_sparse(ld: LDLayout, a: jax.Array) -> tuple[jax.Array, jax.Array]:
  """L'DL factorization in compact rows (mj_factorI on a sparsity pattern).

  factor_ld's elimination (from the last row to the first, MuJoCo's operations in MuJoCo's
  order, the pivot clamp at MINVAL), on the pattern's entries only: a trip updates the rows
  in row k's pattern, (n, w) rather than (n, n). The pattern must hold the fill of this
  elimination (a tree's ancestor pattern has none).

  Arguments:
    ld: the pattern's layout (ld_layout_of).
    a: (n, w) compact rows of the matrix's lower triangle (compact).
  Returns:
    the factor (n, w) in the same rows; clamped: () bool, some pivot was below MINVAL.
  """
  cols, pos, diag = ld
  n = len(diag)
  q = np.arange(cols.shape[1])
  entry = ld.entry
  pos_j, diag_j = jnp.asarray(pos), jnp.asarray(diag)

  def row(t, carry):
    a, clamped = carry  # rows > k: factor rows; rows <= k: the matrix with rows > k's updates
    k = n - 1 - t
    ak, pk, dk = a[k], pos_j[k], diag_j[k]
    piv = ak[dk]
    small = piv < MINVAL
    piv = jnp.where(small, MINVAL, piv)
    inv = 1 / piv
    # row k spread over the columns (gathered through pos: no scatter in the loop)
    ink = pk >= 0  # (n,) the columns in row k's pattern
    akd = jnp.where(ink, ak[jnp.maximum(pk, 0)], 0.0)  # (n,) A[k, :]
    above = ink & (pk < dk)  # the rows i < k in row k's pattern
    # A[i, c] += A[k, c] * -(A[k, i] / D_k) for c in row k's pattern (MuJoCo: qLDiagInv)
    lrow = akd * inv
    upd = above[:, None] & entry & ink[cols]
    a = jnp.where(upd, a + akd[cols] * (-lrow)[:, None], a)
    a = a.at[k].set(jnp.where(q < dk, ak * inv, jnp.where(q == dk, piv, 0.0)))
    return a, clamped | small

  return jax.lax.fori_loop(0, n, row, (a, jnp.zeros((), bool)))


def factor_tree(m: Model, qm: jax.Array) -> tuple[jax.Array, jax.Array]:
  """MuJoCo's L'DL factorization of an inertia-like matrix on M's sparsity (mj_factorI), in
  qLD's compact rows (ld_layout): factor_sparse on the dofs' ancestor chains (a tree has no
  fill-in). Entries of qm off M's sparsity are not read (MuJoCo's sparse M has no room for them).

  Arguments:
    qm: (nv, nv) symmetric matrix; only its lower triangle on M's sparsity is read.
  Returns:
    qld (nv, nld) compact rows; clamped: () bool, some pivot was below MINVAL (mjWARN_INERTIA).
  """
  return factor_sparse(ld_layout(m), ld_compact(m, qm))


def solve_sparse(ld: LDLayout, qld: jax.Array, x: jax.Array) -> jax.Array:
  """(L' D L)^-1 x from an L'DL factor in compact rows (factor_sparse, factor_tree; mj_solveLD).

  solve_ld's passes and arithmetic (x <- L'^-1 x last row to first, x <- D^-1 x, x <- L^-1 x
  first row to last), each row of L expanded to (nv,) from its compact entries in the trip.

  Arguments:
    ld: the factor's layout (ld_layout_of; qLD's: ld_layout(m)).
    qld: (n, w) compact rows.
    x: (n,) or (n, k) right-hand sides.
  Returns:
    (n,) or (n, k), the shape of x.
  """
  n = x.shape[0]
  if not n:
    return x
  _, pos, diag = ld
  pos_j, diag_j = jnp.asarray(pos), jnp.asarray(diag)
  shape = x.shape
  x = x.reshape(n, -1)

  def low(i):  # L[i, :] (nv,): the entries before the diagonal, zero elsewhere
    p = pos_j[i]
    return jnp.where((p >= 0) & (p < diag_j[i]), qld[i][jnp.maximum(p, 0)], 0.0)

  def back(t, x):  # x[j] -= L[i, j] x[i] for j < i
    i = n - 1 - t
    return x - low(i)[:, None] * x[i][None, :]

  def fwd(i, x):  # x[i] -= sum_j L[i, j] x[j] for j < i
    return x.at[i].add(-(low(i) @ x))

  x = jax.lax.fori_loop(0, n, back, x)
  x = x * (1 / qld[np.arange(n), diag])[:, None]
  x = jax.lax.fori_loop(0, n, fwd, x)
  return x.reshape(shape)


def factor_lu(a: jax.Array) -> jax.Array:
  """LU factorization without pivoting, eliminated from the last row to the first (as MuJoCo's
  mju_factorLUSparse for mj_implicit's qM - h qDeriv: a tree's sparsity has no fill-in), dense.

  Row k eliminates column k from every row above it: a = U L with U unit upper triangular (its
  multipliers stored above the diagonal) and L lower triangular (on and below it). A fori_loop
  over the rows, no LAPACK call (xla.REQUIRED_ENV: batched LAPACK kernels can deadlock XLA's CPU
  pool). A zero pivot gives non-finite values, as MuJoCo's unpivoted factorization (the step's
  bad-qacc check then resets and counts it).

  Arguments:
    a: (n, n) matrix (qM - h qDeriv: diagonally dominant where MuJoCo's LU is used).
  Returns:
    lu (n, n): U strictly above the diagonal, L on and below it (solve_lu's input).
  """
  n = a.shape[0]
  idx = jnp.arange(n)

  def row(t, a):
    k = n - 1 - t
    above = idx < k
    mult = jnp.where(above, a[:, k] / a[k, k], 0.0)  # U[i, k] for rows i < k
    left = jnp.where(above, a[k], 0.0)  # L[k, :k]
    a = a - mult[:, None] * left[None, :]
    return a.at[:, k].set(jnp.where(above, mult, a[:, k]))

  return jax.lax.fori_loop(0, n, row, a)


def solve_lu(lu: jax.Array, x: jax.Array) -> jax.Array:
  """a^-1 x from factor_lu's U L (mju_solveLUSparse's two passes): x <- U^-1 x (last row to
  first), then x <- L^-1 x (first row to last), fori_loops, no LAPACK call.

  Arguments:
    lu: (n, n) from factor_lu.
    x: (n,) or (n, k) right-hand sides.
  Returns:
    (n,) or (n, k), the shape of x.
  """
  n = lu.shape[0]
  if not n:
    return x
  shape = x.shape
  x = x.reshape(n, -1)
  idx = jnp.arange(n)
  low = jnp.tril(lu, -1)

  def back(t, x):  # x[i] -= U[i, k] x[k] for i < k
    k = n - 1 - t
    return x - jnp.where(idx < k, lu[:, k], 0.0)[:, None] * x[k][None, :]

  def fwd(i, x):  # x[i] = (x[i] - sum_j L[i, j] x[j]) / L[i, i] for j < i
    return x.at[i].set((x[i] - low[i] @ x) / lu[i, i])

  x = jax.lax.fori_loop(0, n, back, x)
  x = jax.lax.fori_loop(0, n, fwd, x)
  return x.reshape(shape)


def spd_block(n: int) -> int:
  """Rows per block of factor_spd for an (n, n) matrix; 0: not blocked (factor_ld).

  Measured in whole steps (jit(vmap(step)), float32, this 2-core CPU, same process): blocks of
  8 made dog's step (n = 85, batch 64) 2.5% faster and a single factorization 3x faster (eight
  humanoids, n = 216: 6x); on dm_control's humanoid (n = 27, batch 256) blocks of 4, 8 or 16
  were no faster than factor_ld, so small matrices keep it. 16 above 128 rows (as fast as 8 or
  faster at 216 in a factorization alone).
  """
  if n <= 32:
    return 0
  return 8 if n <= 128 else 16


def factor_spd(h: jax.Array) -> jax.Array:
  """L'DL factor of a symmetric positive definite h (Newton's Hessian), blocked.

  The factor of factor_ld (qLD's layout, for solve_ld), eliminated from the last row to the
  first, but a block of rows at a time (spd_block; factor_ld itself where that is 0): within a
  block the rows are eliminated one by one (on the block's rows only, unrolled), then the rows
  above the block are updated by one product h[:lo, :lo] -= L_b' D_b L_b. A fori_loop of
  n / block trips instead of n trips over the whole matrix: a factorization of dog's size
  (n = 85, batch 64) 232 -> 76 us, eight humanoids' (216, batch 16) 3,500 -> 560 (float32, this
  2-core CPU). The products sum in another order than MuJoCo's, so the factor is not MuJoCo's
  bit for bit: for qM, where MuJoCo's rounding matters at clamped pivots, use factor_ld. A pivot
  below MINVAL is clamped to MINVAL (mju_cholFactor's mindiag), a NaN pivot left NaN.

  Arguments:
    h: (n, n) symmetric positive definite; only the lower triangle is read.
  Returns:
    qld (n, n): D on the diagonal, L strictly below it, zero above (h = L' D L).
  """
  n = h.shape[0]
  b = spd_block(n)
  if not b:
    return factor_ld(h)[0]
  size = -(-n // b) * b
  # padded with identity rows at the end: eliminated first, they touch no other row
  a = jnp.eye(size, dtype=h.dtype).at[:n, :n].set(h) if size > n else h
  idx = jnp.arange(size)
  ahead = np.arange(b)

  def block(t, a):
    lo = size - (t + 1) * b
    p = jax.lax.dynamic_slice(a, (lo, 0), (b, size))  # the block's rows, updated in place
    rows = [None] * b
    for j in range(b - 1, -1, -1):
      k = lo + j
      pk = p[j]
      piv = pk[k]
      piv = jnp.where(piv < MINVAL, MINVAL, piv)
      lrow = jnp.where(idx < k, pk * (1 / piv), 0.0)
      lk = jax.lax.dynamic_slice(lrow, (lo,), (b,))  # L[k, lo:lo + b]
      # the block's rows before k: A[i, :] -= L[k, i] A[k, :]
      p = p - jnp.where((ahead < j)[:, None], lk[:, None] * pk[None, :], 0.0)
      rows[j] = jnp.where(idx < k, lrow, jnp.where(idx == k, piv, 0.0))
    out = jnp.stack(rows)
    low = jnp.where(idx < lo, out, 0.0)  # L_b on the columns above the block
    dlow = low * jnp.diagonal(jax.lax.dynamic_slice(out, (0, lo), (b, b)))[:, None]
    a = a - low.T @ dlow
    return jax.lax.dynamic_update_slice(a, out, (lo, 0))

  a = jax.lax.fori_loop(0, size // b, block, a)
  return jnp.tril(a[:n, :n])


def solve_spd(h: jax.Array, x: jax.Array, ld: LDLayout | None = None) -> jax.Array:
  """h^-1 x for a symmetric positive definite h (Newton's Hessian): on the CPU by factor_spd and
  solve_ld (with ld, h's sparsity: by factor_sparse and solve_sparse on it), elsewhere by the
  backend's Cholesky.

  On the CPU no LAPACK call is left in a default step: jaxlib 0.10.2's batched LAPACK kernels
  block on XLA's thread pool and deadlock when as many run at once as the pool has threads (a
  batch split over two CPU devices hung in 1 of 1 runs; xla.REQUIRED_ENV). On a GPU cuSOLVER's
  batched Cholesky runs without a device loop per row. A pivot below MINVAL is clamped on the
  CPU (as MuJoCo's mju_cholFactor with mjMINVAL); the backend's Cholesky gives NaN there.

  Arguments:
    h: (n, n) symmetric positive definite (only the lower triangle is read).
    x: (n,) or (n, k).
    ld: None, or the compact rows of a pattern holding h's lower triangle and its factor's fill
      (layout.hessian_sparsity): the factorization costs n trips over (n, w) instead of n^3.
  Returns:
    h^-1 x, the shape of x.
  """

  def cpu(h, x):
    if ld is not None:
      return solve_sparse(ld, factor_sparse(ld, compact(ld, h))[0], x)
    return solve_ld(factor_spd(h), x)

  def other(h, x):
    return jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(h), True), x)

  return jax.lax.platform_dependent(h, x, cpu=cpu, default=other)


def factor_warn(
  qm: jax.Array, warning: jax.Array, used: jax.Array | bool = True, m: Model | None = None
) -> tuple[jax.Array, jax.Array]:
  """MuJoCo's L'DL factor (mj_factorI), counting mjWARN_INERTIA (once per factorization, as
  MuJoCo) where a pivot was clamped to MINVAL.

  Arguments:
    qm: (n, n) symmetric matrix.
    warning: (nwarning,) Data.warning.
    used: () whether the caller uses this factor (a warning is counted only then).
    m: with the Model, qm is on M's sparsity (n = nv) and is factored in qLD's compact rows
      (factor_tree); without, densely (factor_ld).
  Returns:
    (qld (n, n) or (nv, nld), warning (nwarning,)).
  """
  qld, clamped = factor_ld(qm) if m is None else factor_tree(m, qm)
  return qld, _count_inertia(warning, clamped & used)


def _count_inertia(warning: jax.Array, clamped: jax.Array) -> jax.Array:
  """warning with mjWARN_INERTIA counted once where clamped (a factor clamped a pivot)."""
  return warning.at[WarningType.INERTIA].add(clamped.astype(warning.dtype))


def factor_m(m: Model, d: Data) -> Data:
  """MuJoCo's L'DL factor of M (Data.M, qM's compact rows) in qLD's compact rows (factor_tree's
  operations; mj_factorM); counts mjWARN_INERTIA where a pivot was clamped."""
  if not m.nv:
    return d
  qld, clamped = factor_sparse(ld_layout(m), d.M)
  return d.replace(qLD=qld, warning=_count_inertia(d.warning, clamped))


def solve_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
  """M^-1 x for x (nv,) or (nv, n), using the factor in qLD (mj_solveM)."""
  return solve_sparse(ld_layout(m), d.qLD, x)


def rne(m: Model, d: Data, flg_acc: bool = False) -> jax.Array:
  """M(qpos) qacc + C(qpos, qvel), or C alone without flg_acc (mj_rne); returns (nv,)."""
  if not m.nv:
    return jnp.zeros(0, dtype=d.qvel.dtype)
  dtype = d.cdof.dtype
  body_dof = jnp.asarray(m.tree_body_dof, dtype=dtype)
  acc = d.cdof_dot * d.qvel[:, None]
  if flg_acc:
    acc = acc + d.cdof * d.qacc[:, None]
  cacc = body_dof @ acc
  if not m.opt.disableflags & DisableBit.GRAVITY:
    cacc = cacc.at[:, 3:].add(-m.opt.gravity)
  cfrc = math.inert_mul(d.cinert, cacc)
  cfrc = cfrc + math.cross_force(d.cvel, math.inert_mul(d.cinert, d.cvel))
  cfrc = jnp.asarray(m.tree_subtree, dtype=dtype) @ cfrc
  return jnp.sum(d.cdof * cfrc[np.asarray(m.dof_bodyid)], axis=-1)


def bias(m: Model, d: Data) -> Data:
  """qfrc_bias: Coriolis, centrifugal and gravity forces (mj_rne without acceleration)."""
  return d.replace(qfrc_bias=rne(m, d))

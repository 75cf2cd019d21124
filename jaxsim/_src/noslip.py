"""The noslip post-processor: Gauss-Seidel sweeps over the friction rows (mj_solNoSlip).

After the main solver, MuJoCo re-solves the dry-friction and contact-friction forces block by
block on the dual problem without the regulariser R (A = J M^-1 J'), holding every normal force
fixed, so that soft contacts do not creep. Blocks are visited in row order: each friction-loss
row (clamped to its interval), each pair of opposing pyramid edges (their sum fixed), and the
tangent rows of each elliptic cone (a QCQP on the friction ellipsoid of the fixed normal force).
Mirrors engine_solver.c (solNoSlip, residual, extractBlock, costChange, solveQCQP, dualState)
and engine_util_solve.c (mju_QCQP2/3/N).

The sweep is a `lax.scan` over static block slots (inactive ones leave everything unchanged)
inside a scan over at most opt.noslip_iterations sweeps, so reverse-mode AD runs through it.
The residual of a block comes from the running qacc = qacc_smooth + M^-1 J' f, updated after
each block, so A is needed only block by block.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import dynamics, math
from jaxsim._src.enums import MINVAL, ConstraintState, ConstraintType

# mjtConstraint, mjtConstraintState
DRY, PYRAMID, ELLIPSE = 0, 1, 2
WIDTH = 5  # rows in the largest block: the tangents of a condim-6 elliptic contact


class Blocks(NamedTuple):
  """Static noslip blocks of a constraint layout, in MuJoCo's visiting order (NumPy).

  rows (nblk, 5): rows of each block, padded with nefc; kind (nblk,): DRY, PYRAMID or ELLIPSE;
  normal (nblk,): the normal row of an elliptic contact (nefc otherwise); slot (nblk,): contact
  slot (0 for dry friction).
  """

  rows: np.ndarray
  kind: np.ndarray
  normal: np.ndarray
  slot: np.ndarray


def blocks(layout: Any) -> Blocks:
  """The noslip blocks of a layout: friction-loss rows, pyramid edge pairs, elliptic tangents."""
  nefc, ne, nf = int(layout.nefc), int(layout.ne), int(layout.nf)
  typ = np.asarray(layout.type).reshape(nefc)
  rows, kind, normal, slot = [], [], [], []

  def add(r, k, n=nefc, s=0):
    rows.append(list(r) + [nefc] * (WIDTH - len(r)))
    kind.append(k)
    normal.append(n)
    slot.append(s)

  for i in range(ne, ne + nf):
    add([i], DRY)
  adr = np.asarray(layout.contact_efcadr).reshape(-1)
  dim = np.asarray(layout.contact_dim).reshape(-1)
  for c in np.argsort(adr, kind='stable'):
    i, n = int(adr[c]), int(dim[c])
    if i < 0 or i >= nefc or n < 2:
      continue
    if typ[i] == ConstraintType.CONTACT_PYRAMIDAL:
      for j in range(i, i + 2 * (n - 1), 2):
        add([j, j + 1], PYRAMID, s=int(c))
    elif typ[i] == ConstraintType.CONTACT_ELLIPTIC:
      add(range(i + 1, i + n), ELLIPSE, i, int(c))
  if not rows:
    z = np.zeros(0, np.int32)
    return Blocks(np.zeros((0, WIDTH), np.int32), z, z, z)
  out = Blocks(*(np.asarray(x, np.int32) for x in (rows, kind, normal, slot)))
  for a in out:
    a.setflags(write=False)
  return out


def _safe_div(a: jax.Array, b: jax.Array) -> jax.Array:
  ok = b != 0
  return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def _gauss_jordan(a: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Pivots and inverse of a small (k, k) matrix by Gauss-Jordan elimination without pivoting,
  unrolled over its k rows (k is WIDTH, not a model size); no LAPACK call (xla.REQUIRED_ENV).

  For a symmetric matrix the pivots are the D of its L D L' eliminated from the first row: their
  product is the determinant, and each is a Cholesky pivot squared. A zero pivot gives non-finite
  values from there on (the callers' tests are false for them).

  Arguments:
    a: (k, k) matrix.
  Returns:
    (pivots (k,), a^-1 (k, k)).
  """
  k = a.shape[0]
  aug = jnp.concatenate([a, jnp.eye(k, dtype=a.dtype)], axis=1)
  pivots = []
  for i in range(k):
    piv = aug[i, i]
    pivots.append(piv)
    row = aug[i] / piv
    aug = aug - aug[:, i][:, None] * row[None, :]
    aug = aug.at[i].set(row)
  return jnp.stack(pivots), aug[:, k:]


def qcqp(A: jax.Array, b: jax.Array, d: jax.Array, r: jax.Array, n: jax.Array):
  """min 0.5 x'Ax + x'b s.t. sum (x_i/d_i)^2 <= r^2 (mju_QCQP2, mju_QCQP3, mju_QCQP).

  A (5, 5), b (5,), d (5,) padded beyond the first n entries (any values there); returns
  (x (5,), whether the constraint is active). Newton on the multiplier, 20 iterations at most;
  a matrix that is not positive definite (det < 1e-10 for n <= 3, a Cholesky pivot < 1e-10
  otherwise) gives x = 0, unconstrained. The determinant, pivots and inverse by _gauss_jordan
  (MuJoCo: closed forms for n <= 3, its Cholesky above; the same values up to round-off).
  """
  real = jnp.arange(WIDTH) < n
  d = jnp.where(real, d, 1.0)
  b = jnp.where(real, b * d, 0.0)
  eye = jnp.eye(WIDTH, dtype=A.dtype)
  pair = real[:, None] & real[None, :]
  A = jnp.where(pair, A * d[:, None] * d[None, :], eye)

  def body(_, c):
    la, v, done, fail = c
    ala = A + la * jnp.diag(real.astype(A.dtype))
    piv = _gauss_jordan(jax.lax.stop_gradient(ala))[0]  # the definiteness test only branches
    spd = jnp.where(n <= 3, jnp.prod(piv) >= 1e-10, jnp.all(piv >= 1e-10))
    P = _gauss_jordan(jnp.where(spd, ala, eye))[1]
    vn = -P @ b
    val = vn @ vn - r * r
    deriv = -2.0 * vn @ P @ vn
    delta = _safe_div(-val, deriv)
    stop = (val < 1e-10) | (delta < 1e-10)
    live = ~done
    fail = fail | (live & ~spd)
    v = jnp.where(live, jnp.where(spd, vn, 0.0), v)
    la = jnp.where(live & spd & ~stop, la + delta, la)
    return la, v, done | ~spd | stop, fail

  zero = jnp.zeros((), A.dtype)
  la, v, _, fail = jax.lax.fori_loop(
    0, 20, body, (zero, jnp.zeros(WIDTH, A.dtype), jnp.array(False), jnp.array(False))
  )
  return jnp.where(real & ~fail, v * d, 0.0), (la != 0) & ~fail


def _cost_change(A, f, old, res):
  """(force, change): MuJoCo's costChange; a step that raises the cost is undone."""
  delta = f - old
  change = 0.5 * delta @ A @ delta + delta @ res
  up = change > 1e-10
  return jnp.where(up, old, f), jnp.where(up, 0.0, change)


def _block_update(kinds, k, A, res, old, floss0, fnormal, fric, n):
  """New forces (5,) and cost change (negative: a decrease) of one block.

  From the block's A (5, 5), residual and old forces; k is its kind, n its rows; kinds (static)
  the kinds the layout has: only their updates are computed (the elliptic QCQP, 20 Newton steps
  with a 5x5 inverse each, is most of a block's cost, and pyramidal models have none).
  """
  diag = jnp.diagonal(A)
  # dry friction: unconstrained minimum clamped to the friction-loss interval
  ainv = 1.0 / jnp.maximum(MINVAL, diag[0])
  f_dry = jnp.clip(old[0] - res[0] * ainv, -floss0, floss0)
  d0 = f_dry - old[0]
  dry = (jnp.zeros(WIDTH, A.dtype).at[0].set(f_dry), 0.5 * d0 * d0 / ainv + d0 * res[0])

  # blocks of several rows see A with its diagonal clamped (extractBlock with flg_subR)
  Ac = A - jnp.diag(diag) + jnp.diag(jnp.maximum(1e-10, diag))
  real = jnp.arange(WIDTH) < n
  Ac = jnp.where(real[:, None] & real[None, :], Ac, 0.0)
  bc = res - Ac @ old

  # pyramid: the pair's sum is fixed; minimise over their difference within the cone
  mid = 0.5 * (old[0] + old[1])
  k1 = Ac[0, 0] + Ac[1, 1] - Ac[0, 1] - Ac[1, 0]
  k0 = mid * (Ac[0, 0] - Ac[1, 1]) + bc[0] - bc[1]
  y = jnp.clip(_safe_div(-k0, k1), -mid, mid)
  y = jnp.where(k1 < MINVAL, 0.0, y)
  f_pyr = jnp.zeros(WIDTH, A.dtype).at[0].set(mid + y).at[1].set(mid - y)
  pyr = _cost_change(Ac, f_pyr, old, res)

  if ELLIPSE not in kinds:
    f = jnp.where(k == DRY, dry[0], pyr[0])
    return f, jnp.where(k == DRY, dry[1], pyr[1])

  # ellipse: tangent forces on the friction ellipsoid of the fixed normal force
  v, on = qcqp(Ac, bc, fric, fnormal, n)
  s = jnp.sum(jnp.where(real, v * v / jnp.where(real, fric * fric, 1.0), 0.0))
  ratio = fnormal * fnormal / jnp.maximum(MINVAL, s)
  scl = jnp.sqrt(jnp.where(ratio > 0, ratio, 1.0))  # NaN-free derivative at a zero normal force
  v = jnp.where(on, v * scl, v)
  v = jnp.where(fnormal < MINVAL, 0.0, v)
  ell = _cost_change(Ac, v, old, res)

  f = jnp.where(k == DRY, dry[0], jnp.where(k == PYRAMID, pyr[0], ell[0]))
  change = jnp.where(k == DRY, dry[1], jnp.where(k == PYRAMID, pyr[1], ell[1]))
  return f, change


def dual_state(force, ne, nf, floss, active, ell_rows, ell_mu, ell_fric, ell_one=None):
  """efc_state of forces as the dual solvers classify them (dualState), (nefc,) int32.

  ell_rows (nell, 6) rows of the elliptic contacts padded with nefc, ell_mu (nell,),
  ell_fric (nell, 5) zero beyond condim - 1; ell_one (nell,) bool: slots that hold one
  frictionless row (adhesive contacts in their gap band), classified as non-negative rows.
  """
  nefc = force.shape[0]
  idx = np.arange(nefc)
  fri = (idx >= ne) & (idx < ne + nf)
  st_fri = jnp.where(
    force <= -floss,
    ConstraintState.LINEARPOS,
    jnp.where(force >= floss, ConstraintState.LINEARNEG, ConstraintState.QUADRATIC),
  )
  st_one = jnp.where(force <= 0, ConstraintState.SATISFIED, ConstraintState.QUADRATIC)
  state = jnp.where(idx < ne, ConstraintState.QUADRATIC, jnp.where(fri, st_fri, st_one))
  if len(ell_rows):
    fpad = jnp.concatenate([force, jnp.zeros(1, force.dtype)])
    fc = fpad[ell_rows]  # (nell, 6)
    n = _safe_div(fc[:, 0], ell_mu)
    t = _safe_div(fc[:, 1:], ell_fric)
    tn = jnp.sqrt(jnp.sum(t * t, axis=1))
    zone = jnp.where(
      ell_mu * n >= tn,
      ConstraintState.SATISFIED,
      jnp.where(n + ell_mu * tn <= 0, ConstraintState.QUADRATIC, ConstraintState.CONE),
    )
    if ell_one is not None:
      zone = jnp.where(
        ell_one,
        jnp.where(fc[:, 0] <= 0, ConstraintState.SATISFIED, ConstraintState.QUADRATIC),
        zone,
      )
    zone = jnp.broadcast_to(zone[:, None], ell_rows.shape)
    state = state.at[ell_rows.reshape(-1)].set(zone.reshape(-1), mode='drop')
  return jnp.where(active, state, ConstraintState.SATISFIED).astype(jnp.int32)


def solve(
  blk: Blocks,
  J: jax.Array,
  ld: dynamics.LDLayout,
  qLD: jax.Array,
  qacc_smooth: jax.Array,
  force: jax.Array,
  R: jax.Array,
  aref: jax.Array,
  floss: jax.Array,
  active: jax.Array,
  slot_friction: jax.Array,
  iterations: int,
  tolerance: jax.Array,
  scale: jax.Array,
  label: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array]:
  """efc_force (nefc,) after at most `iterations` noslip sweeps, and the most sweeps of an island.

  J (nefc, nv), qLD M's L'DL factor (nv, nld: factor_tree, layout ld), force the main
  solver's efc_force, slot_friction (ncon, 5) contact friction per slot. With `label` (nefc,),
  the island of each row, each island stops on its own (mj_solNoSlip_island) when its
  improvement, scaled by its entry of `scale` (nisland,), is below `tolerance`
  (opt.noslip_tolerance); without, one island.
  """
  nefc, dtype = J.shape[0], J.dtype
  nblk = blk.rows.shape[0]
  if nblk == 0 or iterations <= 0:
    return force, jnp.zeros((), jnp.int32)
  W = _rows_minv(ld, qLD, J, active)  # rows of J M^-1, (nefc, nv); zero on inactive rows
  if slot_friction.shape[0]:
    fric_b = slot_friction[blk.slot]  # (nblk, 5)
  else:
    fric_b = jnp.ones((nblk, WIDTH), dtype)
  nrow = jnp.asarray((blk.rows < nefc).sum(axis=1), jnp.int32)
  xs = (jnp.asarray(blk.rows), jnp.asarray(blk.kind), jnp.asarray(blk.normal), fric_b, nrow)
  tolerance, scale = jnp.asarray(tolerance, dtype), jnp.atleast_1d(jnp.asarray(scale, dtype))
  if label is None:
    label = jnp.zeros(nefc, jnp.int32)
  blabel = jnp.concatenate([label, jnp.zeros(1, jnp.int32)])[xs[0][:, 0]]
  xs = xs + (blabel,)
  args = (W, J, qacc_smooth, force, R, aref, floss, active, xs, tolerance, scale, label)
  # the sweeps visit only the blocks of active rows, in a while_loop: on a model with many contact
  # slots (dog: 2400 blocks) and few contacts, a scan over every slot is mostly sequential no-ops.
  # A while_loop has no reverse mode, so derivatives come from the scan over every block, which
  # computes the same forces (an inactive block changes nothing).
  kinds = tuple(int(k) for k in np.unique(blk.kind))
  run = jax.custom_jvp(functools.partial(_sweeps, True, iterations, kinds))
  run.defjvp(lambda p, t: jax.jvp(functools.partial(_sweeps, False, iterations, kinds), p, t))
  return run(*args)


CHUNK = 32  # rows of J M^-1 per solve in _rows_minv


def _rows_minv(ld: dynamics.LDLayout, qLD: jax.Array, J: jax.Array, active: jax.Array):
  """J M^-1 (nefc, nv) on the active rows, zero on the others (_rows_minv_active), with the
  derivatives of every row's solve."""
  run = jax.custom_jvp(functools.partial(_rows_minv_active, ld))
  run.defjvp(lambda p, t: jax.jvp(functools.partial(_rows_minv_every, ld), p, t))
  return run(qLD, J, active)


def _rows_minv_every(ld, qLD: jax.Array, J: jax.Array, active: jax.Array) -> jax.Array:
  return jnp.where(active[:, None], dynamics.solve_sparse(ld, qLD, J.T).T, 0.0)


def _rows_minv_active(ld, qLD: jax.Array, J: jax.Array, active: jax.Array) -> jax.Array:
  """J M^-1 (nefc, nv) on the active rows, zero on the others.

  The sweeps read W only through active rows and their forces (an inactive row's force is zero),
  so the rest need not be solved for: the active rows are solved CHUNK at a time in a while_loop
  that stops after the last (dog: 13 of 890 rows in contact, and solve_sparse's passes cost in
  proportion to the columns). Derivatives are those of every row's solve, masked the same way
  (a while_loop has no reverse mode).
  """
  nefc, nv = J.shape
  if not nefc or not nv:
    return jnp.zeros_like(J)
  chunk = min(CHUNK, nefc)
  count = jnp.cumsum(active.astype(jnp.int32))
  Jp = jnp.concatenate([J, jnp.zeros((1, nv), J.dtype)])

  def body(c):
    i, W = c
    idx = math.ranked(count, i * chunk, chunk)  # nefc past the last active row
    W = W.at[idx].set(dynamics.solve_sparse(ld, qLD, Jp[idx].T).T, mode='drop')
    return i + 1, W

  init = (jnp.zeros((), jnp.int32), jnp.zeros_like(J))
  return jax.lax.while_loop(lambda c: c[0] * chunk < count[-1], body, init)[1]


def _sweeps(
  fast: bool,
  iterations: int,
  kinds: tuple[int, ...],
  W: jax.Array,
  J: jax.Array,
  qacc_smooth: jax.Array,
  force: jax.Array,
  R: jax.Array,
  aref: jax.Array,
  floss: jax.Array,
  active: jax.Array,
  xs: tuple[jax.Array, ...],
  tolerance: jax.Array,
  scale: jax.Array,
  label: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """The noslip sweeps of `solve`: while_loops over the active blocks (fast) or scans over all."""
  nefc, nv = J.shape
  nisl = scale.shape[0]
  dtype = J.dtype
  pad = jnp.zeros((1, nv), dtype)
  Jp, Wp = jnp.concatenate([J, pad]), jnp.concatenate([W, pad])
  zero = jnp.zeros(1, dtype)
  arefp, flossp = jnp.concatenate([aref, zero]), jnp.concatenate([floss, zero])
  activep = jnp.concatenate([active, jnp.zeros(1, bool)])
  # a pyramid pair needs both its rows (an adhesive tether keeps only its first, frictionless)
  both = jnp.where(xs[1] == PYRAMID, activep[xs[0][:, 1]], True)
  xs = xs + (both,)
  if fast:
    # the blocks of active rows, in visiting order
    live_blk = activep[xs[0][:, 0]] & both
    order, nlive = jnp.argsort(~live_blk, stable=True), jnp.sum(live_blk)

  def block(carry, x):
    f, qacc, imp, running = carry
    rows, k, nrm, fric, n, isl, pair_on = x
    fp = jnp.concatenate([f, zero])
    Jb, Wb = Jp[rows], Wp[rows]  # (5, nv)
    A = Jb @ Wb.T
    res = Jb @ qacc - arefp[rows]
    old = fp[rows]
    new, change = _block_update(kinds, k, A, res, old, flossp[rows[0]], fp[nrm], fric, n)
    live = activep[rows[0]] & pair_on & running[isl]
    new = jnp.where(live, new, old)
    delta = jnp.where(rows < nefc, new - old, 0.0)
    f = f.at[rows].set(new, mode='drop')  # set, not add: forces on a bound stay exactly on it
    imp = imp.at[isl].add(-jnp.where(live, change, 0.0))
    return (f, qacc + Wb.T @ delta, imp, running), None

  def sweep(c):
    f, niter, running = c
    # the first sweep's improvement also counts the regulariser's cost being dropped
    reg = jax.ops.segment_sum(jnp.where(active, f * f * R, 0.0), label, nisl)
    imp0 = jnp.where(niter == 0, 0.5 * reg, 0.0)
    qacc = qacc_smooth + W.T @ f
    if fast:

      def visit(b):
        i, carry = b
        x = jax.tree_util.tree_map(lambda a: a[order[i]], xs)
        return i + 1, block(carry, x)[0]

      init = (0, (f, qacc, imp0, running))
      _, (f, _, imp, _) = jax.lax.while_loop(lambda b: b[0] < nlive, visit, init)
    else:
      (f, _, imp, _), _ = jax.lax.scan(block, (f, qacc, imp0, running), xs)
    niter = niter + running.astype(jnp.int32)
    return f, niter, running & ~(imp * scale < tolerance) & (niter < iterations)

  # islands without active rows do not run
  has_rows = jax.ops.segment_sum(active.astype(jnp.int32), label, nisl) > 0
  init = (force, jnp.zeros(nisl, jnp.int32), has_rows)
  if fast:
    force, niter, _ = jax.lax.while_loop(lambda c: jnp.any(c[2]), sweep, init)
    return force, jnp.max(niter)

  def step(c, _):
    return jax.lax.cond(jnp.any(c[2]), sweep, lambda c: c, c), None

  (force, niter, _), _ = jax.lax.scan(step, init, None, length=iterations)
  return force, jnp.max(niter)

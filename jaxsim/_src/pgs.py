"""The PGS solver: projected Gauss-Seidel on the dual problem, per constraint island (solPGS).

MuJoCo's dual solver minimises 0.5 f'AR f + f'b over the constraint forces f (AR = J M^-1 J' + R,
b = J qacc_smooth - aref) block by block: a scalar row (equality, friction loss clamped to its
interval, limits and pyramidal or frictionless contacts clamped at zero), or all rows of an
elliptic contact (a ray update of the whole force, then a QCQP for the friction forces on the
ellipsoid of the new normal force). As mujoco does since its Nesterov PGS, every sweep
  - starts from a momentum extrapolation f + beta (f - f_prev), beta = (k - 1) / (k + 2), projected
    onto the constraint set, with O'Donoghue-Candes restarts (k = 0) when a sweep's correction
    opposes the extrapolation;
  - visits the blocks in an order shuffled (Fisher-Yates) by a PCG32 generator with a fixed seed,
    restarted for every solve;
  - keeps a block's old force when the new one raises the cost (costChange), and sums the cost
    decrease; the island stops when the decrease, scaled by 1 / its inertia, is below
    opt.tolerance, or after opt.iterations sweeps.
Mirrors engine_solver.c (solPGS, residual, costChange, projectCone, solveQCQP) and the island
split of engine_island.c: the kinematic trees coupled by active constraints form islands, each
solved on its own (its own shuffle sequence, momentum and stopping test). Islands do not
interact (AR is zero between them), so one sequential sweep through all islands' blocks, each
island's in its own order, gives each island's result.

The sweeps are `lax.while_loop`s over the active blocks; `jaxsim.solver` gives the solution its
derivatives (implicit, as for Newton and CG), as the loops have no reverse mode.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import dynamics, noslip, sparse
from jaxsim._src.enums import MINVAL, ConstraintType, EqType, ObjType
from jaxsim._src.types import Model

# block kinds
EQ, FRIC, ONE, ELL = 0, 1, 2, 3
WIDTH = 6  # rows of the largest block: a condim-6 elliptic contact


class Blocks(NamedTuple):
  """Static PGS blocks of a constraint layout, in row order (NumPy).

  rows (nblk, 6): rows of each block padded with nefc; kind (nblk,): EQ, FRIC, ONE or ELL;
  dim (nblk,): rows in the block; ell (nblk,): index of an elliptic block among the elliptic
  contact slots (0 otherwise); row_block (nefc,): the block of each row; ntree: kinematic trees;
  row_tree (nefc, 2): trees of rows whose trees are known statically (-1: none, -2: from the
  contact slot's geoms, -3: from the Jacobian's nonzeros); slot (nefc,): contact slot of a row.
  """

  rows: np.ndarray
  kind: np.ndarray
  dim: np.ndarray
  ell: np.ndarray
  row_block: np.ndarray
  ntree: int
  body_treeid: np.ndarray
  dof_treeid: np.ndarray
  row_tree: np.ndarray
  slot: np.ndarray


def body_treeid(m: Model) -> np.ndarray:
  """Kinematic tree of each body, -1 for static bodies (mjModel.body_treeid), (nbody,)."""
  parent = np.asarray(m.body_parentid)
  has_dof = np.zeros(m.nbody, bool)
  has_dof[np.asarray(m.dof_bodyid, dtype=np.int64)] = True
  tree = np.full(m.nbody, -1, np.int32)
  ntree = 0
  for b in range(1, m.nbody):  # parents come first
    if tree[parent[b]] >= 0:
      tree[b] = tree[parent[b]]
    elif has_dof[b]:
      tree[b] = ntree
      ntree += 1
  return tree


def blocks(m: Model, layout: Any, trees: bool = True) -> Blocks:
  """The PGS blocks of a layout and the static part of each row's tree incidence.

  Without `trees` (islands disabled), or with one kinematic tree, the blocks have no trees: one
  island.
  """
  nefc, ne, nf = int(layout.nefc), int(layout.ne), int(layout.nf)
  typ = np.asarray(layout.type).reshape(nefc)
  ids = np.asarray(layout.id).reshape(nefc)
  adr = np.asarray(layout.contact_efcadr).reshape(-1)
  cdim = np.asarray(layout.contact_dim).reshape(-1)
  slot = np.where(typ >= ConstraintType.CONTACT_FRICTIONLESS, ids, 0).astype(np.int32)
  rows, kind, dim, ell, row_block = [], [], [], [], np.zeros(nefc, np.int32)
  ell_slots = {}
  for c in range(len(adr)):
    if cdim[c] > 1 and 0 <= adr[c] < nefc and typ[adr[c]] == ConstraintType.CONTACT_ELLIPTIC:
      ell_slots[int(adr[c])] = (len(ell_slots), int(cdim[c]))
  i = 0
  while i < nefc:
    if i in ell_slots:
      e, n = ell_slots[i]
      k = ELL
    else:
      e, n = 0, 1
      k = EQ if i < ne else FRIC if i < ne + nf else ONE
    row_block[i : i + n] = len(rows)
    rows.append(list(range(i, i + n)) + [nefc] * (WIDTH - n))
    kind.append(k)
    dim.append(n)
    ell.append(e)
    i += n

  z = np.zeros(0, np.int32)
  row_tree = np.full((nefc, 2), -3, np.int32)
  if trees:
    btree = body_treeid(m)
    ntree = int(btree.max()) + 1 if m.nbody > 1 else 0
  if not trees or ntree <= 1:
    # one island at most: every constrained dof is in it, as in the monolithic solve
    common = (np.asarray(rows, np.int32).reshape(-1, WIDTH), np.asarray(kind, np.int32))
    common += (np.asarray(dim, np.int32), np.asarray(ell, np.int32), row_block)
    return Blocks(*common, 0, z, z, np.full((nefc, 2), -1, np.int32), slot)
  dtree = btree[np.asarray(m.dof_bodyid, dtype=np.int64)] if m.nv else np.zeros(0, np.int32)
  eq_type = np.asarray(m.eq_type) if m.neq else np.zeros(0, np.int32)
  for i in range(nefc):
    t, j = typ[i], ids[i]
    if t == ConstraintType.FRICTION_DOF:
      row_tree[i] = dtree[j], -1
    elif t == ConstraintType.LIMIT_JOINT:
      row_tree[i] = dtree[np.asarray(m.jnt_dofadr)[j]], -1
    elif t >= ConstraintType.CONTACT_FRICTIONLESS:
      row_tree[i] = -2
    elif t == ConstraintType.EQUALITY and eq_type[j] in (EqType.CONNECT, EqType.WELD):
      b1, b2 = int(np.asarray(m.eq_obj1id)[j]), int(np.asarray(m.eq_obj2id)[j])
      if int(np.asarray(m.eq_objtype)[j]) == ObjType.SITE:
        b1, b2 = int(np.asarray(m.site_bodyid)[b1]), int(np.asarray(m.site_bodyid)[b2])
      row_tree[i] = btree[b1], btree[b2]
  out = Blocks(
    np.asarray(rows, np.int32).reshape(-1, WIDTH),
    np.asarray(kind, np.int32),
    np.asarray(dim, np.int32),
    np.asarray(ell, np.int32),
    row_block,
    ntree,
    btree,
    dtree if len(dtree) else z,
    row_tree,
    slot,
  )
  return out


@functools.lru_cache(maxsize=8)
def pcg32_draws(n: int) -> np.ndarray:
  """The first n outputs of PCG32 after mujoco's seeding (state 0, inc 1, one draw discarded)."""
  out = np.zeros(n, np.uint32)
  mask = (1 << 64) - 1
  state = 0
  mult = 6364136223846793005

  def step(state):
    old = state
    state = (old * mult + 1) & mask
    xorshifted = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
    rot = old >> 59
    return state, ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & 0xFFFFFFFF

  state, _ = step(state)
  for i in range(n):
    state, out[i] = step(state)
  out.setflags(write=False)
  return out


def row_trees(blk: Blocks, J: sparse.Jacobian, geom_tree1: jax.Array, geom_tree2: jax.Array):
  """Incidence of rows and trees, (nefc, ntree) bool, as mj_island's tree iterator finds it.

  J: the constraint Jacobian (nefc, nv), dense or compact; geom_tree1/2 (ncon,): trees of each
  contact slot's bodies (-1: static).
  """
  nefc = J.shape[0]
  ntree = blk.ntree
  t = np.arange(ntree)
  static = jnp.asarray((blk.row_tree[:, :1] == t) | (blk.row_tree[:, 1:] == t))
  if geom_tree1.shape[0]:
    slot = blk.slot
    c1, c2 = geom_tree1[slot][:, None], geom_tree2[slot][:, None]
    contact = (c1 == t) | (c2 == t)
  else:
    contact = jnp.zeros((nefc, ntree), bool)
  if not J.compact:
    onehot = (blk.dof_treeid[:, None] == t).astype(J.dtype)  # (nv, ntree)
    generic = (jnp.abs(J.val) > 0).astype(J.dtype) @ onehot > 0
  else:
    cols = J.cols()  # (nefc, 2C)
    tree = jnp.where(cols >= 0, jnp.asarray(blk.dof_treeid)[jnp.maximum(cols, 0)], -1)
    generic = jnp.any((J.val != 0)[:, :, None] & (tree[:, :, None] == t), axis=1)
  kind = blk.row_tree[:, :1]
  return jnp.where(kind == -2, contact, jnp.where(kind == -3, generic, static))


def islands(inc: jax.Array, active: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Island labels of rows (nefc,) and trees (ntree,): the smallest tree of a component.

  inc (nefc, ntree) bool row-tree incidence; active (nefc,) rows. Trees in no island get ntree.
  Without trees: one island, 0, of every row.
  """
  nefc, ntree = inc.shape
  if ntree == 0:
    return jnp.zeros(nefc, jnp.int32), jnp.zeros(ntree, jnp.int32)
  a = (inc & active[:, None]).astype(jnp.float32)
  adj = (a.T @ a) > 0  # trees sharing an active row
  big = jnp.int32(ntree)
  label0 = jnp.arange(ntree, dtype=jnp.int32)

  def spread(c):
    label, _ = c
    new = jnp.min(jnp.where(adj, label[None, :], big), axis=1)
    new = jnp.minimum(label, new)
    return new, jnp.any(new != label)

  label, _ = jax.lax.while_loop(lambda c: c[1], spread, (label0, jnp.array(True)))
  row = jnp.min(jnp.where(inc, label[None, :], big), axis=1)
  # trees without active rows belong to no island
  label = jnp.where(jnp.any(adj, axis=1), label, big)
  return jnp.where(row < big, row, 0).astype(jnp.int32), label


class _It(NamedTuple):
  f: jax.Array  # (nefc,)
  fprev: jax.Array  # (nefc,)
  k: jax.Array  # (nisl,) Nesterov counters
  running: jax.Array  # (nisl,) bool
  niter: jax.Array  # (nisl,) int32
  perm: jax.Array  # (nblk,) block at each position
  it: jax.Array  # global iteration


def _project(f, kind_row, floss, ell_rows, fric):
  """Projection of an extrapolated force onto the constraint set (projectCone, bounds)."""
  f = jnp.where(kind_row == FRIC, jnp.clip(f, -floss, floss), f)
  f = jnp.where(kind_row == ONE, jnp.maximum(f, 0.0), f)
  if len(ell_rows):
    fp = jnp.concatenate([f, jnp.zeros(1, f.dtype)])
    fc = fp[ell_rows]  # (nell, 6)
    n, t = fc[:, 0], fc[:, 1:]
    real = fric > 0
    s = jnp.sum(jnp.where(real, t * t / jnp.where(real, fric * fric, 1.0), 0.0), axis=1)
    n2 = n * n
    scl = jnp.sqrt(n2 / jnp.maximum(MINVAL, s))
    t = jnp.where((s > n2)[:, None], t * scl[:, None], t)
    fc = jnp.where((n < 0)[:, None], 0.0, jnp.concatenate([n[:, None], t], axis=1))
    f = f.at[ell_rows.reshape(-1)].set(fc.reshape(-1), mode='drop')
  return f


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
  ell_fric: jax.Array,
  label: jax.Array,
  inertia: jax.Array,
  iterations: int,
  tolerance: jax.Array,
) -> tuple[jax.Array, jax.Array]:
  """efc_force (nefc,) after PGS from `force` (the warm start), and the most sweeps of an island.

  J (nefc, nv), qLD the L'DL factor of M (nv, nld: dynamics.factor_tree, layout ld); ell_fric
  (nell, 5) the elliptic contacts' cone (zero beyond condim - 1); label (nefc,) island of each
  row (< ntree or 0); inertia (nisl,) the improvement scale's inertia of each island.
  """
  nefc, nv = J.shape
  dtype = J.dtype
  nblk = blk.rows.shape[0]
  nisl = max(blk.ntree, 1)
  if nblk == 0 or iterations <= 0:
    return force, jnp.zeros((), jnp.int32)
  W = dynamics.solve_sparse(ld, qLD, J.T).T  # rows of J M^-1, (nefc, nv)
  ardiag = jnp.sum(J * W, axis=1) + R
  arinv = 1.0 / jnp.where(active, ardiag, 1.0)
  pad_r = jnp.zeros((1, nv), dtype)
  Jp, Wp = jnp.concatenate([J, pad_r]), jnp.concatenate([W, pad_r])
  zero = jnp.zeros(1, dtype)
  arefp, Rp = jnp.concatenate([aref, zero]), jnp.concatenate([R, zero])
  flossp, arinvp = jnp.concatenate([floss, zero]), jnp.concatenate([arinv, zero])
  rows = jnp.asarray(blk.rows)
  kind, dim = jnp.asarray(blk.kind), jnp.asarray(blk.dim)
  has_ell = bool(np.any(blk.kind == ELL))
  ell_rows = blk.rows[blk.kind == ELL]
  if has_ell:
    blk_fric = ell_fric[blk.ell]  # (nblk, 5)
  kind_row = jnp.asarray(blk.kind[blk.row_block])

  # the active blocks, grouped by island in row order: island i holds positions off[i]..+n[i]
  blk_active = active[blk.rows[:, 0]]
  blk_label = label[blk.rows[:, 0]]
  nb = jax.ops.segment_sum(blk_active.astype(jnp.int32), blk_label, nisl)
  off = jnp.cumsum(nb) - nb
  key = jnp.where(blk_active, blk_label, nisl) * nblk + jnp.arange(nblk)
  perm0 = jnp.argsort(key).astype(jnp.int32)
  ntotal = jnp.sum(nb)
  row_label = label
  draws = jnp.asarray(pcg32_draws(iterations * max(nblk - 1, 1)))
  scale = 1.0 / inertia

  def shuffle(perm, it, running):
    """One Fisher-Yates pass per running island (shuffle_int), draws it*(n-1) on."""
    base = it * jnp.maximum(nb - 1, 0)

    def swap(c):
      s, perm = c
      i = nb - 1 - s
      ok = running & (i >= 1)
      r = draws[jnp.where(ok, base + s, 0)]
      j = jnp.where(ok, (r % (jnp.maximum(i, 0) + 1).astype(jnp.uint32)).astype(jnp.int32), 0)
      pi, pj = off + i, off + j
      a, b = perm[jnp.where(ok, pi, 0)], perm[jnp.where(ok, pj, 0)]
      perm = perm.at[jnp.where(ok, pi, nblk)].set(b, mode='drop')
      perm = perm.at[jnp.where(ok, pj, nblk)].set(a, mode='drop')
      return s + 1, perm

    smax = jnp.max(jnp.where(running, nb, 0)) - 1
    _, perm = jax.lax.while_loop(lambda c: c[0] < smax, swap, (jnp.zeros((), jnp.int32), perm))
    return perm

  def update(b, f, qacc):
    """New forces (6,) of block b and its cost change (costChange)."""
    rb = rows[b]
    Jb, Wb = Jp[rb], Wp[rb]  # (6, nv)
    fp = jnp.concatenate([f, zero])
    old = fp[rb]
    res = Jb @ qacc - arefp[rb] + Rp[rb] * old  # residual with AR = J M^-1 J' + R
    r0 = rb[0]
    # scalar rows: unconstrained minimum, then the row's bounds
    f0 = old[0] - res[0] * arinvp[r0]
    f0 = jnp.where(kind[b] == FRIC, jnp.clip(f0, -flossp[r0], flossp[r0]), f0)
    f0 = jnp.where(kind[b] == ONE, jnp.maximum(f0, 0.0), f0)
    new = jnp.zeros(WIDTH, dtype).at[0].set(f0)
    a0 = 1.0 / arinvp[r0]
    A = jnp.zeros((WIDTH, WIDTH), dtype).at[0, 0].set(a0)
    if has_ell:
      real = jnp.arange(WIDTH) < dim[b]
      Ae = Jb @ Wb.T + jnp.diag(Rp[rb])
      Ae = jnp.where(real[:, None] & real[None, :], Ae, 0.0)
      # normal too small: normal update; else ray update along the current force
      fn = jnp.maximum(old[0] - res[0] * arinvp[r0], 0.0)
      small = old[0] < MINVAL
      v = old
      denom = v @ Ae @ v
      x = -(v @ res) / jnp.where(denom >= MINVAL, denom, 1.0)
      x = jnp.where(old[0] + x * v[0] < 0, -v[0] / jnp.where(small, 1.0, old[0]), x)
      ray = jnp.where(denom >= MINVAL, old + x * v, old)
      fe = jnp.where(small, jnp.zeros(WIDTH, dtype).at[0].set(fn), ray)
      # friction with the normal fixed: QCQP on the ellipsoid of the new normal force
      Ac = Ae[1:, 1:]
      bc = res[1:] - Ac @ old[1:] + Ae[1:, 0] * (fe[0] - old[0])
      mu = blk_fric[b]
      t, on = noslip.qcqp(Ac, bc, mu, fe[0], dim[b] - 1)
      tr = jnp.arange(WIDTH - 1) < dim[b] - 1
      s = jnp.sum(jnp.where(tr, t * t / jnp.where(tr, mu * mu, 1.0), 0.0))
      t = jnp.where(on, t * jnp.sqrt(fe[0] * fe[0] / jnp.maximum(MINVAL, s)), t)
      t = jnp.where(fe[0] < MINVAL, 0.0, t)
      fe = jnp.concatenate([fe[:1], jnp.where(tr, t, 0.0)])
      ell = kind[b] == ELL
      new = jnp.where(ell, fe, new)
      A = jnp.where(ell, Ae, A)
    delta = new - old
    change = 0.5 * delta @ A @ delta + delta @ res
    up = change > 1e-10
    new = jnp.where(up, old, new)
    change = jnp.where(up, 0.0, change)
    delta = jnp.where(rb < nefc, new - old, 0.0)
    f = f.at[rb].set(new, mode='drop')  # set: forces on a bound stay exactly on it
    return f, qacc + Wb.T @ delta, change

  def iteration(c: _It) -> _It:
    run_row = c.running[row_label] & active
    beta = jnp.where(c.it > 0, (c.k - 1) / (c.k + 2.0), 0.0).astype(dtype)
    beta_row = beta[row_label]
    fx = c.f + beta_row * (c.f - c.fprev)
    fx = _project(fx, kind_row, floss, ell_rows, ell_fric)
    fprev = jnp.where(run_row, c.f, c.fprev)
    f = jnp.where(run_row & (beta_row > 0), fx, c.f)
    fmom = f
    perm = shuffle(c.perm, c.it, c.running)
    qacc = qacc_smooth + W.T @ f

    def visit(v):
      q, f, qacc, imp = v
      b = perm[q]
      isl = blk_label[b]
      f2, qacc2, change = update(b, f, qacc)
      live = c.running[isl]
      f = jnp.where(live, f2, f)
      qacc = jnp.where(live, qacc2, qacc)
      imp = imp.at[isl].add(jnp.where(live, -change, 0.0))
      return q + 1, f, qacc, imp

    imp0 = jnp.zeros(nisl, dtype)
    _, f, _, imp = jax.lax.while_loop(
      lambda v: v[0] < ntotal, visit, (jnp.zeros((), jnp.int32), f, qacc, imp0)
    )
    dot = jax.ops.segment_sum(jnp.where(run_row, (f - fmom) * (fmom - fprev), 0.0), row_label, nisl)
    restart = (c.it > 0) & (dot < 0)
    k = jnp.where(c.running, jnp.where(restart, 0, c.k + 1), c.k)
    niter = c.niter + c.running.astype(jnp.int32)
    running = c.running & ~(imp * scale < tolerance) & (niter < iterations)
    return _It(f, fprev, k, running, niter, perm, c.it + 1)

  running0 = nb > 0
  i0 = jnp.zeros(nisl, jnp.int32)
  c = _It(force, force, i0, running0, i0, perm0, jnp.zeros((), jnp.int32))
  c = jax.lax.while_loop(lambda c: jnp.any(c.running), iteration, c)
  return c.f, jnp.max(c.niter)

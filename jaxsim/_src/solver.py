"""Constraint solver: Newton and CG on MuJoCo's reduced primal problem (engine_solver.c).

The unknown is qacc (nv,); the cost is Gauss 0.5*(qacc - qacc_smooth)' M (qacc - qacc_smooth) plus
the convex constraint costs of jar = J qacc - aref row by row (equality: quadratic; friction loss:
Huber; limits, frictionless and pyramidal contacts: one-sided quadratic; elliptic contacts: the
three-zone cone cost). Both solvers take MuJoCo's steps: preconditioned search direction, exact
line search on the piecewise-quadratic cost along it, MuJoCo's stopping tests. Both loops are
`lax.while_loop`s that stop where MuJoCo stops (at most opt.iterations and opt.ls_iterations);
under vmap they run until every world has stopped.

Derivatives are not taken through the iterations: a `custom_jvp` differentiates the solution
implicitly through MuJoCo's optimality condition (cost gradient zero), with the generalised
Hessian at the solution. Its tangent rule is linear, so JAX transposes it for reverse mode:
jax.jvp, jax.jacfwd, jax.grad and jax.vjp all work, under jit and vmap.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import dynamics, noslip, pgs, sparse
from jaxsim._src.enums import (
  MINVAL,
  ConeType,
  ConstraintState,
  DisableBit,
  SolverType,
)
from jaxsim._src.layout import RowClasses, hessian_rows, hessian_sparsity, layout_of, row_classes
from jaxsim._src.math import ranked, safe_norm
from jaxsim._src.types import Data, Model


class _Problem(NamedTuple):
  """The dynamic inputs, fixed during a solve."""

  J: sparse.Jacobian  # (nefc, nv), dense or compact rows
  D: jax.Array  # (nefc,)
  R: jax.Array  # (nefc,)
  floss: jax.Array  # (nefc,)
  aref: jax.Array  # (nefc,)
  active: jax.Array  # (nefc,) bool
  mu: jax.Array  # (nell,)
  fric: jax.Array  # (nell, 5), zero beyond condim - 1
  one: jax.Array  # (nell,) bool: the slot holds one frictionless row now (an adhesive tether)
  M: jax.Array  # (nv, nld) qM's lower triangle in qLD's compact rows (Data.M; _Config.ld)
  qfrc_smooth: jax.Array  # (nv,)
  qacc_smooth: jax.Array  # (nv,)


def _gather(x: jax.Array, r: RowClasses) -> jax.Array:
  """Rows of the elliptic contacts, (nell, 6, ...) with zeros in padded slots."""
  pad = jnp.zeros((1,) + x.shape[1:], dtype=x.dtype)
  return jnp.concatenate([x, pad])[r.rows] * r.rmask.reshape(r.rmask.shape + (1,) * (x.ndim - 1))


def _scatter(xc: jax.Array, r: RowClasses, fill: jax.Array) -> jax.Array:
  """Writes per-contact rows (nell, 6) back into a row vector (nefc,)."""
  return fill.at[r.rows.reshape(-1)].set(xc.reshape(-1), mode='drop')


def _safe_sqrt(x: jax.Array) -> jax.Array:
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _safe_div(a: jax.Array, b: jax.Array) -> jax.Array:
  ok = b != 0
  return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def _cone_dm(p: _Problem, dc0: jax.Array) -> jax.Array:
  """D0 / (mu^2 (1 + mu^2)): the middle-zone stiffness of an elliptic cone (nell,)."""
  mu2 = p.mu * p.mu
  return _safe_div(dc0, mu2 * (1 + mu2))


class _Update(NamedTuple):
  force: jax.Array  # (nefc,)
  state: jax.Array  # (nefc,) int32
  cost: jax.Array  # constraint cost, without Gauss
  hc: jax.Array  # (nell, 6, 6) cone Hessians of contacts in the middle zone


def update_constraint(p: _Problem, r: RowClasses, jar: jax.Array, cone_hessian: bool) -> _Update:
  """efc_force, efc_state, constraint cost and cone Hessians at jar (mj_constraintUpdate_impl)."""
  D, floss, act = p.D, p.floss, p.active
  # friction loss: Huber in jar with bound R*floss
  rf = p.R * floss
  neg = jar <= -rf
  pos = ~neg & (jar >= rf)
  quad = 0.5 * D * jar * jar
  f_fri = jnp.where(neg, floss, jnp.where(pos, -floss, -D * jar))
  s_fri = jnp.where(
    neg,
    ConstraintState.LINEARNEG,
    jnp.where(pos, ConstraintState.LINEARPOS, ConstraintState.QUADRATIC),
  )
  c_fri = jnp.where(
    neg, -0.5 * rf * floss - floss * jar, jnp.where(pos, -0.5 * rf * floss + floss * jar, quad)
  )
  # one-sided rows
  sat = jar >= 0
  f_one = jnp.where(sat, 0.0, -D * jar)
  s_one = jnp.where(sat, ConstraintState.SATISFIED, ConstraintState.QUADRATIC)
  c_one = jnp.where(sat, 0.0, quad)

  force = jnp.where(r.eq, -D * jar, jnp.where(r.fri, f_fri, jnp.where(r.one, f_one, 0.0)))
  state = jnp.where(
    r.eq,
    ConstraintState.QUADRATIC,
    jnp.where(r.fri, s_fri, jnp.where(r.one, s_one, ConstraintState.SATISFIED)),
  )
  rowcost = jnp.where(r.eq, quad, jnp.where(r.fri, c_fri, jnp.where(r.one, c_one, 0.0)))
  cost = jnp.sum(jnp.where(act, rowcost, 0.0))
  nell = len(r.con)
  hc = jnp.zeros((nell, 6, 6), dtype=jar.dtype)

  if nell:
    jc, dc = _gather(jar, r), _gather(D, r)
    actc = _gather(act, r)[:, 0]
    mu, fric = p.mu, p.fric
    scl = jnp.concatenate([mu[:, None], fric], axis=1)  # dU/djar, (nell, 6)
    u = jc * scl
    n = u[:, 0]
    ut = u[:, 1:]
    t = safe_norm(ut)
    top = (n >= mu * t) | ((t <= 0) & (n >= 0))
    bottom = ~top & ((mu * n + t <= 0) | ((t <= 0) & (n < 0)))
    middle = ~top & ~bottom
    dm = _cone_dm(p, dc[:, 0])
    nmt = n - mu * t
    c_con = jnp.where(
      bottom, 0.5 * jnp.sum(dc * jc * jc, axis=1), jnp.where(middle, 0.5 * dm * nmt * nmt, 0.0)
    )
    cost = cost + jnp.sum(jnp.where(actc, c_con, 0.0))
    # middle zone implies t > 0
    tm = jnp.where(middle, t, 1.0)
    f0 = -dm * nmt * mu
    fmid = jnp.concatenate([f0[:, None], (-f0 / tm)[:, None] * ut * fric], axis=1)
    fc = jnp.where(bottom[:, None], -dc * jc, jnp.where(middle[:, None], fmid, 0.0))
    fc = jnp.where(actc[:, None], fc, 0.0)
    sc = jnp.where(
      top,
      ConstraintState.SATISFIED,
      jnp.where(bottom, ConstraintState.QUADRATIC, ConstraintState.CONE),
    )
    sc = jnp.broadcast_to(sc[:, None], (nell, 6))
    force = _scatter(fc, r, force)
    state = _scatter(sc, r, state)
    if cone_hessian:
      # Hessian of 0.5*Dm*(N - mu*T)^2 in U, mapped to jar by diag(mu, friction)
      h = jnp.zeros((nell, 6, 6), dtype=jar.dtype)
      h = h.at[:, 0, 0].set(1.0)
      row = (-mu / tm)[:, None] * ut
      h = h.at[:, 0, 1:].set(row).at[:, 1:, 0].set(row)
      blk = (mu * n / tm**3)[:, None, None] * ut[:, :, None] * ut[:, None, :]
      blk = blk + (mu * mu - mu * n / tm)[:, None, None] * jnp.eye(5, dtype=jar.dtype)
      h = h.at[:, 1:, 1:].set(blk)
      h = dm[:, None, None] * scl[:, :, None] * h * scl[:, None, :]
      hc = jnp.where((middle & actc)[:, None, None], h, 0.0)

  force = jnp.where(act, force, 0.0)
  state = jnp.where(act, state, ConstraintState.SATISFIED).astype(jnp.int32)
  return _Update(force, state, cost, hc)


def _hessian(
  p: _Problem, r: RowClasses, upd: _Update, ld: dynamics.LDLayout, rows: int | None = None
) -> jax.Array:
  """H = M + J' D_quadratic J + cone Hessians (MakeHessian, HessianCone), (nv, nv).

  rows: the compact buffer's size (layout.hessian_rows; None or nefc: every row at once). With
  a buffer, the quadratic rows are gathered into it and summed `rows` at a time: one pass where
  they fit, more (a while loop, run for the world with the most) where more rows are quadratic,
  so H is always exact and costs what is quadratic, not what is allocated. Elliptic contacts in
  their middle zone are summed rows // 6 at a time the same way.
  """
  return _newton_terms(p, r, upd, ld, rows, False, False)[0]


def _newton_terms(
  p: _Problem,
  r: RowClasses,
  upd: _Update,
  ld: dynamics.LDLayout,
  rows: int | None,
  jt: bool,
  absolute: bool,
) -> tuple[jax.Array, jax.Array | None, jax.Array | None]:
  """The Hessian (_hessian) and, with jt, J' force (nv,) and, with absolute, |J|' |force| (nv,)
  (the gradient and its rounding scale), in one pass over the rows: with a buffer the rows
  with a force or a quadratic cost are gathered once for all three (on dm_control's humanoid,
  batch 256, the two sums over every row took 14% of a step). Returns (H, J'f or None,
  |J|'|f| or None)."""
  dq = jnp.where(upd.state == ConstraintState.QUADRATIC, p.D, 0.0)
  f = upd.force
  nefc = dq.shape[0]
  compact = rows is not None and rows < nefc
  jtf = ajf = None
  if not compact and not p.J.compact:
    h = dynamics.rows_dense(ld, p.M) + p.J.val.T @ (dq[:, None] * p.J.val)
    if jt:
      jtf = p.J.tmul(f)
    if absolute:
      ajf = p.J.abs_tmul(f)
  else:
    # compact rows: dense rows of a buffer at a time (every row at once would be (nefc, nv))
    rows = rows if compact else min(nefc, HESSIAN_COMPACT_ROWS)
    compact = rows < nefc
    nv = p.M.shape[0]

    def term(pick):
      jk = p.J.rows(pick)
      dk = jnp.take(dq, pick, mode='fill', fill_value=0)
      out = [jk.T @ (dk[:, None] * jk)]
      if jt or absolute:
        fk = jnp.take(f, pick, mode='fill', fill_value=0)
      if jt:
        out.append(jk.T @ fk)
      if absolute:
        out.append(jnp.abs(jk).T @ jnp.abs(fk))
      return tuple(out)

    zero = jnp.zeros(nv, p.M.dtype)
    start = (jnp.zeros((nv, nv), p.M.dtype),) + (zero,) * (jt + absolute)
    mask = (dq > 0) | (f != 0) if jt or absolute else dq > 0
    out = list(_chunked(start, mask, rows, term))
    # M added last, into the sum: added first, its dense form is loop-invariant and XLA hoists
    # it out of the solver's loops, an (nv, nv) array stored through the solve
    h = dynamics.add_rows(ld, out.pop(0), p.M)
    jtf = out.pop(0) if jt else None
    ajf = out.pop(0) if absolute else None
  nell = len(r.con)
  if nell:
    jc = p.J.rows(r.rows.reshape(-1)).reshape(r.rows.shape + (-1,))
    jc = jc * r.rmask[..., None]  # (nell, 6, nv), zero in padded slots
    kc = min(nell, max(1, rows // 6)) if compact else nell
    if kc < nell:
      hc = upd.hc

      def cones(pick):
        jk = jnp.take(jc, pick, axis=0, mode='fill', fill_value=0)
        hk = jnp.take(hc, pick, axis=0, mode='fill', fill_value=0)
        return jnp.einsum('cin,cij,cjm->nm', jk, hk, jk)

      h = _chunked(h, jnp.any(hc != 0, axis=(1, 2)), kc, cones)
    else:
      h = h + jnp.einsum('cin,cij,cjm->nm', jc, upd.hc, jc)
  return h, jtf, ajf


# rows per pass of the Hessian of a compact Jacobian summed without a layout's buffer (the
# derivative's Hessian): its dense rows are formed this many at a time
HESSIAN_COMPACT_ROWS = 64


def _chunked(h, mask: jax.Array, k: int, term):
  """h plus term(pick) over the true entries of mask (n,), k at a time: the first k in one pass,
  the rest (where more than k are true) in a while loop. h and term's values: arrays or tuples
  of arrays (summed entry by entry)."""
  count = jnp.cumsum(mask.astype(jnp.int32))

  def plus(h, pick):
    return jax.tree_util.tree_map(jnp.add, h, term(pick))

  h = plus(h, ranked(count, jnp.zeros((), jnp.int32), k))

  def more(c):
    return c[1] < count[-1]

  def add(c):
    h, start = c
    return plus(h, ranked(count, start, k)), start + k

  return jax.lax.while_loop(more, add, (h, jnp.asarray(k, jnp.int32)))[0]


# J' force over the rows with a force only where J is this large (entries): dog (890 x 85 rows
# and dofs) solves 11% faster, dm_control's humanoid (235 x 27) 3% slower (the gather and its
# loop cost more than the rows they skip)
JT_COMPACT = 1 << 15


def _jt(J: sparse.Jacobian, f: jax.Array, rows: int | None, absolute: bool = False) -> jax.Array:
  """J' f (nv,) (|J|' |f| if absolute) over the rows where f is nonzero (forces: active rows
  only), `rows` at a time as the Hessian's buffer (_chunked), where J is dense with at least
  JT_COMPACT entries or compact; every row at once for a smaller J or without a buffer."""
  nefc = f.shape[0]
  if rows is None or rows >= nefc or (not J.compact and J.val.size < JT_COMPACT):
    return J.abs_tmul(f) if absolute else J.tmul(f)

  def term(pick):
    jk = J.rows(pick)
    fk = jnp.take(f, pick, mode='fill', fill_value=0)
    return jnp.abs(jk).T @ jnp.abs(fk) if absolute else jk.T @ fk

  return _chunked(jnp.zeros(J.ncol, J.dtype), f != 0, rows, term)


class _Line(NamedTuple):
  """The cost along the search direction (PrimalPrepare), with everything that does not depend
  on the step length computed once per line search."""

  start: jax.Array  # (nefc,) jar at alpha = 0
  jv: jax.Array  # (nefc,) J search
  quad: jax.Array  # (3, nefc) row quadratics in alpha, halved as in PrimalPrepare
  cost0: jax.Array  # (nefc,) row cost at alpha = 0 (friction loss, one-sided)
  fri: jax.Array  # (3, nefc) friction loss rows: floss, R*floss, zone at alpha = 0
  cls: jax.Array  # (3, nefc) active equality, friction loss, one-sided rows
  gauss: jax.Array  # (2,) linear and quadratic coefficients of the Gauss cost
  gmag: jax.Array  # (nisl,) magnitude of the terms summed in the Gauss slope at alpha = 0
  cq: jax.Array  # (3, nell) vector quadratic of each elliptic contact
  cu: jax.Array  # (6, nell) U0, V0, UU, UV, VV, Dm
  c0: jax.Array  # (5, nell) zone, T, U0 - mu*T, 0.5*Dm*(mu*U0 + T)^2 at alpha = 0, active
  rlab: jax.Array  # (nefc,) island of each row
  elab: jax.Array  # (nell,) island of each elliptic contact


class _Isl(NamedTuple):
  """Constraint islands: each is solved on its own, as mujoco does (mj_solPrimal per island).

  dlab (nv,): island of each dof, nisl for dofs in no island; rlab (nefc,): island of each row.
  """

  dlab: jax.Array
  rlab: jax.Array
  nisl: int

  def dofs(self, v: jax.Array) -> jax.Array:
    """Sums over each island's dofs, (nisl,)."""
    if self.nisl == 1:
      return jnp.sum(jnp.where(self.dlab == 0, v, 0.0))[None]
    return jax.ops.segment_sum(v, self.dlab, self.nisl)

  def per_dof(self, a: jax.Array) -> jax.Array:
    """An island quantity (nisl,) at each dof (zero on dofs in no island), (nv,)."""
    return jnp.concatenate([a, jnp.zeros(1, a.dtype)])[self.dlab]


def _one_island(nv: int, nefc: int) -> _Isl:
  return _Isl(jnp.zeros(nv, jnp.int32), jnp.zeros(nefc, jnp.int32), 1)


def line_prepare(
  p: _Problem, r: RowClasses, jaref, jv, search, ma, mv, isl: _Isl | None = None
) -> _Line:
  """Quadratic polynomials of each cost term along the search direction (PrimalPrepare)."""
  if isl is None:
    isl = _one_island(ma.shape[0], jaref.shape[0])
  D = jnp.where(p.active, p.D, 0.0)
  quad = jnp.stack([0.5 * D * jaref * jaref, D * jaref * jv, 0.5 * D * jv * jv])
  g1 = isl.dofs(search * ma) - isl.dofs(p.qfrc_smooth * search)
  gauss = jnp.stack([g1, 0.5 * isl.dofs(search * mv)])
  gmag = isl.dofs(jnp.abs(search * ma) + jnp.abs(p.qfrc_smooth * search))
  f = p.floss
  rf = p.R * f
  zs = jnp.where((-rf < jaref) & (jaref < rf), 0, jnp.where(jaref <= -rf, -1, 1))
  fcost = jnp.where(zs == 0, quad[0], f * (zs * jaref - 0.5 * rf))
  cost0 = jnp.where(r.fri, fcost, jnp.where(jaref < 0, quad[0], 0.0))
  cls = jnp.stack([r.eq & p.active, r.fri & p.active, r.one & p.active])
  fri = jnp.stack([f, rf, zs.astype(f.dtype)])
  nell = len(r.con)
  cq = jnp.zeros((3, nell), jaref.dtype)
  cu = jnp.zeros((6, nell), jaref.dtype)
  c0 = jnp.zeros((5, nell), jaref.dtype)
  if nell:
    qc = _gather(quad.T, r)  # (nell, 6, 3)
    cq = jnp.sum(qc, axis=1).T
    jc, vc = _gather(jaref, r), _gather(jv, r)
    scl = jnp.concatenate([p.mu[:, None], p.fric], axis=1)
    u, v = jc * scl, vc * scl
    ut, vt = u[:, 1:], v[:, 1:]
    dm = _cone_dm(p, _gather(D, r)[:, 0])
    uu, uv, vv = (jnp.sum(a * b, axis=1) for a, b in ((ut, ut), (ut, vt), (vt, vt)))
    cu = jnp.stack([u[:, 0], v[:, 0], uu, uv, vv, dm])
    z0, t0 = _zone(u[:, 0], uu, p.mu)
    gap0 = 0.5 * dm * (p.mu * u[:, 0] + t0) ** 2
    act = _gather(p.active, r)[:, 0]
    c0 = jnp.stack([z0.astype(dm.dtype), t0, u[:, 0] - p.mu * t0, gap0, act.astype(dm.dtype)])
  elab = isl.rlab[r.rows[:, 0]] if nell else jnp.zeros(0, jnp.int32)
  return _Line(jaref, jv, quad, cost0, fri, cls, gauss, gmag, cq, cu, c0, isl.rlab, elab)


# A line-search point (mjPrimalPnt) is an array (..., 5): alpha, cost, deriv[0], deriv[1], and
# the rounding error bound of deriv[0] (zero in float64, see `slope_rounding`).
ALPHA, COST, D0, D1, NOISE = 0, 1, 2, 3, 4

# Rounding floor of the solver's stopping tests below float64, in units of the dtype's machine
# epsilon times the magnitude of the terms a tested quantity sums. A sum of n terms computed in
# floating point is off by up to ~log2(n) eps sum|terms| (pairwise reduction, as XLA's); the
# quantities tested here sum a few tens of non-zero terms (active rows, dofs).
ROUNDING_ULPS = 8.0


def slope_rounding(dtype) -> float:
  """The factor of the rounding floor of the stopping tests in `dtype`: 0 in float64.

  MuJoCo's tests (line search: |slope| < tolerance * ls_tolerance * |search| / scale; Newton and
  CG: improvement, gradient, decrement < tolerance) are met in float64, where jaxsim reproduces
  MuJoCo's iterations exactly, so float64 keeps them as they are. In float32 their thresholds lie
  below the rounding error of the quantities tested (a slope of ~1e2 N * |search| summed from
  terms that cancel, against 1e-10 * |search| * trace(M)): the tests are then decided by noise,
  and a line search runs all ls_iterations where float64 stops after a few. Below float64 a test
  therefore also passes where the tested quantity is within ROUNDING_ULPS * eps * (the magnitude
  of the terms it sums) of zero: there its sign and size are rounding, and no further step can
  reduce it.
  """
  eps = float(jnp.finfo(dtype).eps)
  return 0.0 if eps <= float(jnp.finfo(jnp.float64).eps) else ROUNDING_ULPS * eps


def _zone(n, tsq, mu):
  """Elliptic cone zone: 1 top, 2 bottom, 3 middle; and T = sqrt(tsq)."""
  t = _safe_sqrt(tsq)
  z = jnp.where(n >= mu * t, 1, jnp.where(mu * n + t <= 0, 2, 3))
  return jnp.where(tsq <= 0, jnp.where(n < 0, 2, 1), z), t


def line_eval(p: _Problem, ln: _Line, alpha: jax.Array) -> jax.Array:
  """Cost(alpha) - cost(0) and its first two derivatives along the search (PrimalEval).

  Per island: alpha (nisl, k), a step length of each island, returns points (nisl, k, 5), each
  island's rows and dofs summed (alpha (k,): one island, points (k, 5)); below float64 a point's
  NOISE is its slope's rounding bound, `slope_rounding` times the magnitude of the slope's
  terms (zero in float64). Row costs are quadratics in alpha where a row is quadratic
  (equality; one-sided rows below zero; friction loss inside its bound) and linear where
  friction loss saturates; differences within one zone are formed directly, as MuJoCo does, to
  avoid cancellation.
  """
  if alpha.ndim == 1:
    return line_eval(p, ln, alpha[None])[0]
  nisl = alpha.shape[0]
  rounding = slope_rounding(alpha.dtype)

  def seg(v, lab):  # (3, k, n) summed per island: (3, k, nisl)
    if nisl == 1:
      return v.sum(axis=-1)[..., None]
    return v @ jax.nn.one_hot(lab, nisl, dtype=v.dtype)

  a = alpha[ln.rlab].T  # (k, nefc)
  start, jv = ln.start, ln.jv
  x = start + a * jv
  q0, q1, q2 = ln.quad
  eq, fri, one = ln.cls
  f, rf, zs = ln.fri
  qa = a * (q1 + a * q2)
  qd0 = q1 + 2 * a * q2

  # friction loss: zone -1 / 0 / +1 at x
  zx = jnp.where((-rf < x) & (x < rf), 0.0, jnp.where(x <= -rf, -1.0, 1.0))
  lin = zx != 0
  fc = jnp.where(lin, f * (zx * x - 0.5 * rf), q0 + qa) - ln.cost0
  fc = jnp.where(zx == zs, jnp.where(lin, zx * f * a * jv, qa), fc)
  # one-sided: quadratic below zero
  neg = x < 0
  oc = jnp.where(neg, q0 + qa, 0.0) - ln.cost0

  quadratic = eq | (one & neg) | (fri & ~lin)
  cost = jnp.where(eq, qa, jnp.where(fri, fc, jnp.where(one, oc, 0.0)))
  d0 = jnp.where(quadratic, qd0, jnp.where(fri & lin, zx * f * jv, 0.0))
  d1 = jnp.where(quadratic, 2 * q2, 0.0)
  terms = [cost, d0, d1]
  if rounding:  # the magnitude of the terms summed into the slope
    terms.append(
      jnp.where(
        quadratic, jnp.abs(q1) + jnp.abs(2 * a * q2), jnp.where(fri & lin, jnp.abs(d0), 0.0)
      )
    )
  tot = seg(jnp.stack(terms), ln.rlab)

  if ln.cq.shape[1]:
    a = alpha[ln.elab].T  # (k, nell)
    c0, c1, c2 = ln.cq
    u0, v0, uu, uv, vv, dm = ln.cu
    z0, t0, r0, gap0, act = ln.c0
    mu = p.mu
    n = u0 + a * v0
    tsq = uu + a * (2 * uv + a * vv)
    za, t = _zone(n, tsq, mu)
    dq = a * (a * c2 + c1)
    # both middle: rationalised to avoid cancellation
    tdel = _safe_div(a * (2 * uv + a * vv), t + t0)
    rdel = a * v0 - mu * tdel
    nmt = n - mu * t
    cases = (
      ((2, 2), dq),
      ((3, 3), 0.5 * dm * rdel * (2 * r0 + rdel)),
      ((3, 2), dq + gap0),
      ((2, 3), dq - 0.5 * dm * (mu * n + t) ** 2),
      ((1, 2), dq + c0),
      ((1, 3), 0.5 * dm * nmt * nmt),
      ((3, 1), -0.5 * dm * r0 * r0),
      ((2, 1), -c0),
    )
    cc = jnp.zeros_like(n)
    for (i, j), val in cases:
      cc = jnp.where((z0 == i) & (za == j), val, cc)
    tm = jnp.where(za == 3, t, 1.0)
    t1 = (uv + a * vv) / tm
    t2 = vv / tm - (uv + a * vv) * t1 / (tm * tm)
    g = v0 - mu * t1
    cd0 = jnp.where(za == 2, 2 * a * c2 + c1, jnp.where(za == 3, dm * nmt * g, 0.0))
    cd1 = jnp.where(za == 2, 2 * c2, jnp.where(za == 3, dm * (g * g - nmt * mu * t2), 0.0))
    terms = [cc, cd0, cd1]
    if rounding:  # middle zone: both factors of the slope are differences
      mid = dm * (jnp.abs(n) + mu * t) * (jnp.abs(v0) + mu * jnp.abs(t1))
      terms.append(
        jnp.where(za == 2, jnp.abs(c1) + jnp.abs(2 * a * c2), jnp.where(za == 3, mid, 0.0))
      )
    tot = tot + seg(jnp.where(act > 0, jnp.stack(terms), 0.0), ln.elab)

  tot = jnp.swapaxes(tot, 1, 2)  # (3 or 4, nisl, k)
  g1, g2 = ln.gauss[0][:, None], ln.gauss[1][:, None]
  cost = tot[0] + alpha * (g1 + alpha * g2)
  d0 = tot[1] + g1 + 2 * alpha * g2
  # not convex: SHOULD NOT OCCUR
  d1 = tot[2] + 2 * g2
  d1 = jnp.where(d1 <= 0, MINVAL, d1)
  if rounding:
    noise = rounding * (tot[3] + ln.gmag[:, None] + jnp.abs(2 * alpha * g2))
  else:
    noise = jnp.zeros_like(d0)
  return jnp.stack([alpha, cost, d0, d1, noise], axis=-1)


def _newton(pt: jax.Array) -> jax.Array:
  """Newton step on the line from points (..., 5)."""
  return pt[..., ALPHA] - pt[..., D0] / pt[..., D1]


def _update_bracket(pt: jax.Array, cands: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Moves bracket ends (nisl, 5) to candidates (nisl, 3, 5) with smaller |deriv| of the same
  sign (updateBracket)."""
  flag = jnp.zeros(pt.shape[0], bool)
  for k in range(cands.shape[1]):
    c = cands[:, k]
    d, e = pt[:, D0], c[:, D0]
    take = ((d < 0) & (e < 0) & (d < e)) | ((d > 0) & (e > 0) & (d > e))
    pt = jnp.where(take[:, None], c, pt)
    flag = flag | take
  return pt, flag


class _LS(NamedTuple):
  """Line-search state.

  phase: 0 one-sided search, 1 bracketed search, 2 done; pts (nisl, 4, 5): p1, p2, p1next, p2next;
  pend (2,): p1next / p2next are chosen (alpha set, counted in lsiter) but not yet evaluated;
  res (2,): step length and improvement once done.
  """

  phase: jax.Array
  lsiter: jax.Array
  direction: jax.Array
  pts: jax.Array
  pend: jax.Array
  res: jax.Array


def _linesearch(p: _Problem, r: RowClasses, ln: _Line, snorm, gtol, ls_iterations: int, skip):
  """Step length and improvement of each island along the search direction (PrimalSearch).

  snorm, gtol, skip (nisl,); returns alpha, improvement and the evaluations counted (LSiter),
  (nisl,) each. MuJoCo's sequence: p0, the Newton point p1, Newton steps until the minimum is
  bracketed, then bisection with Newton candidates. After p0 and p1, each trip of a while loop
  first evaluates the points the previous trip chose, in one batched evaluation, then takes one
  MuJoCo loop iteration; a bracketed iteration's midpoint is evaluated together with the
  previous iteration's Newton candidates. Evaluations are counted as MuJoCo's LSiter. Islands
  search independently (each its own step length) in the same trips; a finished island's state
  is frozen. With `skip` (an island that has stopped, or a stopped solve carried along under
  vmap) its search ends at once. Below float64 a slope test is met also where the slope is
  within its rounding bound (the points' NOISE, `slope_rounding`).
  """
  dtype = snorm.dtype
  nisl = snorm.shape[0]
  p0 = line_eval(p, ln, jnp.zeros((nisl, 1), dtype))[:, 0]
  p1 = line_eval(p, ln, _newton(p0)[:, None])[:, 0]
  small = skip | (snorm < MINVAL)
  floor = slope_rounding(dtype) > 0

  def flat(pt):  # (nisl, ..., 5): the slope is zero to MuJoCo's test, or to rounding below float64
    g = gtol.reshape(gtol.shape + (1,) * (pt.ndim - 2))
    return jnp.abs(pt[..., D0]) < (jnp.maximum(g, pt[..., NOISE]) if floor else g)

  init = flat(p1) & ((p1[:, ALPHA] == 0) | (p1[:, COST] < 0))
  unset = jnp.zeros((nisl, 5), dtype).at[:, D1].set(1.0)  # finite Newton steps from unset points

  def pair(pt):  # (nisl, 5) -> (nisl, 2): alpha, improvement
    return jnp.stack([pt[:, ALPHA], -pt[:, COST]], axis=-1)

  s = _LS(
    phase=jnp.where(small | init, 2, 0).astype(jnp.int32),
    lsiter=jnp.full(nisl, 2, jnp.int32),
    direction=jnp.where(p1[:, D0] < 0, 1.0, -1.0).astype(dtype),
    pts=jnp.stack([p1, p0, unset, unset], axis=1),
    pend=jnp.zeros((nisl, 2), bool),
    res=jnp.where(small[:, None], 0.0, pair(p1)),
  )

  def step(s: _LS) -> _LS:
    p1, p2, p1n, p2n = (s.pts[:, k] for k in range(4))
    mid = 0.5 * (p1[:, ALPHA] + p2[:, ALPHA])
    a0 = jnp.where(s.phase == 1, p1n[:, ALPHA], _newton(p1))
    e = line_eval(p, ln, jnp.stack([a0, p2n[:, ALPHA], mid], axis=1))  # (nisl, 3, 5)
    room = s.lsiter < ls_iterations

    # phase 0: Newton steps while the slope points further out, then set up the bracket
    go = (p1[:, D0] * s.direction <= -gtol) & room
    if floor:
      go = go & ~flat(p1)
    pn = e[:, 0]
    conv0 = go & flat(pn) & (pn[:, COST] < 0)
    fail = ~go & ~room  # could not bracket
    s_0 = s._replace(
      phase=jnp.where(conv0 | fail, 2, jnp.where(go, 0, 1)).astype(jnp.int32),
      lsiter=s.lsiter + jnp.where(fail, 0, 1),
      pts=jnp.where(
        go[:, None, None],
        jnp.stack([pn, p1, p1n, p2n], axis=1),
        jnp.stack([p1, p2, pn, p1], axis=1),
      ),
      res=jnp.where(go[:, None], pair(pn), pair(p1)),
    )

    # phase 1: complete the pending candidates, then one bracketed iteration
    p1n = jnp.where(s.pend[:, :1], e[:, 0], p1n)
    p2n = jnp.where(s.pend[:, 1:], e[:, 1], p2n)
    pmid = e[:, 2]
    cands = jnp.stack([p1n, p2n, pmid], axis=1)
    ok = flat(cands)
    best, found = cands[:, 0], ok[:, 0]
    for k in (1, 2):
      take = ok[:, k] & (~found | (cands[:, k, COST] < best[:, COST]))
      best = jnp.where(take[:, None], cands[:, k], best)
      found = found | ok[:, k]
    b1, f1 = _update_bracket(p1, cands)
    b2, f2 = _update_bracket(p2, cands)
    stuck = ~f1 & ~f2  # numerical accuracy reached: take the midpoint
    hit = jnp.where(found[:, None], best, pmid)
    # out of evaluations: the better bracket end, if it improves
    use1 = (p1[:, COST] <= p2[:, COST]) & (p1[:, COST] < 0)
    use2 = ~use1 & (p2[:, COST] <= p1[:, COST]) & (p2[:, COST] < 0)
    fin = jnp.where(use1[:, None], p1, p2)
    fin = jnp.where((use1 | use2)[:, None], pair(fin), 0.0)
    nxt = jnp.stack(
      [b1, b2, p1n.at[:, ALPHA].set(_newton(b1)), p2n.at[:, ALPHA].set(_newton(b2))], axis=1
    )
    keep = jnp.stack([b1, b2, p1n, p2n], axis=1)
    sel = jnp.stack([jnp.ones_like(f1), jnp.ones_like(f1), f1, f2], axis=1)
    s_1 = s._replace(
      phase=jnp.where(~room | found | stuck, 2, 1).astype(jnp.int32),
      # the midpoint; the bracket ends' Newton points only where the search goes on (MuJoCo
      # returns a converged candidate before updateBracket evaluates them)
      lsiter=s.lsiter
      + jnp.where(room, 1 + jnp.where(found, 0, f1.astype(jnp.int32) + f2.astype(jnp.int32)), 0),
      pts=jnp.where(sel[:, :, None], nxt, keep),
      pend=jnp.stack([f1, f2], axis=1),
      res=jnp.where(room[:, None], pair(hit), fin),
    )

    def pick(x, y, old):
      shape = (nisl,) + (1,) * (x.ndim - 1)
      new = jnp.where((s.phase == 0).reshape(shape), x, y)
      return jnp.where((s.phase == 2).reshape(shape), old, new)

    return jax.tree_util.tree_map(pick, s_0, s_1, s)

  # every trip counts at least one evaluation or ends the search: at most ls_iterations trips
  s = jax.lax.while_loop(lambda s: jnp.any(s.phase != 2), step, s)
  return s.res[:, 0], s.res[:, 1], s.lsiter


class _Config(NamedTuple):
  """Static solver settings."""

  newton: bool
  ellipse: bool  # elliptic contact slots: Newton and the implicit gradient need cone Hessians
  iterations: int
  ls_iterations: int
  warmstart: bool
  hessian_rows: int  # Newton's compact Hessian buffer (layout.hessian_rows)
  ld: dynamics.LDLayout  # qLD's compact rows (M^-1 solves)
  hessian_ld: dynamics.LDLayout | None  # Newton's Hessian in compact rows; None: dense


class _Path(NamedTuple):
  """Inputs that choose the path to the solution but not the solution itself."""

  qLD: jax.Array  # (nv, nld) L'DL factor of M, dynamics.factor_tree (CG preconditioner, start test)
  qacc_warmstart: jax.Array  # (nv,)
  tolerance: jax.Array
  ls_tolerance: jax.Array
  dof_island: jax.Array  # (nv,) island of each dof, nisland for dofs in none
  efc_island: jax.Array  # (nefc,) island of each row
  inertia: jax.Array  # (nisland,) sum of diag(M) over each island's dofs (0: empty)


class _Ctx(NamedTuple):
  """Solver state (mjPrimalContext's dynamic part)."""

  qacc: jax.Array  # (nv,)
  ma: jax.Array  # (nv,) M qacc
  jaref: jax.Array  # (nefc,) J qacc - aref
  force: jax.Array  # (nefc,)
  state: jax.Array  # (nefc,)
  grad: jax.Array  # (nv,)
  mgrad: jax.Array  # (nv,) H^-1 grad (Newton) or M^-1 grad (CG)
  search: jax.Array  # (nv,)
  done: jax.Array  # bool
  niter: jax.Array  # int32
  neval: jax.Array  # int32: line-search evaluations of the counted iterations (mjSolverStat.neval)


def _primal(cfg: _Config, r: RowClasses, p: _Problem, x: _Path):
  """qacc (nv,), efc_force (nefc,), efc_state (nefc,), solver_niter, solver_neval (mj_solPrimal).

  The warm start, then Newton or CG iterations in a while loop until MuJoCo's stopping tests
  hold or opt.iterations are spent, per constraint island (each island its own step length,
  direction update and stopping tests, as mujoco runs mj_solPrimal per island); dofs in no
  island keep qacc_smooth. Under vmap the loop runs until every world has stopped.
  """
  tol = x.tolerance
  ls_tol = tol * x.ls_tolerance
  nisl = x.inertia.shape[0]
  isl = _Isl(x.dof_island, x.efc_island, nisl)
  empty = x.inertia <= 0
  # improvement and gradient are scaled by the island's inertia: mujoco 4.0.0 uses the sum of
  # diag(M) over the island's dofs at the current state (for the monolithic solve too, not
  # stat.meaninertia * nv as engine_solver.c reads: the solver's statistics do not change with
  # stat.meaninertia)
  scale = 1.0 / jnp.where(empty, 1.0, x.inertia)

  def solve_m(v):
    return dynamics.solve_sparse(cfg.ld, x.qLD, v)

  def mul_m(v):
    return dynamics.mul_rows(cfg.ld, p.M, v)

  def gauss(qacc, ma):
    return 0.5 * (ma - p.qfrc_smooth) @ (qacc - p.qacc_smooth)

  def norm(v):  # per island
    return jnp.sqrt(isl.dofs(v * v))

  # warm start: the better of qacc_warmstart and qacc_smooth by total cost (warmstart())
  if cfg.warmstart:
    ws = x.qacc_warmstart
    jar = jnp.stack([p.J @ ws - p.aref, p.J @ p.qacc_smooth - p.aref])
    cost = jax.vmap(lambda j: update_constraint(p, r, j, False).cost)(jar)
    qacc = jnp.where(cost[0] + gauss(ws, mul_m(ws)) > cost[1], p.qacc_smooth, ws)
  else:
    qacc = p.qacc_smooth
  qacc = jnp.where(x.dof_island >= nisl, p.qacc_smooth, qacc)  # unconstrained dofs

  rounding = slope_rounding(p.M.dtype)

  def evaluate(ma, jaref):
    """Forces, states, cost gradient, preconditioned gradient and the gradient test at a point:
    MuJoCo's test, below float64 also met where |grad| is within the rounding of its terms
    (M qacc, qfrc_smooth and J' force, these summed from the rows' J_ij force_i)."""
    upd = update_constraint(p, r, jaref, cfg.newton and cfg.ellipse)
    if cfg.newton:
      h, jtf, ajf = _newton_terms(p, r, upd, cfg.ld, cfg.hessian_rows, True, bool(rounding))
      grad = ma - p.qfrc_smooth - jtf
      mgrad = dynamics.solve_spd(h, grad, cfg.hessian_ld)
    else:
      grad = ma - p.qfrc_smooth - _jt(p.J, upd.force, cfg.hessian_rows)
      mgrad = solve_m(grad)
      if rounding:
        ajf = _jt(p.J, upd.force, cfg.hessian_rows, absolute=True)
    ok = scale * norm(grad) < tol
    if rounding:
      terms = jnp.abs(ma) + jnp.abs(p.qfrc_smooth) + ajf
      ok = ok | (norm(grad) < rounding * norm(terms))
    return upd, grad, mgrad, ok

  # the start: MuJoCo evaluates it before its first line search
  ma, jaref = mul_m(qacc), p.J @ qacc - p.aref
  upd, grad, mgrad, grad_ok = evaluate(ma, jaref)
  # the certificate cost - cost* <= 0.5 grad' M^-1 grad; Newton also requires the gradient test
  # (its solutions are force-accurate)
  mg = solve_m(grad) if cfg.newton else mgrad
  gap_ok = jnp.maximum(0.0, 0.5 * scale * isl.dofs(grad * mg)) < tol
  if cfg.newton:
    # Newton decrement: the model's predicted improvement of the next step
    dec_ok = jnp.maximum(0.0, 0.5 * scale * isl.dofs(grad * mgrad)) < tol
    done = grad_ok & (gap_ok | dec_ok)
  else:
    done = gap_ok
  done = done | empty
  i0 = jnp.zeros(nisl, jnp.int32)
  ctx = _Ctx(qacc, ma, jaref, upd.force, upd.state, grad, mgrad, -mgrad, done, i0, i0)

  def iteration(c: _Ctx) -> _Ctx:
    """One iteration of mj_solPrimal's loop in every running island: line search, move, new
    search direction."""
    search = c.search
    mv, jv = mul_m(search), p.J @ search
    snorm = norm(search)
    ln = line_prepare(p, r, c.jaref, jv, search, c.ma, mv, isl)
    skip = c.done | (c.niter >= cfg.iterations)
    gtol = ls_tol * snorm / scale
    alpha, ls_improvement, lsiter = _linesearch(p, r, ln, snorm, gtol, cfg.ls_iterations, skip)
    alpha = jnp.where(skip, 0.0, alpha)
    ad, ar = isl.per_dof(alpha), alpha[x.efc_island]
    ma, jaref = c.ma + ad * mv, c.jaref + ar * jv
    upd, grad, mgrad, grad_ok = evaluate(ma, jaref)

    improvement = scale * ls_improvement
    converged = ((improvement > 0) & (improvement < tol)) | grad_ok
    if cfg.newton:
      converged = converged | (jnp.maximum(0.0, 0.5 * scale * isl.dofs(grad * mgrad)) < tol)
      search_new = -mgrad
    else:
      # Hager-Zhang conjugate direction (MuJoCo's default CG update), steepest descent on loss
      # of conjugacy
      ydif, mydif = grad - c.grad, mgrad - c.mgrad
      d_dot_y = isl.dofs(search * ydif)
      lost = d_dot_y < MINVAL
      dy = jnp.where(lost, 1.0, d_dot_y)
      beta_hz = (
        isl.dofs(ydif * mgrad) - 2 * (isl.dofs(ydif * mydif) / dy) * isl.dofs(search * grad)
      ) / dy
      eta_k = -1.0 / jnp.maximum(MINVAL, snorm * jnp.minimum(0.01, norm(grad)))
      beta = jnp.where(lost, 0.0, jnp.maximum(eta_k, beta_hz))
      search_new = -mgrad + isl.per_dof(beta) * search

    qacc = c.qacc + ad * search
    # no improvement along the search: MuJoCo stops the island where it is, without counting
    # the iteration (its qacc, forces and gradient are those of the unchanged point)
    stop = alpha == 0
    counted = ~skip & ~stop
    niter = c.niter + counted.astype(jnp.int32)
    neval = c.neval + jnp.where(counted, lsiter, 0)
    done = c.done | stop | converged
    return _Ctx(qacc, ma, jaref, upd.force, upd.state, grad, mgrad, search_new, done, niter, neval)

  def running(c):
    return jnp.any(~c.done & (c.niter < cfg.iterations))

  ctx = jax.lax.while_loop(running, iteration, ctx)
  state = ctx.state.astype(jnp.int32)
  return ctx.qacc, ctx.force, state, jnp.max(ctx.niter), jnp.sum(ctx.neval, dtype=jnp.int32)


def _force(r: RowClasses, p: _Problem, qacc: jax.Array) -> jax.Array:
  """efc_force (nefc,) at qacc, with the zones of qacc: the rows' part of the cost gradient."""
  return update_constraint(p, r, p.J @ qacc - p.aref, False).force


def _primal_jvp(cfg: _Config, r: RowClasses, primals, tangents, run=None):
  """Tangents of qacc and efc_force by implicit differentiation of the optimality condition.

  At the solution, MuJoCo's cost gradient g = M qacc - qfrc_smooth - J' efc_force(J qacc - aref)
  is zero; its Jacobian in qacc is the generalised Hessian H = M + J' D_quadratic J + the cone
  Hessians of elliptic contacts in their middle zone (what Newton factors). So
  dqacc = -H^-1 (dg/dparams . dparams), with the zones (active set) of the solution, and the
  forces follow from qacc. The path inputs (warm start, qLD, tolerances) get no sensitivity;
  a solve stopped by opt.iterations before convergence gets the derivative of the exact
  solution, not of its truncation. `run(p, x)` is the solve (default: Newton or CG); the dual
  solver (PGS) solves the same problem, so its solution gets the same derivative.
  """
  p, x = primals
  dp, _ = tangents
  qacc, force, state, niter, neval = (run or functools.partial(_primal, cfg, r))(p, x)
  upd = update_constraint(p, r, p.J @ qacc - p.aref, cfg.ellipse)
  h = _hessian(p, r, upd, cfg.ld)
  _, dforce_p = jax.jvp(lambda p_: _force(r, p_, qacc), (p,), (dp,))
  dJ = sparse.Jacobian(dp.J.val, p.J.body, p.J.chain, p.J.ncol)  # only the values have tangents
  dg = dynamics.mul_rows(cfg.ld, dp.M, qacc) - dp.qfrc_smooth - dJ.tmul(force) - p.J.tmul(dforce_p)
  dqacc = -dynamics.solve_spd(h, dg, cfg.hessian_ld)
  _, dforce_q = jax.jvp(lambda q: _force(r, p, q), (qacc,), (dqacc,))
  float0 = jax.dtypes.float0
  zero_state, zero_count = np.zeros(state.shape, float0), np.zeros(niter.shape, float0)
  primal_out = (qacc, force, state, niter, neval)
  return primal_out, (dqacc, dforce_p + dforce_q, zero_state, zero_count, zero_count)


class _PGSPath(NamedTuple):
  """The PGS solve's inputs beside the problem: factor, warm start, islands, tolerance."""

  qLD: jax.Array  # (nv, nld)
  qacc_warmstart: jax.Array  # (nv,)
  tolerance: jax.Array
  label: jax.Array  # (nefc,) island of each row
  inertia: jax.Array  # (nisland,) sum of diag(M) over each island's dofs


def _islands(m: Model, d: Data, blk: pgs.Blocks, p: _Problem, ld: dynamics.LDLayout):
  """Constraint islands (mj_island): island of each dof (nv,; nisland for none) and row (nefc,),
  and each island's inertia (nisland,; 0 for unused labels; ld: M's rows' layout). One island
  without trees."""
  nv, nefc = p.M.shape[0], p.aref.shape[0]
  diag = dynamics.rows_diag(ld, p.M)
  if not blk.ntree:  # islands disabled (or no trees): one island of all dofs
    z = jnp.zeros(nv, jnp.int32)
    return z, jnp.zeros(nefc, jnp.int32), jnp.sum(diag)[None]
  con = d.contact
  if con.geom1.shape[0]:
    bt = jnp.asarray(np.concatenate([blk.body_treeid, [-1]]))
    gb = jnp.asarray(np.asarray(m.geom_bodyid, np.int32))
    t1 = bt[jnp.where(con.geom1 >= 0, gb[jnp.maximum(con.geom1, 0)], -1)]
    t2 = bt[jnp.where(con.geom2 >= 0, gb[jnp.maximum(con.geom2, 0)], -1)]
  else:
    t1 = t2 = jnp.zeros(0, jnp.int32)
  inc = pgs.row_trees(blk, p.J, t1, t2)
  label, tree_label = pgs.islands(inc, p.active)
  dof = tree_label[blk.dof_treeid]
  inertia = jax.ops.segment_sum(diag, dof, blk.ntree)
  return dof, label, inertia


def _pgs_path(m: Model, d: Data, blk: pgs.Blocks, p: _Problem, ld: dynamics.LDLayout) -> _PGSPath:
  """Constraint islands and their inertia, for the PGS solve."""
  _, label, inertia = _islands(m, d, blk, p, ld)
  # unused labels get a unit inertia (they have no rows)
  inertia = jnp.where(inertia > 0, inertia, 1.0)
  return _PGSPath(d.qLD, d.qacc_warmstart, m.opt.tolerance, label, inertia)


def _pgs(cfg: _Config, r: RowClasses, blk: pgs.Blocks, p: _Problem, x: _PGSPath):
  """qacc, efc_force, efc_state, solver_niter of the PGS solver (mj_solPGS, mj_dualFinish) and
  solver_neval (0: PGS has no line search)."""
  jw = p.J @ x.qacc_warmstart - p.aref
  if cfg.warmstart:
    # the primal forces at qacc_warmstart, or zero where their dual cost is not negative
    f = update_constraint(p, r, jw, False).force
    b = jnp.where(p.active, p.J @ p.qacc_smooth - p.aref, 0.0)
    arf = p.J @ dynamics.solve_sparse(cfg.ld, x.qLD, p.J.tmul(f)) + p.R * f
    f = jnp.where(f @ b + 0.5 * f @ arf > 0, 0.0, f)
  else:
    f = jnp.zeros_like(p.aref)
  force, niter = pgs.solve(
    blk,
    p.J.dense(),  # PGS's blocks of J M^-1 J' are dense in rows and dofs
    cfg.ld,
    x.qLD,
    p.qacc_smooth,
    f,
    p.R,
    p.aref,
    p.floss,
    p.active,
    p.fric,
    x.label,
    x.inertia,
    cfg.iterations,
    x.tolerance,
  )
  qacc = p.qacc_smooth + dynamics.solve_sparse(cfg.ld, x.qLD, p.J.tmul(force))
  state = noslip.dual_state(
    force, int(r.eq.sum()), int(r.fri.sum()), p.floss, p.active, r.rows, p.mu, p.fric, p.one
  )
  return qacc, force, state, niter, jnp.zeros((), jnp.int32)


def problem(m: Model, d: Data, r: RowClasses, J: sparse.Jacobian | None = None) -> _Problem:
  """The solver's per-row inputs at d: constraint rows, contact cones, inertia, smooth forces;
  J: d's constraint Jacobian where the caller has it (default: sparse.jacobian(m, d))."""
  dtype = d.qacc_smooth.dtype
  con = d.contact
  if len(r.con):
    mu, fric = con.mu[r.con], con.friction[r.con, :5] * r.tmask
    # an adhesive contact in its gap band is a condim-1 contact in a slot with cone rows: its
    # tangent rows are inactive (zero jar), and a cone of zero tangents with a positive mu is a
    # one-sided row on its normal, so the primal solver sees it with mu 1
    one = con.dim[r.con] == 1
    mu = jnp.where(one, 1.0, mu)
  else:
    mu, fric = jnp.zeros(0, dtype), jnp.zeros((0, 5), dtype)
    one = jnp.zeros(0, bool)
  return _Problem(
    J=sparse.jacobian(m, d) if J is None else J,
    D=jnp.where(d.efc_active, d.efc_D, 0.0),
    R=d.efc_R,
    floss=d.efc_frictionloss,
    aref=d.efc_aref,
    active=d.efc_active,
    mu=mu,
    fric=fric,
    one=one,
    M=d.M,
    qfrc_smooth=d.qfrc_smooth,
    qacc_smooth=d.qacc_smooth,
  )


def solve(m: Model, d: Data, layout: Any = None) -> Data:
  """qacc, efc_force, efc_state, qfrc_constraint, solver_niter, solver_neval (mj_fwdConstraint,
  mj_solPrimal).

  Reads efc_J (nefc, nv; or compact rows with efc_J_body), efc_D, efc_R, efc_frictionloss,
  efc_aref, efc_active (nefc,), qM and its L'DL factor qLD (nv, nv), qfrc_smooth, qacc_smooth,
  qacc_warmstart (nv,), contact mu and friction; `layout` is the static row layout (default the
  Model's, `m.layout`; any object with the fields of layout.EfcRows).
  Newton and CG: monolithic solve (MuJoCo with islands disabled); PGS: per constraint island, as
  MuJoCo (`jaxsim.pgs`). Rows with efc_active False take no part. Improvement and gradient tests
  are scaled by 1 / trace(qM), as mujoco 4.0.0 does (PGS: by 1 / the island's sum of diag(M)).
  qacc_warmstart is read, not written. solver_neval counts the line searches' cost evaluations
  (MuJoCo's mjSolverStat.neval, summed over iterations and islands; 0 for PGS). Below float64
  the stopping tests are also met at the rounding floor of the tested quantities
  (`slope_rounding`); float64 runs MuJoCo's tests unchanged. Derivatives (forward and reverse
  mode) are those of the solution by implicit differentiation (`_primal_jvp`), not of the
  iterations.
  """
  if layout is None:
    layout = layout_of(m)
    r = layout.rows
  else:
    r = row_classes(layout)
  nv, nefc = m.nv, r.nefc
  dtype = d.qacc_smooth.dtype
  jac = sparse.jacobian(m, d)
  if jac.shape != (nefc, nv):
    raise ValueError(f'efc_J has shape {d.efc_J.shape}; the layout needs {(nefc, nv)} rows')
  if nefc == 0 or nv == 0:
    return d.replace(
      qacc=d.qacc_smooth,
      qfrc_constraint=jnp.zeros(nv, dtype),
      efc_force=jnp.zeros(nefc, dtype),
      efc_state=jnp.zeros(nefc, jnp.int32),
      solver_niter=jnp.zeros((), jnp.int32),
      solver_neval=jnp.zeros((), jnp.int32),
    )
  solver = int(m.opt.solver)
  if solver not in (SolverType.PGS, SolverType.CG, SolverType.NEWTON):
    raise ValueError(f'solver {solver} is not supported: use Newton, CG or PGS')
  hess = hessian_sparsity(m, layout) if solver == SolverType.NEWTON else None
  cfg = _Config(
    newton=solver == SolverType.NEWTON,
    ellipse=int(m.opt.cone) == ConeType.ELLIPTIC and len(r.con) > 0,
    iterations=int(m.opt.iterations),
    ls_iterations=int(m.opt.ls_iterations),
    warmstart=not m.opt.disableflags & DisableBit.WARMSTART,
    hessian_rows=hessian_rows(m, nefc),
    ld=dynamics.ld_layout(m),
    hessian_ld=None if hess is None else dynamics.ld_layout_of(hess),
  )
  p = problem(m, d, r, jac)
  islands = not m.opt.disableflags & DisableBit.ISLAND
  if solver == SolverType.PGS:
    blk = pgs.blocks(m, layout, islands)
    x = _pgs_path(m, d, blk, p, cfg.ld)
    run = functools.partial(_pgs, cfg, r, blk)
    primal = jax.custom_jvp(run)
    primal.defjvp(functools.partial(_primal_jvp, cfg, r, run=run))
  else:
    blk = pgs.blocks(m, layout, islands)
    dof, row, inertia = _islands(m, d, blk, p, cfg.ld)
    x = _Path(d.qLD, d.qacc_warmstart, m.opt.tolerance, m.opt.ls_tolerance, dof, row, inertia)
    primal = jax.custom_jvp(functools.partial(_primal, cfg, r))
    primal.defjvp(functools.partial(_primal_jvp, cfg, r))
  qacc, force, state, niter, neval = primal(p, x)
  if solver != SolverType.PGS and islands and cfg.warmstart:
    # mujoco solves Newton/CG islands in island-local arrays and copies back only the forces:
    # its efc_state is left as the warm start's last mj_constraintUpdate wrote it, the zones at
    # qacc_smooth
    jar = p.J @ p.qacc_smooth - p.aref
    state = update_constraint(p, r, jar, False).state.astype(jnp.int32)
  if m.opt.noslip_iterations > 0:
    # the islands found for the main solve (unused labels get a unit inertia: they have no rows)
    row, inertia = (x.label, x.inertia) if solver == SolverType.PGS else (row, inertia)
    inertia = jnp.where(inertia > 0, inertia, 1.0)
    force, extra = noslip.solve(
      noslip.blocks(layout),
      p.J.dense(),  # its rows of J M^-1 are dense (nefc, nv) anyway
      cfg.ld,
      d.qLD,
      p.qacc_smooth,
      force,
      p.R,
      p.aref,
      p.floss,
      p.active,
      d.contact.friction[:, :5],
      int(m.opt.noslip_iterations),
      m.opt.noslip_tolerance,
      # per island, as mj_solNoSlip_island, scaled as the PGS islands (measured on mujoco 4.0.0)
      1.0 / inertia,
      row,
    )
    # the dual solvers' finish (mj_dualFinish): qacc from the forces, states from the forces
    qacc = p.qacc_smooth + dynamics.solve_sparse(cfg.ld, d.qLD, p.J.tmul(force))
    state = noslip.dual_state(
      force, int(layout.ne), int(layout.nf), p.floss, p.active, r.rows, p.mu, p.fric, p.one
    )
    niter = niter + extra
  return d.replace(
    qacc=qacc,
    qfrc_constraint=_jt(p.J, force, cfg.hessian_rows),
    efc_force=force,
    efc_state=state,
    solver_niter=niter,
    solver_neval=neval,
  )

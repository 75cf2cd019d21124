"""General convex collisions: MuJoCo 4's native CCD (GJK, EPA, multi-contact) as mjc_Convex.

Mirrors MuJoCo 4.0's engine_collision_gjk.c (mjc_ccd, mjc_multicontact) and
engine_collision_convex.c (mjc_Convex, mjc_penetration) with fixed iteration counts: every loop
runs `ccd_iterations` (static) steps as a `lax.scan` and iterations after MuJoCo would have
stopped are masked to no-ops, so the result is the same under jit, vmap and grad. The EPA
polytope lives in fixed arrays (5 + N vertices, 6 N faces for N = ccd_iterations, as
mjc_ccdSize sizes MuJoCo's buffer). Multi-contact clips face polygons (boxes, mesh polygons,
cylinder caps as 16-gons) against each other or against an edge in fixed-size buffers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import math
from jaxsim._src.collision import broadphase
from jaxsim._src.collision import support as sp
from jaxsim._src.collision.geom import NO_CONTACT, Contacts, GeomInfo, make_frame, polygon_quad
from jaxsim._src.enums import MAXVAL, MINVAL, GeomType

MINVAL2 = MINVAL * MINVAL
MAXVAL2 = MAXVAL * MAXVAL
FACE_TOL = 0.996  # mjFACE_TOL
EDGE_TOL = 0.0888  # mjEDGE_TOL
HORIZON = 24  # horizon edges MuJoCo can hold
FLOOD = 16  # flood-fill steps for the faces visible from a new EPA vertex

_S, _C, _E, _Y, _B, _M = (
  GeomType.SPHERE,
  GeomType.CAPSULE,
  GeomType.ELLIPSOID,
  GeomType.CYLINDER,
  GeomType.BOX,
  GeomType.MESH,
)

# (type1, type2) -> max contacts, for the pairs mjCOLLISIONFUNC sends to mjc_Convex: MuJoCo 4's
# maxContacts gives 4 to pairs of cylinders, boxes and meshes and 2 to a capsule against a
# cylinder, box or mesh (with or without margin), recovered in one pass by mjc_multicontact
CONVEX_PAIRS = {
  (_S, _E): 1,
  (_S, _M): 1,
  (_C, _E): 1,
  (_C, _Y): 2,
  (_C, _M): 2,
  (_E, _E): 1,
  (_E, _Y): 1,
  (_E, _B): 1,
  (_E, _M): 1,
  (_Y, _Y): 4,
  (_Y, _B): 4,
  (_Y, _M): 4,
  (_B, _M): 4,
  (_M, _M): 4,
}


# ------------------------------------------ small helpers ----------------------------------------


def iterate(step: Callable, init, length: int, running: Callable, early: bool):
  """length steps of step(state, k) -> state, whose state is frozen once running(state) is false.

  early: a while_loop that stops there (under vmap: when every item has; no reverse mode, for
  primal-only callers such as map_live's); otherwise a scan of all `length` steps.
  """
  if not early:
    return jax.lax.scan(lambda c, k: (step(c, k), None), init, jnp.arange(length))[0]

  def cond(c):
    return (c[0] < length) & running(c[1])

  return jax.lax.while_loop(cond, lambda c: (c[0] + 1, step(c[1], c[0])), (jnp.array(0), init))[1]


def _max_limit(x: jax.Array) -> jax.Array:
  """mjMAX_LIMIT (DBL_MAX) in x's dtype: FLT_MAX in float32, where DBL_MAX would overflow."""
  return jnp.array(jnp.finfo(x.dtype).max, x.dtype)


def _div(a: jax.Array, b: jax.Array) -> jax.Array:
  """a / b with b = 0 replaced by 1 (the result is masked by the caller there)."""
  return a / jnp.where(b == 0, 1.0, b)


def _sqrt(x: jax.Array) -> jax.Array:
  """sqrt with a finite gradient at 0."""
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _norm(v: jax.Array) -> jax.Array:
  return _sqrt(jnp.sum(v * v, axis=-1))


def normalize3(v: jax.Array) -> jax.Array:
  """mju_normalize3: (1, 0, 0) for a vector shorter than mjMINVAL."""
  n = _norm(v)
  small = n < MINVAL
  return jnp.where(small, jnp.array([1.0, 0.0, 0.0]), v / jnp.where(small, 1.0, n))


def _det3(a, b, c):
  return jnp.dot(a, jnp.cross(b, c))


def _same_sign(a, b):
  """sameSign2 != 0."""
  return ((a > 0) & (b > 0)) | ((a < 0) & (b < 0))


class Verts(NamedTuple):
  """Minkowski-difference vertices (the C Vertex struct), any leading shape."""

  vert: jax.Array  # (..., 3) v1 - v2
  vert1: jax.Array  # (..., 3)
  vert2: jax.Array  # (..., 3)
  index1: jax.Array  # (...,) vertex index on geom 1 (-1 for smooth geoms)
  index2: jax.Array  # (...,)


def _vget(v: Verts, i) -> Verts:
  return jax.tree_util.tree_map(lambda x: x[i], v)


def _vset(v: Verts, i, w: Verts) -> Verts:
  return jax.tree_util.tree_map(lambda x, y: x.at[i].set(y.astype(x.dtype)), v, w)


def _vwhere(c, a: Verts, b: Verts) -> Verts:
  return jax.tree_util.tree_map(lambda x, y: jnp.where(c, x, y), a, b)


Support = Callable[[jax.Array], tuple[jax.Array, jax.Array]]


class Obj(NamedTuple):
  """A geom as the CCD sees it: support function (unit direction -> point, index), centre."""

  support: Support
  center: jax.Array


def _support(o1: Obj, o2: Obj, d: jax.Array) -> Verts:
  """support(): S_{A-B}(d) = S_A(d) - S_B(-d)."""
  p1, i1 = o1.support(d)
  p2, i2 = o2.support(-d)
  return Verts(p1 - p2, p1, p2, i1, i2)


def _lincomb(lam: jax.Array, v: jax.Array) -> jax.Array:
  """lincomb for up to 4 vectors (unused coefficients are zero)."""
  return lam @ v


# ------------------------------------------ subdistance ------------------------------------------


def _project_origin_plane(v1, v2, v3):
  """projectOriginPlane: (projection of the origin on the plane, failed)."""
  d21, d31, d32 = v2 - v1, v3 - v1, v3 - v2

  def attempt(a, b, p):
    n = jnp.cross(a, b)
    nv, nn = jnp.dot(n, p), jnp.dot(n, n)
    return n * _div(nv, nn), nn == 0, (nv != 0) & (nn > MINVAL)

  # C's three attempts in turn, computed as one (vmap: a third of the program)
  r, z, ok = jax.vmap(attempt)(
    jnp.stack([d32, d21, d31]), jnp.stack([d21, d31, d32]), jnp.stack([v2, v1, v3])
  )
  res = jnp.where(ok[0], r[0], jnp.where(ok[1], r[1], r[2]))
  fail = z[0] | (~ok[0] & z[1])
  return res, fail


def _s1d(s1, s2):
  """S1D: barycentric coordinates (2,) of the point of segment s1 s2 closest to the origin."""
  diff = s2 - s1
  p_o = s2 - _div(jnp.dot(s2, diff), jnp.dot(diff, diff)) * diff
  mu = s1 - s2
  i1 = jnp.abs(mu[1]) >= jnp.abs(mu[0])
  mu01 = jnp.where(i1, mu[1], mu[0])
  idx = jnp.where(jnp.abs(mu[2]) >= jnp.abs(mu01), 2, jnp.where(i1, 1, 0))
  mu_max = mu[idx]
  c1 = p_o[idx] - s2[idx]
  c2 = s1[idx] - p_o[idx]
  same = _same_sign(mu_max, c1) & _same_sign(mu_max, c2)
  return jnp.where(same, jnp.stack([_div(c1, mu_max), _div(c2, mu_max)]), jnp.array([0.0, 1.0]))


def _closest(lams: jax.Array, pts: jax.Array, valid: jax.Array) -> jax.Array:
  """The candidate of smallest |x|^2 among valid ones (first on ties, as the C cascade)."""
  d = jnp.where(valid, jnp.sum(pts * pts, axis=-1), jnp.inf)
  return lams[jnp.argmin(d)]


# the coordinate pairs (i, j) of the three minors M14, M24, M34 of S2D and triAffineCoord
_MINOR_I, _MINOR_J = np.array([1, 0, 0]), np.array([2, 2, 1])


def _planar(s1, s2, s3, p):
  """S2D's and triAffineCoord's projection of triangle s1 s2 s3 and point p on the coordinate
  plane where the triangle is largest: (its signed area m_max, the signed areas (3,) of p with
  the edges s2 s3, s3 s1, s1 s2). Written on vectors of the three cases C spells out one by one
  (the same products and sums in the same order)."""
  i, j = _MINOR_I, _MINOR_J
  m = s2[i] * s3[j] - s2[j] * s3[i] - s1[i] * s3[j] + s1[j] * s3[i] + s1[i] * s2[j] - s1[j] * s2[i]
  mu = jnp.abs(m)
  c1 = (mu[0] >= mu[1]) & (mu[0] >= mu[2])
  c2 = ~c1 & (mu[1] >= mu[2])
  m_max = jnp.where(c1, m[0], jnp.where(c2, m[1], m[2]))
  xy = jnp.stack([jnp.where(c1, 1, 0), jnp.where(c1 | c2, 2, 1)])
  a1, a2, a3, q = jnp.stack([s1, s2, s3, p])[:, xy]
  a, b = jnp.stack([a2, a3, a1]), jnp.stack([a3, a1, a2])
  c = (
    q[0] * a[:, 1]
    + q[1] * b[:, 0]
    + a[:, 0] * b[:, 1]
    - q[0] * b[:, 1]
    - q[1] * a[:, 0]
    - b[:, 0] * a[:, 1]
  )
  return m_max, c


def _s2d(s1, s2, s3):
  """S2D: barycentric coordinates (3,) of the point of triangle s1 s2 s3 closest to the origin,
  and S1D's (3, 2) of its edges s2 s3, s1 s3, s1 s2."""
  p_o, fail = _project_origin_plane(s1, s2, s3)
  m_max, c = _planar(s1, s2, s3, p_o)
  comp = _same_sign(m_max, c)
  inside = jnp.all(comp)
  lam_in = _div(c, m_max)
  # the three edges opposite to each vertex
  ea = jnp.stack([s2, s1, s1])
  eb = jnp.stack([s3, s3, s2])
  l = jax.vmap(_s1d)(ea, eb)  # (3, 2)
  pts = l[:, :1] * ea + l[:, 1:] * eb
  cands = jnp.stack(
    [
      jnp.stack([0.0 * l[0, 0], l[0, 0], l[0, 1]]),
      jnp.stack([l[1, 0], 0.0 * l[1, 0], l[1, 1]]),
      jnp.stack([l[2, 0], l[2, 1], 0.0 * l[2, 0]]),
    ]
  )
  lam_out = _closest(cands, pts, ~comp)
  lam = jnp.where(inside, lam_in, lam_out)
  return jnp.where(fail, cands[2], lam), l


_ROWS4 = np.arange(4)[:, None]
_INSERT0 = np.array([[3, 0, 1, 2], [0, 3, 1, 2], [0, 1, 3, 2], [0, 1, 2, 3]])


def _s3d(s1, s2, s3, s4):
  """S3D: barycentric coordinates (4,) of the point of tetrahedron s1..s4 closest to the origin,
  with S2D's (4, 3) of its faces s2 s3 s4, s1 s3 s4, s1 s2 s4, s1 s2 s3 and their edges' S1D
  (4, 3, 2)."""
  c = jnp.stack([-_det3(s2, s3, s4), _det3(s1, s3, s4), -_det3(s1, s2, s4), _det3(s1, s2, s3)])
  m_det = jnp.sum(c)
  comp = _same_sign(m_det, c)
  inside = jnp.all(comp)
  lam_in = _div(c, m_det)
  tris = jnp.stack([jnp.stack(t) for t in ((s2, s3, s4), (s1, s3, s4), (s1, s2, s4), (s1, s2, s3))])
  lam, edges = jax.vmap(lambda t: _s2d(t[0], t[1], t[2]))(tris)  # (4, 3), (4, 3, 2)
  pts = jnp.einsum('ij,ijk->ik', lam, tris)
  # face i's coordinates with a zero for the vertex it lacks (a static gather)
  cands = jnp.concatenate([lam, jnp.zeros((4, 1), lam.dtype)], axis=1)[_ROWS4, _INSERT0]
  lam_out = _closest(cands, pts, ~comp)
  return jnp.where(inside, lam_in, lam_out), lam, edges


def _subdistance(n: jax.Array, s: jax.Array) -> jax.Array:
  """subdistance: barycentric coordinates (4,) of the closest point of the n-simplex s (4, 3).

  S3D solves S2D on every face of the tetrahedron and S1D on every face's edges, so the
  triangle's and the segment's answers are read from it (face s1 s2 s3, its edge s1 s2) instead
  of being traced and computed again; s[3] (and s[2]) may hold anything for n < 4 (n < 3)."""
  l3, faces, edges = _s3d(s[0], s[1], s[2], s[3])
  l2 = jnp.concatenate([faces[3], jnp.zeros(1)])
  l1 = jnp.concatenate([edges[3, 2], jnp.zeros(2)])
  l0 = jnp.array([1.0, 0.0, 0.0, 0.0])
  return jnp.where(n == 4, l3, jnp.where(n == 3, l2, jnp.where(n == 2, l1, l0)))


# ---------------------------------------------- GJK ----------------------------------------------


class _Gjk(NamedTuple):
  separated: jax.Array  # bool
  dist: jax.Array  # distance (0 if the origin is enclosed; mjMAX_LIMIT if separated early)
  x1: jax.Array  # (3,) witness on geom 1
  x2: jax.Array  # (3,)
  simplex: Verts  # (4,)
  nsimplex: jax.Array
  iterations: jax.Array


def gjk_scan(
  o1: Obj,
  o2: Obj,
  kmax: int,
  tol: jax.Array,
  discrete: jax.Array,
  get_dist: bool,
  dist_cutoff: jax.Array,
  early: bool = False,
) -> _Gjk:
  """gjk as a fixed-length scan (MuJoCo 4 runs it without the gjkIntersect fallback); early:
  stops once converged (iterate)."""
  x1_0, x2_0 = o1.center, o2.center
  x_k = x1_0 - x2_0
  eps = jnp.where(discrete, 0.0, 0.5 * tol * tol)
  min_norm = jnp.where(discrete, MINVAL, tol)
  z3 = jnp.zeros((4, 3))
  state = dict(
    k=jnp.array(0),
    running=jnp.array(True),
    returned=jnp.array(False),
    n=jnp.array(0),
    simplex=Verts(z3, z3, z3, -jnp.ones(4, jnp.int32), -jnp.ones(4, jnp.int32)),
    lam=jnp.zeros(4),
    x_k=x_k,
    x_norm=_norm(x_k),
    x_norm_prev=jnp.array(0.0),
  )

  def step(st, _k):
    n, simplex, x_k, x_norm = st['n'], st['simplex'], st['x_k'], st['x_norm']
    run = st['running']
    stop = (x_norm < min_norm) | (jnp.abs(st['x_norm_prev'] - x_norm) < MINVAL)
    s = _support(o1, o2, -x_k * _div(1.0, x_norm))
    simplex1 = _vset(simplex, n, s)
    gap = jnp.dot(x_k, x_k - s.vert) < eps
    lower = jnp.dot(x_k, s.vert)
    if get_dist:
      sep = (lower > 0) & (lower >= dist_cutoff * x_norm)
    else:
      sep = lower > 0
    lam = _subdistance(n + 1, simplex1.vert)
    keep = lam != 0
    order = jnp.argsort(~keep, stable=True)
    n_new = jnp.sum(keep)
    comp = _vget(simplex1, order)
    lam_c = jnp.where(jnp.arange(4) < n_new, lam[order], 0.0)
    xk_new = _lincomb(lam_c, comp.vert)

    go = run & ~stop & ~gap & ~sep
    ok = go & (n_new >= 1)
    new = dict(st)
    new['simplex'] = _vwhere(ok, comp, _vwhere(run & ~stop, simplex1, simplex))
    new['n'] = jnp.where(ok, n_new, n)
    new['lam'] = jnp.where(ok, lam_c, st['lam'])
    new['x_k'] = jnp.where(ok, xk_new, x_k)
    new['x_norm_prev'] = jnp.where(ok, x_norm, st['x_norm_prev'])
    new['x_norm'] = jnp.where(ok, _norm(xk_new), x_norm)
    new['returned'] = st['returned'] | (run & ~stop & ~gap & sep) | (go & (n_new < 1))
    new['running'] = ok & (n_new < 4)
    new['k'] = st['k'] + (ok & (n_new < 4)).astype(int)
    return new

  state = iterate(step, state, kmax, lambda st: st['running'], early)
  returned = state['returned']
  n, lam, simplex = state['n'], state['lam'], state['simplex']
  x1 = jnp.where(n > 0, _lincomb(lam, simplex.vert1), x1_0)
  x2 = jnp.where(n > 0, _lincomb(lam, simplex.vert2), x2_0)
  x_k, x_norm = state['x_k'], state['x_norm']
  tmp = _support(o1, o2, -x_k * _div(1.0, x_norm))
  sep_final = jnp.dot(x_k, tmp.vert) > 0
  return _Gjk(
    separated=returned | sep_final,
    dist=jnp.where(returned, _max_limit(x_norm), jnp.where((n == 4) & ~sep_final, 0.0, x_norm)),
    x1=jnp.where(returned, x1_0, x1),
    x2=jnp.where(returned, x2_0, x2),
    simplex=simplex,
    nsimplex=jnp.where(returned, 0, n),
    iterations=state['k'],
  )


def gjk_two(
  objs: Callable[[jax.Array], tuple[Obj, Obj]],
  kmax: int,
  tol: jax.Array,
  discrete: jax.Array,
  cutoff: jax.Array,
  early: bool = False,
) -> tuple[_Gjk, _Gjk]:
  """Two gjk_scan runs as one program: run i on the objects objs(i == 1), with discrete[i] and
  dist_cutoff cutoff[i] (get_dist; a run without it is one with cutoff 0, since lower > 0
  implies lower >= 0). mjc_ccd's GJK on the bare cores and on the inflated geoms, traced and
  compiled once (vmap over the two runs) instead of twice."""

  def run(core, disc, cut):
    o1, o2 = objs(core)
    return gjk_scan(o1, o2, kmax, tol, disc, True, cut, early)

  out = jax.vmap(run)(jnp.array([False, True]), discrete, cutoff)
  return _gjk_lane(out, 0), _gjk_lane(out, 1)


def _gjk_lane(g: _Gjk, i: int) -> _Gjk:
  return jax.tree_util.tree_map(lambda x: x[i], g)


# ---------------------------------------------- EPA ----------------------------------------------


class _Poly(NamedTuple):
  """EPA polytope in fixed arrays."""

  verts: Verts  # (NV,)
  nverts: jax.Array
  fverts: jax.Array  # (NF, 3) int vertex indices
  fadj: jax.Array  # (NF, 3) int adjacent faces across edges [v1 v2], [v2 v3], [v3 v1]
  fv: jax.Array  # (NF, 3) projection of the origin on the face
  fdist2: jax.Array  # (NF,)
  alive: jax.Array  # (NF,) bool, not deleted
  inmap: jax.Array  # (NF,) bool, a candidate for the closest face
  nfaces: jax.Array
  center: jax.Array  # (3,)


def _attach(verts: jax.Array, center: jax.Array, a, b, c):
  """attachFace geometry for face (a, b, c) of points verts: (v, dist2); dist2 = 0 if degenerate."""
  v, fail = _project_origin_plane(verts[c], verts[b], verts[a])
  v = jnp.where(jnp.dot(v, verts[a] - center) < 0, -v, v)
  d2 = jnp.dot(v, v)
  return jnp.where(fail, 0.0, v), jnp.where(fail, 0.0, d2)


def _epa_support(o1: Obj, o2: Obj, d: jax.Array, dnorm: jax.Array) -> Verts:
  """epaSupport: support along d / dnorm, (1, 0, 0) if dnorm is tiny."""
  ok = dnorm > MINVAL
  dr = jnp.where(ok, d / jnp.where(ok, dnorm, 1.0), jnp.array([1.0, 0.0, 0.0]))
  return _support(o1, o2, dr)


def _new_poly(nv: int, nf: int, verts: Verts, center: jax.Array, faces, adjs) -> _Poly:
  """A polytope holding `verts` and the given initial faces (all in the map)."""
  nv0 = verts.vert.shape[0]
  pad = (
    lambda x, fill: jnp.concatenate(  # noqa: E731
      [x, jnp.full((nv - nv0,) + x.shape[1:], fill, x.dtype)]
    )
  )
  allv = Verts(
    pad(verts.vert, 0.0),
    pad(verts.vert1, 0.0),
    pad(verts.vert2, 0.0),
    pad(verts.index1, -1),
    pad(verts.index2, -1),
  )
  nf0 = len(faces)
  fverts = np.zeros((nf, 3), np.int32)
  fverts[:nf0] = faces
  fadj = np.zeros((nf, 3), np.int32)
  fadj[:nf0] = adjs
  # every face's attachFace at once
  fa = jnp.asarray(np.asarray(faces, np.int32))
  fv, fd2 = jax.vmap(lambda a, b, c: _attach(verts.vert, center, a, b, c))(*fa.T)
  fv = jnp.concatenate([fv, jnp.zeros((nf - nf0, 3), fv.dtype)])
  fd2 = jnp.concatenate([fd2, jnp.zeros(nf - nf0, fd2.dtype)])
  live = jnp.arange(nf) < nf0
  return _Poly(
    allv,
    jnp.array(nv0),
    jnp.asarray(fverts),
    jnp.asarray(fadj),
    fv,
    fd2,
    live,
    live,
    jnp.array(nf0),
    center,
  )


_HEX3 = ((4, 0, 1), (4, 2, 0), (4, 1, 2), (3, 1, 0), (3, 0, 2), (3, 2, 1))
_HEX_ADJ = ((1, 3, 2), (2, 4, 0), (0, 5, 1), (5, 0, 4), (3, 1, 5), (4, 2, 3))
_HEX2 = ((0, 2, 3), (0, 4, 2), (0, 3, 4), (1, 3, 2), (1, 2, 4), (1, 4, 3))
_TET = ((0, 1, 2), (0, 3, 1), (0, 2, 3), (3, 2, 1))
_TET_ADJ = ((1, 3, 2), (2, 3, 0), (0, 3, 1), (2, 0, 1))


def _tri_affine(v1, v2, v3, p):
  """triAffineCoord: affine coordinates (3,) of p on triangle v1 v2 v3."""
  m_max, c = _planar(v1, v2, v3, p)
  return _div(c, m_max)


def _tri_point(v1, v2, v3, p):
  """triPointIntersect."""
  lam = _tri_affine(v1, v2, v3, p)
  pr = lam[0] * v1 + lam[1] * v2 + lam[2] * v3
  return jnp.all(lam >= 0) & (_norm(pr - p) < MINVAL)


def _same_side(p0, p1, p2, p3):
  n = jnp.cross(p1 - p0, p2 - p0)
  d1, d2 = jnp.dot(n, p3 - p0), jnp.dot(n, -p0)
  return ((d1 > 0) & (d2 > 0)) | ((d1 < 0) & (d2 < 0))


# testTetra's four sameSide tests: the vertices in cyclic order from each one
_CYCLIC4 = np.array([[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2]])


def _test_tetra(p0, p1, p2, p3):
  p = jnp.stack([p0, p1, p2, p3])[_CYCLIC4]  # (4 tests, 4 points, 3)
  return jnp.all(jax.vmap(_same_side)(p[:, 0], p[:, 1], p[:, 2], p[:, 3]))


def _polytope3(o1, o2, tri: Verts, nv: int, nf: int) -> tuple[_Poly, jax.Array]:
  """polytope3: hexahedron around a triangle containing the origin; (polytope, ok)."""
  v1, v2, v3 = tri.vert
  center = (v1 + v2 + v3) * (1.0 / 3.0)
  n = jnp.cross(v2 - v1, v3 - v1)
  n_norm = _norm(n)
  # s5 (along -n) and s4 (along n) as one support call
  s54 = jax.vmap(lambda d: _epa_support(o1, o2, d, n_norm))(jnp.stack([-n, n]))
  s5, s4 = _vget(s54, 0), _vget(s54, 1)
  verts = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), tri, s54)
  pt = _new_poly(nv, nf, verts, center, _HEX3, _HEX_ADJ)
  ok = n_norm >= MINVAL
  ok &= ~_tri_point(v1, v2, v3, s4.vert) & ~_tri_point(v1, v2, v3, s5.vert)
  ok &= jnp.all(pt.fdist2[:6] >= MINVAL2)
  return pt, ok


def _rotmat(axis):
  """rotmat: 120 degree rotation about axis."""
  u = axis / _norm(axis)
  s, c = 0.86602540378, -0.5
  u1, u2, u3 = u
  return jnp.array(
    [
      [c + u1 * u1 * (1 - c), u1 * u2 * (1 - c) - u3 * s, u1 * u3 * (1 - c) + u2 * s],
      [u2 * u1 * (1 - c) + u3 * s, c + u2 * u2 * (1 - c), u2 * u3 * (1 - c) - u1 * s],
      [u1 * u3 * (1 - c) - u2 * s, u2 * u3 * (1 - c) + u1 * s, c + u3 * u3 * (1 - c)],
    ]
  )


def _ray_triangle(v1, v2, v3, v4, v5):
  """rayTriangle != 0."""
  d12, d13, d14, d15 = v2 - v1, v3 - v1, v4 - v1, v5 - v1
  a, b, c = _det3(d13, d14, d12), _det3(d14, d15, d12), _det3(d15, d13, d12)
  return ((a >= 0) & (b >= 0) & (c >= 0)) | ((a <= 0) & (b <= 0) & (c <= 0))


def _first_bad(d2: jax.Array, thresh: float) -> tuple[jax.Array, jax.Array]:
  """Index of the first face with dist2 < thresh, and whether there is one."""
  bad = d2 < thresh
  return jnp.argmax(bad), jnp.any(bad)


def polytope(o1, o2, g: _Gjk, nv: int, nf: int) -> tuple[_Poly, jax.Array]:
  """polytope2/3/4 for the GJK simplex, with their fallbacks to polytope3; (polytope, ok)."""
  simplex = g.simplex
  # polytope4
  s4 = simplex
  c4 = (s4.vert[0] + s4.vert[1] + s4.vert[2] + s4.vert[3]) * 0.25
  pt4 = _new_poly(nv, nf, s4, c4, _TET, _TET_ADJ)
  j4, bad4 = _first_bad(pt4.fdist2[:4], MINVAL2)
  ok4 = _test_tetra(*s4.vert)
  # polytope2
  v1, v2 = simplex.vert[0], simplex.vert[1]
  diff = v2 - v1
  index = jnp.argmin(jnp.abs(diff))
  d1 = jnp.cross(jnp.eye(3)[index], diff)
  rot = _rotmat(diff)
  d2 = rot @ d1
  d3 = rot @ d2
  sup = jax.vmap(lambda d: _epa_support(o1, o2, d, _norm(d)))(jnp.stack([d1, d2, d3]))
  s2 = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[:2], b]), simplex, sup)
  pt2 = _new_poly(nv, nf, s2, (v1 + v2) * 0.5, _HEX2, _HEX_ADJ)
  j2, bad2 = _first_bad(pt2.fdist2[:6], MINVAL2)
  ok2 = _ray_triangle(*s2.vert)
  # the triangle for polytope3
  tet = jnp.array(_TET)
  hex2 = jnp.array(_HEX2)
  tri_idx = jnp.where(
    g.nsimplex == 4, tet[j4], jnp.where(g.nsimplex == 2, hex2[j2], jnp.array([0, 1, 2]))
  )
  tri = _vwhere(g.nsimplex == 2, _vget(s2, tri_idx), _vget(s4, jnp.minimum(tri_idx, 3)))
  pt3, ok3 = _polytope3(o1, o2, tri, nv, nf)
  use3 = (g.nsimplex == 3) | ((g.nsimplex == 4) & bad4) | ((g.nsimplex == 2) & bad2)
  use4 = (g.nsimplex == 4) & ~bad4
  pt = jax.tree_util.tree_map(
    lambda a, b, c: jnp.where(use3, a, jnp.where(use4, b, c)), pt3, pt4, pt2
  )
  ok = jnp.where(use3, ok3, jnp.where(use4, ok4, ok2))
  return pt, ok


def epa_scan(
  o1, o2, pt: _Poly, kmax: int, tol: jax.Array, discrete: jax.Array, early: bool = False
):
  """epa as a fixed-length scan (early: stops once done, iterate); (polytope, closest face
  index, found)."""
  nf = pt.fdist2.shape[0]
  tol = jnp.where(discrete, MINVAL, tol)
  fidx = jnp.arange(nf)

  def step(carry, k):
    pt, face, upper, upper2, done, null = carry
    pface = face
    cand = jnp.where(pt.inmap & pt.alive, pt.fdist2, jnp.inf)
    face_k = jnp.argmin(cand)
    lower2 = cand[face_k]
    anyface = jnp.isfinite(lower2)
    invalid = (lower2 > upper2) | ~anyface
    face = jnp.where(invalid, pface, face_k)
    on_hull = ~invalid & (lower2 <= 0)
    lower = _sqrt(lower2)
    fv = pt.fv[face_k]
    w = _epa_support(o1, o2, fv, lower)
    upper_k = _div(jnp.dot(fv, w.vert), lower)
    upper_new = jnp.minimum(upper_k, upper)
    upper2_new = jnp.where(upper_k < upper, upper_k * upper_k, upper2)
    # MuJoCo 4 tests convergence on this iteration's upper bound
    conv = upper_k - lower < tol
    conv_null = conv & (k == 0) & (upper_k < lower - 1e-10)
    repeated = discrete & jnp.any(
      (pt.verts.index1 == w.index1)
      & (pt.verts.index2 == w.index2)
      & (jnp.arange(len(pt.verts.index1)) < pt.nverts)
    )
    wi = pt.nverts
    verts = _vset(pt.verts, wi, w)
    # horizon: faces visible from w connected to the closest face
    visible = pt.alive & (pt.fv @ w.vert - pt.fdist2 > MINVAL)
    dele = fidx == face_k

    def flood(c, _k):
      dl, _ = c
      new = dl | (visible & jnp.any(dl[pt.fadj], axis=1))
      return new, jnp.any(new != dl)

    dele = iterate(flood, (dele, jnp.array(True)), FLOOD, lambda c: c[1], early)[0]
    hmask = (dele[:, None] & ~dele[pt.fadj]).reshape(-1)
    count = jnp.cumsum(hmask.astype(jnp.int32))
    nedges = count[-1]
    # the first HORIZON horizon edges in order, by a gather (math.ranked): as a scatter this
    # was a tenth of dog's step on the CPU (XLA runs a scatter as a loop over its updates)
    src = math.ranked(count, 0, HORIZON)
    src = jnp.where(src < nf * 3, src, 0)
    hvalid = jnp.arange(HORIZON) < nedges
    f_del, e_del = src // 3, src % 3
    g = pt.fadj[f_del, e_del]  # horizon face
    a = pt.fverts[f_del, e_del]  # edge (a, b) of the deleted face = (v2, v1) of the new face
    b = pt.fverts[f_del, (e_del + 1) % 3]
    eg = jnp.argmax(pt.fverts[g] == b[:, None], axis=1)  # getEdge(g, b)
    newid = pt.nfaces + jnp.arange(HORIZON)
    # new face (w, a, b): edge (w, a) -> new face with b' = a; edge (b, w) -> new face with a' = b
    m_prev = (b[None, :] == a[:, None]) & hvalid[None, :]
    m_next = (a[None, :] == b[:, None]) & hvalid[None, :]
    prev = pt.nfaces + jnp.argmax(m_prev, axis=1)
    nxt = pt.nfaces + jnp.argmax(m_next, axis=1)
    nfv, nfd2 = jax.vmap(lambda a_, b_: _attach(verts.vert, pt.center, wi, a_, b_))(a, b)
    zero_new = jnp.any(hvalid & (nfd2 == 0))
    room = nedges <= nf - pt.nfaces
    tgt = jnp.where(hvalid, newid, nf)
    newf = jnp.stack([jnp.full_like(a, wi), a, b], 1).astype(pt.fverts.dtype)
    fverts = pt.fverts.at[tgt].set(newf, mode='drop')
    fadj = pt.fadj.at[tgt].set(jnp.stack([prev, g, nxt], 1).astype(pt.fadj.dtype), mode='drop')
    fadj = fadj.at[jnp.where(hvalid, g, nf), eg].set(newid.astype(fadj.dtype), mode='drop')
    fv_all = pt.fv.at[tgt].set(nfv, mode='drop')
    fd2_all = pt.fdist2.at[tgt].set(nfd2, mode='drop')
    inm = (nfd2 >= lower2) & (nfd2 <= upper2_new)
    alive = (pt.alive & ~dele).at[tgt].set(True, mode='drop')
    inmap = (pt.inmap & ~dele).at[tgt].set(inm, mode='drop')
    expanded = _Poly(
      verts,
      pt.nverts + 1,
      fverts,
      fadj,
      fv_all,
      fd2_all,
      alive,
      inmap,
      pt.nfaces + nedges,
      pt.center,
    )

    go = ~done & ~invalid & ~on_hull & ~conv & ~repeated
    few = go & (nedges < 3)
    full = go & ~few & ~room
    attach = go & ~few & ~full
    empty = attach & ~jnp.any(inmap & alive)
    null_new = null | (~done & ~invalid & ~on_hull & conv_null) | few | (attach & zero_new)
    pt_new = jax.tree_util.tree_map(lambda x, y: jnp.where(attach, x, y), expanded, pt)
    done_new = done | ~attach | empty | zero_new
    face_out = jnp.where(done, carry[1], face)
    upd = ~done & ~invalid
    return (
      pt_new,
      face_out,
      jnp.where(upd, upper_new, upper),
      jnp.where(upd, upper2_new, upper2),
      done_new,
      null_new,
    )

  init = (
    pt,
    jnp.array(-1),
    _max_limit(pt.fdist2),
    _max_limit(pt.fdist2),
    jnp.array(False),
    jnp.array(False),
  )
  pt, face, _, _, _, null = iterate(step, init, kmax, lambda c: ~c[4], early)
  return pt, face, (face >= 0) & ~null


def epa_witness(pt: _Poly, face: jax.Array):
  """epaWitness: (x1, x2, dist)."""
  fv = pt.fverts[face]
  vs = _vget(pt.verts, fv)
  lam = _tri_affine(vs.vert[0], vs.vert[1], vs.vert[2], pt.fv[face])
  return lam @ vs.vert1, lam @ vs.vert2, -_sqrt(pt.fdist2[face])


# ------------------------------------------- mjc_ccd ---------------------------------------------


def _obj(info: GeomInfo, gtype, margin: jax.Array, shrink: bool = False) -> Obj:
  """mjc_initCCDObj: support with margin/2 inflation, or the shrunk sphere/capsule core."""
  if not shrink:
    return Obj(lambda d: sp.support(info, gtype, d, margin), info.pos)
  if isinstance(gtype, (int, np.integer)):
    if gtype == _S:
      return Obj(lambda d: sp.point_support(info, d), info.pos)
    if gtype == _C:
      return Obj(lambda d: sp.line_support(info, d), info.pos)
    return Obj(lambda d: sp.support(info, gtype, d, margin), info.pos)

  def sup(d):
    full = sp.support(info, gtype, d, margin)
    line = sp.line_support(info, d)
    p = jnp.where(
      sp.is_type(gtype, (_S,)), info.pos, jnp.where(sp.is_type(gtype, (_C,)), line[0], full[0])
    )
    return p, jnp.where(sp.is_type(gtype, (_S, _C)), -1, full[1])

  return Obj(sup, info.pos)


def obj_lane(info: GeomInfo, gtype, margin: jax.Array, core: jax.Array) -> Obj:
  """_obj(info, gtype, margin) where core is false, _obj(info, gtype, 0, shrink=True) where it
  is true (traced: gjk_two's choice between its runs; also the height field's geom side)."""
  mg = jnp.where(core, 0.0, margin)
  if sp.is_type(gtype, (_S, _C)) is False:
    return Obj(lambda d: sp.support(info, gtype, d, mg), info.pos)

  def sup(d):
    full = sp.support(info, gtype, d, mg)
    line = sp.line_support(info, d)
    sphere, capsule = core & sp.is_type(gtype, (_S,)), core & sp.is_type(gtype, (_C,))
    p = jnp.where(sphere, info.pos, jnp.where(capsule, line[0], full[0]))
    return p, jnp.where(core & sp.is_type(gtype, (_S, _C)), -1, full[1])

  return Obj(sup, info.pos)


class _Ccd(NamedTuple):
  ok: jax.Array  # bool: a penetration (of the margin-inflated geoms) was found
  dist: jax.Array  # signed distance of the inflated geoms (< 0 when ok)
  x1: jax.Array  # (3,) witness on geom 1
  x2: jax.Array  # (3,)
  simplex: Verts  # (3,) final simplex: the closest EPA face, or GJK's simplex when shallow
  nsimplex: jax.Array  # its vertex count (0: multi-contact is not attempted)


class _Cores(NamedTuple):
  """mjc_ccd's first stage: GJK on the inflated geoms, and the answer from their cores."""

  g: _Gjk | None  # GJK on the margin-inflated geoms (EPA's start; None: left to EPA's stage)
  use: jax.Array  # bool: the cores are apart, `shallow` is the answer
  need: jax.Array  # bool: EPA decides (GJK found the inflated geoms overlapping, cores or not)
  shallow: _Ccd


def _penetration_gjk(
  g1: GeomInfo,
  g2: GeomInfo,
  t1,
  t2,
  margin: jax.Array,
  kmax: int,
  tol: jax.Array,
  early: bool = False,
) -> _Cores:
  """GJK of mjc_ccd (dist_cutoff 0): whether EPA is needed, and the contact when it is not."""
  round1, round2 = sp.is_type(t1, (_S, _C)), sp.is_type(t2, (_S, _C))
  # MuJoCo 4 first runs GJK distance on the bare geoms (spheres and capsules shrunk to a point
  # and a segment, margins removed) and inflates its witness points; only when those cores
  # overlap does it fall back to GJK + EPA on the full, margin-inflated geoms
  shrink = jnp.asarray(round1 | round2) | (margin > 0)
  fm1 = jnp.where(round1, g1.size[0], 0.0) + 0.5 * margin
  fm2 = jnp.where(round2, g2.size[0], 0.0) + 0.5 * margin
  bare = jnp.asarray(sp.is_type(t1, (_B, _M)) & sp.is_type(t2, (_B, _M)))
  g = None
  if (round1 | round2) is not True:
    # both GJK runs (the inflated geoms, EPA's start, and the cores) as one program
    discrete = jnp.asarray(sp.is_type(t1, (_B, _M)) & sp.is_type(t2, (_B, _M))) & (margin == 0)
    g, gd = gjk_two(
      lambda core: (obj_lane(g1, t1, margin, core), obj_lane(g2, t2, margin, core)),
      kmax,
      tol,
      jnp.stack([discrete, bare]),
      jnp.stack([jnp.zeros_like(fm1), fm1 + fm2]),
      early,
    )
  else:
    c1 = _obj(g1, t1, 0.0, shrink=True)
    c2 = _obj(g2, t2, 0.0, shrink=True)
    gd = gjk_scan(c1, c2, kmax, tol, bare, True, fm1 + fm2, early)
  n = normalize3(gd.x2 - gd.x1)
  dist = gd.dist - (fm1 + fm2)
  use = shrink & (gd.dist > tol)
  shallow = _Ccd(
    dist < 0,
    dist,
    gd.x1 + fm1 * n,
    gd.x2 - fm2 * n,
    jax.tree_util.tree_map(lambda a: a[:3], gd.simplex),
    jnp.where(dist < 0, gd.nsimplex, 0),
  )
  if g is None:
    # a sphere or capsule always goes to its core first: GJK on the inflated geoms only
    # matters where the cores overlap, and runs there with EPA
    return _Cores(None, use, ~use, shallow)
  run_epa = (g.dist <= tol) & (g.nsimplex > 1) & ~g.separated
  return _Cores(g, use, run_epa & ~use, shallow)


def _penetration_epa(
  g1: GeomInfo,
  g2: GeomInfo,
  t1,
  t2,
  margin: jax.Array,
  kmax: int,
  tol: jax.Array,
  g,
  early: bool = False,
) -> _Ccd:
  """EPA of mjc_ccd from GJK's simplex g (None: run GJK first): the penetration of the
  margin-inflated geoms."""
  discrete = jnp.asarray(sp.is_type(t1, (_B, _M)) & sp.is_type(t2, (_B, _M))) & (margin == 0)
  o1, o2 = _obj(g1, t1, margin), _obj(g2, t2, margin)
  if g is None:
    g = gjk_scan(o1, o2, kmax, tol, discrete, False, jnp.array(0.0), early)
  nv, nf = 5 + kmax, 6 * kmax
  run_epa = (g.dist <= tol) & (g.nsimplex > 1) & ~g.separated
  pt, ok = polytope(o1, o2, g, nv, nf)
  pt, face, found = epa_scan(o1, o2, pt, kmax, tol, discrete, early)
  face = jnp.maximum(face, 0)
  x1, x2, dist = epa_witness(pt, face)
  epa_ok = run_epa & ok & found & (dist < 0)
  tri = _vget(pt.verts, pt.fverts[face])
  return _Ccd(epa_ok, dist, x1, x2, tri, jnp.where(epa_ok, 3, 0))


def _merge(c: _Cores, e: _Ccd) -> _Ccd:
  """The cores' answer where they are apart, EPA's elsewhere."""
  return jax.tree_util.tree_map(lambda a, b: jnp.where(c.use, a, b), c.shallow, e)


def _penetration(
  g1: GeomInfo, g2: GeomInfo, t1, t2, margin: jax.Array, kmax: int, tol: jax.Array
) -> _Ccd:
  """mjc_ccd with dist_cutoff 0 (penetration only): one contact and its simplex."""
  c = _penetration_gjk(g1, g2, t1, t2, margin, kmax, tol)
  return _merge(c, _penetration_epa(g1, g2, t1, t2, margin, kmax, tol, c.g))


def _contact(c: _Ccd, margin: jax.Array):
  """mjc_penetration's contact from witness points: (dist, pos, normal)."""
  dist = jnp.where(c.ok, margin + c.dist, NO_CONTACT)
  pos = 0.5 * (c.x1 + c.x2)
  normal = normalize3(c.x1 - c.x2)
  return dist, pos, normal


# ---------------------------------------- multi-contact ------------------------------------------


def _simplex_dim(idx: jax.Array, pts: jax.Array, n: jax.Array):
  """simplexDim on the first n (1-3) simplex vertices: (dim, ids (3,), points (3, 3))."""
  pick = jnp.stack([0 * n, jnp.where(n >= 2, 1, 0), jnp.where(n > 2, 2, 0)])
  vi, v = idx[pick], pts[pick]
  same01 = vi[0] == vi[1]
  dim = jnp.where(
    same01,
    jnp.where(vi[0] == vi[2], 1, 2),
    jnp.where((vi[2] == vi[0]) | (vi[2] == vi[1]), 2, 3),
  )
  # two equal leading ids: the third vertex moves into the second slot
  move = same01 & (vi[0] != vi[2])
  vi = vi.at[1].set(jnp.where(move, vi[2], vi[1]))
  v = v.at[1].set(jnp.where(move, v[2], v[1]))
  return dim, vi, v


def _clip_planes(face: jax.Array, nface: jax.Array, n: jax.Array) -> jax.Array:
  """planeNormal for every edge of a polygon: unit normals (k, 3) of its side planes."""
  k = face.shape[0]
  i = jnp.arange(k)
  v1 = face
  v2 = face[jnp.where(i == nface - 1, 0, jnp.minimum(i + 1, k - 1))]
  res = jnp.cross(v2 - v1, (v1 + n) - v1)
  return jax.vmap(normalize3)(res)


def _polygon_clip(face, nface, subj, nsubj, n, margin, cap: int, early: bool = False):
  """polygonClip's Sutherland-Hodgman loop and margin prune: (points (cap, 3), count); early:
  the loop stops after the face's nface edges (iterate)."""
  pn = _clip_planes(face, nface, n)
  poly = jnp.zeros((cap, 3)).at[: subj.shape[0]].set(subj)
  idx = jnp.arange(cap)

  def clip(carry, e):
    poly, k = carry
    a, pe = face[e], pn[e]
    q = poly[jnp.where(idx < k - 1, idx + 1, 0)]
    dp, dq = (poly - a) @ pe, (q - a) @ pe
    inp, inq = dp > -MINVAL, dq > -MINVAL
    act = idx < k
    den = dp - dq
    t = dp / jnp.where(den != 0, den, 1.0)
    oki = act & (inp != inq) & (den != 0) & (t >= 0) & (t <= 1)
    okq = act & inq
    cnt = oki.astype(int) + okq.astype(int)
    off = jnp.cumsum(cnt) - cnt
    pi = t[:, None] * (q - poly) + poly
    new = jnp.zeros_like(poly).at[jnp.where(oki, off, cap)].set(pi, mode='drop')
    new = new.at[jnp.where(okq, off + oki, cap)].set(q, mode='drop')
    live = e < nface
    k2 = jnp.minimum(jnp.sum(cnt), cap).astype(k.dtype)
    return jnp.where(live, new, poly), jnp.where(live, k2, k)

  nedge = face.shape[0]
  poly, k = iterate(
    lambda c, e: clip(c[:2], e) + (e + 1 < nface,),
    (poly, jnp.asarray(nsubj, int), nface > 0),
    nedge,
    lambda c: c[2],
    early,
  )[:2]
  # keep the vertices within the margin of the clipping face
  keep = (idx < k) & (margin >= (poly - face[0]) @ n)
  pos = jnp.cumsum(keep) - 1
  out = jnp.zeros_like(poly).at[jnp.where(keep, pos, cap)].set(poly, mode='drop')
  return out, jnp.sum(keep)


def _farthest_pair(poly: jax.Array, n: jax.Array) -> jax.Array:
  """The first pair (i < j) of the n points farthest apart: ids (2,)."""
  k = poly.shape[0]
  p = jax.lax.stop_gradient(poly)
  d2 = jnp.sum((p[None, :] - p[:, None]) ** 2, axis=-1)
  i, j = jnp.arange(k)[:, None], jnp.arange(k)[None, :]
  d2 = jnp.where((i < j) & (j < n), d2, -1.0)
  # strictly larger than 0 replaces the initial pair (0, 1), first maximum wins
  flat = jnp.argmax(d2.reshape(-1))
  ok = d2.reshape(-1)[flat] > 0
  return jnp.where(ok, jnp.stack([flat // k, flat % k]), jnp.array([0, 1]))


class _Multi(NamedTuple):
  count: jax.Array  # number of contacts (0: keep the single contact)
  dist: jax.Array  # (maxcon,)
  x1: jax.Array  # (maxcon, 3)
  x2: jax.Array  # (maxcon, 3)


def _multicontact(
  g1, g2, t1, t2, p1, p2, c: _Ccd, margin, maxcon: int, maxcon_t, early: bool = False
) -> _Multi:
  """mjc_multicontact: contacts of aligned faces or an edge on a face, clipped as polygons."""
  z1 = sp.feature_sizes(t1, p1)
  z2 = sp.feature_sizes(t2, p2)
  dim1, v1i, v1 = _simplex_dim(c.simplex.index1, c.simplex.vert1, c.nsimplex)
  dim2, v2i, v2 = _simplex_dim(c.simplex.index2, c.simplex.vert2, c.nsimplex)
  d = c.x2 - c.x1
  dneg = c.x1 - c.x2
  n1, id1, ok1 = sp.face_normals(g1, t1, p1, dim1, v1i, dneg, z1.nnormal)
  n2, id2, ok2 = sp.face_normals(g2, t2, p2, dim2, v2i, d, z2.nnormal)
  nn1, nn2 = jnp.sum(ok1), jnp.sum(ok2)

  # aligned faces: the most opposed pair, each facing the other geom
  tol = _norm(d) * sp.EDGE_TOL
  dots = n1 @ n2.T
  face_ok = ok1[:, None] & ok2[None, :] & (n1 @ d < -tol)[:, None] & (tol < n2 @ d)[None, :]
  face_ok &= dots < -sp.FACE_TOL
  flat = jnp.argmin(jnp.where(face_ok, dots, jnp.inf).reshape(-1))
  fi, fj = flat // n2.shape[0], flat % n2.shape[0]
  aligned = jnp.any(face_ok)

  # otherwise an edge of one geom lying on a face of the other
  e1, end1, s1, eok1 = sp.edge_dirs(g1, t1, p1, dim1, v1i, v1, c.x1, margin, z1.nedge)
  e2, end2, s2, eok2 = sp.edge_dirs(g2, t2, p2, dim2, v2i, v2, c.x2, margin, z2.nedge)
  hit1 = ok2[:, None] & eok1[None, :] & (n2 @ d > MINVAL)[:, None]
  hit1 &= jnp.abs(n2 @ e1.T) < sp.EDGE_TOL
  hit2 = ok1[:, None] & eok2[None, :] & (n1 @ dneg > MINVAL)[:, None]
  hit2 &= jnp.abs(n1 @ e2.T) < sp.EDGE_TOL
  try1 = (dim1 != 3) & (nn2 > 0) & jnp.any(hit1)
  try2 = (dim2 != 3) & (nn1 > 0) & jnp.any(hit2)
  first2 = (nn1 != 0) & (dim2 != 3) & ((nn2 == 0) | (dim2 < dim1))
  use2 = jnp.where(first2, try2, try2 & ~try1)
  use1 = ~use2 & try1
  h1 = jnp.argmax(hit1.reshape(-1))
  j1, k1 = h1 // e1.shape[0], h1 % e1.shape[0]
  h2 = jnp.argmax(hit2.reshape(-1))
  i2, k2 = h2 // e2.shape[0], h2 % e2.shape[0]

  # the clipping face, the clipped polygon (face or edge), normals, and which side is which
  kp = max(z1.npoly, z2.npoly, 2)
  face1, nf1 = sp.face_polygon(g1, t1, p1, jnp.where(aligned, id1[fi], id1[i2]), kp)
  face2, nf2 = sp.face_polygon(g2, t2, p2, jnp.where(aligned, id2[fj], id2[j1]), kp)
  edge1 = _pad(jnp.stack([s1, end1[k1]]), kp)
  edge2 = _pad(jnp.stack([s2, end2[k2]]), kp)
  clip_face = jnp.where(use1 & ~aligned, face2, face1)
  nclip = jnp.where(use1 & ~aligned, nf2, nf1)
  subj = jnp.where(aligned, face2, jnp.where(use1, edge1, edge2))
  nsubj = jnp.where(aligned, nf2, 2)
  n = jnp.where(aligned, n1[fi], jnp.where(use1, n2[j1], n1[i2]))
  w = jnp.where(aligned, n2[fj], -n)
  nrm = jnp.where(aligned, -n2[fj], jnp.where(use1, -n2[j1], n1[i2]))
  swap = ~aligned & use1
  run = (c.nsimplex > 0) & (maxcon_t >= 2) & (aligned | use1 | use2) & (nclip >= 3)

  # MuJoCo clips the bare geoms and inflates the contacts by the margins afterwards
  m1 = jnp.where(sp.is_type(t1, (_C,)), 0.0, 0.5 * margin)
  m2 = jnp.where(sp.is_type(t2, (_C,)), 0.0, 0.5 * margin)
  cap = kp + kp + 2
  poly, cnt = _polygon_clip(clip_face, nclip, subj, nsubj, n, m1 + m2, cap, early)
  quad = cnt >= 5
  pair = ~quad & (nsubj == 2) & (cnt >= 3)
  if maxcon >= 4:
    sel_q = polygon_quad(poly, jnp.where(quad, cnt, 5))
  else:
    sel_q = jnp.arange(4)
  sel_p = _farthest_pair(poly, cnt)
  slots = max(maxcon, 4)
  base = jnp.arange(slots)
  sel = jnp.where(quad, _pad(sel_q, slots), jnp.where(pair, _pad(sel_p, slots), base))
  nout = jnp.where(quad, 4, jnp.where(pair, 2, jnp.minimum(cnt, maxcon_t)))
  v = poly[sel]
  d1 = (v - clip_face[0]) @ n
  a = v - d1[:, None] * n
  d2 = (a - v) @ w
  b = a - d2[:, None] * w
  x1 = jnp.where(swap, b, a) + m1 * nrm
  x2 = jnp.where(swap, a, b) - m2 * nrm
  dist = d2 - (m1 + m2)
  count = jnp.where(run & (cnt > 0), jnp.minimum(nout, maxcon), 0)
  return _Multi(count, dist[:maxcon], x1[:maxcon], x2[:maxcon])


def _pad(x: jax.Array, n: int) -> jax.Array:
  """x padded with zero rows (or cut) to n rows."""
  return jnp.concatenate([x, jnp.zeros((n - x.shape[0],) + x.shape[1:], x.dtype)])[:n]


def collide_convex(
  g1: GeomInfo,
  g2: GeomInfo,
  margin: jax.Array,
  *,
  type1,
  type2,
  ccd_iterations: int = 35,
  ccd_tolerance: jax.Array | float = 1e-6,
  multiccd: bool = True,
  poly1: sp.MeshPoly | None = None,
  poly2: sp.MeshPoly | None = None,
) -> Contacts:
  """mjc_Convex: native CCD (GJK + EPA) contacts of two convex geoms, with multi-contact.

  type1 <= type2 is a pair of CONVEX_PAIRS, static (a Python int: the function is specialised
  to it) or traced (an int array: one compiled function serves every pair, with 4 slots).
  ccd_iterations (static) and ccd_tolerance are opt.ccd_iterations and opt.ccd_tolerance;
  multiccd = not (opt.disableflags & mjDSBL_MULTICCD). poly1/poly2 are the meshes' polygons
  (MuJoCo's mesh_poly* arrays); a mesh without them gets a single contact, as in MuJoCo.
  Returns CONVEX_PAIRS[(type1, type2)] slots (1 when multiccd is off).
  """
  types = _static_types(type1, type2)
  static = types is not None
  t1, t2 = types if static else (type1, type2)
  if static and (t1, t2) not in CONVEX_PAIRS:
    raise ValueError(f'mjc_Convex does not handle geom types ({t1}, {t2})')
  ncon = (CONVEX_PAIRS[(t1, t2)] if static else 4) if multiccd else 1
  margin = jnp.asarray(margin)
  tol = jnp.asarray(ccd_tolerance)
  kmax = int(ccd_iterations)
  c0 = _penetration(g1, g2, t1, t2, margin, kmax, tol)
  return _finish(g1, g2, t1, t2, c0, margin, ncon, static, poly1, poly2)


def _finish(
  g1, g2, t1, t2, c0: _Ccd, margin, ncon: int, static: bool, poly1, poly2, early: bool = False
) -> Contacts:
  """Contacts (ncon slots) of one pair from its penetration: mjc_Convex's multi-contact."""
  dist0, pos0, normal0 = _contact(c0, margin)
  if ncon == 1:
    return Contacts(dist0[None], pos0[None], make_frame(normal0)[None])

  # MuJoCo 4's maxContacts: 4 for cylinder/box/mesh pairs, 2 for capsule against those
  if static:
    maxcon_t = jnp.array(ncon)
  else:
    flat = sp.is_type(t1, (_Y, _B, _M)) & sp.is_type(t2, (_Y, _B, _M))
    cap = (sp.is_type(t1, (_C,)) & sp.is_type(t2, (_C, _Y, _B, _M))) | (
      sp.is_type(t2, (_C,)) & sp.is_type(t1, (_C, _Y, _B, _M))
    )
    maxcon_t = jnp.where(flat, 4, jnp.where(cap, 2, 1))
  mc = _multicontact(g1, g2, t1, t2, poly1, poly2, c0, margin, ncon, maxcon_t, early)
  multi = c0.ok & (mc.count > 0)
  slot = jnp.arange(ncon)
  pos = jnp.where(multi, 0.5 * (mc.x1 + mc.x2), pos0)
  normal = jnp.where(multi, jax.vmap(normalize3)(mc.x1 - mc.x2), normal0)
  dist = jnp.where(multi, margin + mc.dist, jnp.where(slot == 0, dist0, NO_CONTACT))
  dist = jnp.where(slot < jnp.where(multi, mc.count, 1), dist, NO_CONTACT)
  dist = jnp.where(c0.ok, dist, NO_CONTACT)
  return Contacts(dist, pos, make_frame(normal))


def _static_types(type1, type2) -> tuple[int, int] | None:
  """A pair's (or group's) geom types as Python ints where both are static, None where they are
  traced ((n,) arrays)."""
  if isinstance(type1, (int, np.integer)) and isinstance(type2, (int, np.integer)):
    return int(type1), int(type2)
  return None


def _pair_types(type1, type2, among1, among2):
  """The colliders' geom types of a group's pair, from its traced types (u1, u2): the group's
  static types, or each traced type narrowed to the types its side of the group holds
  (support.narrow), so that only those types' support functions and features are computed."""
  types = _static_types(type1, type2)
  if types is not None:
    return lambda u1, u2: types
  return lambda u1, u2: (sp.narrow(u1, among1), sp.narrow(u2, among2))


def _with_mesh(a: GeomInfo, verts) -> GeomInfo:
  """A pair's geom with its mesh's vertices from the group's tables (driver.MeshTable, rows by
  mesh; None: the geom holds its mesh itself)."""
  if verts is None:
    return a
  i = a.mesh
  return a._replace(vert=verts.vert[i], hull_vert=verts.hull_vert[i], hull_id=verts.hull_id[i])


def collide_convex_group(
  g1: GeomInfo,
  g2: GeomInfo,
  margin: jax.Array,
  *,
  type1,
  type2,
  nepa: int,
  ncon: int | None = None,
  ccd_iterations: int = 35,
  ccd_tolerance: jax.Array | float = 1e-6,
  multiccd: bool = True,
  poly1: sp.MeshPoly | None = None,
  poly2: sp.MeshPoly | None = None,
  verts1: Any = None,
  verts2: Any = None,
  live: jax.Array | None = None,
  among1: tuple[int, ...] | None = None,
  among2: tuple[int, ...] | None = None,
) -> tuple[Contacts, jax.Array]:
  """collide_convex of n pairs (g1, g2, margin batched on axis 0), running EPA on at most nepa of
  them: (Contacts (n, ncon), overflow).

  live (n,): the pairs to collide (None: all); the others get no contact, and cost nothing
  (broadphase.map_live: the colliders run on the live pairs only, and EPA and multi-contact
  only on those that need them).

  type1, type2: static ints, or (n,) traced types (one program for pairs of any types; ncon,
  static, then says how many slots the group's pairs need, 4 by default). among1, among2: the
  types that traced type1, type2 take (static; None: any), so that the program computes those
  types' support functions and features only (support.narrow).

  verts1, verts2: mesh tables shared by the group (driver.MeshTable: vert, hull_vert, hull_id
  with a leading mesh axis), with poly1/poly2 then MeshPolys with a leading mesh axis: each pair's
  mesh is row g1.mesh (g2.mesh) of them (one program for pairs of different meshes). None: g.vert
  and poly are the meshes themselves.

  GJK tells which pairs need EPA (their margin-inflated geoms overlap and, for spheres and
  capsules, their cores too), and EPA, which costs several times GJK, runs on those only, the
  first nepa in pair order; more than nepa is an overflow (the rest get no contact).
  """
  types = _static_types(type1, type2)
  n = margin.shape[0]
  if types is not None:
    t1, t2 = jnp.zeros(n, jnp.int32), jnp.zeros(n, jnp.int32)
    ncon = CONVEX_PAIRS[types]
  else:
    t1, t2 = type1, type2
    ncon = 4 if ncon is None else ncon
  ncon = ncon if multiccd else 1
  keys = types or (None, None)
  gjk, epa, fin = _convex_colliders(*keys, among1, among2, int(ccd_iterations), ncon)
  tol = jnp.asarray(ccd_tolerance)
  # the items' shared values (traced where the model is): map_live's consts, not closed over
  shared = (verts1, verts2, tol)

  live = jnp.ones(n, bool) if live is None else live
  # the primal runs GJK and EPA until they converge; derivatives come from the fixed-length
  # loops (the same values: their states are frozen from there on)
  cores = broadphase.map_live(gjk.f, live, (g1, g2, margin, t1, t2), fast=gjk.fast, consts=shared)
  # the first nepa pairs that need EPA
  epa_on, overflow = broadphase.first(cores.need & live, nepa)
  e = broadphase.map_live(
    epa.f, epa_on, (g1, g2, margin, cores.g, t1, t2), fast=epa.fast, consts=shared
  )
  c0 = jax.vmap(_merge)(cores, e)
  empty = Contacts(jnp.full(ncon, NO_CONTACT), jnp.zeros((ncon, 3)), jnp.eye(3))
  out = broadphase.map_live(
    fin.f,
    c0.ok & live,
    (g1, g2, c0, margin, t1, t2),
    empty,
    fast=fin.fast,
    consts=(verts1, verts2, poly1, poly2, tol),
  )
  return out, overflow


@functools.cache
def _convex_colliders(type1, type2, among1, among2, kmax: int, ncon: int):
  """collide_convex_group's three per-pair stages (GJK, EPA, contact features) for a group's
  static settings (type1, type2 ints, or None where the types are traced), made once per setting:
  map_live finds a function it has traced before in jit's cache (broadphase._chunk_program)."""
  static = type1 is not None
  ty = _pair_types(type1, type2, among1, among2)

  def mesh(a: GeomInfo, verts, poly):
    """A pair's geom with its mesh's vertices and polygons from the group's tables."""
    if verts is not None and poly is not None:
      poly = jax.tree_util.tree_map(lambda x: x[a.mesh], poly)
    return _with_mesh(a, verts), poly

  def gjk(x, v1, v2, tol, early=False):
    a, b, mg, u1, u2 = x
    a, b = _with_mesh(a, v1), _with_mesh(b, v2)
    return _penetration_gjk(a, b, *ty(u1, u2), mg, kmax, tol, early)

  def epa(x, v1, v2, tol, early=False):
    a, b, mg, g, u1, u2 = x
    a, b = _with_mesh(a, v1), _with_mesh(b, v2)
    return _penetration_epa(a, b, *ty(u1, u2), mg, kmax, tol, g, early)

  def fin(x, v1, v2, q1, q2, tol, early=False):
    a, b, c, mg, u1, u2 = x
    (a, p1), (b, p2) = mesh(a, v1, q1), mesh(b, v2, q2)
    return _finish(a, b, *ty(u1, u2), c, mg, ncon, static, p1, p2, early)

  return broadphase.item(gjk), broadphase.item(epa), broadphase.item(fin)


# ------------------------------------------ geom distance ----------------------------------------


class _DistGjk(NamedTuple):
  """mj_geomDistanceCCD's GJK stage: the answer where EPA is not needed, and EPA's start."""

  g: _Gjk  # GJK on the full geoms (margin 0), cut off at distmax
  need: jax.Array  # bool: EPA decides (the full geoms overlap and the cores, if any, too)
  dist: jax.Array  # the answer without EPA (mjMAX_LIMIT: beyond distmax, no witness points)
  x1: jax.Array  # (3,) witness points
  x2: jax.Array  # (3,)
  has_x: jax.Array  # bool: witness points computed (status.nx > 0)


def _distance_gjk(
  g1: GeomInfo, g2: GeomInfo, t1, t2, distmax: jax.Array, kmax: int, tol: jax.Array, early=False
) -> _DistGjk:
  """mjc_ccd with dist_cutoff = distmax, margin 0 and one contact, up to EPA.

  Spheres and capsules first go to their cores (a point, a segment): where the cores are more
  than the tolerance apart, their distance less the radii is the answer (beyond distmax: none).
  Otherwise, and for the other geoms, GJK runs on the full geoms; a separation found beyond
  distmax ends it with no witness points.
  """
  round1, round2 = sp.is_type(t1, (_S, _C)), sp.is_type(t2, (_S, _C))
  discrete = jnp.asarray(sp.is_type(t1, (_B, _M)) & sp.is_type(t2, (_B, _M)))
  o1, o2 = _obj(g1, t1, 0.0), _obj(g2, t2, 0.0)
  if (round1 | round2) is False:
    g = gjk_scan(o1, o2, kmax, tol, discrete, True, distmax, early)
    return _DistGjk(g, _needs_epa(g, tol), g.dist, g.x1, g.x2, g.dist < _max_limit(g.dist))
  fm1 = jnp.where(round1, g1.size[0], 0.0)
  fm2 = jnp.where(round2, g2.size[0], 0.0)
  zero = jnp.zeros_like(distmax)
  g, gd = gjk_two(
    lambda core: (obj_lane(g1, t1, zero, core), obj_lane(g2, t2, zero, core)),
    kmax,
    tol,
    jnp.stack([discrete, discrete]),
    jnp.stack([distmax, distmax + fm1 + fm2]),
    early,
  )
  top = _max_limit(g.dist)
  n = normalize3(gd.x2 - gd.x1)
  cdist = gd.dist - (fm1 + fm2)
  cdist = jnp.where(cdist > distmax, top, cdist)
  use = jnp.asarray(round1 | round2) & (gd.dist > tol)
  return _DistGjk(
    g,
    _needs_epa(g, tol) & ~use,
    jnp.where(use, cdist, g.dist),
    jnp.where(use, gd.x1 + fm1 * n, g.x1),
    jnp.where(use, gd.x2 - fm2 * n, g.x2),
    jnp.where(use, gd.dist < top, g.dist < top),
  )


def _needs_epa(g: _Gjk, tol: jax.Array) -> jax.Array:
  """mjc_ccd runs EPA where GJK left the origin enclosed (or nearly) by a simplex."""
  return (g.dist <= tol) & (g.nsimplex > 1) & ~g.separated


def _distance_epa(
  g1: GeomInfo, g2: GeomInfo, t1, t2, kmax: int, tol: jax.Array, g: _Gjk, early=False
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """mjc_ccd's EPA stage with margin 0: (dist, x1, x2, has_x).

  A polytope that cannot be built leaves the geoms touching (dist 0) at GJK's witness points;
  an EPA that fails leaves them touching without witness points.
  """
  discrete = jnp.asarray(sp.is_type(t1, (_B, _M)) & sp.is_type(t2, (_B, _M)))
  o1, o2 = _obj(g1, t1, 0.0), _obj(g2, t2, 0.0)
  pt, ok = polytope(o1, o2, g, 5 + kmax, 6 * kmax)
  pt, face, found = epa_scan(o1, o2, pt, kmax, tol, discrete, early)
  x1, x2, dist = epa_witness(pt, jnp.maximum(face, 0))
  hit = ok & found
  x1, x2 = jnp.where(ok, x1, g.x1), jnp.where(ok, x2, g.x2)
  return jnp.where(hit, dist, 0.0), x1, x2, hit | ~ok


@functools.cache
def _distance_colliders(type1, type2, among1, among2, kmax: int):
  """distance_group's per-pair stages (GJK, EPA) for a group's static settings, made once per
  setting (as _convex_colliders)."""
  ty = _pair_types(type1, type2, among1, among2)

  def gjk(x, v1, v2, tol, early=False):
    a, b, dm, u1, u2 = x
    return _distance_gjk(_with_mesh(a, v1), _with_mesh(b, v2), *ty(u1, u2), dm, kmax, tol, early)

  def epa(x, v1, v2, tol, early=False):
    a, b, g, u1, u2 = x
    return _distance_epa(_with_mesh(a, v1), _with_mesh(b, v2), *ty(u1, u2), kmax, tol, g, early)

  return broadphase.item(gjk), broadphase.item(epa)


def distance_group(
  g1: GeomInfo,
  g2: GeomInfo,
  distmax: jax.Array,
  *,
  type1,
  type2,
  ccd_iterations: int = 35,
  ccd_tolerance: jax.Array | float = 1e-6,
  verts1: Any = None,
  verts2: Any = None,
  among1: tuple[int, ...] | None = None,
  among2: tuple[int, ...] | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """mj_geomDistanceCCD of n geom pairs (g1, g2, distmax batched on axis 0): the smallest signed
  distance of each pair's bare geoms (n,), clamped to distmax, and its fromto segment (n, 6): the
  witness points on geom 1 and geom 2, zero where none were computed.

  type1, type2: static geom types, or (n,) traced ones (one program for pairs of any types);
  among1, among2 as in collide_convex_group. verts1, verts2: mesh tables (driver.MeshTable)
  whose row g.mesh holds each pair's mesh, as in collide_convex_group; None: g.vert is the mesh
  itself. GJK runs on every pair, EPA only on the pairs whose geoms overlap
  (broadphase.map_live).
  """
  types = _static_types(type1, type2)
  n = distmax.shape[0]
  t1, t2 = (jnp.zeros(n, jnp.int32),) * 2 if types is not None else (type1, type2)
  keys = types or (None, None)
  gjk, epa = _distance_colliders(*keys, among1, among2, int(ccd_iterations))
  tol = jnp.asarray(ccd_tolerance)
  live = jnp.ones(n, bool)
  shared = (verts1, verts2, tol)
  st = broadphase.map_live(gjk.f, live, (g1, g2, distmax, t1, t2), fast=gjk.fast, consts=shared)
  dist, x1, x2, has_x = broadphase.map_live(
    epa.f, st.need, (g1, g2, st.g, t1, t2), fast=epa.fast, consts=shared
  )
  need = st.need[:, None]
  dist = jnp.where(st.need, dist, st.dist)
  has_x = jnp.where(st.need, has_x, st.has_x)
  fromto = jnp.concatenate([jnp.where(need, x1, st.x1), jnp.where(need, x2, st.x2)], axis=-1)
  fromto = jnp.where(has_x[:, None], fromto, 0.0)
  return jnp.minimum(dist, distmax), fromto

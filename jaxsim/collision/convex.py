"""General convex collisions: MuJoCo's native CCD (GJK, EPA, multi-contact) as mjc_Convex.

Mirrors engine_collision_gjk.c (mjc_ccd) and engine_collision_convex.c (mjc_Convex,
mjc_penetration) with fixed iteration counts: every loop runs `ccd_iterations` (static) steps as a
`lax.scan` and iterations after MuJoCo would have stopped are masked to no-ops, so the result is
the same under jit, vmap and grad. The EPA polytope lives in fixed arrays (5 + N vertices, 6 N
faces for N = ccd_iterations, as mjc_ccdSize sizes MuJoCo's buffer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim.collision import support as sp
from jaxsim.collision.geom import NO_CONTACT, Contacts, GeomInfo, make_frame
from jaxsim.types import GeomType

MINVAL = 1e-15  # mjMINVAL
MINVAL2 = MINVAL * MINVAL
MAX_LIMIT = 1.7976931348623157e308  # DBL_MAX (mjMAX_LIMIT)
MAXVAL2 = 1e10 * 1e10  # mjMAXVAL^2
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

# (type1, type2) -> max contacts, for the pairs mjCOLLISIONFUNC sends to mjc_Convex (multiccd on;
# box-mesh and mesh-mesh give at most 4 without margin, 5 with one)
CONVEX_PAIRS = {
  (_S, _E): 1,
  (_S, _M): 1,
  (_C, _E): 1,
  (_C, _Y): 5,
  (_C, _M): 5,
  (_E, _E): 1,
  (_E, _Y): 1,
  (_E, _B): 1,
  (_E, _M): 1,
  (_Y, _Y): 5,
  (_Y, _B): 5,
  (_Y, _M): 5,
  (_B, _M): 5,
  (_M, _M): 5,
}


# ------------------------------------------ small helpers ----------------------------------------


def _div(a: jax.Array, b: jax.Array) -> jax.Array:
  """a / b with b = 0 replaced by 1 (the result is masked by the caller there)."""
  return a / jnp.where(b == 0, 1.0, b)


def _sqrt(x: jax.Array) -> jax.Array:
  """sqrt with a finite gradient at 0."""
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _norm(v: jax.Array) -> jax.Array:
  return _sqrt(jnp.sum(v * v, axis=-1))


def _normalize3(v: jax.Array) -> jax.Array:
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
  return jax.tree_util.tree_map(lambda x, y: x.at[i].set(y), v, w)


def _vstack(vs: list[Verts]) -> Verts:
  return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *vs)


def _vwhere(c, a: Verts, b: Verts) -> Verts:
  return jax.tree_util.tree_map(lambda x, y: jnp.where(c, x, y), a, b)


Support = Callable[[jax.Array], tuple[jax.Array, jax.Array]]


class _Obj(NamedTuple):
  """A geom as the CCD sees it: support function (unit direction -> point, index), centre."""

  support: Support
  center: jax.Array


def _support(o1: _Obj, o2: _Obj, d: jax.Array) -> Verts:
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

  def attempt(n, p):
    nv, nn = jnp.dot(n, p), jnp.dot(n, n)
    return n * _div(nv, nn), nn == 0, (nv != 0) & (nn > MINVAL)

  r1, z1, ok1 = attempt(jnp.cross(d32, d21), v2)
  r2, z2, ok2 = attempt(jnp.cross(d21, d31), v1)
  r3, _, _ = attempt(jnp.cross(d31, d32), v3)
  res = jnp.where(ok1, r1, jnp.where(ok2, r2, r3))
  fail = z1 | (~ok1 & z2)
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


def _s2d(s1, s2, s3):
  """S2D: barycentric coordinates (3,) of the point of triangle s1 s2 s3 closest to the origin."""
  p_o, fail = _project_origin_plane(s1, s2, s3)
  m14 = (
    s2[1] * s3[2] - s2[2] * s3[1] - s1[1] * s3[2] + s1[2] * s3[1] + s1[1] * s2[2] - s1[2] * s2[1]
  )
  m24 = (
    s2[0] * s3[2] - s2[2] * s3[0] - s1[0] * s3[2] + s1[2] * s3[0] + s1[0] * s2[2] - s1[2] * s2[0]
  )
  m34 = (
    s2[0] * s3[1] - s2[1] * s3[0] - s1[0] * s3[1] + s1[1] * s3[0] + s1[0] * s2[1] - s1[1] * s2[0]
  )
  mu1, mu2, mu3 = jnp.abs(m14), jnp.abs(m24), jnp.abs(m34)
  c1 = (mu1 >= mu2) & (mu1 >= mu3)
  c2 = ~c1 & (mu2 >= mu3)
  m_max = jnp.where(c1, m14, jnp.where(c2, m24, m34))
  ix = jnp.where(c1, 1, 0)
  iy = jnp.where(c1 | c2, 2, 1)
  a1, a2, a3, p = (jnp.stack([s[ix], s[iy]]) for s in (s1, s2, s3, p_o))

  def area(p, a, b):
    return p[0] * a[1] + p[1] * b[0] + a[0] * b[1] - p[0] * b[1] - p[1] * a[0] - b[0] * a[1]

  c = jnp.stack([area(p, a2, a3), area(p, a3, a1), area(p, a1, a2)])
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
  return jnp.where(fail, cands[2], lam)


def _s3d(s1, s2, s3, s4):
  """S3D: barycentric coordinates (4,) of the point of tetrahedron s1..s4 closest to the origin."""
  c = jnp.stack([-_det3(s2, s3, s4), _det3(s1, s3, s4), -_det3(s1, s2, s4), _det3(s1, s2, s3)])
  m_det = jnp.sum(c)
  comp = _same_sign(m_det, c)
  inside = jnp.all(comp)
  lam_in = _div(c, m_det)
  tris = jnp.stack([jnp.stack(t) for t in ((s2, s3, s4), (s1, s3, s4), (s1, s2, s4), (s1, s2, s3))])
  lam = jax.vmap(lambda t: _s2d(t[0], t[1], t[2]))(tris)  # (4, 3)
  pts = jnp.einsum('ij,ijk->ik', lam, tris)
  cands = jnp.stack([jnp.insert(lam[i], i, 0.0) for i in range(4)])
  lam_out = _closest(cands, pts, ~comp)
  return jnp.where(inside, lam_in, lam_out)


def _subdistance(n: jax.Array, s: jax.Array) -> jax.Array:
  """subdistance: barycentric coordinates (4,) of the closest point of the n-simplex s (4, 3)."""
  l3 = _s3d(s[0], s[1], s[2], s[3])
  l2 = jnp.concatenate([_s2d(s[0], s[1], s[2]), jnp.zeros(1)])
  l1 = jnp.concatenate([_s1d(s[0], s[1]), jnp.zeros(2)])
  l0 = jnp.array([1.0, 0.0, 0.0, 0.0])
  return jnp.where(n == 4, l3, jnp.where(n == 3, l2, jnp.where(n == 2, l1, l0)))


# ---------------------------------------------- GJK ----------------------------------------------


class _Gjk(NamedTuple):
  separated: jax.Array  # bool
  dist: jax.Array  # distance (0 if the origin is enclosed; MAX_LIMIT if separated early)
  x1: jax.Array  # (3,) witness on geom 1
  x2: jax.Array  # (3,)
  simplex: Verts  # (4,)
  nsimplex: jax.Array
  iterations: jax.Array


def _gjk(
  o1: _Obj,
  o2: _Obj,
  kmax: int,
  tol: jax.Array,
  discrete: jax.Array,
  get_dist: bool,
  dist_cutoff: jax.Array,
) -> _Gjk:
  """gjk as a fixed-length scan (MuJoCo 4 runs it without the gjkIntersect fallback)."""
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

  def step(st, _):
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
    return new, None

  state, _ = jax.lax.scan(step, state, None, length=kmax)
  returned = state['returned']
  n, lam, simplex = state['n'], state['lam'], state['simplex']
  x1 = jnp.where(n > 0, _lincomb(lam, simplex.vert1), x1_0)
  x2 = jnp.where(n > 0, _lincomb(lam, simplex.vert2), x2_0)
  x_k, x_norm = state['x_k'], state['x_norm']
  tmp = _support(o1, o2, -x_k * _div(1.0, x_norm))
  sep_final = jnp.dot(x_k, tmp.vert) > 0
  return _Gjk(
    separated=returned | sep_final,
    dist=jnp.where(returned, MAX_LIMIT, jnp.where((n == 4) & ~sep_final, 0.0, x_norm)),
    x1=jnp.where(returned, x1_0, x1),
    x2=jnp.where(returned, x2_0, x2),
    simplex=simplex,
    nsimplex=jnp.where(returned, 0, n),
    iterations=state['k'],
  )


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


def _epa_support(o1: _Obj, o2: _Obj, d: jax.Array, dnorm: jax.Array) -> Verts:
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
  fv, fd2 = [], []
  for a, b, c in faces:
    v, d2 = _attach(verts.vert, center, a, b, c)
    fv.append(v)
    fd2.append(d2)
  fv = jnp.concatenate([jnp.stack(fv), jnp.zeros((nf - nf0, 3))])
  fd2 = jnp.concatenate([jnp.stack(fd2), jnp.zeros(nf - nf0)])
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
  m14 = (
    v2[1] * v3[2] - v2[2] * v3[1] - v1[1] * v3[2] + v1[2] * v3[1] + v1[1] * v2[2] - v1[2] * v2[1]
  )
  m24 = (
    v2[0] * v3[2] - v2[2] * v3[0] - v1[0] * v3[2] + v1[2] * v3[0] + v1[0] * v2[2] - v1[2] * v2[0]
  )
  m34 = (
    v2[0] * v3[1] - v2[1] * v3[0] - v1[0] * v3[1] + v1[1] * v3[0] + v1[0] * v2[1] - v1[1] * v2[0]
  )
  mu1, mu2, mu3 = jnp.abs(m14), jnp.abs(m24), jnp.abs(m34)
  c1 = (mu1 >= mu2) & (mu1 >= mu3)
  c2 = ~c1 & (mu2 >= mu3)
  m_max = jnp.where(c1, m14, jnp.where(c2, m24, m34))
  x = jnp.where(c1, 1, 0)
  y = jnp.where(c1 | c2, 2, 1)
  c31 = p[x] * v2[y] + p[y] * v3[x] + v2[x] * v3[y] - p[x] * v3[y] - p[y] * v2[x] - v3[x] * v2[y]
  c32 = p[x] * v3[y] + p[y] * v1[x] + v3[x] * v1[y] - p[x] * v1[y] - p[y] * v3[x] - v1[x] * v3[y]
  c33 = p[x] * v1[y] + p[y] * v2[x] + v1[x] * v2[y] - p[x] * v2[y] - p[y] * v1[x] - v2[x] * v1[y]
  return jnp.stack([_div(c31, m_max), _div(c32, m_max), _div(c33, m_max)])


def _tri_point(v1, v2, v3, p):
  """triPointIntersect."""
  lam = _tri_affine(v1, v2, v3, p)
  pr = lam[0] * v1 + lam[1] * v2 + lam[2] * v3
  return jnp.all(lam >= 0) & (_norm(pr - p) < MINVAL)


def _same_side(p0, p1, p2, p3):
  n = jnp.cross(p1 - p0, p2 - p0)
  d1, d2 = jnp.dot(n, p3 - p0), jnp.dot(n, -p0)
  return ((d1 > 0) & (d2 > 0)) | ((d1 < 0) & (d2 < 0))


def _test_tetra(p0, p1, p2, p3):
  return (
    _same_side(p0, p1, p2, p3)
    & _same_side(p1, p2, p3, p0)
    & _same_side(p2, p3, p0, p1)
    & _same_side(p3, p0, p1, p2)
  )


def _polytope3(o1, o2, tri: Verts, nv: int, nf: int) -> tuple[_Poly, jax.Array]:
  """polytope3: hexahedron around a triangle containing the origin; (polytope, ok)."""
  v1, v2, v3 = tri.vert
  center = (v1 + v2 + v3) * (1.0 / 3.0)
  n = jnp.cross(v2 - v1, v3 - v1)
  n_norm = _norm(n)
  s5 = _epa_support(o1, o2, -n, n_norm)
  s4 = _epa_support(o1, o2, n, n_norm)
  verts = jax.tree_util.tree_map(
    lambda a, b, c: jnp.concatenate([a, b[None], c[None]]), tri, s5, s4
  )
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


def _polytope(o1, o2, g: _Gjk, nv: int, nf: int) -> tuple[_Poly, jax.Array]:
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
  sup = [_epa_support(o1, o2, d, _norm(d)) for d in (d1, d2, d3)]
  s2 = _vstack([_vget(simplex, 0), _vget(simplex, 1), *sup])
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


def _epa(o1, o2, pt: _Poly, kmax: int, tol: jax.Array, discrete: jax.Array):
  """epa as a fixed-length scan; (polytope, closest face index, found)."""
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

    def flood(_, dl):
      return dl | (visible & jnp.any(dl[pt.fadj], axis=1))

    dele = jax.lax.fori_loop(0, FLOOD, flood, dele)
    hmask = (dele[:, None] & ~dele[pt.fadj]).reshape(-1)
    nedges = jnp.sum(hmask)
    pos = jnp.cumsum(hmask) - 1
    src = (
      jnp.zeros(HORIZON, int)
      .at[jnp.where(hmask, pos, HORIZON)]
      .set(jnp.arange(nf * 3), mode='drop')
    )
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
    fverts = pt.fverts.at[tgt].set(jnp.stack([jnp.full_like(a, wi), a, b], 1), mode='drop')
    fadj = pt.fadj.at[tgt].set(jnp.stack([prev, g, nxt], 1), mode='drop')
    fadj = fadj.at[jnp.where(hvalid, g, nf), eg].set(newid, mode='drop')
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
    ), None

  init = (
    pt,
    jnp.array(-1),
    jnp.array(MAX_LIMIT),
    jnp.array(MAX_LIMIT),
    jnp.array(False),
    jnp.array(False),
  )
  (pt, face, _, _, _, null), _ = jax.lax.scan(step, init, jnp.arange(kmax))
  return pt, face, (face >= 0) & ~null


def _epa_witness(pt: _Poly, face: jax.Array):
  """epaWitness: (x1, x2, dist)."""
  fv = pt.fverts[face]
  vs = _vget(pt.verts, fv)
  lam = _tri_affine(vs.vert[0], vs.vert[1], vs.vert[2], pt.fv[face])
  return lam @ vs.vert1, lam @ vs.vert2, -_sqrt(pt.fdist2[face])


# ------------------------------------------- mjc_ccd ---------------------------------------------


def _isin(t, types) -> bool | jax.Array:
  """t in types, for a static (Python bool) or traced (array bool) geom type."""
  if isinstance(t, (int, np.integer)):
    return int(t) in types
  return jnp.any(jnp.stack([t == u for u in types]))


def _obj(info: GeomInfo, gtype, margin: jax.Array, shrink: bool = False) -> _Obj:
  """mjc_initCCDObj: support with margin/2 inflation, or the shrunk sphere/capsule core."""
  if not shrink:
    return _Obj(lambda d: sp.support(info, gtype, d, margin), info.pos)
  if isinstance(gtype, (int, np.integer)):
    if gtype == _S:
      return _Obj(lambda d: sp.point_support(info, d), info.pos)
    if gtype == _C:
      return _Obj(lambda d: sp.line_support(info, d), info.pos)
    return _Obj(lambda d: sp.support(info, gtype, d, margin), info.pos)

  def sup(d):
    full = sp.support(info, gtype, d, margin)
    line = sp.line_support(info, d)
    p = jnp.where(gtype == _S, info.pos, jnp.where(gtype == _C, line[0], full[0]))
    return p, jnp.where(_isin(gtype, (_S, _C)), -1, full[1])

  return _Obj(sup, info.pos)


class _Ccd(NamedTuple):
  ok: jax.Array  # bool: a penetration (of the margin-inflated geoms) was found
  dist: jax.Array  # signed distance of the inflated geoms (< 0 when ok)
  x1: jax.Array  # (3,) witness on geom 1
  x2: jax.Array  # (3,)
  pt: _Poly | None  # EPA polytope and its closest face, for multi-contact
  face: jax.Array | None


def _penetration(
  g1: GeomInfo, g2: GeomInfo, t1, t2, margin: jax.Array, kmax: int, tol: jax.Array
) -> _Ccd:
  """mjc_ccd with dist_cutoff 0 (penetration only), single contact."""
  discrete = jnp.asarray(_isin(t1, (_B, _M)) & _isin(t2, (_B, _M))) & (margin == 0)
  o1, o2 = _obj(g1, t1, margin), _obj(g2, t2, margin)
  nv, nf = 5 + kmax, 6 * kmax

  g = _gjk(o1, o2, kmax, tol, discrete, False, jnp.array(0.0))
  run_epa = (g.dist <= tol) & (g.nsimplex > 1) & ~g.separated
  pt, ok = _polytope(o1, o2, g, nv, nf)
  pt, face, found = _epa(o1, o2, pt, kmax, tol, discrete)
  face = jnp.maximum(face, 0)
  x1, x2, dist = _epa_witness(pt, face)
  res = _Ccd(run_epa & ok & found & (dist < 0), dist, x1, x2, pt, face)

  round1, round2 = _isin(t1, (_S, _C)), _isin(t2, (_S, _C))
  if round1 is False and round2 is False:
    return res
  # sphere and capsule shrink to a point and a segment: GJK distance, then inflate
  fm1 = jnp.where(round1, g1.size[0] + 0.5 * margin, 0.0)
  fm2 = jnp.where(round2, g2.size[0] + 0.5 * margin, 0.0)
  c1 = _obj(g1, t1, margin, shrink=True)
  c2 = _obj(g2, t2, margin, shrink=True)
  gd = _gjk(c1, c2, kmax, tol, jnp.array(False), True, fm1 + fm2)
  n = _normalize3(gd.x2 - gd.x1)
  x1 = gd.x1 + fm1 * n
  x2 = gd.x2 - fm2 * n
  dist = gd.dist - (fm1 + fm2)
  use = (round1 | round2) & (gd.dist > tol)
  return _Ccd(
    jnp.where(use, dist < 0, res.ok),
    jnp.where(use, dist, res.dist),
    jnp.where(use, x1, res.x1),
    jnp.where(use, x2, res.x2),
    pt,
    face,
  )


def _contact(c: _Ccd, margin: jax.Array):
  """mjc_penetration's contact from witness points: (dist, pos, normal)."""
  dist = jnp.where(c.ok, margin + c.dist, NO_CONTACT)
  pos = 0.5 * (c.x1 + c.x2)
  normal = _normalize3(c.x1 - c.x2)
  return dist, pos, normal


def _rbound(g: GeomInfo, t) -> jax.Array:
  """geom_rbound from the geom's size (or mesh vertices)."""
  s = g.size
  r = {
    _S: s[0],
    _C: s[0] + s[1],
    _E: jnp.max(s),
    _Y: _sqrt(s[0] * s[0] + s[1] * s[1]),
    _B: _norm(s),
  }
  if g.vert is not None:
    r[_M] = jnp.max(_norm(g.vert))
  if isinstance(t, (int, np.integer)):
    return r[int(t)]
  return jnp.sum(jnp.stack([jnp.where(t == k, v, 0.0) for k, v in r.items()]))


def _axis_angle_mat(axis: jax.Array, angle: float) -> jax.Array:
  """mju_quat2Mat(mju_axisAngle2Quat(axis, angle))."""
  s, c = np.sin(0.5 * angle), np.cos(0.5 * angle)
  q = jnp.concatenate([jnp.array([c]), axis * s])
  w, x, y, z = q
  return jnp.array(
    [
      [w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
      [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
      [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z],
    ]
  )


def _rotate_about(g: GeomInfo, origin: jax.Array, rot: jax.Array) -> GeomInfo:
  """mju_rotateFrame: rotate a geom's frame about a point."""
  rel = origin - g.pos
  return g._replace(mat=rot @ g.mat, pos=g.pos - (rot @ rel - rel))


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
  rbound1: jax.Array | None = None,
  rbound2: jax.Array | None = None,
) -> Contacts:
  """mjc_Convex: native CCD (GJK + EPA) contacts of two convex geoms, with multiccd.

  type1 <= type2 is a pair of CONVEX_PAIRS, static (a Python int: the function is specialised
  to it) or traced (an int array: one compiled function serves every pair, with 5 slots).
  ccd_iterations (static) and ccd_tolerance are opt.ccd_iterations and opt.ccd_tolerance;
  multiccd = not (opt.disableflags & mjDSBL_MULTICCD); rbound = geom_rbound (computed from the
  geom if not given). Returns CONVEX_PAIRS[(type1, type2)] slots (1 when multiccd is off).
  """
  static = isinstance(type1, (int, np.integer)) and isinstance(type2, (int, np.integer))
  t1, t2 = (int(type1), int(type2)) if static else (type1, type2)
  if static and (t1, t2) not in CONVEX_PAIRS:
    raise ValueError(f'mjc_Convex does not handle geom types ({t1}, {t2})')
  ncon = (CONVEX_PAIRS[(t1, t2)] if static else 5) if multiccd else 1
  margin = jnp.asarray(margin)
  tol = jnp.asarray(ccd_tolerance)
  kmax = int(ccd_iterations)
  c0 = _penetration(g1, g2, t1, t2, margin, kmax, tol)
  dist0, pos0, normal0 = _contact(c0, margin)
  if ncon == 1:
    return Contacts(dist0[None], pos0[None], make_frame(normal0)[None])

  # multiccd by perturbation (mjc_Convex): rotate the geoms by +-1e-3 about the contact point,
  # for pairs without spheres and ellipsoids; box-mesh and mesh-mesh only with a margin
  smooth = _isin(t1, (_S, _E)) | _isin(t2, (_S, _E))
  boxmesh = _isin(t1, (_B, _M)) & _isin(t2, (_B, _M))
  perturb = jnp.asarray(~jnp.asarray(smooth)) & (jnp.asarray(~jnp.asarray(boxmesh)) | (margin > 0))
  frame0 = make_frame(normal0)
  rb1 = _rbound(g1, t1) if rbound1 is None else rbound1
  rb2 = _rbound(g2, t2) if rbound2 is None else rbound2
  tolerance = 1e-3 * jnp.minimum(rb1, rb2)
  rots = jnp.stack(
    [_axis_angle_mat(frame0[1 + a], s * 1e-3) for a in range(2) for s in (-1.0, 1.0)]
  )

  def perturbed(rot):
    # MuJoCo 4 contacts match rotating geom 1 only (the 3.x source also counter-rotates geom 2)
    h1 = _rotate_about(g1, pos0, rot)
    return _contact(_penetration(h1, g2, t1, t2, margin, kmax, tol), margin)

  pdist, ppos, pnormal = jax.vmap(perturbed)(rots)
  dists, poss, normals = [dist0], [pos0], [normal0]
  kept = [c0.ok]
  for i in range(4):
    distinct = jnp.array(True)
    for p, ok in zip(poss, kept, strict=True):
      distinct &= ~ok | (_norm(p - ppos[i]) > tolerance)
    kept.append(perturb & c0.ok & (pdist[i] < NO_CONTACT) & distinct)
    poss.append(ppos[i])
    normals.append(pnormal[i])
    dists.append(dist0)
  kept = jnp.stack(kept)
  # compact the accepted contacts into the first slots, in MuJoCo's order
  order = jnp.argsort(~kept, stable=True)
  valid = jnp.arange(5) < jnp.sum(kept)
  dist = jnp.where(valid, jnp.stack(dists)[order], NO_CONTACT)
  pos = jnp.stack(poss)[order]
  normal = jnp.stack(normals)[order]
  return Contacts(dist[:ncon], pos[:ncon], make_frame(normal)[:ncon])

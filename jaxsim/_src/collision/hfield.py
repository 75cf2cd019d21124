"""Height-field collisions: MuJoCo's prism decomposition with native CCD (mjc_ConvexHField).

The height field is a grid of triangular prisms (two per cell, from the base at -size[3] to the
surface). MuJoCo collides the convex geom with every prism of the sub-grid under the geom's
bounding box, one contact per penetrating prism, up to mjMAXCONPAIR. Under jit the sub-grid is a
window of static size (from the geom's bounding radius and the grid spacing, `window`) placed at
a traced offset; prisms of the window outside MuJoCo's sub-grid are masked, and the contacts are
kept in MuJoCo's (row, column, triangle) order.
"""

from __future__ import annotations

import functools
import math as pymath
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.collision import broadphase, convex
from jaxsim._src.collision import support as sp
from jaxsim._src.collision.geom import NO_CONTACT, Contacts, GeomInfo, make_frame
from jaxsim._src.enums import MAXCONPAIR, GeomType
from jaxsim._src.math import ranked

# geom types mjCOLLISIONFUNC sends to mjc_ConvexHField
HFIELD_TYPES = (
  GeomType.SPHERE,
  GeomType.CAPSULE,
  GeomType.ELLIPSOID,
  GeomType.CYLINDER,
  GeomType.BOX,
  GeomType.MESH,
)


class HField(NamedTuple):
  """One height field as the collider sees it (hfield_data, hfield_size)."""

  data: jax.Array  # (nrow, ncol) elevations in [0, 1], row r at y = -size[1] + r dy
  size: jax.Array  # (4,) x and y half-extents, elevation scale, base depth


def window(nrow: int, ncol: int, size, reach) -> tuple[int, int]:
  """Static sub-grid window (rows, columns of cells) for a geom's bounding radius plus margin.

  mjc_ConvexHField's sub-grid spans floor(lo) .. ceil(hi) in grid units of the geom's bounding
  box grown by the margin, hi - lo at most 2 reach / spacing, so it has fewer than
  2 reach / spacing + 2 cells per axis.
  """
  size = np.asarray(size, dtype=np.float64)
  dx = 2.0 * size[0] / max(ncol - 1, 1)
  dy = 2.0 * size[1] / max(nrow - 1, 1)
  slack = 1.0 + 1e-9  # round-off in MuJoCo's grid coordinates
  wc = pymath.ceil(2.0 * float(reach) / dx * slack) + 1
  wr = pymath.ceil(2.0 * float(reach) / dy * slack) + 1
  return max(1, min(wr, nrow - 1)), max(1, min(wc, ncol - 1))


def max_contacts(win: tuple[int, int]) -> int:
  """Contact slots of a pair with this window: one per prism, at most mjMAXCONPAIR."""
  return min(MAXCONPAIR, 2 * win[0] * win[1])


def _prism_support(prism: jax.Array, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_prism_support: the best of the 3 top (d_z >= 0) or 3 bottom vertices; no vertex id."""
  cand = jnp.where(d[2] < 0, prism[:3], prism[3:])
  return cand[jnp.argmax(cand @ d)], jnp.array(-1, jnp.int32)


def _penetration(
  prism: jax.Array,
  g: GeomInfo,
  gtype,
  margin: jax.Array,
  kmax: int,
  tol: jax.Array,
  early: bool = False,
):
  """mjc_penetration of a prism and the geom, each inflated by half the margin.

  Returns (hit, dist, x1, x2): whether the inflated shapes penetrate, their signed distance
  (the geoms' distance minus the margin) and the witness points on the inflated prism and geom.
  early: GJK and EPA stop once converged (convex.iterate; no reverse mode).
  """
  half = 0.5 * margin

  def prism_support(d):
    p, i = _prism_support(prism, d)
    return p + d * half, i

  o1 = convex.Obj(prism_support, jnp.sum(prism, axis=0) * (1.0 / 6.0))
  o2 = convex.Obj(lambda d: sp.support(g, gtype, d, margin), g.pos)
  # the prism counts as a discrete shape: EPA on vertex ids against boxes and meshes
  discrete = jnp.asarray(sp.is_type(gtype, (GeomType.BOX, GeomType.MESH))) & (margin == 0)
  nv, nf = 5 + kmax, 6 * kmax
  rounded = sp.is_type(gtype, (GeomType.SPHERE, GeomType.CAPSULE))
  # spheres and capsules shrink to their centre or segment: GJK distance, then inflate
  fm = g.size[0] + half
  if rounded is False:
    gk = convex.gjk_scan(o1, o2, kmax, tol, discrete, False, jnp.zeros_like(margin), early)
  else:

    def objs(lane):
      """The inflated geom (lane false) or its core (lane true)."""
      return o1, convex.obj_lane(g, gtype, margin, lane)

    # GJK on the inflated geom (EPA's start) and on the core, as one program
    gk, gd = convex.gjk_two(
      objs,
      kmax,
      tol,
      jnp.stack([discrete, jnp.array(False)]),
      jnp.stack([jnp.zeros_like(fm), fm]),
      early,
    )
  run_epa = (gk.dist <= tol) & (gk.nsimplex > 1) & ~gk.separated
  pt, ok = convex.polytope(o1, o2, gk, nv, nf)
  pt, face, found = convex.epa_scan(o1, o2, pt, kmax, tol, discrete, early)
  x1, x2, dist = convex.epa_witness(pt, jnp.maximum(face, 0))
  hit = run_epa & ok & found & (dist < 0)
  if rounded is False:
    return hit, dist, x1, x2
  n = convex.normalize3(gd.x2 - gd.x1)
  shallow = rounded & (gd.dist > tol)
  sdist = gd.dist - fm
  return (
    jnp.where(shallow, sdist < 0, hit),
    jnp.where(shallow, sdist, dist),
    jnp.where(shallow, gd.x1, x1),
    jnp.where(shallow, gd.x2 - fm * n, x2),
  )


def window_prisms(
  h: GeomInfo, g: GeomInfo, margin: jax.Array, hf: HField, gtype, win: tuple[int, int]
) -> tuple[jax.Array, jax.Array, GeomInfo]:
  """The prisms (P, 6, 3) of g's window in h's frame, which of them MuJoCo tests (P,), and g
  in h's frame."""
  gtype = _static_type(gtype)
  nrow, ncol = hf.data.shape
  wr, wc = win
  margin = jnp.asarray(margin)
  s0, s1, s2, s3 = hf.size[0], hf.size[1], hf.size[2], hf.size[3]

  # the geom in the height field's frame
  lpos = h.mat.T @ (g.pos - h.pos)
  gl = g._replace(pos=lpos, mat=h.mat.T @ g.mat)
  radius = g.rbound + margin
  near = ~(
    (s0 < lpos[0] - radius)
    | (-s0 > lpos[0] + radius)
    | (s1 < lpos[1] - radius)
    | (-s1 > lpos[1] + radius)
    | (s2 < lpos[2] - radius)
    | (-s3 > lpos[2] + radius)
  )
  # bounding box from support points along the frame axes
  eye = jnp.eye(3, dtype=lpos.dtype)
  hi = jnp.stack([sp.support(gl, gtype, eye[k])[0][k] for k in range(3)])
  lo = jnp.stack([sp.support(gl, gtype, -eye[k])[0][k] for k in range(3)])
  overlap = ~(
    (lo[0] - margin > s0)
    | (hi[0] + margin < -s0)
    | (lo[1] - margin > s1)
    | (hi[1] + margin < -s1)
    | (lo[2] - margin > s2)
    | (hi[2] + margin < -s3)
  )

  # MuJoCo's sub-grid: columns cmin..cmax, rows rmin..rmax of grid points
  def grid(v, s, n):
    return (v + s) / (2.0 * s) * (n - 1)

  big = 2.0 * max(nrow, ncol)  # keep far-away boxes' grid coordinates in int range
  cmin = jnp.clip(jnp.floor(grid(lo[0] - margin, s0, ncol)), -big, big).astype(jnp.int32)
  cmax = jnp.clip(jnp.ceil(grid(hi[0] + margin, s0, ncol)), -big, big).astype(jnp.int32)
  rmin = jnp.clip(jnp.floor(grid(lo[1] - margin, s1, nrow)), -big, big).astype(jnp.int32)
  rmax = jnp.clip(jnp.ceil(grid(hi[1] + margin, s1, nrow)), -big, big).astype(jnp.int32)
  cmin, cmax = jnp.maximum(0, cmin), jnp.minimum(ncol - 1, cmax)
  rmin, rmax = jnp.maximum(0, rmin), jnp.minimum(nrow - 1, rmax)

  # the window: cells rs .. rs + wr - 1, cs .. cs + wc - 1, inside the grid
  rs = jnp.clip(rmin, 0, nrow - 1 - wr)
  cs = jnp.clip(cmin, 0, ncol - 1 - wc)
  z = jax.lax.dynamic_slice(hf.data, (rs, cs), (wr + 1, wc + 1)) * s2
  dx = (2.0 * s0) / (ncol - 1)
  dy = (2.0 * s1) / (nrow - 1)
  x = dx * (cs + jnp.arange(wc + 1)) - s0  # (wc + 1,)
  y = dy * (rs + jnp.arange(wr + 1)) - s1  # (wr + 1,)
  pts = jnp.stack(
    jnp.broadcast_arrays(x[None, :], y[:, None], z), axis=-1
  )  # (wr + 1, wc + 1, 3) surface points

  # prism (r, c, i) of addPrismVert: i = 0: (c-1, r+1), (c-1, r), (c, r+1); i = 1: (c-1, r),
  # (c, r+1), (c, r), with grid points indexed (column, row) in window coordinates
  a = pts[1:, :-1]  # (r+1, c-1)
  b = pts[:-1, :-1]  # (r, c-1)
  c = pts[1:, 1:]  # (r+1, c)
  e = pts[:-1, 1:]  # (r, c)
  top = jnp.stack([jnp.stack([a, b, c], -2), jnp.stack([b, c, e], -2)], axis=2)  # (wr, wc, 2, 3, 3)
  top = top.reshape(-1, 3, 3)
  bottom = top.at[:, :, 2].set(-s3)
  prisms = jnp.concatenate([bottom, top], axis=1)  # (P, 6, 3)

  r = rs + jnp.arange(wr)
  col = cs + 1 + jnp.arange(wc)
  in_grid = ((r >= rmin) & (r < rmax))[:, None] & ((col > cmin) & (col <= cmax))[None, :]
  valid = jnp.repeat(in_grid.reshape(-1), 2) & near & overlap
  # prism height test: the surface is below the geom
  valid &= jnp.any(top[:, :, 2] + margin >= lo[2], axis=1)
  return prisms, valid, gl


def _slots(h: GeomInfo, hit, dist, x1, x2, margin, nslot: int) -> Contacts:
  """The first contacts in MuJoCo's (row, column, triangle) order, in nslot slots."""
  normal = jax.vmap(convex.normalize3)(x1 - x2) @ h.mat.T
  pos = (0.5 * (x1 + x2)) @ h.mat.T + h.pos
  src = ranked(jnp.cumsum(hit, dtype=jnp.int32), 0, nslot)  # len(hit) past the last
  used = src < len(hit)
  src = jnp.where(used, src, 0)  # an empty slot reads the first prism (masked by dist)
  return Contacts(
    jnp.where(used, margin + dist[src], NO_CONTACT), pos[src], make_frame(normal[src])
  )


def _static_type(gtype):
  return int(gtype) if isinstance(gtype, (int, np.integer)) else gtype


def collide_hfield(
  h: GeomInfo,
  g: GeomInfo,
  margin: jax.Array,
  hf: HField,
  gtype,
  *,
  win: tuple[int, int],
  ccd_iterations: int = 35,
  ccd_tolerance: jax.Array | float = 1e-6,
) -> Contacts:
  """mjc_ConvexHField: contacts (max_contacts(win) slots) of a height field h and a convex geom g.

  gtype is g's geom type (one of HFIELD_TYPES), static (a Python int: the function is specialised
  to it) or traced (one compiled function for every type; meshes need g.vert); win (static) is
  the sub-grid window (`window`), large enough for g's bounding radius plus the margin; g.rbound
  is geom_rbound.
  """
  gtype = _static_type(gtype)
  kmax, tol, margin = int(ccd_iterations), jnp.asarray(ccd_tolerance), jnp.asarray(margin)
  prisms, valid, gl = window_prisms(h, g, margin, hf, gtype, win)
  hit, dist, x1, x2 = jax.vmap(lambda p: _penetration(p, gl, gtype, margin, kmax, tol))(prisms)
  return _slots(h, hit & valid, dist, x1, x2, margin, max_contacts(win))


@functools.cache
def _prism_collider(gtype: int | None, among: tuple[int, ...] | None, kmax: int):
  """collide_hfield_group's per-prism collider (and its early-exit form) for a group's static
  settings (gtype None where the geoms' types are traced), made once per setting: map_live finds
  a function it has traced before in jit's cache (broadphase._chunk_program)."""

  def pen(x, gl, margin, tol, early=False):
    p, k, t = x
    gk = jax.tree_util.tree_map(lambda a: a[k], gl)
    return _penetration(
      p, gk, gtype if gtype is not None else sp.narrow(t, among), margin[k], kmax, tol, early
    )

  return broadphase.item(pen)


def collide_hfield_group(
  h: GeomInfo,
  g: GeomInfo,
  margin: jax.Array,
  hf: HField,
  gtype,
  *,
  win: tuple[int, int],
  nitems: int,
  ccd_iterations: int = 35,
  ccd_tolerance: jax.Array | float = 1e-6,
  among: tuple[int, ...] | None = None,
) -> tuple[Contacts, jax.Array]:
  """collide_hfield of n geoms (h, g, margin and a traced gtype batched on axis 0) against one
  height field, running CCD on at most nitems prisms: (Contacts (n, max_contacts(win)), overflow).

  Only the prisms MuJoCo tests (under the geom's bounding box, their surface above its lowest
  point) go through GJK/EPA, the first nitems in (pair, row, column, triangle) order; more than
  nitems is an overflow (the rest get no contact). They cost in proportion to their number, not
  to nitems (broadphase.map_live). among: the types a traced gtype takes (static; None: any), so
  that the program holds those types' support functions only (support.narrow).
  """
  gtype = _static_type(gtype)
  kmax, tol = int(ccd_iterations), jnp.asarray(ccd_tolerance)
  n = margin.shape[0]
  static = isinstance(gtype, int)
  prisms, valid, gl = jax.vmap(
    lambda a, b, mg, t: window_prisms(a, b, mg, hf, gtype if static else sp.narrow(t, among), win)
  )(h, g, margin, jnp.zeros(n, jnp.int32) if static else gtype)
  npr = prisms.shape[1]
  # the first nitems tested prisms, in (pair, row, column, triangle) order
  on, overflow = broadphase.first(valid.reshape(-1), nitems)
  pair = jnp.arange(n * npr, dtype=jnp.int32) // npr
  types = jnp.zeros(n, jnp.int32) if static else gtype

  pen = _prism_collider(gtype if static else None, among, kmax)
  res = broadphase.map_live(
    pen.f,
    on,
    (prisms.reshape(-1, 6, 3), pair, types[pair]),
    fast=pen.fast,
    consts=(gl, margin, tol),
  )

  def back(x):
    return x.reshape((n, npr) + x.shape[1:])

  hit, dist, x1, x2 = (back(x) for x in res)
  hit &= valid
  nslot = max_contacts(win)
  c = jax.vmap(lambda a, ht, ds, p1, p2, mg: _slots(a, ht, ds, p1, p2, mg, nslot))(
    h, hit, dist, x1, x2, margin
  )
  return c, overflow

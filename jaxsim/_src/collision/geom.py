"""Geometry inputs and contact outputs shared by the colliders (MuJoCo's mjc_* interface)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.math import MINVAL

NO_CONTACT = 1e10  # dist of a contact slot that MuJoCo would not emit


class MeshPoly(NamedTuple):
  """A mesh's polygons as MuJoCo's mesh_poly* arrays (one mesh, padded; ids local to the mesh)."""

  normal: jax.Array  # (npoly, 3) mesh_polynormal
  vert: jax.Array  # (npoly, P) int mesh_polyvert, -1 padded
  nvert: jax.Array  # (npoly,) int mesh_polyvertnum
  map: jax.Array  # (nvert, D) int mesh_polymap: polygons at each vertex, -1 padded
  nmap: jax.Array  # (nvert,) int mesh_polymapnum


class GeomInfo(NamedTuple):
  """One geom as a collider sees it (geom_xpos, geom_xmat, geom_size and mesh data)."""

  pos: jax.Array  # (3,) geom_xpos
  mat: jax.Array  # (3, 3) geom_xmat reshaped: columns are the geom axes in the world frame
  size: jax.Array  # (3,) geom_size
  vert: jax.Array | None = None  # (nvert, 3) mesh vertices in the geom frame (mesh_vert)
  # mesh_graph of the convex hull as padded arrays (mesh_graph_arrays); None: no graph
  graph_globalid: jax.Array | None = None  # (nhull,) int: hull vertex -> index into vert
  graph_neighbors: jax.Array | None = None  # (nhull, maxdeg) int: hull-local ids, -1 padded
  rbound: jax.Array | None = None  # () geom_rbound
  # () int: row of the collider group's mesh table this geom's vert (and polygons) come from
  # (driver.mesh_tables; None: vert is the geom's own)
  mesh: jax.Array | None = None
  # the convex hull's vertices (nh, 3) and their ids into vert (nh,), ascending: what a support
  # search needs to visit (None: all of vert)
  hull_vert: jax.Array | None = None
  hull_id: jax.Array | None = None
  # () int: the mesh's own vertex count where vert is padded (a mesh table's row; None: len(vert))
  nvert: jax.Array | None = None
  # the mesh's polygons (plane-mesh contacts; GJK/EPA groups pass theirs separately)
  poly: MeshPoly | None = None


class Contacts(NamedTuple):
  """Fixed contact slots of one geom pair; unused slots have dist = NO_CONTACT."""

  dist: jax.Array  # (n,) signed distance, negative = penetration
  pos: jax.Array  # (n, 3) contact position (midpoint as MuJoCo)
  frame: jax.Array  # (n, 3, 3) rows: normal (geom1 -> geom2), tangent 1, tangent 2


def mesh_graph_arrays(graph: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(vert_globalid (nhull,), neighbors (nhull, maxdeg) padded with -1) from one mesh_graph."""
  graph = np.asarray(graph)
  numvert = int(graph[0])
  edgeadr = graph[2 : 2 + numvert]
  globalid = graph[2 + numvert : 2 + 2 * numvert].astype(np.int32)
  edges = graph[2 + 2 * numvert :]
  rows = []
  for k in range(numvert):
    row = []
    i = int(edgeadr[k])
    while edges[i] >= 0:
      row.append(int(edges[i]))
      i += 1
    rows.append(row)
  maxdeg = max((len(r) for r in rows), default=1)
  neighbors = np.full((numvert, maxdeg), -1, dtype=np.int32)
  for k, row in enumerate(rows):
    neighbors[k, : len(row)] = row
  return globalid, neighbors


def make_frame(normal: jax.Array, tangent: jax.Array | None = None) -> jax.Array:
  """Contact frame (..., 3, 3) from normal and optional first tangent, as mju_makeFrame."""
  nx = _norm(normal)
  x = jnp.where(
    (nx < MINVAL)[..., None],
    jnp.array([1.0, 0.0, 0.0], dtype=normal.dtype),
    normal / jnp.where(nx < MINVAL, 1.0, nx)[..., None],
  )
  if tangent is None:
    tangent = jnp.zeros_like(x)
  undefined = jnp.sum(tangent * tangent, axis=-1, keepdims=True) < 0.25
  # mju_makeFrame: y = (0, 1, 0) if possible, otherwise (0, 0, 1)
  use_y = (x[..., 1:2] < 0.5) & (x[..., 1:2] > -0.5)
  ey = jnp.array([0.0, 1.0, 0.0], dtype=x.dtype)
  ez = jnp.array([0.0, 0.0, 1.0], dtype=x.dtype)
  y = jnp.where(undefined, jnp.where(use_y, ey, ez), tangent)
  y = y - x * jnp.sum(x * y, axis=-1, keepdims=True)
  ny = _norm(y)
  # mju_normalize3 falls back to (1, 0, 0) for a null vector
  y = jnp.where(
    (ny < MINVAL)[..., None],
    jnp.array([1.0, 0.0, 0.0], dtype=x.dtype),
    y / jnp.where(ny < MINVAL, 1.0, ny)[..., None],
  )
  z = jnp.cross(x, y)
  return jnp.stack([x, y, z], axis=-2)


def _norm(v: jax.Array) -> jax.Array:
  """NaN-gradient-free Euclidean norm over the last axis."""
  sq = jnp.sum(v * v, axis=-1)
  pos = sq > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def _quad_area(a, b, c, d):
  g = jnp.cross(a - c, b - d)
  return jnp.sqrt(g @ g) * 0.5


def polygon_quad(
  poly: jax.Array, n: jax.Array, anchored: bool = False, rtol: float = 0.0
) -> jax.Array:
  """polygonQuad: maximum-area quadrilateral of a polygon (k, 3) of n >= 5 vertices: ids (4,).

  anchored: the quadrilateral's first corner stays at vertex 0 (one pass of the search, as
  mjc_PlaneConvex's, whose polygon starts at the support vertex). rtol: a corner moves on only
  where the area grows by more than this fraction (regular polygons tie exactly).
  """
  poly = jax.lax.stop_gradient(poly)
  nxt = lambda i: jnp.where(i + 1 >= n, 0, i + 1)  # noqa: E731
  area = lambda a, b, c, d: _quad_area(poly[a], poly[b], poly[c], poly[d])  # noqa: E731

  def grow(a, b, c, d, m):
    # advance c, then b, while the area grows (d was just advanced)
    def c_cond(st):
      return st[1]

    def c_body(st):
      c, _, m = st
      m2 = area(a, b, nxt(c), d)
      better = m2 > m * (1 + rtol)
      return jnp.where(better, nxt(c), c), better, jnp.where(better, m2, m)

    c, _, m = jax.lax.while_loop(c_cond, c_body, (c, jnp.array(True), m))

    def b_body(st):
      b, _, m = st
      m2 = area(a, nxt(b), c, d)
      better = m2 > m * (1 + rtol)
      return jnp.where(better, nxt(b), b), better, jnp.where(better, m2, m)

    b, _, m = jax.lax.while_loop(c_cond, b_body, (b, jnp.array(True), m))
    return b, c, m

  def d_body(st):
    a, b, c, d, m, best, _ = st
    m2 = area(a, b, c, nxt(d))
    better = m2 > m * (1 + rtol)
    b2, c2, m3 = grow(a, b, c, nxt(d), m2)
    best2 = jnp.stack([a, b2, c2, nxt(d)])
    return (
      a,
      jnp.where(better, b2, b),
      jnp.where(better, c2, c),
      jnp.where(better, nxt(d), d),
      jnp.where(better, m3, m),
      jnp.where(better, best2, best),
      better,
    )

  def a_body(a, st):
    b, c, d, m, best = st
    _, b, c, d, m, best, _ = jax.lax.while_loop(
      lambda s: s[6], d_body, (a, b, c, d, m, best, jnp.array(True))
    )
    # b, c and d never fall behind a
    ba = b == a
    b1 = jnp.where(ba, nxt(b), b)
    cb = ba & (c == b1)
    c1 = jnp.where(cb, nxt(c), c)
    d1 = jnp.where(cb & (d == c1), nxt(d), d)
    return b1, c1, d1, m, best

  init = (jnp.array(1), jnp.array(2), jnp.array(3), area(0, 1, 2, 3), jnp.arange(4))
  # indices only (no derivative flows): a while_loop over the n vertices
  best = jax.lax.while_loop(
    lambda c: c[0] < (1 if anchored else jnp.minimum(n, poly.shape[0])),
    lambda c: (c[0] + 1, a_body(c[0], c[1])),
    (jnp.array(0), init),
  )[1][4]
  return best

"""Support functions of convex geoms for GJK/EPA (engine_collision_convex.c mjc_*Support).

A support function maps a unit direction `d` (3,) in the world frame to the point of the geom
farthest along `d` (3,) in the world frame, plus the index of the vertex it is for discrete
geoms (box corner bits, mesh vertex id; -1 otherwise), which EPA and multi-contact use.

A geom type here is static (a Python int: the functions are specialised to it), traced (an int
array: every type's branch is computed and the geom's own selected), or an `AnyOf`: traced, but
known at trace time to be one of a few types, so that only those types' branches are computed (a
pair group of capsules and cylinders does not pay for boxes, ellipsoids and meshes).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.collision.geom import GeomInfo, MeshPoly
from jaxsim._src.enums import MINVAL, GeomType

MINVAL2 = MINVAL * MINVAL


@dataclasses.dataclass(frozen=True)
class AnyOf:
  """A traced geom type known statically to be one of `among`.

  Not a pytree: it is made inside the function that uses it (a collider's per-pair function), from
  the pair's traced type and the static types of its group, and never crosses a transformation.
  """

  value: jax.Array  # int32 (): the geom type
  among: tuple[int, ...]  # the types it can take, sorted, at least two


def narrow(gtype, among) -> int | AnyOf | jax.Array:
  """gtype (traced) as what is known of it: the static type if `among` holds one, AnyOf(gtype,
  among) if more; gtype itself if it is static or among is None (nothing known)."""
  if among is None or isinstance(gtype, (int, np.integer)):
    return gtype
  among = tuple(sorted({int(t) for t in among}))
  return among[0] if len(among) == 1 else AnyOf(gtype, among)


def _possible(gtype, types) -> list[int]:
  """Those of `types` that a traced gtype (an array or AnyOf) can be."""
  if isinstance(gtype, AnyOf):
    return [int(t) for t in types if int(t) in gtype.among]
  return [int(t) for t in types]


def _value(gtype) -> jax.Array:
  return gtype.value if isinstance(gtype, AnyOf) else gtype


def is_type(gtype, types) -> bool | jax.Array:
  """gtype in types: a Python bool where that is known at trace time (a static type, or an AnyOf
  whose types are all in, or all out of, types), else a traced bool."""
  if isinstance(gtype, (int, np.integer)):
    return int(gtype) in types
  hit = _possible(gtype, types)
  if not hit:
    return False
  if isinstance(gtype, AnyOf) and len(hit) == len(gtype.among):
    return True
  v = _value(gtype)
  return jnp.any(jnp.stack([v == u for u in hit]))


def _local(info: GeomInfo, d: jax.Array) -> jax.Array:
  """Direction in the geom frame (mulMatTVec3)."""
  return info.mat.T @ d


def _world(info: GeomInfo, p: jax.Array) -> jax.Array:
  """Point from the geom frame to the world frame (localToGlobal)."""
  return info.mat @ p + info.pos


def point_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_pointSupport: the geom centre (a sphere shrunk to its centre)."""
  del d
  return info.pos, jnp.array(-1, jnp.int32)


def line_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_lineSupport: end of the capsule's axis segment (a capsule shrunk to its segment)."""
  axis = info.mat[:, 2]
  scl = jnp.where(jnp.dot(axis, d) >= 0, info.size[1], -info.size[1])
  return axis * scl + info.pos, jnp.array(-1, jnp.int32)


def sphere_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_sphereSupport."""
  return info.size[0] * d + info.pos, jnp.array(-1, jnp.int32)


def capsule_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_capsuleSupport."""
  ld = _local(info, d)
  res = ld * info.size[0]
  res = res.at[2].add(jnp.where(ld[2] >= 0, info.size[1], -info.size[1]))
  return _world(info, res), jnp.array(-1, jnp.int32)


def ellipsoid_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_ellipsoidSupport."""
  ld = _local(info, d)
  s = ld * info.size
  norm2 = jnp.dot(s, s)
  small = norm2 < MINVAL2
  inv = 1.0 / jnp.sqrt(jnp.where(small, 1.0, norm2))
  res = jnp.where(small, jnp.array([info.size[0], 0.0, 0.0]), s * inv * info.size)
  return _world(info, res), jnp.array(-1, jnp.int32)


def cylinder_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_cylinderSupport; the index is the cap the point lies on (MuJoCo 4: 0 top, 1 bottom)."""
  ld = _local(info, d)
  n2 = ld[0] * ld[0] + ld[1] * ld[1]
  ok = n2 >= MINVAL2
  scl = jnp.where(ok, info.size[0] / jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)
  z = jnp.where(ld[2] >= 0, info.size[1], -info.size[1])
  res = jnp.stack([scl * ld[0], scl * ld[1], z])
  return _world(info, res), (ld[2] < 0).astype(jnp.int32)


def box_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_boxSupport; the index is the corner's bit code (x: 1, y: 2, z: 4)."""
  ld = _local(info, d)
  res = jnp.where(ld >= 0, info.size, -info.size)
  bits = (res > 0).astype(jnp.int32)
  idx = bits[0] + 2 * bits[1] + 4 * bits[2]
  return _world(info, res), idx


def mesh_support(info: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mjc_meshSupport / mjc_hillclimbSupport: the vertex with the largest projection on d.

  An exhaustive search gives hill climbing's answer on a convex hull (the first vertex of
  equal projections, where MuJoCo keeps its warm-start vertex).
  """
  ld = _local(info, d)
  if info.hull_vert is not None:
    # only hull vertices can be support points; ids ascending keep the first of equal ones
    j = jnp.argmax(info.hull_vert @ ld)
    return _world(info, info.hull_vert[j]), info.hull_id[j].astype(jnp.int32)
  dots = info.vert @ ld
  idx = jnp.argmax(dots).astype(jnp.int32)
  return _world(info, info.vert[idx]), idx


SUPPORT = {
  GeomType.SPHERE: sphere_support,
  GeomType.CAPSULE: capsule_support,
  GeomType.ELLIPSOID: ellipsoid_support,
  GeomType.CYLINDER: cylinder_support,
  GeomType.BOX: box_support,
  GeomType.MESH: mesh_support,
}


def support(
  info: GeomInfo, gtype, d: jax.Array, margin: jax.Array | float = 0.0
) -> tuple[jax.Array, jax.Array]:
  """Support point of a geom in unit direction d, inflated by margin/2 (mjc_support + margin).

  gtype is a static geom type, or a traced one (an array or AnyOf): then every type's support (of
  those it can be) is computed and the geom's own is selected (one compiled function for all
  convex pairs; meshes need info.vert).
  """
  if isinstance(gtype, (int, np.integer)):
    p, idx = SUPPORT[int(gtype)](info, d)
  else:
    types = [t for t in _possible(gtype, SUPPORT) if t != GeomType.MESH or info.vert is not None]
    res = [SUPPORT[t](info, d) for t in types]
    sel = jnp.stack([_value(gtype) == t for t in types])
    p = jnp.sum(jnp.where(sel[:, None], jnp.stack([r[0] for r in res]), 0.0), axis=0)
    idx = jnp.sum(jnp.where(sel, jnp.stack([r[1] for r in res]), 0))
  return p + d * (0.5 * margin), idx


# ------------------------------------- multi-contact features -------------------------------------
# MuJoCo 4's mjc_multicontact recovers the touching features (faces, edges) of boxes, meshes,
# cylinders and capsules from the vertex ids of the final simplex: box corners are bit codes,
# mesh vertices their ids, cylinder support points the cap they lie on (0 top, 1 bottom).

FACE_TOL = 0.996  # mjFACE_TOL
EDGE_TOL = 0.0888  # mjEDGE_TOL

# cylinderFace's 16-gon, as the literal tables of MuJoCo 4 (15 digits)
COS16 = np.array(
  [1.0, 0.923879532511287, 0.707106781186548, 0.38268343236509, 0.0, -0.38268343236509,
   -0.707106781186547, -0.923879532511287, -1.0, -0.923879532511287, -0.707106781186548,
   -0.38268343236509, 0.0, 0.38268343236509, 0.707106781186547, 0.923879532511287]
)  # fmt: skip
SIN16 = np.array(
  [0.0, 0.38268343236509, 0.707106781186547, 0.923879532511287, 1.0, 0.923879532511287,
   0.707106781186548, 0.38268343236509, 0.0, -0.38268343236509, -0.707106781186547,
   -0.923879532511287, -1.0, -0.923879532511287, -0.707106781186548, -0.38268343236509]
)  # fmt: skip

# boxFace corner signs for faces +x, -x, +y, -y, +z, -z
_BOX_FACE = np.array(
  [
    [[1, 1, 1], [1, 1, -1], [1, -1, -1], [1, -1, 1]],
    [[-1, 1, -1], [-1, 1, 1], [-1, -1, 1], [-1, -1, -1]],
    [[-1, 1, -1], [1, 1, -1], [1, 1, 1], [-1, 1, 1]],
    [[-1, -1, 1], [1, -1, 1], [1, -1, -1], [-1, -1, -1]],
    [[-1, 1, 1], [1, 1, 1], [1, -1, 1], [-1, -1, 1]],
    [[1, 1, -1], [-1, 1, -1], [-1, -1, -1], [1, -1, -1]],
  ],
  dtype=np.float64,
)
_BOX_AXES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)


class Sizes(NamedTuple):
  """Static padded sizes of the feature arrays: normals, edges, polygon vertices."""

  nnormal: int
  nedge: int
  npoly: int


def feature_sizes(gtype, poly: MeshPoly | None) -> Sizes:
  """Sizes for a static type, or the maximum over the types a traced gtype can be."""
  d = 1 if poly is None else int(poly.map.shape[-1])
  p = 2 if poly is None else int(poly.vert.shape[-1])
  table = {
    GeomType.CAPSULE: Sizes(1, 1, 2),
    GeomType.CYLINDER: Sizes(1, 1, 16),
    GeomType.BOX: Sizes(3, 3, 4),
    GeomType.MESH: Sizes(max(2, d), d, p),
  }
  if isinstance(gtype, (int, np.integer)):
    return table.get(int(gtype), Sizes(1, 1, 2))
  among = gtype.among if isinstance(gtype, AnyOf) else tuple(table)
  sizes = [table.get(t, Sizes(1, 1, 2)) for t in among]
  return Sizes(*(max(s[i] for s in sizes) for i in range(3)))


def _pad(x: jax.Array, n: int, fill=0) -> jax.Array:
  """Pad axis 0 of x to n entries."""
  k = x.shape[0]
  if k == n:
    return x
  return jnp.concatenate([x, jnp.full((n - k,) + x.shape[1:], fill, x.dtype)])


def _bit(i, b):
  return (i & b) != 0


def _corner_local(size: jax.Array, i: jax.Array) -> jax.Array:
  return jnp.stack([jnp.where(_bit(i, k), size[j], -size[j]) for j, k in enumerate((1, 2, 4))])


def _box_normals(info: GeomInfo, dim, vi, d):
  """boxNormals (with boxNormals2's fallback along d): ((3, 3), ids (3,), valid (3,))."""
  mat = info.mat
  v1, v2, v3 = vi[0], vi[1], vi[2]
  v3 = jnp.where(dim == 3, v3, v2)
  comp = []
  for b in (1, 2, 4):
    on = _bit(v1, b) & _bit(v2, b) & _bit(v3, b)
    off = ~_bit(v1, b) & ~_bit(v2, b) & ~_bit(v3, b)
    comp.append(on.astype(int) - off.astype(int))
  comp = jnp.stack(comp)  # (3,) in {-1, 0, 1}
  nz = comp != 0
  c = jnp.sum(nz)
  # boxNormals2: the first face whose normal is within mjFACE_TOL of d
  ln = mat.T @ d
  ln = ln * (1.0 / jnp.sqrt(jnp.where(ln @ ln > 0, ln @ ln, 1.0)))
  close = _BOX_AXES @ ln > FACE_TOL
  k2 = jnp.argmax(close)
  n2 = mat @ jnp.asarray(_BOX_AXES)[k2]
  axes = jnp.eye(3)
  ids_axis = jnp.arange(3) * 2 + (comp < 0)
  # dim 3: one common coordinate -> one normal; dim 2: two -> two normals (x, y, z order)
  order = jnp.argsort(~nz, stable=True)
  sel = (mat @ (axes * comp[:, None]).T).T[order]  # (3, 3) nonzero ones first
  sel_ids = ids_axis[order]
  one = (dim == 3) & (c == 1)
  two = (dim == 2) & (c == 2)
  fallback = ((dim == 3) & (c != 1)) | ((dim == 2) & (c != 2))
  # dim 1: the three faces at the corner
  s1 = jnp.where(jnp.stack([_bit(v1, 1), _bit(v1, 2), _bit(v1, 4)]), 1.0, -1.0)
  n1 = (mat * s1[None, :]).T
  ids1 = jnp.arange(3) * 2 + (s1 < 0)
  normals = jnp.where(dim == 1, n1, jnp.where(fallback, jnp.stack([n2, n2, n2]), sel))
  ids = jnp.where(dim == 1, ids1, jnp.where(fallback, jnp.full(3, k2), sel_ids))
  nvalid = jnp.where(
    dim == 1, 3, jnp.where(one, 1, jnp.where(two, 2, jnp.where(fallback & close[k2], 1, 0)))
  )
  return normals, ids, jnp.arange(3) < nvalid


def _intersect2(a: jax.Array, na, b: jax.Array, nb):
  """intersect: up to 2 common entries of a[:na] and b[:nb], in a's order: (res (2,), count)."""
  m = (a[:, None] == b[None, :]) & (jnp.arange(a.shape[0])[:, None] < na)
  m &= jnp.arange(b.shape[0])[None, :] < nb
  # each a[i] counts once per matching b[j] (the C loop adds every match)
  cnt = jnp.sum(m, axis=1)
  flat = jnp.repeat(a, b.shape[0])
  mm = m.reshape(-1)
  pos = jnp.cumsum(mm) - 1
  res = jnp.full(2, -1, a.dtype).at[jnp.where(mm & (pos < 2), pos, 2)].set(flat, mode='drop')
  return res, jnp.minimum(jnp.sum(cnt), 2)


def _mesh_normals(info: GeomInfo, poly: MeshPoly, dim, vi, k: int):
  """meshNormals: ((k, 3), polygon ids (k,), valid (k,))."""
  v1, v2, v3 = (jnp.maximum(x, 0) for x in vi)
  m1, n1 = poly.map[v1], poly.nmap[v1]
  m2, n2 = poly.map[v2], poly.nmap[v2]
  m3, n3 = poly.map[v3], poly.nmap[v3]
  e, ne = _intersect2(m1, n1, m2, n2)
  f, nf = _intersect2(e, ne, m3, n3)
  ids3 = _pad(f[:1], k, -1)
  ids2 = _pad(e, k, -1)
  ids1 = _pad(m1, k, -1)[:k]
  cnt = jnp.where(dim == 3, jnp.minimum(nf, 1) * (ne > 0), jnp.where(dim == 2, ne, n1))
  ids = jnp.where(dim == 3, ids3, jnp.where(dim == 2, ids2, ids1))
  normals = (info.mat @ poly.normal[jnp.maximum(ids, 0)].T).T
  return normals, ids, jnp.arange(k) < cnt


def face_normals(info: GeomInfo, gtype, poly: MeshPoly | None, dim, vi, d, k: int):
  """Face normals at a simplex feature (boxNormals, meshNormals, cylinder caps), padded to k."""

  def cyl():
    s = jnp.where(vi[0] == 0, 1.0, -1.0)
    n = _pad((info.mat[:, 2] * s)[None], k)
    return n, _pad(vi[:1], k, -1), (jnp.arange(k) < 1) & (dim == 1)

  def box():
    n, i, v = _box_normals(info, dim, vi, d)
    return _pad(n, k), _pad(i, k, -1), _pad(v, k, False)

  def mesh():
    return _mesh_normals(info, poly, dim, vi, k)

  def none():
    return jnp.zeros((k, 3)), jnp.full(k, -1), jnp.zeros(k, bool)

  table = {GeomType.CAPSULE: none, GeomType.CYLINDER: cyl, GeomType.BOX: box}
  if poly is not None:
    table[GeomType.MESH] = mesh
  return _by_type(gtype, table, none)


def _by_type(gtype, table, default):
  """Evaluate table[gtype]() for a static type, or select among those a traced one can be."""
  if isinstance(gtype, (int, np.integer)):
    return table.get(int(gtype), default)()
  out = default()
  v = _value(gtype)
  for t in _possible(gtype, table):
    res = table[t]()
    out = jax.tree_util.tree_map(lambda a, b, t=t: jnp.where(v == t, a, b), res, out)
  return out


def _normalize(v):
  """mju_normalize3 over the last axis, with finite gradients at zero."""
  n2 = jnp.sum(v * v, -1, keepdims=True)
  n = jnp.sqrt(jnp.where(n2 > 0, n2, 1.0))
  small = (n2 <= 0) | (n < MINVAL)
  return jnp.where(small, jnp.array([1.0, 0.0, 0.0]), v / jnp.where(small, 1.0, n))


def edge_dirs(info: GeomInfo, gtype, poly: MeshPoly | None, dim, vi, v, x, margin, k: int):
  """geomEdgeNormals: unit edge directions (k, 3), far ends (k, 3), start (3,), valid (k,)."""
  mat, pos, size = info.mat, info.pos, info.size

  def capsule():
    ax = mat[:, 2]
    proj = (x - pos) @ ax
    v0 = x + (-proj - size[1]) * ax
    return _pad(ax[None], k), _pad((x + (size[1] - proj) * ax)[None], k), v0, jnp.arange(k) < 1

  def cylinder():
    s = jnp.where(vi[0] == 0, -1.0, 1.0)
    ax = s * mat[:, 2]
    rel = mat.T @ (v[0] - pos)
    n2 = rel[0] * rel[0] + rel[1] * rel[1]
    ok = n2 >= 1e-30
    sc = jnp.where(ok, size[0] / jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)
    rim = mat @ jnp.stack([rel[0] * sc, rel[1] * sc, -s * size[1]]) + pos
    v0 = jnp.where(margin > 0, rim, v[0])
    end = v0 + (size[1] + size[1]) * ax
    return _pad(ax[None], k), _pad(end[None], k), v0, jnp.arange(k) < 1

  def box():
    v0 = mat @ _corner_local(size, vi[0]) + pos
    v1 = mat @ _corner_local(size, vi[1]) + pos
    c = _corner_local(size, vi[0])
    ends1 = jnp.stack([c * jnp.array(s) for s in ([-1, 1, 1], [1, -1, 1], [1, 1, -1])])
    ends1 = (mat @ ends1.T).T + pos
    ends = jnp.where(dim == 2, jnp.stack([v1, v1, v1]), ends1)
    dirs = _normalize(ends - v0)
    cnt = jnp.where(dim == 2, 1, jnp.where(dim == 1, 3, 0))
    return _pad(dirs, k), _pad(ends, k), v0, jnp.arange(k) < cnt

  def mesh():
    vert = info.vert
    i0 = jnp.maximum(vi[0], 0)
    v0 = mat @ vert[i0] + pos
    v1 = mat @ vert[jnp.maximum(vi[1], 0)] + pos
    # dim 1: for each polygon at the vertex, the vertex before it in the polygon
    pids = jnp.maximum(poly.map[i0], 0)  # (D,)
    pv = poly.vert[pids]  # (D, P)
    nv = poly.nvert[pids]
    hit = (pv == i0) & (jnp.arange(pv.shape[1])[None, :] < nv[:, None])
    j = jnp.argmax(hit, axis=1)
    prev = jnp.where(j == 0, nv - 1, j - 1)
    pvid = jnp.take_along_axis(pv, prev[:, None], axis=1)[:, 0]
    ends1 = (mat @ vert[jnp.maximum(pvid, 0)].T).T + pos
    valid1 = (jnp.arange(pv.shape[0]) < poly.nmap[i0]) & jnp.any(hit, axis=1)
    ends = jnp.where(dim == 2, _pad(v1[None], pv.shape[0]), ends1)
    # a mesh without polygons (a padded row of a mesh table: nvert 0) has no features
    valid = jnp.where(dim == 2, jnp.arange(pv.shape[0]) < 1, valid1 & (dim == 1))
    valid &= poly.nvert[0] > 0
    return _pad(_normalize(ends - v0), k), _pad(ends, k), v0, _pad(valid, k, False)

  def none():
    return jnp.zeros((k, 3)), jnp.zeros((k, 3)), v[0], jnp.zeros(k, bool)

  table = {GeomType.CAPSULE: capsule, GeomType.CYLINDER: cylinder, GeomType.BOX: box}
  if poly is not None:
    table[GeomType.MESH] = mesh
  return _by_type(gtype, table, none)


def face_polygon(info: GeomInfo, gtype, poly: MeshPoly | None, idx, k: int):
  """Vertices (k, 3) of face idx (boxFace, cylinder cap 16-gon, meshFace) and their count."""
  mat, pos, size = info.mat, info.pos, info.size

  def box():
    c = jnp.asarray(_BOX_FACE)[jnp.clip(idx, 0, 5)] * size
    return _pad((mat @ c.T).T + pos, k), jnp.array(4)

  def cylinder():
    s = jnp.where(idx == 0, 1.0, -1.0)
    r, h = size[0], size[1]
    loc = jnp.stack(
      [r * jnp.asarray(COS16), s * (r * -jnp.asarray(SIN16)), jnp.full(16, s * h)], axis=1
    )
    return _pad((mat @ loc.T).T + pos, k), jnp.array(16)

  def mesh():
    i = jnp.maximum(idx, 0)
    nv = poly.nvert[i]
    p = poly.vert.shape[1]
    # meshFace lists the polygon's vertices in reverse order
    j = jnp.clip(nv - 1 - jnp.arange(p), 0, p - 1)
    ids = jnp.maximum(poly.vert[i][j], 0)
    return _pad((mat @ info.vert[ids].T).T + pos, k), nv

  def none():
    return jnp.zeros((k, 3)), jnp.array(0)

  table = {GeomType.CYLINDER: cylinder, GeomType.BOX: box}
  if poly is not None:
    table[GeomType.MESH] = mesh
  return _by_type(gtype, table, none)

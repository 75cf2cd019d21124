"""Ray casting against geoms, vectorised over geoms (engine_ray.c: mj_ray, mju_rayGeom).

A ray is pnt + x vec, x >= 0; every function returns the distance x to the nearest surface, or -1
where the ray misses. The primitive functions take batches of geoms (pos (..., 3), mat
(..., 3, 3), size (..., 3)) and one ray, so they broadcast over geoms and vmap over rays. `ray`
mirrors mj_ray (nearest geom not eliminated by body, visibility, static flag or group);
height fields are tested cell by cell along the ray's horizontal path, meshes face by face.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.enums import MINVAL, NGROUP, GeomType
from jaxsim._src.types import Data, Model


def _safe_div(a: jax.Array, b: jax.Array) -> jax.Array:
  """a / b where b != 0, else 0 (with a NaN-free gradient)."""
  ok = b != 0
  return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)


def _nearest_of(x: jax.Array) -> jax.Array:
  """Smallest non-negative entry along the last axis, or -1 where there is none."""
  best = jnp.min(jnp.where(x >= 0, x, jnp.inf), axis=-1)
  return jnp.where(jnp.isinf(best), -1.0, best)


def _nearest(*cands: jax.Array) -> jax.Array:
  """Smallest non-negative of a few candidates, elementwise, or -1 where there is none."""
  return _nearest_of(jnp.stack(jnp.broadcast_arrays(*cands), axis=-1))


def _map(pos: jax.Array, mat: jax.Array, pnt: jax.Array, vec: jax.Array):
  """The ray in geom-local coordinates (ray_map): lpnt, lvec (..., 3)."""
  lpnt = jnp.einsum('...ji,...j->...i', mat, pnt - pos)
  lvec = jnp.einsum('...ji,...j->...i', mat, jnp.broadcast_to(vec, lpnt.shape))
  return lpnt, lvec


def _quad(a: jax.Array, b: jax.Array, c: jax.Array):
  """Roots x0 <= x1 of a x^2 + 2 b x + c = 0 (-1 if not real) and the smallest >= 0 (ray_quad)."""
  det = b * b - a * c
  ok = (det >= 0) & (a >= MINVAL)
  sq = jnp.where(det > 0, jnp.sqrt(jnp.where(det > 0, det, 1.0)), 0.0)
  a = jnp.where(ok, a, 1.0)
  x0 = jnp.where(ok, (-b - sq) / a, -1.0)
  x1 = jnp.where(ok, (-b + sq) / a, -1.0)
  x = jnp.where(x0 >= 0, x0, jnp.where(x1 >= 0, x1, -1.0))
  return x, x0, x1


def ray_plane(pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against planes: front face only, within the rendered rectangle (ray_plane)."""
  lpnt, lvec = _map(pos, mat, pnt, vec)
  front = lvec[..., 2] <= -MINVAL
  x = -lpnt[..., 2] / jnp.where(front, lvec[..., 2], -1.0)
  p = lpnt[..., :2] + x[..., None] * lvec[..., :2]
  inside = (size[..., :2] <= 0) | (jnp.abs(p) <= size[..., :2])
  ok = front & (x >= 0) & jnp.all(inside, axis=-1)
  return jnp.where(ok, x, -1.0)


def ray_sphere(pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against spheres of radius size[0] (ray_sphere)."""
  del mat
  dif = pnt - pos
  a = jnp.sum(vec * vec, axis=-1)
  b = jnp.sum(vec * dif, axis=-1)
  c = jnp.sum(dif * dif, axis=-1) - size[..., 0] * size[..., 0]
  return _quad(a, b, c)[0]


def ray_capsule(pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against capsules: the round side between the caps and the two half spheres."""
  lpnt, lvec = _map(pos, mat, pnt, vec)
  r, h = size[..., 0], size[..., 1]
  a = lvec[..., 0] ** 2 + lvec[..., 1] ** 2
  b = lvec[..., 0] * lpnt[..., 0] + lvec[..., 1] * lpnt[..., 1]
  c = lpnt[..., 0] ** 2 + lpnt[..., 1] ** 2 - r * r
  sol = _quad(a, b, c)[0]
  side = jnp.where((sol >= 0) & (jnp.abs(lpnt[..., 2] + sol * lvec[..., 2]) <= h), sol, -1.0)
  cands = [side]
  a = jnp.sum(lvec * lvec, axis=-1)
  for sign in (1.0, -1.0):
    ldif = lpnt.at[..., 2].add(-sign * h)
    b = jnp.sum(lvec * ldif, axis=-1)
    c = jnp.sum(ldif * ldif, axis=-1) - r * r
    _, x0, x1 = _quad(a, b, c)
    for xx in (x0, x1):
      z = lpnt[..., 2] + xx * lvec[..., 2]
      cap = (z >= h) if sign > 0 else (z <= -h)
      cands.append(jnp.where((xx >= 0) & cap, xx, -1.0))
  return _nearest(*cands)


def ray_ellipsoid(pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against ellipsoids with semi-axes size (ray_ellipsoid)."""
  lpnt, lvec = _map(pos, mat, pnt, vec)
  s = 1 / (size * size)
  a = jnp.sum(s * lvec * lvec, axis=-1)
  b = jnp.sum(s * lvec * lpnt, axis=-1)
  c = jnp.sum(s * lpnt * lpnt, axis=-1) - 1
  return _quad(a, b, c)[0]


def ray_cylinder(pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against cylinders: the two flat discs and the round side (ray_cylinder)."""
  lpnt, lvec = _map(pos, mat, pnt, vec)
  r, h = size[..., 0], size[..., 1]
  cands = []
  tilted = jnp.abs(lvec[..., 2]) > MINVAL
  lz = jnp.where(tilted, lvec[..., 2], 1.0)
  for side in (-1.0, 1.0):
    sol = (side * h - lpnt[..., 2]) / lz
    p = lpnt[..., :2] + sol[..., None] * lvec[..., :2]
    ok = tilted & (sol >= 0) & (jnp.sum(p * p, axis=-1) <= r * r)
    cands.append(jnp.where(ok, sol, -1.0))
  a = lvec[..., 0] ** 2 + lvec[..., 1] ** 2
  b = lvec[..., 0] * lpnt[..., 0] + lvec[..., 1] * lpnt[..., 1]
  c = lpnt[..., 0] ** 2 + lpnt[..., 1] ** 2 - r * r
  sol = _quad(a, b, c)[0]
  cands.append(jnp.where((sol >= 0) & (jnp.abs(lpnt[..., 2] + sol * lvec[..., 2]) <= h), sol, -1.0))
  return _nearest(*cands)


_SIDE = np.array([-1.0, 1.0, -1.0, 1.0, -1.0, 1.0])
_AXIS = np.repeat(np.eye(3, dtype=bool), 2, axis=0)  # (6, 3): the axis each face is normal to


def _box_faces(lpnt: jax.Array, lvec: jax.Array, size: jax.Array) -> jax.Array:
  """Distances (..., 6) to the box faces (-x, +x, -y, +y, -z, +z), -1 where missed (ray_box all)."""
  lp, lv, sz = (jnp.repeat(a, 2, axis=-1) for a in (lpnt, lvec, size))  # (..., 6)
  nz = jnp.abs(lv) > MINVAL
  sol = (_SIDE * sz - lp) / jnp.where(nz, lv, 1.0)
  p = lpnt[..., None, :] + sol[..., None] * lvec[..., None, :]  # (..., 6, 3)
  inside = jnp.all(_AXIS | (jnp.abs(p) <= size[..., None, :]), axis=-1)
  return jnp.where(nz & (sol >= 0) & inside, sol, -1.0)


def ray_box(pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against boxes with half sizes size (ray_box)."""
  lpnt, lvec = _map(pos, mat, pnt, vec)
  return _nearest_of(_box_faces(lpnt, lvec, size))


PRIMITIVES = {
  GeomType.PLANE: ray_plane,
  GeomType.SPHERE: ray_sphere,
  GeomType.CAPSULE: ray_capsule,
  GeomType.ELLIPSOID: ray_ellipsoid,
  GeomType.CYLINDER: ray_cylinder,
  GeomType.BOX: ray_box,
}


def ray_geom(geomtype: int, pos, mat, size, pnt, vec) -> jax.Array:
  """Ray against primitive geoms of one static type (mju_rayGeom)."""
  if int(geomtype) not in PRIMITIVES:
    raise NotImplementedError(f'ray casting against geom type {int(geomtype)} needs mj_ray')
  return PRIMITIVES[int(geomtype)](pos, mat, size, pnt, vec)


def _basis(lvec: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Orthonormal basis (b0, b1) (..., 3) of the plane normal to lvec, as mju_rayTree builds it."""
  av = jnp.abs(lvec)
  ix = (av[..., 0] >= av[..., 1]) & (av[..., 0] >= av[..., 2])
  iy = ~ix & (av[..., 1] >= av[..., 2])
  zero = jnp.where(ix[..., None], 0, jnp.where(iy[..., None], 1, 2))
  b0 = jnp.where(jnp.arange(3) == zero, 0.0, jnp.ones_like(lvec))
  dot = jnp.sum(lvec * b0, axis=-1, keepdims=True)
  b1 = b0 - lvec * _safe_div(dot, jnp.sum(lvec * lvec, axis=-1, keepdims=True))
  b1 = b1 * _safe_div(1.0, _norm(b1))
  b0 = jnp.cross(b1, lvec)
  b0 = b0 * _safe_div(1.0, _norm(b0))
  return b0, b1


def _norm(x: jax.Array) -> jax.Array:
  sq = jnp.sum(x * x, axis=-1, keepdims=True)
  return jnp.where(sq > 0, jnp.sqrt(jnp.where(sq > 0, sq, 1.0)), 0.0)


def ray_triangle(v: jax.Array, lpnt, lvec, b0, b1) -> jax.Array:
  """Ray against triangles v (..., 3, 3) in the ray's local frame (ray_triangle); -1 if missed.

  lpnt, lvec, b0, b1 (..., 3) broadcast against the triangles' leading dimensions.
  """
  dif = v - lpnt[..., None, :]
  p0 = jnp.sum(dif * b0[..., None, :], axis=-1)  # (..., 3)
  p1 = jnp.sum(dif * b1[..., None, :], axis=-1)
  same = (
    jnp.all(p0 > 0, axis=-1)
    | jnp.all(p0 < 0, axis=-1)
    | jnp.all(p1 > 0, axis=-1)
    | jnp.all(p1 < 0, axis=-1)
  )
  a00, a01 = p0[..., 0] - p0[..., 2], p0[..., 1] - p0[..., 2]
  a10, a11 = p1[..., 0] - p1[..., 2], p1[..., 1] - p1[..., 2]
  r0, r1 = -p0[..., 2], -p1[..., 2]
  det = a00 * a11 - a01 * a10
  flat = jnp.abs(det) < MINVAL
  det = jnp.where(flat, 1.0, det)
  t0 = (a11 * r0 - a01 * r1) / det
  t1 = (-a10 * r0 + a00 * r1) / det
  outside = (t0 < 0) | (t1 < 0) | (t0 + t1 > 1)
  nrm = jnp.cross(v[..., 0, :] - v[..., 2, :], v[..., 1, :] - v[..., 2, :])
  denom = jnp.sum(lvec * nrm, axis=-1)
  parallel = jnp.abs(denom) < MINVAL
  x = -jnp.sum((lpnt - v[..., 2, :]) * nrm, axis=-1) / jnp.where(parallel, 1.0, denom)
  return jnp.where(same | flat | outside | parallel, -1.0, x)


def _ray_mesh(m: Model, d: Data, geoms: np.ndarray, pnt, vec) -> jax.Array:
  """Ray against mesh geoms (G,), every face of each mesh (mj_rayMesh without the BVH)."""
  mesh = np.asarray(m.geom_dataid)[geoms]
  facenum = np.asarray(m.mesh_facenum)[mesh]
  nface = int(facenum.max())
  k = np.arange(nface)
  valid = k[None, :] < facenum[:, None]
  face = np.asarray(m.mesh_faceadr)[mesh][:, None] + np.where(valid, k[None, :], 0)
  vidx = np.asarray(m.mesh_face)[face] + np.asarray(m.mesh_vertadr)[mesh][:, None, None]
  vert = m.mesh_vert[vidx]  # (G, F, 3, 3)
  lpnt, lvec = _map(d.geom_xpos[geoms], d.geom_xmat[geoms], pnt, vec)
  b0, b1 = _basis(lvec)
  ex = lambda a: a[:, None]  # noqa: E731
  x = ray_triangle(vert, ex(lpnt), ex(lvec), ex(b0), ex(b1))
  return _nearest_of(jnp.where(valid, x, -1.0))


def _ray_hfield(m: Model, d: Data, geoms: np.ndarray, pnt, vec) -> jax.Array:
  """Ray against height-field geoms (G,) (mj_rayHfield).

  MuJoCo tests the triangles of every cell in the padded bounding rectangle of the ray's path
  through the top box; a hit lies on that path, so here the cells are those the path crosses:
  the path is split at every grid line it crosses (a fixed number of sorted crossing points, one
  per grid line), and the cell holding each piece's midpoint is tested.
  """
  hid = np.asarray(m.geom_dataid)[geoms]
  nrow, ncol = np.asarray(m.hfield_nrow)[hid], np.asarray(m.hfield_ncol)[hid]
  adr = np.asarray(m.hfield_adr)[hid]
  size = m.hfield_size[hid]  # (G, 4)
  data = m.hfield_data
  xpos, xmat = d.geom_xpos[geoms], d.geom_xmat[geoms]
  zaxis = xmat[..., 2]
  s0, s1, s2, s3 = (size[:, i] for i in range(4))

  base_pos = xpos - zaxis * (s3 * 0.5)[:, None]
  base_size = jnp.stack([s0, s1, s3 * 0.5], axis=-1)
  x_base = ray_box(base_pos, xmat, base_size, pnt, vec)
  top_pos = xpos + zaxis * (s2 * 0.5)[:, None]
  top_size = jnp.stack([s0, s1, s2 * 0.5], axis=-1)
  tl_pnt, tl_vec = _map(top_pos, xmat, pnt, vec)
  all_ = _box_faces(tl_pnt, tl_vec, top_size)  # (G, 6)
  top = _nearest_of(all_)
  far = jnp.max(all_, axis=-1)
  seg0 = jnp.where(far > top, top, 0.0)
  seg1 = jnp.maximum(far, top)

  lpnt, lvec = _map(xpos, xmat, pnt, vec)
  b0, b1 = _basis(lvec)
  dx = 2.0 * s0 / (ncol - 1)
  dy = 2.0 * s1 / (nrow - 1)

  # path parameters where the path crosses grid lines x = c dx - s0 and y = r dy - s1
  def crossings(n: np.ndarray, step, half, p, v):
    i = np.arange(int(n.max()))
    line = i[None, :] * step[:, None] - half[:, None]
    nz = jnp.abs(v) > MINVAL
    t = (line - p[:, None]) / jnp.where(nz, v, 1.0)[:, None]
    ok = nz[:, None] & (i[None, :] < n[:, None]) & (t > seg0[:, None]) & (t < seg1[:, None])
    return jnp.where(ok, t, seg1[:, None])

  tc = crossings(ncol, dx, s0, lpnt[:, 0], lvec[:, 0])
  tr = crossings(nrow, dy, s1, lpnt[:, 1], lvec[:, 1])
  t = jnp.sort(jnp.concatenate([seg0[:, None], seg1[:, None], tc, tr], axis=-1), axis=-1)
  t = jax.lax.stop_gradient(t)
  mid = 0.5 * (t[:, :-1] + t[:, 1:])  # (G, K)
  sx = (lpnt[:, :1] + mid * lvec[:, :1] + s0[:, None]) / dx[:, None]
  sy = (lpnt[:, 1:2] + mid * lvec[:, 1:2] + s1[:, None]) / dy[:, None]
  c = jnp.clip(jnp.floor(sx), 0, (ncol - 2)[:, None]).astype(jnp.int32)
  r = jnp.clip(jnp.floor(sy), 0, (nrow - 2)[:, None]).astype(jnp.int32)

  # the four corners of each cell, counterclockwise, and its two triangles (va, vb of MuJoCo)
  dr, dc = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 0])
  rr, cc = r[..., None] + dr, c[..., None] + dc  # (G, K, 4)
  h = data[adr[:, None, None] + rr * ncol[:, None, None] + cc] * s2[:, None, None]
  xy = [dx[:, None, None] * cc - s0[:, None, None], dy[:, None, None] * rr - s1[:, None, None]]
  corners = jnp.stack(xy + [h], axis=-1)  # (G, K, 4, 3)
  tri = corners[..., np.array([[0, 1, 2], [0, 2, 3]]), :]  # (G, K, 2, 3, 3)
  ex = lambda a: a[:, None, None]  # noqa: E731
  xt = ray_triangle(tri, ex(lpnt), ex(lvec), ex(b0), ex(b1))
  x = _nearest_of(xt.reshape(len(geoms), -1))
  cands = [jnp.where(top >= 0, x, -1.0), x_base]

  # the four sides of the top box (-x, +x, -y, +y), below the height profile along their edge
  side = all_[:, :4]  # (G, 4)
  along = np.array([1, 1, 0, 0])  # the coordinate that runs along each side
  z = (lpnt[:, 2:3] + side * lvec[:, 2:3]) / s2[:, None]
  p = lpnt[:, along] + side * lvec[:, along]
  half, step = jnp.stack([s1, s1, s0, s0], -1), jnp.stack([dy, dy, dx, dx], -1)
  y = (p + half) / step
  n = np.stack([nrow, nrow, ncol, ncol], -1) - 2
  y0 = jnp.clip(jnp.floor(y), 0, n)
  i0 = jax.lax.stop_gradient(y0).astype(jnp.int32)
  # data index of the profile sample y0 on each side, and the step to the next sample
  base = np.stack([np.zeros_like(ncol), ncol - 1, np.zeros_like(ncol), (nrow - 1) * ncol], -1)
  stride = np.stack([ncol, ncol, np.ones_like(ncol), np.ones_like(ncol)], -1)
  k0 = adr[:, None] + base + i0 * stride
  below = z < data[k0] * (y0 + 1 - y) + data[k0 + stride] * (y - y0)
  cands.append(jnp.where((top >= 0)[:, None] & (side >= 0) & below, side, -1.0))
  return _nearest_of(jnp.concatenate([c.reshape(len(geoms), -1) for c in cands], axis=-1))


def _eliminated(
  m: Model, geomgroup: tuple[int, ...] | None, flg_static: bool
) -> tuple[np.ndarray, jax.Array]:
  """Static mask of geoms excluded by static flag and group, and the dynamic invisibility mask."""
  out = np.zeros(m.ngeom, bool)
  if not flg_static:
    out |= np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)] == 0
  if geomgroup is not None:
    group = np.clip(np.asarray(m.geom_group), 0, NGROUP - 1)
    out |= np.asarray(geomgroup)[group] == 0
  # the compiler resolves material colours into geom_rgba
  return out, m.geom_rgba[:, 3] == 0


def ray(
  m: Model,
  d: Data,
  pnt: jax.Array,
  vec: jax.Array,
  geomgroup: tuple[int, ...] | None = None,
  flg_static: bool = True,
  bodyexclude: int | jax.Array = -1,
) -> tuple[jax.Array, jax.Array]:
  """Distance to the nearest geom surface along pnt + x vec, x >= 0, and its geom id (mj_ray).

  pnt, vec (3,); returns (dist, geomid), (-1, -1) where nothing is hit. Geoms of body
  `bodyexclude` and invisible geoms (alpha 0) are skipped; with flg_static False also geoms on
  static bodies; with `geomgroup` (static, one flag per group 0-5) those of excluded groups.
  Static options, traced rays: vmap over pnt, vec and bodyexclude.
  """
  dtype = d.geom_xpos.dtype
  if not m.ngeom:
    return jnp.array(-1.0, dtype), jnp.array(-1, jnp.int32)
  static_out, invisible = _eliminated(m, geomgroup, flg_static)
  gtype = np.asarray(m.geom_type)
  ids, dists = [], []
  for t in np.unique(gtype):
    geoms = np.flatnonzero((gtype == t) & ~static_out)
    if not geoms.size:
      continue
    if t == GeomType.MESH:
      x = _ray_mesh(m, d, geoms, pnt, vec)
    elif t == GeomType.HFIELD:
      x = _ray_hfield(m, d, geoms, pnt, vec)
    else:
      pos, mat, size = d.geom_xpos[geoms], d.geom_xmat[geoms], m.geom_size[geoms]
      x = ray_geom(int(t), pos, mat, size, pnt, vec)
    ids.append(geoms)
    dists.append(x)
  if not ids:
    return jnp.array(-1.0, dtype), jnp.array(-1, jnp.int32)
  ids = np.concatenate(ids)
  order = np.argsort(ids)  # ties go to the lowest geom id, as mj_ray's loop
  ids = ids[order]
  dist = jnp.concatenate(dists)[order]
  body = np.asarray(m.geom_bodyid)[ids]
  skip = invisible[ids] | (body == bodyexclude)
  dist = jnp.where(skip | (dist < 0), jnp.inf, dist)
  k = jnp.argmin(dist)
  hit = jnp.isfinite(dist[k])
  return jnp.where(hit, dist[k], -1.0), jnp.where(hit, jnp.asarray(ids)[k], -1).astype(jnp.int32)

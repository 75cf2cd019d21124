"""Analytic colliders for primitive pairs (engine_collision_primitive.c, engine_collision_box.c).

Every collider mirrors one MuJoCo mjc_* function: the same contact slots, in the same order, with
the same dist/pos/normal/tangent, and the frame completed as mju_makeFrame does in mj_setContact.
Branches of the C code are all evaluated and selected with masks; divisions and norms are guarded
so that values and gradients stay finite in the branches that are not taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.collision.geom import NO_CONTACT, Contacts, GeomInfo, make_frame, polygon_quad
from jaxsim._src.enums import GeomType
from jaxsim._src.math import MINVAL


class _Pre(NamedTuple):
  """Candidate pre-contacts (mjPreContact) with a validity mask, leading axis = candidate."""

  valid: jax.Array  # (k,) bool
  dist: jax.Array  # (k,)
  pos: jax.Array  # (k, 3)
  normal: jax.Array  # (k, 3)
  tangent: jax.Array  # (k, 3)


def _pre(valid, dist, pos, normal, tangent=None) -> _Pre:
  """One candidate pre-contact."""
  if tangent is None:
    tangent = jnp.zeros_like(normal)
  return _Pre(
    jnp.asarray(valid)[None],
    jnp.asarray(dist)[None],
    pos[None],
    normal[None],
    tangent[None],
  )


def _cat(*pres: _Pre) -> _Pre:
  """Candidates in MuJoCo's emission order."""
  return _Pre(*(jnp.concatenate(f) for f in zip(*pres)))


def _finish(pre: _Pre, n: int) -> Contacts:
  """Packs valid candidates first (keeping their order) into n slots and completes frames.

  A stable partition by counting, not a sort: each candidate's place is its rank among the valid
  ones (or after them among the invalid), and each slot gathers the candidate placed there.
  """
  valid = pre.valid
  k = valid.shape[0]
  if k > 1:
    place = jnp.where(valid, jnp.cumsum(valid) - 1, jnp.sum(valid) + jnp.cumsum(~valid) - 1)
    hit = place[None, :] == jnp.arange(n)[:, None]
    order = jnp.sum(jnp.where(hit, jnp.arange(k)[None, :], 0), axis=1)
    pre = jax.tree.map(lambda x: x[order], pre)
  else:
    pre = jax.tree.map(lambda x: x[:n], pre)
  frame = make_frame(pre.normal, pre.tangent)
  return Contacts(jnp.where(pre.valid, pre.dist, NO_CONTACT), pre.pos, frame)


def _safe_div(a: jax.Array, b: jax.Array, tiny: float = MINVAL * MINVAL) -> jax.Array:
  """a / b, with b replaced by 1 where |b| < tiny (a branch that is masked out)."""
  return a / jnp.where(jnp.abs(b) < tiny, 1.0, b)


def _sqrt(x: jax.Array) -> jax.Array:
  """sqrt with a finite gradient at zero."""
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _normalize3(v: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mju_normalize3: (unit vector, norm), (1, 0, 0) when the norm is below mjMINVAL."""
  n = _sqrt(v @ v)
  small = n < MINVAL
  unit = jnp.where(small, jnp.array([1.0, 0.0, 0.0], dtype=v.dtype), v / jnp.where(small, 1.0, n))
  return unit, n


def _dot3(a: jax.Array, b: jax.Array) -> jax.Array:
  """mju_dot3 with C's summation order."""
  return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _matvec(mat: jax.Array, v: jax.Array) -> jax.Array:
  """mju_mulMatVec3 (mat @ v) with C's summation order."""
  return mat[:, 0] * v[0] + mat[:, 1] * v[1] + mat[:, 2] * v[2]


def _mattvec(mat: jax.Array, v: jax.Array) -> jax.Array:
  """mju_mulMatTVec3 (mat.T @ v) with C's summation order."""
  return mat[0] * v[0] + mat[1] * v[1] + mat[2] * v[2]


# ------------------------------------------------------------------------------------------------
# raw helpers (mjraw_*)


def _plane_sphere(margin, pos1, mat1, pos2, radius) -> _Pre:
  """mjraw_PlaneSphere: plane (pos1, mat1) against a sphere at pos2."""
  normal = mat1[:, 2]
  cdist = _dot3(pos2 - pos1, normal)
  dist = cdist - radius
  pos = pos2 + normal * (-dist / 2 - radius)
  return _pre(cdist <= margin + radius, dist, pos, normal)


def _sphere_sphere(margin, pos1, mat1, r1, pos2, mat2, r2) -> _Pre:
  """mjraw_SphereSphere; coincident centres use the cross product of the z axes."""
  dif = pos1 - pos2
  cdist_sqr = _dot3(dif, dif)
  min_dist = margin + r1 + r2
  dist = _sqrt(cdist_sqr) - r1 - r2
  normal, length = _normalize3(pos2 - pos1)
  alt, _ = _normalize3(jnp.cross(mat1[:, 2], mat2[:, 2]))
  normal = jnp.where(length < MINVAL, alt, normal)
  pos = normal * (r1 + dist / 2) + pos1
  return _pre(cdist_sqr <= min_dist * min_dist, dist, pos, normal)


def _sphere_box(margin, pos1, r1, pos2, mat2, size2) -> _Pre:
  """mjraw_SphereBox: sphere centre pos1, radius r1, against a box."""
  center = _mattvec(mat2, pos1 - pos2)
  clamped = jnp.where(size2 > 0, jnp.clip(center, -size2, size2), center)
  tmp, dist = _normalize3(clamped - center)
  valid = dist - r1 <= margin

  # sphere centre inside the box: push out through the nearest face
  faces = jnp.stack([-size2, size2], axis=-1).reshape(6)  # face i: (i%2 ? 1 : -1) * size[i/2]
  gaps = jnp.abs(faces - jnp.repeat(center, 2))
  k = jnp.argmin(gaps)
  closest = gaps[k]
  nearest = jnp.zeros(3, center.dtype).at[k // 2].set(jnp.where(k % 2 == 1, -1.0, 1.0))
  pos_in = center + nearest * ((r1 - closest) / 2)

  deepest = center + tmp * r1
  pos_out = clamped * 0.5 + deepest * 0.5

  inside = dist <= MINVAL
  pos = jnp.where(inside, pos_in, pos_out)
  normal = _matvec(mat2, jnp.where(inside, nearest, tmp))
  dist = jnp.where(inside, -closest, dist)
  return _pre(valid, dist - r1, _matvec(mat2, pos) + pos2, normal)


# ------------------------------------------------------------------------------------------------
# plane


def collide_plane_sphere(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_PlaneSphere: 1 contact."""
  return _finish(_plane_sphere(margin, g1.pos, g1.mat, g2.pos, g2.size[0]), 1)


def collide_plane_capsule(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_PlaneCapsule: 2 contacts, one per end sphere, tangent along the capsule axis."""
  axis = g2.mat[:, 2]
  segment = g2.size[1] * axis
  pres = []
  for end in (g2.pos + segment, g2.pos - segment):
    p = _plane_sphere(margin, g1.pos, g1.mat, end, g2.size[0])
    pres.append(p._replace(tangent=axis[None]))
  return _finish(_cat(*pres), 2)


def collide_plane_cylinder(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_PlaneCylinder: 4 contacts (rim points nearest the plane, then a triangle)."""
  normal = g1.mat[:, 2]
  axis = g2.mat[:, 2]
  radius, height = g2.size[0], g2.size[1]

  # make sure the axis points towards the plane
  prjaxis = _dot3(normal, axis)
  flip = prjaxis > 0
  axis = jnp.where(flip, -axis, axis)
  prjaxis = jnp.where(flip, -prjaxis, prjaxis)

  dist0 = _dot3(g2.pos - g1.pos, normal)

  # remove the component of -normal along the axis
  vec = axis * prjaxis - normal
  len_sqr = _dot3(vec, vec)
  general = len_sqr >= MINVAL * MINVAL
  vec = jnp.where(
    general,
    vec * (radius / _sqrt(jnp.where(general, len_sqr, 1.0))),
    g2.mat[:, 0] * radius,  # disk parallel to the plane: pick the x axis
  )
  prjvec = _dot3(vec, normal)
  axis = axis * height
  prjaxis = prjaxis * height

  d1 = dist0 + prjaxis + prjvec
  d2 = dist0 - prjaxis + prjvec
  prjvec1 = -prjvec * 0.5
  d3 = dist0 + prjaxis + prjvec1
  ok1 = d1 <= margin
  ok2 = ok1 & (d2 <= margin)
  ok3 = ok1 & (d3 <= margin)

  vec1, _ = _normalize3(jnp.cross(vec, axis))
  vec1 = vec1 * (radius * np.sqrt(3.0) / 2)

  p1 = g2.pos + vec + axis - normal * (d1 * 0.5)
  p2 = g2.pos + vec - axis - normal * (d2 * 0.5)
  p3 = g2.pos + vec1 + axis - vec * 0.5 - normal * (d3 * 0.5)
  p4 = g2.pos - vec1 + axis - vec * 0.5 - normal * (d3 * 0.5)
  return _finish(
    _cat(
      _pre(ok1, d1, p1, normal),
      _pre(ok2, d2, p2, normal),
      _pre(ok3, d3, p3, normal),
      _pre(ok3, d3, p4, normal),
    ),
    4,
  )


_CORNERS = np.array(
  [[(1 if i & 1 else -1), (1 if i & 2 else -1), (1 if i & 4 else -1)] for i in range(8)]
)


def collide_plane_box(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_PlaneBox: the first 4 box corners (in corner order) below the margin."""
  normal = g1.mat[:, 2]
  dist = _dot3(g2.pos - g1.pos, normal)
  vec = _CORNERS * g2.size  # (8, 3)
  corner = jax.vmap(lambda v: _matvec(g2.mat, v))(vec)
  ldist = corner @ normal
  cdist = dist + ldist
  valid = (cdist <= margin) & (ldist <= 0)
  pos = corner + g2.pos - normal * (cdist / 2)[:, None]
  normals = jnp.broadcast_to(normal, (8, 3))
  return _finish(_Pre(valid, cdist, pos, normals, jnp.zeros_like(normals)), 4)


def collide_plane_ellipsoid(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_PlaneConvex for an ellipsoid: 1 contact at the support point along -normal."""
  normal = g1.mat[:, 2]
  local_dir = _mattvec(g2.mat, -normal)
  res, _ = _normalize3(local_dir * g2.size)
  support = _matvec(g2.mat, res * g2.size) + g2.pos
  dist = _dot3(normal, support - g1.pos)
  return _finish(_pre(dist <= margin, dist, support - normal * (0.5 * dist), normal), 1)


def _hillclimb(local_dir, vert, globalid, neighbors):
  """mjccd_support mesh branch with graph data: hull-local id of the hill-climbed support vertex."""
  nhull, maxdeg = neighbors.shape

  def vdot(loc):
    return _dot3(local_dir, vert[globalid[loc]])

  def step(carry):
    best, tmp, _ = carry
    cur = best
    change = jnp.array(False)
    # scan the neighbourhood of the vertex the pass started from, taking strict improvements
    for e in range(maxdeg):
      loc = neighbors[cur, e]
      has = loc >= 0
      v = vdot(jnp.maximum(loc, 0))
      better = has & (v > tmp)
      best = jnp.where(better, loc, best)
      tmp = jnp.where(better, v, tmp)
      change = change | better
    return best, tmp, change

  # each pass strictly increases the support value, so nhull passes always suffice
  init = (jnp.array(0, dtype=neighbors.dtype), vdot(0), jnp.array(True))
  best, _, _ = jax.lax.while_loop(lambda c: c[2], step, init)
  return best


def collide_plane_mesh(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_PlaneConvex for a mesh: support vertex, then vertices of its face most facing the plane.

  MuJoCo 4 takes the polygon at the support vertex whose normal points most against the plane's,
  read from the support vertex on (where it has more than four vertices, the maximum-area
  quadrilateral with a corner at the support vertex), and adds each of its vertices that is
  within the margin and below the mesh centre.
  Meshes without polygons keep MuJoCo 3's rule: up to two hull neighbours (all vertices without a
  graph) within the margin and away from the first contact.
  """
  normal = g1.mat[:, 2]
  vert = g2.vert
  nvert = vert.shape[0]
  local_dir = _mattvec(g2.mat, -normal)
  # the vertex choice is discrete: no gradient flows through it
  ldir = jax.lax.stop_gradient(local_dir)
  vdots = _dot3(vert, ldir)
  has_graph = g2.graph_neighbors is not None
  if has_graph:
    globalid = jnp.asarray(g2.graph_globalid)
    neighbors = jnp.asarray(g2.graph_neighbors)
  # mjc_initCCDObj: small meshes or meshes without a graph use exhaustive search
  if has_graph and g2.nvert is not None:
    # a row of a mesh table (vertices padded with copies of vertex 0): both searches, the
    # mesh's own size chooses
    climb = _hillclimb(ldir, jax.lax.stop_gradient(vert), globalid, neighbors)
    exhaustive = jnp.argmax(jax.lax.stop_gradient(vdots)).astype(climb.dtype)
    small = g2.nvert < 10
    ibest = jnp.where(small, exhaustive, globalid[climb])
    meshindex = jnp.where(small, exhaustive, climb)
  elif has_graph and nvert >= 10:
    meshindex = _hillclimb(ldir, jax.lax.stop_gradient(vert), globalid, neighbors)
    ibest = globalid[meshindex]
  else:
    ibest = jnp.argmax(jax.lax.stop_gradient(vdots))
    meshindex = ibest  # recorded in globalid format

  support = _matvec(g2.mat, vert[ibest]) + g2.pos
  dist = _dot3(normal, support - g1.pos)
  first = support - normal * (0.5 * dist)
  pres = [_pre(dist <= margin, dist, first, normal)]

  threshold = _dot3(normal, g2.pos - g1.pos) - margin
  if has_graph and g2.poly is not None:
    cand, cand_ok = _support_face(g2.poly, vert, g2.mat, g2.pos, ibest, ldir)
    cand_ok = cand_ok & (vdots[cand] > 0)
  elif has_graph:
    # neighbours of meshindex, read as a hull-local id (as MuJoCo does)
    cand_loc = neighbors[meshindex]
    cand_ok = cand_loc >= 0
    cand = globalid[jnp.maximum(cand_loc, 0)]
  else:
    cand = jnp.arange(nvert)
    cand_ok = cand != meshindex
  cand_vert = vert[cand]
  cand_ok = cand_ok & (vdots[cand] > threshold)
  pnt = jax.vmap(lambda v: _matvec(g2.mat, v))(cand_vert) + g2.pos
  if g2.poly is None or not has_graph:
    d = pnt - first
    far = _sqrt(jnp.sum(d * d, axis=-1)) >= 0.3 * g2.rbound  # tolplanemesh * rbound
    cand_ok = cand_ok & far
    cand_ok = cand_ok & (jnp.cumsum(cand_ok) <= 2)  # maxplanemesh: 3 contacts in all
  cdist = (pnt - g1.pos) @ normal
  cpos = pnt - normal * (0.5 * cdist)[:, None]
  normals = jnp.broadcast_to(normal, cpos.shape)
  # extra contacts only follow a first contact
  extra = _Pre(cand_ok & (dist <= margin), cdist, cpos, normals, jnp.zeros_like(normals))
  return _finish(_cat(pres[0], extra), 4)


def _support_face(poly, vert, mat, pos, ibest, ldir) -> tuple[jax.Array, jax.Array]:
  """Vertex ids (3,) after the support vertex on its polygon most facing ldir, and their mask."""
  inc = poly.map[ibest]
  ninc = poly.nmap[ibest]
  align = poly.normal[jnp.maximum(inc, 0)] @ ldir
  # first of equal alignments, as MuJoCo's strict comparison
  face = inc[jnp.argmax(jnp.where(jnp.arange(inc.shape[0]) < ninc, align, -jnp.inf))]
  ids, n = poly.vert[face], poly.nvert[face]
  width = ids.shape[0]
  # the polygon read from the support vertex on
  start = jnp.argmax(ids == ibest)
  k = jnp.arange(max(width, 4))
  ring = ids[(start + k[:width]) % jnp.maximum(n, 1)]
  if width > 4:
    world = jax.lax.stop_gradient(vert[jnp.maximum(ring, 0)] @ mat.T + pos)
    # MuJoCo keeps a corner where areas tie (regular polygons: cylinder caps, nuts)
    rtol = 256 * float(jnp.finfo(world.dtype).eps)
    quad = jnp.sort(polygon_quad(world, jnp.maximum(n, 5), anchored=True, rtol=rtol))
    sel = jnp.where(n > 4, quad, k[:4])
  else:
    ring = jnp.concatenate([ring, jnp.full(4 - width, -1, ring.dtype)])
    sel = k[:4]
  ok = (sel[1:] < n) & (ninc > 0)
  return jnp.maximum(ring[sel[1:]], 0), ok


# ------------------------------------------------------------------------------------------------
# sphere and capsule


def collide_sphere_sphere(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_SphereSphere: 1 contact."""
  pre = _sphere_sphere(margin, g1.pos, g1.mat, g1.size[0], g2.pos, g2.mat, g2.size[0])
  return _finish(pre, 1)


def collide_sphere_capsule(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_SphereCapsule: sphere against the nearest point of the capsule segment."""
  axis = g2.mat[:, 2]
  x = jnp.clip(_dot3(axis, g1.pos - g2.pos), -g2.size[1], g2.size[1])
  pre = _sphere_sphere(margin, g1.pos, g1.mat, g1.size[0], axis * x + g2.pos, g2.mat, g2.size[0])
  return _finish(pre, 1)


def collide_sphere_cylinder(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_SphereCylinder: side (sphere-sphere), cap (plane-sphere) or rim corner contact."""
  radius, height = g2.size[0], g2.size[1]
  axis = g2.mat[:, 2]
  vec = g1.pos - g2.pos
  x = _dot3(axis, vec)
  a_proj = axis * x
  p_proj = vec - a_proj
  p_proj_sqr = _dot3(p_proj, p_proj)

  collide_side = jnp.abs(x) < height
  collide_cap = p_proj_sqr < radius * radius
  both = collide_side & collide_cap
  dist_cap = height - jnp.abs(x)
  dist_radius = radius - _sqrt(p_proj_sqr)
  collide_side = collide_side & ~(both & (dist_cap < dist_radius))
  collide_cap = collide_cap & ~(both & ~(dist_cap < dist_radius))

  side = _sphere_sphere(margin, g1.pos, g1.mat, g1.size[0], a_proj + g2.pos, g2.mat, radius)

  top = x > 0
  pos_cap = g2.pos + axis * jnp.where(top, height, -height)
  mat_cap = jnp.where(top, g2.mat, g2.mat * jnp.array([-1.0, 1.0, -1.0]))
  cap = _plane_sphere(margin, pos_cap, mat_cap, g1.pos, g1.size[0])
  cap = cap._replace(normal=-cap.normal)  # plane < sphere < cylinder: flip

  ring = p_proj * (radius / _sqrt(jnp.where(p_proj_sqr > 0, p_proj_sqr, 1.0)))
  corner_pos = axis * jnp.where(top, height, -height) + ring + g2.pos
  corner = _sphere_sphere(margin, g1.pos, g1.mat, g1.size[0], corner_pos, g2.mat, 0.0)

  pre = jax.tree.map(
    lambda s, c, k: jnp.where(
      jnp.reshape(collide_side, (1,) * s.ndim),
      s,
      jnp.where(jnp.reshape(collide_cap, (1,) * s.ndim), c, k),
    ),
    side,
    cap,
    corner,
  )
  return _finish(pre, 1)


def collide_sphere_box(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_SphereBox: 1 contact."""
  return _finish(_sphere_box(margin, g1.pos, g1.size[0], g2.pos, g2.mat, g2.size), 1)


def collide_capsule_capsule(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_CapsuleCapsule: 1 contact between nearest segment points, or 2 for parallel axes."""
  pos1, pos2, mat1, mat2 = g1.pos, g2.pos, g1.mat, g2.mat
  r1, r2 = g1.size[0], g2.size[0]
  axis1 = mat1[:, 2] * g1.size[1]
  axis2 = mat2[:, 2] * g2.size[1]
  dif = pos1 - pos2

  ma = _dot3(axis1, axis1)
  mb = -_dot3(axis1, axis2)
  mc = _dot3(axis2, axis2)
  u = -_dot3(axis1, dif)
  v = _dot3(axis2, dif)
  det = ma * mc - mb * mb
  # MuJoCo 4.0.0 treats axes as parallel below sin^2(angle) = 1e-8 (measured against the oracle;
  # the C source read for this port tests |det| < mjMINVAL instead)
  general = jnp.abs(det) >= 1e-8 * ma * mc

  # general configuration: clip the unconstrained solution to the segments
  x1 = _safe_div(mc * u - mb * v, det)
  x2 = _safe_div(ma * v - mb * u, det)
  hi1, lo1 = x1 > 1, x1 < -1
  x1 = jnp.where(hi1, 1.0, jnp.where(lo1, -1.0, x1))
  x2 = jnp.where(hi1, _safe_div(v - mb, mc), jnp.where(lo1, _safe_div(v + mb, mc), x2))
  hi2, lo2 = x2 > 1, x2 < -1
  x1 = jnp.where(
    hi2,
    jnp.clip(_safe_div(u - mb, ma), -1, 1),
    jnp.where(lo2, jnp.clip(_safe_div(u + mb, ma), -1, 1), x1),
  )
  x2 = jnp.where(hi2, 1.0, jnp.where(lo2, -1.0, x2))
  gen = _sphere_sphere(margin, axis1 * x1 + pos1, mat1, r1, axis2 * x2 + pos2, mat2, r2)
  gen = gen._replace(valid=gen.valid & general)

  # parallel axes (MuJoCo 4.0.0 behaviour, which differs from the older C source): contacts at
  # both ends of the overlap of segment 2, projected on segment 1, in increasing order along it
  def pair(x1):
    x2 = jnp.clip(_safe_div(v - mb * x1, mc), -1, 1)
    pre = _sphere_sphere(margin, axis1 * x1 + pos1, mat1, r1, axis2 * x2 + pos2, mat2, r2)
    return pre._replace(valid=pre.valid & ~general)

  xa = jnp.clip(_safe_div(u - mb, ma), -1, 1)
  xb = jnp.clip(_safe_div(u + mb, ma), -1, 1)
  par = _cat(pair(jnp.minimum(xa, xb)), pair(jnp.maximum(xa, xb)))
  return _finish(_cat(gen, par), 2)


# ------------------------------------------------------------------------------------------------
# capsule : box


_CAPBOX_EDGE_J = np.array([j for j in range(3) for i in range(8) if not i & (1 << j)])
_CAPBOX_EDGE_I = np.array([i for j in range(3) for i in range(8) if not i & (1 << j)])


def _inv_abs(num: jax.Array, den: jax.Array) -> jax.Array:
  """num / |den|, +inf where den == 0 (as C's division, for use in min)."""
  zero = den == 0
  return jnp.where(zero, jnp.inf, num / jnp.where(zero, 1.0, jnp.abs(den)))


def collide_capsule_box(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_CapsuleBox: sphere-box at the segment point closest to the box, plus a second point."""
  size1, size2 = g1.size, g2.size
  pos2, mat2 = g2.pos, g2.mat
  halflength = size1[1]
  pos = _mattvec(mat2, g1.pos - pos2)
  axis = _mattvec(mat2, g1.mat[:, 2])
  halfaxis = axis * halflength
  axisdir = (
    (halfaxis[0] > 0).astype(jnp.int32)
    + 2 * (halfaxis[1] > 0).astype(jnp.int32)
    + 4 * (halfaxis[2] > 0).astype(jnp.int32)
  )

  bestdistmax = margin + 2 * (size1[0] + halflength + size2[0] + size2[1] + size2[2])
  bestdist = bestdistmax
  bestsegmentpos = jnp.zeros_like(bestdist)
  bestboxpos = jnp.zeros_like(bestdist)
  cltype = jnp.array(-4)
  clface = jnp.array(-1)
  clcorner = jnp.array(0)
  cledge = jnp.array(0)

  # a face of the box may be closest to one capsule end
  for i in (-1, 1):
    tmp2 = pos + halfaxis * i
    clamped = jnp.clip(tmp2, -size2, size2)
    out = (tmp2 < -size2) | (tmp2 > size2)
    c1 = jnp.sum(out)
    c2 = jnp.max(jnp.where(out, jnp.arange(3), -1))
    d = clamped - tmp2
    dist = _dot3(d, d)
    better = (c1 <= 1) & (dist < bestdist)
    bestdist = jnp.where(better, dist, bestdist)
    bestsegmentpos = jnp.where(better, float(i), bestsegmentpos)
    cltype = jnp.where(better, -2 + i, cltype)
    clface = jnp.where(better, c2, clface)

  # the 12 box edges against the capsule segment, all at once, then MuJoCo's sequential pick
  ej, ei = _CAPBOX_EDGE_J, _CAPBOX_EDGE_I
  tmp3 = _CORNERS[ei] * size2 * (1 - np.eye(3)[ej])  # (12, 3) edge start, axis j zeroed
  dif = tmp3 - pos
  sj = size2[ej]
  hj = halfaxis[ej]
  difj = dif[np.arange(12), ej]
  ma = sj * sj
  mb = -sj * hj
  mc = size1[1] * size1[1]
  u = -sj * difj
  v = dif @ halfaxis
  det = ma * mc - mb * mb
  ok = jnp.abs(det) >= MINVAL
  idet = 1 / jnp.where(ok, det, 1.0)
  x1 = (mc * u - mb * v) * idet
  x2 = (ma * v - mb * u) * idet
  hi, lo = x1 > 1, x1 < -1
  x2 = jnp.where(hi, (v - mb) * (1 / mc), jnp.where(lo, (v + mb) * (1 / mc), x2))
  x1 = jnp.where(hi, 1.0, jnp.where(lo, -1.0, x1))
  s1 = jnp.where(hi, 2, jnp.where(lo, 0, 1))
  hi2, lo2 = x2 > 1, x2 < -1
  x1n = jnp.where(hi2, (u - mb) * (1 / ma), (u + mb) * (1 / ma))
  s1n = jnp.where(x1n > 1, 2, jnp.where(x1n < -1, 0, s1))
  x1 = jnp.where(hi2 | lo2, jnp.clip(x1n, -1, 1), x1)
  s1 = jnp.where(hi2 | lo2, s1n, s1)
  x2 = jnp.where(hi2, 1.0, jnp.where(lo2, -1.0, x2))
  s2 = jnp.where(hi2, 2, jnp.where(lo2, 0, 1))
  gap = dif - halfaxis * x2[:, None] + (sj * x1)[:, None] * np.eye(3)[ej]
  dists = jnp.sum(gap * gap, axis=-1)
  ctypes = s1 * 3 + s2
  best = jnp.array(-1)
  for k in range(12):
    # the -mjMINVAL guards against an axis numerically parallel to the box
    better = ok[k] & (dists[k] < bestdist - MINVAL)
    bestdist = jnp.where(better, dists[k], bestdist)
    best = jnp.where(better, k, best)
  edge = best >= 0
  kb = jnp.maximum(best, 0)
  bestsegmentpos = jnp.where(edge, x2[kb], bestsegmentpos)
  bestboxpos = jnp.where(edge, x1[kb], bestboxpos)
  ctype = ctypes[kb]
  clcorner = jnp.where(
    edge, jnp.asarray(ei)[kb] + jnp.left_shift(1, jnp.asarray(ej)[kb]) * (ctype // 6), clcorner
  )
  cledge = jnp.where(edge, jnp.asarray(ej)[kb], cledge)
  cltype = jnp.where(edge, ctype, cltype)

  bsp = bestsegmentpos
  two_s = 2 * size2

  # closest to a corner of the box
  c1 = jnp.bitwise_xor(axisdir, clcorner)
  flip = (c1 == 3) | (c1 == 5) | (c1 == 6)
  mul_a = jnp.where(flip, -1.0, 1.0)
  c1a = jnp.where(flip, 7 - c1, c1)
  de = jnp.where(flip, 1 + bsp, 1 - bsp)
  dp = jnp.where(flip, 1 - bsp, 1 + bsp)
  ax_a = jnp.where(c1a == 1, 0, jnp.where(c1a == 2, 1, 2))
  ax1_a, ax2_a = (ax_a + 1) % 3, (ax_a + 2) % 3
  along = axis[ax_a] * axis[ax_a] > 0.5
  sp_edge = jnp.minimum(de, _inv_abs(two_s[ax_a], halfaxis[ax_a])) * mul_a
  sp_face = jnp.minimum(
    jnp.minimum(dp, _inv_abs(two_s[ax1_a], halfaxis[ax1_a])),
    _inv_abs(two_s[ax2_a], halfaxis[ax2_a]),
  ) * (-mul_a)
  sp_corner = jnp.where(along, sp_edge, sp_face)
  skip_corner = (c1 == 0) | (c1 == 7)

  # closest to the middle of a box edge
  c1b = jnp.bitwise_and(c1, 7 - jnp.left_shift(1, cledge))
  skip_edge = ~((c1b == 1) | (c1b == 2) | (c1b == 4))
  ax_b = cledge
  ax1_b, ax2_b = (ax_b + 1) % 3, (ax_b + 2) % 3
  ax1_b = jnp.where(jnp.abs(axis[ax1_b]) > jnp.abs(axis[ax2_b]), ax2_b, ax1_b)
  ax2_b = 3 - ax_b - ax1_b
  up = jnp.bitwise_and(c1b, jnp.left_shift(1, ax2_b)) != 0
  mul_b = jnp.where(up, 1.0, -1.0)
  sp = jnp.where(up, 1 - bsp, 1 + bsp)
  sp = jnp.minimum(sp, _inv_abs(two_s[ax2_b], halfaxis[ax2_b]))
  same = (jnp.bitwise_and(axisdir, jnp.left_shift(1, ax_b)) != 0) == up
  e2 = jnp.where(same, 1 - bestboxpos, 1 + bestboxpos)
  sp = jnp.minimum(sp, _inv_abs(size2[ax_b] * e2, halfaxis[ax_b]))
  sp_middle = sp * mul_b

  # a capsule end is closest to a face: follow the axis to the last point above the box
  mul_c = jnp.where(cltype == -3, 1.0, -1.0)
  tmp1 = pos - halfaxis * mul_c
  sp = jnp.asarray(2.0, dtype=pos.dtype)
  for k in range(3):
    h = halfaxis[k]
    hz = h == 0
    for bound in (size2[k], -size2[k]):
      e1 = (bound - tmp1[k]) / jnp.where(hz, 1.0, h) * mul_c
      take = (clface != k) & ~hz & (e1 > 0) & (e1 < sp)
      sp = jnp.where(take, e1, sp)
  sp_face_end = sp * mul_c
  skip_face = clface == -1

  is_face = cltype < 0
  is_corner = (cltype >= 0) & (cltype // 3 != 1)
  secondpos = jnp.where(
    is_face,
    jnp.where(skip_face, -4.0, sp_face_end),
    jnp.where(
      is_corner,
      jnp.where(skip_corner, -4.0, sp_corner),
      jnp.where(skip_edge, -4.0, sp_middle),
    ),
  )
  # infinite candidates never win a min against the finite start values, so this is finite
  secondpos = jnp.where(jnp.isfinite(secondpos), secondpos, -4.0)

  p1 = _matvec(mat2, pos + halfaxis * bsp) + pos2
  first = _sphere_box(margin, p1, size1[0], pos2, mat2, size2)
  p2 = _matvec(mat2, pos + halfaxis * (secondpos + bsp)) + pos2
  second = _sphere_box(margin, p2, size1[0], pos2, mat2, size2)
  none = cltype == -4
  first = first._replace(valid=first.valid & ~none)
  second = second._replace(valid=second.valid & ~none & (secondpos > -3))
  return _finish(_cat(first, second), 2)


# ------------------------------------------------------------------------------------------------
# box : box

_BOXBOX_SEPEPS = 1e-13
_BOXBOX_PAREPS = 1e-16
_BOXBOX_SGNEPS = 1e-9
_BOXBOX_DUPEPS = 1e-14
_BOXBOX_EDGEBIAS = 1e-6
_MAXVERT = 8  # a quad clipped by 4 half-planes has at most 8 vertices

_EDGE_I = np.repeat(np.arange(3), 3)
_EDGE_J = np.tile(np.arange(3), 3)


def _edge_axis(rot: jax.Array, i: jax.Array, j: jax.Array) -> jax.Array:
  """Unnormalised cross product of e_i (box1) and box2 axis j, in the box1 frame."""
  i1, i2 = (i + 1) % 3, (i + 2) % 3
  axis = jnp.zeros(3, rot.dtype)
  axis = axis.at[i1].set(-rot[i2, j])
  return axis.at[i2].set(rot[i1, j])


def _clip_half_plane(poly, n, coord, sign, limit):
  """clipHalfPlane (Sutherland-Hodgman) on a fixed-size polygon (M, 3) with n live vertices."""
  m = poly.shape[0]
  k = jnp.arange(m)
  live = k < n
  d = sign * poly[:, coord] - limit
  k1 = jnp.where(k + 1 == n, 0, k + 1)
  q = poly[k1]
  dq = d[k1]
  emit_p = live & (d <= 0)
  cross = live & (((d < 0) & (dq > 0)) | ((d > 0) & (dq < 0)))
  t = d / jnp.where(cross, d - dq, 1.0)
  inter = poly + t[:, None] * (q - poly)
  cand = jnp.stack([poly, inter], axis=1).reshape(2 * m, 3)
  ok = jnp.stack([emit_p, cross], axis=1).reshape(2 * m)
  order = jnp.argsort(~ok, stable=True)[:m]
  return cand[order], jnp.sum(ok)


def collide_box_box(g1: GeomInfo, g2: GeomInfo, margin: jax.Array) -> Contacts:
  """mjc_BoxBox: separating-axis test, then a clipped face manifold (<= 8) or one edge contact."""
  pos1, pos2, mat1, mat2 = g1.pos, g2.pos, g1.mat, g2.mat
  size1, size2 = g1.size, g2.size
  pos21 = _mattvec(mat1, pos2 - pos1)
  pos12 = _mattvec(mat2, pos1 - pos2)
  rot = mat1.T @ mat2  # rot[i, j]: component i of box2 axis j in the box1 frame
  rotabs = jnp.abs(rot)

  # stage 1: separating-axis test
  septol = margin + _BOXBOX_SEPEPS * (
    size1[0] + size1[1] + size1[2] + size2[0] + size2[1] + size2[2]
  )
  radius2 = rotabs[:, 0] * size2[0] + rotabs[:, 1] * size2[1] + rotabs[:, 2] * size2[2]
  sep1 = jnp.abs(pos21) - size1 - radius2
  radius1 = rotabs[0] * size1[0] + rotabs[1] * size1[1] + rotabs[2] * size1[2]
  sep2 = jnp.abs(pos12) - size2 - radius1
  seps = jnp.concatenate([sep1, sep2])
  separated = jnp.any(seps > septol)
  code = jnp.argmax(seps)
  sep_best = seps[code]
  sep_face = sep_best
  code_face = code

  # edge-cross axes, all 9 at once: component i of e_i x (box2 axis j) is zero
  i, j = _EDGE_I, _EDGE_J
  i1, i2, j1, j2 = (i + 1) % 3, (i + 2) % 3, (j + 1) % 3, (j + 2) % 3
  ax1 = -rot[i2, j]
  ax2 = rot[i1, j]
  norm2 = ax1 * ax1 + ax2 * ax2
  # nearly parallel edges give pure cancellation noise; the face axes cover them
  use = norm2 >= _BOXBOX_PAREPS
  inv = 1 / _sqrt(jnp.where(use, norm2, 1.0))
  ax1 = ax1 * inv
  ax2 = ax2 * inv
  r1 = size1[i1] * jnp.abs(ax1) + size1[i2] * jnp.abs(ax2)
  a2_1 = ax1 * rot[i1, j1] + ax2 * rot[i2, j1]
  a2_2 = ax1 * rot[i1, j2] + ax2 * rot[i2, j2]
  r2 = size2[j1] * jnp.abs(a2_1) + size2[j2] * jnp.abs(a2_2)
  seps = jnp.abs(ax1 * pos21[i1] + ax2 * pos21[i2]) - r1 - r2
  separated = separated | jnp.any(use & (seps > septol))
  biased = seps - _BOXBOX_EDGEBIAS * jnp.abs(seps)
  for e in range(9):
    # an edge axis must beat the best axis so far by a bias-scaled amount
    better = use[e] & (biased[e] > sep_best) & (seps[e] > sep_face)
    sep_best = jnp.where(better, seps[e], sep_best)
    code = jnp.where(better, 6 + e, code)

  # a winning edge axis nearly parallel to the best face axis yields to the face
  is_edge = code >= 6
  ei = jnp.where(is_edge, code - 6, 0)
  ci, cj = ei // 3, ei % 3
  eaxis, _ = _normalize3(_edge_axis(rot, ci, cj))
  fdot1 = jnp.abs(eaxis[jnp.minimum(code_face, 2)])
  fcol = rot[:, jnp.clip(code_face - 3, 0, 2)]
  fdot2 = jnp.abs(eaxis[0] * fcol[0] + eaxis[1] * fcol[1] + eaxis[2] * fcol[2])
  face_dot = jnp.where(code_face < 3, fdot1, fdot2)
  subst = is_edge & (face_dot > 0.99) & (sep_best < sep_face + 0.05 * jnp.abs(sep_face) + MINVAL)
  code = jnp.where(subst, code_face, code)
  is_edge = code >= 6

  edge = _box_edge_contact(pos1, mat1, size1, size2, rot, pos21, ci, cj, septol)
  face = _box_face_contacts(pos1, mat1, size1, pos2, mat2, size2, rot, pos21, pos12, code, margin)
  pre = jax.tree.map(
    lambda f, e: jnp.where(jnp.reshape(is_edge, (1,) * f.ndim), jnp.concatenate([e, f[1:]]), f),
    face,
    edge,
  )
  pre = pre._replace(valid=pre.valid & ~separated & (~is_edge | (jnp.arange(_MAXVERT) == 0)))
  return _finish(pre, _MAXVERT)


def _box_edge_contact(pos1, mat1, size1, size2, rot, pos21, i, j, septol) -> _Pre:
  """mjc_BoxBox stage 2a: contact between the supporting edges along axis e_i x (box2 axis j)."""
  i1, i2 = (i + 1) % 3, (i + 2) % 3
  j1, j2 = (j + 1) % 3, (j + 2) % 3
  axis, _ = _normalize3(_edge_axis(rot, i, j))
  axis = jnp.where(_dot3(axis, pos21) < 0, -axis, axis)
  a2 = axis[0] * rot[0] + axis[1] * rot[1] + axis[2] * rot[2]

  # ambiguous support corners: enumerate both signs, keep the closest witness pair
  amb1 = jnp.where(
    jnp.abs(axis[i1]) < _BOXBOX_SGNEPS, i1, jnp.where(jnp.abs(axis[i2]) < _BOXBOX_SGNEPS, i2, -1)
  )
  amb2 = jnp.where(
    jnp.abs(a2[j1]) < _BOXBOX_SGNEPS, j1, jnp.where(jnp.abs(a2[j2]) < _BOXBOX_SGNEPS, j2, -1)
  )
  d2 = rot[:, j]
  b = d2[i]
  denom = 1 - b * b

  ws1, ws2, gaps = [], [], []
  for v1 in (0, 1):
    for v2 in (0, 1):
      c1 = jnp.zeros(3, rot.dtype)
      c1 = c1.at[i1].set(jnp.where(axis[i1] >= 0, size1[i1], -size1[i1]))
      c1 = c1.at[i2].set(jnp.where(axis[i2] >= 0, size1[i2], -size1[i2]))
      if v1:
        c1 = c1.at[jnp.maximum(amb1, 0)].multiply(jnp.where(amb1 >= 0, -1.0, 1.0))
      cc = jnp.zeros(3, rot.dtype)
      cc = cc.at[j1].set(jnp.where(a2[j1] >= 0, -size2[j1], size2[j1]))
      cc = cc.at[j2].set(jnp.where(a2[j2] >= 0, -size2[j2], size2[j2]))
      if v2:
        cc = cc.at[jnp.maximum(amb2, 0)].multiply(jnp.where(amb2 >= 0, -1.0, 1.0))
      c2 = _matvec(rot, cc) + pos21

      e = c2 - c1
      d1e = e[i]
      d2e = _dot3(d2, e)
      s = jnp.where(denom < MINVAL, 0.0, _safe_div(d1e - b * d2e, denom, MINVAL))
      s = jnp.clip(s, -size1[i], size1[i])
      t = jnp.clip(b * s - d2e, -size2[j], size2[j])
      s = jnp.clip(d1e + b * t, -size1[i], size1[i])
      p1 = c1.at[i].add(s)
      p2 = c2 + d2 * t
      gap = p2 - p1
      gap2 = _dot3(gap, gap)
      ok = ((amb1 >= 0) | (v1 == 0)) & ((amb2 >= 0) | (v2 == 0))
      ws1.append(p1)
      ws2.append(p2)
      gaps.append(jnp.where(ok, gap2, jnp.inf))
  best = jnp.argmin(jnp.stack(gaps))
  w1 = jnp.stack(ws1)[best]
  w2 = jnp.stack(ws2)[best]

  dist = _dot3(w2 - w1, axis)
  mid = 0.5 * (w1 + w2)
  pos = _matvec(mat1, mid) + pos1
  return _pre(dist <= septol, dist, pos, _matvec(mat1, axis))


def _box_face_contacts(
  pos1, mat1, size1, pos2, mat2, size2, rot, pos21, pos12, code, margin
) -> _Pre:
  """mjc_BoxBox stage 2b: incident face clipped against the reference face, <= 8 contacts."""
  ref1 = code < 3
  a = jnp.where(ref1, code, code - 3) % 3
  sizeref = jnp.where(ref1, size1, size2)
  sizeinc = jnp.where(ref1, size2, size1)
  posref = jnp.where(ref1, pos1, pos2)
  matref = jnp.where(ref1, mat1, mat2)
  posoi = jnp.where(ref1, pos21, pos12)
  rinc = jnp.where(ref1, rot, rot.T)

  sgn = jnp.where(posoi[a] >= 0, 1.0, -1.0)
  ra = jnp.abs(rinc[a])
  binc = jnp.where(ra[1] > ra[0], 1, 0)
  binc = jnp.where(ra[2] > ra[binc], 2, binc)
  tinc = jnp.where(sgn * rinc[a, binc] > 0, -1.0, 1.0)

  ax, ay = (a + 1) % 3, (a + 2) % 3
  bu, bv = (binc + 1) % 3, (binc + 2) % 3
  rows = jnp.stack([ax, ay, a])
  cx = posoi[rows] + tinc * sizeinc[binc] * rinc[rows, binc]
  du = sizeinc[bu] * rinc[rows, bu]
  dv = sizeinc[bv] * rinc[rows, bv]
  cx = cx.at[2].set(sgn * cx[2] - sizeref[a])
  du = du.at[2].multiply(sgn)
  dv = dv.at[2].multiply(sgn)
  signs = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dtype=float)
  quad = cx + signs[:, :1] * du + signs[:, 1:] * dv  # (4, 3)
  poly = jnp.concatenate([quad, jnp.zeros((_MAXVERT - 4, 3), quad.dtype)])
  n = jnp.array(4)
  for coord, sign, limit in ((0, 1.0, sizeref[ax]), (0, -1.0, sizeref[ax])):
    poly, n = _clip_half_plane(poly, n, coord, sign, limit)
  for coord, sign, limit in ((1, 1.0, sizeref[ay]), (1, -1.0, sizeref[ay])):
    poly, n = _clip_half_plane(poly, n, coord, sign, limit)

  # accept vertices within the margin band, dropping near-duplicates of accepted ones
  dupe2 = _BOXBOX_DUPEPS * (sizeref[ax] * sizeref[ax] + sizeref[ay] * sizeref[ay])
  ok = (jnp.arange(_MAXVERT) < n) & (poly[:, 2] <= margin)
  dxy = poly[:, None, :2] - poly[None, :, :2]
  near = jnp.sum(dxy * dxy, axis=-1) < dupe2  # (q, k)
  accepted = jnp.zeros(_MAXVERT, bool)
  for k in range(_MAXVERT):
    accepted = accepted.at[k].set(ok[k] & ~jnp.any(accepted & near[:, k]))

  nsign = jnp.where(ref1, sgn, -sgn)
  normal = nsign * matref[:, a]
  onehot = jax.nn.one_hot(jnp.stack([ax, ay, a]), 3, dtype=poly.dtype)  # (3, 3)

  def contact(v):
    local = jnp.stack([v[0], v[1], sgn * (sizeref[a] + 0.5 * v[2])])
    posc = local @ onehot  # posc[ax], posc[ay], posc[a]
    return _matvec(matref, posc) + posref

  pos = jax.vmap(contact)(poly)
  normals = jnp.broadcast_to(normal, pos.shape)
  return _Pre(accepted, poly[:, 2], pos, normals, jnp.zeros_like(normals))


# ------------------------------------------------------------------------------------------------
# table

COLLIDERS: dict[tuple[int, int], Callable[[GeomInfo, GeomInfo, jax.Array], Contacts]] = {
  (GeomType.PLANE, GeomType.SPHERE): collide_plane_sphere,
  (GeomType.PLANE, GeomType.CAPSULE): collide_plane_capsule,
  (GeomType.PLANE, GeomType.ELLIPSOID): collide_plane_ellipsoid,
  (GeomType.PLANE, GeomType.CYLINDER): collide_plane_cylinder,
  (GeomType.PLANE, GeomType.BOX): collide_plane_box,
  (GeomType.PLANE, GeomType.MESH): collide_plane_mesh,
  (GeomType.SPHERE, GeomType.SPHERE): collide_sphere_sphere,
  (GeomType.SPHERE, GeomType.CAPSULE): collide_sphere_capsule,
  (GeomType.SPHERE, GeomType.CYLINDER): collide_sphere_cylinder,
  (GeomType.SPHERE, GeomType.BOX): collide_sphere_box,
  (GeomType.CAPSULE, GeomType.CAPSULE): collide_capsule_capsule,
  (GeomType.CAPSULE, GeomType.BOX): collide_capsule_box,
  (GeomType.BOX, GeomType.BOX): collide_box_box,
}

# static slot count of each collider (mj_maxContact)
MAX_CONTACTS: dict[tuple[int, int], int] = {
  (GeomType.PLANE, GeomType.SPHERE): 1,
  (GeomType.PLANE, GeomType.CAPSULE): 2,
  (GeomType.PLANE, GeomType.ELLIPSOID): 1,
  (GeomType.PLANE, GeomType.CYLINDER): 4,
  (GeomType.PLANE, GeomType.BOX): 4,
  (GeomType.PLANE, GeomType.MESH): 4,
  (GeomType.SPHERE, GeomType.SPHERE): 1,
  (GeomType.SPHERE, GeomType.CAPSULE): 1,
  (GeomType.SPHERE, GeomType.CYLINDER): 1,
  (GeomType.SPHERE, GeomType.BOX): 1,
  (GeomType.CAPSULE, GeomType.CAPSULE): 2,
  (GeomType.CAPSULE, GeomType.BOX): 2,  # mj_maxContact reserves 4; mjc_CapsuleBox emits <= 2
  (GeomType.BOX, GeomType.BOX): 8,
}

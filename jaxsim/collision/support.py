"""Support functions of convex geoms for GJK/EPA (engine_collision_convex.c mjc_*Support).

A support function maps a unit direction `d` (3,) in the world frame to the point of the geom
farthest along `d` (3,) in the world frame, plus the index of the vertex it is for discrete
geoms (box corner bits, mesh vertex id; -1 otherwise), which EPA and multi-contact use.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim.collision.geom import GeomInfo
from jaxsim.types import GeomType

MINVAL = 1e-15  # mjMINVAL
MINVAL2 = MINVAL * MINVAL


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
  """mjc_cylinderSupport."""
  ld = _local(info, d)
  n2 = ld[0] * ld[0] + ld[1] * ld[1]
  ok = n2 >= MINVAL2
  scl = jnp.where(ok, info.size[0] / jnp.sqrt(jnp.where(ok, n2, 1.0)), 0.0)
  z = jnp.where(ld[2] >= 0, info.size[1], -info.size[1])
  res = jnp.stack([scl * ld[0], scl * ld[1], z])
  return _world(info, res), jnp.array(-1, jnp.int32)


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

  gtype is a static geom type, or a traced one: then every type's support is computed and the
  geom's own is selected (one compiled function for all convex pairs; meshes need info.vert).
  """
  if isinstance(gtype, (int, np.integer)):
    p, idx = SUPPORT[int(gtype)](info, d)
  else:
    types = [t for t in SUPPORT if t != GeomType.MESH or info.vert is not None]
    res = [SUPPORT[t](info, d) for t in types]
    sel = jnp.stack([gtype == t for t in types])
    p = jnp.sum(jnp.where(sel[:, None], jnp.stack([r[0] for r in res]), 0.0), axis=0)
    idx = jnp.sum(jnp.where(sel, jnp.stack([r[1] for r in res]), 0))
  return p + d * (0.5 * margin), idx

"""Geometry inputs and contact outputs shared by the colliders (MuJoCo's mjc_* interface)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim.math import MINVAL

NO_CONTACT = 1e10  # dist of a contact slot that MuJoCo would not emit


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

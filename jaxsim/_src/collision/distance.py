"""Smallest signed distance between two geoms (mj_geomDistance), for static lists of geom pairs.

For each pair MuJoCo takes the collider of its geom types (mjCOLLISIONFUNC, lower type first).
Pairs that it collides with mjc_Convex or mjc_BoxBox get their distance from native CCD
(mj_geomDistanceCCD: GJK distance with witness points, EPA where the geoms overlap); the others
call their collider with the distance bound as the margin and take the deepest contact, whose
segment runs along the contact normal through the contact point. Pairs without a collider are at
the bound. The pairs are static: they are grouped by collider at trace time, each group one
vmapped call (all CCD pairs in one program, their geom types traced, meshes from mesh tables).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.collision import convex, driver, pairs, primitive
from jaxsim._src.collision.geom import GeomInfo
from jaxsim._src.enums import DisableBit, GeomType
from jaxsim._src.types import Data, Model

NONE, CCD, PRIMITIVE, HFIELD = range(4)  # how a pair's distance is computed


def methods(m: Model, geom1: np.ndarray, geom2: np.ndarray) -> np.ndarray:
  """How mj_geomDistance computes each pair's distance (static, (n,)): NONE (no collider), CCD,
  PRIMITIVE (the pair's collider with distmax as margin) or HFIELD (a height field's collider,
  which jaxsim does not run here)."""
  native = not m.opt.disableflags & DisableBit.NATIVECCD
  table = np.full((len(GeomType),) * 2, NONE)
  for a in GeomType:
    for b in GeomType:
      key = (a, b)
      if a > b or not pairs.has_collider(a, b):
        continue
      if a == GeomType.HFIELD:
        table[a, b] = HFIELD
      elif key in convex.CONVEX_PAIRS or (native and key == (GeomType.BOX, GeomType.BOX)):
        # without native CCD MuJoCo runs libccd on convex pairs; jaxsim has native CCD only
        table[a, b] = CCD
      else:
        table[a, b] = PRIMITIVE
  gtype = np.asarray(m.geom_type)
  t1, t2 = gtype[np.asarray(geom1, int)], gtype[np.asarray(geom2, int)]
  return table[np.minimum(t1, t2), np.maximum(t1, t2)]


def _info(m: Model, d: Data, geoms: np.ndarray, row=None) -> GeomInfo:
  return GeomInfo(pos=d.geom_xpos[geoms], mat=d.geom_xmat[geoms], size=m.geom_size[geoms], mesh=row)


def _ccd(m: Model, d: Data, g1: np.ndarray, g2: np.ndarray, distmax: jax.Array):
  """mj_geomDistanceCCD of pairs in their given geom order: dist (n,), fromto (n, 6)."""
  gtype, dataid = np.asarray(m.geom_type), np.asarray(m.geom_dataid)
  t1, t2 = gtype[g1], gtype[g2]
  m1 = np.where(t1 == GeomType.MESH, dataid[g1], -1)
  m2 = np.where(t2 == GeomType.MESH, dataid[g2], -1)
  tab1, tab2 = driver.mesh_table(m, m1), driver.mesh_table(m, m2)
  row = lambda t: None if t is None else jnp.asarray(t.row)  # noqa: E731
  one = len(set(zip(t1.tolist(), t2.tolist(), strict=True))) == 1
  types = (int(t1[0]), int(t2[0])) if one else (jnp.asarray(t1), jnp.asarray(t2))
  return convex.distance_group(
    _info(m, d, g1, row(tab1)),
    _info(m, d, g2, row(tab2)),
    distmax,
    type1=types[0],
    type2=types[1],
    among1=tuple(np.unique(t1)),
    among2=tuple(np.unique(t2)),
    verts1=tab1,
    verts2=tab2,
    **driver.ccd_options(m),
  )


def _primitive(m: Model, d: Data, g1: np.ndarray, g2: np.ndarray, distmax: jax.Array):
  """The deepest contact of pairs (lower geom type first) collided with margin distmax:
  dist (n,) (distmax where none is closer), fromto (n, 6) from geom 1 to geom 2 (zero: none)."""
  gtype, dataid = np.asarray(m.geom_type), np.asarray(m.geom_dataid)
  t1, t2 = gtype[g1], gtype[g2]
  mesh2 = np.where(t2 == GeomType.MESH, dataid[g2], -1)
  dist = jnp.broadcast_to(distmax, (len(g1),))
  fromto = jnp.zeros((len(g1), 6), dist.dtype)
  keys = np.stack([t1, t2, mesh2], axis=1)
  for key in np.unique(keys, axis=0):
    sel = np.flatnonzero((keys == key).all(axis=1))
    fn = primitive.COLLIDERS[(GeomType(int(key[0])), GeomType(int(key[1])))]
    info1 = driver.geom_info(m, d, g1[sel], -1)
    info2 = driver.geom_info(m, d, g2[sel], int(key[2]))
    c = jax.vmap(fn)(info1, info2, distmax[sel])
    # the first of the deepest contacts closer than distmax
    k = jnp.argmin(c.dist, axis=1)
    best = jnp.take_along_axis(c.dist, k[:, None], axis=1)[:, 0]
    hit = best < distmax[sel]
    pos = jnp.take_along_axis(c.pos, k[:, None, None], axis=1)[:, 0]
    normal = jnp.take_along_axis(c.frame[:, :, 0], k[:, None, None], axis=1)[:, 0]
    half = (0.5 * best)[:, None] * normal
    seg = jnp.concatenate([pos - half, pos + half], axis=-1)
    dist = dist.at[sel].set(jnp.where(hit, best, distmax[sel]))
    fromto = fromto.at[sel].set(jnp.where(hit[:, None], seg, 0.0))
  return dist, fromto


def geom_distance(
  m: Model, d: Data, geom1: np.ndarray, geom2: np.ndarray, distmax: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """mj_geomDistance of static geom pairs (n,) with bounds distmax (n,): the smallest signed
  distance (n,), at most distmax, and the segment fromto (n, 6) from the surface of geom1 to that
  of geom2 (zero where the geoms are no closer than distmax, or no witness points were found).

  Pairs with a height field are refused (NotImplementedError); pairs without a collider are at
  distmax.
  """
  geom1, geom2 = np.asarray(geom1, int), np.asarray(geom2, int)
  n = len(geom1)
  distmax = jnp.broadcast_to(jnp.asarray(distmax, d.geom_xpos.dtype), (n,))
  how = methods(m, geom1, geom2)
  if (how == HFIELD).any():
    raise NotImplementedError('geom distances to height fields are not supported by jaxsim')
  dist = distmax
  fromto = jnp.zeros((n, 6), distmax.dtype)
  sel = np.flatnonzero(how == CCD)
  if sel.size:
    dc, fc = _ccd(m, d, geom1[sel], geom2[sel], distmax[sel])
    dist, fromto = dist.at[sel].set(dc), fromto.at[sel].set(fc)
  sel = np.flatnonzero(how == PRIMITIVE)
  if sel.size:
    gtype = np.asarray(m.geom_type)
    flip = gtype[geom1[sel]] > gtype[geom2[sel]]
    a = np.where(flip, geom2[sel], geom1[sel])
    b = np.where(flip, geom1[sel], geom2[sel])
    dp, fp = _primitive(m, d, a, b, distmax[sel])
    # the segment runs from geom1 to geom2 as the caller named them
    fp = jnp.where(flip[:, None], jnp.concatenate([fp[:, 3:], fp[:, :3]], axis=-1), fp)
    dist, fromto = dist.at[sel].set(dp), fromto.at[sel].set(fp)
  return dist, fromto

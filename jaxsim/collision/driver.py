"""Runs every candidate geom pair through its collider into fixed contact slots (mj_collision).

Candidate pairs (pairs.py) are grouped by collider, and for meshes by mesh, at trace time; each
group is one vmapped collider call. A pair's slots are always there; a slot holds a contact when
its collider emitted one and the pair passed the bounding-sphere test, and `Contact.active` says
so. Contact parameters are mixed from the geoms (or taken from the <pair>) as mj_contactParam.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim import math
from jaxsim.collision import primitive
from jaxsim.collision.geom import NO_CONTACT, Contacts, GeomInfo, make_frame, mesh_graph_arrays
from jaxsim.types import Data, DisableBit, EnableBit, GeomType, Model

MINMU = 1e-5  # mjMINMU


def _collider(
  t1: int, t2: int, m: Model | None = None
) -> tuple[Callable[..., Contacts], int] | None:
  """(collider(g1, g2, margin) -> Contacts, number of slots) for geom types t1 <= t2."""
  key = (GeomType(t1), GeomType(t2))
  if key in primitive.COLLIDERS:
    return primitive.COLLIDERS[key], primitive.MAX_CONTACTS[key]
  from jaxsim.collision import convex

  if key in convex.CONVEX_PAIRS:
    opts = {}
    if m is not None:
      opts['ccd_iterations'] = int(m.opt.ccd_iterations)
      opts['multiccd'] = not m.opt.disableflags & DisableBit.MULTICCD
      if 'ccd_tolerance' in m.opt.fields():
        opts['ccd_tolerance'] = m.opt.ccd_tolerance
    fn = lambda g1, g2, margin: convex.collide_convex(  # noqa: E731
      g1, g2, margin, type1=t1, type2=t2, **opts
    )
    return fn, convex.CONVEX_PAIRS[key]
  return None


def groups(m: Model) -> list[dict[str, Any]]:
  """Static collider groups: candidate pairs sharing a collider (and meshes, for mesh pairs)."""
  cand = m.collision_pairs
  gtype, dataid = np.asarray(m.geom_type), np.asarray(m.geom_dataid)
  out: dict[tuple, dict[str, Any]] = {}
  for k, (g1, g2) in enumerate(zip(cand['geom1'], cand['geom2'], strict=True)):
    t1, t2 = int(gtype[g1]), int(gtype[g2])
    m1 = int(dataid[g1]) if t1 == GeomType.MESH else -1
    m2 = int(dataid[g2]) if t2 == GeomType.MESH else -1
    key = (t1, t2, m1, m2)
    grp = out.setdefault(key, {'types': (t1, t2), 'mesh': (m1, m2), 'pairs': []})
    grp['pairs'].append(k)
  result = []
  for grp in out.values():
    col = _collider(*grp['types'], m)
    if col is None:
      continue
    idx = np.asarray(grp['pairs'])
    grp.update(
      fn=col[0],
      ncon=col[1],
      geom1=np.asarray(cand['geom1'])[idx],
      geom2=np.asarray(cand['geom2'])[idx],
      ipair=np.asarray(cand['ipair'])[idx],
    )
    result.append(grp)
  return result


def unsupported_pairs(m: Model) -> list[tuple[str, str]]:
  """Geom type pairs among the candidates that no collider handles yet."""
  cand = m.collision_pairs
  gtype = np.asarray(m.geom_type)
  missing = set()
  for g1, g2 in zip(cand['geom1'], cand['geom2'], strict=True):
    t1, t2 = int(gtype[g1]), int(gtype[g2])
    if _collider(t1, t2) is None:
      missing.add((GeomType(t1).name.lower(), GeomType(t2).name.lower()))
  return sorted(missing)


def ncon_max(m: Model) -> int:
  """Number of contact slots: the sum over candidate pairs of their collider's contacts."""
  if 'collision_pairs' not in m.fields():
    return 0
  return int(sum(len(g['geom1']) * g['ncon'] for g in groups(m)))


def _mesh_vert(m: Model, mesh: int) -> jax.Array | None:
  """Vertices (nvert, 3) of a mesh in the geom frame (MuJoCo re-centres meshes at compile)."""
  if mesh < 0:
    return None
  adr, num = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
  return m.mesh_vert[adr : adr + num]


def _geom_info(m: Model, d: Data, geoms: np.ndarray, mesh: int) -> GeomInfo:
  """Colliders' view of a group of geoms; meshes add their vertices and hull graph."""
  info = GeomInfo(pos=d.geom_xpos[geoms], mat=d.geom_xmat[geoms], size=m.geom_size[geoms])
  if mesh < 0:
    return info
  n = len(geoms)
  vert = _mesh_vert(m, mesh)
  globalid, neighbors = mesh_graph_arrays(m.mesh_data[mesh].graph)
  tile = lambda x: jnp.broadcast_to(jnp.asarray(x), (n,) + np.shape(x))  # noqa: E731
  return info._replace(
    vert=tile(vert),
    graph_globalid=tile(globalid),
    graph_neighbors=tile(neighbors),
    rbound=m.geom_rbound[geoms],
  )


def _margin_gap(m: Model, g1, g2, ipair) -> tuple[jax.Array, jax.Array]:
  """Per-pair margin and gap (getMargin/getGap), with the override option."""
  explicit = ipair >= 0
  ip = np.maximum(ipair, 0)
  margin = m.geom_margin[g1] + m.geom_margin[g2]
  gap = m.geom_gap[g1] + m.geom_gap[g2]
  if m.npair:
    margin = jnp.where(explicit, m.pair_margin[ip], margin)
    gap = jnp.where(explicit, m.pair_gap[ip], gap)
  if m.opt.enableflags & EnableBit.OVERRIDE:
    margin = jnp.full_like(margin, m.opt.o_margin)
  return margin, gap


def _contact_params(m: Model, g1: np.ndarray, g2: np.ndarray, ipair: np.ndarray) -> dict:
  """condim (static), friction (n, 5), solref, solreffriction (n, 2), solimp (n, 5)."""
  pr1, pr2 = np.asarray(m.geom_priority)[g1], np.asarray(m.geom_priority)[g2]
  cd1, cd2 = np.asarray(m.geom_condim)[g1], np.asarray(m.geom_condim)[g2]
  condim = np.where(pr1 > pr2, cd1, np.where(pr1 < pr2, cd2, np.maximum(cd1, cd2)))
  s1, s2 = m.geom_solmix[g1], m.geom_solmix[g2]
  mix = jnp.where(
    (s1 >= math.MINVAL) & (s2 >= math.MINVAL),
    s1 / jnp.where((s1 + s2) > 0, s1 + s2, 1.0),
    jnp.where((s1 < math.MINVAL) & (s2 < math.MINVAL), 0.5, jnp.where(s1 < math.MINVAL, 0.0, 1.0)),
  )
  ref1, ref2 = m.geom_solref[g1], m.geom_solref[g2]
  both_std = (ref1[:, :1] > 0) & (ref2[:, :1] > 0)
  solref = jnp.where(
    both_std, mix[:, None] * ref1 + (1 - mix[:, None]) * ref2, jnp.minimum(ref1, ref2)
  )
  solimp = mix[:, None] * m.geom_solimp[g1] + (1 - mix[:, None]) * m.geom_solimp[g2]
  fri = jnp.maximum(m.geom_friction[g1], m.geom_friction[g2])
  hi1, hi2 = (pr1 > pr2)[:, None], (pr1 < pr2)[:, None]
  solref = jnp.where(hi1, ref1, jnp.where(hi2, ref2, solref))
  solimp = jnp.where(hi1, m.geom_solimp[g1], jnp.where(hi2, m.geom_solimp[g2], solimp))
  fri = jnp.where(hi1, m.geom_friction[g1], jnp.where(hi2, m.geom_friction[g2], fri))
  friction = jnp.stack([fri[:, 0], fri[:, 0], fri[:, 1], fri[:, 2], fri[:, 2]], axis=-1)
  solreffriction = jnp.zeros_like(solref)
  explicit = ipair >= 0
  if explicit.any():
    ip = np.maximum(ipair, 0)
    e = explicit[:, None]
    condim = np.where(explicit, np.asarray(m.pair_dim)[ip], condim)
    friction = jnp.where(e, m.pair_friction[ip], friction)
    solref = jnp.where(e, m.pair_solref[ip], solref)
    solimp = jnp.where(e, m.pair_solimp[ip], solimp)
    prf = m.pair_solreffriction[ip]
    has_prf = e & jnp.any(prf != 0, axis=-1, keepdims=True)
    solreffriction = jnp.where(has_prf, prf, solreffriction)
  if m.opt.enableflags & EnableBit.OVERRIDE:
    friction = jnp.broadcast_to(m.opt.o_friction, friction.shape)
    solref = jnp.broadcast_to(m.opt.o_solref, solref.shape)
    solreffriction = jnp.broadcast_to(m.opt.o_solref, solref.shape)
    solimp = jnp.broadcast_to(m.opt.o_solimp, solimp.shape)
  friction = jnp.maximum(MINMU, friction)
  return {
    'dim': condim,
    'friction': friction,
    'solref': solref,
    'solreffriction': solreffriction,
    'solimp': solimp,
  }


def _sphere_cull(m: Model, d: Data, g1, g2, bound_margin) -> jax.Array:
  """True where the pair passes MuJoCo's bounding-sphere test (mj_filterSphere)."""
  rb1, rb2 = m.geom_rbound[g1], m.geom_rbound[g2]
  p1, p2 = d.geom_xpos[g1], d.geom_xpos[g2]
  dist2 = jnp.sum((p1 - p2) ** 2, axis=-1)
  bound = rb1 + rb2 + bound_margin
  both = (rb1 > 0) & (rb2 > 0)
  ok = jnp.where(both, dist2 <= bound * bound, True)
  # a plane against a bounded geom: distance of the geom's centre from the plane
  plane1 = np.asarray(m.geom_type)[g1] == GeomType.PLANE
  if plane1.any():
    normal = d.geom_xmat[g1][:, :, 2]
    pdist = jnp.sum((p2 - p1) * normal, axis=-1)
    ok = jnp.where(plane1 & (rb2 > 0), pdist <= bound_margin + rb2, ok)
  return ok


def collision(m: Model, d: Data) -> Data:
  """Contacts of all candidate pairs in fixed slots; `ncon` counts the active ones."""
  flags = m.opt.disableflags
  ncon = ncon_max(m)
  if not ncon:
    return d
  if flags & DisableBit.CONSTRAINT or flags & DisableBit.CONTACT:
    return d.replace(contact=d.contact.replace(active=jnp.zeros(ncon, bool)), ncon=jnp.int32(0))
  parts: dict[str, list] = {k: [] for k in _FIELDS}
  for grp in groups(m):
    g1, g2, ipair, n = grp['geom1'], grp['geom2'], grp['ipair'], grp['ncon']
    margin, gap = _margin_gap(m, g1, g2, ipair)
    info1 = _geom_info(m, d, g1, grp['mesh'][0])
    info2 = _geom_info(m, d, g2, grp['mesh'][1])
    c = jax.vmap(grp['fn'])(info1, info2, margin + gap)
    ok = _sphere_cull(m, d, g1, g2, margin + gap)
    active = (c.dist < NO_CONTACT * 0.5) & ok[:, None]
    params = _contact_params(m, g1, g2, ipair)
    parts['dist'].append(jnp.where(active, c.dist, NO_CONTACT).reshape(-1))
    parts['pos'].append(c.pos.reshape(-1, 3))
    parts['frame'].append(make_frame(c.frame[..., 0, :], c.frame[..., 1, :]).reshape(-1, 3, 3))
    parts['includemargin'].append(jnp.repeat(margin, n, axis=0))
    parts['friction'].append(jnp.repeat(params['friction'], n, axis=0))
    parts['solref'].append(jnp.repeat(params['solref'], n, axis=0))
    parts['solreffriction'].append(jnp.repeat(params['solreffriction'], n, axis=0))
    parts['solimp'].append(jnp.repeat(params['solimp'], n, axis=0))
    parts['dim'].append(np.repeat(params['dim'], n))
    parts['geom1'].append(np.repeat(g1, n))
    parts['geom2'].append(np.repeat(g2, n))
    parts['active'].append(active.reshape(-1))
  cat = {k: jnp.concatenate(v) for k, v in parts.items() if k not in _STATIC_INT}
  for k in _STATIC_INT:
    cat[k] = jnp.asarray(np.concatenate(parts[k]), dtype=jnp.int32)
  contact = d.contact.replace(
    geom=jnp.stack([cat['geom1'], cat['geom2']], axis=-1),
    efc_address=jnp.full(ncon, -1, jnp.int32),
    **cat,
  )
  return d.replace(contact=contact, ncon=jnp.sum(contact.active).astype(jnp.int32))


_STATIC_INT = ('dim', 'geom1', 'geom2')
_FIELDS = (
  'dist pos frame includemargin friction solref solreffriction solimp dim geom1 geom2 active'
).split()

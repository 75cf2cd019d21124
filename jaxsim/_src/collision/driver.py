"""Runs every candidate geom pair through its collider into fixed contact slots (mj_collision).

Candidate pairs (pairs.py) are grouped by collider, and for meshes by mesh, for height fields by
height field, at trace time; each group is one vmapped collider call that fills its pairs' slots.
A slot holds a contact when its collider emitted one and the pair passed the bounding-sphere
and oriented-box tests. Groups of many GJK/EPA pairs collide only the pairs nearest by their
bounding volumes (broadphase.py). Contact parameters are mixed from the geoms (or taken from the
<pair>) as mj_contactParam.

Contact budget: most candidate pairs never touch at the same time, so the slots of all pairs are
compacted into `ncon_max(m)` slots (like MJX's and MuJoCo Warp's nconmax), per condim so that
each slot keeps a static number of constraint rows: the active contacts of a condim class keep
their slot order, and when there are more than the class has slots the deepest are kept and
Data.warning[mjWARN_CONTACTFULL] counts the overflow. The budget is asked for by
`with_ncon_max` (a number, or an estimate of the contacts the model can have at once) or by MJCF
<size nconmax> where every slot would cost more than LEGACY_FACTOR times its rows (MuJoCo 4 reads
nconmax but keeps every contact); without one, every collider slot is a Data.contact slot, unless
the constraint Jacobian of all those slots would pass AUTO_BUDGET_BYTES per world (a scene of
hundreds of free bodies has hundreds of thousands of candidate pairs): then each condim class
keeps its share of the slots whose rows fit in it, or the estimate if larger. A budget bounds
each condim class, and Data.contact then holds the classes one after the other: MuJoCo's order
within a class only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.collision import broadphase, hfield, primitive
from jaxsim._src.collision import support as sp
from jaxsim._src.collision.geom import NO_CONTACT, Contacts, GeomInfo, mesh_graph_arrays
from jaxsim._src.enums import MINMU, MINVAL, ConeType, DisableBit, EnableBit, GeomType, WarningType
from jaxsim._src.types import Data, Model

MIN_BUDGET = 8  # slots of a condim class the default budget never goes below
# dense efc_J (rows x nv, float64) above which a model given no budget gets the estimate
AUTO_BUDGET_BYTES = 256 * 2**20
# MJCF <size nconmax> (legacy; MuJoCo 4 keeps every contact) becomes a budget only where every
# collider slot would have more than this many times the budget's constraint rows: Gymnasium's
# Shadow-hand and Adroit scenes (nconmax 100: 1.2x and 2.7x) keep MuJoCo's contacts in MuJoCo's
# order, dm_control's dog (nconmax 300: 8.9x, 41k rows) keeps its budget
LEGACY_FACTOR = 4


def _ccd_options(m: Model | None) -> dict[str, Any]:
  """opt.ccd_iterations, opt.ccd_tolerance and multiccd for the GJK/EPA colliders."""
  if m is None:
    return {}
  return {'ccd_iterations': int(m.opt.ccd_iterations), 'ccd_tolerance': m.opt.ccd_tolerance}


def _collider(t1: int, t2: int) -> tuple[Callable[..., Contacts], int] | None:
  """(analytic collider(g1, g2, margin) -> Contacts, number of slots) for geom types t1 <= t2.

  GJK/EPA pairs (`_is_convex`) are collided by convex.collide_convex_group and height fields by
  hfield.collide_hfield_group: neither has a per-pair function here.
  """
  key = (GeomType(t1), GeomType(t2))
  if key in primitive.COLLIDERS:
    return primitive.COLLIDERS[key], primitive.MAX_CONTACTS[key]
  return None


def _is_convex(t1: int, t2: int) -> bool:
  """Whether mjc_Convex (GJK/EPA, with mesh polygons for multi-contact) collides t1, t2."""
  from jaxsim._src.collision import convex

  return (GeomType(t1), GeomType(t2)) in convex.CONVEX_PAIRS


def _supported(t1: int, t2: int) -> bool:
  if t1 == GeomType.HFIELD:
    return t2 in hfield.HFIELD_TYPES
  return _collider(t1, t2) is not None or _is_convex(t1, t2)


def _windows(m: Model) -> np.ndarray:
  """(n, 2) height-field windows of the candidate pairs (static, from pairs.candidate_pairs)."""
  cand = m.collision_pairs
  if 'window' in cand:
    return np.asarray(cand['window'])
  from jaxsim._src.collision import pairs

  try:
    c = {k: np.asarray(getattr(m, k)) for k in pairs.WINDOW_FIELDS}
  except jax.errors.TracerArrayConversionError:
    raise ValueError(
      'height-field collisions need the static sub-grid windows of collision_pairs (load the '
      'model with jaxsim.load), or a Model closed over instead of passed as a traced argument'
    ) from None
  c['opt'] = {'enableflags': int(m.opt.enableflags), 'o_margin': np.asarray(m.opt.o_margin)}
  return pairs.hfield_windows(c, cand['geom1'], cand['geom2'], np.asarray(cand['ipair']))


def groups(m: Model) -> list[dict[str, Any]]:
  """Static collider groups: candidate pairs sharing a collider (and mesh, and height field).

  Each group: types (-1 where the group mixes geom types: traced, from type1/type2), mesh
  (mesh ids or -1; -2 where they vary over the pairs: mesh1, mesh2), hfield (height field id or
  -1), convex (GJK/EPA pairs), fn, ncon (collider slots per pair), nslot (contact slots of each
  pair, at most ncon), geom1, geom2, ipair, type1, type2, mesh1, mesh2 (arrays over the group's
  pairs), pairs (candidate indices).

  Every GJK/EPA pair of primitives is in one group, whatever its types, and every GJK/EPA pair
  with a mesh in another: on a CPU the cost of GJK and EPA loops is mostly per call, not per
  pair, and each group is a program to compile.
  """
  from jaxsim._src.collision import convex

  cand = m.collision_pairs
  gtype, dataid = np.asarray(m.geom_type), np.asarray(m.geom_dataid)
  geom1, geom2 = np.asarray(cand['geom1'], dtype=int), np.asarray(cand['geom2'], dtype=int)
  windows = None
  # vectorised over the candidates: a scene of 100 humanoids has ~2e6 of them
  t1, t2 = gtype[geom1], gtype[geom2]
  m1 = np.where(t1 == GeomType.MESH, dataid[geom1], -1)
  m2 = np.where(t2 == GeomType.MESH, dataid[geom2], -1)
  hid = np.where(t1 == GeomType.HFIELD, dataid[geom1], -1)
  # height-field pairs: one group per height field and mesh, primitives joining the first
  # mesh's group (geom type traced), so that few GJK/EPA programs are compiled
  on_field = hid >= 0
  field_mesh = np.full(max(int(hid.max(initial=-1)) + 1, 1), -1)
  with_mesh = np.flatnonzero(on_field & (t2 == GeomType.MESH))
  for k in with_mesh[::-1]:  # the first pair of each height field wins
    field_mesh[hid[k]] = m2[k]
  m2 = np.where(on_field & (m2 < 0), field_mesh[np.maximum(hid, 0)], m2)
  keep = ~on_field | np.isin(t2, hfield.HFIELD_TYPES)
  conv_table = np.zeros((max(8, int(gtype.max(initial=0)) + 1),) * 2, dtype=int)
  for (a, b), n in convex.CONVEX_PAIRS.items():
    conv_table[int(a), int(b)] = n
  conv_any = ~on_field & (conv_table[t1, t2] > 0)
  conv = conv_any & (m1 < 0) & (m2 < 0)
  keys = np.stack([t1, np.where(on_field, -1, t2), m1, m2, hid], axis=1)
  keys[conv] = -9
  # GJK/EPA pairs with meshes: one group (vertex, hull and polygon tables padded to the largest
  # mesh, gathered per pair), not one per mesh pair. One group per mesh size class compiled a
  # GJK/EPA program per class: Robotiq's 2F-85 (hulls of 150 to 803 vertices, four classes)
  # took 107 s to compile kinematics + collision, one group 39 s at 1.2x the run time; the
  # Panda and the Shadow hand compiled faster and ran no slower
  conv_mesh = conv_any & ~conv
  keys[conv_mesh] = -8
  # plane-mesh pairs likewise (meshes with a hull graph: hill climbing on padded graphs)
  plane_mesh = ~on_field & (t1 == GeomType.PLANE) & (m2 >= 0)
  graph = np.array([md.graph is not None for md in m.mesh_data] + [False])
  if plane_mesh.any():
    plane_mesh &= graph[m2]
    keys[plane_mesh, 2] = -2
    keys[plane_mesh, 3] = -2
  # height-field pairs with meshes likewise: one group per height field, not one per mesh (a
  # robot of 24 collision meshes on two height fields traced 48 groups, 100 s)
  field_table = on_field & (m2 >= 0) & graph[m2]
  keys[field_table, 3] = -2
  by_table = conv_mesh | plane_mesh | field_table
  idx_all = np.flatnonzero(keep)
  out: list[dict[str, Any]] = []
  if len(idx_all):
    kk = keys[idx_all] + 10  # one int64 per key row: np.unique over rows is slow
    radix = int(kk.max()) + 1
    code = np.zeros(len(kk), dtype=np.int64)
    for col in kk.T:
      code = code * radix + col
    uniq, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind='stable')
    bounds = np.cumsum(np.bincount(inverse, minlength=len(uniq)))[:-1]
    members = np.split(idx_all[order], bounds)
    for u in np.argsort(first, kind='stable'):  # groups in order of first appearance
      k0 = idx_all[first[u]]
      types = (int(t1[k0]), -1 if on_field[k0] else int(t2[k0]))
      # (-2, -2): meshes vary over the group's pairs (mesh1, mesh2)
      mesh = (-2, -2) if by_table[k0] else (int(m1[k0]), int(m2[k0]))
      out.append({'types': types, 'mesh': mesh, 'hfield': int(hid[k0]), 'pairs': members[u]})
  result = []
  multiccd = not m.opt.disableflags & DisableBit.MULTICCD
  for grp in out:
    idx = np.asarray(grp['pairs'])
    grp.update(
      geom1=np.asarray(cand['geom1'])[idx],
      geom2=np.asarray(cand['geom2'])[idx],
      ipair=np.asarray(cand['ipair'])[idx],
    )
    ty1, ty2 = gtype[grp['geom1']], gtype[grp['geom2']]
    grp.update(type1=ty1, type2=ty2, mesh1=m1[idx], mesh2=m2[idx])
    grp['convex'] = grp['hfield'] < 0 and _is_convex(*grp['types'])
    if grp['convex']:
      # collide_convex_group's slots: mjc_Convex's maximum, one without multiccd
      nslot = conv_table[ty1, ty2] if multiccd else np.ones(len(idx), dtype=int)
      if len(np.unique(ty1)) > 1 or len(np.unique(ty2)) > 1:
        grp['types'] = (-1, -1)
      grp.update(fn=None, ncon=int(nslot.max()), nslot=np.asarray(nslot))
      result.append(grp)
      continue
    t1, t2 = grp['types']
    if grp['hfield'] >= 0:
      if windows is None:
        windows = _windows(m)
      win = tuple(int(w) for w in np.max(windows[idx], axis=0))
      t2s = np.unique(ty2)
      grp['types'] = (t1, int(t2s[0]) if len(t2s) == 1 else -1)
      grp['win'] = win
      col = (None, hfield.max_contacts(win))
    else:
      col = _collider(t1, t2)
      if col is None:
        continue
    grp.update(fn=col[0], ncon=col[1], nslot=np.full(len(idx), col[1]))
    result.append(grp)
  return result


def unsupported_pairs(m: Model) -> list[tuple[str, str]]:
  """Geom type pairs among the candidates that no collider handles yet."""
  cand = m.collision_pairs
  gtype = np.asarray(m.geom_type)
  missing = set()
  g1, g2 = np.asarray(cand['geom1'], dtype=int), np.asarray(cand['geom2'], dtype=int)
  for t1, t2 in np.unique(np.stack([gtype[g1], gtype[g2]], axis=1).reshape(-1, 2), axis=0):
    t1, t2 = int(t1), int(t2)
    if not _supported(t1, t2):
      missing.add((GeomType(t1).name.lower(), GeomType(t2).name.lower()))
  return sorted(missing)


# ------------------------------------------------------------------------------ contact budget


class Budget(NamedTuple):
  """Static contact-slot layout: the collider slots of all pairs, and what Data.contact holds.

  nfull: collider slots (every pair's maximum contacts); ncon: Data.contact slots. When capped,
  Data.contact is the concatenation over `classes` (condim, collider slots of that condim (S,),
  slots kept K), each holding its class's active contacts first; otherwise it is the collider
  slots themselves. dim (ncon,): condim of every Data.contact slot.
  """

  nfull: int
  ncon: int
  capped: bool
  dim: np.ndarray
  classes: tuple[tuple[int, np.ndarray, int], ...]


def _requested(m: Model) -> int | None | str | tuple[str, int]:
  """The budget asked for: with_ncon_max, else ('legacy', MJCF <size nconmax>); -1: none (every
  slot), None: the default estimate (with_ncon_max(m, None)), 'auto': nothing asked."""
  cp = m.collision_pairs
  if 'nconmax' in cp:
    n = cp['nconmax']
    return None if n is None else int(n)
  n = m.size.get('nconmax')
  return 'auto' if n is None or int(n) <= 0 else ('legacy', int(n))


def _rows(m: Model, dim: np.ndarray) -> int:
  """Constraint rows of contact slots of these condims (constraint.layout's count)."""
  if m.opt.cone == ConeType.PYRAMIDAL:
    return int(np.where(dim == 1, 1, 2 * (dim - 1)).sum())
  return int(dim.sum())


def _default_budget(g1: np.ndarray, g2: np.ndarray, nslot: np.ndarray) -> int:
  """Contacts a set of pairs can plausibly have at once: each geom at full contact with three.

  Every geom counts the slots of its largest pair, times 3/2 as a contact involves two geoms:
  each geom can have its largest pair's contacts with three partners at the same time (a settled
  pile of 50 mixed bodies has about 160 contacts for a budget of about 290).
  """
  if not len(g1):
    return 0
  n = int(max(g1.max(), g2.max())) + 1
  best = np.zeros(n, dtype=np.int64)
  np.maximum.at(best, g1, nslot)
  np.maximum.at(best, g2, nslot)
  return int(np.ceil(1.5 * best.sum()))


def slot_order(m: Model, grps: list[dict[str, Any]]) -> np.ndarray:
  """Permutation of the collider slots (the groups' pairs and slots, concatenated) into the
  order mj_collision emits contacts.

  MuJoCo walks body pairs by signature (lower body id << 16 plus the higher), each body pair's
  <pair>s first (in pair order), then its geom pairs by (geom1, geom2) as the contact stores
  them (mj_collideTree's contactSort); a pair's contacts keep their collider order.
  """
  if not grps:
    return np.zeros(0, np.int64)
  cat = lambda k: np.concatenate([np.asarray(g[k]) for g in grps]).astype(np.int64)  # noqa: E731
  g1, g2, ipair, nslot = cat('geom1'), cat('geom2'), cat('ipair'), cat('nslot')
  body = np.asarray(m.geom_bodyid).astype(np.int64)
  b1, b2 = body[g1], body[g2]
  sig = (np.minimum(b1, b2) << 16) + np.maximum(b1, b2)
  explicit = ipair >= 0
  if explicit.any():
    sig = np.where(explicit, np.asarray(m.pair_signature)[np.maximum(ipair, 0)], sig)
  first = np.where(explicit, ipair, g1)
  second = np.where(explicit, 0, g2)
  order = np.lexsort((second, first, ~explicit, sig))
  start = np.concatenate([[0], np.cumsum(nslot)[:-1]])
  n = nslot[order]
  within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
  return np.repeat(start[order], n) + within


def budget(m: Model) -> Budget:
  """The static slot layout of a model's contacts (see Budget)."""
  grps = groups(m)
  if not grps:
    z = np.zeros(0, np.int32)
    return Budget(0, 0, False, z, ())
  pdim = np.concatenate([_condim(m, g['geom1'], g['geom2'], g['ipair']) for g in grps])
  nslot = np.concatenate([g['nslot'] for g in grps])
  g1 = np.concatenate([g['geom1'] for g in grps])
  g2 = np.concatenate([g['geom2'] for g in grps])
  dim_full = np.repeat(pdim, nslot).astype(np.int32)[slot_order(m, grps)]
  nfull = len(dim_full)
  req = _requested(m)
  legacy = isinstance(req, tuple)
  if legacy:
    req = req[1]
  # no budget asked for: every slot, unless their rows would not fit in AUTO_BUDGET_BYTES
  fit = None
  if req == 'auto':
    full_rows = _rows(m, dim_full)
    req = -1
    if full_rows * m.nv * 8 > AUTO_BUDGET_BYTES:
      req, fit = None, AUTO_BUDGET_BYTES / (8 * m.nv * full_rows)
  classes = []
  for c in np.unique(dim_full):
    ids = np.flatnonzero(dim_full == c)
    if req is not None and req > 0:
      k = req
    elif req is None:
      sel = pdim == c
      k = max(_default_budget(g1[sel], g2[sel], nslot[sel]), MIN_BUDGET)
      if fit is not None:
        # the class's share of the rows that fit, if more than the estimate
        k = max(k, int(fit * len(ids)))
    else:
      k = len(ids)
    classes.append((int(c), ids, min(len(ids), k)))
  capped = any(k < len(ids) for _, ids, k in classes)
  dim = np.concatenate([np.full(k, c, np.int32) for c, _, k in classes]) if capped else dim_full
  if legacy and capped and _rows(m, dim_full) <= LEGACY_FACTOR * _rows(m, dim):
    capped = False
  if not capped:
    return Budget(nfull, nfull, False, dim_full, ())
  return Budget(nfull, len(dim), True, dim, tuple(classes))


def ncon_max(m: Model) -> int:
  """Number of contact slots in Data.contact (the budget; all collider slots when uncapped)."""
  return budget(m).ncon


def contact_dim(m: Model) -> np.ndarray:
  """condim (ncon,) of every Data.contact slot (static: it sizes the constraint rows)."""
  return budget(m).dim


def contact_slots(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(geom1, geom2, condim) of every Data.contact slot; geoms are -1 where they vary (capped)."""
  b = budget(m)
  if b.capped:
    neg = np.full(b.ncon, -1, np.int32)
    return neg, neg.copy(), b.dim
  g1, g2 = [], []
  grps = groups(m)
  for grp in grps:
    g1.append(np.repeat(grp['geom1'], grp['nslot']))
    g2.append(np.repeat(grp['geom2'], grp['nslot']))
  order = slot_order(m, grps)
  cat = lambda x: np.concatenate(x)[order].astype(np.int32) if x else np.zeros(0, np.int32)  # noqa: E731
  return cat(g1), cat(g2), b.dim


def with_ncon_max(m: Model, n: int | None) -> Model:
  """The model with a contact budget of n slots per condim class (None: the default estimate,
  -1: every collider slot), its Data sizes (nconmax, nefcmax) updated; make a new Data for it."""
  from jaxsim._src import constraint

  m = m.replace(collision_pairs={**m.collision_pairs, 'nconmax': n})
  m = m.replace(nconmax=ncon_max(m))
  return m.replace(nefcmax=constraint.layout(m).nefc)


def with_max_geom_pairs(m: Model, n: int | None) -> Model:
  """The model with n pairs per collider group through the collider each step (MJX's custom
  numeric max_geom_pairs; -1: every pair, exactly MuJoCo's contacts at any state; None:
  broadphase.limit's default)."""
  cp = dict(m.collision_pairs)
  cp.pop('max_geom_pairs', None)
  if n is not None:
    cp['max_geom_pairs'] = int(n)
  return m.replace(collision_pairs=cp)


# ------------------------------------------------------------------------------ parameters


def _mesh_vert(m: Model, mesh: int) -> jax.Array | None:
  """Vertices (nvert, 3) of a mesh in the geom frame (MuJoCo re-centres meshes at compile)."""
  if mesh < 0:
    return None
  adr, num = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
  return m.mesh_vert[adr : adr + num]


def _geom_info(m: Model, d: Data, geoms: np.ndarray, mesh: int, rbound: bool = False) -> GeomInfo:
  """Colliders' view of a group of geoms; meshes add their vertices and hull graph."""
  info = GeomInfo(pos=d.geom_xpos[geoms], mat=d.geom_xmat[geoms], size=m.geom_size[geoms])
  if rbound:
    info = info._replace(rbound=m.geom_rbound[geoms])
  if mesh < 0:
    return info
  n = len(geoms)
  vert = _mesh_vert(m, mesh)
  globalid, neighbors = mesh_graph_arrays(m.mesh_data[mesh].graph)
  tile = lambda x: jnp.broadcast_to(jnp.asarray(x), (n,) + np.shape(x))  # noqa: E731
  poly = _mesh_poly(m, mesh)
  return info._replace(
    vert=tile(vert),
    graph_globalid=tile(globalid),
    graph_neighbors=tile(neighbors),
    rbound=m.geom_rbound[geoms],
    poly=None if poly is None else jax.tree.map(tile, poly),
  )


class MeshTable(NamedTuple):
  """The meshes of one side of a collider group, padded to common sizes (leading axis: mesh).

  vert (nm, V, 3): vertices, padded with copies of vertex 0 (a support search returns the first
  of equal projections, so never a copy); poly: their polygons (MeshPoly with a leading mesh
  axis; a mesh without polygons has none, nvert 0); row (n,): the table row of each pair's
  geom (0 for a geom that is not a mesh).
  """

  vert: jax.Array
  poly: sp.MeshPoly | None
  row: np.ndarray
  hull_vert: jax.Array  # (nm, H, 3) hull vertices (all vertices without a hull), padded
  hull_id: jax.Array  # (nm, H) their ids into vert, ascending, padded with the first
  nvert: np.ndarray  # (nm,) vertex counts
  graph_globalid: np.ndarray | None  # (nm, G) mesh_graph_arrays, padded with 0 (None: a mesh
  graph_neighbors: np.ndarray | None  # (nm, G, D) has no graph); neighbours padded with -1


def mesh_table(m: Model, mesh: np.ndarray) -> MeshTable | None:
  """The mesh table of the geoms of a group side with mesh ids `mesh` (n,) (-1: not a mesh)."""
  mesh = np.asarray(mesh, dtype=int)
  if not (mesh >= 0).any():
    return None
  used = np.unique(mesh[mesh >= 0])
  row = np.where(mesh >= 0, np.searchsorted(used, mesh), 0)
  adr, num = np.asarray(m.mesh_vertadr)[used], np.asarray(m.mesh_vertnum)[used]
  k = np.arange(int(num.max()))
  vert = m.mesh_vert[np.where(k[None, :] < num[:, None], adr[:, None] + k[None, :], adr[:, None])]
  hulls, graphs = [], []
  for i, n in zip(used, num, strict=True):
    graph = m.mesh_data[int(i)].graph
    graphs.append(None if graph is None else mesh_graph_arrays(graph))
    ids = np.arange(n) if graph is None else np.sort(graphs[-1][0])
    hulls.append(ids)
  gid = gnb = None
  if all(g is not None for g in graphs):
    nh = max(len(g[0]) for g in graphs)
    deg = max(g[1].shape[1] for g in graphs)
    gid = np.zeros((len(graphs), nh), np.int32)
    gnb = np.full((len(graphs), nh, deg), -1, np.int32)
    for j, (a, b) in enumerate(graphs):
      gid[j, : len(a)] = a
      gnb[j, : b.shape[0], : b.shape[1]] = b
  width = max(len(h) for h in hulls)
  hull_id = np.stack([np.concatenate([h, np.full(width - len(h), h[0])]) for h in hulls])
  hull_vert = m.mesh_vert[adr[:, None] + hull_id]
  polys = [_mesh_poly(m, int(i)) for i in used]
  poly = None
  if any(p is not None for p in polys):
    nv = vert.shape[1]
    npoly = max(int(p.vert.shape[0]) for p in polys if p is not None)
    width = max(int(p.vert.shape[1]) for p in polys if p is not None)
    deg = max(int(p.map.shape[1]) for p in polys if p is not None)

    def fit(x, shape, fill):
      x = jnp.asarray(x)
      pad = [(0, t - s) for s, t in zip(x.shape, shape, strict=True)]
      return jnp.pad(x, pad, constant_values=fill)

    rows = []
    for p in polys:
      if p is None:  # no polygons: nvert 0 everywhere, no vertex on any polygon
        p = sp.MeshPoly(
          jnp.zeros((1, 3)), -jnp.ones((1, 1), jnp.int32), jnp.zeros(1, jnp.int32),
          -jnp.ones((nv, 1), jnp.int32), jnp.zeros(nv, jnp.int32),
        )  # fmt: skip
      rows.append(
        sp.MeshPoly(
          fit(p.normal, (npoly, 3), 0.0),
          fit(p.vert, (npoly, width), -1),
          fit(p.nvert, (npoly,), 0),
          fit(p.map, (nv, deg), -1),
          fit(p.nmap, (nv,), 0),
        )
      )
    poly = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *rows)
  row = row.reshape(-1).astype(np.int32)
  hull_id = jnp.asarray(hull_id, dtype=jnp.int32)
  return MeshTable(vert, poly, row, hull_vert, hull_id, num.astype(np.int32), gid, gnb)


def _plane_mesh_row(
  fn: Callable[..., Contacts], t: MeshTable, g1: GeomInfo, g2: GeomInfo, margin: jax.Array
) -> Contacts:
  """fn (a plane-mesh collider) on one pair, g2's mesh read from its row of the table.

  The row is gathered here, inside the vmap, from a row index XLA cannot see through: gathered
  for all pairs at trace time, the padded hull graphs (32 x 21612 x 63 int32 in humanoid-bench's
  G1 scenes) were constants that XLA folded at every compile.
  """
  return fn(g1, _table_rows(t, jax.lax.optimization_barrier(g2.mesh), g2), margin)


def _table_rows(t: MeshTable, r: jax.Array, g: GeomInfo) -> GeomInfo:
  """g with the mesh of table rows r: vertices, hull graph, polygons."""
  return g._replace(
    vert=t.vert[r],
    graph_globalid=jnp.asarray(t.graph_globalid)[r],
    graph_neighbors=jnp.asarray(t.graph_neighbors)[r],
    nvert=jnp.asarray(t.nvert)[r],
    mesh=None,
    poly=None if t.poly is None else sp.MeshPoly(*(x[r] for x in t.poly)),
  )


def _row(t: MeshTable | None, pick: Callable) -> jax.Array | None:
  """The table rows of the collided pairs' geoms (pick: the pairs' selection)."""
  return None if t is None else pick(jnp.asarray(t.row))


def _mesh_poly(m: Model, mesh: int) -> sp.MeshPoly | None:
  """A mesh's polygons (mesh_poly*) as padded arrays for multi-contact; None without any."""
  if mesh < 0 or not int(m.mesh_polynum[mesh]):
    return None
  pa, pn = int(m.mesh_polyadr[mesh]), int(m.mesh_polynum[mesh])
  va, vn = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
  adr, num = (
    np.asarray(m.mesh_polyvertadr)[pa : pa + pn],
    np.asarray(m.mesh_polyvertnum)[pa : pa + pn],
  )
  madr, mnum = (
    np.asarray(m.mesh_polymapadr)[va : va + vn],
    np.asarray(m.mesh_polymapnum)[va : va + vn],
  )
  vert = _padded(np.asarray(m.mesh_polyvert), adr, num)
  pmap = _padded(np.asarray(m.mesh_polymap), madr, mnum)
  normal = m.mesh_polynormal[pa : pa + pn]
  # the colliders index these with traced ids: jax constants, not NumPy arrays
  ints = lambda x: jnp.asarray(x, dtype=jnp.int32)  # noqa: E731
  return sp.MeshPoly(normal, ints(vert), ints(num), ints(pmap), ints(mnum))


def _padded(flat: np.ndarray, adr: np.ndarray, num: np.ndarray) -> np.ndarray:
  """Rows flat[adr[i] : adr[i] + num[i]] padded with -1 to the longest (at least 1 column)."""
  width = max(int(num.max(initial=0)), 1)
  k = np.arange(width)
  idx = adr[:, None] + np.minimum(k[None, :], np.maximum(num[:, None] - 1, 0))
  # an empty row's adr may be len(flat) (a mesh vertex off the hull, last in the array)
  idx = np.minimum(idx, max(len(flat) - 1, 0))
  rows = flat[idx] if len(flat) else np.zeros(idx.shape, np.int32)
  return np.where(k[None, :] < num[:, None], rows, -1).astype(np.int32)


def _hfield(m: Model, hid: int) -> hfield.HField:
  """Height field hid's elevations (nrow, ncol) and size (4,)."""
  nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
  adr = int(m.hfield_adr[hid])
  data = m.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol)
  return hfield.HField(data, m.hfield_size[hid])


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


def _condim(m: Model, g1: np.ndarray, g2: np.ndarray, ipair: np.ndarray) -> np.ndarray:
  """condim of pairs (static): the higher-priority geom's, else the larger; <pair> dim wins."""
  pr1, pr2 = np.asarray(m.geom_priority)[g1], np.asarray(m.geom_priority)[g2]
  cd1, cd2 = np.asarray(m.geom_condim)[g1], np.asarray(m.geom_condim)[g2]
  condim = np.where(pr1 > pr2, cd1, np.where(pr1 < pr2, cd2, np.maximum(cd1, cd2)))
  explicit = ipair >= 0
  if explicit.any():
    condim = np.where(explicit, np.asarray(m.pair_dim)[np.maximum(ipair, 0)], condim)
  return condim


def _contact_params(m: Model, g1: np.ndarray, g2: np.ndarray, ipair: np.ndarray) -> dict:
  """condim (static), friction (n, 5), solref, solreffriction (n, 2), solimp (n, 5), adhesion (n,).

  adhesion (MuJoCo 4): the sum of the geoms', the higher-priority geom's where priorities differ;
  an explicit pair's own (which does not default to the geoms').
  """
  pr1, pr2 = np.asarray(m.geom_priority)[g1], np.asarray(m.geom_priority)[g2]
  condim = _condim(m, g1, g2, ipair)
  s1, s2 = m.geom_solmix[g1], m.geom_solmix[g2]
  mix = jnp.where(
    (s1 >= MINVAL) & (s2 >= MINVAL),
    s1 / jnp.where((s1 + s2) > 0, s1 + s2, 1.0),
    jnp.where((s1 < MINVAL) & (s2 < MINVAL), 0.5, jnp.where(s1 < MINVAL, 0.0, 1.0)),
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
  ad1, ad2 = m.geom_adhesion[g1], m.geom_adhesion[g2]
  adhesion = jnp.where(hi1[:, 0], ad1, jnp.where(hi2[:, 0], ad2, ad1 + ad2))
  friction = jnp.stack([fri[:, 0], fri[:, 0], fri[:, 1], fri[:, 2], fri[:, 2]], axis=-1)
  solreffriction = jnp.zeros_like(solref)
  explicit = ipair >= 0
  if explicit.any():
    ip = np.maximum(ipair, 0)
    e = explicit[:, None]
    friction = jnp.where(e, m.pair_friction[ip], friction)
    solref = jnp.where(e, m.pair_solref[ip], solref)
    solimp = jnp.where(e, m.pair_solimp[ip], solimp)
    prf = m.pair_solreffriction[ip]
    has_prf = e & jnp.any(prf != 0, axis=-1, keepdims=True)
    solreffriction = jnp.where(has_prf, prf, solreffriction)
    adhesion = jnp.where(explicit, m.pair_adhesion[ip], adhesion)
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
    'adhesion': adhesion,
  }


# ------------------------------------------------------------------------------ collision

_PAIR_FIELDS = ('includemargin', 'friction', 'solref', 'solreffriction', 'solimp', 'adhesion')


def _compact(
  b: Budget, slot: dict[str, jax.Array], slot_pair: np.ndarray, pair: dict[str, Any]
) -> tuple[dict[str, jax.Array], jax.Array]:
  """Active contacts of each condim class into its budget slots; (fields, overflowed)."""
  parts: dict[str, list] = {k: [] for k in ('dist', 'pos', 'frame', 'active', 'pair')}
  overflow = jnp.array(False)
  for _, ids, k in b.classes:
    active = slot['active'][ids]
    dist = jnp.where(active, slot['dist'][ids], jnp.inf)
    n = len(ids)
    keep = active
    if k < n:
      # more active contacts than slots: keep the k deepest (ties: the first in slot order)
      kth = -jax.lax.top_k(-dist, k)[0][k - 1]
      keep = active & (dist <= kth)
      overflow |= jnp.sum(active) > k
    rank = jnp.cumsum(keep).astype(jnp.int32) - 1
    tgt = jnp.where(keep & (rank < k), rank, k)
    src = jnp.zeros(k, jnp.int32).at[tgt].set(jnp.arange(n, dtype=jnp.int32), mode='drop')
    used = jnp.arange(k) < jnp.sum(keep)
    full = jnp.asarray(ids, dtype=jnp.int32)[src]
    parts['dist'].append(jnp.where(used, slot['dist'][full], NO_CONTACT))
    parts['pos'].append(slot['pos'][full])
    parts['frame'].append(slot['frame'][full])
    parts['active'].append(used)
    parts['pair'].append(jnp.asarray(slot_pair, dtype=jnp.int32)[full])
  out = {k: jnp.concatenate(v) for k, v in parts.items()}
  p = out.pop('pair')
  for k in _PAIR_FIELDS:
    out[k] = pair[k][p]
  out['geom1'] = jnp.asarray(pair['geom1'], dtype=jnp.int32)[p]
  out['geom2'] = jnp.asarray(pair['geom2'], dtype=jnp.int32)[p]
  out['dim'] = jnp.asarray(b.dim, dtype=jnp.int32)
  return out, overflow


def _own(x: jax.Array, shape: tuple[int, ...], keep: np.ndarray | None) -> jax.Array:
  """A group's collider slots, flattened to `shape`, restricted to its pairs' own (keep)."""
  x = x.reshape(shape)
  return x if keep is None else x[keep]


def collision(m: Model, d: Data) -> Data:
  """Contacts of all candidate pairs in Data.contact's slots; `ncon` counts the active ones."""
  flags = m.opt.disableflags
  b = budget(m)
  if not b.ncon:
    return d
  if flags & DisableBit.CONSTRAINT or flags & DisableBit.CONTACT:
    return d.replace(contact=d.contact.replace(active=jnp.zeros(b.ncon, bool)), ncon=jnp.int32(0))
  slot: dict[str, list] = {k: [] for k in ('dist', 'pos', 'frame', 'active')}
  slot_pair = []
  overflow = jnp.array(False)
  requested = m.collision_pairs.get('max_geom_pairs')
  grps = groups(m)
  # per-pair quantities of all groups at once (groups' pairs in order): one program, not one per
  # group
  cat = lambda k: np.concatenate([g[k] for g in grps])  # noqa: E731
  pairs_ = {'geom1': cat('geom1'), 'geom2': cat('geom2')}
  ipairs = cat('ipair')
  margins, gaps = _margin_gap(m, pairs_['geom1'], pairs_['geom2'], ipairs)
  oks, sgaps = broadphase.sphere_test(m, d, pairs_['geom1'], pairs_['geom2'], margins + gaps)
  pairs_.update(_contact_params(m, pairs_['geom1'], pairs_['geom2'], ipairs), includemargin=margins)
  start = np.cumsum([0] + [len(g['geom1']) for g in grps])
  for gi, grp in enumerate(grps):
    g1, g2, n = grp['geom1'], grp['geom2'], grp['ncon']
    lo, hi = int(start[gi]), int(start[gi + 1])
    margin, gap, ok, sgap = margins[lo:hi], gaps[lo:hi], oks[lo:hi], sgaps[lo:hi]
    hid = grp['hfield']
    npg = len(g1)
    k = broadphase.limit(g1, g2, grp['convex'], requested)
    idx = None
    if k < npg:
      idx, over = broadphase.select(ok, sgap, k)
      overflow |= over

    def pick(x, idx=idx):
      """The collided pairs' entries of a per-pair array (all pairs without a limit)."""
      return x if idx is None else jnp.asarray(x)[idx]

    c1, c2, cm = pick(g1), pick(g2), pick(margin + gap)
    tables = (None, None)
    if grp['mesh'] == (-2, -2):
      tables = (mesh_table(m, grp['mesh1']), mesh_table(m, grp['mesh2']))
      info1 = _geom_info(m, d, c1, -1)._replace(mesh=_row(tables[0], pick))
      info2 = _geom_info(m, d, c2, -1)._replace(mesh=_row(tables[1], pick))
      if not grp['convex']:
        info2 = info2._replace(rbound=m.geom_rbound[c2])
      # height field-mesh: each pair's mesh gathered from the table (plane-mesh: inside the
      # vmap, _plane_mesh_row)
      if hid >= 0:
        info2 = _table_rows(tables[1], _row(tables[1], pick), info2)
    else:
      info1 = _geom_info(m, d, c1, grp['mesh'][0])
      info2 = _geom_info(m, d, c2, grp['mesh'][1], rbound=hid >= 0)
    if hid >= 0:
      hf, t2 = _hfield(m, hid), grp['types'][1]
      if t2 < 0:
        t2 = jnp.asarray(pick(grp['type2']))
      win = grp['win']
      nitems = broadphase.hfield_limit(k, 2 * win[0] * win[1], requested)
      c, over = hfield.collide_hfield_group(
        info1, info2, cm, hf, t2, win=win, nitems=nitems, **_ccd_options(m)
      )
      overflow |= over
    else:
      if grp['convex']:
        from jaxsim._src.collision import convex

        opts = _ccd_options(m)
        opts['multiccd'] = not m.opt.disableflags & DisableBit.MULTICCD
        # pairs with a mesh gather their polygons from the mesh tables; the other GJK/EPA group
        # holds primitives only
        poly1 = poly2 = None
        if grp['mesh'] == (-2, -2):
          opts['verts1'], opts['verts2'] = tables
          poly1, poly2 = (None if t is None else t.poly for t in tables)
        t1, t2 = grp['types']
        if t1 < 0:
          t1, t2 = jnp.asarray(pick(grp['type1'])), jnp.asarray(pick(grp['type2']))
        c, over = convex.collide_convex_group(
          info1,
          info2,
          cm,
          type1=t1,
          type2=t2,
          ncon=n,
          poly1=poly1,
          poly2=poly2,
          nepa=broadphase.epa_limit(g1, g2, k, requested),
          live=pick(ok),
          **opts,
        )
        overflow |= over
      elif grp['mesh'] == (-2, -2):
        c = jax.vmap(functools.partial(_plane_mesh_row, grp['fn'], tables[1]))(info1, info2, cm)
      else:
        c = jax.vmap(grp['fn'])(info1, info2, cm)
    if idx is not None:
      c = Contacts(
        broadphase.scatter(c.dist, idx, npg, NO_CONTACT),
        broadphase.scatter(c.pos, idx, npg, 0.0),
        broadphase.scatter(c.frame, idx, npg, jnp.eye(3)),
      )
    active = (c.dist < NO_CONTACT * 0.5) & ok[:, None]
    # colliders complete their frames (mju_makeFrame of normal and tangent, in mj_setContact)
    frame = jnp.broadcast_to(c.frame, c.pos.shape + (3,))
    # each pair's own slots (fewer than the group's where it mixes types)
    keep = (np.arange(n)[None, :] < grp['nslot'][:, None]).reshape(-1)
    keep = None if keep.all() else np.flatnonzero(keep)
    slot['dist'].append(_own(jnp.where(active, c.dist, NO_CONTACT), (-1,), keep))
    slot['pos'].append(_own(c.pos, (-1, 3), keep))
    slot['frame'].append(_own(frame, (-1, 3, 3), keep))
    slot['active'].append(_own(active, (-1,), keep))
    slot_pair.append(np.repeat(np.arange(lo, hi), grp['nslot']))
  # Data.contact in mj_collision's order (a static gather)
  order = slot_order(m, grps)
  slots = {k: jnp.concatenate(v)[order] for k, v in slot.items()}
  for k in ('geom1', 'geom2', 'dim'):
    pairs_[k] = np.asarray(pairs_[k]).astype(np.int32)
  slot_pair = np.concatenate(slot_pair)[order]
  warning = d.warning
  if b.capped:
    fields, full = _compact(b, slots, slot_pair, pairs_)
    overflow |= full
  else:
    fields = dict(slots)
    for k in _PAIR_FIELDS:
      fields[k] = pairs_[k][slot_pair]
    for k in ('geom1', 'geom2', 'dim'):
      fields[k] = jnp.asarray(pairs_[k][slot_pair], dtype=jnp.int32)
  if warning.shape[0] > WarningType.CONTACTFULL:
    warning = warning.at[WarningType.CONTACTFULL].add(overflow.astype(warning.dtype))
  if m.flg_adhesion:
    # adhesive contacts stay in the constraint in their gap band, without friction (mj_setContact)
    tether = fields['active'] & (fields['adhesion'] != 0)
    tether &= fields['dist'] >= fields['includemargin']
    fields['dim'] = jnp.where(tether, 1, fields['dim']).astype(jnp.int32)
  contact = d.contact.replace(
    geom=jnp.stack([fields['geom1'], fields['geom2']], axis=-1),
    efc_address=jnp.full(b.ncon, -1, jnp.int32),
    **fields,
  )
  return d.replace(contact=contact, ncon=jnp.sum(contact.active).astype(jnp.int32), warning=warning)

"""Runs every candidate geom pair through its collider into fixed contact slots (mj_collision).

Candidate pairs (pairs.py) are grouped by collider, and for meshes by mesh, for height fields by
height field, once per Model (the static layout, layout.py); each group is one vmapped collider
call that fills its pairs' slots. A slot holds a contact when its collider emitted one and the
pair passed the bounding-sphere and oriented-box tests. Groups of many GJK/EPA pairs collide only
the pairs nearest by their bounding volumes (broadphase.py). Contact parameters are mixed from
the geoms (or taken from the <pair>) as mj_contactParam.

The contact budget (layout.py) compacts the collider slots of all pairs into Data.contact's
slots, per condim class: the active contacts of a class keep their slot order, and when there are
more than the class has slots the deepest are kept and Data.warning[mjWARN_CONTACTFULL] counts the
overflow.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.collision import broadphase, convex, hfield
from jaxsim._src.collision import support as sp
from jaxsim._src.collision.geom import NO_CONTACT, Contacts, GeomInfo, mesh_graph_arrays
from jaxsim._src.enums import MINMU, MINVAL, DisableBit, EnableBit, GeomType, WarningType
from jaxsim._src.layout import Budget, layout_of, pair_condim, supported
from jaxsim._src.math import ranked, smallest
from jaxsim._src.types import Data, Model


def ccd_options(m: Model | None) -> dict[str, Any]:
  """opt.ccd_iterations, opt.ccd_tolerance and multiccd for the GJK/EPA colliders."""
  if m is None:
    return {}
  return {'ccd_iterations': int(m.opt.ccd_iterations), 'ccd_tolerance': m.opt.ccd_tolerance}


def unsupported_pairs(m: Model) -> list[tuple[str, str]]:
  """Geom type pairs among the candidates that no collider handles yet."""
  cand = m.collision_pairs
  gtype = np.asarray(m.geom_type)
  missing = set()
  g1, g2 = np.asarray(cand['geom1'], dtype=int), np.asarray(cand['geom2'], dtype=int)
  for t1, t2 in np.unique(np.stack([gtype[g1], gtype[g2]], axis=1).reshape(-1, 2), axis=0):
    t1, t2 = int(t1), int(t2)
    if not supported(t1, t2):
      missing.add((GeomType(t1).name.lower(), GeomType(t2).name.lower()))
  return sorted(missing)


# ------------------------------------------------------------------------------ parameters


def _mesh_vert(m: Model, mesh: int) -> jax.Array | None:
  """Vertices (nvert, 3) of a mesh in the geom frame (MuJoCo re-centres meshes at compile)."""
  if mesh < 0:
    return None
  adr, num = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
  return m.mesh_vert[adr : adr + num]


def geom_info(m: Model, d: Data, geoms: np.ndarray, mesh: int, rbound: bool = False) -> GeomInfo:
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
  poly = mesh_poly(m, mesh)
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
  polys = [mesh_poly(m, int(i)) for i in used]
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


def mesh_poly(m: Model, mesh: int) -> sp.MeshPoly | None:
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


def contact_params(m: Model, g1: np.ndarray, g2: np.ndarray, ipair: np.ndarray) -> dict:
  """condim (static), friction (n, 5), solref, solreffriction (n, 2), solimp (n, 5), adhesion (n,).

  adhesion (MuJoCo 4): the sum of the geoms', the higher-priority geom's where priorities differ;
  an explicit pair's own (which does not default to the geoms').
  """
  pr1, pr2 = np.asarray(m.geom_priority)[g1], np.asarray(m.geom_priority)[g2]
  condim = pair_condim(m, g1, g2, ipair)
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
    n = len(ids)
    if k == n:
      # a class that keeps every slot: its slots as they are (a static gather)
      parts['dist'].append(slot['dist'][ids])
      parts['pos'].append(slot['pos'][ids])
      parts['frame'].append(slot['frame'][ids])
      parts['active'].append(active)
      parts['pair'].append(jnp.asarray(slot_pair[ids], dtype=jnp.int32))
      continue
    dist = jnp.where(active, slot['dist'][ids], jnp.inf)
    keep = active
    if k < n:
      # more active contacts than slots: keep the k deepest (ties: the first in slot order)
      keep = active & smallest(dist, k)
      overflow |= jnp.sum(active) > k
    # the kept slots in slot order (n past the last); an empty slot reads the class's first
    src = ranked(jnp.cumsum(keep, dtype=jnp.int32), 0, k)
    used = src < n
    full = jnp.asarray(ids, dtype=jnp.int32)[jnp.where(used, src, 0)]
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


@functools.cache
def _unpacked(fn: Callable) -> Callable:
  """fn(*item): a pair collider over map_live's one-tuple items, one function per collider (so
  that map_live's traces of it are shared: broadphase._chunk_program)."""
  return lambda x: fn(*x)


def collision(m: Model, d: Data) -> Data:
  """Contacts of all candidate pairs in Data.contact's slots; `ncon` counts the active ones."""
  flags = m.opt.disableflags
  lay = layout_of(m)
  b = lay.budget
  if not b.ncon:
    return d
  if flags & DisableBit.CONSTRAINT or flags & DisableBit.CONTACT:
    return d.replace(contact=d.contact.replace(active=jnp.zeros(b.ncon, bool)), ncon=jnp.int32(0))
  slot: dict[str, list] = {k: [] for k in ('dist', 'pos', 'frame', 'active')}
  slot_pair = []
  overflow = jnp.array(False)
  requested = m.collision_pairs.get('max_geom_pairs')
  grps = lay.groups
  # per-pair quantities of all groups at once (groups' pairs in order): one program, not one per
  # group
  cat = lambda k: np.concatenate([g[k] for g in grps])  # noqa: E731
  pairs_ = {'geom1': cat('geom1'), 'geom2': cat('geom2')}
  ipairs = cat('ipair')
  margins, gaps = _margin_gap(m, pairs_['geom1'], pairs_['geom2'], ipairs)
  # the oriented-box test where it narrows what a costly collider runs on: GJK/EPA and height
  # field groups, and groups with a static limit (broadphase.limit) that it selects from
  limits = [broadphase.limit(g['geom1'], g['geom2'], g['convex'], requested) for g in grps]
  obb = np.concatenate(
    [
      np.full(len(g['geom1']), g['convex'] or g['hfield'] >= 0 or k < len(g['geom1']))
      for g, k in zip(grps, limits, strict=True)
    ]
  )
  oks, sgaps = broadphase.sphere_test(m, d, pairs_['geom1'], pairs_['geom2'], margins + gaps, obb)
  pairs_.update(contact_params(m, pairs_['geom1'], pairs_['geom2'], ipairs), includemargin=margins)
  start = np.cumsum([0] + [len(g['geom1']) for g in grps])
  for gi, grp in enumerate(grps):
    g1, g2, n = grp['geom1'], grp['geom2'], grp['ncon']
    lo, hi = int(start[gi]), int(start[gi + 1])
    margin, gap, ok, sgap = margins[lo:hi], gaps[lo:hi], oks[lo:hi], sgaps[lo:hi]
    hid = grp['hfield']
    npg = len(g1)
    k = limits[gi]
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
      info1 = geom_info(m, d, c1, -1)._replace(mesh=_row(tables[0], pick))
      info2 = geom_info(m, d, c2, -1)._replace(mesh=_row(tables[1], pick))
      if not grp['convex']:
        info2 = info2._replace(rbound=m.geom_rbound[c2])
      # height field-mesh: each pair's mesh gathered from the table (plane-mesh: inside the
      # vmap, _plane_mesh_row)
      if hid >= 0:
        info2 = _table_rows(tables[1], _row(tables[1], pick), info2)
    else:
      info1 = geom_info(m, d, c1, grp['mesh'][0])
      info2 = geom_info(m, d, c2, grp['mesh'][1], rbound=hid >= 0)
    if hid >= 0:
      hf, t2 = _hfield(m, hid), grp['types'][1]
      among = None
      if t2 < 0:
        t2, among = jnp.asarray(pick(grp['type2'])), tuple(np.unique(grp['type2']))
      win = grp['win']
      nitems = broadphase.hfield_limit(k, 2 * win[0] * win[1], requested)
      c, over = hfield.collide_hfield_group(
        info1, info2, cm, hf, t2, win=win, nitems=nitems, among=among, **ccd_options(m)
      )
      overflow |= over
    else:
      if grp['convex']:
        opts = ccd_options(m)
        opts['multiccd'] = not m.opt.disableflags & DisableBit.MULTICCD
        # pairs with a mesh gather their polygons from the mesh tables; the other GJK/EPA group
        # holds primitives only
        poly1 = poly2 = None
        if grp['mesh'] == (-2, -2):
          opts['verts1'], opts['verts2'] = tables
          poly1, poly2 = (None if t is None else t.poly for t in tables)
        t1, t2 = grp['types']
        among = {}
        if t1 < 0:
          t1, t2 = jnp.asarray(pick(grp['type1'])), jnp.asarray(pick(grp['type2']))
          # the program computes the support functions and features of these types only
          among = {
            'among1': tuple(np.unique(grp['type1'])),
            'among2': tuple(np.unique(grp['type2'])),
          }
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
          **among,
          **opts,
        )
        overflow |= over
      elif grp['mesh'] == (-2, -2):
        c = jax.vmap(functools.partial(_plane_mesh_row, grp['fn'], tables[1]))(info1, info2, cm)
      elif idx is None and npg > broadphase.MIN_PAIRS:
        # a large group of analytic colliders (a self-colliding robot's capsules and boxes:
        # dog 2,600 pairs) runs them on the pairs passing the bounding-volume test only
        fill = Contacts(NO_CONTACT, 0.0, jnp.eye(3))
        c = broadphase.map_live(_unpacked(grp['fn']), ok, (info1, info2, cm), fill)
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
  order = lay.slot_order
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

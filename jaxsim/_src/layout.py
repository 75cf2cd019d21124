"""The static layout of a Model, made once when the Model is built (`make_layout`).

Everything about a model's contacts and constraint rows that decides array shapes, all NumPy:

- collider groups: the candidate geom pairs (pairs.py) grouped by collider, and for meshes by
  mesh, for height fields by height field; each group is one vmapped collider call in the
  collision driver;
- the contact budget and slots: Data.contact's slots, the geoms (geom1, geom2) and condim of each;
- the constraint rows in MuJoCo's order (mj_makeConstraint, maximal): equality, friction loss,
  limits, contacts; type and id of each row, the first row and row count of each contact slot;
- the solver's row classes (equality, friction loss, one-sided, elliptic cones).

The Model holds its layout as the static field `layout` (with `nconmax` and `nefcmax`, its sizes);
the engine reads it through `layout_of`, never recomputes it. It depends on options (disable
flags, cone, the contact budget asked for): `jaxsim.with_options` and `jaxsim.with_ncon_max`
remake it; a Model whose options were replaced by hand is refused with a pointer to them.

Contact budget: most candidate pairs never touch at the same time, so the slots of all pairs are
compacted into `Layout.ncon` slots (like MJX's and MuJoCo Warp's nconmax), per condim so that
each slot keeps a static number of constraint rows: the active contacts of a condim class keep
their slot order, and when there are more than the class has slots the deepest are kept and
Data.warning[mjWARN_CONTACTFULL] counts the overflow. The default budget is sized from what the
model can touch (`default_budget`: each geom touching PARTNERS others at once, contacts with the
world counted from the moving geom); a class keeps every slot where that saves less than
CAP_SAVING. `with_ncon_max` asks for a number per class (-1: every slot); MJCF <size nconmax>
and <size njmax> lower the default where they are LEGACY_FACTOR times smaller (MuJoCo 4 reads
them but keeps every contact). A capped Data.contact holds the classes one after the other, in
the order of their first slot (contacts with the world first): MuJoCo's order within a class,
and overall wherever the active contacts of different classes do not interleave.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxsim._src.collision import convex, hfield, pairs, primitive
from jaxsim._src.collision.geom import Contacts
from jaxsim._src.enums import (
  ConeType,
  ConstraintType,
  DisableBit,
  EqType,
  GeomType,
  JacobianType,
  JointType,
  ObjType,
)
from jaxsim._src.types import Model, joint_dofs, m_sparsity, tendon_reach

MIN_BUDGET = 8  # slots of a capped condim class the default budget never goes below
# the default budget: each geom touches at most this many others at once, each with the largest
# contact count of its pairs (every dm_control suite model and MuJoCo's 4 and 22 humanoids keep
# MuJoCo's contacts over 300-step random-control rollouts: benchmarks/budget.py --sweep; the
# 22 humanoids' most is 75 contacts for 1,925 slots)
PARTNERS = 3
# a condim class keeps every slot unless that costs at least this many times its default budget
# (a cap saves little there, and every slot is MuJoCo's order and the cheapest compaction)
CAP_SAVING = 2
# MJCF <size nconmax> and <size njmax> (legacy; MuJoCo 4 keeps every contact) lower the default
# budget only where it would have more than this many times their contacts or rows: Gymnasium's
# Shadow-hand and Adroit scenes (nconmax 100: 1.2x and 2.7x of every slot) keep MuJoCo's
# contacts, dm_control's dog (nconmax 300, njmax 900) keeps its own sizes
LEGACY_FACTOR = 4

# The Newton Hessian H = M + J' D J sums only the rows in the quadratic zone, a few of the rows
# allocated (the dm_control humanoid on the floor: at most ~35 of 235). Newton gathers them into
# a compact buffer of `hessian_rows` rows (a default rule, or jaxsim.with_hessian_rows) and sums
# the buffer, so that H costs what is quadratic, not what is allocated (J'DJ over every
# allocated row was a third of a humanoid's batched step). Where more rows are quadratic than
# the buffer holds, the buffer is filled and summed again until every row is in: H is always
# exact; such a step costs one more pass per buffer of rows (under vmap, for the world with
# the most).
HESSIAN_ALL_ROWS = 64  # layouts of at most this many rows sum every row (no gather)
# else the buffer holds max(HESSIAN_MIN_ROWS, nv) rows: the size scales with the model (a robot
# per nv's worth of dofs), and smaller buffers cost less per pass until passes repeat (humanoid,
# batch 1024, float32, Newton solve per world: every row 279 us, 64 rows 202, 32 rows 165, 16
# rows 197; timed alternately in one process, 2-core CPU)
HESSIAN_MIN_ROWS = 32


def hessian_rows(m: Model, nefc: int | None = None) -> int:
  """Rows of the Newton Hessian's compact buffer (static): the model's setting
  (`jaxsim.with_hessian_rows`, kept in collision_pairs['hessian_rows']: -1 every row) or the
  default rule, every row up to HESSIAN_ALL_ROWS rows, else max(HESSIAN_MIN_ROWS, nv)
  (HESSIAN_MIN_ROWS with a compact constraint Jacobian).

  Arguments:
    m: the model (nv and its setting are read).
    nefc: allocated constraint rows (None: the model's own layout's).
  Returns:
    the buffer size, 1 to nefc (nefc: every row is summed at once, without a gather).
  """
  if nefc is None:
    nefc = layout_of(m).nefc
  asked = m.collision_pairs.get('hessian_rows')
  if asked is not None and asked >= 0:
    return max(1, min(int(asked), nefc))
  if asked is not None or nefc <= HESSIAN_ALL_ROWS:
    return nefc
  lay = m.layout
  if lay is not None and lay.efc_width and nefc == lay.nefc:
    # a compact Jacobian's buffer rows are made dense (k, nv): a fixed k keeps them linear in
    # the model's size (the passes repeat where more rows are quadratic)
    return min(nefc, HESSIAN_MIN_ROWS)
  return min(nefc, max(HESSIAN_MIN_ROWS, m.nv))


_EQ_ROWS = {EqType.CONNECT: 3, EqType.WELD: 6, EqType.JOINT: 1, EqType.TENDON: 1}

# the disable flags the layout depends on (collider slots: multiccd; rows: the rest)
LAYOUT_FLAGS = (
  DisableBit.CONSTRAINT
  | DisableBit.EQUALITY
  | DisableBit.FRICTIONLOSS
  | DisableBit.LIMIT
  | DisableBit.CONTACT
  | DisableBit.MULTICCD
)


# ------------------------------------------------------------------------------ colliders


def collider(t1: int, t2: int) -> tuple[Callable[..., Contacts], int] | None:
  """(analytic collider(g1, g2, margin) -> Contacts, number of slots) for geom types t1 <= t2.

  GJK/EPA pairs (`is_convex`) are collided by convex.collide_convex_group and height fields by
  hfield.collide_hfield_group: neither has a per-pair function here.
  """
  key = (GeomType(t1), GeomType(t2))
  if key in primitive.COLLIDERS:
    return primitive.COLLIDERS[key], primitive.MAX_CONTACTS[key]
  return None


def is_convex(t1: int, t2: int) -> bool:
  """Whether mjc_Convex (GJK/EPA, with mesh polygons for multi-contact) collides t1, t2."""
  return (GeomType(t1), GeomType(t2)) in convex.CONVEX_PAIRS


def supported(t1: int, t2: int) -> bool:
  """Whether some collider handles geom types t1 <= t2."""
  if t1 == GeomType.HFIELD:
    return t2 in hfield.HFIELD_TYPES
  return collider(t1, t2) is not None or is_convex(t1, t2)


def pair_condim(m: Model, g1: np.ndarray, g2: np.ndarray, ipair: np.ndarray) -> np.ndarray:
  """condim of pairs (static): the higher-priority geom's, else the larger; <pair> dim wins."""
  pr1, pr2 = np.asarray(m.geom_priority)[g1], np.asarray(m.geom_priority)[g2]
  cd1, cd2 = np.asarray(m.geom_condim)[g1], np.asarray(m.geom_condim)[g2]
  condim = np.where(pr1 > pr2, cd1, np.where(pr1 < pr2, cd2, np.maximum(cd1, cd2)))
  explicit = ipair >= 0
  if explicit.any():
    condim = np.where(explicit, np.asarray(m.pair_dim)[np.maximum(ipair, 0)], condim)
  return condim


def _windows(m: Model) -> np.ndarray:
  """(n, 2) height-field windows of the candidate pairs (static, from pairs.candidate_pairs)."""
  cand = m.collision_pairs
  if 'window' in cand:
    return np.asarray(cand['window'])
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
    grp['convex'] = grp['hfield'] < 0 and is_convex(*grp['types'])
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
      col = collider(t1, t2)
      if col is None:
        continue
    grp.update(fn=col[0], ncon=col[1], nslot=np.full(len(idx), col[1]))
    result.append(grp)
  return result


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


def _requested(m: Model) -> int | None:
  """The budget asked for by with_ncon_max: slots per condim class (-1: every slot), or None
  (the default rule)."""
  n = m.collision_pairs.get('nconmax')
  return None if n is None else int(n)


def _legacy(m: Model, key: str) -> int | None:
  """MJCF <size nconmax> or <size njmax> where given and positive (else None)."""
  n = m.size.get(key)
  return None if n is None or int(n) <= 0 else int(n)


def contact_rows(m: Model, dim: np.ndarray) -> int:
  """Constraint rows of contact slots of these condims (as the efc rows count them)."""
  if m.opt.cone == ConeType.PYRAMIDAL:
    return int(np.where(dim == 1, 1, 2 * (dim - 1)).sum())
  return int(dim.sum())


def default_budget(m: Model, g1: np.ndarray, g2: np.ndarray, nslot: np.ndarray) -> int:
  """Contacts a set of pairs (g1, g2, their collider slots nslot) can have at once: each geom
  touching at most PARTNERS others, each with the geom's largest slot count (fewer where the
  geom has fewer pairs).

  A geom welded to the world (a floor, a wall, a terrain) can touch every moving geom at once
  (a humanoid lying flat): a pair with one such geom is counted from its moving geom only, every
  slot of it where the moving geom has at most PARTNERS of them. A pair of moving geoms is
  counted half from each side.
  """
  if not len(g1):
    return 0
  g1, g2, nslot = (np.asarray(x, np.int64) for x in (g1, g2, nslot))
  weld = np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)]
  fixed1, fixed2 = weld[g1] == 0, weld[g2] == 0
  total = 0.0
  # pairs with one fixed geom (weight 1), then pairs of moving geoms (weight 1/2 per side)
  for weight, sel in ((1.0, fixed1 ^ fixed2), (0.5, ~fixed1 & ~fixed2)):
    slots = np.zeros(m.ngeom, np.int64)
    most = np.zeros(m.ngeom, np.int64)
    for g, fixed in ((g1, fixed1), (g2, fixed2)):
      own = sel & ~fixed
      np.add.at(slots, g[own], nslot[own])
      np.maximum.at(most, g[own], nslot[own])
    total += weight * np.minimum(slots, PARTNERS * most).sum()
  # pairs of two fixed geoms (colliding only by an explicit <pair>): every slot
  total += nslot[fixed1 & fixed2].sum()
  return int(np.ceil(total))


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


def _fixed_rows(m: Model) -> int:
  """Constraint rows other than contacts (equality, friction loss, limits)."""
  return efc_rows(m, np.zeros(0, np.int32)).nefc


def budget(m: Model, grps: list[dict[str, Any]], order: np.ndarray) -> Budget:
  """The static slot layout of a model's contacts (see Budget), from its collider groups and
  their slot order.

  Slots per condim class: with_ncon_max's number (-1: every slot); else the default rule,
  `default_budget` of the class's pairs (at least MIN_BUDGET), every slot where that saves less
  than CAP_SAVING, lowered to MJCF <size nconmax> (per class) and then to the share of
  <size njmax> rows left after the other rows, each only where it is LEGACY_FACTOR times smaller.
  The classes are laid out in the order of their first slot in mj_collision's order (contacts
  with the world first).
  """
  if not grps:
    z = np.zeros(0, np.int32)
    return Budget(0, 0, False, z, ())
  pdim = np.concatenate([pair_condim(m, g['geom1'], g['geom2'], g['ipair']) for g in grps])
  nslot = np.concatenate([g['nslot'] for g in grps])
  g1 = np.concatenate([g['geom1'] for g in grps])
  g2 = np.concatenate([g['geom2'] for g in grps])
  dim_full = np.repeat(pdim, nslot).astype(np.int32)[order]
  nfull = len(dim_full)
  req = _requested(m)
  dims = np.unique(dim_full)
  ids = [np.flatnonzero(dim_full == c) for c in dims]
  if req is not None:
    ks = [len(i) if req < 0 else min(len(i), max(req, 0)) for i in ids]
  else:
    ks = []
    for c, i in zip(dims, ids, strict=True):
      sel = pdim == c
      k = max(default_budget(m, g1[sel], g2[sel], nslot[sel]), MIN_BUDGET)
      ks.append(len(i) if CAP_SAVING * k > len(i) else k)
    nconmax = _legacy(m, 'nconmax')
    if nconmax is not None:
      rows = contact_rows(m, np.repeat(dims, ks))
      low = [min(k, nconmax) for k in ks]
      if rows > LEGACY_FACTOR * contact_rows(m, np.repeat(dims, low)):
        ks = low
    njmax = _legacy(m, 'njmax')
    if njmax is not None:
      rows = contact_rows(m, np.repeat(dims, ks))
      room = max(njmax - _fixed_rows(m), 0)
      if _fixed_rows(m) + rows > LEGACY_FACTOR * njmax and rows:
        ks = [max(1, min(k, int(k * room / rows))) for k in ks]
  classes = [(int(c), i, int(k)) for c, i, k in zip(dims, ids, ks, strict=True)]
  if not any(k < len(i) for _, i, k in classes):
    return Budget(nfull, nfull, False, dim_full, ())
  classes.sort(key=lambda cl: cl[1][0] if len(cl[1]) else nfull)
  dim = np.concatenate([np.full(k, c, np.int32) for c, _, k in classes])
  return Budget(nfull, len(dim), True, dim, tuple(classes))


# ------------------------------------------------------------------------------ constraint rows


class EfcRows(NamedTuple):
  """Static row layout in MuJoCo's order: equality, friction loss, limits, contacts.

  Slide/hinge joint and tendon limits have two rows each (lower side, then upper side, as
  mj_instantiateLimit visits them); ball joint limits one. Per contact slot: condim 1: 1 row,
  pyramidal: 2*(condim-1) rows, elliptic: condim rows. The solver and inverse dynamics take any
  object with these fields (a Layout has them all).
  """

  nefc: int
  type: np.ndarray  # (nefc,) mjtConstraint
  id: np.ndarray  # (nefc,) eq, dof, tendon, joint id or contact slot
  ne: int
  nf: int
  contact_efcadr: np.ndarray  # (ncon,) first row of each contact slot
  contact_nrow: np.ndarray  # (ncon,) rows of each contact slot
  contact_dim: np.ndarray  # (ncon,) condim of each contact slot


def _has_frictionloss(m: Model, kind: str) -> np.ndarray:
  """Static mask of the dofs or tendons with friction loss rows (mj_instantiateFriction), from
  the static Model field `<kind>_hasfrictionloss` (MuJoCo skips a dof with zero friction loss, a
  tendon without positive friction loss)."""
  return np.asarray(getattr(m, f'{kind}_hasfrictionloss')) != 0


def efc_rows(m: Model, cdim: np.ndarray) -> EfcRows:
  """The constraint rows of a model whose contact slots have condims cdim (ncon,) (the row
  counts of mj_makeConstraint, maximal)."""
  flags = m.opt.disableflags
  types, ids = [], []

  def add(t: int, i, n=1):
    types.extend([t] * n)
    ids.extend([int(i)] * n)

  ncon = len(cdim)
  efcadr = np.full(ncon, -1, np.int32)
  nrow = np.zeros(ncon, np.int32)
  if flags & DisableBit.CONSTRAINT or not m.nv:
    z = np.zeros(0, np.int32)
    return EfcRows(0, z, z, 0, 0, efcadr, nrow, cdim)

  if not flags & DisableBit.EQUALITY:
    for i, t in enumerate(np.asarray(m.eq_type)):
      if int(t) not in _EQ_ROWS:
        raise NotImplementedError(
          f'equality constraint {i} of type {int(t)} (flex) is not supported'
        )
      add(ConstraintType.EQUALITY, i, _EQ_ROWS[int(t)])
  ne = len(types)

  if not flags & DisableBit.FRICTIONLOSS:
    for i in np.flatnonzero(_has_frictionloss(m, 'dof')):
      add(ConstraintType.FRICTION_DOF, i)
    if m.ntendon:
      for i in np.flatnonzero(_has_frictionloss(m, 'tendon')):
        add(ConstraintType.FRICTION_TENDON, i)
  nf = len(types) - ne

  if not flags & DisableBit.LIMIT:
    jt = np.asarray(m.jnt_type)
    for i in np.flatnonzero(np.asarray(m.jnt_limited)):
      if jt[i] in (JointType.SLIDE, JointType.HINGE):
        add(ConstraintType.LIMIT_JOINT, i, 2)
      elif jt[i] == JointType.BALL:
        add(ConstraintType.LIMIT_JOINT, i)
    if m.ntendon:
      for i in np.flatnonzero(np.asarray(m.tendon_limited)):
        add(ConstraintType.LIMIT_TENDON, i, 2)

  if not flags & DisableBit.CONTACT:
    # vectorised: a scene of many bodies has millions of contact slots
    dims = np.asarray(cdim, dtype=np.int32)
    pyramidal = m.opt.cone == ConeType.PYRAMIDAL
    nrow[:] = np.where(dims == 1, 1, 2 * (dims - 1) if pyramidal else dims)
    ctype = np.where(
      dims == 1,
      ConstraintType.CONTACT_FRICTIONLESS,
      ConstraintType.CONTACT_PYRAMIDAL if pyramidal else ConstraintType.CONTACT_ELLIPTIC,
    )
    efcadr[:] = len(types) + np.concatenate([[0], np.cumsum(nrow)[:-1]]).astype(np.int32)
    types = np.concatenate([np.asarray(types, np.int32), np.repeat(ctype, nrow)])
    ids = np.concatenate([np.asarray(ids, np.int32), np.repeat(np.arange(ncon), nrow)])

  return EfcRows(
    len(types), np.asarray(types, np.int32), np.asarray(ids, np.int32), ne, nf, efcadr, nrow, cdim
  )


# ------------------------------------------------------------------------------ solver rows


class RowClasses(NamedTuple):
  """Static row classes of a constraint layout, for the solver (NumPy).

  eq, fri, one (nefc,): equality, friction-loss and one-sided (limit, frictionless, pyramidal)
  rows; con (nell,): contact slots with an elliptic cone; rows (nell, 6): their rows, padded with
  nefc; rmask (nell, 6): real rows; tmask (nell, 5): real tangent directions.
  """

  nefc: int
  eq: np.ndarray
  fri: np.ndarray
  one: np.ndarray
  con: np.ndarray
  rows: np.ndarray
  rmask: np.ndarray
  tmask: np.ndarray


def row_classes(efc: Any) -> RowClasses:
  """Static row classes of a row layout (an EfcRows or a Layout: rows in MuJoCo's order, the ne
  and nf prefix)."""
  nefc = int(efc.nefc)
  typ = np.asarray(efc.type).reshape(nefc)
  idx = np.arange(nefc)
  ne, nf = int(efc.ne), int(efc.nf)
  eq = idx < ne
  fri = (idx >= ne) & (idx < ne + nf)
  one = (
    ~eq
    & ~fri
    & np.isin(
      typ,
      (
        ConstraintType.LIMIT_JOINT,
        ConstraintType.LIMIT_TENDON,
        ConstraintType.CONTACT_FRICTIONLESS,
        ConstraintType.CONTACT_PYRAMIDAL,
      ),
    )
  )
  adr = np.asarray(efc.contact_efcadr, dtype=np.int64).reshape(-1)
  dim = np.asarray(efc.contact_dim, dtype=np.int64).reshape(-1)
  inside = (adr >= 0) & (adr < nefc)
  first = typ[np.where(inside, adr, 0)] if nefc else np.zeros(len(adr), np.int32)
  ell = (dim > 1) & inside & (first == ConstraintType.CONTACT_ELLIPTIC)
  con = np.flatnonzero(ell)
  j = np.arange(6)
  rmask = j[None, :] < dim[con][:, None]
  rows = np.where(rmask, adr[con][:, None] + j[None, :], nefc)
  if not np.array_equal(np.sort(rows[rmask]), idx[typ == ConstraintType.CONTACT_ELLIPTIC]):
    raise ValueError('layout: elliptic contact rows do not match the rows of type CONTACT_ELLIPTIC')
  return RowClasses(nefc, eq, fri, one, con, rows, rmask, rmask[:, 1:])


# ------------------------------------------------------------------------------ the layout


def options_key(m: Model) -> tuple:
  """What a layout depends on beyond the model's structure: the disable flags it reads, the
  cone, the Jacobian's storage and the contact budget asked for (with_ncon_max)."""
  cp = m.collision_pairs
  return (
    int(int(m.opt.disableflags) & LAYOUT_FLAGS),
    int(m.opt.cone),
    int(m.opt.jacobian),
    repr(cp.get('nconmax', 'unset')),
  )


def _feed(h: Any, x: Any) -> None:
  """Feeds x's content into the hash h (arrays by bytes, containers item by item)."""
  if isinstance(x, np.ndarray):
    h.update(f'a{x.dtype.str}{x.shape}'.encode())
    h.update(np.ascontiguousarray(x).tobytes())
  elif isinstance(x, Mapping):
    h.update(f'm{len(x)}'.encode())
    for k in sorted(x):
      _feed(h, k)
      _feed(h, x[k])
  elif isinstance(x, (tuple, list)):
    h.update(f't{len(x)}'.encode())
    for v in x:
      _feed(h, v)
  elif callable(x):
    h.update(f'f{getattr(x, "__module__", "")}.{getattr(x, "__qualname__", repr(x))}'.encode())
  else:
    h.update(f'{type(x).__name__}:{x!r}'.encode())


def _freeze(x: Any) -> Any:
  """x with its NumPy arrays read-only (in place; containers walked)."""
  if isinstance(x, np.ndarray):
    x.setflags(write=False)
  elif isinstance(x, Mapping):
    for v in x.values():
      _freeze(v)
  elif isinstance(x, (tuple, list)):
    for v in x:
      _freeze(v)
  return x


# ------------------------------------------------------------------------------ Newton Hessian


def hessian_pattern(m: Model, lay: Layout, limit: int | None = None) -> np.ndarray | None:
  """(nv, nv) bool: the lower triangle that Newton's Hessian M + J' D J and its L'DL factor can
  fill, whatever rows are quadratic: M's sparsity, each constraint row's dofs (every pair of
  the dofs it reaches), then the fill of the elimination from the last row to the first
  (dynamics.factor_sparse's order; a tree's M has none).

  A row reaches: a contact, the dofs moving the bodies of its geoms (every candidate pair of
  every slot, capped slots included); a connect or weld, its two bodies' (or sites' bodies');
  a joint equality, limit or friction loss, its joints' dofs; a tendon row, tendon_reach.
  With `limit`: None as soon as a row holds more entries (the elimination's fill only adds).
  """
  nv = m.nv
  pattern = m_sparsity(m).copy()
  if not nv or not lay.nefc:
    return pattern
  moves = np.asarray(m.tree_body_dof).astype(bool)  # [b, d]: dof d moves body b
  jnt_dofs = joint_dofs(m)
  tendon = tendon_reach(m) if m.ntendon else np.zeros((0, nv), bool)
  reach = set()

  def add(mask):
    reach.add(np.packbits(mask).tobytes())

  geom_body, site_body = np.asarray(m.geom_bodyid), np.asarray(m.site_bodyid)
  eq_type, objtype = np.asarray(m.eq_type), np.asarray(m.eq_objtype)
  obj1, obj2 = np.asarray(m.eq_obj1id), np.asarray(m.eq_obj2id)
  for t, i in zip(lay.type, lay.id, strict=True):
    if t == ConstraintType.EQUALITY:
      a, b = obj1[i], obj2[i]
      if eq_type[i] in (EqType.CONNECT, EqType.WELD):
        body = site_body if objtype[i] == ObjType.SITE else np.arange(m.nbody)
        add(moves[body[a]] | moves[body[b]])
      elif eq_type[i] == EqType.JOINT:
        add(jnt_dofs[a] | (jnt_dofs[b] if b >= 0 else False))
      else:
        add(tendon[a] | (tendon[b] if b >= 0 else False))
    elif t in (ConstraintType.FRICTION_TENDON, ConstraintType.LIMIT_TENDON):
      add(tendon[i])
    elif t == ConstraintType.LIMIT_JOINT:
      add(jnt_dofs[i])
  pairs = np.unique(np.stack([geom_body[lay.slot_geom1], geom_body[lay.slot_geom2]], 1), axis=0)
  for b1, b2 in pairs:
    add(moves[b1] | moves[b2])
  for key in reach:
    dofs = np.flatnonzero(np.unpackbits(np.frombuffer(key, np.uint8))[:nv])
    pattern[np.ix_(dofs, dofs)] = True
  pattern &= np.tri(nv, dtype=bool)
  for k in range(nv - 1, -1, -1):  # the elimination's fill: row k updates the rows it reaches
    if limit is not None and pattern[k].sum() > limit:
      return None
    for i in np.flatnonzero(pattern[k, :k]):
      pattern[i, : i + 1] |= pattern[k, : i + 1]
  return pattern


def hessian_sparsity(m: Model, lay: Any) -> np.ndarray | None:
  """hessian_pattern where its rows are at most half as long as dense ones (several robots in
  one scene: eight humanoids fill 13% of the lower triangle, one robot's self-collisions fill
  all of it), for a model's full Layout; None: Newton keeps the dense Hessian (also for a
  solver-only row layout, whose collider slots are not known)."""
  if not isinstance(lay, Layout) or not m.nv:
    return None
  return hessian_pattern(m, lay, limit=m.nv // 2)


# ------------------------------------------------------------------------------ compact Jacobian


def body_dofs(m: Model) -> np.ndarray:
  """The dofs that move each body (its own and its ancestors'), ascending, padded with -1:
  (nbody, C), C the most any body has (a contact row's nonzero columns are among its two
  bodies' dofs: mj_jacDifPair's chains). Read off the static Model.tree_body_dof."""
  moves = np.asarray(m.tree_body_dof).astype(bool)  # [b, d]: dof d moves body b
  width = int(moves.sum(axis=1).max(initial=0))
  order = np.argsort(~moves, axis=1, kind='stable')[:, :width]  # its dofs first, ascending
  return np.where(np.take_along_axis(moves, order, axis=1), order, -1).astype(np.int32)


def efc_width(m: Model, efc: EfcRows, chain: int) -> int:
  """Entries per row of the compact constraint Jacobian (2 x `chain`: the dofs of two bodies'
  chains, sparse.py), 0 for the dense (nefc, nv) one.

  opt.jacobian (mjtJacobian): dense keeps it dense; sparse makes it compact wherever every
  row kind has a compact form; auto (MuJoCo's default) where, besides, a compact row (2 x chain
  values and 2 body ids) is at most half a dense one (nv values): the solver's temporaries of
  compact rows (gathers per body) cost more than the dense ones', so that a compact Data only
  pays where it is much smaller (humanoid copies, batch 64, XLA memory per world of a step:
  2 copies 448 KiB compact vs 432 dense, 4 copies 1,183 vs 1,488, 8 copies 2,809 vs 5,448;
  docs/speed.md). Contacts, connect and weld rows reach two bodies' chains; joint limits, joint
  equalities and dof friction loss one or two dofs; tendon rows (limits, friction, equality)
  keep the Jacobian dense.
  """
  if not efc.nefc or not chain or int(m.opt.jacobian) == JacobianType.DENSE:
    return 0
  tendon = (ConstraintType.FRICTION_TENDON, ConstraintType.LIMIT_TENDON)
  if np.isin(efc.type, tendon).any():
    return 0
  eq = np.asarray(m.eq_type)[np.unique(efc.id[: efc.ne])] if efc.ne else np.zeros(0, int)
  if np.isin(eq, (EqType.TENDON,)).any():
    return 0
  width = 2 * chain
  if int(m.opt.jacobian) == JacobianType.AUTO and 2 * (width + 2) > m.nv:
    return 0
  return width


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
  """A model's static layout (see the module docstring), NumPy arrays and ints, read-only;
  hashed and compared by content, so that two loads of one model share their jit traces.

  Its row fields (nefc, type, id, ne, nf, contact_efcadr, contact_nrow, contact_dim) are those
  of EfcRows.
  """

  options: tuple  # options_key of the model it was made for
  groups: tuple[dict[str, Any], ...]  # collider groups (see `groups`)
  slot_order: np.ndarray  # (nfull,) collider slots into mj_collision's order
  budget: Budget
  slot_geom1: np.ndarray  # (nfull,) geoms of every collider slot, in mj_collision's order
  slot_geom2: np.ndarray
  contact_geom1: np.ndarray  # (ncon,) geoms of every Data.contact slot; -1 where they vary
  contact_geom2: np.ndarray  # (capped slots)
  nefc: int
  type: np.ndarray  # (nefc,) mjtConstraint
  id: np.ndarray  # (nefc,) eq, dof, tendon, joint id or contact slot
  ne: int
  nf: int
  contact_efcadr: np.ndarray  # (ncon,) first row of each contact slot (-1: none)
  contact_nrow: np.ndarray  # (ncon,) rows of each contact slot
  contact_dim: np.ndarray  # (ncon,) condim of each contact slot
  rows: RowClasses  # the solver's row classes
  body_dofs: np.ndarray  # (nbody, C) dofs moving each body, -1 padded (`body_dofs`)
  efc_width: int  # entries per row of the compact efc_J; 0: dense (nefc, nv) (`efc_width`)
  _digest: bytes = dataclasses.field(default=b'', repr=False)

  def __post_init__(self):
    _freeze([getattr(self, f.name) for f in dataclasses.fields(self)])
    h = hashlib.blake2b(digest_size=16)
    for f in dataclasses.fields(self):
      if f.name != '_digest':
        _feed(h, getattr(self, f.name))
    object.__setattr__(self, '_digest', h.digest())

  @property
  def ncon(self) -> int:
    """Data.contact slots (the budget; every collider slot when uncapped)."""
    return len(self.contact_dim)

  def __hash__(self):
    return hash(self._digest)

  def __eq__(self, other):
    return self is other or (isinstance(other, Layout) and self._digest == other._digest)


def make_layout(m: Model) -> Layout:
  """The static layout of a Model as its options are now (runs once per Model: with_layout)."""
  grps = groups(m)
  order = slot_order(m, grps)
  b = budget(m, grps, order)
  if grps:
    cat = lambda k: np.concatenate([np.repeat(g[k], g['nslot']) for g in grps])  # noqa: E731
    g1, g2 = cat('geom1')[order].astype(np.int32), cat('geom2')[order].astype(np.int32)
  else:
    g1 = g2 = np.zeros(0, np.int32)
  if b.capped:
    c1, c2 = np.full(b.ncon, -1, np.int32), np.full(b.ncon, -1, np.int32)
  else:
    c1, c2 = g1, g2
  efc = efc_rows(m, np.asarray(b.dim, np.int32))
  chains = body_dofs(m)
  return Layout(
    options_key(m),
    tuple(grps),
    order,
    b,
    g1,
    g2,
    c1,
    c2,
    *efc,
    rows=row_classes(efc),
    body_dofs=chains,
    efc_width=efc_width(m, efc, chains.shape[1]),
  )


def with_layout(m: Model) -> Model:
  """m with a layout made for it now, and its Data sizes nconmax and nefcmax from it."""
  lay = make_layout(m)
  return m.replace(layout=lay, nconmax=lay.ncon, nefcmax=lay.nefc)


def layout_of(m: Model) -> Layout:
  """The Model's layout (made when it was built), refused if the model's options have changed
  since (change options with jaxsim.with_options, which remakes the layout)."""
  lay = m.layout
  if lay is None:
    raise ValueError(
      'this Model has no layout: build Models with jaxsim.load or jaxsim.load_string'
    )
  if lay.options != options_key(m):
    raise ValueError(
      "the Model's options (disable flags, cone or contact budget) changed after its layout of "
      'contacts and constraint rows was made: change them with jaxsim.with_options or '
      'jaxsim.with_ncon_max, which remake it, not Model.replace'
    )
  return lay

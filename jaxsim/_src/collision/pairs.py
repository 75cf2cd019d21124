"""Candidate geom pairs, fixed at compile time, by MuJoCo's filtering rules (mj_collision).

Everything here is NumPy on the compiled (static) arrays: which geom pairs can ever touch and
which collider each one uses. Whether a candidate touches at a given state is decided in the
driver, under jit, with fixed shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jaxsim._src.collision import hfield
from jaxsim._src.enums import DisableBit, EnableBit, GeomType

# MuJoCo's collision table (mjCOLLISIONFUNC): which ordered type pairs have a collider
_NO_COLLIDER = {
  (GeomType.PLANE, GeomType.PLANE),
  (GeomType.PLANE, GeomType.HFIELD),
  (GeomType.HFIELD, GeomType.HFIELD),
}


def has_collider(t1: int, t2: int) -> bool:
  """Whether MuJoCo has a collision function for geom types t1 <= t2."""
  return (min(t1, t2), max(t1, t2)) not in _NO_COLLIDER


def _bitmask_ok(ct1, ca1, ct2, ca2) -> np.ndarray:
  """contype/conaffinity compatibility (the opposite of MuJoCo's filterBitmask)."""
  return ((ct1 & ca2) != 0) | ((ct2 & ca1) != 0)


def candidate_pairs(c: Mapping[str, Any]) -> dict[str, np.ndarray]:
  """Static candidate geom pairs of a compiled model, explicit <pair>s first.

  Returns geom1, geom2 (n,) ordered so that geom_type[geom1] <= geom_type[geom2] as MuJoCo
  calls its colliders, and ipair (n,): the <pair> index, or -1 for pairs found by the broadphase
  rules (different weld bodies, not both dof-less, not parent and child unless filterparent is
  disabled, body- and geom-level contype/conaffinity, not excluded, not overridden by a <pair>);
  window (n, 2): for height-field pairs the static sub-grid window (rows, columns of cells) that
  holds geom2 at its compiled size (hfield.window), (0, 0) for other pairs; max_geom_pairs (int,
  only when the model sets the custom numeric of that name, as for MJX): the broadphase limit.
  """
  gtype = np.asarray(c['geom_type'])
  gbody = np.asarray(c['geom_bodyid'])
  ct, ca = np.asarray(c['geom_contype']), np.asarray(c['geom_conaffinity'])
  weld = np.asarray(c['body_weldid'])
  parent = np.asarray(c['body_parentid'])
  dofnum = np.asarray(c['body_dofnum'])
  nbody = len(weld)
  flags = int(c['opt']['disableflags'])

  g1 = list(np.asarray(c.get('pair_geom1', ()), dtype=int))
  g2 = list(np.asarray(c.get('pair_geom2', ()), dtype=int))
  ipair = list(range(len(g1)))
  explicit = {(min(a, b), max(a, b)) for a, b in zip(g1, g2, strict=True)}

  # body-level contype/conaffinity: OR over the body's geoms (add_pair)
  body_ct = np.zeros(nbody, dtype=np.int64)
  body_ca = np.zeros(nbody, dtype=np.int64)
  np.bitwise_or.at(body_ct, gbody, ct)
  np.bitwise_or.at(body_ca, gbody, ca)
  excluded = set(np.asarray(c.get('exclude_signature', ()), dtype=np.int64).tolist())
  weldparent = weld[parent[weld]]
  filterparent = not flags & DisableBit.FILTERPARENT

  ngeom = len(gtype)
  a, b = np.triu_indices(ngeom, k=1)
  ba, bb = gbody[a], gbody[b]
  wa, wb = weld[ba], weld[bb]
  ok = wa != wb
  ok &= (dofnum[wa] != 0) | (dofnum[wb] != 0)
  if filterparent:
    related = (wa != 0) & (wb != 0) & ((wa == weldparent[wb]) | (wb == weldparent[wa]))
    ok &= ~related
  ok &= _bitmask_ok(body_ct[ba], body_ca[ba], body_ct[bb], body_ca[bb])
  ok &= _bitmask_ok(ct[a], ca[a], ct[b], ca[b])
  lo, hi = np.minimum(ba, bb), np.maximum(ba, bb)
  sig = (lo << 16) + hi
  ok &= ~np.isin(sig, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
  # vectorised: a scene of 100 humanoids has ~2e6 candidates
  nt = max(8, int(gtype.max(initial=0)) + 1)
  collides = np.array([[has_collider(t, u) for u in range(nt)] for t in range(nt)])
  if explicit:
    ex = np.array(sorted(explicit), dtype=np.int64)
    ok &= ~np.isin(a.astype(np.int64) * ngeom + b, ex[:, 0] * ngeom + ex[:, 1])
  ia, ib = a[ok], b[ok]
  g1 = np.concatenate([np.asarray(g1, int), ia]).astype(int)
  g2 = np.concatenate([np.asarray(g2, int), ib]).astype(int)
  ipair = np.concatenate([np.asarray(ipair, int), np.full(len(ia), -1)]).astype(int)
  keep = collides[gtype[g1], gtype[g2]]
  g1, g2, ipair = g1[keep], g2[keep], ipair[keep]
  swap = gtype[g1] > gtype[g2]
  g1, g2 = np.where(swap, g2, g1), np.where(swap, g1, g2)
  window = hfield_windows(c, g1, g2, ipair)
  out = {'geom1': g1, 'geom2': g2, 'ipair': ipair, 'window': window}
  limit = _numeric(c, 'max_geom_pairs')
  if limit is not None:
    out['max_geom_pairs'] = int(limit)
  return out


def _numeric(c: Mapping[str, Any], name: str) -> float | None:
  """The first value of the custom numeric `name` (MJX reads its options from these), or None."""
  names = tuple(c.get('names', {}).get('numeric', ()))
  if name not in names:
    return None
  k = names.index(name)
  return float(np.asarray(c['numeric_data'])[int(np.asarray(c['numeric_adr'])[k])])


# what hfield_windows reads from a compiled model (or a Model) besides opt
WINDOW_FIELDS = (
  'geom_type',
  'geom_dataid',
  'geom_rbound',
  'geom_margin',
  'geom_gap',
  'hfield_nrow',
  'hfield_ncol',
  'hfield_size',
  'pair_margin',
  'pair_gap',
)


def hfield_windows(
  c: Mapping[str, Any], g1: np.ndarray, g2: np.ndarray, ipair: np.ndarray
) -> np.ndarray:
  """(n, 2) sub-grid windows of height-field pairs (geom1 the height field), (0, 0) otherwise.

  From concrete compiled (or Model) arrays: geom2's bounding radius plus the pair's margin and
  gap, and the height field's size. A geom grown or a margin raised after loading can reach
  cells outside its window.
  """
  gtype = np.asarray(c['geom_type'])
  out = np.zeros((len(g1), 2), dtype=np.int64)
  isfield = gtype[g1] == GeomType.HFIELD
  if not isfield.any():
    return out
  dataid = np.asarray(c['geom_dataid'])
  rbound = np.asarray(c['geom_rbound'], dtype=np.float64)
  nrow, ncol = np.asarray(c['hfield_nrow']), np.asarray(c['hfield_ncol'])
  size = np.asarray(c['hfield_size'], dtype=np.float64)
  margin = np.asarray(c['geom_margin'], dtype=np.float64)
  gap = np.asarray(c['geom_gap'], dtype=np.float64)
  extra = margin[g1] + margin[g2] + gap[g1] + gap[g2]
  explicit = ipair >= 0
  if explicit.any():
    ip = np.maximum(ipair, 0)
    pm = np.asarray(c['pair_margin'], dtype=np.float64)[ip]
    pg = np.asarray(c['pair_gap'], dtype=np.float64)[ip]
    extra = np.where(explicit, pm + pg, extra)
  opt = c['opt']
  if int(opt['enableflags']) & EnableBit.OVERRIDE:
    extra = np.maximum(extra, float(np.asarray(opt['o_margin'])) + gap[g1] + gap[g2])
  for k in np.flatnonzero(isfield):
    h = int(dataid[g1[k]])
    out[k] = hfield.window(int(nrow[h]), int(ncol[h]), size[h], rbound[g2[k]] + extra[k])
  return out

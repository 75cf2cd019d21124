"""Broadphase inside jit: which candidate pairs of a collider group go through the collider.

Most candidate pairs are far apart at any one time, and the GJK/EPA and height-field colliders
cost far more than the bounding-sphere test (mj_filterSphere). So a group runs its collider on
a static number k of its pairs: those passing the test, nearest first (by the gap between the
bounding spheres, as MJX's max_geom_pairs). While no more than k pairs pass, the contacts are
exactly those of every pair; when more pass, the farthest are dropped and the overflow is
counted (Data.warning[mjWARN_CONTACTFULL]).
"""

from __future__ import annotations

import functools
import math as pymath
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.enums import GeomType
from jaxsim._src.types import Data, Model

MIN_PAIRS = 64  # a group with at most this many pairs runs all of them
MIN_EPA = 16  # a GJK/EPA group with at most this many collided pairs runs EPA on all of them
# default EPA limit: pairs in contact per geom of the group (each side); MuJoCo's
# stacked_boxes.xml (18 boxes in a grid, faces, edges and corners exactly touching) has 2.3
EPA_PAIRS = 3.0
HFIELD_GEOMS = 8  # default: geoms of a height-field group whose windows are all tested
CHUNK = 8  # pairs per collider call of map_live
# default limit: each geom of the group near this many partners of the other side (by bounding
# spheres; stacked_boxes.xml has 3.8)
PARTNERS = 4


def sphere_test(
  m: Model, d: Data, g1, g2, margin: jax.Array, obb: np.ndarray | None = None
) -> tuple[jax.Array, jax.Array]:
  """(ok, gap) (n,): mj_filterSphere's and mj_collideOBB's verdict, and the gap between the
  bounding volumes.

  Geoms without a bounding radius (planes, height fields) always pass; a plane against a
  bounded geom measures the geom's centre from the plane. Pairs of bounded geoms (neither a
  plane nor a height field) must also pass the oriented-box test (MuJoCo's midphase applies it
  to geom pairs of bodies with several geoms; it only drops pairs farther apart than the
  margin, so it never removes a contact): among bodies packed inside each other's bounding
  spheres (BiGym's cabinets: 481 of 540 mesh-box pairs within their spheres, 140 in contact)
  it keeps the pairs a group's static limit runs to those that can touch. obb (n,) static: the
  pairs that take the oriented-box test (None: all); analytic colliders run on every pair they
  are given report no contact beyond the margin themselves, so their groups skip it (dog: 2,600
  of 5,700 bounded pairs, the test being most of the broadphase's time).
  """
  g1, g2 = np.asarray(g1), np.asarray(g2)
  gtype = np.asarray(m.geom_type)
  rb1, rb2 = m.geom_rbound[g1], m.geom_rbound[g2]
  p1, p2 = d.geom_xpos[g1], d.geom_xpos[g2]
  dist2 = jnp.sum((p1 - p2) ** 2, axis=-1)
  bound = rb1 + rb2 + margin
  both = (rb1 > 0) & (rb2 > 0)
  ok = jnp.where(both, dist2 <= bound * bound, True)
  gap = jnp.where(both, jnp.sqrt(dist2 + 1e-30) - bound, 0.0)
  plane1 = gtype[g1] == GeomType.PLANE
  if plane1.any():
    normal = d.geom_xmat[g1][:, :, 2]
    pdist = jnp.sum((p2 - p1) * normal, axis=-1)
    pgap = pdist - margin - rb2
    ok = jnp.where(plane1 & (rb2 > 0), pgap <= 0, ok)
    gap = jnp.where(plane1 & (rb2 > 0), pgap, gap)
  unbounded = (GeomType.PLANE, GeomType.HFIELD)
  boxed = ~np.isin(gtype[g1], unbounded) & ~np.isin(gtype[g2], unbounded)
  boxed = np.flatnonzero(boxed if obb is None else boxed & np.asarray(obb, bool))
  if len(boxed):
    sep = obb_gap(m, d, g1[boxed], g2[boxed], margin[boxed])
    ok = ok.at[boxed].set(ok[boxed] & (sep <= 0))
    gap = gap.at[boxed].set(jnp.maximum(gap[boxed], sep))
  return ok, gap


def obb_gap(m: Model, d: Data, g1, g2, margin: jax.Array) -> jax.Array:
  """The largest separation (n,), less the margin, of two geoms' oriented bounding boxes
  (geom_aabb) along the boxes' face normals: positive where mj_collideOBB finds them apart."""
  aabb1, aabb2 = m.geom_aabb[g1], m.geom_aabb[g2]
  r1, r2 = d.geom_xmat[g1], d.geom_xmat[g2]
  c1 = d.geom_xpos[g1] + jnp.einsum('nij,nj->ni', r1, aabb1[:, :3])
  c2 = d.geom_xpos[g2] + jnp.einsum('nij,nj->ni', r2, aabb2[:, :3])
  h1, h2 = aabb1[:, 3:], aabb2[:, 3:]
  rel = jnp.abs(jnp.einsum('nka,nkb->nab', r1, r2))  # |axis a of box 1 . axis b of box 2|
  t = c2 - c1
  # along box 1's axes, then box 2's
  sep1 = jnp.abs(jnp.einsum('nka,nk->na', r1, t)) - h1 - jnp.einsum('nab,nb->na', rel, h2)
  sep2 = jnp.abs(jnp.einsum('nkb,nk->nb', r2, t)) - h2 - jnp.einsum('nab,na->nb', rel, h1)
  return jnp.maximum(sep1.max(axis=-1), sep2.max(axis=-1)) - margin


def limit(g1: np.ndarray, g2: np.ndarray, expensive: bool, requested: int | None) -> int:
  """Static number of a group's pairs that go through its collider each step.

  requested: the model's max_geom_pairs (negative: every pair); otherwise every pair of cheap
  (analytic) colliders, and for GJK/EPA groups of more than MIN_PAIRS pairs PARTNERS per geom of
  the group (at least MIN_PAIRS): enough for bodies packed against each other, far below the
  all-pairs count of a large self-colliding model (dog: 6277 pairs, 1 to 78 per group within
  their bounding spheres in a random-control rollout).
  """
  n = len(g1)
  if requested is not None:
    return n if requested < 0 else max(1, min(n, requested))
  if not expensive or n <= MIN_PAIRS:
    return n
  geoms = len(np.unique(g1)) + len(np.unique(g2))
  return min(n, max(MIN_PAIRS, pymath.ceil(PARTNERS * geoms)))


def epa_limit(g1: np.ndarray, g2: np.ndarray, k: int, requested: int | None) -> int:
  """Static number of a GJK/EPA group's k collided pairs that may run EPA in one step.

  EPA runs where GJK finds the (margin-inflated) geoms overlapping, and for spheres and capsules
  only where their cores overlap too: one pair per contact of the group at most. By default
  each geom of the group may be in contact with six others, three pairs per geom and side (boxes
  in a grid touching at faces, edges and corners: about five); a model's max_geom_pairs lets
  every collided pair run it.
  """
  geoms = len(np.unique(g1)) + len(np.unique(g2))
  if requested is not None or k <= MIN_EPA:
    return k
  return min(k, max(MIN_EPA, pymath.ceil(EPA_PAIRS * geoms)))


def hfield_limit(k: int, nprism: int, requested: int | None) -> int:
  """Static number of prisms (of k collided pairs with nprism each) that go through GJK/EPA.

  MuJoCo tests the prisms under a geom's bounding box whose surface rises above the geom's
  lowest point: about two per grid cell under each geom touching the field. Groups of at most
  HFIELD_GEOMS geoms (or with max_geom_pairs set) test every prism of their windows; larger
  ones the prisms of a quarter of them, at least HFIELD_GEOMS windows' worth.
  """
  if requested is not None or k <= HFIELD_GEOMS:
    return k * nprism
  return max(HFIELD_GEOMS * nprism, pymath.ceil(k * nprism / 4))


def select(ok: jax.Array, gap: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
  """(idx (k,), overflow): the k nearest passing pairs (passing pairs first), and whether any
  passing pair was left out."""
  _, idx = jax.lax.top_k(-jnp.where(ok, gap, jnp.inf), k)
  return idx, jnp.sum(ok) > k


def first(mask: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
  """(the first k items of mask, in order; whether mask has more than k): a static limit on the
  items going through a costly stage, the rest dropped and the overflow reported."""
  return mask & (jnp.cumsum(mask) <= k), jnp.sum(mask) > k


def partition(mask: jax.Array) -> jax.Array:
  """The indices (n,) int32 of mask's items, those where it holds first, each part in order: a
  stable partition by counting (cumulative sums and one scatter), not a sort."""
  n = mask.shape[0]
  place = jnp.where(mask, jnp.cumsum(mask) - 1, jnp.sum(mask) + jnp.cumsum(~mask) - 1)
  return jnp.zeros(n, jnp.int32).at[place].set(jnp.arange(n, dtype=jnp.int32), unique_indices=True)


def scatter(x: jax.Array, idx: jax.Array, n: int, fill) -> jax.Array:
  """x (k, ...) of the selected pairs back at their places among n pairs, fill (broadcast to
  x's trailing shape) elsewhere."""
  out = jnp.broadcast_to(jnp.asarray(fill, x.dtype), (n,) + x.shape[1:])
  return out.at[idx].set(x, unique_indices=True)


class Item(NamedTuple):
  """A collider of one item for map_live: f (differentiable: fixed-length loops) and fast (the
  same values with early-exit loops, primal only)."""

  f: Callable[..., Any]
  fast: Callable[..., Any]


def item(g: Callable[..., Any]) -> Item:
  """The Item of g(x, *consts, early=False), a collider whose loops stop early with early=True.
  Made once per static setting by the colliders' factories, so that map_live's chunk program
  (_chunk_program, keyed by the function) is traced once."""
  return Item(g, functools.partial(g, early=True))


def _fmap(g: Callable, x: Any, c: tuple) -> Any:
  return jax.vmap(lambda a: g(a, *c))(x)


@functools.lru_cache(maxsize=256)
def _chunk_program(g: Callable) -> Callable:
  """jit(vmap(g)) over a chunk of items (map_live), one per function g: jit's trace cache then
  serves every call of the same g on the same shapes, so that a collider passed as the same
  function object (the colliders' factories cache theirs per static setting) is traced once per
  process and shapes, not once per program (a model's forward and step, models sharing pair
  types). Bounded: a g made afresh per call only misses."""
  return jax.jit(functools.partial(_fmap, g))


def map_live(
  f: Callable[..., Any],
  live: jax.Array,
  xs: Any,
  fill: Any = None,
  chunk: int = CHUNK,
  fast: Callable[..., Any] | None = None,
  *,
  consts: tuple = (),
) -> Any:
  """vmap(lambda x: f(x, *consts))(xs) where live (n,), fill elsewhere, computing f only on the
  live items.

  f(item, *consts): a function of one item and of consts, the values shared by every item; it
  must not close over traced values (derivatives flow through xs and consts only, and a
  closed-over value that is differentiated raises). fill: a pytree like one item of f's output,
  broadcast (None: zeros). The live items are visited in order, `chunk` at a time, in a
  while_loop that stops after the last of them: collider calls cost in proportion to the pairs
  that need them, not to a group's static slots (under vmap, the world with most). A while_loop
  has no reverse mode, so derivatives are those of the same function computed on every item
  (custom_jvp). fast: f computed another way (with early-exit loops), used for the live items'
  values only.

  fast is traced once, over one chunk (a jit whose trace the loop body reuses); f only where the
  call is differentiated.
  """
  n = live.shape[0]
  fast = f if fast is None else fast
  consts = tuple(consts)

  def like(shapes: Any, m: int) -> Any:
    """fill broadcast to m items of the output's shapes (ShapeDtypeStructs or arrays)."""
    e = jax.tree_util.tree_map(lambda s: 0, shapes) if fill is None else fill
    return jax.tree_util.tree_map(
      lambda s, v: jnp.broadcast_to(jnp.asarray(v, s.dtype), (m,) + s.shape[1:]), shapes, e
    )

  def keep(mask: jax.Array, out: Any, empty: Any) -> Any:
    return jax.tree_util.tree_map(
      lambda o, e: jnp.where(mask.reshape(mask.shape + (1,) * (o.ndim - 1)), o, e), out, empty
    )

  def every(xs: Any, live: jax.Array, consts: tuple) -> Any:
    out = _fmap(f, xs, consts)
    return keep(live, out, like(out, n))

  if n == 0:
    return every(xs, live, consts)
  # a small group is one chunk, skipped whole when none of its items is live
  chunk = min(chunk, n)
  # one chunk's program: traced here for its output shapes (the loop's buffer), then found in
  # jit's trace cache by the loop body (same function, same shapes)
  on_chunk = _chunk_program(fast)
  shapes = jax.eval_shape(on_chunk, jax.tree_util.tree_map(lambda a: a[:chunk], xs), consts)

  def visit(xs: Any, live: jax.Array, consts: tuple) -> Any:
    nchunk = -(-n // chunk)
    order = partition(live)
    order = jnp.concatenate([order, jnp.zeros(nchunk * chunk - n, jnp.int32)])
    count = jnp.sum(live)

    def body(c):
      i, out = c
      ids = jax.lax.dynamic_slice_in_dim(order, i * chunk, chunk)
      y = on_chunk(jax.tree_util.tree_map(lambda a: a[ids], xs), consts)
      y = keep(i * chunk + jnp.arange(chunk) < count, y, like(shapes, chunk))
      out = jax.tree_util.tree_map(
        lambda o, a: jax.lax.dynamic_update_slice_in_dim(o, a, i * chunk, 0), out, y
      )
      return i + 1, out

    init = (jnp.zeros((), jnp.int32), like(shapes, nchunk * chunk))
    _, out = jax.lax.while_loop(lambda c: c[0] * chunk < count, body, init)
    # back from visiting order to item order
    return jax.tree_util.tree_map(
      lambda o, e: e.at[order[:n]].set(o[:n], unique_indices=True), out, like(shapes, n)
    )

  run = jax.custom_jvp(visit)
  run.defjvp(lambda p, t: jax.jvp(every, p, t))
  return run(xs, live, consts)

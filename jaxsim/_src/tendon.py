"""Tendon lengths, Jacobians and wrapping (mj_tendon, mju_wrap), Jacobian rates and armature bias.

The path of every spatial tendon is static, so it is parsed once at trace time (NumPy) into
segments (two consecutive path sites, possibly with a wrapping geom between them); segments are
grouped by kind (site-site, sphere, cylinder), each group is evaluated vectorised, and results are
summed per tendon. Whether a geom wrap happens depends on the state and is selected with masks.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import kinematics, math
from jaxsim._src.dynamics import tendon_armature
from jaxsim._src.enums import MINVAL, JointType, WrapType
from jaxsim._src.types import Data, Model

_JOINT, _PULLEY, _SITE = int(WrapType.JOINT), int(WrapType.PULLEY), int(WrapType.SITE)
_SPHERE, _CYLINDER = int(WrapType.SPHERE), int(WrapType.CYLINDER)

# inside wrap's Newton solve (MuJoCo's wrap_inside)
_INSIDE_MAXITER = 20
_INSIDE_TOL = 1e-6


@dataclasses.dataclass(frozen=True)
class _Segments:
  """Static description of one group of spatial tendon segments (all arrays (n,))."""

  tendon: np.ndarray
  site0: np.ndarray
  site1: np.ndarray
  geom: np.ndarray  # -1 for site-site segments
  wrapid: np.ndarray  # the geom's path element (wrap_prm holds its sidesite id), else -1
  pulley: np.ndarray  # the last pulley before the segment (wrap_prm holds its divisor), or -1
  item: np.ndarray  # index of the segment in the wrap_xpos item list
  sphere: np.ndarray  # wrap geom is a sphere (else a cylinder)


@dataclasses.dataclass(frozen=True)
class _Path:
  """Static parse of every tendon path, mirroring the loop of mj_tendon."""

  fixed_tendon: np.ndarray  # (nfixed,) per joint wrap
  fixed_jnt: np.ndarray
  fixed_coef_idx: np.ndarray  # wrap index, to read wrap_prm (dynamic)
  sites: _Segments | None  # straight site-site segments
  geoms: _Segments | None  # site-geom-site segments, sphere and cylinder together
  # wrap_xpos items in MuJoCo's order: pulleys (obj -2), segments (1 or 3 points), last sites
  item_tendon: np.ndarray
  item_kind: np.ndarray  # 0 pulley, 1 segment, 2 last site
  item_site: np.ndarray  # site of a last-site item, else -1


def parse(m: Model) -> _Path:
  """Walks every tendon path as mj_tendon does and records segments and wrap_xpos items."""
  # wrap_prm (divisors, sidesite ids) is a dynamic float leaf: only its indices are recorded
  wtype, objid = np.asarray(m.wrap_type), np.asarray(m.wrap_objid)
  adr, num = np.asarray(m.tendon_adr), np.asarray(m.tendon_num)
  fixed = ([], [], [])
  segs = {'site': [], 'geom': []}
  items = ([], [], [])

  def add_item(tendon: int, kind: int, site: int = -1):
    for col, v in zip(items, (tendon, kind, site), strict=True):
      col.append(v)

  for i in range(m.ntendon):
    a, n = int(adr[i]), int(num[i])
    if wtype[a] == _JOINT:
      for w in range(a, a + n):
        fixed[0].append(i)
        fixed[1].append(objid[w])
        fixed[2].append(w)
      continue
    pulley, j = -1, 0
    while j < n - 1:
      t0, t1 = wtype[a + j], wtype[a + j + 1]
      if t0 == _PULLEY or t1 == _PULLEY:
        if t0 == _PULLEY:
          pulley = a + j
          add_item(i, 0)
        j += 1
        continue
      geom, wrapid, kind = -1, -1, 'site'
      site1 = objid[a + j + 1]
      if t1 in (_SPHERE, _CYLINDER):
        geom, wrapid, kind = objid[a + j + 1], a + j + 1, 'geom'
        site1 = objid[a + j + 2]
      row = (i, objid[a + j], site1, geom, wrapid, pulley, len(items[0]), t1 == _SPHERE)
      segs[kind].append(row)
      add_item(i, 1)
      j += 1 if kind == 'site' else 2
      if j == n - 1 or wtype[a + j + 1] == _PULLEY:
        add_item(i, 2, site1)

  def group(rows) -> _Segments | None:
    if not rows:
      return None
    cols = [np.array(c) for c in zip(*rows, strict=True)]
    return _Segments(*(c.astype(np.int64) for c in cols[:7]), cols[7].astype(bool))

  ints = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
  return _Path(
    ints(fixed[0]),
    ints(fixed[1]),
    ints(fixed[2]),
    group(segs['site']),
    group(segs['geom']),
    *(ints(x) for x in items),
  )


# ------------------------------------------------------------------ NaN-safe scalar helpers


def _sqrt(x: jax.Array) -> jax.Array:
  """sqrt with zero value and gradient for x <= 0."""
  pos = x > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def _div(x: jax.Array, y: jax.Array) -> jax.Array:
  """x / y, 0 where y == 0 (callers mask those cases anyway)."""
  ok = y != 0
  return jnp.where(ok, x / jnp.where(ok, y, 1.0), 0.0)


def _acos(x: jax.Array) -> jax.Array:
  """acos, clamped to [-1, 1] with zero gradient at the ends."""
  inside = jnp.abs(x) < 1
  return jnp.where(inside, jnp.arccos(jnp.where(inside, x, 0.0)), jnp.where(x > 0, 0.0, jnp.pi))


def _asin(x: jax.Array) -> jax.Array:
  """asin, clamped to [-1, 1] with zero gradient at the ends."""
  inside = jnp.abs(x) < 1
  edge = jnp.where(x > 0, 0.5 * jnp.pi, -0.5 * jnp.pi)
  return jnp.where(inside, jnp.arcsin(jnp.where(inside, x, 0.0)), edge)


def _normalize2(v: jax.Array) -> jax.Array:
  """mju_normalize for 2-vectors: (1, 0) for a null vector."""
  return math.normalize(v, jnp.array([1.0, 0.0], dtype=v.dtype))[0]


# ------------------------------------------------------------------ wrapping (per segment)


def _is_intersect(p1: jax.Array, p2: jax.Array, p3: jax.Array, p4: jax.Array) -> jax.Array:
  """Whether 2D segments p1-p2 and p3-p4 intersect (is_intersect)."""
  det = (p4[1] - p3[1]) * (p2[0] - p1[0]) - (p4[0] - p3[0]) * (p2[1] - p1[1])
  ok = jnp.abs(det) >= MINVAL
  det = jnp.where(ok, det, 1.0)
  a = ((p4[0] - p3[0]) * (p1[1] - p3[1]) - (p4[1] - p3[1]) * (p1[0] - p3[0])) / det
  b = ((p2[0] - p1[0]) * (p1[1] - p3[1]) - (p2[1] - p1[1]) * (p1[0] - p3[0])) / det
  return ok & (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)


def _length_circle(p0: jax.Array, p1: jax.Array, ind: jax.Array, radius: jax.Array) -> jax.Array:
  """Arc length from p0 to p1 on a circle, direction chosen by ind (length_circle)."""
  angle = _acos(jnp.dot(_normalize2(p0), _normalize2(p1)))
  cross = p0[1] * p1[0] - p0[0] * p1[1]
  flip = ((cross > 0) & ind) | ((cross < 0) & ~ind)
  return radius * jnp.where(flip, 2 * jnp.pi - angle, angle)


def _angle(a: jax.Array, b: jax.Array) -> jax.Array:
  """Signed angle from 2D vector a to b, in (-pi, pi]; used for decisions only."""
  a, b = jax.lax.stop_gradient(a), jax.lax.stop_gradient(b)
  return jnp.arctan2(a[0] * b[1] - a[1] * b[0], jnp.dot(a, b))


def _wrap_circle(end: jax.Array, sd: jax.Array, has_side: jax.Array, radius: jax.Array):
  """2D circle wrap (wrap_circle): (length or -1, tangent points (4,)).

  With a side point the path is the shortest one with the winding angle of the polyline
  end0 -> sd -> end1 around the centre (MuJoCo 4's sidesite rule); without one, the shorter of
  the two wraps when the straight segment crosses the circle.
  """
  e0, e1 = end[:2], end[2:]
  sqlen0, sqlen1 = jnp.dot(e0, e0), jnp.dot(e1, e1)
  sqrad = radius * radius
  dif = e1 - e0
  dd = jnp.dot(dif, dif)
  fail = (sqlen0 < sqrad) | (sqlen1 < sqrad) | (radius < MINVAL) | (dd < MINVAL)

  # nearest point of the segment to the centre
  a = jnp.clip(-_div(jnp.dot(dif, e0), jnp.where(dd < MINVAL, 1.0, dd)), 0.0, 1.0)
  near = a * dif + e0
  clear = jnp.dot(near, near) > sqrad

  # solution 0 goes clockwise around the centre, solution 1 counterclockwise
  sqrt0, sqrt1 = _sqrt(sqlen0 - sqrad), _sqrt(sqlen1 - sqrad)
  inv0, inv1 = _div(1.0, sqlen0), _div(1.0, sqlen1)
  sols, goods = [], []
  for sgn in (1.0, -1.0):
    s0 = jnp.stack([e0[0] * sqrad + sgn * radius * e0[1] * sqrt0,
                    e0[1] * sqrad - sgn * radius * e0[0] * sqrt0]) * inv0  # fmt: skip
    s1 = jnp.stack([e1[0] * sqrad - sgn * radius * e1[1] * sqrt1,
                    e1[1] * sqrad + sgn * radius * e1[0] * sqrt1]) * inv1  # fmt: skip
    chord = s0 - s1
    good = jnp.where(_is_intersect(e0, s0, e1, s1), -10000.0, -jnp.dot(chord, chord))
    sols.append((s0, s1))
    goods.append(good)

  # side point: the winding of end0 -> sd -> end1 picks the direction; no wrap if the
  # straight segment clears the circle with that same winding
  ccw = _angle(e0, sd) + _angle(sd, e1) > 0
  side_fail = clear & ((_angle(e0, e1) > 0) == ccw)
  # no side point: no wrap if the segment clears the circle, else the shorter wrap
  first = goods[0] > goods[1]
  p0 = jnp.where(first, sols[0][0], sols[1][0])
  p1 = jnp.where(first, sols[0][1], sols[1][1])
  free_fail = clear | _is_intersect(e0, p0, e1, p1)

  ccw = jnp.where(has_side, ccw, ~first)
  p0 = jnp.where(ccw, sols[1][0], sols[0][0])
  p1 = jnp.where(ccw, sols[1][1], sols[0][1])
  fail |= jnp.where(has_side, side_fail, free_fail)
  wlen = _length_circle(p0, p1, ccw, radius)
  return jnp.where(fail, -1.0, wlen), jnp.concatenate([p0, p1])


def _wrap_inside(end: jax.Array, radius: jax.Array):
  """2D wrap with the sidesite inside the circle (wrap_inside): (0 or -1, points (4,)).

  The path touches the circle where both straight pieces make the same angle beta with the
  radius: h(beta) = 2 beta - asin(A sin beta) - asin(B sin beta) - G = 0, solved by Newton from
  beta = pi/2 until |h| <= 1e-6 as MuJoCo 4 does (older versions iterated on z = sin(beta)).
  """
  e0, e1 = end[:2], end[2:]
  len0, len1 = math.safe_norm(e0), math.safe_norm(e1)
  dif = e1 - e0
  dd = jnp.dot(dif, dif)
  fail = (len0 <= radius) | (len1 <= radius) | (radius < MINVAL)
  fail |= (len0 < MINVAL) | (len1 < MINVAL)
  a = -_div(jnp.dot(dif, e0), dd)
  near = e0 + a * dif
  fail |= (dd > MINVAL) & (a > 0) & (a < 1) & (math.safe_norm(near) <= radius)

  ca, cb = _div(radius, len0), _div(radius, len1)
  cosg = _div(len0 * len0 + len1 * len1 - dd, 2 * len0 * len1)
  fail |= cosg < -1 + MINVAL
  g = _acos(cosg)

  def h(beta):
    sb = jnp.sin(beta)
    return 2 * beta - _asin(ca * sb) - _asin(cb * sb) - g

  def dh(beta):
    sb, cbeta = jnp.sin(beta), jnp.cos(beta)
    da = ca * cbeta / jnp.maximum(MINVAL, _sqrt(1 - ca * ca * sb * sb))
    db = cb * cbeta / jnp.maximum(MINVAL, _sqrt(1 - cb * cb * sb * sb))
    return 2 - da - db

  def step(carry, _):
    beta, f = carry
    active = jnp.abs(f) > _INSIDE_TOL
    beta1 = beta - _div(f, dh(beta))
    return (jnp.where(active, beta1, beta), jnp.where(active, h(beta1), f)), None

  beta0 = jnp.asarray(0.5 * jnp.pi, dtype=end.dtype)
  (beta, _), _ = jax.lax.scan(step, (beta0, h(beta0)), None, _INSIDE_MAXITER)

  # rotate from the endpoint chosen by the sign of cross(e0, e1)
  ccw = e0[0] * e1[1] - e0[1] * e1[0] > 0
  vec = _normalize2(jnp.where(ccw, e0, e1))
  sb = jnp.sin(beta)
  ang = beta - jnp.where(ccw, _asin(ca * sb), _asin(cb * sb))
  c, s = jnp.cos(ang), jnp.sin(ang)
  pnt = radius * jnp.stack([c * vec[0] - s * vec[1], s * vec[0] + c * vec[1]])
  # endpoints in one direction from the centre: MuJoCo takes their average direction
  avg = radius * _normalize2(0.5 * (e0 + e1))
  pnt = jnp.where(cosg > 1 - MINVAL, avg, pnt)
  return jnp.where(fail, -1.0, 0.0), jnp.concatenate([pnt, pnt])


def wrap_geom(x0, x1, xpos, xmat, radius, side, has_side, sphere, inside: bool):
  """Wraps segment x0-x1 around a sphere or cylinder (mju_wrap): (length or -1, p0, p1).

  sphere and has_side are per-segment flags; inside (static) enables the inside-wrap solve.
  """
  dtype = x0.dtype
  p0, p1 = xmat.T @ (x0 - xpos), xmat.T @ (x1 - xpos)
  fail = (math.safe_norm(p0) < MINVAL) | (math.safe_norm(p1) < MINVAL)

  # sphere: 2D frame in the plane of p0, p1 and the centre; cylinder: the geom's x-y plane
  axis0, _ = math.normalize3(p0)
  normal, nrm = math.normalize3(jnp.cross(p0, p1))
  ab = jnp.abs(axis0)
  i = jnp.where((ab[1] > ab[0]) & (ab[1] > ab[2]), 1, 0)
  i = jnp.where((ab[2] > ab[0]) & (ab[2] > ab[1]), 2, i)
  other = jnp.ones(3, dtype=dtype).at[i].set(0.0)
  alt, _ = math.normalize3(jnp.cross(axis0, other))
  normal = jnp.where(nrm < MINVAL, alt, normal)
  axis1, _ = math.normalize3(jnp.cross(normal, axis0))
  axis0 = jnp.where(sphere, axis0, jnp.array([1.0, 0.0, 0.0], dtype=dtype))
  axis1 = jnp.where(sphere, axis1, jnp.array([0.0, 1.0, 0.0], dtype=dtype))

  end = jnp.stack([p0 @ axis0, p0 @ axis1, p1 @ axis0, p1 @ axis1])
  s = xmat.T @ (side - xpos)
  sd = radius * _normalize2(jnp.stack([s @ axis0, s @ axis1]))

  wlen, pnt = _wrap_circle(end, sd, has_side, radius)
  if inside:
    in_side = has_side & (math.safe_norm(s) < radius)
    wlen_in, pnt_in = _wrap_inside(end, radius)
    wlen = jnp.where(in_side, wlen_in, wlen)
    pnt = jnp.where(in_side, pnt_in, pnt)
  fail |= wlen < 0

  r0 = axis0 * pnt[0] + axis1 * pnt[1]
  r1 = axis0 * pnt[2] + axis1 * pnt[3]
  # cylinder: spread the height change over the path in proportion to planar length
  l0 = _sqrt((p0[0] - r0[0]) ** 2 + (p0[1] - r0[1]) ** 2)
  l1 = _sqrt((p1[0] - r1[0]) ** 2 + (p1[1] - r1[1]) ** 2)
  total = l0 + wlen + l1
  h = p1[2] - p0[2]
  z0 = p0[2] + h * _div(l0, total)
  z1 = p0[2] + h * _div(l0 + wlen, total)
  r0 = jnp.where(sphere, r0, r0.at[2].set(z0))
  r1 = jnp.where(sphere, r1, r1.at[2].set(z1))
  wlen = jnp.where(sphere, wlen, _sqrt(wlen * wlen + (z1 - z0) ** 2))

  return jnp.where(fail, -1.0, wlen), xmat @ r0 + xpos, xmat @ r1 + xpos


# ------------------------------------------------------------------ tendon


def _static(x) -> np.ndarray | None:
  """x as a NumPy array when it is concrete (not traced), else None."""
  try:
    return np.asarray(x)
  except jax.errors.TracerArrayConversionError:
    return None


def inv_divisor(m: Model, g: _Segments, dtype) -> jax.Array:
  """1 / divisor of the pulley branch each segment is on (1 before any pulley), (n,)."""
  if not (g.pulley >= 0).any():
    return jnp.ones(len(g.pulley), dtype=dtype)
  on = g.pulley >= 0
  # segments before any pulley read a placeholder divisor of 1 (wrap_prm there may be 0)
  divisor = jnp.where(on, m.wrap_prm[np.maximum(g.pulley, 0)], 1.0)
  return (1.0 / divisor).astype(dtype)


def geom_wrap(m: Model, d: Data, g: _Segments):
  """mju_wrap on every site-geom-site segment: (length or -1 (n,), tangent points (n, 3) x 2)."""
  side = jnp.round(m.wrap_prm[g.wrapid]).astype(jnp.int32)
  # the inside-wrap solve is compiled only if some side site may be inside its geom
  prm = _static(m.wrap_prm)
  inside = prm is None or bool((prm[g.wrapid] >= 0).any())
  wrap = jax.vmap(wrap_geom, in_axes=(0, 0, 0, 0, 0, 0, 0, 0, None))
  return wrap(
    d.site_xpos[g.site0],
    d.site_xpos[g.site1],
    d.geom_xpos[g.geom],
    d.geom_xmat[g.geom],
    m.geom_size[g.geom, 0],
    d.site_xpos[jnp.maximum(side, 0)],
    side >= 0,
    jnp.asarray(g.sphere),
    inside,
  )


def tendon(m: Model, d: Data) -> Data:
  """ten_length (ntendon,), dense ten_J (ntendon, nv) and the wrap path (mj_tendon).

  Needs kinematics and com_pos. wrap_obj / wrap_xpos (2 nwrap,) hold MuJoCo's layout: per tendon
  from ten_wrapadr, ten_wrapnum entries: -2 for a pulley, -1 for a site, the geom id for the two
  tangent points of an active wrap; entries past the used ones are zero. Side sites follow
  MuJoCo 4 (the tendon winds around the geom like the polyline through the side site).
  """
  if not m.ntendon:
    return d
  path = parse(m)
  dtype = d.qpos.dtype
  nten, nv = m.ntendon, m.nv
  length = jnp.zeros(nten, dtype=dtype)
  ten_j = jnp.zeros((nten, nv), dtype=dtype)

  if path.fixed_tendon.size:
    coef = m.wrap_prm[path.fixed_coef_idx]
    qadr = np.asarray(m.jnt_qposadr)[path.fixed_jnt]
    dofadr = np.asarray(m.jnt_dofadr)[path.fixed_jnt]
    length = length.at[path.fixed_tendon].add(coef * d.qpos[qadr])
    ten_j = ten_j.at[path.fixed_tendon, dofadr].add(coef)

  # straight pieces (p0 on body b0, p1 on b1, weight, tendon) whose moments are summed into ten_J
  site_bodyid, geom_bodyid = np.asarray(m.site_bodyid), np.asarray(m.geom_bodyid)
  pieces = []
  nitem = len(path.item_tendon)
  count = jnp.ones(nitem, dtype=jnp.int32)
  for g in (path.sites, path.geoms):
    if g is None:
      continue
    x0, x1 = d.site_xpos[g.site0], d.site_xpos[g.site1]
    b0, b1 = site_bodyid[g.site0], site_bodyid[g.site1]
    inv = inv_divisor(m, g, dtype)
    seg_len = math.safe_norm(x1 - x0)
    if g is path.sites:
      pieces.append((x0, b0, x1, b1, inv, g.tendon))
    else:
      wlen, w0, w1 = geom_wrap(m, d, g)
      wrapped = wlen >= 0
      bg = geom_bodyid[g.geom]
      wrap_len = math.safe_norm(w0 - x0) + wlen + math.safe_norm(x1 - w1)
      seg_len = jnp.where(wrapped, wrap_len, seg_len)
      # unwrapped: the straight segment; wrapped: site to tangent point and back (the arc
      # between the tangent points lies on one body and has no moment)
      on, off = jnp.where(wrapped, inv, 0.0), jnp.where(wrapped, 0.0, inv)
      pieces.append((x0, b0, x1, b1, off, g.tendon))
      pieces.append((x0, b0, w0, bg, on, g.tendon))
      pieces.append((w1, bg, x1, b1, on, g.tendon))
      count = count.at[g.item].set(jnp.where(wrapped, 3, 1).astype(jnp.int32))
    length = length.at[g.tendon].add(seg_len * inv)

  if pieces:
    p0, b0, p1, b1, weight, ten = (
      jnp.concatenate(x) if isinstance(x[0], jax.Array) else np.concatenate(x)
      for x in zip(*pieces, strict=True)
    )
    jac, _ = kinematics.jac_batch(m, d, jnp.concatenate([p0, p1]), jnp.concatenate([b0, b1]))
    n = len(b0)
    dif, _ = math.normalize3(p1 - p0)
    rows = jnp.einsum('ni,nij->nj', dif, jac[n:] - jac[:n])
    # MuJoCo skips points on the same body: their distance cannot change
    rows = jnp.where((b0 != b1)[:, None], rows * weight[:, None], 0.0)
    ten_j = ten_j.at[ten].add(rows)

  # wrap path: each item starts after all earlier items' points (MuJoCo's running wrapcount)
  nslot = 2 * m.nwrap
  wrap_obj = jnp.zeros(nslot, dtype=jnp.int32)
  wrap_xpos = jnp.zeros((nslot, 3), dtype=dtype)
  ten_wrapnum = jnp.zeros(nten, dtype=jnp.int32)
  ten_wrapadr = jnp.zeros(nten, dtype=jnp.int32)
  if nitem:
    start = jnp.cumsum(count) - count
    kind = path.item_kind
    pulley, last = np.flatnonzero(kind == 0), np.flatnonzero(kind == 2)
    wrap_obj = wrap_obj.at[start[pulley]].set(-2)
    wrap_obj = wrap_obj.at[start[last]].set(-1)
    wrap_xpos = wrap_xpos.at[start[last]].set(d.site_xpos[path.item_site[last]])
    for g in (path.sites, path.geoms):
      if g is None:
        continue
      adr = start[g.item]
      wrap_obj = wrap_obj.at[adr].set(-1)
      wrap_xpos = wrap_xpos.at[adr].set(d.site_xpos[g.site0])
    if path.geoms is not None:
      # the tangent points go to the next two slots only when the wrap happens
      g = path.geoms
      adr = start[g.item]
      for k, pnt in ((1, w0), (2, w1)):
        slot = jnp.where(wrapped, adr + k, nslot)
        wrap_obj = wrap_obj.at[slot].set(jnp.asarray(g.geom, dtype=jnp.int32), mode='drop')
        wrap_xpos = wrap_xpos.at[slot].set(pnt, mode='drop')
    ten_wrapnum = jax.ops.segment_sum(count, jnp.asarray(path.item_tendon), nten)
  ten_wrapadr = jnp.cumsum(ten_wrapnum) - ten_wrapnum
  return d.replace(
    ten_length=length,
    ten_J=ten_j,
    ten_wrapadr=ten_wrapadr.astype(jnp.int32),
    ten_wrapnum=ten_wrapnum.astype(jnp.int32),
    wrap_obj=wrap_obj,
    wrap_xpos=wrap_xpos,
  )


# ------------------------------------------------------------------ Jacobian rate and bias


def _point_vel(m: Model, d: Data, point: jax.Array, body: np.ndarray) -> jax.Array:
  """World linear velocity (n, 3) of points fixed to bodies (mj_objectVelocity, global)."""
  cvel = d.cvel[body]
  offset = point - d.subtree_com[np.asarray(m.body_rootid)[body]]
  return cvel[:, 3:] + jnp.cross(cvel[:, :3], offset)


def _jac_dot(m: Model, d: Data, point: jax.Array, body: np.ndarray) -> jax.Array:
  """Translational Jacobian time derivatives (n, 3, nv) of points fixed to bodies (mj_jacDot)."""
  jid = np.asarray(m.dof_jntid)
  jt = np.asarray(m.jnt_type)[jid]
  k = np.arange(m.nv) - np.asarray(m.jnt_dofadr)[jid]
  quat = (jt == int(JointType.BALL)) | ((jt == int(JointType.FREE)) & (k >= 3))
  cdof_dot = d.cdof_dot
  if quat.any():
    # quaternion dofs use the velocity of their own body, as mj_jacDot does
    own = math.cross_motion(d.cvel[np.asarray(m.dof_bodyid)], d.cdof)
    cdof_dot = jnp.where(quat[:, None], own, cdof_dot)
  mask = kinematics.tree_rows(m, body, d.cdof.dtype)  # (n, nv)
  offset = point - d.subtree_com[np.asarray(m.body_rootid)[body]]
  pvel = _point_vel(m, d, point, body)
  jd = (
    cdof_dot[None, :, 3:]
    + jnp.cross(cdof_dot[None, :, :3], offset[:, None, :])
    + jnp.cross(d.cdof[None, :, :3], pvel[:, None, :])
  )
  return jnp.swapaxes(jd * mask[:, :, None], 1, 2)


def tendon_dot(m: Model, d: Data) -> jax.Array:
  """Time derivative of ten_J, (ntendon, nv) (mj_tendonDot, for all tendons at once).

  Needs tendon's inputs and com_vel. Fixed tendons have a constant Jacobian. Like mj_tendonDot
  this covers straight site-site segments only: MuJoCo raises an error on geom wrapping (and its
  compiler rejects armature on such tendons), here wrapped segments contribute nothing.
  """
  dtype = d.qpos.dtype
  out = jnp.zeros((m.ntendon, m.nv), dtype=dtype)
  if not m.ntendon or not m.nv:
    return out
  g = parse(m).sites
  if g is None:
    return out
  site_bodyid = np.asarray(m.site_bodyid)
  b0, b1 = site_bodyid[g.site0], site_bodyid[g.site1]
  x0, x1 = d.site_xpos[g.site0], d.site_xpos[g.site1]
  dpnt, norm = math.normalize3(x1 - x0)
  dvel = _point_vel(m, d, x1, b1) - _point_vel(m, d, x0, b0)
  dvel = dvel - dpnt * jnp.sum(dpnt * dvel, axis=-1, keepdims=True)
  dvel = dvel * jnp.where(norm > MINVAL, _div(1.0, norm), 0.0)[:, None]
  jd = _jac_dot(m, d, x1, b1) - _jac_dot(m, d, x0, b0)
  jac0, _ = kinematics.jac_batch(m, d, x0, jnp.asarray(b0))
  jac1, _ = kinematics.jac_batch(m, d, x1, jnp.asarray(b1))
  rows = jnp.einsum('ni,nij->nj', dpnt, jd) + jnp.einsum('ni,nij->nj', dvel, jac1 - jac0)
  rows = jnp.where((b0 != b1)[:, None], rows, 0.0) * inv_divisor(m, g, dtype)[:, None]
  return out.at[g.tendon].add(rows)


def tendon_bias(m: Model, d: Data) -> jax.Array:
  """Bias force (nv,) of tendon armature: ten_J^T armature (ten_Jdot qvel) (mj_tendonBias)."""
  if not m.ntendon or not m.nv:
    return jnp.zeros(m.nv, dtype=d.qvel.dtype)
  coef = tendon_armature(m) * (tendon_dot(m, d) @ d.qvel)
  return d.ten_J.T @ coef

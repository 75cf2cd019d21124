"""Constraint rows in fixed slots: equality, friction loss, limits and contacts (mj_makeConstraint).

Every row MuJoCo could instantiate has a slot, in MuJoCo's row order (the Model's static layout,
layout.py); a row that MuJoCo would not instantiate at this state is inactive: `efc_active`
False, zero Jacobian, zero D, zero aref. Rows of one kind are built together with static NumPy
index arrays and scattered into their slots. Mirrors MuJoCo 4.0's engine_core_constraint.c:
mj_instantiateEquality, mj_instantiateFriction, mj_instantiateLimit, mj_instantiateContact,
mj_diagApprox, mj_makeImpedance and mj_referenceConstraint (with mj_Jdotv).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import kinematics, math, sparse
from jaxsim._src.enums import (
  MAXIMP,
  MINIMP,
  MINVAL,
  ConeType,
  ConstraintType,
  DisableBit,
  EqType,
  JointType,
  ObjType,
)
from jaxsim._src.layout import Layout, layout_of
from jaxsim._src.types import Data, Model

# ------------------------------------------------------------------------------ helpers


def _quat_mul_axis(q: jax.Array, axis: jax.Array) -> jax.Array:
  """q * (0, axis) (mju_mulQuatAxis)."""
  return math.quat_mul(q, jnp.concatenate([jnp.zeros_like(axis[..., :1]), axis], axis=-1))


def _deriv_quat(q: jax.Array, vel: jax.Array) -> jax.Array:
  """Time derivative of q under world angular velocity vel: 0.5 (0, vel) * q (mju_derivQuat)."""
  w = jnp.zeros_like(vel[..., :1])
  return 0.5 * math.quat_mul(jnp.concatenate([w, vel], axis=-1), q)


def _eq_info(m: Model, ids: np.ndarray):
  """Static per-equality arrays: site semantics, body ids and site ids of both sides."""
  site = np.asarray(m.eq_objtype)[ids] == ObjType.SITE
  o1, o2 = np.asarray(m.eq_obj1id)[ids], np.asarray(m.eq_obj2id)[ids]
  sb = np.asarray(m.site_bodyid)
  b1 = np.where(site, sb[np.where(site, o1, 0)] if m.nsite else 0, o1)
  b2 = np.where(site, sb[np.where(site, o2, 0)] if m.nsite else 0, o2)
  s1, s2 = np.where(site, o1, 0), np.where(site, o2, 0)
  return site, b1, b2, s1, s2


def _eq_anchors(m: Model, d: Data, ids: np.ndarray, weld: bool):
  """Global anchor points (n, 3) of connect/weld constraints (mj_equalityAnchors)."""
  site, b1, b2, s1, s2 = _eq_info(m, ids)
  data = m.eq_data[ids]
  # connect: data[0:3] on body 1, data[3:6] on body 2; weld the other way round
  a1, a2 = (data[:, 3:6], data[:, 0:3]) if weld else (data[:, 0:3], data[:, 3:6])
  p1 = d.xpos[b1] + jnp.einsum('nij,nj->ni', d.xmat[b1], a1)
  p2 = d.xpos[b2] + jnp.einsum('nij,nj->ni', d.xmat[b2], a2)
  if site.any():
    p1 = jnp.where(site[:, None], d.site_xpos[s1], p1)
    p2 = jnp.where(site[:, None], d.site_xpos[s2], p2)
  return p1, p2, b1, b2


def weld_quats(m: Model, d: Data, ids: np.ndarray):
  """q0 * relpose (or q0 * site quat) and the frame quaternion of side 1 of welds (n, 4)."""
  site, b1, b2, s1, s2 = _eq_info(m, ids)
  q0 = d.xquat[b1]
  q1 = d.xquat[b2]
  quat = math.quat_mul(q0, m.eq_data[ids, 6:10])
  if site.any():
    sq = site[:, None]
    quat = jnp.where(sq, math.quat_mul(q0, m.site_quat[s1]), quat)
    q1 = jnp.where(sq, math.quat_mul(q1, m.site_quat[s2]), q1)
    q0 = jnp.where(sq, math.quat_mul(q0, m.site_quat[s1]), q0)
  return quat, q0, q1, site


def _impedance(solimp: jax.Array, pos: jax.Array, margin: jax.Array):
  """Impedance and its derivative (getimpedance), solimp (n, 5) already clamped."""
  dmin, dmax, width, mid, power = (solimp[:, k] for k in range(5))
  flat = (dmin == dmax) | (width <= MINVAL)
  x = (pos - margin) / jnp.where(flat, 1.0, width)
  sgn = jnp.where(x < 0, -1.0, 1.0)
  x = jnp.abs(x)
  sat = (x >= 1) | (x <= 0)
  xs = jnp.where(sat, 0.5, x)  # keeps the powers below finite where they are not used

  def pw(a, b):
    # power(): exact for the common powers 1 and 2
    return jnp.where(b == 1, a, jnp.where(b == 2, a * a, jnp.power(a, b)))

  a = 1 / pw(mid, power - 1)
  b = 1 / pw(1 - mid, power - 1)
  low = xs <= mid
  y = jnp.where(low, a * pw(xs, power), 1 - b * pw(1 - xs, power))
  yp = jnp.where(low, power * a * pw(xs, power - 1), power * b * pw(1 - xs, power - 1))
  lin = power == 1
  y, yp = jnp.where(lin, xs, y), jnp.where(lin, 1.0, yp)
  imp = jnp.where(sat, jnp.where(x >= 1, dmax, dmin), dmin + y * (dmax - dmin))
  impp = jnp.where(sat, 0.0, yp * sgn * (dmax - dmin) / jnp.where(flat, 1.0, width))
  imp = jnp.where(flat, 0.5 * (dmin + dmax), imp)
  return imp, jnp.where(flat, 0.0, impp)


def _solparams(m: Model, solref: jax.Array, solreffriction: jax.Array, solimp: jax.Array):
  """Checked solref, solreffriction and clamped solimp (getsolparam), all rows at once."""
  dt = m.opt.timestep
  refsafe = not m.opt.disableflags & DisableBit.REFSAFE
  mixed = (solref[:, 0] > 0) ^ (solref[:, 1] > 0)
  default = jnp.array([0.02, 1.0], dtype=solref.dtype)
  solref = jnp.where(mixed[:, None], default, solref)
  if refsafe:
    solref = solref.at[:, 0].set(
      jnp.where(solref[:, 0] > 0, jnp.maximum(solref[:, 0], 2 * dt), solref[:, 0])
    )
  mixed = (solreffriction[:, 0] > 0) ^ (solreffriction[:, 1] > 0)
  solreffriction = jnp.where(mixed[:, None], 0.0, solreffriction)
  if refsafe:
    f0 = solreffriction[:, 0]
    solreffriction = solreffriction.at[:, 0].set(jnp.where(f0 > 0, jnp.maximum(f0, 2 * dt), f0))
  clamp = lambda v: jnp.clip(v, MINIMP, MAXIMP)  # noqa: E731
  solimp = jnp.stack(
    [
      clamp(solimp[:, 0]),
      clamp(solimp[:, 1]),
      jnp.maximum(0.0, solimp[:, 2]),
      clamp(solimp[:, 3]),
      jnp.maximum(1.0, solimp[:, 4]),
    ],
    axis=-1,
  )
  return solref, solreffriction, solimp


def _kb(ref: jax.Array, dmax: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Stiffness K and damping B from solref in standard or direct form (mj_makeImpedance)."""
  k = jnp.where(
    ref[:, 0] > 0,
    1 / jnp.maximum(MINVAL, dmax * dmax * ref[:, 0] * ref[:, 0] * ref[:, 1] * ref[:, 1]),
    -ref[:, 0] / jnp.maximum(MINVAL, dmax * dmax),
  )
  b = jnp.where(
    ref[:, 1] > 0,
    2 / jnp.maximum(MINVAL, dmax * ref[:, 0]),
    -ref[:, 1] / jnp.maximum(MINVAL, dmax),
  )
  return k, b


class RowBuffer:
  """Per-row values of each kind, gathered and scattered into their slots once per field.

  The Jacobian 'j' has nv columns (dense), or `width` compact entries on the chains of the
  row's two bodies 'body' (sparse.py; a row of one body has the world as its second).
  """

  SHAPES = {
    'j': None,
    'body': (2,),
    'pos': (),
    'margin': (),
    'frictionloss': (),
    'diag': (),  # mj_diagApprox
    'imppos': (),  # pos and margin the impedance is evaluated at (getposdim)
    'impmargin': (),
    'solref': (2,),
    'solreffriction': (2,),
    'solimp': (5,),
    'active': (),
  }

  MAX_RUNS = 64  # beyond this many runs of consecutive rows, `get` scatters

  def __init__(self, nefc: int, nv: int, dtype, width: int = 0):
    self.nefc, self.nv, self.dtype, self.width = nefc, nv, dtype, width
    self.parts: dict[str, list] = {k: [] for k in self.SHAPES}

  def _tail(self, name: str) -> tuple[int, ...]:
    if name == 'j':
      return (self.width or self.nv,)
    return (2 if self.width else 0,) if name == 'body' else self.SHAPES[name]

  def _dtype(self, name: str):
    return {'active': bool, 'body': jnp.int32}.get(name, self.dtype)

  def set(self, rows: np.ndarray, **values):
    """Values (n, k, ...) or broadcastable to it, for rows (n, k) or (n,)."""
    for name, v in values.items():
      tail = self._tail(name)
      v = jnp.broadcast_to(jnp.asarray(v, self._dtype(name)), rows.shape + tail)
      self.parts[name].append((rows.reshape(-1), v.reshape((-1,) + tail)))

  def get(self, name: str, mask: jax.Array | None = None) -> jax.Array:
    """The field over all rows, zero (False) where no kind set it, and where `mask` (nefc,) is
    False (applied to each part before they are joined: no unmasked copy of a (nefc, nv) field
    is stored)."""
    tail = self._tail(name)

    def masked(v, rows):
      if mask is None:
        return v
      keep = mask[rows].reshape(rows.shape + (1,) * len(tail))
      return jnp.where(keep, v, jnp.zeros((), v.dtype))

    dtype = self._dtype(name)
    parts = self.parts[name]
    if not parts:
      return jnp.zeros((self.nefc,) + tail, dtype)
    rows = np.concatenate([p[0] for p in parts])
    if np.array_equal(np.sort(rows), np.arange(self.nefc)):
      # every row set once (the usual case): the parts' runs of consecutive rows concatenated in
      # row order, rather than a zero-filled copy scattered into (one more (nefc, nv) buffer)
      runs = []
      for k, (r, _) in enumerate(parts):
        cut = np.flatnonzero(np.diff(r) != 1) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(r)], strict=True):
          runs.append((int(r[lo]), k, int(lo), int(hi)))
      if len(runs) <= self.MAX_RUNS:
        runs.sort()
        pieces = [
          masked(parts[k][1][lo:hi], np.arange(start, start + hi - lo)) for start, k, lo, hi in runs
        ]
        return pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces)
    vals = masked(jnp.concatenate([p[1] for p in parts]), rows)
    return jnp.zeros((self.nefc,) + tail, dtype).at[rows].set(vals, unique_indices=True)


def _one_body(m: Model, dof: np.ndarray) -> np.ndarray:
  """The bodies (n, 2) of compact rows on one dof each: the dof's body and the world."""
  return np.stack([np.asarray(m.dof_bodyid)[dof], np.zeros(len(dof), int)], axis=1)


def _one_dof_rows(
  m: Model, lay: Layout, dof: np.ndarray, value: jax.Array, width: int | None = None
) -> jax.Array:
  """Compact rows (n, width) with `value` (n,) at dof (n,) of its body's chain (_one_body);
  width: lay.efc_width (whole rows), or a chain's C (one half, for sparse.merge)."""
  k = sparse.chain_position(lay.body_dofs, np.asarray(m.dof_bodyid)[dof], dof)
  width = lay.efc_width if width is None else width
  return jnp.zeros((len(dof), width), value.dtype).at[np.arange(len(dof)), k].set(value)


def _first_rows(lay: Layout, typ: int, ids: np.ndarray) -> np.ndarray:
  """First row of each object id of one constraint type."""
  rows = np.flatnonzero(lay.type == typ)
  first = rows[np.r_[True, lay.id[rows][1:] != lay.id[rows][:-1]]] if rows.size else rows
  lookup = dict(zip(lay.id[first].tolist(), first.tolist(), strict=True))
  return np.asarray([lookup[int(i)] for i in ids], dtype=np.int64)


# ------------------------------------------------------------------------------ row kinds


def _equality(m: Model, d: Data, lay: Layout, r: RowBuffer) -> None:
  """Connect, weld, joint and tendon equality rows (mj_instantiateEquality)."""
  eq_rows = np.arange(lay.ne)
  eq_ids = np.unique(lay.id[eq_rows])
  eq_type = np.asarray(m.eq_type)
  eq_active = jnp.asarray(d.eq_active, bool)
  iw = m.body_invweight0

  ids = eq_ids[eq_type[eq_ids] == EqType.CONNECT]
  if ids.size:
    rows = _first_rows(lay, ConstraintType.EQUALITY, ids)[:, None] + np.arange(3)
    p1, p2, b1, b2 = _eq_anchors(m, d, ids, weld=False)
    if lay.efc_width:
      jp1, _, c1 = kinematics.jac_compact(m, d, p1, jnp.asarray(b1), lay.body_dofs)
      jp2, _, c2 = kinematics.jac_compact(m, d, p2, jnp.asarray(b2), lay.body_dofs)
      jac = sparse.merge(c1, jp1, c2, -jp2)
      r.set(rows, body=np.stack([b1, b2], axis=1)[:, None])
    else:
      jp1, _ = kinematics.jac_batch(m, d, p1, jnp.asarray(b1))
      jp2, _ = kinematics.jac_batch(m, d, p2, jnp.asarray(b2))
      jac = jp1 - jp2
    cpos = p1 - p2
    active = eq_active[ids] & jnp.any(jac != 0, axis=(1, 2))
    r.set(rows, j=jac, pos=cpos, active=jnp.broadcast_to(active[:, None], rows.shape))
    r.set(rows, diag=(iw[b1, 0] + iw[b2, 0])[:, None], imppos=math.safe_norm(cpos)[:, None])
    r.set(rows, solref=m.eq_solref[ids][:, None], solimp=m.eq_solimp[ids][:, None])

  ids = eq_ids[eq_type[eq_ids] == EqType.WELD]
  if ids.size:
    rows = _first_rows(lay, ConstraintType.EQUALITY, ids)[:, None] + np.arange(6)
    p1, p2, b1, b2 = _eq_anchors(m, d, ids, weld=True)
    if lay.efc_width:
      jp1, jr1, c1 = kinematics.jac_compact(m, d, p1, jnp.asarray(b1), lay.body_dofs)
      jp2, jr2, c2 = kinematics.jac_compact(m, d, p2, jnp.asarray(b2), lay.body_dofs)
      both = jnp.concatenate([jp1, jr1], axis=1), -jnp.concatenate([jp2, jr2], axis=1)
      dif = sparse.merge(c1, both[0], c2, both[1])  # jac1 - jac2 on both chains
      dp, dr = dif[:, :3], dif[:, 3:]
      r.set(rows, body=np.stack([b1, b2], axis=1)[:, None])
    else:
      jp1, jr1 = kinematics.jac_batch(m, d, p1, jnp.asarray(b1))
      jp2, jr2 = kinematics.jac_batch(m, d, p2, jnp.asarray(b2))
      dp, dr = jp1 - jp2, jr1 - jr2
    torquescale = m.eq_data[ids, 10]
    quat, _, q1, _ = weld_quats(m, d, ids)
    neg1 = math.quat_neg(q1)
    crot = math.quat_mul(neg1, quat)[:, 1:] * torquescale[:, None]
    # rotation Jacobian: 0.5 * neg(q1) * (jac0 - jac1) * q0 * relpose, column by column
    axis = jnp.swapaxes(dr, 1, 2)  # (n, nv, 3)
    q3 = math.quat_mul(_quat_mul_axis(neg1[:, None], axis), quat[:, None])
    jrot = jnp.swapaxes(0.5 * q3[..., 1:], 1, 2) * torquescale[:, None, None]
    jac = jnp.concatenate([dp, jrot], axis=1)
    cpos = jnp.concatenate([p1 - p2, crot], axis=1)
    active = eq_active[ids] & jnp.any(jac != 0, axis=(1, 2))
    diag = jnp.concatenate(
      [
        jnp.repeat((iw[b1, 0] + iw[b2, 0])[:, None], 3, 1),
        jnp.repeat((iw[b1, 1] + iw[b2, 1])[:, None], 3, 1),
      ],
      axis=1,
    )
    r.set(rows, j=jac, pos=cpos, active=jnp.broadcast_to(active[:, None], rows.shape))
    r.set(rows, diag=diag, imppos=math.safe_norm(cpos)[:, None])
    r.set(rows, solref=m.eq_solref[ids][:, None], solimp=m.eq_solimp[ids][:, None])

  for kind in (EqType.JOINT, EqType.TENDON):
    ids = eq_ids[eq_type[eq_ids] == kind]
    if not ids.size:
      continue
    rows = _first_rows(lay, ConstraintType.EQUALITY, ids)
    o1, o2 = np.asarray(m.eq_obj1id)[ids], np.asarray(m.eq_obj2id)[ids]
    has2 = o2 >= 0
    o2c = np.where(has2, o2, o1)
    if kind == EqType.JOINT:
      qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
      pos1, ref1 = d.qpos[qadr[o1]], m.qpos0[qadr[o1]]
      pos2, ref2 = d.qpos[qadr[o2c]], m.qpos0[qadr[o2c]]
      if lay.efc_width:
        # one entry each: the joints' dofs in their bodies' chains
        j1 = j2 = jnp.ones((len(ids), 1), r.dtype)
      else:
        eye = jnp.eye(m.nv, dtype=r.dtype)
        j1, j2 = eye[dadr[o1]], eye[dadr[o2c]]
      w1, w2 = m.dof_invweight0[dadr[o1]], m.dof_invweight0[dadr[o2c]]
    else:
      pos1, ref1 = d.ten_length[o1], m.tendon_length0[o1]
      pos2, ref2 = d.ten_length[o2c], m.tendon_length0[o2c]
      j1, j2 = d.ten_J[o1], d.ten_J[o2c]
      w1, w2 = m.tendon_invweight0[o1], m.tendon_invweight0[o2c]
    data = m.eq_data[ids]
    dif = pos2 - ref2
    poly = (
      data[:, 1] * dif
      + data[:, 2] * dif * dif
      + data[:, 3] * dif * dif * dif
      + data[:, 4] * dif * dif * dif * dif
    )
    deriv = data[:, 1] + 2 * data[:, 2] * dif + 3 * data[:, 3] * dif * dif
    deriv = deriv + 4 * data[:, 4] * dif * dif * dif
    cpos = pos1 - ref1 - data[:, 0] - jnp.where(has2, poly, 0.0)
    if lay.efc_width:  # joint kind only (tendon rows keep efc_J dense: layout.efc_width)
      chain, width = lay.body_dofs, lay.body_dofs.shape[1]
      db = np.asarray(m.dof_bodyid)
      d1, d2 = dadr[o1], dadr[o2c]
      v1 = _one_dof_rows(m, lay, d1, j1[:, 0], width)[:, None]
      v2 = _one_dof_rows(m, lay, d2, -(jnp.where(has2, deriv, 0.0) * j2[:, 0]), width)[:, None]
      jac = sparse.merge(jnp.asarray(chain[db[d1]]), v1, jnp.asarray(chain[db[d2]]), v2)[:, 0]
      r.set(rows, body=np.stack([db[d1], db[d2]], axis=1))
    else:
      jac = j1 - jnp.where(has2, deriv, 0.0)[:, None] * j2
    diag = w1 + jnp.where(has2, w2, 0.0)
    active = eq_active[ids] & jnp.any(jac != 0, axis=1)
    r.set(rows, j=jac, pos=cpos, imppos=cpos, diag=diag, active=active)
    r.set(rows, solref=m.eq_solref[ids], solimp=m.eq_solimp[ids])


def _friction(m: Model, d: Data, lay: Layout, r: RowBuffer) -> None:
  """Friction loss rows of dofs and tendons (mj_instantiateFriction)."""
  rows = np.flatnonzero(lay.type == ConstraintType.FRICTION_DOF)
  if rows.size:
    ids = lay.id[rows]
    fl = m.dof_frictionloss[ids]
    if lay.efc_width:
      r.set(rows, j=_one_dof_rows(m, lay, ids, jnp.ones(len(ids), r.dtype)))
      r.set(rows, body=_one_body(m, ids))
    else:
      r.set(rows, j=jnp.eye(m.nv, dtype=r.dtype)[ids])
    r.set(rows, frictionloss=fl, active=fl != 0)
    r.set(rows, diag=m.dof_invweight0[ids], solref=m.dof_solref[ids], solimp=m.dof_solimp[ids])
  rows = np.flatnonzero(lay.type == ConstraintType.FRICTION_TENDON)
  if rows.size:
    ids = lay.id[rows]
    fl = m.tendon_frictionloss[ids]
    jac = d.ten_J[ids]
    r.set(rows, j=jac, frictionloss=fl, active=(fl > 0) & jnp.any(jac != 0, axis=1))
    r.set(rows, diag=m.tendon_invweight0[ids])
    r.set(rows, solref=m.tendon_solref_fri[ids], solimp=m.tendon_solimp_fri[ids])


def _side(lay: Layout, rows: np.ndarray) -> np.ndarray:
  """-1 for the lower-limit row of a two-sided limit, +1 for the upper one."""
  ids = lay.id[rows]
  first = np.r_[True, ids[1:] != ids[:-1]]
  return np.where(first, -1.0, 1.0)


def _limit(m: Model, d: Data, lay: Layout, r: RowBuffer) -> None:
  """Joint and tendon limit rows (mj_instantiateLimit)."""
  rows = np.flatnonzero(lay.type == ConstraintType.LIMIT_JOINT)
  if rows.size:
    ids = lay.id[rows]
    jt = np.asarray(m.jnt_type)[ids]
    qadr, dadr = np.asarray(m.jnt_qposadr)[ids], np.asarray(m.jnt_dofadr)[ids]
    eye = jnp.eye(m.nv, dtype=r.dtype)
    rng = m.jnt_range[ids]
    sel = (jt == JointType.SLIDE) | (jt == JointType.HINGE)
    if sel.any():
      rw, i, side = rows[sel], ids[sel], _side(lay, rows[sel])
      value = d.qpos[qadr[sel]]
      lim = jnp.where(side > 0, rng[sel, 1], rng[sel, 0])
      dist = side * (lim - value)
      margin = m.jnt_margin[i]
      if lay.efc_width:
        r.set(rw, j=_one_dof_rows(m, lay, dadr[sel], jnp.asarray(-side, r.dtype)))
        r.set(rw, body=_one_body(m, dadr[sel]))
      else:
        r.set(rw, j=-side[:, None] * eye[dadr[sel]])
      r.set(rw, pos=dist, imppos=dist, active=dist < margin)
      r.set(rw, margin=margin, impmargin=margin)
    sel = jt == JointType.BALL
    if sel.any():
      rw, i = rows[sel], ids[sel]
      quat = math.quat_normalize(d.qpos[qadr[sel, None] + np.arange(4)])
      axis, value = math.normalize3(math.quat_to_vel(quat))
      dist = jnp.maximum(rng[sel, 0], rng[sel, 1]) - value
      cols = dadr[sel, None] + np.arange(3)
      if lay.efc_width:
        jac = sum(_one_dof_rows(m, lay, cols[:, k], -axis[:, k]) for k in range(3))
        r.set(rw, body=_one_body(m, cols[:, 0]))
      else:
        jac = jnp.zeros((len(rw), m.nv), r.dtype).at[np.arange(len(rw))[:, None], cols].set(-axis)
      margin = m.jnt_margin[i]
      active = (dist < margin) & jnp.any(jac != 0, axis=1)
      r.set(rw, j=jac, pos=dist, imppos=dist, active=active, margin=margin, impmargin=margin)
    r.set(rows, diag=m.dof_invweight0[dadr], solref=m.jnt_solref[ids], solimp=m.jnt_solimp[ids])
  rows = np.flatnonzero(lay.type == ConstraintType.LIMIT_TENDON)
  if rows.size:
    ids, side = lay.id[rows], _side(lay, rows)
    rng = m.tendon_range[ids]
    dist = side * (jnp.where(side > 0, rng[:, 1], rng[:, 0]) - d.ten_length[ids])
    jac = -side[:, None] * d.ten_J[ids]
    margin = m.tendon_margin[ids]
    active = (dist < margin) & jnp.any(jac != 0, axis=1)
    r.set(rows, j=jac, pos=dist, imppos=dist, active=active, margin=margin, impmargin=margin)
    r.set(rows, diag=m.tendon_invweight0[ids])
    r.set(rows, solref=m.tendon_solref_lim[ids], solimp=m.tendon_solimp_lim[ids])


def _contact(m: Model, d: Data, lay: Layout, r: RowBuffer) -> tuple[jax.Array, jax.Array]:
  """Contact rows of every slot (mj_instantiateContact, mj_contactJacobian); slot activity and
  which active slots hold an adhesive contact in its gap band (tether), both (ncon,).

  A tether is a condim-1 contact in MuJoCo (mj_setContact): its slot's first row is the normal
  row (a pyramid edge with zero friction), the slot's other rows are inactive.
  """
  con = d.contact
  slots = np.flatnonzero(lay.contact_nrow > 0)
  none = jnp.zeros(len(lay.contact_dim), bool)
  if not slots.size:
    return none, none
  # a slot's geoms are Data's: fixed per slot, or whichever pair a capped slot holds
  gb = jnp.asarray(m.geom_bodyid)
  b1, b2 = gb[con.geom1[slots]], gb[con.geom2[slots]]
  pos = con.pos[slots]
  inside = con.dist[slots] < con.includemargin[slots]
  dims = lay.contact_dim[slots]
  adhesive = m.flg_adhesion
  if adhesive:
    # adhesive contacts stay in the constraint when separated within the gap band
    inside = inside | (con.adhesion[slots] != 0)
  active = con.active[slots] & inside
  tether = active & (con.dim[slots] < dims) if adhesive else jnp.zeros_like(active)
  frame = con.frame[slots]
  # contact frame rows: normal, tangents, then torsion and rolling (jacdif = jac2 - jac1)
  if lay.efc_width:
    jt, jr = kinematics.jac_dif_frame_compact(m, d, frame, pos, b1, b2, lay.body_dofs)
  else:
    jt, jr = kinematics.jac_dif_frame(m, d, frame, pos, b1, b2)

  def jc(s, lo, hi):
    """Frame rows lo:hi (of normal, 2 tangents, 3 rotational) of slots s: (len(s), hi-lo, nv)."""
    parts = [
      x
      for x in (jt[s, max(lo, 0) : min(hi, 3)], jr[s, max(lo - 3, 0) : max(hi - 3, 0)])
      if x.shape[1]
    ]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=1)

  iw = jnp.asarray(m.body_invweight0)
  tran, rot = iw[b1, 0] + iw[b2, 0], iw[b1, 1] + iw[b2, 1]
  dist, margin = con.dist[slots], con.includemargin[slots]
  fri = jnp.where(active[:, None], con.friction[slots], 1.0)
  pyramidal = m.opt.cone == ConeType.PYRAMIDAL
  for dim in np.unique(dims):
    s = np.flatnonzero(dims == dim)
    adr = lay.contact_efcadr[slots[s]]
    nrow = 2 * (dim - 1) if pyramidal and dim > 1 else dim
    rows = adr[:, None] + np.arange(nrow)
    act = jnp.broadcast_to(active[s, None], rows.shape)
    if adhesive and dim > 1:
      act = act & ((np.arange(nrow) == 0) | ~tether[s, None])
    dd, mm = dist[s, None], margin[s, None]
    if lay.efc_width:
      r.set(rows, body=jnp.stack([b1[s], b2[s]], axis=1)[:, None])
    if dim == 1 or not pyramidal:
      jac = jc(s, 0, dim)
      first = np.arange(dim) == 0
      r.set(rows, j=jac, pos=jnp.where(first, dd, 0.0), margin=jnp.where(first, mm, 0.0))
      diag = jnp.where(np.arange(dim) < 3, tran[s, None], rot[s, None])
    else:
      f = fri[s, : dim - 1]  # (n, dim-1)
      if adhesive:
        f = jnp.where(tether[s, None], 0.0, f)  # a tether's edge row is the normal row
      edge = f[:, :, None] * jc(s, 1, dim)  # (n, dim-1, nv)
      normal = jc(s, 0, 1)
      jac = jnp.stack([normal + edge, normal - edge], axis=2).reshape(len(s), nrow, -1)
      r.set(rows, j=jac, pos=dd, margin=mm)
      other = jnp.where(np.arange(dim - 1) < 2, tran[s, None], rot[s, None])
      diag = jnp.repeat(tran[s, None] + f * f * other, 2, axis=1)
    r.set(rows, diag=diag, imppos=dd, impmargin=mm, active=act)
    r.set(rows, solref=con.solref[slots[s]][:, None], solimp=con.solimp[slots[s]][:, None])
    r.set(rows, solreffriction=con.solreffriction[slots[s]][:, None])
  return none.at[slots].set(active), none.at[slots].set(tether)


def adhesion_moment(m: Model, d: Data, body: np.ndarray) -> jax.Array:
  """Moment arms (len(body), nv) of body (adhesion) transmissions (mj_transmission, mjTRN_BODY).

  Minus the average, over the active contacts that touch the body (in the constraint or only in
  its margin gap), of the contact normal's Jacobian jac(body2) - jac(body1) at the contact point;
  zero without such contacts. MuJoCo reads the included contacts' rows from efc_J (the pyramid's
  edges averaged), which is the same normal row.
  """
  dtype = d.qpos.dtype
  lay = layout_of(m)
  g1s, g2s = lay.contact_geom1, lay.contact_geom2
  if not len(g1s) or not m.nv or m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
    return jnp.zeros((len(body), m.nv), dtype)
  gb = np.asarray(m.geom_bodyid)
  # slots that can hold a contact of these bodies: by their static geoms, every capped slot
  b1s = np.where(g1s >= 0, gb[np.maximum(g1s, 0)], -1)
  b2s = np.where(g2s >= 0, gb[np.maximum(g2s, 0)], -1)
  cand = (g1s < 0) | np.isin(b1s, body) | np.isin(b2s, body)
  slots = np.flatnonzero(cand)
  if not slots.size:
    return jnp.zeros((len(body), m.nv), dtype)
  con = d.contact
  gbj = jnp.asarray(gb)
  b1, b2 = gbj[jnp.maximum(con.geom1[slots], 0)], gbj[jnp.maximum(con.geom2[slots], 0)]
  jt, _ = kinematics.jac_dif_frame(m, d, con.frame[slots], con.pos[slots], b1, b2)
  normal = jt[:, 0]  # (n, nv)
  mine = (b1[None, :] == body[:, None]) | (b2[None, :] == body[:, None])
  on = con.active[slots][None, :] & mine
  counter = jnp.sum(on, axis=1)
  total = on.astype(dtype) @ normal
  return jnp.where(counter[:, None] > 0, -total / jnp.maximum(counter, 1)[:, None], 0.0)


# ------------------------------------------------------------------------------ stages


def make_constraint(m: Model, d: Data) -> Data:
  """Constraint rows, D, R and KBIP at the current positions (mj_makeConstraint).

  Sets efc_J (nefc, nv; or compact rows and efc_J_body: sparse.py), efc_pos, efc_margin,
  efc_frictionloss, efc_D, efc_R (nefc,), efc_KBIP (nefc, 4), efc_active, efc_type, efc_id
  (nefc,), contact.efc_address and contact.mu (ncon,). Needs kinematics, com_pos, tendon and
  collision.
  """
  lay = layout_of(m)
  nefc, dtype = lay.nefc, d.qpos.dtype
  ncon = len(lay.contact_dim)
  if not nefc:
    return d.replace(
      contact=d.contact.replace(
        efc_address=jnp.full(ncon, -1, jnp.int32), mu=jnp.zeros(ncon, dtype)
      )
    )
  r = RowBuffer(nefc, m.nv, dtype, lay.efc_width)
  if lay.ne:
    _equality(m, d, lay, r)
  _friction(m, d, lay, r)
  _limit(m, d, lay, r)
  con_active, tether = _contact(m, d, lay, r)

  solref, solreffriction, solimp = _solparams(
    m, r.get('solref'), r.get('solreffriction'), r.get('solimp')
  )
  imp, impp = _impedance(solimp, r.get('imppos'), r.get('impmargin'))
  R = jnp.maximum(MINVAL, (1 - imp) * r.get('diag') / imp)
  typ = lay.type
  ell = typ == ConstraintType.CONTACT_ELLIPTIC
  ell_fri = ell & np.r_[False, lay.id[1:] == lay.id[:-1]]
  use_fri = ell_fri & jnp.any(solreffriction != 0, axis=1)
  ref = jnp.where(use_fri[:, None], solreffriction, solref)
  k, b = _kb(ref, solimp[:, 1])
  no_k = (typ == ConstraintType.FRICTION_DOF) | (typ == ConstraintType.FRICTION_TENDON) | ell_fri
  k = jnp.where(no_k, 0.0, k)

  # frictional contacts: R of the friction directions from impratio, cone mu (mj_makeImpedance)
  mu = jnp.zeros(ncon, dtype)
  fric = np.flatnonzero((lay.contact_dim > 1) & (lay.contact_nrow > 0))
  if len(fric):
    adr, dims = lay.contact_efcadr[fric], lay.contact_dim[fric]
    friction = jnp.where(con_active[fric, None], d.contact.friction[fric], 1.0)
    r0 = R[adr]
    r1 = r0 / jnp.maximum(MINVAL, m.opt.impratio)
    mu_c = friction[:, 0] * jnp.sqrt(r1 / r0)
    # tethers are frictionless: no cone, R of their one row as a condim-1 contact's
    mu = mu.at[fric].set(jnp.where(con_active[fric] & ~tether[fric], mu_c, 0.0))
    if m.opt.cone == ConeType.PYRAMIDAL:
      rpy = jnp.where(tether[fric], r0, 2 * mu_c * mu_c * r0)
      for dim in np.unique(dims):
        s = np.flatnonzero(dims == dim)
        rows = adr[s, None] + np.arange(2 * (dim - 1))
        R = R.at[rows.reshape(-1)].set(jnp.repeat(rpy[s], 2 * (dim - 1)))
    else:
      R = R.at[adr + 1].set(r1)
      for dim in np.unique(dims):
        s = np.flatnonzero(dims == dim)
        if dim < 3:
          continue
        f = friction[s]
        rj = r1[s, None] * f[:, :1] * f[:, :1] / (f[:, 1 : dim - 1] * f[:, 1 : dim - 1])
        rows = adr[s, None] + np.arange(2, dim)
        R = R.at[rows.reshape(-1)].set(rj.reshape(-1))

  act = r.get('active')
  on = lambda x: jnp.where(act, x, 0.0)  # noqa: E731
  efc_type = jnp.asarray(lay.type, jnp.int32)
  if m.flg_adhesion and len(fric):
    # a tether's row is a frictionless contact row
    first = lay.contact_efcadr[fric]
    efc_type = efc_type.at[first].set(
      jnp.where(tether[fric], ConstraintType.CONTACT_FRICTIONLESS, lay.type[first])
    )
  kbip = jnp.stack([k, b, imp, impp], axis=-1) * act[:, None]
  con = d.contact.replace(
    efc_address=jnp.where(con_active, jnp.asarray(lay.contact_efcadr), -1).astype(jnp.int32),
    mu=mu,
  )
  return d.replace(
    efc_J=r.get('j', mask=act),
    efc_J_body=r.get('body'),
    efc_pos=on(r.get('pos')),
    efc_margin=on(r.get('margin')),
    efc_frictionloss=on(r.get('frictionloss')),
    efc_D=on(1 / R),
    efc_R=jnp.where(act, R, 1 / MINVAL),
    efc_KBIP=kbip,
    efc_active=act,
    efc_type=efc_type,
    efc_id=jnp.asarray(lay.id, jnp.int32),
    contact=con,
  )


def _jac_dot_v(m: Model, d: Data, point: jax.Array, body: np.ndarray):
  """Jdot * qvel of points fixed to bodies: translational and rotational (n, 3) (mj_jacDot)."""
  jid = np.asarray(m.dof_jntid)
  jt = np.asarray(m.jnt_type)[jid]
  k = np.arange(m.nv) - np.asarray(m.jnt_dofadr)[jid]
  quat = (jt == JointType.BALL) | ((jt == JointType.FREE) & (k >= 3))
  cdof_dot = d.cdof_dot
  if quat.any():
    # quaternion dofs: cdof_dot from the velocity of their own body, as mj_jacDot does
    own = math.cross_motion(d.cvel[np.asarray(m.dof_bodyid)], d.cdof)
    cdof_dot = jnp.where(quat[:, None], own, cdof_dot)
  mask = kinematics.tree_rows(m, body, d.qvel.dtype) * d.qvel  # (n, nv)
  offset = point - d.subtree_com[np.asarray(m.body_rootid)[body]]
  cvel = d.cvel[body]
  pvel = cvel[:, 3:] + jnp.cross(cvel[:, :3], offset)
  rot = mask @ cdof_dot[:, :3]
  tran = mask @ cdof_dot[:, 3:] + jnp.cross(rot, offset) + jnp.cross(mask @ d.cdof[:, :3], pvel)
  return tran, rot


def _jdotv(m: Model, d: Data, lay: Layout) -> jax.Array:
  """Jdot * qvel (nefc,) of connect and weld rows, zero elsewhere (mj_Jdotv)."""
  out = jnp.zeros(lay.nefc, d.qvel.dtype)
  eq_ids = np.unique(lay.id[: lay.ne])
  eq_type = np.asarray(m.eq_type)[eq_ids]
  for kind in (EqType.CONNECT, EqType.WELD):
    ids = eq_ids[eq_type == kind]
    if not ids.size:
      continue
    weld = kind == EqType.WELD
    first = _first_rows(lay, ConstraintType.EQUALITY, ids)
    p1, p2, b1, b2 = _eq_anchors(m, d, ids, weld=weld)
    t1, r1 = _jac_dot_v(m, d, p1, b1)
    t2, r2 = _jac_dot_v(m, d, p2, b2)
    out = out.at[first[:, None] + np.arange(3)].set(t1 - t2)
    if not weld:
      continue
    torquescale = m.eq_data[ids, 10]
    q0r, q0, q1, site = weld_quats(m, d, ids)
    neg1 = math.quat_neg(q1)
    om1, om2 = d.cvel[b1, :3], d.cvel[b2, :3]
    domega = om1 - om2
    qdot0r = _deriv_quat(q0, om1)
    qdot0r = jnp.where(site[:, None], qdot0r, math.quat_mul(qdot0r, m.eq_data[ids, 6:10]))
    negqdot1 = math.quat_neg(_deriv_quat(q1, om2))
    t1 = math.quat_mul(_quat_mul_axis(negqdot1, domega), q0r)
    t2 = math.quat_mul(_quat_mul_axis(neg1, r1 - r2), q0r)
    t3 = math.quat_mul(_quat_mul_axis(neg1, domega), qdot0r)
    rot = 0.5 * (t1 + t2 + t3)[:, 1:] * torquescale[:, None]
    out = out.at[first[:, None] + np.arange(3, 6)].set(rot)
  return out


def has_surfacevel(m: Model) -> bool:
  """Whether any geom has a surface velocity (static m.nsurfacevel)."""
  return m.nsurfacevel > 0


def _surface_vel(m: Model, d: Data, lay: Layout) -> jax.Array:
  """The contact rows' relative surface velocity (nefc,) to add to efc_vel (mj_addSurfaceVel).

  Each geom's material moves at geom_surfacevel (linear, angular; geom frame); geom2's minus
  geom1's, in the contact frame, drives the tangent and torsional rows only.
  """
  con = d.contact
  g = jnp.maximum(jnp.stack([con.geom1, con.geom2], -1), 0)  # (ncon, 2)
  sv = m.geom_surfacevel[g]  # (ncon, 2, 6)
  mat = d.geom_xmat[g]  # (ncon, 2, 3, 3)
  lin = jnp.einsum('csij,csj->csi', mat, sv[..., :3])
  ang = jnp.einsum('csij,csj->csi', mat, sv[..., 3:])
  lin = lin + jnp.cross(ang, con.pos[:, None, :] - d.geom_xpos[g])  # mj_geomSurfaceVelocity
  svel, sang = lin[:, 1] - lin[:, 0], ang[:, 1] - ang[:, 0]
  cs = jnp.concatenate(
    [jnp.einsum('cij,cj->ci', con.frame, svel), jnp.einsum('cij,cj->ci', con.frame, sang)], -1
  )
  cs = cs * jnp.array([0.0, 1.0, 1.0, 1.0, 0.0, 0.0])  # no normal push, no rolling drive
  # static row map: slot, component of cs, friction coefficient (-1: none) and its sign
  pyramidal = m.opt.cone == ConeType.PYRAMIDAL
  rows, slot, comp, mu, sign = [], [], [], [], []
  for i, (adr, dim) in enumerate(zip(lay.contact_efcadr, lay.contact_dim, strict=True)):
    adr, dim = int(adr), int(dim)
    if dim == 1 or not pyramidal:
      for j in range(dim):
        rows.append(adr + j), slot.append(i), comp.append(j), mu.append(-1), sign.append(1.0)
    else:
      for k in range(1, dim):
        for r, sg in ((0, 1.0), (1, -1.0)):
          rows.append(adr + 2 * (k - 1) + r), slot.append(i), comp.append(k)
          mu.append(k - 1), sign.append(sg)
  slot, comp, mu = np.asarray(slot), np.asarray(comp), np.asarray(mu)
  val = cs[slot, comp]
  scale = jnp.where(mu >= 0, con.friction[slot, np.maximum(mu, 0)] * np.asarray(sign), 1.0)
  return jnp.zeros(lay.nefc, val.dtype).at[np.asarray(rows)].add(val * scale)


def _adhesion_share(d: Data, lay: Layout) -> jax.Array:
  """Each contact row's share (nefc,) of its contact's adhesion (mj_adhesionRef).

  The normal row (condim 1, elliptic cones, tethers) takes all of it, the 2 (condim - 1) edges of
  a pyramid take equal parts.
  """
  rows = np.flatnonzero(lay.type >= ConstraintType.CONTACT_FRICTIONLESS)
  slot = lay.id[rows]
  first = rows == lay.contact_efcadr[slot]
  edges = np.maximum(2 * (lay.contact_dim[slot] - 1), 1)
  pyramid = lay.type[rows] == ConstraintType.CONTACT_PYRAMIDAL
  con = d.contact
  adhesion = con.adhesion[slot]
  cone = pyramid & (con.dim[slot] > 1)  # tethers are frictionless: their one row takes it all
  share = jnp.where(cone, adhesion / edges, jnp.where(first, adhesion, 0.0))
  return jnp.zeros(lay.nefc, adhesion.dtype).at[rows].set(share)


def reference(m: Model, d: Data) -> Data:
  """efc_vel = J qvel and the reference acceleration efc_aref (mj_referenceConstraint).

  aref = -B vel - K I (pos - margin), plus R times the adhesion of adhesive contacts' rows
  (mj_adhesionRef: with the passive pull qfrc_adhesion this translates the friction cone down the
  normal by the adhesion), minus Jdot qvel for connect and weld rows (mj_Jdotv); needs com_vel
  (cvel, cdof_dot) for the latter.
  """
  lay = layout_of(m)
  if not lay.nefc:
    return d
  vel = sparse.jacobian(m, d) @ d.qvel
  if has_surfacevel(m) and len(lay.contact_efcadr):
    vel = vel + _surface_vel(m, d, lay)
  kbip = d.efc_KBIP
  aref = -kbip[:, 1] * vel - kbip[:, 0] * kbip[:, 2] * (d.efc_pos - d.efc_margin)
  if m.flg_adhesion and len(lay.contact_efcadr):
    aref = aref + d.efc_R * _adhesion_share(d, lay)
  if lay.ne and m.nv:
    aref = aref - _jdotv(m, d, lay)
  return d.replace(efc_vel=vel, efc_aref=jnp.where(d.efc_active, aref, 0.0))

"""Accelerations and forces after the constraint solve: cacc, cfrc_int, cfrc_ext.

Mirrors MuJoCo 4's mj_rnePostConstraint and mj_contactForce: the spatial accelerations of all
bodies from the final qacc, the external wrenches (applied xfrc_applied, contact forces,
connect/weld forces, and, new in MuJoCo 4, the forces spatial tendons exert along their paths)
and the interaction wrenches between each body and its parent that acceleration and force
sensors read. Spatial vectors are (torque, force) about each tree's
subtree com, world-oriented, as MuJoCo's c-frame quantities.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import constraint, math, passive
from jaxsim._src import tendon as tendon_
from jaxsim._src.enums import ConeType, ConstraintType, DisableBit, EqType, ObjType, TrnType
from jaxsim._src.layout import layout_of
from jaxsim._src.types import Data, Model


def contact_force(m: Model, d: Data) -> jax.Array:
  """Force:torque (ncon, 6) of every contact slot in its contact frame (mj_contactForce).

  Pyramidal forces are decoded into normal and frictional components (mju_decodePyramid);
  slots without constraint rows (inactive, excluded) give zero. The normal force is the net
  interface force: the solver's minus the contact's adhesion (MuJoCo 4), negative under tension;
  an adhesive contact in its gap band has its one, frictionless row.
  """
  lay = layout_of(m)
  ncon = len(lay.contact_dim)
  dtype = d.qpos.dtype
  out = jnp.zeros((ncon, 6), dtype)
  slots = np.flatnonzero(lay.contact_nrow > 0)
  if not slots.size:
    return out
  pyramidal = m.opt.cone == ConeType.PYRAMIDAL
  dims = lay.contact_dim[slots]
  for dim in np.unique(dims):
    s = slots[dims == dim]
    adr = lay.contact_efcadr[s]
    nrow = 2 * (dim - 1) if pyramidal and dim > 1 else dim
    f = d.efc_force[adr[:, None] + np.arange(nrow)]
    if pyramidal and dim > 1:
      # normal = sum of the pyramid edges, tangent i = (edge+ - edge-) mu_i
      normal = jnp.sum(f, axis=1, keepdims=True)
      tangent = (f[:, 0::2] - f[:, 1::2]) * d.contact.friction[s, : dim - 1]
      if m.flg_adhesion:
        tangent = jnp.where(d.contact.dim[s, None] > 1, tangent, 0.0)
      f = jnp.concatenate([normal, tangent], axis=1)
    out = out.at[s, :dim].set(f)
  if m.flg_adhesion:
    out = out.at[:, 0].add(-d.contact.adhesion)
  on = d.contact.efc_address >= 0
  return jnp.where(on[:, None], out, 0.0)


def _to_com(m: Model, d: Data, cfrc: jax.Array, point: jax.Array, body: np.ndarray) -> jax.Array:
  """Moves world-oriented torque:force (n, 6) acting at points to the bodies' subtree coms."""
  com = d.subtree_com[jnp.asarray(m.body_rootid)[body]]
  torque = cfrc[:, :3] - jnp.cross(com - point, cfrc[:, 3:])
  return jnp.concatenate([torque, cfrc[:, 3:]], axis=-1)


def _ext_contacts(m: Model, d: Data) -> jax.Array:
  """cfrc_ext (nbody, 6) of the contact forces: opposite on geom1's body, along on geom2's."""
  out = jnp.zeros((m.nbody, 6), d.qpos.dtype)
  if not layout_of(m).ncon or m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
    return out
  lfrc = contact_force(m, d)
  frame = d.contact.frame
  # frame' * (force, torque), swapped to torque:force
  cfrc = jnp.concatenate(
    [
      jnp.einsum('nji,nj->ni', frame, lfrc[:, 3:]),
      jnp.einsum('nji,nj->ni', frame, lfrc[:, :3]),
    ],
    axis=-1,
  )
  on = (d.contact.efc_address >= 0)[:, None]
  cfrc = jnp.where(on, cfrc, 0.0)
  pos = jnp.where(on, d.contact.pos, 0.0)
  gb = jnp.asarray(m.geom_bodyid)
  b1, b2 = gb[d.contact.geom1], gb[d.contact.geom2]
  out = out.at[b1].add(-_to_com(m, d, cfrc, pos, b1))
  out = out.at[b2].add(_to_com(m, d, cfrc, pos, b2))
  return out.at[0].set(0.0)


def _ext_equality(m: Model, d: Data) -> jax.Array:
  """cfrc_ext (nbody, 6) of connect and weld constraint forces at their anchors."""
  out = jnp.zeros((m.nbody, 6), d.qpos.dtype)
  lay = layout_of(m)
  if not lay.ne:
    return out
  eq_type = np.asarray(m.eq_type)
  ids = np.unique(lay.id[: lay.ne])
  for kind in (EqType.CONNECT, EqType.WELD):
    sel = ids[eq_type[ids] == kind]
    if not sel.size:
      continue
    weld = kind == EqType.WELD
    # equality rows are in id order: the first row of each id by binary search
    first = np.searchsorted(lay.id[: lay.ne], sel)
    rows = first[:, None] + np.arange(6 if weld else 3)
    f = jnp.where(d.efc_active[rows], d.efc_force[rows], 0.0)
    if weld:
      # the rotational rows act through 0.5 neg(q1) (w1 - w2) q0 relpose torquescale (their
      # Jacobian): the torque on body 1 is that map's transpose applied to their forces
      quat, _, q1, _ = constraint.weld_quats(m, d, sel)
      axes = jnp.concatenate([jnp.zeros((3, 1), f.dtype), jnp.eye(3, dtype=f.dtype)], axis=1)
      neg1 = math.quat_neg(q1)[:, None]
      rot = math.quat_mul(math.quat_mul(neg1, axes[None]), quat[:, None])[..., 1:]  # (n, 3, 3)
      scale = 0.5 * m.eq_data[sel, 10]
      torque = jnp.einsum('nki,ni->nk', rot, f[:, 3:6]) * scale[:, None]
    else:
      torque = jnp.zeros_like(f[:, :3])
    cfrc = jnp.concatenate([torque, f[:, :3]], axis=-1)
    site = np.asarray(m.eq_objtype)[sel] == ObjType.SITE
    o1, o2 = np.asarray(m.eq_obj1id)[sel], np.asarray(m.eq_obj2id)[sel]
    data = m.eq_data[sel]
    # body semantics: connect anchors data[0:3] on body 1, data[3:6] on body 2; weld swapped
    off1, off2 = (data[:, 3:6], data[:, 0:3]) if weld else (data[:, 0:3], data[:, 3:6])
    sb = np.asarray(m.site_bodyid) if m.nsite else np.zeros(1, np.int32)
    for obj, off, sign in ((o1, off1, 1.0), (o2, off2, -1.0)):
      body = np.where(site, sb[np.where(site, obj, 0)], obj)
      if site.any():
        off = jnp.where(site[:, None], m.site_pos[np.where(site, obj, 0)], off)
      point = d.xpos[body] + jnp.einsum('nij,nj->ni', d.xmat[body], off)
      out = out.at[body].add(sign * _to_com(m, d, cfrc, point, body))
  return out.at[0].set(0.0)


def tendon_force(m: Model, d: Data) -> jax.Array:
  """Scalar force (ntendon,) each tendon transmits, positive pushing its ends apart.

  The sum of what acts through the tendon, as MuJoCo 4's mj_rnePostConstraint takes it: spring
  and damper (actuator damping included), gear times the force of tendon actuators, and the
  tendon's friction-loss, limit and equality constraint forces.
  """
  dtype = d.qpos.dtype
  flags = m.opt.disableflags
  frc = jnp.zeros(m.ntendon, dtype)
  if not flags & DisableBit.SPRING:
    x = passive.tendon_spring_x(m, d)
    frc = frc - x * passive.poly_force(m.tendon_stiffness, m.tendon_stiffnesspoly, x, False)
  if not flags & DisableBit.DAMPER:
    damping, poly = passive.tendon_damping(m)
    v = d.ten_velocity
    frc = frc - v * passive.poly_force(damping, poly, v, True)
  if m.nu:
    act = np.flatnonzero(np.asarray(m.actuator_trntype) == TrnType.TENDON)
    target = np.asarray(m.actuator_trnid)[act, 0]
    frc = frc.at[target].add(m.actuator_gear[act, 0] * d.actuator_force[act])
  lay = layout_of(m)
  # each row's coefficient on the tendon's Jacobian (friction +1, limit -side, equality 1 / -poly')
  rows = np.flatnonzero(lay.type == ConstraintType.FRICTION_TENDON)
  frc = frc.at[lay.id[rows]].add(d.efc_force[rows])
  rows = np.flatnonzero(lay.type == ConstraintType.LIMIT_TENDON)
  if rows.size:
    lower = np.r_[True, lay.id[rows][1:] != lay.id[rows][:-1]]
    frc = frc.at[lay.id[rows]].add(jnp.where(lower, 1.0, -1.0) * d.efc_force[rows])
  eq = np.flatnonzero(lay.type[: lay.ne] == ConstraintType.EQUALITY)
  eq = eq[np.asarray(m.eq_type)[lay.id[eq]] == EqType.TENDON] if eq.size else eq
  if eq.size:
    ids = lay.id[eq]
    f = jnp.where(d.efc_active[eq], d.efc_force[eq], 0.0)
    t1, t2 = np.asarray(m.eq_obj1id)[ids], np.asarray(m.eq_obj2id)[ids]
    frc = frc.at[t1].add(f)
    has2 = t2 >= 0
    if has2.any():
      t2c = np.where(has2, t2, t1)
      data = m.eq_data[ids]
      dif = d.ten_length[t2c] - m.tendon_length0[t2c]
      deriv = data[:, 1] + 2 * data[:, 2] * dif + 3 * data[:, 3] * dif**2 + 4 * data[:, 4] * dif**3
      frc = frc.at[t2c].add(jnp.where(has2, -deriv * f, 0.0))
  return frc


def _ext_tendons(m: Model, d: Data) -> jax.Array:
  """cfrc_ext (nbody, 6) of spatial tendons: their force along each straight piece of the path."""
  out = jnp.zeros((m.nbody, 6), d.qpos.dtype)
  if not m.ntendon:
    return out
  path = tendon_.parse(m)
  if path.sites is None and path.geoms is None:
    return out
  frc = tendon_force(m, d)
  sb, gb = np.asarray(m.site_bodyid), np.asarray(m.geom_bodyid)
  pieces = []  # (start, its body, end, its body, weight, tendon), as tendon.tendon builds ten_J
  for g in (path.sites, path.geoms):
    if g is None:
      continue
    x0, x1 = d.site_xpos[g.site0], d.site_xpos[g.site1]
    b0, b1 = sb[g.site0], sb[g.site1]
    inv = tendon_.inv_divisor(m, g, x0.dtype)
    if g is path.sites:
      pieces.append((x0, b0, x1, b1, inv, g.tendon))
      continue
    wlen, w0, w1 = tendon_.geom_wrap(m, d, g)
    on, off = jnp.where(wlen >= 0, inv, 0.0), jnp.where(wlen >= 0, 0.0, inv)
    bg = gb[g.geom]
    pieces += [(x0, b0, x1, b1, off, g.tendon), (x0, b0, w0, bg, on, g.tendon)]
    pieces.append((w1, bg, x1, b1, on, g.tendon))
  p0, b0, p1, b1, weight, ten = (
    jnp.concatenate(x) if isinstance(x[0], jax.Array) else np.concatenate(x)
    for x in zip(*pieces, strict=True)
  )
  unit, _ = math.normalize3(p1 - p0)
  f = (frc[ten] * weight)[:, None] * unit
  zero = jnp.zeros_like(f)
  out = out.at[b0].add(_to_com(m, d, jnp.concatenate([zero, -f], -1), p0, b0))
  out = out.at[b1].add(_to_com(m, d, jnp.concatenate([zero, f], -1), p1, b1))
  return out.at[0].set(0.0)


def rne_post_constraint(m: Model, d: Data) -> Data:
  """cacc, cfrc_ext and cfrc_int (nbody, 6) from qacc and all forces (mj_rnePostConstraint)."""
  dtype = d.qpos.dtype
  nbody = m.nbody
  # applied wrenches xfrc_applied (force, torque) at the body coms
  body = np.arange(1, nbody)
  xfrc = d.xfrc_applied[body]
  cfrc_ext = jnp.zeros((nbody, 6), dtype)
  if body.size:
    cfrc = jnp.concatenate([xfrc[:, 3:], xfrc[:, :3]], axis=-1)
    cfrc_ext = cfrc_ext.at[body].set(_to_com(m, d, cfrc, d.xipos[body], body))
  cfrc_ext = cfrc_ext + _ext_contacts(m, d) + _ext_equality(m, d) + _ext_tendons(m, d)

  cacc = jnp.zeros((nbody, 6), dtype)
  if m.nv:
    acc = d.cdof_dot * d.qvel[:, None] + d.cdof * d.qacc[:, None]
    cacc = jnp.asarray(m.tree_body_dof, dtype) @ acc
  if not m.opt.disableflags & DisableBit.GRAVITY:
    cacc = cacc.at[:, 3:].add(-m.opt.gravity)
  cfrc_body = math.inert_mul(d.cinert, cacc)
  cfrc_body = cfrc_body + math.cross_force(d.cvel, math.inert_mul(d.cinert, d.cvel))
  local = (cfrc_body - cfrc_ext).at[0].set(0.0)
  cfrc_int = jnp.asarray(m.tree_subtree, dtype) @ local
  return d.replace(cacc=cacc, cfrc_int=cfrc_int, cfrc_ext=cfrc_ext)

"""Forward kinematics, com-based frames (cinert, cdof), velocities and Jacobians.

Transforms are composed down the tree by a `lax.scan` over depth levels (compile time independent of
depth); sums over ancestors and subtrees are products with the static masks of `Model.tree_*`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import math
from jaxsim._src.enums import MINVAL, JointType
from jaxsim._src.types import Data, Model

FREE, BALL, SLIDE, HINGE = (
  int(t) for t in (JointType.FREE, JointType.BALL, JointType.SLIDE, JointType.HINGE)
)


def local_frames(m: Model, d: Data):
  """Each body's frame relative to its parent after its joints, and each joint's pre-joint frame.

  Returns (pos (nbody, 3), quat (nbody, 4), jpos (njnt, 3), jquat (njnt, 4)); free bodies hold
  their global frame. The k-th joints of all bodies are applied together, every joint type
  computed and the body's own selected, in a scan over k (bodies have few joints each).
  """
  pos, quat = m.body_pos, m.body_quat
  mocapid = np.asarray(m.body_mocapid)
  if m.nmocap:
    ids = np.flatnonzero(mocapid >= 0)
    pos = pos.at[ids].set(d.mocap_pos[mocapid[ids]])
    quat = quat.at[ids].set(math.quat_normalize(d.mocap_quat[mocapid[ids]]))
  jntnum, jntadr = np.asarray(m.body_jntnum), np.asarray(m.body_jntadr)
  nk = int(jntnum.max(initial=0))
  if not nk:
    return pos, quat, jnp.zeros((m.njnt, 3), pos.dtype), jnp.zeros((m.njnt, 4), pos.dtype)
  # static (k, body) tables: the body's k-th joint (0 where it has none), its type (-1: none)
  has = jntnum[None, :] > np.arange(nk)[:, None]
  jnt = np.where(has, jntadr[None, :] + np.arange(nk)[:, None], 0)
  typ = np.where(has, np.asarray(m.jnt_type)[jnt], -1)
  adr = np.asarray(m.jnt_qposadr)[jnt]
  top = max(m.nq - 1, 0)
  qpos, qpos0 = d.qpos, m.qpos0
  at = lambda n: qpos[np.minimum(adr[..., None] + np.arange(n), top)]  # noqa: E731
  xs = (
    jnp.asarray(typ),
    m.jnt_axis[jnt],
    m.jnt_pos[jnt],
    at(7),  # free: position and quaternion; ball: quaternion first
    qpos[adr] - qpos0[adr],  # slide and hinge displacement
  )

  def joint(carry, x):
    p, q = carry
    t, axis, jp, qp, dq = x
    t = t[:, None]
    # free
    pf, qf = qp[:, :3], math.quat_normalize(qp[:, 3:7])
    # slide
    ps = p + math.rot_vec_quat(axis, q) * dq[:, None]
    # hinge and ball: rotation about the joint's anchor
    qloc = jnp.where(t == BALL, math.quat_normalize(qp[:, :4]), math.axis_angle_to_quat(axis, dq))
    anchor = p + math.rot_vec_quat(jp, q)
    qr = math.quat_mul(q, qloc)
    pr = anchor - math.rot_vec_quat(jp, qr)
    rot = (t == HINGE) | (t == BALL)
    p_new = jnp.where(t == FREE, pf, jnp.where(t == SLIDE, ps, jnp.where(rot, pr, p)))
    q_new = jnp.where(t == FREE, qf, jnp.where(rot, qr, q))
    return (p_new, q_new), (p, q)

  (pos, quat), (jp_all, jq_all) = jax.lax.scan(joint, (pos, quat), xs)
  # each joint's pre-joint frame: its (k, body) entry, a static permutation
  order = np.argsort(jnt[has], kind='stable')
  flat = np.flatnonzero(has.reshape(-1))[order]
  jpos = jp_all.reshape(-1, 3)[flat]
  jquat = jq_all.reshape(-1, 4)[flat]
  return pos, quat, jpos, jquat


def _is_free_body(m: Model) -> np.ndarray:
  jntnum, jntadr = np.asarray(m.body_jntnum), np.asarray(m.body_jntadr)
  jt = np.asarray(m.jnt_type)
  free = np.zeros(m.nbody, dtype=bool)
  one = np.flatnonzero(jntnum == 1)
  free[one] = jt[jntadr[one]] == FREE
  return free


def _global_frames(m: Model, lpos: jax.Array, lquat: jax.Array):
  """Composes local frames down the tree: scan over depth levels, bodies of a level in parallel."""
  nbody = m.nbody
  dtype = lpos.dtype
  levels = np.asarray(m.tree_levels)
  parent = np.append(np.asarray(m.body_parentid), 0)
  free = np.append(_is_free_body(m), False)
  lpos = jnp.concatenate([lpos, jnp.zeros((1, 3), dtype)])
  lquat = jnp.concatenate([lquat, jnp.array([[1.0, 0, 0, 0]], dtype)])
  xpos0 = jnp.zeros((nbody + 1, 3), dtype)
  xquat0 = jnp.zeros((nbody + 1, 4), dtype).at[:, 0].set(1.0)

  def level(carry, xs):
    xpos, xquat = carry
    idx, par, isfree = xs
    ppos, pquat = xpos[par], xquat[par]
    p = ppos + math.rot_vec_quat(lpos[idx], pquat)
    q = math.quat_mul(pquat, lquat[idx])
    isfree = isfree[:, None]
    p = jnp.where(isfree, lpos[idx], p)
    q = math.quat_normalize(jnp.where(isfree, lquat[idx], q))
    return (xpos.at[idx].set(p), xquat.at[idx].set(q)), None

  if len(levels):
    xs = (jnp.asarray(levels), jnp.asarray(parent[levels]), jnp.asarray(free[levels]))
    (xpos0, xquat0), _ = jax.lax.scan(level, (xpos0, xquat0), xs)
  return xpos0[:nbody], xquat0[:nbody]


def _local2global(d: Data, body, pos, quat, sameframe):
  """Frames of objects attached to bodies, copied where they coincide (mj_local2Global)."""
  body = np.asarray(body)
  sf = np.asarray(sameframe)[:, None]
  bq = d.xquat[body]
  xpos = d.xpos[body] + math.rot_vec_quat(pos, bq)
  xmat = math.quat_to_mat(math.quat_mul(bq, quat))
  xpos = jnp.where(sf == 1, d.xpos[body], jnp.where(sf == 2, d.xipos[body], xpos))
  sf = sf[..., None]
  # mjSAMEFRAME_BODY and _BODYROT (1, 3) take the body's rotation, _INERTIA and _INERTIAROT
  # (2, 4) its inertial frame's
  same = jnp.where(sf % 2 == 1, d.xmat[body], d.ximat[body])
  return xpos, jnp.where(sf == 0, xmat, same)


@math.full_precision
def kinematics(m: Model, d: Data) -> Data:
  """Global frames of bodies, joints, geoms and sites from qpos (mj_kinematics)."""
  lpos, lquat, jpos, jquat = local_frames(m, d)
  xpos, xquat = _global_frames(m, lpos, lquat)
  xmat = math.quat_to_mat(xquat)

  # joint anchors and axes from the frame each joint acts in
  jb = np.asarray(m.jnt_bodyid)
  pb = np.asarray(m.body_parentid)[jb]
  free = np.asarray(m.jnt_type) == FREE
  fq = math.quat_mul(xquat[pb], jquat)
  xaxis = math.rot_vec_quat(m.jnt_axis, fq)
  xanchor = xpos[pb] + math.rot_vec_quat(jpos + math.rot_vec_quat(m.jnt_pos, jquat), xquat[pb])
  if free.any():
    xaxis = jnp.where(free[:, None], m.jnt_axis, xaxis)
    xanchor = jnp.where(free[:, None], xpos[jb], xanchor)

  d = d.replace(xpos=xpos, xquat=xquat, xmat=xmat, xanchor=xanchor, xaxis=xaxis)
  sf = np.asarray(m.body_sameframe)
  xipos, ximat = _local2global(d, np.arange(m.nbody), m.body_ipos, m.body_iquat, sf)
  xipos = xipos.at[0].set(0.0)
  ximat = ximat.at[0].set(jnp.eye(3, dtype=xpos.dtype))
  d = d.replace(xipos=xipos, ximat=ximat)
  geom_xpos, geom_xmat = _local2global(d, m.geom_bodyid, m.geom_pos, m.geom_quat, m.geom_sameframe)
  site_xpos, site_xmat = _local2global(d, m.site_bodyid, m.site_pos, m.site_quat, m.site_sameframe)
  return d.replace(
    geom_xpos=geom_xpos,
    geom_xmat=geom_xmat,
    site_xpos=site_xpos,
    site_xmat=site_xmat,
  )


def _dof_structure(m: Model):
  """Per dof: joint type, index within its joint, whether rotational."""
  jid = np.asarray(m.dof_jntid)
  jt = np.asarray(m.jnt_type)[jid]
  k = np.arange(m.nv) - np.asarray(m.jnt_dofadr)[jid]
  rot = (jt == HINGE) | (jt == BALL) | ((jt == FREE) & (k >= 3))
  return jid, jt, k, rot


def com_pos(m: Model, d: Data) -> Data:
  """subtree_com, cinert and cdof in the frame centred at each tree's subtree com (mj_comPos)."""
  subtree = jnp.asarray(m.tree_subtree, dtype=d.xpos.dtype)
  mass = m.body_mass
  subtreemass = subtree @ mass
  moment = subtree @ (mass[:, None] * d.xipos)
  small = subtreemass < MINVAL
  subtree_com = jnp.where(
    small[:, None], d.xipos, moment / jnp.where(small, 1.0, subtreemass)[:, None]
  )
  root = np.asarray(m.body_rootid)
  offset = d.xipos - subtree_com[root]
  cinert = math.inert_com(m.body_inertia, d.ximat, offset, mass)
  cinert = cinert.at[0].set(0.0)

  if m.nv:
    jid, jt, k, rot = _dof_structure(m)
    body = np.asarray(m.dof_bodyid)
    col = np.where(jt == FREE, k - 3, k) % 3
    bodyaxis = d.xmat[body, :, col]
    axis = jnp.where(((jt == BALL) | (jt == FREE))[:, None], bodyaxis, d.xaxis[jid])
    trans = (jt == FREE) & (k < 3)
    axis = jnp.where(trans[:, None], jnp.eye(3, dtype=axis.dtype)[k % 3], axis)
    offset = subtree_com[root[body]] - d.xanchor[jid]
    cdof = math.dof_com(axis, offset, jnp.asarray(rot))
  else:
    cdof = d.cdof
  return d.replace(subtree_com=subtree_com, cinert=cinert, cdof=cdof)


def _dof_before(m: Model) -> np.ndarray:
  """(nv, nv) mask: dofs whose velocity is in the frame a dof moves in, before the dof itself."""
  jid, jt, k, _ = _dof_structure(m)
  anc = np.asarray(m.tree_dof_dof).astype(bool)
  before = anc & (jid[:, None] != jid[None, :])
  free_rot = (jt == FREE) & (k >= 3)
  same = jid[:, None] == jid[None, :]
  before |= free_rot[:, None] & same & (k[None, :] < 3)
  return before


def com_vel(m: Model, d: Data) -> Data:
  """Body velocities cvel and cdof_dot in the com frame (mj_comVel)."""
  if not m.nv:
    return d
  vdof = d.cdof * d.qvel[:, None]
  dtype = vdof.dtype
  cvel = jnp.asarray(m.tree_body_dof, dtype=dtype) @ vdof
  vbefore = jnp.asarray(_dof_before(m), dtype=dtype) @ vdof
  cdof_dot = math.cross_motion(vbefore, d.cdof)
  _, jt, k, _ = _dof_structure(m)
  trans = (jt == FREE) & (k < 3)
  if trans.any():
    cdof_dot = jnp.where(trans[:, None], 0.0, cdof_dot)
  return d.replace(cvel=cvel, cdof_dot=cdof_dot)


def tree_rows(m: Model, body: int | np.ndarray | jax.Array, dtype) -> jax.Array:
  """Rows of tree_body_dof (..., nv) for bodies `body`: 1 where a dof moves the body.

  Gathered when the program runs: with static body ids XLA would fold the gather into a
  constant of n x nv (33750 x 750 doubles, 200 MB, in MuJoCo's 125-bunny scene).
  """
  body = jax.lax.optimization_barrier(jnp.asarray(body))
  return jnp.asarray(m.tree_body_dof, dtype=dtype)[body]


def jac(m: Model, d: Data, point: jax.Array, body: int | jax.Array) -> tuple[jax.Array, jax.Array]:
  """Translational and rotational Jacobians (3, nv) of a point attached to a body (mj_jac)."""
  mask = tree_rows(m, body, d.cdof.dtype)
  offset = point - d.subtree_com[jnp.asarray(m.body_rootid)[body]]
  jacr = d.cdof[:, :3] * mask[:, None]
  jacp = (d.cdof[:, 3:] + jnp.cross(d.cdof[:, :3], offset)) * mask[:, None]
  return jacp.T, jacr.T


def jac_batch(m: Model, d: Data, points: jax.Array, bodies: jax.Array):
  """mj_jac for many (point, body) pairs: jacp, jacr (n, 3, nv)."""
  return jax.vmap(lambda p, b: jac(m, d, p, b))(points, bodies)


def jac_dif_frame(
  m: Model, d: Data, frame: jax.Array, point: jax.Array, body1: jax.Array, body2: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """frame (n, 3, 3) times jac(body2) - jac(body1) at points (n, 3): (n, 3, nv) each.

  Translational and rotational rows as mj_jacDifPair then mju_mulMatMat with the frame, in
  MuJoCo's operation order. Written per component so that XLA fuses it into one loop producing
  (n, 3, nv), instead of materialising both Jacobians (n, 3, nv) and their difference.
  """
  dtype = d.cdof.dtype
  # +1 / -1 on dofs that move only body2 / body1; 0 on the common ones, where jac2 - jac1 is 0
  sign = tree_rows(m, body2, dtype) - tree_rows(m, body1, dtype)  # (n, nv)
  root = np.asarray(m.body_rootid)[np.asarray(m.dof_bodyid)]
  com = d.subtree_com[root]  # (nv, 3): the frame origin of each dof's tree
  ang, lin = d.cdof[:, :3].T, d.cdof[:, 3:].T  # (3, nv)
  off = [point[:, i, None] - com[None, :, i] for i in range(3)]  # (n, nv)
  return _dif_rows(frame, sign, lin, ang, off)


ROW_CHUNK = 128  # contact slots per pass of jac_dif_frame_compact


def jac_dif_frame_compact(
  m: Model,
  d: Data,
  frame: jax.Array,
  point: jax.Array,
  body1: jax.Array,
  body2: jax.Array,
  chain: np.ndarray,
) -> tuple[jax.Array, jax.Array]:
  """jac_dif_frame on the dofs of the two bodies' chains only: rows (n, 3, 2C) each, the
  entries of body1's chain then body2's (sparse.py's compact rows).

  chain (nbody, C): layout.body_dofs. Each entry is the dense Jacobian's value at its column,
  computed the same way (so bitwise equal); the dofs the two chains share hold 0 in both
  halves (jac2 - jac1 is 0 there, as mj_jacDifPair skips them), and so do the padding entries.
  """
  n = point.shape[0]
  if n > ROW_CHUNK:
    # in chunks of slots: XLA stores each chunk's per-entry terms (the chains' cdof, the
    # offsets: nine (n, 2C) arrays) before summing its rows; for every slot at once they set
    # the step's peak memory (8 humanoids: 700 slots, 740 KiB per world)
    pad = -n % ROW_CHUNK
    args = [jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1)) for x in (frame, point, body1, body2)]
    args = [x.reshape((-1, ROW_CHUNK) + x.shape[1:]) for x in args]
    jt, jr = jax.lax.map(lambda a: jac_dif_frame_compact(m, d, *a, chain), tuple(args))
    return tuple(x.reshape((-1,) + x.shape[2:])[:n] for x in (jt, jr))
  dtype = d.cdof.dtype
  ch = jnp.asarray(chain)
  c1, c2 = ch[body1], ch[body2]  # (n, C)
  v1, v2 = c1 >= 0, c2 >= 0
  shared = (c1[:, :, None] == c2[:, None, :]) & v1[:, :, None]  # (n, C, C)
  sign = jnp.concatenate(
    [
      jnp.where(v1 & ~jnp.any(shared, axis=2), -1.0, 0.0),
      jnp.where(v2 & ~jnp.any(shared, axis=1), 1.0, 0.0),
    ],
    axis=1,
  ).astype(dtype)
  # cdof per body chain, component-major (6, nbody, C): each component is gathered per row on
  # its own, which XLA fuses into the rows' loop instead of storing (n, 2C, 6)
  cc = jnp.moveaxis(d.cdof[np.maximum(chain, 0)], -1, 0)
  # a chain's dofs are in one tree: their frame origin is the subtree com of the body's root
  root = jnp.asarray(m.body_rootid)
  com1, com2 = d.subtree_com[root[body1]], d.subtree_com[root[body2]]  # (n, 3)

  def both(x):  # (nbody, C) -> (n, 2C): body1's chain, then body2's
    return jnp.concatenate([x[body1], x[body2]], axis=1)

  ang, lin = [both(cc[k]) for k in range(3)], [both(cc[3 + k]) for k in range(3)]
  off = [
    jnp.concatenate(
      [jnp.broadcast_to((point[:, i] - c[:, i])[:, None], c1.shape) for c in (com1, com2)],
      axis=1,
    )
    for i in range(3)
  ]
  return _dif_rows(frame, sign, lin, ang, off)


def _dif_rows(frame, sign, lin, ang, off):
  """frame times the signed point Jacobian: rows (n, 3, k) from per-component terms (k,) or
  (n, k): sign * (cdof_lin + cdof_ang x offset) (mju_cross order), sign * cdof_ang."""
  jp = [
    sign * (lin[i] + (ang[(i + 1) % 3] * off[(i + 2) % 3] - ang[(i + 2) % 3] * off[(i + 1) % 3]))
    for i in range(3)
  ]
  jr = [sign * ang[i] for i in range(3)]

  def rows(j):
    f = frame[..., None]  # (n, 3, 3, 1)
    return f[:, :, 0] * j[0][:, None] + f[:, :, 1] * j[1][:, None] + f[:, :, 2] * j[2][:, None]

  return rows(jp), rows(jr)


def jac_compact(
  m: Model, d: Data, point: jax.Array, body: jax.Array, chain: np.ndarray
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """mj_jac of points (n, 3) on bodies (n,) on the dofs of their chains: jacp, jacr (n, 3, C)
  and the columns (n, C) (padding: column -1, value 0). chain: layout.body_dofs (nbody, C)."""
  c = jnp.asarray(chain)[body]  # (n, C)
  valid = (c >= 0)[..., None]
  cols = jnp.maximum(c, 0)
  offset = point - d.subtree_com[jnp.asarray(m.body_rootid)[body]]  # (n, 3)
  cdof = d.cdof[cols]  # (n, C, 6)
  jacr = cdof[..., :3] * valid
  jacp = (cdof[..., 3:] + jnp.cross(cdof[..., :3], offset[:, None])) * valid
  return jnp.swapaxes(jacp, 1, 2), jnp.swapaxes(jacr, 1, 2), c


def apply_ft(
  m: Model, d: Data, force: jax.Array, torque: jax.Array, point: jax.Array, body: jax.Array
) -> jax.Array:
  """Generalized force (nv,) of forces and torques (n, 3) at points on bodies (mj_applyFT).

  J' f without the Jacobians (n, 3, nv): each wrench becomes a spatial force about its tree's
  origin (the subtree com of its root, where cdof is expressed: jacp' f + jacr' t = cdof .
  (t + offset x f, f)), the wrenches are summed per body, then over each body's subtree
  (m.tree_subtree, as mj_rne's backward pass), and each dof takes cdof . its body's sum.
  """
  dtype = d.cdof.dtype
  if not m.nv or not point.shape[0]:
    return jnp.zeros(m.nv, dtype)
  offset = point - d.subtree_com[jnp.asarray(m.body_rootid)[body]]
  wrench = jnp.concatenate([torque + jnp.cross(offset, force), force], axis=-1)  # (n, 6)
  per_body = jax.ops.segment_sum(wrench, jnp.asarray(body), num_segments=m.nbody)
  subtree = jnp.asarray(m.tree_subtree, dtype=dtype) @ per_body  # (nbody, 6)
  return jnp.sum(d.cdof * subtree[np.asarray(m.dof_bodyid)], axis=-1)

"""Sensor values at the position, velocity and acceleration stages (engine_sensor.c).

`sensor_pos`, `sensor_vel` and `sensor_acc` mirror mj_sensorPos, mj_sensorVel and mj_sensorAcc:
each computes the sensors whose needstage is its stage, writes them into sensordata and applies
their cutoff (apply_cutoff: clamp for real data, positive side only for positive data). Sensors
of one type are computed together with static index arrays; a stage without sensors is skipped
at trace time. As in MuJoCo, noise is metadata (mj_forward adds none), user sensors (computed by
a callback MuJoCo does not have by default) are zero, subtree momenta are computed only for the
sensors that need them (mj_subtreeVel) and the post-constraint RNE pass (rne_post) only for
acceleration and force sensors. Contact sensors read Data.contact in mj_collision's order, at the
stage their data needs (position, velocity or, for forces, acceleration, as mujoco 4 infers it).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import math, passive, ray, rne_post, touchgrid
from jaxsim._src.collision import distance
from jaxsim._src.enums import (
  MINVAL,
  CamLight,
  ConstraintType,
  DataType,
  DisableBit,
  GeomType,
  ObjType,
  SensorType,
  Stage,
  TrnType,
)
from jaxsim._src.layout import layout_of
from jaxsim._src.types import Data, Model

S = SensorType

# types whose values need rne_post (mj_rnePostConstraint) or mj_subtreeVel first
_NEED_RNE_POST = (S.ACCELEROMETER, S.FORCE, S.TORQUE, S.FRAMELINACC, S.FRAMEANGACC, S.USER)
_NEED_SUBTREE_VEL = (S.SUBTREELINVEL, S.SUBTREEANGMOM, S.USER)
# collision sensors: computed together (one mj_geomDistance per geom pair), their fromto unclamped
_COLLISION = (S.GEOMDIST, S.GEOMNORMAL, S.GEOMFROMTO)
_COLLISION_TAG = {S.GEOMDIST: 'distance', S.GEOMNORMAL: 'normal', S.GEOMFROMTO: 'fromto'}


def _ids(m: Model, stage: int) -> np.ndarray:
  """Sensors computed at a stage (none when sensors are disabled).

  A plugin instance computes only the first sensor that names it (TouchGrid::Compute looks its
  sensor up): the others sharing it keep their sensordata, as in MuJoCo.
  """
  if not m.nsensor or m.opt.disableflags & DisableBit.SENSOR:
    return np.zeros(0, np.int64)
  on = np.asarray(m.sensor_needstage) == stage
  inst = np.asarray(m.sensor_plugin)
  plugged = np.flatnonzero(inst >= 0)
  _, first = np.unique(inst[plugged], return_index=True)
  on[np.setdiff1d(plugged, plugged[first])] = False
  return np.flatnonzero(on)


def unsupported(m: Model) -> list[str]:
  """The model's sensors jaxsim cannot compute, each named (empty when all are computed)."""
  if not m.nsensor:
    return []
  out = []
  stype = np.asarray(m.sensor_type)
  known = set(POS_SENSORS) | set(VEL_SENSORS) | set(ACC_SENSORS) | {int(S.USER)}
  for t in sorted(set(stype.tolist()) - known):
    out.append(f'{SensorType(t).name.lower()} sensors')
  coll = np.flatnonzero(np.isin(stype, _COLLISION))
  if coll.size:
    row, _, g1, g2 = _geom_pairs(m, coll)
    bad = distance.methods(m, g1, g2) == distance.HFIELD
    for s in np.unique(coll[row[bad]]):
      out.append(
        f'<{_COLLISION_TAG[int(stype[s])]}> sensor {int(s)} between a height field and a geom '
        '(mj_geomDistance through mjc_ConvexHField)'
      )
  return out


def check_supported(m: Model) -> None:
  """Raises NotImplementedError naming the first sensor jaxsim cannot compute for this model."""
  missing = unsupported(m)
  if missing and not m.opt.disableflags & DisableBit.SENSOR:
    raise NotImplementedError(f'not supported by jaxsim: {missing[0]}')


# ------------------------------------------------------------------------------ frames


def _cam_frames(m: Model, d: Data):
  """cam_xpos (ncam, 3), cam_xmat (ncam, 3, 3) as mj_camlight, and the quat frame sensors read.

  Tracking cameras keep their qpos0 orientation (cam_mat0) at an offset from the body or its
  subtree com; targeting cameras look at their target body (or its subtree com). The quat is
  always the body's quat times cam_quat, as MuJoCo's frame sensors compute it.
  """
  body = np.asarray(m.cam_bodyid)
  quat = math.quat_mul(d.xquat[body], m.cam_quat)
  pos = d.xpos[body] + jnp.einsum('nij,nj->ni', d.xmat[body], m.cam_pos)
  mat = math.quat_to_mat(quat)
  mode = np.asarray(m.cam_mode)
  if not (mode != CamLight.FIXED).any():
    return pos, mat, quat
  target = np.asarray(m.cam_targetbodyid)
  mat0 = jnp.reshape(m.cam_mat0, (-1, 3, 3))
  track = (mode == CamLight.TRACK)[:, None]
  trackcom = (mode == CamLight.TRACKCOM)[:, None]
  pos_t = jnp.where(track, d.xpos[body] + m.cam_pos0, d.subtree_com[body] + m.cam_poscom0)
  tracking = track | trackcom
  pos = jnp.where(tracking, pos_t, pos)
  mat = jnp.where(tracking[:, :, None], mat0, mat)
  aim = np.isin(mode, (CamLight.TARGETBODY, CamLight.TARGETBODYCOM)) & (target >= 0)
  if aim.any():
    tb = np.maximum(target, 0)
    look = jnp.where((mode == CamLight.TARGETBODY)[:, None], d.xpos[tb], d.subtree_com[tb])
    z, _ = jax.vmap(math.normalize3)(pos - look)
    up = jnp.broadcast_to(jnp.array([0.0, 0.0, 1.0], pos.dtype), z.shape)
    x, _ = jax.vmap(math.normalize3)(jnp.cross(up, z))
    y, _ = jax.vmap(math.normalize3)(jnp.cross(z, x))
    mat = jnp.where(aim[:, None, None], jnp.stack([x, y, z], axis=-1), mat)
  return pos, mat, quat


def _obj_body(m: Model, objtype: np.ndarray, objid: np.ndarray) -> np.ndarray:
  """Body ids (n,) that carry the objects (static)."""
  out = np.array(objid, copy=True)
  for t, name in (
    (ObjType.GEOM, 'geom_bodyid'),
    (ObjType.SITE, 'site_bodyid'),
    (ObjType.CAMERA, 'cam_bodyid'),
  ):
    sel = objtype == t
    if sel.any():
      out[sel] = np.asarray(getattr(m, name))[objid[sel]]
  return out


def _obj_tables(m: Model, d: Data, objtype: np.ndarray, objid: np.ndarray, kind: str):
  """Per object (n, ...) rows gathered from the per-type tables of `kind` ('pos', 'mat', 'quat')."""
  tables, offset, start = [], {}, 0
  for t in np.unique(objtype):
    if t == ObjType.CAMERA:
      cpos, cmat, cquat = _cam_frames(m, d)
      tab = {'pos': cpos, 'mat': cmat, 'quat': cquat}[kind]
    elif kind == 'quat':
      if t == ObjType.XBODY:
        tab = d.xquat
      else:
        body, local = {
          ObjType.BODY: (np.arange(m.nbody), m.body_iquat),
          ObjType.GEOM: (np.asarray(m.geom_bodyid), m.geom_quat),
          ObjType.SITE: (np.asarray(m.site_bodyid), m.site_quat),
        }[int(t)]
        tab = math.quat_mul(d.xquat[body], local)
    else:
      pos, mat = {
        ObjType.BODY: (d.xipos, d.ximat),
        ObjType.XBODY: (d.xpos, d.xmat),
        ObjType.GEOM: (d.geom_xpos, d.geom_xmat),
        ObjType.SITE: (d.site_xpos, d.site_xmat),
      }[int(t)]
      tab = pos if kind == 'pos' else mat
    tables.append(tab)
    offset[int(t)] = start
    start += tab.shape[0]
  rows = np.asarray([offset[int(t)] for t in objtype], np.int64) + objid
  return jnp.concatenate(tables)[rows]


def _obj_frame(m: Model, d: Data, objtype: np.ndarray, objid: np.ndarray):
  """Position (n, 3) and orientation (n, 3, 3) of objects (get_xpos_xmat)."""
  return _obj_tables(m, d, objtype, objid, 'pos'), _obj_tables(m, d, objtype, objid, 'mat')


def _obj_quat(m: Model, d: Data, objtype: np.ndarray, objid: np.ndarray) -> jax.Array:
  """Global orientation quaternions (n, 4) of objects (get_xquat)."""
  return _obj_tables(m, d, objtype, objid, 'quat')


def _rotate_t(mat: jax.Array, v: jax.Array) -> jax.Array:
  """mat' v for batches (n, 3, 3), (n, 3)."""
  return jnp.einsum('nji,nj->ni', mat, v)


def _obj_motion(
  m: Model, d: Data, field: jax.Array, objtype: np.ndarray, objid: np.ndarray, local: bool
):
  """A com-based motion field (cvel or cacc) at the objects (n, 6) (mju_transformSpatial)."""
  body = _obj_body(m, objtype, objid)
  pos, mat = _obj_frame(m, d, objtype, objid)
  com = d.subtree_com[np.asarray(m.body_rootid)[body]]
  v = field[body]
  ang, lin = v[:, :3], v[:, 3:] - jnp.cross(pos - com, v[:, :3])
  if local:
    ang, lin = _rotate_t(mat, ang), _rotate_t(mat, lin)
  # objects on bodies welded to the world (static or mocap) have the world's motion: no
  # velocity, and cacc's -gravity (an accelerometer there reads 9.81 up, as in MuJoCo)
  return jnp.concatenate([ang, lin], axis=-1)


def object_velocity(m: Model, d: Data, objtype, objid, local: bool = False) -> jax.Array:
  """Angular:linear velocity (n, 6) of objects, world or local orientation (mj_objectVelocity)."""
  objtype, objid = np.atleast_1d(objtype), np.atleast_1d(objid)
  return _obj_motion(m, d, d.cvel, objtype, objid, local)


def object_acceleration(m: Model, d: Data, objtype, objid, local: bool = False) -> jax.Array:
  """Angular:linear acceleration (n, 6) of objects (mj_objectAcceleration); needs rne_post."""
  objtype, objid = np.atleast_1d(objtype), np.atleast_1d(objid)
  acc = _obj_motion(m, d, d.cacc, objtype, objid, local)
  vel = _obj_motion(m, d, d.cvel, objtype, objid, local)
  # Coriolis correction of the rotating frame: acc_lin += vel_ang x vel_lin
  return acc.at[:, 3:].add(jnp.cross(vel[:, :3], vel[:, 3:]))


def subtree_vel(m: Model, d: Data) -> Data:
  """subtree_linvel and subtree_angmom (nbody, 3) about each subtree com (mj_subtreeVel)."""
  dtype = d.xpos.dtype
  body = np.arange(m.nbody)
  vel = object_velocity(m, d, np.full(m.nbody, ObjType.BODY), body)
  ang, lin = vel[:, :3], vel[:, 3:]
  mass = m.body_mass
  subtree = jnp.asarray(m.tree_subtree, dtype)
  smass = m.body_subtreemass
  linvel = (subtree @ (mass[:, None] * lin)) / jnp.maximum(MINVAL, smass)[:, None]
  local = _rotate_t(d.ximat, ang) * m.body_inertia
  own = jnp.einsum('nij,nj->ni', d.ximat, local)
  own = own + jnp.cross(d.xipos - d.subtree_com, mass[:, None] * (lin - linvel))
  # each body's subtree momentum, moved to its parent's subtree com, is added to the parent
  parent = np.asarray(m.body_parentid)
  moved = jnp.cross(
    d.subtree_com - d.subtree_com[parent], smass[:, None] * (linvel - linvel[parent])
  )
  own = own.at[0].set(0.0)
  moved = moved.at[0].set(0.0)
  angmom = subtree @ (own + moved) - moved
  return d.replace(subtree_linvel=linvel, subtree_angmom=angmom)


# ------------------------------------------------------------------------------ sensor types


def _objid(m: Model, ids: np.ndarray) -> np.ndarray:
  return np.asarray(m.sensor_objid)[ids]


def _limit_rows(m: Model, ids: np.ndarray, kind: int):
  """Static (n, 2) candidate limit rows of each sensor's joint or tendon and their validity.

  A slide/hinge joint or tendon has a lower-side and an upper-side row, a ball joint one; rows
  of one kind are in object order, so each object's rows are found by binary search.
  """
  lay = layout_of(m)
  obj = _objid(m, ids)
  cand = np.flatnonzero(lay.type == kind)
  lo = np.searchsorted(lay.id[cand], obj, 'left')
  count = np.searchsorted(lay.id[cand], obj, 'right') - lo
  k = np.arange(2)
  valid = k[None, :] < count[:, None]
  rows = cand[np.where(valid, lo[:, None] + k, 0)] if cand.size else np.zeros(valid.shape, int)
  return rows, valid


def _limit_value(m: Model, d: Data, ids: np.ndarray, kind: int, value: jax.Array) -> jax.Array:
  """value (nefc,) of the first active limit row of each sensor's object, else 0 (n, 1)."""
  rows, valid = _limit_rows(m, ids, kind)
  if not valid.any():
    return jnp.zeros((len(ids), 1), d.qpos.dtype)
  act = d.efc_active[rows] & valid
  v = value[rows]
  return jnp.where(act[:, 0], v[:, 0], jnp.where(act[:, 1], v[:, 1], 0.0))[:, None]


def _frame_axes(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """framepos, framexaxis/yaxis/zaxis, in the world or the reference frame (n, 3)."""
  stype = np.asarray(m.sensor_type)[ids]
  objtype, objid = np.asarray(m.sensor_objtype)[ids], _objid(m, ids)
  reftype, refid = np.asarray(m.sensor_reftype)[ids], np.asarray(m.sensor_refid)[ids]
  pos, mat = _obj_frame(m, d, objtype, objid)
  col = np.where(stype == S.FRAMEPOS, 0, stype - S.FRAMEXAXIS)
  axis = jnp.take_along_axis(mat, col[:, None, None], axis=2)[..., 0]
  ref = refid >= 0
  if ref.any():
    rpos, rmat = _obj_frame(m, d, np.where(ref, reftype, ObjType.XBODY), np.maximum(refid, 0))
    pos = jnp.where(ref[:, None], _rotate_t(rmat, pos - rpos), pos)
    axis = jnp.where(ref[:, None], _rotate_t(rmat, axis), axis)
  return jnp.where((stype == S.FRAMEPOS)[:, None], pos, axis)


def _insidesite(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """1 where the object's position lies inside the site's volume, else 0 (mjSENS_INSIDESITE)."""
  objtype, objid = np.asarray(m.sensor_objtype)[ids], _objid(m, ids)
  pos, _ = _obj_frame(m, d, objtype, objid)
  # a massless body carrying mass below it (a flex parent) is found by its subtree's centre
  body = (objtype == ObjType.BODY) & (objid > 0)
  if body.any():
    mass, sub = m.body_mass[objid], m.body_subtreemass[objid]
    use_com = body & (mass < MINVAL) & (sub >= MINVAL)
    pos = jnp.where(use_com[:, None], d.subtree_com[objid], pos)
  inside = _inside_site(m, d, np.asarray(m.sensor_refid)[ids], pos[:, None])[:, 0]
  return inside.astype(pos.dtype)[:, None]


def _frame_quat(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  objtype, objid = np.asarray(m.sensor_objtype)[ids], _objid(m, ids)
  reftype, refid = np.asarray(m.sensor_reftype)[ids], np.asarray(m.sensor_refid)[ids]
  quat = _obj_quat(m, d, objtype, objid)
  ref = refid >= 0
  if ref.any():
    rquat = _obj_quat(m, d, np.where(ref, reftype, ObjType.XBODY), np.maximum(refid, 0))
    quat = jnp.where(ref[:, None], math.quat_mul(math.quat_neg(rquat), quat), quat)
  return quat


def _frame_vel(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """framelinvel, frameangvel, in the world or relative to a moving reference frame (n, 3)."""
  stype = np.asarray(m.sensor_type)[ids]
  objtype, objid = np.asarray(m.sensor_objtype)[ids], _objid(m, ids)
  reftype, refid = np.asarray(m.sensor_reftype)[ids], np.asarray(m.sensor_refid)[ids]
  vel = object_velocity(m, d, objtype, objid)
  ref = refid >= 0
  if ref.any():
    rt, ri = np.where(ref, reftype, ObjType.XBODY), np.maximum(refid, 0)
    pos, _ = _obj_frame(m, d, objtype, objid)
    rpos, rmat = _obj_frame(m, d, rt, ri)
    rvel = object_velocity(m, d, rt, ri)
    rel = vel - rvel
    # linear velocity seen from the rotating reference frame
    lin = rel[:, 3:] + jnp.cross(pos - rpos, rvel[:, :3])
    relvel = jnp.concatenate([_rotate_t(rmat, rel[:, :3]), _rotate_t(rmat, lin)], axis=-1)
    vel = jnp.where(ref[:, None], relvel, vel)
  return jnp.where((stype == S.FRAMELINVEL)[:, None], vel[:, 3:], vel[:, :3])


def _frame_acc(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  stype = np.asarray(m.sensor_type)[ids]
  acc = object_acceleration(m, d, np.asarray(m.sensor_objtype)[ids], _objid(m, ids))
  return jnp.where((stype == S.FRAMELINACC)[:, None], acc[:, 3:], acc[:, :3])


def _site_motion(m: Model, d: Data, ids: np.ndarray, acc: bool) -> jax.Array:
  site = _objid(m, ids)
  fn = object_acceleration if acc else object_velocity
  return fn(m, d, np.full(len(ids), ObjType.SITE), site, local=True)


def _site_wrench(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """Interaction wrench between the site's body and its parent, at the site, site frame (n, 6)."""
  site = _objid(m, ids)
  body = np.asarray(m.site_bodyid)[site]
  com = d.subtree_com[np.asarray(m.body_rootid)[body]]
  f = d.cfrc_int[body]
  pos, mat = d.site_xpos[site], d.site_xmat[site]
  torque = f[:, :3] - jnp.cross(pos - com, f[:, 3:])
  return jnp.concatenate([_rotate_t(mat, torque), _rotate_t(mat, f[:, 3:])], axis=-1)


def _touch(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """Normal forces of contacts on the site's body whose force ray meets the site volume."""
  out = jnp.zeros(len(ids), d.qpos.dtype)
  lay = layout_of(m)
  g1, g2 = lay.contact_geom1, lay.contact_geom2
  if not g1.size:
    return out[:, None]
  site = _objid(m, ids)
  body = np.asarray(m.site_bodyid)[site]
  gb = np.asarray(m.geom_bodyid)
  gbj = jnp.asarray(gb)
  if (g1 >= 0).all():
    # slots tied to pairs: only the slots on each sensor's body (static pairs)
    b1, b2 = gb[g1], gb[g2]
    s, k = np.nonzero((body[:, None] == b1[None, :]) | (body[:, None] == b2[None, :]))
    if not s.size:
      return out[:, None]
    valid = True
  else:
    # capped slots hold any pair: each slot's two bodies look up the touch sensors on them in a
    # static table (body -> its sensors), so the work is 2 x slots x (sensors per body), not
    # sensors x slots (144 touch sensors x 700 slots of 8 humanoids was 8.6 MiB per world)
    nper = np.bincount(body, minlength=m.nbody)
    table = np.full((m.nbody, nper.max()), -1, np.int32)
    for i, b in enumerate(body):
      table[b, np.count_nonzero(body[:i] == b)] = i
    b1d, b2d = gbj[d.contact.geom1], gbj[d.contact.geom2]
    table = jnp.asarray(table)
    # a slot whose two geoms share a body counts once, as MuJoCo's loop over contacts does
    sens = jnp.concatenate([table[b1d], jnp.where((b2d != b1d)[:, None], table[b2d], -1)])
    s = sens.reshape(-1)
    k = np.repeat(np.tile(np.arange(len(g1)), 2), table.shape[1])
    valid = s >= 0
    s = jnp.maximum(s, 0)
  bs = jnp.asarray(body)[s]
  b1d, b2d = gbj[d.contact.geom1[k]], gbj[d.contact.geom2[k]]
  frc = rne_post.contact_force(m, d)[k, 0]
  on = valid & (d.contact.efc_address[k] >= 0) & (frc > 0) & ((bs == b1d) | (bs == b2d))
  normal = d.contact.frame[k, 0] * jnp.where(on, frc, 1.0)[:, None]
  conray, _ = math.normalize3(normal)
  # pointing into the sensor's body
  conray = jnp.where((bs == b2d)[:, None], -conray, conray)
  ss = jnp.asarray(site)[s]
  stype = np.asarray(m.site_type)[site]
  hit = jnp.zeros(len(k), bool)
  for t in np.unique(stype):
    if isinstance(s, np.ndarray):
      sel = np.flatnonzero(stype[s] == t)
      x = ray.ray_geom(
        int(t),
        d.site_xpos[ss[sel]],
        d.site_xmat[ss[sel]],
        m.site_size[ss[sel]],
        d.contact.pos[k[sel]],
        conray[sel],
      )
      hit = hit.at[sel].set(x >= 0)
    else:
      x = ray.ray_geom(
        int(t), d.site_xpos[ss], d.site_xmat[ss], m.site_size[ss], d.contact.pos[k], conray
      )
      hit = jnp.where(jnp.asarray(stype)[s] == t, x >= 0, hit)
  return out.at[s].add(jnp.where(on & hit, frc, 0.0))[:, None]


# rangefinder data fields (mjtRayDataField: dist dir origin point normal depth) in a row of
# all of them; each sensor keeps the columns of its fields, in order
_RAY_COLS = (np.arange(0, 1), np.arange(1, 4), np.arange(4, 7), np.arange(7, 10), None, [10])


def _rangefinder(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """Site rangefinders along the site's z axis (mj_ray, static geoms in), with the data fields
  each asks for (fill_raydata); distance -1 and zero vectors where nothing is hit."""
  site = _objid(m, ids)
  body = jnp.asarray(np.asarray(m.site_bodyid)[site])
  pnt, vec = d.site_xpos[site], d.site_xmat[site, :, 2]
  fn = lambda p, v, b: ray.ray(m, d, p, v, None, True, b)[0]  # noqa: E731
  dist = jax.vmap(fn)(pnt, vec, body)[:, None]
  spec = np.asarray(m.sensor_intprm)[ids, 0]
  if (spec == 1).all():
    return dist
  hit = dist >= 0
  point = jnp.where(hit, pnt + dist * vec, 0.0)
  row = jnp.concatenate([dist, jnp.where(hit, vec, 0.0), pnt, point, dist], axis=1)
  cols = [
    np.concatenate([c for f, c in enumerate(_RAY_COLS) if c is not None and s >> f & 1])
    for s in spec
  ]
  width = max(len(c) for c in cols)
  cols = np.stack([np.pad(c, (0, width - len(c))) for c in cols])
  return jnp.take_along_axis(row, cols, axis=1)


def _camprojection(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """Pixel coordinates (n, 2) of the site in the camera image (cam_project)."""
  site, cam = _objid(m, ids), np.asarray(m.sensor_refid)[ids]
  cpos, cmat, _ = _cam_frames(m, d)
  res = np.asarray(m.cam_resolution)[cam].astype(np.float64)
  intr, ssize = m.cam_intrinsic[cam], m.cam_sensorsize[cam]
  has = (ssize[:, 0] != 0) & (ssize[:, 1] != 0)
  fovy = 0.5 / jnp.tan(m.cam_fovy[cam] * jnp.pi / 360.0) * res[:, 1]
  fx = jnp.where(has, intr[:, 0] / jnp.where(has, ssize[:, 0], 1.0) * res[:, 0], fovy)
  fy = jnp.where(has, intr[:, 1] / jnp.where(has, ssize[:, 1], 1.0) * res[:, 1], fovy)
  p = _rotate_t(cmat[cam], d.site_xpos[site] - cpos[cam])
  z = p[:, 2]
  # avoid dividing by tiny numbers, keeping the sign
  z = jnp.where(jnp.abs(z) < MINVAL, jnp.where(z < 0, -MINVAL, MINVAL), z)
  return jnp.stack([-fx * p[:, 0] / z + 0.5 * res[:, 0], fy * p[:, 1] / z + 0.5 * res[:, 1]], -1)


def _geom_pairs(m: Model, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
  """Static geom pairs of collision sensors: (sensor row, slot within the sensor, geom1, geom2),
  each sensor's geom1 (or its body's geoms) against geom2 (or its body's), geom1 outermost."""
  adr, num = np.asarray(m.body_geomadr), np.asarray(m.body_geomnum)

  def side(otype, oid):
    body = otype == ObjType.BODY
    b = np.where(body, oid, 0)
    return np.where(body, adr[b], oid), np.where(body, num[b], 1)

  id1, n1 = side(np.asarray(m.sensor_objtype)[ids], _objid(m, ids))
  id2, n2 = side(np.asarray(m.sensor_reftype)[ids], np.asarray(m.sensor_refid)[ids])
  count = n1 * n2
  row = np.repeat(np.arange(len(ids)), count)
  slot = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
  return row, slot, id1[row] + slot // n2[row], id2[row] + slot % n2[row]


def _collision(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """distance, normal and fromto sensors (n, 6), each in its first dim columns.

  Every geom pair of a sensor goes through mj_geomDistance bounded by the sensor's cutoff; the
  first pair closer than all others and than the cutoff gives the distance (else the cutoff) and
  the segment (else zero), whose direction, normalized, is the normal (zero stays zero).
  """
  cutoff = m.sensor_cutoff[ids]
  stype = np.asarray(m.sensor_type)[ids]
  row, slot, g1, g2 = _geom_pairs(m, ids)
  dist = cutoff
  fromto = jnp.zeros((len(ids), 6), cutoff.dtype)
  if row.size:
    pd, pf = distance.geom_distance(m, d, g1, g2, cutoff[row])
    # each sensor's pairs in a row of a padded table: the first smallest wins, as MuJoCo's loop
    width = int(slot.max()) + 1
    table = jnp.full((len(ids), width), jnp.inf, pd.dtype).at[row, slot].set(pd)
    seg = jnp.zeros((len(ids), width, 6), pf.dtype).at[row, slot].set(pf)
    k = jnp.argmin(table, axis=1)
    best = jnp.take_along_axis(table, k[:, None], axis=1)[:, 0]
    hit = best < cutoff
    dist = jnp.where(hit, best, cutoff)
    fromto = jnp.where(hit[:, None], jnp.take_along_axis(seg, k[:, None, None], axis=1)[:, 0], 0.0)
  vec = fromto[:, 3:] - fromto[:, :3]
  unit, _ = math.normalize3(vec)
  normal = jnp.where(jnp.any(vec != 0, axis=-1, keepdims=True), unit, 0.0)
  pad = lambda x: jnp.pad(x, ((0, 0), (0, 6 - x.shape[1])))  # noqa: E731
  out = jnp.where((stype == S.GEOMDIST)[:, None], pad(dist[:, None]), fromto)
  return jnp.where((stype == S.GEOMNORMAL)[:, None], pad(normal), out)


# ------------------------------------------------------------------------------ contact sensors

# sizes of the data fields: found force torque dist pos normal tangent linvel angvel
CONDATA_SIZE = (1, 3, 3, 1, 3, 3, 3, 3, 3)
CONDATA_START = np.concatenate([[0], np.cumsum(CONDATA_SIZE)])
REDUCE_NONE, REDUCE_MINDIST, REDUCE_MAXFORCE, REDUCE_NETFORCE = range(4)


def _side_match(m: Model, otype: np.ndarray, oid: np.ndarray, body, geom, xp=jnp):
  """Whether contact sides (body, geom) (n, w) match sensor objects (n, 1) (checkMatch).

  No object and a site (whose volume is tested apart) match any side; a subtree (xbody) matches
  the bodies below it, the body included. xp is np for static slots, jnp for dynamic ones.
  """
  sub = np.asarray(m.tree_subtree)
  below = xp.asarray(sub)[np.where(otype == ObjType.XBODY, oid, 0), body] > 0
  anything = (otype == 0) | (otype == ObjType.SITE)
  out = (
    anything | ((otype == ObjType.GEOM) & (geom == oid)) | ((otype == ObjType.BODY) & (body == oid))
  )
  return out | ((otype == ObjType.XBODY) & below)


def _match(m: Model, ids: np.ndarray, body1, geom1, body2, geom2, xp=jnp):
  """(match, flip) of contacts (n, w) against contact sensors (matchContact without the site).

  With both criteria a contact matches in order (flip false) or reversed (flip true; in order
  wins when both hold); with one, the normal points away from the first or towards the second.
  """
  t1, i1 = np.asarray(m.sensor_objtype)[ids][:, None], _objid(m, ids)[:, None]
  t2, i2 = np.asarray(m.sensor_reftype)[ids][:, None], np.asarray(m.sensor_refid)[ids][:, None]
  m11 = _side_match(m, t1, i1, body1, geom1, xp)
  m12 = _side_match(m, t1, i1, body2, geom2, xp)
  m21 = _side_match(m, t2, i2, body1, geom1, xp)
  m22 = _side_match(m, t2, i2, body2, geom2, xp)
  regular, reverse = m11 & m22, m12 & m21
  both = (t1 != 0) & (t2 != 0)
  match = xp.where(both, regular | reverse, (m11 | m12) & (m21 | m22))
  one = xp.where(t1 != 0, ~m11, (t2 != 0) & ~m22)
  flip = xp.where(both, reverse & ~regular, one)
  return match, flip


def _inside_site(m: Model, d: Data, site: np.ndarray, point: jax.Array) -> jax.Array:
  """Whether points (n, w, 3) lie inside sites (n,) (mju_insideGeom)."""
  vec = point - d.site_xpos[site][:, None]
  size = m.site_size[site][:, None]
  p = jnp.einsum('nji,nwj->nwi', d.site_xmat[site], vec)
  typ = np.asarray(m.site_type)[site][:, None]
  sq = lambda x: x * x  # noqa: E731
  zc = p[..., 2] - jnp.clip(p[..., 2], -size[..., 1], size[..., 1])
  r2 = sq(p[..., 0]) + sq(p[..., 1])
  inside = {
    GeomType.SPHERE: jnp.sum(vec * vec, axis=-1) < sq(size[..., 0]),
    GeomType.CAPSULE: r2 + sq(zc) < sq(size[..., 0]),
    GeomType.ELLIPSOID: jnp.sum(sq(p) / sq(size), axis=-1) < 1,
    GeomType.CYLINDER: (jnp.abs(p[..., 2]) < size[..., 1]) & (r2 < sq(size[..., 0])),
    GeomType.BOX: jnp.all(jnp.abs(p) < size, axis=-1),
  }
  out = jnp.zeros(p.shape[:-1], bool)
  for t, x in inside.items():
    out = jnp.where(typ == t, x, out)
  return out


def _contact_candidates(m: Model, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Static (n, w) contact slots each contact sensor may match, and which entries are real.

  Slots tied to geom pairs are matched statically (the site's volume aside); capped slots,
  whose geoms vary, are all candidates.
  """
  lay = layout_of(m)
  g1, g2 = lay.contact_geom1, lay.contact_geom2
  n = len(ids)
  if not g1.size:
    return np.zeros((n, 0), np.int64), np.zeros((n, 0), bool)
  if (g1 < 0).any():
    return np.broadcast_to(np.arange(len(g1)), (n, len(g1))), np.ones((n, len(g1)), bool)
  gb = np.asarray(m.geom_bodyid)
  possible, _ = _match(m, ids, gb[g1][None], g1[None], gb[g2][None], g2[None], xp=np)
  count = possible.sum(axis=1)
  w = int(count.max())
  rows = np.zeros((n, w), np.int64)
  valid = np.arange(w)[None, :] < count[:, None]
  rows[valid] = np.nonzero(possible)[1]
  return rows, valid


def _contact_order(m: Model, d: Data) -> tuple[jax.Array, jax.Array]:
  """Keys (ncon,), (ncon,) that sort the active contact slots into mj_collision's order.

  Uncapped slots already are in that order. A capped model keeps each condim class's contacts
  in order but the classes apart: each contact is ranked by its geom pair's first collider slot
  (Layout.slot_order), then by its slot (a pair's contacts are in one class, in order).
  """
  ncon = d.contact.dist.shape[0]
  slot = jnp.arange(ncon)
  lay = layout_of(m)
  if (lay.contact_geom1 >= 0).all():
    return slot, jnp.zeros(ncon, slot.dtype)
  ngeom = int(m.ngeom)
  pair = lay.slot_geom1.astype(np.int64) * ngeom + lay.slot_geom2
  keys, first = np.unique(pair, return_index=True)
  k = d.contact.geom1.astype(keys.dtype) * ngeom + d.contact.geom2
  pos = jnp.clip(jnp.searchsorted(jnp.asarray(keys), k), 0, len(keys) - 1)
  return jnp.asarray(first)[pos], slot


def _contact_velocity(m: Model, d: Data, k: jax.Array) -> jax.Array:
  """Angular:linear velocity (.., 6) of the second geom's body relative to the first's at the
  contacts' positions, in their contact frames."""
  gb = jnp.asarray(m.geom_bodyid)
  point = d.contact.pos[k]

  def vel(body):
    v = d.cvel[body]
    com = d.subtree_com[jnp.asarray(m.body_rootid)[body]]
    return v[..., :3], v[..., 3:] - jnp.cross(point - com, v[..., :3])

  a1, l1 = vel(gb[d.contact.geom1[k]])
  a2, l2 = vel(gb[d.contact.geom2[k]])
  frame = d.contact.frame[k]
  ang = jnp.einsum('...ij,...j->...i', frame, a2 - a1)
  lin = jnp.einsum('...ij,...j->...i', frame, l2 - l1)
  return jnp.concatenate([ang, lin], axis=-1)


def _contact(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """Contact sensors (n, max dim): their num slots of the requested data fields.

  Contacts are matched (matchContact), flipped where the sensor's first object is the contact's
  second (normal and tangent negated, the z components of force, torque and velocities too),
  then reduced as mj_computeSensorAcc: the first num in mj_collision's order, the num smallest
  distances or largest forces (ties by order), or one net wrench at the force-weighted centroid
  of all matches in the world frame. found is the number of matches; empty slots are zero.
  """
  intprm = np.asarray(m.sensor_intprm)[ids]
  spec, reduce, num = intprm[:, 0], intprm[:, 1], intprm[:, 2]
  has = (spec[:, None] >> np.arange(len(CONDATA_SIZE))) & 1 == 1
  dim = np.asarray(m.sensor_dim)[ids]
  n, width = len(ids), int(dim.max())
  dtype = d.qpos.dtype
  rows, valid = _contact_candidates(m, ids)
  w = rows.shape[1]
  nslot = int(min(num.max(), w))
  con = d.contact
  need_force = (has[:, 1:3].any() or (reduce >= REDUCE_MAXFORCE).any()) and w
  frc = rne_post.contact_force(m, d)[rows] if need_force else jnp.zeros((n, w, 6), dtype)
  gb = jnp.asarray(m.geom_bodyid)
  geom1, geom2 = con.geom1[rows], con.geom2[rows]
  match, flip = _match(m, ids, gb[geom1], geom1, gb[geom2], geom2)
  match &= con.active[rows] & valid
  site = np.asarray(m.sensor_objtype)[ids] == ObjType.SITE
  if site.any() and w:
    inside = _inside_site(m, d, np.where(site, _objid(m, ids), 0), con.pos[rows])
    match &= inside | ~site[:, None]
  nmatch = jnp.sum(match, axis=1).astype(dtype)
  pos, frame = con.pos[rows], con.frame[rows]

  # every field of every candidate: found force torque dist pos normal tangent linvel angvel
  sign = jnp.where(flip, -1.0, 1.0)[..., None]
  zflip = jnp.concatenate([jnp.ones_like(sign), jnp.ones_like(sign), sign], axis=-1)
  parts = [jnp.broadcast_to(nmatch[:, None, None], (n, w, 1)), frc[..., :3] * zflip]
  parts += [frc[..., 3:] * zflip, con.dist[rows][..., None], pos]
  parts += [frame[..., 0, :] * sign, frame[..., 1, :] * sign]
  if has[:, 7:].any() and w:
    vel = _contact_velocity(m, d, rows)
    parts += [vel[..., 3:] * zflip, vel[..., :3] * zflip]
  else:
    parts += [jnp.zeros((n, w, 6), dtype)]
  fields = jnp.concatenate(parts, axis=-1)

  # the first nslot matches by (criterion, mj_collision order)
  first, second = _contact_order(m, d)
  crit = jnp.where(
    (reduce == REDUCE_MINDIST)[:, None],
    con.dist[rows],
    jnp.where((reduce == REDUCE_MAXFORCE)[:, None], -jnp.sum(frc[..., :3] ** 2, axis=-1), 0.0),
  )
  keys = (second[rows], first[rows], crit, (~match).astype(jnp.int32))
  pick = jnp.lexsort(keys, axis=-1)[:, :nslot]
  slots = jnp.take_along_axis(fields, pick[..., None], axis=1)
  net = reduce == REDUCE_NETFORCE
  filled = jnp.arange(nslot)[None, :] < jnp.minimum(nmatch, jnp.asarray(num))[:, None]
  slots = jnp.where((filled & ~net[:, None])[..., None], slots, 0.0)
  if net.any() and nslot:
    # one synthetic contact in the first slot, zero without matches
    netforce = _netforce(frc, pos, frame, match, flip, nmatch)
    on = (net & (nmatch > 0))[:, None, None]
    slots = slots.at[:, :1].set(jnp.where(on, netforce, slots[:, :1]))

  # each sensor's columns: slot j's requested fields, in order (static gathers)
  row, slot, field = [], [], []
  for r in range(n):
    f = np.flatnonzero(has[r])
    own = np.concatenate([CONDATA_START[i] + np.arange(CONDATA_SIZE[i]) for i in f])
    row.append(np.full(dim[r], r))
    slot.append(np.repeat(np.arange(num[r]), len(own)))
    field.append(np.tile(own, num[r]))
  row, slot, field = np.concatenate(row), np.concatenate(slot), np.concatenate(field)
  col = np.concatenate([np.arange(dim[r]) for r in range(n)])
  keep = slot < slots.shape[1]  # slots past every candidate stay zero
  out = jnp.zeros((n, width), dtype)
  return out.at[row[keep], col[keep]].set(slots[row[keep], slot[keep], field[keep]])


def _netforce(frc, pos, frame, match, flip, nmatch) -> jax.Array:
  """Net wrench of the matched contacts (n, 1, 23) at their force-weighted centroid, world frame.

  Flipped contacts' wrenches are negated; the frame is the world's (normal x, tangent y).
  """
  wrench = jnp.where(match[..., None], frc * jnp.where(flip, -1.0, 1.0)[..., None], 0.0)
  weight = jnp.linalg.norm(wrench[..., :3], axis=-1)
  total = jnp.sum(weight, axis=1)
  scale = 1.0 / jnp.maximum(total, MINVAL)
  point = jnp.sum(pos * weight[..., None], axis=1) * scale[:, None]
  force = jnp.einsum('nwji,nwj->nwi', frame, wrench[..., :3])
  torque = jnp.einsum('nwji,nwj->nwi', frame, wrench[..., 3:])
  torque = torque + jnp.cross(pos - point[:, None], force)
  n = frc.shape[0]
  zero = jnp.zeros((n, 1), frc.dtype)
  x = jnp.broadcast_to(jnp.array([1.0, 0.0, 0.0], frc.dtype), (n, 3))
  y = jnp.broadcast_to(jnp.array([0.0, 1.0, 0.0], frc.dtype), (n, 3))
  out = [nmatch[:, None], jnp.sum(force, 1), jnp.sum(torque, 1), zero, point, x, y]
  return jnp.concatenate(out + [jnp.zeros((n, 6), frc.dtype)], axis=-1)[:, None]


def _tendon_actfrc(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  trn = np.asarray(m.actuator_trntype) == TrnType.TENDON
  mask = trn[None, :] & (np.asarray(m.actuator_trnid)[:, 0][None, :] == _objid(m, ids)[:, None])
  return (jnp.asarray(mask, d.qpos.dtype) @ d.actuator_force)[:, None]


def _col(x: jax.Array) -> jax.Array:
  return x[:, None]


_Fn = Callable[[Model, Data, np.ndarray], jax.Array]

POS_SENSORS: dict[int, _Fn] = {
  S.MAGNETOMETER: lambda m, d, i: _rotate_t(
    d.site_xmat[_objid(m, i)], jnp.broadcast_to(m.opt.magnetic, (len(i), 3))
  ),
  S.CAMPROJECTION: _camprojection,
  S.RANGEFINDER: _rangefinder,
  S.JOINTPOS: lambda m, d, i: _col(d.qpos[np.asarray(m.jnt_qposadr)[_objid(m, i)]]),
  S.TENDONPOS: lambda m, d, i: _col(d.ten_length[_objid(m, i)]),
  S.ACTUATORPOS: lambda m, d, i: _col(d.actuator_length[_objid(m, i)]),
  S.BALLQUAT: lambda m, d, i: math.quat_normalize(
    d.qpos[np.asarray(m.jnt_qposadr)[_objid(m, i)][:, None] + np.arange(4)]
  ),
  S.JOINTLIMITPOS: lambda m, d, i: _limit_value(
    m, d, i, ConstraintType.LIMIT_JOINT, d.efc_pos - d.efc_margin
  ),
  S.TENDONLIMITPOS: lambda m, d, i: _limit_value(
    m, d, i, ConstraintType.LIMIT_TENDON, d.efc_pos - d.efc_margin
  ),
  S.FRAMEPOS: _frame_axes,
  S.FRAMEXAXIS: _frame_axes,
  S.FRAMEYAXIS: _frame_axes,
  S.FRAMEZAXIS: _frame_axes,
  S.FRAMEQUAT: _frame_quat,
  S.SUBTREECOM: lambda m, d, i: d.subtree_com[_objid(m, i)],
  S.INSIDESITE: _insidesite,
  S.E_POTENTIAL: lambda m, d, i: jnp.broadcast_to(passive.energy_pos(m, d), (len(i), 1)),
  # MuJoCo 4 computes e_kinetic at the position stage (qM is known by then)
  S.E_KINETIC: lambda m, d, i: jnp.broadcast_to(passive.energy_vel(m, d), (len(i), 1)),
  S.CLOCK: lambda m, d, i: jnp.broadcast_to(d.time, (len(i), 1)),
  S.GEOMDIST: _collision,
  S.GEOMNORMAL: _collision,
  S.GEOMFROMTO: _collision,
  S.CONTACT: _contact,
}

VEL_SENSORS: dict[int, _Fn] = {
  S.VELOCIMETER: lambda m, d, i: _site_motion(m, d, i, acc=False)[:, 3:],
  S.GYRO: lambda m, d, i: _site_motion(m, d, i, acc=False)[:, :3],
  S.JOINTVEL: lambda m, d, i: _col(d.qvel[np.asarray(m.jnt_dofadr)[_objid(m, i)]]),
  S.TENDONVEL: lambda m, d, i: _col(d.ten_velocity[_objid(m, i)]),
  S.ACTUATORVEL: lambda m, d, i: _col(d.actuator_velocity[_objid(m, i)]),
  S.BALLANGVEL: lambda m, d, i: d.qvel[
    np.asarray(m.jnt_dofadr)[_objid(m, i)][:, None] + np.arange(3)
  ],
  S.JOINTLIMITVEL: lambda m, d, i: _limit_value(m, d, i, ConstraintType.LIMIT_JOINT, d.efc_vel),
  S.TENDONLIMITVEL: lambda m, d, i: _limit_value(m, d, i, ConstraintType.LIMIT_TENDON, d.efc_vel),
  S.FRAMELINVEL: _frame_vel,
  S.FRAMEANGVEL: _frame_vel,
  S.SUBTREELINVEL: lambda m, d, i: d.subtree_linvel[_objid(m, i)],
  S.SUBTREEANGMOM: lambda m, d, i: d.subtree_angmom[_objid(m, i)],
  S.E_KINETIC: lambda m, d, i: jnp.broadcast_to(passive.energy_vel(m, d), (len(i), 1)),
  S.CONTACT: _contact,
}

ACC_SENSORS: dict[int, _Fn] = {
  S.TOUCH: _touch,
  S.ACCELEROMETER: lambda m, d, i: _site_motion(m, d, i, acc=True)[:, 3:],
  S.FORCE: lambda m, d, i: _site_wrench(m, d, i)[:, 3:],
  S.TORQUE: lambda m, d, i: _site_wrench(m, d, i)[:, :3],
  S.ACTUATORFRC: lambda m, d, i: _col(d.actuator_force[_objid(m, i)]),
  S.JOINTACTFRC: lambda m, d, i: _col(d.qfrc_actuator[np.asarray(m.jnt_dofadr)[_objid(m, i)]]),
  S.TENDONACTFRC: _tendon_actfrc,
  S.JOINTLIMITFRC: lambda m, d, i: _limit_value(m, d, i, ConstraintType.LIMIT_JOINT, d.efc_force),
  S.TENDONLIMITFRC: lambda m, d, i: _limit_value(m, d, i, ConstraintType.LIMIT_TENDON, d.efc_force),
  S.FRAMELINACC: _frame_acc,
  S.FRAMEANGACC: _frame_acc,
  S.CONTACT: _contact,
  S.PLUGIN: touchgrid.touch_grid,
}


def _cutoff(m: Model, ids: np.ndarray, values: jax.Array) -> jax.Array:
  """Clamps real data to [-cutoff, cutoff] and positive data to cutoff (apply_cutoff); fromto
  sensors, whose cutoff bounds the distance, and contact sensors, which ignore it, are not."""
  dtype = np.asarray(m.sensor_datatype)[ids][:, None]
  cutoff = m.sensor_cutoff[ids][:, None]
  on = (cutoff > 0) & ~np.isin(np.asarray(m.sensor_type)[ids], (S.GEOMFROMTO, S.CONTACT))[:, None]
  values = jnp.where(on & (dtype == DataType.REAL), jnp.clip(values, -cutoff, cutoff), values)
  return jnp.where(on & (dtype == DataType.POSITIVE), jnp.minimum(cutoff, values), values)


def _compute(m: Model, d: Data, ids: np.ndarray, table: dict[int, _Fn]) -> Data:
  """Writes the values of the given sensors, type by type, into sensordata.

  Collision sensors of all three types are computed in one call (their rows padded to 6
  values, each sensor keeping its first dim).
  """
  stype = np.asarray(m.sensor_type)[ids]
  adr, dim = np.asarray(m.sensor_adr), np.asarray(m.sensor_dim)
  coll = np.isin(stype, _COLLISION)
  batches = [ids[(stype == t) & ~coll] for t in np.unique(stype[~coll])]
  if coll.any():
    batches.append(ids[coll])
  idx, vals = [], []
  for sel in batches:
    t = np.asarray(m.sensor_type)[sel[0]]
    if t == S.USER:
      # no sensor callback: MuJoCo clears user sensors
      i = np.concatenate([adr[s] + np.arange(dim[s]) for s in sel])
      idx.append(i)
      vals.append(jnp.zeros(len(i), d.sensordata.dtype))
      continue
    v = _cutoff(m, sel, table[int(t)](m, d, sel).astype(d.sensordata.dtype))
    col = np.arange(v.shape[1])
    own = col[None, :] < dim[sel][:, None]
    idx.append((adr[sel][:, None] + col)[own])
    vals.append(v[own])
  sensordata = d.sensordata.at[np.concatenate(idx)].set(jnp.concatenate(vals))
  return d.replace(sensordata=sensordata)


def sensor_pos(m: Model, d: Data) -> Data:
  """Position-dependent sensors (mj_sensorPos)."""
  ids = _ids(m, Stage.POS)
  if not ids.size:
    return d
  return _compute(m, d, ids, POS_SENSORS)


def sensor_vel(m: Model, d: Data) -> Data:
  """Velocity-dependent sensors (mj_sensorVel); subtree momenta where a sensor needs them."""
  ids = _ids(m, Stage.VEL)
  if not ids.size:
    return d
  if np.isin(np.asarray(m.sensor_type)[ids], _NEED_SUBTREE_VEL).any():
    d = subtree_vel(m, d)
  return _compute(m, d, ids, VEL_SENSORS)


def sensor_acc(m: Model, d: Data) -> Data:
  """Acceleration and force sensors (mj_sensorAcc); rne_post where a sensor needs it."""
  ids = _ids(m, Stage.ACC)
  if not ids.size:
    return d
  if np.isin(np.asarray(m.sensor_type)[ids], _NEED_RNE_POST).any():
    d = rne_post.rne_post_constraint(m, d)
  return _compute(m, d, ids, ACC_SENSORS)


def energy(m: Model, d: Data) -> jax.Array:
  """Data.energy (2,) after forward when the energy flag is off (mj_forwardSkip, mj_sensorPos).

  Zero, except that energy sensors compute their energy into it: e_potential the potential
  energy (and the kinetic entry then keeps its previous value, as MuJoCo skips clearing it),
  e_kinetic the kinetic energy.
  """
  stype = np.asarray(m.sensor_type) if m.nsensor else np.zeros(0, np.int64)
  if m.opt.disableflags & DisableBit.SENSOR:
    stype = stype[:0]
  pot, kin = (stype == S.E_POTENTIAL).any(), (stype == S.E_KINETIC).any()
  zero = jnp.zeros((), d.energy.dtype)
  e0 = passive.energy_pos(m, d) if pot else zero
  e1 = passive.energy_vel(m, d) if kin else (d.energy[1] if pot else zero)
  return jnp.stack([e0, e1]).astype(d.energy.dtype)

"""Sensors: sensordata of jaxsim.forward agrees with mj_forward on models/sensors.xml.

models/sensors.xml has every sensor type jaxsim computes, with contacts, limits, tendons,
equalities, cameras, rangefinders against every geom type, cutoffs and noise. States come from a
MuJoCo rollout with random controls; at each compared state random xfrc_applied wrenches are added
in both engines. Both solvers run to a tight tolerance (islands off in MuJoCo), so forces agree to
round-off and each sensor is held to 1e-6 relative (to the sensor's largest component) plus 1e-9
absolute. The dm_control suite models' sensors are compared along their trajectories in
test_dynamics (one compiled rollout per model serves both).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import kinematics, ray, sensors
from tests import oracle
from tests.models import MODELS

TOLERANCE = 1e-14
ISLAND = int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
SENSOR_NAMES = {
  int(v): k[len('mjSENS_') :].lower() for k, v in mujoco.mjtSensor.__members__.items()
}

CASES = {'models/sensors': os.path.join(MODELS, 'sensors.xml')}
STEPS = (150, 300)

NEED_RNE_POST = {1, 4, 5, 33, 34}  # accelerometer, force, torque, framelinacc, frameangacc
NEED_SUBTREE_VEL = {36, 37}  # subtreelinvel, subtreeangmom


def _tight(mj: mujoco.MjModel) -> mujoco.MjModel:
  mj.opt.tolerance = TOLERANCE
  mj.opt.disableflags |= ISLAND
  return mj


def _ctrl(mj: mujoco.MjModel, rng: np.random.Generator) -> np.ndarray:
  lo, hi = mj.actuator_ctrlrange.T
  return np.where(mj.actuator_ctrllimited, rng.uniform(lo, hi), rng.normal(size=mj.nu))


@pytest.fixture(scope='module', params=sorted(CASES), ids=sorted(CASES))
def case(request):
  """(name, MuJoCo sensordata and data per state, jaxsim sensordata and data per state)."""
  name, path = request.param, CASES[request.param]
  roll = _tight(mujoco.MjModel.from_xml_path(path))
  mj = _tight(mujoco.MjModel.from_xml_path(path))
  m = jaxsim.load(path)
  # the same options on both sides: tight tolerance, islands off (one monolithic solve)
  m = jaxsim.with_options(
    m, tolerance=jnp.asarray(TOLERANCE), disableflags=int(mj.opt.disableflags)
  )
  fn = jax.jit(jaxsim.forward)
  rng = np.random.default_rng(0)
  md = mujoco.MjData(roll)
  if roll.nkey:
    mujoco.mj_resetDataKeyframe(roll, md, 0)
  theirs, ours = [], []
  for t in range(max(STEPS) + 1):
    md.ctrl[:] = _ctrl(roll, rng)
    if t in STEPS:
      xfrc = rng.normal(size=(mj.nbody, 6)) * 0.5
      xfrc[0] = 0.0
      mc = mujoco.MjData(mj)
      mc.time = md.time
      mc.qpos[:], mc.qvel[:], mc.act[:], mc.ctrl[:] = md.qpos, md.qvel, md.act, md.ctrl
      mc.qacc_warmstart[:] = md.qacc_warmstart
      mc.xfrc_applied[:] = xfrc
      mujoco.mj_forward(mj, mc)
      theirs.append(mc)
      d = oracle.jx_data(m, md.qpos.copy(), md.qvel.copy(), md.act.copy(), md.ctrl.copy())
      d = d.replace(time=md.time, qacc_warmstart=md.qacc_warmstart.copy(), xfrc_applied=xfrc)
      ours.append(jax.device_get(fn(m, d)))
    mujoco.mj_step(roll, md)
  return name, mj, theirs, ours


def test_sensordata_matches_mujoco(case):
  name, mj, theirs, ours = case
  for k, (mc, d) in enumerate(zip(theirs, ours, strict=True)):
    got = np.asarray(d.sensordata)
    for i in range(mj.nsensor):
      a, n = mj.sensor_adr[i], mj.sensor_dim[i]
      what = (
        f'{name} state {k} sensor {i} {mj.sensor(i).name!r} ({SENSOR_NAMES[mj.sensor_type[i]]})'
      )
      oracle.assert_close(what, got[a : a + n], mc.sensordata[a : a + n], rtol=1e-6, atol=1e-9)


def test_rne_post_and_subtree_vel_match_mujoco(case):
  """The lazily computed quantities the sensors read, where MuJoCo computes them."""
  name, mj, theirs, ours = case
  types = set(mj.sensor_type.tolist())
  fields = []
  if types & NEED_RNE_POST:
    fields += ['cacc', 'cfrc_int', 'cfrc_ext']
  if types & NEED_SUBTREE_VEL:
    fields += ['subtree_linvel', 'subtree_angmom']
  for k, (mc, d) in enumerate(zip(theirs, ours, strict=True)):
    for f in fields:
      oracle.assert_close(f'{name} state {k} {f}', getattr(d, f), getattr(mc, f), 1e-6, 1e-9)


def test_sensors_model_exercises_every_path(case):
  """models/sensors.xml reaches contacts, limits, cutoffs and misses at the compared states."""
  name, mj, theirs, _ = case
  if name != 'models/sensors':
    return
  types = set(mj.sensor_type.tolist())
  supported = (
    set(sensors.POS_SENSORS)
    | set(sensors.VEL_SENSORS)
    | set(sensors.ACC_SENSORS)
    | {int(sensors.S.USER)}
  )
  assert supported <= types, supported - types

  def value(mc, sensor):
    i = mj.sensor(sensor).id
    return mc.sensordata[mj.sensor_adr[i] : mj.sensor_adr[i] + mj.sensor_dim[i]]

  for mc in theirs:
    assert mc.ncon >= 5 and mc.nefc > mc.ne + mc.nf
    assert value(mc, 'box_side')[0] == np.float32(0.5)  # clamped touch
    assert value(mc, 'r_miss')[0] == -1 and value(mc, 'r_miss_cut')[0] == np.float32(-0.5)
    assert value(mc, 'r_invisible')[0] > 1.4  # the invisible box is skipped
  for s in ('box_bottom', 'ball_touch', 'ball_low', 'hand_touch'):
    assert any(value(mc, s)[0] > 0 for mc in theirs), s
  assert any(np.count_nonzero(value(mc, 'box_grid')) >= 2 for mc in theirs)
  for s in ('c_box_floor', 'c_ball', 'c_net', 'c_site', 'c_vel'):
    assert any(value(mc, s)[0] > 0 for mc in theirs), s  # contacts matched
  for s in ('hinge', 'slide', 'fixed'):
    for kind in ('limpos', 'limvel', 'limfrc'):
      assert any(value(mc, s + '_' + kind)[0] != 0 for mc in theirs), s + kind


@pytest.mark.parametrize('options', [(None, 1, -1), ((1, 0, 1, 1, 1, 1), 0, 2)])
def test_ray_matches_mj_ray(options):
  """jaxsim._src.ray.ray against mj_ray on models/sensors.xml: rays at every geom and random."""
  geomgroup, flg_static, bodyexclude = options
  path = os.path.join(MODELS, 'sensors.xml')
  mj = mujoco.MjModel.from_xml_path(path)
  mj.geom_group[mj.geom('t_box').id] = 1  # excluded by the group mask of the second variant
  m = jaxsim.load(path)
  m = m.replace(geom_group=np.asarray(mj.geom_group, np.int32))
  rng = np.random.default_rng(5)
  state = oracle.random_state(mj, rng, scale=0.1)
  md = oracle.mj_data(mj, *state)
  d = jax.jit(kinematics.kinematics)(m, oracle.jx_data(m, *state))
  # from random points near each geom, at points just off the geom and in random directions
  eligible = mj.geom_bodyid != bodyexclude
  if not flg_static:
    eligible &= mj.body_weldid[mj.geom_bodyid] != 0
  if geomgroup is not None:
    eligible &= np.asarray(geomgroup)[mj.geom_group] != 0
  n = 24
  centre = md.geom_xpos[eligible]
  target = np.repeat(centre, n, axis=0) + rng.normal(size=(len(centre) * n, 3)) * 0.1
  pnt = target + rng.normal(size=target.shape)
  vec = np.where(rng.uniform(size=(len(pnt), 1)) < 0.7, target - pnt, rng.normal(size=pnt.shape))
  fn = jax.jit(jax.vmap(lambda p, v: ray.ray(m, d, p, v, geomgroup, bool(flg_static), bodyexclude)))
  dist, geomid = fn(pnt, vec)
  group = None if geomgroup is None else np.asarray(geomgroup, np.uint8)
  theirs, theirs_id = [], []
  for p, v in zip(pnt, vec, strict=True):
    gid = np.zeros(1, np.int32)
    theirs.append(mujoco.mj_ray(mj, md, p, v, group, flg_static, bodyexclude, gid))
    theirs_id.append(gid[0])
  theirs = np.asarray(theirs)
  hit = theirs >= 0
  assert hit.mean() > (0.5 if flg_static else 0.15)
  if flg_static:
    assert set(mj.geom_type[np.asarray(theirs_id)[hit]]) == set(range(8))  # every geom type
  oracle.assert_close('distance', dist, theirs, 1e-9, 1e-12)
  np.testing.assert_array_equal(np.asarray(geomid), theirs_id)


# A small arm without constraints whose sensors read every stage, for gradients.
GRAD_XML = """
<mujoco>
  <compiler angle="radian"/>
  <option><flag constraint="disable"/></option>
  <asset>
    <hfield name="h" nrow="3" ncol="4" size=".5 .4 .2 .05"
            elevation="0 .3 .6 .2 .1 .9 1 .4 0 .2 .5 .1"/>
  </asset>
  <worldbody>
    <geom type="box" size="1 1 .1" pos="0 0 1.2" euler=".1 .2 0"/>
    <geom type="sphere" size=".5" pos="1.2 0 .2"/>
    <geom type="hfield" hfield="h" pos=".5 0 -.4" euler=".1 0 .2"/>
    <body pos="0 0 .2">
      <joint name="a" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".04"/>
      <body pos=".3 0 0">
        <joint name="b" axis="0 0 1"/>
        <joint name="c" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".04"/>
        <site name="tip" pos=".3 0 0" euler=".1 3 0"/>
        <site name="side" pos=".2 0 0" euler="0 1.5 .1"/>
        <site name="up" pos=".1 0 0" euler=".1 .1 0"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="a"/></actuator>
  <sensor>
    <rangefinder site="tip"/>
    <rangefinder site="side"/>
    <rangefinder site="up"/>
    <accelerometer site="tip"/>
    <gyro site="tip"/>
    <velocimeter site="side"/>
    <force site="side"/>
    <torque site="side"/>
    <framepos objtype="site" objname="tip" reftype="site" refname="up"/>
    <framequat objtype="site" objname="tip"/>
    <framelinvel objtype="site" objname="tip" reftype="site" refname="up"/>
    <framelinacc objtype="site" objname="side"/>
    <subtreeangmom body="world"/>
    <subtreelinvel body="world"/>
    <e_kinetic/>
  </sensor>
</mujoco>
"""


def test_grad_of_sensor_loss_matches_finite_differences():
  """d/d(qpos, qvel, ctrl) of a weighted sum of all sensors, against central differences."""
  m = jaxsim.load_string(GRAD_XML)
  mj = mujoco.MjModel.from_xml_string(GRAD_XML)
  rng = np.random.default_rng(3)
  qpos, qvel, act, ctrl = oracle.random_state(mj, rng, scale=0.1)
  w = jnp.asarray(rng.normal(size=m.nsensordata))
  d0 = oracle.jx_data(m, qpos, qvel, act, ctrl)
  theirs = oracle.mj_data(mj, qpos, qvel, act, ctrl).sensordata
  assert np.all(theirs[:3] > 0)  # every ray hits

  def loss(x):
    q, v, c = x[: m.nq], x[m.nq : m.nq + m.nv], x[m.nq + m.nv :]
    sensordata = jaxsim.forward(m, d0.replace(qpos=q, qvel=v, ctrl=c)).sensordata
    return w @ sensordata, sensordata

  # one program for the value, the sensordata and the gradient; central differences reuse it
  fn = jax.jit(jax.value_and_grad(loss, has_aux=True))
  x = np.concatenate([qpos, qvel, ctrl])
  (val, ours), grad = fn(x)
  oracle.assert_close('sensordata', ours, theirs, 1e-8, 1e-12)
  assert np.isfinite(val) and np.all(np.isfinite(grad))
  eps = 1e-6
  fd = [(fn(x + eps * e)[0][0] - fn(x - eps * e)[0][0]) / (2 * eps) for e in np.eye(len(x))]
  oracle.assert_close('d loss / d (qpos, qvel, ctrl)', grad, np.asarray(fd), rtol=1e-5, atol=1e-7)


CAMERA_XML = """
<mujoco>
  <worldbody>
    <camera name="fixed" pos="0 -2 1" xyaxes="1 0 0 0 .5 1" resolution="640 480" fovy="50"/>
    <camera name="lens" pos="1 -2 .5" xyaxes="1 .2 0 0 .3 1" resolution="320 200"
            focal=".004 .005" sensorsize=".006 .004"/>
    <body name="mover" pos=".1 .2 .3">
      <joint type="slide" axis="1 0 0"/>
      <joint type="hinge" axis="0 0 1"/>
      <geom type="sphere" size=".1"/>
      <site name="s" pos=".1 0 0"/>
      <camera name="onbody" pos="0 .1 0" euler=".2 .3 0"/>
    </body>
  </worldbody>
  <sensor>
    <camprojection site="s" camera="fixed"/>
    <camprojection site="s" camera="lens"/>
    <framepos objtype="camera" objname="onbody" reftype="camera" refname="lens"/>
    <framequat objtype="camera" objname="onbody"/>
    <framelinvel objtype="site" objname="s" reftype="camera" refname="onbody"/>
  </sensor>
</mujoco>
"""


def test_camprojection_and_camera_frames():
  m = jaxsim.load_string(CAMERA_XML)
  mj = mujoco.MjModel.from_xml_string(CAMERA_XML)
  # the compiled lens (resolution, sensor size, intrinsics, fovy) is MuJoCo's, to the bit
  for f in ('cam_fovy', 'cam_resolution', 'cam_sensorsize', 'cam_intrinsic'):
    np.testing.assert_array_equal(np.asarray(getattr(m, f)), getattr(mj, f), err_msg=f)
  fn = jax.jit(jaxsim.forward)
  rng = np.random.default_rng(4)
  for _ in range(3):
    state = oracle.random_state(mj, rng)
    d = fn(m, oracle.jx_data(m, *state))
    md = oracle.mj_data(mj, *state)
    # MuJoCo computes focal lengths from its float cam_intrinsic / cam_sensorsize in float
    oracle.assert_close('sensordata', d.sensordata, md.sensordata, 1e-6, 1e-10)


TRACKING_XML = """
<mujoco>
  <worldbody>
    <body name="b" pos="0 0 1">
      <freejoint/>
      <geom size=".1"/>
      <site name="s" pos=".1 0 0"/>
      <camera name="track" mode="track" pos="0 -1 .5" xyaxes="1 0 0 0 .5 1"/>
      <camera name="trackcom" mode="trackcom" pos="0 -1 .5" xyaxes="1 0 0 0 .5 1"
              resolution="64 48"/>
      <body name="arm" pos=".2 0 0">
        <joint type="hinge" axis="0 1 0"/>
        <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0"/>
      </body>
    </body>
    <camera name="target" mode="targetbody" target="b" pos="1 1 2"/>
    <camera name="targetcom" mode="targetbodycom" target="b" pos="-1 1 2"/>
  </worldbody>
  <sensor>
    <framepos objtype="camera" objname="track"/>
    <framexaxis objtype="camera" objname="trackcom"/>
    <framezaxis objtype="camera" objname="target"/>
    <frameyaxis objtype="camera" objname="targetcom"/>
    <framequat objtype="camera" objname="track"/>
    <framepos objtype="site" objname="s" reftype="camera" refname="targetcom"/>
    <framelinvel objtype="camera" objname="trackcom"/>
    <camprojection site="s" camera="trackcom"/>
  </sensor>
</mujoco>
"""


def test_tracking_and_targeting_cameras():
  """Cameras in every mj_camlight mode (track, trackcom, targetbody, targetbodycom) as sensor
  objects, references and camprojection lenses, at random states, against MuJoCo."""
  m = jaxsim.load_string(TRACKING_XML)
  mj = mujoco.MjModel.from_xml_string(TRACKING_XML)
  for f in ('cam_targetbodyid', 'cam_pos0', 'cam_poscom0', 'cam_mat0'):
    oracle.assert_close(f, np.asarray(getattr(m, f)), getattr(mj, f), rtol=1e-12, atol=1e-12)
  fn = jax.jit(jaxsim.forward)
  rng = np.random.default_rng(5)
  for _ in range(3):
    state = oracle.random_state(mj, rng)
    d = fn(m, oracle.jx_data(m, *state))
    md = oracle.mj_data(mj, *state)
    oracle.assert_close('sensordata', d.sensordata, md.sensordata, 1e-9, 1e-10)


STILL = """<mujoco><worldbody><site name="w" pos=".1 .2 .3"/>
  <body pos="1 0 0" euler="10 20 30"><site name="s" pos=".1 0 0"/>
    <geom size=".1" contype="0" conaffinity="0"/></body>
  <body mocap="true" pos="0 1 0" euler="0 40 0"><site name="m" pos=".1 0 0"/></body>
  <body pos="0 0 2"><freejoint/><geom size=".1"/><site name="f"/></body></worldbody>
  <sensor><accelerometer site="w"/><accelerometer site="s"/><accelerometer site="m"/>
    <accelerometer site="f"/><framelinacc objtype="site" objname="s"/>
    <framelinacc objtype="site" objname="m"/><frameangacc objtype="site" objname="m"/>
    <velocimeter site="s"/><framelinvel objtype="site" objname="m"/><gyro site="m"/></sensor>
</mujoco>"""


def test_acceleration_sensors_on_bodies_welded_to_the_world():
  """Sites on the world, a static body and a mocap body have the world's motion: no velocity,
  and the world's acceleration -gravity (an accelerometer at rest reads 9.81 up; Menagerie's
  Barkour v0 has one on the world body), as MuJoCo's cacc."""
  m, mj = jaxsim.load_string(STILL), mujoco.MjModel.from_xml_string(STILL)
  md = mujoco.MjData(mj)
  md.qvel[:] = (0.1, 0.2, 0.3, 1.0, 2.0, 3.0)
  mujoco.mj_forward(mj, md)
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m).replace(qvel=jnp.asarray(md.qvel)))
  assert np.abs(md.sensordata).max() > 9
  oracle.assert_close('sensordata', d.sensordata, md.sensordata, atol=1e-12)

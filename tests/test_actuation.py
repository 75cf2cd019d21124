"""Transmissions, activation dynamics and actuator forces agree with MuJoCo at random states."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import actuation, kinematics
from jaxsim._src.enums import DisableBit
from tests import oracle
from tests.models import MODELS, bundled, model_id

# Every actuator shortcut and dyn/gain/bias combination, every transmission but body (adhesion),
# ctrl and force limits, tendon and joint actuator force ranges, actuator gravity compensation,
# and rotational servos whose setpoints wrap (ball joints, rotational site-refsite).
XML = """
<mujoco model="actuation">
  <option timestep="0.01"/>
  <worldbody>
    <body name="arm" pos="0 0 1" gravcomp="1">
      <joint name="hinge" axis="0 1 0" actuatorfrcrange="-0.7 0.6" actuatorgravcomp="true"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0.5 0 0"/>
      <site name="tip" pos="0.5 0 0" quat="0.9 0.1 0.3 -0.2"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="elbow" axis="0 1 0" range="-2 2"/>
        <geom type="capsule" size="0.04" fromto="0 0 0 0.4 0 0"/>
        <site name="hand" pos="0.4 0.05 0" quat="0.8 0.2 -0.1 0.3"/>
      </body>
    </body>
    <body name="cart" pos="1 0 1">
      <joint name="slide" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <site name="slider" zaxis="1 0.2 0"/>
      <body name="wheel" pos="0.2 0 0">
        <joint name="crankjnt" axis="0 0 1"/>
        <geom type="sphere" size="0.05"/>
        <site name="crank" pos="0.1 0 0"/>
      </body>
    </body>
    <body name="ballbody" pos="-1 0 1">
      <joint name="ball" type="ball"/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <site name="ballsite" pos="0.1 0 0.2"/>
      <body name="ball2body" pos="0 0 -0.5">
        <joint name="ball2" type="ball"/>
        <geom type="sphere" size="0.1"/>
      </body>
    </body>
    <body name="float" pos="0 2 1">
      <freejoint name="free"/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <site name="floatsite" pos="0.05 0.02 0" euler="10 20 30"/>
    </body>
    <body name="float2" pos="0 -2 1">
      <freejoint name="free2"/>
      <geom type="box" size="0.1 0.2 0.1"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="couple" actuatorfrcrange="-0.5 0.8">
      <joint joint="hinge" coef="1"/>
      <joint joint="elbow" coef="-0.5"/>
    </fixed>
  </tendon>
  <actuator>
    <motor name="motor" joint="hinge" gear="2" ctrlrange="-1 1" forcerange="-0.5 0.4"/>
    <position name="position" joint="elbow" kp="3" kv="0.4" ctrlrange="-1 1"/>
    <velocity name="velocity" joint="slide" kv="2"/>
    <intvelocity name="intvelocity" joint="elbow" kp="4" actrange="-1 1"/>
    <damper name="damper" joint="crankjnt" kv="0.3" ctrlrange="0 2"/>
    <cylinder name="cylinder" joint="slide" timeconst="0.3" area="0.5" bias="0.1 -0.2 -0.05"/>
    <muscle name="muscle" joint="elbow" lengthrange="-1.5 1.5" ctrlrange="0 1"/>
    <muscle name="muscle_force" tendon="couple" lengthrange="-1 1" force="10" tausmooth="0.2"/>
    <general name="filterexact" joint="hinge" dyntype="filterexact" dynprm="0.2" gaintype="affine"
             gainprm="1 0.2 0.1" biastype="affine" biasprm="0 -0.5 -0.1" actlimited="true"
             actrange="-0.3 0.4" actearly="true"/>
    <general name="integrator" joint="slide" dyntype="integrator" actlimited="true"
             actrange="-0.5 0.5" actearly="true" gainprm="2"/>
    <general name="filter" joint="crankjnt" dyntype="filter" dynprm="0.05" gainprm="1.5"/>
    <motor name="tendon" tendon="couple" gear="1.5"/>
    <motor name="site" site="tip" gear="1 0.5 -0.3 0.2 -0.4 0.6"/>
    <motor name="refsite" site="hand" refsite="tip" gear="0.3 -0.2 1 0.5 0.1 -0.7"/>
    <motor name="refsite_world" site="floatsite" refsite="ballsite" gear="1 2 3 0 0 0"/>
    <position name="refsite_rot" site="hand" refsite="tip" gear="0 0 0 0 1 0" kp="2" kv="0.1"/>
    <motor name="crank" cranksite="crank" slidersite="slider" cranklength="0.35" gear="1.3"/>
    <motor name="crank_short" cranksite="crank" slidersite="slider" cranklength="0.02"/>
    <motor name="ball" joint="ball" gear="0.5 -1 2"/>
    <motor name="ball_parent" jointinparent="ball" gear="1 0.3 -0.2"/>
    <position name="ball_servo" joint="ball2" gear="0 0 2" kp="1.5"/>
    <intvelocity name="ball_intvel" joint="ball2" gear="1 0 0" kp="2" actrange="-10 10"/>
    <motor name="free" joint="free" gear="1 -2 3 0.4 0.5 -0.6"/>
    <motor name="free_parent" jointinparent="free2" gear="0.1 0.2 0.3 1 -0.5 0.25"/>
  </actuator>
</mujoco>
"""

NO_CONSTRAINT = oracle.NO_CONSTRAINT


def _pair_string(xml: str, disable: int = NO_CONSTRAINT, assets=None):
  mj = mujoco.MjModel.from_xml_string(xml, assets or {})
  mj.opt.disableflags |= disable
  m = jaxsim.load_string(xml, assets)
  m = jaxsim.with_options(m, disableflags=m.opt.disableflags | disable)
  return m, mj


def _pipeline(m, d, ten_length, ten_j, qfrc_gravcomp):
  """Stages before actuation (tendons from MuJoCo), transmission, actuation, next activation."""
  d = kinematics.com_pos(m, kinematics.kinematics(m, d))
  d = d.replace(ten_length=ten_length, ten_J=ten_j)
  d = actuation.transmission(m, d)
  # as mj_fwdVelocity: actuator_velocity is zero when actuation is disabled
  vel = actuation.moment_mul(m, d.actuator_moment, d.qvel)
  if m.opt.disableflags & DisableBit.ACTUATION:
    vel = jnp.zeros_like(vel)
  d = d.replace(actuator_velocity=vel, qfrc_gravcomp=qfrc_gravcomp)
  d = actuation.actuation(m, d)
  return d, actuation.next_activation(m, d, d.act, d.act_dot)


def _tendons(mj, md):
  ten_j = np.zeros((mj.ntendon, mj.nv))
  if mj.ntendon:
    mujoco.mju_sparse2dense(ten_j, md.ten_J, mj.ten_J_rownnz, mj.ten_J_rowadr, mj.ten_J_colind)
  return md.ten_length.copy(), ten_j


def _moment(mj, md):
  out = np.zeros((mj.nu, mj.nv))
  mujoco.mju_sparse2dense(
    out, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind
  )
  return out


def _compare(m, mj, fn, state):
  """Runs both engines at `state`; checks every actuation output and the next activation."""
  mj.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
  md = oracle.mj_data(mj, *state)
  d = oracle.jx_data(m, *state)
  d, act_next = fn(m, d, *_tendons(mj, md), md.qfrc_gravcomp.copy())
  oracle.assert_close('actuator_length', d.actuator_length, md.actuator_length)
  oracle.assert_close('actuator_moment', jaxsim.actuator_moment_dense(m, d), _moment(mj, md))
  oracle.assert_close('actuator_velocity', d.actuator_velocity, md.actuator_velocity)
  oracle.assert_close('actuator_force', d.actuator_force, md.actuator_force)
  oracle.assert_close('qfrc_actuator', d.qfrc_actuator, md.qfrc_actuator)
  oracle.assert_close('act_dot', d.act_dot, md.act_dot)
  mujoco.mj_step(mj, md)
  oracle.assert_close('next_activation', act_next, md.act)
  return d, md


def _actuated(paths):
  out = []
  for p in paths:
    with open(p) as f:
      text = f.read()
    if '<actuator' in text and 'features.xml' not in p:
      out.append(p)
  return out


@pytest.fixture(scope='module')
def pipeline():
  return jax.jit(_pipeline)


@pytest.fixture(scope='module')
def own():
  m, mj = _pair_string(XML)
  # the moment rows are compact (types.moment_cols; the widest, refsite_world's, reaches a free
  # and a ball joint: 9 of 22 dofs), so the comparisons check the compact layout
  assert jaxsim.make_data(m).actuator_moment.shape == (mj.nu, 9) and mj.nv == 22
  return m, mj


# the bundled models (every actuator kind they hold); the suite models' actuation is compared in
# test_forward (every actuator field, whole pipeline), which compiles one program per model
@pytest.mark.parametrize('path', _actuated(bundled()), ids=model_id)
def test_models_against_mujoco(path, pipeline):
  m, mj = oracle.load_pair(path)
  for seed in range(2):
    _compare(m, mj, pipeline, oracle.random_state(mj, np.random.default_rng(seed)))


@pytest.mark.parametrize('seed', range(6))
def test_every_actuator_kind_against_mujoco(own, pipeline, seed):
  m, mj = own
  rng = np.random.default_rng(seed)
  qpos, qvel, act, ctrl = oracle.random_state(mj, rng, scale=1.0)
  # activations beyond actrange, and integrator setpoints far enough to wrap on the ball servo
  act = rng.uniform(-2, 2, size=mj.na) * np.where(rng.uniform(size=mj.na) < 0.3, 5, 1)
  _compare(m, mj, pipeline, (qpos, qvel, act, ctrl))


def test_limits_are_active(own, pipeline):
  """The force clamps and both slider-crank branches under test do occur at the random states."""
  m, mj = own
  ten = [mj.actuator('muscle_force').id, mj.actuator('tendon').id]
  crank = [mj.actuator('crank').id, mj.actuator('crank_short').id]
  hit = set()
  for seed in range(6):
    state = oracle.random_state(mj, np.random.default_rng(seed), scale=1.0)
    md = oracle.mj_data(mj, *state)
    d, _ = pipeline(m, oracle.jx_data(m, *state), *_tendons(mj, md), md.qfrc_gravcomp.copy())
    f, qfrc = np.asarray(d.actuator_force), np.asarray(d.qfrc_actuator)
    if np.isclose(f[0], -0.5) or np.isclose(f[0], 0.4):
      hit.add('forcerange')
    if np.isclose(qfrc[0], -0.7) or np.isclose(qfrc[0], 0.6):
      hit.add('jnt_actfrcrange')
    if np.isclose(f[ten].sum(), -0.5) or np.isclose(f[ten].sum(), 0.8):
      hit.add('tendon_actfrcrange')
    # slider-crank: the rod reaches the slider axis (det > 0) or it does not
    for i in crank:
      sid, slider = mj.actuator_trnid[i]
      vec = md.site_xpos[sid] - md.site_xpos[slider]
      av = vec @ md.site_xmat[slider].reshape(3, 3)[:, 2]
      hit.add(f'det {av * av + mj.actuator_cranklength[i] ** 2 - vec @ vec > 0}')
  assert hit == {
    'forcerange',
    'jnt_actfrcrange',
    'tendon_actfrcrange',
    'det True',
    'det False',
  }, hit


def test_features_model(pipeline):
  """models/features.xml without its adhesion actuator (body transmissions are refused)."""
  with open(os.path.join(MODELS, 'features.xml')) as f:
    xml = f.read()
  with open(os.path.join(MODELS, 'features_include.xml'), 'rb') as f:
    assets = {'features_include.xml': f.read()}
  xml = '\n'.join(line for line in xml.splitlines() if '<adhesion' not in line)
  m, mj = _pair_string(xml, assets=assets)
  for seed in range(2):
    _compare(m, mj, pipeline, oracle.random_state(mj, np.random.default_rng(seed)))


ADHESION = """
<mujoco>
  <option cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size=".1 .1 .1" condim="{condim}"/>
    </body>
    <body name="pad" pos="0 0 0.31">
      <joint name="z" type="slide" axis="0 0 1"/>
      <joint type="hinge" axis="1 0 0"/>
      <geom type="box" size=".08 .08 .01" margin="0.02" gap="0.01"/>
      <geom type="sphere" size=".03" pos=".05 0 -.005" margin="0.02" gap="0.015"/>
    </body>
    <body name="ball" pos="0.4 0 0.06"><freejoint/>
      <geom type="sphere" size=".05" margin=".01" gap=".005"/></body>
  </worldbody>
  <actuator>
    <adhesion body="pad" ctrlrange="0 1" gain="20"/>
    <adhesion body="ball" ctrlrange="0 1" gain="5"/>
    <adhesion body="box" ctrlrange="0 1" gain="3"/>
    <motor joint="z"/>
  </actuator>
</mujoco>
"""


@pytest.mark.parametrize('cone,condim', [('pyramidal', 3), ('elliptic', 4), ('pyramidal', 6)])
def test_adhesion_against_mujoco(cone, condim):
  """Body (adhesion) transmissions: the moment is minus the mean contact-normal Jacobian of the
  body's contacts, those in the constraint (pyramid edges averaged) and those only in the margin
  gap (exclude 1), as mj_transmission; forces and qacc through forward (two islands)."""
  xml = ADHESION.format(cone=cone, condim=condim)
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  m = jaxsim.load_string(xml)
  assert not any('adhesion' in u for u in m.unsupported)
  fwd = jax.jit(jaxsim.forward)
  rng = np.random.default_rng(0)
  excluded = 0
  for k in range(6):
    if k < 3:  # rollout states: the pad pressed on the box
      md.ctrl[:] = [0.8, 1, 0.5, rng.uniform(-1, 1)]
      for _ in range(30):
        mujoco.mj_step(mj, md)
      md.qvel[:] += 0.05 * rng.normal(size=mj.nv)
    else:  # the pad and the ball hovering in their margin gaps
      md.qpos[:] = mj.qpos0
      md.qpos[7:9] = [(-0.085, -0.095, -0.1005)[k - 3], 0.05]
      md.qpos[11] = 0.056
      md.qvel[:] = 0
      md.ctrl[:] = [0.8, 1, 0.5, 0]
    mujoco.mj_forward(mj, md)
    excluded += sum(c.exclude == 1 for c in md.contact[: md.ncon])
    d = jaxsim.make_data(m).replace(qpos=md.qpos.copy(), qvel=md.qvel.copy(), ctrl=md.ctrl.copy())
    d = fwd(m, d)
    moment = np.zeros((mj.nu, mj.nv))
    mujoco.mju_sparse2dense(
      moment, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind
    )
    assert np.abs(moment[:3]).max() > 0.5
    ours = jaxsim.actuator_moment_dense(m, d)
    oracle.assert_close('actuator_moment', ours, moment, atol=1e-14)
    oracle.assert_close('actuator_length', d.actuator_length, md.actuator_length)
    oracle.assert_close('qfrc_actuator', d.qfrc_actuator, md.qfrc_actuator)
    oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-9)
  assert excluded >= 6  # gap contacts were in play


def test_body_transmission_needs_contacts():
  """The transmission layer cannot see contacts: without the pipeline's moments it refuses."""
  m = jaxsim.load(os.path.join(MODELS, 'features.xml'))
  assert not any('adhesion' in u for u in m.unsupported)
  with pytest.raises(NotImplementedError, match="'stick'.*adhesion"):
    actuation.transmission(m, jaxsim.make_data(m))


def test_bad_ctrl_zeroes_all_controls(own, pipeline):
  m, mj = own
  qpos, qvel, act, ctrl = oracle.random_state(mj, np.random.default_rng(7))
  ctrl[3] = np.nan
  d, _ = _compare(m, mj, pipeline, (qpos, qvel, act, ctrl))
  # the stateless position servo still pulls towards setpoint 0
  assert np.asarray(d.actuator_force)[1] != 0


@pytest.mark.parametrize('flag', ['CLAMPCTRL', 'ACTUATION'])
def test_disable_flags(flag, pipeline):
  bit = int(DisableBit[flag])
  m, mj = _pair_string(XML, disable=NO_CONSTRAINT | bit)
  state = oracle.random_state(mj, np.random.default_rng(11), scale=1.0)
  d, _ = _compare(m, mj, pipeline, state)
  if flag == 'ACTUATION':
    assert not np.any(np.asarray(d.qfrc_actuator))


def test_muscle_helpers_against_mujoco():
  rng = np.random.default_rng(5)
  n = 300
  prm = np.tile([0.75, 1.05, -1.0, 200.0, 0.5, 1.6, 1.5, 1.3, 1.2], (n, 1))
  prm[:, 2] = np.where(rng.uniform(size=n) < 0.5, -1.0, rng.uniform(1, 50, size=n))
  lr = np.array([-0.4, 0.9])
  length, vel = rng.uniform(-1.5, 2.5, size=n), rng.normal(size=n) * 3
  acc0 = rng.uniform(0.5, 50, size=n)
  ctrl, act = rng.uniform(-0.5, 1.5, size=n), rng.uniform(-0.5, 1.5, size=n)
  dyn = np.stack(
    [
      rng.uniform(0.005, 0.05, size=n),
      rng.uniform(0.01, 0.1, size=n),
      np.where(rng.uniform(size=n) < 0.5, 0.0, 0.3),
    ],
    axis=-1,
  )
  lrs = jnp.tile(jnp.asarray(lr), (n, 1))
  gain = jax.jit(actuation.muscle_gain)(length, vel, lrs, acc0, prm)
  bias = jax.jit(actuation.muscle_bias)(length, lrs, acc0, prm)
  dyn_out = jax.jit(actuation.muscle_dynamics)(ctrl, act, dyn)
  for k in range(n):
    theirs = mujoco.mju_muscleGain(length[k], vel[k], lr, acc0[k], prm[k])
    np.testing.assert_allclose(gain[k], theirs, 1e-12, 1e-12)
    theirs = mujoco.mju_muscleBias(length[k], lr, acc0[k], prm[k])
    np.testing.assert_allclose(bias[k], theirs, 1e-12, 1e-12)
    theirs = mujoco.mju_muscleDynamics(ctrl[k], act[k], dyn[k])
    np.testing.assert_allclose(dyn_out[k], theirs, 1e-12, 1e-12)


def test_jit_vmap_grad(own, pipeline):
  m, mj = own
  state = oracle.random_state(mj, np.random.default_rng(3))
  md = oracle.mj_data(mj, *state)
  ten = _tendons(mj, md)
  gc = md.qfrc_gravcomp.copy()
  d0 = oracle.jx_data(m, *state)

  def total(qpos, ctrl, fn=_pipeline):
    d, act = fn(m, d0.replace(qpos=qpos, ctrl=ctrl), *ten, gc)
    return jnp.sum(d.qfrc_actuator) + jnp.sum(act)

  ctrls = d0.ctrl + jnp.asarray(np.random.default_rng(4).normal(size=(3, mj.nu)))
  batch = jax.jit(jax.vmap(total, in_axes=(None, 0)))(d0.qpos, ctrls)
  for k in range(3):
    np.testing.assert_allclose(batch[k], total(d0.qpos, ctrls[k], pipeline), rtol=1e-12)

  grad_q, grad_u = jax.jit(jax.grad(total, argnums=(0, 1)))(d0.qpos, d0.ctrl)
  eps = 1e-6
  for argnum, grad in enumerate((grad_q, grad_u)):
    grad = np.asarray(grad)
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)
    x = jnp.asarray((d0.qpos, d0.ctrl)[argnum])
    fd = np.zeros(x.shape)
    for i in range(x.size):
      args = [[d0.qpos, d0.ctrl], [d0.qpos, d0.ctrl]]
      args[0][argnum], args[1][argnum] = x.at[i].add(eps), x.at[i].add(-eps)
      fd[i] = (total(*args[0], pipeline) - total(*args[1], pipeline)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)

"""Passive forces and energy agree with MuJoCo (mj_passive, mj_energyPos/Vel) at random states."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import dynamics, kinematics, passive
from jaxsim._src.enums import DisableBit
from tests.models import bundled, model_id
from tests.oracle import NO_CONSTRAINT, assert_close, jx_data, load_pair, mj_data, random_state

ENERGY = int(mujoco.mjtEnableBit.mjENBL_ENERGY)
FIELDS = ('qfrc_spring', 'qfrc_damper', 'qfrc_gravcomp', 'qfrc_fluid', 'qfrc_passive')
NSTATE = 3

# Every passive feature at once: springs with springref and polynomial stiffness on all joint
# types, polynomial damping, actuator damping (one and two actuators on a joint, and on a tendon),
# gravcomp bodies (two routed through the actuators), fixed and spatial tendons with dead bands,
# inertia-box bodies in wind and ellipsoid-model geoms of every primitive shape.
PASSIVE_XML = """
<mujoco model="passive">
  <option density="1.3" viscosity="0.02" wind="0.5 -0.3 0.2"/>
  <worldbody>
    <site name="anchor" pos="0 0 2"/>
    <body name="free" pos="0 0 1" quat="0.9 0.1 0.3 0.2">
      <joint type="free" stiffness="3 0.5 0.2" damping="0.4 0.1 0.05"/>
      <geom type="box" size=".1 .2 .3"/>
      <site name="s1" pos="0 0 .3"/>
      <body name="ball_link" pos="0.3 0 0" gravcomp="0.5">
        <joint type="ball" stiffness="2 0.3 0.1" damping="0.2 0.1 0.02"/>
        <geom type="capsule" size=".05 .2" fluidshape="ellipsoid" fluidcoef="0.4 0.3 1.2 0.8 0.9"/>
        <body name="hinge_link" pos="0 0 -0.4" gravcomp="1">
          <joint name="hinge1" type="hinge" axis="0 1 0" stiffness="5 1 0.5" springref="0.3"
                 damping="0.3 0.2 0.1" actuatorgravcomp="true"/>
          <geom type="ellipsoid" size=".05 .1 .15" fluidshape="ellipsoid"/>
          <geom type="sphere" size=".05" pos="0 0 -.2"/>
          <body name="slide_link" gravcomp="0.3">
            <joint name="slide1" type="slide" axis="1 0 1" stiffness="10 2 1" springref="0.1"
                   damping="1 0.5 0.2"/>
            <geom type="cylinder" size=".04 .1" fluidshape="ellipsoid"/>
            <geom type="sphere" size=".06" pos="0 .1 0" fluidshape="ellipsoid"
                  fluidcoef="0.6 0.1 2 1.5 0.5"/>
            <site name="s2"/>
          </body>
        </body>
      </body>
    </body>
    <body name="arm" pos="1 0 1" gravcomp="0.7">
      <joint name="h2" type="hinge" axis="1 0 0" stiffness="1" damping="0.1"
             actuatorgravcomp="true"/>
      <geom type="box" size=".05 .08 .3" pos="0 0 -.3"/>
      <body name="arm2" pos="0 0 -.6">
        <joint name="h3" type="hinge" axis="0 1 1" ref="0.2"/>
        <geom type="box" size=".05 .05 .2" fluidshape="ellipsoid" pos="0 0 -.2"/>
      </body>
    </body>
    <body name="welded" pos="-1 0 1">
      <geom type="box" size=".1 .1 .1"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fixed" stiffness="4 1 0.5" damping="0.5 0.1 0.05" springlength="-0.2 0.2">
      <joint joint="hinge1" coef="1"/>
      <joint joint="h2" coef="-0.5"/>
    </fixed>
    <spatial name="spatial" stiffness="20 2" damping="1" springlength="1.45 1.8">
      <site site="anchor"/>
      <site site="s1"/>
      <site site="s2"/>
    </spatial>
  </tendon>
  <actuator>
    <motor joint="h3" gear="2" damping="0.3"/>
    <motor joint="h3" gear="1.5" damping="0.2"/>
    <motor tendon="fixed" gear="0.5" damping="0.4"/>
    <position joint="slide1" kp="10" damping="0.5"/>
  </actuator>
</mujoco>
"""


def _pair_from_string(xml: str, disable: int = NO_CONSTRAINT, enable: int = ENERGY):
  """load_pair for XML text."""
  mj = mujoco.MjModel.from_xml_string(xml)
  mj.opt.disableflags |= disable
  mj.opt.enableflags |= enable
  m = jaxsim.load_string(xml)
  flags = {'disableflags': m.opt.disableflags | disable, 'enableflags': m.opt.enableflags | enable}
  return jaxsim.with_options(m, **flags), mj


def _dense_ten_j(mj: mujoco.MjModel, md: mujoco.MjData) -> np.ndarray:
  """MuJoCo's tendon Jacobian (ntendon, nv) from its sparse rows."""
  out = np.zeros((mj.ntendon, mj.nv))
  for i in range(mj.ntendon):
    adr, nnz = mj.ten_J_rowadr[i], mj.ten_J_rownnz[i]
    out[i, mj.ten_J_colind[adr : adr + nnz]] = md.ten_J[adr : adr + nnz]
  return out


def _pipeline(m: jaxsim.Model, d: jaxsim.Data):
  d = kinematics.kinematics(m, d)
  d = kinematics.com_pos(m, d)
  d = dynamics.crb(m, d)
  d = kinematics.com_vel(m, d)
  d = passive.passive(m, d)
  return d, passive.energy_pos(m, d), passive.energy_vel(m, d)


pipeline = jax.jit(_pipeline)


def _patch_compiler_gaps(m: jaxsim.Model, mj: mujoco.MjModel) -> jaxsim.Model:
  """MuJoCo's values for the mj_setConst quantities jaxsim's compiler does not compute yet.

  A joint's springdamper sets its stiffness and damping through dof_M0, and a tendon's default
  springlength (-1 -1) is its length at qpos_spring; both only where the model uses them.
  """
  sd = np.any(np.asarray(m.jnt_springdamper) != 0, axis=1)
  ls = np.asarray(m.tendon_lengthspring)
  auto = np.all(ls == -1, axis=1)[:, None]
  return m.replace(
    jnt_stiffness=jnp.asarray(np.where(sd, mj.jnt_stiffness, m.jnt_stiffness)),
    dof_damping=jnp.asarray(np.where(sd[mj.dof_jntid], mj.dof_damping, m.dof_damping)),
    tendon_lengthspring=jnp.asarray(np.where(auto, mj.tendon_lengthspring, ls)),
  )


def _run(m, mj, seed, n=NSTATE):
  """Yields (MjData, jaxsim Data, energy) at n random states, tendons taken from MuJoCo."""
  rng = np.random.default_rng(seed)
  for _ in range(n):
    state = random_state(mj, rng)
    md = mj_data(mj, *state)
    d = jx_data(m, *state).replace(
      ten_length=md.ten_length.copy(),
      ten_velocity=md.ten_velocity.copy(),
      ten_J=_dense_ten_j(mj, md),
    )
    d, epos, evel = pipeline(m, d)
    yield md, d, np.array([epos, evel])


def _check(m, mj, seed):
  for md, d, energy in _run(m, mj, seed):
    for f in FIELDS:
      assert_close(f, getattr(d, f), getattr(md, f))
    assert_close('energy', energy, md.energy)


# the suite models' passive forces and energies are compared in test_forward (whole pipeline, one
# program per model); here: the bundled models and the feature model below
@pytest.mark.parametrize('path', bundled(), ids=model_id)
def test_bundled(path):
  m, mj = load_pair(path, enable=ENERGY)
  _check(_patch_compiler_gaps(m, mj), mj, seed=0)


@pytest.fixture(scope='module')
def feature_pair():
  return _pair_from_string(PASSIVE_XML)


def test_feature_model(feature_pair):
  m, mj = feature_pair
  assert mj.ngravcomp == 4 and mj.ntendon == 2
  # the states must exercise both sides of both dead bands, and the actuated gravcomp
  _check(m, mj, seed=1)
  seen = set()
  for md, d, _ in _run(m, mj, seed=1, n=8):
    lo, hi = mj.tendon_lengthspring[:, 0], mj.tendon_lengthspring[:, 1]
    seen |= {(i, int(md.ten_length[i] > hi[i]) - int(md.ten_length[i] < lo[i])) for i in range(2)}
    assert np.abs(np.asarray(d.qfrc_fluid)).max() > 1e-3
    act = passive.gravcomp_actuated(m, d)
    assert_close('gravcomp_actuated', act, md.qfrc_actuator - md.actuator_force @ _moment(mj, md))
  assert seen == {(i, s) for i in range(2) for s in (-1, 0, 1)}, seen


def _moment(mj, md):
  out = np.zeros((mj.nu, mj.nv))
  mujoco.mju_sparse2dense(
    out, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind
  )
  return out


@pytest.mark.parametrize(
  'flags',
  [DisableBit.SPRING, DisableBit.DAMPER, DisableBit.SPRING | DisableBit.DAMPER, DisableBit.GRAVITY],
  ids=['spring', 'damper', 'both', 'gravity'],
)
def test_disable_flags(flags):
  m, mj = _pair_from_string(PASSIVE_XML, disable=NO_CONSTRAINT | int(flags))
  _check(m, mj, seed=2)


@pytest.mark.parametrize('coef', ['0 0 0 1 0', '.5 .25 1.5 1 1'], ids=['kutta', 'all'])
def test_fluid_thin_body_slow(coef):
  """A 1 mm thin plate (as MuJoCo's cards.xml) from 1 m/s down to 1e-12 m/s: mujoco 4's
  ellipsoid forces stay exactly quadratic in the speed (no mjMINVAL clamp in the projected
  area or the Kutta cosine, where jaxsim's Kutta lift once fell short by 6x)."""
  xml = f"""<mujoco><option density="1.225" viscosity="1e-5" gravity="0 0 0"/><worldbody>
    <body><freejoint/><geom type="box" size=".001 .03 .05" fluidshape="ellipsoid"
    fluidcoef="{coef}"/></body></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  direction = np.array([0.3, 0.5, 0.8, 0.2, -0.1, 0.3])
  speeds = np.array([1, 1e-1, 1e-3, 1e-5, 1e-8, 1e-12, 0])
  qvel = speeds[:, None] * direction
  fluid = jax.jit(jax.vmap(lambda v: jaxsim.forward(m, jaxsim.make_data(m).replace(qvel=v))))
  ours = np.asarray(fluid(jnp.asarray(qvel)).qfrc_fluid)
  md = mujoco.MjData(mj)
  for k, v in enumerate(qvel):
    md.qvel[:] = v
    mujoco.mj_forward(mj, md)
    assert_close(f'qfrc_fluid at speed {speeds[k]:g}', ours[k], md.qfrc_fluid, rtol=1e-12)


def test_geom_fluid(feature_pair):
  m, mj = feature_pair
  geoms = np.flatnonzero(np.asarray(m.geom_fluidshape) == 1)
  assert len(geoms) == 5
  ours = jax.jit(lambda m: passive.geom_fluid(m, geoms))(m)
  assert_close('geom_fluid', ours, mj.geom_fluid[geoms])


def test_grad_vmap(feature_pair):
  """jit(vmap(grad)) of sum(qfrc_passive) is finite, also at rest (zero velocity, springs at
  their reference), and agrees with central differences at a random state."""
  m, mj = feature_pair
  qpos, qvel, act, ctrl = random_state(mj, np.random.default_rng(3))
  md = mj_data(mj, qpos, qvel, act, ctrl)
  d0 = jx_data(m, qpos, qvel, act, ctrl).replace(
    ten_length=md.ten_length.copy(), ten_velocity=md.ten_velocity.copy(), ten_J=_dense_ten_j(mj, md)
  )

  def f(qpos, qvel):
    d, _, _ = _pipeline(m, d0.replace(qpos=qpos, qvel=qvel))
    return jnp.sum(d.qfrc_passive)

  # one batched call: the random state, the rest state, then +-eps along every coordinate
  eps = 1e-6
  npos, nvel = len(qpos), len(qvel)
  dpos = np.concatenate([np.eye(npos), -np.eye(npos), np.zeros((2 * nvel, npos))]) * eps
  dvel = np.concatenate([np.zeros((2 * npos, nvel)), np.eye(nvel), -np.eye(nvel)]) * eps
  qposs = np.concatenate([[qpos, mj.qpos_spring], qpos + dpos])
  qvels = np.concatenate([[qvel, np.zeros(mj.nv)], qvel + dvel])
  vals, (gpos, gvel) = jax.jit(jax.vmap(jax.value_and_grad(f, argnums=(0, 1))))(qposs, qvels)
  assert np.all(np.isfinite(gpos)) and np.all(np.isfinite(gvel))
  for i in range(2):
    d, _, _ = pipeline(m, d0.replace(qpos=qposs[i], qvel=qvels[i]))
    assert_close('vmap', vals[i], jnp.sum(d.qfrc_passive))
  fd = np.asarray(vals[2:])
  fd_pos = (fd[:npos] - fd[npos : 2 * npos]) / (2 * eps)
  fd_vel = (fd[2 * npos : 2 * npos + nvel] - fd[2 * npos + nvel :]) / (2 * eps)
  assert_close('grad qpos', gpos[0], fd_pos, rtol=1e-6, atol=1e-8)
  assert_close('grad qvel', gvel[0], fd_vel, rtol=1e-6, atol=1e-8)

"""Trajectories of 500 steps agree with mj_step for every integrator; vmap and grad work.

Pendulum (bundled), acrobot (dm_control suite), a 10-link chain (bundled) and tendons with armature
and damping across trees and branches (tests/assets/tendon_trees.xml), constraints
disabled in both engines, the same random control sequence in both.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle
from tests.models import bundled, dm_control_suite

STEPS = 500
INTEGRATORS = {
  'euler': (jaxsim.IntegratorType.EULER, mujoco.mjtIntegrator.mjINT_EULER),
  'implicitfast': (jaxsim.IntegratorType.IMPLICITFAST, mujoco.mjtIntegrator.mjINT_IMPLICITFAST),
  'implicit': (jaxsim.IntegratorType.IMPLICIT, mujoco.mjtIntegrator.mjINT_IMPLICIT),
  'rk4': (jaxsim.IntegratorType.RK4, mujoco.mjtIntegrator.mjINT_RK4),
}


MODELS = {
  'pendulum': next(p for p in bundled() if p.endswith('pendulum.xml')),
  'acrobot': next(p for p in dm_control_suite() if p.endswith('acrobot.xml')),
  'chain10': next(p for p in bundled() if p.endswith('chain10.xml')),
  'tendon_trees': os.path.join(os.path.dirname(__file__), 'assets', 'tendon_trees.xml'),
}


def _with_integrator(path, integrator):
  ours, theirs = INTEGRATORS[integrator]
  m, mj = oracle.load_pair(path)
  mj.opt.integrator = theirs
  return m.replace(opt=m.opt.replace(integrator=int(ours))), mj


@pytest.mark.parametrize('integrator', list(INTEGRATORS))
@pytest.mark.parametrize('model', list(MODELS))
def test_trajectory_matches_mujoco(model, integrator):
  m, mj = _with_integrator(MODELS[model], integrator)
  rng = np.random.default_rng(0)
  qpos, qvel, act, _ = oracle.random_state(mj, rng, scale=0.3)
  ctrls = rng.uniform(-1, 1, size=(STEPS, mj.nu))
  md = oracle.mj_data(mj, qpos, qvel, act, np.zeros(mj.nu), forward=False)
  theirs = []
  for t in range(STEPS):
    md.ctrl[:] = ctrls[t]
    mujoco.mj_step(mj, md)
    theirs.append(np.concatenate([md.qpos, md.qvel, md.act]))
  d = oracle.jx_data(m, qpos, qvel, act, np.zeros(mj.nu))
  _, traj = jax.jit(jaxsim.rollout)(m, d, ctrls)
  ours = np.concatenate([traj['qpos'], traj['qvel'], traj['act']], axis=1)
  theirs = np.asarray(theirs)
  for t in (0, 99, 299, STEPS - 1):
    oracle.assert_close(f'state after step {t + 1}', ours[t], theirs[t])


def _chain():
  m, _ = oracle.load_pair(MODELS['chain10'])
  return m


def _loss(m, qvel0, steps=100):
  d = jaxsim.make_data(m).replace(qvel=qvel0)
  ctrls = jnp.zeros((steps, m.nu))
  final, _ = jaxsim.rollout(m, d, ctrls, record=())
  return jnp.sum(final.qpos**2) + 0.1 * jnp.sum(final.qvel**2)


def test_grad_wrt_initial_qvel_matches_finite_differences():
  m = _chain()
  qvel0 = jnp.asarray(np.random.default_rng(1).normal(size=m.nv) * 0.5)
  loss = jax.jit(lambda v: _loss(m, v))
  g = np.asarray(jax.jit(jax.grad(lambda v: _loss(m, v)))(qvel0))
  assert np.all(np.isfinite(g))
  eps = 1e-6
  fd = np.array(
    [(loss(qvel0.at[i].add(eps)) - loss(qvel0.at[i].add(-eps))) / (2 * eps) for i in range(m.nv)]
  )
  oracle.assert_close('d loss / d qvel0', g, fd, rtol=1e-5)


def test_grad_wrt_body_mass_matches_finite_differences():
  m = _chain()
  qvel0 = jnp.asarray(np.random.default_rng(2).normal(size=m.nv) * 0.5)

  def loss_of_mass(mass):
    return _loss(m.replace(body_mass=mass), qvel0)

  mass = m.body_mass
  g = np.asarray(jax.jit(jax.grad(loss_of_mass))(mass))
  assert np.all(np.isfinite(g))
  f = jax.jit(loss_of_mass)
  eps = 1e-6
  for i in (1, 4, 10):
    fd = (f(mass.at[i].add(eps)) - f(mass.at[i].add(-eps))) / (2 * eps)
    oracle.assert_close(f'd loss / d body_mass[{i}]', g[i], fd, rtol=1e-5)
  assert g[0] == 0.0  # the world's mass moves nothing


def test_vmap_over_1024_worlds_matches_single_world():
  m = _chain()
  rng = np.random.default_rng(3)
  batch = 1024
  d0 = jaxsim.make_data(m)
  qvel = jnp.asarray(rng.normal(size=(batch, m.nv)))
  ctrl = jnp.asarray(rng.uniform(-1, 1, size=(batch, m.nu)))
  data = jax.vmap(lambda v, c: d0.replace(qvel=v, ctrl=c))(qvel, ctrl)
  step = jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0)))
  out = step(m, step(m, data))
  assert np.all(np.isfinite(np.asarray(out.qpos)))
  single = jax.jit(jaxsim.step)
  for i in (0, 517, batch - 1):
    di = single(m, single(m, d0.replace(qvel=qvel[i], ctrl=ctrl[i])))
    oracle.assert_close(f'world {i} qpos', out.qpos[i], di.qpos, rtol=1e-12)
    oracle.assert_close(f'world {i} qvel', out.qvel[i], di.qvel, rtol=1e-12)


FREE = """<mujoco><option integrator="implicitfast" gravity="0 0 -2" density="1.2" viscosity=".01"/>
  <worldbody>
  <body name="alone"><freejoint/>
    <geom type="box" size=".2 .05 .01" mass="1"/></body>
  <body name="heavy_child" pos="1 0 0"><freejoint/>
    <geom type="box" size=".1 .05 .02" mass="1"/>
    <body pos=".2 0 0"><geom type="sphere" size=".05" mass=".5"/></body></body>
  <body name="empty_child" pos="2 0 0"><freejoint/>
    <geom type="capsule" size=".03 .2" mass="1"/><body pos="0 .2 0"><site/></body></body>
</worldbody></mujoco>"""


def test_implicitfast_free_bodies_with_a_traced_model():
  """implicitfast's standalone free bodies (mj_isFreeBody: no joint below them; in MuJoCo 4.0.0
  a massive welded child does not count) get the local unsymmetric solve with the gyroscopic
  derivative, also where the model is a jit argument (API.md's jit(vmap(step, in_axes=(None,
  0)))): the choice read body masses, traced leaves there, and failed. Three bodies tumbling
  with 7 rad/s about their long axes in a fluid (whose velocity derivative was taken with the
  body velocities held fixed: zero) follow mj_step for 200 steps."""
  from jaxsim._src import integrate

  m, mj = jaxsim.load_string(FREE), mujoco.MjModel.from_xml_string(FREE)
  assert integrate.free_bodies(m).tolist() == [0, 6, 12]
  md = mujoco.MjData(mj)
  md.qvel[:] = np.tile([0.3, -0.2, 0.1, 7.0, 0.5, -3.0], 3)
  d = jaxsim.make_data(m).replace(qvel=jnp.asarray(md.qvel))
  step = jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0)))
  batch = jax.tree_util.tree_map(lambda x: x[None], d)
  for _ in range(200):
    mujoco.mj_step(mj, md)
    batch = step(m, batch)
  oracle.assert_close('qpos', batch.qpos[0], md.qpos)
  oracle.assert_close('qvel', batch.qvel[0], md.qvel)


@pytest.mark.parametrize('integrator', ['implicit', 'implicitfast'])
def test_implicit_step_has_no_lapack_call(integrator):
  """The implicit integrators factor without LAPACK on the CPU (dynamics.factor_lu, factor_ld):
  batched LAPACK kernels can deadlock XLA's CPU pool (xla.REQUIRED_ENV; tests/test_soak.py).
  FREE has three free bodies (implicitfast's local 6x6 solves) and, under implicit, the global
  unsymmetric solve; the values are held to MuJoCo's by the trajectory tests above and
  test_implicitfast_free_bodies_with_a_traced_model."""
  m = jaxsim.load_string(FREE)
  m = m.replace(opt=m.opt.replace(integrator=int(INTEGRATORS[integrator][0])))
  d = jax.tree_util.tree_map(lambda x: x[None], jaxsim.make_data(m))
  text = jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0))).lower(m, d).compile().as_text()
  assert not oracle.lapack_calls(text)


ACT_DERIV = """<mujoco><option integrator="implicitfast" gravity="0 0 0"/><worldbody>
  <body><joint name="base" axis="0 0 1" actuatorfrcrange="-1 1"/><geom type="box" size=".1 .1 .1"/>
    <body pos=".1 0 0"><joint name="f1" type="slide" axis="0 1 0"/>
      <geom size=".02" mass=".1"/></body>
    <body pos="-.1 0 0"><joint name="f2" type="slide" axis="0 1 0"/>
      <geom size=".02" mass=".1"/></body>
  </body></worldbody>
  <tendon><fixed name="split"><joint joint="f1" coef=".5"/><joint joint="f2" coef=".5"/></fixed>
  </tendon>
  <actuator><position joint="base" kp="50" kv="3"/><position tendon="split" kp="20" kv="2"/>
  </actuator>
</mujoco>"""


def test_implicitfast_actuator_damping_like_mujoco():
  """The actuators' velocity derivative in implicitfast as MuJoCo 4.0.0 builds qDeriv: a tendon
  actuator across two sibling fingers (the Panda's gripper) adds no coupling between them
  (outside qDeriv's sparsity), and a joint actuator whose joint actfrcrange clamps the force
  (Booster T1's hips) adds no damping while clamped; 120 steps follow mj_step."""
  m, mj = jaxsim.load_string(ACT_DERIV), mujoco.MjModel.from_xml_string(ACT_DERIV)
  md = mujoco.MjData(mj)
  step = jax.jit(jaxsim.step)
  d = jaxsim.make_data(m)
  for t in range(120):
    md.ctrl[:] = (2.0, 0.05) if t < 60 else (0.01, -0.05)
    d = step(m, d.replace(ctrl=jnp.asarray(md.ctrl)))
    mujoco.mj_step(mj, md)
    oracle.assert_close(f'qvel after step {t + 1}', d.qvel, md.qvel, rtol=1e-9)


LIFT = """<mujoco><option integrator="implicitfast" density="1.2" viscosity=".01" timestep=".01"/>
  <worldbody><body><joint axis="1 0 0"/><joint axis="0 1 0"/><joint axis="0 0 1"/>
    <geom type="box" size=".1 .05 .02" mass="1" fluidshape="ellipsoid"/></body></worldbody>
</mujoco>"""


def test_implicitfast_symmetrizes_the_fluid_derivative():
  """The ellipsoid fluid model's lift makes a body's force derivative unsymmetric; implicitfast
  factors the symmetric part (MuJoCo symmetrizes each body's, not the lower triangle of the
  whole): a spinning body on three hinges follows mj_step for 50 steps."""
  m, mj = jaxsim.load_string(LIFT), mujoco.MjModel.from_xml_string(LIFT)
  md = mujoco.MjData(mj)
  md.qvel[:] = (2.0, -1.5, 4.0)
  d = jaxsim.make_data(m).replace(qvel=jnp.asarray(md.qvel))
  step = jax.jit(jaxsim.step)
  for _ in range(50):
    mujoco.mj_step(mj, md)
    d = step(m, d)
  oracle.assert_close('qvel', d.qvel, md.qvel)


SPIN = """<mujoco><option integrator="RK4" timestep=".01"/><worldbody>
  <body pos="0 0 1"><freejoint/><geom type="box" size=".1 .05 .02"/></body>
  <body pos="1 0 1"><joint type="ball"/><geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
  </body></worldbody></mujoco>"""


def test_rk4_orientations_like_mujoco():
  """RK4 on ball and free joints is fourth order in MuJoCo 4 (Runge-Kutta-Munthe-Kaas: each
  stage's angular velocity through dexp^-1 of the stage's rotation); a tumbling box and a ball
  pendulum follow mj_step for 100 steps (without the correction, 5.7e-6 off after one)."""
  m, mj = jaxsim.load_string(SPIN), mujoco.MjModel.from_xml_string(SPIN)
  md = mujoco.MjData(mj)
  md.qvel[:] = (0.3, -0.2, 0.1, 7.0, 0.5, -3.0, 2.0, -1.0, 3.0)
  d = jaxsim.make_data(m).replace(qvel=jnp.asarray(md.qvel))
  step = jax.jit(jaxsim.step)
  for _ in range(100):
    mujoco.mj_step(mj, md)
    d = step(m, d)
  oracle.assert_close('qpos', d.qpos, md.qpos, atol=1e-12)
  oracle.assert_close('qvel', d.qvel, md.qvel)

"""Reverse-mode gradients of 60-step rollouts through contacts, joint limits and the constraint
solver agree with central finite differences (float64).

jaxsim.solver differentiates the constraint solution implicitly (a custom_jvp on its optimality
condition), so these rollouts check that derivative, composed with collision, the constraint rows
and the integrator, over many solves of several iterations each. A finite difference of step
~1e-6 sees the solver's stopping error divided by the step: MuJoCo's default tolerance (1e-8)
leaves qacc accurate to ~1e-6 relative, hence opt.tolerance 1e-12 here, where Newton has
converged to round-off. The states are generic: no contact or limit starts or ends, and no row
changes zone, within an FD step of the trajectory.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim

STEPS = 60
TIGHT = 1e-12  # opt.tolerance for the finite differences (see the module docstring)

# A box thrown spinning onto a plane: it lands on an edge and tumbles while sliding. The plane's
# friction is the lower, so contacts take the box's (MuJoCo's max rule).
BOX = """
<mujoco>
  <option timestep="0.005" cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1" friction=".3 .001 .0001"/>
    <body name="box" pos="0 0 .12" euler="20 10 0">
      <freejoint/>
      <geom name="box" type="box" size=".1 .07 .05" friction=".8 .01 .001" mass="1.5"/>
    </body>
  </worldbody>
</mujoco>
"""

# A cart on a limited slider with a pole; a damped slider (implicit damping in Euler reads
# qfrc_constraint)
CARTPOLE = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body name="cart" pos="0 0 1">
      <joint name="slider" type="slide" axis="1 0 0" limited="true" range="-.25 .25"
             damping=".5"/>
      <geom type="box" size=".1 .05 .05" mass="1" contype="0" conaffinity="0"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" damping=".01"/>
        <geom type="capsule" fromto="0 0 0 0 0 .6" size=".03" mass=".2" contype="0"
              conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="slider" gear="10" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
</mujoco>
"""


def _rollout(m: jaxsim.Model, d: jaxsim.Data, ctrls: jax.Array):
  """Final Data after len(ctrls) steps, and per step: active contacts, limit/contact force
  magnitude, solver iterations."""

  def body(d, ctrl):
    d = jaxsim.step(m, d.replace(ctrl=ctrl))
    return d, (d.ncon, jnp.abs(d.efc_force).sum(), d.solver_niter)

  return jax.lax.scan(body, d, ctrls)


def _tight(m: jaxsim.Model) -> jaxsim.Model:
  return m.replace(opt=m.opt.replace(tolerance=jnp.asarray(TIGHT)))


def _fd(loss, x, eps):
  """Central differences of loss (vmapped over perturbations) along every coordinate of x."""
  e = jnp.eye(x.size) * eps[:, None]
  vals = jax.jit(jax.vmap(loss))(jnp.concatenate([x + e, x - e]))
  return (vals[: x.size] - vals[x.size :]) / (2 * eps)


def _check(ad, fd, rtol=1e-4):
  """Each derivative within rtol of its finite difference (and of the largest one, for
  derivatives that are nearly zero)."""
  ad, fd = np.asarray(ad), np.asarray(fd)
  assert np.all(np.isfinite(ad)), ad
  err = np.abs(ad - fd)
  bad = err > rtol * np.maximum(np.abs(fd), 1e-3 * np.abs(fd).max())
  assert not bad.any(), f'ad {ad[bad]} fd {fd[bad]} (rel err {err / np.abs(fd)})'


@functools.cache
def _box(cone: str):
  m = _tight(jaxsim.load_string(BOX.format(cone=cone)))
  d0 = jaxsim.make_data(m)
  geom, body = 1, 1
  w = jnp.asarray(np.random.default_rng(0).normal(size=m.nq + m.nv))

  def loss(x):
    """x: initial qvel (6), the box's sliding friction, the box's mass."""
    mm = m.replace(
      geom_friction=m.geom_friction.at[geom, 0].set(x[6]),
      body_mass=m.body_mass.at[body].set(x[7]),
    )
    final, stats = _rollout(mm, d0.replace(qvel=x[:6]), jnp.zeros((STEPS, 0)))
    return w @ jnp.concatenate([final.qpos, final.qvel]), (final, stats)

  x0 = jnp.asarray([0.8, -0.3, -0.5, 12.0, -18.0, 4.0, 0.8, 1.5])
  return loss, x0


# pyramidal (MuJoCo's default) only: elliptic cones' derivatives are checked per solve in
# test_solver.test_grad, and each rollout case costs ~50 s of compile
@pytest.mark.parametrize('cone', ['pyramidal'])
def test_box_tumbling(cone):
  """d loss / d (initial qvel, friction, mass) of a box landing, tumbling and sliding."""
  loss, x0 = _box(cone)
  (val, (final, (ncon, force, niter))), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(x0)
  # the rollout is MuJoCo's
  mj = mujoco.MjModel.from_xml_string(BOX.format(cone=cone))
  mj.opt.tolerance = TIGHT
  md = mujoco.MjData(mj)
  md.qvel[:] = np.asarray(x0[:6])
  mj_ncon = []
  for _ in range(STEPS):
    mujoco.mj_step(mj, md)
    mj_ncon.append(md.ncon)
  np.testing.assert_array_equal(ncon, mj_ncon)
  np.testing.assert_allclose(final.qpos, md.qpos, rtol=0, atol=1e-8)
  np.testing.assert_allclose(final.qvel, md.qvel, rtol=0, atol=1e-7)
  # the run is what it should be: contacts come and go (landing, tumbling), the solver takes
  # several iterations, the box ends up turned over (its z axis far from the initial one)
  ncon, niter = np.asarray(ncon), np.asarray(niter)
  assert ncon[0] == 0 and ncon.max() >= 2 and len(set(ncon[ncon > 0])) >= 2, ncon
  assert niter.max() >= 3, niter
  quat = np.asarray(final.qpos[3:])
  zaxis_z = 1 - 2 * (quat[1] ** 2 + quat[2] ** 2)
  assert zaxis_z < 0.5, zaxis_z
  eps = 1e-6 * jnp.maximum(1.0, jnp.abs(x0))
  fd = _fd(lambda x: loss(x)[0], x0, eps)
  assert np.abs(np.asarray(g[6:])).min() > 1e-3 * np.abs(np.asarray(g)).max()  # both matter
  _check(g, fd)


def test_cartpole_limit():
  """d loss / d (initial qpos, qvel, controls) of a cart driven into its slider limit."""
  m = _tight(jaxsim.load_string(CARTPOLE))
  d0 = jaxsim.make_data(m)
  rng = np.random.default_rng(1)
  ctrls0 = jnp.asarray(np.clip(0.4 + 0.3 * rng.normal(size=(STEPS, 1)), -0.9, 0.9))
  w = jnp.asarray(rng.normal(size=4))

  def split(x):
    return x[:2], x[2:4], x[4:].reshape(STEPS, 1)

  def loss(x):
    qpos, qvel, ctrls = split(x)
    final, stats = _rollout(m, d0.replace(qpos=qpos, qvel=qvel), ctrls)
    return w @ jnp.concatenate([final.qpos, final.qvel]), stats

  x0 = jnp.concatenate([jnp.asarray([0.05, 0.3]), jnp.asarray([1.2, -1.0]), ctrls0.ravel()])
  (val, (ncon, force, niter)), g = jax.jit(jax.value_and_grad(loss, has_aux=True))(x0)
  # the slider reaches its limit early and is held against it
  force = np.asarray(force)
  assert force[:5].max() == 0 and (force[-20:] > 0).all(), force
  eps = jnp.full(x0.shape, 1e-6)
  fd = _fd(lambda x: loss(x)[0], x0, eps)
  _check(g, fd)


# a box resting on a plane and a condim-6 ball rolling on it, with noslip sweeps after Newton
NOSLIP = """
<mujoco>
  <option timestep="0.005" cone="{cone}" noslip_iterations="4"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .099"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos=".5 0 .099"><freejoint/><geom type="sphere" size=".1" condim="6"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_noslip_step_gradient(cone):
  """d loss / d (qvel, body masses) of one step whose friction forces the noslip sweeps re-solve:
  the step is MuJoCo's, the sweeps change it, and the gradient (through the active rows' J M^-1,
  which the masses change, and the sweeps' custom_jvp) agrees with central differences."""
  xml = NOSLIP.format(cone=cone)
  m = _tight(jaxsim.load_string(xml))
  d0 = jaxsim.make_data(m)
  rng = np.random.default_rng(2)
  x0 = jnp.concatenate([jnp.asarray(0.3 * rng.normal(size=m.nv)), m.body_mass[1:]])
  w = jnp.asarray(rng.normal(size=m.nv))

  @jax.jit
  def after(mm, x):
    mm = mm.replace(body_mass=mm.body_mass.at[1:].set(x[m.nv :]))
    return jaxsim.step(mm, d0.replace(qvel=x[: m.nv])).qvel

  g = jax.jit(jax.grad(lambda x: w @ after(m, x)))(x0)
  mj = mujoco.MjModel.from_xml_string(xml)
  mj.opt.tolerance = TIGHT
  md = mujoco.MjData(mj)
  md.qvel[:] = np.asarray(x0[: m.nv])
  mujoco.mj_step(mj, md)
  np.testing.assert_allclose(after(m, x0), md.qvel, rtol=0, atol=1e-9)
  # the sweeps act: MuJoCo's step without them ends elsewhere (checked on MuJoCo's side, which
  # the step above equals, rather than by compiling a second jaxsim step)
  mj.opt.noslip_iterations = 0
  plain = mujoco.MjData(mj)
  plain.qvel[:] = np.asarray(x0[: m.nv])
  mujoco.mj_step(mj, plain)
  assert np.abs(plain.qvel - md.qvel).max() > 1e-6
  _check(g, _fd(lambda x: w @ after(m, x), x0, 1e-6 * jnp.maximum(1.0, jnp.abs(x0))))

"""jaxsim.playground: MuJoCo Playground's environments on jaxsim agree with the same environments
on MJX (its pure-JAX implementation, float64), through reset, step and Playground's Brax training
wrapper with domain randomisation.

Both engines run Playground's own environment code (observations, rewards, reset randomisation)
from the same keys, so any difference is the physics'. Needs the `playground` package (the test
extra installs it; MJX comes with it).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip('mujoco_playground', reason='needs playground (pip install -e .[test])')

import jaxsim  # noqa: E402
import jaxsim.playground  # noqa: E402

# Cartpole: no contacts, one substep. FingerSpin: contacts between the finger and the spinner
# from the first step, two substeps.
ENVS = ('CartpoleBalance', 'FingerSpin')

# Two float64 engines, different summation orders and solver stopping points: agreement is at
# rounding level (2e-15 measured on both environments); 1e-10 leaves room for the Newton solver
# stopping one iteration apart on a contact step, never for a wrong force.
ATOL = 1e-10


def _mjx_env(name):
  from mujoco_playground import registry

  return registry.load(name, config_overrides={'impl': 'jax'})


def _reset_step(env):
  """reset at a fixed key, then two steps with a fixed action in [-1, 1]; jitted once."""

  def run(key):
    s0 = env.reset(key)
    a = jax.random.uniform(jax.random.PRNGKey(1), (env.action_size,), minval=-1.0, maxval=1.0)
    s1 = env.step(s0, a)
    s2 = env.step(s1, a)
    return s0.obs, s1.obs, s2.obs, s2.reward, s2.data.qpos, s2.data.qvel

  return jax.jit(run)(jax.random.PRNGKey(0))


@pytest.mark.parametrize('name', ENVS)
def test_reset_step_on_jaxsim_matches_mjx(name):
  """One test per environment (each compiles two programs: split across xdist workers, a
  shared fixture would be built twice)."""
  from mujoco import mjx
  from mujoco_playground._src import mjx_env

  env = jaxsim.playground.load(name)
  assert isinstance(env.mjx_model, jaxsim.Model)
  assert isinstance(jax.eval_shape(env.reset, jax.random.PRNGKey(0)).data, jaxsim.Data)
  ours, theirs = _reset_step(env), _reset_step(_mjx_env(name))
  # the switch to jaxsim.mjx lasts only while the environment's methods run
  assert mjx_env.mjx is mjx
  names = ('obs0', 'obs1', 'obs2', 'reward', 'qpos', 'qvel')
  for what, a, b in zip(names, ours, theirs, strict=True):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == np.float64, what
    assert np.all(np.isfinite(a)), what
    np.testing.assert_allclose(a, b, rtol=0, atol=ATOL, err_msg=what)


def _randomize(model, rng):
  """Playground-style domain randomisation: pole mass and slider damping per world, through
  Model.tree_replace and an in_axes Model (as Playground's locomotion randomizers do)."""

  @jax.vmap
  def sample(key):
    k1, k2 = jax.random.split(key)
    mass = model.body_mass.at[2].multiply(jax.random.uniform(k1, minval=0.5, maxval=2.0))
    damping = model.dof_damping.at[0].set(jax.random.uniform(k2, minval=0.0, maxval=2.0))
    return mass, damping

  mass, damping = sample(rng)
  in_axes = jax.tree_util.tree_map(lambda x: None, model)
  in_axes = in_axes.tree_replace({'body_mass': 0, 'dof_damping': 0})
  return model.tree_replace({'body_mass': mass, 'dof_damping': damping}), in_axes


def test_brax_wrapper_domain_randomization_matches_mjx():
  """wrap_for_brax_training with a randomization_fn: vmap over randomised Models, episode and
  auto-reset wrappers, on jaxsim and on MJX, from the same keys."""
  from mujoco_playground import wrapper

  nworld = 3
  keys = jax.random.split(jax.random.PRNGKey(2), nworld)
  action = jnp.linspace(-1.0, 1.0, nworld)[:, None]

  def run(env):
    env = wrapper.wrap_for_brax_training(
      env, episode_length=5, randomization_fn=lambda m: _randomize(m, keys)
    )

    def go(rng):
      s = env.reset(rng)
      for _ in range(3):
        s = env.step(s, action)
      return s.obs, s.data.qvel, s.reward

    return jax.jit(go)(jax.random.split(jax.random.PRNGKey(3), nworld))

  ours, theirs = run(jaxsim.playground.load('CartpoleBalance')), run(_mjx_env('CartpoleBalance'))
  for a, b in zip(ours, theirs, strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=ATOL)
  # the worlds differ (randomised Models, different actions): not one world broadcast
  assert np.ptp(np.asarray(ours[1])[:, 1]) > 1e-3

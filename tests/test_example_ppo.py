"""The RL environment layer (jaxsim.envs) and examples/train_ppo.py in quick mode."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from jaxsim import envs
from tests.models import MODELS

ROOT = os.path.dirname(MODELS)


@pytest.fixture(scope='module')
def balance():
  env = envs.make('cartpole_balance', episode_length=50)
  return env, jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))


def test_env_reset_step_auto_reset(balance):
  env, reset, step = balance
  assert (env.observation_size, env.action_size) == (5, 1)
  assert env.dt == pytest.approx(2 * 0.005)
  np.testing.assert_allclose(env.ctrl(jnp.array([-1.0])), [-1.0])
  np.testing.assert_allclose(env.ctrl(jnp.array([0.5])), [0.5])
  np.testing.assert_allclose(env.ctrl(jnp.array([3.0])), [1.0])  # clipped to the ctrlrange

  s0 = reset(jax.random.split(jax.random.key(0), 4))
  assert s0.obs.shape == (4, 5) and s0.reward.shape == (4,) and s0.done.shape == (4,)
  assert len({float(q) for q in s0.data.qpos[:, 1]}) == 4  # randomised per world
  assert np.all(np.abs(s0.data.qpos[:, 1]) <= 0.05)

  # world 0 tips over, world 1 is at its time limit, worlds 2 and 3 carry on
  qpos = s0.data.qpos.at[0, 1].set(0.19)
  qvel = s0.data.qvel.at[0, 1].set(3.0)
  steps = s0.info['steps'].at[1].set(env.episode_length - 1)
  ret = s0.info['return'].at[0].set(7.0)
  s = s0.replace(
    data=s0.data.replace(qpos=qpos, qvel=qvel), info={**s0.info, 'steps': steps, 'return': ret}
  )
  action = jnp.full((4, 1), 0.3)
  s1 = step(s, action)
  np.testing.assert_array_equal(s1.done, [1, 1, 0, 0])
  np.testing.assert_array_equal(s1.info['truncation'], [0, 1, 0, 0])
  np.testing.assert_array_equal(s1.info['steps'], [0, 0, 1, 1])
  assert 0 < float(s1.reward[0]) <= 1
  np.testing.assert_allclose(s1.metrics['episode_return'][0], 7.0 + s1.reward[0], rtol=1e-6)
  assert int(s1.metrics['episode_length'][1]) == env.episode_length
  # the ended worlds restart from a fresh randomised state; final_obs keeps the last one
  final_th = np.arctan2(s1.info['final_obs'][0, 2], s1.info['final_obs'][0, 1])
  assert final_th > env.max_angle
  assert np.all(np.abs(s1.data.qpos[:2, 1]) <= 0.05) and np.all(s1.data.time[:2] == 0)
  np.testing.assert_allclose(s1.obs[:2, 1], np.cos(s1.data.qpos[:2, 1]), rtol=1e-6)
  assert not np.allclose(s1.data.qpos[0], s0.data.qpos[0])

  # the carried-on worlds: frame_skip = 2 physics steps with the mapped ctrl held
  d = jax.tree_util.tree_map(lambda x: x[2], s.data)
  ctrls = jnp.broadcast_to(env.ctrl(action[2]), (env.frame_skip, 1))
  final, _ = jaxsim.rollout(env.model, d, ctrls, None)
  np.testing.assert_allclose(s1.data.qpos[2], final.qpos, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(s1.data.qvel[2], final.qvel, rtol=1e-6, atol=1e-7)


def test_swingup_reward_and_reset():
  env = envs.make('cartpole_swingup')
  assert env.episode_length == 1000
  s = env.reset(jax.random.key(1))
  assert abs(float(s.data.qpos[1]) - np.pi) < 0.1  # hanging
  up = s.data.replace(qpos=jnp.zeros(2), qvel=jnp.zeros(2))
  assert float(env.reward(up, jnp.zeros(1))) == pytest.approx(1.0)
  assert float(env.reward(s.data, jnp.zeros(1))) < 0.01
  assert float(env.reward(up, jnp.ones(1))) == pytest.approx(0.8)  # control cost
  with pytest.raises(ValueError, match='unknown environment'):
    envs.make('cartpole_backflip')


def test_train_ppo_quick(tmp_path):
  out = tmp_path / 'ppo'
  r = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'examples', 'train_ppo.py'), '--quick', '--out', str(out)],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=ROOT,
  )
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
  assert 'random policy return' in r.stdout and 'trained policy return' in r.stdout
  png = out / 'learning_curve.png'
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and png.stat().st_size > 10_000
  m = json.loads((out / 'metrics.json').read_text())
  random, trained = m['random_return'], m['trained_return']
  # measured in the same run on the same initial states: a clear margin, not noise
  assert trained > 4 * random and trained - random > 0.3 * m['episode_length'], (random, trained)
  curve = [c['return'] for c in m['curve']]
  assert np.mean(curve[-5:]) > 2 * np.mean(curve[:5]), curve

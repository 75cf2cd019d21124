"""Brax's PPO on a MuJoCo Playground task, with jaxsim as the physics, next to the same run on MJX.

  python examples/playground_ppo.py --quick                 # CartpoleBalance, small, CPU minutes
  python examples/playground_ppo.py                         # CartpoleBalance, Playground's config
  python examples/playground_ppo.py --env CheetahRun        # (a GPU job: 60M steps)

The training code is Playground's and Brax's, unchanged: the environment comes from
`jaxsim.playground.load(name)` instead of `mujoco_playground.registry.load(name)`, and goes through
`wrapper.wrap_for_brax_training` into `brax.training.agents.ppo.train.train`. Without --quick the
PPO hyperparameters are Playground's tuned ones (`config.dm_control_suite_params.brax_ppo_config`);
--quick shrinks the batch, the episode (200 control steps) and the step count so that each
engine trains in a few minutes on a laptop CPU. Each engine trains from the same seeds; MJX runs
where mujoco-mjx is installed (its pure-JAX implementation, impl='jax', as on a CPU).

Writes the evaluation return against environment steps, one line per engine and seed, to
`--out` (default docs/playground_ppo.png) and the numbers to the same name with .json.
Needs `pip install -e '.[rl]'` (playground, brax) and matplotlib.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import time

import jax

import jaxsim.playground


def brax_on_new_jax() -> None:
  """Brax 0.14.2's PPO calls jax.device_put_replicated, which jax 0.10 removed from its namespace
  (the function itself is still in jax._src.api): put it back for Brax where it is missing.
  Nothing else changes; with an older jax this does nothing."""
  for name in ('device_put_replicated', 'device_put_sharded'):
    try:
      getattr(jax, name)
    except AttributeError:
      from jax._src import api

      setattr(jax, name, getattr(api, name))


def quick_config(episode_length: int):
  """PPO settings for a few CPU minutes: 64 worlds, 200-step episodes, ~3e5 environment steps."""
  from ml_collections import config_dict

  return config_dict.create(
    num_timesteps=300_000,
    num_evals=6,
    reward_scaling=10.0,
    episode_length=episode_length,
    normalize_observations=True,
    action_repeat=1,
    unroll_length=20,
    num_minibatches=8,
    num_updates_per_batch=4,
    discounting=0.97,
    learning_rate=1e-3,
    entropy_cost=1e-2,
    num_envs=64,
    batch_size=64,
    num_eval_envs=16,
  )


def make_env(engine: str, name: str, episode_length: int | None):
  """The Playground environment on `engine` ('jaxsim' or 'mjx')."""
  overrides = {} if episode_length is None else {'episode_length': episode_length}
  if engine == 'jaxsim':
    return jaxsim.playground.load(name, config_overrides=overrides or None)
  from mujoco_playground import registry

  return registry.load(name, config_overrides={'impl': 'jax', **overrides})


def train(engine: str, name: str, rl_config, seed: int) -> dict:
  """Brax PPO on one engine; returns the evaluation curve and timings."""
  from brax.training.agents.ppo import train as ppo
  from mujoco_playground import wrapper

  env = make_env(engine, name, rl_config.episode_length)
  steps, returns, times = [], [], []
  start = time.time()

  def progress(num_steps, metrics):
    steps.append(int(num_steps))
    returns.append(float(metrics['eval/episode_reward']))
    times.append(time.time() - start)
    print(f'  {engine} seed {seed}: {num_steps:>9} steps  return {returns[-1]:8.2f}  '
          f'({times[-1]:.0f} s)', flush=True)  # fmt: skip

  brax_on_new_jax()
  params = dict(rl_config)
  train_fn = functools.partial(
    ppo.train,
    **params,
    seed=seed,
    progress_fn=progress,
  )
  train_fn(environment=env, wrap_env_fn=wrapper.wrap_for_brax_training)
  return {'engine': engine, 'seed': seed, 'steps': steps, 'returns': returns, 'times': times}


def plot(runs: list[dict], name: str, path: str, note: str) -> None:
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  colors = {'jaxsim': 'C0', 'mjx': 'C1'}
  fig, ax = plt.subplots(figsize=(6, 4))
  for r in runs:
    label = f'{r["engine"]} (seed {r["seed"]})'
    ax.plot(r['steps'], r['returns'], 'o-', color=colors[r['engine']], label=label, alpha=0.8)
  ax.set_xlabel('environment steps')
  ax.set_ylabel('evaluation return')
  ax.set_title(f'Brax PPO on Playground {name}: jaxsim vs MJX\n{note}', fontsize=9)
  ax.legend()
  ax.grid(alpha=0.3)
  fig.tight_layout()
  os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
  fig.savefig(path, dpi=120)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--env', default='CartpoleBalance')
  p.add_argument('--quick', action='store_true', help='small PPO run, CPU minutes per engine')
  p.add_argument('--seeds', type=int, default=1, help='seeds per engine')
  p.add_argument('--engines', default='jaxsim,mjx')
  p.add_argument('--out', default=os.path.join('docs', 'playground_ppo.png'))
  a = p.parse_args()

  if a.quick:
    rl_config = quick_config(episode_length=200)
    note = '--quick: 64 worlds, 200-step episodes, 3e5 steps'
  else:
    from mujoco_playground.config import dm_control_suite_params

    rl_config = dm_control_suite_params.brax_ppo_config(a.env)
    note = "Playground's tuned PPO config"
  engines = a.engines.split(',')
  if 'mjx' in engines:
    try:
      from mujoco import mjx  # noqa: F401
    except ImportError:
      print('mujoco-mjx is not installed: training on jaxsim only')
      engines = [e for e in engines if e != 'mjx']

  runs = []
  for engine in engines:
    for seed in range(a.seeds):
      print(f'{a.env} on {engine}, seed {seed} ({jax.devices()[0].platform})', flush=True)
      runs.append(train(engine, a.env, rl_config, seed))
  for r in runs:
    print(f"{r['engine']:>6} seed {r['seed']}: final return {r['returns'][-1]:.1f} "
          f"after {r['steps'][-1]} steps, {r['times'][-1]:.0f} s")  # fmt: skip
  plot(runs, a.env, a.out, note)
  with open(os.path.splitext(a.out)[0] + '.json', 'w') as f:
    json.dump(
      {'env': a.env, 'quick': a.quick, 'config': dict(rl_config), 'runs': runs}, f, indent=1
    )
  print('wrote', a.out)


if __name__ == '__main__':
  main()

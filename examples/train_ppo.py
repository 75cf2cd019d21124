"""PPO on a jaxsim task: thousands of simulated worlds stepped in parallel inside one jit.

  python examples/train_ppo.py --quick --out out/ppo        # cart-pole balance, about a minute
  python examples/train_ppo.py --out out/ppo                # swing-up, 2048 worlds, ~10M steps

Acting in every world for --steps control steps (with automatic resets inside the compiled
scan) is one jitted function, the only one that steps the simulator (evaluation reuses it); the
PPO update (generalized advantage estimation, several epochs of clipped-surrogate minibatch
steps) is another. The policy is a Gaussian MLP (flax.linen) on running-normalised
observations, trained with optax's Adam at a linearly decaying step size. The script prints the
return of a uniformly random policy and of the trained policy (its mean action), measured the
same way on the same initial states, and writes `learning_curve.png` and `metrics.json` to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxsim import envs


class ActorCritic(nn.Module):
  """Separate tanh MLPs for the action mean and the value; a state-independent log std."""

  action_size: int
  hidden: tuple[int, ...] = (64, 64)

  @nn.compact
  def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    def mlp(x, out, scale):
      for h in self.hidden:
        x = nn.tanh(nn.Dense(h, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
      return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(x)

    mean = mlp(obs, self.action_size, 0.01)
    value = mlp(obs, 1, 1.0)[..., 0]
    log_std = self.param('log_std', nn.initializers.constant(-0.5), (self.action_size,))
    return mean, jnp.broadcast_to(log_std, mean.shape), value


def gaussian_logp(x: jax.Array, mean: jax.Array, log_std: jax.Array) -> jax.Array:
  return jnp.sum(
    -0.5 * ((x - mean) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi), -1
  )


def normalize(norm: dict[str, jax.Array], obs: jax.Array) -> jax.Array:
  """Observations standardised by running statistics (the pole angle's sine is ~0.05 raw)."""
  return jnp.clip((obs - norm['mean']) / jnp.sqrt(norm['var'] + 1e-8), -10.0, 10.0)


def update_norm(norm: dict[str, jax.Array], obs: jax.Array) -> dict[str, jax.Array]:
  """Running mean and variance merged with a batch of observations (Chan et al.)."""
  obs = obs.reshape(-1, obs.shape[-1])
  n_b, mean_b, var_b = obs.shape[0], obs.mean(0), obs.var(0)
  n = norm['n'] + n_b
  delta = mean_b - norm['mean']
  mean = norm['mean'] + delta * n_b / n
  m2 = norm['var'] * norm['n'] + var_b * n_b + delta**2 * norm['n'] * n_b / n
  return {'n': n, 'mean': mean, 'var': m2 / n}


def make_train(env: envs.Env, cfg: argparse.Namespace):
  """The compiled pieces: init, collect (acting in every world) and update (PPO epochs)."""
  net = ActorCritic(env.action_size)
  # the step size decays linearly to zero: the last iterations refine rather than jump around
  lr = optax.linear_schedule(cfg.lr, 0.0, cfg.iterations * cfg.epochs * cfg.minibatches)
  tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(lr, eps=1e-5))
  n_envs, n_steps = cfg.envs, cfg.steps
  batch = n_envs * n_steps
  mb_size = batch // cfg.minibatches
  step = jax.vmap(env.step)

  @jax.jit
  def init(key):
    k1, k2 = jax.random.split(key)
    params = net.init(k1, jnp.zeros(env.observation_size))
    size = env.observation_size
    norm = {'n': jnp.asarray(1e-4), 'mean': jnp.zeros(size), 'var': jnp.ones(size)}
    policy = {'net': params, 'norm': norm}
    return policy, tx.init(params), jax.vmap(env.reset)(jax.random.split(k2, n_envs))

  @jax.jit
  def collect(policy, state, key, mode):
    """n_steps control steps in every world; mode 0: sample the policy, 1: its mean action,
    2: uniformly random actions. The only compiled function that steps the simulator. Returns
    the observation statistics updated with what was seen."""
    params, norm = policy['net'], policy['norm']

    def body(state, key):
      k1, k2 = jax.random.split(key)
      obs = normalize(norm, state.obs)
      mean, log_std, value = net.apply(params, obs)
      action = mean + jnp.exp(log_std) * jax.random.normal(k1, mean.shape)
      uniform = jax.random.uniform(k2, mean.shape, minval=-1.0, maxval=1.0)
      action = jnp.select([mode == 0, mode == 1], [action, mean], uniform)
      logp = gaussian_logp(action, mean, log_std)
      nxt = step(state, action)
      # values are in units of reward per step ((1 - gamma) * return): targets of order one
      # keep the value loss from swamping the policy's gradient under the global norm clip.
      # At a time limit the episode was cut, not ended: bootstrap from its last observation.
      _, _, final_value = net.apply(params, normalize(norm, nxt.info['final_obs']))
      reward = (1 - cfg.gamma) * nxt.reward + cfg.gamma * final_value * nxt.info['truncation']
      out = {
        'obs': obs,
        'raw_obs': state.obs,
        'action': action,
        'logp': logp,
        'value': value,
        'reward': reward,
        'env_reward': nxt.reward,
        'done': nxt.done,
        'metrics': nxt.metrics,
      }
      return nxt, out

    state, traj = jax.lax.scan(body, state, jax.random.split(key, n_steps))
    return state, traj, update_norm(norm, traj.pop('raw_obs'))

  def gae(values, rewards, dones, last_value):
    def body(carry, x):
      adv, next_value = carry
      value, reward, done = x
      delta = reward + cfg.gamma * next_value * (1 - done) - value
      adv = delta + cfg.gamma * cfg.lam * (1 - done) * adv
      return (adv, value), adv

    _, adv = jax.lax.scan(
      body, (jnp.zeros_like(last_value), last_value), (values, rewards, dones), reverse=True
    )
    return adv, adv + values

  def loss_fn(params, mb):
    obs, action, logp_old, adv, ret = mb
    mean, log_std, value = net.apply(params, obs)
    ratio = jnp.exp(gaussian_logp(action, mean, log_std) - logp_old)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    clipped = jnp.clip(ratio, 1 - cfg.clip, 1 + cfg.clip)
    policy_loss = -jnp.mean(jnp.minimum(ratio * adv, clipped * adv))
    value_loss = 0.5 * jnp.mean((value - ret) ** 2)
    entropy = jnp.mean(jnp.sum(log_std + 0.5 * np.log(2 * np.pi * np.e), -1))
    return policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * entropy

  @jax.jit
  def update(policy, opt_state, traj, last_obs, key):
    """GAE, then cfg.epochs passes of shuffled minibatch Adam steps on the clipped objective."""
    params = policy['net']
    _, _, last_value = net.apply(params, normalize(policy['norm'], last_obs))
    adv, ret = gae(traj['value'], traj['reward'], traj['done'], last_value)
    data = (traj['obs'], traj['action'], traj['logp'], adv, ret)
    data = jax.tree_util.tree_map(lambda x: x.reshape((batch,) + x.shape[2:]), data)

    def epoch(carry, key):
      perm = jax.random.permutation(key, batch).reshape(cfg.minibatches, mb_size)

      def minibatch(carry, idx):
        params, opt_state = carry
        mb = jax.tree_util.tree_map(lambda x: x[idx], data)
        grads = jax.grad(loss_fn)(params, mb)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), None

      return jax.lax.scan(minibatch, carry, perm)[0], None

    (params, opt_state), _ = jax.lax.scan(
      epoch, (params, opt_state), jax.random.split(key, cfg.epochs)
    )
    # the latest finished episode of each world that has finished one
    last = jax.tree_util.tree_map(lambda x: x[-1], traj['metrics'])
    finished = (last['episode_length'] > 0).astype(last['episode_return'].dtype)
    n_done = finished.sum()
    mean_return = (last['episode_return'] * finished).sum() / jnp.maximum(n_done, 1)
    policy = {**policy, 'net': params}
    return policy, opt_state, {'return': mean_return, 'worlds': n_done}

  def evaluate(policy, key, mode):
    """Mean undiscounted return of the first episode in each of the cfg.envs worlds."""
    k_reset, key = jax.random.split(key)
    _, _, state = init(k_reset)
    ret, alive = np.zeros(n_envs), np.ones(n_envs)
    for _ in range(-(-env.episode_length // n_steps)):
      key, sub = jax.random.split(key)
      state, traj, _ = collect(policy, state, sub, mode)
      for r, d in zip(np.asarray(traj['env_reward']), np.asarray(traj['done'])):
        ret += alive * r
        alive *= 1 - d
    return float(ret.mean())

  return init, collect, update, evaluate


def plot(
  curve: list[dict[str, Any]], random_return: float, trained_return: float, path: str, title
):
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
  steps = [c['env_steps'] for c in curve]
  ax.plot(steps, [c['return'] for c in curve], label='training (latest episode per world)')
  ax.axhline(random_return, color='gray', ls='--', label=f'random policy: {random_return:.1f}')
  ax.axhline(trained_return, color='C2', ls=':', label=f'trained policy: {trained_return:.1f}')
  ax.set_xlabel('environment steps')
  ax.set_ylabel('episode return')
  ax.set_title(title)
  ax.legend(loc='lower right')
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path)
  plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--quick', action='store_true', help='small, fast run (cart-pole balance)')
  p.add_argument('--out', default='out/ppo', help='folder for learning_curve.png, metrics.json')
  p.add_argument('--env', default=None, help=f'one of {", ".join(envs.ENVS)}')
  p.add_argument('--envs', type=int, default=None, help='parallel worlds')
  p.add_argument('--steps', type=int, default=None, help='control steps per world per iteration')
  p.add_argument('--iterations', type=int, default=None)
  p.add_argument('--epochs', type=int, default=4)
  p.add_argument('--minibatches', type=int, default=None)
  p.add_argument('--lr', type=float, default=None)
  p.add_argument('--gamma', type=float, default=0.995)
  p.add_argument('--lam', type=float, default=0.95)
  p.add_argument('--clip', type=float, default=0.2)
  p.add_argument('--vf-coef', type=float, default=0.5)
  p.add_argument('--ent-coef', type=float, default=0.0)
  p.add_argument('--seed', type=int, default=0)
  cfg = p.parse_args(argv)
  quick = dict(env='cartpole_balance', envs=64, steps=32, iterations=100, lr=1e-3, minibatches=4)
  full = dict(env='cartpole_swingup', envs=2048, steps=32, iterations=150, lr=1e-3, minibatches=16)
  for k, v in (quick if cfg.quick else full).items():
    if getattr(cfg, k) is None:
      setattr(cfg, k, v)

  env = envs.make(cfg.env)
  os.makedirs(cfg.out, exist_ok=True)
  print(
    f'{cfg.env}: {cfg.envs} worlds x {cfg.steps} steps x {cfg.iterations} iterations '
    f'({cfg.envs * cfg.steps * cfg.iterations:,} env steps), obs {env.observation_size}, '
    f'actions {env.action_size}, devices {jax.devices()}'
  )
  t_start = time.perf_counter()
  init, collect, update, evaluate = make_train(env, cfg)
  key = jax.random.key(cfg.seed)
  key, k_init, k_eval = jax.random.split(key, 3)
  policy, opt_state, state = init(k_init)

  random_return = evaluate(policy, k_eval, 2)
  print(f'random policy return: {random_return:.2f} ({time.perf_counter() - t_start:.1f} s)')

  curve = []
  for it in range(cfg.iterations):
    key, k_act, k_upd = jax.random.split(key, 3)
    state, traj, norm = collect(policy, state, k_act, 0)
    policy, opt_state, m = update(policy, opt_state, traj, state.obs, k_upd)
    policy = {**policy, 'norm': norm}
    m = {k: float(v) for k, v in m.items()}
    steps = (it + 1) * cfg.envs * cfg.steps
    if m['worlds'] > 0:
      curve.append({'iteration': it + 1, 'env_steps': steps, **m})
    if it % max(1, cfg.iterations // 10) == 0 or it == cfg.iterations - 1:
      elapsed = time.perf_counter() - t_start
      print(
        f'iter {it + 1:4d}  env steps {steps:>10,}  return {m["return"]:8.2f}  {elapsed:6.1f} s'
      )

  trained_return = evaluate(policy, k_eval, 1)
  seconds = time.perf_counter() - t_start
  print(f'trained policy return: {trained_return:.2f} (random policy: {random_return:.2f})')
  print(f'total {seconds:.1f} s')

  png = os.path.join(cfg.out, 'learning_curve.png')
  plot(curve, random_return, trained_return, png, f'PPO on {cfg.env} ({cfg.envs} worlds)')
  metrics = {
    'env': cfg.env,
    'random_return': random_return,
    'trained_return': trained_return,
    'episode_length': env.episode_length,
    'env_steps': cfg.envs * cfg.steps * cfg.iterations,
    'seconds': seconds,
    'curve': curve,
  }
  with open(os.path.join(cfg.out, 'metrics.json'), 'w') as f:
    json.dump(metrics, f, indent=1)
  print(f'wrote {png}')
  return metrics


if __name__ == '__main__':
  main()

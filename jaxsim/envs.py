"""Reinforcement-learning environments on jaxsim models: functional, pytree-based, jit/vmap-able.

The interface follows Brax and gymnax, so common JAX RL code drives it unchanged:

  env = jaxsim.envs.make('cartpole_swingup')
  state = jax.jit(jax.vmap(env.reset))(jax.random.split(key, 1024))   # 1024 worlds
  state = jax.jit(jax.vmap(env.step))(state, actions)                 # actions (1024, nu)

`reset(key) -> State` and `step(state, action) -> State` are pure functions of pytrees. A State
carries the simulator's Data, the observation, the reward and `done` of the last transition
(float, 1.0 when the episode ended there), `metrics` (the return and length of the latest
finished episode) and `info` (the PRNG key, step counter, `truncation` and `final_obs`). Episodes
reset themselves inside `step` (no host round trip): a world whose episode ended starts afresh
from a new randomised initial state drawn with the key it carries, and the returned `obs` is the
first one of the new episode; `info['final_obs']` keeps the last one of the old episode (for
bootstrapping at time limits, where `info['truncation']` is 1.0).

A task is a subclass of `Env` that defines `init_data` (randomised initial state),
`observation`, `reward` and, optionally, `terminated`. Actions live in [-1, 1]^nu and are mapped
onto each actuator's ctrlrange (or scaled by `action_scale` where the control is unlimited); each
action is held for `frame_skip` physics steps.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src.enums import ConeType, DisableBit, IntegratorType, SolverType
from jaxsim._src.types import Data, Model, static_fields

_MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'models')


@dataclasses.dataclass(frozen=True)
class State:
  """An environment state: Data, obs, reward and done of the last transition, metrics, info."""

  data: Data
  obs: jax.Array
  reward: jax.Array
  done: jax.Array
  metrics: dict[str, jax.Array]
  info: dict[str, Any]

  def replace(self, **changes) -> State:
    """A copy with some fields replaced."""
    return dataclasses.replace(self, **changes)

  @property
  def pipeline_state(self) -> Data:
    """Brax's name for `data`."""
    return self.data


jax.tree_util.register_dataclass(
  State, data_fields=['data', 'obs', 'reward', 'done', 'metrics', 'info'], meta_fields=[]
)


def _select(pred: jax.Array, a: Any, b: Any) -> Any:
  """a where pred else b, leaf by leaf (pred is a scalar)."""
  return jax.tree_util.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


def tolerance(
  x: jax.Array, margin: float, value_at_margin: float = 0.1, sigmoid: str = 'gaussian'
) -> jax.Array:
  """1 at x = 0, value_at_margin at |x| = margin (dm_control's rewards.tolerance, bounds (0, 0))."""
  d = jnp.abs(x) / margin
  if sigmoid == 'gaussian':
    return value_at_margin ** (d**2)
  if sigmoid == 'quadratic':
    scale = np.sqrt(1 - value_at_margin)
    return jnp.where(d * scale < 1, 1 - (d * scale) ** 2, 0.0)
  raise ValueError(f'unknown sigmoid {sigmoid!r}')


class Env:
  """A functional environment on a Model: subclass it and define the task's hooks.

  Args:
    model: the Model to simulate (its options as given; see `with_options`).
    frame_skip: physics steps per action (the control period is frame_skip * timestep).
    episode_length: steps after which an episode is truncated.
    auto_reset: reset ended episodes inside `step` (turn off to inspect terminal states).
    action_scale: ctrl per unit action for actuators without a ctrlrange.
  """

  def __init__(
    self,
    model: Model,
    *,
    frame_skip: int = 1,
    episode_length: int = 1000,
    auto_reset: bool = True,
    action_scale: float = 1.0,
  ):
    self.model = model
    self.frame_skip = int(frame_skip)
    self.episode_length = int(episode_length)
    self.auto_reset = bool(auto_reset)
    lo, hi = (np.asarray(model.actuator_ctrlrange).reshape(-1, 2).T).astype(float)
    limited = np.asarray(model.actuator_ctrllimited, bool) & (hi > lo)
    self._ctrl_lo = np.where(limited, lo, -action_scale)
    self._ctrl_hi = np.where(limited, hi, action_scale)

  # the task: override these

  def init_data(self, key: jax.Array) -> Data:
    """A randomised initial Data; by default qpos0 and zero velocity."""
    from jaxsim import make_data

    return make_data(self.model)

  def observation(self, data: Data) -> jax.Array:
    """The observation (observation_size,); by default qpos and qvel.

    `data`'s state fields are current; its derived fields (xpos, ...) are those computed at the
    start of the last physics step, as after mj_step. A task that needs current ones calls
    `jaxsim.forward` (or a kinematics stage) here.
    """
    return jnp.concatenate([data.qpos, data.qvel])

  def reward(self, data: Data, action: jax.Array) -> jax.Array:
    """The reward of the transition that ended in `data` under `action`."""
    raise NotImplementedError

  def terminated(self, data: Data) -> jax.Array:
    """Whether `data` ends the episode (a failure, not a time limit); by default never."""
    return jnp.zeros((), bool)

  # the interface

  @property
  def action_size(self) -> int:
    """Number of action components (the model's nu)."""
    return int(self.model.nu)

  @property
  def observation_size(self) -> int:
    """Length of the observation vector."""
    obs = jax.eval_shape(lambda k: self.observation(self.init_data(k)), jax.random.key(0))
    return int(np.prod(obs.shape))

  @property
  def dt(self) -> float:
    """The control period: frame_skip physics timesteps."""
    return float(self.model.opt.timestep) * self.frame_skip

  def ctrl(self, action: jax.Array) -> jax.Array:
    """Actions in [-1, 1] (clipped) mapped linearly onto [ctrl_lo, ctrl_hi] (nu,)."""
    a = jnp.clip(action, -1.0, 1.0)
    lo, hi = jnp.asarray(self._ctrl_lo, a.dtype), jnp.asarray(self._ctrl_hi, a.dtype)
    return lo + 0.5 * (a + 1.0) * (hi - lo)

  def reset(self, key: jax.Array) -> State:
    """A new episode from a randomised initial state."""
    key, sub = jax.random.split(key)
    data = self.init_data(sub)
    obs = self.observation(data)
    zero = jnp.zeros((), obs.dtype)
    metrics = {
      'episode_return': zero,
      'episode_length': jnp.zeros((), jnp.int32),
      'episode_done': zero,
    }
    info = {
      'key': key,
      'steps': jnp.zeros((), jnp.int32),
      'return': zero,
      'truncation': zero,
      'final_obs': obs,
    }
    return State(data, obs, zero, zero, metrics, info)

  def physics(self, data: Data, ctrl: jax.Array) -> Data:
    """frame_skip physics steps with ctrl held."""
    from jaxsim import step

    data = data.replace(ctrl=ctrl.astype(data.ctrl.dtype))
    return jax.lax.fori_loop(0, self.frame_skip, lambda _, d: step(self.model, d), data)

  def step(self, state: State, action: jax.Array) -> State:
    """One control step; an ended episode restarts from a new initial state (auto_reset)."""
    data = self.physics(state.data, self.ctrl(action))
    obs = self.observation(data)
    reward = jnp.asarray(self.reward(data, action), obs.dtype)
    term = jnp.asarray(self.terminated(data), bool)
    # a diverged simulation ends the episode rather than poisoning the batch with NaNs
    term = term | ~jnp.all(jnp.isfinite(obs))
    steps = state.info['steps'] + 1
    trunc = (steps >= self.episode_length) & ~term
    done = term | trunc
    ret = state.info['return'] + reward
    metrics = {
      'episode_return': jnp.where(done, ret, state.metrics['episode_return']),
      'episode_length': jnp.where(done, steps, state.metrics['episode_length']),
      'episode_done': done.astype(obs.dtype),
    }
    key = state.info['key']
    final_obs = obs
    if self.auto_reset:
      key, sub = jax.random.split(key)
      fresh = self.init_data(sub)
      data = _select(done, fresh, data)
      obs = jnp.where(done, self.observation(fresh), obs)
      steps = jnp.where(done, 0, steps)
      ret = jnp.where(done, 0.0, ret).astype(obs.dtype)
    info = {
      'key': key,
      'steps': steps,
      'return': ret,
      'truncation': trunc.astype(obs.dtype),
      'final_obs': final_obs,
    }
    return State(data, obs, reward, done.astype(obs.dtype), metrics, info)


def with_options(model: Model, **options) -> Model:
  """The model with some `opt` fields replaced (e.g. integrator='euler', iterations=2)."""
  enums = {'integrator': IntegratorType, 'solver': SolverType, 'cone': ConeType}
  opt = model.opt
  for k, v in options.items():
    if k in enums and isinstance(v, str):
      v = enums[k][v.upper()]
    opt = opt.replace(**{k: int(v) if k in static_fields(type(opt)) else v})
  return model.replace(opt=opt)


# RL-speed physics: a semi-implicit Euler step and a short solver run, enough for the cart's
# rail limit (one row, which Newton solves in one iteration); the sensors are not observed.
_FAST = {'integrator': IntegratorType.EULER, 'iterations': 2, 'ls_iterations': 4}


class _Cartpole(Env):
  """Cart-pole on models/cartpole.xml; observation (x, cos th, sin th, x_dot, th_dot)."""

  def __init__(
    self,
    model: Model | str | None = None,
    *,
    fast_physics: bool = True,
    constraints: bool = True,
    **kwargs,
  ):
    from jaxsim import load

    if model is None:
      model = os.path.join(_MODELS, 'cartpole.xml')
    if isinstance(model, str):
      if not os.path.exists(model):
        raise FileNotFoundError(
          f'{model} not found: the cartpole tasks use models/cartpole.xml of the jaxsim source '
          'tree; pass model= (a path or a Model) instead'
        )
      model = load(model)
    flags = model.opt.disableflags
    if fast_physics:
      model = with_options(model, **_FAST)
      flags |= DisableBit.SENSOR
    if not constraints:
      flags |= DisableBit.CONSTRAINT
    model = with_options(model, disableflags=flags)
    kwargs.setdefault('frame_skip', 2)
    super().__init__(model, **kwargs)

  def observation(self, data: Data) -> jax.Array:
    x, th = data.qpos[0], data.qpos[1]
    return jnp.stack([x, jnp.cos(th), jnp.sin(th), data.qvel[0], data.qvel[1]])

  def reward(self, data: Data, action: jax.Array) -> jax.Array:
    """dm_control's smooth cart-pole reward: upright, centred, small control, small velocity."""
    upright = (jnp.cos(data.qpos[1]) + 1) / 2
    centered = (1 + tolerance(data.qpos[0], margin=2.0)) / 2
    u = jnp.clip(action[0], -1.0, 1.0)
    small_control = (4 + tolerance(u, margin=1.0, value_at_margin=0.0, sigmoid='quadratic')) / 5
    small_velocity = (1 + tolerance(data.qvel[1], margin=5.0)) / 2
    return upright * centered * small_control * small_velocity

  def _data(self, qpos: jax.Array, qvel: jax.Array) -> Data:
    from jaxsim import make_data

    d = make_data(self.model)
    return d.replace(qpos=qpos.astype(d.qpos.dtype), qvel=qvel.astype(d.qvel.dtype))


class CartpoleBalance(_Cartpole):
  """Keep the pole up: starts near upright, ends when it tips past `max_angle` or the cart
  leaves the rail (|x| > max_x); dm_control's smooth reward, so a step is worth at most 1.

  The episode ends before the cart reaches the rail's limit (|x| = 1), so by default the model
  is simulated without constraint rows (constraints=False): same trajectories, less work.
  """

  def __init__(self, model=None, *, max_angle: float = 0.2, max_x: float = 0.9, **kwargs):
    kwargs.setdefault('episode_length', 500)
    kwargs.setdefault('constraints', False)
    super().__init__(model, **kwargs)
    self.max_angle, self.max_x = max_angle, max_x

  def init_data(self, key: jax.Array) -> Data:
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.uniform(k1, (), minval=-0.25, maxval=0.25)
    th = jax.random.uniform(k2, (), minval=-0.05, maxval=0.05)
    return self._data(jnp.stack([x, th]), 0.01 * jax.random.normal(k3, (2,)))

  def terminated(self, data: Data) -> jax.Array:
    th = jnp.arctan2(jnp.sin(data.qpos[1]), jnp.cos(data.qpos[1]))
    return (jnp.abs(th) > self.max_angle) | (jnp.abs(data.qpos[0]) > self.max_x)


class CartpoleSwingup(_Cartpole):
  """Swing the pole up from hanging and balance it (dm_control cartpole swingup); no failure
  states, 1000 steps of 0.01 s."""

  def __init__(self, model=None, **kwargs):
    kwargs.setdefault('episode_length', 1000)
    super().__init__(model, **kwargs)

  def init_data(self, key: jax.Array) -> Data:
    k1, k2 = jax.random.split(key)
    qpos = jnp.array([0.0, np.pi]) + 0.01 * jax.random.normal(k1, (2,))
    return self._data(qpos, 0.01 * jax.random.normal(k2, (2,)))


ENVS: Mapping[str, Callable[..., Env]] = {
  'cartpole_balance': CartpoleBalance,
  'cartpole_swingup': CartpoleSwingup,
}


def make(name: str, **kwargs) -> Env:
  """The environment registered as `name` (see ENVS), built with kwargs."""
  if name not in ENVS:
    raise ValueError(f'unknown environment {name!r}; known: {", ".join(sorted(ENVS))}')
  return ENVS[name](**kwargs)

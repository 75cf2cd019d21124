"""MuJoCo Playground environments with jaxsim as their physics.

    import jaxsim.playground
    from mujoco_playground import wrapper

    env = jaxsim.playground.load('CartpoleBalance')      # Playground's own environment class
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))    # state.data is a jaxsim.Data
    state = jax.jit(env.step)(state, jnp.zeros(env.action_size))
    train_env = wrapper.wrap_for_brax_training(env, episode_length=1000)  # then Brax's PPO

How: Playground's environments call MJX through the name `mjx` of their own modules (and of
`mujoco_playground._src.mjx_env`, whose make_data and step helpers they use): `mjx.put_model` in
their constructor, `mjx.make_data` and `mjx.forward` in reset, `mjx.step` in a `lax.scan` over
substeps in step. `load` builds the registry's environment while those names mean `jaxsim.mjx`
(MJX's functions over jaxsim), so its `mjx_model` is a `jaxsim.Model`; the environment it returns
is of a subclass of the registry's class whose methods run with the same names (`JaxsimEnv`), so
that reset and step, traced whenever jax traces them (jit, vmap, Brax's training loop), step
jaxsim. The names are switched only while such a method runs, under a lock, and restored when it
returns: code that uses Playground directly (on MJX) before or after, or in between calls, sees
MJX. Playground's environment code, rewards, observations, wrappers and domain randomisation
functions are its own, unchanged.

What differs from the same environment on MJX: the config's `impl` is 'jax' (jaxsim's engine);
`naconmax`/`njmax` are ignored (jaxsim sizes contacts from the model, see jaxsim.with_ncon_max).
Vision environments (MJX's batch renderer, `mjx.render`) are not supported and raise
NotImplementedError. Playground's locomotion and manipulation environments need MuJoCo
Menagerie's files (`menagerie_path`, `use_menagerie`).

`mujoco_playground` (package `playground`) and `brax` are optional: `pip install -e '.[rl]'`.
They are imported only inside this module's functions.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from typing import Any

import jaxsim.mjx as jaxsim_mjx

# MJX functions and types Playground's environments use that jaxsim.mjx provides under the same
# names; anything else a Playground module asks `mjx` for raises (no silent fallback to MJX's
# physics), except MJX's pure math helpers under `_src` (quaternion and vector functions).
_VISION = ('create_render_context', 'render', 'refit_bvh', 'get_rgb', 'get_depth')

_LOCK = threading.RLock()


class _Mjx(types.SimpleNamespace):
  """The `mjx` a Playground module sees while a jaxsim environment runs: jaxsim.mjx, with
  make_data of a `mujoco.MjModel` answered from the Models this environment has put.

  Playground's reset calls `mjx.make_data(self.mj_model, ...)`: MJX's make_data reads only sizes
  and qpos0 from the MjModel; jaxsim.mjx.make_data of an MjModel would compile it again at every
  trace, so the Model put from that MjModel in the constructor is reused (MJX's semantics: the
  Data is made from the MjModel as put, not from a randomised Model).
  """

  def __init__(self):
    super().__init__()
    self._put: dict[int, tuple[Any, Any]] = {}  # id(MjModel) -> (MjModel, Model)

  def __getattr__(self, name):
    # only reached for names not set on the namespace
    if name == '_src':
      from mujoco import mjx

      return mjx._src  # MJX's math helpers (quat_mul, normalize, ...): plain jax functions
    if name in _VISION:
      raise NotImplementedError(
        f'jaxsim.playground: mjx.{name} (MJX batch rendering, vision environments) is not '
        'provided by jaxsim; load the environment with vision=False'
      )
    try:
      return getattr(jaxsim_mjx, name)
    except AttributeError:
      raise AttributeError(
        f'jaxsim.playground: this environment uses mjx.{name}, which jaxsim.mjx does not provide'
      ) from None

  def put_model(self, m, *args, impl=None, **kwargs):
    """mjx.put_model, remembering which Model an MjModel became (see make_data)."""
    model = jaxsim_mjx.put_model(m, *args, impl=_jax_impl(impl), **kwargs)
    if not isinstance(m, jaxsim_mjx.Model):
      self._put[id(m)] = (m, model)
    return model

  def make_data(self, m, *args, impl=None, **kwargs):
    """mjx.make_data; an MjModel put by this environment gives the Data of its Model."""
    hit = self._put.get(id(m))
    if hit is not None and hit[0] is m:
      m = hit[1]
    return jaxsim_mjx.make_data(m, *args, impl=_jax_impl(impl), **kwargs)


def _jax_impl(impl):
  """Playground passes the config's impl (load sets 'jax') or the Model's impl.value."""
  return getattr(impl, 'value', impl)


def _playground_modules() -> list[types.ModuleType]:
  """Playground's modules that call MJX through their name `mjx` (environments, mjx_env,
  wrappers): those whose `mjx` is mujoco.mjx, or a jaxsim namespace (inside another _Physics)."""
  from mujoco import mjx

  out = []
  for name, mod in list(sys.modules.items()):
    if name.startswith('mujoco_playground') and mod is not None:
      value = mod.__dict__.get('mjx')
      if value is mjx or isinstance(value, _Mjx):
        out.append(mod)
  return out


class _Physics:
  """Context in which Playground's modules call jaxsim.mjx (re-entrant, one thread at a time)."""

  def __init__(self, namespace: _Mjx):
    self.namespace = namespace
    self.saved: list[list[tuple[types.ModuleType, Any]]] = []

  def __enter__(self):
    _LOCK.acquire()
    try:
      saved = [(mod, mod.__dict__['mjx']) for mod in _playground_modules()]
      for mod, _ in saved:
        mod.mjx = self.namespace
      self.saved.append(saved)
    except BaseException:
      _LOCK.release()
      raise
    return self

  def __exit__(self, *exc):
    try:
      for mod, old in reversed(self.saved.pop()):
        mod.mjx = old
    finally:
      _LOCK.release()
    return False


def _wrap(fn, name: str):
  """A method that runs fn with Playground's `mjx` meaning jaxsim.mjx."""

  def method(self, *args, **kwargs):
    with _Physics(self.__dict__['_jaxsim_mjx']):
      return fn(self, *args, **kwargs)

  method.__name__ = name
  method.__qualname__ = f'JaxsimEnv.{name}'
  method.__doc__ = fn.__doc__
  method.__wrapped__ = fn
  return method


_SUBCLASSES: dict[type, type] = {}


def jaxsim_class(cls: type) -> type:
  """The subclass of a Playground environment class whose methods run on jaxsim.

  Every function defined by a Playground class in cls's MRO (reset, step, their helpers) is
  wrapped so that while it runs, Playground's modules' `mjx` is this
  environment's jaxsim.mjx namespace. Properties are not wrapped (they read fields).

  Arguments:
    cls: a subclass of mujoco_playground's MjxEnv.
  Returns:
    the subclass (one per class, cached), named 'Jaxsim' + cls.__name__.
  """
  sub = _SUBCLASSES.get(cls)
  if sub is not None:
    return sub
  methods: dict[str, Any] = {}
  for klass in reversed(cls.__mro__):
    if not klass.__module__.startswith('mujoco_playground'):
      continue
    for name, value in vars(klass).items():
      # not __init__: load() constructs with the registry's class, then switches the class
      if isinstance(value, types.FunctionType) and not name.startswith('__'):
        methods[name] = _wrap(value, name)
  methods['__doc__'] = f'{cls.__name__} ({cls.__module__}) with jaxsim as its physics.'
  methods['physics'] = 'jaxsim'
  sub = type(f'Jaxsim{cls.__name__}', (cls,), methods)
  _SUBCLASSES[cls] = sub
  return sub


def menagerie_path() -> str:
  """Where Playground looks for MuJoCo Menagerie (its external_deps/mujoco_menagerie).

  Returns:
    the path (which may not exist: Playground then tries to git-clone it at first use).
  """
  from mujoco_playground._src import mjx_env

  return str(mjx_env.MENAGERIE_PATH)


def use_menagerie(path: str) -> None:
  """Points Playground at a MuJoCo Menagerie checkout (for its locomotion and manipulation
  environments), instead of the clone it makes in site-packages/external_deps at first use.

  Arguments:
    path: a folder holding Menagerie's robot folders (unitree_go1/, ...).
  Raises:
    FileNotFoundError: path is not a folder.
  """
  from etils import epath
  from mujoco_playground._src import mjx_env

  if not os.path.isdir(path):
    raise FileNotFoundError(f'MuJoCo Menagerie not found at {path}')
  mjx_env.MENAGERIE_PATH = epath.Path(path)


def load(env_name: str, config=None, config_overrides: dict[str, Any] | None = None):
  """The Playground registry's environment `env_name`, with jaxsim as its physics.

  Arguments:
    env_name: a name from mujoco_playground.registry.ALL_ENVS ('CartpoleBalance', 'CheetahRun',
      'Go1JoystickFlatTerrain', ...).
    config: an ml_collections ConfigDict, as registry.load takes; None: the registry's default.
      Its `impl` is set to 'jax' (jaxsim's engine).
    config_overrides: flattened overrides, as registry.load takes ({'episode_length': 500}).
  Returns:
    the environment: an instance of a subclass of the registry's class (see jaxsim_class); its
    `mjx_model` is a jaxsim.Model, its states' `data` jaxsim.Data. It works with
    mujoco_playground.wrapper.wrap_for_brax_training (with or without a randomization_fn, e.g.
    registry.get_domain_randomizer(env_name)) and Brax's PPO.
  Raises:
    ValueError: unknown env_name, or an impl other than 'jax' asked for in config_overrides.
    NotImplementedError: a model feature jaxsim does not simulate, or a vision environment.
  """
  from mujoco_playground import registry

  if env_name not in registry.ALL_ENVS:
    raise ValueError(f'unknown Playground environment {env_name!r}; see registry.ALL_ENVS')
  config = (config or registry.get_default_config(env_name)).copy_and_resolve_references()
  overrides = dict(config_overrides or {})
  impl = overrides.pop('impl', 'jax')
  if getattr(impl, 'value', impl) != 'jax':
    raise ValueError(f"jaxsim.playground runs impl='jax' (jaxsim's engine); got impl={impl!r}")
  if 'impl' in config:
    config.impl = 'jax'
  if config.get('vision', False) or overrides.get('vision', False):
    raise NotImplementedError(
      'jaxsim.playground: vision environments use MJX batch rendering, which jaxsim does not '
      'provide'
    )
  namespace = _Mjx()
  with _Physics(namespace):
    env = registry.load(env_name, config=config, config_overrides=overrides or None)
  # the registry constructs its own class (possibly through functools.partial); the instance
  # becomes one of the subclass whose methods run on jaxsim: same fields, same layout
  env.__dict__['_jaxsim_mjx'] = namespace
  env.__class__ = jaxsim_class(type(env))
  return env

"""Test configuration: float64 everywhere and cheap XLA compilation.

Nearly all of the suite's time is XLA compiling one program per model and stage, each then run a
few times, so the CPU backend's expensive optimisation passes are switched off (they change
speed, not results).

JAX's persistent compilation cache holds each worker's programs in a folder of its own (two xdist
workers writing one folder at once has aborted a worker, jax 0.10.2): a program compiled again
finds its executable there. That happens when the modules' caches are cleared (below) and when a
model is loaded again under other names or from another file (Model's static metadata is part of
jit's cache key, not of the program). JAXSIM_TEST_CACHE names a folder to keep between runs (one
subfolder per worker); JAXSIM_TEST_CACHE=off turns the cache off.
"""

import atexit
import os
import shutil
import tempfile

# hlo-verifier: XLA checks the whole module after every pass (12% of a step's compile time,
# finger: 24.5 -> 21.3 s); it checks XLA, not jaxsim
os.environ.setdefault(
  'XLA_FLAGS',
  '--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true '
  '--xla_disable_hlo_passes=hlo-verifier',
)

import jax  # noqa: E402

import jaxsim  # noqa: E402

# fast compilation, and MuJoCo's rounding: the suite compares near-ties with MuJoCo's release build
jaxsim.configure_cpu(fast_compile=True, mujoco_rounding=True)
jax.config.update('jax_enable_x64', True)


def _compilation_cache() -> None:
  """The worker's persistent compilation cache (see the module docstring)."""
  where = os.environ.get('JAXSIM_TEST_CACHE', '')
  if where == 'off':
    return
  worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
  if where:
    folder = os.path.join(where, worker)
  else:
    folder = tempfile.mkdtemp(prefix=f'jaxsim-xla-{worker}-')
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
  jax.config.update('jax_compilation_cache_dir', folder)
  # programs under 0.3 s are the eager ops' and small tests' (thousands); set_const's position
  # pass, which a reloaded model compiles again, takes 0.5-2 s
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.3)


_compilation_cache()


import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope='module', autouse=True)
def _release_compiled_programs():
  """Drops each module's compiled programs when it ends: they are not shared between modules,
  and a worker that keeps every program of the suite grows to many GiB."""
  yield
  jax.clear_caches()
  gc.collect()

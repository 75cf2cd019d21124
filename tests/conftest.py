"""Test configuration: float64 everywhere and cheap XLA compilation.

Nearly all of the suite's time is XLA compiling one program per model and stage, each then run a
few times, so the CPU backend's expensive optimisation passes are switched off (they change
speed, not results). JAX's persistent compilation cache is used only when JAXSIM_TEST_CACHE names
a folder: writing it from two xdist workers at once has aborted a worker (jax 0.10.2).
"""

import os

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
if os.environ.get('JAXSIM_TEST_CACHE'):
  jax.config.update('jax_compilation_cache_dir', os.environ['JAXSIM_TEST_CACHE'])
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 1.0)


import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope='module', autouse=True)
def _release_compiled_programs():
  """Drops each module's compiled programs when it ends: they are not shared between modules,
  and a worker that keeps every program of the suite grows to many GiB."""
  yield
  jax.clear_caches()
  gc.collect()

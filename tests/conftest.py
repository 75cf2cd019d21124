"""Test configuration: float64 everywhere, cheap XLA compilation, a persistent compilation cache.

Nearly all of the suite's time is XLA compiling one program per model and stage, each then run a
few times, so the CPU backend's expensive optimisation passes are switched off (they change
speed, not results). JAXSIM_TEST_CACHE overrides where compiled programs are cached.
"""

import os

os.environ.setdefault(
  'XLA_FLAGS', '--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true'
)

import jax  # noqa: E402

jax.config.update('jax_enable_x64', True)
_cache = os.environ.get('JAXSIM_TEST_CACHE', os.path.expanduser('~/.cache/jaxsim-tests-xla'))
jax.config.update('jax_compilation_cache_dir', _cache)
jax.config.update('jax_persistent_cache_min_compile_time_secs', 1.0)

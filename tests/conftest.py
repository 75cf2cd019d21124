"""Test configuration: float64 everywhere, a persistent compilation cache, shared model lists."""

import os

import jax

jax.config.update('jax_enable_x64', True)
jax.config.update('jax_compilation_cache_dir', os.path.expanduser('~/.cache/jaxsim-tests-xla'))
jax.config.update('jax_persistent_cache_min_compile_time_secs', 1.0)

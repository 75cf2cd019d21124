"""jaxsim's XLA CPU flags: `import jaxsim` adds only the one it needs (the deadlock workaround),
never the ISA cap or other settings that cost a user speed; those are opt-in
(`jaxsim.configure_cpu`), which the tests use. A user's own choice always wins."""

import importlib.util
import os
import subprocess
import sys

import pytest

from jaxsim._src import xla

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str, xla_flags: str | None = None) -> subprocess.CompletedProcess:
  env = {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}
  if xla_flags is not None:
    env['XLA_FLAGS'] = xla_flags
  return subprocess.run(
    [sys.executable, '-c', code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
  )


def test_import_adds_only_the_required_flag():
  out = _python("import os, jaxsim; print(os.environ['XLA_FLAGS'])")
  assert out.returncode == 0, out.stderr
  flags = out.stdout.split()
  assert flags == [f'--{k}={v}' for k, v in xla.REQUIRED_FLAGS.items()]
  assert not any('max_isa' in f for f in flags)


def test_tests_get_mujoco_rounding_and_fast_compile():
  """conftest opts in before JAX starts, so the suite rounds as MuJoCo's release build."""
  flags = os.environ['XLA_FLAGS'].split()
  for name, value in {**xla.MUJOCO_ROUNDING_FLAGS, **xla.FAST_COMPILE_FLAGS}.items():
    assert f'--{name}={value}' in flags


def test_user_choice_wins(monkeypatch):
  monkeypatch.setenv('XLA_FLAGS', '--xla_cpu_use_fusion_emitters=true --xla_dump_to=/tmp/x')
  monkeypatch.setattr(xla.xla_bridge, 'backends_are_initialized', lambda: False)
  assert xla.configure_cpu(fast_compile=True, mujoco_rounding=True)
  flags = os.environ['XLA_FLAGS'].split()
  assert '--xla_cpu_use_fusion_emitters=true' in flags  # the user's value wins
  assert '--xla_cpu_use_fusion_emitters=false' not in flags
  assert '--xla_dump_to=/tmp/x' in flags
  assert '--xla_cpu_max_isa=AVX' in flags


def test_too_late_is_told():
  """Flags that cannot apply any more (JAX's backend already up) are named in a warning."""
  code = (
    'import warnings, jax, jax.numpy as jnp; jnp.zeros(1).block_until_ready()\n'
    'import jaxsim\n'
    'with warnings.catch_warnings(record=True) as w:\n'
    '  warnings.simplefilter("always")\n'
    '  ok = jaxsim.configure_cpu(mujoco_rounding=True)\n'
    'print(ok, [str(x.message) for x in w])\n'
  )
  out = _python(code)
  assert out.returncode == 0, out.stderr
  assert out.stdout.startswith('False')
  assert 'xla_cpu_max_isa' in out.stdout
  # and `import jaxsim` after the first computation says its own flag came too late
  out = _python('import jax.numpy as jnp; jnp.zeros(1).block_until_ready(); import jaxsim')
  assert 'xla_cpu_enable_concurrency_optimized_scheduler' in out.stderr


@pytest.mark.parametrize('policy', ['same', 'default'])
def test_bench_gives_mjx_the_same_flags_or_only_the_required_one(policy):
  path = os.path.join(REPO, 'benchmarks', 'throughput.py')
  spec = importlib.util.spec_from_file_location('throughput', path)
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  flags = set(bench.xla_flags('--xla_dump_to=/tmp/x', policy).split())
  expected = xla.CPU_FLAGS if policy == 'same' else xla.REQUIRED_FLAGS
  assert flags == {'--xla_dump_to=/tmp/x'} | {f'--{k}={v}' for k, v in expected.items()}

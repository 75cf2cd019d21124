"""jaxsim's XLA CPU flags: added on import unless the user named them."""

import os

from jaxsim._src import xla as _xla


def test_flags_added_and_user_choice_kept(monkeypatch):
  monkeypatch.setenv('XLA_FLAGS', '--xla_cpu_use_fusion_emitters=true --xla_dump_to=/tmp/x')
  _xla.cpu_flags()
  flags = os.environ['XLA_FLAGS'].split()
  assert '--xla_cpu_use_fusion_emitters=true' in flags  # the user's value wins
  assert '--xla_cpu_use_fusion_emitters=false' not in flags
  assert '--xla_dump_to=/tmp/x' in flags
  assert '--xla_cpu_enable_concurrency_optimized_scheduler=false' in flags
  monkeypatch.delenv('XLA_FLAGS')
  _xla.cpu_flags()
  assert sorted(os.environ['XLA_FLAGS'].split()) == sorted(
    f'--{k}={v}' for k, v in _xla.CPU_FLAGS.items()
  )


def test_bench_gives_mjx_the_same_flags_or_only_the_scheduler_one():
  import importlib.util

  path = os.path.join(os.path.dirname(__file__), '..', 'benchmarks', 'throughput.py')
  spec = importlib.util.spec_from_file_location('throughput', path)
  bench = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(bench)
  same = bench._xla_flags('--xla_dump_to=/tmp/x', 'same').split()
  assert set(same) == {'--xla_dump_to=/tmp/x'} | {f'--{k}={v}' for k, v in _xla.CPU_FLAGS.items()}
  default = bench._xla_flags('', 'default').split()
  assert default == ['--xla_cpu_enable_concurrency_optimized_scheduler=false']

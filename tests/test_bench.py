"""Smoke test of the throughput benchmark (benchmarks/throughput.py) and `jaxsim bench`.

Runs the --quick mode in subprocesses and checks the outputs exist and parse; timings are not
asserted (the machine is shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.models import REPO

SCRIPT = os.path.join(REPO, 'benchmarks', 'throughput.py')


def _results(out, prog: str) -> list[dict]:
  with open(out / 'results.json') as f:
    doc = json.load(f)
  assert doc['command'].startswith(prog)
  return doc['results']


def test_quick_benchmark_writes_table_json_and_plot(tmp_path):
  out = tmp_path / 'bench'
  cmd = [sys.executable, SCRIPT, '--quick', '--engines', 'jaxsim', 'mujoco', '--out', str(out)]
  r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr
  results = _results(out, 'python benchmarks/throughput.py --quick')
  assert {(x['engine'], x['batch']) for x in results} == {
    (e, b) for e in ('jaxsim', 'mujoco') for b in (1, 8)
  }
  for x in results:
    assert x['status'] == 'ok', x
    assert x['steps_per_s'] > 0 and x['nan'] is False
    assert x['settings']['solver'] == 'Newton' and x['settings']['timestep'] == 0.002
  jax_runs = [x for x in results if x['engine'] == 'jaxsim']
  assert all(x['settings']['dtype'] == 'float32' and x['compile_s'] > 0 for x in jax_runs)
  assert all(x['xla_bytes'] > 0 for x in jax_runs)
  table = (out / 'results.md').read_text()
  assert '| pendulum | 8 |' in table and 'jaxsim/MJX' in table
  assert (out / 'throughput.png').stat().st_size > 1000


def test_cli_bench_runs_the_benchmark(tmp_path):
  out = tmp_path / 'cli'
  cmd = [sys.executable, '-m', 'jaxsim', 'bench', '--quick', '--batch', '2', '--engines', 'mujoco']
  r = subprocess.run(cmd + ['--out', str(out)], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr
  (x,) = _results(out, 'jaxsim bench --quick')
  assert x['engine'] == 'mujoco' and x['batch'] == 2 and x['status'] == 'ok'
  assert '| pendulum | 2 |' in r.stdout


def test_humanoid_copies_scale_the_model():
  import runpy

  import jaxsim

  bench = os.path.join(REPO, 'models', 'bench')
  copies_xml = runpy.run_path(os.path.join(bench, 'humanoid_copies.py'))['copies_xml']

  one = jaxsim.load(os.path.join(bench, 'humanoid_rig.xml'))
  three = jaxsim.load_string(copies_xml(3))
  assert (three.nv, three.nu, three.nbody) == (3 * one.nv, 3 * one.nu, 3 * (one.nbody - 1) + 1)
  # copies touch the floor and themselves as the source does, never each other
  assert three.nconmax == 3 * one.nconmax

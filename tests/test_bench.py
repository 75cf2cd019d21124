"""Smoke test of the benchmarks (benchmarks/throughput.py, gpu.py) and `jaxsim bench`.

Runs the --quick mode in subprocesses and checks the outputs exist and parse; timings are not
asserted (the machine is shared). The in-contact start states and the HLO kernel count are
checked on small cases of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.models import REPO

SCRIPT = os.path.join(REPO, 'benchmarks', 'throughput.py')
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

FALLING = """<mujoco><worldbody><geom type="plane" size="5 5 .1"/>
  <body pos="0 0 .3"><freejoint/><geom type="capsule" size=".05 .1"/></body>
  <body pos=".5 0 .15"><joint name="lift" type="slide" axis="0 0 1"/>
    <geom type="box" size=".1 .1 .1"/></body>
</worldbody><actuator><motor joint="lift" ctrlrange="-5 5"/></actuator></mujoco>"""


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
  for x in results:
    # every engine starts from the same C MuJoCo states (100 steps with random controls)
    assert x['states'] == results[0]['states'] or x['batch'] != results[0]['batch']
    assert x['start']['ncon_mean'] >= 0
  for x in jax_runs:
    trips = x['trips']['niter']
    assert trips['max'] >= trips['batched'] >= trips['world'] >= 0
    assert x['hlo']['kernels'] > x['hlo']['loop_kernels'] >= 0 and x['hlo']['fusions'] > 0
  table = (out / 'results.md').read_text()
  assert '| pendulum | 8 |' in table and 'jaxsim/MJX' in table and 'jaxsim trips' in table
  assert (out / 'throughput.png').stat().st_size > 1000
  assert 'pendulum batch 8: jaxsim' in r.stdout and 'x C MuJoCo 1 thread' in r.stdout


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


def test_contact_states_touch_the_floor_and_differ_per_world(tmp_path):
  import numpy as np
  from _states import cached_states, contact_states

  path = tmp_path / 'falling.xml'
  path.write_text(FALLING)
  s = contact_states(str(path), 5, steps=100, seed=1)
  # both bodies fall 0.05 m or less, in under the 0.2 s simulated: every world ends on the floor
  assert (s['ncon'] >= 2).all() and s['qpos'].shape == (5, 8) and s['physics'].shape[0] == 5
  # random controls (and qvel) differ per world; the first worlds do not depend on the batch
  assert len(np.unique(s['qpos'][:, 0])) == 5
  again = contact_states(str(path), 2, steps=100, seed=1)
  np.testing.assert_array_equal(again['physics'], s['physics'][:2])
  rest = contact_states(str(path), 2, steps=0)
  assert (rest['ncon'] == 0).all()
  file = cached_states(str(path), 2, str(tmp_path / 'states'), steps=100, seed=1)
  with np.load(file) as f:
    np.testing.assert_array_equal(f['physics'], s['physics'][:2])


def test_trip_stats_batched_is_the_slowest_world_per_step():
  from throughput import trip_stats

  # two steps of three worlds: the batched loop runs 6 then 3 trips, the worlds 3 on average
  assert trip_stats([[1, 2, 6], [3, 3, 3]]) == {'batched': 4.5, 'world': 3.0, 'max': 6}


def test_hlo_kernels_counts_loop_bodies_once():
  import jax
  import jax.numpy as jnp
  from throughput import hlo_kernels

  def f(x):
    y = jnp.sin(x) @ x.T
    return jax.lax.while_loop(
      lambda c: c[0] < 10, lambda c: (c[0] + 1, jnp.cos(c[1]) @ c[1]), (0, y)
    )

  text = jax.jit(f).lower(jnp.ones((8, 8))).compile().as_text()
  h = hlo_kernels(text)
  assert h['loops'] == 1 and h['kernels'] > h['loop_kernels'] >= 2


def test_gpu_benchmark_prints_its_table_when_an_engine_fails(tmp_path):
  # without mujoco-mjx in this Python the MJX rows fail and the table still comes out
  script = os.path.join(REPO, 'benchmarks', 'gpu.py')
  cmd = [sys.executable, script, '--humanoid-batches', '--models', 'pendulum', '--budget', '300']
  env = dict(os.environ, JAXSIM_GPU_SHRINK='1024')
  r = subprocess.run(
    cmd + ['--min-time', '0.1', '--out', str(tmp_path)], capture_output=True, text=True, env=env
  )
  assert r.returncode == 0, r.stderr
  with open(tmp_path / 'gpu.json') as f:
    results = {x['engine']: x for x in json.load(f)['results']}
  assert results['jaxsim']['status'] == 'ok' and results['jaxsim']['batch'] == 4
  assert '| pendulum | 4 |' in r.stdout and 'JAXSIM_GPU_SHRINK=1024' in r.stdout

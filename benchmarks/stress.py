"""First-call stress test: jit(vmap(f)) for f in forward, step, inverse (and rollout) at several
batch sizes on the CPU backend, each in a fresh subprocess with a timeout, many times. Counts hangs.

A hang is a run that passes its timeout; its CPU time says whether it was parked (jaxlib 0.10.2's
LAPACK deadlock: every thread waiting, no CPU used; see jaxsim/_src/xla.py) or merely slow on a
shared CPU. The worlds start from in-contact states: C MuJoCo steps the model 100 times with random
controls from 16 seeds, and the batch cycles through those 16 states.

Compiled programs go to a persistent compilation cache (--cache), so that only the first run of
each (function, batch) compiles; the later ones load it and run its first call, which is where
the deadlock was seen.

  python benchmarks/stress.py --runs 5                       # the full form, about an hour
  python benchmarks/stress.py --batch 1024 --functions forward --runs 3 --unfixed   # the bug
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTIONS = ('forward', 'step', 'inverse', 'rollout')
BATCHES = (1, 7, 64, 1024, 4096)


def model_path(name: str) -> str:
  """A dm_control suite model by name, else a path."""
  if os.path.exists(name):
    return name
  import dm_control

  return os.path.join(os.path.dirname(dm_control.__file__), 'suite', f'{name}.xml')


def contact_states(path: str, n: int, steps: int = 100, seeds: int = 16):
  """(qpos, qvel) of n worlds cycling through `seeds` states C MuJoCo reached after `steps` steps
  of uniform random controls over the control range."""
  import mujoco
  import numpy as np

  mm = mujoco.MjModel.from_xml_path(path)
  md = mujoco.MjData(mm)
  lo, hi = mm.actuator_ctrlrange.T if mm.nu else (np.zeros(0), np.zeros(0))
  lo, hi = (
    np.where(mm.actuator_ctrllimited > 0, lo, -1.0),
    np.where(mm.actuator_ctrllimited > 0, hi, 1.0),
  )
  qpos, qvel = [], []
  for seed in range(min(n, seeds)):
    rng = np.random.default_rng(seed)
    mujoco.mj_resetData(mm, md)
    for _ in range(steps):
      md.ctrl[:] = rng.uniform(lo, hi)
      mujoco.mj_step(mm, md)
    qpos.append(md.qpos.copy())
    qvel.append(md.qvel.copy())
  idx = np.arange(n) % len(qpos)
  return np.array(qpos)[idx], np.array(qvel)[idx]


def worker(fn: str, batch: int, model: str, cache: str | None) -> None:
  """One first call of jit(vmap(fn)) at `batch`; prints a JSON line with its times."""
  import jax
  import jax.numpy as jnp
  import numpy as np

  import jaxsim

  if cache:
    jax.config.update('jax_compilation_cache_dir', cache)
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
    jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)
  path = model_path(model)
  m = jaxsim.load(path)
  d0 = jaxsim.make_data(m)
  qpos, qvel = contact_states(path, batch)
  d = jax.vmap(lambda p, v: d0.replace(qpos=p, qvel=v))(
    jnp.asarray(qpos, d0.qpos.dtype), jnp.asarray(qvel, d0.qvel.dtype)
  )
  if fn == 'inverse':
    d = jax.jit(jax.vmap(jaxsim.forward, in_axes=(None, 0)))(m, d)
  if fn == 'rollout':
    ctrl = jnp.zeros((batch, 10, m.nu), d0.qpos.dtype)
    f = jax.jit(lambda d, c: jaxsim.rollout(m, d, c, record=('qpos',)))
    args = (d, ctrl)
  else:
    f = jax.jit(jax.vmap(getattr(jaxsim, fn), in_axes=(None, 0)))
    args = (m, d)
  t0 = time.perf_counter()
  compiled = f.lower(*args).compile()
  t1, c1 = time.perf_counter(), time.process_time()
  out = compiled(*args)
  jax.block_until_ready(out)
  t2, c2 = time.perf_counter(), time.process_time()
  finite = all(
    bool(np.all(np.isfinite(x))) for x in jax.tree_util.tree_leaves(out) if x.dtype.kind == 'f'
  )
  print(
    json.dumps({'compile_s': t1 - t0, 'call_s': t2 - t1, 'call_cpu_s': c2 - c1, 'finite': finite})
  )


def cpu_seconds(pid: int) -> float:
  """User + system CPU time of a live process, from /proc (Linux); NaN where unreadable."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
  except (OSError, IndexError, ValueError):
    return float('nan')


def run_one(fn: str, batch: int, model: str, timeout: float, cache: str | None, unfixed: bool):
  """One worker subprocess; returns (status, details)."""
  env = dict(os.environ)
  env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
  if unfixed:
    # a user's own pool size wins over jaxsim's workaround: the CPU count, XLA's default
    env['PJRT_NPROC'] = str(os.cpu_count())
  cmd = [sys.executable, __file__, '--worker', fn, str(batch), model]
  if cache:
    cmd += ['--cache', cache]
  p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
  t0 = time.perf_counter()
  try:
    out, err = p.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    cpu = cpu_seconds(p.pid)
    p.kill()
    p.communicate()
    return 'hang', {'wall_s': time.perf_counter() - t0, 'cpu_s': cpu}
  if p.returncode:
    return 'error', {'rc': p.returncode, 'stderr': err.strip().splitlines()[-3:]}
  return 'ok', json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument('--model', default='humanoid', help='dm_control suite name or XML path')
  parser.add_argument('--functions', nargs='+', default=list(FUNCTIONS), choices=FUNCTIONS)
  parser.add_argument('--batch', nargs='+', type=int, default=list(BATCHES))
  parser.add_argument('--runs', type=int, default=5, help='fresh processes per (function, batch)')
  parser.add_argument('--timeout', type=float, default=900, help='seconds per run (compile too)')
  parser.add_argument('--cache', default='/tmp/jaxsim_stress_cache', help="'' for none")
  parser.add_argument('--unfixed', action='store_true', help="XLA's default pool size (the bug)")
  parser.add_argument('--worker', nargs=3, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    fn, batch, model = args.worker
    worker(fn, int(batch), model, args.cache or None)
    return 0
  totals = {'ok': 0, 'hang': 0, 'error': 0}
  for fn in args.functions:
    for batch in args.batch:
      for run in range(args.runs):
        status, info = run_one(
          fn, batch, args.model, args.timeout, args.cache or None, args.unfixed
        )
        totals[status] += 1
        print(
          f'{args.model} {fn:8s} batch {batch:5d} run {run}: {status} {json.dumps(info)}',
          flush=True,
        )
  print(
    f'{sum(totals.values())} runs: {totals["ok"]} ok, {totals["hang"]} hangs, '
    f'{totals["error"]} errors'
  )
  return 0 if totals['hang'] == totals['error'] == 0 else 1


if __name__ == '__main__':
  sys.exit(main())

"""GPU benchmark: jaxsim and MJX (impl jax) from in-contact states on one GPU, within a time budget.

  bash benchmarks/gpu.sh [--budget 500] [--models humanoid cheetah ...] [--parallel 3]

Cases, in this order: the dm_control humanoid at batch 1024, 8192 and 32768, then every
dm_control suite model at batch 4096, each for jaxsim and for MJX. Every world starts from a state
after 100 C MuJoCo steps with random controls (benchmarks/_states.py, made here with all cores),
the same for both engines. Each (engine, model, batch) runs in a worker process of
benchmarks/throughput.py: up to --parallel workers compile at once, and a lock lets one at a time
run on the GPU, so timings do not overlap. Each worker gets at most --case-timeout seconds; a case
that cannot finish before the budget runs out is not started, a running one is stopped at the
budget's end, and the table is printed in every case (with the reason for each missing figure).

Output: a Markdown table (steps/s, ratio, compile s, memory per world, Newton trips per step
batched/per-world, kernels and loops of one compiled step) with the card, date and command, also
written with the JSON to --out and, on the device machine, to $OUT.

Environment: JAXSIM_GPU_SHRINK=N divides every batch size by N (at least 1), to try the script on
a CPU; JAXSIM_GPU_MODELS='cartpole hopper' keeps those suite models only; JAXSIM_SUITE_DIR is the
folder of the suite's XML files where dm_control is not installed (gpu.sh sets it).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _states import cached_states, suite_names, summary  # noqa: E402
from throughput import (  # noqa: E402
  HERE,
  RESULT_TAG,
  failed_lines,
  gpu_table,
  resolve_model,
)

HUMANOID_BATCHES = (1024, 8192, 32768)
SUITE_BATCH = 4096
ENGINES = ('jaxsim', 'mjx')


def parse_args(argv: list[str] | None) -> argparse.Namespace:
  p = argparse.ArgumentParser(
    prog='benchmarks/gpu.sh',
    description=__doc__.splitlines()[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  p.add_argument('--budget', type=float, default=500, help='seconds for the whole benchmark')
  p.add_argument('--case-timeout', type=float, default=240, help='seconds per worker at most')
  p.add_argument('--parallel', type=int, default=4, help='workers compiling at once')
  p.add_argument(
    '--models', nargs='*', help='suite models (default: all 19, or $JAXSIM_GPU_MODELS)'
  )
  p.add_argument('--no-suite', action='store_true', help='the humanoid batches alone')
  p.add_argument(
    '--humanoid-batches',
    type=int,
    nargs='*',
    default=list(HUMANOID_BATCHES),
    help="the humanoid's batch sizes (none: no humanoid row)",
  )
  p.add_argument('--engines', nargs='+', choices=ENGINES, default=list(ENGINES))
  p.add_argument('--min-time', type=float, default=1.5, help='timed seconds per case')
  p.add_argument('--max-gb', type=float, default=20.0, help='skip programs that need more')
  p.add_argument('--warmup-steps', type=int, default=100)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--out', default=os.path.join(os.path.dirname(HERE), 'out', 'gpu'))
  return p.parse_args(argv)


def plan_cases(args) -> list[tuple[str, int]]:
  """(model, batch) in the order they run: the humanoid batches first, then the suite."""
  shrink = max(1, int(os.environ.get('JAXSIM_GPU_SHRINK', '1')))
  cases = [('humanoid', max(1, b // shrink)) for b in args.humanoid_batches]
  if not args.no_suite:
    models = args.models or os.environ.get('JAXSIM_GPU_MODELS', '').split() or suite_names()
    cases += [(m, max(1, SUITE_BATCH // shrink)) for m in models]
  return list(dict.fromkeys(cases))


def _spec(args, engine: str, label: str, path: str, batch: int, start: dict, lock: str) -> dict:
  return {
    **start,
    'engine': engine,
    'table': 'main',
    'label': label,
    'model': path,
    'batch': batch,
    'copies': None,
    # one step per call: a GPU step takes milliseconds, and the timed program is then also the
    # one whose kernels are counted (no second compile)
    'chunk': 1,
    'dtype': 'float32',
    'overrides': {'iterations': None, 'ls_iterations': None, 'solver': None, 'cone': None},
    'sensors': False,
    'stage': 'step',
    'seed': args.seed,
    'min_time': args.min_time,
    'min_calls': 2,
    'max_calls': 100000,
    'ctrl_pool': 4,
    'threads': os.cpu_count(),
    'max_bytes': int(args.max_gb * 2**30),
    'lock': lock,
    'kernels': True,
  }


class Worker:
  """One throughput.py worker process with its own deadline."""

  def __init__(self, spec: dict, deadline: float, logs: str):
    self.spec, self.deadline, self.t0 = spec, deadline, time.perf_counter()
    # several processes share the GPU: none takes JAX's default 75% of its memory up front
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE='false')
    cmd = [sys.executable, os.path.join(HERE, 'throughput.py'), '--worker', json.dumps(spec)]
    name = f'{spec["label"]}-{spec["batch"]}-{spec["engine"]}'
    # files, not pipes: a chatty worker never blocks on a full pipe
    self.stdout = open(os.path.join(logs, name + '.out'), 'w+')  # noqa: SIM115 (closed in _done)
    self.stderr = open(os.path.join(logs, name + '.err'), 'w+')  # noqa: SIM115 (closed in _done)
    self.proc = subprocess.Popen(
      cmd, stdout=self.stdout, stderr=self.stderr, text=True, env=env, start_new_session=True
    )

  def poll(self) -> dict | None:
    """The result once the process ended or was stopped at its deadline, else None."""
    if self.proc.poll() is None:
      if time.perf_counter() < self.deadline:
        return None
      os.killpg(self.proc.pid, signal.SIGKILL)
      self.proc.wait()
      return self._done({'status': 'no result', 'reason': 'stopped at the time budget'})
    self.stdout.seek(0)
    self.stderr.seek(0)
    stdout, stderr = self.stdout.read(), self.stderr.read()
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if lines:
      return self._done(json.loads(lines[-1][len(RESULT_TAG) :]))
    tail = ' | '.join((stderr or stdout).strip().splitlines()[-3:])
    return self._done({'status': 'error', 'reason': f'exit {self.proc.returncode}: {tail}'})

  def _done(self, out: dict) -> dict:
    self.stdout.close()
    self.stderr.close()
    out = {**self.spec, **out}
    out['wall_s'] = time.perf_counter() - self.t0
    return out


def _probe() -> dict:
  code = (
    'import jax, json; d = jax.local_devices()[0]; print(json.dumps({"platform": d.platform, '
    '"device": getattr(d, "device_kind", d.platform), "jax": jax.__version__}))'
  )
  try:
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    return json.loads(r.stdout.strip().splitlines()[-1])
  except Exception as e:  # the table is printed whatever happens
    return {'platform': '?', 'device': f'probe failed: {e!r}', 'jax': '?'}


def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  t_start = time.perf_counter()
  deadline = t_start + args.budget
  started = datetime.datetime.now().astimezone()
  command = ' '.join(['bash benchmarks/gpu.sh', *(sys.argv[1:] if argv is None else argv)])
  shrink = os.environ.get('JAXSIM_GPU_SHRINK')
  if shrink:
    command = f'JAXSIM_GPU_SHRINK={shrink} {command}'
  os.makedirs(args.out, exist_ok=True)
  probe = _probe()
  try:
    import mujoco

    mj_version = mujoco.__version__
  except ImportError:
    mj_version = 'not installed'
  print(
    f'gpu benchmark {started:%Y-%m-%d %H:%M %Z} on {platform.node()}: {probe.get("device")} '
    f'({probe.get("platform")}), jax {probe.get("jax")}, mujoco {mj_version}, '
    f'budget {args.budget:.0f} s',
    flush=True,
  )
  lock = os.path.join(args.out, 'device.lock')
  logs = os.path.join(args.out, 'logs')
  os.makedirs(logs, exist_ok=True)
  states_dir = os.path.join('/tmp', 'jaxsim-gpu-states')
  pending = []
  for name, batch in plan_cases(args):
    for engine in args.engines:
      pending.append((engine, name, batch))
  results: list[dict] = []
  running: list[Worker] = []
  starts: dict[tuple[str, int], dict] = {}
  while pending or running:
    for w in list(running):
      r = w.poll()
      if r is not None:
        running.remove(w)
        results.append(r)
        rate = f'{r["steps_per_s"]:,.0f} steps/s' if r.get('status') == 'ok' else r.get('status')
        why = f' ({r.get("reason")})' if r.get('status') != 'ok' else ''
        comp = f', compile {r["compile_s"]:.1f} s' if r.get('compile_s') else ''
        print(f'  {r["label"]} batch {r["batch"]} {r["engine"]}: {rate}{comp}{why}', flush=True)
    left = deadline - time.perf_counter()
    while pending and len(running) < args.parallel and left > 20:
      engine, name, batch = pending.pop(0)
      try:
        label, path = resolve_model(name)
        if (name, batch) not in starts:
          start = {}
          if args.warmup_steps:
            states = cached_states(path, batch, states_dir, args.warmup_steps, args.seed)
            with np.load(states) as f:
              start = {'states': states, 'start': summary(f)}
          starts[(name, batch)] = start
      except (Exception, SystemExit) as e:  # a model that cannot be set up is reported
        results.append(
          {'engine': engine, 'label': name, 'batch': batch, 'status': 'error', 'reason': repr(e)}
        )
        continue
      left = deadline - time.perf_counter()
      spec = _spec(args, engine, label, path, batch, starts[(name, batch)], lock)
      running.append(Worker(spec, time.perf_counter() + min(args.case_timeout, left), logs))
    if pending and not running and left <= 20:
      break
    time.sleep(0.2)
  for engine, name, batch in pending:
    results.append(
      {
        'engine': engine,
        'label': name,
        'batch': batch,
        'status': 'skipped',
        'reason': 'time budget spent',
      }
    )
  order = {key: i for i, key in enumerate(dict.fromkeys((r['label'], r['batch']) for r in results))}
  results.sort(key=lambda r: order[(r['label'], r['batch'])])
  elapsed = time.perf_counter() - t_start
  lines = [
    f'## GPU benchmark: {probe.get("device")}, {started:%Y-%m-%d %H:%M %Z}',
    '',
    f'`{command}` ({elapsed:.0f} s of a {args.budget:.0f} s budget)',
    '',
    f'{probe.get("device")} ({probe.get("platform")}), jax {probe.get("jax")}, mujoco '
    f"{mj_version} (MJX impl jax), float32, each model's own solver settings, sensors off. "
    f'Worlds start after {args.warmup_steps} C MuJoCo steps with random controls; contacts: '
    'their mean active contacts (C MuJoCo) and the share of worlds touching. steps/s: '
    'world-steps per second; trips: Newton iterations per step, batched (max over worlds) / '
    'per-world mean; kernels: launching HLO instructions of one compiled step (in loops) / '
    'while loops (benchmarks/throughput.py hlo_kernels); mem/world: the compiled program over '
    'the batch.',
    '',
    gpu_table(results),
  ]
  md = '\n'.join(lines + failed_lines(results)) + '\n'
  doc = {'command': command, 'started': started.isoformat(), 'probe': probe, 'results': results}
  folders = [args.out] + ([os.environ['OUT']] if os.environ.get('OUT') else [])
  for folder in folders:
    with open(os.path.join(folder, 'gpu.md'), 'w') as f:
      f.write(md)
    with open(os.path.join(folder, 'gpu.json'), 'w') as f:
      json.dump(doc, f, indent=1)
  print()
  print(md, flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())

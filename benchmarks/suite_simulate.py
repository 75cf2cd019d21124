"""Every dm_control suite model through `jaxsim simulate`'s loop: compile s, steps/s, NaN, warnings.

For each model: a batch of worlds (initial qvel perturbed, as `jaxsim simulate` does) stepped
`--steps` times with random controls (uniform in ctrlrange, or in [-1, 1] where unlimited) by a
jitted, vmapped `jaxsim.rollout` in chunks, recording qpos, qvel, time and the warning counters
after every step. Reported per model: compile seconds of one chunk, steps/s (worlds x steps per
second of wall time, compile excluded), whether any recorded qpos/qvel is non-finite (and the
first such step), the divergence resets (a world's time going back: jaxsim.check reset it) with
the first step one happened, and the warning counters summed over worlds at the end. A model
jaxsim cannot simulate yet reports the error it raised, by name.

Each model runs in its own subprocess, one after the other, so one model's failure or memory
does not affect the others' numbers.

  python benchmarks/suite_simulate.py [--batch 16] [--steps 1000] [--float64] [--no-autoreset]
                                      [--models cheetah walker ...] [--json results.json]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

WARNINGS = ('INERTIA', 'CONTACTFULL', 'CNSTRFULL', 'BADQPOS', 'BADQVEL', 'BADQACC', 'BADCTRL')


def suite_models() -> dict[str, str]:
  """Name -> path of every dm_control suite XML."""
  import dm_control

  suite = os.path.join(os.path.dirname(dm_control.__file__), 'suite')
  paths = sorted(glob.glob(os.path.join(suite, '*.xml')))
  return {os.path.splitext(os.path.basename(p))[0]: p for p in paths}


def run_one(path: str, args: argparse.Namespace) -> dict:
  """Simulates one model as `jaxsim simulate` does; returns the measured figures."""
  import jax

  if args.float64:
    jax.config.update('jax_enable_x64', True)
  import jax.numpy as jnp
  import numpy as np

  import jaxsim

  out: dict = {'model': os.path.splitext(os.path.basename(path))[0]}
  t0 = time.perf_counter()
  m = jaxsim.load(path)
  out['load_s'] = time.perf_counter() - t0
  if args.no_autoreset:
    m = jaxsim.with_options(m, disableflags=m.opt.disableflags | jaxsim.DisableBit.AUTORESET)
  out.update(nq=m.nq, nv=m.nv, nu=m.nu)
  batch, steps = args.batch, args.steps
  chunk = max(1, min(args.chunk, steps))
  rng = np.random.default_rng(args.seed)
  d0 = jaxsim.make_data(m)
  out['ncon_slots'] = int(d0.contact.dist.shape[0])
  out['nefc_rows'] = int(d0.efc_J.shape[0])
  dtype = d0.qvel.dtype
  qvel = rng.normal(size=(batch, m.nv)) * args.qvel_noise
  data = jax.vmap(lambda v: d0.replace(qvel=v))(jnp.asarray(qvel, dtype))
  if m.nu:
    lo, hi = np.asarray(m.actuator_ctrlrange).T
    limited = np.asarray(m.actuator_ctrllimited, bool) & (hi > lo)
    lo, hi = np.where(limited, lo, -1.0), np.where(limited, hi, 1.0)
  else:
    lo = hi = np.zeros(0)

  def ctrls():
    return jnp.asarray(rng.uniform(lo, hi, size=(batch, chunk, m.nu)), dtype)

  record = ('qpos', 'qvel', 'time', 'warning')
  fn = jax.jit(lambda d, c: jaxsim.rollout(m, d, c, record=record))
  t0 = time.perf_counter()
  try:
    compiled = fn.lower(data, ctrls()).compile()
  except NotImplementedError as e:
    out['error'] = f'NotImplementedError: {e}'
    return out
  out['compile_s'] = time.perf_counter() - t0

  done, run_s = 0, 0.0
  first_nan = first_reset = None
  resets = 0
  prev_time = np.asarray(data.time)
  while done < steps:
    n = min(chunk, steps - done)
    c = ctrls()
    t0 = time.perf_counter()
    data, traj = compiled(data, c)
    jax.block_until_ready(data)
    run_s += time.perf_counter() - t0
    traj = {k: np.asarray(v)[:, :n] for k, v in traj.items()}
    bad = ~(np.isfinite(traj['qpos']).all(-1) & np.isfinite(traj['qvel']).all(-1))  # (B, n)
    if first_nan is None and bad.any():
      first_nan = done + int(np.flatnonzero(bad.any(0))[0]) + 1
    t = np.concatenate([prev_time[:, None], traj['time']], axis=1)
    back = t[:, 1:] <= t[:, :-1]  # (B, n): a reset sent the world's clock back
    resets += int(back.sum())
    if first_reset is None and back.any():
      first_reset = done + int(np.flatnonzero(back.any(0))[0]) + 1
    prev_time = traj['time'][:, -1]
    done += n
  warning = np.asarray(data.warning).sum(0)
  out.update(
    steps_per_s=batch * steps / run_s,
    run_s=run_s,
    nan=first_nan is not None,
    first_nan_step=first_nan,
    resets=resets,
    first_reset_step=first_reset,
    warnings={name: int(w) for name, w in zip(WARNINGS, warning, strict=False) if w},
    final_time=float(np.asarray(data.time)[0]),
  )
  return out


def table(results: list[dict], args: argparse.Namespace) -> str:
  """Markdown table of the results."""
  dtype = 'float64' if args.float64 else 'float32'
  lines = [
    f'batch {args.batch}, {args.steps} steps, {dtype}, autoreset '
    f'{"off" if args.no_autoreset else "on"}',
    '',
    '| model | nv | contact slots | efc rows | compile s | steps/s | NaN (first step) | resets '
    '(first step) | warnings | error |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ]
  for r in results:
    if 'compile_s' not in r or 'steps_per_s' not in r:
      err = r.get('error', 'no result').replace('|', '/').replace('\n', ' ')
      lines.append(
        f'| {r["model"]} | {r.get("nv", "")} | {r.get("ncon_slots", "")} | '
        f'{r.get("nefc_rows", "")} | {r.get("compile_s", 0):.1f} | | | | | {err[:200]} |'
      )
      continue
    nan = f'yes ({r["first_nan_step"]})' if r['nan'] else 'no'
    reset = f'{r["resets"]} ({r["first_reset_step"]})' if r['resets'] else '0'
    warn = ', '.join(f'{k} {v}' for k, v in r['warnings'].items()) or 'none'
    lines.append(
      f'| {r["model"]} | {r["nv"]} | {r["ncon_slots"]} | {r["nefc_rows"]} | '
      f'{r["compile_s"]:.1f} | {r["steps_per_s"]:,.0f} | {nan} | {reset} | {warn} | |'
    )
  return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--models', nargs='*', help='suite model names (default: all)')
  parser.add_argument('--batch', type=int, default=16)
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument('--chunk', type=int, default=100, help='steps per jitted call')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--qvel-noise', type=float, default=0.1)
  parser.add_argument('--float64', action='store_true')
  parser.add_argument(
    '--no-autoreset', action='store_true', help='keep diverged worlds as they are'
  )
  parser.add_argument('--timeout', type=float, default=3600, help='seconds per model')
  parser.add_argument('--json', help='write the results to this file')
  parser.add_argument('--worker', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)

  if args.worker:
    print('RESULT ' + json.dumps(run_one(args.worker, args)), flush=True)
    return 0

  models = suite_models()
  names = args.models or sorted(models)
  unknown = sorted(set(names) - set(models))
  if unknown:
    parser.error(f'unknown suite models: {unknown}')
  results = []
  for name in names:
    cmd = [sys.executable, os.path.abspath(__file__), '--worker', models[name]]
    cmd += ['--batch', str(args.batch), '--steps', str(args.steps), '--chunk', str(args.chunk)]
    cmd += ['--seed', str(args.seed), '--qvel-noise', str(args.qvel_noise)]
    cmd += ['--float64'] * args.float64 + ['--no-autoreset'] * args.no_autoreset
    t0 = time.perf_counter()
    try:
      p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
      lines = [ln for ln in p.stdout.splitlines() if ln.startswith('RESULT ')]
      if lines:
        r = json.loads(lines[-1][len('RESULT ') :])
      else:
        tail = (p.stderr.strip().splitlines() or ['no output'])[-1]
        r = {'model': name, 'error': f'exit {p.returncode}: {tail}'}
    except subprocess.TimeoutExpired:
      r = {'model': name, 'error': f'timed out after {args.timeout:.0f} s'}
    r['wall_s'] = time.perf_counter() - t0
    results.append(r)
    print(json.dumps(r), file=sys.stderr, flush=True)
    if args.json:
      with open(args.json, 'w') as f:
        json.dump(results, f, indent=1)
  print(table(results, args))
  return 0


if __name__ == '__main__':
  sys.exit(main())

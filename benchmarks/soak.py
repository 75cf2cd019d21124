"""Soak test: long float32 runs of random controls; NaN, divergence resets, contact overflows and
max |qvel| counted per model, with C MuJoCo (float64) on the same controls for some of the worlds.

Controls are smooth noise over the full control range: per actuator an Ornstein-Uhlenbeck
process z (correlation time --tau seconds, unit variance) mapped by mid + half * tanh(1.5 z), so
that the range is covered, its ends included. Worlds start at qpos0 with qvel ~ N(0, 0.1^2).

Counts per model (jaxsim over all worlds; MuJoCo over the first --mujoco-worlds worlds, the same
initial states and controls):
  nan       world-steps whose qpos or qvel held a NaN after the step (jaxsim resets a bad world,
            so this stays 0 unless a check misses one)
  resets    world-steps ending in a reset (mj_checkPos/Vel/Acc: time set back to 0)
  overflow  world-steps whose step dropped contacts (mjWARN_CONTACTFULL) or rows (CNSTRFULL)
  max|qvel| the largest |qvel| seen
  energy    where the model enables energy (<flag energy="enable">): mean over worlds of the
            largest |E(t) - E(0)| over the run, relative to |E(0)| + 1 (random controls do work,
            so it is a bound on drift, not drift itself)

  python benchmarks/soak.py                                   # the full run (hours on a CPU)
  python benchmarks/soak.py --models hopper cartpole --batch 16 --steps 500 --mujoco-worlds 4
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim
from jaxsim._src.enums import EnableBit, WarningType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _states beside this file
from _states import suite_dir  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Menagerie itself is not part of this checkout or its environment (no network here); these
# Menagerie-class robots ship with dm_control (paths under its package). As shipped, rodent, the
# CMU humanoid and the ant are fixed at the root with no floor (dm_control's walker code adds the
# free joint and the arena): they flail with their self-collisions; the fruit fly stands on a
# floor. Pass other XML paths to --models to include them.
ROBOTS = (
  'locomotion/walkers/assets/rodent.xml',
  'locomotion/walkers/assets/humanoid_CMU_V2020.xml',
  'locomotion/walkers/assets/fruitfly_v2/floor.xml',
  'third_party/ant/ant.xml',
)


def dm_control_dir() -> str | None:
  """dm_control's package folder (ROBOTS are under it), None where it is not installed."""
  try:
    import dm_control
  except ImportError:
    return None
  return os.path.dirname(dm_control.__file__)


def default_models() -> list[str]:
  """Every dm_control suite XML ($JAXSIM_SUITE_DIR where dm_control is absent, as on the GPU
  machine: benchmarks/gpu.sh), every complete model in models/, and the ROBOTS found."""
  folder = suite_dir()
  suite = sorted(glob.glob(os.path.join(folder, '*.xml'))) if folder else []
  ours = []
  for path in sorted(glob.glob(os.path.join(REPO, 'models', '*.xml'))):
    with open(path) as f:
      if '<worldbody' in f.read():
        ours.append(path)
  pkg = dm_control_dir()
  robots = [os.path.join(pkg, r) for r in ROBOTS] if pkg else []
  return suite + ours + [r for r in robots if os.path.exists(r)]


def short_name(path: str) -> str:
  """suite/hopper.xml, models/walker.xml, walkers/assets/rodent.xml, fruitfly_v2/floor.xml: the
  last two (three after assets/) parts of the path, enough to tell the models apart."""
  folder = suite_dir()
  # realpath, not samefile: a path to no file must still get its row ("not loaded"), not raise
  if folder and os.path.realpath(os.path.dirname(path)) == os.path.realpath(folder):
    return 'suite/' + os.path.basename(path)  # also from $JAXSIM_SUITE_DIR
  parts = os.path.normpath(path).split(os.sep)
  return '/'.join(parts[-3:] if parts[-2] == 'assets' else parts[-2:])


def steps_for(path: str, default: int, overrides: dict[str, int]) -> int:
  """The steps to run for a model: an override keyed by its file name without .xml (e.g. dog)
  or by its short name, else the default."""
  stem = os.path.splitext(os.path.basename(path))[0]
  return overrides.get(short_name(path), overrides.get(stem, default))


def resolve(name: str) -> str:
  """A path, or a dm_control suite name (hopper) in the suite folder (_states.suite_dir)."""
  if os.path.exists(name):
    return name
  folder = suite_dir()
  if folder is None:
    raise SystemExit(
      f'{name}: no such file, and no dm_control suite (install dm_control or set JAXSIM_SUITE_DIR)'
    )
  return os.path.join(folder, f'{name}.xml')


def ctrl_range(lo, hi, limited):
  limited = np.asarray(limited, bool) & (hi > lo)
  return np.where(limited, lo, -1.0), np.where(limited, hi, 1.0)


class Controls:
  """Smooth random controls (batch, nu) per step, the same stream for both engines."""

  def __init__(self, batch, nu, lo, hi, dt, tau, seed):
    self.rng = np.random.default_rng(seed)
    self.a = float(np.exp(-dt / tau))
    self.z = self.rng.normal(size=(batch, nu))
    self.mid, self.half = (hi + lo) / 2, (hi - lo) / 2

  def chunk(self, n):
    out = np.empty((n,) + self.z.shape)
    s = np.sqrt(1 - self.a**2)
    for t in range(n):
      self.z = self.a * self.z + s * self.rng.normal(size=self.z.shape)
      out[t] = self.mid + self.half * np.tanh(1.5 * self.z)
    return np.swapaxes(out, 0, 1)  # (batch, n, nu)


def soak_model(path, batch, steps, chunk, nmj, tau, seed, budget=None):
  """Returns a row of counts for one model, or a string saying why it was skipped. With a budget
  (seconds, compilation included) the run stops after the chunk that passes it; 'steps' in the
  row says how many ran."""
  import mujoco

  try:
    m = jaxsim.load(path)
  except (jaxsim.ModelError, NotImplementedError, OSError) as e:
    return f'not loaded: {str(e).splitlines()[0][:80]}'
  if jaxsim.unsupported(m):
    return f'not simulated: {jaxsim.unsupported(m)[0][:80]}'
  d0 = jaxsim.make_data(m)
  dtype = d0.qvel.dtype
  rng = np.random.default_rng(seed)
  qvel0 = rng.normal(size=(batch, m.nv)) * 0.1
  d = jax.vmap(lambda v: d0.replace(qvel=v))(jnp.asarray(qvel0, dtype))
  lo, hi = np.asarray(m.actuator_ctrlrange).T if m.nu else (np.zeros(0), np.zeros(0))
  lo, hi = ctrl_range(lo, hi, m.actuator_ctrllimited) if m.nu else (lo, hi)
  ctrls = Controls(batch, m.nu, lo, hi, float(m.opt.timestep), tau, seed + 1)
  energy = bool(m.opt.enableflags & EnableBit.ENERGY)
  kinds = np.array([WarningType.CONTACTFULL, WarningType.CNSTRFULL])

  def record(d):
    return {
      'nan': jnp.any(jnp.isnan(d.qpos)) | jnp.any(jnp.isnan(d.qvel)),
      'reset': d.time == 0,
      'qvel': jnp.max(jnp.abs(d.qvel), initial=0.0),
      'full': d.warning[kinds],
      'energy': jnp.sum(d.energy),
    }

  run = jax.jit(lambda d, c: jaxsim.rollout(m, d, c, record=record))
  mm = mujoco.MjModel.from_xml_path(path)
  mds = [mujoco.MjData(mm) for _ in range(min(nmj, batch))]
  for k, md in enumerate(mds):
    md.qvel[:] = qvel0[k]
    mujoco.mj_forward(mm, md)
  e0 = None
  out = {'nan': 0, 'resets': 0, 'overflow': 0, 'qvel': 0.0, 'qvel_mj': 0.0, 'energy': 0.0}
  mjo = {'nan': 0, 'resets': 0, 'qvel': 0.0}
  prev_full = np.zeros((batch, 2), np.int64)
  t0 = time.perf_counter()
  done = 0
  while done < steps and (budget is None or done == 0 or time.perf_counter() - t0 < budget):
    n = min(chunk, steps - done)
    c = ctrls.chunk(chunk)
    d, rec = run(d, jnp.asarray(c, dtype))
    rec = {k: np.asarray(v)[:, :n] for k, v in rec.items()}
    out['nan'] += int(rec['nan'].sum())
    out['resets'] += int(rec['reset'].sum())
    out['qvel'] = max(out['qvel'], float(np.nanmax(rec['qvel'])))
    # over the worlds MuJoCo runs too, for a like-for-like comparison
    out['qvel_mj'] = max(out['qvel_mj'], float(np.nanmax(rec['qvel'][: len(mds)])))
    full = rec['full'].astype(np.int64)  # (batch, n, 2) running counters (cleared by a reset)
    before = np.concatenate([prev_full[:, None], full[:, :-1]], axis=1)
    out['overflow'] += int(np.any(full > np.where(rec['reset'][..., None], 0, before), -1).sum())
    prev_full = full[:, -1]
    if energy:
      e = rec['energy']
      e0 = e[:, 0] if e0 is None else e0
      out['energy'] = max(
        out['energy'], float(np.mean(np.max(np.abs(e - e0[:, None]), 1) / (np.abs(e0) + 1)))
      )
    for k, md in enumerate(mds):
      for t in range(n):
        md.ctrl[:] = c[k, t]
        before_t = md.time
        mujoco.mj_step(mm, md)
        mjo['resets'] += int(md.time < before_t)
        mjo['nan'] += int(not (np.isfinite(md.qpos).all() and np.isfinite(md.qvel).all()))
        mjo['qvel'] = max(mjo['qvel'], float(np.abs(md.qvel).max(initial=0.0)))
    done += n
  return {
    'jaxsim': out,
    'mujoco': mjo,
    'energy': energy,
    'steps': done,
    'seconds': time.perf_counter() - t0,
    'warnings': jaxsim.describe_warnings(d.warning),
  }


def table(rows, args) -> str:
  head = (
    f'batch {args.batch}, steps per model in the table, float32 (jaxsim) / float64 '
    f'(C MuJoCo, {args.mujoco_worlds} worlds), smooth random controls (tau {args.tau} s), '
    f'seed {args.seed}\n\n'
    '| model | steps | seconds | jaxsim NaN | resets | overflow steps | '
    "max abs qvel (all / MuJoCo's worlds) | "
    'energy | MuJoCo NaN | MuJoCo resets | MuJoCo max abs qvel |\n'
    '|---|---|---|---|---|---|---|---|---|---|---|\n'
  )
  lines = []
  for name, r in rows:
    if isinstance(r, str):
      lines.append(f'| {name} | | | {r} | | | | | | | |')
      continue
    j, mj = r['jaxsim'], r['mujoco']
    e = f'{j["energy"]:.3g}' if r['energy'] else '-'
    lines.append(
      f'| {name} | {r["steps"]} | {r["seconds"]:.0f} | {j["nan"]} | {j["resets"]} | '
      f'{j["overflow"]} | {j["qvel"]:.3g} / '
      f'{j["qvel_mj"]:.3g} | {e} | '
      f'{mj["nan"]} | {mj["resets"]} | {mj["qvel"]:.3g} |'
    )
  return head + '\n'.join(lines) + '\n'


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
  )
  parser.add_argument('--models', nargs='+', help='dm_control names or XML paths (default: all)')
  parser.add_argument('--batch', type=int, default=256)
  parser.add_argument('--steps', type=int, default=10000)
  parser.add_argument(
    '--steps-for',
    nargs='+',
    default=[],
    metavar='MODEL=STEPS',
    help='per-model steps, e.g. dog=500 humanoid_CMU=1000 (file name without .xml)',
  )
  parser.add_argument(
    '--budget', type=float, help='seconds per model (compilation included); stops after a chunk'
  )
  parser.add_argument(
    '--total-budget',
    type=float,
    help='seconds for the whole run: each model gets what is left over the models left',
  )
  parser.add_argument(
    '--cheap-first',
    action='store_true',
    help='run the models in order of nv (so a total budget left by cheap ones goes to costly ones)',
  )
  parser.add_argument('--chunk', type=int, default=200, help='steps per jitted rollout call')
  parser.add_argument('--mujoco-worlds', type=int, default=16)
  parser.add_argument('--tau', type=float, default=0.1, help='control noise correlation time, s')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--out', help='append the markdown table to this file')
  args = parser.parse_args(argv)
  jaxsim.configure_cpu(fast_compile=True)
  paths = [resolve(p) for p in args.models] if args.models else default_models()
  if args.cheap_first:
    import mujoco

    paths.sort(key=lambda p: mujoco.MjModel.from_xml_path(p).nv)
  overrides = {k: int(v) for k, v in (s.split('=', 1) for s in args.steps_for)}
  rows = []
  start = time.perf_counter()
  for i, path in enumerate(paths):
    name = short_name(path)
    steps = steps_for(path, args.steps, overrides)
    budget = args.budget
    if args.total_budget is not None:
      share = (args.total_budget - (time.perf_counter() - start)) / (len(paths) - i)
      budget = share if budget is None else min(budget, share)
    try:
      r = soak_model(
        path, args.batch, steps, args.chunk, args.mujoco_worlds, args.tau, args.seed, budget
      )
    except Exception as e:  # one model's failure is a row of the table, not the end of the run
      r = f'failed: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ""}'
    rows.append((name, r))
    print(table([(name, r)], args).splitlines()[-1], flush=True)
    if not isinstance(r, str) and r['warnings']:
      print('  ' + '\n  '.join(r['warnings']), flush=True)
  text = table(rows, args)
  print(text)
  if args.out:
    with open(args.out, 'a') as f:
      f.write(text)
  return 0


if __name__ == '__main__':
  sys.exit(main())

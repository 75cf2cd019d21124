"""Throughput, compile time and memory of jaxsim, MJX and C MuJoCo on the same models and settings.

  python benchmarks/throughput.py [MODEL ...] [--batch 64 1024] [--big] [--suite]
                                  [--engines jaxsim mjx mujoco] [--copies 1 2 4 8] [--out out/bench]
                                  [--warmup-steps 100] [--no-kernels] [--quick]
  jaxsim bench [the same arguments]

MODEL is a dm_control suite name (humanoid, hopper, cheetah ...), a file in models/ without its
extension, a path, or humanoidsN (N dm_control humanoids in a row on one floor, free to collide:
benchmarks/_scenes.py); by default humanoid, humanoids4 and models/bench/pile50 at batch 64 and
1024 (`--big` adds 8192; on a GPU 1024, 8192 and 32768). `--suite` adds the 19 dm_control suite
models at `--suite-batch` (64). Every (engine, model, batch) runs in a worker process of its own
with a time limit (`--timeout`); one that does not finish is reported as "no result". Engines:

- jaxsim: `jax.jit` of a `lax.scan` over `jax.vmap(jaxsim.step)`, with this Python.
- mjx: the same harness around `mujoco.mjx.step` (impl jax), with `--mjx-python`: by default
  $JAXSIM_MJX_PYTHON, else .venv-mjx/bin/python, else ../venv-mjx/bin/python beside the checkout
  (`python3 -m venv .venv-mjx && .venv-mjx/bin/pip install mujoco-mjx==3.17.0 mujoco==3.17.0`:
  without the second pin pip pairs mujoco-mjx 3.17.0 with mujoco 4.0.0).
- mujoco: C MuJoCo through `mujoco.rollout`, one thread, and `--threads` threads (default: all
  cores) as the CPU ceiling.

All engines load the same XML, with the same overrides (`--iterations`, `--ls-iterations`,
`--solver`, `--cone`) and sensors and energy disabled in all of them (the step alone; `--sensors`
keeps both); every worker reports
the settings it ran with and the driver prints them. Every world starts in contact: from the
state after `--warmup-steps` (100) C MuJoCo steps with random controls from qpos0 and qvel ~
N(0, 0.01), seeded per world (benchmarks/_states.py, cached in OUT/states), the same states for
every engine; `--warmup-steps 0` starts at qpos0. Timed steps then get random controls, uniform
in ctrlrange, from a fixed seed. The JAX engines run float32 unless `--float64` (C MuJoCo is
always float64).

Reported per model and batch: steps/s of each engine and jaxsim's ratios to MJX and to C MuJoCo
on one thread (also printed as one line each at the end); compile time (trace + lower + XLA
compile; the first call separately in the JSON); memory per world (the compiled program's
arguments + outputs + temporaries from XLA's memory analysis, over the batch; the JSON adds the
peak device memory on accelerators or the worker's peak RSS growth on CPU); the start states'
mean active contacts (C MuJoCo); trips per step: Newton iterations (Data.solver_niter) of every
world at every timed step, as "batched/world": the mean over steps of the max over worlds (what
a vmapped while loop runs) and the mean over steps and worlds (MJX 3.17 does not record its
iteration count); kernels: the work-launching instructions (fusions and unfused ops) of the
optimised HLO of one step, "all (in while loops) / while loops" (hlo_kernels; on a GPU about
one launch each, loop bodies counted once however often they run; `--no-kernels` skips the
second compile this needs when a call runs several steps). Outputs in --out: results.json,
results.md (the tables) and throughput.png (steps/s against batch size). The scaling table runs
the humanoid with 1, 2, 4, 8 non-colliding copies in one scene (models/bench/humanoid_copies.py)
and reports compile time and memory per world relative to linear growth.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import inspect
import json
import math
import os
import platform
import re
import resource
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _states beside this file
from _scenes import humanoids_xml  # noqa: E402
from _states import cached_states, ctrl_bounds, suite_dir, suite_names, summary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULT_TAG = 'BENCH-RESULT '
DEFAULT_MODELS = ('humanoid', 'humanoids4', 'pile50')
MJX_PYTHON_ENV = 'JAXSIM_MJX_PYTHON'
QUICK_MODEL = 'pendulum'
ENGINES = ('jaxsim', 'mjx', 'mujoco')
SHARD_WORLDS = 64  # worlds per CPU device that the default split keeps (cpu_devices)
_INTEGRATORS = {0: 'Euler', 1: 'RK4', 2: 'implicit', 3: 'implicitfast'}
_SOLVERS = {0: 'PGS', 1: 'CG', 2: 'Newton'}
_CONES = {0: 'pyramidal', 1: 'elliptic'}
_SENSOR_BIT = 1 << 13  # mjDSBL_SENSOR
_ENERGY_BIT = 1 << 1  # mjENBL_ENERGY: off with the sensors (MJX 3.17 cannot compute it)


# ----------------------------------------------------------------------------------------------
# worker side: runs one (engine, model, batch) and prints one JSON line


def _rss_bytes() -> int:
  """Current resident set size of this process."""
  with open('/proc/self/statm') as f:
    return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _peak_rss_bytes() -> int:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _memory_guard(limit: int, spec: dict) -> None:
  """Ends the worker with a result line when its RSS passes `limit` (the machine is shared)."""

  def watch():
    while True:
      rss = _rss_bytes()
      if rss > limit:
        out = {**spec, 'status': 'no result', 'reason': f'RSS above {limit / 2**30:.1f} GiB'}
        print(RESULT_TAG + json.dumps(out), flush=True)
        os._exit(3)
      time.sleep(0.1)

  threading.Thread(target=watch, daemon=True).start()


def _controls(rng, lo, hi, shape):
  import numpy as np

  return rng.uniform(lo, hi, size=shape + (len(lo),)).astype(np.float64)


def _settings(opt, dtype: str) -> dict:
  return {
    'timestep': float(f'{float(opt.timestep):.6g}'),
    'integrator': _INTEGRATORS.get(int(opt.integrator), str(opt.integrator)),
    'solver': _SOLVERS.get(int(opt.solver), str(opt.solver)),
    'iterations': int(opt.iterations),
    'ls_iterations': int(opt.ls_iterations),
    'cone': _CONES.get(int(opt.cone), str(opt.cone)),
    'energy': bool(int(opt.enableflags) & _ENERGY_BIT),
    'dtype': dtype,
  }


def _override_mj(mj, spec: dict) -> None:
  """The run's option overrides on a mujoco.MjModel (C MuJoCo and MJX)."""
  ov = spec['overrides']
  if ov.get('iterations') is not None:
    mj.opt.iterations = ov['iterations']
  if ov.get('ls_iterations') is not None:
    mj.opt.ls_iterations = ov['ls_iterations']
  if ov.get('solver') is not None:
    mj.opt.solver = {v: k for k, v in _SOLVERS.items()}[ov['solver']]
  if ov.get('cone') is not None:
    mj.opt.cone = {v: k for k, v in _CONES.items()}[ov['cone']]
  if not spec['sensors']:
    mj.opt.disableflags |= _SENSOR_BIT
    mj.opt.enableflags &= ~_ENERGY_BIT


def _start_state(spec: dict, data, rng) -> dict:
  """The batch's first state: the in-contact states of spec['states'], or qpos0 and noisy qvel."""
  batch = spec['batch']
  if spec.get('states'):
    with np.load(spec['states']) as f:
      out = {k: f[k][:batch] for k in ('qpos', 'qvel', 'act', 'time')}
    if out['qpos'].shape[0] != batch:
      raise ValueError(f'{spec["states"]} holds fewer than {batch} worlds')
    return out
  return {'qvel': rng.normal(size=(batch,) + data.qvel.shape) * 0.01}


def trip_stats(counts) -> dict:
  """Per-step loop trips: batched (max over worlds, what vmap runs) against the per-world mean.

  Arguments:
    counts: (steps, batch) trips of each world at each step.

  Returns:
    batched: mean over steps of the max over worlds; world: mean over steps and worlds;
    max: the largest.
  """
  counts = np.asarray(counts, dtype=np.float64).reshape(-1, np.shape(counts)[-1])
  return {
    'batched': float(counts.max(axis=1).mean()),
    'world': float(counts.mean()),
    'max': int(counts.max()),
  }


# HLO instructions that launch no work of their own
_FREE_OPS = frozenset(
  'parameter constant get-tuple-element tuple bitcast while conditional call after-all '
  'partition-id replica-id opt-barrier add-dependency domain'.split()
)
_HLO_COMPUTATION = re.compile(r'^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$')
_HLO_INSTRUCTION = re.compile(r'^\s+(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$')
_HLO_CALLS = re.compile(
  r'\b(calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)'
)
_HLO_BRANCHES = re.compile(r'\bbranch_computations=\{([^}]*)\}')


def _hlo_opcode(rest: str) -> str:
  """The opcode of an instruction's right-hand side `shape opcode(operands), attributes`."""
  i = rest.find(' ')
  if rest.startswith('('):  # tuple shape: skip to its closing parenthesis
    depth = 0
    for j, ch in enumerate(rest):
      depth += (ch == '(') - (ch == ')')
      if depth == 0:
        i = j + 1
        break
  m = re.match(r'\s*([\w\-]+)\(', rest[i:])
  return m.group(1) if m else ''


def hlo_kernels(text: str) -> dict:
  """Counts the work-launching instructions of an optimised HLO module (Compiled.as_text()).

  A kernel is an instruction of the entry computation, a while loop's body or condition, a
  conditional's branch or a called computation whose opcode launches work: every `fusion`, and
  every unfused op (custom-call, sort, dot, copy, ...), but not parameters, constants, tuples,
  bitcasts or the control flow itself. The insides of fusions and of reducers (to_apply) are
  not counted: on a GPU each counted instruction is about one kernel launch. Each is counted
  once, however often its loop runs.

  Arguments:
    text: the HLO module's text.

  Returns:
    kernels: all counted instructions; loop_kernels: those inside while loops (run once per
    trip); loops: the number of while loops (on a GPU each trip syncs with the host); fusions:
    the `fusion` instructions among the kernels.
  """
  comps: dict[str, list[str]] = {}
  calls: dict[str, list[tuple[str, str]]] = {}
  entry = None
  name = None
  for line in text.splitlines():
    if not line.startswith((' ', '\t')) and line.rstrip().endswith('{'):
      m = _HLO_COMPUTATION.match(line)
      if m:
        name = m.group(1)
        comps[name], calls[name] = [], []
        if line.startswith('ENTRY'):
          entry = name
      continue
    m = _HLO_INSTRUCTION.match(line) if name else None
    if not m:
      continue
    op = _hlo_opcode(m.group(1))
    comps[name].append(op)
    # a fusion's computation is its one kernel's body: never counted on its own
    calls[name] += [
      ('fused' if op == 'fusion' else k, t) for k, t in _HLO_CALLS.findall(m.group(1))
    ]
    for targets in _HLO_BRANCHES.findall(m.group(1)):
      calls[name] += [('branch', t.strip().lstrip('%')) for t in targets.split(',')]
  out = {'kernels': 0, 'loop_kernels': 0, 'loops': 0, 'fusions': 0}
  seen = set()

  def visit(comp: str, in_loop: bool) -> None:
    if comp in seen or comp not in comps:
      return
    seen.add(comp)
    ops = [op for op in comps[comp] if op not in _FREE_OPS]
    out['kernels'] += len(ops)
    out['fusions'] += sum(op == 'fusion' for op in ops)
    out['loop_kernels'] += len(ops) if in_loop else 0
    out['loops'] += comps[comp].count('while')
    for kind, target in calls[comp]:
      if kind in ('body', 'condition'):
        visit(target, True)
      elif kind in ('branch', 'true_computation', 'false_computation'):
        visit(target, in_loop)
      elif kind == 'calls':
        visit(target, in_loop)  # a call's (or an async op's) computation

  if entry:
    visit(entry, False)
  return out


def _time_jax(spec: dict, model, data, vstep, lo, hi, counters) -> dict:
  """Compiles and times `lax.scan` over `vmap(step)` on a batch; shared by jaxsim and MJX.

  counters(d) gives a dict of per-world int32 loop trip counts of the last step (e.g. Newton
  iterations), recorded after every step.
  """
  import jax
  import jax.numpy as jnp
  import numpy as np

  batch, chunk = spec['batch'], spec['chunk']
  rng = np.random.default_rng(spec['seed'])
  dtype = data.qpos.dtype
  start = _start_state(spec, data, rng)
  data = jax.tree_util.tree_map(lambda x: jnp.repeat(jnp.asarray(x)[None], batch, axis=0), data)
  data = data.replace(
    **{k: jnp.asarray(v, data.time.dtype if k == 'time' else dtype) for k, v in start.items()}
  )
  pool = [
    jnp.asarray(_controls(rng, lo, hi, (chunk, batch)), dtype) for _ in range(spec['ctrl_pool'])
  ]

  def run(m, d, ctrls):
    def body(d, ctrl):
      d = vstep(m, d.replace(ctrl=ctrl))
      return d, counters(d)

    d, trips = jax.lax.scan(body, d, ctrls)
    bad = ~(jnp.all(jnp.isfinite(d.qpos), axis=-1) & jnp.all(jnp.isfinite(d.qvel), axis=-1))
    return d, bad, trips

  rss0 = _peak_rss_bytes()
  t0 = time.perf_counter()
  lowered = jax.jit(run).lower(model, data, pool[0])
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  out = {'lower_s': t1 - t0, 'xla_compile_s': t2 - t1, 'compile_s': t2 - t0}
  if spec.get('kernels', True):
    # counted on one step: XLA unrolls a short scan, so a program of several steps per call
    # would count them several times; one of one step per call is one step (no second compile)
    try:
      t = time.perf_counter()
      one = compiled if chunk == 1 else jax.jit(vstep).lower(model, data).compile()
      text = one.as_text()
      out['hlo'] = hlo_kernels(text)
      out['hlo_compile_s'] = time.perf_counter() - t
    except Exception as e:  # the count is a report, never a reason to lose the timing
      out['hlo_error'] = repr(e)
  mem = compiled.memory_analysis()
  if mem is not None:
    total = (
      mem.argument_size_in_bytes
      + mem.output_size_in_bytes
      + mem.temp_size_in_bytes
      - mem.alias_size_in_bytes
    )
    # a program split over devices reports one device's share: all of them hold the batch
    shards = spec.get('shards', 1)
    total *= shards
    out['xla_bytes'] = int(total)
    out['xla_temp_bytes'] = int(mem.temp_size_in_bytes) * shards
    if total > spec['max_bytes']:
      out.update(status='no result', reason=f'needs {total / 2**30:.1f} GiB (limit --max-gb)')
      return out
  if spec.get('lock'):
    # compiles overlap; the device runs one measurement at a time (benchmarks/gpu.py)
    lock = open(spec['lock'], 'a')  # noqa: SIM115 (held until the worker exits)
    t = time.perf_counter()
    fcntl.flock(lock, fcntl.LOCK_EX)
    out['lock_wait_s'] = time.perf_counter() - t
  t3 = time.perf_counter()
  data, bad, _ = compiled(model, data, pool[0])
  jax.block_until_ready((data, bad))
  t4 = time.perf_counter()
  out['first_call_s'] = t4 - t3
  # one warm call sizes the timed run, whose calls are dispatched back to back
  data, bad, _ = compiled(model, data, pool[1 % len(pool)])
  jax.block_until_ready((data, bad))
  warm = time.perf_counter() - t4
  calls = int(min(spec['max_calls'], max(spec['min_calls'], math.ceil(spec['min_time'] / warm))))
  flags, trips = [bad], []
  t5, cpu5 = time.perf_counter(), time.process_time()
  for i in range(calls):
    data, bad, trip = compiled(model, data, pool[i % len(pool)])
    flags.append(bad)
    trips.append(trip)
  jax.block_until_ready((data, flags, trips))
  run_s = time.perf_counter() - t5
  cpu_s = time.process_time() - cpu5
  out['trips'] = {
    k: trip_stats(np.concatenate([np.asarray(t[k]) for t in trips])) for k in trips[0]
  }  # empty where the engine records no trip count
  nan_worlds = int(np.any(np.stack([np.asarray(f) for f in flags]), axis=0).sum())
  # jaxsim resets diverged worlds as MuJoCo does (so no NaN stays): its bad qpos/qvel/qacc counters
  warning = getattr(data, 'warning', None)
  if warning is not None and np.ndim(warning) == 2 and np.shape(warning)[1] >= 6:
    reset_worlds = int(np.any(np.asarray(warning)[:, 3:6] != 0, axis=1).sum())
  else:
    reset_worlds = None
  steps = calls * chunk * batch
  out.update(
    status='ok',
    steps=steps,
    run_s=run_s,
    steps_per_s=steps / run_s,
    cpu_s=cpu_s,
    steps_per_cpu_s=steps / cpu_s if cpu_s > 0 else None,
    nan=nan_worlds > 0 or bool(reset_worlds),
    nan_worlds=nan_worlds,
    reset_worlds=reset_worlds,
  )
  dev = jax.local_devices()[0]
  stats = dev.memory_stats() if hasattr(dev, 'memory_stats') else None
  if stats and 'peak_bytes_in_use' in stats:
    out['peak_bytes'] = int(stats['peak_bytes_in_use'])
    out['peak_kind'] = 'device peak_bytes_in_use'
  else:
    out['peak_bytes'] = _peak_rss_bytes() - rss0
    out['peak_kind'] = 'process peak RSS growth'
  out['device'] = f'{dev.platform}:{getattr(dev, "device_kind", "")}'
  out['jax'] = jax.__version__
  return out


def _worker_jaxsim(spec: dict) -> dict:
  import jax

  if spec['dtype'] == 'float64':
    jax.config.update('jax_enable_x64', True)
  sys.path.insert(0, REPO)
  import jaxsim
  from jaxsim._src.collision import driver

  m = jaxsim.load(spec['model'])
  ov = spec['overrides']
  opt = {}
  for key in ('iterations', 'ls_iterations'):
    if ov.get(key) is not None:
      opt[key] = ov[key]
  if ov.get('solver') is not None:
    opt['solver'] = {v: k for k, v in _SOLVERS.items()}[ov['solver']]
  if ov.get('cone') is not None:
    opt['cone'] = {v: k for k, v in _CONES.items()}[ov['cone']]
  if not spec['sensors']:
    opt['disableflags'] = m.opt.disableflags | _SENSOR_BIT
    opt['enableflags'] = m.opt.enableflags & ~_ENERGY_BIT
  m = jaxsim.with_options(m, **opt)
  d = jaxsim.make_data(m)
  lo, hi = ctrl_bounds(m.actuator_ctrlrange, m.actuator_ctrllimited)
  out = {
    'settings': _settings(m.opt, str(d.qpos.dtype)),
    'sizes': {
      'nv': m.nv,
      'nu': m.nu,
      'ncon': m.nconmax,
      'nefc': m.nefcmax,
    },
  }
  if spec.get('stage') == 'collision':
    from jaxsim._src import kinematics

    def stage(m, d):
      return driver.collision(m, kinematics.kinematics(m, d))
  else:
    stage = jaxsim.step
  vstep = jax.vmap(stage, in_axes=(None, 0))
  ndev = spec.get('devices') or 1
  if ndev > 1 and jax.default_backend() == 'cpu' and spec['batch'] % ndev == 0:
    # the batch split over one CPU device per core, each running its part's while loops on its
    # own (shard_map: no cross-device reduction per loop trip); the step has no LAPACK call on
    # the CPU (dynamics.solve_spd), whose batched kernels deadlock across devices
    from jax.sharding import Mesh, PartitionSpec

    mesh = Mesh(np.asarray(jax.devices()[:ndev]), ('batch',))
    vstep = jax.shard_map(
      vstep,
      mesh=mesh,
      in_specs=(PartitionSpec(), PartitionSpec('batch')),
      out_specs=PartitionSpec('batch'),
      check_vma=False,
    )
    out['devices'] = ndev
  else:
    out['devices'] = 1

  def counters(d):
    # Newton/CG iterations and line-search cost evaluations of the last solve
    return {'niter': d.solver_niter, 'neval': d.solver_neval}

  out.update(_time_jax({**spec, 'shards': out['devices']}, m, d, vstep, lo, hi, counters))
  return out


def _worker_mjx(spec: dict) -> dict:
  import jax

  if spec['dtype'] == 'float64':
    jax.config.update('jax_enable_x64', True)
  import mujoco
  from mujoco import mjx

  mj = mujoco.MjModel.from_xml_path(spec['model'])
  _override_mj(mj, spec)
  # MJX's pure-JAX implementation (newer MJX also has warp and C ones, chosen by `impl`)
  impl_kw = {'impl': 'jax'} if 'impl' in inspect.signature(mjx.put_model).parameters else {}
  mx = mjx.put_model(mj, **impl_kw)
  d = mjx.make_data(mx, **impl_kw)
  impl = getattr(d, '_impl', d)
  lo, hi = ctrl_bounds(mj.actuator_ctrlrange, mj.actuator_ctrllimited)
  out = {
    'settings': _settings(mx.opt, str(d.qpos.dtype)),
    'sizes': {
      'nv': mj.nv,
      'nu': mj.nu,
      'ncon': int(impl.contact.dist.shape[0]),
      'nefc': int(impl.efc_J.shape[0]),
    },
    'mujoco': mujoco.__version__,
  }
  if spec.get('stage') == 'collision':

    def stage(m, d):
      return mjx.collision(m, mjx.kinematics(m, d))
  else:
    stage = mjx.step
  vstep = jax.vmap(stage, in_axes=(None, 0))

  def counters(d):
    # none: MJX's solve (3.17) never writes Data's solver_niter back, so it reads 0
    return {}

  out.update(_time_jax(spec, mx, d, vstep, lo, hi, counters))
  return out


def _worker_mujoco(spec: dict) -> dict:
  """C MuJoCo through mujoco.rollout: one thread, then `threads` threads."""
  import mujoco
  import numpy as np
  from mujoco import rollout

  batch, chunk = spec['batch'], spec['c_chunk']
  t0 = time.perf_counter()
  mj = mujoco.MjModel.from_xml_path(spec['model'])
  load_s = time.perf_counter() - t0
  _override_mj(mj, spec)
  rng = np.random.default_rng(spec['seed'])
  d = mujoco.MjData(mj)
  what = mujoco.mjtState.mjSTATE_FULLPHYSICS
  state0 = np.zeros(mujoco.mj_stateSize(mj, what))
  mujoco.mj_getState(mj, d, state0, what)
  if spec.get('states'):
    with np.load(spec['states']) as f:
      init = np.array(f['physics'][:batch])
    if init.shape != (batch, state0.size):
      raise ValueError(f'{spec["states"]}: states of shape {init.shape}, not ({batch}, ...)')
  else:
    init = np.tile(state0, (batch, 1))
    # qvel ~ N(0, 0.01) as in the JAX engines: qvel follows time and qpos in the full state
    vel = slice(1 + mj.nq, 1 + mj.nq + mj.nv)
    init[:, vel] = rng.normal(size=(batch, mj.nv)) * 0.01
  lo, hi = ctrl_bounds(mj.actuator_ctrlrange, mj.actuator_ctrllimited)
  pool = [_controls(rng, lo, hi, (batch, chunk)) for _ in range(spec['ctrl_pool'])]
  out = {
    'settings': _settings(mj.opt, 'float64'),
    'sizes': {'nv': mj.nv, 'nu': mj.nu},
    'load_s': load_s,
    'mujoco': mujoco.__version__,
    'threads': spec['threads'],
  }
  results = {}
  for label, nthread in (('1', 1), ('mt', spec['threads'])):
    datas = [mujoco.MjData(mj) for _ in range(nthread)]
    kw = {'persistent_pool': True} if nthread > 1 else {}
    state = init.copy()
    t = time.perf_counter()
    states, _ = rollout.rollout(mj, datas, state, pool[0], nstep=chunk, **kw)
    warm = time.perf_counter() - t
    calls = int(min(spec['max_calls'], max(spec['min_calls'], math.ceil(spec['min_time'] / warm))))
    state = states[:, -1].copy()
    nan = not np.isfinite(states).all()
    t, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
      states, _ = rollout.rollout(mj, datas, state, pool[i % len(pool)], nstep=chunk, **kw)
      state = states[:, -1].copy()
      nan |= not np.isfinite(state).all()
    run_s, cpu_s = time.perf_counter() - t, time.process_time() - cpu
    if nthread > 1:
      rollout.shutdown_persistent_pool()
    # MuJoCo resets a diverged world (autoreset): its bad qpos/qvel/qacc warnings
    bad = ('mjWARN_BADQPOS', 'mjWARN_BADQVEL', 'mjWARN_BADQACC')
    nan |= any(dd.warning[int(getattr(mujoco.mjtWarning, w))].number for dd in datas for w in bad)
    steps = calls * chunk * batch
    results[label] = (steps / run_s, nan, steps / cpu_s if cpu_s > 0 else None)
  # the solver's contact and row counts vary with the state in C: those of the last state
  mujoco.mj_setState(mj, d, state[0], what)
  mujoco.mj_forward(mj, d)
  out['sizes'].update(ncon=int(d.ncon), nefc=int(d.nefc))
  out.update(
    status='ok',
    steps_per_s=results['1'][0],
    steps_per_s_mt=results['mt'][0],
    steps_per_cpu_s=results['1'][2],
    nan=results['1'][1] or results['mt'][1],
    peak_bytes=None,
  )
  return out


def _probe() -> dict:
  import jax

  dev = jax.local_devices()[0]
  return {
    'status': 'ok',
    'platform': dev.platform,
    'device': getattr(dev, 'device_kind', dev.platform),
    'device_count': jax.local_device_count(),
    'jax': jax.__version__,
  }


def worker_main(spec: dict) -> int:
  """Runs one measurement and prints it as one JSON line tagged RESULT_TAG."""
  engine = spec['engine']
  if spec.get('max_bytes'):
    _memory_guard(int(spec['max_bytes'] * 1.5) + 2**30, spec)
  try:
    if engine == 'probe':
      out = _probe()
    elif engine == 'jaxsim':
      out = _worker_jaxsim(spec)
    elif engine == 'mjx':
      out = _worker_mjx(spec)
    elif engine == 'mujoco':
      out = _worker_mujoco(spec)
    else:
      raise ValueError(f'unknown engine {engine}')
  except Exception as e:  # noqa: BLE001 - the driver reports any failure as a result
    out = {'status': 'error', 'reason': f'{type(e).__name__}: {e}'[:500]}
  print(RESULT_TAG + json.dumps({**spec, **out}), flush=True)
  return 0


# ----------------------------------------------------------------------------------------------
# driver side: plans the runs, spawns workers, writes the tables, JSON and plot


def resolve_model(name: str, scenes: str | None = None) -> tuple[str, str]:
  """(label, path) of a model given as a path, a models/ name, a dm_control suite name or
  `humanoidsN` (N dm_control humanoids on one floor, written to `scenes` by _scenes.py)."""
  if os.path.exists(name):
    return os.path.splitext(os.path.basename(name))[0], os.path.abspath(name)
  for folder in ('models', os.path.join('models', 'bench')):
    local = os.path.join(REPO, folder, name + '.xml')
    if os.path.exists(local):
      return name, local
  suite = suite_dir()
  if suite and os.path.exists(os.path.join(suite, name + '.xml')):
    return name, os.path.join(suite, name + '.xml')
  many = re.fullmatch(r'humanoids(\d+)', name)
  if many and suite and scenes:
    path = os.path.join(scenes, name + '.xml')
    if not os.path.exists(path):
      os.makedirs(scenes, exist_ok=True)
      with open(path, 'w') as f:
        f.write(humanoids_xml(int(many.group(1)), os.path.join(suite, 'humanoid.xml')))
    return name, path
  raise SystemExit(f'error: model {name!r} is neither a file, a models/ name nor a dm_control one')


def _user_xla_flags() -> str:
  """XLA_FLAGS as set before jaxsim's import added its own (which MJX may not get)."""
  # jaxsim is imported here and in the driver's other helpers, not at the top: this file also
  # runs as the MJX worker, in a Python that has no jaxsim (and must not get its XLA settings)
  from jaxsim._src.xla import USER_FLAGS

  return USER_FLAGS


def xla_flags(flags: str, mjx_xla: str) -> str:
  """XLA_FLAGS for a JAX engine's worker: the CPU flags of jaxsim/_src/xla.py unless set.

  With mjx_xla 'default', only the required (scheduler) flag is added: the XLA CPU deadlock
  jaxsim/_src/xla.py works around hits MJX's batched while loops too (its first call stalls at
  0% CPU).
  """
  from jaxsim._src.xla import CPU_FLAGS, REQUIRED_FLAGS

  for name, value in (CPU_FLAGS if mjx_xla == 'same' else REQUIRED_FLAGS).items():
    if name not in flags:
      flags = f'{flags} --{name}={value}'.strip()
  return flags


def _run_worker(python: str, spec: dict, timeout: float) -> dict:
  """One worker process; its result, or 'no result' after `timeout` seconds."""
  load0 = os.getloadavg()[0]
  t0 = time.perf_counter()
  env = dict(os.environ)
  if spec['engine'] in ('jaxsim', 'mjx'):
    policy = spec.get('mjx_xla', 'same') if spec['engine'] == 'mjx' else 'same'
    env['XLA_FLAGS'] = xla_flags(_user_xla_flags(), policy)
    devices = spec.get('devices') or 1
    if spec['engine'] == 'jaxsim' and devices > 1:
      # CPU only (other platforms ignore it): the batch split over CPU devices (a user's wins)
      from jaxsim._src.xla import DEVICES_FLAG

      if DEVICES_FLAG not in env['XLA_FLAGS']:
        env['XLA_FLAGS'] += f' --{DEVICES_FLAG}={devices}'
    if spec['engine'] == 'mjx':
      # MJX runs with its own defaults: not with the one-thread pool `import jaxsim` sets
      # (jaxsim/_src/xla.py REQUIRED_ENV) in this driver's environment, unless the user set it
      from jaxsim._src.xla import USER_ENV

      for k, v in USER_ENV.items():
        if v is None:
          env.pop(k, None)
        else:
          env[k] = v
    spec = {**spec, 'xla_flags': env['XLA_FLAGS']}
  cmd = [python, os.path.abspath(__file__), '--worker', json.dumps(spec)]
  try:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
  except subprocess.TimeoutExpired:
    out = {**spec, 'status': 'no result', 'reason': f'timed out after {timeout:g} s'}
  else:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
    if lines:
      out = json.loads(lines[-1][len(RESULT_TAG) :])
    else:
      tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
      out = {**spec, 'status': 'error', 'reason': f'exit {proc.returncode}: ' + ' | '.join(tail)}
  out['wall_s'] = time.perf_counter() - t0
  out['loadavg'] = [load0, os.getloadavg()[0]]
  return out


def _fmt_rate(r: dict | None, key: str = 'steps_per_s') -> str:
  if r is None:
    return ''
  if r.get('status') != 'ok':
    return r.get('status', '')
  v = r.get(key)
  return '' if v is None else f'{v:,.0f}'


def _fmt_num(v, digits=1) -> str:
  return '' if v is None else f'{v:.{digits}f}'


def _fmt_bytes(v) -> str:
  if v is None:
    return ''
  for unit, scale in (('GiB', 2**30), ('MiB', 2**20), ('KiB', 2**10)):
    if v >= scale:
      return f'{v / scale:.1f} {unit}'
  return f'{v:.0f} B'


def _ratio(a, b) -> str:
  if a is None or b is None or not b:
    return ''
  return f'{a / b:.2f}'


def _ok(r: dict | None, key: str):
  return r.get(key) if r and r.get('status') == 'ok' else None


def _compile(r: dict | None):
  return r.get('compile_s') if r else None


def _per_world(r: dict | None):
  if not r or r.get('xla_bytes') is None:
    return None
  return r['xla_bytes'] / r['batch']


def _loads(*runs: dict | None) -> str:
  """1-minute load averages at the start of each run, as uptime prints them."""
  return '/'.join(f'{r["loadavg"][0]:.1f}' if r and 'loadavg' in r else '-' for r in runs)


def _trips(r: dict | None) -> str:
  """Loop trips per step, batched/per-world mean (trip_stats), one pair per counter."""
  trips = (r or {}).get('trips') if r and r.get('status') == 'ok' else None
  if not trips:
    return ''
  pairs = [f'{v["batched"]:.1f}/{v["world"]:.1f}' for v in trips.values()]
  if len(trips) == 1:
    return pairs[0]
  return ', '.join(f'{k} {p}' for k, p in zip(trips, pairs, strict=True))


def _kernels(r: dict | None) -> str:
  """Kernels (of them in loops) and while loops of the compiled program (hlo_kernels)."""
  h = (r or {}).get('hlo')
  return f'{h["kernels"]} ({h["loop_kernels"]}) / {h["loops"]}' if h else ''


def _contacts(*runs: dict | None) -> str:
  """Mean active contacts of the start states (C MuJoCo, mj_forward) and the worlds in contact."""
  start = next((r['start'] for r in runs if r and r.get('start')), None)
  if not start:
    return ''
  return f'{start["ncon_mean"]:.1f} ({100 * start["in_contact"]:.0f}%)'


def throughput_table(results: list[dict], threads: int) -> str:
  """Markdown: one row per (model, batch); engines side by side with jaxsim's ratios."""
  index = {(r['label'], r['batch'], r['engine']): r for r in results if r.get('table') == 'main'}
  keys = sorted({(r['label'], r['batch']) for r in results if r.get('table') == 'main'})
  order = [r['label'] for r in results if r.get('table') == 'main']
  keys.sort(key=lambda k: (order.index(k[0]), k[1]))
  head = (
    '| model | batch | contacts | jaxsim steps/s | MJX steps/s | C 1 thread | C '
    f'{threads} threads | jaxsim/MJX | jaxsim/C | jaxsim compile s | MJX compile s | '
    'jaxsim mem/world | MJX mem/world | jaxsim trips | MJX trips | jaxsim kernels | '
    'MJX kernels | NaN/reset (jaxsim/MJX/C) | load |'
  )
  lines = [head, '|' + '---|' * (head.count('|') - 1)]
  for label, batch in keys:
    j = index.get((label, batch, 'jaxsim'))
    x = index.get((label, batch, 'mjx'))
    c = index.get((label, batch, 'mujoco'))
    cells = [label, batch, _contacts(j, x, c), _fmt_rate(j) + _devices(j), _fmt_rate(x)]
    cells += [_fmt_rate(c)]
    cells += [_fmt_rate(c, 'steps_per_s_mt'), _ratio(_ok(j, 'steps_per_s'), _ok(x, 'steps_per_s'))]
    cells += [_ratio(_ok(j, 'steps_per_s'), _ok(c, 'steps_per_s'))]
    cells += _jax_cells(j, x) + [_nan_cell(j, x, c), _loads(j, x, c)]
    lines.append(_md_row(cells))
  return '\n'.join(lines)


def _devices(r: dict | None) -> str:
  """' (N devices)' where jaxsim's batch was split over N CPU devices."""
  n = (r or {}).get('devices', 1)
  return f' ({n} devices)' if n > 1 else ''


def _nan_cell(*runs: dict | None) -> str:
  """'no', 'yes' or '' (no result) per engine run, joined by '/'."""
  return '/'.join(
    '' if r is None or r.get('status') != 'ok' else ('yes' if r.get('nan') else 'no') for r in runs
  )


def _jax_cells(j: dict | None, x: dict | None) -> list[str]:
  """The JAX engines' columns shared by both tables: compile s, mem/world, trips, kernels."""
  return [
    _fmt_num(_compile(j)),
    _fmt_num(_compile(x)),
    _fmt_bytes(_per_world(j)),
    _fmt_bytes(_per_world(x)),
    _trips(j),
    _trips(x),
    _kernels(j),
    _kernels(x),
  ]


def _md_row(cells: list) -> str:
  return '| ' + ' | '.join(str(v) for v in cells) + ' |'


def gpu_table(results: list[dict]) -> str:
  """Markdown for the JAX engines alone (benchmarks/gpu.py): one row per (model, batch)."""
  index = {(r['label'], r['batch'], r['engine']): r for r in results}
  keys = list(dict.fromkeys((r['label'], r['batch']) for r in results))
  head = (
    '| model | batch | contacts | jaxsim steps/s | MJX steps/s | jaxsim/MJX | jaxsim compile s | '
    'MJX compile s | jaxsim mem/world | MJX mem/world | jaxsim trips | MJX trips | '
    'jaxsim kernels | MJX kernels | NaN/reset (jaxsim/MJX) |'
  )
  lines = [head, '|' + '---|' * (head.count('|') - 1)]
  for label, batch in keys:
    j = index.get((label, batch, 'jaxsim'))
    x = index.get((label, batch, 'mjx'))
    cells = [label, batch, _contacts(j, x), _fmt_rate(j), _fmt_rate(x)]
    cells += [_ratio(_ok(j, 'steps_per_s'), _ok(x, 'steps_per_s'))]
    cells += _jax_cells(j, x) + [_nan_cell(j, x)]
    lines.append(_md_row(cells))
  return '\n'.join(lines)


def ratio_lines(results: list[dict]) -> list[str]:
  """One line per (model, batch): jaxsim's steps/s over MJX's and over C MuJoCo's one thread."""
  index = {(r['label'], r['batch'], r['engine']): r for r in results if r.get('table') == 'main'}
  out = []
  for label, batch in dict.fromkeys((r['label'], r['batch']) for r in results if 'label' in r):
    j = _ok(index.get((label, batch, 'jaxsim')), 'steps_per_s')
    x = _ok(index.get((label, batch, 'mjx')), 'steps_per_s')
    c = _ok(index.get((label, batch, 'mujoco')), 'steps_per_s')
    if j is None:
      continue
    parts = [f'jaxsim {j:,.0f} steps/s']
    if x:
      parts.append(f'{j / x:.2f}x MJX')
    if c:
      parts.append(f'{j / c:.3f}x C MuJoCo 1 thread ({1e6 / j:.1f} vs {1e6 / c:.1f} us/world-step)')
      jc = _ok(index.get((label, batch, 'jaxsim')), 'steps_per_cpu_s')
      cc = _ok(index.get((label, batch, 'mujoco')), 'steps_per_cpu_s')
      if jc and cc:
        # steps per CPU-second: less sensitive to other processes on a shared machine
        parts.append(f'{jc / cc:.3f}x per CPU-second')
    out.append(f'{label} batch {batch}: ' + ', '.join(parts))
  return out


def _linear(value, first, factor: float) -> str:
  """value / (factor x first): at most 1 where growth is no faster than linear."""
  return _ratio(value / factor, first) if value and first else ''


def scaling_table(results: list[dict]) -> str:
  """Markdown: compile time and memory per world against copies, relative to linear growth."""
  rows = [r for r in results if r.get('table') == 'scaling']
  if not rows:
    return ''
  engines = [e for e in ('jaxsim', 'mjx') if any(r['engine'] == e for r in rows)]
  copies = sorted({r['copies'] for r in rows})
  index = {(r['engine'], r['copies']): r for r in rows}
  head = '| copies | nv |'
  for e in engines:
    name = 'MJX' if e == 'mjx' else e
    head += (
      f' {name} ncon/nefc | {name} compile s | x linear | {name} mem/world | x linear |'
      f' {name} steps/s |'
    )
  c_rows = any(r['engine'] == 'mujoco' for r in rows)
  if c_rows:
    head += ' C 1 thread |'
  lines = [head, '|' + '---|' * (head.count('|') - 1)]
  for n in copies:
    nv = next((r.get('sizes', {}).get('nv') for r in rows if r['copies'] == n), None)
    line = f'| {n} | {nv or ""} |'
    for e in engines:
      r, r1 = index.get((e, n)), index.get((e, copies[0]))
      sizes = (r or {}).get('sizes', {})
      cs, cs1 = _compile(r), _compile(r1)
      mw, mw1 = _per_world(r), _per_world(r1)
      k = n / copies[0]
      line += (
        f' {sizes.get("ncon", "")}/{sizes.get("nefc", "")} | {_fmt_num(cs)} |'
        f' {_linear(cs, cs1, k)} | {_fmt_bytes(mw)} | {_linear(mw, mw1, k)} | {_fmt_rate(r)} |'
      )
    if c_rows:
      line += f' {_fmt_rate(index.get(("mujoco", n)))} |'
    lines.append(line)
  return '\n'.join(lines)


def settings_lines(results: list[dict]) -> list[str]:
  """One line per model: the settings every engine reported, flagged where they differ."""
  out = []
  seen = {}
  for r in results:
    if 'settings' in r:
      seen.setdefault(r['label'], {})[r['engine']] = r['settings']
  for label, by_engine in seen.items():
    ref = next(iter(by_engine.values()))
    common = {k: v for k, v in ref.items() if k != 'dtype'}
    differ = [
      e for e, s in by_engine.items() if {k: v for k, v in s.items() if k != 'dtype'} != common
    ]
    dtypes = ', '.join(f'{e} {s["dtype"]}' for e, s in by_engine.items())
    text = ', '.join(f'{k}={v}' for k, v in common.items())
    flag = f' **differ: {differ}**' if differ else ''
    out.append(f'- {label}: {text}; {dtypes}{flag}')
  xla = {}
  for r in results:
    if r.get('xla_flags') is not None:
      xla.setdefault(r['engine'], r['xla_flags'])
  out += [f'- {e} XLA_FLAGS: `{f}`' for e, f in xla.items()]
  return out


def plot(results: list[dict], path: str) -> bool:
  """steps/s against batch size, one panel per model, one line per engine (log-log)."""
  try:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import matplotlib.ticker
  except ImportError:
    return False
  main = [r for r in results if r.get('table') == 'main' and r.get('status') == 'ok']
  labels = list(dict.fromkeys(r['label'] for r in main))
  if not labels:
    return False
  cols = min(3, len(labels))
  rows = math.ceil(len(labels) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
  series = (('jaxsim', 'steps_per_s', 'jaxsim'), ('mjx', 'steps_per_s', 'MJX'))
  series += (('mujoco', 'steps_per_s', 'C 1 thread'), ('mujoco', 'steps_per_s_mt', 'C threads'))
  for ax, label in zip(axes.flat, labels, strict=False):
    for engine, key, name in series:
      pts = sorted(
        (r['batch'], r[key]) for r in main if r['label'] == label and r['engine'] == engine
      )
      if pts:
        ax.plot(*zip(*pts, strict=True), marker='o', label=name)
    ax.set_xscale('log')
    ax.set_yscale('log')
    ticks = sorted({r['batch'] for r in main if r['label'] == label})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_title(label)
    ax.set_xlabel('batch')
    ax.set_ylabel('steps/s')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize=7)
  for ax in list(axes.flat)[len(labels) :]:
    ax.axis('off')
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return True


def _copies_module():
  """models/bench/humanoid_copies.py, by path (`models` is not a package)."""
  import importlib.util

  path = os.path.join(REPO, 'models', 'bench', 'humanoid_copies.py')
  spec = importlib.util.spec_from_file_location('humanoid_copies', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _default_mjx_python() -> str | None:
  """$JAXSIM_MJX_PYTHON, else .venv-mjx in the checkout, else a venv-mjx beside the checkout."""
  if os.environ.get(MJX_PYTHON_ENV):
    return os.environ[MJX_PYTHON_ENV]
  for venv in (os.path.join(REPO, '.venv-mjx'), os.path.join(os.path.dirname(REPO), 'venv-mjx')):
    path = os.path.join(venv, 'bin', 'python')
    if os.path.exists(path):
      return path
  return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
  p = argparse.ArgumentParser(
    prog='jaxsim bench',
    description=__doc__.splitlines()[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  p.add_argument(
    'models',
    nargs='*',
    help=f'default: {" ".join(DEFAULT_MODELS)} (humanoidsN: N humanoids on one floor)',
  )
  p.add_argument('--batch', type=int, nargs='+', help='default: 64 1024 (GPU: 1024 8192 32768)')
  p.add_argument('--big', action='store_true', help='add batch 8192 to the default batches')
  p.add_argument(
    '--suite', action='store_true', help='add the 19 dm_control suite models at --suite-batch'
  )
  p.add_argument('--suite-batch', type=int, default=64)
  p.add_argument(
    '--warmup-steps',
    type=int,
    default=100,
    help='worlds start after this many C MuJoCo steps with random controls (in contact); '
    '0: at qpos0 with qvel ~ N(0, 0.01)',
  )
  p.add_argument('--engines', nargs='+', choices=ENGINES, default=list(ENGINES))
  p.add_argument('--copies', type=int, nargs='*', default=[1, 2, 4, 8], help='scaling table')
  p.add_argument('--copies-source', default='humanoid', help='robot copied for the scaling table')
  p.add_argument('--copies-batch', type=int, default=64)
  p.add_argument('--out', default=os.path.join(REPO, 'out', 'bench'))
  p.add_argument('--timeout', type=float, default=900, help='seconds per worker')
  p.add_argument('--min-time', type=float, default=5.0, help='timed seconds per measurement')
  p.add_argument('--chunk', type=int, help='steps per jitted call (default: by batch size)')
  p.add_argument('--float64', action='store_true', help='JAX engines in double precision')
  p.add_argument('--iterations', type=int, help='solver iterations for every engine')
  p.add_argument('--ls-iterations', type=int, help='line-search iterations for every engine')
  p.add_argument('--solver', choices=('CG', 'Newton'))
  p.add_argument('--cone', choices=('pyramidal', 'elliptic'))
  p.add_argument(
    '--sensors', action='store_true', help='keep sensors and energy on (as the model has them)'
  )
  p.add_argument(
    '--stage',
    choices=('step', 'collision'),
    default='step',
    help='time the whole step, or kinematics + collision detection alone (JAX engines)',
  )
  p.add_argument('--threads', type=int, default=os.cpu_count(), help='C MuJoCo CPU ceiling')
  p.add_argument(
    '--jaxsim-devices',
    type=int,
    help="on the CPU, split jaxsim's batch over this many host devices (shard_map, each device "
    'its own while loops; default: cpu_devices(batch), at least one per core); 1: one device '
    '(XLA then uses about one core)',
  )
  p.add_argument(
    '--mjx-python',
    default=_default_mjx_python(),
    help=f'Python with mujoco-mjx (default: ${MJX_PYTHON_ENV}, .venv-mjx, ../venv-mjx)',
  )
  p.add_argument(
    '--mjx-xla',
    choices=('same', 'default'),
    default='same',
    help="MJX's XLA CPU flags: jaxsim's (jaxsim/_src/xla.py), or XLA's defaults but the "
    'required one',
  )
  p.add_argument('--max-gb', type=float, default=4.0, help='skip runs whose program needs more')
  p.add_argument(
    '--no-kernels',
    action='store_true',
    help='skip the kernel count (a second compile of one step per JAX run)',
  )
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--quick', action='store_true', help='smoke test: pendulum, batch 1 and 8')
  args = p.parse_args(argv)
  if args.quick and not args.suite:
    args.models = args.models or [QUICK_MODEL]
    args.batch = args.batch or [1, 8]
    args.min_time = min(args.min_time, 0.2)
    args.copies = []
    args.chunk = args.chunk or 1  # one step per call: the kernels need no second compile
  return args


def cpu_devices(batch: int, cores: int | None = None) -> int:
  """CPU devices jaxsim's batch is split over by default: one per core, more while each keeps at
  least SHARD_WORLDS worlds, at most 8 per core; a divisor of the batch. A smaller share per
  device fits the caches better and each device's loops run for its own slowest world: humanoid
  at batch 1024 on 2 cores (2026-11-29, docs/speed.md) ran 2,490 steps/s on 4 devices, 2,835 and
  3,130 on 8, 3,088 to 3,183 on 16, 2,520 on 32 and 1,936 to 2,392 on 64."""
  cores = cores or os.cpu_count() or 1
  n = max(1, min(batch // SHARD_WORLDS, 8 * cores))
  n = max(n, min(cores, batch))
  while batch % n:
    n -= 1
  return n


def _chunk(args, batch: int) -> int:
  return args.chunk or max(1, min(20, 1000 // batch))


def main(argv: list[str] | None = None, prog: str = 'python benchmarks/throughput.py') -> int:
  """Runs the benchmark (argv: the command line's arguments; prog: how it was invoked)."""
  args = parse_args(argv)
  args.command_line = ' '.join([prog, *(sys.argv[1:] if argv is None else argv)])
  os.makedirs(args.out, exist_ok=True)
  scenes = os.path.join(args.out, 'scenes')
  names = args.models or ([] if args.suite else list(DEFAULT_MODELS))
  models = [resolve_model(m, scenes) for m in names]
  started = datetime.datetime.now().astimezone()
  probe = _run_worker(sys.executable, {'engine': 'probe'}, 120)
  on_gpu = probe.get('platform') not in (None, 'cpu')
  batches = args.batch or ([1024, 8192, 32768] if on_gpu else [64, 1024] + [8192] * args.big)
  mjx_python = args.mjx_python if args.mjx_python and os.path.exists(args.mjx_python) else None
  base = {
    'dtype': 'float64' if args.float64 else 'float32',
    'overrides': {
      'iterations': args.iterations,
      'ls_iterations': args.ls_iterations,
      'solver': args.solver,
      'cone': args.cone,
    },
    'sensors': args.sensors,
    'stage': args.stage,
    'seed': args.seed,
    'min_time': args.min_time,
    'min_calls': 2,
    'max_calls': 100000,
    'ctrl_pool': 4,
    'threads': args.threads,
    'max_bytes': int(args.max_gb * 2**30),
    'mjx_xla': args.mjx_xla,
    'kernels': not args.no_kernels,
  }
  print(
    f'jaxsim bench {started:%Y-%m-%d %H:%M %Z} on {platform.node()}: '
    f'{probe.get("platform")} ({probe.get("device")}), {os.cpu_count()} cores, '
    f'jax {probe.get("jax")}, MJX python: {mjx_python or "not installed"}',
    flush=True,
  )
  plan = []
  suffix = ' (collision)' if args.stage == 'collision' else ''
  for label, path in models:
    for batch in batches:
      plan.append(('main', label + suffix, path, batch, None))
  if args.suite:
    for name in suite_names():
      label, path = resolve_model(name)
      if ('main', label + suffix, path, args.suite_batch, None) not in plan:
        plan.append(('main', label + suffix, path, args.suite_batch, None))
  if args.copies:
    copies_xml = _copies_module().copies_xml

    _, source = resolve_model(args.copies_source)
    os.makedirs(scenes, exist_ok=True)
    for n in args.copies:
      path = os.path.join(scenes, f'{args.copies_source}_x{n}.xml')
      with open(path, 'w') as f:
        f.write(copies_xml(n, source))
      plan.append(('scaling', f'{args.copies_source} x{n}', path, args.copies_batch, n))

  results: list[dict] = []
  out_json = os.path.join(args.out, 'results.json')
  for table, label, path, batch, copies in plan:
    start = {}
    if args.warmup_steps:
      # the same in-contact states for every engine (C MuJoCo in this process's Python)
      states = cached_states(
        path, batch, os.path.join(args.out, 'states'), args.warmup_steps, args.seed
      )
      with np.load(states) as f:
        start = {'states': states, 'start': summary(f)}
    for engine in args.engines:
      spec = {
        **start,
        **base,
        'engine': engine,
        'table': table,
        'label': label,
        'model': path,
        'batch': batch,
        'copies': copies,
        'chunk': _chunk(args, batch),
        'devices': args.jaxsim_devices or cpu_devices(batch),
        'c_chunk': max(5, 10000 // batch),
      }
      if engine == 'mjx' and mjx_python is None:
        r = {**spec, 'status': 'not installed', 'reason': 'no --mjx-python with mujoco-mjx'}
      elif engine == 'mujoco' and args.stage == 'collision':
        r = {**spec, 'status': 'not measured', 'reason': '--stage collision: JAX engines only'}
      else:
        python = mjx_python if engine == 'mjx' else sys.executable
        r = _run_worker(python, spec, args.timeout)
      results.append(r)
      rate = _fmt_rate(r)
      extra = f' mt {_fmt_rate(r, "steps_per_s_mt")}' if engine == 'mujoco' else ''
      comp = f' compile {r["compile_s"]:.1f} s' if r.get('compile_s') is not None else ''
      why = f' ({r.get("reason")})' if r.get('status') != 'ok' else ''
      load = f' [load {r["loadavg"][0]:.1f}]' if 'loadavg' in r else ''
      print(f'  {label} batch {batch} {engine}: {rate} steps/s{extra}{comp}{why}{load}', flush=True)
      _write(out_json, args, probe, started, results)

  md = _markdown(args, probe, started, results)
  with open(os.path.join(args.out, 'results.md'), 'w') as f:
    f.write(md)
  plotted = plot(results, os.path.join(args.out, 'throughput.png'))
  _write(out_json, args, probe, started, results)
  print()
  print(md)
  print('\n'.join(ratio_lines(results)))
  print(f'wrote {out_json}, results.md' + (', throughput.png' if plotted else ''), flush=True)
  return 0


def _markdown(args, probe: dict, started, results: list[dict]) -> str:
  lines = [
    f'## jaxsim bench, {started:%Y-%m-%d %H:%M %Z}',
    '',
    f'`{args.command_line}`',
    '',
    f'{probe.get("platform")} ({probe.get("device")}), {os.cpu_count()} cores, '
    f'jax {probe.get("jax")}. steps/s counts world-steps (batch x steps per second, wall '
    'clock); compile is trace + lower + XLA compile; mem/world is the compiled program '
    '(arguments, outputs, temporaries) over the batch; load is the 1-minute load average at '
    'the start of each run (jaxsim/MJX/C). results.json adds the first call, peak memory and '
    'steps per CPU-second.',
    '',
    'Settings (as each engine reported them):',
    *settings_lines(results),
    '',
    throughput_table(results, args.threads),
  ]
  scaling = scaling_table(results)
  if scaling:
    lines += [
      '',
      f'Scaling: {args.copies_source} copies in one scene, batch {args.copies_batch} '
      '("x linear": value / (copies x value at 1 copy); at most 1 means no faster than linear).',
      '',
      scaling,
    ]
  return '\n'.join(lines + failed_lines(results)) + '\n'


def failed_lines(results: list[dict]) -> list[str]:
  """Markdown lines naming the runs without a result and why (none when every run has one)."""
  notes = [
    f'- {r["label"]} batch {r["batch"]} {r["engine"]}: {r.get("status")} ({r.get("reason")})'
    for r in results
    if r.get('status') != 'ok'
  ]
  return ['', 'Runs without a result:', *notes] if notes else []


def _write(path: str, args, probe: dict, started, results: list[dict]) -> None:
  doc = {
    'command': args.command_line,
    'started': started.isoformat(),
    'host': platform.node(),
    'cores': os.cpu_count(),
    'probe': probe,
    'results': results,
  }
  with open(path, 'w') as f:
    json.dump(doc, f, indent=1)


if __name__ == '__main__':
  if len(sys.argv) == 3 and sys.argv[1] == '--worker':
    sys.exit(worker_main(json.loads(sys.argv[2])))
  sys.exit(main())

"""The `jaxsim` command: info, simulate, bench. Thin: everything goes through the public API."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm import tqdm

import jaxsim

_INTEGRATORS = {0: 'Euler', 1: 'RK4', 2: 'implicit', 3: 'implicitfast', 100: 'variational'}
_SOLVERS = {0: 'PGS', 1: 'CG', 2: 'Newton'}
_CONES = {0: 'pyramidal', 1: 'elliptic'}


def info(model: jaxsim.Model, path: str) -> str:
  """A human-readable summary: counts, options and features jaxsim cannot simulate yet."""
  opt = model.opt
  lines = [f'model    {model.model_name}  ({path})']
  counts = (
    'nq nv nu na nbody njnt ngeom nsite nmesh nhfield ntendon neq npair nexclude nsensor nkey'
  ).split()
  lines.append('counts   ' + '  '.join(f'{k}={getattr(model, k)}' for k in counts))
  disabled = [f.name.lower() for f in jaxsim.DisableBit if opt.disableflags & f]
  enabled = [f.name.lower() for f in jaxsim.EnableBit if opt.enableflags & f]
  lines.append(
    f'options  timestep={float(opt.timestep):g}  integrator={_INTEGRATORS[opt.integrator]}  '
    f'solver={_SOLVERS.get(opt.solver, opt.solver)}  iterations={opt.iterations}  '
    f'ls_iterations={opt.ls_iterations}  cone={_CONES[opt.cone]}  '
    f'gravity={[float(f"{g:.6g}") for g in np.asarray(opt.gravity)]}'
  )
  lines.append(f'flags    disabled={disabled or "none"}  enabled={enabled or "none"}')
  lay = model.layout
  lines.append(
    f'budget   contact slots={lay.ncon} of {lay.budget.nfull} collider slots  '
    f'constraint rows={lay.nefc}  (jaxsim.with_ncon_max, <size nconmax njmax>)'
  )
  lines.append(
    f'solver   Newton Hessian rows={jaxsim.hessian_rows(model)} of {lay.nefc}  '
    '(jaxsim.with_hessian_rows)'
  )
  jac = jaxsim.JacobianType(int(opt.jacobian)).name.lower()
  form = f'compact rows of {lay.efc_width}' if lay.efc_width else f'dense rows of {model.nv}'
  lines.append(f'jacobian efc_J in {form}  (<option jacobian="{jac}">, jaxsim.efc_J_dense)')
  unsupported = jaxsim.unsupported(model)
  if unsupported:
    lines.append('not yet simulated by jaxsim:')
    lines.extend(f'  - {u}' for u in unsupported)
  else:
    lines.append('not yet simulated by jaxsim: none')
  return '\n'.join(lines)


def simulate(model: jaxsim.Model, args: argparse.Namespace) -> int:
  """Vmapped, jitted rollout of a batch of worlds with random controls; reports throughput."""
  if args.float64:
    jax.config.update('jax_enable_x64', True)
    model = jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), model)
  if args.no_constraints:
    flags = model.opt.disableflags | jaxsim.DisableBit.CONSTRAINT
    model = jaxsim.with_options(model, disableflags=flags)
  batch, steps = args.batch, args.steps
  chunk = max(1, min(args.chunk, steps))
  rng = np.random.default_rng(args.seed)
  d0 = jaxsim.make_data(model)
  # worlds differ by a small perturbation of the initial velocity
  qvel = rng.normal(size=(batch, model.nv)) * args.qvel_noise
  data = jax.vmap(lambda v: d0.replace(qvel=v))(jnp.asarray(qvel, d0.qvel.dtype))
  lo, hi = np.asarray(model.actuator_ctrlrange).T if model.nu else (np.zeros(0), np.zeros(0))
  limited = np.asarray(model.actuator_ctrllimited, bool) & (hi > lo)
  lo, hi = np.where(limited, lo, -1.0), np.where(limited, hi, 1.0)

  ctrl_shape = (batch, chunk, model.nu)
  devices = jax.local_devices()
  if batch % len(devices):
    devices = devices[:1]

  def run(d, ctrls):
    return jaxsim.rollout(model, d, ctrls, record=('qpos', 'qvel', 'time'), devices=devices)

  # the batch placed over the devices rollout splits it over, in and out (empty fields too), so
  # that every call finds its inputs where the compiled program expects them
  split = NamedSharding(Mesh(np.asarray(devices), ('batch',)), PartitionSpec('batch'))
  fn = jax.jit(run, in_shardings=split, out_shardings=split)

  def place(x):
    return jax.device_put(x, split)

  data = place(data)
  ctrls = place(jnp.asarray(rng.uniform(lo, hi, size=ctrl_shape), d0.qvel.dtype))
  t0 = time.perf_counter()
  try:
    compiled = fn.lower(data, ctrls).compile()
  except NotImplementedError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  compile_s = time.perf_counter() - t0
  ndev = len(devices)
  on = f' split over {ndev} {jax.default_backend().upper()} devices' if ndev > 1 else ''
  print(f'compiled step x{chunk} for a batch of {batch}{on} in {compile_s:.2f} s')

  trajs, done = [], 0
  t0 = time.perf_counter()
  # the bar counts batched steps (every world advancing once); the summary gives both rates
  with tqdm(total=steps, unit=' batched step', disable=args.quiet) as bar:
    while done < steps:
      n = min(chunk, steps - done)
      ctrls = place(jnp.asarray(rng.uniform(lo, hi, size=ctrl_shape), d0.qvel.dtype))
      data, traj = compiled(data, ctrls)
      traj = {k: np.asarray(v)[:, :n] for k, v in traj.items()}
      trajs.append(traj)
      done += n
      bar.update(n)
  jax.block_until_ready(data)
  run_s = time.perf_counter() - t0
  traj = {k: np.concatenate([t[k] for t in trajs], axis=1) for k in trajs[0]}
  finite = all(np.isfinite(v).all() for v in traj.values())
  print(
    f'{batch} worlds x {steps} steps in {run_s:.2f} s: {batch * steps / run_s:,.0f} steps/s '
    f'summed over the worlds ({steps / run_s:,.0f} batched steps/s)'
  )
  qpos = traj['qpos'][:, -1]
  print(f'final time {float(traj["time"][0, -1]):.4f} s; finite: {finite}')
  warnings = jaxsim.describe_warnings(data.warning)
  print('warnings: ' + ('none' if not warnings else '\n  ' + '\n  '.join(warnings)))
  print(f'final qpos (world 0): {np.array2string(qpos[0], precision=4, max_line_width=100)}')
  if args.out:
    np.savez_compressed(args.out, **traj)
    print(f'trajectory ({", ".join(f"{k} {v.shape}" for k, v in traj.items())}) -> {args.out}')
  return 0 if finite else 1


def bench(argv: list[str]) -> int:
  """Runs benchmarks/throughput.py (a source checkout's) with the arguments after `bench`."""
  path = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'benchmarks', 'throughput.py')
  if not os.path.exists(path):
    print(f'error: jaxsim bench needs a source checkout ({path} not found)', file=sys.stderr)
    return 2
  spec = importlib.util.spec_from_file_location('jaxsim_throughput', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.main(argv, prog='jaxsim bench')


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  if argv[:1] == ['bench']:
    # every option is the benchmark's own (`jaxsim bench --help` lists them)
    return bench(argv[1:])
  parser = argparse.ArgumentParser(prog='jaxsim', description=__doc__)
  parser.add_argument('--version', action='version', version=f'jaxsim {jaxsim.__version__}')
  sub = parser.add_subparsers(dest='command', required=True)
  sub.add_parser(
    'bench', help='steps/s and ratios vs MJX and C MuJoCo from in-contact states', add_help=False
  )
  p_info = sub.add_parser('info', help='counts, options and unsupported features of a model')
  p_info.add_argument('model')
  p_sim = sub.add_parser(
    'simulate',
    help='batched, jitted rollout with random controls',
    formatter_class=argparse.ArgumentDefaultsHelpFormatter,
  )
  p_sim.add_argument('model')
  p_sim.add_argument('--batch', type=int, default=16, help='number of worlds (vmapped)')
  p_sim.add_argument('--steps', type=int, default=1000, help='timesteps per world')
  p_sim.add_argument('--out', help='write the trajectory (qpos, qvel, time) to this .npz')
  p_sim.add_argument('--chunk', type=int, default=100, help='steps per jitted call')
  p_sim.add_argument('--seed', type=int, default=0)
  p_sim.add_argument('--qvel-noise', type=float, default=0.1, help='std of initial qvel')
  p_sim.add_argument('--float64', action='store_true', help='simulate in double precision')
  p_sim.add_argument(
    '--no-constraints', action='store_true', help='disable contacts, limits and equalities'
  )
  p_sim.add_argument('--quiet', action='store_true', help='no progress bar')
  p_sim.add_argument(
    '--devices',
    type=int,
    help='on a CPU, split the batch over this many XLA devices, each stepping its share with its '
    'own loops on a core; a divisor of --batch (default: the largest one up to the core count; '
    '1: one device, about one core). Other platforms use their own devices.',
  )
  args = parser.parse_args(argv)
  if getattr(args, 'batch', 1) < 1 or getattr(args, 'steps', 1) < 1:
    parser.error('--batch and --steps must be positive')
  devices = None
  if args.command == 'simulate':
    devices = args.devices
    if devices is None:
      devices = max(
        n for n in range(1, min(os.cpu_count() or 1, args.batch) + 1) if args.batch % n == 0
      )
    if devices < 1 or args.batch % devices:
      parser.error(f'--devices {devices}: must be a positive divisor of --batch {args.batch}')
  # before anything runs on JAX's backend: XLA's faster-compiling emitters (same run time), and
  # the CPU as one device per core (jaxsim.rollout splits a batch over the devices it finds)
  jaxsim.configure_cpu(fast_compile=True, devices=devices if devices and devices > 1 else None)
  out = getattr(args, 'out', None)
  if out and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
    # said now, not after the whole run
    parser.error(f'--out {out}: folder {os.path.dirname(os.path.abspath(out))} does not exist')
  try:
    model = jaxsim.load(args.model)
  except (jaxsim.ModelError, OSError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  except NotImplementedError as e:
    # a feature the compiler reads but the engine cannot build yet, named in the message
    print(f'not yet simulated by jaxsim: {e}', file=sys.stderr)
    return 2
  if args.command == 'info':
    print(info(model, args.model))
    return 0
  return simulate(model, args)


if __name__ == '__main__':
  sys.exit(main())

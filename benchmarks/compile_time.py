"""Compile time of `jaxsim.step` against tree depth: n-link chains, n = 10 ... 200.

Tree passes are level scans and dense masked products, never Python loops over bodies, so the
compiled program's size, and with it compile time, should not grow with depth. Prints a table and
the 200-link / 10-link ratio (target: at most 2x).

  python benchmarks/compile_time.py [--sizes 10 50 100 200] [--joint hinge|ball] [--batch 1]

With --models (dm_control suite names, or MJCF paths) it times `step` per model instead and
counts the program's size (jaxpr equations, StableHLO lines), which is what compile time
follows; --fast-compile applies `jaxsim.configure_cpu(fast_compile=True)` as the tests do:

  python benchmarks/compile_time.py --models finger quadruped humanoid --fast-compile
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import jaxsim  # noqa: E402
from models.chain import chain_xml  # noqa: E402


def measure(n: int, joint: str, batch: int) -> dict[str, float]:
  """Seconds to trace+lower and to compile step (vmapped when batch > 1), and to run it."""
  m = jaxsim.load_string(chain_xml(n, joint=joint))
  d = jaxsim.make_data(m)
  fn = jaxsim.step
  if batch > 1:
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)), d)
    fn = jax.vmap(jaxsim.step, in_axes=(None, 0))
  t0 = time.perf_counter()
  lowered = jax.jit(fn).lower(m, d)
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  out = compiled(m, d)
  jax.block_until_ready(out)
  t3 = time.perf_counter()
  reps = 20
  for _ in range(reps):
    out = compiled(m, out)
  jax.block_until_ready(out)
  t4 = time.perf_counter()
  return {
    'n': n,
    'nv': m.nv,
    'lower_s': t1 - t0,
    'compile_s': t2 - t1,
    'first_run_s': t3 - t2,
    'step_ms': (t4 - t3) / reps * 1e3,
  }


def _equations(jaxpr) -> int:
  """Equations of a jaxpr, those of the jaxprs inside it (loop bodies, branches) included."""
  n = 0
  for eqn in jaxpr.eqns:
    n += 1
    for p in eqn.params.values():
      for q in p if isinstance(p, (list, tuple)) else [p]:
        inner = getattr(q, 'jaxpr', q)
        if hasattr(inner, 'eqns'):
          n += _equations(inner)
  return n


def _model_path(name: str) -> str:
  if os.path.exists(name):
    return name
  import dm_control  # optional: only for suite names

  return os.path.join(os.path.dirname(dm_control.__file__), 'suite', f'{name}.xml')


def measure_model(name: str, batch: int) -> dict:
  """Program size and seconds to trace+lower and compile jit(step) of one model."""
  m = jaxsim.load(_model_path(name))
  d = jaxsim.make_data(m)
  fn = lambda d: jaxsim.step(m, d)  # noqa: E731
  if batch > 1:
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)), d)
    fn = jax.vmap(fn)
  eqns = _equations(jax.make_jaxpr(fn)(d).jaxpr)
  jax.clear_caches()
  t0 = time.perf_counter()
  lowered = jax.jit(fn).lower(d)
  t1 = time.perf_counter()
  lowered.compile()
  t2 = time.perf_counter()
  hlo = lowered.as_text().count('\n')
  return {'name': name, 'eqns': eqns, 'hlo': hlo, 'lower_s': t1 - t0, 'compile_s': t2 - t1}


def main_models(args) -> int:
  print('| model | jaxpr equations | StableHLO lines | trace+lower (s) | compile (s) |')
  print('|---|---:|---:|---:|---:|')
  for name in args.models:
    r = measure_model(name, args.batch)
    print(
      f'| {r["name"]} | {r["eqns"]:,} | {r["hlo"]:,} | {r["lower_s"]:.1f} | {r["compile_s"]:.1f} |',
      flush=True,
    )
  return 0


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--sizes', type=int, nargs='+', default=[10, 50, 100, 200])
  parser.add_argument('--joint', choices=('hinge', 'ball'), default='hinge')
  parser.add_argument('--batch', type=int, default=1)
  parser.add_argument('--float64', action='store_true')
  parser.add_argument('--models', nargs='+', help='suite model names or MJCF paths')
  parser.add_argument('--fast-compile', action='store_true', help='configure_cpu(fast_compile)')
  args = parser.parse_args(argv)
  if args.fast_compile:
    jaxsim.configure_cpu(fast_compile=True)
  if args.float64:
    jax.config.update('jax_enable_x64', True)
  if args.models:
    print(f'jax {jax.__version__} on {jax.devices()[0].platform}; jit(step), batch {args.batch}')
    return main_models(args)
  print(
    f'jax {jax.__version__} on {jax.devices()[0].platform}; {args.joint} chains, '
    f'batch {args.batch}, {"float64" if args.float64 else "float32"}'
  )
  print('| links | nv | trace+lower (s) | compile (s) | step (ms) |')
  print('|---:|---:|---:|---:|---:|')
  rows = []
  for n in args.sizes:
    r = measure(n, args.joint, args.batch)
    rows.append(r)
    print(
      f'| {r["n"]} | {r["nv"]} | {r["lower_s"]:.2f} | {r["compile_s"]:.2f} | {r["step_ms"]:.3f} |',
      flush=True,
    )
  first, last = rows[0], rows[-1]
  ratio = (last['lower_s'] + last['compile_s']) / (first['lower_s'] + first['compile_s'])
  print(f'compile-time ratio {last["n"]} links / {first["n"]} links: {ratio:.2f}x (target <= 2x)')
  return 0


if __name__ == '__main__':
  sys.exit(main())

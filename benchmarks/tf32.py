"""A GPU's TensorFloat-32 matmuls, emulated on the CPU: Newton trips per step with and without them.

JAX's default precision lets an NVIDIA GPU (Ampere and later) compute float32 matrix products
from inputs rounded to 10 mantissa bits (TF32). The CPU computes them exactly, so a solver that
stalls on a GPU looks fine here. This script rounds the float32 inputs of every dot_general that
is traced at the default precision to TF32 (round to nearest, as the tensor cores do), steps a
batch from in-contact states (benchmarks/_states.py) and prints, per step, the Newton trips
(max over worlds, mean) and the worlds at the iteration cap, for the engine as it is (its matmuls
at full precision, jaxsim._src.math.full_precision) and, with --default, for the engine traced at
JAX's default precision, i.e. what a GPU did before 2026-11-28.

  python benchmarks/tf32.py ball_in_cup --batch 4096 --steps 6             # the engine as is
  python benchmarks/tf32.py ball_in_cup --batch 4096 --steps 6 --default   # as on a GPU before

It patches a JAX internal (jax._src.lax.lax.dot_general, looked up when jnp's products are
traced): a measuring tool, not part of the engine.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.lax import lax as lax_internal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _states import cached_states, ctrl_bounds  # noqa: E402
from throughput import HERE, resolve_model  # noqa: E402

sys.path.insert(0, os.path.dirname(HERE))
import jaxsim  # noqa: E402
from jaxsim._src import math as jmath  # noqa: E402
from jaxsim._src.enums import DisableBit  # noqa: E402

_DOT = lax_internal.dot_general
CALLS = {'tf32': 0, 'full': 0}


def to_tf32(x: jax.Array) -> jax.Array:
  """float32 rounded to TF32's 10 mantissa bits (to nearest); other dtypes unchanged."""
  if x.dtype != jnp.float32:
    return x
  bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
  bits = (bits + jnp.uint32(0x1000)) & jnp.uint32(0xFFFFE000)
  return jax.lax.bitcast_convert_type(bits, jnp.float32)


def tf32_dot_general(lhs, rhs, dimension_numbers, precision=None, *args, **kwargs):
  """lax.dot_general whose float32 inputs are TF32 where the precision is the default."""
  p = lax_internal.canonicalize_precision(precision)
  default = (lax_internal.Precision.DEFAULT, lax_internal.Precision.DEFAULT)
  if p is None or p == default:
    CALLS['tf32'] += 1
    lhs, rhs = to_tf32(jnp.asarray(lhs)), to_tf32(jnp.asarray(rhs))
  else:
    CALLS['full'] += 1
  return _DOT(lhs, rhs, dimension_numbers, precision, *args, **kwargs)


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('model', help='suite model name or MJCF file')
  p.add_argument('--batch', type=int, default=4096)
  p.add_argument('--steps', type=int, default=6)
  p.add_argument('--default', action='store_true', help="trace the engine at JAX's default")
  p.add_argument('--exact', action='store_true', help='no TF32 emulation (the CPU as it is)')
  args = p.parse_args(argv)
  if not args.exact:
    lax_internal.dot_general = tf32_dot_general
  if args.default:
    jmath.MATMUL_PRECISION = None  # read by full_precision when the engine is traced
  _, path = resolve_model(args.model)
  b = args.batch
  with np.load(cached_states(path, b, os.path.join('/tmp', 'jaxsim-gpu-states'))) as f:
    start = {k: jnp.asarray(f[k], jnp.float32) for k in ('qpos', 'qvel', 'act')}
  m = jaxsim.load(path)
  m = jaxsim.with_options(m, disableflags=m.opt.disableflags | DisableBit.SENSOR)
  d = jax.tree_util.tree_map(lambda x: jnp.repeat(x[None], b, 0), jaxsim.make_data(m))
  d = d.replace(**start)
  lo, hi = ctrl_bounds(m.actuator_ctrlrange, m.actuator_ctrllimited)
  rng = np.random.default_rng(0)
  vstep = jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0)))
  mode = 'exact' if args.exact else 'TF32 emulated'
  engine = "JAX's default" if args.default else 'full (the engine as is)'
  print(f'{args.model} batch {b}: matmuls {mode}, engine precision {engine}')
  print(f'iterations {m.opt.iterations}, ls_iterations {m.opt.ls_iterations}')
  capped = 0
  for t in range(args.steps):
    d = vstep(m, d.replace(ctrl=jnp.asarray(rng.uniform(lo, hi, (b, m.nu)), jnp.float32)))
    niter = np.asarray(d.solver_niter)
    at_cap = int((niter >= m.opt.iterations).sum())
    capped += at_cap
    print(
      f'step {t}: Newton trips max {niter.max()}, mean {niter.mean():.2f}; line-search evals '
      f'max {np.asarray(d.solver_neval).max()}; worlds at the cap {at_cap}'
    )
  print(f'worlds at the cap over {args.steps} steps: {capped}; dot_generals traced: {CALLS}')
  return 0


if __name__ == '__main__':
  sys.exit(main())

"""Memory per world of a batched step against model size: humanoid copies in one scene.

  python benchmarks/memory.py [--copies 1 2 4 8] [--jacobian auto dense] [--batch 64]

For each constraint-Jacobian form (MJCF <option jacobian>: auto, dense, sparse) and each number
of dm_control humanoid copies (models/bench/humanoid_copies.py), compiles jit(vmap(step)) at the
batch (float32, sensors off, as the throughput benchmark) and prints XLA's memory analysis per
world: arguments + outputs + temporaries (the throughput table's mem/world), its output (Data)
and temporary parts, and the ratio to linear growth (value / (copies x value at the first
count)). Compile only: the figures do not depend on the host's load.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from throughput import resolve_model  # noqa: E402

import jaxsim  # noqa: E402


def _copies_module():
  path = os.path.join(os.path.dirname(HERE), 'models', 'bench', 'humanoid_copies.py')
  spec = importlib.util.spec_from_file_location('humanoid_copies', path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def measure(xml: str, jacobian: str, batch: int) -> dict:
  """XLA memory per world (bytes) of jit(vmap(step)) for the scene xml."""
  m = jaxsim.load_string(xml)
  m = jaxsim.with_options(
    m, jacobian=jacobian, disableflags=m.opt.disableflags | jaxsim.DisableBit.SENSOR
  )
  d = jaxsim.make_data(m)
  db = jax.tree.map(lambda x: jnp.broadcast_to(x, (batch,) + x.shape), d)
  compiled = jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0))).lower(m, db).compile()
  mem = compiled.memory_analysis()
  total = (
    mem.argument_size_in_bytes
    + mem.output_size_in_bytes
    + mem.temp_size_in_bytes
    - mem.alias_size_in_bytes
  )
  return {
    'nv': m.nv,
    'width': m.layout.efc_width,
    'total': total / batch,
    'out': mem.output_size_in_bytes / batch,
    'temp': mem.temp_size_in_bytes / batch,
  }


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument('--copies', type=int, nargs='+', default=[1, 2, 4, 8])
  ap.add_argument('--jacobian', nargs='+', default=['auto', 'dense'])
  ap.add_argument('--batch', type=int, default=64)
  args = ap.parse_args(argv)
  hc = _copies_module()
  _, src = resolve_model('humanoid')
  print('| jacobian | copies | nv | efc_J | mem/world | Data | temporaries | x linear |')
  print('|---|---|---|---|---|---|---|---|')
  for jac in args.jacobian:
    base = None
    for n in args.copies:
      r = measure(hc.copies_xml(n, src), jac, args.batch)
      base = base or r['total'] / n
      form = f'compact {r["width"]}' if r['width'] else 'dense'
      kib = lambda x: f'{x / 1024:,.1f} KiB'  # noqa: E731
      print(
        f'| {jac} | {n} | {r["nv"]} | {form} | {kib(r["total"])} | {kib(r["out"])} | '
        f'{kib(r["temp"])} | {r["total"] / (n * base):.2f} |',
        flush=True,
      )
  return 0


if __name__ == '__main__':
  sys.exit(main())

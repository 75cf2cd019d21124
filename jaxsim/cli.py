"""The `jaxsim` command: info, simulate, bench. Thin: everything goes through the public API."""

from __future__ import annotations

import argparse
import sys

import numpy as np

import jaxsim

_INTEGRATORS = {0: 'Euler', 1: 'RK4', 2: 'implicit', 3: 'implicitfast', 100: 'variational'}
_SOLVERS = {1: 'CG', 2: 'Newton'}
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
  unsupported = list(model.unsupported)
  if unsupported:
    lines.append('not yet simulated by jaxsim:')
    lines.extend(f'  - {u}' for u in unsupported)
  else:
    lines.append('not yet simulated by jaxsim: none')
  return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(prog='jaxsim', description=__doc__)
  sub = parser.add_subparsers(dest='command', required=True)
  p_info = sub.add_parser('info', help='counts, options and unsupported features of a model')
  p_info.add_argument('model')
  args = parser.parse_args(argv)
  try:
    model = jaxsim.load(args.model)
  except jaxsim.ModelError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  if args.command == 'info':
    print(info(model, args.model))
  return 0


if __name__ == '__main__':
  sys.exit(main())

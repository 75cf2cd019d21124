"""Linear-time variational integrator (RIQN + DRNEA) against dense Newton, and energy behaviour.

Prints a table like Lee et al.'s (WAFR 2016): per-step time of RIQN+DRNEA and of dense Newton on
the same DEL residual for chains of 10, 100 and 1000 dofs, the speed-up at each size and the fitted
exponent of cost in n; then writes an energy plot (PNG) of variational vs Euler vs RK4 over 1e5
steps of a 10-link pendulum chain at h = 1 ms.

The chains are serial hinge chains: n/2 capsule links with two hinges each (y then x); MJCF limits
nesting depth, so the 1000-dof chain has 333 links of three hinges (y, x, z) and one slide.

  python benchmarks/variational.py [--quick] [--out DIR] [--sizes 10 100 1000] [--no-plot]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

jax.config.update('jax_enable_x64', True)

from variational_dense import newton_step_with_info  # noqa: E402

import jaxsim  # noqa: E402
from jaxsim._src import variational as vi  # noqa: E402
from models.chain import chain_xml  # noqa: E402


def universal_chain_xml(ndof: int, link: float = 0.1, bend: float = 0.05) -> str:
  """A hanging serial chain of capsule links on two hinges each (y then x), no damping.

  MJCF nests at most 496 bodies, so past 992 dofs each link has three hinges (y, x, z) and the top
  link takes the remainder as horizontal slides: 1000 dofs are 333 links, 1 slide + 999 hinges.
  """
  k = 2 if ndof <= 992 else 3
  nlinks, rem = divmod(ndof, k)
  if rem > 2:
    raise ValueError(f'cannot build a {ndof}-dof chain')
  axes = ('0 1 0', '1 0 0', '0 0 1')[:k]
  out = ['<mujoco model="uchain"><option timestep="0.001"/>']
  out.append('<default><geom type="capsule" size="0.02" contype="0" conaffinity="0"/></default>')
  out.append('<worldbody>')
  for i in range(nlinks):
    out.append(f'<body pos="0 0 {-link if i else 0}">')
    if i == 0:
      out.append(''.join(f'<joint type="slide" axis="{a}"/>' for a in ('1 0 0', '0 1 0')[:rem]))
    out.append(''.join(f'<joint type="hinge" axis="{a}"/>' for a in axes))
    out.append(f'<geom fromto="0 0 0 0 0 {-link}"/>')
  out.append('</body>' * nlinks)
  qpos = ['0'] * rem + [str(bend)] * (ndof - rem)
  out.append(f'</worldbody><keyframe><key qpos="{" ".join(qpos)}"/></keyframe>')
  out.append('</mujoco>')
  return '\n'.join(out)


def _time_steps(step_with_info, m, d, steps: int, repeats: int):
  """(seconds per step, compile seconds, mean iterations) of a jitted scan of `steps` steps."""

  def run(d):
    def body(d, _):
      d, info = step_with_info(m, d)
      return d, info['iterations']

    return jax.lax.scan(body, d, None, length=steps)

  fn = jax.jit(run)
  t = time.perf_counter()
  compiled = fn.lower(d).compile()
  compile_s = time.perf_counter() - t
  best, its = np.inf, None
  for _ in range(repeats):
    t = time.perf_counter()
    d2, its = jax.block_until_ready(compiled(d))
    best = min(best, time.perf_counter() - t)
  return best / steps, compile_s, float(np.mean(its))


def scaling(sizes, quick: bool, dense: bool = True):
  rows = []
  for n in sizes:
    m = jaxsim.load_string(universal_chain_xml(n))
    d = jaxsim.make_data(m).replace(qpos=jnp.asarray(m.key_qpos[0]))
    steps = max(5, min(200, 20000 // n)) if not quick else max(3, min(50, 2000 // n))
    riqn = _time_steps(vi.step_with_info, m, d, steps, 3)
    row = {'n': n, 'riqn': riqn}
    if dense:
      dsteps = max(2, min(50, 2000 // n)) if not quick else max(2, min(10, 200 // n))
      row['dense'] = _time_steps(newton_step_with_info, m, d, dsteps, 2 if n >= 1000 else 3)
    rows.append(row)
    r = row['riqn']
    msg = f'  n={n:5d}: RIQN {r[0] * 1e3:9.3f} ms/step ({r[2]:.2f} it, compile {r[1]:.1f}s)'
    if dense:
      nd = row['dense']
      msg += f'   Newton {nd[0] * 1e3:9.3f} ms/step ({nd[2]:.2f} it, compile {nd[1]:.1f}s)'
    print(msg, flush=True)
  return rows


def print_table(rows, dense: bool = True):
  print()
  print('| DOF  | RIQN+DRNEA ms/step | iters | dense Newton ms/step | iters | speed-up |')
  print('|------|--------------------|-------|----------------------|-------|----------|')
  for r in rows:
    t, _, it = r['riqn']
    if dense:
      td, _, itd = r['dense']
      print(f'| {r["n"]:4d} | {t * 1e3:18.3f} | {it:5.2f} | {td * 1e3:20.3f} | {itd:5.2f} | '
            f'{td / t:7.1f}x |')  # fmt: skip
    else:
      print(f'| {r["n"]:4d} | {t * 1e3:18.3f} | {it:5.2f} |')
  n = np.array([r['n'] for r in rows], float)
  if len(n) > 1:
    k = np.polyfit(np.log(n), np.log([r['riqn'][0] for r in rows]), 1)[0]
    print(f'\nfitted exponent of cost in n: RIQN+DRNEA {k:.2f}', end='')
    if dense:
      kd = np.polyfit(np.log(n), np.log([r['dense'][0] for r in rows]), 1)[0]
      print(f', dense Newton {kd:.2f}', end='')
    print()
    compile_s = [r['riqn'][1] for r in rows]
    print('RIQN compile seconds by size: ' + ', '.join(f'{c:.1f}' for c in compile_s))
    return k
  return None


def energy_curves(steps: int, every: int):
  """Relative energy (E - E0) / (E0 - E_rest) of variational, Euler and RK4 on the 10-link chain."""
  m = jaxsim.load_string(chain_xml(10, damping=0.0, initial_bend=0.3, timestep=0.001))
  d0 = jaxsim.make_data(m).replace(qpos=jnp.full(m.nq, 0.3))
  rest = float(vi.potential_energy(m, jaxsim.make_data(m)))

  def continuous(m, d):
    return vi.kinetic_energy(m, d) + vi.potential_energy(m, d)

  curves = {}
  for name in ('variational', 'euler', 'rk4'):
    if name == 'variational':
      one, energy = (lambda d: vi.step(m, d)), vi.energy
    else:
      kind = jaxsim.IntegratorType.EULER if name == 'euler' else jaxsim.IntegratorType.RK4
      mi = m.replace(opt=m.opt.replace(integrator=int(kind)))
      one, energy = (lambda d, mi=mi: jaxsim.step(mi, d)), continuous

    def block(d, _, one=one):
      d = jax.lax.scan(lambda d, _: (one(d), None), d, None, length=every)[0]
      return d, (d.qpos, d.qvel)

    t = time.perf_counter()
    qpos, qvel = jax.block_until_ready(
      jax.jit(lambda d: jax.lax.scan(block, d, None, length=steps // every)[1])(d0)
    )
    wall = time.perf_counter() - t
    e = jax.jit(jax.vmap(lambda q, v, en=energy: en(m, d0.replace(qpos=q, qvel=v))))(qpos, qvel)
    e0 = float(energy(m, d0))
    rel = (np.asarray(e) - e0) / (e0 - rest)
    tt = np.arange(1, len(rel) + 1) * every * 1e-3
    drift = np.polyfit(tt, rel, 1)[0] * tt[-1]
    curves[name] = (tt, rel)
    print(
      f'  {name:12s} band {rel.max() - rel.min():.2e}  fitted drift {drift:+.2e}  '
      f'final {rel[-1]:+.2e}  ({wall:.1f}s incl. compile)',
      flush=True,
    )
  return curves


def plot(curves, path: str):
  try:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
  except ImportError:
    print('matplotlib is not installed: pip install matplotlib (no plot written)')
    return
  fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7))
  for name, (t, rel) in curves.items():
    top.plot(t, 100 * rel, label=name, lw=0.8)
    if name != 'euler':
      bottom.plot(t, 100 * rel, label=name, lw=0.8)
  t, rel = curves['euler']
  bad = np.flatnonzero(~np.isfinite(rel) | (np.abs(rel) > 0.6))
  if bad.size:
    top.annotate(f'Euler diverges at {t[bad[0]]:.0f} s', (t[bad[0]] + 2, 50))
  top.set_ylim(-5, 60)
  top.set_title('10-link pendulum chain, h = 1 ms')
  bottom.set_title('variational and RK4 only')
  for ax in (top, bottom):
    ax.set_xlabel('time (s)')
    ax.set_ylabel('energy change (% of released)')
    ax.legend()
    ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  print(f'wrote {path}')


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--quick', action='store_true', help='fewer steps and sizes 10, 100')
  p.add_argument('--out', default='benchmarks/out', help='folder for the energy plot')
  p.add_argument('--sizes', type=int, nargs='+', default=None)
  p.add_argument('--no-plot', action='store_true')
  p.add_argument('--no-dense', action='store_true')
  p.add_argument('--no-scaling', action='store_true', help='only the energy plot')
  a = p.parse_args(argv)
  sizes = a.sizes or ([10, 100] if a.quick else [10, 100, 1000])
  print(f'jax {jax.__version__} on {jax.devices()[0].platform}, float64')
  if not a.no_scaling:
    print('per-step time, hinge chains, h = 1 ms, tolerance 1e-8 (velocity), iterations after the')
    print('semi-implicit Euler initial guess:')
    rows = scaling(sizes, a.quick, dense=not a.no_dense)
    print_table(rows, dense=not a.no_dense)
  if not a.no_plot:
    steps = 10_000 if a.quick else 100_000
    print(f'\nenergy over {steps} steps, 10-link pendulum chain, h = 1 ms:')
    curves = energy_curves(steps, 10)
    os.makedirs(a.out, exist_ok=True)
    plot(curves, os.path.join(a.out, 'energy.png'))
  return 0


if __name__ == '__main__':
  raise SystemExit(main())

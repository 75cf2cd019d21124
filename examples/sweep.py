"""A parameter sweep by vmap over a batch of models: how far a box slides, by friction and speed.

A flat box on a floor (models/examples/slide.xml) is launched along x with an initial speed v0 and
slides until friction stops it. One jitted function simulates every (friction, speed) pair of a
grid at once: `jax.vmap` over a batch of Models in which only `geom_friction` is batched (the
in_axes Model holds 0 for that leaf and None for every other one; counts, types and solver
settings are static pytree structure, so the batch is compiled once) and over a batch of initial
velocities. The outcome is compared with Coulomb's law for a block, distance = v0^2 / (2 mu g).

  python examples/sweep.py [--quick] [--out DIR]

Writes DIR/sweep.png (heatmap of the sliding distance over the grid with Coulomb's contours, and
distance against friction for each speed) and DIR/metrics.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, '..', 'models', 'examples', 'slide.xml')


def batch_axes(m: jaxsim.Model, *batched: str) -> jaxsim.Model:
  """in_axes for jax.vmap over Models: 0 for the named fields, None for every other leaf."""
  axes = jax.tree_util.tree_map(lambda _: None, m)
  return axes.replace(**{name: 0 for name in batched})


def make_sweep(m: jaxsim.Model, steps: int):
  """sweep(frictions (B, ngeom, 3), v0 (B,)) -> (distance (B,), stop time (B,)), one compile."""
  d0 = jaxsim.make_data(m)
  dt = m.opt.timestep

  def slide(m, v0):
    d = d0.replace(qvel=d0.qvel.at[0].set(v0))

    def body(d, _):
      d = jaxsim.step(m, d)
      return d, d.qvel[0]

    d, vx = jax.lax.scan(body, d, None, length=steps)
    # first step at which the box has (nearly) stopped
    moving = jnp.abs(vx) > 1e-3
    stop = jnp.where(moving.any(), (steps - jnp.argmax(moving[::-1])) * dt, 0.0)
    return d.qpos[0] - d0.qpos[0], stop

  axes = batch_axes(m, 'geom_friction')

  @jax.jit
  def sweep(friction, v0):
    mb = m.replace(geom_friction=friction)
    return jax.vmap(slide, in_axes=(axes, 0))(mb, v0)

  return sweep


def monotone_fraction(a: np.ndarray, axis: int, sign: int) -> float:
  """Fraction of neighbouring grid pairs along `axis` whose outcome changes with `sign`."""
  diff = np.diff(a, axis=axis) * sign
  return float(np.mean(diff > 0))


def plot(out: str, mu, v0, dist, coulomb) -> str:
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.3))
  from matplotlib.colors import LogNorm

  im = ax.pcolormesh(mu, v0, dist.T, shading='nearest', cmap='viridis', norm=LogNorm())
  fig.colorbar(im, ax=ax, label='sliding distance (m)')
  levels = np.geomspace(coulomb.min(), coulomb.max(), 7)[1:-1]
  cs = ax.contour(mu, v0, coulomb.T, levels=levels, colors='w', linestyles='--', linewidths=1)
  ax.clabel(cs, fmt='%.2f m', fontsize=7)
  ax.set_xlabel('friction coefficient $\\mu$')
  ax.set_ylabel('initial speed $v_0$ (m/s)')
  ax.set_title('sliding distance: jaxsim (colour), Coulomb $v_0^2/2\\mu g$ (dashed)')
  rows = np.unique(np.linspace(0, len(v0) - 1, 4).round().astype(int))
  for k, i in enumerate(rows):
    ax2.plot(mu, dist[:, i], 'o', color=f'C{k}', label=f'$v_0$ = {v0[i]:.2f} m/s')
    ax2.plot(mu, coulomb[:, i], '-', color=f'C{k}', alpha=0.6)
  ax2.set_xlabel('friction coefficient $\\mu$')
  ax2.set_ylabel('sliding distance (m)')
  ax2.set_yscale('log')
  ax2.set_title('simulated (dots) against Coulomb (lines)')
  ax2.legend(fontsize=8)
  ax2.grid(True, which='both', alpha=0.3)
  fig.tight_layout()
  path = os.path.join(out, 'sweep.png')
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true', help='a coarser grid (CI)')
  parser.add_argument('--out', default='sweep_out', help='folder for figures and metrics')
  parser.add_argument('--grid', type=int, default=None, help='points per parameter')
  args = parser.parse_args(argv)
  n = args.grid or (6 if args.quick else 16)
  os.makedirs(args.out, exist_ok=True)

  m = jaxsim.load(MODEL)
  g = float(-np.asarray(m.opt.gravity)[2])
  mu = np.geomspace(0.2, 1.0, n)
  v0 = np.linspace(0.5, 2.5, n)
  # long enough for the slowest stop, v0 / (mu g), with a margin
  steps = int(np.ceil(1.2 * v0.max() / (mu.min() * g) / float(m.opt.timestep)))
  mu_b, v0_b = (x.ravel() for x in np.meshgrid(mu, v0, indexing='ij'))
  # every geom (floor and box) gets the swept sliding friction; contacts take the larger of two
  friction = np.broadcast_to(np.asarray(m.geom_friction), (len(mu_b), m.ngeom, 3)).copy()
  friction[:, :, 0] = mu_b[:, None]
  dtype = m.qpos0.dtype

  sweep = make_sweep(m, steps)
  t0 = time.perf_counter()
  compiled = sweep.lower(jnp.asarray(friction, dtype), jnp.asarray(v0_b, dtype)).compile()
  compile_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  dist, stop = compiled(jnp.asarray(friction, dtype), jnp.asarray(v0_b, dtype))
  dist, stop = np.asarray(dist).reshape(n, n), np.asarray(stop).reshape(n, n)
  run_s = time.perf_counter() - t0
  print(
    f'{n * n} models (mu x v0 grid of {n} x {n}), {steps} steps each: compiled once in '
    f'{compile_s:.1f} s, ran in {run_s:.1f} s'
  )

  coulomb = v0[None, :] ** 2 / (2 * mu[:, None] * g)
  rel = dist / coulomb - 1
  metrics = {
    'mu': mu.tolist(),
    'v0': v0.tolist(),
    'distance': dist.tolist(),
    'stop_time': stop.tolist(),
    # distance falls with friction (axis 0) and grows with speed (axis 1)
    'monotone_in_friction': monotone_fraction(dist, 0, -1),
    'monotone_in_speed': monotone_fraction(dist, 1, +1),
    'coulomb_relative_error_median': float(np.median(np.abs(rel))),
    'coulomb_relative_error_max': float(np.max(np.abs(rel))),
    'all_stopped': bool(np.all(stop < steps * float(m.opt.timestep))),
  }
  for i in np.unique(np.linspace(0, n - 1, 3).round().astype(int)):
    print(
      f'mu = {mu[i]:.2f}: distance '
      + '  '.join(f'{d:.3f}' for d in dist[i])
      + f' m for v0 = {v0[0]:.1f} .. {v0[-1]:.1f} m/s'
    )
  print(
    f'distance falls with friction in {metrics["monotone_in_friction"]:.0%} and grows with speed '
    f'in {metrics["monotone_in_speed"]:.0%} of neighbouring grid pairs; median deviation from '
    f'Coulomb {metrics["coulomb_relative_error_median"]:.1%}'
  )
  metrics['files'] = [plot(args.out, mu, v0, dist, coulomb)]
  with open(os.path.join(args.out, 'metrics.json'), 'w') as f:
    json.dump(metrics, f, indent=1)
  print(f'wrote {", ".join(metrics["files"])}')
  return metrics


if __name__ == '__main__':
  main()

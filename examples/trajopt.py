"""Trajectory optimisation through contacts: push a box onto a target by gradient descent.

A pusher with two ball tips on two actuated slide joints (models/examples/push.xml) must push a
box (it slides and turns, but cannot tip) across a floor with friction so that the box comes to
rest on a target 0.37 m away and off the line it starts on. The pusher's forces are a few knots
per axis, linearly interpolated in time and squashed into the motors' range by tanh. The loss is
the box's squared distance to the target at the end of the horizon plus its squared final
velocity times (0.1 s)^2; its gradient flows through jaxsim.step: the pusher-box contacts, the
box-floor friction and the constraint solver. The initial guess pushes straight at the target
with a constant force for half the horizon and misses; Adam with a decaying step size then drives
the loss down by orders of magnitude (the best iterate is kept: contacts make the loss rough).

  python examples/trajopt.py [--quick] [--out DIR]

Writes DIR/loss.png (loss per iteration, log scale), DIR/trajectory.png (top view of the box and
pusher paths before and after, and the optimised forces), DIR/traj.npz (the optimised trajectory
in the format of `jaxsim simulate --out`, for examples/render.py) and DIR/metrics.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax

jax.config.update('jax_enable_x64', True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxsim  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, '..', 'models', 'examples', 'push.xml')
# qpos: pusher x, y, then box x, y, z, yaw
BOX_Q, BOX_V = slice(2, 4), slice(2, 4)


def controls(theta: jax.Array, steps: int, umax: jax.Array) -> jax.Array:
  """Motor commands (steps, nu) from knots theta (K, nu): linear in time, tanh into the range."""
  k = theta.shape[0]
  t = jnp.linspace(0.0, k - 1.0, steps)
  u = jax.vmap(lambda c: jnp.interp(t, jnp.arange(k, dtype=t.dtype), c), 1, 1)(theta)
  return umax * jnp.tanh(u)


def make_loss(m: jaxsim.Model, steps: int, target: jax.Array):
  """loss(theta) -> (scalar, qpos (steps, nq)): final distance to target and velocity, squared."""
  d0 = jaxsim.make_data(m)
  umax = jnp.asarray(m.actuator_ctrlrange)[:, 1]

  def loss(theta):
    def body(d, u):
      d = jaxsim.step(m, d.replace(ctrl=u))
      return d, d.qpos

    d, qpos = jax.lax.scan(body, d0, controls(theta, steps, umax))
    err = d.qpos[BOX_Q] - target
    vel = d.qvel[BOX_V]
    return err @ err + 0.01 * vel @ vel, qpos

  return loss


def optimise(loss_and_grad, theta, iterations: int, lr: float):
  """Adam with an exponentially decaying step (lr -> lr / 30); returns the best iterate."""
  opt = optax.adam(optax.exponential_decay(lr, iterations, 1 / 30))
  state = opt.init(theta)
  losses, best = [], (np.inf, theta, None)
  for i in range(iterations):
    (value, qpos), grad = loss_and_grad(theta)
    value = float(value)
    if not np.isfinite(value) or not np.all(np.isfinite(np.asarray(grad))):
      raise FloatingPointError(f'non-finite loss or gradient at iteration {i}: loss {value}')
    losses.append(value)
    if value < best[0]:
      best = (value, theta, qpos)
    if i % 20 == 0 or i == iterations - 1:
      print(f'iteration {i:4d}  loss {value:.3e}', flush=True)
    updates, state = opt.update(grad, state)
    theta = optax.apply_updates(theta, updates)
  return np.array(losses), best


def plot(out: str, losses, m, q_init, q_best, u_best, target, dt: float) -> list[str]:
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  from matplotlib.patches import Circle, Polygon

  fig, ax = plt.subplots(figsize=(5.5, 4))
  ax.semilogy(losses, color='C0', lw=1, label='loss')
  ax.semilogy(np.minimum.accumulate(losses), color='C1', lw=2, label='best so far')
  ax.legend()
  ax.set_xlabel('iteration')
  ax.set_ylabel('loss (m$^2$)')
  ax.set_title(f'push a box to a target: loss fell {losses[0] / losses.min():.3g}x')
  ax.grid(True, which='both', alpha=0.3)
  fig.tight_layout()
  loss_png = os.path.join(out, 'loss.png')
  fig.savefig(loss_png, dpi=120)
  plt.close(fig)

  half = np.asarray(m.geom_size)[m.name2id('geom', 'box'), :2]
  corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * half
  pusher0 = np.asarray(m.body_pos)[m.name2id('body', 'pusher'), :2]

  def box_outline(q):
    c, s = np.cos(q[5]), np.sin(q[5])
    return corners @ np.array([[c, s], [-s, c]]) + q[2:4]

  fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={'width_ratios': [1.4, 1]})
  for q, label, colour, alpha in (
    (q_init, 'initial guess', 'C7', 0.5),
    (q_best, 'optimised', 'C1', 1),
  ):
    ax.plot(q[:, 2], q[:, 3], color=colour, alpha=alpha, lw=2, label=f'box, {label}')
    ax.plot(
      q[:, 0] + pusher0[0],
      q[:, 1] + pusher0[1],
      '--',
      color=colour,
      alpha=alpha,
      lw=1,
      label=f'pusher, {label}',
    )
    for k in np.linspace(0, len(q) - 1, 5).astype(int):
      ax.add_patch(
        Polygon(box_outline(q[k]), closed=True, fill=False, ec=colour, alpha=alpha * 0.6)
      )
  ax.add_patch(
    Polygon(
      box_outline(np.zeros(6)),
      closed=True,
      fill=False,
      ec='k',
      lw=1.5,
      label='box at start',
    )
  )
  for g in ('tip_left', 'tip_right'):
    g = m.name2id('geom', g)
    centre = q_best[-1, :2] + pusher0 + np.asarray(m.geom_pos)[g, :2]
    ax.add_patch(Circle(centre, float(m.geom_size[g, 0]), fc='C0', alpha=0.6))
  ax.plot(*target, marker='*', ms=16, color='C2', ls='none', label='target')
  ax.set_aspect('equal')
  ax.set_xlabel('x (m)')
  ax.set_ylabel('y (m)')
  ax.set_title('top view')
  ax.legend(fontsize=7, loc='lower right')
  ax.grid(alpha=0.3)
  t = np.arange(1, len(u_best) + 1) * dt
  ax2.plot(t, u_best[:, 0], label='force x')
  ax2.plot(t, u_best[:, 1], label='force y')
  ax2.set_xlabel('time (s)')
  ax2.set_ylabel('pusher force (N)')
  ax2.set_title('optimised controls')
  ax2.legend()
  ax2.grid(alpha=0.3)
  fig.tight_layout()
  traj_png = os.path.join(out, 'trajectory.png')
  fig.savefig(traj_png, dpi=120)
  plt.close(fig)
  return [loss_png, traj_png]


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--quick', action='store_true', help='fewer iterations (CI)')
  parser.add_argument('--out', default='trajopt_out', help='folder for figures and metrics')
  parser.add_argument('--iterations', type=int, default=None)
  parser.add_argument('--lr', type=float, default=None, help='Adam step (decays 30x)')
  parser.add_argument('--knots', type=int, default=8, help='control knots per actuator')
  parser.add_argument('--horizon', type=float, default=0.8, help='seconds')
  args = parser.parse_args(argv)
  iterations = args.iterations or (100 if args.quick else 300)
  lr = args.lr or (0.08 if args.quick else 0.05)
  os.makedirs(args.out, exist_ok=True)

  m = jaxsim.load(MODEL)
  dt = float(m.opt.timestep)
  steps = round(args.horizon / dt)
  # the target is where the model draws it
  target = np.asarray(m.geom_pos)[m.name2id('geom', 'target'), :2]
  loss = make_loss(m, steps, jnp.asarray(target))
  loss_and_grad = jax.jit(jax.value_and_grad(loss, has_aux=True))

  # initial guess: a constant push toward the target for the first half of the horizon
  umax = np.asarray(m.actuator_ctrlrange)[:, 1]
  direction = target / np.linalg.norm(target)
  theta = np.zeros((args.knots, m.nu))
  theta[: args.knots // 2] = np.arctanh(8.0 * direction / umax)
  theta = jnp.asarray(theta)

  t0 = time.perf_counter()
  (loss0, q_init), _ = loss_and_grad(theta)
  print(f'compiled loss and gradient ({steps} steps) in {time.perf_counter() - t0:.1f} s')
  t0 = time.perf_counter()
  losses, (best, theta_best, q_best) = optimise(loss_and_grad, theta, iterations, lr)
  run_s = time.perf_counter() - t0
  u_best = np.asarray(controls(theta_best, steps, jnp.asarray(umax)))
  q_init, q_best = np.asarray(q_init), np.asarray(q_best)
  err = float(np.linalg.norm(q_best[-1, BOX_Q] - target))
  ratio = losses[0] / best
  print(f'{iterations} iterations in {run_s:.1f} s')
  print(f'initial loss {losses[0]:.3e}  final loss {best:.3e}  ratio {ratio:.3g}x')
  print(f'box ends {err * 1000:.3g} mm from the target')

  files = plot(args.out, losses, m, q_init, q_best, u_best, target, dt)
  traj = os.path.join(args.out, 'traj.npz')
  np.savez_compressed(
    traj, qpos=q_best[None], time=(np.arange(1, steps + 1) * dt)[None], ctrl=u_best[None]
  )
  metrics = {
    'loss_initial': float(losses[0]),
    'loss_final': float(best),
    'ratio': float(ratio),
    'final_distance_m': err,
    'iterations': iterations,
    'losses': losses.tolist(),
    'files': files + [traj],
  }
  with open(os.path.join(args.out, 'metrics.json'), 'w') as f:
    json.dump(metrics, f, indent=1)
  print(f'wrote {", ".join(metrics["files"])}')
  return metrics


if __name__ == '__main__':
  main()

"""Render a trajectory headlessly: frames, a contact sheet and a GIF (MP4 too when ffmpeg is there).

Reads a trajectory written by `jaxsim simulate MODEL --out traj.npz` (qpos (B, T, nq), time (B, T);
`--world` picks one of the B worlds) or by examples/trajopt.py, or, with no trajectory given,
simulates MODEL in-process for `--seconds` with zero controls from qpos0 and a random initial
velocity (`--qvel-noise`). Geom frames come from jaxsim's kinematics and geoms are drawn as shaded
meshes by matplotlib's Agg canvas (jaxsim.render), so it runs without a screen, a GPU or MuJoCo.

  jaxsim simulate models/examples/push.xml --batch 1 --steps 200 --out traj.npz
  python examples/render.py models/examples/push.xml traj.npz [--quick] [--out DIR]
  python examples/render.py models/chain10.xml --seconds 2 --out DIR

Writes DIR/movie.gif (and DIR/movie.mp4 with ffmpeg on the PATH), DIR/frames.png (a contact sheet
of six frames), with --frames every frame as DIR/frame_NNNN.png, and DIR/metrics.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

import numpy as np

import jaxsim
from jaxsim import render

HERE = os.path.dirname(os.path.abspath(__file__))


def load_trajectory(path: str, world: int) -> tuple[np.ndarray, np.ndarray]:
  """qpos (T, nq) and time (T,) of one world of a `jaxsim simulate --out` file."""
  with np.load(path) as f:
    if 'qpos' not in f:
      raise SystemExit(f'error: {path} has no qpos array (has {", ".join(f.files)})')
    qpos = f['qpos']
    t = f['time'] if 'time' in f else None
  if qpos.ndim == 3:
    if not 0 <= world < qpos.shape[0]:
      raise SystemExit(f'error: --world {world} is out of range: {path} holds {qpos.shape[0]}')
    qpos = qpos[world]
    t = None if t is None else t[world]
  if t is None:
    t = np.arange(len(qpos), dtype=float)
  return qpos, np.asarray(t)


def simulate(
  m: jaxsim.Model, seconds: float, qvel_noise: float, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
  """qpos (T, nq) and time (T,) of a rollout with zero controls from qpos0 and a random qvel."""
  import jax
  import jax.numpy as jnp

  steps = max(1, round(seconds / float(m.opt.timestep)))
  d = jaxsim.make_data(m)
  qvel = np.random.default_rng(seed).normal(size=m.nv) * qvel_noise
  d = d.replace(qvel=jnp.asarray(qvel, d.qvel.dtype))
  ctrls = jnp.zeros((steps, m.nu), d.qpos.dtype)
  _, traj = jax.jit(jaxsim.rollout)(m, d, ctrls)
  return np.asarray(traj['qpos']), np.asarray(traj['time'])


def contact_sheet(frames: np.ndarray, path: str, count: int = 6) -> str:
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  pick = np.unique(np.linspace(0, len(frames) - 1, min(count, len(frames))).round().astype(int))
  cols = min(3, len(pick))
  rows = int(np.ceil(len(pick) / cols))
  h, w = frames.shape[1:3]
  fig, axes = plt.subplots(rows, cols, figsize=(cols * w / 100, rows * h / 100))
  for ax in np.atleast_1d(axes).ravel():
    ax.set_axis_off()
  for ax, k in zip(np.atleast_1d(axes).ravel(), pick):
    ax.imshow(frames[k])
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('model', nargs='?', default=os.path.join(HERE, '..', 'models', 'chain10.xml'))
  parser.add_argument('traj', nargs='?', help='.npz from `jaxsim simulate --out` (or trajopt)')
  parser.add_argument('--world', type=int, default=0, help='which world of a batched trajectory')
  parser.add_argument('--seconds', type=float, default=2.0, help='simulated time without TRAJ')
  parser.add_argument(
    '--qvel-noise', type=float, default=1.0, help='std of the initial qvel without TRAJ'
  )
  parser.add_argument('--out', default='render_out', help='folder for the images and movie')
  parser.add_argument('--fps', type=float, default=25.0)
  parser.add_argument('--max-frames', type=int, default=None)
  parser.add_argument('--width', type=int, default=None)
  parser.add_argument('--height', type=int, default=None)
  parser.add_argument('--elevation', type=float, default=30.0)
  parser.add_argument('--azimuth', type=float, default=-60.0)
  parser.add_argument('--frames', action='store_true', help='also write every frame as a PNG')
  parser.add_argument('--quick', action='store_true', help='few, small frames (CI)')
  args = parser.parse_args(argv)
  max_frames = args.max_frames or (16 if args.quick else 200)
  width = args.width or (320 if args.quick else 640)
  height = args.height or (240 if args.quick else 480)
  os.makedirs(args.out, exist_ok=True)

  m = jaxsim.load(args.model)
  if args.traj:
    qpos, times = load_trajectory(args.traj, args.world)
  else:
    qpos, times = simulate(m, args.seconds, args.qvel_noise)
  if qpos.shape[-1] != m.nq:
    raise SystemExit(f'error: the trajectory has nq = {qpos.shape[-1]}; {args.model} has {m.nq}')
  # one frame per 1 / fps of simulated time, at most max_frames, always ending on the last state
  dt = float(np.median(np.diff(times))) if len(times) > 1 else 1.0
  stride = max(1, round(1.0 / (args.fps * dt)), int(np.ceil(len(qpos) / max_frames)))
  pick = np.arange(len(qpos) - 1, -1, -stride)[::-1]

  t0 = time.perf_counter()
  frames = render.render(
    m,
    qpos[pick],
    times[pick],
    width=width,
    height=height,
    elevation=args.elevation,
    azimuth=args.azimuth,
    segments=8 if args.quick else 16,
    title=m.model_name,
  )
  render_s = time.perf_counter() - t0
  print(f'rendered {len(frames)} frames of {width}x{height} in {render_s:.1f} s')

  files = [render.save_gif(frames, os.path.join(args.out, 'movie.gif'), fps=args.fps)]
  if shutil.which('ffmpeg'):
    files.append(render.save_mp4(frames, os.path.join(args.out, 'movie.mp4'), fps=args.fps))
  else:
    print('no ffmpeg on the PATH: wrote the GIF only')
  files.append(contact_sheet(frames, os.path.join(args.out, 'frames.png')))
  if args.frames:
    from PIL import Image

    for k, f in enumerate(frames):
      path = os.path.join(args.out, f'frame_{k:04d}.png')
      Image.fromarray(f).save(path)
      files.append(path)
  # how much of the picture changes from the first frame to the last: the motion is visible
  changed = float(np.mean(np.any(frames[0] != frames[-1], axis=-1)))
  background = frames[0, 0, 0]
  drawn = float(np.mean(np.any(frames[0] != background, axis=-1)))
  metrics = {
    'frames': len(frames),
    'width': width,
    'height': height,
    'changed_fraction': changed,
    'drawn_fraction': drawn,
    'render_s': render_s,
    'files': files,
  }
  with open(os.path.join(args.out, 'metrics.json'), 'w') as f:
    json.dump(metrics, f, indent=1)
  print(
    f'{drawn:.0%} of the first frame is drawn; {changed:.0%} of the pixels change from the first '
    f'frame to the last'
  )
  print(f'wrote {", ".join(files[:3])}{" ..." if len(files) > 3 else ""}')
  return metrics


if __name__ == '__main__':
  main()

"""examples/trajopt.py, sweep.py and render.py in quick mode, and jaxsim.render's geometry."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jaxsim
from jaxsim import render
from jaxsim._src.enums import GeomType
from tests.models import MODELS

ROOT = os.path.dirname(MODELS)
PUSH = os.path.join(MODELS, 'examples', 'push.xml')
PNG = b'\x89PNG\r\n\x1a\n'


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ)
  # the examples run one program many times: keep XLA's optimisations, which conftest switches
  # off for the compile-bound tests (other XLA flags pass through)
  flags = env.get('XLA_FLAGS', '').split()
  flags = [f for f in flags if not f.startswith(('--xla_backend_optimization_level', '--xla_llvm'))]
  env['XLA_FLAGS'] = ' '.join(flags)
  r = subprocess.run(
    [sys.executable, os.path.join(ROOT, 'examples', script), *args],
    capture_output=True,
    text=True,
    timeout=900,
    cwd=ROOT,
    env=env,
  )
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
  return r


def _is_png(path) -> bool:
  return path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000


def test_trajopt_loss_falls_by_orders_of_magnitude(tmp_path):
  out = tmp_path / 'trajopt'
  r = _run('trajopt.py', '--quick', '--out', str(out))
  m = json.loads((out / 'metrics.json').read_text())
  assert 'initial loss' in r.stdout and 'ratio' in r.stdout
  losses = np.array(m['losses'])
  assert np.all(np.isfinite(losses)) and len(losses) == m['iterations']
  assert losses[0] == pytest.approx(m['loss_initial'])
  assert m['loss_final'] == pytest.approx(losses.min())
  # the initial guess misses the target by centimetres; the optimised push lands the box on it
  assert m['loss_initial'] > 1e-2
  assert m['ratio'] >= 100, m['ratio']
  assert m['final_distance_m'] < 0.01
  assert _is_png(out / 'loss.png') and _is_png(out / 'trajectory.png')
  # the optimised trajectory in `jaxsim simulate --out` format, for examples/render.py
  traj = np.load(out / 'traj.npz')
  nq = jaxsim.load(PUSH).nq
  assert traj['qpos'].shape == (1, 80, nq) and traj['time'].shape == (1, 80)
  box_xy = traj['qpos'][0, -1, 2:4]
  assert np.linalg.norm(box_xy - [0.35, 0.12]) == pytest.approx(m['final_distance_m'])


def test_sweep_over_batched_models_shows_trend(tmp_path):
  out = tmp_path / 'sweep'
  r = _run('sweep.py', '--quick', '--out', str(out))
  assert 'compiled once' in r.stdout
  m = json.loads((out / 'metrics.json').read_text())
  dist = np.array(m['distance'])  # (friction, speed)
  assert dist.shape == (len(m['mu']), len(m['v0'])) and dist.shape[0] >= 5
  assert m['all_stopped'] and np.all(dist > 0)
  # more friction, shorter slide; faster, longer slide; and close to Coulomb's v0^2 / (2 mu g)
  assert m['monotone_in_friction'] >= 0.9 and m['monotone_in_speed'] >= 0.9
  assert dist[0, -1] > 3 * dist[-1, -1] and dist[0, -1] > 10 * dist[0, 0]
  assert m['coulomb_relative_error_median'] < 0.1
  assert _is_png(out / 'sweep.png')


def test_render_gif_from_simulate_file(tmp_path):
  from PIL import Image

  model = jaxsim.load(PUSH)
  # a trajectory in `jaxsim simulate --out` format (B, T, nq): world 1 pushes the box
  steps = 60
  t = np.linspace(0.0, 1.0, steps)
  qpos = np.zeros((2, steps, model.nq))
  qpos[1, :, 0], qpos[1, :, 2], qpos[1, :, 5] = 0.3 * t, 0.3 * t, 0.8 * t
  traj = tmp_path / 'traj.npz'
  np.savez(traj, qpos=qpos, time=np.broadcast_to(t, (2, steps)))
  out = tmp_path / 'render'
  r = _run('render.py', PUSH, str(traj), '--world', '1', '--quick', '--out', str(out))
  assert 'rendered' in r.stdout
  m = json.loads((out / 'metrics.json').read_text())
  gif = Image.open(out / 'movie.gif')
  assert gif.n_frames == m['frames'] >= 10
  assert gif.size == (m['width'], m['height'])
  assert _is_png(out / 'frames.png')
  assert m['drawn_fraction'] > 0.2 and m['changed_fraction'] > 0.01
  first = np.asarray(gif.convert('RGB')).astype(int)
  # the orange box and the blue pusher are in the picture
  orange = (first[..., 0] - first[..., 2] > 80) & (first[..., 0] > 120)
  blue = first[..., 2] - first[..., 0] > 80
  assert orange.mean() > 0.005 and blue.mean() > 0.002


def test_geom_polygons_fit_their_shapes():
  m = jaxsim.load(os.path.join(MODELS, 'scene.xml'))
  types = np.asarray(m.geom_type)
  size = np.asarray(m.geom_size)
  seen = set()
  for g in range(m.ngeom):
    polys = render.geom_polygons(m, g)
    if types[g] == GeomType.PLANE:
      assert polys is None
      continue
    v = polys.reshape(-1, 3)
    assert polys.shape[1:] == (4, 3) and np.all(np.isfinite(v))
    s = size[g]
    r = np.linalg.norm(v, axis=1)
    seen.add(int(types[g]))
    if types[g] == GeomType.SPHERE:
      np.testing.assert_allclose(r, s[0], rtol=1e-9)
    elif types[g] == GeomType.ELLIPSOID:
      np.testing.assert_allclose(np.sum((v / s) ** 2, axis=1), 1.0, rtol=1e-9)
    elif types[g] == GeomType.BOX:
      np.testing.assert_allclose(np.abs(v), np.broadcast_to(s, v.shape), rtol=1e-12)
      assert len(polys) == 6
    elif types[g] == GeomType.CYLINDER:
      rad = np.linalg.norm(v[:, :2], axis=1)
      assert np.all(rad <= s[0] * (1 + 1e-9)) and np.all(np.abs(v[:, 2]) <= s[1] * (1 + 1e-9))
      np.testing.assert_allclose(np.ptp(v, axis=0), [2 * s[0], 2 * s[0], 2 * s[1]], rtol=1e-9)
    elif types[g] == GeomType.CAPSULE:
      # distance to the segment is the radius everywhere
      seg = np.clip(v[:, 2], -s[1], s[1])
      d = np.linalg.norm(v - np.stack([0 * seg, 0 * seg, seg], axis=1), axis=1)
      np.testing.assert_allclose(d, s[0], rtol=1e-9)
      assert v[:, 2].max() == pytest.approx(s[0] + s[1])
    elif types[g] == GeomType.MESH:
      mesh = int(m.geom_dataid[g])
      vert = np.asarray(m.mesh_vert)[
        m.mesh_vertadr[mesh] : m.mesh_vertadr[mesh] + m.mesh_vertnum[mesh]
      ]
      assert len(polys) == m.mesh_facenum[mesh]
      assert np.isin(v.round(12), vert.round(12)).all()
    assert r.max() <= float(m.geom_rbound[g]) * (1 + 1e-9) + 1e-12
  solids = ('SPHERE', 'CAPSULE', 'ELLIPSOID', 'CYLINDER', 'BOX', 'MESH')
  assert seen >= {int(GeomType[t]) for t in solids}

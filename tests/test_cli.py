"""The `jaxsim` command line."""

import os
import subprocess
import sys

from tests.models import MODELS, dm_control_suite


def _run(*args):
  return subprocess.run(
    [sys.executable, '-m', 'jaxsim', *args], capture_output=True, text=True, timeout=300
  )


def test_info_prints_counts_and_unsupported_features(tmp_path):
  quadruped = [p for p in dm_control_suite() if p.endswith('quadruped.xml')][0]
  r = _run('info', quadruped)
  assert r.returncode == 0, r.stderr
  assert 'nq=30' in r.stdout and 'nv=28' in r.stdout
  assert 'not yet simulated by jaxsim: none' in r.stdout  # height fields, sensors: all simulated
  # a user sensor needs a callback jaxsim does not have: named (a tracking camera is simulated)
  xml = tmp_path / 'user.xml'
  xml.write_text(
    '<mujoco><worldbody><body name="b"><freejoint/><geom size=".1"/>'
    '<camera name="c" mode="track"/></body></worldbody>'
    '<sensor><framepos objtype="camera" objname="c"/><user dim="1"/></sensor></mujoco>'
  )
  r = _run('info', str(xml))
  assert r.returncode == 0, r.stderr
  assert 'not yet simulated by jaxsim:\n  - user sensors' in r.stdout, r.stdout
  assert 'camera' not in r.stdout.split('not yet simulated')[1]


def test_simulate_writes_trajectory(tmp_path):
  out = tmp_path / 'traj.npz'
  r = _run(
    'simulate',
    os.path.join(MODELS, 'pendulum.xml'),
    '--batch',
    '3',
    '--steps',
    '25',
    '--chunk',
    '10',
    '--out',
    str(out),
    '--quiet',
  )
  assert r.returncode == 0, r.stderr
  assert 'steps/s' in r.stdout and 'finite: True' in r.stdout
  import numpy as np

  traj = np.load(out)
  assert traj['qpos'].shape == (3, 25, 1)
  assert np.allclose(traj['time'][0, -1], 25 * 0.002)


def test_simulate_split_over_cpu_devices_steps_each_world_as_one_device(tmp_path):
  """The batch split over two CPU devices (each its own loops) gives every world the trajectory
  it has on one device, bit for bit; a device count that does not divide the batch is refused."""
  import numpy as np

  pendulum = os.path.join(MODELS, 'pendulum.xml')
  common = ('--batch', '4', '--steps', '12', '--chunk', '5', '--quiet')
  trajs = []
  for n in ('2', '1'):
    out = tmp_path / f'traj{n}.npz'
    r = _run('simulate', pendulum, *common, '--devices', n, '--out', str(out))
    assert r.returncode == 0, r.stderr
    assert ('split over 2 CPU devices' in r.stdout) == (n == '2'), r.stdout
    trajs.append(np.load(out))
  for k in ('qpos', 'qvel', 'time'):
    np.testing.assert_array_equal(trajs[0][k], trajs[1][k])
  for bad in ('3', '0'):
    r = _run('simulate', pendulum, '--batch', '4', '--devices', bad)
    assert r.returncode == 2 and 'must be a positive divisor of --batch 4' in r.stderr, r.stderr


def test_info_reports_model_errors(tmp_path):
  bad = tmp_path / 'bad.xml'
  bad.write_text('<mujoco><worldbody><geom type="sphere" size="-1"/></worldbody></mujoco>')
  r = _run('info', str(bad))
  assert r.returncode == 2
  assert 'bad.xml:1' in r.stderr and '<geom>' in r.stderr


def test_info_on_bundled_model():
  r = _run('info', os.path.join(MODELS, 'pendulum.xml'))
  assert r.returncode == 0, r.stderr
  assert 'nq=1' in r.stdout

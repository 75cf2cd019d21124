"""The `jaxsim` command line."""

import os
import subprocess
import sys

from tests.models import MODELS, dm_control_suite


def _run(*args):
  return subprocess.run(
    [sys.executable, '-m', 'jaxsim', *args], capture_output=True, text=True, timeout=300
  )


def test_info_prints_counts_and_unsupported_features():
  fish = [p for p in dm_control_suite() if p.endswith('fish.xml')][0]
  r = _run('info', fish)
  assert r.returncode == 0, r.stderr
  assert 'nq=14' in r.stdout and 'nv=13' in r.stdout
  assert 'fluid forces' in r.stdout


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

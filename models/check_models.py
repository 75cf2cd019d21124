"""Sanity check for the bundled models (run: ``python models/check_models.py``).

For every model this script
  * compiles it with ``mujoco.MjModel.from_xml_path`` and fails if the
    compiler prints anything to stderr (MuJoCo warnings) or raises;
  * runs 2000 ``mujoco.mj_step`` calls from qpos0 and from every keyframe,
    with zero controls and with uniformly random controls inside
    ``ctrlrange`` (two seeds);
  * fails on non-finite state, on any ``data.warning`` counter being set
    (instability / bad inertia / contact overflow ...), or on implausibly
    large velocities.

It also exercises ``chain.py`` for hinge and ball chains including n=200,
and checks that ``chain10.xml`` matches the generator.
"""

from __future__ import annotations

import os
import sys
import tempfile

import mujoco
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from chain import chain_xml  # noqa: E402

MODELS = [
  'pendulum.xml',
  '../jaxsim/envs/xml/cartpole.xml',
  'chain10.xml',
  'walker.xml',
  'scene.xml',
  'features.xml',
]

STEPS = 2000
MAX_QVEL = 1e3


class _CaptureStderr:
  """Capture text written to file descriptor 2 (MuJoCo C-level warnings)."""

  def __enter__(self):
    sys.stderr.flush()
    self._tmp = tempfile.TemporaryFile(mode='w+b')
    self._saved = os.dup(2)
    os.dup2(self._tmp.fileno(), 2)
    return self

  def __exit__(self, *exc):
    sys.stderr.flush()
    os.dup2(self._saved, 2)
    os.close(self._saved)
    self._tmp.seek(0)
    self.text = self._tmp.read().decode(errors='replace')
    self._tmp.close()
    return False


def load(path: str | None = None, xml: str | None = None) -> mujoco.MjModel:
  """Compile a model; raise if MuJoCo emits any warning while compiling.

  Compiler warnings (e.g. deprecated attributes) are not raised by the
  Python bindings: MuJoCo appends them to MUJOCO_LOG.TXT in the current
  directory.  So compile inside an empty temporary directory and look for
  that file, and also capture anything written to stderr.
  """
  if path is not None:
    path = os.path.abspath(path)
  cwd = os.getcwd()
  with tempfile.TemporaryDirectory() as tmp:
    os.chdir(tmp)
    try:
      with _CaptureStderr() as cap:
        if path is not None:
          m = mujoco.MjModel.from_xml_path(path)
        else:
          m = mujoco.MjModel.from_xml_string(xml)
    finally:
      os.chdir(cwd)
    log = os.path.join(tmp, 'MUJOCO_LOG.TXT')
    logged = open(log).read() if os.path.exists(log) else ''
  if cap.text.strip() or logged.strip():
    raise RuntimeError(f'compiler warning:\n{cap.text}{logged}')
  return m


def simulate(m: mujoco.MjModel, mode: str, seed: int = 0, steps: int = STEPS, key: int = -1):
  """Step ``steps`` times from keyframe ``key`` (-1: qpos0) and sanity-check."""
  d = mujoco.MjData(m)
  if key >= 0:
    mujoco.mj_resetDataKeyframe(m, d, key)
  rng = np.random.default_rng(seed)
  lo = np.where(m.actuator_ctrllimited, m.actuator_ctrlrange[:, 0], -1.0)
  hi = np.where(m.actuator_ctrllimited, m.actuator_ctrlrange[:, 1], 1.0)
  max_ncon = 0
  max_qvel = 0.0
  for t in range(steps):
    if mode == 'random' and m.nu:
      # hold each random control for 50 steps (a bit like a policy)
      if t % 50 == 0:
        ctrl = rng.uniform(lo, hi)
      d.ctrl[:] = ctrl
    mujoco.mj_step(m, d)
    max_ncon = max(max_ncon, d.ncon)
    max_qvel = max(max_qvel, float(np.abs(d.qvel).max()) if m.nv else 0.0)
    if not (np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all()):
      raise RuntimeError(f'non-finite state at step {t} ({mode})')
  warned = {
    mujoco.mjtWarning(i).name: int(d.warning[i].number)
    for i in range(len(d.warning))
    if d.warning[i].number
  }
  if warned:
    raise RuntimeError(f'MuJoCo warnings ({mode}): {warned}')
  if max_qvel > MAX_QVEL:
    raise RuntimeError(f'|qvel| reached {max_qvel:.3g} ({mode})')
  if m.nsensordata and not np.isfinite(d.sensordata).all():
    raise RuntimeError(f'non-finite sensordata ({mode})')
  return d, max_ncon, max_qvel


def check_model(m: mujoco.MjModel, label: str, seeds=(0, 1)) -> None:
  summary = (
    f'{label:28s} nbody={m.nbody:3d} nq={m.nq:3d} nv={m.nv:3d} '
    f'nu={m.nu:3d} ngeom={m.ngeom:3d} nsensor={m.nsensor:2d} nkey={m.nkey}'
  )
  ncon = 0
  qv = 0.0
  for key in [-1, *range(m.nkey)]:
    runs = [('zero', 0)] + ([('random', s) for s in seeds] if m.nu else [])
    for mode, seed in runs:
      try:
        _, c, v = simulate(m, mode, seed=seed, key=key)
      except RuntimeError as e:
        raise RuntimeError(f'key={key} seed={seed}: {e}') from None
      ncon, qv = max(ncon, c), max(qv, v)
  print(summary, f'| max ncon={ncon} max |qvel|={qv:.3g}')


def main() -> int:
  failures = 0
  for name in MODELS:
    path = os.path.join(HERE, name)
    try:
      check_model(load(path=path), name)
    except Exception as e:  # noqa: BLE001
      failures += 1
      print(f'FAIL {name}: {e}')

  # Generator: chain10.xml must be reproducible, big chains must compile.
  with open(os.path.join(HERE, 'chain10.xml')) as f:
    committed = f.read()
  regenerated = chain_xml(10, armature=0.001, initial_bend=0.3)
  if committed != regenerated:
    failures += 1
    print('FAIL chain10.xml differs from chain_xml(10, armature=0.001, initial_bend=0.3)')
  for n, joint in ((1, 'hinge'), (7, 'ball'), (50, 'ball'), (200, 'hinge'), (200, 'ball')):
    label = f'chain_xml({n}, {joint!r})'
    try:
      m = load(xml=chain_xml(n, joint, initial_bend=min(0.3, 2.0 / n)))
      assert m.nbody == n + 1, m.nbody
      check_model(m, label)
    except Exception as e:  # noqa: BLE001
      failures += 1
      print(f'FAIL {label}: {e}')

  print('OK' if not failures else f'{failures} FAILURE(S)')
  return 1 if failures else 0


if __name__ == '__main__':
  raise SystemExit(main())

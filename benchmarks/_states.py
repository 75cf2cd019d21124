"""In-contact benchmark states: every world after `steps` C MuJoCo steps with random controls.

A batch that starts at qpos0 spends its first steps in the air, where the constraint solver has
nothing to do; a batch of worlds that have already fallen and touch the floor is the state such
batches spend their time in. Every world here starts at qpos0 with qvel ~ N(0, qvel_noise), then
C MuJoCo (`mujoco.rollout`, all cores) steps it `steps` times with controls uniform in ctrlrange
(in [-1, 1] where unlimited), drawn from a generator seeded by (seed, model name, world index)
so that each world differs and world i is the same at any batch size. The same
states start jaxsim, MJX and C MuJoCo.

  python benchmarks/_states.py MODEL.xml BATCH [--steps 100] [--seed 0]   # prints a summary
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib

import numpy as np

BLOCK = 1024  # worlds per rollout call (bounds the controls' memory)
SUITE_ENV = 'JAXSIM_SUITE_DIR'  # a folder of dm_control suite XMLs where dm_control is absent


def suite_dir() -> str | None:
  """The folder of dm_control's suite XMLs: $JAXSIM_SUITE_DIR, else dm_control's own, else None."""
  if os.environ.get(SUITE_ENV):
    return os.environ[SUITE_ENV]
  try:
    import dm_control
  except ImportError:
    return None
  return os.path.join(os.path.dirname(dm_control.__file__), 'suite')


def suite_names() -> list[str]:
  """The dm_control suite's model names (its XML files), sorted; empty without the suite."""
  folder = suite_dir()
  if not folder or not os.path.isdir(folder):
    return []
  return sorted(os.path.splitext(f)[0] for f in os.listdir(folder) if f.endswith('.xml'))


def ctrl_bounds(ctrlrange, ctrllimited) -> tuple[np.ndarray, np.ndarray]:
  """Uniform-sampling bounds per actuator: ctrlrange where limited, else [-1, 1].

  Arguments:
    ctrlrange: (nu, 2) control range.
    ctrllimited: (nu,) whether the control is limited.

  Returns:
    lo, hi: (nu,) bounds.
  """
  ctrlrange = np.asarray(ctrlrange, dtype=np.float64).reshape(-1, 2)
  lo, hi = ctrlrange[:, 0], ctrlrange[:, 1]
  limited = np.asarray(ctrllimited, dtype=bool).reshape(-1) & (hi > lo)
  return np.where(limited, lo, -1.0), np.where(limited, hi, 1.0)


def contact_states(
  path: str,
  batch: int,
  steps: int = 100,
  seed: int = 0,
  qvel_noise: float = 0.01,
  threads: int | None = None,
  sensors: bool = False,
) -> dict[str, np.ndarray]:
  """Runs `batch` worlds of the model at `path` for `steps` C MuJoCo steps with random controls.

  Arguments:
    path: MJCF file.
    batch: number of worlds.
    steps: C MuJoCo steps before the state is taken (0: qpos0 and the qvel noise alone).
    seed: seed of the controls and the initial qvel.
    qvel_noise: std of the initial qvel.
    threads: C MuJoCo threads (default: all cores).
    sensors: keep sensors on while stepping (off by default, as in the benchmarks).

  Returns:
    qpos (batch, nq), qvel (batch, nv), act (batch, na), time (batch,), physics (batch, nstate):
    MuJoCo's mjSTATE_FULLPHYSICS state, ncon (batch,) and nefc (batch,): the active contacts and
    constraint rows of each final state (mj_forward), float64 / int arrays.
  """
  import mujoco
  from mujoco import rollout

  mj = mujoco.MjModel.from_xml_path(path)
  if not sensors:
    mj.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_SENSOR)
  d = mujoco.MjData(mj)
  what = mujoco.mjtState.mjSTATE_FULLPHYSICS
  nstate = mujoco.mj_stateSize(mj, what)
  state0 = np.zeros(nstate)
  mujoco.mj_getState(mj, d, state0, what)
  lo, hi = ctrl_bounds(mj.actuator_ctrlrange, mj.actuator_ctrllimited)
  name = os.path.splitext(os.path.basename(path))[0]
  key = zlib.crc32(name.encode())
  vel = slice(1 + mj.nq, 1 + mj.nq + mj.nv)  # FULLPHYSICS: time, qpos, qvel, ...
  threads = threads or os.cpu_count() or 1
  datas = [mujoco.MjData(mj) for _ in range(threads)]
  physics = np.empty((batch, nstate))
  for start in range(0, batch, BLOCK):
    n = min(BLOCK, batch - start)
    rngs = [np.random.default_rng([seed, key, start + i]) for i in range(n)]
    init = np.tile(state0, (n, 1))
    init[:, vel] = [rng.normal(size=mj.nv) * qvel_noise for rng in rngs]
    if steps:
      ctrl = np.stack([rng.uniform(lo, hi, size=(steps, mj.nu)) for rng in rngs])
      out, _ = rollout.rollout(mj, datas, init, ctrl, nstep=steps)
      physics[start : start + n] = out[:, -1]
    else:
      physics[start : start + n] = init
  out = {
    'qpos': np.empty((batch, mj.nq)),
    'qvel': np.empty((batch, mj.nv)),
    'act': np.empty((batch, mj.na)),
    'time': np.empty(batch),
    'ncon': np.empty(batch, np.int32),
    'nefc': np.empty(batch, np.int32),
  }
  for i in range(batch):
    mujoco.mj_setState(mj, d, physics[i], what)
    mujoco.mj_forward(mj, d)
    out['qpos'][i], out['qvel'][i], out['act'][i] = d.qpos, d.qvel, d.act
    out['time'][i], out['ncon'][i], out['nefc'][i] = d.time, d.ncon, d.nefc
  out['physics'] = physics
  return out


def cached_states(path: str, batch: int, folder: str, steps: int = 100, seed: int = 0) -> str:
  """contact_states of a model and batch, saved once as .npz in `folder`; returns the file.

  The file name holds the model file's name and a hash of its text, the batch, steps, seed and
  MuJoCo's version (and of this generator: -v2), so a changed model or another MuJoCo makes a
  new file.

  Arguments:
    path: MJCF file.
    batch: number of worlds.
    folder: where the .npz files go.
    steps: C MuJoCo steps before the state is taken.
    seed: seed of the controls and the initial qvel.

  Returns:
    the .npz file's path (arrays as contact_states returns them).
  """
  import mujoco

  with open(path, 'rb') as f:
    digest = zlib.crc32(f.read())
  name = os.path.splitext(os.path.basename(path))[0]
  file = os.path.join(
    folder, f'{name}-{digest:08x}-b{batch}-s{steps}-seed{seed}-mj{mujoco.__version__}-v2.npz'
  )
  if not os.path.exists(file):
    os.makedirs(folder, exist_ok=True)
    states = contact_states(path, batch, steps, seed)
    tmp = file + '.tmp.npz'
    np.savez(tmp, **states)
    os.replace(tmp, file)
  return file


def summary(states) -> dict:
  """Mean and max active contacts and rows, and the fraction of worlds with a contact."""
  ncon, nefc = np.asarray(states['ncon']), np.asarray(states['nefc'])
  return {
    'ncon_mean': float(ncon.mean()),
    'ncon_max': int(ncon.max()),
    'nefc_mean': float(nefc.mean()),
    'nefc_max': int(nefc.max()),
    'in_contact': float((ncon > 0).mean()),
  }


def main(argv: list[str]) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('model')
  p.add_argument('batch', type=int)
  p.add_argument('--steps', type=int, default=100)
  p.add_argument('--seed', type=int, default=0)
  args = p.parse_args(argv)
  print(summary(contact_states(args.model, args.batch, args.steps, args.seed)))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))

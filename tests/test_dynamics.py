"""Full forward dynamics with contacts, limits, equalities and the solver vs MuJoCo.

For the dm_control suite models, from a state of a
MuJoCo rollout with random controls: a 20-step trajectory with MuJoCo's integrator and solver
settings, recording qacc (the forward-dynamics acceleration at the start of each step, in both
engines) and the state after each step. qacc agrees to 1e-5 relative and the state after 20 steps
to 1e-5: the solver stops on MuJoCo's tolerance, so the two engines' answers differ by up to what
that tolerance allows (the solver tests hold 1e-12 with a tight tolerance).
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim.collision import driver
from tests import oracle
from tests.models import dm_control_suite, model_id

STEPS = 20
WARMUP = 200

# dog (43001 constraint-row slots) and humanoid_CMU (7440) are left out: their dense solve is too
# large for the CI machine; scene.xml's many mesh-pair groups make a program too large to compile
# in CI (see the issue notes)
LARGE = ('dog.xml', 'humanoid_CMU.xml')
MODELS = [p for p in dm_control_suite() if not p.endswith(LARGE)]


def _rollout_state(mj, seed):
  """MuJoCo state after WARMUP steps of random controls (from the first keyframe if any)."""
  md = mujoco.MjData(mj)
  if mj.nkey:
    mujoco.mj_resetDataKeyframe(mj, md, 0)
  rng = np.random.default_rng(seed)
  for _ in range(WARMUP):
    md.ctrl[:] = rng.uniform(-1, 1, mj.nu)
    mujoco.mj_step(mj, md)
  return md, rng


@pytest.mark.parametrize('path', MODELS, ids=model_id)
def test_trajectory_with_constraints_matches_mujoco(path):
  mj = mujoco.MjModel.from_xml_path(path)
  m = jaxsim.load(path)
  missing = driver.unsupported_pairs(m)
  if missing:
    # named, never silently ignored
    with pytest.raises(NotImplementedError, match='no collider'):
      jaxsim.forward(m, jaxsim.make_data(m))
    return
  md, rng = _rollout_state(mj, 0)
  state = (md.qpos.copy(), md.qvel.copy(), md.act.copy())
  d = jaxsim.make_data(m).replace(
    qpos=state[0],
    qvel=state[1],
    act=state[2],
    qacc_warmstart=md.qacc_warmstart.copy(),
    time=md.time,
  )
  ctrls = rng.uniform(-1, 1, size=(STEPS, mj.nu))
  theirs_qacc, theirs_state = [], []
  for t in range(STEPS):
    md.ctrl[:] = ctrls[t]
    mujoco.mj_step(mj, md)
    theirs_qacc.append(md.qacc.copy())
    theirs_state.append(np.concatenate([md.qpos, md.qvel, md.act]))
  _, traj = jax.jit(jaxsim.rollout, static_argnames='record')(
    m, d, ctrls, record=('qpos', 'qvel', 'act', 'qacc', 'ncon')
  )
  for t in (0, STEPS // 2, STEPS - 1):
    oracle.assert_close(f'qacc at step {t}', traj['qacc'][t], theirs_qacc[t], rtol=1e-5)
  ours = np.concatenate([traj['qpos'][-1], traj['qvel'][-1], traj['act'][-1]])
  oracle.assert_close(f'state after {STEPS} steps', ours, theirs_state[-1], rtol=1e-5)

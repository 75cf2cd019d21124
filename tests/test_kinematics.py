"""mj_jac agrees with MuJoCo (every kinematic quantity is compared in test_forward.py)."""

from __future__ import annotations

import mujoco
import numpy as np

from jaxsim._src import kinematics
from tests import oracle


def test_jacobian_matches_mj_jac():
  m, mj = oracle.load_pair(oracle_model('humanoid.xml'))
  state = oracle.random_state(mj, np.random.default_rng(3))
  md = oracle.mj_data(mj, *state)
  d = oracle.jx_data(m, *state)
  d = kinematics.com_pos(m, kinematics.kinematics(m, d))
  rng = np.random.default_rng(4)
  for body in range(1, mj.nbody):
    point = md.xpos[body] + rng.normal(size=3) * 0.1
    jacp, jacr = np.zeros((3, mj.nv)), np.zeros((3, mj.nv))
    mujoco.mj_jac(mj, md, jacp, jacr, point, body)
    ours_p, ours_r = kinematics.jac(m, d, point, body)
    oracle.assert_close(f'jacp of body {body}', ours_p, jacp)
    oracle.assert_close(f'jacr of body {body}', ours_r, jacr)


def oracle_model(name: str) -> str:
  from tests.models import dm_control_suite

  return next(p for p in dm_control_suite() if p.endswith('/' + name))

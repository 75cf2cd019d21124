"""Kinematics, com-based quantities, the mass matrix and RNE agree with MuJoCo at random states."""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

from jaxsim import dynamics, kinematics
from tests import oracle
from tests.models import all_models, model_id

FRAMES = (
  'xpos xmat xipos ximat xanchor xaxis geom_xpos geom_xmat site_xpos site_xmat subtree_com cinert '
  'cdof cvel cdof_dot'
).split()


def _smooth(m, d):
  d = kinematics.kinematics(m, d)
  d = kinematics.com_pos(m, d)
  d = dynamics.crb(m, d)
  d = kinematics.com_vel(m, d)
  return d, dynamics.rne(m, d)


@pytest.fixture(scope='module', params=all_models(), ids=model_id)
def case(request):
  m, mj = oracle.load_pair(request.param)
  return m, mj, jax.jit(_smooth)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_against_mujoco(case, seed):
  m, mj, fn = case
  state = oracle.random_state(mj, np.random.default_rng(seed))
  md = oracle.mj_data(mj, *state)
  d = oracle.jx_data(m, *state)
  if mj.ntendon:
    # tendon armature enters qM through ten_J; take MuJoCo's so this test isolates the tree pass
    ten_j = np.zeros((mj.ntendon, mj.nv))
    mujoco.mju_sparse2dense(ten_j, md.ten_J, mj.ten_J_rownnz, mj.ten_J_rowadr, mj.ten_J_colind)
    d = d.replace(ten_J=ten_j)
  d, bias = fn(m, d)
  for name in FRAMES:
    theirs = getattr(md, name)
    oracle.assert_close(name, np.asarray(getattr(d, name)).reshape(theirs.shape), theirs)
  ours, theirs = np.asarray(d.xquat), md.xquat
  sign = np.where(np.sum(ours * theirs, axis=-1, keepdims=True) < 0, -1.0, 1.0)
  oracle.assert_close('xquat', ours * sign, theirs)
  oracle.assert_close('qM', d.qM, oracle.full_m(mj, md))
  if not np.any(mj.tendon_armature):
    # with tendon armature MuJoCo adds mj_tendonBias, tested with the tendons
    oracle.assert_close('qfrc_bias', bias, md.qfrc_bias)


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

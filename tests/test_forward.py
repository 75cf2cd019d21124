"""jaxsim.forward agrees with mj_forward (constraints disabled in both) at random states.

One jit of forward per model; every smooth quantity of the pipeline is compared at 1e-8 relative
(tests/oracle.assert_close: relative to the larger of the element and the array's scale).
"""

from __future__ import annotations

import os
import warnings

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle
from tests.models import MODELS, all_models, model_id

ENERGY = int(mujoco.mjtEnableBit.mjENBL_ENERGY)

FIELDS = (
  'xpos xmat xipos ximat xanchor xaxis geom_xpos geom_xmat site_xpos site_xmat subtree_com cinert '
  'cdof cvel cdof_dot qfrc_bias qfrc_spring qfrc_damper qfrc_gravcomp qfrc_fluid qfrc_passive '
  'ten_length ten_velocity actuator_length actuator_velocity actuator_force qfrc_actuator '
  'qfrc_smooth qacc_smooth qacc act_dot energy'
).split()


@pytest.fixture(scope='module', params=all_models(), ids=model_id)
def case(request):
  m, mj = oracle.load_pair(request.param, enable=ENERGY)
  return m, mj, jax.jit(jaxsim.forward)


def _dense(mj, md, values, rownnz, rowadr, colind, nrow):
  out = np.zeros((nrow, mj.nv))
  if nrow and mj.nv:
    mujoco.mju_sparse2dense(out, values, rownnz, rowadr, colind)
  return out


@pytest.mark.parametrize('seed', [0, 1])
def test_forward_matches_mujoco(case, seed):
  m, mj, fn = case
  # (models with adhesion actuators included: constraints are off here, so their moments are 0)
  state = oracle.random_state(mj, np.random.default_rng(seed))
  md = oracle.mj_data(mj, *state)
  d = fn(m, oracle.jx_data(m, *state))
  for name in FIELDS:
    theirs = np.asarray(getattr(md, name))
    oracle.assert_close(name, np.asarray(getattr(d, name)).reshape(theirs.shape), theirs)
  ours, theirs = np.asarray(d.xquat), md.xquat
  sign = np.where(np.sum(ours * theirs, axis=-1, keepdims=True) < 0, -1.0, 1.0)
  oracle.assert_close('xquat', ours * sign, theirs)
  oracle.assert_close('qM', d.qM, oracle.full_m(mj, md))
  ten_j = _dense(mj, md, md.ten_J, mj.ten_J_rownnz, mj.ten_J_rowadr, mj.ten_J_colind, mj.ntendon)
  oracle.assert_close('ten_J', d.ten_J, ten_j)
  moment = _dense(
    mj, md, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind, mj.nu
  )
  oracle.assert_close('actuator_moment', jaxsim.actuator_moment_dense(m, d), moment)


def test_applied_forces(case):
  """qfrc_applied and xfrc_applied (wrenches at body coms) enter qfrc_smooth and qacc."""
  m, mj, fn = case
  rng = np.random.default_rng(7)
  state = oracle.random_state(mj, rng)
  md = oracle.mj_data(mj, *state, forward=False)
  md.qfrc_applied[:] = rng.normal(size=mj.nv)
  md.xfrc_applied[1:] = rng.normal(size=(mj.nbody - 1, 6))
  mujoco.mj_forward(mj, md)
  d = oracle.jx_data(m, *state).replace(qfrc_applied=md.qfrc_applied, xfrc_applied=md.xfrc_applied)
  d = fn(m, d)
  oracle.assert_close('qfrc_smooth', d.qfrc_smooth, md.qfrc_smooth)
  oracle.assert_close('qacc', d.qacc, md.qacc)


def test_missing_colliders_are_named_not_ignored():
  """A geom type pair without a collider (plane-hfield, which MuJoCo does not collide either,
  forced into a compiled model's candidate pairs) is named by forward and `jaxsim info`."""
  from jaxsim import cli
  from jaxsim._src.collision import driver

  xml = """<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
    <body><freejoint/><geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>"""
  m = jaxsim.load_string(xml)
  gtype = np.asarray(m.geom_type).copy()
  gtype[1] = jaxsim.GeomType.HFIELD
  m = m.replace(geom_type=gtype)
  assert driver.unsupported_pairs(m) == [('plane', 'hfield')]
  with pytest.raises(NotImplementedError, match='plane-hfield'):
    jaxsim.forward(m, jaxsim.make_data(m))
  assert 'collisions of plane with hfield geoms' in cli.info(m, 'forced.xml')


def test_eager_call_hints_at_jit():
  """An eager forward or step (op by op, seconds) says to jit it; a jitted one says nothing."""
  m = jaxsim.load(os.path.join(MODELS, 'pendulum.xml'))
  d = jaxsim.make_data(m)
  for fn in (jaxsim.forward, jaxsim.step):
    with pytest.warns(UserWarning, match='jax.jit'):
      fn(m, d)
  with warnings.catch_warnings():
    warnings.simplefilter('error')
    jax.jit(jaxsim.forward)(m, d)
    jax.jit(jaxsim.step)(m, d)
    # traced through qvel alone: qpos is a concrete array, the call is still jitted
    jax.jit(lambda v: jaxsim.step(m, jaxsim.make_data(m).replace(qvel=v)))(d.qvel)

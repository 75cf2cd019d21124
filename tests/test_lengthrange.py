"""Actuator length ranges found by simulation at load time agree with mujoco's compiler
(mj_setLengthRange), and a search that fails raises ModelError where mujoco's compiler fails."""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src.forward import step1, step2
from tests import oracle
from tests.models import MODELS

# a search that settles on joint limits ends where mujoco's does to round-off
RTOL = 1e-10
# muscle_arm's biarticular extensor ends its search still swinging (two links, damped only by
# the search's velocity decay), which amplifies round-off about 1e4-fold over its 1000 steps:
# jaxsim's lengths agree with a step-by-step replay of mj_setLengthRange in mujoco's Python
# bindings to 1e-13 at step 400 and 4e-9 at step 1000, and that replay itself differs from
# mujoco's compiler by 1.7e-10 (np.linalg.norm for mju_norm is enough)
RTOL_SWINGING = 1e-8

OPTIONS_XML = """
<mujoco model="lengthrange_options">
  <compiler angle="radian">
    <lengthrange mode="all" accel="30" maxforce="4" timeconst="0.5" timestep="0.005"
                 inttotal="6" interval="1" tolrange="0.1"/>
  </compiler>
  <option integrator="RK4">
    <flag limit="disable"/>
  </option>
  <worldbody>
    <body name="link">
      <joint name="hinge" axis="0 1 0" range="-1 1.2" limited="true" damping="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="slider" pos="0.3 0 0">
        <joint name="slide" type="slide" axis="1 0 0" range="-0.05 0.1" limited="true"/>
        <geom type="box" size="0.04 0.03 0.03"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="coupled">
      <joint joint="hinge" coef="0.2"/>
      <joint joint="slide" coef="1"/>
    </fixed>
  </tendon>
  <actuator>
    <muscle name="tendon_muscle" tendon="coupled"/>
    <muscle name="slide_muscle" joint="slide"/>
    <motor name="hinge_motor" joint="hinge"/>
    <position name="slide_servo" joint="slide" kp="10"/>
    <muscle name="given" joint="hinge" lengthrange="-0.5 0.5"/>
  </actuator>
</mujoco>
"""

UNLIMITED_XML = """
<mujoco>
  <compiler>
    <lengthrange inttotal="2" interval="1"/>
  </compiler>
  <worldbody>
    <body>
      <joint name="free_hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    </body>
  </worldbody>
  <actuator>
    <muscle name="limited_by_nothing" joint="free_hinge"/>
  </actuator>
</mujoco>
"""


def _close(ours, theirs, rtol=RTOL):
  np.testing.assert_allclose(np.asarray(ours), theirs, rtol=rtol, atol=1e-14)


def test_muscle_arm_against_mujoco():
  """Six muscles on spatial tendons (wrapping, side sites), mujoco's default search settings."""
  path = f'{MODELS}/muscle_arm.xml'
  mj = mujoco.MjModel.from_xml_path(path)
  m = oracle.load(path)
  assert np.all(mj.actuator_lengthrange[:, 1] > mj.actuator_lengthrange[:, 0])
  _close(m.actuator_lengthrange[:5], mj.actuator_lengthrange[:5])
  _close(m.actuator_lengthrange[5], mj.actuator_lengthrange[5], RTOL_SWINGING)


def test_search_options_against_mujoco():
  """mode="all" (a motor and a servo searched too), a given range kept, accel, maxforce,
  timeconst, timestep, inttotal, interval; RK4 searches with Euler; the model's disabled limits
  are on during the search, as mujoco's compiler replaces the disable flags."""
  mj = mujoco.MjModel.from_xml_string(OPTIONS_XML)
  m = jaxsim.load_string(OPTIONS_XML)
  _close(m.actuator_lengthrange, mj.actuator_lengthrange)
  # the limits bound the search: without them the ranges would not have converged
  assert mj.actuator_lengthrange[2, 0] == pytest.approx(-1, abs=0.01)
  np.testing.assert_array_equal(np.asarray(m.actuator_lengthrange)[4], [-0.5, 0.5])
  # the model's own options are untouched by the search
  assert m.opt.disableflags == mj.opt.disableflags
  assert float(m.opt.timestep) == mj.opt.timestep


def test_unconverged_search_raises_where_mujoco_does():
  with pytest.raises(ValueError, match='did not converge in actuator 0'):
    mujoco.MjModel.from_xml_string(UNLIMITED_XML)
  with pytest.raises(jaxsim.ModelError, match='did not converge in actuator 0') as err:
    jaxsim.load_string(UNLIMITED_XML)
  e = err.value
  assert (e.file, e.element, e.attribute) == ('<string>', 'muscle', 'lengthrange')
  assert UNLIMITED_XML.splitlines()[e.line - 1].strip().startswith('<muscle')


def test_split_step_against_mujoco():
  """step1, a force set, step2 (RK4 model: Euler in the second half) against
  mj_step1 / mj_step2 from a random state."""
  mj = mujoco.MjModel.from_xml_string(OPTIONS_XML)
  dj = mujoco.MjData(mj)
  m = jaxsim.load_string(OPTIONS_XML)
  qpos, qvel, act, ctrl = oracle.random_state(mj, np.random.default_rng(3))
  dj.qpos[:], dj.qvel[:], dj.act[:], dj.ctrl[:] = qpos, qvel, act, ctrl
  force = np.array([0.3, -2.0])
  d = jaxsim.make_data(m).replace(qpos=qpos, qvel=qvel, act=act, ctrl=ctrl)
  d = jax.jit(step1)(m, d)
  d = jax.jit(step2)(m, d.replace(qfrc_applied=force))
  mujoco.mj_step1(mj, dj)
  dj.qfrc_applied[:] = force
  mujoco.mj_step2(mj, dj)
  for name in ('qpos', 'qvel', 'qacc', 'actuator_force', 'time'):
    np.testing.assert_allclose(
      np.asarray(getattr(d, name)), getattr(dj, name), rtol=1e-9, atol=1e-12
    )

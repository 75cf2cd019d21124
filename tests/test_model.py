"""jaxsim.make_data: at qpos0 (mj_resetData) and at a keyframe (mj_resetDataKeyframe)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import jaxsim

XML = """
<mujoco>
  <worldbody>
    <body name="target" mocap="true" pos="0 0 1">
      <geom size="0.1" contype="0" conaffinity="0"/>
    </body>
    <body name="arm" pos="0 0 0.5">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05"/>
      <body pos="0.5 0 0"><joint type="ball"/><geom size="0.05"/></body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge"/>
    <general joint="hinge" dyntype="integrator" gainprm="1" biastype="affine"/>
  </actuator>
  <keyframe>
    <key name="home" time="1.5" qpos="0.3 0.9 0.1 0.3 0.3" qvel="0.5 1 2 3" act="0.7" ctrl="0.1 0.2"
         mpos="0.1 0.2 1.3" mquat="0 1 0 0"/>
    <key name="rest" qpos="0.1 1 0 0 0"/>
  </keyframe>
</mujoco>
"""


@pytest.fixture(scope='module')
def models():
  return jaxsim.load_string(XML), mujoco.MjModel.from_xml_string(XML)


@pytest.mark.parametrize('key', ['home', 1, 0, 'rest'])
def test_keyframe_state_is_mujocos(models, key):
  m, mj = models
  md = mujoco.MjData(mj)
  k = key if isinstance(key, int) else mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_KEY, key)
  mujoco.mj_resetDataKeyframe(mj, md, k)
  d = jaxsim.make_data(m, keyframe=key)
  for name in ('time', 'qpos', 'qvel', 'act', 'ctrl', 'mocap_pos', 'mocap_quat'):
    np.testing.assert_array_equal(np.asarray(getattr(d, name)), getattr(md, name), err_msg=name)


def test_no_keyframe_is_qpos0(models):
  m, mj = models
  md = mujoco.MjData(mj)
  d = jaxsim.make_data(m)
  for name in ('time', 'qpos', 'qvel', 'act', 'ctrl', 'mocap_pos', 'mocap_quat'):
    np.testing.assert_array_equal(np.asarray(getattr(d, name)), getattr(md, name), err_msg=name)


def test_unknown_keyframe_is_refused(models):
  m, _ = models
  with pytest.raises(KeyError, match='nope'):
    jaxsim.make_data(m, keyframe='nope')
  with pytest.raises(IndexError, match='2 keyframes'):
    jaxsim.make_data(m, keyframe=2)

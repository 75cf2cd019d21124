"""The mujoco.pid actuator plugin against mujoco: compiled layout, errors, and rollouts.

Instances named in <extension> (one shared by two actuators) and made by an actuator's own
<config>; integral (with and without imax), slew limit, D term, a filter in front (dyntype, with
actearly), ctrl and force ranges. Each step's qpos, qvel, act and actuator_force are mujoco's.
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle

XML = """
<mujoco>
  <option timestep="0.005" integrator="{integrator}"/>
  <extension>
    <plugin plugin="mujoco.pid">
      <instance name="shared">
        <config key="kp" value="4"/><config key="ki" value="6"/><config key="kd" value="0.2"/>
        <config key="imax" value="0.3"/><config key="slewmax" value="2"/>
      </instance>
    </plugin>
    <plugin plugin="mujoco.sensor.touch_grid"/>
  </extension>
  <worldbody>
    <body><joint name="a" axis="0 1 0" damping=".05"/><site name="s"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
      <body pos=".3 0 0"><joint name="b" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
        <body pos=".3 0 0"><joint name="c" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 .2 0 0" size=".03"/>
          <body pos=".2 0 0"><joint name="e" type="slide" axis="1 0 0"/><geom size=".04"/></body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <plugin name="pa" plugin="mujoco.pid" instance="shared" joint="a" actdim="2" ctrlrange="-1 1"/>
    <plugin instance="shared" joint="b" actdim="2" forcerange="-1.5 1.5"/>
    <plugin plugin="mujoco.pid" joint="c" actdim="2" dyntype="filter" dynprm=".05" actearly="true">
      <config key="kp" value="3"/><config key="ki" value="2"/><config key="kd" value=".1"/>
    </plugin>
    <plugin plugin="mujoco.pid" joint="e" gear="2">
      <config key="kp" value="20"/><config key="kd" value="1"/>
    </plugin>
    <motor joint="a" gear=".5"/>
  </actuator>
  <sensor>
    <plugin plugin="mujoco.sensor.touch_grid" objtype="site" objname="s">
      <config key="size" value="2 2"/><config key="fov" value="10 10"/>
    </plugin>
    <actuatorfrc actuator="pa"/>
  </sensor>
</mujoco>
"""


@pytest.fixture(scope='module', params=['Euler', 'implicitfast'])
def pair(request):
  xml = XML.format(integrator=request.param)
  return jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)


def test_layout_like_mujoco(pair):
  """Plugin instances (named, then the actuators' own, then the sensors'), activations."""
  m, mj = pair
  assert m.nplugin == mj.nplugin == 4
  np.testing.assert_array_equal(m.actuator_plugin, mj.actuator_plugin)
  np.testing.assert_array_equal(m.sensor_plugin, mj.sensor_plugin)
  for f in ('actuator_actnum', 'actuator_actadr', 'actuator_dyntype', 'actuator_gaintype'):
    np.testing.assert_array_equal(getattr(m, f), getattr(mj, f), err_msg=f)
  assert m.na == mj.na == 6


def test_rollout_like_mujoco(pair):
  """60 steps of changing controls from rest: the integral winds up to its clamp, the slew limit
  and the force range bind; every step's state and forces are mujoco's."""
  m, mj = pair
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(3)
  step = jax.jit(jaxsim.step)
  d = jaxsim.make_data(m)
  worst = {}
  for t in range(60):
    if t % 15 == 0:
      md.ctrl[:] = rng.uniform(-1.5, 1.5, mj.nu)
    d = d.replace(ctrl=md.ctrl.copy())
    mujoco.mj_step(mj, md)
    d = step(m, d)
    for f in ('qpos', 'qvel', 'act', 'actuator_force'):
      err = np.abs(np.asarray(getattr(d, f)) - getattr(md, f)).max()
      worst[f] = max(worst.get(f, 0.0), err / max(1.0, np.abs(getattr(md, f)).max()))
  for f, err in worst.items():
    assert err < 1e-9, (f, err)
  # the features were exercised: the shared integral sits at its clamp (imax / ki), the force
  # range binds
  assert np.isclose(abs(md.act[0]), 0.3 / 6) or np.isclose(abs(md.act[2]), 0.3 / 6)
  mujoco.mj_forward(mj, md)
  oracle.assert_close('actuatorfrc', jax.jit(jaxsim.forward)(m, d).sensordata, md.sensordata)


def _actuators(body: str, ext: str = '') -> str:
  return f"""<mujoco><extension><plugin plugin="mujoco.pid">{ext}</plugin></extension>
    <worldbody><body><joint name="j"/><geom size=".1"/></body></worldbody>
    <actuator>{body}</actuator></mujoco>"""


@pytest.mark.parametrize(
  'xml, match',
  [
    (
      _actuators('<plugin plugin="mujoco.pid" joint="j"><config key="ki" value="1"/></plugin>'),
      'has actdim 0, expected 1',
    ),
    (
      _actuators(
        '<plugin plugin="mujoco.pid" joint="j"/>',
        '<instance name="p"><config key="kp" value="1"/></instance>',
      ),
      'actuator not found for plugin instance 0',
    ),
    (
      _actuators(
        '<plugin instance="p" joint="j" actdim="1"/>',
        '<instance name="p"><config key="ki" value="1"/><config key="imax" value="-1"/></instance>',
      ),
      'negative imax',
    ),
    (
      _actuators(
        '<plugin plugin="mujoco.pid" joint="j" actdim="1">'
        '<config key="slewmax" value="-1"/></plugin>'
      ),
      'slewmax must be non-negative',
    ),
    (
      _actuators('<plugin plugin="mujoco.pid" joint="j"><config key="kq" value="1"/></plugin>'),
      'kq',
    ),
    (_actuators('<plugin joint="j"/>'), "neither 'plugin' nor 'instance'"),
    (_actuators('<plugin plugin="mujoco.sensor.touch_grid" joint="j"/>'), 'unrecognized plugin'),
    (
      _actuators('<plugin plugin="mujoco.pid" instance="p" joint="j"/>').replace(
        '</extension>',
        '<plugin plugin="mujoco.sensor.touch_grid"><instance name="p"><config key="size" '
        'value="2 2"/><config key="fov" value="9 9"/></instance></plugin></extension>',
      ),
      "instance 'p' is of plugin mujoco.sensor.touch_grid, not mujoco.pid",
    ),
  ],
)
def test_refused_like_mujoco(xml, match):
  """Each of these fails in mujoco too, at compile or when its data is made."""
  with pytest.raises(Exception):  # noqa: B017 - mujoco's errors are plain ValueErrors
    mujoco.MjData(mujoco.MjModel.from_xml_string(xml))
  with pytest.raises(jaxsim.ModelError, match=match):
    jaxsim.load_string(xml)

"""Touch grid sensors (the mujoco.sensor.touch_grid engine plugin) against mj_forward's sensordata.

A box carrying a hinged flap, with touch grids on sites of the box (three, with and without foveal
deformation, one to six channels, explicit and implicit plugin instances, one with a cutoff), on
the flap (two: one of its own, one sharing an instance, which MuJoCo leaves unwritten) and on the
ball (whose knob, a welded child body, touches the box as geom1), is pressed into a plane and
the ball at random poses, so that contacts fall into bins and outside the fields of view, on the
sensors' bodies and on others. The forces come from converged solves, so everything agrees to
round-off; each sensor is held to 1e-8 relative to its largest value. Also: the model fields
mujoco compiles, and the configurations both refuse.
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle

XML = """
<mujoco model="touch grids">
  <option cone="{cone}" tolerance="1e-12"/>
  <extension>
    <plugin plugin="mujoco.sensor.touch_grid">
      <instance name="wide">
        <config key="nchannel" value="6"/>
        <config key="size" value="5 3"/>
        <config key="fov" value="170 80"/>
        <config key="gamma" value="0.4"/>
      </instance>
    </plugin>
  </extension>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1"/>
    <body name="box" pos="0 0 .1">
      <freejoint/>
      <geom name="box" type="box" size=".12 .08 .05"/>
      <site name="bottom" pos="0 0 -.02"/>
      <site name="side" pos=".05 0 0" zaxis="-1 0 0"/>
      <site name="tilted" pos="0 .02 -.03" euler="20 -10 30"/>
      <body name="flap" pos=".12 0 0">
        <joint name="hinge" axis="0 1 0" range="-60 60"/>
        <geom name="flap" type="capsule" fromto="0 0 0 .08 0 -.04" size=".02"/>
        <site name="flap" pos=".04 0 -.02"/>
      </body>
    </body>
    <body name="ball" pos=".3 0 .1">
      <freejoint/>
      <geom name="ball" type="sphere" size=".07"/>
      <site name="ball" zaxis="1 0 0"/>
      <body name="knob">
        <geom name="knob" type="sphere" size=".03" pos="-.07 0 0"/>
      </body>
    </body>
  </worldbody>
  <sensor>
    <plugin name="bottom" plugin="mujoco.sensor.touch_grid" objtype="site" objname="bottom">
      <config key="nchannel" value="3"/>
      <config key="size" value="7 5"/>
      <config key="fov" value="90 60"/>
      <config key="gamma" value="0"/>
    </plugin>
    <plugin name="side" instance="wide" objtype="site" objname="side"/>
    <plugin name="tilted" plugin="mujoco.sensor.touch_grid" objtype="site" objname="tilted"
            cutoff="2">
      <config key="size" value="4 4"/>
      <config key="fov" value="180 90"/>
      <config key="gamma" value="1"/>
    </plugin>
    <plugin name="flap" plugin="mujoco.sensor.touch_grid" objtype="site" objname="flap">
      <config key="nchannel" value="2"/>
      <config key="size" value="3 2"/>
      <config key="fov" value="120 60"/>
    </plugin>
    <plugin name="shared" instance="wide" objtype="site" objname="flap"/>
    <plugin name="ball" plugin="mujoco.sensor.touch_grid" objtype="site" objname="ball">
      <config key="nchannel" value="3"/>
      <config key="size" value="6 3"/>
      <config key="fov" value="180 90"/>
    </plugin>
  </sensor>
</mujoco>
"""
NSTATE = 8


def _states(mj: mujoco.MjModel) -> list[tuple[np.ndarray, np.ndarray]]:
  """The box pressed into the floor, tilted, the ball now and then against it."""
  rng = np.random.default_rng(3)
  out = []
  for k in range(NSTATE):
    q = mj.qpos0.copy()
    q[0:2] = rng.normal(size=2) * 0.02
    q[2] = rng.uniform(0.03, 0.06)
    v = np.concatenate([[1.0], rng.normal(size=3) * 0.3])
    q[3:7] = v / np.linalg.norm(v)
    q[7] = rng.uniform(-1, 1)
    q[8:10] = q[0:2] + [0.24 if k % 2 else 0.5, rng.normal() * 0.03]
    q[10] = rng.uniform(0.05, 0.08)
    out.append((q, rng.normal(size=mj.nv) * 0.3))
  return out


def _run(cone: str):
  xml = XML.format(cone=cone)
  mj = mujoco.MjModel.from_xml_string(xml)
  m = jaxsim.load_string(xml)
  fwd = jax.jit(jaxsim.forward)
  theirs, ours = [], []
  for q, v in _states(mj):
    md = mujoco.MjData(mj)
    md.qpos[:], md.qvel[:] = q, v
    mujoco.mj_forward(mj, md)
    theirs.append(md)
    d = fwd(m, jaxsim.make_data(m).replace(qpos=q.copy(), qvel=v.copy()))
    ours.append(np.asarray(d.sensordata))
  return mj, theirs, ours


@pytest.fixture(scope='module', params=['elliptic', 'pyramidal'])
def run(request):
  return _run(request.param)


def test_compiled_like_mujoco():
  xml = XML.format(cone='elliptic')
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  assert m.nplugin == mj.nplugin == 5
  assert m.nsensordata == mj.nsensordata
  for f in ('type', 'dim', 'adr', 'needstage', 'datatype', 'objtype', 'objid', 'plugin'):
    np.testing.assert_array_equal(np.asarray(getattr(m, 'sensor_' + f)), getattr(mj, 'sensor_' + f))


def test_sensordata_matches_mujoco(run):
  mj, theirs, ours = run
  for k, (md, got) in enumerate(zip(theirs, ours, strict=True)):
    for i in range(mj.nsensor):
      a, n = mj.sensor_adr[i], mj.sensor_dim[i]
      what = f'state {k} sensor {mj.sensor(i).name!r}'
      oracle.assert_close(what, got[a : a + n], md.sensordata[a : a + n], rtol=1e-8, atol=1e-12)


def test_states_exercise_every_path(run):
  """Contacts land in several bins of every sensor, the ball's on the side grid, and the cutoff
  clamps; each sensor is empty in some state."""
  mj, theirs, _ = run
  for i in range(mj.nsensor):
    a, n = mj.sensor_adr[i], mj.sensor_dim[i]
    data = np.array([md.sensordata[a : a + n] for md in theirs])
    if mj.sensor(i).name == 'shared':
      assert not data.any()  # the instance computes its first sensor only
      continue
    assert (np.count_nonzero(data, axis=1) >= 2).any(), mj.sensor(i).name
  tilted = mj.sensor('tilted')
  data = np.array([md.sensordata[tilted.adr[0] : tilted.adr[0] + tilted.dim[0]] for md in theirs])
  assert (np.abs(data) == 2).any()
  # the ball's contacts with the floor have it as geom2, the knob's with the box as geom1
  ball, knob = mj.geom('ball').id, mj.geom('knob').id
  assert any(ball in md.contact.geom2[: md.ncon] for md in theirs)
  assert any(knob in md.contact.geom1[: md.ncon] for md in theirs)


def _sensor(config: str, site: str = 'objtype="site" objname="s"') -> str:
  return f"""<mujoco><extension><plugin plugin="mujoco.sensor.touch_grid"/></extension>
    <worldbody><body><freejoint/><geom size=".1"/><site name="s"/></body>
    </worldbody><sensor><plugin plugin="mujoco.sensor.touch_grid" {site}>{config}</plugin>
    </sensor></mujoco>"""


_OK = (
  '<config key="size" value="2 2"/><config key="fov" value="90 45"/>'
  '<config key="nchannel" value="{}"/><config key="gamma" value="{}"/>'
)


_VALUE, _KEY, _SENSOR = ('config', 'value'), ('config', 'key'), ('plugin', None)


@pytest.mark.parametrize(
  'xml, match, where',
  [
    (_sensor(_OK.format(7, 0)), 'nchannel', _VALUE),
    (_sensor(_OK.format(1, 2)), 'gamma', _VALUE),
    (_sensor('<config key="size" value="2"/><config key="fov" value="9 9"/>'), 'resolut', _VALUE),
    (_sensor('<config key="size" value="2 0"/><config key="fov" value="9 9"/>'), 'posit', _VALUE),
    (_sensor('<config key="size" value="2 2"/><config key="fov" value="200 9"/>'), 'fov', _VALUE),
    (_sensor('<config key="size" value="2 2"/><config key="fov" value="9 91"/>'), 'fov', _VALUE),
    (_sensor('<config key="size" value="2 2"/>'), 'fields of view', _SENSOR),
    (_sensor(_OK.format(1, 0), 'objtype="body" objname="world"'), 'site', ('plugin', 'objtype')),
    (_sensor(_OK.format(1, 0) + '<config key="bogus" value="1"/>'), 'bogus', _KEY),
  ],
)
def test_bad_configurations_refused(xml, match, where):
  """Both refuse; jaxsim names the <config> whose value is bad, else the sensor."""
  with pytest.raises(ValueError):
    mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(xml)
  assert (err.value.element, err.value.attribute) == where
  assert err.value.line is not None


def test_unused_instance_is_checked():
  """mujoco initialises every plugin instance, so a bad configuration fails even unused."""
  config = '<config key="nchannel" value="{}"/><config key="size" value="2 2"/>'
  config += '<config key="fov" value="9 9"/>'
  xml = (
    '<mujoco><extension><plugin plugin="mujoco.sensor.touch_grid"><instance name="i">'
    + config
    + '</instance></plugin></extension></mujoco>'
  )
  ok = xml.format(2)
  assert jaxsim.load_string(ok).nplugin == mujoco.MjModel.from_xml_string(ok).nplugin == 1
  with pytest.raises(ValueError):
    mujoco.MjModel.from_xml_string(xml.format(9))
  with pytest.raises(jaxsim.ModelError, match='nchannel') as err:
    jaxsim.load_string(xml.format(9))
  assert (err.value.element, err.value.attribute) == ('config', 'value')


def test_other_plugin_sensors_refused():
  xml = _sensor('').replace('mujoco.sensor.touch_grid', 'mujoco.pid')  # declared and used
  with pytest.raises(ValueError, match='does not support sensors'):
    mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match="plugin 'mujoco.pid' does not support sensors"):
    jaxsim.load_string(xml)
  with pytest.raises(jaxsim.ModelError, match="unrecognized plugin 'mujoco.sensor.touch_grid'"):
    jaxsim.load_string(_sensor('').replace('<plugin plugin="mujoco.sensor.touch_grid"/>', ''))
  xml = _sensor('').replace('plugin="mujoco.sensor.touch_grid" objtype', 'instance="nope" objtype')
  with pytest.raises(ValueError):
    mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match='unknown plugin instance'):
    jaxsim.load_string(xml)

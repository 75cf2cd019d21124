"""Site rangefinders with mujoco 4's data fields (dist dir origin point depth) against MuJoCo."""

import jax
import mujoco
import numpy as np
import pytest

import jaxsim

jax.config.update('jax_enable_x64', True)

# a turret of sites sweeping rays over a sphere, a box and empty space
XML = """<mujoco><worldbody>
  <geom type="sphere" size=".3" pos="1 0 1"/><geom type="box" size=".2 .3 .4" pos="0 1.2 1"/>
  <body pos="0 0 1"><joint name="yaw" axis="0 0 1"/><joint name="pitch" axis="0 1 0"/>
    <geom size=".05"/>
    <site name="a" zaxis="1 0 0"/><site name="b" pos="0 .05 0" zaxis="1 .1 .05"/>
    <site name="c" pos="0 0 .05" zaxis="0 1 0"/>
  </body></worldbody><sensor>{}</sensor></mujoco>"""
DATA = (
  'dist',
  'dir',
  'origin',
  'point',
  'depth',
  'dist dir origin point depth',
  'dir point',
  'origin depth',
)
SENSORS = (
  ''.join(f'<rangefinder site="{s}" data="{k}"/>' for s in 'abc' for k in DATA)
  + '<rangefinder site="a" data="dist point" cutoff=".5"/>'
)


@pytest.fixture(scope='module')
def models():
  xml = XML.format(SENSORS)
  return jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)


def test_layout_matches_mujoco(models):
  m, mj = models
  np.testing.assert_array_equal(np.asarray(m.sensor_dim), mj.sensor_dim)
  np.testing.assert_array_equal(np.asarray(m.sensor_intprm)[:, 0], mj.sensor_intprm[:, 0])


def test_raydata_matches_mujoco(models):
  """Over a sweep of the turret the rays hit and miss; every field equals MuJoCo's to 1e-12
  (relative to the scene's unit size)."""
  m, mj = models
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(0)
  qpos = np.stack([np.linspace(-np.pi, np.pi, 120), rng.uniform(-0.4, 0.4, 120)], axis=1)
  want = []
  for q in qpos:
    md.qpos[:] = q
    mujoco.mj_forward(mj, md)
    want.append(md.sensordata.copy())
  want = np.array(want)
  fwd = jax.jit(jax.vmap(jaxsim.forward, in_axes=(None, 0)))
  d0 = jaxsim.make_data(m)
  got = np.asarray(fwd(m, jax.vmap(lambda q: d0.replace(qpos=q))(qpos)).sensordata)
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
  dist = want[:, np.asarray(mj.sensor_adr)[: len(DATA) * 3 : len(DATA)]]
  assert (dist > 0).any(axis=0).all() and (dist == -1).any(axis=0).all()  # hits and misses


@pytest.mark.parametrize(
  'data, match',
  [
    ('point origin', 'must be in order'),
    ('dist dist', 'duplicate keyword'),
    ('range', 'invalid keyword'),
    ('dist normal', 'normals are not supported'),
  ],
)
def test_bad_data_is_refused(data, match):
  xml = XML.format(f'<rangefinder site="a" data="{data}"/>')
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(xml)
  assert err.value.attribute == 'data' and 'rangefinder' in str(err.value)
  if 'normal' not in data:  # mujoco refuses these too
    with pytest.raises(ValueError):
      mujoco.MjModel.from_xml_string(xml)

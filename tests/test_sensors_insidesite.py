"""<insidesite> sensors (mjSENS_INSIDESITE) against MuJoCo: every site shape, every object type."""

import jax
import mujoco
import numpy as np
import pytest

import jaxsim

jax.config.update('jax_enable_x64', True)

# a probe swept through five sites of every shape, rotated; the objects it carries are a geom,
# a site, a camera, its body (inertial frame), its xbody frame and a massless body whose child
# has mass (found by its subtree's centre of mass)
XML = """<mujoco><worldbody>
  <body name="probe" pos="-.7 0 1">
    <joint name="x" type="slide" axis="1 0 0"/><joint name="y" type="slide" axis="0 1 0"/>
    <joint name="z" type="slide" axis="0 0 1"/>
    <geom name="g" type="sphere" size=".02" pos=".01 .02 0" mass=".3"/>
    <site name="s" pos="-.02 .01 .03"/><camera name="c" pos=".03 0 -.01"/>
    <body name="shell" pos=".02 -.03 .01">
      <body name="core" pos=".03 0 0"><joint type="hinge" axis="0 1 0"/>
        <geom size=".01" mass=".1"/></body></body>
  </body>
  <site name="sphere" type="sphere" size=".11" pos="-.5 0 1"/>
  <site name="capsule" type="capsule" size=".08 .15" euler="20 -40 60" pos="-.25 0 1"/>
  <site name="ellipsoid" type="ellipsoid" size=".11 .15 .09" euler="20 40 -60" pos="0 0 1"/>
  <site name="cylinder" type="cylinder" size=".09 .12" euler="-20 40 60" pos=".25 0 1"/>
  <site name="box" type="box" size=".08 .1 .14" euler="20 -40 60" pos=".5 0 1"/>
</worldbody><sensor>{}</sensor></mujoco>"""
SITES = ('sphere', 'capsule', 'ellipsoid', 'cylinder', 'box')
OBJECTS = (('geom', 'g'), ('site', 's'), ('camera', 'c'), ('body', 'probe'), ('xbody', 'probe'))
SENSORS = ''.join(
  f'<insidesite site="{s}" objtype="{t}" objname="{n}"/>' for s in SITES for t, n in OBJECTS
) + ''.join(f'<insidesite site="{s}" objtype="body" objname="shell"/>' for s in SITES)


@pytest.fixture(scope='module')
def models():
  xml = XML.format(SENSORS)
  return jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)


def test_massless_body_uses_its_subtree(models):
  _, mj = models
  shell = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, 'shell')
  assert mj.body_mass[shell] == 0 and mj.body_subtreemass[shell] > 0


def test_insidesite_matches_mujoco(models):
  """Along the sweep every site holds the probe at some states and not at others; the
  sensordata equal MuJoCo's exactly (0 or 1)."""
  m, mj = models
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(0)
  n = 400
  qpos = np.zeros((n, mj.nq))
  qpos[:, 0] = np.linspace(0, 1.4, n)
  qpos[:, 1:3] = rng.uniform(-0.12, 0.12, (n, 2))
  qpos[:, 3:] = rng.uniform(-np.pi, np.pi, (n, 1))
  want = []
  for q in qpos:
    md.qpos[:] = q
    mujoco.mj_forward(mj, md)
    want.append(md.sensordata.copy())
  want = np.array(want)
  fwd = jax.jit(jax.vmap(jaxsim.forward, in_axes=(None, 0)))
  d0 = jaxsim.make_data(m)
  got = fwd(m, jax.vmap(lambda q: d0.replace(qpos=q))(qpos))
  np.testing.assert_array_equal(np.asarray(got.sensordata), want)
  # every sensor is both on and off somewhere along the sweep (the comparison can fail)
  assert (want.max(axis=0) == 1).all() and (want.min(axis=0) == 0).all()

"""Collision sensors (distance, normal, fromto) against mj_forward's sensordata.

One model has geoms of every type jaxsim collides (plane, sphere, capsule, ellipsoid, cylinder,
box, mesh) on four free bodies, and sensors on geom pairs and on body pairs (every geom of one
body against every geom of the other) with large, small and zero cutoffs, so that the compared
states have pairs beyond the cutoff, separated within it, touching and penetrating. Contacts are
off (the sensors collide their geoms themselves), so the program compiled is mostly the sensors.

Tolerances. Pairs MuJoCo collides analytically (a plane with anything, sphere-sphere,
sphere-capsule, sphere-cylinder, sphere-box, capsule-capsule, capsule-box) agree to 1e-9. Pairs
that go through native CCD (mj_geomDistanceCCD: GJK, and EPA where the geoms overlap) agree to
1e-9 in distance, but their witness points (fromto) only to about 1e-7: GJK stops on a duality
gap below 0.5 ccd_tolerance^2, so its witness points carry an error of the order of
ccd_tolerance that round-off of 1e-15 in the inputs moves by as much (jaxsim's own result moves
by that much when geom_xpos is perturbed by 1e-15). fromto of CCD pairs is held to CCD_FROMTO,
and their normal, the direction of that segment, to 2 CCD_FROMTO / |segment|.
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import sensors
from jaxsim._src.collision import distance
from tests import oracle

ANALYTIC = 1e-9
CCD_FROMTO = 2e-6

XML = """
<mujoco model="collision sensors">
  <option><flag contact="disable"/></option>
  <asset>
    <mesh name="tet" vertex="0 0 0  .12 0 0  0 .12 0  0 0 .12  .1 .1 .1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <geom name="wall" type="plane" size="1 1 .1" pos="0 .6 0" zaxis="0 -1 0"/>
    <body name="a" pos="0 0 .15">
      <freejoint/>
      <geom name="sph" type="sphere" size=".08"/>
      <geom name="cap" type="capsule" size=".05 .08" pos=".15 0 0" euler="0 90 0"/>
    </body>
    <body name="b" pos=".2 .1 .2">
      <freejoint/>
      <geom name="box" type="box" size=".06 .07 .05"/>
      <geom name="ell" type="ellipsoid" size=".05 .07 .09" pos="0 .15 0"/>
    </body>
    <body name="c" pos="-.15 .05 .15">
      <freejoint/>
      <geom name="cyl" type="cylinder" size=".06 .05"/>
      <geom name="mesh" type="mesh" mesh="tet" pos="0 -.15 0"/>
    </body>
    <body name="d" pos="0 .25 .2">
      <freejoint/>
      <geom name="sph2" type="sphere" size=".07"/>
      <geom name="box2" type="box" size=".05 .05 .05" pos=".12 0 0"/>
      <geom name="cap2" type="capsule" size=".03 .06" pos="-.1 0 0" euler=".3 .2 0"/>
    </body>
    <body name="empty" pos="0 0 .6">
      <freejoint/>
      <inertial pos="0 0 0" mass=".1" diaginertia=".001 .001 .001"/>
    </body>
  </worldbody>
  <sensor>
    <distance name="sph_box" geom1="sph" geom2="box" cutoff="1"/>
    <distance name="box_sph" geom1="box" geom2="sph" cutoff="1"/>
    <distance name="sph_sph2" geom1="sph" geom2="sph2" cutoff=".05"/>
    <distance name="cap_cap2" geom1="cap" geom2="cap2" cutoff=".5"/>
    <distance name="cap_box2" geom1="cap" geom2="box2" cutoff=".5"/>
    <distance name="sph2_cyl" geom1="sph2" geom2="cyl" cutoff=".5"/>
    <distance name="cap_ell" geom1="cap" geom2="ell" cutoff="1"/>
    <distance name="cyl_mesh" geom1="cyl" geom2="mesh" cutoff="1"/>
    <distance name="box_box2" geom1="box" geom2="box2" cutoff="1"/>
    <distance name="ell_cyl" geom1="ell" geom2="cyl"/>
    <distance name="floor_box" geom1="floor" geom2="box" cutoff="1"/>
    <distance name="mesh_floor" geom1="mesh" geom2="floor" cutoff="1"/>
    <distance name="floor_wall" geom1="floor" geom2="wall" cutoff="1"/>
    <distance name="sph_a" geom1="sph" body2="a" cutoff="1"/>
    <distance name="floor_a" geom1="floor" body2="a" cutoff=".1"/>
    <distance name="a_b" body1="a" body2="b" cutoff="1"/>
    <distance name="c_world" body1="c" body2="world" cutoff=".1"/>
    <distance name="b_c" body1="b" body2="c"/>
    <distance name="empty_a" body1="empty" body2="a" cutoff="1"/>
    <normal name="n_sph_box" geom1="sph" geom2="box" cutoff="1"/>
    <normal name="n_floor_cap" geom1="floor" geom2="cap" cutoff=".3"/>
    <normal name="n_a_c" body1="a" body2="c" cutoff="1"/>
    <normal name="n_d_b" body1="d" body2="b" cutoff=".02"/>
    <normal name="n_world_b" body1="world" body2="b"/>
    <fromto name="ft_cap_cyl" geom1="cap" geom2="cyl" cutoff="1"/>
    <fromto name="ft_box2_sph" geom1="box2" geom2="sph" cutoff="1"/>
    <fromto name="ft_world_d" body1="world" body2="d" cutoff="1"/>
    <fromto name="ft_b_d" body1="b" body2="d" cutoff=".03"/>
    <fromto name="ft_ell_mesh" geom1="ell" geom2="mesh" cutoff="1"/>
    <fromto name="ft_c_d" body1="c" body2="d" cutoff=".2"/>
    <fromto name="ft_sph2_box2" geom1="sph2" geom2="box2" cutoff="1"/>
  </sensor>
</mujoco>
"""

GEOMDIST, GEOMNORMAL, GEOMFROMTO = 39, 40, 41
FIELDS = ('type', 'datatype', 'needstage', 'objtype', 'objid', 'reftype', 'refid', 'dim', 'adr')


def _touching(mj: mujoco.MjModel) -> list[np.ndarray]:
  """qpos of states where geoms touch: the sphere on the floor; the box resting on the sphere
  and the two boxes face to face; the capsule's side on the box's top."""
  out = []

  def place(qpos, body, pos, quat=(1.0, 0.0, 0.0, 0.0)):
    a = mj.jnt_qposadr[mj.body_jntadr[mj.body(body).id]]
    qpos[a : a + 7] = (*pos, *quat)

  q = mj.qpos0.copy()
  place(q, 'a', (0.0, 0.0, 0.08))  # sph on the floor (the capsule 0.03 above it)
  place(q, 'b', (0.5, 0.0, 0.3))
  place(q, 'c', (-0.5, 0.0, 0.3))
  place(q, 'd', (0.0, -0.5, 0.3))
  out.append(q)
  q = q.copy()
  place(q, 'b', (0.0, 0.0, 0.21))  # the box's bottom at the sphere's top
  place(q, 'd', (-0.12 + 0.11, 0.0, 0.21))  # box2's side on the box's side
  out.append(q)
  q = q.copy()
  place(q, 'a', (-0.15, 0.0, 0.31))  # the capsule's side on the box's top (z = 0.26)
  out.append(q)
  return out


@pytest.fixture(scope='module')
def run():
  """(mj, m, MuJoCo's MjData per state, jaxsim sensordata per state)."""
  mj = mujoco.MjModel.from_xml_string(XML)
  m = jaxsim.load_string(XML)
  fn = jax.jit(jaxsim.forward)
  rng = np.random.default_rng(0)
  states = [oracle.random_state(mj, rng, scale=0.15) for _ in range(16)]
  # crowded: every body within 0.1 of one point, so that most pairs overlap
  for _ in range(16):
    st = oracle.random_state(mj, rng)
    free = mj.jnt_qposadr[mj.jnt_type == mujoco.mjtJoint.mjJNT_FREE]
    st[0][free[:, None] + np.arange(3)] = rng.uniform(-0.1, 0.1, (len(free), 3)) + [0, 0.1, 0.15]
    states.append(st)
  zero = (np.zeros(mj.nv), np.zeros(0), np.zeros(0))
  states += [(q, *zero) for q in _touching(mj)]
  theirs, ours = [], []
  for st in states:
    theirs.append(oracle.mj_data(mj, *st))
    ours.append(np.asarray(fn(m, oracle.jx_data(m, *st)).sensordata))
  return mj, m, theirs, ours


def _pairs(mj: mujoco.MjModel, i: int) -> list[tuple[int, int]]:
  def side(t, k):
    if t == mujoco.mjtObj.mjOBJ_BODY:
      return range(mj.body_geomadr[k], mj.body_geomadr[k] + mj.body_geomnum[k])
    return [k]

  one = side(mj.sensor_objtype[i], mj.sensor_objid[i])
  two = side(mj.sensor_reftype[i], mj.sensor_refid[i])
  return [(g1, g2) for g1 in one for g2 in two]


def _uses_ccd(mj: mujoco.MjModel, m: jaxsim.Model, i: int) -> bool:
  g = np.array(_pairs(mj, i), dtype=int).reshape(-1, 2)
  return bool((distance.methods(m, g[:, 0], g[:, 1]) == distance.CCD).any())


def test_compiled_sensor_fields_match_mujoco(run):
  mj, m, _, _ = run
  for f in FIELDS + ('cutoff',):
    np.testing.assert_array_equal(np.asarray(getattr(m, 'sensor_' + f)), getattr(mj, 'sensor_' + f))
  assert sensors.unsupported(m) == []


def _segment(mj: mujoco.MjModel, md: mujoco.MjData, i: int) -> float:
  """Length of the segment MuJoCo's sensor i picks (mj_geomDistance over its pairs)."""
  best, seg = mj.sensor_cutoff[i], np.zeros(6)
  for g1, g2 in _pairs(mj, i):
    fromto = np.zeros(6)
    dist = mujoco.mj_geomDistance(mj, md, g1, g2, mj.sensor_cutoff[i], fromto)
    if dist < best:
      best, seg = dist, fromto
  return float(np.linalg.norm(seg[3:] - seg[:3]))


def test_sensordata_matches_mujoco(run):
  mj, m, theirs, ours = run
  for k, (md, got) in enumerate(zip(theirs, ours, strict=True)):
    for i in range(mj.nsensor):
      a, n = mj.sensor_adr[i], mj.sensor_dim[i]
      what = f'state {k} sensor {mj.sensor(i).name!r}'
      want, t = md.sensordata[a : a + n], mj.sensor_type[i]
      # fromto of CCD pairs to CCD_FROMTO; a normal, the direction of that segment, to twice its
      # ends' tolerance over its length (round-off decides the direction of a vanishing one)
      tol = CCD_FROMTO if _uses_ccd(mj, m, i) else ANALYTIC
      if t == GEOMNORMAL:
        tol = max(ANALYTIC, 2 * tol / max(_segment(mj, md, i), 1e-300))
      elif t == GEOMDIST:
        tol = ANALYTIC
      oracle.assert_close(what, got[a : a + n], want, 0.0, tol)


def test_states_cover_every_case(run):
  """The states reach pairs beyond the cutoff, separated within it, touching and penetrating
  (analytic and CCD pairs alike), penetrating deeper than the cutoff, and penetrating pairs of
  sensors with no cutoff."""
  mj, m, theirs, _ = run
  ids = np.flatnonzero(mj.sensor_type == GEOMDIST)
  dists = np.array([md.sensordata[mj.sensor_adr[ids]] for md in theirs])
  cutoff = mj.sensor_cutoff[ids]
  ccd = np.array([_uses_ccd(mj, m, i) for i in ids])
  for kind in (ccd, ~ccd):
    assert (dists[:, kind] < 0).sum() >= 20
    assert ((dists > 0) & (dists < cutoff))[:, kind].sum() >= 50
    assert ((dists == 0) & (cutoff > 0))[:, kind].sum() >= 1
  assert ((dists == 0) & (cutoff > 0)).sum() >= 4
  assert ((dists == cutoff) & (cutoff > 0)).sum() >= 50
  assert ((dists == -cutoff) & (cutoff > 0)).sum() >= 3  # apply_cutoff clamps deep penetration
  assert (dists[:, cutoff == 0] < 0).sum() >= 5


def test_height_field_pairs_are_listed_unsupported():
  """A body pair holding a height field and a geom it collides with (which MuJoCo computes with
  mjc_ConvexHField) is named by sensors.unsupported and refused by forward."""
  xml = """
  <mujoco>
    <asset><hfield name="h" nrow="3" ncol="3" size="1 1 .1 .1"/></asset>
    <worldbody>
      <geom type="hfield" hfield="h"/>
      <body name="b" pos="0 0 .5"><freejoint/><geom size=".1"/></body>
      <body name="c" pos="0 0 .8"><freejoint/><geom size=".1"/></body>
    </worldbody>
    <sensor>
      <distance body1="b" body2="c" cutoff="1"/>
      <normal body1="world" body2="b" cutoff="1"/>
    </sensor>
  </mujoco>
  """
  m = jaxsim.load_string(xml)
  missing = sensors.unsupported(m)
  assert len(missing) == 1 and '<normal> sensor 1' in missing[0], missing
  with pytest.raises(NotImplementedError, match='height field'):
    jaxsim.forward(m, jaxsim.make_data(m))

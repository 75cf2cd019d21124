"""Contact sensors (<contact>, mjSENS_CONTACT) against mj_forward's sensordata.

A box with a hinged leg, a ball and a capsule are dropped into a plane and into each other with
random velocities, so that each state has three to seven contacts. The sensors cover every data
field (found, force, torque, dist, pos, normal, tangent, linvel, angvel), every reduction (none,
mindist, maxforce, netforce), num above and below the number of matches, geom, body, subtree and
site criteria, one side left open, and flipped matches (the sensor's first object is the
contact's second geom: a plane is always a contact's geom1). A second model caps the contact
slots (condim classes stored apart, so the sensors must restore mj_collision's order) and uses
the pyramidal cone. Forces come from converged solves, so everything agrees to round-off; each
sensor is held to 1e-8 relative to its largest component.
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle

XML = """
<mujoco model="contact sensors">
  <option timestep="0.002" cone="{cone}" tolerance="1e-12"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1" condim="{floor_condim}"/>
    <site name="zone" type="box" pos=".15 0 0" size=".15 .4 .2"/>
    <body name="base" pos="0 0 .1">
      <freejoint/>
      <geom name="box" type="box" size=".1 .08 .06"/>
      <body name="leg" pos=".12 0 0">
        <joint name="knee" type="hinge" axis="0 1 0"/>
        <geom name="leg" type="capsule" fromto="0 0 0 0 0 -.1" size=".02"/>
      </body>
    </body>
    <body name="ball" pos=".3 0 .1">
      <freejoint/>
      <geom name="ball" type="sphere" size=".08"/>
    </body>
    <body name="pill" pos="-.3 0 .1">
      <freejoint/>
      <geom name="pill" type="capsule" size=".04 .1" condim="1"/>
      <geom name="ghost" type="sphere" size=".02" pos="0 0 1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <sensor>
    <contact name="all" num="20" data="found force torque dist pos normal tangent"/>
    <contact name="box_floor" geom1="box" geom2="floor" num="2" data="found force dist"
             reduce="mindist"/>
    <contact name="floor_box" geom1="floor" geom2="box" num="4"
             data="force torque normal tangent"/>
    <contact name="ball_maxforce" body1="ball" num="3" data="found force normal"
             reduce="maxforce"/>
    <contact name="base_tree" subtree1="base" subtree2="world" num="6" data="found force pos"/>
    <contact name="world_world" subtree1="world" subtree2="world" num="3" data="dist normal"/>
    <contact name="zone" site="zone" num="5" data="found force pos"/>
    <contact name="zone_box" site="zone" body2="base" num="2" data="found normal"/>
    <contact name="to_ball" geom2="ball" num="2" data="force normal"/>
    <contact name="net" body1="base" reduce="netforce"
             data="found force torque dist pos normal tangent"/>
    <contact name="net_none" geom1="ghost" reduce="netforce" num="2"
             data="found force pos normal tangent"/>
    <contact name="box_vel" geom1="box" num="2" data="found linvel angvel"/>
    <contact name="ball_vel" geom2="ball" num="2" data="linvel angvel" reduce="mindist"/>
    <contact name="pill_max" body2="pill" num="2" reduce="maxforce" data="force"/>
    <contact name="default"/>
    <contact name="box_pill" body1="base" body2="pill" data="found force normal" num="2"/>
    <contact name="mindist_all" num="4" reduce="mindist" data="found dist"/>
  </sensor>
</mujoco>
"""
NSTATE = 8


def _states(mj: mujoco.MjModel) -> list[tuple[np.ndarray, np.ndarray]]:
  """Bodies pressed into the floor (the pill now and then onto the box), random velocities."""
  rng = np.random.default_rng(0)
  out = []
  for k in range(NSTATE):
    q = mj.qpos0.copy()
    for a in (0, 8, 15):
      q[a : a + 2] += rng.normal(size=2) * 0.05
      q[a + 2] = rng.uniform(0.03, 0.09)
      v = rng.normal(size=4) * 0.2
      v[0] = 1
      q[a + 3 : a + 7] = v / np.linalg.norm(v)
    if k % 2:
      # the pill across the box top
      q[15:17] = q[0:2] + rng.normal(size=2) * 0.02
      q[17] = q[2] + 0.09 + rng.uniform(-0.01, 0.005)
      q[18:22] = [np.cos(0.8), 0, np.sin(0.8), 0]
    q[7] = rng.normal() * 0.3
    out.append((q, rng.normal(size=mj.nv) * 0.5))
  return out


def _mujoco(mj: mujoco.MjModel) -> list[mujoco.MjData]:
  out = []
  for q, v in _states(mj):
    md = mujoco.MjData(mj)
    md.qpos[:], md.qvel[:] = q, v
    mujoco.mj_forward(mj, md)
    out.append(md)
  return out


def _run(cone: str, floor_condim: int, ncon_max: int | None):
  xml = XML.format(cone=cone, floor_condim=floor_condim)
  mj = mujoco.MjModel.from_xml_string(xml)
  m = jaxsim.load_string(xml)
  if ncon_max is not None:
    m = jaxsim.with_ncon_max(m, ncon_max)
  fwd = jax.jit(jaxsim.forward)
  theirs = _mujoco(mj)
  ours = []
  for md in theirs:
    d = fwd(m, jaxsim.make_data(m).replace(qpos=md.qpos.copy(), qvel=md.qvel.copy()))
    ours.append(np.asarray(d.sensordata))
  return m, mj, theirs, ours


@pytest.fixture(scope='module')
def slots():
  """Every collider pair its own slots (Data.contact in mj_collision's order), elliptic cone."""
  return _run('elliptic', 3, None)


@pytest.fixture(scope='module')
def capped():
  """Capped slots in two condim classes (the plane's contacts with the pill have condim 1, stored
  apart from the others), pyramidal cone."""
  return _run('pyramidal', 1, 8)


def _compare(mj, theirs, ours):
  for k, (md, got) in enumerate(zip(theirs, ours, strict=True)):
    for i in range(mj.nsensor):
      a, n = mj.sensor_adr[i], mj.sensor_dim[i]
      what = f'state {k} sensor {mj.sensor(i).name!r}'
      oracle.assert_close(what, got[a : a + n], md.sensordata[a : a + n], rtol=1e-8, atol=1e-12)


def test_compiled_like_mujoco():
  """dim, intprm (dataspec, reduce, num), needstage and the matching objects are mujoco's."""
  xml = XML.format(cone='elliptic', floor_condim=3)
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('dim', 'adr', 'intprm', 'needstage', 'datatype', 'objtype', 'objid', 'reftype'):
    np.testing.assert_array_equal(np.asarray(getattr(m, 'sensor_' + f)), getattr(mj, 'sensor_' + f))
  np.testing.assert_array_equal(np.asarray(m.sensor_refid), mj.sensor_refid)
  # found-only, velocity and force sensors sit at the position, velocity and acceleration stages
  assert set(mj.sensor_needstage.tolist()) == {1, 2, 3}


def test_states_exercise_every_path():
  """The states have flipped matches, more and fewer matches than slots, site hits and misses."""
  mj = mujoco.MjModel.from_xml_string(XML.format(cone='elliptic', floor_condim=3))
  theirs = _mujoco(mj)

  def found(md, name):
    i = mj.sensor(name).id
    return md.sensordata[mj.sensor_adr[i]]

  box = mj.geom('box').id
  assert all(md.ncon >= 3 for md in theirs)
  assert any(found(md, 'box_floor') > 2 for md in theirs)  # num < matches
  assert any(0 < found(md, 'all') < 20 for md in theirs)  # num > matches
  assert any(0 < found(md, 'zone') < found(md, 'all') for md in theirs)  # the site filters
  assert any(found(md, 'box_pill') > 0 for md in theirs)  # box-capsule contacts
  assert all(found(md, 'net_none') == 0 for md in theirs)
  # the box is geom2 of its floor contacts: geom1="box" matches are flipped
  assert any(box in md.contact.geom2[: md.ncon] for md in theirs)


def test_sensordata_matches_mujoco(slots):
  _, mj, theirs, ours = slots
  _compare(mj, theirs, ours)


def test_capped_slots_in_mujoco_order(capped):
  m, mj, theirs, ours = capped
  assert len(np.unique(m.layout.contact_dim)) == 2
  assert all(md.ncon <= 8 for md in theirs)  # no overflow: the same contacts
  _compare(mj, theirs, ours)

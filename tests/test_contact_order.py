"""Data.contact and the contact constraint rows come in mj_collision's order.

MuJoCo emits contacts by body-pair signature, each body pair's <pair>s first, then its geom
pairs; jaxsim's collider groups are laid out in that order (Layout.slot_order), so the active
contacts and the active efc rows line up with MuJoCo's index by index.
"""

from __future__ import annotations

import os

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle

XML = os.path.join(os.path.dirname(__file__), 'assets', 'contact_order.xml')


@pytest.fixture(scope='module')
def pair():
  m, mj = oracle.load_pair(XML, disable=0)
  return m, mj, jax.jit(jaxsim.forward)


def _state(mj: mujoco.MjModel, rng: np.random.Generator) -> np.ndarray:
  """Bodies dropped into each other and the floor: ten or so contacts between most pairs."""
  q = mj.qpos0.copy()
  q[2], q[9] = rng.uniform(0.03, 0.08), rng.uniform(0.12, 0.2)
  q[0:2] += rng.normal(size=2) * 0.02
  q[7:9] += rng.normal(size=2) * 0.05
  q[14], q[16] = 0.55 + rng.normal() * 0.03, rng.uniform(0.0, 0.05)
  for a in (3, 10, 17):
    v = rng.normal(size=4) * 0.15
    v[0] = 1
    q[a : a + 4] = v / np.linalg.norm(v)
  return q


@pytest.mark.parametrize('seed', range(4))
def test_contacts_and_rows_in_mujoco_order(pair, seed):
  m, mj, forward = pair
  q = _state(mj, np.random.default_rng(seed))
  md = mujoco.MjData(mj)
  md.qpos[:] = q
  mujoco.mj_forward(mj, md)
  assert md.ncon >= 6
  d = forward(m, jaxsim.make_data(m).replace(qpos=q))
  act = np.asarray(d.contact.active)
  ours = np.stack([np.asarray(d.contact.geom1)[act], np.asarray(d.contact.geom2)[act]], axis=1)
  np.testing.assert_array_equal(ours, md.contact.geom[: md.ncon])
  oracle.assert_close('contact dist', np.asarray(d.contact.dist)[act], md.contact.dist)
  oracle.assert_close('contact pos', np.asarray(d.contact.pos)[act], md.contact.pos, atol=1e-12)
  rows = np.asarray(d.efc_active)
  assert not mujoco.mj_isSparse(mj)
  theirs = md.efc_J.reshape(md.nefc, mj.nv)
  oracle.assert_close('efc_J', np.asarray(jaxsim.efc_J_dense(m, d))[rows], theirs, atol=1e-12)
  oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-6)


def test_box_placed_exactly_on_the_floor():
  """Boxes placed at exactly their half height on a plane, turned about z (as MuJoCo's
  stonehenge.xml): MuJoCo's contacts have dist exactly 0 and no constraint rows. jaxsim
  keeps a unit quaternion's bits as mju_normalize4 does, so it agrees row for row."""
  bodies = ''.join(
    f'<body pos="{k} 0 .4" euler="0 0 {12 * k + 6}"><freejoint/>'
    '<geom type="box" size=".3 .2 .4"/></body>'
    for k in range(4)
  )
  xml = f'<mujoco><worldbody><geom type="plane" size="5 5 .1"/>{bodies}</worldbody></mujoco>'
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  mujoco.mj_forward(mj, md)
  assert md.ncon >= 8 and not (md.contact.dist[: md.ncon]).any() and md.nefc == 0
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m))
  act = np.asarray(d.contact.active)
  np.testing.assert_array_equal(np.asarray(d.contact.dist)[act], md.contact.dist)
  assert int(np.asarray(d.efc_active).sum()) == 0
  oracle.assert_close('qacc', d.qacc, md.qacc)

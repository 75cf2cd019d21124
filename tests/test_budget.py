"""Contact budget: the default (layout.default_budget, sized from what the model can touch),
jaxsim.with_ncon_max, and <size nconmax>/<size njmax> where they are far smaller.

The default keeps MuJoCo's contacts over random-control rollouts of the humanoid and MuJoCo's
four-humanoid scene (benchmarks/budget.py --sweep runs the whole dm_control suite and the
22 humanoids). Within a budget the capped slots give MuJoCo's contacts, rows and accelerations;
beyond it the deepest contacts are kept and Data.warning counts the overflow
(mjWARN_CONTACTFULL). MuJoCo 4 grows its contact arena instead, so only the first case is
compared with it; and <size nconmax> that would save less than layout.LEGACY_FACTOR is ignored
as MuJoCo 4 ignores it.
"""

from __future__ import annotations

import os

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import kinematics, layout, math
from jaxsim._src.collision import driver
from tests import models, oracle

CONTACTFULL = int(mujoco.mjtWarning.mjWARN_CONTACTFULL)

# four spheres on a plane at different depths, and a box with 4 contact slots on it; heights are
# set per test
SCENE = """
<mujoco>
  <size nconmax="{nconmax}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 {z0}"><freejoint/><geom size=".1"/></body>
    <body pos=".5 0 {z1}"><freejoint/><geom size=".1"/></body>
    <body pos="1 0 {z2}"><freejoint/><geom size=".1"/></body>
    <body pos="1.5 0 {z3}"><freejoint/><geom size=".1"/></body>
    <body pos="0 1 .2" euler="0 0 30"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  </worldbody>
</mujoco>
"""


def _forward(xml, budget: int | None = None):
  m = jaxsim.load_string(xml)
  if budget is not None:
    m = jaxsim.with_ncon_max(m, budget)
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m))
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  mujoco.mj_forward(mj, md)
  return m, d, mj, md


def test_capped_slots_within_budget_match_mujoco():
  """Three touching spheres, a budget of three slots (of eight collider slots): MuJoCo's physics."""
  xml = SCENE.format(nconmax=3, z0=0.09, z1=0.08, z2=0.5, z3=0.07)
  m, d, mj, md = _forward(xml, 3)
  b = m.layout.budget
  assert b.capped and b.ncon < b.nfull, (b.ncon, b.nfull)
  assert int(d.ncon) == md.ncon == 3
  assert int(d.warning[CONTACTFULL]) == 0
  active = np.asarray(d.contact.active)
  ours = sorted(zip(np.asarray(d.contact.geom1)[active], np.asarray(d.contact.dist)[active]))
  theirs = sorted(zip(md.contact.geom1[: md.ncon], md.contact.dist[: md.ncon]))
  np.testing.assert_array_equal([g for g, _ in ours], [g for g, _ in theirs])
  np.testing.assert_allclose([x for _, x in ours], [x for _, x in theirs], rtol=0, atol=1e-12)
  oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-6)
  oracle.assert_close(
    'efc_force', np.asarray(d.efc_force)[np.asarray(d.efc_active)], md.efc_force, rtol=1e-6
  )


def test_overflow_keeps_the_deepest_and_counts():
  """Four touching spheres, two slots: the two deepest stay, in slot order; one warning."""
  xml = SCENE.format(nconmax=2, z0=0.09, z1=0.08, z2=0.095, z3=0.07)
  m, d, mj, md = _forward(xml, 2)
  assert md.ncon == 4  # MuJoCo itself keeps them all
  active = np.asarray(d.contact.active)
  assert int(d.ncon) == 2
  np.testing.assert_array_equal(np.asarray(d.contact.geom2)[active], [2, 4])
  np.testing.assert_allclose(np.asarray(d.contact.dist)[active], [-0.02, -0.03], atol=1e-12)
  assert int(d.warning[CONTACTFULL]) == 1
  assert np.all(np.isfinite(np.asarray(d.qacc)))
  # the kept spheres are held up, the dropped ones fall freely
  qacc_z = np.asarray(d.qacc)[2::6][:4]
  assert qacc_z[1] > 0 and qacc_z[3] > 0
  np.testing.assert_allclose(qacc_z[[0, 2]], -9.81, rtol=1e-12)


def test_legacy_nconmax_is_ignored_where_every_slot_is_affordable():
  """<size nconmax="5"> on 18 collider slots (3.6x the rows of five): MuJoCo 4 keeps all eight
  contacts (four spheres, the box's four), and so does jaxsim, in MuJoCo's order."""
  xml = SCENE.format(nconmax=5, z0=0.09, z1=0.08, z2=0.095, z3=0.07)
  xml = xml.replace('<body pos="0 1 .2"', '<body pos="0 1 .09"')
  m, d, mj, md = _forward(xml)
  b = m.layout.budget
  assert not b.capped and b.ncon == b.nfull == 18
  assert int(d.ncon) == md.ncon == 8 and int(d.warning[CONTACTFULL]) == 0
  active = np.asarray(d.contact.active)
  np.testing.assert_array_equal(np.asarray(d.contact.geom)[active], md.contact.geom[: md.ncon])
  oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-9)


def test_legacy_nconmax_caps_where_every_slot_costs_far_more():
  """Twelve spheres (78 collider slots) with <size nconmax="4">: every slot would cost 19.5x the
  budget's rows, so the budget holds, within it MuJoCo's physics."""
  bodies = ''.join(
    f'<body pos="{0.25 * i} 0 {0.09 if i % 4 == 0 else 0.5}"><freejoint/><geom size=".1"/></body>'
    for i in range(12)
  )
  xml = f"""<mujoco><size nconmax="4"/><worldbody><geom type="plane" size="5 5 .1"/>{bodies}
    </worldbody></mujoco>"""
  m, d, mj, md = _forward(xml)
  b = m.layout.budget
  assert b.capped and (b.nfull, b.ncon) == (78, 4)
  assert int(d.ncon) == md.ncon == 3 and int(d.warning[CONTACTFULL]) == 0
  oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-9)


def test_without_nconmax_every_slot_is_kept():
  xml = SCENE.replace('<size nconmax="{nconmax}"/>', '').format(z0=0.09, z1=0.08, z2=0.095, z3=0.07)
  m = jaxsim.load_string(xml)
  b = m.layout.budget
  assert not b.capped and b.ncon == b.nfull


def test_default_budget_follows_the_rule_and_keeps_mujocos_physics():
  """Twelve spheres on a plane, 78 collider slots: 12 sphere-plane slots (each sphere has one
  fixed partner: all of them) and 66 sphere-sphere slots, of which each sphere counts PARTNERS
  (3) halves: 18. 30 slots, capped since 2 x 30 <= 78; at a state with spheres on the floor and
  two pairs touching, MuJoCo's contacts and accelerations."""
  assert layout.PARTNERS == 3 and layout.CAP_SAVING == 2
  bodies = ''.join(
    f'<body pos="{0.19 * i} 0 {0.09 if i % 3 else 0.5}"><freejoint/><geom size=".1"/></body>'
    for i in range(12)
  )
  xml = f'<mujoco><worldbody><geom type="plane" size="5 5 .1"/>{bodies}</worldbody></mujoco>'
  m, d, mj, md = _forward(xml)
  b = m.layout.budget
  assert b.capped and (b.nfull, b.ncon) == (78, 30)
  assert md.ncon > 8 and int(d.ncon) == md.ncon and int(d.warning[CONTACTFULL]) == 0
  oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-9)
  # asked for: every slot, or n per class
  assert not jaxsim.with_ncon_max(m, -1).layout.budget.capped
  assert jaxsim.with_ncon_max(m, 5).layout.ncon == 5


def test_njmax_lowers_the_default_to_its_rows():
  """<size njmax="40"> on the twelve spheres (no other rows; the default's 30 slots have 120
  rows, 3x njmax): kept as 30 slots (njmax is honoured where it is LEGACY_FACTOR times smaller);
  njmax 24 (5x) gives 6 slots of 4 rows."""
  bodies = ''.join(
    f'<body pos="{0.25 * i} 0 .5"><freejoint/><geom size=".1"/></body>' for i in range(12)
  )
  xml = (
    '<mujoco><size njmax="{}"/><worldbody><geom type="plane" size="5 5 .1"/>{}</worldbody></mujoco>'
  )
  assert jaxsim.load_string(xml.format(40, bodies)).layout.ncon == 30
  lay = jaxsim.load_string(xml.format(24, bodies)).layout
  assert (lay.ncon, lay.nefc) == (6, 24)


HUMANOIDS = os.path.join(os.path.dirname(__file__), 'assets', 'humanoids', '4_humanoids.xml')


@pytest.mark.parametrize(
  'path',
  [os.path.join(os.path.dirname(models.dm_control_suite()[0]), 'humanoid.xml'), HUMANOIDS],
  ids=['humanoid', '4_humanoids'],
)
def test_default_budget_keeps_every_mujoco_contact_over_a_rollout(path):
  """A 300-step C MuJoCo rollout with random controls (the humanoids fall on the floor and, in
  MuJoCo's four-humanoid scene, on each other): at every third state jaxsim's default budget
  (far fewer slots than every collider slot) has MuJoCo's active contacts, in MuJoCo's order
  (contacts with the floor, one condim class, come first in both), and no overflow."""
  m = oracle.load(path)
  b = m.layout.budget
  assert b.capped and 3 * b.ncon < b.nfull, (b.ncon, b.nfull)
  mj = mujoco.MjModel.from_xml_path(path)
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(0)
  lo, hi = mj.actuator_ctrlrange.T
  qpos, theirs, most = [], [], 0
  for t in range(300):
    md.ctrl[:] = rng.uniform(lo, hi)
    mujoco.mj_step(mj, md)
    if t % 3 == 2:
      mujoco.mj_forward(mj, md)
      qpos.append(md.qpos.copy())
      theirs.append(md.contact.geom[: md.ncon].copy())
      most = max(most, md.ncon)
  assert most >= 6  # in contact: the floor, and for the four humanoids each other

  def collide(q):
    d = jaxsim.make_data(m).replace(qpos=q)
    d = driver.collision(m, kinematics.kinematics(m, d))
    return d.contact.active, d.contact.geom, d.warning[CONTACTFULL]

  active, geom, warn = jax.jit(jax.vmap(collide))(np.array(qpos))
  assert int(np.asarray(warn).sum()) == 0
  for i, g in enumerate(theirs):
    np.testing.assert_array_equal(np.asarray(geom[i])[np.asarray(active[i])], g, err_msg=f'{i}')


def test_smallest_is_the_mask_of_a_sort():
  """math.smallest (the capped classes' k deepest, by bisection instead of a sort) gives the
  entries not above the k-th smallest of a sort: signs, ties, +-0, infinities, both dtypes."""
  rng = np.random.default_rng(0)
  f = jax.jit(jax.vmap(math.smallest, in_axes=(0, None)), static_argnums=1)
  for dtype in (np.float32, np.float64):
    for n, k in ((1, 1), (7, 3), (64, 16), (299, 1), (299, 150), (299, 299)):
      xs = []
      for _ in range(12):  # one compile per shape: the cases of a shape in one batch
        x = (rng.normal(size=n) * 10.0 ** rng.integers(-5, 5)).astype(dtype)
        if rng.random() < 0.3:
          x[rng.random(n) < 0.5] = np.inf
        if rng.random() < 0.3:
          x = np.round(x)
        if rng.random() < 0.3:
          x[rng.random(n) < 0.3] = 0.0
          x[rng.random(n) < 0.2] = -0.0
        xs.append(x)
      xs = np.stack(xs)
      kth = np.sort(xs, axis=1)[:, k - 1 : k]
      np.testing.assert_array_equal(np.asarray(f(jax.numpy.asarray(xs), k)), xs <= kth)

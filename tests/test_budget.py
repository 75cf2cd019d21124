"""Contact budget (jaxsim.with_ncon_max, or <size nconmax> where every slot costs far more):
capped Data.contact slots.

Within the budget, the capped slots give MuJoCo's contacts, rows and accelerations; beyond it the
deepest contacts are kept and Data.warning counts the overflow (mjWARN_CONTACTFULL). MuJoCo 4
grows its contact arena instead, so only the first case is compared with it; and <size nconmax>
that would save less than layout.LEGACY_FACTOR is ignored as MuJoCo 4 ignores it.
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np

import jaxsim
from jaxsim._src import layout
from tests import oracle

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


def test_without_nconmax_a_model_too_large_keeps_the_slots_that_fit(monkeypatch):
  """Twelve spheres (78 collider slots, an estimate of 20): with a memory limit that fits the
  rows of 39 slots per world, 39 slots; the touching spheres' physics is MuJoCo's."""
  bodies = ''.join(
    f'<body pos="{0.25 * i} 0 {0.09 if i % 3 else 0.5}"><freejoint/><geom size=".1"/></body>'
    for i in range(12)
  )
  xml = f'<mujoco><worldbody><geom type="plane" size="5 5 .1"/>{bodies}</worldbody></mujoco>'
  nv = 72
  monkeypatch.setattr(layout, 'AUTO_BUDGET_BYTES', 39 * 4 * nv * 8)  # pyramidal condim 3: 4 rows
  m, d, mj, md = _forward(xml)
  b = m.layout.budget
  assert b.capped and (b.nfull, b.ncon) == (78, 39)
  assert int(d.ncon) == md.ncon > 0 and int(d.warning[CONTACTFULL]) == 0
  oracle.assert_close('qacc', d.qacc, md.qacc, rtol=1e-9)
  monkeypatch.setattr(layout, 'AUTO_BUDGET_BYTES', 78 * 4 * nv * 8)
  assert not jaxsim.load_string(xml).layout.budget.capped

"""Divergence checks (jaxsim/check.py) in jaxsim.step against mj_step, in float64.

A bad value (NaN, inf or beyond mjMAXVAL) is injected into qpos, qvel, ctrl or, through
qfrc_applied, qacc; the warning counters and the state after the step are compared with MuJoCo's,
with autoreset on and off, unbatched and per world under vmap.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import check
from jaxsim._src.enums import WarningType
from tests import oracle
from tests.oracle import assert_close

AUTORESET = int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
NSTEP = 3  # steps before the injection

# A slider, a pendulum on it with a motor, a ball joint: qpos has a quaternion and nq != nv.
XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body>
      <joint name="slide" type="slide" axis="1 0 0" damping=".1"/>
      <geom type="box" size=".2 .1 .05" contype="0" conaffinity="0"/>
      <body pos="0 0 -.1">
        <joint name="hinge" axis="0 1 0"/>
        <geom type="capsule" size=".03" fromto="0 0 0 0 0 -.4" contype="0" conaffinity="0"/>
        <body pos="0 0 -.4">
          <joint type="ball"/>
          <geom type="sphere" size=".05" pos=".1 0 0" contype="0" conaffinity="0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" ctrlrange="-1 1" ctrllimited="true"/>
    <motor joint="slide"/>
  </actuator>
</mujoco>
"""


def _pair(disable: int):
  mj = mujoco.MjModel.from_xml_string(XML)
  mj.opt.disableflags |= disable
  m = jaxsim.load_string(XML)
  m = jaxsim.with_options(m, disableflags=m.opt.disableflags | disable)
  return m, mj


@pytest.fixture(scope='module', params=[0, AUTORESET], ids=['autoreset', 'no-autoreset'])
def case(request):
  m, mj = _pair(request.param)
  return m, mj, jax.jit(jaxsim.step), jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0)))


def _start(m, mj):
  """Both engines after NSTEP steps from a moving state with controls."""
  md = mujoco.MjData(mj)
  md.qvel[:] = np.linspace(-1, 1, mj.nv)
  md.ctrl[:] = [0.5, -0.3]
  d = jaxsim.make_data(m).replace(qvel=jnp.asarray(md.qvel), ctrl=jnp.asarray(md.ctrl))
  return md, d


def _inject(md, d, kind):
  """Puts a bad value into one engine's and the other's state, the same way."""
  if kind == 'qpos_nan':
    md.qpos[1] = np.nan
    return d.replace(qpos=d.qpos.at[1].set(jnp.nan))
  if kind == 'qpos_huge':
    md.qpos[0] = -2e10
    return d.replace(qpos=d.qpos.at[0].set(-2e10))
  if kind == 'qvel_inf':
    md.qvel[3] = np.inf
    return d.replace(qvel=d.qvel.at[3].set(jnp.inf))
  if kind == 'qacc_nan':
    md.qfrc_applied[2] = np.nan
    return d.replace(qfrc_applied=d.qfrc_applied.at[2].set(jnp.nan))
  if kind == 'ctrl_nan':
    md.ctrl[1] = np.nan
    return d.replace(ctrl=d.ctrl.at[1].set(jnp.nan))
  raise ValueError(kind)


def _warnings(md):
  return np.array([w.number for w in md.warning])


KINDS = ['qpos_nan', 'qpos_huge', 'qvel_inf', 'qacc_nan', 'ctrl_nan']


@pytest.mark.parametrize('kind', KINDS)
def test_step_after_bad_value(case, kind):
  """Counters and state after the bad step, and after one more, as mj_step's."""
  m, mj, step, _ = case
  autoreset = not m.opt.disableflags & AUTORESET
  md, d = _start(m, mj)
  for _ in range(NSTEP):
    mujoco.mj_step(mj, md)
    d = step(m, d)
  # an earlier count that mj_resetData clears
  md.warning[WarningType.BADQVEL].number = 5
  d = d.replace(warning=d.warning.at[WarningType.BADQVEL].set(5))
  d = _inject(md, d, kind)
  mujoco.mj_step(mj, md)
  d = step(m, d)
  np.testing.assert_array_equal(np.asarray(d.warning), _warnings(md))
  if autoreset and kind == 'qacc_nan':
    # documented deviation: the reset Data itself, one step behind MuJoCo's
    assert float(d.time) == 0
    np.testing.assert_array_equal(np.asarray(d.qpos), mj.qpos0)
    assert not np.any(np.asarray(d.qvel)) and not np.any(np.asarray(d.qfrc_applied))
    d = step(m, d)
    np.testing.assert_array_equal(np.asarray(d.warning), _warnings(md))
  elif autoreset or kind == 'ctrl_nan':
    assert_close('qpos', d.qpos, md.qpos)
    assert_close('qvel', d.qvel, md.qvel)
    assert float(d.time) == pytest.approx(md.time)
  else:
    # kept: a huge value stays (and steps on), a NaN spreads (over which entries depends on
    # the engines' matrix layouts)
    ours = np.r_[np.asarray(d.qpos), np.asarray(d.qvel)]
    theirs = np.r_[md.qpos, md.qvel]
    if kind == 'qpos_huge':
      np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)
    assert not np.all(np.abs(ours) <= 1e10) and not np.all(np.abs(theirs) <= 1e10)
  if autoreset and kind != 'ctrl_nan':
    assert float(d.time) == pytest.approx(mj.opt.timestep)
  mujoco.mj_step(mj, md)
  d = step(m, d)
  np.testing.assert_array_equal(np.asarray(d.warning), _warnings(md))
  if autoreset or kind == 'ctrl_nan':
    assert_close('qpos', d.qpos, md.qpos)
    assert_close('qvel', d.qvel, md.qvel)


def test_per_world_under_vmap(case):
  """Under vmap each world is checked and reset on its own; good worlds step as unbatched."""
  m, mj, step, vstep = case
  autoreset = not m.opt.disableflags & AUTORESET
  _, d = _start(m, mj)
  d = step(m, d)
  worlds = [
    d,
    _inject(mujoco.MjData(mj), d, 'qvel_inf'),
    _inject(mujoco.MjData(mj), d, 'qpos_huge'),
  ]
  batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *worlds)
  out = vstep(m, batch)
  one = step(m, d)
  jax.tree_util.tree_map(
    lambda a, b: np.testing.assert_allclose(np.asarray(a)[0], np.asarray(b), rtol=1e-12), out, one
  )
  warn = np.asarray(out.warning)
  assert warn[1, WarningType.BADQVEL] == 1 and warn[2, WarningType.BADQPOS] == 1
  assert not warn[0].any()
  if autoreset:
    ref = step(m, jaxsim.make_data(m))
    for k in (1, 2):
      np.testing.assert_allclose(np.asarray(out.qpos)[k], np.asarray(ref.qpos), rtol=1e-12)
      np.testing.assert_allclose(np.asarray(out.qvel)[k], np.asarray(ref.qvel), rtol=1e-12)
  else:
    assert np.asarray(out.qpos)[2, 0] < -1e10


def test_is_bad_as_mujoco():
  xs = [0.0, 1e10, -1e10, 1.0000001e10, -1.0000001e10, np.inf, -np.inf, np.nan, 3.0]
  ours = np.asarray(check.is_bad(jnp.asarray(xs)))
  np.testing.assert_array_equal(ours, [bool(mujoco.mju_isBad(x)) for x in xs])


def test_warning_layout():
  m = jaxsim.load_string(XML)
  assert jaxsim.make_data(m).warning.shape == (
    len(mujoco.MjData(mujoco.MjModel.from_xml_string(XML)).warning),
  )
  for name in ('BADQPOS', 'BADQVEL', 'BADQACC', 'BADCTRL', 'CONTACTFULL', 'CNSTRFULL'):
    assert getattr(WarningType, name) == int(getattr(mujoco.mjtWarning, f'mjWARN_{name}'))


def test_describe_warnings_names_what_mujoco_counted():
  """describe_warnings reads the counters mj_step leaves: one line per warning MuJoCo raised,
  with its count and, for a batch, how many worlds saw it; nothing when none was raised."""
  m = jaxsim.load_string(XML)
  mj = mujoco.MjModel.from_xml_string(XML)
  md = mujoco.MjData(mj)
  md.qvel[:] = np.nan
  mujoco.mj_step(mj, md)
  d = jaxsim.make_data(m)
  d = jax.jit(jaxsim.step)(m, d.replace(qvel=jnp.full(m.nv, jnp.nan)))
  np.testing.assert_array_equal(np.asarray(d.warning), md.warning.number)
  lines = jaxsim.describe_warnings(d)
  assert [line.split(':')[0] for line in lines] == ['mjWARN_BADQVEL']
  assert 'reset' in lines[0]
  assert jaxsim.describe_warnings(jaxsim.make_data(m)) == []
  batch = np.zeros((3, len(WarningType)), np.int32)
  batch[1, WarningType.CONTACTFULL] = 5
  (line,) = jaxsim.describe_warnings(batch)
  assert line.startswith('mjWARN_CONTACTFULL: 5 time(s) in 1 of 3 worlds')


# MJX's actuator/general_dyntype.xml (tests/assets): slide4's axis (1 1 0) is slide1 + slide2, so
# qM is singular (no armature). MuJoCo's L'DL (leaf to root) clamps the zero pivot to mjMINVAL,
# counts mjWARN_INERTIA and returns qacc of 1e13-1e15 (finite), which mj_checkAcc then resets in
# mj_step. jaxsim's factor_m is the same factorization, clamp and count included.
DYNTYPE = 'tests/assets/general_dyntype.xml'


def _dyntype_states(n: int = 4):
  mj = mujoco.MjModel.from_xml_path(DYNTYPE)
  for seed in range(n):
    rng = np.random.default_rng(seed)
    md = mujoco.MjData(mj)
    md.qpos[:], md.qvel[:] = rng.normal(size=mj.nq), rng.normal(size=mj.nv)
    md.act[:], md.ctrl[:] = rng.normal(size=mj.na), rng.normal(size=mj.nu)
    yield mj, md


def _put(d, md):
  return d.replace(
    qpos=jnp.asarray(md.qpos),
    qvel=jnp.asarray(md.qvel),
    act=jnp.asarray(md.act),
    ctrl=jnp.asarray(md.ctrl),
  )


def test_singular_inertia_step_resets_as_mujoco():
  """The step: the huge qacc of the clamped pivot resets the world with mjWARN_BADQACC."""
  m = jaxsim.load(DYNTYPE)
  d0 = jaxsim.make_data(m)
  step = jax.jit(jaxsim.step)
  for mj, md in _dyntype_states():
    d = step(m, _put(d0, md))
    mujoco.mj_step(mj, md)
    assert md.warning[WarningType.BADQACC].number == 1
    assert int(d.warning[WarningType.BADQACC]) == 1
    np.testing.assert_array_equal(np.asarray(d.qpos), mj.qpos0)  # reset (MuJoCo is one step on)


def test_singular_inertia_forward_gives_mujocos_finite_qacc():
  """MuJoCo's clamped factor (D = mjMINVAL at dof 0), its mjWARN_INERTIA and its finite qacc."""
  m = jaxsim.load(DYNTYPE)
  d0 = jaxsim.make_data(m)
  fwd = jax.jit(jaxsim.forward)
  for mj, md in _dyntype_states():
    d = fwd(m, _put(d0, md))
    mujoco.mj_forward(mj, md)
    assert md.warning[WarningType.INERTIA].number == 1
    assert int(d.warning[WarningType.INERTIA]) == 1
    # MuJoCo's operations in MuJoCo's order: the same factor (the suite rounds as MuJoCo)
    np.testing.assert_array_equal(np.asarray(d.qLD), oracle.qld_rows(mj, md))
    assert np.isfinite(md.qacc).all() and np.abs(md.qacc).max() > 1e10
    # qacc is round-off over mjMINVAL, so only a factor that rounds as MuJoCo's gets its digits
    assert_close('qacc', d.qacc, md.qacc, rtol=1e-9, atol=0)


def test_two_clamped_pivots_count_one_inertia_warning():
  """Two redundant slides: MuJoCo clamps both pivots and counts mjWARN_INERTIA once per
  factorization (per forward), not per pivot."""
  xml = """<mujoco><worldbody><body>
    <joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
    <joint type="slide" axis="0 0 1"/><joint type="slide" axis="1 1 0"/>
    <joint type="slide" axis="0 1 1"/><geom type="box" size=".05 .05 .05" mass="1"/>
  </body></worldbody></mujoco>"""
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  mujoco.mj_forward(mj, md)
  m = jaxsim.load_string(xml)
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m))
  qld = np.zeros((mj.nv, mj.nv))
  mujoco.mju_sparse2dense(qld, md.qLD, mj.M_rownnz, mj.M_rowadr, mj.M_colind)
  np.testing.assert_array_equal(np.diagonal(qld)[:2], 1e-15)  # both clamped to mjMINVAL
  assert md.warning[WarningType.INERTIA].number == 1
  np.testing.assert_array_equal(np.asarray(d.warning), [w.number for w in md.warning])
  # L over the clamped pivots is round-off / mjMINVAL (MuJoCo's L[1, 0] is 0; an elimination in
  # another order gave 0.11): equal only in MuJoCo's order of operations
  np.testing.assert_array_equal(np.asarray(d.qLD), oracle.qld_rows(mj, md))
  assert_close('qacc', d.qacc, md.qacc, rtol=1e-9, atol=0)


@pytest.mark.parametrize('integrator', ['Euler', 'implicitfast'])
def test_damped_singular_inertia_step_is_mujocos(integrator):
  """Two redundant slides with a little damping: MuJoCo's Euler and implicitfast steps factor
  M + h B with the same clamped L'DL (mj_factorI), so the step's mjWARN_INERTIA counts
  (forward's and the integrator's) and its finite state are MuJoCo's; a plain Cholesky there
  gives NaN."""
  xml = f"""<mujoco><option integrator="{integrator}"/><worldbody><body>
    <joint type="slide" axis="1 0 0" damping="1e-20"/><joint type="slide" axis="0 1 0"/>
    <joint type="slide" axis="1 1 0"/><geom type="box" size=".05 .05 .05" mass="1"/>
  </body></worldbody></mujoco>"""
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  md.qvel[:] = [0.1, -0.2, 0.3]
  m = jaxsim.load_string(xml)
  d = _put(jaxsim.make_data(m), md)
  d = jax.jit(jaxsim.step)(m, d)
  mujoco.mj_step(mj, md)
  assert md.warning[WarningType.INERTIA].number == 2  # forward's factor_m and the integrator's
  np.testing.assert_array_equal(np.asarray(d.warning), [w.number for w in md.warning])
  assert np.isfinite(md.qpos).all() and np.isfinite(np.asarray(d.qpos)).all()
  assert_close('qvel', d.qvel, md.qvel, rtol=1e-9, atol=1e-12)
  assert_close('qpos', d.qpos, md.qpos, rtol=1e-9, atol=1e-12)

"""Inverse dynamics (jaxsim/inverse.py) against mj_inverse and mj_compareFwdInv, in float64.

- Every dm_control suite model at states of a MuJoCo rollout: MuJoCo's constraint rows, M, bias
  and passive forces in, jaxsim's analytic constraint forces and qfrc_inverse out, at MuJoCo's
  (tight) forward solution and at a perturbed qacc, against mj_inverse; at the forward solution
  qfrc_inverse recovers qfrc_applied + qfrc_actuator + J' xfrc_applied (the fwdinv check).
- End to end on a model with every row kind (both cones): jaxsim.inverse against mj_inverse, and
  inverse(forward(x)) recovering the applied forces (compare_fwd_inv); step's fwdinv flag.
- The discrete-time inverse (invdiscrete) of Euler, implicit and implicitfast against
  mj_inverse, and recovering the applied forces from the acceleration of jaxsim.step.
"""

from __future__ import annotations

import copy
import functools
import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import forward as forward_mod
from jaxsim._src import integrate, layout, types
from jaxsim._src import inverse as inverse_mod
from tests.models import dm_control_suite
from tests.oracle import assert_close, full_m

DENSE = mujoco.mjtJacobian.mjJAC_DENSE
INVDISCRETE = int(mujoco.mjtEnableBit.mjENBL_INVDISCRETE)
FWDINV = int(mujoco.mjtEnableBit.mjENBL_FWDINV)
TIGHT = 1e-12
NSTEP = 400  # rollout length of the suite states
FRICTIONLESS, PYRAMIDAL, ELLIPTIC = 5, 6, 7

SUITE = {os.path.splitext(os.path.basename(p))[0]: p for p in dm_control_suite()}


def _rollout(mj, seed, nstep):
  """The MjData with the most constraint rows along nstep steps with random controls, then
  mj_forward at tight tolerance with random qfrc_applied and xfrc_applied."""
  rng = np.random.default_rng(seed)
  md = mujoco.MjData(mj)
  lo, hi = mj.actuator_ctrlrange.T
  best = copy.copy(md)
  for _ in range(nstep):
    md.ctrl[:] = np.where(mj.actuator_ctrllimited, rng.uniform(lo, hi), rng.normal(size=mj.nu))
    mujoco.mj_step(mj, md)
    if md.nefc > best.nefc:
      best = copy.copy(md)
  md = best
  md.qfrc_applied[:] = rng.normal(size=mj.nv)
  md.xfrc_applied[1:] = rng.normal(size=(mj.nbody - 1, 6))
  mj.opt.tolerance = TIGHT
  mujoco.mj_forward(mj, md)
  return md


def _mj_inverse(mj, md, qacc):
  """mj_inverse at md's state with the given qacc (on a copy)."""
  mi = copy.copy(md)
  mi.qacc[:] = qacc
  mujoco.mj_inverse(mj, mi)
  return mi


def _qforce(mj, md):
  """qfrc_applied + qfrc_actuator + J' xfrc_applied (mj_compareFwdInv's qforce)."""
  out = md.qfrc_applied + md.qfrc_actuator
  for b in range(1, mj.nbody):
    f = np.zeros(mj.nv)
    mujoco.mj_applyFT(mj, md, md.xfrc_applied[b, :3], md.xfrc_applied[b, 3:], md.xipos[b], b, f)
    out = out + f
  return out


def _layout(mj, md):
  """jaxsim's static row layout of MuJoCo's rows at md."""
  ncon = md.ncon
  dim = md.contact.dim[:ncon].astype(np.int32)
  elliptic = mj.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
  nrow = np.where(dim == 1, 1, dim if elliptic else 2 * (dim - 1)).astype(np.int32)
  return layout.EfcRows(
    nefc=md.nefc,
    type=md.efc_type.astype(np.int32),
    id=md.efc_id.astype(np.int32),
    ne=int(md.ne),
    nf=int(md.nf),
    contact_efcadr=md.contact.efc_address[:ncon].astype(np.int32),
    contact_nrow=nrow,
    contact_dim=dim,
  )


@functools.cache
def _empty() -> types.Model:
  """The Model of an empty MJCF (every field, none of them sized by a body, joint or geom)."""
  return jaxsim.load_string('<mujoco/>')


def _rows_model(mj):
  """A Model with what the acceleration stage of inverse dynamics reads, nv and no disabled or
  enabled features: the empty model's with mj's nv (loading the suite model is slow)."""
  base = _empty()
  return base.replace(nv=mj.nv, opt=base.opt.replace(disableflags=0, enableflags=0))


def _rows_data(mj, md, qacc):
  """A Data holding MuJoCo's rows, mass matrix and smooth forces at md, and qacc."""
  nefc, ncon, nv = md.nefc, md.ncon, mj.nv
  d = types.make_data(_rows_model(mj), ncon=ncon, nefc=nefc)
  con = d.contact.replace(mu=md.contact.mu[:ncon], friction=md.contact.friction[:ncon])
  fields = {
    'contact': con,
    'efc_J': md.efc_J.reshape(nefc, nv),
    'efc_J_body': np.zeros((nefc, 0), np.int32),  # MuJoCo's rows, dense
    'efc_D': md.efc_D,
    'efc_R': md.efc_R,
    'efc_frictionloss': md.efc_frictionloss,
    'efc_aref': md.efc_aref,
    'efc_active': np.ones(nefc, bool),
    'efc_force': np.zeros(nefc),
    'efc_state': np.zeros(nefc, np.int32),
    'qM': full_m(mj, md),
    'qfrc_bias': md.qfrc_bias,
    'qfrc_passive': md.qfrc_passive,
    'qfrc_smooth': md.qfrc_smooth,
    'qacc_smooth': md.qacc_smooth,
    'qfrc_constraint': np.zeros(nv),
    'qfrc_inverse': np.zeros(nv),
    'qacc': qacc,
  }
  d = d.replace(**fields)
  return jax.tree_util.tree_map(lambda x: jnp.asarray(x.copy()), d)


ERRORS = {}


@pytest.fixture(scope='module', autouse=True)
def report_errors():
  """Prints the measured agreement (shown with pytest -s)."""
  yield
  for tag, err in sorted(ERRORS.items()):
    print(tag, ' '.join(f'{k}={v:.1e}' for k, v in err.items()))


def _rel(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return float(np.abs(a - b).max() / max(1e-300, np.abs(b).max())) if b.size else 0.0


@pytest.mark.parametrize('name', sorted(SUITE))
def test_suite_rows(name):
  """Analytic constraint forces and qfrc_inverse of MuJoCo's rows at rollout states."""
  mj = mujoco.MjModel.from_xml_path(SUITE[name])
  mj.opt.jacobian = DENSE
  # noslip (dog) post-processes forward's forces, which inverse dynamics does not reproduce (nor
  # does MuJoCo's own fwdinv)
  mj.opt.noslip_iterations = 0
  m = _rows_model(mj)
  md = _rollout(mj, seed=1, nstep=NSTEP)
  rng = np.random.default_rng(2)
  fn = jax.jit(lambda d: inverse_mod.inverse_acc(m, d, sensor=False, layout=_layout(mj, md)))
  noise = rng.normal(size=mj.nv) * (1 + np.abs(md.qacc))
  err = {}
  for tag, qacc in (('solution', md.qacc.copy()), ('perturbed', md.qacc + noise)):
    mi = _mj_inverse(mj, md, qacc)
    out = fn(_rows_data(mj, md, qacc))
    assert_close(f'{tag} efc_force', out.efc_force, mi.efc_force, rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(out.efc_state), mi.efc_state, err_msg=tag)
    assert_close(f'{tag} qfrc_constraint', out.qfrc_constraint, mi.qfrc_constraint, rtol=1e-9)
    assert_close(f'{tag} qfrc_inverse', out.qfrc_inverse, mi.qfrc_inverse, rtol=1e-9)
    err[f'{tag}_force'] = _rel(out.efc_force, mi.efc_force)
    if tag == 'solution':
      # fwdinv: the forward solution's applied forces come back, relative to the force scale
      qforce = _qforce(mj, md)
      scale = max(np.abs(qforce).max(initial=1), np.abs(md.qfrc_bias).max(initial=1))
      err['fwdinv'] = float(np.abs(np.asarray(out.qfrc_inverse) - qforce).max(initial=0) / scale)
      assert err['fwdinv'] < 1e-6, err
  ERRORS[('suite', name, md.nefc)] = err


def test_suite_covers_row_kinds():
  """The rollout states above hold every kind of row but tendon friction loss: equality,
  friction loss, joint and tendon limits, frictionless, pyramidal and elliptic contacts."""
  kinds = set()
  for name in ('finger', 'manipulator', 'ball_in_cup', 'humanoid', 'cartpole'):
    mj = mujoco.MjModel.from_xml_path(SUITE[name])
    mj.opt.noslip_iterations = 0
    md = _rollout(mj, seed=1, nstep=NSTEP)
    kinds |= {int(t) for t in md.efc_type}
  assert {0, 1, 3, 4, FRICTIONLESS, PYRAMIDAL, ELLIPTIC} <= kinds, kinds


# Every row kind: contacts condim 1/3/4/6 on primitive colliders, friction loss on a dof and a
# tendon, joint limits (hinge, ball) and a tendon limit, connect, weld, joint and tendon
# equalities. The limited tendon is not tendon 0: see the report on constraint.py's elliptic
# friction rows.
FEATURES = """
<mujoco>
  <option cone="{cone}" impratio="5" timestep="0.004"/>
  <default>
    <!-- bodies touch the ground only, the condim 1 sphere the pad only: few collider kinds -->
    <geom contype="1" conaffinity="2"/>
  </default>
  <worldbody>
    <geom type="plane" size="5 5 .1" contype="2" conaffinity="1"/>
    <body pos="0 0 .1">
      <freejoint/>
      <geom type="box" size=".1 .08 .06"/>
    </body>
    <body pos=".5 0 .1">
      <freejoint/>
      <geom type="sphere" size=".1" condim="6" friction="1 .02 .01"/>
    </body>
    <body pos="-.5 0 .1">
      <freejoint/>
      <geom type="capsule" size=".05 .1" condim="4" friction=".8 .05 .001" euler="0 90 0"/>
    </body>
    <geom type="box" pos="0 .6 0" size=".2 .2 .02" condim="1" contype="4" conaffinity="0"/>
    <body pos="0 .6 .1">
      <freejoint/>
      <geom type="sphere" size=".08" condim="1" contype="0" conaffinity="4"/>
    </body>
    <body pos="0 -1 1">
      <joint name="slide" type="slide" axis="1 0 0" frictionloss="2" damping=".1"/>
      <geom type="capsule" size=".03" fromto="0 0 0 0 0 -.3" contype="0" conaffinity="0"/>
      <site name="s0"/>
      <body pos="0 0 -.3">
        <joint name="h1" axis="0 1 0" range="3 20"/>
        <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
        <body pos=".3 0 0">
          <joint name="h2" axis="0 1 0"/>
          <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
          <body name="tip" pos=".3 0 0">
            <joint name="h3" axis="0 1 0"/>
            <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
            <site name="s1" pos=".3 0 0"/>
            <body pos=".3 0 0">
              <joint name="b" type="ball" range="0 10"/>
              <geom size=".04" pos=".1 0 0" contype="0" conaffinity="0"/>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="anchor" pos=".9 -1 .7"/>
    <body name="w1" pos="1 1 1">
      <joint type="slide" axis="0 0 1"/>
      <joint axis="1 0 0"/>
      <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fx"><joint joint="h2" coef="1"/><joint joint="h3" coef="-.5"/></fixed>
    <spatial name="sp" range=".1 .5" frictionloss=".4"><site site="s0"/><site site="s1"/></spatial>
  </tendon>
  <equality>
    <joint joint1="h2" joint2="h3" polycoef="0 -.5 0 0 0"/>
    <connect body1="tip" body2="anchor" anchor=".3 0 0"/>
    <weld body1="w1" relpose="1 1 1.1 1 0 0 0"/>
    <tendon tendon1="fx" polycoef=".1 0 0 0 0"/>
  </equality>
  <actuator>
    <motor joint="slide" gear="20"/>
    <motor joint="h1" gear="10"/>
  </actuator>
</mujoco>
"""


def _features_state(mj, seed):
  """Bodies dropped on the plane, the arm driven, then set sliding and spinning."""
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(seed)
  for _ in range(60):
    md.ctrl[:] = rng.normal(size=mj.nu)
    mujoco.mj_step(mj, md)
  for j in (0, 1, 3):
    md.qvel[6 * j : 6 * j + 6] = np.r_[rng.normal(size=2), 0, rng.normal(size=3) * 3]
  md.qfrc_applied[:] = rng.normal(size=mj.nv)
  md.xfrc_applied[1:] = rng.normal(size=(mj.nbody - 1, 6))
  mj.opt.tolerance = TIGHT
  mujoco.mj_forward(mj, md)
  return md


def _match_rows(m, mj, d, md):
  """(jaxsim row, mujoco row) index arrays: non-contact rows in order, contacts by pair and pos."""
  lay = m.layout
  active = np.asarray(d.efc_active)
  ours = [i for i in range(lay.nefc) if active[i] and lay.type[i] < FRICTIONLESS]
  theirs = [i for i in range(md.nefc) if md.efc_type[i] < FRICTIONLESS]
  assert len(ours) == len(theirs), (len(ours), len(theirs))
  g1, g2 = lay.contact_geom1, lay.contact_geom2
  adr, pos = np.asarray(d.contact.efc_address), np.asarray(d.contact.pos)
  for i in range(md.ncon):
    c = md.contact[i]
    cand = np.flatnonzero((g1 == c.geom[0]) & (g2 == c.geom[1]) & (adr >= 0))
    s = cand[np.argmin(np.linalg.norm(pos[cand] - c.pos, axis=1))]
    assert np.linalg.norm(pos[s] - c.pos) < 1e-6
    n = lay.contact_nrow[s]
    ours += list(range(adr[s], adr[s] + n))
    theirs += list(range(c.efc_address, c.efc_address + n))
  assert int(active.sum()) == md.nefc
  return np.asarray(ours), np.asarray(theirs)


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_features_end_to_end(cone):
  """jaxsim.inverse against mj_inverse; inverse(forward(x)) by compare_fwd_inv (the fwdinv
  flag's check), jaxsim's own forward solution inverted."""
  xml = FEATURES.format(cone=cone)
  mj = mujoco.MjModel.from_xml_string(xml)
  m = jaxsim.load_string(xml)
  m = m.replace(opt=m.opt.replace(tolerance=jnp.asarray(TIGHT)))

  def run(d, qacc):
    # forward's position and velocity stages serve both (test_step_fwdinv_flag runs
    # jaxsim.inverse's own with constraint rows)
    fwd = jaxsim.forward(m, d)
    inv = inverse_mod.inverse_acc(m, fwd.replace(qacc=qacc), sensor=True)
    return inv, inverse_mod.compare_fwd_inv(m, fwd)

  fn = jax.jit(run)
  for seed in range(2):
    md = _features_state(mj, seed)
    kinds = {int(t) for t in md.efc_type}
    assert {0, 1, 2, 3, 4, FRICTIONLESS, ELLIPTIC if cone == 'elliptic' else PYRAMIDAL} <= kinds
    rng = np.random.default_rng(seed)
    qacc = md.qacc + rng.normal(size=mj.nv)
    mi = _mj_inverse(mj, md, qacc)
    d = jaxsim.make_data(m).replace(
      qpos=md.qpos, qvel=md.qvel, ctrl=md.ctrl, qfrc_applied=md.qfrc_applied,
      xfrc_applied=md.xfrc_applied, qacc_warmstart=md.qacc_warmstart,
    )  # fmt: skip
    inv, cmp = fn(d, jnp.asarray(qacc))
    ours, theirs = _match_rows(m, mj, inv, mi)
    assert_close('efc_force', np.asarray(inv.efc_force)[ours], mi.efc_force[theirs], rtol=1e-7)
    np.testing.assert_array_equal(np.asarray(inv.efc_state)[ours], mi.efc_state[theirs])
    assert_close('qfrc_constraint', inv.qfrc_constraint, mi.qfrc_constraint, rtol=1e-7)
    assert_close('qfrc_inverse', inv.qfrc_inverse, mi.qfrc_inverse, rtol=1e-7)
    # fwdinv: jaxsim's own forward solution, inverted
    qforce = _qforce(mj, md)
    scale = max(np.abs(qforce).max(initial=1), np.abs(md.qfrc_bias).max(initial=1))
    err = _rel(cmp.qfrc_inverse, qforce) * np.abs(qforce).max() / scale
    assert err < 1e-6, err
    fi = np.asarray(cmp.solver_fwdinv)
    assert fi[1] / scale < 1e-6 and fi[0] / scale < 1e-6, fi
    res = np.linalg.norm(np.asarray(cmp.qfrc_inverse) - qforce)
    np.testing.assert_allclose(fi[1], res, rtol=1e-6, atol=1e-12 * scale)
    ERRORS[('features', cone, seed)] = {'force': _rel(np.asarray(inv.efc_force)[ours],
      mi.efc_force[theirs]), 'fwdinv': err, 'solver_fwdinv': fi[1] / scale}  # fmt: skip


# Smooth dynamics for the discrete inverse: damped hinges (one with a polynomial), a damped
# tendon, position and velocity actuators (velocity-dependent forces), and a standalone free body
# spinning (implicitfast's local 6x6 block with the gyroscopic derivative).
DISCRETE = """
<mujoco>
  <option integrator="{integrator}" timestep="0.01"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body>
      <joint name="h1" axis="0 1 0" damping=".5"/>
      <geom type="capsule" size=".04" fromto="0 0 0 .3 0 0"/>
      <body pos=".3 0 0">
        <joint name="h2" axis="0 1 0" damping=".2"/>
        <geom type="capsule" size=".04" fromto="0 0 0 .3 0 .1"/>
        <body pos=".3 0 .1">
          <joint name="h3" axis="1 0 0"/>
          <geom type="box" size=".1 .05 .02"/>
        </body>
      </body>
    </body>
    <body pos="1 0 0">
      <freejoint/>
      <geom type="box" size=".1 .2 .3"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t" damping=".3"><joint joint="h2" coef="1"/><joint joint="h3" coef=".5"/></fixed>
  </tendon>
  <actuator>
    <position joint="h1" kp="5" kv=".4"/>
    <velocity joint="h3" kv=".7"/>
    <motor tendon="t"/>
  </actuator>
</mujoco>
"""


@pytest.mark.parametrize('integrator', ['Euler', 'implicit', 'implicitfast'])
def test_discrete(integrator):
  """invdiscrete: mj_inverse's qfrc_inverse at a random qacc, and the applied forces back from
  the discrete acceleration (qvel' - qvel) / h of jaxsim.step."""
  xml = DISCRETE.format(integrator=integrator)
  mj = mujoco.MjModel.from_xml_string(xml)
  mj.opt.enableflags |= INVDISCRETE
  m = jaxsim.load_string(xml)
  assert integrate.free_bodies(m).size == 1
  m_inv = m.replace(opt=m.opt.replace(enableflags=m.opt.enableflags | INVDISCRETE))
  h = float(m.opt.timestep)

  def run(d, qacc):
    fwd = jaxsim.forward(m, d)
    # step's integration after this forward pass
    qacc_d = (forward_mod.integrate_step(m, fwd).qvel - d.qvel) / h
    inv = jax.vmap(lambda q: jaxsim.inverse(m_inv, fwd.replace(qacc=q)))(jnp.stack([qacc, qacc_d]))
    return jax.tree_util.tree_map(lambda x: x[0], inv), inv.qfrc_inverse[1], fwd.qacc, qacc_d

  fn = jax.jit(run)
  rng = np.random.default_rng(3)
  md = mujoco.MjData(mj)
  md.qpos[:] = mj.qpos0 + np.r_[rng.normal(size=3), rng.normal(size=7) * 0.3]
  md.qpos[6:10] /= np.linalg.norm(md.qpos[6:10])
  md.qvel[:] = rng.normal(size=mj.nv) * 2
  md.ctrl[:] = rng.normal(size=mj.nu)
  md.qfrc_applied[:] = rng.normal(size=mj.nv)
  mujoco.mj_forward(mj, md)
  qacc = md.qacc + rng.normal(size=mj.nv)
  mi = _mj_inverse(mj, md, qacc)
  d = jaxsim.make_data(m).replace(
    qpos=md.qpos, qvel=md.qvel, ctrl=md.ctrl, qfrc_applied=md.qfrc_applied
  )
  inv, back, qacc_c, qacc_d = fn(d, jnp.asarray(qacc))
  assert_close('qfrc_inverse', inv.qfrc_inverse, mi.qfrc_inverse, rtol=1e-9)
  np.testing.assert_array_equal(np.asarray(inv.qacc), qacc)  # restored
  qforce = md.qfrc_applied + md.qfrc_actuator
  assert_close('fwdinv discrete', back, qforce, rtol=1e-9, atol=1e-10)
  # the discrete acceleration is not forward's: read as continuous it would not give them back
  assert _rel(qacc_d, qacc_c) > 1e-3
  ERRORS[('discrete', integrator)] = {'qfrc_inverse': _rel(inv.qfrc_inverse, mi.qfrc_inverse)}


def test_discrete_rk4_refused():
  xml = DISCRETE.format(integrator='RK4')
  m = jaxsim.load_string(xml)
  m = m.replace(opt=m.opt.replace(enableflags=m.opt.enableflags | INVDISCRETE))
  with pytest.raises(ValueError, match='RK4'):
    jaxsim.inverse(m, jaxsim.make_data(m))


LIMITED = """
<mujoco>
  <worldbody>
    <body>
      <joint name="h" axis="0 1 0" range="-10 10" damping=".1"/>
      <geom type="capsule" size=".04" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="h"/></actuator>
</mujoco>
"""


def test_step_fwdinv_flag():
  """The fwdinv enable flag: step sets solver_fwdinv and qfrc_inverse as mj_step does; and
  jaxsim.inverse with a constraint row against mj_inverse."""
  mj = mujoco.MjModel.from_xml_string(LIMITED)
  mj.opt.enableflags |= FWDINV
  m = jaxsim.load_string(LIMITED)
  m = m.replace(opt=m.opt.replace(enableflags=m.opt.enableflags | FWDINV))
  md = mujoco.MjData(mj)
  md.qpos[:], md.qvel[:], md.ctrl[:], md.qfrc_applied[:] = 0.3, 1.0, 0.7, -0.2  # in the limit
  d = jaxsim.make_data(m).replace(
    qpos=md.qpos, qvel=md.qvel, ctrl=md.ctrl, qfrc_applied=md.qfrc_applied
  )
  mujoco.mj_forward(mj, md)
  qacc = md.qacc + np.array([3.0])
  mi = _mj_inverse(mj, md, qacc)
  out, inv = jax.jit(lambda d: (jaxsim.step(m, d), jaxsim.inverse(m, d.replace(qacc=qacc))))(d)
  assert_close('inverse', inv.qfrc_inverse, mi.qfrc_inverse, rtol=1e-9)
  assert_close('inverse efc_force', inv.efc_force[np.asarray(inv.efc_active)], mi.efc_force)
  mujoco.mj_step(mj, md)
  assert md.nefc == 1 and md.efc_force[0] > 0
  assert_close('qfrc_inverse', out.qfrc_inverse, md.qfrc_inverse, rtol=1e-9)
  fi = np.asarray(out.solver_fwdinv)
  assert np.all(fi <= 1e-9) and np.all(md.solver_fwdinv <= 1e-9), (fi, md.solver_fwdinv)
  assert not np.any(np.asarray(jaxsim.make_data(m).solver_fwdinv))

"""Full forward dynamics with contacts, limits, equalities, the solver and the sensors vs MuJoCo.

For every dm_control suite model, from a state of a MuJoCo rollout with random controls: a
20-step (dog: 1-step) trajectory with MuJoCo's integrator, recording qacc and sensordata (computed
by the forward pass at the start of each step in both engines) and the state after each step.
Both solvers run to a tight tolerance (MuJoCo's islands off, so both solve the same monolithic
problem): the engines then agree to round-off amplified by the trajectory, and qacc, every sensor
(relative to the sensor's largest component) and the state are held to 1e-6 relative at every
step. The quantities sensors read lazily (cacc, cfrc_int, cfrc_ext, subtree momenta) are compared
where MuJoCo computes them.
"""

from __future__ import annotations

import functools
import os

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import dynamics, kinematics, tendon
from jaxsim._src.collision import driver
from tests import oracle
from tests.models import dm_control_suite, model_id

STEPS = 20
WARMUP = 200
TIGHT = 1e-12
ISLAND = int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
SENSOR_NAMES = {
  int(v): k[len('mjSENS_') :].lower() for k, v in mujoco.mjtSensor.__members__.items()
}
NEED_RNE_POST = {1, 4, 5, 33, 34}  # accelerometer, force, torque, framelinacc, frameangacc
NEED_SUBTREE_VEL = {36, 37}  # subtreelinvel, subtreeangmom

MODELS = dm_control_suite()


def _rollout_state(mj, seed):
  """MuJoCo state after WARMUP steps of random controls (from the first keyframe if any)."""
  md = mujoco.MjData(mj)
  if mj.nkey:
    mujoco.mj_resetDataKeyframe(mj, md, 0)
  rng = np.random.default_rng(seed)
  for _ in range(WARMUP):
    md.ctrl[:] = rng.uniform(-1, 1, mj.nu)
    mujoco.mj_step(mj, md)
  return md, rng


@pytest.mark.parametrize('path', MODELS, ids=model_id)
def test_trajectory_with_constraints_matches_mujoco(path):
  mj = mujoco.MjModel.from_xml_path(path)
  m = oracle.load(path)
  missing = driver.unsupported_pairs(m)
  if missing:
    # named, never silently ignored
    with pytest.raises(NotImplementedError, match='no collider'):
      jaxsim.forward(m, jaxsim.make_data(m))
    return
  md, rng = _rollout_state(mj, 0)
  mj.opt.tolerance = TIGHT
  mj.opt.disableflags |= ISLAND
  m = m.replace(opt=m.opt.replace(tolerance=TIGHT))
  state = (md.qpos.copy(), md.qvel.copy(), md.act.copy())
  d = jaxsim.make_data(m).replace(
    qpos=state[0],
    qvel=state[1],
    act=state[2],
    qacc_warmstart=md.qacc_warmstart.copy(),
    time=md.time,
  )
  types = set(mj.sensor_type.tolist())
  lazy = []
  if types & NEED_RNE_POST:
    lazy += ['cacc', 'cfrc_int', 'cfrc_ext']
  if types & NEED_SUBTREE_VEL:
    lazy += ['subtree_linvel', 'subtree_angmom']
  ctrls = rng.uniform(-1, 1, size=(STEPS, mj.nu))
  theirs = []
  for t in range(STEPS):
    md.ctrl[:] = ctrls[t]
    mujoco.mj_step(mj, md)
    theirs.append({k: getattr(md, k).copy() for k in ['qacc', 'sensordata'] + lazy})
    con = md.contact[: md.ncon]  # views into md, copied before the next step
    contact = (con.geom, con.dist, con.pos, con.frame[:, :3])
    theirs[-1]['contact'] = tuple(np.array(x) for x in contact)
    theirs[-1]['state'] = np.concatenate([md.qpos, md.qvel, md.act])
  record = ('qpos', 'qvel', 'act', 'qacc', 'sensordata', 'contact', *lazy)
  _, traj = jax.jit(jaxsim.rollout, static_argnames='record')(m, d, ctrls, record=record)
  traj = jax.device_get(traj)
  name = os.path.basename(path)[:-4]
  for t in range(STEPS):
    mc = theirs[t]
    oracle.assert_close(f'qacc at step {t}', traj['qacc'][t], mc['qacc'], rtol=1e-6)
    for i in range(mj.nsensor):
      a, n = mj.sensor_adr[i], mj.sensor_dim[i]
      what = f'{name} step {t} sensor {i} {mj.sensor(i).name!r} ({SENSOR_NAMES[mj.sensor_type[i]]})'
      got = traj['sensordata'][t, a : a + n]
      oracle.assert_close(what, got, mc['sensordata'][a : a + n], rtol=1e-6, atol=1e-9)
    for f in lazy:
      oracle.assert_close(f'{name} step {t} {f}', traj[f][t], mc[f], rtol=1e-6, atol=1e-9)
    ours = np.concatenate([traj['qpos'][t], traj['qvel'][t], traj['act'][t]])
    oracle.assert_close(f'state after step {t}', ours, mc['state'], rtol=1e-6)
    _assert_contacts_match(f'{name} step {t}', traj['contact'], t, mc['contact'])


def _assert_contacts_match(what: str, c, t: int, theirs) -> None:
  """The forward pass's active contacts are MuJoCo's: the same geom pairs (as many of each),
  and each of MuJoCo's contacts has one of jaxsim's on its pair within 1e-5 in dist, pos and
  normal (the states agree to 1e-6 along the trajectory; GJK/EPA to ccd_tolerance)."""
  geom, dist, pos, normal = theirs
  act = np.asarray(c.active[t])
  g = np.stack([np.asarray(c.geom1[t]), np.asarray(c.geom2[t])], axis=1)[act]
  d, p, n = np.asarray(c.dist[t])[act], np.asarray(c.pos[t])[act], np.asarray(c.frame[t])[act, 0]
  key = lambda pairs: sorted(map(tuple, pairs))  # noqa: E731
  assert key(g) == key(geom), f'{what}: contact pairs {key(g)} vs MuJoCo {key(geom)}'
  for i in range(len(geom)):
    same = np.flatnonzero((g == geom[i]).all(axis=1))
    k = same[np.argmin(np.abs(p[same] - pos[i]).max(axis=1))]
    err = max(abs(d[k] - dist[i]), np.abs(p[k] - pos[i]).max(), np.abs(n[k] - normal[i]).max())
    assert err < 1e-5, f'{what}: contact {i} {tuple(geom[i])} differs by {err:.1e}'


# MuJoCo's L'DL factor of M (mj_factorM): trees with balls and a free joint, branches, tendons
LD_MODELS = [
  p for p in MODELS if os.path.basename(p) in {'humanoid.xml', 'humanoid_CMU.xml', 'quadruped.xml'}
]


def _inertia(m, d):
  """mj_fwdPosition up to mj_crb (tendon armature needs the tendons' Jacobians)."""
  d = kinematics.com_pos(m, kinematics.kinematics(m, d))
  return dynamics.crb(m, tendon.tendon(m, d))


@pytest.mark.parametrize('path', LD_MODELS, ids=model_id)
def test_m_rows_are_mujocos_m(path):
  """crb's Data.M holds MuJoCo's M (mjData.M on M_rowadr, M_colind) in compact rows, and
  mul_rows on it is mj_mulM."""
  mj = mujoco.MjModel.from_xml_path(path)
  m = oracle.load(path)
  md, rng = _rollout_state(mj, 2)
  mujoco.mj_forward(mj, md)
  theirs = np.zeros((mj.nv, int(mj.M_rownnz.max())))
  for i in range(mj.nv):
    a, n = mj.M_rowadr[i], mj.M_rownnz[i]
    theirs[i, :n] = md.M[a : a + n]
  d = jaxsim.make_data(m).replace(qpos=md.qpos.copy(), qvel=md.qvel.copy())
  # the position stages M depends on, not the whole forward (collision and the solver are most of
  # its compile time, and test_trajectory_with_constraints_matches_mujoco covers them)
  d = jax.jit(_inertia)(m, d)
  oracle.assert_close('M rows', d.M, theirs, rtol=1e-12)
  x = rng.normal(size=mj.nv)
  want = np.zeros(mj.nv)
  mujoco.mj_mulM(mj, md, want, x)
  ours = jax.jit(functools.partial(dynamics.mul_rows, dynamics.ld_layout(m)))(d.M, x)
  oracle.assert_close('M x', ours, want, rtol=1e-12)


@pytest.mark.parametrize('path', LD_MODELS, ids=model_id)
def test_factor_m_is_mujocos_qld(path):
  """factor_tree of MuJoCo's M gives MuJoCo's qLD values in MuJoCo's rows (compact, left-aligned),
  and solve_sparse is mj_solveM, for one and several right-hand sides; the dense factor_ld
  (Euler's and implicitfast's M + hB, small Newton Hessians) holds the same values densely, zero
  off M's sparsity, and solve_ld is mj_solveM too."""
  mj = mujoco.MjModel.from_xml_path(path)
  m = oracle.load(path)
  md, rng = _rollout_state(mj, 1)
  mujoco.mj_forward(mj, md)
  nv = mj.nv
  qm, theirs = np.zeros((nv, nv)), np.zeros((nv, nv))
  mujoco.mj_fullM(mj, md, qm)
  mujoco.mju_sparse2dense(theirs, md.qLD, mj.M_rownnz, mj.M_rowadr, mj.M_colind)
  rows, clamped = jax.jit(functools.partial(dynamics.factor_tree, m))(qm)
  assert not bool(clamped)
  oracle.assert_close('qLD rows', rows, oracle.qld_rows(mj, md), rtol=1e-12)
  oracle.assert_close('qLD dense', dynamics.ld_dense(m, rows), theirs, rtol=1e-12)
  qld, clamped = jax.jit(dynamics.factor_ld)(qm)
  assert not bool(clamped)
  oracle.assert_close('qLD', qld, theirs, rtol=1e-12)
  # a tree has no fill-in: L is exactly zero wherever M is
  np.testing.assert_array_equal(np.asarray(qld)[theirs == 0], 0.0)
  x = rng.normal(size=(nv, 3))
  want = np.zeros((3, nv))
  mujoco.mj_solveM(mj, md, want, np.ascontiguousarray(x.T))
  tree = jax.jit(functools.partial(dynamics.solve_sparse, dynamics.ld_layout(m)))
  oracle.assert_close('M^-1 x (rows)', tree(rows, x), want.T, rtol=1e-12)
  oracle.assert_close('M^-1 x[:, 0] (rows)', tree(rows, x[:, 0]), want[0], rtol=1e-12)
  solve = jax.jit(dynamics.solve_ld)
  oracle.assert_close('M^-1 x', solve(qld, x), want.T, rtol=1e-12)
  oracle.assert_close('M^-1 x[:, 0]', solve(qld, x[:, 0]), want[0], rtol=1e-12)


def _newton_hessian(path: str, seed: int) -> np.ndarray:
  """MuJoCo's Newton Hessian M + J' D J over its quadratic rows, in a rollout's state."""
  mj = mujoco.MjModel.from_xml_path(path)
  mj.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE  # efc_J (nefc, nv)
  md, _ = _rollout_state(mj, seed)
  mujoco.mj_forward(mj, md)
  qm = np.zeros((mj.nv, mj.nv))
  mujoco.mj_fullM(mj, md, qm)
  quad = md.efc_state == int(mujoco.mjtConstraintState.mjCNSTRSTATE_QUADRATIC)
  j = md.efc_J.reshape(md.nefc, mj.nv)[quad]
  assert len(j), 'no quadratic row: the test would not see J'
  return qm + j.T @ (md.efc_D[quad, None] * j)


@pytest.fixture(scope='module')
def newton_hessians():
  """Newton Hessians of dog (nv 85: blocks of 8), humanoid (27: factor_ld) and of dog and
  humanoid_CMU coupled by a rank-one term (nv 148: blocks of 16)."""
  suite = {os.path.basename(p)[:-4]: p for p in MODELS}
  dog, cmu = _newton_hessian(suite['dog'], 1), _newton_hessian(suite['humanoid_CMU'], 2)
  big = np.zeros((len(dog) + len(cmu),) * 2)
  big[: len(dog), : len(dog)], big[len(dog) :, len(dog) :] = dog, cmu
  v = np.random.default_rng(0).normal(size=len(big))
  big += np.outer(v, v)
  return {'humanoid': _newton_hessian(suite['humanoid'], 3), 'dog': dog, 'dog+cmu': big}


@pytest.mark.parametrize('name', ['humanoid', 'dog', 'dog+cmu'])
def test_solve_spd_is_mujocos_cholesky_solve(newton_hessians, name):
  """solve_spd (Newton's H^-1 g: factor_spd, blocked where spd_block says so, and solve_ld)
  equals MuJoCo's mju_cholFactor + mju_cholSolve on MuJoCo's own Newton Hessian, float64.
  1e-9 relative to the largest entry: the two factorizations eliminate in different orders,
  and H's condition number (contact rows with D ~ 1e5 over M's smallest eigenvalues) scales
  their round-off differences."""
  h = newton_hessians[name]
  n = len(h)
  assert dynamics.spd_block(n) == {'humanoid': 0, 'dog': 8, 'dog+cmu': 16}[name]
  g = np.random.default_rng(n).normal(size=n)
  chol = h.copy()
  assert mujoco.mju_cholFactor(chol, 0.0) == n
  want = np.zeros(n)
  mujoco.mju_cholSolve(want, chol, g)
  got = jax.jit(dynamics.solve_spd)(h, g)
  oracle.assert_close(f'{name} H^-1 g', got, want, rtol=1e-9)
  # the factor itself: H = L' D L with L unit lower triangular
  qld = np.asarray(jax.jit(dynamics.factor_spd)(h))
  low = np.tril(qld, -1) + np.eye(n)
  oracle.assert_close(f"{name} L'DL", low.T @ np.diag(np.diag(qld)) @ low, h, rtol=1e-12)
  np.testing.assert_array_equal(np.triu(qld, 1), 0.0)

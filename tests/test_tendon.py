"""Tendon lengths, Jacobians, wrap paths, Jacobian rates and armature bias against MuJoCo."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from jaxsim._src import kinematics, tendon
from tests import oracle
from tests.models import dm_control_suite, model_id

TENDONS_XML = os.path.join(os.path.dirname(__file__), 'assets', 'tendons.xml')
NSTATE = 12  # random states per model, evaluated in one vmapped call
WRAP_GEOM = (int(mujoco.mjtWrap.mjWRAP_SPHERE), int(mujoco.mjtWrap.mjWRAP_CYLINDER))


def _with_tendons() -> list[str]:
  out = []
  for path in dm_control_suite():
    with open(path) as f:
      if '<tendon' in f.read() and mujoco.MjModel.from_xml_path(path).ntendon:
        out.append(path)
  return out + [TENDONS_XML]


def _dense_ten_j(mj: mujoco.MjModel, md: mujoco.MjData) -> np.ndarray:
  out = np.zeros((mj.ntendon, mj.nv))
  mujoco.mju_sparse2dense(out, md.ten_J, mj.ten_J_rownnz, mj.ten_J_rowadr, mj.ten_J_colind)
  return out


def _with_mj_kinematics(m, md: mujoco.MjData):
  """jaxsim Data holding MuJoCo's kinematics and com quantities (test_kinematics checks that
  jaxsim's agree), so that these comparisons compile and test the tendon stage alone."""
  d = oracle.jx_data(m, md.qpos, md.qvel, md.act, md.ctrl)
  mat = lambda x: x.reshape(-1, 3, 3)  # noqa: E731
  return d.replace(
    xpos=md.xpos,
    xmat=mat(md.xmat),
    site_xpos=md.site_xpos,
    site_xmat=mat(md.site_xmat),
    geom_xpos=md.geom_xpos,
    geom_xmat=mat(md.geom_xmat),
    subtree_com=md.subtree_com,
    cdof=md.cdof,
    cvel=md.cvel,
    cdof_dot=md.cdof_dot,
  )


def _pipeline(m, d):
  d = tendon.tendon(m, d)
  return d, tendon.tendon_bias(m, d), tendon.tendon_dot(m, d)


@pytest.fixture(scope='module', params=_with_tendons(), ids=model_id)
def case(request):
  """Model pair, NSTATE random states, MuJoCo data there and jaxsim's results (one vmapped call)."""
  m, mj = oracle.load_pair(request.param)
  rng = np.random.default_rng(0)
  states = [oracle.random_state(mj, rng) for _ in range(NSTATE)]
  mds = [oracle.mj_data(mj, *s) for s in states]
  batch = jax.tree.map(lambda *x: jnp.stack(x), *[_with_mj_kinematics(m, md) for md in mds])
  d, bias, jdot = jax.jit(jax.vmap(lambda d: _pipeline(m, d)))(batch)
  d = jax.tree.map(np.asarray, d)
  out = [(jax.tree.map(lambda x, k=k: x[k], d), bias[k], jdot[k]) for k in range(NSTATE)]
  return m, mj, states, mds, out


def test_length_and_jacobian(case):
  _, mj, _, mds, out = case
  for k, md in enumerate(mds):
    d = out[k][0]
    oracle.assert_close(f'ten_length[{k}]', d.ten_length, md.ten_length)
    oracle.assert_close(f'ten_J[{k}]', d.ten_J, _dense_ten_j(mj, md))


def test_wrap_path(case):
  _, _, _, mds, out = case
  for k, md in enumerate(mds):
    d = out[k][0]
    np.testing.assert_array_equal(d.ten_wrapnum, md.ten_wrapnum, err_msg=f'state {k}')
    np.testing.assert_array_equal(d.ten_wrapadr, md.ten_wrapadr, err_msg=f'state {k}')
    n = int(md.ten_wrapnum.sum())
    np.testing.assert_array_equal(d.wrap_obj[:n], md.wrap_obj.reshape(-1)[:n])
    oracle.assert_close(f'wrap_xpos[{k}]', d.wrap_xpos[:n], md.wrap_xpos.reshape(-1, 3)[:n])
    # slots past the used ones stay empty
    assert not d.wrap_obj[n:].any() and not d.wrap_xpos[n:].any()


def test_tendon_bias(case):
  """MuJoCo's qfrc_bias is mj_rne plus mj_tendonBias: compare with the difference."""
  _, mj, _, mds, out = case
  for k, md in enumerate(mds):
    rne = np.zeros(mj.nv)
    mujoco.mj_rne(mj, md, 0, rne)
    oracle.assert_close(f'tendon_bias[{k}]', out[k][1], md.qfrc_bias - rne, atol=1e-10)


def test_tendon_dot_finite_difference(case):
  """ten_Jdot of tendons without geom wraps vs central differences of MuJoCo's ten_J."""
  _, mj, states, _, out = case
  rows = [
    i
    for i in range(mj.ntendon)
    if not np.isin(
      mj.wrap_type[mj.tendon_adr[i] : mj.tendon_adr[i] + mj.tendon_num[i]], WRAP_GEOM
    ).any()
  ]
  eps = 1e-6
  for k in range(3):
    qpos, qvel, act, ctrl = states[k]
    jac = []
    for sgn in (1.0, -1.0):
      q = qpos.copy()
      mujoco.mj_integratePos(mj, q, qvel, sgn * eps)
      jac.append(_dense_ten_j(mj, oracle.mj_data(mj, q, qvel, act, ctrl)))
    fd = (jac[0] - jac[1]) / (2 * eps)
    jdot = np.asarray(out[k][2])
    oracle.assert_close(f'ten_Jdot[{k}]', jdot[rows], fd[rows], rtol=1e-6, atol=1e-8)
    fixed = mj.wrap_type[mj.tendon_adr] == int(mujoco.mjtWrap.mjWRAP_JOINT)
    assert not jdot[fixed].any()


def test_feature_model_exercises_wraps():
  """The random states the feature model is compared at include active and inactive wraps of
  every kind (the same seed and count as the case fixture)."""
  mj = mujoco.MjModel.from_xml_path(TENDONS_XML)
  rng = np.random.default_rng(0)
  nums = np.array(
    [oracle.mj_data(mj, *oracle.random_state(mj, rng)).ten_wrapnum for _ in range(NSTATE)]
  )
  name = lambda i: mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_TENDON, i)  # noqa: E731
  varying = {name(i) for i in range(mj.ntendon) if len(set(nums[:, i])) > 1}
  wanted = {'sphere', 'sphere_side', 'sphere_inside', 'cylinder', 'cylinder_side', 'pulley_wrap'}
  assert wanted <= varying, wanted - varying
  assert np.any(mj.tendon_armature > 0)


# ------------------------------------------------------------------ gradients (jit + vmap + grad)


@pytest.fixture(scope='module')
def gradients():
  """d sum(ten_length) / d qpos of the feature model, through kinematics, at four states:
  a generic one, qpos0 (where path sites u7 and l6 coincide) and both sides of the onset of
  the plain sphere wrap (found by bisection on the knee angle with MuJoCo)."""
  m, mj = oracle.load_pair(TENDONS_XML)
  generic = oracle.random_state(mj, np.random.default_rng(7))
  qpos0 = mj.qpos0.copy()
  j1 = mj.jnt_qposadr[mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_JOINT, 'j1')]
  ten = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_TENDON, 'sphere')
  md = mujoco.MjData(mj)

  def wrapped(angle):
    md.qpos[:] = qpos0
    md.qpos[j1] = angle
    mujoco.mj_forward(mj, md)
    return md.ten_wrapnum[ten] > 2

  lo, hi = 0.0, 1.5 if wrapped(1.5) else -1.5
  assert wrapped(lo) != wrapped(hi)
  for _ in range(60):
    mid = 0.5 * (lo + hi)
    lo, hi = (mid, hi) if wrapped(mid) == wrapped(lo) else (lo, mid)
  qs = np.stack([generic[0], qpos0, qpos0, qpos0])
  # 1e-7 rad to either side of the onset: within ~1e-8 of it the wrap decision is a round-off
  # tie between the engines (and between XLA compilations)
  step = 1e-7 * np.sign(hi - lo)
  qs[2, j1], qs[3, j1] = lo - step, hi + step

  def total_length(qpos, d):
    d = kinematics.com_pos(m, kinematics.kinematics(m, d.replace(qpos=qpos)))
    return jnp.sum(tendon.tendon(m, d).ten_length)

  d = oracle.jx_data(m, *generic)
  batch = jax.tree.map(lambda x: jnp.stack([x] * len(qs)), d)
  grad = jax.jit(jax.vmap(jax.grad(total_length)))(jnp.asarray(qs), batch)
  return mj, qs, np.asarray(grad)


def test_gradient_matches_finite_difference(gradients):
  """The gradient at a generic state vs central differences of MuJoCo's tendon lengths."""
  mj, qs, grad = gradients
  md = mujoco.MjData(mj)

  def total(q):
    md.qpos[:] = q
    mujoco.mj_fwdPosition(mj, md)
    return md.ten_length.sum()

  eps = 1e-6
  fd = np.array(
    [(total(qs[0] + eps * e) - total(qs[0] - eps * e)) / (2 * eps) for e in np.eye(mj.nq)]
  )
  oracle.assert_close('d sum(ten_length) / d qpos', grad[0], fd, rtol=1e-6)


def test_gradient_finite_at_degenerate_states(gradients):
  _, _, grad = gradients
  assert np.isfinite(grad).all(), grad
  # the length is C1 at wrap onset: both sides agree (to O(1e-7) from the offset above)
  np.testing.assert_allclose(grad[2], grad[3], atol=1e-4)


def test_wrap_degenerate_inputs_have_finite_gradients():
  """mju_wrap at coincident endpoints, an endpoint at the centre or on the surface, endpoints
  collinear with the centre, a tangent segment; sphere and cylinder, without a side site, with
  one outside and with one inside."""
  ends = np.array(
    [
      ([0.3, 0.0, 0.0], [0.3, 0.0, 0.0]),
      ([0.0, 0.0, 0.0], [0.3, 0.1, 0.0]),
      ([0.1, 0.0, 0.0], [-0.1, 0.0, 0.05]),
      ([0.3, 0.0, 0.0], [-0.3, 0.0, 0.0]),
      ([0.3, 0.1, 0.0], [-0.3, 0.1, 0.0]),
    ]
  )
  # side site outside, inside, none
  sides = (([0.0, 0.5, 0.0], True), ([0.0, 0.01, 0.0], True), ([0.0, 0.0, 0.0], False))
  rows = [(a, b, s, hs, sph) for a, b in ends for s, hs in sides for sph in (True, False)]
  x0, x1, side, has_side, sphere = (np.array(c) for c in zip(*rows))

  def total(x0, x1):
    wrap = jax.vmap(tendon.wrap_geom, in_axes=(0, 0, None, None, None, 0, 0, 0, None))
    args = (jnp.zeros(3), jnp.eye(3), 0.1, jnp.asarray(side))
    wlen, p0, p1 = wrap(x0, x1, *args, jnp.asarray(has_side), jnp.asarray(sphere), True)
    return jnp.sum(wlen) + jnp.sum(p0 * p1)

  g = jax.jit(jax.grad(total, argnums=(0, 1)))(jnp.asarray(x0), jnp.asarray(x1))
  assert all(np.isfinite(x).all() for x in g), g

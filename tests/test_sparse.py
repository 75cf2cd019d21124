"""The compact constraint Jacobian (sparse.py) gives MuJoCo's rows, forces and accelerations.

A scene of several robots on a floor keeps efc_J in compact rows (layout.efc_width entries, the
dofs of each row's two bodies' chains) under MuJoCo's default `jacobian="auto"`; `jacobian="sparse"`
forces it on a small model with every row kind that has a compact form (contacts with the floor
and between bodies, hinge/slide/ball limits, dof friction loss, connect, weld and joint
equalities). Checked against MuJoCo (float64) and against jaxsim's own dense form of the same
model, whose efc_J the compact rows must reproduce exactly (they are the same numbers).
"""

from __future__ import annotations

import os
import runpy

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import dynamics, kinematics, layout
from tests import oracle

BENCH = os.path.join(os.path.dirname(os.path.dirname(__file__)), 'models', 'bench')

XML = """
<mujoco>
  <option jacobian="{jac}" cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="a" pos="0 0 .12">
      <freejoint/>
      <geom type="capsule" size=".05 .2" euler="0 90 0"/>
      <body name="a1" pos=".25 0 0">
        <joint name="h1" type="hinge" axis="0 1 0" range="-30 30" frictionloss=".2"/>
        <geom type="sphere" size=".06"/>
        <body name="a2" pos=".15 0 0">
          <joint name="ball" type="ball" range="0 20"/>
          <geom type="sphere" size=".05"/>
        </body>
      </body>
    </body>
    <body name="b" pos="0 .3 .15">
      <freejoint/>
      <geom type="sphere" size=".1"/>
      <body name="b1" pos="0 0 -.12">
        <joint name="s1" type="slide" axis="0 0 1" range="-.03 .03" frictionloss=".1"/>
        <geom type="sphere" size=".05"/>
      </body>
    </body>
    <body name="c" pos=".2 .2 .3">
      <freejoint/>
      <geom type="capsule" size=".06 .08"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="a2" body2="a" anchor=".05 0 0" solref=".05 1"/>
    <weld body1="c" body2="b1" solref=".05 1"/>
    <joint joint1="h1" joint2="s1" polycoef="0 1 .5 0 0"/>
  </equality>
</mujoco>
"""


def _models(jac: str, cone: str):
  xml = XML.format(jac=jac, cone=cone)
  return jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)


@pytest.fixture(scope='module', params=['pyramidal', 'elliptic'])
def pair(request):
  jax.config.update('jax_enable_x64', True)
  sparse, mj = _models('sparse', request.param)
  dense, _ = _models('dense', request.param)
  return sparse, dense, mj, jax.jit(jaxsim.forward), jax.jit(jaxsim.inverse)


def _states(mj: mujoco.MjModel, n: int):
  rng = np.random.default_rng(7)
  for _ in range(n):
    qpos, qvel, _, _ = oracle.random_state(mj, rng, scale=0.1)
    qpos[[2, 9, 17]] = rng.uniform(0.02, 0.12, 3)  # free bodies' heights: most touch the floor
    yield qpos, qvel


def test_layout_is_compact_where_asked(pair):
  sparse, dense, _, _, _ = pair
  lay = sparse.layout
  # two bodies' chains: the deepest has 6 + 1 + 3 dofs
  assert lay.efc_width == 2 * 10 and dense.layout.efc_width == 0
  d = jaxsim.make_data(sparse)
  assert d.efc_J.shape == (lay.nefc, 20) and d.efc_J_body.shape == (lay.nefc, 2)
  assert jaxsim.make_data(dense).efc_J_body.shape == (lay.nefc, 0)


def test_compact_rows_match_mujoco_and_dense(pair):
  sparse, dense, mj, forward, inverse = pair
  md = mujoco.MjData(mj)
  contacts = 0
  for qpos, qvel in _states(mj, 6):
    md.qpos[:], md.qvel[:] = qpos, qvel
    mujoco.mj_forward(mj, md)
    contacts += md.ncon
    ds, dd = (
      forward(m, jaxsim.make_data(m).replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel)))
      for m in (sparse, dense)
    )
    # the same numbers as the dense rows, bitwise
    np.testing.assert_array_equal(np.asarray(jaxsim.efc_J_dense(sparse, ds)), np.asarray(dd.efc_J))
    act = np.asarray(ds.efc_active)
    assert act.sum() == md.nefc
    ours = np.asarray(jaxsim.efc_J_dense(sparse, ds))[act]
    # MuJoCo's sparse rows, made dense; its rows come in jaxsim's active-row order here
    theirs = np.zeros((md.nefc, mj.nv))
    mujoco.mju_sparse2dense(theirs, md.efc_J, md.efc_J_rownnz, md.efc_J_rowadr, md.efc_J_colind)
    oracle.assert_close('efc_J', ours, theirs, atol=1e-12)
    # the solver on compact rows: MuJoCo's accelerations and constraint forces (float64)
    oracle.assert_close('qacc', ds.qacc, md.qacc, atol=1e-7, rtol=1e-7)
    oracle.assert_close('qfrc_constraint', ds.qfrc_constraint, md.qfrc_constraint, 1e-7, 1e-7)
    oracle.assert_close('efc_vel', np.asarray(ds.efc_vel)[act], md.efc_vel, atol=1e-10)
    # inverse dynamics' J' force on compact rows
    mujoco.mj_inverse(mj, md)
    di = inverse(sparse, ds)
    oracle.assert_close('qfrc_inverse', di.qfrc_inverse, md.qfrc_inverse, 1e-7, 1e-7)
  assert contacts >= 12  # the states do touch


def test_contact_rows_in_chunks_are_the_same_rows(pair, monkeypatch):
  """Contact rows of more slots than kinematics.ROW_CHUNK are formed a chunk of slots at a time
  (for the step's peak memory): the same rows and the same solve, bitwise."""
  sparse, _, mj, forward, _ = pair
  nslot = len(layout.layout_of(sparse).contact_dim)
  states = list(_states(mj, 3))
  data = [
    jaxsim.make_data(sparse).replace(qpos=jnp.asarray(q), qvel=jnp.asarray(v)) for q, v in states
  ]
  whole = [forward(sparse, d) for d in data]  # compiled with every slot in one pass
  monkeypatch.setattr(kinematics, 'ROW_CHUNK', 2)
  assert nslot > 2 and nslot % 2  # several chunks, the last one padded
  chunked = jax.jit(lambda m, d: jaxsim.forward(m, d))  # traced again, with the small chunks
  for d, ref in zip(data, whole, strict=True):
    out = chunked(sparse, d)
    np.testing.assert_array_equal(np.asarray(out.efc_J), np.asarray(ref.efc_J))
    np.testing.assert_array_equal(np.asarray(out.qacc), np.asarray(ref.qacc))
  assert sum(int(np.asarray(r.efc_active).sum()) for r in whole) > 0  # rows that touch


def test_compact_step_gradient_matches_dense():
  """d qvel' / d qvel through a step: the compact rows' derivative is the dense rows' (one
  cone: the derivative's Hessian takes the cones' rows as Newton's does, tested above)."""
  jax.config.update('jax_enable_x64', True)
  (sparse, mj), (dense, _) = _models('sparse', 'pyramidal'), _models('dense', 'pyramidal')
  qpos, qvel = next(_states(mj, 1))

  def fn(m):
    def f(v):
      d = jaxsim.make_data(m).replace(qpos=jnp.asarray(qpos), qvel=v)
      return jaxsim.step(m, d).qvel

    return jax.jit(jax.jacfwd(f))(jnp.asarray(qvel))

  gs, gd = fn(sparse), fn(dense)
  assert np.abs(np.asarray(gd)).max() > 0.1
  np.testing.assert_allclose(np.asarray(gs), np.asarray(gd), atol=1e-9, rtol=1e-9)


def test_auto_is_compact_for_many_robots():
  """Many robots in one scene: auto keeps the rows compact and their width fixed by one
  robot's chains, so efc_J grows linearly with the number of robots."""
  one = """<body pos="{x} 0 .2"><freejoint/><geom type="capsule" size=".05 .1"/>
    <body pos="0 0 .2"><joint type="hinge" axis="0 1 0" range="-1 1"/>
    <geom type="sphere" size=".05"/></body></body>"""
  widths = []
  for n in (1, 4, 8):
    bodies = ''.join(one.format(x=i) for i in range(n))
    xml = f'<mujoco><worldbody><geom type="plane" size="9 9 .1"/>{bodies}</worldbody></mujoco>'
    m = jaxsim.load_string(xml)
    d = jaxsim.make_data(m)
    widths.append((m.layout.efc_width, d.efc_J.shape[1], m.nv))
  # a compact row holds two bodies' chains of 7 dofs and their 2 body ids, 16 numbers: compact
  # where that is at most half a dense row (layout.efc_width), from 5 robots on
  assert widths == [(0, 7, 7), (0, 28, 28), (14, 14, 56)]


@pytest.mark.parametrize('options', ['solver="PGS"', 'noslip_iterations="3"'])
def test_dual_solvers_on_compact_rows(options):
  """PGS and noslip take the compact rows' dense form (their blocks of J M^-1 J' are dense):
  MuJoCo's accelerations (float64)."""
  jax.config.update('jax_enable_x64', True)
  xml = XML.format(jac='sparse', cone='pyramidal').replace('<option ', f'<option {options} ')
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  assert m.layout.efc_width
  forward, md = jax.jit(jaxsim.forward), mujoco.MjData(mj)
  for qpos, qvel in _states(mj, 2):
    md.qpos[:], md.qvel[:] = qpos, qvel
    mujoco.mj_forward(mj, md)
    d = forward(m, jaxsim.make_data(m).replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel)))
    assert md.ncon > 0
    oracle.assert_close('qacc', d.qacc, md.qacc, atol=1e-7, rtol=1e-7)


def _newton_hessian(mj: mujoco.MjModel, md: mujoco.MjData) -> np.ndarray:
  """MuJoCo's Newton Hessian M + J' D J over its quadratic rows, at md (after mj_forward)."""
  h = oracle.full_m(mj, md)
  j = np.zeros((md.nefc, mj.nv))
  if mujoco.mj_isSparse(mj):
    mujoco.mju_sparse2dense(j, md.efc_J, md.efc_J_rownnz, md.efc_J_rowadr, md.efc_J_colind)
  else:
    j = md.efc_J.reshape(md.nefc, mj.nv)
  quad = md.efc_state == int(mujoco.mjtConstraintState.mjCNSTRSTATE_QUADRATIC)
  return h + j[quad].T @ (md.efc_D[quad, None] * j[quad])


def test_newton_hessian_in_compact_rows_for_separate_robots():
  """Two humanoids that cannot touch each other (models/bench/humanoid_copies.py): Newton's
  Hessian keeps a static pattern with no entry between the copies (layout.hessian_sparsity:
  each copy's M, every constraint row's dof pairs, the elimination's fill), factored and solved
  in compact rows (dynamics.factor_sparse, solve_sparse). In states of a rollout where both lie
  on the floor, limbs touching limbs: MuJoCo's Newton Hessian lies in the pattern and
  solve_spd on it is a dense solve (a Hessian that missed entries would still converge to
  MuJoCo's qacc, in more iterations, so qacc alone cannot tell); qacc and qfrc_constraint are
  MuJoCo's (float64)."""
  jax.config.update('jax_enable_x64', True)
  copies_xml = runpy.run_path(os.path.join(BENCH, 'humanoid_copies.py'))['copies_xml']
  xml = copies_xml(2)
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  pattern = layout.hessian_sparsity(m, m.layout)
  assert pattern is not None and m.nv == 54 and m.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
  assert not pattern[27:, :27].any() and pattern.sum(axis=1).max() <= 27
  ld = dynamics.ld_layout_of(pattern)
  solve = jax.jit(lambda h, x: dynamics.solve_spd(h, x, ld))
  tree = dynamics.ld_layout(m)
  forward, md = jax.jit(jaxsim.forward), mujoco.MjData(mj)
  rng = np.random.default_rng(0)
  lo, hi = mj.actuator_ctrlrange.T
  contacts, coupled = 0, 0
  for t in range(300):
    md.ctrl[:] = rng.uniform(lo, hi)
    mujoco.mj_step(mj, md)
    if t % 10 != 9:
      continue
    mujoco.mj_forward(mj, md)
    contacts += md.ncon
    h = _newton_hessian(mj, md)
    low = np.tril(h) != 0
    assert not (low & ~pattern).any()
    if not (low & (tree.pos < 0)).any() and t > 49:
      continue  # the forward comparisons: the first states and those with limbs in contact
    coupled += (low & (tree.pos < 0)).any()  # entries off M's sparsity
    x = rng.normal(size=(m.nv, 2))
    oracle.assert_close('H^-1 x', solve(h, x), np.linalg.solve(h, x), rtol=1e-9)
    state = dict(qpos=md.qpos, qvel=md.qvel, ctrl=md.ctrl, qacc_warmstart=md.qacc_warmstart)
    d = forward(m, jaxsim.make_data(m).replace(**{k: jnp.asarray(v) for k, v in state.items()}))
    oracle.assert_close('qacc', d.qacc, md.qacc, atol=1e-7, rtol=1e-7)
    oracle.assert_close('qfrc_constraint', d.qfrc_constraint, md.qfrc_constraint, 1e-7, 1e-7)
  assert contacts >= 16 and coupled >= 3  # on the floor, and limbs touching limbs


FILL = """
<mujoco>
  <worldbody>
    <body name="base">
      <joint type="hinge" axis="0 0 1"/>
      <geom type="sphere" size=".1" contype="0" conaffinity="0"/>
      <body name="b" pos="0 .3 0">
        <joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="1 0 0"/>
        <geom name="b" type="capsule" size=".05 .1" contype="0" conaffinity="0"/>
      </body>
      <body name="c" pos="-.3 0 0">
        <joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="1 0 0"/>
        <geom name="c" type="capsule" size=".05 .1" contype="0" conaffinity="0"/>
      </body>
      <body name="a" pos=".3 0 0">
        <joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="1 0 0"/>
        <geom name="a" type="capsule" size=".05 .1" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <contact><pair geom1="a" geom2="b"/><pair geom1="a" geom2="c"/></contact>
</mujoco>
"""


def test_hessian_pattern_holds_the_fill_of_its_factor():
  """Limb a touches limbs b and c, which never touch each other: no row couples b's and c's
  dofs, but eliminating a's (numbered after theirs: eliminated first) couples them (fill).
  layout.hessian_pattern holds it, so a matrix of M + J' D J's form (sums of outer products on
  the dof sets of M's chains and of the rows) is factored and solved in compact rows as
  densely (float64)."""
  jax.config.update('jax_enable_x64', True)
  m = jaxsim.load_string(FILL)
  pattern = layout.hessian_pattern(m, m.layout)
  moves = np.asarray(m.tree_body_dof).astype(bool)
  body = {n: i for i, n in enumerate(m.names['body'])}
  rng = np.random.default_rng(0)
  sets = [moves[body[n]] for n in 'abc'] + [moves[body['a']] | moves[body[n]] for n in 'bc']
  h = np.eye(m.nv)
  for s in sets * 2:
    v = np.where(s, rng.normal(size=m.nv), 0.0)
    h += np.outer(v, v)
  # h = L' D L, L unit lower, eliminated from the last row: a Cholesky of h reversed
  low = np.linalg.cholesky(h[::-1, ::-1])[::-1, ::-1].T
  fill = (np.abs(low) > 1e-12) & ~(np.tril(h) != 0)
  assert fill.any() and not (fill & ~pattern).any()  # fill exists, and the pattern holds it
  ld = dynamics.ld_layout_of(pattern)
  x = rng.normal(size=(m.nv, 3))
  got = jax.jit(lambda h, x: dynamics.solve_spd(h, x, ld))(h, x)
  oracle.assert_close('H^-1 x', got, np.linalg.solve(h, x), rtol=1e-12)

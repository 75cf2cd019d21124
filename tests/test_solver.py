"""jaxsim.solver against MuJoCo's Newton and CG solvers (mj_fwdConstraint, monolithic).

The solver's inputs are MuJoCo's own constraint rows (dense efc_J, efc_D, efc_R, efc_aref,
efc_frictionloss, contact mu/friction/dim, qM, qfrc_smooth, qacc_smooth, qacc_warmstart) at states
from MuJoCo rollouts with random controls, padded with inactive garbage rows and an inactive
contact slot; the layout is built here from MuJoCo's efc_type/efc_id. So these tests exercise the
solver alone, independent of jaxsim's constraint rows.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import dynamics, solver
from jaxsim._src.layout import row_classes
from jaxsim._src.types import Data, Model, Option, make_data, static_fields, tree_structure
from tests import oracle
from tests.models import dm_control_suite

ISLAND = int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
WARMSTART = int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)
NEWTON, CG = int(mujoco.mjtSolver.mjSOL_NEWTON), int(mujoco.mjtSolver.mjSOL_CG)
CONE = int(mujoco.mjtConstraintState.mjCNSTRSTATE_CONE)
EQUALITY, FRICTION_DOF, LIMIT_JOINT = 0, 1, 3
FRICTIONLESS, CONTACT_PYRAMIDAL, CONTACT_ELLIPTIC = 5, 6, 7


class Layout(NamedTuple):
  """The static row layout of the constraint contract, built from MuJoCo's rows."""

  nefc: int
  type: np.ndarray
  id: np.ndarray
  ne: int
  nf: int
  contact_efcadr: np.ndarray
  contact_nrow: np.ndarray
  contact_dim: np.ndarray


# Own model: every row kind. A box (condim 3), a sphere (condim 6), a capsule (condim 4) on a
# plane and a frictionless ellipsoid on a frictionless pad (a contact's condim is the larger of
# its geoms'), a frictionloss slide joint and a frictionloss hinge, a hinge held outside its range,
# a joint equality and a connect equality.
FEATURES = """
<mujoco>
  <option cone="{cone}" impratio="10" timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .1">
      <freejoint/>
      <geom type="box" size=".1 .08 .06" mass="1"/>
    </body>
    <body pos=".5 0 .1">
      <freejoint/>
      <geom type="sphere" size=".1" condim="6" friction="1 .02 .01"/>
    </body>
    <body pos="-.5 0 .1">
      <freejoint/>
      <geom type="capsule" size=".05 .1" condim="4" friction=".8 .05 .001" euler="0 90 0"/>
    </body>
    <geom type="box" pos="0 .5 0" size=".2 .2 .02" condim="1"/>
    <body pos="0 .5 .1">
      <freejoint/>
      <geom type="ellipsoid" size=".1 .08 .06" condim="1"/>
    </body>
    <body pos="0 -1 1">
      <joint name="slide" type="slide" axis="1 0 0" frictionloss="2" damping=".1"/>
      <geom type="capsule" size=".03" fromto="0 0 0 0 0 -.3" contype="0" conaffinity="0"/>
      <body pos="0 0 -.3">
        <joint name="h1" type="hinge" axis="0 1 0" range="3 20" limited="true"/>
        <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
        <body pos=".3 0 0">
          <joint name="h2" type="hinge" axis="0 1 0" frictionloss=".3"/>
          <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
          <body name="tip" pos=".3 0 0">
            <joint name="h3" type="hinge" axis="0 1 0"/>
            <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" contype="0" conaffinity="0"/>
          </body>
        </body>
      </body>
    </body>
    <body name="anchor" pos=".9 -1 .7"/>
  </worldbody>
  <equality>
    <joint joint1="h2" joint2="h3" polycoef="0 -.5 0 0 0"/>
    <connect body1="tip" body2="anchor" anchor=".3 0 0"/>
  </equality>
  <actuator>
    <motor joint="slide" gear="20"/>
    <motor joint="h1" gear="10"/>
  </actuator>
</mujoco>
"""


@functools.cache
def _empty() -> Model:
  """The Model of an empty MJCF (every field, none of them sized by a body, joint or geom)."""
  return jaxsim.load_string('<mujoco/>')


def solver_model(mj: mujoco.MjModel) -> Model:
  """A jaxsim Model with what the solver reads (nv and the solver options), from mj: the empty
  model's, with mj's nv and solver options.

  Together with `solver_data` this keeps the comparison tests independent of the model's own
  compilation, for any model MuJoCo loads; `test_real_model` runs the solver on
  jaxsim.load_string / make_data.
  """
  o = mj.opt
  keys = ('impratio', 'tolerance', 'ls_tolerance', 'solver', 'cone', 'iterations')
  keys += ('ls_iterations', 'disableflags', 'enableflags', 'noslip_iterations', 'noslip_tolerance')
  static = static_fields(Option)
  opt = {k: int(getattr(o, k)) if k in static else jnp.asarray(getattr(o, k)) for k in keys}
  base = _empty()
  # the dof tree and simple bodies: M's sparsity, the layout of qLD's rows
  tree = tree_structure(mj.body_parentid, mj.dof_bodyid, mj.dof_parentid)['tree_dof_dof']
  return base.replace(
    nv=mj.nv,
    opt=base.opt.replace(**opt),
    tree_dof_dof=tree,
    dof_bodyid=np.array(mj.dof_bodyid),
    body_simple=np.array(mj.body_simple),
  )


def solver_options(m: jaxsim.Model, mj: mujoco.MjModel) -> jaxsim.Model:
  """m with mj's solver options."""
  o = mj.opt
  opt = m.opt.replace(
    solver=int(o.solver),
    cone=int(o.cone),
    iterations=int(o.iterations),
    ls_iterations=int(o.ls_iterations),
    disableflags=int(o.disableflags),
    tolerance=jnp.asarray(o.tolerance),
    ls_tolerance=jnp.asarray(o.ls_tolerance),
  )
  return m.replace(opt=opt)


SOLVER_FIELDS = (
  'qacc qacc_warmstart qacc_smooth qfrc_smooth qfrc_constraint qM qLD efc_J efc_D efc_R '
  'efc_aref efc_frictionloss efc_active efc_type efc_id efc_force efc_state solver_niter '
  'solver_neval'
).split()


def solver_data(m: Model, ncon: int, nefc: int) -> Data:
  """A zero jaxsim Data for solver_model's m, with ncon contact slots and nefc constraint rows
  (the fields the solver reads and writes are then set from MuJoCo's)."""
  return make_data(m, ncon=ncon, nefc=nefc)


def rollout_state(mj: mujoco.MjModel, seed: int, nstep: int) -> mujoco.MjData:
  """MjData after nstep steps with random controls, then mj_forward with islands disabled.

  qacc_warmstart holds the previous step's qacc, as in a simulation.
  """
  rng = np.random.default_rng(seed)
  md = mujoco.MjData(mj)
  if mj.nkey:
    mujoco.mj_resetDataKeyframe(mj, md, 0)
  lo, hi = mj.actuator_ctrlrange.T
  for _ in range(nstep):
    md.ctrl[:] = np.where(mj.actuator_ctrllimited, rng.uniform(lo, hi), rng.normal(size=mj.nu))
    mujoco.mj_step(mj, md)
  mujoco.mj_forward(mj, md)
  return md


def problem(mj: mujoco.MjModel, md: mujoco.MjData, seed: int = 0, pad: bool = True, model=None):
  """(Model, Data, Layout, real rows) for jaxsim.solver from MuJoCo's rows at md, plus padding.

  With `model` (a jaxsim Model of the same MJCF), the Data comes from jaxsim.make_data.

  Padding: an inactive row at the end of the equality, friction and limit sections and one
  inactive contact slot (condim 3) at the end, all filled with garbage that must be masked.
  """
  rng = np.random.default_rng(seed)
  nv, nefc = mj.nv, md.nefc
  typ, ids = md.efc_type.copy(), md.efc_id.copy()
  ne, nf = int(md.ne), int(md.nf)
  ncon = md.ncon
  cadr = md.contact.efc_address.copy()[:ncon]
  assert np.all(cadr >= 0)
  elliptic = mj.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
  # new row order: section by section, with an inactive row appended to each section
  order = []  # (mujoco row or -1, type, id)
  sections = [
    (0, ne, EQUALITY),
    (ne, ne + nf, FRICTION_DOF),
    (ne + nf, int(np.sum(typ < FRICTIONLESS)), LIMIT_JOINT),
  ]
  for a, b, t in sections:
    order += [(i, typ[i], ids[i]) for i in range(a, b)]
    if pad:
      order.append((-1, int(t), 0))
  start = sections[-1][1]
  order += [(i, typ[i], ids[i]) for i in range(start, nefc)]
  dim = md.contact.dim[:ncon].copy()
  prow = 0
  if pad:
    prow = 3 if elliptic else 4
    t = CONTACT_ELLIPTIC if elliptic else CONTACT_PYRAMIDAL
    order += [(-1, int(t), ncon)] * prow
    dim = np.append(dim, 3)
  n = len(order)
  src = np.array([o[0] for o in order])
  real = src >= 0
  new_of = np.full(nefc, -1)
  new_of[src[real]] = np.flatnonzero(real)
  efcadr = np.append(new_of[cadr], n - prow) if pad else new_of[cadr]
  nrow = np.where(dim == 1, 1, dim if elliptic else 2 * (dim - 1))
  layout = Layout(
    nefc=n,
    type=np.array([o[1] for o in order], np.int32),
    id=np.array([o[2] for o in order], np.int32),
    ne=ne + pad,
    nf=nf + pad,
    contact_efcadr=efcadr.astype(np.int32),
    contact_nrow=nrow.astype(np.int32),
    contact_dim=dim.astype(np.int32),
  )

  def rows(x, garbage):
    out = np.array(garbage((n,) + x.shape[1:]))
    out[real] = x[src[real]]
    return out

  j = md.efc_J.reshape(nefc, nv)
  qm = np.zeros((nv, nv))
  mujoco.mj_fullM(mj, md, qm)
  qld = oracle.qld_rows(mj, md)  # MuJoCo's L'DL factor, in jaxsim's compact rows
  ncs = ncon + pad
  fric = np.abs(rng.normal(size=(ncs, 5)))
  fric[:ncon] = md.contact.friction[:ncon]
  mu = np.abs(rng.normal(size=ncs))
  mu[:ncon] = md.contact.mu[:ncon]
  if model is None:
    m = solver_model(mj)
    d = solver_data(m, ncs, n)
  else:
    m = solver_options(model, mj)
    d = make_data(m, ncon=ncs, nefc=n)
  contact = d.contact.replace(friction=fric, mu=mu, dim=dim.astype(np.int32))
  d = d.replace(
    contact=contact,
    efc_J=rows(j, lambda k: rng.normal(size=k)),
    efc_J_body=np.zeros((n, 0), np.int32),  # MuJoCo's rows, dense
    efc_D=rows(md.efc_D, lambda k: rng.uniform(1, 10, k)),
    efc_R=rows(md.efc_R, lambda k: rng.uniform(1, 10, k)),
    efc_aref=rows(md.efc_aref, lambda k: rng.normal(size=k)),
    efc_frictionloss=rows(md.efc_frictionloss, lambda k: rng.uniform(1, 2, k)),
    efc_active=real,
    efc_type=layout.type,
    efc_id=layout.id,
    qM=qm,
    M=dynamics.ld_compact(m, qm),
    qLD=qld,
    qfrc_smooth=md.qfrc_smooth.copy(),
    qacc_smooth=md.qacc_smooth.copy(),
    qacc_warmstart=md.qacc_warmstart.copy(),
  )
  d = jax.tree_util.tree_map(jnp.asarray, d)
  return m, d, layout, real


@functools.cache
def _solve_jit(layout_key):
  """One jitted solve per layout (the layout is static)."""
  return jax.jit(lambda m, d: solver.solve(m, d, layout_key.value))


class _Key:
  """Hashable wrapper of a Layout (NumPy arrays) for the jit cache."""

  def __init__(self, layout):
    self.value = layout
    self._k = tuple(np.asarray(v).tobytes() if isinstance(v, np.ndarray) else v for v in layout)

  def __hash__(self):
    return hash(self._k)

  def __eq__(self, other):
    return self._k == other._k


def run(m, d, layout):
  return _solve_jit(_Key(layout))(m, d)


@functools.cache
def _solve_vmap(layout_key):
  """One jitted solve over a batch of Data per layout."""
  return jax.jit(jax.vmap(lambda m, d: solver.solve(m, d, layout_key.value), in_axes=(None, 0)))


def relerr(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12)) if b.size else 0.0


def check(md, out, real, rtol_qacc, rtol_force, state=True, tight=False):
  """Compares qacc, efc_force, qfrc_constraint, efc_state, solver_niter and solver_neval with
  MuJoCo; returns the errors.

  tight: solved at opt.tolerance TIGHT, where the line search's threshold (1e-14 |search|
  trace(M)) is at float64 rounding of the slope (eps times terms up to ~1e6): a candidate's test
  can then fall on either side of it in MuJoCo and in jaxsim (the same sums in another order),
  and the count of evaluations differ by the bracket's steps, up to 3 per line search, while
  the step taken agrees to round-off. At the default tolerance the counts are MuJoCo's.
  """
  force = np.asarray(out.efc_force)
  err = {
    'qacc': relerr(out.qacc, md.qacc),
    'efc_force': relerr(force[real], md.efc_force),
    'qfrc_constraint': relerr(out.qfrc_constraint, md.qfrc_constraint),
  }
  assert np.all(force[~real] == 0), 'inactive rows carry force'
  assert np.all(np.asarray(out.efc_state)[~real] == 0)
  assert err['qacc'] <= rtol_qacc, err
  assert err['efc_force'] <= rtol_force, err
  assert err['qfrc_constraint'] <= rtol_force, err
  if state:
    np.testing.assert_array_equal(np.asarray(out.efc_state)[real], md.efc_state)
  # the same iterations as MuJoCo, stopping tests included, and the same line-search evaluations
  assert int(out.solver_niter) == md.solver_niter[0], (int(out.solver_niter), md.solver_niter[0])
  slack = 3 * int(md.solver_niter[0]) if tight else 0
  assert abs(int(out.solver_neval) - _neval(md)) <= slack, (int(out.solver_neval), _neval(md))
  return err


def suite_path(name):
  paths = {os.path.splitext(os.path.basename(p))[0]: p for p in dm_control_suite()}
  return paths[name]


def mj_model(path=None, xml=None, solver_=NEWTON):
  """MjModel with a dense Jacobian and the monolithic solver (islands disabled)."""
  mj = mujoco.MjModel.from_xml_path(path) if path else mujoco.MjModel.from_xml_string(xml)
  mj.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
  mj.opt.disableflags |= ISLAND
  mj.opt.solver = solver_
  return mj


def forward(mj, md, tolerance):
  """mj_forward at md's state with the given solver tolerance (qacc_warmstart is kept)."""
  mj.opt.tolerance = tolerance
  mujoco.mj_forward(mj, md)
  return copy.copy(md)


TIGHT, DEFAULT = 1e-12, 1e-8  # opt.tolerance: tight, and MuJoCo's default
# Measured agreement (relative to the largest entry), as recorded by `test_suite` and
# `test_features`: ~1e-14 for qacc and efc_force at both tolerances, identical solver_niter and
# efc_state; the solutions at the default tolerance differ from the tight ones by up to ~1e-3
# (CG) / 1e-9 (Newton) in efc_force, so MuJoCo's stopping tolerance is far above the agreement.
ERRORS = {}


@pytest.fixture(scope='module', autouse=True)
def report_errors():
  """Prints the measured agreement with MuJoCo (shown with pytest -s)."""
  yield
  for (tag, tol), err in sorted(ERRORS.items(), key=str):
    vals = ' '.join(f'{k}={v:.1e}' if isinstance(v, float) else f'{k}={v}' for k, v in err.items())
    print(f'{tag} tol={tol:g}: {vals}')


def compare(mj, md, tag):
  """Solves MuJoCo's problem at md with jaxsim at both tolerances and compares with MuJoCo."""
  ref = {}
  for tol in (TIGHT, DEFAULT):
    ref[tol] = forward(mj, md, tol)
  m, d, layout, real = problem(mj, ref[TIGHT])
  for tol in (TIGHT, DEFAULT):
    mdt = ref[tol]
    out = run(m.replace(opt=m.opt.replace(tolerance=jnp.asarray(tol))), d, layout)
    if tol == TIGHT:
      err = check(mdt, out, real, 1e-6, 1e-5, tight=True)
    else:
      # same algorithm from the same start: agreement well inside what the stopping tolerance
      # allows, |mujoco(default) - mujoco(tight)|
      slack = {
        'qacc': relerr(mdt.qacc, ref[TIGHT].qacc),
        'efc_force': relerr(mdt.efc_force, ref[TIGHT].efc_force),
      }
      err = check(mdt, out, real, max(1e-6, slack['qacc']), max(1e-5, slack['efc_force']), False)
      err['stop_qacc'], err['stop_force'] = slack['qacc'], slack['efc_force']
    err['niter'] = (int(out.solver_niter), int(mdt.solver_niter[0]))
    ERRORS[(tag, tol)] = err
  return m, d, layout


def suite_state(name, seed=0):
  """A state of a suite model with constraint rows, from a rollout with random controls."""
  mj = mj_model(suite_path(name))
  md = rollout_state(mj, seed=seed, nstep=200)
  rng = np.random.default_rng(seed)
  while md.nefc == 0 and md.time < 20:
    md.ctrl[:] = rng.uniform(-1, 1, mj.nu)
    mujoco.mj_step(mj, md)
    mujoco.mj_forward(mj, md)
  return mj, md


# dm_control suite models with their kinds of rows at the rollout states: contacts (pyramidal;
# elliptic in manipulator), joint and tendon limits, friction loss (finger), equality
# (manipulator)
SUITE = ['cheetah', 'humanoid', 'finger', 'ball_in_cup', 'manipulator']


@pytest.mark.parametrize(
  'name,solver_', [(n, NEWTON) for n in SUITE] + [('humanoid', CG)], ids=lambda v: str(v)
)
def test_suite(name, solver_):
  """dm_control suite states: MuJoCo's rows solved by jaxsim, tight and default tolerance (CG
  on one model to keep the file fast; test_features covers CG on every row kind)."""
  mj, md = suite_state(name)
  mj.opt.solver = solver_
  assert md.nefc > 0
  compare(mj, md, (name, solver_))


def features_state(mj, seed):
  """A state where every feature has rows: bodies dropped on the plane, the arm driven, then
  the box and sphere set sliding and spinning so that friction cones are in every zone."""
  md = rollout_state(mj, seed=seed, nstep=60)
  rng = np.random.default_rng(seed)
  for j in (0, 1, 3):  # the capsule rests: its cone stays in the bottom zone
    md.qvel[6 * j : 6 * j + 6] = np.r_[rng.normal(size=2), 0, rng.normal(size=3) * 3]
  mujoco.mj_forward(mj, md)
  return md


@pytest.mark.parametrize(
  'solver_,rows', [(NEWTON, None), (CG, None), (NEWTON, 6)], ids=['newton', 'cg', 'newton-rows6']
)
@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_features(cone, solver_, rows):
  """Every row kind, condim 1/3/4/6, pyramidal and elliptic (impratio 10); two states at once
  under vmap, each against MuJoCo, one with a warm start worse than qacc_smooth. rows 6: Newton's
  Hessian summed 6 quadratic rows (and 1 elliptic cone in its middle zone) at a time
  (jaxsim.with_hessian_rows), fewer than there are: the same iterations."""
  mj = mj_model(xml=FEATURES.format(cone=cone), solver_=solver_)
  mds = [features_state(mj, seed) for seed in range(2)]
  # the second state's warm start is poor: both pick qacc_smooth (warmstart())
  mds[1].qacc_warmstart[:] = mds[1].qacc_smooth + 1e2
  kinds = {int(t) for t in mds[0].efc_type}
  contact = CONTACT_ELLIPTIC if cone == 'elliptic' else CONTACT_PYRAMIDAL
  assert {EQUALITY, FRICTION_DOF, LIMIT_JOINT, FRICTIONLESS, contact} <= kinds, kinds
  assert set(mds[0].contact.dim[: mds[0].ncon]) == {1, 3, 4, 6}
  states = set(mds[0].efc_state)
  assert mujoco.mjtConstraintState.mjCNSTRSTATE_LINEARPOS in states
  if cone == 'elliptic':
    # cones in the top (satisfied), middle (cone) and bottom (quadratic) zones
    ell = mds[0].efc_state[mds[0].efc_type == CONTACT_ELLIPTIC]
    assert set(ell) == {0, 1, 4}, set(ell)

  probs = []
  for tol in (TIGHT, DEFAULT):
    refs = [forward(mj, md, tol) for md in mds]
    probs = [problem(mj, md, seed=k) for k, md in enumerate(refs)]
    layouts = [pr[2] for pr in probs]
    assert _Key(layouts[0]) == _Key(layouts[1]), 'the two states have different layouts'
    m, layout = probs[0][0], layouts[0]
    if rows:
      assert (refs[0].efc_state == 1).sum() > rows
      assert cone == 'pyramidal' or (refs[0].efc_state == CONE).sum() > 1
      m = jaxsim.with_hessian_rows(m, rows)
    dd = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[pr[1] for pr in probs])
    outs = _solve_vmap(_Key(layout))(m, dd)
    for k, md in enumerate(refs):
      out = jax.tree_util.tree_map(lambda x, k=k: x[k], outs)
      err = check(md, out, probs[k][3], 1e-6, 1e-5, tight=tol == TIGHT)
      err['niter'] = (int(out.solver_niter), int(md.solver_niter[0]))
      ERRORS[(('features', cone, k), solver_, rows), tol] = err


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_noslip(cone):
  """The noslip post-processor (mj_solNoSlip) after Newton: every row kind and condim 1/3/4/6,
  two states under vmap, each against MuJoCo: all sweeps on one (a negative noslip_tolerance),
  MuJoCo's improvement test on the other (the same sweep count is required)."""
  mj = mj_model(xml=FEATURES.format(cone=cone))
  mj.opt.noslip_iterations = 6
  mds = [features_state(mj, seed) for seed in range(2)]
  refs, probs, sweeps = [], [], []
  for k, md in enumerate(mds):
    mj.opt.noslip_iterations = 0
    primal = forward(mj, copy.copy(md), TIGHT).solver_niter[0]
    mj.opt.noslip_iterations = 6
    mj.opt.noslip_tolerance = -1.0 if k == 0 else 1e-6
    refs.append(forward(mj, md, TIGHT))
    probs.append(problem(mj, refs[-1], seed=k))
    sweeps.append(refs[-1].solver_niter[0] - primal)
  assert sweeps[0] == 6 and 0 < sweeps[1] < 6, sweeps
  m, layout = probs[0][0], probs[0][2]
  assert _Key(layout) == _Key(probs[1][2])
  dd = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[pr[1] for pr in probs])
  tol = jnp.asarray([-1.0, 1e-6])
  opt = m.opt.replace(tolerance=jnp.asarray(TIGHT))

  @jax.jit
  def solve(d, noslip_tol):
    return solver.solve(m.replace(opt=opt.replace(noslip_tolerance=noslip_tol)), d, layout)

  outs = jax.vmap(solve)(dd, tol)
  # no LAPACK call (batched LAPACK kernels can deadlock XLA's CPU pool; noslip.qcqp's elliptic
  # blocks used LAPACK's det, Cholesky and inverse before _gauss_jordan)
  assert not oracle.lapack_calls(jax.jit(jax.vmap(solve)).lower(dd, tol).compile().as_text())
  for k, md in enumerate(refs):
    out = jax.tree_util.tree_map(lambda x, k=k: x[k], outs)
    real = probs[k][3]
    err = check(md, out, real, 1e-9, 1e-9, state=False, tight=True)
    # the dual states of the forces; a force on its bound to round-off (a friction-loss force at
    # its limit, a friction ellipse touched by the projection) may fall on either side of it
    force = np.asarray(out.efc_force)[real]
    tie = np.abs(np.abs(force) - md.efc_frictionloss) < 1e-12 * np.abs(force).max()
    adr = md.contact.efc_address[: md.ncon]
    for c in np.flatnonzero(md.contact.dim[: md.ncon] > 1):
      if md.efc_type[adr[c]] == CONTACT_ELLIPTIC:
        dim = md.contact.dim[c]
        f = md.efc_force[adr[c] : adr[c] + dim]
        t = np.linalg.norm(f[1:] / md.contact.friction[c, : dim - 1])
        if abs(f[0] - t) < 1e-12 * max(1.0, f[0]):
          tie[adr[c] : adr[c] + dim] = True
    same = np.asarray(out.efc_state)[real] == md.efc_state
    assert np.all(same | tie), (np.flatnonzero(~same), np.asarray(out.efc_state)[real][~same])
    err['niter'] = (int(out.solver_niter), int(md.solver_niter[0]))
    ERRORS[(('noslip', cone, k), NEWTON), TIGHT] = err


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_noslip_grad(cone):
  """Reverse-mode AD through Newton and six noslip sweeps (every row kind) agrees with central
  differences; qacc_smooth now matters (noslip's residuals and its qacc read it)."""
  mj = mj_model(xml=FEATURES.format(cone=cone))
  mj.opt.noslip_iterations, mj.opt.noslip_tolerance = 6, -1.0
  md = forward(mj, features_state(mj, 0), TIGHT)
  m, d, layout, real = problem(mj, md)
  w = jnp.asarray(np.random.default_rng(0).normal(size=mj.nv))

  @jax.jit
  @functools.partial(jax.value_and_grad, argnums=(0, 1, 2))
  def f(aref, qfrc_smooth, qacc_smooth):
    dd = d.replace(efc_aref=aref, qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth)
    return w @ solver.solve(m, dd, layout).qacc

  x0 = (d.efc_aref, d.qfrc_smooth, d.qacc_smooth)
  val, g = f(*x0)
  np.testing.assert_allclose(val, w @ md.qacc, rtol=1e-9)
  assert np.all(np.asarray(g[0])[~real] == 0)
  rng = np.random.default_rng(1)
  # the QCQP's Newton stops at |x|^2 - r^2 < 1e-10: a step of 1e-6 would see that jump
  h = 1e-4
  # with elliptic cones, Newton's iterate at TIGHT still carries its path: its finite
  # differences give qacc a sensitivity of ~1e-6 to the aref of a contact in the top zone, where
  # the exact solution (the implicit derivative) has none; the sweeps amplify this to ~1e-4 of
  # this loss
  rtol = 1e-6 if cone == 'pyramidal' else 1e-3
  for k in (0, 1, 2):
    v = rng.normal(size=x0[k].shape)
    xp = [x + h * v if j == k else x for j, x in enumerate(x0)]
    xm = [x - h * v if j == k else x for j, x in enumerate(x0)]
    fd = (f(*xp)[0] - f(*xm)[0]) / (2 * h)
    ad = float(np.asarray(g[k]) @ v)
    assert abs(fd) > 1e-3
    assert abs(ad - fd) <= rtol * abs(fd), (k, ad, fd)


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_linesearch_polynomials(cone):
  """The line search's cost along a direction (PrimalEval) is the total cost (Gauss plus the
  constraint costs of mj_constraintUpdate) minus its value at alpha = 0, and its derivatives
  are the cost's: at step lengths that cross every zone boundary."""
  mj = mj_model(xml=FEATURES.format(cone=cone))
  md = features_state(mj, 0)
  m, d, layout, real = problem(mj, md)
  r = row_classes(layout)
  p = solver.problem(m, d, r)
  rng = np.random.default_rng(1)
  qacc = jnp.asarray(md.qacc)
  search = jnp.asarray(rng.normal(size=mj.nv)) * jnp.abs(qacc).max()
  mul_m = functools.partial(dynamics.mul_rows, dynamics.ld_layout(m), p.M)  # M x (mj_mulM)

  def total(alpha):
    q = qacc + alpha * search
    cost = solver.update_constraint(p, r, p.J @ q - p.aref, False).cost
    return cost + 0.5 * (mul_m(q) - p.qfrc_smooth) @ (q - p.qacc_smooth)

  @jax.jit
  def evaluate(alpha):
    jaref, jv = p.J @ qacc - p.aref, p.J @ search
    ln = solver.line_prepare(p, r, jaref, jv, search, mul_m(qacc), mul_m(search))
    return solver.line_eval(p, ln, alpha), jax.vmap(total)(alpha) - total(0.0)

  alpha = jnp.asarray(np.linspace(-1, 1, 41) ** 3 * 2)
  h = 1e-6
  pts, direct = evaluate(alpha)
  plus, _ = evaluate(alpha + h)
  minus, _ = evaluate(alpha - h)
  scale = np.abs(direct).max()
  np.testing.assert_allclose(pts[:, solver.COST], direct, rtol=0, atol=1e-10 * scale)
  fd0 = (plus[:, solver.COST] - minus[:, solver.COST]) / (2 * h)
  fd1 = (plus[:, solver.D0] - minus[:, solver.D0]) / (2 * h)
  # away from zone boundaries (where the second derivative jumps)
  smooth = np.abs(plus[:, solver.D1] - minus[:, solver.D1]) < 1e-6 * np.abs(pts[:, solver.D1])
  assert smooth.sum() > 30
  np.testing.assert_allclose(pts[:, solver.D0], fd0, rtol=1e-5, atol=1e-6 * np.abs(fd0).max())
  np.testing.assert_allclose(pts[smooth, solver.D1], fd1[smooth], rtol=1e-5)
  # the cost along the line changes zones in this range
  states = {
    tuple(
      np.asarray(solver.update_constraint(p, r, p.J @ (qacc + a * search) - p.aref, False).state)
    )
    for a in (-2.0, 0.0, 2.0)
  }
  assert len(states) == 3


def test_real_model():
  """A Data from jaxsim.load_string and types.make_data; WARMSTART disabled (cold start at
  qacc_smooth); and a layout without rows."""
  xml = BOX.format(cone='elliptic', condim=6, impratio=3)
  mj = mj_model(xml=xml)
  mj.opt.disableflags |= WARMSTART
  md = box_state(mj)
  m, d, layout, real = problem(mj, forward(mj, md, DEFAULT), model=jaxsim.load_string(xml))
  check(md, run(m, d, layout), real, 1e-6, 1e-5)
  empty = Layout(0, *(np.zeros(0, np.int32),) * 2, 0, 0, *(np.zeros(0, np.int32),) * 3)
  d0 = make_data(m, ncon=0, nefc=0).replace(qacc_smooth=jnp.arange(m.nv) * 1.0)
  out = solver.solve(m, d0, empty)
  np.testing.assert_array_equal(out.qacc, d0.qacc_smooth)
  assert out.efc_force.shape == (0,)


# ---------------------------------------------------------------------------------------------
# gradients: a box sliding and spinning on a plane; d sum(w * qacc) / d (efc_aref, qfrc_smooth,
# qacc_smooth) against central finite differences of converged solves. The solver differentiates
# its solution implicitly (the optimality condition), not its iterations.

BOX = """
<mujoco>
  <option cone="{cone}" impratio="{impratio}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .0995">
      <freejoint/>
      <geom type="box" size=".1 .08 .1" friction=".7 .01 .001" condim="{condim}"/>
    </body>
  </worldbody>
</mujoco>
"""


def box_state(mj):
  md = mujoco.MjData(mj)
  md.qvel[:] = [0.4, -0.2, 0.0, 0.3, -0.5, 1.0]  # sliding and spinning: friction in play
  mujoco.mj_forward(mj, md)
  assert md.ncon == 4
  return md


@pytest.mark.parametrize(
  'cone,condim,solver_',
  [('elliptic', 4, NEWTON), ('pyramidal', 3, CG)],
)
def test_grad(cone, condim, solver_):
  """Reverse-mode AD of the solve agrees with central differences of converged solves (Newton
  with elliptic cones in the middle zone, CG with pyramidal cones); a solve cut to one iteration
  has finite gradients."""
  xml = BOX.format(cone=cone, condim=condim, impratio=1 if cone == 'pyramidal' else 5)
  mj = mj_model(xml=xml, solver_=solver_)
  mj.opt.tolerance = TIGHT
  md = box_state(mj)
  if cone == 'elliptic':
    assert CONE in set(md.efc_state)
  m, d, layout, real = problem(mj, md)
  one = m.replace(opt=m.opt.replace(iterations=1))
  rng = np.random.default_rng(0)
  w = jnp.asarray(rng.normal(size=mj.nv))

  def make(model):
    @jax.jit
    @functools.partial(jax.value_and_grad, argnums=(0, 1, 2))
    def f(aref, qfrc_smooth, qacc_smooth):
      dd = d.replace(efc_aref=aref, qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth)
      return w @ solver.solve(model, dd, layout).qacc

    return f

  # CG stops where MuJoCo's tests say (even at TIGHT, ~2e-4 relative off in this derivative along
  # its path), so the finite differences are taken of Newton solves, converged to round-off
  f, f1 = make(m), make(one)
  f_fd = make(m.replace(opt=m.opt.replace(solver=NEWTON)))
  x0 = (d.efc_aref, d.qfrc_smooth, d.qacc_smooth)
  val, g = f(*x0)
  np.testing.assert_allclose(val, w @ md.qacc, rtol=1e-9)
  assert all(np.all(np.isfinite(gi)) for gi in g)
  # padding rows are inactive: no sensitivity to their garbage aref
  assert np.all(np.asarray(g[0])[~real] == 0)
  # as in MuJoCo, qacc_smooth only picks the warm start (the Gauss cost uses qfrc_smooth)
  np.testing.assert_array_equal(g[2], 0.0)
  h = 1e-6
  for k in (0, 1):
    for _ in range(2):
      v = rng.normal(size=x0[k].shape)
      xp = [x + h * v if j == k else x for j, x in enumerate(x0)]
      xm = [x - h * v if j == k else x for j, x in enumerate(x0)]
      fd = (f_fd(*xp)[0] - f_fd(*xm)[0]) / (2 * h)
      ad = float(np.asarray(g[k]) @ v)
      assert abs(fd) > 1e-3
      assert abs(ad - fd) <= 1e-6 * abs(fd), (k, ad, fd)
  # one iteration: not converged; differentiated implicitly at the point it returns, with that
  # point's constraint zones (so not the exact solution's derivative), finite
  val1, g1 = f1(*x0)
  assert abs(val1 - val) > 1e-6 * abs(val), (val1, val)
  assert all(np.all(np.isfinite(gi)) for gi in g1)


# ---------------------------------------------------------------------------------------------
# float32: MuJoCo's stopping thresholds lie below float32 rounding (the line search's
# tolerance * ls_tolerance * |search| * trace(M) against a slope summed from terms of ~1e2 N *
# |search|); below float64 the solver also stops at the rounding floor of the tested quantities.


def _float32(tree):
  """tree with its floating-point arrays in float32."""

  def cast(x):
    x = jnp.asarray(x)
    return x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x

  return jax.tree_util.tree_map(cast, tree)


@pytest.fixture(scope='module')
def humanoid_contact():
  """The dm_control humanoid on the floor after 100 steps with random controls (MuJoCo's rows),
  with 8 warm starts: the previous step's qacc, qacc_smooth, and mixes of the two with noise.
  Every warm start is a MuJoCo solve of the same rows (one layout, so one compiled solve)."""
  mj = mj_model(suite_path('humanoid'))
  md = rollout_state(mj, seed=3, nstep=100)
  assert md.ncon >= 2
  rng = np.random.default_rng(0)
  warm = [md.qacc_warmstart.copy(), md.qacc_smooth.copy()]
  for k in range(6):
    t = (k + 1) / 7
    noise = rng.normal(size=mj.nv) * 0.1 * np.abs(md.qacc_warmstart).max()
    warm.append((1 - t) * md.qacc_warmstart + t * md.qacc_smooth + noise)
  refs = []
  for w in warm:
    mdw = copy.copy(md)
    mdw.qacc_warmstart[:] = w
    refs.append(forward(mj, mdw, DEFAULT))
  probs = [problem(mj, ref) for ref in refs]
  assert all(_Key(pr[2]) == _Key(probs[0][2]) for pr in probs)
  dd = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[pr[1] for pr in probs])
  return mj, refs, probs[0][0], probs[0][2], probs[0][3], dd


def _neval(md):
  """MuJoCo's line-search evaluations of the last solve (islands disabled: island 0's stats)."""
  return int(md.solver.neval[: md.solver_niter[0]].sum())


def test_float32_stops_where_float64_does(humanoid_contact):
  """Newton in float32 on an in-contact humanoid: each solve stops after about as many
  iterations and line-search evaluations as MuJoCo's float64 solve (without the rounding floor
  nearly every line search runs all ls_iterations), at MuJoCo's qacc to float32 accuracy."""
  mj, refs, m, layout, real, dd = humanoid_contact
  outs = _solve_vmap(_Key(layout))(_float32(m), _float32(dd))
  assert outs.qacc.dtype == jnp.float32
  for k, md in enumerate(refs):
    out = jax.tree_util.tree_map(lambda x, k=k: np.asarray(x[k]), outs)
    niter, neval = int(out.solver_niter), int(out.solver_neval)
    # MuJoCo's: 3 to 5 iterations, 8 to 19 evaluations (float32 without the floor: up to 122)
    assert niter <= md.solver_niter[0] + 1, (k, niter, md.solver_niter[0])
    assert neval <= 1.5 * _neval(md) + 3, (k, neval, _neval(md))
    # float32 rounding (eps 1.2e-7) amplified by the conditioning of M (~4e3 here): measured
    # 1e-6 to 1e-5
    assert relerr(out.qacc, md.qacc) < 1e-4, (k, relerr(out.qacc, md.qacc))
    assert relerr(out.efc_force[real], md.efc_force) < 1e-4


@pytest.mark.parametrize('rows', ['fit', 1])
def test_compact_hessian_is_mujocos_newton(humanoid_contact, rows):
  """Newton's Hessian summed from a compact buffer of the quadratic rows (layout.hessian_rows),
  smaller than the allocated rows: holding every quadratic row ('fit': the real rows; the padded
  rows of `problem` are never quadratic), or 1 row, fewer than the quadratic rows, so that it is
  filled and summed again: MuJoCo's iterations, line-search evaluations and solution, float64."""
  mj, refs, m, layout, real, dd = humanoid_contact
  k = int(real.sum()) if rows == 'fit' else rows
  assert k < layout.nefc
  quadratic = [
    int((md.efc_state == mujoco.mjtConstraintState.mjCNSTRSTATE_QUADRATIC).sum()) for md in refs
  ]
  assert rows == 'fit' or max(quadratic) > k
  outs = _solve_vmap(_Key(layout))(jaxsim.with_hessian_rows(m, k), dd)
  for i, md in enumerate(refs):
    out = jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[i]), outs)
    check(md, out, real, 1e-6, 1e-5)

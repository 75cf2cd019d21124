"""The PGS solver (jaxsim.pgs) against mujoco's mj_solPGS through the whole forward pass, and
constraint islands (mj_island): PGS, Newton, CG and noslip solve each island on its own.

States come from MuJoCo rollouts with random controls; jaxsim's forward (jit, float64; one
variant per solver as a vmapped batch of the states) must give MuJoCo's qacc, efc_force (active
rows, in MuJoCo's order), efc_state and, without noslip, the iteration count of the slowest
island. PGS stops after a fixed number of sweeps, so the comparison is of the truncated iterate:
the same shuffled block order, momentum and stopping test are needed to agree, not just the same
problem.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import pgs
from tests.models import dm_control_suite

# Several islands (free bodies alone or touching, a chain and a ball joint coupled by a spatial
# tendon, a connect and a weld between free bodies, two slides coupled by a fixed-tendon limit),
# every row kind: equality (connect, weld, joint), dof and tendon friction loss, hinge, ball and
# tendon limits, contacts of condim 3, 4 and 6.
SCENE = """
<mujoco>
  <option solver="PGS" cone="{cone}" iterations="60" timestep="0.005" {extra}>{flags}</option>
  <default><geom friction="0.8 0.02 0.01"/></default>
  <worldbody>
    <geom type="plane" size="3 3 .1"/>
    <body pos="0 0 0.3"><freejoint/><geom type="box" size=".1 .08 .06" condim="3"/></body>
    <body pos="0.5 0 0.3"><freejoint/><geom type="sphere" size=".08" condim="6"/></body>
    <body pos="0.5 0.02 0.55"><freejoint/>
      <geom type="capsule" size=".05 .1" condim="4" euler="0 90 0" contype="2" conaffinity="3"/>
    </body>
    <body name="d" pos="-0.6 0 0.3"><freejoint/><geom type="sphere" size=".07" condim="1"/></body>
    <body name="e" pos="-0.6 0.5 0.3"><freejoint/><geom type="box" size=".05 .05 .05" condim="6"/>
    </body>
    <body pos="0 1 0.5">
      <joint name="h1" type="hinge" axis="0 1 0" range="-30 30" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".03"/>
      <body pos="0.3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0" range="-60 20" frictionloss="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 -0.2" size=".03"/>
        <site name="tip" pos="0.3 0 -0.2"/>
      </body>
    </body>
    <body pos="1 1 0.5">
      <joint type="ball" range="0 40"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size=".03"/>
      <site name="btip" pos="0 0 -0.4"/>
    </body>
    <body name="f" pos="1.5 1 0.5"><freejoint/><geom type="box" size=".05 .05 .05"/></body>
    <body name="g" pos="1.7 1 0.5"><freejoint/><geom type="sphere" size=".05"/></body>
    <body pos="-1 -1 0.5"><joint name="sl1" type="slide" axis="0 0 1"/>
      <geom type="sphere" size=".05"/></body>
    <body pos="-1.2 -1 0.5"><joint name="sl2" type="slide" axis="0 0 1"/>
      <geom type="sphere" size=".05"/></body>
  </worldbody>
  <tendon>
    <spatial limited="true" range="0 0.5" frictionloss="0.2"><site site="tip"/><site site="btip"/>
    </spatial>
    <fixed limited="true" range="-0.1 0.1">
      <joint joint="sl1" coef="1"/><joint joint="sl2" coef="-1"/>
    </fixed>
  </tendon>
  <equality>
    <connect body1="f" body2="g" anchor="0.1 0 0"/>
    <weld body1="e" body2="d" relpose="0 -0.5 0 1 0 0 0" solref="0.05 1"/>
    <joint joint1="h1" joint2="h2" polycoef="0 0.5 0 0 0"/>
  </equality>
  <actuator><motor joint="h1" gear="5"/><motor joint="sl1" gear="3"/></actuator>
</mujoco>
"""

VARIANTS = {
  'elliptic': dict(cone='elliptic', extra='', flags=''),
  'pyramidal': dict(cone='pyramidal', extra='', flags=''),
  'noslip': dict(cone='elliptic', extra='noslip_iterations="5"', flags=''),
  'no_islands': dict(cone='elliptic', extra='', flags='<flag island="disable"/>'),
  'no_warmstart': dict(cone='pyramidal', extra='', flags='<flag warmstart="disable"/>'),
}


def states(mj: mujoco.MjModel, n: int, steps: int, seed: int = 0) -> list[mujoco.MjData]:
  """n states of a MuJoCo rollout with random controls, mj_forward run at each."""
  rng = np.random.default_rng(seed)
  md = mujoco.MjData(mj)
  out = []
  for _ in range(n):
    md.ctrl[:] = rng.uniform(-1, 1, mj.nu)
    for _ in range(steps):
      mujoco.mj_step(mj, md)
    mujoco.mj_forward(mj, md)
    out.append(_copy(mj, md))
  return out


def _copy(mj, md):
  c = mujoco.MjData(mj)
  mujoco.mj_copyData(c, mj, md)
  return c


def _on_cone(md: mujoco.MjData) -> np.ndarray:
  """Rows of elliptic contacts whose force is on the friction cone's surface (1e-12), (nefc,)."""
  on = np.zeros(md.nefc, bool)
  for i in range(md.ncon):
    con = md.contact[i]
    a, n = con.efc_address, con.dim
    if a < 0 or n < 2 or md.efc_type[a] != mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC:
      continue
    f = md.efc_force[a : a + n]
    t = np.linalg.norm(f[1:] / con.friction[: n - 1])
    on[a : a + n] = abs(f[0] - t) <= 1e-12 * max(abs(f[0]), 1e-300)
  return on


def compare(
  m: jaxsim.Model,
  mds: list[mujoco.MjData],
  check_niter: bool = True,
  boundary_ties: bool = False,
  rtol: float = 1e-9,
  batched: bool = False,
) -> list[int]:
  """jaxsim's forward at MuJoCo's states against MuJoCo's; returns MuJoCo's island counts.

  batched: the states as one vmapped batch (a world's islands then also wait for the batch's
  slowest world); otherwise one jit(forward) per state, a smaller program to compile.
  """
  d0 = jaxsim.make_data(m)

  def data(md):
    return d0.replace(
      qpos=md.qpos.copy(),
      qvel=md.qvel.copy(),
      act=md.act.copy(),
      ctrl=md.ctrl.copy(),
      qacc_warmstart=md.qacc_warmstart.copy(),
      time=md.time,
    )

  datas = [data(md) for md in mds]
  if batched:
    out = _batched(m, jax.tree_util.tree_map(lambda *x: jnp.stack(x), *datas))
  else:
    out = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *[_forward(m, d) for d in datas])
  islands = []
  for k, md in enumerate(mds):
    d = jax.tree_util.tree_map(lambda x, k=k: np.asarray(x[k]), out)
    scale = max(np.abs(md.qacc).max(), 1.0)
    np.testing.assert_allclose(d.qacc, md.qacc, rtol=0, atol=rtol * scale, err_msg=f'state {k}')
    act = d.efc_active.astype(bool)
    assert act.sum() == md.nefc, (k, act.sum(), md.nefc)
    fscale = max(np.abs(md.efc_force).max(), 1.0)
    np.testing.assert_allclose(d.efc_force[act], md.efc_force, rtol=0, atol=rtol * fscale)
    state = d.efc_state[act]
    if boundary_ties:
      # noslip leaves elliptic friction forces exactly on the cone (scaled onto it), where the
      # zone test mu*N >= |T| is decided by the last bit of each side: skip those contacts
      on = _on_cone(md)
      assert on.sum() < len(on)
      state, theirs = state[~on], md.efc_state[~on]
    else:
      theirs = md.efc_state
    np.testing.assert_array_equal(state, theirs)
    if check_niter:
      assert int(d.solver_niter) == md.solver_niter[: max(md.nisland, 1)].max(), k
    islands.append(int(md.nisland))
  return islands


_forward = jax.jit(jaxsim.forward)
_batched = jax.jit(jax.vmap(jaxsim.forward, in_axes=(None, 0)))


@pytest.mark.parametrize('variant', list(VARIANTS))
def test_pgs_matches_mujoco(variant):
  """PGS (per island, Nesterov, shuffled) on a scene of several islands and every row kind."""
  xml = SCENE.format(**VARIANTS[variant])
  mj = mujoco.MjModel.from_xml_string(xml)
  m = jaxsim.load_string(xml)
  assert m.opt.solver == mujoco.mjtSolver.mjSOL_PGS
  assert not any('PGS' in u for u in m.unsupported)
  mds = states(mj, 3, 40)
  noslip = variant == 'noslip'
  # one variant batched: islands that stop early inside worlds that wait for the batch
  batched = variant == 'elliptic'
  islands = compare(m, mds, check_niter=not noslip, boundary_ties=noslip, batched=batched)
  if variant == 'no_islands':
    assert islands == [0, 0, 0]
  else:
    # several islands, some stopping before the others
    assert max(islands) >= 7, islands
    assert any(len(set(md.solver_niter[: md.nisland])) > 1 for md in mds)


@pytest.mark.parametrize('solver', ['Newton', 'CG'])
def test_primal_solvers_per_island(solver):
  """Newton and CG stop per island as mujoco does (each island its own line search, direction
  and stopping tests), so an island that converges early keeps its less converged qacc."""
  xml = SCENE.format(**VARIANTS['pyramidal']).replace('solver="PGS"', f'solver="{solver}"')
  mj = mujoco.MjModel.from_xml_string(xml)
  m = jaxsim.load_string(xml)
  mds = states(mj, 3, 40)
  # CG's conjugate directions amplify round-off (a stiff weld here): after the same number of
  # iterations its forces agree with mujoco's to ~2e-7 relative (monolithic CG, islands off, is
  # off by up to 1e-3 on these states); Newton's to round-off
  islands = compare(m, mds, rtol=1e-9 if solver == 'Newton' else 1e-6, batched=solver == 'Newton')
  assert max(islands) >= 7, islands
  assert any(len(set(md.solver_niter[: md.nisland])) > 1 for md in mds)


@pytest.mark.parametrize('solver', ['PGS', 'Newton'])
def test_dm_control_humanoid(solver):
  """dm_control's humanoid (one kinematic tree, one island) in contact with the floor: PGS, and
  Newton, whose efc_state mujoco leaves at the zones of qacc_smooth whenever islands are on."""
  path = next(p for p in dm_control_suite() if p.endswith('/humanoid.xml'))
  mj = mujoco.MjModel.from_xml_path(path)
  mj.opt.solver = getattr(mujoco.mjtSolver, f'mjSOL_{solver.upper()}')
  m = jaxsim.load(path)
  m = m.replace(opt=m.opt.replace(solver=int(mj.opt.solver)))
  mds = states(mj, 3, 60, seed=1)
  assert max(md.ncon for md in mds) > 0
  assert all(md.nisland == 1 for md in mds)
  compare(m, mds)


def test_pcg32_draws():
  """PCG32 from mujoco's seed: a NumPy uint64 transcription of pcg32_next agrees."""
  draws = pgs.pcg32_draws(1000)
  state = np.uint64(0)
  mult = np.uint64(6364136223846793005)
  out = []
  with np.errstate(over='ignore'):
    for k in range(1001):
      old = state
      state = old * mult + np.uint64(1)
      xs = np.uint32(((old >> np.uint64(18)) ^ old) >> np.uint64(27) & np.uint64(0xFFFFFFFF))
      rot = np.uint32(old >> np.uint64(59))
      val = np.uint32((int(xs) >> int(rot)) | (int(xs) << ((-int(rot)) & 31)) & 0xFFFFFFFF)
      if k:
        out.append(val)
  np.testing.assert_array_equal(draws, np.asarray(out, np.uint32))
  # the draws are spread over the 32 bits
  assert draws.max() > 2**31 and draws.min() < 2**27


BOX = """
<mujoco>
  <option solver="PGS" cone="{cone}" iterations="2000" tolerance="1e-30" timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 0.099">
      <freejoint/>
      <geom type="box" size=".1 .08 .1" friction=".7 .01 .001" condim="{condim}"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize('cone,condim', [('pyramidal', 3), ('elliptic', 4)])
def test_pgs_grad(cone, condim):
  """jax.grad through step with PGS is finite and agrees with central differences of converged
  solves (the derivative is that of the exact solution, as for Newton)."""
  xml = BOX.format(cone=cone, condim=condim)
  m = jaxsim.load_string(xml)
  newton = m.replace(opt=m.opt.replace(solver=int(mujoco.mjtSolver.mjSOL_NEWTON)))
  d0 = jaxsim.make_data(m).replace(qvel=jnp.asarray([0.4, -0.2, 0.0, 0.3, -0.5, 1.0]))
  w = jnp.asarray(np.random.default_rng(0).normal(size=m.nv))

  def loss(model, qvel):
    return w @ jaxsim.step(model, d0.replace(qvel=qvel)).qvel

  val, g = jax.jit(jax.value_and_grad(lambda q: loss(m, q)))(d0.qvel)
  f_newton = jax.jit(lambda q: loss(newton, q))
  assert np.all(np.isfinite(g))
  # PGS's elliptic updates (ray, then QCQP) converge slowly: after 2000 sweeps its iterate is
  # ~3e-9 (relative) from Newton's solution; pyramidal contacts converge to round-off
  np.testing.assert_allclose(val, f_newton(d0.qvel), rtol=1e-9 if cone == 'pyramidal' else 1e-8)
  h = 1e-6
  rng = np.random.default_rng(1)
  for _ in range(2):
    v = jnp.asarray(rng.normal(size=m.nv))
    fd = (f_newton(d0.qvel + h * v) - f_newton(d0.qvel - h * v)) / (2 * h)
    ad = float(g @ v)
    assert abs(fd) > 1e-3
    assert abs(ad - fd) <= 1e-6 * abs(fd), (ad, fd)

"""The linear-time variational integrator: DEL residual, ABA impulse solve, conservation, energy.

DRNEA's residual is checked against finite differences of the discrete action, the articulated-
body impulse solve against MuJoCo's mass matrix, the residual at a MuJoCo trajectory (qacc from
mj_forward) against the continuous dynamics, and long runs for free fall, momentum and energy.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import time

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import variational as vi
from jaxsim._src.integrate import integrate_pos
from tests import oracle
from tests.models import dm_control_suite

# models/chain.py by path: tests/models.py takes the name `models` on pytest's import path
_spec = importlib.util.spec_from_file_location(
  'chain_models', pathlib.Path(__file__).resolve().parents[1] / 'models' / 'chain.py'
)
_chain = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_chain)
chain_xml = _chain.chain_xml

# free root, a branch, a body with two joints (slide + hinge), a ball; springs and armature
TREE_XML = """<mujoco><option timestep="0.002"/>
<default><geom contype="0" conaffinity="0"/></default>
<worldbody>
 <body name="root" pos="0 0 1"><freejoint/><geom type="box" size=".1 .2 .05" pos=".02 0 0"/>
  <body pos=".2 0 0" quat="0.9 0.1 0.2 0.3">
   <joint type="hinge" axis="0 1 0" pos=".03 0 0" stiffness="2" armature=".01"/>
   <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
   <body pos=".3 0 0">
    <joint type="slide" axis="1 0 0.3" stiffness="5"/>
    <joint type="hinge" axis="0 0 1" pos="0.01 0.02 0"/>
    <geom type="box" size=".05 .04 .03" pos=".05 .01 0" euler="10 20 30"/>
    <body pos="0.1 0 0"><joint type="ball" pos=".02 0 .01"/>
     <geom type="ellipsoid" size=".05 .03 .04" pos=".05 0 .02"/></body>
   </body>
  </body>
  <body pos="-.2 0 0"><joint type="hinge" axis="1 0 0" armature=".02"/>
   <geom type="capsule" fromto="0 0 0 -.2 0 -.1" size=".02"/></body>
 </body>
</worldbody></mujoco>"""

# the same tree with damping, a motor and a position servo, for the comparison with MuJoCo
FORCED_XML = TREE_XML.replace('armature=".01"', 'armature=".01" damping=".3"').replace(
  '</worldbody></mujoco>',
  '</worldbody><actuator><motor joint="j" gear="2"/><position joint="s" kp="20" kv="1"/>'
  '</actuator></mujoco>',
)
FORCED_XML = FORCED_XML.replace(
  '<joint type="hinge" axis="0 0 1"', '<joint name="j" type="hinge" axis="0 0 1" damping=".2"'
)
FORCED_XML = FORCED_XML.replace('<joint type="slide"', '<joint name="s" type="slide"')

FLOATING_XML = """<mujoco><option timestep="0.001" gravity="0 0 0"/>
<default><geom contype="0" conaffinity="0" type="capsule" size=".03"/></default>
<worldbody>
 <body pos="0 0 0"><freejoint/><geom fromto="0 0 0 .2 0 0"/>
  <body pos=".2 0 0"><joint type="hinge" axis="0 1 0"/><geom fromto="0 0 0 .2 0 0"/>
   <body pos=".2 0 0"><joint type="hinge" axis="0 0 1"/><geom fromto="0 0 0 .2 0 0"/>
    <body pos=".2 0 0"><joint type="hinge" axis="1 0 1"/>
     <geom type="box" size=".05 .02 .03" pos=".05 0 0"/>
    </body>
   </body>
  </body>
 </body>
</worldbody></mujoco>"""


def _tangent_perturbation(m, q, eps):
  return integrate_pos(m, q, eps, 1.0)


def test_del_residual_is_the_action_gradient():
  """DRNEA's residual equals minus the gradient of the discrete action (central differences)."""
  m = jaxsim.load_string(TREE_XML)
  mj = mujoco.MjModel.from_xml_string(TREE_XML)
  rng = np.random.default_rng(0)
  qpos, qvel, _, _ = oracle.random_state(mj, rng)
  h = float(m.opt.timestep)
  q1 = jnp.asarray(qpos)
  q0 = integrate_pos(m, q1, jnp.asarray(qvel), -h)
  q2 = integrate_pos(m, q1, jnp.asarray(qvel + rng.normal(size=m.nv)), h)
  f = jax.jit(lambda a, b, c: vi.del_residual(m, a, b, c))(q0, q1, q2)

  @jax.jit
  def action(eps):
    q = _tangent_perturbation(m, q1, eps)
    return vi.discrete_lagrangian(m, q0, q) + vi.discrete_lagrangian(m, q, q2)

  eps, eye = 1e-6, np.eye(m.nv)
  fd = np.array([(action(eps * eye[i]) - action(-eps * eye[i])) / (2 * eps) for i in range(m.nv)])
  assert np.abs(f).max() > 0.1  # a real check: the residual is far from zero
  oracle.assert_close('residual', f, -fd, rtol=1e-7, atol=1e-9)
  # the action sum over a trajectory gives the same gradient at its interior point
  total = vi.discrete_action(m, jnp.stack([q0, q1, q2]))
  np.testing.assert_allclose(total, action(jnp.zeros(m.nv)), rtol=1e-12)


def _universal_chain(n: int) -> str:
  links = ''.join(
    f'<body pos="0 0 {-0.1 if i else 0}"><joint type="hinge" axis="0 1 0"/>'
    '<joint type="hinge" axis="1 0 0"/><geom type="capsule" fromto="0 0 0 0 0 -.1" size=".02"/>'
    for i in range(n)
  )
  return f'<mujoco><worldbody>{links}{"</body>" * n}</worldbody></mujoco>'


@pytest.mark.parametrize('path', ['TREE', 'UCHAIN', 'walker', 'cheetah', 'humanoid'])
def test_impulse_solve_inverts_mujoco_mass_matrix(path):
  """The articulated-body impulse solve is (M + armature)^-1 of MuJoCo's mj_fullM."""
  if path in ('TREE', 'UCHAIN'):
    # UCHAIN: 40 links of two hinges each, where an unsymmetrised D^-1 once ruined the solve
    xml = TREE_XML if path == 'TREE' else _universal_chain(40)
    m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  else:
    path = next(p for p in dm_control_suite() if p.endswith(f'/{path}.xml'))
    m, mj = oracle.load_pair(path)
  rng = np.random.default_rng(1)
  qpos, qvel, act, ctrl = oracle.random_state(mj, rng)
  md = oracle.mj_data(mj, qpos, qvel, act, ctrl)
  big_m = oracle.full_m(mj, md)
  damping = m.dof_damping if not m.opt.disableflags & jaxsim.DisableBit.DAMPER else 0
  big_m += np.diag(0.5 * float(m.opt.timestep) * np.asarray(damping))
  d = jaxsim.make_data(m).replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel))

  @jax.jit
  def inverse(d):
    c = vi.prepare(m, d)
    return jax.vmap(lambda tau: vi.solve_impulse(m, c, tau))(jnp.eye(m.nv)).T

  inv = np.asarray(inverse(d))
  oracle.assert_close('M^-1 M', inv @ big_m, np.eye(m.nv), rtol=1e-9, atol=1e-9)


def test_residual_vanishes_on_mujoco_trajectory():
  """At q_k-1, q_k, q_k+1 from MuJoCo's qacc, f / h -> 0 like h: springs, damping, armature,
  motors, servos, qfrc_applied and xfrc_applied all enter as MuJoCo's forces do."""
  m = jaxsim.load_string(FORCED_XML)
  mj = mujoco.MjModel.from_xml_string(FORCED_XML)
  rng = np.random.default_rng(2)
  qpos, qvel, act, ctrl = oracle.random_state(mj, rng)
  applied = rng.normal(size=mj.nv)
  xfrc = rng.normal(size=(mj.nbody, 6))
  xfrc[0] = 0
  md = mujoco.MjData(mj)
  md.qpos[:], md.qvel[:], md.ctrl[:] = qpos, qvel, ctrl
  md.qfrc_applied[:], md.xfrc_applied[:] = applied, xfrc
  mujoco.mj_forward(mj, md)
  qacc = md.qacc.copy()
  scale = np.abs(md.qfrc_smooth).max()

  def rel_residual(h):
    mh = m.replace(opt=m.opt.replace(timestep=jnp.asarray(h)))
    q = jnp.asarray(qpos)
    qm = integrate_pos(mh, q, jnp.asarray(qvel - 0.5 * h * qacc), -h)
    qp = integrate_pos(mh, q, jnp.asarray(qvel + 0.5 * h * qacc), h)
    d = jaxsim.make_data(mh).replace(
      ctrl=jnp.asarray(ctrl), qfrc_applied=jnp.asarray(applied), xfrc_applied=jnp.asarray(xfrc)
    )
    f = residual(mh, qm, q, qp, d)
    return np.abs(np.asarray(f) / h).max() / scale

  residual = jax.jit(vi.del_residual)

  r1, r2 = rel_residual(1e-4), rel_residual(5e-5)
  assert r1 < 1e-2 and r2 < 1e-2, (r1, r2)
  assert 1.6 < r1 / r2 < 4.5, (r1, r2)  # first order (the actuator velocity lags by h/2)


def test_prismatic_free_fall():
  """A body on a vertical slide, and a free body thrown sideways, fall with acceleration g to 1e-9.

  (A spinning free body's centre follows the SE(3) Lagrangian's screw interpolation: its discrete
  acceleration is g only to O((h w)^2), 3e-6 relative at 5 rad/s.)

  400 steps: further on, rounding of |q| ~ 1 m in (q_k+1 - 2 q_k + q_k-1) / h^2 nears 1e-9."""
  xml = """<mujoco><option timestep="0.001"/><worldbody>
    <body pos="0 0 1"><joint type="slide" axis="0 0 1"/>
     <geom type="box" size=".1 .1 .1" contype="0"/></body>
    <body pos="1 0 1"><freejoint/><geom type="sphere" size=".1" contype="0"/></body>
    </worldbody></mujoco>"""
  m = jaxsim.load_string(xml)
  g = float(m.opt.gravity[2])
  d = jaxsim.make_data(m).replace(qvel=jnp.array([0.0, 0.3, -0.2, 1.0, 0.0, 0.0, 0.0]))
  run = jax.jit(lambda d: jax.lax.scan(lambda d, _: (vi.step(m, d),) * 2, d, None, length=400))
  _, traj = run(d)
  acc = np.asarray(traj.qacc)
  np.testing.assert_allclose(acc[:, 0], g, rtol=0, atol=1e-9)
  np.testing.assert_allclose(acc[:, 1:4], [[0, 0, g]] * len(acc), rtol=0, atol=1e-9)


def test_floating_chain_conserves_momentum():
  """Zero gravity: linear and angular momentum of a floating chain stay constant to the solver
  tolerance over 2000 steps (and the tolerance is what bounds the drift)."""
  m = jaxsim.load_string(FLOATING_XML)
  rng = np.random.default_rng(3)
  qvel = rng.normal(size=m.nv) * 2.0
  d = jaxsim.make_data(m).replace(qvel=jnp.asarray(qvel))

  @jax.jit
  def run(d, tol):
    def body(d, _):
      d, info = vi.step_with_info(m, d, tolerance=tol)
      return d, (vi.momentum(m, d), info['iterations'], info['converged'])

    return jax.lax.scan(body, d, None, length=2000)[1]

  p0 = np.asarray(vi.momentum(m, d))
  results = {}
  for tol in (1e-6, 1e-11):
    p, it, conv = (np.asarray(x) for x in run(d, tol))
    assert conv.all()
    results[tol] = np.abs(p - p0).max() / np.abs(p0).max()
  print(f'momentum drift (relative): {results}, mean iterations {it.mean():.2f}')
  assert results[1e-11] < 1e-10
  assert results[1e-11] < results[1e-6]


@pytest.fixture(scope='module')
def chain():
  m = jaxsim.load_string(chain_xml(10, damping=0.0, initial_bend=0.3, timestep=0.001))
  return m


BLOCK, NBLOCKS = 10, 10_000  # energy sampled every 10 steps, 1e5 steps at most


def _step_variational(m, d):
  d, info = vi.step_with_info(m, d)
  return d, info['iterations']


def _step_euler(m, d):
  me = m.replace(opt=m.opt.replace(integrator=int(jaxsim.IntegratorType.EULER)))
  return jaxsim.step(me, d), jnp.zeros((), jnp.int32)


def _continuous_energy(m, d):
  return vi.kinetic_energy(m, d) + vi.potential_energy(m, d)


@functools.partial(oracle.jit_run, static_argnums=0)  # 1e5 steps
def _rollout(one, m, d, nblocks):
  """States every BLOCK steps for nblocks blocks (traced, so runs of any length share a compile)."""

  def block(k, carry):
    d, qpos, qvel, its = carry
    d, it = jax.lax.scan(lambda d, _: one(m, d), d, None, length=BLOCK)
    return d, qpos.at[k].set(d.qpos), qvel.at[k].set(d.qvel), its.at[k].set(it)

  buf = (jnp.zeros((NBLOCKS, m.nq)), jnp.zeros((NBLOCKS, m.nv)), jnp.zeros((NBLOCKS, BLOCK), int))
  return jax.lax.fori_loop(0, nblocks, block, (d,) + buf)[1:]


@functools.partial(jax.jit, static_argnums=0)
def _energies(energy, m, d, qpos, qvel):
  return jax.vmap(lambda q, v: energy(m, d.replace(qpos=q, qvel=v)))(qpos, qvel)


def _energy_run(m, steps, integrator='variational'):
  """Relative energy (E - E0) / (E0 - E_rest) every BLOCK steps from the bent chain at rest."""
  d = jaxsim.make_data(m).replace(qpos=jnp.full(m.nq, 0.3))
  one, energy = {
    'variational': (_step_variational, vi.energy),
    'euler': (_step_euler, _continuous_energy),
  }[integrator]
  nblocks = steps // BLOCK
  t = time.perf_counter()
  qpos, qvel, its = jax.block_until_ready(_rollout(one, m, d, nblocks))
  wall = time.perf_counter() - t
  qpos, qvel = jnp.concatenate([d.qpos[None], qpos]), jnp.concatenate([d.qvel[None], qvel])
  e = np.asarray(_energies(energy, m, d, qpos, qvel))
  e0, e = e[0], e[1 : nblocks + 1]
  rest = float(vi.potential_energy(m, jaxsim.make_data(m)))
  rel = (e - e0) / (e0 - rest)  # relative to the released energy above rest
  time_s = np.arange(1, nblocks + 1) * BLOCK * float(m.opt.timestep)
  drift = np.polyfit(time_s, rel, 1)[0] * time_s[-1]
  return rel, drift, np.asarray(its)[:nblocks], wall


def test_energy_band_chain(chain):
  """10-link pendulum chain, h = 1 ms, 1e5 steps: energy in a band under 1% with no fitted drift;
  semi-implicit Euler drifts on the same scene; halving h shrinks the band about 4x (RMS).

  The band is relative to the energy released above the hanging rest state; the energy of the
  variational run is the discrete Legendre transform's (vi.energy), Euler's the continuous one."""
  rel, drift, its, wall = _energy_run(chain, 100_000)
  band = rel.max() - rel.min()
  print(
    f'\nvariational h=1ms: band {band:.2e}, fitted drift {drift:.1e}, mean RIQN iterations '
    f'{its.mean():.2f} (max {its.max()}), {wall:.1f}s for 1e5 steps'
  )
  assert band < 1e-2
  assert abs(drift) < 0.1 * band
  assert its.max() < vi.MAX_ITER
  assert its.mean() < 6

  coarse = chain.replace(opt=chain.opt.replace(timestep=jnp.asarray(0.002)))
  rel2, drift2, _, _ = _energy_run(coarse, 50_000)
  band2 = rel2.max() - rel2.min()
  # the extremes come from rare whip-like events of a chaotic trajectory, so their ratio is noisy
  # (2.4 to 4.7 in runs that differ only by rounding); the RMS deviation scales cleanly
  rms, rms2 = rel.std(), rel2.std()
  print(
    f'variational h=2ms: band {band2:.2e} (ratio {band2 / band:.2f}), RMS ratio '
    f'{rms2 / rms:.2f}, drift {drift2:.1e}'
  )
  assert 2.8 < rms2 / rms < 5.5  # first order would give 2
  assert band2 > 1.5 * band

  # Euler's energy grows until it diverges (at about 21 s here): 20 s of it suffice
  rel_e, drift_e, _, _ = _energy_run(chain, 20_000, integrator='euler')
  print(f'euler h=1ms, 2e4 steps: band {rel_e.max() - rel_e.min():.2e}, fitted drift {drift_e:.1e}')
  assert drift_e > 10 * band


def test_grad_and_vmap():
  """Reverse-mode gradients through two steps match finite differences; vmap works."""
  m = jaxsim.load_string(chain_xml(3, damping=0.05, timestep=0.002))
  d = jaxsim.make_data(m).replace(qpos=jnp.array([0.3, -0.2, 0.5]))

  def final(v0):
    dd = vi.step(m, vi.step(m, d.replace(qvel=v0)))
    return jnp.sum(dd.qpos * jnp.array([1.0, 2.0, 3.0]))

  v0 = jnp.array([0.1, 0.2, -0.3])
  grad = jax.jit(jax.grad(final))(v0)
  f = jax.jit(final)
  eye, eps = np.eye(3), 1e-6
  fd = np.array([(f(v0 + eps * eye[i]) - f(v0 - eps * eye[i])) / (2 * eps) for i in range(3)])
  assert np.all(np.isfinite(grad))
  np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)

  batch = d.replace(qvel=jnp.stack([v0, 2 * v0]), qpos=jnp.stack([d.qpos, -d.qpos]))
  axes = jax.tree_util.tree_map(lambda _: None, d).replace(qvel=0, qpos=0)
  out = jax.jit(jax.vmap(lambda dd: vi.step(m, dd), in_axes=(axes,)))(batch)
  one = vi.step(m, d.replace(qvel=2 * v0, qpos=-d.qpos))
  np.testing.assert_allclose(out.qpos[1], one.qpos, rtol=1e-12)


def test_trace_size_independent_of_chain_length():
  """The recursions are scans: the traced program has the same size for 3 and 40 links."""

  def count(jaxpr):
    n = 0
    for eqn in jaxpr.eqns:
      n += 1
      for p in eqn.params.values():
        for sub in p if isinstance(p, (tuple, list)) else [p]:
          sub = getattr(sub, 'jaxpr', sub)
          if hasattr(sub, 'eqns'):
            n += count(sub)
    return n

  sizes = []
  for n in (3, 40):
    m = jaxsim.load_string(chain_xml(n, damping=0.1))
    jaxpr = jax.make_jaxpr(lambda d, m=m: vi.step(m, d))(jaxsim.make_data(m))
    sizes.append(count(jaxpr.jaxpr))
  assert sizes[0] == sizes[1] and sizes[0] > 100, sizes


def test_unsupported_models_are_rejected():
  """Constraints, tendons and unsupported actuators raise clear errors."""
  m = jaxsim.load_string(
    chain_xml(3, contacts=True).replace('<joint ', '<joint limited="true" range="-1 1" ')
  )
  with pytest.raises(NotImplementedError, match='constraints'):
    vi.step(m, jaxsim.make_data(m))
  m = jaxsim.load_string(chain_xml(3, joint='ball'))
  with pytest.raises(NotImplementedError, match='actuator'):
    vi.step(m, jaxsim.make_data(m))
  xml = chain_xml(3).replace('<motor name="m0" joint="j0"/>', '<motor name="m0" joint="j0"/>')
  xml = xml.replace('<motor gear', '<motor gear').replace(
    '</worldbody>',
    '</worldbody><tendon><fixed name="t"><joint joint="j0" coef="1"/></fixed></tendon>',
  )
  m = jaxsim.load_string(xml)
  with pytest.raises(NotImplementedError, match='tendons'):
    vi.step(m, jaxsim.make_data(m))
  assert vi.is_variational(
    jaxsim.load_string(chain_xml(2).replace('<option ', '<option integrator="variational" '))
  )

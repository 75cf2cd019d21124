"""Contact adhesion (MuJoCo 4: geom and pair attribute `adhesion`) against mujoco 4.0.0, float64.

An adhesive contact pulls its geoms together with a constant force along its normal
(qfrc_adhesion, part of qfrc_passive), its rows' reference acceleration is raised by R times the
adhesion (a pyramid's edges share it), and it stays in the constraint when separated within the
gap band, there as a frictionless condim-1 contact (a tether). The scene has resting, pressed and
separated contacts of spheres, boxes and capsules with the plane and with each other, adhesion
mixed by sum and by priority, explicit pairs (one with adhesion, one without, which stays out of
the constraint in its gap band), condim 1, 3, 4 and 6. States come from a MuJoCo rollout whose
bodies are kicked now and then, so that tethers pull and push; jaxsim's forward at those states
must give MuJoCo's contacts, rows, passive forces, solver forces and qacc, and 50 steps of
jit(jaxsim.step) must follow mj_step.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import rne_post
from tests.oracle import assert_close

# contype/conaffinity: everything touches the floor; s1-s2 and b1-c1 touch each other. s6, inside
# b2, hovers in its pair's gap band above the floor without adhesion (the pair's, which does not
# default to the geoms'): that contact stays out of the constraint.
SCENE = """
<mujoco>
  <option timestep="0.004" cone="{cone}" solver="{solver}" {extra}>{flags}</option>
  <default><geom friction="0.7 0.01 0.001" solref=".01 1" contype="1" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1" adhesion="0.4" gap="0.01" conaffinity="1"/>
    <body pos="0 0 0.099"><freejoint/>
      <geom name="s1" type="sphere" size=".1" adhesion="1.5" condim="4" gap=".005"
            conaffinity="2"/></body>
    <body pos="0 0 0.3"><freejoint/>
      <geom name="s2" type="sphere" size=".1" adhesion="0.8" condim="6" gap=".005" contype="3"/>
    </body>
    <body pos="0.5 0 0.06"><freejoint/>
      <geom name="b1" type="box" size=".1 .08 .06" adhesion="3" priority="1" conaffinity="4"/>
    </body>
    <body pos="0.5 0 0.15" euler="0 0 30"><freejoint/>
      <geom name="c1" type="capsule" size=".04 .1" euler="0 90 0" adhesion="0.5" condim="6"
            gap=".008" contype="5"/></body>
    <body pos="-0.5 0 0.087"><freejoint/>
      <geom name="s3" type="sphere" size=".08" adhesion="2" gap=".004"/></body>
    <body pos="-0.5 0.5 0.056"><freejoint/>
      <geom name="s4" type="sphere" size=".05" condim="1" adhesion="1" gap=".01"/></body>
    <body pos="0 0.5 0.066"><freejoint/>
      <geom name="b2" type="box" size=".06 .06 .06" adhesion="5"/>
      <geom name="s6" type="sphere" size=".05" adhesion="2" contype="0"/></body>
    <body pos="0.5 0.5 0.07"><freejoint/>
      <geom name="s5" type="sphere" size=".06" adhesion="4" gap=".01"/></body>
  </worldbody>
  <contact>
    <pair geom1="floor" geom2="b2" adhesion="1.5" condim="3" gap=".005"/>
    <pair geom1="floor" geom2="s5" condim="3" gap=".01"/>
    <pair geom1="floor" geom2="s6" gap=".03"/>
  </contact>
</mujoco>
"""

VARIANTS = {
  'pyramidal-newton': dict(cone='pyramidal', solver='Newton'),
  'elliptic-newton': dict(cone='elliptic', solver='Newton'),
  'pyramidal-pgs': dict(cone='pyramidal', solver='PGS'),
  'elliptic-pgs': dict(cone='elliptic', solver='PGS'),
  'elliptic-cg': dict(cone='elliptic', solver='CG'),
  # noslip sweeps pyramid edge pairs: a tether's slot keeps only its first (normal) row
  'pyramidal-noslip': dict(cone='pyramidal', solver='Newton', extra='noslip_iterations="4"'),
  # without springs and dampers MuJoCo skips all passive forces, adhesion's pull included, but
  # still biases aref
  'no-passive': dict(
    cone='elliptic', solver='Newton', flags='<flag spring="disable" damper="disable"/>'
  ),
}
ROLLOUT = ('pyramidal-newton', 'pyramidal-pgs', 'elliptic-pgs', 'elliptic-cg')
STEPS = 50


def xml_of(variant: str) -> str:
  return SCENE.format(**{'extra': '', 'flags': '', **VARIANTS[variant]})


def mj_states(mj: mujoco.MjModel, n: int = 4, steps: int = 25) -> list[mujoco.MjData]:
  """n states of a MuJoCo rollout, the bodies kicked (random velocities) before each."""
  rng = np.random.default_rng(0)
  md = mujoco.MjData(mj)
  out = []
  for _ in range(n):
    md.qvel[:] += rng.normal(size=mj.nv) * 0.3
    for _ in range(steps):
      mujoco.mj_step(mj, md)
    mujoco.mj_forward(mj, md)
    c = mujoco.MjData(mj)
    mujoco.mj_copyData(c, mj, md)
    out.append(c)
  return out


def _forward_and_force(m, d):
  d = jaxsim.forward(m, d)
  return d, rne_post.contact_force(m, d)


_forward = jax.jit(_forward_and_force)
_batched = jax.jit(jax.vmap(_forward_and_force, in_axes=(None, 0)))
# the variant whose states run as one vmapped batch; the others one jit(forward) per state, a
# smaller program to compile
BATCHED = 'elliptic-newton'


@functools.cache
def models(variant: str):
  """(jaxsim Model, MjModel, MuJoCo's states) of a variant."""
  xml = xml_of(variant)
  mj = mujoco.MjModel.from_xml_string(xml)
  return jaxsim.load_string(xml), mj, mj_states(mj)


def jx_data(m: jaxsim.Model, md: mujoco.MjData) -> jaxsim.Data:
  """jaxsim Data at MuJoCo's state (time as a float64 array, as step returns it)."""
  return jaxsim.make_data(m).replace(
    qpos=md.qpos.copy(),
    qvel=md.qvel.copy(),
    qacc_warmstart=md.qacc_warmstart.copy(),
    time=np.float64(md.time),
  )


@functools.cache
def setup(variant: str):
  """(jaxsim Model, MjModel, MuJoCo's states, jaxsim's forward at them, contact forces)."""
  m, mj, mds = models(variant)
  stack = lambda *x: jnp.stack(x)  # noqa: E731
  datas = [jx_data(m, md) for md in mds]
  if variant == BATCHED:
    out, frc = _batched(m, jax.tree_util.tree_map(stack, *datas))
  else:
    out, frc = jax.tree_util.tree_map(stack, *[_forward(m, d) for d in datas])
  out = jax.tree_util.tree_map(np.asarray, out)
  return m, mj, mds, out, np.asarray(frc)


def _on_cone(md: mujoco.MjData) -> np.ndarray:
  """Rows (nefc,) of elliptic contacts whose force is on the cone's surface (to 1e-12)."""
  on = np.zeros(md.nefc, bool)
  for i in range(md.ncon):
    con = md.contact[i]
    a, n = con.efc_address, con.dim
    if a < 0 or n < 2:
      continue
    f = md.efc_force[a : a + n]
    t = np.linalg.norm(f[1:] / con.friction[: n - 1])
    on[a : a + n] = abs(f[0] - t) <= 1e-12 * max(abs(f[0]), 1e-300)
  return on


def _at(tree, k):
  return jax.tree_util.tree_map(lambda x: x[k], tree)


def test_model_fields():
  """geom_adhesion and pair_adhesion compile to mujoco's (a pair's does not default to its
  geoms'), flg_adhesion is set."""
  m, mj, _ = models('pyramidal-newton')
  assert_close('geom_adhesion', m.geom_adhesion, mj.geom_adhesion, 0, 0)
  assert_close('pair_adhesion', m.pair_adhesion, mj.pair_adhesion, 0, 0)
  assert list(mj.pair_adhesion) == [1.5, 0.0, 0.0]
  assert m.flg_adhesion == mj.flg_adhesion == 1
  plain = jaxsim.load_string(re.sub(r' adhesion="[^"]*"', '', xml_of('pyramidal-newton')))
  assert plain.flg_adhesion == 0


@pytest.mark.parametrize('variant', list(VARIANTS))
def test_forward_matches_mujoco(variant):
  """Contacts (adhesion mixed by sum and priority, tethers as condim 1), constraint rows
  (efc_type, R, aref with the adhesion bias), qfrc_adhesion and qfrc_passive, solver forces,
  efc_state, qacc and mj_contactForce (net of adhesion) at MuJoCo's states: 1e-9 relative."""
  m, mj, mds, out, frc = setup(variant)
  tethers = pulling = excluded = 0
  for k, md in enumerate(mds):
    d = _at(out, k)
    what = f'{variant} state {k}'
    # contacts: jaxsim's active slots hold MuJoCo's contacts, in MuJoCo's order
    on = np.flatnonzero(d.contact.active)
    assert len(on) == md.ncon == int(d.ncon), what
    con = md.contact
    geom = np.stack([con.geom1, con.geom2], axis=1)
    assert_close(f'{what} geom', d.contact.geom[on], geom, 0, 0)
    assert_close(f'{what} dim', d.contact.dim[on], con.dim, 0, 0)
    assert_close(f'{what} adhesion', d.contact.adhesion[on], con.adhesion, 0, 0)
    assert_close(f'{what} efc_address', d.contact.efc_address[on] >= 0, con.efc_address >= 0, 0, 0)
    for name in ('dist', 'pos', 'frame', 'includemargin', 'friction', 'solref', 'solimp', 'mu'):
      theirs = getattr(con, name).reshape(getattr(d.contact, name)[on].shape)
      assert_close(f'{what} {name}', getattr(d.contact, name)[on], theirs, 1e-9, 1e-12)
    gap = (con.dist >= con.includemargin) & (con.adhesion != 0)
    tethers += int(gap.sum())
    excluded += int(np.sum(con.efc_address < 0))
    # rows: jaxsim's active rows are MuJoCo's, in its order
    act = d.efc_active
    assert int(act.sum()) == md.nefc, what
    assert_close(f'{what} efc_type', d.efc_type[act], md.efc_type, 0, 0)
    for name in ('efc_pos', 'efc_margin', 'efc_D', 'efc_R', 'efc_vel', 'efc_aref'):
      assert_close(f'{what} {name}', getattr(d, name)[act], getattr(md, name), 1e-9, 1e-12)
    theirs = md.efc_J.reshape(md.nefc, mj.nv)
    assert_close(f'{what} efc_J', jaxsim.efc_J_dense(m, d)[act], theirs, 1e-9, 1e-12)
    # passive forces
    assert_close(f'{what} qfrc_adhesion', d.qfrc_adhesion, md.qfrc_adhesion, 1e-9, 1e-12)
    assert_close(f'{what} qfrc_passive', d.qfrc_passive, md.qfrc_passive, 1e-9, 1e-12)
    # solver
    assert_close(f'{what} efc_force', d.efc_force[act], md.efc_force, 1e-9, 1e-12)
    state, theirs = d.efc_state[act], md.efc_state
    if variant == 'elliptic-pgs':
      # PGS leaves sliding forces exactly on the friction cone, where the zone test mu*N >= |T|
      # is decided by the last bit of each side: those contacts' states are not compared
      keep = ~_on_cone(md)
      state, theirs = state[keep], theirs[keep]
    np.testing.assert_array_equal(state, theirs, err_msg=what)
    assert_close(f'{what} qacc', d.qacc, md.qacc, 1e-9, 1e-12)
    if 'noslip' not in variant:
      assert int(d.solver_niter) == md.solver_niter[: max(md.nisland, 1)].max(), what
    # mj_contactForce: the solver's normal force minus the adhesion
    theirs = np.zeros((md.ncon, 6))
    for i in range(md.ncon):
      mujoco.mj_contactForce(mj, md, i, theirs[i])
    assert_close(f'{what} contact force', frc[k][on], theirs, 1e-9, 1e-12)
    tether_rows = con.efc_address[gap]
    pulling += int(np.sum(md.efc_force[tether_rows] > 0))
  # the states exercise tethers, some of them with a force (pushing back against the pull), and a
  # non-adhesive contact in its gap band
  assert tethers >= 4 and pulling >= 1 and excluded >= 1, (tethers, pulling, excluded)
  if variant == 'no-passive':
    assert not np.any(out.qfrc_adhesion)
  else:
    assert np.abs(out.qfrc_adhesion).max() > 1


@pytest.mark.parametrize('variant', ROLLOUT)
def test_step_rollout(variant):
  """50 steps of jit(jaxsim.step) from a kicked state follow mj_step: qacc at every step, the
  final state and qfrc_adhesion to 1e-9 relative (measured: 6e-12 at most, CG)."""
  m, mj, mds = models(variant)
  md = mujoco.MjData(mj)
  mujoco.mj_copyData(md, mj, mds[0])
  d = jx_data(m, md)
  step = jax.jit(jaxsim.step)
  for t in range(STEPS):
    mujoco.mj_step(mj, md)
    d = step(m, d)
    assert_close(f'{variant} qacc at step {t}', d.qacc, md.qacc, 1e-9, 1e-12)
  assert_close(f'{variant} qpos after {STEPS} steps', d.qpos, md.qpos, 1e-9, 1e-12)
  assert_close(f'{variant} qvel after {STEPS} steps', d.qvel, md.qvel, 1e-9, 1e-12)
  assert_close(f'{variant} qfrc_adhesion', d.qfrc_adhesion, md.qfrc_adhesion, 1e-9, 1e-12)


GRAD = """
<mujoco>
  <option timestep="0.005" tolerance="1e-12"/>
  <worldbody>
    <geom type="plane" size="2 2 .1" adhesion="0.5" gap=".01"/>
    <body pos="0 0 0.104"><freejoint/><geom type="sphere" size=".1" adhesion="1" gap=".01"/></body>
    <body pos="0.4 0 0.048"><freejoint/><geom type="box" size=".05 .05 .05" adhesion="2"/></body>
  </worldbody>
</mujoco>
"""


def test_grad_through_step():
  """jax.grad of a 10-step rollout's final height, with respect to the geoms' adhesion and the
  initial velocities, is finite and agrees with central differences (the sphere is tethered in
  its gap band, the box pressed: no contact changes zone within the difference step)."""
  m = jaxsim.load_string(GRAD)
  qvel0 = jnp.zeros(m.nv).at[2].set(0.05).at[8].set(-0.02)

  def loss(adhesion, qvel):
    mm = m.replace(geom_adhesion=adhesion)
    d = jaxsim.make_data(mm).replace(qvel=qvel)

    def body(d, _):
      return jaxsim.step(mm, d), None

    d, _ = jax.lax.scan(body, d, None, length=10)
    return d.qpos[2] + d.qpos[9]

  value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  _, (g_adh, g_vel) = value_and_grad(m.geom_adhesion, qvel0)
  assert np.all(np.isfinite(g_adh)) and np.all(np.isfinite(g_vel))
  assert np.abs(g_adh).max() > 0
  h = 1e-6
  for i in range(m.ngeom):
    e = jnp.zeros(m.ngeom).at[i].set(h)
    hi, _ = value_and_grad(m.geom_adhesion + e, qvel0)
    lo, _ = value_and_grad(m.geom_adhesion - e, qvel0)
    fd = (hi - lo) / (2 * h)
    assert abs(g_adh[i] - fd) <= 1e-5 * max(abs(fd), 1e-3), (i, g_adh[i], fd)

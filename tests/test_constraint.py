"""Constraint rows (jaxsim/constraint.py) against MuJoCo's efc_* arrays, in float64.

Active rows are compared with MuJoCo's rows in MuJoCo's order: equality, friction loss and limit
rows one to one, contact rows contact by contact. Contacts are MuJoCo's own, injected into the
contact slot of their geom pair, so these tests check the rows and not the colliders.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim import mjcf
from jaxsim._src import constraint, kinematics, layout, tendon, types
from jaxsim._src.collision import driver, pairs
from jaxsim._src.enums import ConstraintType
from jaxsim._src.types import Model
from tests.models import dm_control_suite
from tests.oracle import assert_close

DENSE = mujoco.mjtJacobian.mjJAC_DENSE

# --------------------------------------------------------------------------- models

EQUALITY_XML = """
<mujoco>
  <option timestep="0.004"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="a" pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".1 .2 .3"/>
      <site name="sa" pos=".1 .1 .1" euler="30 0 45"/>
      <body name="a2" pos="0 .3 0">
        <joint name="h1" axis="0 1 0"/>
        <geom type="capsule" size=".05 .2"/>
      </body>
    </body>
    <body name="b" pos=".5 0 1">
      <joint type="ball"/>
      <geom size=".1"/>
      <site name="sb" pos="0 .1 0" euler="10 20 30"/>
      <body name="b2" pos="0 0 -.3">
        <joint name="s1" type="slide" axis="1 0 0"/>
        <joint name="h2" axis="0 0 1"/>
        <geom size=".05"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t1"><joint joint="h1" coef="1"/><joint joint="s1" coef="-.5"/></fixed>
    <spatial name="t2"><site site="sa"/><site site="sb"/></spatial>
  </tendon>
  <equality>
    <connect body1="a" body2="b" anchor=".2 0 0"/>
    <connect site1="sa" site2="sb" solref=".05 .7"/>
    <weld body1="a2" body2="b2" torquescale=".5" relpose="0 0 .1 .9 .1 .2 .3"/>
    <weld body1="a" torquescale="2" solref="-100 -10"/>
    <weld site1="sa" site2="sb" solimp=".8 .99 .01 .3 3"/>
    <weld body1="b2" body2="a"/>
    <joint joint1="h1" joint2="h2" polycoef=".1 .5 .2 -.1 .05"/>
    <joint joint1="s1" polycoef=".2 0 0 0 0" solimp=".8 .99 .01 .3 1"/>
    <tendon tendon1="t1" tendon2="t2" polycoef="0 1 .3 0 0" solimp=".9 .9 .01 .5 2"/>
    <tendon tendon1="t2" active="false"/>
    <connect body1="a2" body2="b2" anchor="0 0 .1" active="false"/>
  </equality>
</mujoco>
"""

LIMIT_XML = """
<mujoco>
  <option timestep="0.02"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <site name="s0" pos=".1 0 .1"/>
    <body>
      <joint name="h" range="-30 45" margin=".1" frictionloss=".3" solreflimit=".03 .8"
             solimplimit=".8 .95 .02 .4 1"/>
      <geom type="capsule" size=".05" fromto="0 0 0 0 0 -.3"/>
      <body pos="0 0 -.3">
        <joint name="s" type="slide" axis="0 0 1" range="-.1 .2" margin=".05" frictionloss=".1"
               solreffriction="-50 -5" solimpfriction=".7 .9 .1 .5 2.5"/>
        <geom size=".05"/>
        <body pos="0 .2 0">
          <joint name="b" type="ball" range="0 40" margin=".1" solimplimit=".5 .99 .3 .2 3"/>
          <geom type="box" size=".05 .1 .02"/>
          <site name="s1" pos="0 .1 0"/>
          <body pos=".1 0 0">
            <joint name="narrow" axis="1 0 0" range="0 3" margin=".2" solreflimit="-300 -3"
                   solimplimit=".8 .95 0 .5 2"/>
            <geom size=".03"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sp" range=".2 .5" margin=".02" frictionloss=".2" solreflimit=".01 2">
      <site site="s0"/><site site="s1"/>
    </spatial>
    <fixed name="fx" range="-.2 .3" frictionloss=".5" solreflimit="-200 -20">
      <joint joint="h" coef="1"/><joint joint="s" coef="2"/>
    </fixed>
  </tendon>
</mujoco>
"""

CONTACT_XML = """
<mujoco>
  <option impratio="{impratio}" cone="{cone}" timestep="0.004"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" condim="1"/>
    <body pos="0 0 .1"><freejoint/><geom name="ball" size=".1" condim="3"/></body>
    <body pos=".5 0 .1">
      <freejoint/><geom name="box" type="box" size=".1 .1 .1" condim="4" margin=".02" gap=".01"/>
    </body>
    <body pos="1 0 .1">
      <freejoint/>
      <geom name="cap" type="capsule" size=".05 .1" condim="6" friction=".8 .02 .001"
            solref="-1000 -20"/>
    </body>
    <body pos="1.5 0 .1">
      <freejoint/>
      <geom name="soft" size=".1" condim="6" solimp=".5 .99 .01 .2 4" solmix=".3"
            friction="1.2 .05 .01"/>
    </body>
    <body pos="2 0 .1">
      <freejoint/><geom name="slick" size=".1" condim="1" priority="1"/>
    </body>
    <body pos="2.5 0 .1">
      <freejoint/><geom name="cyl" type="cylinder" size=".1 .05" condim="3"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="soft" geom2="cap" condim="6" friction="1 .7 .01 .002 .001"
          solreffriction=".05 .5" solref=".01 2" margin=".05" gap=".02"/>
    <pair geom1="ball" geom2="floor" condim="4" friction=".9 .9 .03 .001 .001"
          solreffriction="-500 -40"/>
  </contact>
</mujoco>
"""


# model constants of mj_setConst that the rows use; taken from MuJoCo (jaxsim's own set_const
# is compared with MuJoCo in test_mjcf_compile and is slow to run eagerly)
SETCONST = ('body_invweight0', 'dof_invweight0', 'tendon_invweight0', 'tendon_length0', 'eq_data')


FLOOR_XML = """
<mujoco>
  <option cone="{cone}" impratio="1.7"/>
  <default><geom contype="2" conaffinity="1"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" contype="1" conaffinity="2"/>
    <body pos="0 0 .1"><freejoint/><geom size=".1" condim="3"/></body>
    <body pos=".5 0 .1">
      <freejoint/><geom type="box" size=".1 .08 .06" condim="4" margin=".01"/>
    </body>
    <body pos="1 0 .1">
      <freejoint/><geom type="capsule" size=".05 .1" condim="6" friction=".8 .02 .001"/>
    </body>
  </worldbody>
</mujoco>
"""


def _complete(c, mj: mujoco.MjModel) -> Model:
  """A Model with what jaxsim.load may not fill in yet: set_const, contact pairs and slots."""
  # the length-range search's inputs, which build consumes; they are not Model fields
  c.pop('lengthrange_sim'), c.pop('lengthrange_opt')
  for k in SETCONST:
    c[k] = np.array(getattr(mj, k), dtype=np.float64)
  if 'collision_pairs' not in c:
    c['collision_pairs'] = pairs.candidate_pairs(c)
  # static friction-loss masks, so that the Model can be a traced argument of jit
  for kind in ('dof', 'tendon'):
    if f'{kind}_hasfrictionloss' not in c:
      c[f'{kind}_hasfrictionloss'] = (np.asarray(c[f'{kind}_frictionloss']) > 0).astype(np.int8)
  for k in ('nconmax', 'nefcmax', 'layout'):
    c.setdefault(k, None)
  return layout.with_layout(types.make_model(c))


def _with_opt(m: Model, mj: mujoco.MjModel, **kw) -> Model:
  """Sets the same options in both models."""
  for k, v in kw.items():
    setattr(mj.opt, k, v)
  static = types.static_fields(types.Option)
  opt = {k: (int(v) if k in static else jnp.asarray(v)) for k, v in kw.items()}
  return jaxsim.with_options(m, **opt)


def load_xml(xml: str, **opt):
  c = mjcf.compile_string(xml)
  mj = mujoco.MjModel.from_xml_string(xml)
  mj.opt.jacobian = DENSE
  return _with_opt(_complete(c, mj), mj, **opt), mj


def load_path(path: str, **opt):
  c = mjcf.compile_file(path)
  mj = mujoco.MjModel.from_xml_path(path)
  mj.opt.jacobian = DENSE
  return _with_opt(_complete(c, mj), mj, **opt), mj


# --------------------------------------------------------------------------- pipeline


def _slots(m: Model) -> dict[tuple[int, int], tuple[int, int]]:
  """(geom1, geom2) -> (first slot, number of slots) of every candidate pair."""
  out, base = {}, 0
  grps = m.layout.groups
  # Data.contact holds the collider slots in mj_collision's order; a pair's stay together
  where = np.argsort(m.layout.slot_order)
  for grp in grps:
    for g1, g2, n in zip(grp['geom1'], grp['geom2'], grp['nslot'], strict=True):
      out[(int(g1), int(g2))] = (int(where[base]), int(n))
      base += int(n)
  return out


def inject(m: Model, d: types.Data, md: mujoco.MjData) -> tuple[types.Data, np.ndarray]:
  """Data with MuJoCo's contacts in their pairs' slots; returns (data, slot of each contact)."""
  ncon = d.contact.dist.shape[0]
  f = {k: np.array(getattr(d.contact, k)) for k in d.contact.fields()}
  f['active'][:] = False
  f['dist'][:] = 1e10
  slots = _slots(m) if ncon else {}
  used: dict[tuple[int, int], int] = {}
  full = np.full(md.ncon, -1)
  for i in range(md.ncon):
    c = md.contact[i]
    key = (int(c.geom[0]), int(c.geom[1]))
    assert key in slots, f'MuJoCo contact between geoms {key} has no jaxsim slot'
    first, n = slots[key]
    k = used.get(key, 0)
    assert k < n, f'MuJoCo has more contacts for geoms {key} than jaxsim slots ({n})'
    used[key] = k + 1
    full[i] = first + k
  where = full.copy()
  b = m.layout.budget if ncon else None
  if b is not None and b.capped:
    # a capped budget (<size nconmax>) holds each condim class's contacts in collider-slot order
    base = 0
    for _, ids, k in b.classes:
      mine = np.flatnonzero(np.isin(full, ids))
      assert len(mine) <= k, 'more MuJoCo contacts than the budget'
      where[mine[np.argsort(full[mine])]] = base + np.arange(len(mine))
      base += k
  for i in range(md.ncon):
    c = md.contact[i]
    key = (int(c.geom[0]), int(c.geom[1]))
    s = where[i]
    f['dist'][s], f['pos'][s], f['frame'][s] = c.dist, c.pos, c.frame.reshape(3, 3)
    f['friction'][s], f['solref'][s], f['solimp'][s] = c.friction, c.solref, c.solimp
    f['solreffriction'][s], f['includemargin'][s] = c.solreffriction, c.includemargin
    f['dim'][s], f['geom1'][s], f['geom2'][s], f['active'][s] = c.dim, key[0], key[1], True
  contact = d.contact.replace(**{k: jnp.asarray(v) for k, v in f.items()})
  return d.replace(contact=contact), where


def _position(m: Model, d: types.Data) -> types.Data:
  d = kinematics.kinematics(m, d)
  d = kinematics.com_pos(m, d)
  d = tendon.tendon(m, d)
  return kinematics.com_vel(m, d)


def _rows(m: Model, d: types.Data) -> types.Data:
  return constraint.reference(m, constraint.make_constraint(m, d))


# the rows take the Model as a traced argument; O0 keeps XLA's compile time per model down
_O0 = {'xla_backend_optimization_level': 0, 'xla_llvm_disable_expensive_passes': True}
rows = jax.jit(_rows, compiler_options=_O0)
_positions = {}


def position(m: Model, d: types.Data) -> types.Data:
  """Jitted _position; tendon needs the Model closed over (static wrap parameters)."""
  if id(m) not in _positions:
    _positions[id(m)] = (m, jax.jit(lambda d: _position(m, d), compiler_options=_O0))
  return _positions[id(m)][1](d)


def _mujoco_position(m: Model, mj: mujoco.MjModel, md: mujoco.MjData) -> types.Data:
  """Data with MuJoCo's position and velocity stages copied in (what the rows read)."""
  ten_j = np.zeros((mj.ntendon, mj.nv))
  for i in range(mj.ntendon):
    adr, nnz = mj.ten_J_rowadr[i], mj.ten_J_rownnz[i]
    ten_j[i, mj.ten_J_colind[adr : adr + nnz]] = md.ten_J[adr : adr + nnz]
  mat = lambda x: jnp.asarray(x.reshape(-1, 3, 3))  # noqa: E731
  return types.make_data(m).replace(
    qpos=jnp.asarray(md.qpos),
    qvel=jnp.asarray(md.qvel),
    xpos=jnp.asarray(md.xpos),
    xquat=jnp.asarray(md.xquat),
    xmat=mat(md.xmat),
    site_xpos=jnp.asarray(md.site_xpos),
    site_xmat=mat(md.site_xmat),
    subtree_com=jnp.asarray(md.subtree_com),
    cdof=jnp.asarray(md.cdof),
    cvel=jnp.asarray(md.cvel),
    cdof_dot=jnp.asarray(md.cdof_dot),
    ten_length=jnp.asarray(md.ten_length),
    ten_J=jnp.asarray(ten_j),
  )


FIELDS = ('efc_pos', 'efc_margin', 'efc_frictionloss', 'efc_D', 'efc_R', 'efc_vel', 'efc_aref')


def compare(m: Model, mj: mujoco.MjModel, qpos, qvel, what: str = '', mjpos: bool = False) -> int:
  """Compares jaxsim's active rows with MuJoCo's at one state; returns MuJoCo's nefc.

  mjpos: the rows are built on MuJoCo's kinematics instead of jaxsim's (quicker to compile).
  """
  md = mujoco.MjData(mj)
  md.qpos[:], md.qvel[:] = qpos, qvel
  mujoco.mj_forward(mj, md)
  if mjpos:
    d = _mujoco_position(m, mj, md)
  else:
    d = types.make_data(m).replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel))
    d = position(m, d)
  d, where = inject(m, d, md)
  d = rows(m, d)
  act = np.asarray(d.efc_active)
  nefc, nv = md.nefc, mj.nv
  ours = {k: np.asarray(getattr(d, k)) for k in FIELDS + ('efc_KBIP', 'efc_type', 'efc_id')}
  ours['efc_J'] = np.asarray(jaxsim.efc_J_dense(m, d))  # compact rows where the layout has them
  theirs = {k: np.asarray(getattr(md, k)) for k in ours}
  theirs['efc_J'] = theirs['efc_J'].reshape(nefc, nv)
  # every inactive row is zero
  assert not np.any(ours['efc_J'][~act]), what
  assert not np.any(ours['efc_aref'][~act]) and not np.any(ours['efc_D'][~act]), what

  # MuJoCo's rows that jaxsim should have, in order: non-contact rows as they are, contact
  # rows contact by contact at the slot the contact was injected into
  lay = m.layout
  nnc = md.ne + md.nf + md.nl
  idx = list(np.flatnonzero(act & (lay.type < ConstraintType.CONTACT_FRICTIONLESS)))
  assert len(idx) == nnc, f'{what}: {len(idx)} non-contact rows, MuJoCo has {nnc}'
  their_idx = list(range(nnc))
  theirs_id = list(theirs['efc_id'][:nnc])
  for i in range(md.ncon):
    c = md.contact[i]
    s = where[i]
    ca = int(np.asarray(d.contact.efc_address)[s])
    if c.efc_address < 0:
      assert ca == -1, f'{what}: contact {i} is excluded in MuJoCo, not in jaxsim'
      continue
    n = int(lay.contact_nrow[s])
    assert ca == lay.contact_efcadr[s] and act[ca : ca + n].all(), what
    idx += range(ca, ca + n)
    their_idx += range(c.efc_address, c.efc_address + n)
    theirs_id += [s] * n
    assert_close(f'{what} contact {i} mu', np.asarray(d.contact.mu)[s], c.mu)
  assert len(idx) == int(act.sum()) == nefc, f'{what}: {int(act.sum())} rows, MuJoCo {nefc}'
  assert_close(f'{what} efc_type', ours['efc_type'][idx], theirs['efc_type'][their_idx], 0, 0)
  assert_close(f'{what} efc_id', ours['efc_id'][idx], theirs_id, 0, 0)
  for k in FIELDS + ('efc_J', 'efc_KBIP'):
    assert_close(f'{what} {k}', ours[k][idx], theirs[k][their_idx], rtol=1e-8, atol=1e-10)
  return nefc


def _random_free_state(mj: mujoco.MjModel, rng: np.random.Generator):
  """Free bodies on or just above the floor near their home positions, random orientation."""
  qpos, qvel = mj.qpos0.copy(), rng.normal(size=mj.nv)
  for j in range(mj.njnt):
    a = mj.jnt_qposadr[j]
    if mj.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
      qpos[a : a + 2] += rng.normal(size=2) * 0.05
      qpos[a + 2] = rng.uniform(0.0, 0.13)
      q = rng.normal(size=4)
      qpos[a + 3 : a + 7] = q / np.linalg.norm(q)
  return qpos, qvel


def _random_joint_state(mj: mujoco.MjModel, rng: np.random.Generator, scale: float):
  qpos = mj.qpos0.copy()
  for j in range(mj.njnt):
    a, t = mj.jnt_qposadr[j], mj.jnt_type[j]
    if t == mujoco.mjtJoint.mjJNT_FREE:
      qpos[a : a + 3] += rng.normal(size=3) * scale
      q = rng.normal(size=4)
      qpos[a + 3 : a + 7] = q / np.linalg.norm(q)
    elif t == mujoco.mjtJoint.mjJNT_BALL:
      q = np.r_[1.0, rng.normal(size=3) * scale]
      qpos[a : a + 4] = q / np.linalg.norm(q)
    else:
      qpos[a] += rng.normal() * scale
  return qpos, rng.normal(size=mj.nv) * scale


# --------------------------------------------------------------------------- tests


def test_layout_order():
  """Row kinds in MuJoCo's order, two rows per slide/hinge/tendon limit, cone row counts."""
  m, _ = load_xml(LIMIT_XML)
  lay = m.layout
  assert lay.ne == 0 and lay.nf == 4
  assert list(lay.type) == [1, 1, 2, 2] + [3, 3, 3, 3, 3, 3, 3] + [4, 4, 4, 4]
  assert list(lay.id) == [0, 1, 0, 1] + [0, 0, 1, 1, 2, 3, 3] + [0, 0, 1, 1]
  assert m.nefcmax == lay.nefc
  for cone, rows in ((0, {1: 1, 3: 4, 4: 6, 6: 10}), (1, {1: 1, 3: 3, 4: 4, 6: 6})):
    m, _ = load_xml(CONTACT_XML.format(impratio=1, cone=['pyramidal', 'elliptic'][cone]))
    lay = m.layout
    assert set(lay.contact_dim) == {1, 3, 4, 6}
    for dim, n in rows.items():
      assert (lay.contact_nrow[lay.contact_dim == dim] == n).all()
    assert (
      lay.contact_efcadr[0] == 0 and (np.diff(lay.contact_efcadr) == lay.contact_nrow[:-1]).all()
    )


def test_condim_as_driver():
  """The layout's static condim per slot is the one the collision driver mixes."""
  m, _ = load_xml(CONTACT_XML.format(impratio=1, cone='elliptic'))
  dims = []

  def params():
    for g in m.layout.groups:
      dim = driver.contact_params(m, g['geom1'], g['geom2'], g['ipair'])['dim']
      dims.append(np.repeat(np.asarray(dim), g['nslot']))
    return 0

  jax.eval_shape(params)  # traced, not run: dim is static
  order = m.layout.slot_order
  np.testing.assert_array_equal(m.layout.contact_dim, np.concatenate(dims)[order])


@pytest.mark.parametrize('flag', ['CONSTRAINT', 'EQUALITY', 'FRICTIONLOSS', 'LIMIT', 'CONTACT'])
def test_layout_disable(flag):
  bit = int(types.DisableBit[flag])
  for xml in (EQUALITY_XML, LIMIT_XML, CONTACT_XML.format(impratio=1, cone='elliptic')):
    m, _ = load_xml(xml)
    lay = m.layout
    lay2 = jaxsim.with_options(m, disableflags=m.opt.disableflags | bit).layout
    kinds = {
      'EQUALITY': [0],
      'FRICTIONLOSS': [1, 2],
      'LIMIT': [3, 4],
      'CONTACT': [5, 6, 7],
      'CONSTRAINT': list(range(8)),
    }[flag]
    assert list(lay2.type) == [t for t in lay.type if t not in kinds]


def test_equality():
  m, mj = load_xml(EQUALITY_XML)
  rng = np.random.default_rng(0)
  for k in range(6):
    qpos, qvel = _random_joint_state(mj, rng, scale=0.3 if k < 3 else 1.0)
    n = compare(m, mj, qpos, qvel, f'state {k}')
    assert n == 3 + 3 + 6 * 4 + 1 + 1 + 1


def test_equality_refsafe_off():
  m, mj = load_xml(EQUALITY_XML)
  bit = int(types.DisableBit.REFSAFE)
  m, mj = m, mj
  mj.opt.disableflags |= bit
  m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | bit, timestep=0.05))
  mj.opt.timestep = 0.05
  rng = np.random.default_rng(1)
  qpos, qvel = _random_joint_state(mj, rng, scale=0.5)
  compare(m, mj, qpos, qvel, 'refsafe off')


def test_friction_and_limits():
  m, mj = load_xml(LIMIT_XML)
  rng = np.random.default_rng(2)
  counts = set()
  for k in range(12):
    qpos, qvel = _random_joint_state(mj, rng, scale=[0.05, 0.3, 1.0][k % 3])
    md_n = compare(m, mj, qpos, qvel, f'state {k}')
    counts.add(md_n)
  assert len(counts) > 3  # different sets of active limits were exercised


def _compare_contact_states(m, mj, rng, n: int, what: str) -> tuple[set[int], int]:
  """compare() at n random states of CONTACT_XML's bodies (every other one pushing soft and cap,
  an explicit pair, into each other); returns the condims of MuJoCo's rows and how many
  contacts MuJoCo excluded (in the gap)."""
  dims, excluded = set(), 0
  for k in range(n):
    qpos, qvel = _random_free_state(mj, rng)
    if k % 2:
      qpos[21:24] = qpos[14:17] + rng.normal(size=3) * 0.02 + np.array([0.05, 0, 0.1])
    md = mujoco.MjData(mj)
    md.qpos[:] = qpos
    mujoco.mj_forward(mj, md)
    dims |= {int(md.contact[i].dim) for i in range(md.ncon) if md.contact[i].efc_address >= 0}
    excluded += sum(md.contact[i].efc_address < 0 for i in range(md.ncon))
    compare(m, mj, qpos, qvel, f'{what} state {k}')
  return dims, excluded


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
@pytest.mark.parametrize('impratio', [1.0, 2.5])
def test_contacts(cone, impratio):
  m, mj = load_xml(CONTACT_XML.format(impratio=impratio, cone=cone))
  dims, excluded = _compare_contact_states(m, mj, np.random.default_rng(3), 8, cone)
  assert dims == {1, 3, 4, 6}
  assert excluded  # contacts in the gap were seen and dropped


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_contacts_surfacevel(cone):
  """MuJoCo 4's geom surfacevel (a moving floor and a spinning capsule, linear and angular): the
  contact rows' efc_vel and efc_aref carry the relative surface velocity, tangent and torsional
  components only (mj_addSurfaceVel), as MuJoCo's, for pyramidal and elliptic cones."""
  xml = CONTACT_XML.format(impratio=1.5, cone=cone)
  xml = xml.replace('condim="1"/>', 'condim="1" surfacevel=".3 -.2 .4 .1 .2 .7"/>', 1)
  xml = xml.replace('solref="-1000 -20"', 'solref="-1000 -20" surfacevel="0 .4 -.3 .2 0 1.5"')
  m, mj = load_xml(xml)
  assert np.any(np.asarray(m.geom_surfacevel) != 0) and not m.unsupported
  dims, _ = _compare_contact_states(m, mj, np.random.default_rng(6), 4, cone)
  assert {3, 6} <= dims


def test_rows_get_orders_parts_by_row(monkeypatch):
  """_Rows.get places each kind's rows in their slots, however the parts interleave: by
  concatenating runs of rows (all rows set), or by scattering (rows left unset, many runs)."""
  rng = np.random.default_rng(0)
  rows = [np.array([4, 5, 0]), np.array([[1, 2], [6, 7]]), np.array([3])]
  vals = [rng.normal(size=r.shape + (2,)) for r in rows]

  def build(nefc, parts):
    r = constraint.RowBuffer(nefc, 2, jnp.float64)
    for rw, v in parts:
      r.set(rw, j=v)
    return np.asarray(r.get('j'))

  want = np.zeros((8, 2))
  for rw, v in zip(rows, vals, strict=True):
    want[rw.reshape(-1)] = v.reshape(-1, 2)
  parts = list(zip(rows, vals, strict=True))
  np.testing.assert_array_equal(build(8, parts), want)  # runs, concatenated
  np.testing.assert_array_equal(build(9, parts), np.r_[want, np.zeros((1, 2))])  # row 8 unset
  monkeypatch.setattr(constraint.RowBuffer, 'MAX_RUNS', 2)
  np.testing.assert_array_equal(build(8, parts), want)  # too many runs: scattered


def test_surfacevel_static_count():
  """Model.nsurfacevel counts the geoms with a surface velocity (static, as ngravcomp), so that
  contact rows skip mj_addSurfaceVel in models without any, also under a traced Model."""
  plain, _ = load_xml(CONTACT_XML.format(impratio=1.0, cone='pyramidal'))
  xml = CONTACT_XML.format(impratio=1.0, cone='pyramidal')
  xml = xml.replace('condim="1"/>', 'condim="1" surfacevel=".3 -.2 .4 .1 .2 .7"/>', 1)
  moving, _ = load_xml(xml)
  assert (plain.nsurfacevel, moving.nsurfacevel) == (0, 1)
  traced = jax.jit(lambda m: jnp.asarray(constraint.has_surfacevel(m)))
  assert not traced(plain) and traced(moving)


def test_contacts_refsafe_off():
  m, mj = load_xml(CONTACT_XML.format(impratio=1.5, cone='elliptic'), timestep=0.03)
  bit = int(types.DisableBit.REFSAFE)
  mj.opt.disableflags |= bit
  m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | bit))
  rng = np.random.default_rng(4)
  for k in range(3):
    qpos, qvel = _random_free_state(mj, rng)
    compare(m, mj, qpos, qvel, f'state {k}')


@pytest.mark.parametrize('cone', ['pyramidal', 'elliptic'])
def test_contacts_from_collision(cone):
  """Rows of the contacts jaxsim's collision driver finds, matched to MuJoCo's by pair and pos."""
  m, mj = load_xml(FLOOR_XML.format(cone=cone))
  fn = jax.jit(lambda d: _rows(m, driver.collision(m, _position(m, d))), compiler_options=_O0)
  rng = np.random.default_rng(7)
  lay = m.layout
  g1, g2 = lay.contact_geom1, lay.contact_geom2
  for _ in range(3):
    qpos, qvel = _random_free_state(mj, rng)
    md = mujoco.MjData(mj)
    md.qpos[:], md.qvel[:] = qpos, qvel
    mujoco.mj_forward(mj, md)
    d = fn(types.make_data(m).replace(qpos=jnp.asarray(qpos), qvel=jnp.asarray(qvel)))
    assert int(np.asarray(d.efc_active).sum()) == md.nefc
    adr, pos = np.asarray(d.contact.efc_address), np.asarray(d.contact.pos)
    theirs = {f: np.asarray(getattr(md, f)).reshape(md.nefc, -1) for f in FIELDS + ('efc_J',)}
    for i in range(md.ncon):
      c = md.contact[i]
      cand = np.flatnonzero((g1 == c.geom[0]) & (g2 == c.geom[1]) & (adr >= 0))
      s = cand[np.argmin(np.linalg.norm(pos[cand] - c.pos, axis=1))]
      assert np.linalg.norm(pos[s] - c.pos) < 1e-6
      n = lay.contact_nrow[s]
      for f in FIELDS + ('efc_J',):
        x = jaxsim.efc_J_dense(m, d) if f == 'efc_J' else getattr(d, f)
        ours = np.asarray(x).reshape(lay.nefc, -1)[adr[s] : adr[s] + n]
        ref = theirs[f][c.efc_address : c.efc_address + n]
        assert_close(f'{f} contact {i}', ours, ref, rtol=1e-6, atol=1e-9)


SUITE = {p.rsplit('/', 1)[-1][:-4]: p for p in dm_control_suite()}


@pytest.mark.parametrize('name', sorted(SUITE))
def test_suite(name):
  """Every dm_control suite model at states of a MuJoCo rollout with random controls."""
  m, mj = load_path(SUITE[name])
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(5)
  for step in range(300):
    lo, hi = mj.actuator_ctrlrange.T
    md.ctrl[:] = np.where(mj.actuator_ctrllimited, rng.uniform(lo, hi), rng.normal(size=mj.nu))
    mujoco.mj_step(mj, md)
    if step % 100 == 99:
      compare(m, mj, md.qpos.copy(), md.qvel.copy(), f'{name} step {step}', mjpos=True)


@pytest.mark.parametrize('kind', ['equality', 'limit', 'contact'])
def test_jit_grad(kind):
  """Finite, nonzero gradients of sum(efc_aref) w.r.t. qpos through the rows of each kind."""
  xml = {
    'equality': EQUALITY_XML,
    'limit': LIMIT_XML,
    'contact': CONTACT_XML.format(impratio=2, cone='elliptic'),
  }[kind]
  m, mj = load_xml(xml)
  rng = np.random.default_rng(6)
  if kind == 'contact':
    qpos, qvel = _random_free_state(mj, rng)
  else:
    qpos, qvel = _random_joint_state(mj, rng, scale=0.5)
  md = mujoco.MjData(mj)
  md.qpos[:] = qpos
  mujoco.mj_forward(mj, md)
  d0 = types.make_data(m).replace(qvel=jnp.asarray(qvel))
  d0, _ = inject(m, d0, md)

  def f(q, d0):
    d = _rows(m, _position(m, d0.replace(qpos=q)))
    return jnp.sum(d.efc_aref), d.efc_active

  # a batch of two: the state, and qpos0 (rest, where many rows are inactive)
  qposs = jnp.stack([jnp.asarray(qpos), m.qpos0])
  grad = jax.jit(jax.vmap(jax.grad(f, has_aux=True), (0, None)), compiler_options=_O0)
  g, active = grad(qposs, d0)
  assert np.asarray(active[0]).sum() > 3
  assert np.all(np.isfinite(np.asarray(g)))
  assert np.any(np.asarray(g[0]) != 0)


def test_contact_rows_hold_no_slot_sized_constant():
  """The dof masks of the contact slots' bodies are gathered at run time: XLA would otherwise fold
  them into an (nslot, nv) constant in the program (200 MB in a scene of 125 meshes)."""
  bodies = ''.join(
    f'<body pos="{0.2 * i} 0 0.1"><freejoint/><geom type="capsule" size=".05 .1"/></body>'
    for i in range(3)
  )
  m = jaxsim.load_string(
    f'<mujoco><worldbody><geom type="plane" size="2 2 .1"/>{bodies}</worldbody></mujoco>'
  )
  d = jaxsim.make_data(m)
  shape = f'[{d.contact.dist.shape[0]},{m.nv}]'
  hlo = jax.jit(jaxsim.forward).lower(m, d).compile().as_text()
  assert not [line for line in hlo.splitlines() if 'constant(' in line and shape in line]

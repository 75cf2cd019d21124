"""jaxsim.mjx, MJX's API over jaxsim, against MuJoCo (float64): put_model gives the Model jaxsim's
own compiler gives, put_data/get_data round-trip a mujoco.MjData, MJX's own tutorial runs with
`import jaxsim.mjx as mjx`, steps agree with C MuJoCo, and vmap over randomised Models works."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from oracle import assert_close
from test_plugin_pid import XML as PID_XML

import jaxsim
import jaxsim.mjx as mjx
from jaxsim import mjcf
from models import MODELS, bundled, dm_control_suite

FEATURES = os.path.join(MODELS, 'features.xml')

# A free box sliding on a plane (friction and mass matter), a two-link arm with a motor and a
# filtered actuator on a fixed tendon, a mocap body and sensors: small enough to compile fast,
# with contacts, actuation, activation, tendons and mocap state.
SLIDER = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="box" pos="0 0 .1">
      <freejoint/>
      <geom name="box" type="box" size=".1 .1 .1" mass="1"/>
    </body>
    <body name="arm" pos="1 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
      <body pos=".3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping=".1"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
        <site name="tip" pos=".3 0 0"/>
      </body>
    </body>
    <body name="target" mocap="true" pos="0 1 1">
      <geom type="sphere" size=".05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="coupling">
      <joint joint="hinge" coef="1"/>
      <joint joint="elbow" coef="-.5"/>
    </fixed>
  </tendon>
  <actuator>
    <motor joint="hinge" gear="2"/>
    <general tendon="coupling" dyntype="filter" dynprm=".05" gainprm="3"/>
  </actuator>
  <sensor>
    <framepos objtype="site" objname="tip"/>
    <jointpos joint="hinge"/>
    <tendonpos tendon="coupling"/>
  </sensor>
</mujoco>
"""

# MuJoCo stores rgba and height-field data in float32 (mjtNum elsewhere): those compare to
# float32's resolution
FLOAT32_FIELDS = {'geom_rgba', 'site_rgba', 'mat_rgba', 'light_rgba', 'tendon_rgba', 'hfield_data'}
# fields set_const rewrites from the compiler's values (jaxsim.build runs it on both): MuJoCo's
# arrays hold the result (springdamper folded into stiffness/damping, dampratio into biasprm, the
# spring lengths and equality anchors at qpos0); the built Models compare them
SET_CONST_INPUTS = {
  'jnt_springdamper',
  'jnt_stiffness',
  'dof_damping',
  'actuator_biasprm',
  'eq_data',
  'tendon_lengthspring',
}


def _compare(name: str, ours, theirs) -> None:
  """Recursive equality: floats to 1e-12 (float32-stored ones to 1e-7 relative), the rest
  exactly."""
  if isinstance(theirs, dict):
    assert set(ours) == set(theirs), f'{name}: keys {sorted(set(ours) ^ set(theirs))}'
    for k in theirs:
      _compare(f'{name}.{k}', ours[k], theirs[k])
    return
  if isinstance(theirs, (tuple, list)) and theirs and isinstance(theirs[0], str):
    assert tuple(ours) == tuple(theirs), name
    return
  if isinstance(theirs, str) or theirs is None:
    assert ours == theirs, f'{name}: {ours!r} vs {theirs!r}'
    return
  a, b = np.asarray(ours), np.asarray(theirs)
  assert a.shape == b.shape, f'{name}: shape {a.shape} vs {b.shape}'
  if b.dtype.kind == 'f':
    # infinities (mujoco.pid's integral clamp without imax) where both have them
    np.testing.assert_array_equal(np.isposinf(a), np.isposinf(b), err_msg=name)
    a, b = np.where(np.isposinf(b), 0, a), np.where(np.isposinf(b), 0, b)
    rtol = 1e-7 if name.split('.')[-1] in FLOAT32_FIELDS else 1e-12
    assert_close(name, a, b, rtol=rtol, atol=1e-12)
  else:
    np.testing.assert_array_equal(a, b, err_msg=name)


def _compare_meshes(ours, theirs) -> None:
  """Meshes: the same vertices, faces and frames, and the same convex hull (hull points and
  faces; MuJoCo lists hull vertices in qhull's order, jaxsim's compiler by point id)."""
  assert len(ours) == len(theirs)
  for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
    _compare(f'mesh {i} vert', a.vert, b.vert)
    _compare(f'mesh {i} face', a.face, b.face)
    _compare(f'mesh {i} pos', a.pos, b.pos)
    _compare(f'mesh {i} quat', a.quat, b.quat)
    assert (a.graph is None) == (b.graph is None), f'mesh {i}: hull graph'
    if a.graph is not None:
      nv, nf = int(b.graph[0]), int(b.graph[1])
      assert (int(a.graph[0]), int(a.graph[1])) == (nv, nf), f'mesh {i}: hull size'
      hull_a, hull_b = (np.sort(g[2 + nv : 2 + 2 * nv]) for g in (a.graph, b.graph))
      np.testing.assert_array_equal(hull_a, hull_b, err_msg=f'mesh {i} hull')
      np.testing.assert_array_equal(a.graph[-3 * nf :], b.graph[-3 * nf :], f'mesh {i} faces')


def _pid_xml() -> str:
  return PID_XML.format(integrator='Euler')


@pytest.mark.parametrize(
  'path', dm_control_suite() + bundled() + ['pid'], ids=lambda p: os.path.basename(p)
)
def test_model_arrays_are_the_compilers(path):
  """mjx.model_arrays of MuJoCo's MjModel (what put_model builds from) equals jaxsim's compiler
  on the same file, field by field, for every dm_control suite model, the models/ set (touch
  grids, height fields, muscles, keyframes) and test_plugin_pid's mujoco.pid actuators."""
  if path == 'pid':
    ours = mjx.model_arrays(mujoco.MjModel.from_xml_string(_pid_xml()))
    theirs = mjcf.compile_string(_pid_xml())
  else:
    ours = mjx.model_arrays(mujoco.MjModel.from_xml_path(path))
    theirs = mjcf.compile_file(path)
  skip = {'lengthrange_opt', 'lengthrange_sim', 'compiler', 'statistic', 'unsupported'}
  skip |= SET_CONST_INPUTS
  for k, v in theirs.items():
    if k in skip:
      continue
    assert k in ours, f'model_arrays lacks {k}'
    if k == 'mesh_data':
      _compare_meshes(ours[k], v)
    elif k == 'actuator_lengthrange':
      # jaxsim.build's length-range search fills the rows the compiler lists; MuJoCo's MjModel
      # holds its own search's result (within 1e-10 of jaxsim's on models/muscle_arm.xml)
      rows = [i for i in range(len(v)) if i not in {a[0] for a in theirs['lengthrange_sim']}]
      _compare(k, ours[k][rows], v[rows])
    elif k == 'size':
      assert ours[k].get('nconmax', -1) == v.get('nconmax', -1)
    else:
      _compare(k, ours[k], v)


def _model_fields(m: jaxsim.Model) -> dict:
  skip = {'mesh_data', 'layout', 'compiler', 'size', 'statistic', 'unsupported', 'opt'}
  out = {k: getattr(m, k) for k in m.fields() if k not in skip}
  out['opt'] = {k: getattr(m.opt, k) for k in m.opt.fields()}
  return out


@pytest.fixture(scope='module')
def features():
  """features.xml as a mujoco.MjModel and its put_model (built once: put_model, make_data and
  put_data of this MjModel share the build)."""
  mj = mujoco.MjModel.from_xml_path(FEATURES)
  return mj, mjx.put_model(mj)


def test_put_model_is_load(features):
  """put_model(MjModel) is jaxsim.load of the same file: every field of the built Model
  (set_const's constants, contact pairs, Data sizes, options). One model, for the suite's time
  (each build compiles set_const's position stage): the compiled arrays of the whole dm_control
  suite compare above, and build is the same function of them; features.xml has tendons,
  equalities, mocap, dampratio, sensors."""
  ours = features[1]
  theirs = jaxsim.load(FEATURES)
  _compare('Model', _model_fields(ours), _model_fields(theirs))


# an octahedron as an OBJ asset, passed as bytes: MJX code often loads models from strings with
# an assets dict, which no saved XML could refer back to
OCTAHEDRON = b"""v 1 0 0
v -1 0 0
v 0 1 0
v 0 -1 0
v 0 0 1
v 0 0 -1
f 1 3 5
f 3 2 5
f 2 4 5
f 4 1 5
f 3 1 6
f 2 3 6
f 4 2 6
f 1 4 6
"""
MESH_XML = """
<mujoco>
  <asset><mesh name="octa" file="octa.obj" scale=".1 .1 .2"/></asset>
  <worldbody>
    <geom type="plane" size="1 1 .1"/>
    <body pos="0 0 .3"><freejoint/><geom type="mesh" mesh="octa" density="500"/></body>
  </worldbody>
</mujoco>
"""


def test_put_model_of_a_string_with_mesh_assets():
  """A model loaded from a string with a mesh given as bytes: put_model is jaxsim.load_string
  with the same assets, the hull graph included."""
  assets = {'octa.obj': OCTAHEDRON}
  ours = mjx.put_model(mujoco.MjModel.from_xml_string(MESH_XML, assets))
  theirs = jaxsim.load_string(MESH_XML, assets)
  _compare_meshes(ours.mesh_data, theirs.mesh_data)
  assert ours.mesh_data[0].graph is not None
  _compare('Model', _model_fields(ours), _model_fields(theirs))


def test_put_model_takes_the_mjmodels_values():
  """What MJX code sets on the MjModel before put_model (options, masses) is in the Model,
  exactly; an impl other than 'jax' is refused by name."""
  mj = mujoco.MjModel.from_xml_string(SLIDER)
  mj.opt.timestep = 0.00123456789
  mj.opt.iterations = 7
  mj.body_mass[1] = np.pi
  m = mjx.put_model(mj, impl='jax')
  assert float(m.opt.timestep) == 0.00123456789
  assert m.opt.iterations == 7
  assert float(m.body_mass[1]) == np.pi
  assert m.names['body'] == ('world', 'box', 'arm', '', 'target')
  assert mjx.name2id(m, mujoco.mjtObj.mjOBJ_SITE, 'tip') == 0
  assert mjx.id2name(m, mujoco.mjtObj.mjOBJ_BODY, 4) == 'target'
  # built once per MjModel state: again after a change, the same object without one
  assert mjx.put_model(mj) is m
  mj.opt.timestep = 0.002
  assert float(mjx.put_model(mj).opt.timestep) == 0.002
  assert m.impl == mjx.Impl.JAX and m.impl.value == 'jax' and mjx.make_data(m).impl.value == 'jax'
  for impl in ('warp', 'c', 'cpp'):
    with pytest.raises(ValueError, match="impl='jax'"):
      mjx.put_model(mj, impl=impl)
    with pytest.raises(ValueError, match="impl='jax'"):
      mjx.make_data(m, impl=impl)
    with pytest.raises(ValueError, match="impl='jax'"):
      mjx.put_data(mj, mujoco.MjData(mj), impl=impl)


def test_put_model_refuses_what_jaxsim_does_not_simulate():
  xml = """<mujoco><worldbody><flexcomp name="cloth" type="grid" count="3 3 1" spacing=".1 .1 .1"
    dim="2" radius=".01"/></worldbody></mujoco>"""
  with pytest.raises(NotImplementedError, match='flexes'):
    mjx.put_model(mujoco.MjModel.from_xml_string(xml))


def test_tree_replace():
  """MJX's dotted tree_replace on Model and Data; unknown names refused."""
  m = mjx.put_model(mujoco.MjModel.from_xml_string(SLIDER))
  f = jnp.ones_like(m.geom_friction) * 0.3
  m2 = m.tree_replace({'opt.timestep': 0.01, 'geom_friction': f, 'opt.gravity': jnp.zeros(3)})
  assert float(m2.opt.timestep) == 0.01 and float(m.opt.timestep) == 0.005
  np.testing.assert_array_equal(m2.geom_friction, f)
  np.testing.assert_array_equal(m2.opt.gravity, np.zeros(3))
  np.testing.assert_array_equal(m2.body_mass, m.body_mass)
  d = mjx.make_data(m).tree_replace({'qpos': jnp.arange(m.nq, dtype=float)})
  np.testing.assert_array_equal(d.qpos, np.arange(m.nq))
  with pytest.raises(AttributeError, match='nosuch'):
    m.tree_replace({'opt.nosuch': 1})


@pytest.fixture(scope='module')
def slider():
  """SLIDER as a mujoco.MjModel, its jaxsim.Model, and jit-compiled forward and step (shared)."""
  mj = mujoco.MjModel.from_xml_string(SLIDER)
  return mj, mjx.put_model(mj), jax.jit(mjx.forward), jax.jit(mjx.step)


def _stepped_mjdata(mj, seed=0, steps=5):
  """An MjData a few steps into a run with random controls and applied forces, after
  mj_forward: every state field nonzero."""
  rng = np.random.default_rng(seed)
  d = mujoco.MjData(mj)
  d.qpos[:] = mj.key_qpos[0] if mj.nkey else mj.qpos0
  d.qvel[:] = rng.normal(size=mj.nv) * 0.3
  d.ctrl[:] = rng.uniform(-0.5, 0.5, size=mj.nu)
  d.qfrc_applied[:] = rng.normal(size=mj.nv) * 0.1
  d.xfrc_applied[1:] = rng.normal(size=(mj.nbody - 1, 6)) * 0.1
  d.mocap_pos[:] += 0.1
  for _ in range(steps):
    mujoco.mj_step(mj, d)
  mujoco.mj_forward(mj, d)
  return d


def _dense_moment(mj, d) -> np.ndarray:
  out = np.zeros((mj.nu, mj.nv))
  mujoco.mju_sparse2dense(out, d.actuator_moment, d.moment_rownnz, d.moment_rowadr, d.moment_colind)
  return out


STATE = (
  'time qpos qvel act ctrl qacc_warmstart qfrc_applied xfrc_applied mocap_pos mocap_quat'.split()
)
DERIVED = (
  'qacc xpos xquat xmat xipos ximat xanchor xaxis geom_xpos geom_xmat site_xpos site_xmat'
  ' subtree_com cinert cdof cvel cdof_dot ten_length ten_velocity actuator_length'
  ' actuator_velocity actuator_force qfrc_bias qfrc_passive qfrc_actuator qfrc_smooth'
  ' qacc_smooth qfrc_constraint sensordata'
).split()


@pytest.mark.parametrize('which', ['features', 'slider'])
def test_put_data_get_data_round_trip(which, request):
  """get_data(put_data(d)) gives back d's state and derived fields (float64, exactly), and the
  sparse ones (M, qLD, ten_J, actuator_moment) as MuJoCo lays them out."""
  mj = request.getfixturevalue(which)[0]
  d = _stepped_mjdata(mj)
  assert d.act.any() and d.mocap_pos.any() and d.qacc_warmstart.any()
  back = mjx.get_data(mj, mjx.put_data(mj, d))
  for k in STATE + DERIVED:
    np.testing.assert_array_equal(getattr(back, k), getattr(d, k), err_msg=k)
  for k in ('M', 'ten_J'):
    np.testing.assert_array_equal(getattr(back, k), getattr(d, k), err_msg=k)
  # actuator_moment: the same matrix; MuJoCo's sparsity pattern may hold explicit zeros
  np.testing.assert_array_equal(_dense_moment(mj, back), _dense_moment(mj, d))
  # qLD: MuJoCo's factor of the same M (mj_factorM), to round-off
  assert_close('qLD', back.qLD, d.qLD, rtol=1e-12)


def test_forward_on_put_data_is_mj_forward(slider):
  """mjx.forward on put_data(d) agrees with mj_forward on d (float64), and get_data of it holds
  the same derived quantities as MuJoCo's MjData."""
  mj, m, fwd, _ = slider
  d = _stepped_mjdata(mj, seed=1)
  ours = fwd(m, mjx.put_data(mj, d))
  back = mjx.get_data(mj, ours)
  for k in DERIVED:
    rtol = 1e-6 if k in ('qacc', 'qfrc_constraint') else 1e-9  # through the iterative solver
    assert_close(k, getattr(ours, k).reshape(getattr(d, k).shape), getattr(d, k), rtol=rtol)
    assert_close(f'get_data {k}', getattr(back, k), getattr(d, k), rtol=rtol)
  assert_close('M', back.M, d.M, rtol=1e-9)
  assert_close('qLD', back.qLD, d.qLD, rtol=1e-9)


def test_mjx_tutorial_runs_unchanged():
  """MJX's README/tutorial code with `import jaxsim.mjx as mjx`: put_model, put_data, jit step,
  vmap over a batch made with replace, get_data of the batch (a list of MjData)."""
  xml = """
  <mujoco>
    <worldbody>
      <light name="top" pos="0 0 1"/>
      <body name="box_and_sphere" euler="0 0 -30">
        <joint name="swing" type="hinge" axis="1 -1 0" pos="-.2 -.2 -.2"/>
        <geom name="red_box" type="box" size=".2 .2 .2" rgba="1 0 0 1"/>
        <geom name="green_sphere" pos=".2 .2 .2" size=".1" rgba="0 1 0 1"/>
      </body>
    </worldbody>
  </mujoco>
  """
  mj_model = mujoco.MjModel.from_xml_string(xml)
  mj_data = mujoco.MjData(mj_model)
  mjx_model = mjx.put_model(mj_model)
  mjx_data = mjx.put_data(mj_model, mj_data)
  mjx_data = jax.jit(mjx.step)(mjx_model, mjx_data)
  assert isinstance(mjx_data, jaxsim.Data)

  rng = jax.random.PRNGKey(0)
  rng = jax.random.split(rng, 8)
  batch = jax.vmap(lambda rng: mjx_data.replace(qpos=jax.random.uniform(rng, (1,))))(rng)
  jit_step = jax.jit(jax.vmap(mjx.step, in_axes=(None, 0)))
  batch = jit_step(mjx_model, batch)
  batched_mj_data = mjx.get_data(mj_model, batch)
  assert isinstance(batched_mj_data, list) and len(batched_mj_data) == 8

  # each world is C MuJoCo's step from the same state
  qpos0 = jax.vmap(lambda rng: jax.random.uniform(rng, (1,)))(rng)
  for i, d in enumerate(batched_mj_data):
    ref = mujoco.MjData(mj_model)
    mujoco.mj_step(mj_model, ref)
    ref.qpos[:] = qpos0[i]
    mujoco.mj_step(mj_model, ref)
    assert_close(f'world {i} qpos', d.qpos, ref.qpos, rtol=1e-9)
    assert_close(f'world {i} qvel', d.qvel, ref.qvel, rtol=1e-9)
    assert d.time == ref.time

  # make_data from the MjModel itself, as MJX allows
  assert mjx.make_data(mj_model).qpos.shape == (1,)


def test_first_steps_are_c_mujocos(slider):
  """Twenty steps of jaxsim.mjx and of C MuJoCo (float64) from the same MjData: a box sliding on
  a plane (contacts, friction), a damped arm driven by a motor and a filtered tendon actuator,
  sensors."""
  mj, m, _, step = slider
  d = mujoco.MjData(mj)
  d.qvel[0] = 1.0
  d.ctrl[:] = 0.5
  ours = mjx.put_data(mj, d)
  for i in range(20):
    mujoco.mj_step(mj, d)
    ours = step(m, ours)
    for k in ('qpos', 'qvel', 'act', 'sensordata'):
      assert_close(f'step {i} {k}', getattr(ours, k), getattr(d, k), rtol=1e-8)
  assert int(ours.ncon) == d.ncon > 0
  # get_data writes the contacts in MuJoCo's order
  back = mjx.get_data(mj, ours)
  assert back.ncon == d.ncon
  for k in ('dist', 'pos', 'frame', 'friction', 'solref', 'solimp'):
    assert_close(f'contact.{k}', getattr(back.contact, k), getattr(d.contact, k), rtol=1e-8)
  for k in ('geom1', 'geom2', 'dim'):
    np.testing.assert_array_equal(getattr(back.contact, k), getattr(d.contact, k), err_msg=k)


def test_vmap_over_randomised_models():
  """Domain randomisation as Playground does it: a batch of Models made with tree_replace, an
  in_axes tree with 0 at the randomised fields, vmapped step; each world is C MuJoCo's with the
  same friction and mass."""
  mj = mujoco.MjModel.from_xml_string(SLIDER)
  m = mjx.put_model(mj)
  frictions = np.array([0.2, 0.6, 1.0])
  masses = np.array([0.5, 1.0, 3.0])
  geom_friction = jnp.stack([m.geom_friction.at[:, 0].set(f) for f in frictions])
  body_mass = jnp.stack([m.body_mass.at[1].set(b) for b in masses])
  batch = m.tree_replace({'geom_friction': geom_friction, 'body_mass': body_mass})
  in_axes = jax.tree_util.tree_map(lambda x: None, m)
  in_axes = in_axes.tree_replace({'geom_friction': 0, 'body_mass': 0})

  d0 = mjx.make_data(m).replace(qvel=jnp.zeros(m.nv).at[0].set(1.0))
  d = jax.tree_util.tree_map(lambda x: jnp.stack([x] * 3), d0)
  step = jax.jit(jax.vmap(mjx.step, in_axes=(in_axes, 0)))
  for _ in range(10):
    d = step(batch, d)

  for w in range(3):
    mjw = mujoco.MjModel.from_xml_string(SLIDER)
    mjw.geom_friction[:, 0] = frictions[w]
    mjw.body_mass[1] = masses[w]
    ref = mujoco.MjData(mjw)
    # C MuJoCo 4 reads the inertia of diagonal-mass bodies from dof_M0 and subtree masses from
    # body_subtreemass, which a changed body_mass leaves stale until mj_setConst (jaxsim, like
    # MJX, computes them from body_mass); mj_setConst also remakes the constraint weights
    # (body_invweight0, dof_invweight0) and meaninertia, which randomised Models keep from the
    # model they were made from (jaxsim as MJX): those are put back
    keep = [mjw.body_invweight0.copy(), mjw.dof_invweight0.copy(), mjw.stat.meaninertia]
    mujoco.mj_setConst(mjw, ref)
    mjw.body_invweight0[:], mjw.dof_invweight0[:], mjw.stat.meaninertia = keep
    ref.qvel[0] = 1.0
    for _ in range(10):
      mujoco.mj_step(mjw, ref)
    assert_close(f'world {w} qpos', d.qpos[w], ref.qpos, rtol=1e-8)
    assert_close(f'world {w} qvel', d.qvel[w], ref.qvel, rtol=1e-8)
  # the worlds differ: friction slows the box by different amounts
  assert len({round(float(v), 6) for v in d.qvel[:, 0]}) == 3


def test_state_vectors_are_mujocos(features):
  """get_state/set_state/state_size: MuJoCo's mj_getState layout for the full physics state and
  the user inputs, and set_state inverts get_state."""
  mj, m = features
  d = _stepped_mjdata(mj, seed=2, steps=2)
  ours = mjx.put_data(mj, d)
  st = mujoco.mjtState
  user = st.mjSTATE_CTRL | st.mjSTATE_QFRC_APPLIED | st.mjSTATE_XFRC_APPLIED | st.mjSTATE_EQ_ACTIVE
  user |= st.mjSTATE_MOCAP_POS | st.mjSTATE_MOCAP_QUAT | st.mjSTATE_WARMSTART
  for spec in (st.mjSTATE_FULLPHYSICS, user):
    size = mujoco.mj_stateSize(mj, spec)
    assert mjx.state_size(m, spec) == size
    theirs = np.zeros(size)
    mujoco.mj_getState(mj, d, theirs, spec)
    state = mjx.get_state(m, ours, spec)
    np.testing.assert_array_equal(state, theirs)
    back = mjx.set_state(m, mjx.make_data(m), state, spec)
    np.testing.assert_array_equal(mjx.get_state(m, back, spec), theirs)
  np.testing.assert_array_equal(mjx.full_m(m, ours), ours.qM)
  # features.xml declares userdata, which jaxsim's Data does not hold
  with pytest.raises(NotImplementedError, match='userdata'):
    mjx.state_size(m, st.mjSTATE_INTEGRATION)

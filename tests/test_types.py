"""Model and Data are pytrees with static structure and dynamic physical parameters."""

import glob
import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim import mjcf
from jaxsim._src import types
from jaxsim._src.enums import NWARNING
from tests import oracle
from tests.models import REPO

XML = """
<mujoco>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.05" fromto="0 0 0 0 0 -0.5" density="500"/>
      <body name="b" pos="0 0 -0.5">
        <joint name="k" type="ball"/>
        <geom type="box" size="0.1 0.1 0.1" mass="2"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="j" gear="3"/></actuator>
</mujoco>
"""


@pytest.fixture(scope='module')
def model():
  return jaxsim.load_string(XML)


def test_float_fields_are_leaves_and_int_fields_static(model):
  leaves = jax.tree_util.tree_leaves(model)
  assert all(isinstance(x, jax.Array) for x in leaves)
  assert isinstance(model.jnt_type, np.ndarray)
  assert isinstance(model.body_mass, jax.Array)
  assert model.body_mass.dtype == jnp.float64
  assert isinstance(model.opt.iterations, int)
  assert isinstance(model.opt.timestep, jax.Array)


def test_same_file_gives_same_treedef(model):
  other = jaxsim.load_string(XML)
  assert jax.tree_util.tree_structure(model) == jax.tree_util.tree_structure(other)


def test_jit_traces_once_for_new_parameter_values(model):
  traces = []

  @jax.jit
  def total_mass(m):
    traces.append(1)
    return jnp.sum(m.body_mass) * m.nbody

  a = total_mass(model)
  b = total_mass(model.replace(body_mass=model.body_mass * 2))
  assert len(traces) == 1
  np.testing.assert_allclose(b, 2 * a)


def test_vmap_over_batch_of_models(model):
  scales = jnp.linspace(0.5, 2.0, 4)
  batch = jax.vmap(lambda s: model.replace(body_mass=model.body_mass * s))(scales)
  assert batch.body_mass.shape == (4, model.nbody)
  out = jax.vmap(lambda m: jnp.sum(m.body_mass))(batch)
  np.testing.assert_allclose(out, scales * jnp.sum(model.body_mass))


def test_grad_with_respect_to_model_parameters(model):
  g = jax.grad(lambda m: jnp.sum(m.body_mass**2))(model)
  np.testing.assert_allclose(g.body_mass, 2 * model.body_mass)


def test_immutable(model):
  with pytest.raises(AttributeError):
    model.nq = 3
  with pytest.raises(AttributeError):
    model.replace(not_a_field=1)


def test_make_data(model):
  d = jaxsim.make_data(model)
  np.testing.assert_array_equal(d.qpos, model.qpos0)
  assert d.qvel.shape == (model.nv,)
  assert d.ctrl.shape == (model.nu,)
  assert d.qM.shape == (model.nv, model.nv)
  d2 = d.replace(qvel=jnp.ones(model.nv))
  assert float(d2.qvel.sum()) == model.nv
  assert jax.tree_util.tree_structure(d) == jax.tree_util.tree_structure(d2)


_NAMED = """
<mujoco model="{n}">
  <compiler angle="radian"/>
  <worldbody>
    <site name="{n}_anchor" pos="0 0 1"/>
    <body name="{n}_arm" pos="0 0 1"><joint name="{n}_hinge" axis="0 1 0" damping=".1"/>
      <geom name="{n}_rod" type="capsule" fromto="0 0 0 .4 0 0" size=".03"/>
      <site name="{n}_tip" pos=".4 0 0"/>
      <body name="{n}_fore" pos=".4 0 0"><joint name="{n}_elbow" axis="0 1 0"/>
        <geom name="{n}_hand" size=".05" pos=".2 0 0"/></body></body>
  </worldbody>
  <tendon>
    <spatial name="{n}_cord"><site site="{n}_anchor"/><site site="{n}_tip"/></spatial>
  </tendon>
  <actuator><motor name="{n}_m" joint="{n}_elbow" gear="2"/><position tendon="{n}_cord" kp="5"/>
  </actuator>
</mujoco>
"""


def _xla_compiles(caplog, f):
  """(f(), the XLA compiles logged while it ran)."""
  with caplog.at_level('WARNING', logger='jax'), jax.log_compiles():
    caplog.clear()  # f's records only (compile logging may be on for the whole run)
    out = f()
  return out, [r for r in caplog.records if 'XLA compilation' in r.getMessage()]


def test_model_loaded_again_under_other_names_compiles_nothing(caplog):
  """The qpos0 constants' position pass (set_const) does not depend on the MJCF's names, model
  name or notes: a model loaded again under other names reuses its program, and its constants
  are MuJoCo's."""
  jaxsim.load_string(_NAMED.format(n='first'))
  m, compiles = _xla_compiles(caplog, lambda: jaxsim.load_string(_NAMED.format(n='second')))
  assert not compiles
  assert m.model_name == 'second' and m.names['body'][1] == 'second_arm'
  mj = mujoco.MjModel.from_xml_string(_NAMED.format(n='second'))
  for name in (
    'dof_invweight0',
    'body_invweight0',
    'tendon_length0',
    'tendon_invweight0',
    'actuator_length0',
    'actuator_acc0',
    'dof_M0',
  ):
    oracle.assert_close(name, getattr(m, name), getattr(mj, name), rtol=1e-10, atol=1e-12)


def test_make_data_compiles_nothing_outside_a_trace(model, caplog):
  """Outside a trace make_data builds its fields on the host (a program per new shape cost 0.8-1
  s per model) and gives the same Data, field by field, as under jit."""
  jaxsim.make_data(model)  # the process's first make_data may compile its tracer probe
  xml = '<mujoco><worldbody>' + '<body><joint/><geom size=".1"/>' * 7 + '</body>' * 7
  other = jaxsim.load_string(xml + '<site name="s" pos="0 0 1"/></worldbody></mujoco>')
  d, compiles = _xla_compiles(caplog, lambda: jaxsim.make_data(other))
  assert not compiles
  traced = jax.jit(jaxsim.make_data)(other)
  for a, b in zip(jax.tree_util.tree_leaves(d), jax.tree_util.tree_leaves(traced), strict=True):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


def test_name2id(model):
  assert model.name2id('body', 'b') == 2
  assert model.name2id('joint', 'j') == 0
  with pytest.raises(KeyError):
    model.name2id('body', 'nope')


BAD_DATA = [
  (
    'qpos',
    np.zeros(3),
    ValueError,
    r'Data\.qpos has shape \(3,\); this model needs \(5,\) \(nq\)\.(?! Batches)',
  ),
  ('qvel', np.zeros((2, 4)), ValueError, r'Data\.qvel .* \(nv\)\. Batches of worlds go through'),
  ('ctrl', np.zeros(2), ValueError, r'Data\.ctrl has shape \(2,\); this model needs \(1,\)'),
  ('xfrc_applied', np.zeros(6), ValueError, r'Data\.xfrc_applied .* \(nbody, 6\)'),
  ('qpos', [0.0] * 5, TypeError, r'Data\.qpos must be an array'),
  ('qpos', np.array(['a'] * 5), TypeError, r'Data\.qpos must be a numeric array'),
]
ENTRIES = {
  'forward': jaxsim.forward,
  'step': jaxsim.step,
  'inverse': jaxsim.inverse,
  'jit_step': jax.jit(jaxsim.step),
}


@pytest.mark.parametrize(
  'case, entry',
  # jit refuses a list or string argument itself, before the step is traced
  [(c, e) for c in range(len(BAD_DATA)) for e in ENTRIES if not (e == 'jit_step' and c >= 4)],
)
def test_bad_data_named(model, case, entry):
  """A Data that does not fit the model is refused by name at every entry point, not by an
  error from inside the pipeline."""
  field, value, error, match = BAD_DATA[case]
  with pytest.raises(error, match=match):
    ENTRIES[entry](model, jaxsim.make_data(model).replace(**{field: value}))


# ------------------------------------------------------------------- declared fields (contract)

DECLARED = (types.Option, types.Model, types.Contact, types.Data)
MODELS = sorted(
  p
  for p in glob.glob(os.path.join(REPO, 'models', '**', '*.xml'), recursive=True)
  if '<worldbody' in open(p).read()
)


def _sizes(m: jaxsim.Model) -> dict[str, int]:
  """The sizes the declared shapes name: the Model's counts, and those that are not fields (see
  the Model, Contact and Data docstrings)."""
  out = {k: getattr(m, k) for k in types.static_fields(types.Model)}
  out = {k: v for k, v in out.items() if isinstance(v, int)}
  total = lambda k: int(np.sum(np.asarray(getattr(m, k))))  # noqa: E731
  depth = np.asarray(m.body_depth)
  out.update(
    nmeshvert=total('mesh_vertnum'),
    nmeshface=total('mesh_facenum'),
    nmeshpoly=total('mesh_polynum'),
    nmeshpolyvert=total('mesh_polyvertnum'),
    nmeshpolymap=total('mesh_polymapnum'),
    nhfielddata=int(np.sum(np.asarray(m.hfield_nrow) * np.asarray(m.hfield_ncol))),
    nnumericdata=total('numeric_size'),
    ntext=len(m.names.get('text', ())),
    ndepth=int(depth.max()),
    nwidth=int(max(np.bincount(depth)[1:], default=0)),
    ncon=m.nconmax,
    nefc=m.nefcmax,
    nwarning=NWARNING,
    njcol=m.layout.efc_width or m.nv,  # efc_J's columns: compact rows or dense
    njbody=2 if m.layout.efc_width else 0,
    nld=types.qld_width(m),  # qLD's compact rows: the longest ancestor chain on M's sparsity
    nmom=types.moment_cols(m).shape[1],  # actuator_moment's compact rows
  )
  return out


@pytest.mark.parametrize('cls', DECLARED, ids=lambda c: c.__name__)
def test_every_field_is_declared_with_shape_and_doc(cls):
  """Each field of Option, Model, Contact and Data is declared in its class, marked static or
  not, with a one-line doc and, for arrays, a shape in MuJoCo's notation."""
  docs = types.fields_doc(cls)
  assert docs and list(docs) == list(cls._names)
  for name, meta in docs.items():
    assert isinstance(meta['static'], bool), name
    assert meta['doc'] and '\n' not in meta['doc'], f'{cls.__name__}.{name}: no one-line doc'
    if meta['shape']:
      assert meta['shape'].startswith('(') and meta['shape'].endswith(')'), name


@pytest.mark.parametrize('path', MODELS, ids=lambda p: os.path.relpath(p, REPO))
def test_loaded_model_has_exactly_the_declared_fields(path):
  """A loaded model, its Option and its Data have every declared field and no other, each with
  its declared shape, static fields out of the traced leaves; and what the compiler makes,
  set_const and build complete and make_model derives are the declared Model fields exactly."""
  compiled = mjcf.compile_file(path)
  compiled.pop('lengthrange_sim'), compiled.pop('lengthrange_opt')
  made = set(compiled) | set(types.uncomputed(compiled)) | set(types.derived(compiled))
  declared = set(types.Model._names) - {'layout'}
  assert made == declared, f'undeclared: {made - declared}; declared, not made: {declared - made}'
  assert set(compiled['opt']) | {'has_fluid_params'} == set(types.Option._names)

  m = oracle.load(path)
  d = jaxsim.make_data(m)
  sizes = _sizes(m)
  for obj in (m, m.opt, d, d.contact):
    cls = type(obj)
    assert cls in DECLARED
    assert {k for k in vars(obj) if not k.startswith('_')} == set(cls._names), cls.__name__
    for name, meta in types.fields_doc(cls).items():
      v = getattr(obj, name)
      where = f'{cls.__name__}.{name}'
      if meta['static']:
        assert not isinstance(v, jax.Array), where
        if isinstance(v, np.ndarray):
          assert not v.flags.writeable, where
      else:
        assert isinstance(v, (jax.Array, *DECLARED)), where
      if isinstance(v, (np.ndarray, jax.Array)):
        assert meta['shape'], f'{where} is an array: declare its shape'
        assert v.shape == eval(meta['shape'], {}, sizes), where
      elif isinstance(v, tuple) and meta['shape']:
        assert (len(v),) == eval(meta['shape'], {}, sizes), where


def test_make_model_refuses_undeclared_and_missing_fields():
  compiled = mjcf.compile_string(XML)
  compiled.pop('lengthrange_sim'), compiled.pop('lengthrange_opt')
  types.make_model(compiled)
  with pytest.raises(TypeError, match="Model has no field 'body_colour'"):
    types.make_model({**compiled, 'body_colour': np.zeros(3)})
  del compiled['body_mass']
  with pytest.raises(TypeError, match='Model fields missing: body_mass'):
    types.make_model(compiled)
  with pytest.raises(TypeError):
    types.Model(nq=1)

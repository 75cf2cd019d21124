"""Model and Data are pytrees with static structure and dynamic physical parameters."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim

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

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

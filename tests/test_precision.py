"""Every matrix product the engine traces is full float32 (or float64), whatever the default.

JAX lets a GPU compute float32 matmuls in TensorFloat-32 and a TPU in bfloat16 unless told
otherwise; with 10 mantissa bits the solver's gradient and Hessian miss the tolerance its stop test
asks for and worlds run to the iteration cap (the 2026-11-28 H200 run). The CPU computes float32
products exactly whatever the precision says, so the contract is checked where it is decided: the
precision of every dot_general in the traced program, loop bodies, branches and derivatives
included, with the user's default unset and set to bfloat16.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend import core as jex_core

import jaxsim

# a box on a plane, a limited hinge and a tendon: contacts, limits and the Newton solver all trace
XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .2">
      <freejoint/>
      <geom type="box" size=".1 .1 .1"/>
    </body>
    <body pos=".5 0 .5">
      <joint name="h" type="hinge" axis="0 1 0" range="-30 30" limited="true"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    </body>
  </worldbody>
  <tendon><fixed name="t" limited="true" range="-.2 .2"><joint joint="h" coef="1"/></fixed></tendon>
  <actuator><motor joint="h"/></actuator>
</mujoco>
"""


def _jaxprs(params):
  """The jaxprs held in an equation's parameters (loop bodies, branches, custom rules)."""
  for v in params.values():
    for item in v if isinstance(v, (tuple, list)) else (v,):
      if isinstance(item, jex_core.ClosedJaxpr):
        yield item.jaxpr
      elif isinstance(item, jex_core.Jaxpr):
        yield item


def dot_precisions(jaxpr) -> list:
  """The precision of every dot_general in a jaxpr and the jaxprs it holds."""
  out = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == 'dot_general':
      out.append(eqn.params['precision'])
    for sub in _jaxprs(eqn.params):
      out += dot_precisions(sub)
  return out


@pytest.fixture(scope='module')
def model_data():
  m = jaxsim.load_string(XML)
  d = jaxsim.make_data(m)
  return m, d.replace(ctrl=jnp.ones(m.nu, d.qpos.dtype))


def _grad_step(m, d):
  def loss(qvel):
    return jnp.sum(jaxsim.step(m, d.replace(qvel=qvel)).qpos)

  return jax.grad(loss)(d.qvel)


def _rollout(m, d):
  return jaxsim.rollout(m, d, jnp.zeros((3, m.nu), d.qpos.dtype))


CASES = {
  'forward': jaxsim.forward,
  'step': jaxsim.step,
  'step1': jaxsim.step1,
  'step2': jaxsim.step2,
  'inverse': jaxsim.inverse,
  'kinematics': jaxsim.kinematics,
  'rollout': _rollout,
  'grad_step': _grad_step,
}


@pytest.mark.parametrize('user_default', [None, 'bfloat16'])
@pytest.mark.parametrize('name', list(CASES))
def test_every_matmul_is_full_precision(model_data, name, user_default):
  m, d = model_data
  with jax.default_matmul_precision(user_default):
    jaxpr = jax.make_jaxpr(CASES[name])(m, d).jaxpr
  found = dot_precisions(jaxpr)
  if name != 'kinematics':  # kinematics is quaternions and elementwise products only
    assert found, f'{name}: no dot_general traced, so the check would pass vacuously'
  highest = (lax.Precision.HIGHEST, lax.Precision.HIGHEST)
  bad = [p for p in found if p != highest]
  assert not bad, f'{name}: {len(bad)} of {len(found)} products not full precision: {bad[:3]}'


def test_user_default_is_back_after_a_step(model_data):
  """The precision is the engine's own: the user's setting holds again outside it."""
  m, d = model_data
  with jax.default_matmul_precision('bfloat16'):
    jax.make_jaxpr(jaxsim.step)(m, d)
    a = jnp.ones((2, 2), np.float32)
    outside = dot_precisions(jax.make_jaxpr(jnp.matmul)(a, a).jaxpr)
  assert outside == [(lax.Precision.DEFAULT, lax.Precision.DEFAULT)]

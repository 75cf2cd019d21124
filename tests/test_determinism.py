"""Determinism on the CPU: the same inputs give bitwise the same outputs in two fresh processes;
a world's result does not depend on the batch it runs in, up to a bound.

Measured (dm_control hopper, batch 1 and 7 against 64, one forward from the same in-contact
states, random controls): every stage up to the constraint solver was bitwise the same (in XML
below, float64, efc_J and qM differ too, below 1e-16); the solver's outputs (qacc, efc_force,
qfrc_constraint) differ by one ulp (float32: 1.5e-5 of 163 in qacc; float64: 4.3e-14 of 163).
Not the batched while loops (vmap's select keeps a converged world's carry bitwise while others
iterate): XLA compiles each batch shape on its own, and rounds differently per shape. Over 30
float32 steps the ulp grows (contacts are chaotic): qpos 1.2e-7, qvel 3.2e-6 apart.
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# two free bodies that land on a plane and a motor-driven hinge arm that hits them: contacts,
# friction and the solver's while loops, yet quick to compile
XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .12"><freejoint/><geom type="box" size=".1 .08 .06"/></body>
    <body pos=".3 0 .2"><freejoint/><geom type="capsule" size=".05 .1" euler="0 90 0"/></body>
    <body pos="-.3 0 .3">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 .3 0 -.25" size=".04"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="5" ctrlrange="-1 1"/></actuator>
</mujoco>
"""

RUN = """
import hashlib, sys
import numpy as np, jax, jax.numpy as jnp
import jaxsim
sys.path.insert(0, 'tests')
from test_determinism import XML, trajectory
d = trajectory(jaxsim.load_string(XML), 7, 20)
print(hashlib.sha256(b''.join(np.asarray(x).tobytes() for x in d)).hexdigest())
"""


def trajectory(m, batch: int, steps: int, seed: int = 0):
  """(qpos, qvel, qacc, efc_force) of `batch` worlds after `steps` steps of seeded random
  controls from seeded random velocities; world k is the same world at every batch size."""
  d0 = jaxsim.make_data(m)
  rng = np.random.default_rng(seed)
  qvel = jnp.asarray(rng.normal(size=(64, m.nv)) * 0.5, d0.qvel.dtype)[:batch]
  ctrl = jnp.asarray(rng.uniform(-1, 1, size=(64, steps, m.nu)), d0.qvel.dtype)[:batch]
  d = jax.vmap(lambda v: d0.replace(qvel=v))(qvel)
  f = jax.jit(jax.vmap(jaxsim.step, in_axes=(None, 0)))
  for t in range(steps):
    d = f(m, d.replace(ctrl=ctrl[:, t]))
  return d.qpos, d.qvel, d.qacc, d.efc_force


def test_bitwise_run_to_run():
  """Two fresh processes, the same 20 steps of 7 worlds: the same bytes. The processes keep the
  suite's XLA flags (cheap compilation, conftest.py; the default flags compiled for 30 s per
  process): the run-to-run contract holds for any fixed flags."""
  env = dict(os.environ)
  env['PYTHONPATH'] = REPO
  out = [
    subprocess.run(
      [sys.executable, '-c', RUN], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    for _ in range(2)
  ]
  for o in out:
    assert o.returncode == 0, o.stderr
  assert out[0].stdout.split()[-1] == out[1].stdout.split()[-1]


@pytest.fixture(scope='module')
def states():
  """64 in-contact states (MuJoCo's, after 20 steps of random controls from random velocities:
  the states' origin does not matter here, and it saves compiling a batched step), then one
  forward of worlds 0-6 at batch 1, 7 and 64."""
  m = jaxsim.load_string(XML)
  mj = mujoco.MjModel.from_xml_string(XML)
  md = mujoco.MjData(mj)
  rng = np.random.default_rng(0)
  qpos, qvel = np.zeros((64, mj.nq)), np.zeros((64, mj.nv))
  for k in range(64):
    mujoco.mj_resetData(mj, md)
    md.qvel[:] = rng.normal(size=mj.nv) * 0.5
    for _ in range(20):
      md.ctrl[:] = rng.uniform(-1, 1, mj.nu)
      mujoco.mj_step(mj, md)
    qpos[k], qvel[k] = md.qpos, md.qvel
  d0 = jaxsim.make_data(m)
  d = jax.vmap(lambda p, v: d0.replace(qpos=p, qvel=v))(qpos, qvel)
  fwd = jax.jit(jax.vmap(jaxsim.forward, in_axes=(None, 0)))
  return {b: fwd(m, jax.tree_util.tree_map(lambda x, b=b: x[:b], d)) for b in (1, 7, 64)}


@pytest.mark.parametrize('batch', [1, 7])
def test_world_does_not_depend_on_batch(states, batch):
  a, ref = states[batch], jax.tree_util.tree_map(lambda x: x[:batch], states[64])
  assert np.any(np.asarray(ref.efc_force) != 0)  # in contact
  # every stage within a few ulps of the field's largest value (one ulp or less measured;
  # in this model the stages before the solver differ too, below 1e-16 absolute in float64)
  eps = float(jnp.finfo(a.qacc.dtype).eps)
  names = ('xpos', 'qM', 'qfrc_bias', 'efc_J', 'efc_aref', 'qacc', 'efc_force', 'qfrc_constraint')
  for name in names:
    x, y = np.asarray(getattr(a, name)), np.asarray(getattr(ref, name))
    bound = 8 * eps * max(1.0, float(np.abs(y).max()))
    assert np.abs(x - y).max() <= bound, (name, np.abs(x - y).max(), bound)

"""jaxsim.rollout: sharding over 8 devices, batched models, recording, checkpointed gradients."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsim
from tests.models import MODELS

PENDULUM = os.path.join(MODELS, 'pendulum.xml')

# Runs with 8 host devices (the flag must be set before jax starts, hence a subprocess).
SHARDED = textwrap.dedent(
  """
  import json, sys
  import jax, jax.numpy as jnp, numpy as np
  jax.config.update('jax_enable_x64', True)
  import jaxsim

  m = jaxsim.load(sys.argv[1])
  d0 = jaxsim.make_data(m)
  rng = np.random.default_rng(0)
  B, T = 16, 40
  qpos = rng.uniform(-3.0, 3.0, size=(B, 1))
  qvel = rng.normal(size=(B, 1)) * 2
  d = jax.vmap(lambda q, v: d0.replace(qpos=q, qvel=v))(jnp.asarray(qpos), jnp.asarray(qvel))
  ctrls = jnp.asarray(rng.uniform(-1, 1, size=(B, T, 1)))
  rec = ('qpos', 'qvel', 'qacc')
  one, traj1 = jaxsim.rollout(m, d, ctrls, rec, shard=False)
  eight, traj8 = jaxsim.rollout(m, d, ctrls, rec)
  # 12 worlds on 8 devices: padded to 16 (the same compilation), the padding dropped
  d12 = jax.tree_util.tree_map(lambda x: x[:12], d)
  _, traj12 = jaxsim.rollout(m, d12, ctrls[:12], rec)
  out = {'ndev': len(jax.devices())}
  # gradients through the split batch: of a model leaf every device shares (its cotangents
  # summed over the devices) and of the controls each device holds a share of
  def loss(scale, c, shard):
    mm = m.replace(dof_damping=m.dof_damping * scale)
    return jnp.sum(jaxsim.rollout(mm, d, c, ('qpos',), shard=shard)[1]['qpos'] ** 2)
  for name, shard in (('grad_one', False), ('grad_eight', None)):
    gs, gc = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(1.5, ctrls, shard)
    out[name] = [float(gs), np.asarray(gc).ravel().tolist()]
  for name, tr, fin in (('one', traj1, one), ('eight', traj8, eight), ('twelve', traj12, None)):
    out[name] = {k: np.asarray(v).tolist() for k, v in tr.items()}
    if fin is not None:
      out[name + '_devices'] = len(fin.qpos.sharding.device_set)
      out[name + '_shard_rows'] = sorted({s.data.shape[0] for s in fin.qpos.addressable_shards})
  print(json.dumps(out))
  """
)


def test_sharded_over_8_devices_matches_one_device(tmp_path):
  script = tmp_path / 'sharded.py'
  script.write_text(SHARDED)
  env = dict(os.environ)
  env['XLA_FLAGS'] = (
    env.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=8'
  ).strip()
  r = subprocess.run(
    [sys.executable, str(script), PENDULUM],
    capture_output=True,
    text=True,
    timeout=600,
    env=env,
    cwd=os.path.dirname(MODELS),
  )
  assert r.returncode == 0, r.stderr[-3000:]
  out = json.loads(r.stdout.strip().splitlines()[-1])
  assert out['ndev'] == 8
  # one device really held everything, eight really held two worlds each
  assert out['one_devices'] == 1 and out['one_shard_rows'] == [16]
  assert out['eight_devices'] == 8 and out['eight_shard_rows'] == [2]
  one, eight, twelve = out['one'], out['eight'], out['twelve']
  g1, g8 = out['grad_one'], out['grad_eight']
  assert g1[0] != 0 and np.any(np.asarray(g1[1]) != 0)
  np.testing.assert_allclose(g8[0], g1[0], rtol=1e-10, err_msg='d/d(shared damping)')
  np.testing.assert_allclose(g8[1], g1[1], rtol=1e-10, atol=1e-12, err_msg='d/d(ctrls)')
  assert len({round(q, 6) for q in np.asarray(one['qpos'])[:, -1, 0]}) == 16  # 16 distinct worlds
  for k in one:
    a = np.asarray(one[k])
    np.testing.assert_allclose(np.asarray(eight[k]), a, rtol=1e-12, atol=1e-12, err_msg=k)
    np.testing.assert_allclose(np.asarray(twelve[k]), a[:12], rtol=1e-12, atol=1e-12, err_msg=k)


@pytest.fixture(scope='module')
def pendulum():
  m = jaxsim.load(PENDULUM)
  return m, jaxsim.make_data(m)


def _ctrls(b, t, seed=0):
  return jnp.asarray(np.random.default_rng(seed).uniform(-2, 2, size=(b, t, 1)))


def test_batched_models_match_a_loop_over_models(pendulum):
  m, d = pendulum
  d = d.replace(qpos=jnp.asarray([0.7]))
  scale = jnp.asarray([0.5, 1.0, 3.0])
  models = jax.vmap(
    lambda s: m.replace(
      body_mass=m.body_mass * s,
      body_inertia=m.body_inertia * s,
      dof_damping=m.dof_damping * s**2,
      opt=m.opt.replace(gravity=m.opt.gravity * s),
    )
  )(scale)
  ctrls = _ctrls(3, 50)
  final, traj = jaxsim.rollout(models, d, ctrls, ('qpos', 'qvel'))
  assert traj['qpos'].shape == (3, 50, 1) and final.qvel.shape == (3, 1)
  for i in range(3):
    mi = jax.tree_util.tree_map(lambda x, i=i: x[i], models)
    fi, ti = jaxsim.rollout(mi, d, ctrls[i])  # the default record
    assert set(ti) == {'qpos', 'qvel', 'act', 'time'}
    np.testing.assert_allclose(traj['qpos'][i], ti['qpos'], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(final.qvel[i], fi.qvel, rtol=1e-12, atol=1e-14)
  # the models do differ: same controls, different motions
  assert np.abs(traj['qpos'][0] - traj['qpos'][2]).max() > 1e-2

  # only some leaves batched, named by a Model-shaped tree of axes; one control sequence shared
  mass = m.body_mass * scale[:, None]
  partial = m.replace(body_mass=mass)
  axes = jax.tree_util.tree_map(lambda _: None, m).replace(body_mass=0)
  _, tp = jaxsim.rollout(partial, d, ctrls[0], ('qpos',), model_axes=axes)
  for i in range(3):
    _, ti = jaxsim.rollout(m.replace(body_mass=mass[i]), d, ctrls[0])
    np.testing.assert_allclose(tp['qpos'][i], ti['qpos'], rtol=1e-12, atol=1e-14)
  assert np.abs(tp['qpos'][0] - tp['qpos'][2]).max() > 1e-3

  with pytest.raises(ValueError, match='batch sizes differ'):
    jaxsim.rollout(models, d, _ctrls(2, 5))


def test_record_only_chosen_fields(pendulum):
  m, d = pendulum
  db = jax.vmap(lambda q: d.replace(qpos=q))(jnp.asarray([[0.1], [0.2]]))
  ctrls = _ctrls(2, 30)
  _, sub = jaxsim.rollout(m, db, ctrls, ('qvel', 'time'))
  assert set(sub) == {'qvel', 'time'} and sub['qvel'].shape == (2, 30, 1)
  np.testing.assert_allclose(sub['time'][0], 0.002 * np.arange(1, 31), rtol=1e-12)

  final, tip = jaxsim.rollout(m, db, ctrls, lambda d: (d.qpos[0], {'e': d.qvel[0] ** 2}))
  assert tip[0].shape == (2, 30)
  np.testing.assert_array_equal(tip[1]['e'], sub['qvel'][..., 0] ** 2)
  np.testing.assert_array_equal(tip[0][:, -1], final.qpos[:, 0])

  f0, nothing = jaxsim.rollout(m, db, ctrls, None)
  assert nothing == {}
  np.testing.assert_array_equal(f0.qpos, final.qpos)
  assert np.abs(np.diff(tip[0], axis=1)).min() > 0  # it moved


def test_checkpointed_gradient_equals_plain_gradient(pendulum):
  m, d = pendulum
  t = 50  # checkpoint=True: 7 chunks of 7 steps and a tail of 1
  ctrls = _ctrls(1, t)[0]

  def loss(qvel, mass, checkpoint):
    final, traj = jaxsim.rollout(
      m.replace(body_mass=mass), d.replace(qvel=qvel), ctrls, ('qpos',), checkpoint=checkpoint
    )
    return jnp.sum(traj['qpos'] ** 2) + jnp.sum(final.qvel)

  args = (jnp.asarray([1.5]), m.body_mass)
  grads, temp = {}, {}
  for ck in (False, True):
    f = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)
    compiled = f.lower(*args, ck).compile()
    grads[ck] = compiled(*args)
    mem = compiled.memory_analysis()
    temp[ck] = mem.temp_size_in_bytes if mem is not None else None
  assert np.abs(grads[False][0]).max() > 1e-3 and np.abs(grads[False][1]).max() > 1e-3
  for a, b in zip(grads[True], grads[False]):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
  # the checkpointed backward pass keeps far fewer intermediates
  if temp[False] is not None:
    assert temp[True] * 4 < temp[False], temp

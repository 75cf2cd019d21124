"""Soak reliability in its cheap form: no first-call deadlock on the CPU (the full stress test is
benchmarks/stress.py; the long runs are benchmarks/soak.py)."""

import os
import subprocess
import sys

from jaxsim._src import xla

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# jaxlib 0.10.2's deadlock in its smallest form (jaxsim/_src/xla.py): eight independent batched
# Cholesky factorizations (batch * n^3 / 3 far above the 200,000 at which a LAPACK kernel splits
# its batch over XLA's pool) in a loop. Without jaxsim's one-thread pool it hung in 13 of 13 runs
# on a 2-core CPU (PJRT_NPROC unset, jaxsim's XLA flag set), every thread parked; with it, 0 of 10.
DEADLOCK = """
import os
import jaxsim  # first: its settings apply before JAX starts its CPU backend
import jax, jax.numpy as jnp

def body(i, x):
  out = x
  for k in range(8):
    a = jnp.sin(x * (k + 1) + i) * 0.1
    a = a @ jnp.swapaxes(a, -1, -2) + jnp.eye(16) * 10
    out = out + 1e-3 * jnp.linalg.cholesky(a)
  return out

x = jnp.ones((4096, 16, 16)) * jnp.arange(16.0)
jax.jit(lambda x: jax.lax.fori_loop(0, 20, body, x))(x).block_until_ready()
pool = [open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task')]
print(os.environ['PJRT_NPROC'], pool.count('tf_XLAEigen'))
"""


def _python(code: str, timeout: float, **env) -> subprocess.CompletedProcess:
  full = {k: v for k, v in os.environ.items() if k not in ('PJRT_NPROC', 'XLA_FLAGS')}
  full.update(env, PYTHONPATH=REPO)
  return subprocess.run(
    [sys.executable, '-c', code],
    cwd=REPO,
    env=full,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def test_batched_cholesky_does_not_deadlock():
  """Runs in seconds; a deadlock is a TimeoutExpired (generous: the CPU is shared)."""
  out = _python(DEADLOCK, timeout=180)
  assert out.returncode == 0, out.stderr
  # one pool thread, set by `import jaxsim`
  assert out.stdout.split() == [xla.REQUIRED_ENV['PJRT_NPROC'], '1']


def test_user_pool_size_wins():
  code = 'import os, jaxsim; print(os.environ["PJRT_NPROC"])'
  assert _python(code, timeout=120, PJRT_NPROC='3').stdout.strip() == '3'


SPLIT = """
import jax, numpy as np
import jaxsim
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
xml = '''<mujoco><option cone="elliptic"/><worldbody><geom type="plane" size="2 2 .1"/>
  <body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  <body pos=".05 0 .35"><freejoint/><geom type="capsule" size=".05 .1"/></body>
</worldbody></mujoco>'''
m = jaxsim.load_string(xml)
d = jax.vmap(lambda z: jaxsim.make_data(m).replace(qvel=jax.numpy.full(m.nv, z)))(
  jax.numpy.linspace(-0.1, 0.1, 64))
step = jax.vmap(jaxsim.step, in_axes=(None, 0))
mesh = Mesh(np.asarray(jax.devices()), ('b',))
# each program compiled once, ahead of time, for inputs placed where its outputs are (a jit call
# on the first inputs, uncommitted, then on its own committed outputs compiles twice)
d1 = jax.device_put(d, jax.devices()[0])
d2 = jax.device_put(d, NamedSharding(mesh, P('b')))
one_device = jax.jit(step).lower(m, d1).compile()
text = one_device.as_text()
assert 'lapack' not in text.lower(), [ln for ln in text.splitlines() if 'lapack' in ln.lower()][:3]
split = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P('b')), out_specs=P('b'),
                              check_vma=False)).lower(m, d2).compile()
one, two = one_device(m, d1), split(m, d2)
for _ in range(20):
  one, two = one_device(m, one), split(m, two)
np.testing.assert_allclose(np.asarray(two.qpos), np.asarray(one.qpos), atol=1e-5)
print('ok', len(jax.devices()))
"""


def test_step_split_over_cpu_devices_has_no_lapack_call():
  """A default step (Newton, elliptic contacts) compiles without LAPACK custom calls on the
  CPU (the batched kernels that deadlock: xla.REQUIRED_ENV), so a batch split over two CPU
  devices with shard_map runs (it hung with LAPACK's Cholesky) and matches one device."""
  env = dict(os.environ)
  env['XLA_FLAGS'] = (
    env.get('XLA_FLAGS', '') + ' --xla_force_host_platform_device_count=2'
  ).strip()
  env['PYTHONPATH'] = REPO
  r = subprocess.run(
    [sys.executable, '-c', SPLIT], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
  )
  assert r.returncode == 0, r.stderr[-3000:]
  assert r.stdout.split()[-1] == '2'

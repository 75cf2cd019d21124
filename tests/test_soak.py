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

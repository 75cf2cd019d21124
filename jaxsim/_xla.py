"""XLA settings jaxsim needs, applied on import before JAX creates its CPU backend."""

from __future__ import annotations

import os


def cpu_workaround() -> None:
  """Turns off XLA CPU's concurrency-optimised scheduler unless the user set it.

  With it (jax 0.10.2), a batched program holding while loops (the solver, the joint scan) has
  been seen to deadlock at random on its first call, every thread parked and no CPU used (3 of 4
  runs of a vmapped chain10 step at batch 1024); with it off, none in 12. It only takes effect
  before JAX creates its CPU backend (importing jaxsim before the first computation).
  """
  flag = 'xla_cpu_enable_concurrency_optimized_scheduler'
  flags = os.environ.get('XLA_FLAGS', '')
  if flag not in flags:
    os.environ['XLA_FLAGS'] = f'{flags} --{flag}=false'.strip()


cpu_workaround()

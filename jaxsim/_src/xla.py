"""XLA settings jaxsim needs, applied on import before JAX creates its CPU backend."""

from __future__ import annotations

import os

# Each is applied only when XLA_FLAGS does not name it already, so a user's choice wins. They only
# take effect before JAX creates its CPU backend (importing jaxsim before the first computation).
CPU_FLAGS = {
  # With it (jax 0.10.2), a batched program holding while loops (the solver, the joint scan) has
  # been seen to deadlock at random on its first call, every thread parked and no CPU used (3 of 4
  # runs of a vmapped chain10 step at batch 1024); with it off, none in 12.
  'xla_cpu_enable_concurrency_optimized_scheduler': 'false',
  # XLA CPU's MLIR fusion emitters spend most of a step's compile time on its hundreds of small
  # fused kernels; the classic LLVM emitters build the same kernels 2-3x faster (dm_control
  # cheetah's batched step 12.2 -> 4.5 s on a 2-core CPU) and run them as fast.
  'xla_cpu_use_fusion_emitters': 'false',
  # MuJoCo's release build targets AVX without FMA; on CPUs that have FMA, LLVM contracts a * b - c
  # * d into one fused multiply-add, so a quantity compared against a near tie rounds the other
  # way and a discrete choice flips (a cylinder standing on a box: its 16-gon cap's maximum-area
  # quadrilateral, humanoid-bench's bookshelf, contacts 4 cm apart). Capping the instruction set
  # at AVX rounds as MuJoCo does; steps/s unchanged within noise (cheetah, humanoid at batch 64).
  'xla_cpu_max_isa': 'AVX',
}


# XLA_FLAGS as the process had them before jaxsim's first import added CPU_FLAGS.
USER_FLAGS = os.environ.get('XLA_FLAGS', '')


def cpu_flags() -> None:
  """Adds CPU_FLAGS to XLA_FLAGS, each unless the user set it."""
  flags = os.environ.get('XLA_FLAGS', '')
  for name, value in CPU_FLAGS.items():
    if name not in flags:
      flags = f'{flags} --{name}={value}'.strip()
  os.environ['XLA_FLAGS'] = flags


cpu_flags()

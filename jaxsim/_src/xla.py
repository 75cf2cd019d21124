"""XLA CPU settings: the ones jaxsim needs (applied on import), and the ones a user may opt into.

XLA reads XLA_FLAGS and PJRT_NPROC once, when JAX creates its CPU backend (at the first
computation). Each setting here is added only when the user has not made it already, so a user's
choice wins.
"""

from __future__ import annotations

import os
import warnings

from jax._src import xla_bridge  # JAX's own record of whether its backends exist

# Needed for jaxsim to run at all, so applied on `import jaxsim`. With it on (jax 0.10.2), a
# batched program holding while loops (the solver, the joint scan) has been seen to deadlock at
# random on its first call, every thread parked and no CPU used (3 of 4 runs of a vmapped chain10
# step at batch 1024); with it off, none in 12. It lowers the odds of the deadlock REQUIRED_ENV
# removes; it does not remove it (see there).
REQUIRED_FLAGS = {'xla_cpu_enable_concurrency_optimized_scheduler': 'false'}

# The deadlock's cause (jaxlib 0.10.2, found with gdb on a hung jit(vmap(forward)) of the
# dm_control humanoid at batch 1024): jaxlib's LAPACK kernels (potrf, trsm, getrf: every
# jnp.linalg.cholesky / cho_solve / solve under vmap) split a batch whose cost passes a threshold
# (batch * n^3 / 3 >= 200,000: a 27-dof humanoid from batch 31) into chunks, schedule them on
# XLA's intra-op thread pool and block in absl::BlockingCounter::Wait until they ran. The thunk
# executor itself runs on that pool, so when as many LAPACK calls as the pool has threads run at
# once (two independent Cholesky factorizations on a 2-core CPU), every pool thread waits for
# chunks that no thread is left to run: all threads parked, 0% CPU, forever. A pool of one
# thread takes the kernels' serial path (they parallelise only with 2 or more threads), so the
# deadlock cannot occur whatever the program; the cost is XLA's intra-op parallelism on one
# computation (batched worlds still vectorise; within noise on a 2-core CPU). XLA sizes the pool
# from PJRT_NPROC (then NPROC, then the CPU count). A user who sets PJRT_NPROC keeps it, and with
# it the risk on jaxlib 0.10.2.
REQUIRED_ENV = {'PJRT_NPROC': '1'}

# Opt-in (`jaxsim.configure_cpu(fast_compile=True)`; the CLI and the benchmarks use it): XLA CPU's
# MLIR fusion emitters spend most of a step's compile time on its hundreds of small fused kernels;
# the classic LLVM emitters build the same kernels 2-3x faster (dm_control cheetah's batched step
# 12.2 -> 4.5 s on a 2-core CPU) and run them as fast.
FAST_COMPILE_FLAGS = {'xla_cpu_use_fusion_emitters': 'false'}

# Opt-in (`jaxsim.configure_cpu(mujoco_rounding=True)`; the tests use it): MuJoCo's release build
# targets AVX without FMA; on CPUs that have FMA, LLVM contracts a * b - c * d into one fused
# multiply-add, so a quantity compared against a near tie rounds the other way and a discrete
# choice flips (a cylinder standing on a box: its 16-gon cap's maximum-area quadrilateral,
# humanoid-bench's bookshelf, contacts 4 cm apart). Capping the instruction set at AVX rounds as
# MuJoCo does, at a cost of 1.15-1.4x in speed on AVX-512 CPUs: never a default.
MUJOCO_ROUNDING_FLAGS = {'xla_cpu_max_isa': 'AVX'}

# Opt-in (`jaxsim.configure_cpu(devices=N)`; `jaxsim bench` for jaxsim's workers): the CPU as N XLA
# devices, so that a batch split over them with shard_map runs on N cores
DEVICES_FLAG = 'xla_force_host_platform_device_count'

# what the benchmarks give every JAX engine (jaxsim and MJX alike)
CPU_FLAGS = {**REQUIRED_FLAGS, **FAST_COMPILE_FLAGS}


def add_flags(flags: dict[str, str]) -> bool:
  """Adds `flags` to XLA_FLAGS, each unless already named there.

  Returns:
    False, with a warning, when JAX's CPU backend already exists, so that flags not already in
    force cannot apply any more in this process; True otherwise.
  """
  current = os.environ.get('XLA_FLAGS', '')
  missing = {k: v for k, v in flags.items() if k not in current}
  if not missing:
    return True
  os.environ['XLA_FLAGS'] = ' '.join([current] + [f'--{k}={v}' for k, v in missing.items()]).strip()
  started = getattr(xla_bridge, 'backends_are_initialized', lambda: False)
  if started():
    names = ', '.join(missing)
    warnings.warn(
      f'jaxsim: JAX already started its backends, so the XLA flags {names} do not apply in this '
      'process; import jaxsim (or call jaxsim.configure_cpu) before the first JAX computation',
      stacklevel=3,
    )
    return False
  return True


def add_env(env: dict[str, str]) -> bool:
  """Sets each environment variable in `env` the backend reads at start, unless already set.

  Returns:
    False, with a warning, when JAX's CPU backend already exists and a variable was not already
    in force; True otherwise.
  """
  missing = {k: v for k, v in env.items() if k not in os.environ}
  if not missing:
    return True
  os.environ.update(missing)
  started = getattr(xla_bridge, 'backends_are_initialized', lambda: False)
  if started():
    names = ', '.join(f'{k}={v}' for k, v in missing.items())
    warnings.warn(
      f'jaxsim: JAX already started its backends, so {names} does not apply in this process (a '
      'batched program holding linear algebra may deadlock on the CPU: jaxsim/_src/xla.py); '
      'import jaxsim before the first JAX computation',
      stacklevel=3,
    )
    return False
  return True


def configure_cpu(
  fast_compile: bool = True, mujoco_rounding: bool = False, devices: int | None = None
) -> bool:
  """Opt-in XLA CPU settings; call before the first JAX computation.

  Arguments:
    fast_compile: XLA's classic LLVM emitters instead of the MLIR fusion emitters: 2-3x faster
      compilation of a step, the same run time.
    mujoco_rounding: cap the instruction set at AVX (no FMA contraction), so that floating-point
      results round as MuJoCo's release build does and near-ties break the same way; costs
      1.15-1.4x in speed on AVX-512 CPUs. For comparisons with MuJoCo, not for training.
    devices: split the CPU into this many XLA devices (`xla_force_host_platform_device_count`;
      a multiple of os.cpu_count()). XLA runs one computation on about one core; a batch split
      over the devices with `jax.shard_map` runs on all of them (dm_control humanoid at batch
      1024 on 2 cores: 313 -> 174 us per world-step on 2 devices; about 64 worlds per device,
      16 devices, ran 1.25x faster again than 4: docs/speed.md). No jaxsim step calls LAPACK on
      the CPU, whose batched kernels deadlock across devices (docs/soak.md).
  Returns:
    whether the flags apply (False, with a warning, once JAX's backends exist).
  """
  flags = {}
  if fast_compile:
    flags.update(FAST_COMPILE_FLAGS)
  if mujoco_rounding:
    flags.update(MUJOCO_ROUNDING_FLAGS)
  if devices is not None:
    flags[DEVICES_FLAG] = str(int(devices))
  return add_flags(flags)


# XLA_FLAGS as the process had them before jaxsim's first import added REQUIRED_FLAGS
USER_FLAGS = os.environ.get('XLA_FLAGS', '')
# the environment variables of REQUIRED_ENV as the process had them (None: unset) before jaxsim
USER_ENV = {k: os.environ.get(k) for k in REQUIRED_ENV}
add_flags(REQUIRED_FLAGS)
add_env(REQUIRED_ENV)

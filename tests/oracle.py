"""Shared helpers for comparing jaxsim with MuJoCo (the oracle) at random states, in float64."""

from __future__ import annotations

import functools
import re

import jax
import mujoco
import numpy as np

import jaxsim

# The suite compiles with XLA's backend optimisation off (conftest.py): most tests run a program
# once or twice, so compiling is most of their time. A test that runs one program over many
# poses or steps jits it with jit_run instead: level 1 compiles ~1.2x slower and runs 2-6x faster
# (the convex colliders on 1,024 poses: 11 -> 13 s compile, 7.8 -> 1.3 s run).
jit_run = functools.partial(jax.jit, compiler_options={'xla_backend_optimization_level': 1})

# mjDSBL_CONSTRAINT: the smooth-dynamics comparisons run without constraints in both engines.
NO_CONSTRAINT = int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)


@functools.cache
def load(path: str) -> jaxsim.Model:
  """jaxsim.load, once per file and test process: Models are immutable, and loading (which
  compiles mj_setConst's position stage) is a large part of the suite's time."""
  return jaxsim.load(path)


def load_pair(path: str, disable: int = NO_CONSTRAINT, enable: int = 0):
  """(jaxsim Model, mujoco MjModel) from one file, with the same flags added in both."""
  mj = mujoco.MjModel.from_xml_path(path)
  mj.opt.disableflags |= disable
  mj.opt.enableflags |= enable
  m = load(path)
  flags = {'disableflags': m.opt.disableflags | disable, 'enableflags': m.opt.enableflags | enable}
  return jaxsim.with_options(m, **flags), mj


def random_state(mj: mujoco.MjModel, rng: np.random.Generator, scale: float = 0.5):
  """A random (qpos, qvel, act, ctrl): random unit quaternions for free and ball joints."""
  qpos = mj.qpos0.copy()
  for j in range(mj.njnt):
    a, t = mj.jnt_qposadr[j], mj.jnt_type[j]
    if t == mujoco.mjtJoint.mjJNT_FREE:
      qpos[a : a + 3] += rng.normal(size=3) * scale
      q = rng.normal(size=4)
      qpos[a + 3 : a + 7] = q / np.linalg.norm(q)
    elif t == mujoco.mjtJoint.mjJNT_BALL:
      q = rng.normal(size=4)
      qpos[a : a + 4] = q / np.linalg.norm(q)
    else:
      qpos[a] += rng.normal() * scale
  qvel = rng.normal(size=mj.nv) * scale * 2
  act = rng.uniform(0.05, 0.95, size=mj.na)
  lo, hi = mj.actuator_ctrlrange[:, 0], mj.actuator_ctrlrange[:, 1]
  limited = mj.actuator_ctrllimited.astype(bool) & (hi > lo)
  # beyond the range now and then, so that clamping is exercised
  ctrl = np.where(
    limited, rng.uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)), rng.normal(size=mj.nu)
  )
  return qpos, qvel, act, ctrl


def mj_data(mj: mujoco.MjModel, qpos, qvel, act, ctrl, forward: bool = True) -> mujoco.MjData:
  """MjData at the given state, after mj_forward."""
  md = mujoco.MjData(mj)
  md.qpos[:], md.qvel[:], md.act[:], md.ctrl[:] = qpos, qvel, act, ctrl
  if forward:
    mujoco.mj_forward(mj, md)
  return md


def jx_data(m: jaxsim.Model, qpos, qvel, act, ctrl) -> jaxsim.Data:
  """jaxsim Data at the given state (not yet forwarded)."""
  return jaxsim.make_data(m).replace(qpos=qpos, qvel=qvel, act=act, ctrl=ctrl)


def full_m(mj: mujoco.MjModel, md: mujoco.MjData) -> np.ndarray:
  """MuJoCo's dense joint-space inertia (nv, nv)."""
  out = np.zeros((mj.nv, mj.nv))
  mujoco.mj_fullM(mj, md, out)
  return out


def qld_rows(mj: mujoco.MjModel, md: mujoco.MjData) -> np.ndarray:
  """MuJoCo's qLD as jaxsim's compact rows (nv, max M_rownnz): row i's entries on M's sparsity
  (ancestor columns ascending, then D[i]), left-aligned, zero after."""
  out = np.zeros((mj.nv, int(mj.M_rownnz.max(initial=0))))
  for i in range(mj.nv):
    a, n = mj.M_rowadr[i], mj.M_rownnz[i]
    out[i, :n] = md.qLD[a : a + n]
  return out


def assert_close(name: str, ours, theirs, rtol: float = 1e-8, atol: float = 1e-12):
  """|ours - theirs| <= rtol * max(|theirs|, max|theirs|) + atol, elementwise.

  Relative to the larger of the element and the array's largest magnitude, so entries that are
  round-off residues of a cancellation (e.g. 1e-17 where the array is O(1)) are not held to a
  relative bound they cannot meet, while every entry is held to rtol of the array's scale.
  """
  ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
  assert ours.shape == theirs.shape, f'{name}: shape {ours.shape} vs {theirs.shape}'
  if ours.size == 0:
    return
  assert np.all(np.isfinite(ours)), f'{name}: non-finite values {ours}'
  scale = np.maximum(np.abs(theirs), np.abs(theirs).max())
  bad = np.abs(ours - theirs) > rtol * scale + atol
  if bad.any():
    idx = tuple(np.argwhere(bad)[0])
    raise AssertionError(
      f'{name}{list(idx)}: jaxsim {ours[idx]!r} vs mujoco {theirs[idx]!r} '
      f'(max abs err {np.abs(ours - theirs).max():.3g})'
    )


def lapack_calls(compiled_text: str) -> list[str]:
  """The LAPACK custom calls of a compiled program's HLO text (`.compile().as_text()`): jaxsim
  keeps them out of the CPU step, since batched LAPACK kernels can deadlock XLA's CPU pool
  (jaxsim/_src/xla.py, docs/soak.md)."""
  calls = re.findall(r'custom_call_target="([^"]+)"', compiled_text)
  return [c for c in calls if 'lapack' in c.lower()]

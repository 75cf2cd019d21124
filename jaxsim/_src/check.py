"""Divergence checks: bad qpos, qvel, qacc and ctrl are counted in Data.warning, and a world with a
bad state is reset (mj_checkPos, mj_checkVel, mj_checkAcc, the control check of mj_fwdActuation).

A value is bad when it is NaN or its magnitude exceeds MAXVAL (mju_isBad). The checks are
branch-free: under `jax.vmap` each world is checked and reset on its own, with `jnp.where` over
the whole Data. Data.warning holds MuJoCo's warning counters (mjtWarning order, NWARNING).

Reset follows mj_resetData unless the autoreset disable flag is set: the Data of `make_data`
(qpos0, zero velocity, activation and controls, time 0), all warning counters cleared and then the
triggering warning set to 1, as mujoco 4.0.0 leaves them. Without autoreset the counter is
incremented and the state is kept.

One deviation: when qacc is bad, MuJoCo resets and runs mj_forward again before integrating, so
its step ends one timestep after the reset state. Under vmap a conditional second forward pass
would cost a full forward for every world on every step, so `step` here returns the reset state
itself (RESET_FIELDS: time 0, qpos0, zero velocity, controls, applied forces and qacc, the
warning counters); the next step starts from it as MuJoCo's did. The derived quantities (frames,
qM, contacts, constraint rows, sensordata, ...) keep the values of the step that diverged: every
step recomputes them from the state, and selecting all of them per world would store a second
copy of the whole Data (at 2 humanoids, 57 of 193 KiB of a step's temporaries per world).
After an acceleration reset a world therefore runs one step behind MuJoCo's.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import actuation
from jaxsim._src.enums import MAXVAL, DisableBit, WarningType
from jaxsim._src.types import Data, Model, make_data


def is_bad(x: jax.Array) -> jax.Array:
  """True where x is NaN, infinite or beyond +-MAXVAL (mju_isBad), elementwise."""
  return ~(jnp.abs(x) <= MAXVAL)


def reset_data(m: Model, d: Data) -> Data:
  """The Data of make_data with d's contact slots and constraint rows (mj_resetData).

  Depends on d only through its shapes; warning counters are zero.
  """
  ncon = d.contact.dist.shape[-1]
  nefc = d.efc_J.shape[-2]
  return make_data(m, ncon=ncon, nefc=nefc)


# the fields an acceleration reset writes: mj_resetData's state (mjSTATE_FULLPHYSICS and the user
# inputs) and the counters; the rest of Data is derived from them by the next step
RESET_FIELDS = (
  'time',
  'qpos',
  'qvel',
  'act',
  'ctrl',
  'qacc',
  'qacc_warmstart',
  'qfrc_applied',
  'xfrc_applied',
  'mocap_pos',
  'mocap_quat',
  'eq_active',
  'warning',
)


def _warn(d: Data, kind: int, bad: jax.Array) -> jax.Array:
  """d.warning with counter `kind` incremented where bad."""
  return d.warning.at[kind].add(bad.astype(d.warning.dtype))


def _reset_where(
  m: Model, d: Data, bad: jax.Array, kind: int, fields: tuple[str, ...] | None = None
) -> Data:
  """d reset where bad (with the warning counters mujoco leaves), else d with the count added;
  with `fields`, only those fields are reset (the others keep d's values), else every field
  (Data's are all dynamic; `contact` is a subtree)."""
  if m.opt.disableflags & DisableBit.AUTORESET:
    return d.replace(warning=_warn(d, kind, bad))
  r = reset_data(m, d)
  r = r.replace(warning=jnp.zeros_like(d.warning).at[kind].set(1))
  names = fields if fields is not None else tuple(f.name for f in dataclasses.fields(d))

  def pick(x, y):
    return jnp.where(bad, jnp.asarray(x, dtype=jnp.result_type(y)), y)

  return d.replace(**{k: jax.tree_util.tree_map(pick, getattr(r, k), getattr(d, k)) for k in names})


def check_pos(m: Model, d: Data) -> Data:
  """Counts and, unless autoreset is disabled, resets a bad qpos (mj_checkPos)."""
  if not m.nq:
    return d
  return _reset_where(m, d, jnp.any(is_bad(d.qpos)), WarningType.BADQPOS)


def check_vel(m: Model, d: Data) -> Data:
  """Counts and, unless autoreset is disabled, resets a bad qvel (mj_checkVel)."""
  if not m.nv:
    return d
  return _reset_where(m, d, jnp.any(is_bad(d.qvel)), WarningType.BADQVEL)


def check_acc(m: Model, d: Data, qacc: jax.Array | None = None) -> Data:
  """Counts and, unless autoreset is disabled, resets a bad qacc (mj_checkAcc).

  `qacc` (nv,) is the acceleration checked, d.qacc by default; `step` passes forward's qacc and
  the integrated Data, whose state (RESET_FIELDS) is replaced by the reset state (no second
  forward pass: see the module docstring).
  """
  if not m.nv:
    return d
  qacc = d.qacc if qacc is None else qacc
  return _reset_where(m, d, jnp.any(is_bad(qacc)), WarningType.BADQACC, RESET_FIELDS)


def check_ctrl(m: Model, d: Data) -> Data:
  """Counts a bad control (after clamping) in warning, as mj_fwdActuation does.

  The actuation stage itself zeroes all controls when one is bad; this only counts it.
  """
  if not m.nu or m.opt.disableflags & DisableBit.ACTUATION:
    return d
  ctrl = d.ctrl
  if not m.opt.disableflags & DisableBit.CLAMPCTRL:
    ctrl = actuation.clamp_range(ctrl, m.actuator_ctrllimited, m.actuator_ctrlrange)
  return d.replace(warning=_warn(d, WarningType.BADCTRL, jnp.any(is_bad(ctrl))))


# what each counter means to a user, and what to do about it
_BAD = f'NaN or beyond {MAXVAL:g}'
WARNING_TEXT = {
  WarningType.INERTIA: 'the mass matrix was too close to singular',
  WarningType.CONTACTFULL: (
    'the contact budget overflowed, so contacts were dropped (the nearest were kept); raise it '
    'with jaxsim.with_ncon_max or <size nconmax>'
  ),
  WarningType.CNSTRFULL: 'the constraint row budget overflowed, so rows were dropped',
  WarningType.BADQPOS: f'qpos was {_BAD}, so the world was reset',
  WarningType.BADQVEL: f'qvel was {_BAD}, so the world was reset',
  WarningType.BADQACC: f'qacc was {_BAD}, so the world was reset',
  WarningType.BADCTRL: f'a control was {_BAD}, so the controls were zeroed',
}


def describe_warnings(warning) -> list[str]:
  """Readable messages for Data.warning counters (mjtWarning order), empty when none is set.

  Arguments:
    warning: a Data, or its `warning` array: (NWARNING,) for one world or (..., NWARNING) for a
      batch (the counts are then summed and the worlds that saw each warning counted).
  Returns:
    one line per warning that occurred: its MuJoCo name, how often, and what it means.
  """
  w = np.asarray(warning.warning if isinstance(warning, Data) else warning)
  if w.shape[-1:] != (len(WarningType),):
    raise ValueError(f'expected warning counters of shape (..., {len(WarningType)}), got {w.shape}')
  worlds = w.reshape(-1, w.shape[-1])
  out = []
  for kind in WarningType:
    total, hit = int(worlds[:, kind].sum()), int(np.count_nonzero(worlds[:, kind]))
    if total:
      where = f' in {hit} of {len(worlds)} worlds' if len(worlds) > 1 else ''
      out.append(f'mjWARN_{kind.name}: {total} time(s){where}: {WARNING_TEXT[kind]}')
  return out

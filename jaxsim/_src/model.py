"""Building a Model from compiled arrays, the Data that goes with it (mj_makeData), and the
modifiers that return a changed Model (with_options, with_ncon_max, with_max_geom_pairs).

A Model's static layout of contacts and constraint rows (layout.py) is made here, once per
Model: when it is built, and again by a modifier only where what it changes affects the layout,
so that no stale size remains.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import pickle
from typing import Any

import jax
import jax.numpy as jnp

from jaxsim._src import layout, lengthrange
from jaxsim._src.collision import pairs
from jaxsim._src.enums import ConeType, IntegratorType, JacobianType, SolverType
from jaxsim._src.setconst import set_const
from jaxsim._src.types import Data, Model, make_model, static_fields
from jaxsim._src.types import make_data as _make_data

# A model built before in this process (the same compiled arrays) skips mj_setConst's and
# mj_setLengthRange's passes, which compile and run programs (2-4 s on a CPU, per load): their
# results, NumPy arrays, are kept for the last QPOS0_MEMO models built.
QPOS0_MEMO = 32
_qpos0_memo: collections.OrderedDict[bytes, dict[str, Any]] = collections.OrderedDict()


def make_data(m: Model, keyframe: int | str | None = None) -> Data:
  """A Data with contact slots and constraint rows sized for the model as its options are now
  (mj_makeData), at qpos0 with zero velocity (mj_resetData) or at a keyframe.

  Arguments:
    m: the Model.
    keyframe: a keyframe's name or index: time, qpos, qvel, act, ctrl, mocap_pos and
      mocap_quat are the keyframe's (mj_resetDataKeyframe); None for qpos0.
  Returns:
    the Data; run `forward` (or `step`) on it for the derived quantities.
  Raises:
    KeyError: no keyframe of that name; IndexError: an index outside 0..nkey-1.
  """
  lay = layout.layout_of(m)
  d = _make_data(m, ncon=lay.ncon, nefc=lay.nefc)
  if keyframe is None:
    return d
  if isinstance(keyframe, str):
    k = m.name2id('key', keyframe)
  else:
    k = int(keyframe)
    if not 0 <= k < m.nkey:
      raise IndexError(f'keyframe {k} out of range: the model has {m.nkey} keyframes')
  dtype = d.qpos.dtype
  return d.replace(
    time=jnp.asarray(m.key_time[k], dtype),
    qpos=jnp.asarray(m.key_qpos[k], dtype),
    qvel=jnp.asarray(m.key_qvel[k], dtype),
    act=jnp.asarray(m.key_act[k], dtype),
    ctrl=jnp.asarray(m.key_ctrl[k], dtype),
    mocap_pos=jnp.asarray(m.key_mpos[k], dtype).reshape(m.nmocap, 3),
    mocap_quat=jnp.asarray(m.key_mquat[k], dtype).reshape(m.nmocap, 4),
  )


def build(compiled: dict) -> Model:
  """Model from compiled arrays, completed by the qpos0 pass (mj_setConst) and the actuator
  length-range search (mj_setLengthRange), with its static layout.

  Arguments:
    compiled: name -> value of every field the compiler makes (jaxsim.mjcf.compile_file or
      compile_string; jaxsim.mjx.model_arrays makes the same from a mujoco.MjModel).
  Returns:
    the Model: `jaxsim.build(jaxsim.mjcf.compile_string(xml))` is `jaxsim.load_string(xml)`.
  """
  compiled = dict(compiled)
  key = _memo_key(compiled)
  lr_sim = compiled.pop('lengthrange_sim', ())
  lr_opt = compiled.pop('lengthrange_opt', None)
  # the memo holds the passes' own results; each Model gets copies
  done = _qpos0_memo.get(key) if key is not None else None
  fresh = done is None
  if fresh:
    done = {'setconst': set_const(compiled)}
  compiled.update(copy.deepcopy(done['setconst']))
  compiled['collision_pairs'] = pairs.candidate_pairs(compiled)
  compiled['nconmax'] = 0
  compiled['nefcmax'] = 0
  compiled['layout'] = None

  def model() -> Model:
    return layout.with_layout(make_model(compiled))

  if fresh and lr_sim:
    with jax.enable_x64(True):
      done['actuator_lengthrange'] = lengthrange.length_range(model(), lr_sim, lr_opt)
  if 'actuator_lengthrange' in done:
    compiled['actuator_lengthrange'] = copy.deepcopy(done['actuator_lengthrange'])
  if key is not None:
    _qpos0_memo[key] = done
    _qpos0_memo.move_to_end(key)
    while len(_qpos0_memo) > QPOS0_MEMO:
      _qpos0_memo.popitem(last=False)
  return model()


def _memo_key(compiled: dict) -> bytes | None:
  """The compiled arrays' content digest (with the backend the passes run on), or None where
  they do not pickle (then the model is not remembered)."""
  try:
    data = pickle.dumps((jax.default_backend(), compiled), protocol=pickle.HIGHEST_PROTOCOL)
  except (pickle.PicklingError, TypeError, AttributeError):
    return None
  return hashlib.sha256(data).digest()


def _relayout(m: Model) -> Model:
  """m, with its layout made again if what the layout depends on has changed."""
  lay = m.layout
  if lay is not None and lay.options == layout.options_key(m):
    return m
  return layout.with_layout(m)


def with_options(m: Model, **options) -> Model:
  """The model with some `opt` fields replaced (e.g. integrator='euler', iterations=2,
  disableflags=...), its layout of contacts and constraint rows (and so its Data sizes) made
  again where they change; make a new Data for it."""
  enums = {
    'integrator': IntegratorType,
    'solver': SolverType,
    'cone': ConeType,
    'jacobian': JacobianType,
  }
  opt = m.opt
  for k, v in options.items():
    if k in enums and isinstance(v, str):
      v = enums[k][v.upper()]
    opt = opt.replace(**{k: int(v) if k in static_fields(type(opt)) else v})
  return _relayout(m.replace(opt=opt))


def with_ncon_max(m: Model, n: int | None) -> Model:
  """The model with a contact budget of n slots per condim class (None: the default rule,
  layout.default_budget; -1: every collider slot), its layout and Data sizes (nconmax, nefcmax)
  made again; make a new Data for it."""
  return layout.with_layout(m.replace(collision_pairs={**m.collision_pairs, 'nconmax': n}))


def with_hessian_rows(m: Model, n: int | None) -> Model:
  """The model with Newton's Hessian summed n quadratic constraint rows at a time (the size of
  its compact row buffer, layout.hessian_rows; None: the default, max(32, nv) rows where the
  layout has more than 64; -1: every allocated row in one pass). The Hessian is exact for any
  n: where more rows are quadratic, the buffer is summed again. The layout is kept."""
  cp = dict(m.collision_pairs)
  cp.pop('hessian_rows', None)
  if n is not None:
    cp['hessian_rows'] = int(n)
  return m.replace(collision_pairs=cp)


def hessian_rows(m: Model) -> int:
  """Rows of Newton's compact Hessian buffer for this model (see with_hessian_rows)."""
  return layout.hessian_rows(m)


def with_max_geom_pairs(m: Model, n: int | None) -> Model:
  """The model with n pairs per collider group through the collider each step (MJX's custom
  numeric max_geom_pairs; -1: every pair, exactly MuJoCo's contacts at any state; None:
  broadphase.limit's default). The contact slots do not change: the layout is kept."""
  cp = dict(m.collision_pairs)
  cp.pop('max_geom_pairs', None)
  if n is not None:
    cp['max_geom_pairs'] = int(n)
  return _relayout(m.replace(collision_pairs=cp))

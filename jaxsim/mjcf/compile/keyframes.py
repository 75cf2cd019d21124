"""<keyframe>: keyframes, padded with the model's defaults and up to <size nkey>
(mjXReader::Keyframe in xml_native_reader.cc, mjCKey::Compile in user_objects.cc).

Reads the <keyframe> sections, the state's joints, bodies and actuator layout in out, and the
values of attached models' keyframes (attach.py's `_attached`); writes the key_* arrays and nkey
into out and the key namespace.
"""

from __future__ import annotations

import copy
import json

import numpy as np

from jaxsim._src.enums import MINVAL, JointType
from jaxsim.mjcf import schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element


def _attached_key(s: CompileState, k: dict, values: dict) -> None:
  """An attached model's keyframe values on its joints and actuators (attach.py), by name."""
  jt = s.names.get('joint', {})
  for name, (qpos, qvel) in values['joints'].items():
    if name in jt:
      j = s.joints[jt[name]]
      k['qpos'][j['qposadr'] : j['qposadr'] + len(qpos)] = qpos
      k['qvel'][j['dofadr'] : j['dofadr'] + len(qvel)] = qvel
  at = s.names.get('actuator', {})
  actadr = s.out['actuator_actadr']
  for name, (ctrl, act) in values['actuators'].items():
    if name in at:
      i = at[name]
      k['ctrl'][i] = ctrl
      if len(act):
        k['act'][actadr[i] : actadr[i] + len(act)] = act


def compile_keyframes(s: CompileState, sections: list[Element]):
  """Reads every <key> on top of the model's defaults (qpos0, zeros, mocap poses), adds default
  keyframes up to <size nkey>, and writes the key_* arrays."""
  out = s.out
  keys = []
  nq, nv, na, nu, nmocap = out['nq'], out['nv'], out['na'], out['nu'], out['nmocap']
  mocap_bodies = [b for b in s.bodies if b['mocap']]
  default_key = {
    'time': 0.0,
    'qpos': out['qpos0'].copy(),
    'qvel': np.zeros(nv),
    'act': np.zeros(na),
    'ctrl': np.zeros(nu),
    'mpos': np.array([b['pos'] for b in mocap_bodies]).reshape(nmocap * 3),
    'mquat': np.array([b['quat'] for b in mocap_bodies]).reshape(nmocap * 4),
  }
  for sec in sections:
    util.only(sec, {'key'})
    for e in sec.children:
      util.only(e, set())
      attached = e.attrs.get('_attached')
      if attached is not None:
        e = Element(
          e.tag, {k: v for k, v in e.attrs.items() if k != '_attached'}, [], e.file, e.line
        )
      a = schema.read_attrs(e, schema.KEY)
      k = {
        'time': a.get('time', 0.0),
        'qpos': out['qpos0'].copy(),
        'qvel': np.zeros(nv),
        'act': np.zeros(na),
        'ctrl': np.zeros(nu),
        'mpos': np.array([b['pos'] for b in mocap_bodies]).reshape(nmocap * 3),
        'mquat': np.array([b['quat'] for b in mocap_bodies]).reshape(nmocap * 4),
      }
      for field, n in (
        ('qpos', nq),
        ('qvel', nv),
        ('act', na),
        ('ctrl', nu),
        ('mpos', 3 * nmocap),
        ('mquat', 4 * nmocap),
      ):
        if field in a:
          v = np.asarray(a[field], dtype=float)
          if len(v) > n:
            raise e.error(f'expected {n} values, got {len(v)}', attribute=field)
          # MuJoCo 4 pads a short qpos/qvel/act/ctrl with the defaults and keeps the
          # default mocap poses when mpos/mquat are short
          if len(v) == n:
            k[field] = v
          elif field not in ('mpos', 'mquat'):
            k[field][: len(v)] = v
      if attached is not None:
        _attached_key(s, k, json.loads(attached))
      # MuJoCo normalises the quaternions of ball and free joints (and mocap bodies).
      for j in s.joints:
        if j['type'] in (JointType.FREE, JointType.BALL):
          adr = j['qposadr'] + (3 if j['type'] == JointType.FREE else 0)
          k['qpos'][adr : adr + 4] = _normalized(k['qpos'][adr : adr + 4])
      for i in range(nmocap):
        k['mquat'][4 * i : 4 * i + 4] = _normalized(k['mquat'][4 * i : 4 * i + 4])
      s.register('key', e, len(keys))
      keys.append(k)
  nkey = s.size.get('nkey', 0)
  if nkey > len(keys) and nkey * (1 + nq + nv + na + nu + 7 * nmocap) > util.MAX_ARRAY:
    raise s.nkey_elem.error(
      f'nkey is too large: {nkey} keyframes exceed {util.MAX_ARRAY:.0e} values', attribute='nkey'
    )
  while len(keys) < nkey:
    keys.append(copy.deepcopy(default_key))
    s.name_lists.setdefault('key', []).append('')
  out['nkey'] = len(keys)
  out['key_time'] = np.array([k['time'] for k in keys], dtype=float)
  for field, n in (
    ('qpos', nq),
    ('qvel', nv),
    ('act', na),
    ('ctrl', nu),
    ('mpos', 3 * nmocap),
    ('mquat', 4 * nmocap),
  ):
    out[f'key_{field}'] = util.rows([k[field] for k in keys], n)


def _normalized(q: np.ndarray) -> np.ndarray:
  """A unit quaternion, or the identity for a (near) zero one."""
  n = np.linalg.norm(q)
  return q / n if n > MINVAL else np.array([1.0, 0, 0, 0])

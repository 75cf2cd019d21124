"""<actuator>: actuators, their transmissions, limits, activations and lengthrange
(mjXReader::OneActuator in xml_native_reader.cc, mjCActuator::Compile in user_objects.cc,
mj_setLengthRange's decisions in engine_setconst.c).

Reads the <actuator> sections and the state's joints, tendons, sites, bodies and plugin tables;
writes the actuator_* arrays, nu and na into out, the actuator namespace, the implicit plugin
instance count and lengthrange_sim. apply_shortcut (a shortcut element such as <position> as
<general> parameters) is also what <default> classes apply (defaults.Defaults.read).
"""

from __future__ import annotations

import copy
import math

import numpy as np

from jaxsim._src.enums import BiasType, DynType, GainType, JointType, TrnType
from jaxsim.mjcf import plugin, schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.options import plugin_ref
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element


def apply_shortcut(elem: Element, base: dict) -> dict:
  """Reads an actuator element of any kind on top of `base` (mjXReader::OneActuator)."""
  tag = elem.tag
  table = schema.ACTUATORS[tag]
  general_only = {k: v for k, v in table.items() if k in schema.GENERAL}
  params = {k: v for k, v in table.items() if k not in schema.GENERAL}
  a = schema.read_attrs(
    Element(
      tag, {k: v for k, v in elem.attrs.items() if k in general_only}, [], elem.file, elem.line
    ),
    general_only,
    base,
  )
  for attr in elem.attrs:
    if attr not in table:
      raise elem.error(f'unknown attribute of <{tag}>', attribute=attr)
  p = {k: schema.convert(elem, k, elem.attrs[k], params[k]) for k in params if k in elem.attrs}
  a = copy.deepcopy(a)
  gain, bias, dyn = a['gainprm'], a['biasprm'], a['dynprm']

  def nonneg(key):
    if key in p and p[key] < 0:
      raise elem.error(f'{key} cannot be negative', attribute=key)

  # A shortcut sets the whole gain/bias/dynamics description: parameters it does not read are
  # reset to MuJoCo's general defaults rather than inherited (as mujoco 4.0.0 does).
  keep_dyn = tag == 'cylinder' or (
    tag in ('position', 'intvelocity') and a['dyntype'] == DynType.FILTEREXACT
  )
  damper_kv = p.get('kv', -gain[2] if a['gaintype'] == GainType.AFFINE else 0.0)
  if tag != 'muscle':
    gain[1:] = 0
    dyn[1:] = 0
    if not keep_dyn:
      dyn[0] = 1
      a['dyntype'] = DynType.NONE
  if tag == 'motor':
    gain[0] = 1
    bias[:] = 0
    a.update(dyntype=DynType.NONE, gaintype=GainType.FIXED, biastype=BiasType.NONE)
  elif tag in ('position', 'intvelocity'):
    kp = p.get('kp', gain[0])
    if 'kv' in p and 'dampratio' in p:
      raise elem.error('kv and dampratio cannot both be defined', attribute='dampratio')
    gain[0] = kp
    bias[0] = 0
    bias[3:] = 0
    bias[1] = -kp
    nonneg('kv')
    nonneg('dampratio')
    nonneg('timeconst')
    if 'kv' in p:
      bias[2] = -p['kv']
    if 'dampratio' in p:
      bias[2] = p['dampratio']
    if 'timeconst' in p:
      dyn[0] = 1 if p['timeconst'] == 0 else p['timeconst']
      a['dyntype'] = DynType.NONE if p['timeconst'] == 0 else DynType.FILTEREXACT
    a['inheritrange'] = p.get('inheritrange', a['inheritrange'])
    if a['inheritrange'] > 0 and (a['ctrlrange'][0] or a['ctrlrange'][1]):
      raise elem.error('ctrlrange and inheritrange cannot both be defined', 'inheritrange')
    a.update(gaintype=GainType.FIXED, biastype=BiasType.AFFINE)
    if tag == 'intvelocity':
      a['dyntype'] = DynType.INTEGRATOR
      if 'actlimited' in p:
        a['actlimited'] = p['actlimited']
      if 'actrange' in p:
        a['actrange'] = p['actrange']
      if a['inheritrange'] > 0 and (a['actrange'][0] or a['actrange'][1]):
        raise elem.error('actrange and inheritrange cannot both be defined', 'inheritrange')
  elif tag == 'velocity':
    kv = p.get('kv', gain[0])
    bias[:] = 0
    gain[0] = kv
    bias[2] = -kv
    a.update(dyntype=DynType.NONE, gaintype=GainType.FIXED, biastype=BiasType.AFFINE)
  elif tag == 'damper':
    kv = damper_kv
    gain[:] = 0
    bias[:] = 0
    gain[2] = -kv
    a.update(ctrllimited=1, dyntype=DynType.NONE, gaintype=GainType.AFFINE, biastype=BiasType.NONE)
    if kv < 0:
      raise elem.error('damping coefficient cannot be negative', attribute='kv')
    if a['ctrlrange'][0] < 0 or a['ctrlrange'][1] < 0:
      raise elem.error('damper control range cannot be negative', attribute='ctrlrange')
  elif tag == 'cylinder':
    dyn[0] = p.get('timeconst', dyn[0])
    b = p.get('bias', bias[:3].copy())
    gain[0] = p.get('area', gain[0])
    if 'diameter' in p:
      gain[0] = math.pi / 4 * p['diameter'] ** 2
    bias[:3] = b
    bias[3:] = 0
    a.update(dyntype=DynType.FILTER, gaintype=GainType.FIXED, biastype=BiasType.AFFINE)
  elif tag == 'muscle':
    for i, (v, d) in enumerate(((1, 0.01), (0, 0.04))):
      if dyn[i] == v:
        dyn[i] = d
    muscle_defaults = ((1, 0.75), (0, 1.05), (0, -1), (0, 200), (0, 0.5), (0, 1.6), (0, 1.5))
    muscle_defaults += ((0, 1.3), (0, 1.2))
    for i, (v, d) in enumerate(muscle_defaults):
      if gain[i] == v:
        gain[i] = d
    tausmooth = p.get('tausmooth', dyn[2])
    if tausmooth < 0:
      raise elem.error('muscle tausmooth cannot be negative', attribute='tausmooth')
    dyn[2] = tausmooth
    tc = p.get('timeconst', np.array([-1.0, -1.0]))
    for i in range(2):
      if tc[i] >= 0:
        dyn[i] = tc[i]
    rng = p.get('range', np.array([-1.0, -1.0]))
    for i in range(2):
      if rng[i] >= 0:
        gain[i] = rng[i]
    for i, key in enumerate(('force', 'scale', 'lmin', 'lmax', 'vmax', 'fpmax', 'fvmax')):
      if p.get(key, -1) >= 0:
        gain[2 + i] = p[key]
    bias[:9] = gain[:9]
    a.update(dyntype=DynType.MUSCLE, gaintype=GainType.MUSCLE, biastype=BiasType.MUSCLE)
  elif tag == 'adhesion':
    gain[0] = p.get('gain', gain[0])
    bias[:] = 0
    a.update(ctrllimited=1, gaintype=GainType.FIXED, biastype=BiasType.NONE)
    if gain[0] < 0:
      raise elem.error('adhesion gain cannot be negative', attribute='gain')
    if a['ctrlrange'][0] < 0 or a['ctrlrange'][1] < 0:
      raise elem.error('adhesion control range cannot be negative', attribute='ctrlrange')
  return a


def compile_actuators(s: CompileState, sections: list[Element]):
  """Reads every actuator, resolves its transmission and limits; writes the actuator_* arrays."""
  out = s.out
  acts = []
  for sec in sections:
    for a in sec.children:
      if a.tag in schema.UNSUPPORTED_ACTUATORS:
        raise a.error(f'actuator type <{a.tag}> is not supported by jaxsim')
      if a.tag not in schema.ACTUATORS and a.tag != 'plugin':
        raise a.error(f'unknown element <{a.tag}> in <actuator>')
      util.only(a, {'config'} if a.tag == 'plugin' else set())
      cls = s.cls_of(a, 'main')
      base = s.defaults.get(cls, 'general', a)
      if a.tag == 'plugin':
        attrs = schema.read_attrs(a, schema.ACTUATOR_PLUGIN, base)
        attrs['pid'] = _plugin_actuator(s, a, attrs)
      elif a.tag != 'general':
        attrs = apply_shortcut(a, base)
      else:
        attrs = schema.read_attrs(a, schema.GENERAL, base)
      attrs['elem'] = a
      s.register('actuator', a, len(acts))
      acts.append(attrs)
  rows = []
  na_total = 0
  for attrs in acts:
    a = attrs['elem']
    targets = [
      k for k in ('joint', 'jointinparent', 'tendon', 'cranksite', 'site', 'body') if k in a.attrs
    ]
    if not targets:
      raise a.error('actuator has no transmission target (joint, tendon, site, body, ...)')
    if len(targets) > 1:
      raise a.error('actuator has more than one transmission target', attribute=targets[1])
    tk = targets[0]
    trnid = [-1, -1]
    if tk in ('joint', 'jointinparent'):
      trntype = TrnType.JOINT if tk == 'joint' else TrnType.JOINTINPARENT
      trnid[0] = s.lookup('joint', a, tk)
    elif tk == 'tendon':
      trntype = TrnType.TENDON
      trnid[0] = s.lookup('tendon', a, tk)
    elif tk == 'cranksite':
      trntype = TrnType.SLIDERCRANK
      trnid[0] = s.lookup('site', a, tk)
      if 'slidersite' not in a.attrs:
        raise a.error('slider-crank transmission needs a slidersite', attribute='slidersite')
      trnid[1] = s.lookup('site', a, 'slidersite')
      if attrs['cranklength'] <= 0:
        raise a.error('cranklength must be positive', attribute='cranklength')
    elif tk == 'site':
      trntype = TrnType.SITE
      trnid[0] = s.lookup('site', a, tk)
      if 'refsite' in a.attrs:
        trnid[1] = s.lookup('site', a, 'refsite')
    else:
      trntype = TrnType.BODY
      trnid[0] = s.lookup('body', a, tk)
    if tk != 'cranksite' and ('slidersite' in a.attrs or 'cranklength' in a.attrs):
      raise a.error('cranklength and slidersite need a slider-crank transmission', 'slidersite')
    if tk != 'site' and 'refsite' in a.attrs:
      raise a.error('refsite can only be used with a site transmission', attribute='refsite')
    # limits
    lim = {}
    for key, rk in (
      ('ctrllimited', 'ctrlrange'),
      ('forcelimited', 'forcerange'),
      ('actlimited', 'actrange'),
    ):
      rng = np.array(attrs[rk], dtype=float)
      flag = attrs[key]
      if flag == 2 and not s.autolimits(a) and (rng != 0).any():
        raise a.error(f"actuator has '{rk}' but not '{key}'", attribute=rk)
      on = flag == 1 or (flag == 2 and rng[0] < rng[1])
      if (
        on and rng[0] >= rng[1] and not (key == 'ctrllimited' and attrs.get('inheritrange', 0) > 0)
      ):
        raise a.error(f'{rk}[0] must be smaller than {rk}[1]', attribute=rk)
      lim[key] = int(on)
      lim[rk] = rng
    if attrs.get('inheritrange', 0) > 0:
      _inherit_range(s, attrs, trntype, trnid, lim)
    dyn = attrs['dyntype']
    actdim = attrs['actdim']
    if actdim < 0:
      actnum = 0 if dyn == DynType.NONE else 1
    elif 'pid' in attrs:
      actnum = actdim
    else:
      actnum = actdim
      if dyn == DynType.NONE and actdim > 0:
        raise a.error('actdim > 0 requires dynamics', attribute='actdim')
      if actdim > 1 and dyn != DynType.USER:
        raise a.error("actdim > 1 is only allowed for dyntype 'user'", attribute='actdim')
      if actdim == 0 and dyn != DynType.NONE:
        raise a.error('invalid actdim 0 in stateful actuator', attribute='actdim')
    if 'pid' in attrs:
      # Pid::Create: the plugin's activations, then one for a filter or an integrator
      want = plugin.pid_actdim(attrs['pid'][1])
      want += int(dyn in (DynType.INTEGRATOR, DynType.FILTER, DynType.FILTEREXACT))
      if actnum != want:
        raise a.error(
          f'actuator {len(rows)} has actdim {actnum}, expected {want}. Add actdim="{want}" '
          'to the actuator plugin element.',
          attribute='actdim',
        )
    na_total += actnum
    if na_total > util.MAX_ARRAY:
      raise a.error(f'actdim is too large: more than {util.MAX_ARRAY:.0e} activations', 'actdim')
    if 'nsample' in attrs or 'delay' in attrs:
      s.note_unsupported('actuator delay (nsample/delay)')
    _length_range(s, a, len(rows), attrs, trntype, trnid)
    rows.append((attrs, trntype, trnid, lim, actnum))
  nu = len(rows)
  actnum = np.array([r[4] for r in rows], dtype=int)
  actadr = np.where(actnum > 0, util.adr(actnum), -1) if nu else np.zeros(0, int)
  out['nu'] = nu
  out['na'] = int(actnum.sum()) if nu else 0
  out['actuator_trntype'] = np.array([r[1] for r in rows], dtype=int)
  out['actuator_dyntype'] = np.array([r[0]['dyntype'] for r in rows], dtype=int)
  out['actuator_gaintype'] = np.array([r[0]['gaintype'] for r in rows], dtype=int)
  out['actuator_biastype'] = np.array([r[0]['biastype'] for r in rows], dtype=int)
  out['actuator_trnid'] = np.array([r[2] for r in rows], dtype=int).reshape(nu, 2)
  out['actuator_actadr'] = actadr
  out['actuator_actnum'] = actnum
  out['actuator_group'] = np.array([r[0]['group'] for r in rows], dtype=int)
  out['actuator_ctrllimited'] = np.array([r[3]['ctrllimited'] for r in rows], dtype=int)
  out['actuator_forcelimited'] = np.array([r[3]['forcelimited'] for r in rows], dtype=int)
  out['actuator_actlimited'] = np.array([r[3]['actlimited'] for r in rows], dtype=int)
  out['actuator_actearly'] = np.array([int(r[0]['actearly']) for r in rows], dtype=int)
  out['actuator_dynprm'] = util.rows([r[0]['dynprm'] for r in rows], 10)
  out['actuator_gainprm'] = util.rows([r[0]['gainprm'] for r in rows], 10)
  out['actuator_biasprm'] = util.rows([r[0]['biasprm'] for r in rows], 10)
  out['actuator_ctrlrange'] = util.rows([r[3]['ctrlrange'] for r in rows], 2)
  out['actuator_forcerange'] = util.rows([r[3]['forcerange'] for r in rows], 2)
  out['actuator_actrange'] = util.rows([r[3]['actrange'] for r in rows], 2)
  out['actuator_gear'] = util.rows([r[0]['gear'] for r in rows], 6)
  out['actuator_cranklength'] = np.array([r[0]['cranklength'] for r in rows], dtype=float)
  out['actuator_lengthrange'] = util.rows([r[0]['lengthrange'] for r in rows], 2)
  out['actuator_damping'] = np.array([r[0]['damping'][0] for r in rows], dtype=float)
  out['actuator_dampingpoly'] = util.rows(
    [np.resize(np.append(r[0]['damping'][1:], [0.0, 0.0]), 2) for r in rows], 2
  )
  out['actuator_armature'] = np.array([r[0]['armature'] for r in rows], dtype=float)
  # plugin instances: the named ones of <extension>, then one per actuator that names a plugin
  # (then one per such sensor: compile_sensors)
  named = len(s.plugin_instances)
  inst = []
  for r in rows:
    ref = r[0].get('pid', (None,))[0]
    if ref == 'implicit':
      inst.append(named + s.implicit_actuator_plugins)
      s.implicit_actuator_plugins += 1
    else:
      inst.append(-1 if ref is None else ref)
  out['actuator_plugin'] = np.array(inst, dtype=int)
  prm = [r[0]['pid'][1] if 'pid' in r[0] else (0.0,) * 5 for r in rows]
  out['actuator_plugin_prm'] = np.array(prm, dtype=float).reshape(-1, 5)
  # Pid::Create fails for an instance no actuator uses
  for k, (name, _, e) in enumerate(s.plugin_instances.values()):
    if name == plugin.PID and k not in inst:
      raise e.error(f'actuator not found for plugin instance {k}')


def _plugin_actuator(
  s: CompileState, a: Element, attrs: dict
) -> tuple[int | str, tuple[float, ...]]:
  """An actuator computed by an engine plugin (mujoco.pid): (its instance, named (an index) or
  'implicit' (one of its own, numbered in compile_actuators); the pid parameters)."""
  ref, name, config, at = plugin_ref(s, a, attrs, plugin.PID, 'actuator')
  return ref, plugin.pid_params(at, config)


def _inherit_range(s: CompileState, attrs, trntype, trnid, lim):
  """inheritrange: the control (or, for integrators, activation) range as the given fraction of
  the transmission joint's or tendon's range, about its middle (mjCActuator::Compile)."""
  a = attrs['elem']
  if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT):
    j = s.joints[trnid[0]]
    if j['type'] not in (JointType.HINGE, JointType.SLIDE) or not j['limited_c']:
      raise a.error('inheritrange needs a limited hinge or slide joint', 'inheritrange')
    rng = j['range_c']
  elif trntype == TrnType.TENDON:
    t = s.tendons[trnid[0]]
    if not t['limited_c']:
      raise a.error('inheritrange needs a limited tendon', attribute='inheritrange')
    rng = np.array(t['range'])
  else:
    raise a.error('inheritrange needs a joint or tendon transmission', 'inheritrange')
  mid = (rng[0] + rng[1]) / 2
  half = (rng[1] - rng[0]) / 2 * attrs['inheritrange']
  key = 'actrange' if attrs['dyntype'] == DynType.INTEGRATOR else 'ctrlrange'
  lim[key] = np.array([mid - half, mid + half])
  lim['actlimited' if key == 'actrange' else 'ctrllimited'] = 1


def _length_range(s: CompileState, a: Element, index: int, attrs, trntype: int, trnid) -> None:
  """actuator lengthrange as MuJoCo's mj_setLengthRange decides it, short of simulating.

  Which actuators need one (lengthrange mode), keeping a given one (useexisting), copying the
  joint's or tendon's range (uselimit); the rest are listed in `lengthrange_sim` for the
  simulation-based search (jaxsim/lengthrange.py), which runs on the built Model.
  """
  lr = s.lengthrange_opt
  ismuscle = attrs.get('gaintype') == GainType.MUSCLE or attrs.get('biastype') == BiasType.MUSCLE
  isuser = attrs.get('gaintype') == GainType.USER or attrs.get('biastype') == BiasType.USER
  mode = int(lr['mode'])
  if mode == 0 or (mode == 1 and not ismuscle) or (mode == 2 and not ismuscle and not isuser):
    return
  rng = attrs['lengthrange']
  if lr['useexisting'] and rng[0] < rng[1]:
    return
  if lr['uselimit']:
    if trntype in (TrnType.JOINT, TrnType.JOINTINPARENT) and s.joints[trnid[0]]['limited_c']:
      attrs['lengthrange'] = np.array(s.joints[trnid[0]]['range_c'], dtype=float)
      return
    if trntype == TrnType.TENDON and s.tendons[trnid[0]]['limited_c']:
      attrs['lengthrange'] = np.array(s.tendons[trnid[0]]['range'], dtype=float)
      return
  s.lengthrange_sim.append((index, a.file, a.line, a.tag))

"""<tendon>: fixed and spatial tendons and their wrap paths (mjXReader::OneTendon in
xml_native_reader.cc, mjCTendon::Compile in user_objects.cc).

Reads the <tendon> sections and the state's joints, geoms and sites; writes the tendon_* and
wrap_* arrays into out, the tendon namespace and the state's tendons (whose limits actuators
inherit).
"""

from __future__ import annotations

import numpy as np

from jaxsim._src.enums import GeomType, JointType, WrapType
from jaxsim.mjcf import schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element


def compile_tendons(s: CompileState, sections: list[Element]):
  """Reads every tendon and its path, checks it, and writes the tendon_* and wrap_* arrays."""
  out = s.out
  tendons = []
  wraps = []
  for sec in sections:
    util.only(sec, {'spatial', 'fixed'})
    for t in sec.children:
      cls = s.cls_of(t, 'main')
      table = (
        schema.TENDON
        if t.tag == 'spatial'
        else {k: v for k, v in schema.TENDON.items() if k not in ('width', 'material', 'rgba')}
      )
      attrs = s.read_element(t, table, 'tendon', cls)
      attrs['elem'] = t
      if attrs.get('material'):
        s.lookup('material', t, 'material', attrs['material'])
      s.register('tendon', t, len(tendons))
      tendons.append(attrs)
  for attrs in tendons:
    t = attrs['elem']
    attrs['adr'] = len(wraps)
    if t.tag == 'fixed':
      util.only(t, {'joint'})
      for w in t.children:
        util.only(w, set())
        a = schema.read_attrs(w, {'joint': 's', 'coef': 'f'})
        if 'joint' not in a or 'coef' not in a:
          raise w.error('missing required attribute', attribute='coef' if 'joint' in a else 'joint')
        jid = s.lookup('joint', w, 'joint')
        if s.joints[jid]['type'] not in (JointType.SLIDE, JointType.HINGE):
          raise w.error('fixed tendons can only use hinge and slide joints', attribute='joint')
        if any(k == WrapType.JOINT and o == jid for k, o, _ in wraps[attrs['adr'] :]):
          i = len(wraps) - attrs['adr']
          raise w.error(f'joint at path element {i} is repeated', attribute='joint')
        wraps.append((WrapType.JOINT, jid, a['coef']))
    else:
      util.only(t, {'site', 'geom', 'pulley'})
      for w in t.children:
        util.only(w, set())
        if w.tag == 'site':
          a = schema.read_attrs(w, {'site': 's'})
          if 'site' not in a:
            raise w.error('missing required attribute', attribute='site')
          wraps.append((WrapType.SITE, s.lookup('site', w, 'site'), 0.0))
        elif w.tag == 'geom':
          a = schema.read_attrs(w, {'geom': 's', 'sidesite': 's'})
          if 'geom' not in a:
            raise w.error('missing required attribute', attribute='geom')
          gid = s.lookup('geom', w, 'geom')
          gt = s.geoms[gid]['type']
          if gt not in (GeomType.SPHERE, GeomType.CYLINDER):
            raise w.error('tendons can only wrap around sphere and cylinder geoms', 'geom')
          side = s.lookup('site', w, 'sidesite') if 'sidesite' in a else -1
          wraps.append(
            (WrapType.SPHERE if gt == GeomType.SPHERE else WrapType.CYLINDER, gid, float(side))
          )
        else:
          a = schema.read_attrs(w, {'divisor': 'f'})
          if a.get('divisor', 0) <= 0:
            raise w.error('pulley divisor must be positive', attribute='divisor')
          wraps.append((WrapType.PULLEY, -1, a['divisor']))
      _check_spatial(t, wraps[attrs['adr'] :])
    attrs['num'] = len(wraps) - attrs['adr']
    if attrs['num'] == 0:
      raise t.error('a tendon needs at least one path element')
    geom_wrap = any(w[0] in (WrapType.SPHERE, WrapType.CYLINDER) for w in wraps[attrs['adr'] :])
    if attrs['armature'] < 0:
      raise t.error('tendon armature cannot be negative', attribute='armature')
    if attrs['armature'] > 0 and geom_wrap:
      raise t.error('geom wrapping not supported by tendon armature', attribute='armature')
    rng = np.array(attrs['range'])
    if attrs['limited'] == 2 and not s.autolimits(t) and (rng != 0).any():
      raise t.error("tendon has 'range' but not 'limited'", attribute='range')
    lim = attrs['limited'] == 1 or (attrs['limited'] == 2 and rng[0] < rng[1])
    if lim and rng[0] >= rng[1]:
      raise t.error('range[0] must be smaller than range[1]', attribute='range')
    attrs['limited_c'] = int(lim)
    afr = np.array(attrs['actuatorfrcrange'])
    afl = attrs['actuatorfrclimited']
    alim = afl == 1 or (afl == 2 and afr[0] < afr[1])
    attrs['actfrclimited_c'] = int(alim)
  out['ntendon'] = len(tendons)
  out['nwrap'] = len(wraps)
  out['tendon_adr'] = np.array([t['adr'] for t in tendons], dtype=int)
  out['tendon_num'] = np.array([t['num'] for t in tendons], dtype=int)
  out['tendon_limited'] = np.array([t['limited_c'] for t in tendons], dtype=int)
  out['tendon_actfrclimited'] = np.array([t['actfrclimited_c'] for t in tendons], dtype=int)
  out['tendon_range'] = util.rows([t['range'] for t in tendons], 2)
  out['tendon_actfrcrange'] = util.rows([t['actuatorfrcrange'] for t in tendons], 2)
  out['tendon_solref_lim'] = util.rows([t['solreflimit'] for t in tendons], 2)
  out['tendon_solimp_lim'] = util.rows([t['solimplimit'] for t in tendons], 5)
  out['tendon_solref_fri'] = util.rows([t['solreffriction'] for t in tendons], 2)
  out['tendon_solimp_fri'] = util.rows([t['solimpfriction'] for t in tendons], 5)
  out['tendon_margin'] = np.array([t['margin'] for t in tendons], dtype=float)
  out['tendon_stiffness'] = np.array([t['stiffness'][0] for t in tendons], dtype=float)
  out['tendon_stiffnesspoly'] = util.rows([t['stiffness'][1:] for t in tendons], 2)
  out['tendon_damping'] = np.array([t['damping'][0] for t in tendons], dtype=float)
  out['tendon_dampingpoly'] = util.rows([t['damping'][1:] for t in tendons], 2)
  out['tendon_armature'] = np.array([t['armature'] for t in tendons], dtype=float)
  out['tendon_frictionloss'] = np.array([t['frictionloss'] for t in tendons], dtype=float)
  out['tendon_group'] = np.array([t['group'] for t in tendons], dtype=int)
  out['tendon_width'] = np.array([t.get('width', 0.003) for t in tendons], dtype=float)
  # springlength: -1 means "the length at qpos0" (filled in with tendon_length0).
  sl = []
  for t in tendons:
    length = np.array(t['springlength'], dtype=float)
    if length[0] > length[1]:
      raise t['elem'].error('springlength[0] must not exceed springlength[1]', 'springlength')
    sl.append(length)
  out['tendon_lengthspring'] = util.rows(sl, 2)
  out['wrap_type'] = np.array([w[0] for w in wraps], dtype=int)
  out['wrap_objid'] = np.array([w[1] for w in wraps], dtype=int)
  out['wrap_prm'] = np.array([w[2] for w in wraps], dtype=float)
  s.tendons = tendons


def _check_spatial(t: Element, wraps):
  """Validates a spatial tendon path with MuJoCo's rules (mjCTendon::Compile)."""
  n = len(wraps)
  for i, (w, obj, _) in enumerate(wraps):
    prev = wraps[i - 1][0] if i > 0 else None
    nxt = wraps[i + 1][0] if i < n - 1 else None
    if w == WrapType.PULLEY:
      if prev == WrapType.PULLEY:
        raise t.error(f'consecutive pulleys in a spatial tendon (path element {i})')
      if nxt is None:
        raise t.error('a spatial tendon path must not end with a pulley')
    elif w == WrapType.SITE:
      if prev in (None, WrapType.PULLEY) and nxt in (None, WrapType.PULLEY):
        raise t.error(f'site at path element {i} needs a neighbour that is not a pulley')
      if nxt == WrapType.SITE and wraps[i + 1][1] == obj:
        raise t.error(f'site at path element {i} is repeated')
    elif prev != WrapType.SITE or nxt != WrapType.SITE:
      raise t.error(f'wrapping geom at path element {i} is not between two sites')

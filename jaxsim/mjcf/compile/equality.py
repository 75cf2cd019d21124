"""<equality>: connect, weld, joint and tendon constraints (mjXReader::OneEquality in
xml_native_reader.cc, mjCEquality::Compile in user_objects.cc).

Reads the <equality> sections and the state's body, site, joint and tendon names; writes the eq_*
arrays and neq into out and the equality namespace. eq_data is jaxsim's layout: MuJoCo's
mjNEQDATA = 11 values, then a flag asking mj_setConst to compute a weld's relative pose.
"""

from __future__ import annotations

import numpy as np

from jaxsim._src.enums import EPS, EqType, JointType, ObjType
from jaxsim.mjcf import schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element

NEQDATA = 12  # eq_data's width (see above)


def compile_equality(s: CompileState, sections: list[Element]):
  """Reads every equality constraint, resolves its objects, and writes the eq_* arrays."""
  out = s.out
  rows = []
  for sec in sections:
    util.only(sec, {'connect', 'weld', 'joint', 'tendon', 'flex', 'flexvert', 'flexstrain'})
    for e in sec.children:
      if e.tag.startswith('flex'):
        raise e.error('flex equality constraints are not supported by jaxsim')
      util.only(e, set())
      cls = s.cls_of(e, 'main')
      table = {
        'connect': schema.EQ_CONNECT,
        'weld': schema.EQ_WELD,
        'joint': schema.EQ_JOINT,
        'tendon': schema.EQ_TENDON,
      }[e.tag]
      attrs = s.read_element(e, table, 'equality', cls)
      s.register('equality', e, len(rows))
      data = np.zeros(NEQDATA)
      data[10] = 1.0
      obj1 = obj2 = -1
      objtype = ObjType.BODY
      if e.tag in ('connect', 'weld'):
        has_site = 'site1' in attrs or 'site2' in attrs
        has_body = 'body1' in attrs or 'body2' in attrs
        if has_site and has_body:
          raise e.error('use either body1/body2 or site1/site2, not both', attribute='site1')
        if has_site:
          if 'site1' not in attrs or 'site2' not in attrs:
            raise e.error('site1 and site2 must be given together', attribute='site2')
          if 'anchor' in attrs or 'relpose' in attrs:
            raise e.error('anchor/relpose cannot be used with sites', attribute='anchor')
          objtype = ObjType.SITE
          obj1 = s.lookup('site', e, 'site1')
          obj2 = s.lookup('site', e, 'site2')
        else:
          if 'body1' not in attrs:
            raise e.error('missing required attribute', attribute='body1')
          obj1 = s.lookup('body', e, 'body1')
          obj2 = s.lookup('body', e, 'body2') if 'body2' in attrs else 0
          if e.tag == 'connect' and 'anchor' not in attrs:
            raise e.error('missing required attribute', attribute='anchor')
        if e.tag == 'connect':
          typ = EqType.CONNECT
          data[0:3] = attrs.get('anchor', np.zeros(3))
        else:
          typ = EqType.WELD
          data[0:3] = attrs.get('anchor', np.zeros(3))
          relpose = attrs.get('relpose', np.array([0, 1, 0, 0, 0, 0, 0.0]))
          if 'relpose' in attrs and np.linalg.norm(relpose[3:]) < EPS:
            pass
          data[3:10] = relpose if 'relpose' in attrs else np.array([0, 0, 0, 1, 0, 0, 0.0])
          data[10] = attrs.get('torquescale', 1.0)
          # data[11] = 1: relative pose to be computed at qpos0 (mj_setConst).
          data[11] = 0.0 if 'relpose' in attrs and np.linalg.norm(relpose[3:]) > EPS else 1.0
      else:
        typ = EqType.JOINT if e.tag == 'joint' else EqType.TENDON
        ns = 'joint' if e.tag == 'joint' else 'tendon'
        objtype = ObjType.UNKNOWN  # MuJoCo leaves joint and tendon equalities' object type unset
        k1, k2 = f'{ns}1', f'{ns}2'
        if k1 not in attrs:
          raise e.error('missing required attribute', attribute=k1)
        obj1 = s.lookup(ns, e, k1)
        obj2 = s.lookup(ns, e, k2) if k2 in attrs else -1
        poly = np.array([0, 1, 0, 0, 0.0])
        if 'polycoef' in attrs:
          poly[: len(attrs['polycoef'])] = attrs['polycoef']
        data[0:5] = attrs.get('polycoef', poly) if len(attrs.get('polycoef', poly)) == 5 else poly
        if ns == 'joint':
          for jid in (obj1, obj2):
            if jid >= 0 and s.joints[jid]['type'] not in (JointType.SLIDE, JointType.HINGE):
              raise e.error('joint equality needs hinge or slide joints', attribute=k1)
      rows.append((typ, obj1, obj2, objtype, attrs, data))
  out['neq'] = len(rows)
  out['eq_type'] = np.array([r[0] for r in rows], dtype=int)
  out['eq_obj1id'] = np.array([r[1] for r in rows], dtype=int)
  out['eq_obj2id'] = np.array([r[2] for r in rows], dtype=int)
  out['eq_objtype'] = np.array([r[3] for r in rows], dtype=int)
  out['eq_active0'] = np.array([int(r[4]['active']) for r in rows], dtype=int)
  out['eq_solref'] = util.rows([r[4]['solref'] for r in rows], 2)
  out['eq_solimp'] = util.rows([r[4]['solimp'] for r in rows], 5)
  out['eq_data'] = util.rows([r[5] for r in rows], NEQDATA)

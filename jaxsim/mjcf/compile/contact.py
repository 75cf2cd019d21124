"""<contact>: explicit geom pairs and body-pair exclusions (mjXReader::OnePair, mjCPair and
mjCBodyPair::Compile in user_objects.cc; mjCModel orders both by body signature).

Reads the <contact> sections, the <pair> default classes and the state's geoms and bodies; writes
the pair_* and exclude_* arrays into out and the pair and exclude namespaces.
"""

from __future__ import annotations

import numpy as np

from jaxsim.mjcf import schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element


def compile_contact(s: CompileState, sections: list[Element]):
  """Reads every <pair> and <exclude>, orders them by body signature, and writes their arrays."""
  out = s.out
  pairs, excludes = [], []
  for sec in sections:
    util.only(sec, {'pair', 'exclude'})
    for e in sec.children:
      util.only(e, set())
      if e.tag == 'pair':
        cls = s.cls_of(e, 'main')
        base = s.defaults.get(cls, 'pair', e)
        # MuJoCo 4 gives unspecified pair parameters the pair defaults (no geom mixing).
        attrs = schema.read_attrs(e, schema.PAIR, base)
        for req in ('geom1', 'geom2'):
          if req not in attrs:
            raise e.error('missing required attribute', attribute=req)
        g1 = s.lookup('geom', e, 'geom1')
        g2 = s.lookup('geom', e, 'geom2')
        if s.geoms[g1]['body'] > s.geoms[g2]['body']:
          g1, g2 = g2, g1
        if attrs['condim'] not in (1, 3, 4, 6):
          raise e.error(f'condim must be 1, 3, 4 or 6, got {attrs["condim"]}', 'condim')
        b1, b2 = s.geoms[g1]['body'], s.geoms[g2]['body']
        p = {**attrs, 'geom1': g1, 'geom2': g2, 'signature': (b1 << 16) + b2, 'elem': e}
        pairs.append(p)
      else:
        attrs = schema.read_attrs(e, schema.EXCLUDE)
        for req in ('body1', 'body2'):
          if req not in attrs:
            raise e.error('missing required attribute', attribute=req)
        b1 = s.lookup('body', e, 'body1')
        b2 = s.lookup('body', e, 'body2')
        excludes.append(((min(b1, b2) << 16) + max(b1, b2), e))
  # MuJoCo orders pairs and excludes by body signature (stable), then assigns ids.
  pairs.sort(key=lambda p: p['signature'])
  excludes.sort(key=lambda x: x[0])
  for i, p in enumerate(pairs):
    s.register('pair', p['elem'], i)
  for i, (_, e) in enumerate(excludes):
    s.register('exclude', e, i)
  excludes = [x[0] for x in excludes]
  out['npair'] = len(pairs)
  out['nexclude'] = len(excludes)
  out['pair_geom1'] = np.array([p['geom1'] for p in pairs], dtype=int)
  out['pair_geom2'] = np.array([p['geom2'] for p in pairs], dtype=int)
  out['pair_dim'] = np.array([p['condim'] for p in pairs], dtype=int)
  out['pair_signature'] = np.array([p['signature'] for p in pairs], dtype=int)
  out['pair_friction'] = util.rows([p['friction'] for p in pairs], 5)
  out['pair_solref'] = util.rows([p['solref'] for p in pairs], 2)
  out['pair_solreffriction'] = util.rows([p['solreffriction'] for p in pairs], 2)
  out['pair_solimp'] = util.rows([p['solimp'] for p in pairs], 5)
  out['pair_margin'] = np.array([p['margin'] for p in pairs], dtype=float)
  out['pair_gap'] = np.array([p['gap'] for p in pairs], dtype=float)
  out['pair_adhesion'] = np.array([p['adhesion'] for p in pairs], dtype=float)
  out['exclude_signature'] = np.array(excludes, dtype=int)

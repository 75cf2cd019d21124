"""<custom>: numeric and text fields (tuples are checked, not kept) (mjXReader::Custom in
xml_native_reader.cc, mjCNumeric and mjCText::Compile in user_objects.cc).

Reads the <custom> sections; writes the numeric_* arrays and text_data into out and the numeric
and text namespaces.
"""

from __future__ import annotations

import numpy as np

from jaxsim.mjcf import schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element


def compile_custom(s: CompileState, sections: list[Element]):
  """Reads every numeric, text and tuple, and writes the numeric and text fields."""
  numeric = []
  texts = []
  for sec in sections:
    util.only(sec, {'numeric', 'text', 'tuple'})
    for e in sec.children:
      if e.tag == 'numeric':
        util.only(e, set())
        a = schema.read_attrs(e, schema.NUMERIC)
        if 'name' not in a:
          raise e.error('missing required attribute', attribute='name')
        data = a.get('data', np.zeros(0))
        size = a.get('size', len(data))
        if size < len(data) or size <= 0:
          raise e.error('numeric size must be positive and hold the data', attribute='size')
        if size > util.MAX_ARRAY:
          raise e.error(f'numeric size {size} is too large (at most {util.MAX_ARRAY:.0e})', 'size')
        full = np.zeros(size)
        full[: len(data)] = data
        s.register('numeric', e, len(numeric))
        numeric.append(full)
      elif e.tag == 'text':
        util.only(e, set())
        a = schema.read_attrs(e, schema.TEXT)
        if 'name' not in a or 'data' not in a:
          raise e.error('missing required attribute', attribute='data' if 'name' in a else 'name')
        s.register('text', e, len(texts))
        texts.append(a['data'])
      else:
        util.only(e, {'element'})
        schema.read_attrs(e, schema.TUPLE)
        for el in e.children:
          util.only(el, set())
          schema.read_attrs(el, schema.TUPLE_ELEMENT)
  out = s.out
  out['nnumeric'] = len(numeric)
  out['numeric_size'] = np.array([len(n) for n in numeric], dtype=int)
  out['numeric_adr'] = util.adr(out['numeric_size'])
  out['numeric_data'] = np.concatenate(numeric) if numeric else np.zeros(0)
  out['text_data'] = tuple(texts)

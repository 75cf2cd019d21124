"""<worldbody>: the body tree as written, with its frames and replicates; then MuJoCo's element
order (mjXReader::Body in xml_native_reader.cc, mjCModel's depth-first numbering; replicate as
mjXReader expands it).

read_worldbody reads the tree into the state's world body (bodies[0]), each body dict holding its
joints, geoms, sites, cameras and lights as attribute dicts with the frame they sit in; order_tree
numbers bodies depth-first, fills the state's bodies, joints, geoms, sites, cameras and lights,
and registers their names. Nothing is compiled yet: bodies.py does that.
"""

from __future__ import annotations

import copy

import numpy as np

from jaxsim._src.enums import JointType
from jaxsim.mjcf import frames, schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.defaults import BUILTIN
from jaxsim.mjcf.parse import Element

# the attribute table of each element of a body
BODY_SCHEMA = {
  'body': schema.BODY,
  'frame': schema.FRAME,
  'inertial': schema.INERTIAL,
  'joint': schema.JOINT,
  'freejoint': schema.FREEJOINT,
  'geom': schema.GEOM,
  'site': schema.SITE,
  'camera': schema.CAMERA,
  'light': schema.LIGHT,
}


def check_ignored_tree(elem: Element):
  """Checks the element and attribute names of a <body> or <frame> placed directly in <mujoco>
  against the schema, reading nothing: mjXReader's schema accepts them there and its compiler
  never looks at them."""
  table = BODY_SCHEMA[elem.tag]
  for attr in elem.attrs:
    if attr not in table:
      raise elem.error(f'unknown attribute of <{elem.tag}>', attribute=attr)
  nested = elem.tag in ('body', 'frame')
  util.only(elem, set(BODY_SCHEMA) | {'replicate'} if nested else set())
  for child in elem.children:
    if child.tag != 'replicate':  # whose contents MuJoCo's schema check does not reach
      check_ignored_tree(child)


def read_worldbody(s: CompileState, root: Element) -> None:
  """Reads every <worldbody> into the world body, bodies[0], which it creates and names."""
  worlds = root.find('worldbody')
  world = {
    'id': 0,
    'parent': -1,
    'pos': np.zeros(3),
    'quat': np.array([1.0, 0, 0, 0]),
    'elem': worlds[0] if worlds else root,
    'mocap': False,
    'gravcomp': 0.0,
    'fuse': 1,
    'joints': [],
    'geoms': [],
    'sites': [],
    'children': [],
    'explicit_inertial': False,
    'inertial': None,
    'depth': 0,
  }
  s.bodies.append(world)
  s.register('body', Element('worldbody', {'name': 'world'}, [], s.model_file, 0), 0)
  for w in worlds:
    if w.attrs:
      raise w.error('the world body cannot have attributes', attribute=next(iter(w.attrs)))
    read_body_children(s, w, world, 'main', np.zeros(3), np.array([1.0, 0, 0, 0]))


def read_body_children(
  s: CompileState, elem: Element, body: dict, cls: str, fpos, fquat, lax: bool = False
):
  """Reads a body's (or frame's) children; `fpos, fquat` is the enclosing frame's pose.

  lax: inside a <frame> or <replicate> of the model's own XML, where MuJoCo 4's schema check
  does not reach: unknown attributes and children of leaf elements are ignored (and listed).
  """
  allowed = {'body', 'frame', 'inertial', 'joint', 'freejoint', 'geom', 'site', 'camera'}
  allowed |= {'light', 'replicate'}
  util.only(elem, allowed)
  framed = elem.tag == 'frame'
  lax = lax or (framed and '_attach' not in elem.attrs)
  for child in elem.children:
    tag = child.tag
    if body['id'] == 0 and tag in ('inertial', 'joint', 'freejoint'):
      raise child.error(f'the world body cannot have <{tag}>')
    if tag == 'body':
      sub = _lenient(s, child, schema.BODY, keep=True) if lax else child
      _read_body(s, sub, body, cls, fpos, fquat, lax)
    elif tag == 'frame':
      util.only(child, allowed)
      attrs = schema.read_attrs(_lenient(s, child, schema.FRAME, True, ''), schema.FRAME)
      sub = attrs.get('childclass', cls)
      if sub not in s.defaults.classes:
        raise child.error(f'unknown default class {sub!r}', attribute='childclass')
      q = frames.resolve_orientation(attrs, s.degree(child), s.eulerseq(child), child)
      p, q = frames.frame_accum(fpos, fquat, attrs.get('pos', np.zeros(3)), q)
      read_body_children(s, child, body, sub, p, q, lax)
    elif tag == 'replicate':
      _replicate(s, child, body, cls, fpos, fquat)
    elif lax:
      leaf = _lenient(s, child, BODY_SCHEMA[tag], keep=False)
      _read_leaf(s, leaf, body, cls, fpos, fquat, framed)
    else:
      _read_leaf(s, child, body, cls, fpos, fquat, framed)


def _lenient(
  s: CompileState, elem: Element, table: dict, keep: bool, where: str = ' inside a <frame>'
) -> Element:
  """elem without the attributes MuJoCo ignores (those not in `table`; names starting with '_'
  are jaxsim's own markers, dropped silently) and, unless keep, without the children it ignores
  (all but a geom's plugin); each one listed as unsupported. `where` ends the note."""
  drop = sorted(k for k in elem.attrs if k not in table and not k.startswith('_'))
  kids = elem.children if keep else [c for c in elem.children if c.tag == 'plugin']
  for k in drop:
    s.note_unsupported(
      f'attribute {k!r} of <{elem.tag}> ({elem.file}:{elem.line}) is ignored, as MuJoCo does'
      + where
    )
  for c in elem.children:
    if c not in kids:
      s.note_unsupported(
        f'<{c.tag}> inside <{elem.tag}> ({c.file}:{c.line}) is ignored, as MuJoCo does' + where
      )
  attrs = {k: v for k, v in elem.attrs.items() if k in table}
  if len(attrs) == len(elem.attrs) and len(kids) == len(elem.children):
    return elem
  return Element(elem.tag, attrs, kids, elem.file, elem.line)


def _read_leaf(s: CompileState, child: Element, body: dict, cls: str, fpos, fquat, framed: bool):
  """One <inertial>, <joint>, <freejoint>, <geom>, <site>, <camera> or <light> of a body."""
  tag = child.tag
  if tag == 'inertial':
    if framed:
      raise child.error('<inertial> cannot be inside a <frame>')
    if body['inertial'] is not None:
      raise child.error('a body can have only one <inertial>')
    util.only(child, set())
    attrs = schema.read_attrs(child, schema.INERTIAL)
    for req in ('pos', 'mass'):
      if req not in attrs:
        raise child.error('missing required attribute', attribute=req)
    attrs['elem'] = child
    body['inertial'] = attrs
    body['explicit_inertial'] = True
  elif tag in ('joint', 'freejoint'):
    util.only(child, set())
    if tag == 'freejoint':
      # Free joints take MuJoCo's built-in joint values, never a default class.
      attrs = schema.read_attrs(child, schema.FREEJOINT, copy.deepcopy(BUILTIN['joint']))
      attrs['type'] = JointType.FREE
    else:
      c = s.cls_of(child, cls)
      attrs = s.read_element(child, schema.JOINT, 'joint', c)
    attrs['elem'] = child
    attrs['frame'] = (fpos, fquat) if framed else None
    body['joints'].append(attrs)
  elif tag in ('geom', 'site', 'camera', 'light'):
    util.only(child, {'plugin'} if tag == 'geom' else set())
    if tag == 'geom' and child.children:
      raise child.children[0].error('geom plugins are not supported by jaxsim')
    c = s.cls_of(child, cls)
    table = {
      'geom': schema.GEOM,
      'site': schema.SITE,
      'camera': schema.CAMERA,
      'light': schema.LIGHT,
    }[tag]
    attrs = s.read_element(child, table, tag, c)
    attrs['elem'] = child
    attrs['frame'] = (fpos, fquat) if framed else None
    body.setdefault(tag + 's', []).append(attrs)


def _replicate(s: CompileState, elem: Element, body: dict, cls: str, fpos, fquat):
  """Expands `<replicate>`: `count` copies, each offset and rotated from the previous one.

  Names get this replicate's suffix, then those of the replicates around it (`_post`, set by
  _suffixed): MuJoCo expands the innermost replicate first. MuJoCo ignores attributes of
  `<replicate>` it does not know; jaxsim loads such a model too and lists them as unsupported.
  """
  post = elem.attrs.get('_post', '')
  attrs = schema.read_attrs(_lenient(s, elem, schema.REPLICATE, True, ''), schema.REPLICATE)
  if 'count' not in attrs:
    raise elem.error('missing required attribute', attribute='count')
  count = attrs['count']
  if count <= 0:
    raise elem.error('count must be positive', attribute='count')
  sub = attrs.get('childclass', cls)
  if sub not in s.defaults.classes:
    raise elem.error(f'unknown default class {sub!r}', attribute='childclass')
  offset = attrs.get('offset', np.zeros(3))
  euler = attrs.get('euler', np.zeros(3))
  seq = s.eulerseq(elem)
  step = frames.resolve_orientation({'euler': euler}, s.degree(elem), seq, elem)
  pos, quat = np.zeros(3), np.array([1.0, 0, 0, 0])
  digits = len(str(count))
  for i in range(count):
    # The orientation is recomputed from i*euler rather than accumulated, as MuJoCo does.
    quat = frames.resolve_orientation({'euler': i * euler}, s.degree(elem), seq, elem)
    suffix = attrs.get('sep', '') + str(i).rjust(digits, '0') + post
    copy_elem = _suffixed(Element('frame', {}, elem.children, elem.file, elem.line), suffix)
    p, q = frames.frame_accum(fpos, fquat, pos, quat)
    read_body_children(s, copy_elem, body, sub, p, q)
    pos, _ = frames.frame_accum(pos, quat, offset, step)


def _read_body(
  s: CompileState, elem: Element, parent: dict, cls: str, fpos, fquat, lax: bool = False
):
  """One <body>: its frame in its parent (after the enclosing frames), then its children."""
  attrs = schema.read_attrs(elem, schema.BODY)
  sub = attrs.get('childclass', cls)
  if sub not in s.defaults.classes:
    raise elem.error(f'unknown default class {sub!r}', attribute='childclass')
  q = frames.resolve_orientation(attrs, s.degree(elem), s.eulerseq(elem), elem)
  p = attrs.get('pos', np.zeros(3))
  p, q = frames.frame_accum(fpos, fquat, p, q)
  body = {
    'id': -1,
    'elem': elem,
    'parent_ref': parent,
    'pos': p,
    'quat': q,
    'mocap': attrs.get('mocap', False),
    'gravcomp': attrs.get('gravcomp', 0.0),
    # fuse="false" keeps the body when static bodies are fused (MuJoCo 4)
    'fuse': attrs.get('fuse', 1),
    'joints': [],
    'geoms': [],
    'sites': [],
    'children': [],
    'explicit_inertial': False,
    'inertial': None,
    'depth': parent['depth'] + 1,
  }
  parent['children'].append(body)
  read_body_children(s, elem, body, sub, np.zeros(3), np.array([1.0, 0, 0, 0]), lax)


def order_tree(s: CompileState):
  """Assigns ids in depth-first order and registers names (MuJoCo's element order)."""
  world = s.bodies[0]
  order = []

  def visit(b):
    for c in b['children']:
      order.append(c)
      visit(c)

  visit(world)
  for i, b in enumerate(order, start=1):
    b['id'] = i
    b['parent'] = b['parent_ref']['id']
    s.bodies.append(b)
    s.register('body', b['elem'], i)
  for b in s.bodies:
    for j in b['joints']:
      j['body'] = b['id']
      j['id'] = len(s.joints)
      s.register('joint', j['elem'], len(s.joints))
      s.joints.append(j)
  for b in s.bodies:
    for g in b['geoms']:
      g['body'] = b['id']
      s.register('geom', g['elem'], len(s.geoms))
      s.geoms.append(g)
  for b in s.bodies:
    for site in b['sites']:
      site['body'] = b['id']
      s.register('site', site['elem'], len(s.sites))
      s.sites.append(site)
  for b in s.bodies:
    for c in b.get('cameras', []):
      c['body'] = b['id']
      s.register('camera', c['elem'], len(s.cameras))
      s.cameras.append(c)
    for lt in b.get('lights', []):
      lt['body'] = b['id']
      s.register('light', lt['elem'], len(s.lights))
      s.lights.append(lt)


def _suffixed(elem: Element, suffix: str) -> Element:
  """A copy of a body subtree whose element names carry `suffix` (replicate's naming)."""
  attrs = dict(elem.attrs)
  if elem.tag == 'replicate':
    # a nested replicate appends its own suffix first (see _replicate)
    attrs['_post'] = suffix
    return Element(elem.tag, attrs, elem.children, elem.file, elem.line)
  if attrs.get('name'):
    attrs['name'] += suffix
  kids = [_suffixed(c, suffix) for c in elem.children]
  return Element(elem.tag, attrs, kids, elem.file, elem.line)

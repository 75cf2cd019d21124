"""`<asset><model>` and `<attach>`: a body, frame or worldbody of another model (or of this one)
inserted into the body tree, with names prefixed (mjs_attach, as MJCF's attach element uses it).

The expansion rewrites the parsed tree before the compiler sees it:

- the attach element becomes a `<frame>` holding a copy of the source body or frame (or the
  source worldbody's content), every name in it prefixed;
- from another model, its default classes come along prefixed (the child's `main` as a class of
  MuJoCo's built-in values, which the new frame takes as its childclass), and so do its assets,
  whose files resolve against the child's own directory and asset folders;
- the child's pairs, excludes, tendons, equalities, actuators and sensors whose references all
  lie in the attached subtree are appended to this model's lists with names and references
  prefixed (pairs, excludes and two-object sensors may keep one plain reference, as in replicate);
- the child's keyframes become keyframes of this model, prefixed: qpos0 and zeros everywhere but
  the attached joints and actuators, which take the child's values (for an attach inside a
  `<replicate>`, those of the first replica, as MuJoCo leaves them).

Elements of another model compile with that model's angle unit, Euler sequence and autolimits
(the compiler looks them up by the file an element came from), as MuJoCo compiles each model's
elements with its own settings; a child whose other `<compiler>` settings differ (inertia
options, fusestatic ...) is refused, naming the setting.

Not reproduced: when one child is attached several times, MuJoCo can give a keyframe made by an
earlier attach values of joints a later attach brings (mujoco 4.0.0: a child's free joint, absent
from the subtree of the first attach, takes the child's keyframe value in that attach's keyframe);
here an attach's keyframes set only the joints and actuators that attach brought.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping

from jaxsim._src.enums import JointType
from jaxsim.mjcf import schema
from jaxsim.mjcf.parse import Element, expand_includes, parse_xml
from jaxsim.mjcf.replicate import ACTUATOR_REFS, EQUALITY_REFS

# compiles a model tree on its own: (root, directory, read, model file) -> its compiled arrays
CompileModel = Callable[[Element, str, Callable[[str], bytes], str], Mapping]

_NAMED = {'body', 'frame', 'joint', 'freejoint', 'geom', 'site', 'camera', 'light'}
_TREE_KIND = {'body': 'body', 'joint': 'joint', 'freejoint': 'joint', 'geom': 'geom'}
_TREE_KIND |= {'site': 'site', 'camera': 'camera', 'light': 'light', 'frame': 'frame'}
# references of body-tree elements to assets and bodies
_ASSET_REFS = {
  'geom': ('mesh', 'material', 'hfield'),
  'site': ('material',),
  'material': ('texture',),
}
_LIST_SECTIONS = (('contact', ('pair', 'exclude')), ('tendon', None), ('equality', None))
_LIST_SECTIONS += (('actuator', None), ('sensor', None))
# compiler settings that change how elements compile, and jaxsim's (MuJoCo's) defaults
_COMPILER_DEFAULTS = {
  'autolimits': 'true',
  'angle': 'degree',
  'eulerseq': 'xyz',
  'inertiafromgeom': 'auto',
  'inertiagrouprange': '0 5',
  'boundmass': '0',
  'boundinertia': '0',
  'balanceinertia': 'false',
  'settotalmass': '-1',
  'fitaabb': 'false',
  'alignfree': 'false',
  'discardvisual': 'false',
  'fusestatic': 'false',
  'coordinate': 'local',
}
# settings the compiler applies per element, by the element's file
_PER_MODEL = ('angle', 'eulerseq', 'autolimits')
# <compiler conflict="merge">'s strategies for attributes both models author differently
# (mjs_attach's attribute merging); other fields keep the parent's value
_MERGE_MIN = {'timestep', 'tolerance', 'ls_tolerance', 'noslip_tolerance', 'ccd_tolerance'}
_MERGE_MIN |= {'sleep_tolerance'}
_MERGE_MAX = {'iterations', 'ls_iterations', 'noslip_iterations', 'ccd_iterations'}
_MERGE_MAX |= {'sdf_iterations', 'sdf_initpoints', 'memory', 'nkey', 'nuserdata'}
_MERGE_MAX |= {k for k in schema.SIZE if k.startswith('nuser_')}
_MERGE_ERROR = {'gravity', 'wind', 'magnetic', 'density', 'viscosity', 'integrator', 'cone'}
_MERGE_ERROR |= {'jacobian', 'solver', 'impratio', 'o_margin', 'o_solref', 'o_solimp'}
_MERGE_ERROR |= {'o_friction'}


def expand(
  root: Element, directory: str, read: Callable[[str], bytes], compile_model: CompileModel
) -> Element:
  """The model tree with every `<attach>` expanded and `<asset><model>` removed.

  compile_model (jaxsim.mjcf.compile.compile_tree, which calls this) compiles an attached model
  on its own, for the joint and actuator layout its keyframes are read with.
  """
  if not _has(root, 'attach') and not any(a.find('model') for a in root.find('asset')):
    return root
  return _Expansion(root, directory, read, compile_model).run()


def _files(e: Element) -> set[str]:
  """The files the elements of a tree were read from."""
  out = {e.file}
  for c in e.children:
    out |= _files(c)
  return out


def _has(e: Element, tag: str) -> bool:
  return any(c.tag == tag or _has(c, tag) for c in e.children)


def _compiler(root: Element) -> dict[str, str]:
  out = dict(_COMPILER_DEFAULTS)
  for c in root.find('compiler'):
    out.update({k: v for k, v in c.attrs.items() if k in _COMPILER_DEFAULTS})
  return out


def _dirs(root: Element) -> dict[str, str]:
  out = {'meshdir': '', 'texturedir': ''}
  for c in root.find('compiler'):
    if 'assetdir' in c.attrs:
      out = {'meshdir': c.attrs['assetdir'], 'texturedir': c.attrs['assetdir']}
    for k in ('meshdir', 'texturedir'):
      if k in c.attrs:
        out[k] = c.attrs[k]
  return out


class _Child:
  """A model asset: its parsed tree, where its files are, and its keyframe data by name."""

  def __init__(self, elem: Element, root: Element, directory: str):
    self.elem, self.root, self.directory = elem, root, directory
    self.dirs = _dirs(root)
    self._compiled = None

  def compiled(self, read: Callable[[str], bytes], compile_model: CompileModel) -> Mapping:
    """The child compiled on its own (for its joint and actuator layout in keyframes)."""
    if self._compiled is None:
      self._compiled = compile_model(self.root, self.directory, read, self.elem.file)
    return self._compiled


class _Expansion:
  def __init__(
    self,
    root: Element,
    directory: str,
    read: Callable[[str], bytes],
    compile_model: CompileModel,
  ):
    self.root, self.directory, self.read = root, directory, read
    self.compile_model = compile_model
    self.models: dict[str, _Child] = {}
    self.defaults: list[Element] = []
    self.assets: list[Element] = []
    self.lists: dict[str, list[Element]] = {}
    self.keys: list[Element] = []
    self.copied: set[tuple] = set()
    self.compilers: dict[str, dict] = {}
    # the authored global attributes, as merged so far: option, its flags, size
    self.globals = _globals(root)
    self.globals_changed = False

  # ---------------------------------------------------------------- models

  def load_models(self, root: Element) -> None:
    for sec in root.find('asset'):
      for m in sec.find('model'):
        extra = set(m.attrs) - {'name', 'file', 'content_type'}
        if extra:
          raise m.error('unknown attribute of <model>', attribute=sorted(extra)[0])
        if 'file' not in m.attrs:
          raise m.error('missing required attribute', attribute='file')
        if m.attrs.get('content_type', 'text/xml') != 'text/xml':
          raise m.error('only text/xml sub-models are supported', attribute='content_type')
        path = os.path.normpath(os.path.join(self.directory, m.attrs['file']))
        try:
          data = self.read(path)
        except OSError as e:
          raise m.error(f'cannot read model file {path!r}: {e.strerror}', attribute='file') from e
        sub = parse_xml(data, path)
        if sub.tag != 'mujoco':
          raise m.error(f'a sub-model must be MJCF (<mujoco>), got <{sub.tag}>', attribute='file')
        subdir = os.path.dirname(path)
        sub = expand_includes(sub, self.read, subdir, 0, (path,))
        if _has(sub, 'attach'):
          sub = _Expansion(sub, subdir, self.read, self.compile_model).run()
        name = m.attrs.get('name') or sub.attrs.get('model', 'MuJoCo Model')
        if name in self.models:
          raise m.error(f'duplicate model name {name!r}', attribute='name')
        self.models[name] = _Child(m, sub, subdir)

  def check_compiler(self, a: Element, child: _Child) -> None:
    """Registers the child's angle unit, Euler sequence and autolimits for its elements (the
    compiler reads them per element file); refuses other differing compiler settings."""
    ours, theirs = _compiler(self.root), _compiler(child.root)
    for k in sorted(_COMPILER_DEFAULTS):
      if k in _PER_MODEL:
        continue
      if ours[k].split() != theirs[k].split():
        raise a.error(
          f'the attached model sets <compiler {k}="{theirs[k]}"> and this model '
          f'"{ours[k]}": jaxsim compiles attached elements with this model\'s {k}',
          attribute='model',
        )
    settings = {
      'angle': 1 if theirs['angle'] == 'degree' else 0,
      'eulerseq': theirs['eulerseq'],
      'autolimits': theirs['autolimits'] == 'true',
    }
    nested = json.loads(child.root.attrs.get('_compilers', '{}'))
    for f in _files(child.root):
      s = nested.get(f, settings)
      if self.compilers.get(f, s) != s:
        raise a.error(f'file {f!r} is part of two models with different compiler settings')
      self.compilers[f] = s

  def merge_globals(self, a: Element, child: _Child, name: str) -> None:
    """The child's authored <option>, <flag> and <size> attributes against this model's, by
    this model's <compiler conflict> policy (mjs_attach): "warning" (default) keeps this
    model's values, "error" refuses attributes both models author differently, "merge" adopts
    what only the child authors and merges the rest (minimum, maximum, union of flags, or an
    error for physical constants)."""
    policy = 'warning'
    for c in self.root.find('compiler'):
      policy = c.attrs.get('conflict', policy)
    if policy not in ('warning', 'merge', 'error'):
      raise a.error(f'invalid conflict policy {policy!r}')
    theirs = _globals(child.root)
    where = f'Attach conflict when attaching {name!r} to {self.root.attrs.get("model", "")!r}'
    for sec, vals in theirs.items():
      ours = self.globals[sec]
      for k, v in vals.items():
        mine = ours.get(k)
        if mine is not None and _same(mine, v):
          continue
        if policy == 'merge':
          if mine is None:
            new = v
          elif sec == 'flag':
            on = 'disable' if k in schema.DISABLE_FLAGS else 'enable'
            new = on if on in (mine, v) else mine
          elif k in _MERGE_MIN or k in _MERGE_MAX:
            pick = min if k in _MERGE_MIN else max
            new = v if pick(float(mine), float(v)) == float(v) else mine
          elif k in _MERGE_ERROR:
            raise a.error(
              f'{where}, policy is merge: {k}: this model has {mine}, the attached one {v}',
              attribute='model',
            )
          else:
            continue
          if new != mine:
            ours[k] = new
            self.globals_changed = True
        elif policy == 'error' and mine is not None:
          raise a.error(
            f'{where}, policy is error: {k}: this model has {mine}, the attached one {v}',
            attribute='model',
          )

  # ---------------------------------------------------------------- tree walk

  def run(self) -> Element:
    self.load_models(self.root)
    for sec, only in _LIST_SECTIONS:
      for s in self.root.find(sec):
        for e in s.children:
          if only is None or e.tag in only:
            self.lists.setdefault(e.tag if sec == 'contact' else sec, []).append(e)
    worlds = [self.walk(w, 'main', '') for w in self.root.find('worldbody')]
    return self.assemble(worlds)

  def walk(self, e: Element, cls: str, first: str) -> Element:
    """e with its attaches expanded; cls: the childclass in effect, first: the name suffix of
    the first replica of the replicates around e."""
    kids = []
    for c in e.children:
      if c.tag == 'attach':
        kids.append(self.attach(c, cls, first))
        continue
      sub_cls = c.attrs.get('childclass', cls)
      sub_first = first
      if c.tag == 'replicate':
        try:
          digits = len(str(int(c.attrs.get('count', '1'))))
        except ValueError:
          digits = 1
        sub_first = c.attrs.get('sep', '') + '0' * digits + first
      kids.append(self.walk(c, sub_cls, sub_first) if c.children else c)
    return Element(e.tag, dict(e.attrs), kids, e.file, e.line)

  def attach(self, a: Element, cls: str, first: str) -> Element:
    extra = set(a.attrs) - {'model', 'body', 'frame', 'prefix'}
    if extra:
      raise a.error('unknown attribute of <attach>', attribute=sorted(extra)[0])
    if a.children:
      raise a.error('<attach> cannot have child elements')
    if 'prefix' not in a.attrs:
      raise a.error('missing required attribute', attribute='prefix')
    if 'body' in a.attrs and 'frame' in a.attrs:
      raise a.error("only one of 'body' and 'frame' can be given", attribute='frame')
    prefix = a.attrs['prefix']
    model = a.attrs.get('model')
    child = None
    if model is None:
      if 'body' not in a.attrs and 'frame' not in a.attrs:
        raise a.error("either 'body' or 'frame' must be given for a self-attach", attribute='body')
      source_root = self.root
    else:
      if model not in self.models:
        raise a.error(f'could not find model {model!r}', attribute='model')
      child = self.models[model]
      self.check_compiler(a, child)
      self.merge_globals(a, child, model)
      source_root = child.root
    kind = 'body' if 'body' in a.attrs else 'frame' if 'frame' in a.attrs else None
    if kind is None:
      src_cls = 'main'
      content = [c for w in source_root.find('worldbody') for c in w.children]
    else:
      found = _find(source_root, kind, a.attrs[kind])
      if found is None:
        where = 'the current model' if child is None else f'model {model!r}'
        raise a.error(f'could not find {kind} {a.attrs[kind]!r} in {where}', attribute=kind)
      src, src_cls = found
      content = [src]
    rename = _Renamer(prefix, child is not None)
    copies = [rename.tree(c) for c in content]
    names = rename.names
    if kind is not None and (child is None) and names.get(kind, set()) & _all_names(self.root):
      raise a.error(f'cannot attach: {kind} {prefix + a.attrs[kind]!r} already exists')
    frame_attrs: dict[str, str] = {}
    if child is not None:
      frame_attrs['childclass'] = prefix + src_cls
      self.copy_defaults(child, prefix)
      self.copy_assets(child, prefix)
    elif src_cls != cls:
      frame_attrs['childclass'] = src_cls
    source_lists = self.lists if child is None else _lists(child.root)
    for key, elems in source_lists.items():
      for e in list(elems):
        out = _copy_referencing(key, e, names, rename, child is not None)
        if out is not None:
          self.lists.setdefault(key, []).append(out)
    if child is not None and child.root.find('keyframe'):
      self.copy_keys(a, child, prefix, first, names)
    # '_attach': the attached tree is checked as its own file (not leniently, as in a <frame>)
    return Element('frame', {**frame_attrs, '_attach': ''}, copies, a.file, a.line)

  # ---------------------------------------------------------------- copies

  def copy_defaults(self, child: _Child, prefix: str) -> None:
    if (id(child), prefix) in self.copied:
      return
    self.copied.add((id(child), prefix))
    tops = child.root.find('default') or [Element('default', {}, [], child.elem.file, 0)]
    for top in tops:
      self.defaults.append(_prefixed_default(top, prefix, top=True))

  def copy_assets(self, child: _Child, prefix: str) -> None:
    if ('assets', id(child), prefix) in self.copied:
      return
    self.copied.add(('assets', id(child), prefix))
    for sec in child.root.find('asset'):
      for e in sec.children:
        if e.tag == 'model':
          continue
        attrs = dict(e.attrs)
        if 'file' in attrs and attrs['file']:
          folder = child.dirs['texturedir' if e.tag in ('texture', 'skin') else 'meshdir']
          path = os.path.join(child.directory, folder, attrs['file'])
          attrs['file'] = os.path.normpath(path)
          if e.tag in ('mesh', 'hfield') and not e.attrs.get('name'):
            attrs['name'] = os.path.splitext(os.path.basename(e.attrs['file']))[0]
          if e.tag == 'texture' and not e.attrs.get('name'):
            attrs['name'] = os.path.splitext(os.path.basename(e.attrs['file']))[0]
        if attrs.get('name'):
          attrs['name'] = prefix + attrs['name']
        for r in _ASSET_REFS.get(e.tag, ()):
          if attrs.get(r):
            attrs[r] = prefix + attrs[r]
        if e.tag in ('mesh', 'material', 'texture'):
          attrs['class'] = prefix + attrs.get('class', 'main')
        self.assets.append(Element(e.tag, attrs, e.children, e.file, e.line))

  def copy_keys(self, a: Element, child: _Child, prefix: str, first: str, names) -> None:
    c = child.compiled(self.read, self.compile_model)
    jn = list(c['names'].get('joint', ()))
    an = list(c['names'].get('actuator', ()))
    kn = list(c['names'].get('key', ()))
    jt, qadr, vadr = c['jnt_type'], c['jnt_qposadr'], c['jnt_dofadr']
    nq_of = {JointType.FREE: 7, JointType.BALL: 4}
    nv_of = {JointType.FREE: 6, JointType.BALL: 3}
    for k in range(int(c.get('nkey', len(kn)))):
      joints, actuators = {}, {}
      for j, name in enumerate(jn):
        if not name or name not in names.get('joint_src', set()):
          continue
        t = int(jt[j])
        q = c['key_qpos'][k][qadr[j] : qadr[j] + nq_of.get(t, 1)]
        v = c['key_qvel'][k][vadr[j] : vadr[j] + nv_of.get(t, 1)]
        joints[prefix + name + first] = [list(map(float, q)), list(map(float, v))]
      for i, name in enumerate(an):
        if not name or prefix + name not in names.get('actuator', set()):
          continue
        adr, num = int(c['actuator_actadr'][i]), int(c['actuator_actnum'][i])
        act = c['key_act'][k][adr : adr + num] if num else []
        actuators[prefix + name + first] = [float(c['key_ctrl'][k][i]), list(map(float, act))]
      attrs = {'_attached': json.dumps({'joints': joints, 'actuators': actuators})}
      if k < len(kn) and kn[k]:
        attrs['name'] = prefix + kn[k]
      attrs['time'] = repr(float(c['key_time'][k]))
      self.keys.append(Element('key', attrs, [], a.file, a.line))

  # ---------------------------------------------------------------- result

  def assemble(self, worlds: list[Element]) -> Element:
    root = self.root
    out = []
    listed = {'contact', 'tendon', 'equality', 'actuator', 'sensor'}
    done = set()
    for sec in root.children:
      if sec.tag == 'worldbody':
        if 'worldbody' not in done:
          out.extend(worlds)
          done.add('worldbody')
      elif sec.tag == 'asset':
        kids = [e for e in sec.children if e.tag != 'model']
        out.append(Element('asset', dict(sec.attrs), kids, sec.file, sec.line))
      elif sec.tag in listed:
        if sec.tag not in done:
          done.add(sec.tag)
          out.append(self.section(sec.tag, sec))
      elif sec.tag in ('option', 'size') and self.globals_changed:
        if sec.tag not in done:  # one element with the merged attributes
          done.add(sec.tag)
          out.append(self.global_section(sec.tag, sec))
      else:
        out.append(sec)
    for tag in ('option', 'size'):
      if self.globals_changed and tag not in done:
        out.append(self.global_section(tag, Element(tag, {}, [], root.file, root.line)))
    for tag in ('contact', 'tendon', 'equality', 'actuator', 'sensor'):
      if tag not in done and any(self.lists.get(k) for k in _section_keys(tag)):
        out.append(self.section(tag, Element(tag, {}, [], root.file, root.line)))
    if self.defaults:
      out.extend(self.defaults)
    if self.assets:
      out.append(Element('asset', {}, self.assets, root.file, root.line))
    if self.keys:
      out.append(Element('keyframe', {}, self.keys, root.file, root.line))
    attrs = dict(root.attrs)
    if self.compilers:
      # this model's own files keep its settings
      for f in _files(root):
        self.compilers.pop(f, None)
      attrs['_compilers'] = json.dumps(self.compilers)
    return Element(root.tag, attrs, out, root.file, root.line)

  def global_section(self, tag: str, first: Element) -> Element:
    """<option> (with its <flag>) or <size> holding the merged authored attributes."""
    kids = []
    if tag == 'option' and self.globals['flag']:
      kids = [Element('flag', dict(self.globals['flag']), [], first.file, first.line)]
    return Element(tag, dict(self.globals[tag]), kids, first.file, first.line)

  def section(self, tag: str, first: Element) -> Element:
    kids = [e for k in _section_keys(tag) for e in self.lists.get(k, [])]
    if tag == 'contact':
      kids += [
        e for s in self.root.find(tag) for e in s.children if e.tag not in ('pair', 'exclude')
      ]
    return Element(tag, dict(first.attrs), kids, first.file, first.line)


def _globals(root: Element) -> dict[str, dict[str, str]]:
  """A model's authored <option>, <flag> and <size> attributes (later elements win)."""
  out: dict[str, dict[str, str]] = {'option': {}, 'flag': {}, 'size': {}}
  for sec in ('option', 'size'):
    for e in root.find(sec):
      out[sec].update(e.attrs)
      for f in e.find('flag') if sec == 'option' else ():
        out['flag'].update(f.attrs)
  return out


def _same(a: str, b: str) -> bool:
  """Whether two attribute texts hold the same value (numbers compared as numbers)."""
  x, y = a.split(), b.split()
  try:
    return [float(v) for v in x] == [float(v) for v in y]
  except ValueError:
    return x == y


def _section_keys(tag: str) -> tuple[str, ...]:
  return ('pair', 'exclude') if tag == 'contact' else (tag,)


def _lists(root: Element) -> dict[str, list[Element]]:
  out: dict[str, list[Element]] = {}
  for sec, only in _LIST_SECTIONS:
    for s in root.find(sec):
      for e in s.children:
        if only is None or e.tag in only:
          out.setdefault(e.tag if sec == 'contact' else sec, []).append(e)
  return out


def _all_names(root: Element) -> set[str]:
  out = set()

  def walk(e):
    for c in e.children:
      if c.tag in _NAMED and c.attrs.get('name'):
        out.add(c.attrs['name'])
      walk(c)

  for w in root.find('worldbody'):
    walk(w)
  return out


def _find(root: Element, kind: str, name: str) -> tuple[Element, str] | None:
  """The body or frame named `name` and the default class in effect there."""

  def walk(e: Element, cls: str):
    for c in e.children:
      if c.tag == kind and c.attrs.get('name') == name:
        return c, cls
      if c.tag in ('body', 'frame', 'replicate'):
        r = walk(c, c.attrs.get('childclass', cls))
        if r is not None:
          return r
    return None

  for w in root.find('worldbody'):
    r = walk(w, 'main')
    if r is not None:
      return r
  return None


class _Renamer:
  """Copies body-tree elements with names (and, from another model, classes and asset
  references) prefixed, recording the names it made by kind."""

  def __init__(self, prefix: str, other_model: bool):
    self.prefix, self.other = prefix, other_model
    self.names: dict[str, set[str]] = {}

  def tree(self, e: Element) -> Element:
    attrs = dict(e.attrs)
    kind = _TREE_KIND.get(e.tag)
    if kind and attrs.get('name'):
      self.names.setdefault(kind + '_src', set()).add(attrs['name'])
      attrs['name'] = self.prefix + attrs['name']
      self.names.setdefault(kind, set()).add(attrs['name'])
    if self.other:
      for k in ('class', 'childclass'):
        if attrs.get(k):
          attrs[k] = self.prefix + attrs[k]
      for r in _ASSET_REFS.get(e.tag, ()):
        if attrs.get(r):
          attrs[r] = self.prefix + attrs[r]
    if e.tag in ('camera', 'light') and attrs.get('target'):
      attrs['target'] = self.prefix + attrs['target']
    kids = [self.tree(c) for c in e.children]
    return Element(e.tag, attrs, kids, e.file, e.line)


def _prefixed_default(e: Element, prefix: str, top: bool) -> Element:
  attrs = dict(e.attrs)
  attrs['class'] = prefix + attrs.get('class', 'main')
  if top:
    attrs['_root'] = '1'
  kids = []
  for c in e.children:
    if c.tag == 'default':
      kids.append(_prefixed_default(c, prefix, top=False))
    else:
      ca = dict(c.attrs)
      for r in _ASSET_REFS.get(c.tag, ()):
        if ca.get(r):
          ca[r] = prefix + ca[r]
      kids.append(Element(c.tag, ca, c.children, c.file, c.line))
  return Element(e.tag, attrs, kids, e.file, e.line)


# references of the referencing elements: attribute -> kind
_REFS = {
  'pair': {'geom1': 'geom', 'geom2': 'geom'},
  'exclude': {'body1': 'body', 'body2': 'body'},
  'equality': EQUALITY_REFS,
  'actuator': ACTUATOR_REFS,
  'sensor': {
    'site': 'site',
    'joint': 'joint',
    'tendon': 'tendon',
    'actuator': 'actuator',
    'body': 'body',
    'geom1': 'geom',
    'body1': 'body',
    'subtree1': 'body',
    'geom2': 'geom',
    'body2': 'body',
    'subtree2': 'body',
    'camera': 'camera',
  },
  'tendon_path': {'site': 'site', 'geom': 'geom', 'joint': 'joint', 'sidesite': 'site'},
}
_OBJTYPE = {'xbody': 'body'}
_TWO_SIDED = ('pair', 'exclude', 'sensor')


def _copy_referencing(key, e: Element, names, rename: _Renamer, other: bool) -> Element | None:
  """The copy of a pair, exclude, tendon, equality, actuator or sensor whose references lie in
  the attached subtree (names: the prefixed names there, by kind), or None."""
  p = rename.prefix
  has = lambda kind, n: p + n in names.get(kind, set())  # noqa: E731
  attrs = dict(e.attrs)
  refs = [(f, kind, attrs[f]) for f, kind in _REFS.get(key, {}).items() if attrs.get(f)]
  if key == 'sensor':
    for f, t in (('objname', 'objtype'), ('refname', 'reftype')):
      if attrs.get(f):
        kind = attrs.get(t, '')
        refs.append((f, _OBJTYPE.get(kind, kind), attrs[f]))
  kids = []
  if key == 'tendon':
    for c in e.children:
      ca = dict(c.attrs)
      for f, kind in _REFS['tendon_path'].items():
        if ca.get(f):
          if not has(kind, ca[f]):
            return None
          ca[f] = p + ca[f]
      kids.append(Element(c.tag, ca, c.children, c.file, c.line))
    if not kids:
      return None
  else:
    inside = [has(kind, n) for _, kind, n in refs]
    if not refs or not any(inside):
      return None
    if not all(inside) and key not in _TWO_SIDED:
      return None
    if key == 'sensor' and not inside[0]:
      return None
    for (f, _, n), ok in zip(refs, inside, strict=True):
      if ok:
        attrs[f] = p + n
    kids = list(e.children)
  if attrs.get('name'):
    attrs['name'] = p + attrs['name']
  if other and key in ('pair', 'tendon', 'equality', 'actuator'):
    attrs['class'] = p + attrs.get('class', 'main')
  if key == 'actuator' or key == 'tendon':
    names.setdefault(key, set()).add(attrs.get('name', ''))
  return Element(e.tag, attrs, kids, e.file, e.line)

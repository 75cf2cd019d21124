"""`<replicate>` for the elements that reference the replicated subtree (MuJoCo's mjs_attach).

MuJoCo reads pairs, excludes, tendons, equalities, actuators and sensors before the worldbody;
each replica of a `<replicate>` is then a self-attach of its subtree, and every referencing
element whose references resolve inside the namespace of that replica is copied (mjCModel::
CopyList), with its own name and those references suffixed; deleting the template subtree then
removes the elements that referenced it (RemoveFromList). This module rewrites those sections
of the parsed tree the same way, so that the compiler sees the expanded lists; the bodies
themselves are expanded by the compiler (compile.Compiler.replicate).

How a reference resolves in a replica's namespace follows each element's ResolveReferences:
pairs, excludes and sensors with an object and a reference frame fall back to the plain name on
one side when the other resolves suffixed; a tendon's path elements fall back one by one, as
long as one resolves suffixed; equalities, actuators and single-object sensors resolve only
suffixed. Copies go to the end of their list, replica by replica.
"""

from __future__ import annotations

from collections.abc import Iterable

from jaxsim.mjcf.parse import Element

# what an attach copies, in mjCModel's order
_LISTS = ('pair', 'exclude', 'tendon', 'equality', 'actuator', 'sensor')
_SECTION = {
  'pair': 'contact',
  'exclude': 'contact',
  'tendon': 'tendon',
  'equality': 'equality',
  'actuator': 'actuator',
  'sensor': 'sensor',
}
# name-bearing elements of the body tree and the kind of object they define
_TREE_KIND = {
  'body': 'body',
  'joint': 'joint',
  'freejoint': 'joint',
  'geom': 'geom',
  'site': 'site',
  'camera': 'camera',
}
# the attributes through which an actuator and an equality name other elements, and the
# namespace of each (attach.py renames them too)
ACTUATOR_REFS = {
  'joint': 'joint',
  'jointinparent': 'joint',
  'tendon': 'tendon',
  'site': 'site',
  'cranksite': 'site',
  'body': 'body',
  'refsite': 'site',
  'slidersite': 'site',
}
EQUALITY_REFS = {
  'body1': 'body',
  'body2': 'body',
  'site1': 'site',
  'site2': 'site',
  'joint1': 'joint',
  'joint2': 'joint',
  'tendon1': 'tendon',
  'tendon2': 'tendon',
}
# a sensor's object (first) and reference frame (second) attributes
_SENSOR_OBJ = {
  'site': 'site',
  'joint': 'joint',
  'tendon': 'tendon',
  'actuator': 'actuator',
  'body': 'body',
  'geom1': 'geom',
  'body1': 'body',
  'subtree1': 'body',
}
_SENSOR_REF = {'geom2': 'geom', 'body2': 'body', 'subtree2': 'body', 'camera': 'camera'}
_OBJTYPE_KIND = {'xbody': 'body'}

Names = dict[str, set[str]]
# a reference: (child index or -1 for the element itself, attribute, kind, name)
Ref = tuple[int, str, str, str]


def expand(root: Element) -> Element:
  """The model tree with its referencing sections expanded as `<replicate>` does."""
  worlds = root.find('worldbody')
  if not any(_has_replicate(w) for w in worlds):
    return root
  lists = {}
  for k in _LISTS:
    sec = _SECTION[k]
    lists[k] = [e for s in root.find(sec) for e in s.children if sec != 'contact' or e.tag == k]
  state = _State(lists)
  for w in worlds:
    state.walk(w.children, None)
  children, done = [], set()
  for sec in root.children:
    tag = sec.tag
    if tag not in _SECTION.values():
      children.append(sec)
    elif tag not in done:
      done.add(tag)
      kids = [e for k in _LISTS if _SECTION[k] == tag for e in state.lists[k]]
      # other children of <contact> (none that MuJoCo knows) stay for the compiler to refuse
      if tag == 'contact':
        kids += [e for s in root.find(tag) for e in s.children if e.tag not in _LISTS]
      children.append(Element(tag, dict(sec.attrs), kids, sec.file, sec.line))
  return Element(root.tag, dict(root.attrs), children, root.file, root.line)


def _has_replicate(e: Element) -> bool:
  return any(c.tag == 'replicate' or _has_replicate(c) for c in e.children)


class _State:
  """The names that exist while the worldbody is read, and the referencing lists."""

  def __init__(self, lists: dict[str, list[Element]]):
    self.lists = lists
    self.names: Names = {'body': {'world'}}
    for kind in ('tendon', 'actuator'):
      self.names[kind] = {e.attrs['name'] for e in lists[kind] if e.attrs.get('name')}

  def add(self, kind: str, names: Iterable[str], into: Names | None):
    self.names.setdefault(kind, set()).update(names)
    if into is not None:
      into.setdefault(kind, set()).update(names)

  def walk(self, children: list[Element], into: Names | None):
    """Registers the names of a worldbody fragment in document order, expanding replicates."""
    for c in children:
      kind = _TREE_KIND.get(c.tag)
      if kind and c.attrs.get('name'):
        self.add(kind, [c.attrs['name']], into)
      if c.tag == 'replicate':
        for kind, names in self.replicate(c).items():
          self.add(kind, names, into)
      elif c.tag in ('body', 'frame'):
        self.walk(c.children, into)

  def replicate(self, rep: Element) -> Names:
    """One `<replicate>`: its attaches, then the deletion of its template; the replicas' names."""
    template: Names = {}
    self.walk(rep.children, template)
    try:
      count = int(rep.attrs.get('count', '0'))
    except ValueError:
      count = 0  # the compiler reports the bad count
    digits = len(str(count))
    out: Names = {}
    for i in range(count):
      suffix = rep.attrs.get('sep', '') + str(i).rjust(digits, '0')
      for kind, names in template.items():
        self.add(kind, [n + suffix for n in names], out)
      for key in _LISTS:
        for e in list(self.lists[key]):
          copy = self.attach(key, e, suffix)
          if copy is not None:
            self.lists[key].append(copy)
            if key in ('tendon', 'actuator') and copy.attrs.get('name'):
              self.add(key, [copy.attrs['name']], None)
    before = {k: set(v) for k, v in self.names.items()}
    for kind, names in template.items():
      self.names[kind] -= names
    for key in _LISTS:
      kept = []
      for e in self.lists[key]:
        refs = _refs(key, e)
        if _exists(refs, before) and not _exists(refs, self.names):
          if key in ('tendon', 'actuator') and e.attrs.get('name'):
            self.names[key].discard(e.attrs['name'])
          continue
        kept.append(e)
      self.lists[key] = kept
    return out

  def attach(self, key: str, e: Element, suffix: str) -> Element | None:
    """The copy of `e` in the namespace `suffix`, or None where its references do not resolve."""
    refs = _refs(key, e)
    has = lambda kind, name: name in self.names.get(kind, ())  # noqa: E731
    named = [(i, a, kind, name + suffix) for i, a, kind, name in refs]
    if key in ('pair', 'exclude') or (key == 'sensor' and _two_sided(refs)):
      ok = [has(kind, name) for _, _, kind, name in named]
      if ok[0] != ok[1]:
        k = 1 if ok[0] else 0
        named[k] = refs[k]
      if not all(has(kind, name) for _, _, kind, name in named):
        return None
    elif key == 'tendon':
      by_child: dict[int, list[int]] = {}
      for k, (i, _, _, _) in enumerate(refs):
        by_child.setdefault(i, []).append(k)
      failures = 0
      for ks in by_child.values():
        if not all(has(named[k][2], named[k][3]) for k in ks):
          failures += 1
          for k in ks:
            named[k] = refs[k]
          if not all(has(refs[k][2], refs[k][3]) for k in ks):
            return None
      if failures == len(by_child):
        return None
    elif not all(has(kind, name) for _, _, kind, name in named):
      return None
    return _renamed(e, named, suffix)


def _two_sided(refs: list[Ref]) -> bool:
  return len(refs) == 2


def _exists(refs: list[Ref], names: Names) -> bool:
  return all(name in names.get(kind, ()) for _, _, kind, name in refs)


def _refs(key: str, e: Element) -> list[Ref]:
  """The references of one referencing element, in the order its ResolveReferences reads them."""
  a = e.attrs
  if key == 'pair':
    return [(-1, f, 'geom', a.get(f, '')) for f in ('geom1', 'geom2')]
  if key == 'exclude':
    return [(-1, f, 'body', a.get(f, '')) for f in ('body1', 'body2')]
  if key == 'tendon':
    out = []
    for i, c in enumerate(e.children):
      for f, kind in (('site', 'site'), ('geom', 'geom'), ('joint', 'joint'), ('sidesite', 'site')):
        if c.attrs.get(f):
          out.append((i, f, kind, c.attrs[f]))
    return out
  if key == 'equality':
    return [(-1, f, kind, a[f]) for f, kind in EQUALITY_REFS.items() if a.get(f)]
  if key == 'actuator':
    return [(-1, f, kind, a[f]) for f, kind in ACTUATOR_REFS.items() if a.get(f)]
  obj = [(-1, f, kind, a[f]) for f, kind in _SENSOR_OBJ.items() if a.get(f)]
  if a.get('objname'):
    kind = a.get('objtype', '')
    obj.append((-1, 'objname', _OBJTYPE_KIND.get(kind, kind), a['objname']))
  ref = [(-1, f, kind, a[f]) for f, kind in _SENSOR_REF.items() if a.get(f)]
  if a.get('refname'):
    kind = a.get('reftype', '')
    ref.append((-1, 'refname', _OBJTYPE_KIND.get(kind, kind), a['refname']))
  return obj[:1] + ref[:1]


def _renamed(e: Element, refs: list[Ref], suffix: str) -> Element:
  """A copy of `e` with the given references and its own name (suffixed where it has one)."""
  attrs = dict(e.attrs)
  if attrs.get('name'):
    attrs['name'] += suffix
  children = [Element(c.tag, dict(c.attrs), c.children, c.file, c.line) for c in e.children]
  for i, f, _, name in refs:
    (attrs if i < 0 else children[i].attrs)[f] = name
  return Element(e.tag, attrs, children, e.file, e.line)

"""MJCF text -> a tree of `Element`s that remembers the file and line of every element.

xmltodict does the XML parsing; a thin shim around expat records each element's line and its
document position, so that the element order (which MuJoCo's semantics depend on, e.g. actuators
of mixed kinds) survives xmltodict's grouping of children by tag. `<include>` is expanded here,
with paths relative to the including file. DTDs and entities are refused.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from typing import Any
from xml.parsers import expat

import xmltodict

from jaxsim.errors import ModelError

_LINE = '__line__'
_ORDER = '__order__'
_MAX_INCLUDE_DEPTH = 32
# Deepest element nesting accepted. MuJoCo's XML parser (tinyxml2) refuses to parse the content
# of an element nested 499 deep (the document itself counting as level 1 of its 500).
MAX_ELEMENT_DEPTH = 499


@dataclasses.dataclass
class Element:
  """One XML element: tag, attributes, children in document order, and where it was written."""

  tag: str
  attrs: dict[str, str]
  children: list[Element]
  file: str
  line: int

  def error(self, message: str, attribute: str | None = None) -> ModelError:
    """A ModelError located at this element (and attribute)."""
    return ModelError(
      message, file=self.file, line=self.line, element=self.tag, attribute=attribute
    )

  def find(self, tag: str) -> list[Element]:
    """Children with this tag, in document order."""
    return [c for c in self.children if c.tag == tag]


class _LineRecordingExpat:
  """Stands in for the `expat` module so xmltodict's parser records lines and order."""

  def __init__(self, file: str):
    self._file = file
    self._order = 0
    self._open: list[tuple[str, int]] = []  # (tag, line) of the elements being read

  def ParserCreate(self, *args, **kwargs):  # noqa: N802 (expat's name)
    parser = expat.ParserCreate(*args, **kwargs)
    shim = self

    def refuse(*_):
      raise ModelError(
        'XML document type declarations and entities are not allowed',
        file=shim._file,
        line=parser.CurrentLineNumber,
      )

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.ProcessingInstructionHandler = None

    class _Proxy:
      def __getattr__(self, name):
        return getattr(parser, name)

      def __setattr__(self, name, value):
        if name == 'StartElementHandler':
          inner = value

          def start(tag, attrs):
            if len(shim._open) >= MAX_ELEMENT_DEPTH:
              # Named is the element whose content is too deep, as tinyxml2 refuses it.
              ptag, pline = shim._open[-1]
              raise ModelError(
                f'element nesting is too deep: the content of <{ptag}> is nested more than '
                f'{MAX_ELEMENT_DEPTH} levels deep',
                file=shim._file,
                line=pline,
                element=ptag,
              )
            shim._open.append((tag, parser.CurrentLineNumber))
            shim._order += 1
            attrs = list(attrs) + [_LINE, str(parser.CurrentLineNumber), _ORDER, str(shim._order)]
            return inner(tag, attrs)

          value = start
        elif name == 'EndElementHandler':
          inner_end = value

          def end(tag):
            shim._open.pop()
            return inner_end(tag)

          value = end
        if name == 'EntityDeclHandler':
          return  # keep our refusal, which carries the line
        setattr(parser, name, value)

    return _Proxy()


def _to_element(tag: str, node: Any, file: str) -> Element:
  """Converts one xmltodict node into an Element, restoring document order of children."""
  if node is None:
    node = {}
  if isinstance(node, str):
    node = {}
  attrs: dict[str, str] = {}
  kids: list[tuple[int, Element]] = []
  line = 0
  for key, value in node.items():
    if key.startswith('@'):
      name = key[1:]
      if name == _LINE:
        line = int(value)
      elif name != _ORDER:
        attrs[name] = value
    elif key == '#text':
      pass  # MuJoCo ignores stray text between elements (dm_control's stacker.xml has some)
    else:
      for child in value:
        order = int(child.get('@' + _ORDER, 0)) if isinstance(child, dict) else 0
        kids.append((order, _to_element(key, child, file)))
  kids.sort(key=lambda kv: kv[0])
  return Element(tag, attrs, [k for _, k in kids], file, line)


# a quoted attribute value directly followed by the next attribute's name
_ATTR_RUN = re.compile(rb"""(=\s*(?:"[^"<]*"|'[^'<]*'))(?=[A-Za-z_:])""")
# markup tinyxml2 skips after the root element: comments, declarations, tags
_MARKUP = re.compile(rb'<!--.*?-->|<[^>]*>', re.S)


def _before_junk(text: bytes) -> bytes | None:
  """The document up to the end of its root element, where expat refused something after it that
  tinyxml2 skips (further elements: MuJoCo reads the first root element; anything after a stray
  closing tag, where tinyxml2 stops); None otherwise."""
  p = expat.ParserCreate()
  depth, end = [0], [None]

  def start_element(*_):
    depth[0] += 1

  def end_element(_):
    depth[0] -= 1
    if depth[0] == 0 and end[0] is None:
      end[0] = text.index(b'>', p.CurrentByteIndex) + 1

  p.StartElementHandler, p.EndElementHandler = start_element, end_element
  try:
    p.Parse(text, True)
  except expat.ExpatError:
    pass
  if end[0] is None:
    return None
  # tinyxml2 stops reading at a stray closing tag; before one, text is an error
  rest = text[end[0] :].split(b'</', 1)[0]
  return text[: end[0]] if not _MARKUP.sub(b'', rest).strip() else None


def _parse_tree(text: bytes, file: str) -> dict:
  """xmltodict over expat. tinyxml2 (MuJoCo's parser) reads attributes not separated by
  whitespace (name="a"type="b", as in MyoSuite's elbow exo model) and expat does not: where expat
  refuses a document, it is read once more with a space after each such value (lines unchanged),
  and expat's first error stands if that fails too. Markup after the root element (Unitree's G1
  scene closes </mujoco> twice) is dropped, as tinyxml2 skips it."""

  def parse(text: bytes) -> dict:
    return xmltodict.parse(
      text,
      expat=_LineRecordingExpat(file),
      force_list=lambda *_: True,
      disable_entities=True,
      strip_whitespace=True,
    )

  try:
    return parse(text)
  except expat.ExpatError as e:
    first = e
  spaced = _ATTR_RUN.sub(rb'\1 ', text)
  for fixed in (spaced, _before_junk(text), _before_junk(spaced)):
    if fixed is None or fixed == text:
      continue
    try:
      return parse(fixed)
    except expat.ExpatError:
      pass
  raise first


def parse_xml(text: str | bytes, file: str) -> Element:
  """Parses XML text into an Element tree; malformed XML raises ModelError with its line."""
  if isinstance(text, str):
    text = text.encode('utf-8')
  try:
    tree = _parse_tree(text, file)
  except ModelError:
    raise
  except expat.ExpatError as e:
    raise ModelError(f'malformed XML: {expat.ErrorString(e.code)}', file=file, line=e.lineno) from e
  except ValueError as e:
    raise ModelError(f'malformed XML: {e}', file=file) from e
  if not tree:
    raise ModelError('empty XML document', file=file)
  ((tag, nodes),) = tree.items()
  return _to_element(tag, nodes[0], file)


AssetReader = Callable[[str, Element, str], bytes]


def expand_includes(
  root: Element,
  read: Callable[[str], bytes],
  directory: str,
  depth: int = 0,
  seen: tuple[str, ...] = (),
  level: int = 1,
  top: str | None = None,
  included: set[str] | None = None,
) -> Element:
  """Replaces every `<include file=...>` by the children of the included file's root element.

  `read(path)` returns a file's bytes. As IncludeXML, a path resolves against the model's
  directory `top` first (MuJoCo's legacy rule), then against the including file's `directory`,
  and a file name already included (`included`, shared by the whole expansion) is refused.
  `level` is the nesting level of `root`: included content must not nest deeper than the parser
  lets one file nest.
  """
  top = directory if top is None else top
  included = set() if included is None else included
  if level >= MAX_ELEMENT_DEPTH and root.children:
    raise root.error(
      f'element nesting is too deep: the content of <{root.tag}> (with the files it includes) '
      f'is nested more than {MAX_ELEMENT_DEPTH} levels deep'
    )
  out = []
  for child in root.children:
    if child.tag != 'include':
      out.append(expand_includes(child, read, directory, depth, seen, level + 1, top, included))
      continue
    extra = set(child.attrs) - {'file'}
    if extra:
      raise child.error('unknown attribute', attribute=sorted(extra)[0])
    if child.children:
      raise child.error('<include> cannot have child elements')
    if 'file' not in child.attrs:
      raise child.error('missing required attribute', attribute='file')
    name = child.attrs['file']
    paths = dict.fromkeys(os.path.normpath(os.path.join(d, name)) for d in (top, directory))
    for path in paths:
      if path in seen or depth >= _MAX_INCLUDE_DEPTH:
        raise child.error(f'recursive include of {path!r}', attribute='file')
    if name in included:
      raise child.error(f'file {name!r} already included', attribute='file')
    for path in paths:
      try:
        data = read(path)
        break
      except OSError as e:
        error = e
    else:
      raise child.error(
        f'cannot read included file {path!r}: {error.strerror}', attribute='file'
      ) from error
    # IncludeXML records the name prefixed by the including file's directory (none at the top)
    included.add(name if depth == 0 else os.path.join(directory, name))
    sub = parse_xml(data, path)
    # The included file's root is a container (conventionally <mujoco>); its children are spliced.
    sub = expand_includes(
      sub, read, os.path.dirname(path), depth + 1, seen + (path,), level, top, included
    )
    out.extend(sub.children)
  return dataclasses.replace(root, children=out)


class AssetFiles:
  """Reads asset files: from `assets` (by full path, then by base name) before the filesystem.

  The assets play MuJoCo's virtual file system (mujoco.MjModel.from_xml_string's assets)."""

  def __init__(self, assets: Mapping[str, bytes] | None):
    self.assets = assets or {}

  def _key(self, path: str) -> str | None:
    for key in (path, os.path.normpath(path), os.path.basename(path)):
      if key in self.assets:
        return key
    return None

  def in_memory(self, path: str) -> bool:
    """Whether `path` is served from the assets (MuJoCo: from memory by the VFS)."""
    return self._key(path) is not None

  def __call__(self, path: str) -> bytes:
    key = self._key(path)
    if key is not None:
      value = self.assets[key]
      return value.encode() if isinstance(value, str) else bytes(value)
    with open(path, 'rb') as f:
      return f.read()


def read_file_or_asset(assets: Mapping[str, bytes] | None) -> AssetFiles:
  """A reader that looks in `assets` (by full path, then by base name) before the filesystem."""
  return AssetFiles(assets)

"""MJCF compiler: MJCF or URDF text -> compiled MuJoCo-named arrays (pure Python + NumPy)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping

from jaxsim.errors import ModelError
from jaxsim.mjcf import urdf
from jaxsim.mjcf.compile import Compiled, compile_tree
from jaxsim.mjcf.parse import Element, expand_includes, parse_xml, read_file_or_asset

__all__ = ['Compiled', 'compile_file', 'compile_string', 'parse_model']

# The parser and compiler recurse a few Python frames per level of element nesting, and MuJoCo
# (so parse_xml) allows 499 levels: more than Python's default limit of 1000 frames.
_RECURSION_LIMIT = 10_000


@contextlib.contextmanager
def _deep_recursion() -> Iterator[None]:
  old = sys.getrecursionlimit()
  if old >= _RECURSION_LIMIT:
    yield
    return
  sys.setrecursionlimit(_RECURSION_LIMIT)
  try:
    yield
  finally:
    sys.setrecursionlimit(old)


def parse_model(
  text: str | bytes, file: str, directory: str, assets: Mapping[str, bytes] | None
) -> Element:
  """Parses MJCF text and expands its includes."""
  read = read_file_or_asset(assets)
  with _deep_recursion():
    root = parse_xml(text, file)
    if root.tag == 'robot':
      return urdf.to_mjcf(root)
    return expand_includes(root, read, directory, 0, (os.path.normpath(file),))


def compile_string(
  xml: str | bytes,
  assets: Mapping[str, bytes] | None = None,
  *,
  file: str = '<string>',
  directory: str = '',
) -> Compiled:
  """Compiles MJCF text; meshes and includes resolve against `assets`, then `directory`."""
  read = read_file_or_asset(assets)
  with _deep_recursion():
    root = parse_model(xml, file, directory, assets)
    return compile_tree(root, directory, read, file)


def compile_file(path: str, assets: Mapping[str, bytes] | None = None) -> Compiled:
  """Compiles an MJCF file."""
  try:
    with open(path, 'rb') as f:
      text = f.read()
  except OSError as e:
    raise ModelError(f'cannot read model file: {e.strerror}', file=path) from e
  return compile_string(text, assets, file=path, directory=os.path.dirname(os.path.abspath(path)))

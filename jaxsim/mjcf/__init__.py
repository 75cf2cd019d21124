"""MJCF compiler: MJCF text -> compiled MuJoCo-named arrays (pure Python + NumPy, no JAX)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from jaxsim.errors import ModelError
from jaxsim.mjcf.compile import Compiled, compile_tree
from jaxsim.mjcf.parse import Element, expand_includes, parse_xml, read_file_or_asset

__all__ = ['Compiled', 'compile_file', 'compile_string', 'parse_model']


def parse_model(
  text: str | bytes, file: str, directory: str, assets: Mapping[str, bytes] | None
) -> Element:
  """Parses MJCF text and expands its includes."""
  read = read_file_or_asset(assets)
  root = parse_xml(text, file)
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

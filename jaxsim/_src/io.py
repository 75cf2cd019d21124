"""Loading: MJCF or URDF files and text -> Model, through jaxsim's own compiler (jaxsim.mjcf)."""

from __future__ import annotations

from collections.abc import Mapping

from jaxsim import mjcf
from jaxsim._src.model import build
from jaxsim._src.types import Model


def load(path: str, assets: Mapping[str, bytes] | None = None) -> Model:
  """Loads an MJCF (or URDF, by its root element) model file into a Model.

  Arguments:
    path: the model file; includes, meshes, textures and height fields resolve next to it.
    assets: file name -> bytes, looked up before the file system.
  Returns:
    the compiled Model.
  Raises:
    jaxsim.ModelError: bad input, naming file, line, element and attribute.
  """
  return build(mjcf.compile_file(path, assets))


def load_string(xml: str | bytes, assets: Mapping[str, bytes] | None = None) -> Model:
  """Loads MJCF (or URDF) text into a Model; `assets` maps file names to bytes for meshes and
  includes."""
  return build(mjcf.compile_string(xml, assets))

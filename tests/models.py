"""Model files the comparison tests run on: the dm_control suite and the bundled models/."""

from __future__ import annotations

import glob
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(REPO, 'models')
# models that ship inside the package (jaxsim.envs' tasks)
PACKAGED = os.path.join(REPO, 'jaxsim', 'envs', 'xml')


def dm_control_suite() -> list[str]:
  """Paths of every dm_control suite XML, from the installed dm_control package."""
  import dm_control

  suite = os.path.join(os.path.dirname(dm_control.__file__), 'suite')
  return sorted(glob.glob(os.path.join(suite, '*.xml')))


def bundled() -> list[str]:
  """Paths of the models in models/ and jaxsim/envs/xml/ that are complete models (not include
  fragments)."""
  out = []
  paths = glob.glob(os.path.join(MODELS, '*.xml')) + glob.glob(os.path.join(PACKAGED, '*.xml'))
  for path in sorted(paths, key=os.path.basename):
    with open(path) as f:
      head = f.read(4096)
    if '<worldbody' in head or '<worldbody' in open(path).read():
      out.append(path)
  return out


def all_models() -> list[str]:
  return dm_control_suite() + bundled()


def model_id(path: str) -> str:
  return os.path.relpath(path, os.path.dirname(os.path.dirname(path)))

"""Element tree -> compiled model arrays, in MuJoCo's element order (mjCModel::Compile).

Everything here is plain Python and NumPy. The result is a flat dict of MuJoCo-named arrays and
counts (`Compiled`), which `jaxsim._src.types.Model` wraps; quantities that need the dynamics
pipeline at qpos0 (MuJoCo's mj_setConst: tendon_length0, dof_invweight0, ...) are filled in later.

This module owns the order: `compile_tree` expands attachments and replicates, then runs the
sections over one `CompileState`, each a module of this package:

  options    <mujoco>, <extension>, <compiler>, <option>, <size>, <statistic>, <visual>
  (defaults) <default>, with actuators.apply_shortcut for actuator classes
  assets     <asset> read; meshes and hfields compiled once the tree says which meshes collide
  tree       <worldbody> read, then numbered depth-first
  bodies     bodies, inertia, joints, geoms, sites, cameras, lights compiled
  fuse       <compiler fusestatic> and <compiler discardvisual>, after the bodies
  tendons, actuators, equality, contact, sensors, custom, keyframes: one section each

Sections run in MuJoCo's order, and a later one reads what an earlier one wrote (names, the body
tree, out's sizes): the order below is the one mjCModel::Compile follows.
"""

from __future__ import annotations

from jaxsim.mjcf.attach import expand as expand_attachments
from jaxsim.mjcf.compile import (
  actuators,
  assets,
  bodies,
  contact,
  custom,
  equality,
  fuse,
  keyframes,
  options,
  sensors,
  tendons,
  tree,
)
from jaxsim.mjcf.compile.state import Compiled, CompileState
from jaxsim.mjcf.parse import AssetFiles, Element
from jaxsim.mjcf.replicate import expand as expand_replicates

__all__ = ['Compiled', 'compile_tree']


def compile_tree(root: Element, directory: str, read: AssetFiles, model_file: str) -> Compiled:
  """Compiles a parsed, include-expanded MJCF tree into MuJoCo-named arrays."""
  # attach compiles each attached model on its own (for its keyframes): it is handed this
  # function rather than importing it
  root = expand_attachments(root, directory, read, compile_tree)
  s = CompileState(expand_replicates(root), directory, read, model_file)
  _compile(s)
  return s.out


def _compile(s: CompileState) -> None:
  """Runs the sections over the state, in mjCModel::Compile's order."""
  root = s.root
  options.read_root(s, root)
  for e in root.children:
    if e.tag in ('body', 'frame'):
      tree.check_ignored_tree(e)
  for e in root.find('extension'):
    options.read_extension(s, e)
  for e in root.find('compiler'):
    options.read_compiler(s, e)
  options.read_attached_compilers(s, root)
  for e in root.find('option'):
    options.read_option(s, e)
  options.note_option(s)
  for e in root.find('size'):
    options.read_size(s, e)
  for e in root.find('statistic'):
    options.read_statistic(s, e)
  for e in root.find('visual'):
    options.read_visual(s, e)
  # every top-level <default> is class 'main' again: MuJoCo merges its attributes into main,
  # and classes defined before a later one keep the main they copied
  for e in root.find('default'):
    # '_root': an attached model's default tree, its own root class (attach.py)
    parent = '' if '_root' in e.attrs else None
    s.defaults.read(e, parent, actuators.apply_shortcut)
  for e in root.find('asset'):
    assets.read_assets(s, e)
  tree.read_worldbody(s, root)
  tree.order_tree(s)
  # meshes compile after the tree is read: MuJoCo builds convex hulls only for colliding meshes
  assets.compile_meshes(s, assets.meshes_needing_hulls(s, root))
  assets.compile_hfields(s)
  assets.check_texture_files(s)
  assets.resolve_references(s)
  bodies.compile_bodies(s)
  if s.comp['fusestatic']:
    fuse.fuse_static(s)
  if s.comp['discardvisual']:
    fuse.discard_visual(s)
  bodies.build_body_arrays(s)
  assets.build_mesh_arrays(s)
  tendons.compile_tendons(s, root.find('tendon'))
  actuators.compile_actuators(s, root.find('actuator'))
  equality.compile_equality(s, root.find('equality'))
  contact.compile_contact(s, root.find('contact'))
  sensors.compile_sensors(s, root.find('sensor'))
  custom.compile_custom(s, root.find('custom'))
  keyframes.compile_keyframes(s, root.find('keyframe'))
  _finish(s)


def _finish(s: CompileState) -> None:
  """The settings, names and notes the compiled model carries besides its arrays."""
  out = s.out
  out['opt'] = dict(s.opt)
  out['compiler'] = {k: v for k, v in s.comp.items()}
  out['size'] = dict(s.size)
  out['statistic'] = dict(s.statistic)
  out['names'] = {k: tuple(v) for k, v in s.name_lists.items()}
  out['model_name'] = s.model_name
  out['unsupported'] = tuple(s.unsupported)
  out['lengthrange_opt'] = dict(s.lengthrange_opt)
  out['lengthrange_sim'] = tuple(s.lengthrange_sim)

"""URDF -> an MJCF element tree, with MuJoCo's URDF semantics (xml_urdf.cc, mjXURDF).

The converted tree keeps the URDF's file and line on every element, so compile errors point at
the URDF. MuJoCo's URDF rules: links become bodies nested by the joints (depth first, children
in joint order), the root link is fixed to the world (and so fused into it), `fusestatic` and
`discardvisual` default to true, angles are radians, `rpy` is the extrinsic X-Y-Z rotation,
box/cylinder/capsule sizes are halved, visual geoms get group 1 and no collisions or mass,
a joint's <limit> sets its range (a one-sided limit leaves the joint unlimited) and its effort
the actuator force range, <dynamics> sets damping and frictionloss, and `planar` becomes two
slides and a hinge. A `<mujoco>` child may carry <compiler>, <option> and <size>.
"""

from __future__ import annotations

import math
import os

import numpy as np

from jaxsim.mjcf import frames, inertia
from jaxsim.mjcf.parse import Element

_JOINTS = ('revolute', 'continuous', 'prismatic', 'fixed', 'floating', 'planar', 'spherical')


def _num(e: Element, attr: str, n: int, default=None, required: bool = False) -> np.ndarray | None:
  if attr not in e.attrs:
    if required:
      raise e.error('missing required attribute', attribute=attr)
    return None if default is None else np.asarray(default, dtype=float)
  try:
    v = np.array([float(x) for x in e.attrs[attr].split()], dtype=float)
  except ValueError:
    raise e.error(f'expected {n} numbers, got {e.attrs[attr]!r}', attribute=attr) from None
  if v.size != n or not np.isfinite(v).all():
    raise e.error(f'expected {n} finite numbers, got {e.attrs[attr]!r}', attribute=attr)
  return v


def _one(e: Element, tag: str, required: bool = False) -> Element | None:
  found = e.find(tag)
  if not found:
    if required:
      raise e.error(f'missing <{tag}> element')
    return None
  return found[0]


def _fmt(v) -> str:
  return ' '.join(repr(float(x)) for x in np.atleast_1d(v))


def rpy_quat(rpy: np.ndarray) -> np.ndarray:
  """Quaternion of URDF's roll-pitch-yaw: rotations about the fixed X, then Y, then Z axes."""
  q = np.array([1.0, 0, 0, 0])
  for axis, angle in zip(np.eye(3), rpy):
    r = np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])
    q = frames.quat_mul(r, q)
  return q


def _origin(e: Element) -> tuple[np.ndarray, np.ndarray]:
  o = _one(e, 'origin')
  if o is None:
    return np.zeros(3), np.array([1.0, 0, 0, 0])
  pos = _num(o, 'xyz', 3, np.zeros(3))
  rpy = _num(o, 'rpy', 3, np.zeros(3))
  return pos, rpy_quat(rpy)


def _el(src: Element, tag: str, attrs: dict, children=None) -> Element:
  return Element(tag, {k: v for k, v in attrs.items()}, list(children or []), src.file, src.line)


class _Converter:
  def __init__(self, root: Element):
    self.root = root
    self.meshes: dict[str, list[tuple[np.ndarray, str]]] = {}
    self.mesh_elems: list[Element] = []
    self.geom_names: set[str] = set()
    self.materials: dict[str, str] = {}

  def convert(self) -> Element:
    root = self.root
    links = root.find('link')
    joints = root.find('joint')
    names = []
    for link in links:
      name = link.attrs.get('name')
      if name is None:
        raise link.error('missing required attribute', attribute='name')
      if name in names:
        raise link.error(f'repeated URDF name {name!r}', attribute='name')
      names.append(name)
    parent = dict.fromkeys(names)
    children: dict[str, list[str]] = {n: [] for n in names}
    joint_of: dict[str, Element] = {}
    for j in joints:
      p = _one(j, 'parent', True).attrs.get('link')
      c = _one(j, 'child', True).attrs.get('link')
      if p not in parent or c not in parent:
        raise j.error('URDF joint parent or child missing')
      if parent[c] is not None:
        raise j.error(f'URDF body has multiple parents: {c}')
      parent[c] = p
      children[p].append(c)
      joint_of[c] = j
    self._collect_materials(root)
    link_elem = dict(zip(names, links))
    # geoms (and the meshes they create) are read in the links' document order, as MuJoCo does
    geoms = {n: self._geoms(link) for n, link in zip(names, links)}

    def body(name: str) -> list[Element]:
      link = link_elem[name]
      if name == 'world':
        return geoms[name] + [e for c in children[name] for e in body(c)]
      attrs = {'name': name}
      inner: list[Element] = []
      if name in joint_of:
        pos, quat = _origin(joint_of[name])
        attrs['pos'], attrs['quat'] = _fmt(pos), _fmt(quat)
        inner += self._joint(joint_of[name])
      inner += self._inertial(link) + geoms[name]
      kids = [e for c in children[name] for e in body(c)]
      return [_el(link, 'body', attrs, inner + kids)]

    world = []
    for n in names:
      if parent[n] is None:
        world += body(n)
    top = self._mujoco_sections(root)
    if self.mesh_elems:
      top.append(_el(root, 'asset', {}, self.mesh_elems))
    top.append(_el(root, 'worldbody', {}, world))
    return _el(root, 'mujoco', {'model': root.attrs.get('name', 'MuJoCo Model')}, top)

  def _mujoco_sections(self, root: Element) -> list[Element]:
    comp = {'fusestatic': 'true', 'discardvisual': 'true'}
    out = []
    mj = _one(root, 'mujoco')
    sections = {}
    if mj is not None:
      for tag in ('compiler', 'option', 'size'):
        e = _one(mj, tag)
        if e is not None:
          sections[tag] = e
    if 'compiler' in sections:
      e = sections['compiler']
      comp.update(e.attrs)
    comp['angle'] = 'radian'
    out.append(_el(sections.get('compiler', root), 'compiler', comp))
    for tag in ('option', 'size'):
      if tag in sections:
        out.append(sections[tag])
    return out

  def _collect_materials(self, e: Element):
    if e.tag == 'material' and e.attrs.get('name') and e.attrs['name'] not in self.materials:
      color = _one(e, 'color')
      if color is not None:
        self.materials[e.attrs['name']] = _fmt(_num(color, 'rgba', 4, required=True))
    for c in e.children:
      self._collect_materials(c)

  def _inertial(self, link: Element) -> list[Element]:
    ie = _one(link, 'inertial')
    if ie is None:
      return []
    pos, quat = _origin(ie)
    mass = float(_num(_one(ie, 'mass', True), 'value', 1, required=True)[0])
    it = _one(ie, 'inertia', True)
    full = np.array(
      [float(_num(it, k, 1, required=True)[0]) for k in ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz')]
    )
    tensor = np.array(
      [[full[0], full[3], full[4]], [full[3], full[1], full[5]], [full[4], full[5], full[2]]]
    )
    w, v = inertia.principal_axes(tensor)
    quat = frames.quat_mul(quat, frames.mat_to_quat(v))
    attrs = {
      'pos': _fmt(pos),
      'quat': _fmt(quat),
      'mass': repr(mass),
      'diaginertia': _fmt(np.maximum(w, 0.0)),
    }
    return [_el(ie, 'inertial', attrs)]

  def _joint(self, j: Element) -> list[Element]:
    typ = j.attrs.get('type')
    if typ not in _JOINTS:
      raise j.error(f'invalid joint type {typ!r} in URDF joint definition', attribute='type')
    name = j.attrs.get('name')
    if name is None:
      raise j.error('missing required attribute', attribute='name')
    if typ == 'fixed':
      return []
    ax = _one(j, 'axis')
    axis = _num(ax, 'xyz', 3, required=True) if ax is not None else np.array([1.0, 0, 0])
    common = {}
    dyn = _one(j, 'dynamics')
    if dyn is not None:
      if 'damping' in dyn.attrs:
        common['damping'] = _fmt(_num(dyn, 'damping', 1))
      if 'friction' in dyn.attrs:
        common['frictionloss'] = _fmt(_num(dyn, 'friction', 1))
    lim = _one(j, 'limit')
    if lim is not None:
      lo, hi = _num(lim, 'lower', 1), _num(lim, 'upper', 1)
      rng = np.array([0.0 if lo is None else lo[0], 0.0 if hi is None else hi[0]])
      if (lo is None) != (hi is None) or rng[0] > rng[1]:
        common['limited'] = 'false'
      if lo is not None or hi is not None:
        common['range'] = _fmt(rng)
      effort = abs(float(_num(lim, 'effort', 1, [0.0])[0]))
      if effort > 0:
        common['actuatorfrcrange'] = _fmt([-effort, effort])
    if typ == 'floating':
      return [_el(j, 'joint', {'name': name, 'type': 'free'})]
    if typ == 'planar':
      r = frames.quat_to_mat(frames.z_to_quat(axis))
      return [
        _el(j, 'joint', {'name': name + '_TX', 'type': 'slide', 'axis': _fmt(r[:, 0]), **common}),
        _el(j, 'joint', {'name': name + '_TY', 'type': 'slide', 'axis': _fmt(r[:, 1]), **common}),
        _el(j, 'joint', {'name': name + '_RZ', 'type': 'hinge', 'axis': _fmt(axis), **common}),
      ]
    kind = {'revolute': 'hinge', 'continuous': 'hinge', 'prismatic': 'slide'}.get(typ, 'ball')
    attrs = {'name': name, 'type': kind, 'axis': _fmt(axis), **common}
    if kind == 'ball':
      attrs.pop('axis')
    return [_el(j, 'joint', attrs)]

  def _geoms(self, link: Element) -> list[Element]:
    out = []
    rgba = None
    for e in link.children:
      if e.tag == 'visual':
        mat = _one(e, 'material')
        if mat is not None:
          color = _one(mat, 'color')
          if color is not None:
            rgba = _fmt(_num(color, 'rgba', 4, required=True))
          elif mat.attrs.get('name') in self.materials:
            rgba = self.materials[mat.attrs['name']]
        out.append(self._geom(e, False, rgba))
      elif e.tag == 'collision':
        out.append(self._geom(e, True, rgba))
    return out

  def _geom(self, e: Element, collision: bool, rgba: str | None) -> Element:
    g = _one(e, 'geometry', True)
    attrs: dict[str, str] = {}
    if collision:
      attrs.update(contype='1', conaffinity='1')
    else:
      attrs.update(contype='0', conaffinity='0', group='1', density='0')
    if (s := _one(g, 'box')) is not None:
      attrs.update(type='box', size=_fmt(_num(s, 'size', 3, required=True) / 2))
    elif (s := _one(g, 'cylinder')) is not None or (s := _one(g, 'capsule')) is not None:
      r = _num(s, 'radius', 1, required=True)[0]
      h = _num(s, 'length', 1, required=True)[0] / 2
      attrs.update(type=s.tag, size=_fmt([r, h]))
    elif (s := _one(g, 'sphere')) is not None:
      attrs.update(type='sphere', size=_fmt(_num(s, 'radius', 1, required=True)))
    elif (s := _one(g, 'mesh')) is not None:
      attrs.update(type='mesh', mesh=self._mesh(s))
    else:
      raise g.error('visual geometry specification not found')
    pos, quat = _origin(e)
    attrs.update(pos=_fmt(pos), quat=_fmt(quat))
    if rgba is not None:
      attrs['rgba'] = rgba
    name = e.attrs.get('name', '')
    if name and name not in self.geom_names:
      attrs['name'] = name
      self.geom_names.add(name)
    return _el(e, 'geom', attrs)

  def _mesh(self, s: Element) -> str:
    if 'filename' not in s.attrs:
      raise s.error('missing required attribute', attribute='filename')
    file = s.attrs['filename']
    scale = _num(s, 'scale', 3, np.ones(3))
    stem = os.path.splitext(os.path.basename(file.replace('\\', '/')))[0]
    variants = self.meshes.setdefault(stem, [])
    for sc, name in variants:
      if (sc == scale).all():
        return name
    name = stem if not variants else f'{stem}{len(variants)}'
    variants.append((scale, name))
    self.mesh_elems.append(_el(s, 'mesh', {'name': name, 'file': file, 'scale': _fmt(scale)}))
    return name


def to_mjcf(root: Element) -> Element:
  """The MJCF element tree MuJoCo would build from a URDF <robot> tree."""
  return _Converter(root).convert()

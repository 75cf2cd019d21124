"""<compiler fusestatic> and <compiler discardvisual>: compiler passes that remove elements after
the bodies are compiled (mjCModel::FuseStatic and the discard step of mjCModel::IndexAssets in
user_model.cc).

Both run on the state's body dicts once masses, inertias and local frames are known (after
bodies.compile_bodies, before bodies.build_body_arrays), reading the model tree for the names
other elements refer to; they rewrite the state's bodies, joints, geoms, sites, cameras, lights
(and, discarding, meshes and mesh assets), renumber them and re-register their names.
"""

from __future__ import annotations

import numpy as np

from jaxsim._src.enums import MINVAL, GeomType
from jaxsim.mjcf import frames, inertia
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element

# attributes through which other elements name a body or a geom; a named body or geom that is
# referred to is kept (MuJoCo fuses or discards only what still resolves without it)
_BODY_REFS = ('body', 'body1', 'body2', 'target', 'objname', 'refname', 'bodyname')
_GEOM_REFS = ('geom', 'geom1', 'geom2', 'objname', 'refname')
_MESH_REFS = ('objname', 'refname', 'mesh')


def _walk(e: Element):
  """An element and all its descendants, depth first."""
  yield e
  for c in e.children:
    yield from _walk(c)


def _referenced(root: Element, keys: tuple[str, ...], sections: tuple[str, ...] | None) -> set:
  """Values of `keys` attributes of elements in the given top-level sections (None: all)."""
  out = set()
  for sec in root.children:
    if sections is not None and sec.tag not in sections:
      continue
    for e in _walk(sec):
      # the tree's and assets' own elements define names; a tendon's <geom>, <site> and
      # <joint> path elements reference them
      if sec.tag != 'tendon' and e.tag in ('body', 'geom', 'site', 'joint', 'mesh'):
        continue
      out.update(v for k, v in e.attrs.items() if k in keys)
  return out


def _accumulate_inertia(par: dict, body: dict) -> None:
  """Adds a fused body's mass and inertia to its parent's (mjCBody::AccumulateInertia)."""
  ipos, iquat = frames.frame_accum(body['pos'], body['quat'], body['ipos'], body['iquat'])
  masses = (par['mass'], body['mass'])
  poses = ((par['ipos'], par['iquat'], par['inertia']), (ipos, iquat, body['inertia']))
  total = masses[0] + masses[1]
  if total < MINVAL:
    par['mass'], par['inertia'] = 0.0, np.zeros(3)
    par['ipos'], par['iquat'] = np.zeros(3), np.array([1.0, 0, 0, 0])
    return
  com = (masses[0] * np.asarray(poses[0][0]) + masses[1] * np.asarray(poses[1][0])) / total
  tensor = np.zeros((3, 3))
  for m, (p, q, inert) in zip(masses, poses):
    r = frames.quat_to_mat(np.asarray(q, float))
    d = np.asarray(p, float) - com
    tensor += r @ np.diag(inert) @ r.T + m * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
  w, q = inertia.principal_frame(tensor)
  par['mass'], par['ipos'] = total, com
  par['iquat'], par['inertia'] = q, np.maximum(w, 0.0)


def _move(obj: dict, body: dict, orient: bool = True) -> None:
  """Re-expresses an element's compiled frame in the frame of its body's parent."""
  q = obj['quat_c'] if orient else np.array([1.0, 0, 0, 0])
  obj['pos_c'], q = frames.frame_accum(body['pos'], body['quat'], obj['pos_c'], q)
  if orient:
    obj['quat_c'] = q


def fuse_static(c: CompileState) -> None:
  """Merges bodies without joints into their parents (mjCModel::FuseStatic)."""
  refs = _referenced(c.root, _BODY_REFS, None)
  ft_sites = set()
  for sec in c.root.find('sensor'):
    for s in sec.children:
      if s.tag in ('force', 'torque') and 'site' in s.attrs:
        ft_sites.add(s.attrs['site'])
  i = 1
  while i < len(c.bodies):
    body = c.bodies[i]
    name = body['elem'].attrs.get('name', '')
    if name and (
      name in refs or any(s['elem'].attrs.get('name') in ft_sites for s in body['sites'])
    ):
      i += 1
      continue
    if body['joints'] or body['mocap'] or not body['fuse']:
      i += 1
      continue
    par = body['parent_ref']
    if par['id'] != 0 and body['mass'] >= MINVAL:
      _accumulate_inertia(par, body)
    for ch in body['children']:
      ch['pos'], ch['quat'] = frames.frame_accum(body['pos'], body['quat'], ch['pos'], ch['quat'])
      ch['parent_ref'] = par
    k = next(n for n, b in enumerate(par['children']) if b is body)
    par['children'][k : k + 1] = body['children']
    for kind in ('geoms', 'sites', 'cameras'):
      for obj in body.get(kind, []):
        _move(obj, body)
        par.setdefault(kind, []).append(obj)
    for lt in body.get('lights', []):
      _move(lt, body, orient=False)
      lt['dir'] = frames.quat_rotate(body['quat'], np.asarray(lt['dir'], float))
      par.setdefault('lights', []).append(lt)
    _renumber(c)


def _renumber(c: CompileState) -> None:
  """Depth-first body ids and per-body element lists, as after mjCModel::FuseReindex."""
  order = [c.bodies[0]]

  def visit(b, depth):
    for ch in b['children']:
      ch['depth'] = depth + 1
      order.append(ch)
      visit(ch, depth + 1)

  visit(c.bodies[0], 0)
  for i, b in enumerate(order):
    b['id'] = i
    if i:
      b['parent'] = b['parent_ref']['id']
  c.bodies = order
  c.joints = [j for b in order for j in b['joints']]
  for b in order:
    for j in b['joints']:
      j['body'] = b['id']
  for kind, attr in (('geom', 'geoms'), ('site', 'sites'), ('camera', 'cameras')):
    items = [x for b in order for x in b.get(attr, [])]
    for b in order:
      for x in b.get(attr, []):
        x['body'] = b['id']
    setattr(c, attr, items)
    _reregister(c, kind, items)
  c.lights = [x for b in order for x in b.get('lights', [])]
  for b in order:
    for x in b.get('lights', []):
      x['body'] = b['id']
  _reregister(c, 'light', c.lights)
  _reregister(c, 'body', order[1:], first=('world', 0))


def _reregister(
  c: CompileState, ns: str, items: list[dict], first: tuple[str, int] | None = None
) -> None:
  """Rebuilds a namespace from renumbered items (`first`: a name at index 0, the world)."""
  c.names[ns] = {}
  c.name_lists[ns] = []
  if first is not None:
    c.names[ns][first[0]] = first[1]
    c.name_lists[ns].append(first[0])
  for x in items:
    name = x['elem'].attrs.get('name', '')
    c.name_lists[ns].append(name)
    if name:
      c.names[ns][name] = len(c.name_lists[ns]) - 1


def discard_visual(c: CompileState) -> None:
  """Drops geoms that cannot collide and are not referenced, and their meshes (IndexAssets)."""
  sections = ('contact', 'tendon', 'sensor', 'custom')
  refs = _referenced(c.root, _GEOM_REFS, sections)

  def visual(g):
    name = g['elem'].attrs.get('name', '')
    return not g['contype'] and not g['conaffinity'] and not (name and name in refs)

  mesh_refs = _referenced(c.root, _MESH_REFS, ('sensor', 'custom'))
  mesh_names = c.name_lists.get('mesh', [])
  keep = [bool(n) and n in mesh_refs for n in mesh_names]
  for g in c.geoms:
    if 'mesh' in g and not visual(g):
      keep[c.names['mesh'][g['mesh']]] = True
  for b in c.bodies:
    b['geoms'] = [g for g in b['geoms'] if not visual(g)]
  new_id = np.cumsum(keep) - 1
  for b in c.bodies:
    for g in b['geoms']:
      if g['type'] == GeomType.MESH and 'dataid' in g:
        g['dataid'] = int(new_id[g['dataid']])
  c.meshes = [m for m, k in zip(c.meshes, keep) if k]
  c.assets['mesh'] = [a for a, k in zip(c.assets['mesh'], keep) if k]
  c.name_lists['mesh'] = [n for n, k in zip(mesh_names, keep) if k]
  c.names['mesh'] = {n: i for i, n in enumerate(c.name_lists['mesh']) if n}
  _renumber(c)

"""<asset>: meshes, height fields, textures, materials and skins (mjXReader::Asset in
xml_native_reader.cc; mjCMesh, mjCHField and mjCSkin::Compile in user_mesh.cc, mjCTexture's in
user_texture.cc, mjCMaterial's in user_objects.cc; mjCModel::ResolveReferences).

read_assets reads the <asset> sections into the state's assets (and names materials and
textures); after the body tree is read, compile_meshes and compile_hfields compile them into the
state's meshes and hfields (naming them), check_texture_files and resolve_references check what
MuJoCo checks of assets jaxsim does not render; build_mesh_arrays writes the mesh_* and hfield_*
arrays into out.
"""

from __future__ import annotations

import io
import os

import numpy as np

from jaxsim._src.enums import EPS, MINVAL, GeomType
from jaxsim.errors import ModelError
from jaxsim.mjcf import mesh as meshlib
from jaxsim.mjcf import mesh_builtin, polygon, schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element


def read_assets(s: CompileState, e: Element):
  """One <asset>: each asset read (with its default class), materials and textures named."""
  allowed = {'mesh', 'hfield', 'material', 'texture', 'skin'}
  util.only(e, allowed)
  for child in e.children:
    if child.tag == 'mesh':
      util.only(child, set())
      cls = s.cls_of(child, 'main')
      attrs = s.read_element(child, schema.MESH, 'mesh', cls)
      s.assets['mesh'].append((child, attrs))
    elif child.tag == 'hfield':
      util.only(child, set())
      s.assets['hfield'].append((child, schema.read_attrs(child, schema.HFIELD)))
    elif child.tag == 'material':
      util.only(child, {'layer'})
      cls = s.cls_of(child, 'main')
      attrs = s.read_element(child, schema.MATERIAL, 'material', cls)
      s.assets['material'].append((child, attrs))
    elif child.tag == 'texture':
      util.only(child, set())
      cls = s.cls_of(child, 'main')
      attrs = s.read_element(child, schema.TEXTURE, 'texture', cls)
      # mjXReader checks a gridlayout given here against the gridsize, its class's included
      layout = child.attrs.get('gridlayout')
      if layout is not None and len(layout) != int(np.prod(attrs['gridsize'])):
        raise child.error('gridlayout length must match gridsize', attribute='gridlayout')
      s.assets['texture'].append((child, attrs))
    elif child.tag == 'skin':
      util.only(child, {'bone'})
      s.assets['skin'].append((child, schema.read_attrs(child, schema.SKIN)))
  for kind in ('material', 'texture'):
    for i, (elem, _) in enumerate(s.assets[kind]):
      if kind == 'texture' and 'name' not in elem.attrs and 'file' in elem.attrs:
        elem = Element(
          elem.tag, {**elem.attrs, 'name': util.stem(elem.attrs['file'])}, [], elem.file, elem.line
        )
      if len(s.name_lists.get(kind, [])) <= i:
        s.register(kind, elem, i)


def meshes_needing_hulls(s: CompileState, root: Element) -> set[str]:
  """Names of meshes used by colliding mesh geoms; MuJoCo builds convex hulls only for those."""
  in_pairs = set()
  for sec in root.find('contact'):
    for p in sec.find('pair'):
      in_pairs.update(p.attrs.get(k) for k in ('geom1', 'geom2'))
  need = set()
  for g in s.geoms:
    if 'mesh' in g and g['type'] == GeomType.MESH:
      if g['contype'] or g['conaffinity'] or g['elem'].attrs.get('name') in in_pairs:
        need.add(g['mesh'])
  return need


def compile_meshes(s: CompileState, need_hull: set[str]):
  """Compiles every mesh (mjCMesh::Compile) into the state's meshes and names them; only the
  meshes in `need_hull` get a convex hull."""
  for i, (elem, attrs) in enumerate(s.assets['mesh']):
    name = attrs.get('name')
    if not name and 'file' in attrs:
      name = util.stem(attrs['file'])
    s.register('mesh', Element('mesh', {'name': name or ''}, [], elem.file, elem.line), i)
    forced_inertia = None
    if 'builtin' in attrs:
      # mjs_makeMesh: the compiler makes the vertices (and faces) as user vertex data.
      for other in ('file', 'vertex'):
        if other in attrs:
          raise elem.error(
            f"Schema violation: at most one of 'builtin', '{other}' can be specified", other
          )
      if 'params' not in attrs or not len(attrs['params']):
        raise elem.error('required attribute missing', attribute='params')
      kind = {v: k for k, v in schema.ENUMS['meshbuiltin'].items()}[attrs['builtin']]
      vert, face, forced_inertia = mesh_builtin.make(elem, kind, attrs['params'])
      if face is None and 'face' in attrs:
        if len(attrs['face']) % 3:
          raise elem.error('face data must be triples of vertex indices', attribute='face')
        face = attrs['face'].reshape(-1, 3)
    elif 'file' in attrs:
      if 'vertex' in attrs:
        raise elem.error('a mesh cannot have both a file and vertex data', attribute='vertex')
      path = _asset_path(s, 'meshdir', attrs['file'])
      try:
        data = s.read(path)
      except OSError as err:
        raise elem.error(f'cannot read mesh file {path!r}: {err.strerror}', 'file') from err
      try:
        vert, face = meshlib.read_mesh(data, path, attrs.get('content_type'))
      except ModelError as err:
        raise elem.error(f'bad mesh file {path!r}: {err.reason}', attribute='file') from err
    elif 'vertex' in attrs:
      v = attrs['vertex']
      if len(v) % 3 or len(v) < 12:
        raise elem.error('vertex data must be at least 4 points of 3 numbers', 'vertex')
      if 'face' in attrs and len(attrs['face']) % 3:
        raise elem.error('face data must be triples of vertex indices', attribute='face')
      vert = v.reshape(-1, 3)
      face = attrs['face'].reshape(-1, 3) if 'face' in attrs else None
    else:
      raise elem.error('a mesh needs a file or vertex data', attribute='file')
    if face is not None and len(face) and (face.min() < 0 or face.max() >= len(vert)):
      raise elem.error('face index out of range', attribute='face')
    inertia_mode = {v: k for k, v in schema.ENUMS['meshinertia'].items()}[attrs['inertia']]
    inertia_mode = forced_inertia or inertia_mode
    try:
      md = meshlib.compile_mesh(
        vert,
        face,
        scale=attrs['scale'],
        refpos=attrs.get('refpos', np.zeros(3)),
        refquat=attrs.get('refquat', np.array([1.0, 0, 0, 0])),
        inertia=inertia_mode,
        maxhullvert=attrs['maxhullvert'],
        name=name,
        need_hull=name in need_hull,
      )
    except ModelError as err:
      attr = 'file' if 'file' in attrs else 'params' if 'builtin' in attrs else 'vertex'
      raise elem.error(err.reason, attribute=attr) from err
    s.meshes.append(md)


def compile_hfields(s: CompileState):
  """Compiles every height field (mjCHField::Compile) into the state's hfields and names them."""
  for i, (elem, a) in enumerate(s.assets['hfield']):
    # a nameless hfield is named by its file's stem, as a mesh or texture is (mjCHField)
    name = a.get('name') or (util.stem(a['file']) if 'file' in a else '')
    s.register('hfield', Element('hfield', {'name': name}, [], elem.file, elem.line), i)
    if 'size' not in a:
      raise elem.error('missing required attribute', attribute='size')
    size = a['size']
    if (size <= 0).any():
      raise elem.error('hfield sizes must be positive', attribute='size')
    nrow, ncol = a.get('nrow', 0), a.get('ncol', 0)
    if 'file' in a:
      if 'elevation' in a or nrow or ncol:
        raise elem.error('an hfield file excludes nrow, ncol and elevation', attribute='file')
      path = _asset_path(s, 'meshdir', a['file'])
      try:
        raw = s.read(path)
      except OSError as err:
        raise elem.error(f'cannot read hfield file {path!r}: {err.strerror}', 'file') from err
      content = a.get('content_type') or (
        'image/png' if path.lower().endswith('.png') else 'image/vnd.mujoco.hfield'
      )
      if content not in ('image/png', 'image/vnd.mujoco.hfield'):
        raise elem.error(f'unsupported content type: {content!r}', attribute='content_type')
      data, nrow, ncol = _read_hfield(elem, raw, path, content == 'image/png')
    else:
      if nrow <= 0 or ncol <= 0:
        raise elem.error('hfield nrow and ncol must be positive', attribute='nrow')
      if nrow * ncol > util.MAX_ARRAY:
        raise elem.error(
          f'hfield is too large: nrow*ncol = {nrow * ncol} exceeds {util.MAX_ARRAY:.0e} samples',
          attribute='nrow',
        )
      data = np.zeros(nrow * ncol)
      if 'elevation' in a:
        if len(a['elevation']) != nrow * ncol:
          raise elem.error(f'expected nrow*ncol = {nrow * ncol} values', attribute='elevation')
        data = a['elevation'].astype(float)
        lo, hi = data.min(), data.max()
        data = (data - lo) / (hi - lo) if hi > lo else np.zeros_like(data)
        # MuJoCo stores rows bottom-up: the first row of the attribute is the top (max y) row.
        data = data.reshape(nrow, ncol)[::-1].reshape(-1)
    if nrow < 2 or ncol < 2:
      raise elem.error(
        f'hfield dimensions must be at least 2 (nrow {nrow}, ncol {ncol})',
        attribute='nrow' if nrow < 2 else 'ncol',
      )
    s.hfields.append({'size': size, 'nrow': nrow, 'ncol': ncol, 'data': data})


def check_texture_files(s: CompileState):
  """Opens the image files of textures that are not builtin, as mjCTexture::Compile does.

  jaxsim does not render, but a texture file MuJoCo cannot open or decode fails its compile.
  Only the PNG signature is checked, not the image. A texture left by reference to its file
  (MuJoCo 4's texture embed="false", or compiler passthrough="textures") is not opened.
  """
  for elem, attrs in s.assets['texture']:
    if _by_reference(s, elem, attrs):
      continue
    if attrs['builtin']:
      # a builtin texture ignores its files, but is drawn at its size (mjCTexture::Builtin*):
      # a 2D one needs a height too, a cube or skybox (the default type) only a width
      keys = ('width', 'height') if attrs['type'] == 0 else ('width',)
      for key in keys:
        if not attrs.get(key, 0) > 0:
          raise elem.error(f'invalid {key} of builtin texture', attribute=key)
      continue
    if not attrs.get('file'):
      if attrs['type'] == 0:
        raise elem.error('a 2D texture needs a file (or a builtin)', attribute='file')
      if not any(attrs.get(k) for k in schema.TEXTURE_CUBE_FILES):
        raise elem.error('a cube or skybox texture needs a file, cube files or a builtin')
    for key in ('file',) + schema.TEXTURE_CUBE_FILES:
      if not attrs.get(key):
        continue
      path = _asset_path(s, 'texturedir', attrs[key])
      try:
        data = s.read(path)
      except OSError as err:
        raise elem.error(f'cannot read texture file {path!r}: {err.strerror}', key) from err
      kind = attrs.get('content_type') or {'.png': 'image/png', '.ktx': 'image/ktx'}.get(
        os.path.splitext(path)[1].lower(), ''
      )
      if kind not in ('image/png', 'image/ktx'):
        raise elem.error(f'unsupported content type {kind!r} of {path!r}', attribute=key)
      if kind == 'image/png' and data[:8] != b'\x89PNG\r\n\x1a\n':
        raise elem.error(f'{path!r} is not a PNG file', attribute=key)


def _by_reference(s: CompileState, elem: Element, attrs: dict) -> bool:
  """Whether a texture is left by reference to its file, unread (MuJoCo 4): asked for by its
  embed="false", or by embed="auto" under compiler passthrough="textures"; only a single-file
  texture can be, unflipped, not a grid, nor builtin, its file not in the assets (MuJoCo's VFS).
  embed="false" on one that cannot be is an error."""
  embed = attrs['embed']
  if embed == 1 or (embed == 2 and not s.comp['passthrough']):
    return False
  why = None
  if attrs['builtin']:
    why = 'it is builtin'
  elif not attrs.get('file'):
    why = 'it is given as cube files'
  elif attrs.get('hflip') or attrs.get('vflip'):
    why = 'it is flipped'
  elif int(np.prod(attrs['gridsize'])) != 1:
    why = 'it is a grid'
  elif s.read.in_memory(_asset_path(s, 'texturedir', attrs['file'])):
    why = 'its file is served from memory (the assets)'
  if why is None:
    return True
  if embed == 0:
    raise elem.error(f'texture cannot be by reference: {why}', attribute='embed')
  return False


def _asset_path(s: CompileState, directory_key: str, filename: str) -> str:
  """The path of an asset file: meshdir or texturedir, then the model's directory (strippath
  first drops the file's own directories)."""
  base = s.comp.get(directory_key) or ''
  if s.comp['strippath']:
    filename = os.path.basename(filename.replace('\\', '/'))
  if os.path.isabs(filename):
    return filename
  return os.path.normpath(os.path.join(s.directory, base, filename))


def _check_skin(s: CompileState, elem: Element, attrs: dict) -> None:
  """mjCSkin::Compile's checks of a skin (kept for rendering only): bones name bodies, and an
  inline skin's faces and bone vertices index its vertex list, every vertex weighted."""
  bones = []
  for bone in elem.children:
    util.only(bone, set())
    b = schema.read_attrs(bone, schema.BONE)
    for req in schema.BONE:
      if req not in b:
        raise bone.error('missing required attribute', attribute=req)
    if bone.attrs['body'] not in s.names.get('body', {}):
      raise bone.error(f'unknown body {bone.attrs["body"]!r} in skin', attribute='body')
    if len(b['vertid']) != len(b['vertweight']) or not len(b['vertid']):
      raise bone.error('vertid and vertweight must have same non-zero size', 'vertweight')
    bones.append((bone, b))
  if attrs.get('file'):
    return  # vertices and faces come from the file, which jaxsim does not read
  vert, face = attrs.get('vertex', ()), attrs.get('face', ())
  if not len(vert) or not len(face) or not bones:
    raise elem.error('missing data in skin: vertex, face and at least one bone')
  if len(vert) % 3 or len(face) % 3:
    key = 'vertex' if len(vert) % 3 else 'face'
    raise elem.error('skin vertex and face data must be multiples of 3', attribute=key)
  nvert = len(vert) // 3
  bad = [int(i) for i in face if not 0 <= i < nvert]
  if bad:
    raise elem.error(f'face vertex index {bad[0]} out of range in skin', attribute='face')
  weight = np.zeros(nvert, np.float32)
  for bone, b in bones:
    ids = np.asarray(b['vertid'])
    out = ids[(ids < 0) | (ids >= nvert)]
    if len(out):
      raise bone.error(f'vertid {int(out[0])} out of range in skin', attribute='vertid')
    np.add.at(weight, ids, np.asarray(b['vertweight'], np.float32))
  light = np.flatnonzero(weight <= MINVAL)
  if len(light):
    raise elem.error(f'vertex {int(light[0])} must have positive total weight in skin')


def resolve_references(s: CompileState):
  """Looks up the materials, textures and target bodies that elements name, as MuJoCo does.

  jaxsim does not render, but a name that refers to nothing is an error in MuJoCo
  (mjCModel::ResolveReferences, mjCCamera/mjCLight::ResolveReferences).
  """
  mesh_names = s.name_lists.get('mesh', [])
  mesh_material = {n: a.get('material', '') for n, (_, a) in zip(mesh_names, s.assets['mesh'])}
  for g in s.geoms:
    e = g['elem']
    if g.get('material'):
      s.lookup('material', e, 'material', g['material'])
    elif g.get('mesh') in s.names.get('mesh', {}):
      # A geom without a material of its own takes its mesh's material.
      name = mesh_material.get(g['mesh'], '')
      if name and name not in s.names.get('material', {}):
        raise e.error(f'unknown material {name!r} (the material of mesh {g["mesh"]!r})', 'mesh')
  for elem, attrs in s.assets['skin']:
    if attrs.get('material'):
      s.lookup('material', elem, 'material', attrs['material'])
    _check_skin(s, elem, attrs)
  for site in s.sites:
    if site.get('material'):
      s.lookup('material', site['elem'], 'material', site['material'])
  for elem, attrs in s.assets['material']:
    layers = elem.find('layer')
    if attrs.get('texture'):
      if layers:
        raise layers[0].error('a material with a texture attribute cannot have <layer> elements')
      s.lookup('texture', elem, 'texture', attrs['texture'])
    for layer in layers:
      util.only(layer, set())
      a = schema.read_attrs(layer, schema.LAYER)
      for req in ('role', 'texture'):
        if req not in a:
          raise layer.error('missing required attribute', attribute=req)
      s.lookup('texture', layer, 'texture', a['texture'])
  for c in s.cameras:
    c['targetbody'] = -1
    if c.get('target'):
      c['targetbody'] = s.lookup('body', c['elem'], 'target', c['target'])
  for lt in s.lights:
    if lt.get('target'):
      s.lookup('body', lt['elem'], 'target', lt['target'])
    if lt.get('texture'):
      s.lookup('texture', lt['elem'], 'texture', lt['texture'])


def build_mesh_arrays(s: CompileState):
  """Writes the mesh_* (with the hulls' polygons) and hfield_* arrays into out."""
  out = s.out
  ms = s.meshes
  out['mesh_vertnum'] = np.array([len(m.vert) for m in ms], dtype=int)
  out['mesh_vertadr'] = util.adr(out['mesh_vertnum'])
  out['mesh_facenum'] = np.array([len(m.face) for m in ms], dtype=int)
  out['mesh_faceadr'] = util.adr(out['mesh_facenum'])
  out['mesh_vert'] = np.concatenate([m.vert for m in ms]) if ms else np.zeros((0, 3))
  out['mesh_face'] = (
    np.concatenate([m.face for m in ms]).astype(int) if ms else np.zeros((0, 3), int)
  )
  out['mesh_pos'] = util.rows([m.pos for m in ms], 3)
  out['mesh_quat'] = util.rows([m.quat for m in ms], 4)
  out['mesh_data'] = tuple(ms)
  out.update(polygon.model_arrays(ms))
  hf = s.hfields
  out['nhfield'] = len(hf)
  out['hfield_size'] = util.rows([h['size'] for h in hf], 4)
  out['hfield_nrow'] = np.array([h['nrow'] for h in hf], dtype=int)
  out['hfield_ncol'] = np.array([h['ncol'] for h in hf], dtype=int)
  out['hfield_adr'] = util.adr(out['hfield_nrow'] * out['hfield_ncol'])
  out['hfield_data'] = np.concatenate([h['data'] for h in hf]) if hf else np.zeros(0)


def _read_hfield(elem: Element, raw: bytes, path: str, png: bool):
  """Height data, rows bottom-up and scaled to [0, 1] (mjCHField::Compile), from a PNG or from
  MuJoCo's binary hfield format (int32 nrow, ncol, then float32 data)."""
  if png:
    grey = _png_grey(elem, raw, path)
    nrow, ncol = grey.shape
    data = grey.astype(np.float32).reshape(-1)
  else:
    if len(raw) < 8:
      raise elem.error(f'hfield file {path!r} is too short', attribute='file')
    nrow, ncol = (int(x) for x in np.frombuffer(raw[:8], dtype='<i4'))
    if nrow <= 0 or ncol <= 0 or len(raw) != 8 + 4 * nrow * ncol:
      raise elem.error(f'hfield file {path!r} has an inconsistent size', attribute='file')
    data = np.frombuffer(raw[8:], dtype='<f4')
  # in single precision, as MuJoCo's float elevation data
  lo, hi = data.min(), data.max()
  data = data - lo
  if hi - lo > EPS:
    data = data / (hi - lo)
  return data.astype(float).reshape(nrow, ncol)[::-1].reshape(-1), nrow, ncol


def _png_grey(elem: Element, raw: bytes, path: str) -> np.ndarray:
  """A PNG as MuJoCo reads it for a height field (lodepng to 8-bit grey): the grey or red
  channel, the high byte of 16-bit samples, (rows, columns) top-down."""
  # Pillow decodes every PNG variant (bit depths, palettes, Adam7 interlacing) in C
  from PIL import Image, UnidentifiedImageError

  try:
    img = Image.open(io.BytesIO(raw))
    img.load()
  except (OSError, UnidentifiedImageError, ValueError) as err:
    raise elem.error(f'error decoding PNG file {path!r}: {err}', attribute='file') from None
  if img.mode.startswith('I'):  # 16-bit grey
    return (np.asarray(img).astype(np.int64) >> 8).astype(np.uint8)
  return np.asarray(img.convert('RGBA'))[..., 0]

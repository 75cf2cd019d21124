"""Mesh decoding and compilation against MuJoCo (jaxsim.mjcf.mesh vs mujoco.MjModel)."""

from __future__ import annotations

import os
import struct

import mujoco
import numpy as np
import pytest

from jaxsim._src.enums import GeomType
from jaxsim.errors import ModelError
from jaxsim.mjcf import mesh as M
from jaxsim.mjcf import polygon

MODES = ('legacy', 'convex', 'exact', 'shell')
DOG_FILES = (
  'BONEC_1.stl',
  'BONEL_5.stl',
  'BONEJaw.stl',
  'BONERadius_R.stl',
  'BONEPhalanges_B_2_R_2.stl',
)


def _dog_dir() -> str:
  dm_control = pytest.importorskip('dm_control')
  return os.path.join(os.path.dirname(dm_control.__file__), 'suite', 'dog_assets')


# ------------------------------------------------------------------------------------------------
# small meshes written to disk


def _quat_mat(q) -> np.ndarray:
  m = np.zeros(9)
  mujoco.mju_quat2Mat(m, np.asarray(q, float) / np.linalg.norm(q))
  return m.reshape(3, 3)


def _box() -> tuple[np.ndarray, list[list[int]]]:
  """An off-centre, rotated box with outward quads."""
  half = np.array([0.2, 0.1, 0.05])
  corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
  rot = _quat_mat([0.9, 0.3, -0.2, 0.1])
  vert = corners @ rot.T + np.array([0.3, -0.2, 0.5])
  quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
  return vert, quads


def _l_prism() -> tuple[np.ndarray, list[list[int]]]:
  """A non-convex L-shaped prism; its caps are single hexagons (exercises ear clipping)."""
  outline = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 3), (0, 3)]
  vert = np.array([(x, y, z) for z in (0.0, 0.5) for x, y in outline]) * 0.1
  n = len(outline)
  faces = [list(range(n - 1, -1, -1)), list(range(n, 2 * n))]
  faces += [[i, (i + 1) % n, n + (i + 1) % n, n + i] for i in range(n)]
  return vert, faces


def _tetrahedron() -> tuple[np.ndarray, list[list[int]]]:
  vert = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float) * 0.1 + 0.05
  return vert, [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]


def _obj_vertex(v) -> str:
  return 'v ' + ' '.join(f'{x:.17g}' for x in v)


def _obj(vert, faces) -> bytes:
  lines = ['# test mesh', 'o part'] + [_obj_vertex(v) for v in vert]
  lines += ['vn 0 0 1'] + ['f ' + ' '.join(f'{i + 1}//1' for i in f) for f in faces]
  return ('\n'.join(lines) + '\n').encode()


def _triangles(faces) -> np.ndarray:
  return np.array([[f[0], f[k], f[k + 1]] for f in faces for k in range(1, len(f) - 1)])


def _stl_binary(vert, faces) -> bytes:
  tri = np.asarray(vert, np.float32)[_triangles(faces)]
  out = [b'solid-looking binary header'.ljust(80, b' '), struct.pack('<i', len(tri))]
  for t in tri:
    out.append(struct.pack('<3f', 0, 0, 0) + t.astype('<f4').tobytes() + b'\0\0')
  return b''.join(out)


def _stl_ascii(vert, faces) -> bytes:
  tri = np.asarray(vert, np.float32)[_triangles(faces)]
  lines = ['solid box']
  for t in tri:
    lines += ['  facet normal 0 0 0', '    outer loop']
    lines += ['      vertex ' + ' '.join(f'{x:.9g}' for x in p) for p in t]
    lines += ['    endloop', '  endfacet']
  return ('\n'.join(lines + ['endsolid box']) + '\n').encode()


def _msh(vert, tri) -> bytes:
  head = struct.pack('<4i', len(vert), 0, 0, len(tri))
  return head + np.asarray(vert, '<f4').tobytes() + np.asarray(tri, '<i4').tobytes()


@pytest.fixture
def assets(tmp_path):
  """Writes the small meshes; returns the directory."""
  box_v, box_f = _box()
  files = {
    'box.obj': _obj(box_v, box_f),
    'box.stl': _stl_binary(box_v, box_f),
    'box_ascii.stl': _stl_ascii(box_v, box_f),
    'lshape.obj': _obj(*_l_prism()),
    'tet.obj': _obj(*_tetrahedron()),
    'box.msh': _msh(box_v, _triangles(box_f)),
    'cloud.obj': ('\n'.join(_obj_vertex(v) for v in box_v) + '\n').encode(),
  }
  for name, data in files.items():
    (tmp_path / name).write_bytes(data)
  return tmp_path


# ------------------------------------------------------------------------------------------------
# helpers comparing against a compiled MjModel


def _load(tmp_path, body: str, asset: str, compiler: str = '') -> mujoco.MjModel:
  xml = f"""<mujoco><compiler meshdir="{tmp_path}" {compiler}/>
  <asset>{asset}</asset><worldbody>{body}</worldbody></mujoco>"""
  path = tmp_path / 'model.xml'
  path.write_text(xml)
  return mujoco.MjModel.from_xml_path(str(path))


def _compile(path, **kwargs) -> M.MeshData:
  vert, face = M.read_mesh(path.read_bytes(), str(path))
  return M.compile_mesh(vert, face, **kwargs)


def _check_mesh(m: mujoco.MjModel, i: int, md: M.MeshData):
  """mesh_vert/face/pos/quat/scale and the hull match MuJoCo's mesh i."""
  va, vn = m.mesh_vertadr[i], m.mesh_vertnum[i]
  fa, fn = m.mesh_faceadr[i], m.mesh_facenum[i]
  # Same operations in the same order: these come out bit for bit.
  np.testing.assert_array_equal(md.vert, m.mesh_vert[va : va + vn])
  np.testing.assert_array_equal(md.face, m.mesh_face[fa : fa + fn])
  np.testing.assert_array_equal(md.pos, m.mesh_pos[i])
  np.testing.assert_array_equal(md.quat, m.mesh_quat[i])
  np.testing.assert_array_equal(md.scale, m.mesh_scale[i])
  adr = m.mesh_graphadr[i]
  assert (adr == -1) == (md.graph is None)
  if md.graph is None:
    return
  graph = m.mesh_graph[adr:]
  nv, nf = graph[0], graph[1]
  np.testing.assert_array_equal(md.graph[:2], [nv, nf])
  size = 2 + 3 * nv + 6 * nf
  ours = md.graph[:size]
  # The face block is identical; vertices are listed in a different (documented) order, so
  # compare each vertex's neighbours as a set of point ids.
  np.testing.assert_array_equal(ours[2 + 3 * nv + 3 * nf :], graph[2 + 3 * nv + 3 * nf : size])

  def neighbours(g):
    gid = g[2 + nv : 2 + 2 * nv]
    edges = g[2 + 2 * nv : 2 + 3 * nv + 3 * nf]
    out = {}
    for k in range(nv):
      a = g[2 + k]
      nb = set()
      while edges[a] != -1:
        nb.add(int(gid[edges[a]]))
        a += 1
      out[int(gid[k])] = nb
    return out

  assert neighbours(ours) == neighbours(graph)
  _check_polygons(m, i, md)


def _check_polygons(m: mujoco.MjModel, i: int, md: M.MeshData):
  """The hull's polygons equal MuJoCo's mesh_poly* of mesh i: same loops, order, normals, map."""
  pa, pn = m.mesh_polyadr[i], m.mesh_polynum[i]
  va, vn = m.mesh_vertadr[i], m.mesh_vertnum[i]
  adr, num = m.mesh_polyvertadr[pa : pa + pn], m.mesh_polyvertnum[pa : pa + pn]
  theirs = [tuple(int(v) for v in m.mesh_polyvert[a : a + n]) for a, n in zip(adr, num)]
  assert list(md.polygons) == theirs
  np.testing.assert_array_equal(md.polynormal, m.mesh_polynormal[pa : pa + pn])
  madr, mnum = m.mesh_polymapadr[va : va + vn], m.mesh_polymapnum[va : va + vn]
  pmap = [[int(k) for k in m.mesh_polymap[a : a + n]] for a, n in zip(madr, mnum)]
  assert polygon.polygon_map(list(md.polygons), vn) == pmap


def _check_geom(m: mujoco.MjModel, g: int, out: dict, density: float):
  """geom frame, size, aabb and the body mass/inertia of a single-geom body."""
  np.testing.assert_allclose(out['pos'], m.geom_pos[g], rtol=0, atol=1e-15)
  np.testing.assert_allclose(out['quat'], m.geom_quat[g], rtol=0, atol=1e-15)
  np.testing.assert_allclose(out['size'], m.geom_size[g], rtol=0, atol=1e-15)
  assert (m.geom_dataid[g] >= 0) == out['keeps_mesh']
  if out['keeps_mesh']:
    np.testing.assert_allclose(out['aabb'], m.geom_aabb[g], rtol=0, atol=1e-15)
    np.testing.assert_allclose(out['rbound'], m.geom_rbound[g], rtol=1e-15)
  b = m.geom_bodyid[g]
  mass = density * out['volume']
  np.testing.assert_allclose(m.body_mass[b], mass, rtol=1e-12)
  np.testing.assert_allclose(m.body_ipos[b], out['pos'], rtol=0, atol=1e-15)
  rot = _quat_mat(out['quat'])
  want = rot @ np.diag(density * out['inertia']) @ rot.T
  rot_b = _quat_mat(m.body_iquat[b])
  got = rot_b @ np.diag(m.body_inertia[b]) @ rot_b.T
  np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * np.abs(want).max())


# ------------------------------------------------------------------------------------------------
# tests


def test_default_inertia_mode_is_mujocos():
  assert mujoco.MjSpec().add_mesh().inertia == mujoco.mjtMeshInertia.mjMESH_INERTIA_LEGACY
  assert M.DEFAULT_INERTIA == 'legacy'


@pytest.mark.parametrize('mode', MODES)
def test_small_meshes_all_inertia_modes(assets, mode):
  meshes = [
    ('box.obj', '0.5 2 1.5', '0.01 -0.02 0.03', '0.8 0.2 0.3 -0.1'),
    ('box.stl', '1 1 1', '0 0 0', '1 0 0 0'),
    ('box.msh', '2 2 2', '0 0 0', '1 0 0 0'),
    ('lshape.obj', '1 0.5 1', '0 0 0', '1 0 0 0'),
    ('tet.obj', '1 1 1', '0.1 0 0', '0 1 0 0'),
    ('box.obj', '-1 1 1', '0 0 0', '1 0 0 0'),
  ]
  asset = ''.join(
    f'<mesh name="m{i}" file="{f}" scale="{s}" refpos="{p}" refquat="{q}" inertia="{mode}"/>'
    for i, (f, s, p, q) in enumerate(meshes)
  )
  gpos, gquat = '0.1 -0.2 0.3', '0.7 0.1 -0.4 0.2'
  body = ''.join(
    f'<body><geom type="mesh" mesh="m{i}" density="{700 + i}" pos="{gpos}" quat="{gquat}"/></body>'
    for i in range(len(meshes))
  )
  m = _load(assets, body, asset)
  for i, (f, s, p, q) in enumerate(meshes):
    md = _compile(
      assets / f,
      scale=[float(x) for x in s.split()],
      refpos=[float(x) for x in p.split()],
      refquat=[float(x) for x in q.split()],
      inertia=mode,
      name=f'm{i}',
    )
    _check_mesh(m, i, md)
    out = M.mesh_geom(
      md,
      GeomType.MESH,
      1.0,
      False,
      pos=[float(x) for x in gpos.split()],
      quat=[float(x) for x in gquat.split()],
    )
    _check_geom(m, i, out, 700 + i)


@pytest.mark.parametrize('mode', MODES)
def test_dog_meshes(mode):
  d = _dog_dir()
  asset = ''.join(
    f'<mesh name="m{i}" file="{f}" scale="1.5 0.7 1.2" inertia="{mode}"/>'
    for i, f in enumerate(DOG_FILES)
  )
  body = ''.join(
    f'<body><geom type="mesh" mesh="m{i}" density="1100"/></body>' for i in range(len(DOG_FILES))
  )
  xml = f'<mujoco><compiler meshdir="{d}"/><asset>{asset}</asset><worldbody>{body}</worldbody>'
  m = mujoco.MjModel.from_xml_string(xml + '</mujoco>')
  for i, f in enumerate(DOG_FILES):
    with open(os.path.join(d, f), 'rb') as fh:
      vert, face = M.read_mesh(fh.read(), f)
    md = M.compile_mesh(vert, face, scale=(1.5, 0.7, 1.2), inertia=mode)
    _check_mesh(m, i, md)
    _check_geom(m, i, M.mesh_geom(md, GeomType.MESH, 1.0, False), 1100)


def test_dog_skin_msh_mirrored():
  d = _dog_dir()
  xml = f"""<mujoco><compiler meshdir="{d}"/><asset>
  <mesh name="skin" file="dog_skin.msh" scale="-1 1 1" inertia="convex"/></asset>
  <worldbody><body><geom type="mesh" mesh="skin"/></body></worldbody></mujoco>"""
  m = mujoco.MjModel.from_xml_string(xml)
  with open(os.path.join(d, 'dog_skin.msh'), 'rb') as fh:
    vert, face = M.read_mesh(fh.read(), 'dog_skin.msh')
  md = M.compile_mesh(vert, face, scale=(-1, 1, 1), inertia='convex')
  _check_mesh(m, 0, md)
  _check_geom(m, 0, M.mesh_geom(md, GeomType.MESH), 1000)


@pytest.mark.parametrize('fitaabb', [False, True])
def test_fitted_primitives(assets, fitaabb):
  types = {'sphere': 2, 'capsule': 3, 'ellipsoid': 4, 'cylinder': 5, 'box': 6}
  asset = (
    '<mesh name="box" file="box.obj" scale="1 2 1"/>'
    '<mesh name="lshape" file="lshape.obj" inertia="shell"/>'
  )
  cases = [(t, mesh) for t in types for mesh in ('box', 'lshape')]
  body = ''.join(
    f'<body><geom type="{t}" mesh="{mesh}" fitscale="1.3" pos="0 0.1 0" quat="0 0 0 1"/></body>'
    for t, mesh in cases
  )
  m = _load(assets, body, asset, f'fitaabb="{str(fitaabb).lower()}"')
  meshes = {
    'box': _compile(assets / 'box.obj', scale=(1, 2, 1)),
    'lshape': _compile(assets / 'lshape.obj', inertia='shell'),
  }
  for g, (t, mesh) in enumerate(cases):
    out = M.mesh_geom(meshes[mesh], types[t], 1.3, fitaabb, pos=(0, 0.1, 0), quat=(0, 0, 0, 1))
    assert m.geom_type[g] == types[t]
    _check_geom(m, g, out, 1000)


def test_binary_and_ascii_stl_and_obj_agree(assets):
  v_obj, f_obj = M.read_mesh((assets / 'box.obj').read_bytes(), 'box.obj')
  v_stl, f_stl = M.read_mesh((assets / 'box.stl').read_bytes(), 'box.stl')
  v_asc, f_asc = M.read_mesh(
    (assets / 'box_ascii.stl').read_bytes(), 'box_ascii.stl', allow_ascii_stl=True
  )
  # STL corners are merged back to the 8 corners; ASCII parses to the same.
  assert len(v_stl) == 8 and len(f_stl) == 12
  np.testing.assert_array_equal(v_asc, v_stl)
  np.testing.assert_array_equal(f_asc, f_stl)
  # Same corner set as the OBJ (which keeps its own order) and the same volume.
  assert sorted(map(tuple, v_obj)) == sorted(map(tuple, v_stl))
  vol_obj = M.compile_mesh(v_obj, f_obj, inertia='exact').volume
  vol_stl = M.compile_mesh(v_stl, f_stl, inertia='exact').volume
  np.testing.assert_allclose(vol_obj, vol_stl, rtol=1e-6)
  np.testing.assert_allclose(vol_obj, 0.4 * 0.2 * 0.1, rtol=1e-6)


def test_point_cloud_uses_hull_and_visual_mesh_has_no_hull(assets):
  asset = (
    '<mesh name="cloud" file="cloud.obj"/>'
    '<mesh name="visual" file="lshape.obj" maxhullvert="6"/>'
    '<mesh name="limited" file="lshape.obj" maxhullvert="6" inertia="convex"/>'
  )
  body = (
    '<body><geom type="mesh" mesh="cloud"/></body>'
    '<body><geom type="mesh" mesh="visual" contype="0" conaffinity="0"/></body>'
    '<body><geom type="mesh" mesh="limited"/></body>'
  )
  m = _load(assets, body, asset)
  vert, face = M.read_mesh((assets / 'cloud.obj').read_bytes(), 'cloud.obj')
  assert face is None
  cloud = M.compile_mesh(vert, face)
  _check_mesh(m, 0, cloud)
  np.testing.assert_array_equal(cloud.face, cloud.hull_face)
  visual = _compile(assets / 'lshape.obj', maxhullvert=6, need_hull=False)
  assert visual.graph is None
  _check_mesh(m, 1, visual)
  limited = _compile(assets / 'lshape.obj', maxhullvert=6, inertia='convex')
  assert len(limited.hull_vert) <= 6
  _check_mesh(m, 2, limited)
  _check_geom(m, 2, M.mesh_geom(limited, GeomType.MESH), 1000)


def test_obj_polygons_shapes_and_indices():
  text = '\n'.join(
    ['v 0 0 0', 'v 1 0 0', 'v 1 1 0', 'v 0 1 0', 'v 0.5 0.5 1', 'v -1 -1 -1']
    + ['f 1 2 3 4', 'f -5/1/1 -4//1 -2', 'g second', 'f 1 2 5']
  )
  vert, face = M.read_mesh(text.encode(), 'x.obj')
  assert vert.shape == (6, 3)
  # The square is cut along its shorter diagonal (tie: 0-1-3, 1-2-3); only the first group's
  # faces are kept; relative indices count back from the last vertex read.
  np.testing.assert_array_equal(face, [[0, 1, 3], [1, 2, 3], [1, 2, 4]])


def test_obj_ear_clipping_matches_mujoco(tmp_path):
  # A degenerate pentagon (its last corner repeats the first) triangulates as tinyobjloader does.
  cube = '\n'.join(f'v {x} {y} {z}' for x in (0, 1) for y in (0, 1) for z in (0, 1))
  quads = ['f 5 7 8 6', 'f 1 5 6 2', 'f 3 4 8 7', 'f 1 3 7 5', 'f 2 6 8 4']
  text = '\n'.join([cube, 'f 1 2 4 3 1'] + quads) + '\n'
  (tmp_path / 'pent.obj').write_text(text)
  m = _load(tmp_path, '<body><geom type="mesh" mesh="pent"/></body>', '<mesh file="pent.obj"/>')
  vert, face = M.read_mesh(text.encode(), 'pent.obj')
  np.testing.assert_array_equal(face, m.mesh_face)
  _check_mesh(m, 0, M.compile_mesh(vert, face))


@pytest.mark.parametrize('n', [99, 100, 101, 128, 215])
def test_obj_faces_of_more_than_100_vertices_are_dropped(tmp_path, n):
  """mujoco 4.0.0's OBJ decoder gives no triangle for a face of more than 100 vertices (the
  Hello Robot Stretch 3's gripper mesh has one of 215); the vertices stay."""
  a = np.linspace(0, 2 * np.pi, n, endpoint=False)
  vert = [(np.cos(t), np.sin(t), 0.0) for t in a] + [(0.0, 0.0, 1.0)]
  text = ''.join(f'v {x:.9g} {y:.9g} {z:.9g}\n' for x, y, z in vert)
  text += ''.join(f'f {i + 1} {(i + 1) % n + 1} {n + 1}\n' for i in range(n))
  text += 'f ' + ' '.join(str(i + 1) for i in range(n)) + '\n'
  (tmp_path / f'cone{n}.obj').write_text(text)
  body, asset = '<body><geom type="mesh" mesh="c"/></body>', f'<mesh name="c" file="cone{n}.obj"/>'
  m = _load(tmp_path, body, asset)
  assert m.mesh_facenum[0] == (2 * n - 2 if n <= 100 else n)
  vert, face = M.read_mesh(text.encode(), f'cone{n}.obj')
  np.testing.assert_array_equal(face, m.mesh_face)
  _check_mesh(m, 0, M.compile_mesh(vert, face))


# ------------------------------------------------------------------------------------------------
# malformed input: MuJoCo refuses it and so does jaxsim


def _mujoco_rejects(tmp_path, name: str, data: bytes, mesh_attrs: str = ''):
  (tmp_path / name).write_bytes(data)
  with pytest.raises(ValueError):
    _load(
      tmp_path,
      '<body><geom type="mesh" mesh="bad"/></body>',
      f'<mesh name="bad" file="{name}" {mesh_attrs}/>',
    )


_BAD_FILES = {
  'empty.stl': b'',
  'short.stl': b'\0' * 50,
  'zero.stl': b'\0' * 84,
  'truncated.stl': _stl_binary(*_box())[:-7],
  'ascii.stl': _stl_ascii(*_box()),
  'nan.stl': _stl_binary([[np.nan, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], [[0, 1, 2]]),
  'zero_index.obj': b'v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 0 1 2\n',
  'missing_vertex.obj': b'v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 9\n',
  'bad_relative.obj': b'v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf -1 -2 -7\n',
  'few.msh': _msh(np.eye(3), [[0, 1, 2]]),
  'truncated.msh': _msh(np.eye(4), [[0, 1, 2]])[:-4],
  'badface.msh': _msh(np.eye(4), [[0, 1, 4]]),
  'header.msh': b'\1\0\0',
  'unknown.xyz': b'0 0 0\n',
}


@pytest.mark.parametrize('name', sorted(_BAD_FILES))
def test_malformed_files_raise(tmp_path, name):
  data = _BAD_FILES[name]
  with pytest.raises(ModelError) as info:
    M.read_mesh(data, name)
  assert info.value.file == name
  _mujoco_rejects(tmp_path, name, data)


@pytest.mark.parametrize(
  'case', ['flipped_exact', 'coplanar', 'three_vertices', 'flat_volume', 'bad_face_index']
)
def test_compile_errors_match_mujoco(tmp_path, case):
  vert, faces = _tetrahedron()
  tri = np.array(faces)
  mode = 'legacy'
  if case == 'flipped_exact':
    tri[0] = tri[0, ::-1]
    mode = 'exact'
  elif case == 'coplanar':
    vert = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    tri = np.array([[0, 1, 2], [1, 3, 2]])
  elif case == 'three_vertices':
    vert, tri = vert[:3], tri[:1]
  elif case == 'flat_volume':
    vert = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], float)
    tri = np.array([[0, 1, 2], [1, 3, 2]])
  elif case == 'bad_face_index':
    tri[0, 0] = 7
  name = f'{case}.msh'
  data = _msh(vert, tri) if len(vert) >= 4 else b''
  with pytest.raises(ModelError):
    M.compile_mesh(vert, tri, inertia=mode)
  if data:
    _mujoco_rejects(tmp_path, name, data, f'inertia="{mode}"')


def test_unknown_inertia_mode():
  vert, faces = _tetrahedron()
  with pytest.raises(ModelError):
    M.compile_mesh(vert, np.array(faces), inertia='solid')


# ------------------------------------------------------------------------------------------------
# mesh polygons (mesh_poly*): what multi-contact collisions read

POLY_FIELDS = (
  'mesh_polynum',
  'mesh_polyadr',
  'mesh_polynormal',
  'mesh_polyvertadr',
  'mesh_polyvertnum',
  'mesh_polyvert',
  'mesh_polymapadr',
  'mesh_polymapnum',
  'mesh_polymap',
)


def _check_poly_fields(m, mj: mujoco.MjModel):
  for k in POLY_FIELDS:
    np.testing.assert_array_equal(np.asarray(getattr(m, k)), getattr(mj, k), err_msg=k)


def test_polygon_model_fields_match_mujoco(assets):
  """A box from vertex/face data, a random convex cloud (hull only), a mirrored, a rotated and a
  visual-only mesh: every mesh_poly* array equals MuJoCo's, bit for bit."""
  import jaxsim

  rng = np.random.default_rng(3)
  cloud = rng.normal(size=(40, 3)) * [0.3, 0.2, 0.1]
  box_v, box_f = _box()
  tris = _triangles(box_f)
  flat = lambda a: ' '.join(repr(float(x)) for x in np.ravel(a))  # noqa: E731
  face = ' '.join(str(int(i)) for i in tris.ravel())
  asset = (
    f'<mesh name="box" vertex="{flat(box_v)}" face="{face}"/>'
    f'<mesh name="cloud" vertex="{flat(cloud)}"/>'
    '<mesh name="mirror" file="lshape.obj" scale="1 -2 1"/>'
    '<mesh name="turned" file="tet.obj" refquat="0.8 0.2 0.3 -0.1" scale="0.5 1 2"/>'
    '<mesh name="visual" file="box.obj"/>'
  )
  body = (
    ''.join(
      f'<body><geom type="mesh" mesh="{n}"/></body>' for n in ('box', 'cloud', 'mirror', 'turned')
    )
    + '<body><geom type="mesh" mesh="visual" contype="0" conaffinity="0"/></body>'
  )
  xml = f"""<mujoco><compiler meshdir="{assets}"/>
  <asset>{asset}</asset><worldbody>{body}</worldbody></mujoco>"""
  path = assets / 'poly.xml'
  path.write_text(xml)
  mj = mujoco.MjModel.from_xml_path(str(path))
  m = jaxsim.load(str(path))
  # the box's faces merge into 6 quads; the visual mesh has no hull, hence no polygons
  np.testing.assert_array_equal(mj.mesh_polynum[[0, 4]], [6, 0])
  np.testing.assert_array_equal(mj.mesh_polyvertnum[:6], 4)
  _check_poly_fields(m, mj)


def test_polygon_model_fields_bundled_scene():
  import jaxsim
  from tests.models import MODELS

  path = os.path.join(MODELS, 'scene.xml')
  mj = mujoco.MjModel.from_xml_path(path)
  assert mj.mesh_polynum.sum() > 0
  _check_poly_fields(jaxsim.load(path), mj)


def test_dog_mesh_polygons():
  """Every 3rd dog bone as a colliding mesh, scaled, some mirrored: hundreds of merged polygons
  whose order follows MuJoCo's hash map of rounded normal angles."""
  d = _dog_dir()
  files = sorted(f for f in os.listdir(d) if f.endswith('.stl'))[::3]
  scales = ['1 1 1', '1.5 0.7 1.2', '-1 1 1', '0.5 -0.5 -2']
  asset = ''.join(
    f'<mesh name="m{i}" file="{f}" scale="{scales[i % 4]}"/>' for i, f in enumerate(files)
  )
  body = ''.join(f'<body><geom type="mesh" mesh="m{i}"/></body>' for i in range(len(files)))
  xml = f'<mujoco><compiler meshdir="{d}"/><asset>{asset}</asset><worldbody>{body}</worldbody>'
  m = mujoco.MjModel.from_xml_string(xml + '</mujoco>')
  for i, f in enumerate(files):
    with open(os.path.join(d, f), 'rb') as fh:
      vert, face = M.read_mesh(fh.read(), f)
    md = M.compile_mesh(vert, face, scale=[float(x) for x in scales[i % 4].split()])
    _check_polygons(m, i, md)


def _flat_shell_xml(seed: int, geom: str) -> str:
  """A planar hexagon weighed as a shell: its inertia box is flat to rounding (or NaN)."""
  rng = np.random.default_rng(seed)
  a = np.sort(rng.uniform(0, 2 * np.pi, 6))
  r = rng.uniform(0.5, 1, 6)
  v = np.stack([r * np.cos(a), r * np.sin(a), np.zeros(6)], 1)
  q = rng.normal(size=4)
  q /= np.linalg.norm(q)
  face = ' '.join(f'0 {k} {k + 1}' for k in range(1, 5))
  return f"""<mujoco><asset>
    <mesh name="m" inertia="shell" vertex="{' '.join(f'{x:.17g}' for x in v.ravel())}" face="{face}"
          refquat="{' '.join(f'{x:.17g}' for x in q)}"/></asset>
  <worldbody><body><freejoint/>{geom}</body></worldbody></mujoco>"""


@pytest.mark.parametrize('seed', [0, 1, 2, 4])
def test_flat_shell_mesh_inertia_box_rounding(seed):
  """mjCMesh's box side is std::sqrt of an eigenvalue difference its A + B >= C check lets be
  slightly negative: NaN there (seeds 2 and 4 in mujoco 4.0.0; 0 gives 0, 1 a side of 6e-9), and
  only a geom that uses the box is refused (the Stretch's flat stickers are visual meshes)."""
  import jaxsim

  fitted = _flat_shell_xml(seed, '<geom type="box" mesh="m"/>')
  try:
    mm = mujoco.MjModel.from_xml_string(fitted)
  except ValueError as err:
    with pytest.raises(ModelError, match='NaN' if 'nan' in str(err) else 'positive'):
      jaxsim.load_string(fitted)
  else:
    m = jaxsim.load_string(fitted)
    np.testing.assert_allclose(np.asarray(m.geom_size), mm.geom_size, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(m.body_inertia), mm.body_inertia, rtol=1e-9)
  visual = '<geom type="mesh" mesh="m" mass="0" contype="0" conaffinity="0"/><geom size=".1"/>'
  mm = mujoco.MjModel.from_xml_string(_flat_shell_xml(seed, visual))
  m = jaxsim.load_string(_flat_shell_xml(seed, visual))
  np.testing.assert_allclose(np.asarray(m.body_inertia), mm.body_inertia, rtol=1e-9)

"""Mesh assets: file decoding and compilation, mirroring MuJoCo's mjCMesh (user_mesh.cc).

The numerics follow MuJoCo operation by operation (same formulas, same summation order, no
fused multiply-adds), so `MeshData.vert` normally matches `MjModel.mesh_vert` bit for bit.

Per-mesh fields that land in MjModel and where they come from here:
  mesh_vert, mesh_face      -> MeshData.vert, MeshData.face
  mesh_pos, mesh_quat       -> MeshData.pos, MeshData.quat
  mesh_scale                -> MeshData.scale (the `scale` attribute, copied verbatim)
  mesh_graph                -> MeshData.graph (same layout; hull vertex order may differ, see
                               `_encode_graph`)
  mesh_vertadr/num, faceadr/num, graphadr -> layout only
Not computed here: mesh_normal/facenormal (rendering), texcoords, mesh_polygon* and
mesh_extrema (derived from the hull for collision), bvh and octree data.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence

import numpy as np

from jaxsim._src.enums import EPS, MAXVAL, MINVAL, GeomType
from jaxsim.errors import ModelError
from jaxsim.mjcf import polygon as polylib

INERTIA_MODES = ('convex', 'exact', 'legacy', 'shell')
DEFAULT_INERTIA = 'legacy'  # mjs_defaultMesh: mjMESH_INERTIA_LEGACY (still so in 4.0.0)

_MSH_TYPE = 'model/vnd.mujoco.msh'
_STL_TYPE = 'model/stl'
_OBJ_TYPE = 'model/obj'

# Binary STL limits enforced by MuJoCo's stl_decoder.
_STL_MAX_FACES = 200000
_STL_MAX_COORD = 2.0**30

_INT_MAX = 2147483647


@dataclasses.dataclass(frozen=True)
class MeshData:
  """A compiled mesh asset, as mjCMesh holds it after Compile (user_mesh.cc Process)."""

  name: str | None
  # (nv, 3) float32: vertices in the mesh frame (centred at the CoM, principal axes).
  vert: np.ndarray
  # (nf, 3) int32: triangles, counter-clockwise seen from outside.
  face: np.ndarray
  # (3,) CoM of the scaled/ref-transformed source vertices (mesh_pos).
  pos: np.ndarray
  # (4,) principal-axes orientation relative to the source frame (mesh_quat).
  quat: np.ndarray
  # (3,) the scale attribute (mesh_scale).
  scale: np.ndarray
  # One of INERTIA_MODES.
  inertia_mode: str
  # Volume, or surface area for inertia='shell': what a referencing geom's mass scales with.
  volume: float
  # (3,) principal moments per unit density (per unit area density for 'shell').
  inertia: np.ndarray
  # (3,) half-sizes of the box with the same volume-normalised inertia (mjCMesh::boxsz_).
  boxsz: np.ndarray
  # (6,) axis-aligned bounds of `vert` before float narrowing: (min xyz, max xyz).
  aamm: np.ndarray
  # Convex hull: point ids on the hull, (nh, 3) outward triangles, and mesh_graph; None if the
  # hull was not built (MuJoCo builds it only when a geom collides with the mesh, the mesh has no
  # faces, or inertia='convex').
  hull_vert: np.ndarray | None
  hull_face: np.ndarray | None
  graph: np.ndarray | None
  # Polygons of the hull (coplanar hull triangles merged, mjCMesh::MakePolygons): vertex loops
  # (ids into `vert`) and their (npoly, 3) unit normals; empty without a hull.
  polygons: tuple[tuple[int, ...], ...] = ()
  polynormal: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))

  @property
  def aabb(self) -> np.ndarray:
    """(center, half-size) of `aamm`, as mjCGeom::ComputeAABB stores geom_aabb for mesh geoms."""
    lo, hi = self.aamm[:3], self.aamm[3:]
    return np.concatenate([(hi + lo) / 2, (hi - lo) / 2])


# ------------------------------------------------------------------------------------------------
# file decoding


def read_mesh(
  data: bytes,
  filename: str,
  content_type: str | None = None,
  *,
  allow_ascii_stl: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
  """Decode an STL, OBJ or MSH file into (vertices, faces), as mjCMesh::LoadFromResource.

  Vertices are float64 holding the float32 values MuJoCo stores; faces are int32 or None when
  the file has none (MuJoCo then uses the convex hull). Binary STL vertices are de-duplicated by
  bit pattern as MuJoCo's stl_decoder does; OBJ and MSH vertices are kept as they are.
  MuJoCo rejects ASCII STL; `allow_ascii_stl=True` parses it anyway (same de-duplication).
  """
  ctype = _content_type(filename, content_type)
  if ctype == _MSH_TYPE:
    vert, face = _read_msh(data, filename)
  else:
    vert, face = _decode(data, filename, ctype, allow_ascii_stl)
  bad = ~np.isfinite(vert).all(axis=1)
  if bad.any():
    raise ModelError(f'vertex coordinate {int(np.argmax(bad))} is not finite', file=filename)
  if face is not None and face.size and (face.min() < 0 or face.max() >= len(vert)):
    i = int(np.argmax((face < 0) | (face >= len(vert))))
    raise ModelError(
      f'in face {i // 3}, vertex index {int(face.flat[i])} does not exist', file=filename
    )
  return vert.astype(np.float64), face


def _content_type(filename: str, content_type: str | None) -> str:
  """Resolve the media type from the attribute or the extension, as GetAssetContentType."""
  if content_type:
    # {type}/{subtype}[;{parameter}={value}]; anything else resolves to no type at all.
    m = re.fullmatch(r'([^/;\s]+)/([^/;\s]+)(;.*)?', content_type)
    return f'{m.group(1)}/{m.group(2)}' if m else ''
  ext = os.path.splitext(filename)[1].lower().lstrip('.')
  return {'stl': _STL_TYPE, 'obj': _OBJ_TYPE, 'msh': _MSH_TYPE, 'ply': 'model/ply'}.get(ext, '')


def _decode(data: bytes, filename: str, ctype: str, allow_ascii_stl: bool):
  """Pick a decoder plugin like mjp_findDecoder: by content type, then by extension."""
  # Decoders only accept names ending in the lower- or upper-case extension (CanDecode).
  decoders = {
    _STL_TYPE: (('.stl', '.STL'), lambda: _read_stl(data, filename, allow_ascii_stl)),
    _OBJ_TYPE: (('.obj', '.OBJ'), lambda: _read_obj(data, filename)),
  }
  ext = os.path.splitext(filename)[1].lower()
  for key in (ctype, {'.stl': _STL_TYPE, '.obj': _OBJ_TYPE}.get(ext)):
    if key in decoders and filename.endswith(decoders[key][0]):
      return decoders[key][1]()
  raise ModelError(f"no decoder found for mesh file '{filename}'", file=filename)


def _read_msh(data: bytes, filename: str):
  """Read MuJoCo's binary MSH format, as mjCMesh::LoadMSH (normals/texcoords skipped)."""
  if not data:
    raise ModelError(f"MSH file '{filename}' is empty", file=filename)
  if len(data) < 16:
    raise ModelError(f"missing header in MSH file '{filename}'", file=filename)
  nv, nn, nt, nf = (int(x) for x in np.frombuffer(data, '<i4', 4))
  if nv < 4 or nf < 0 or nn < 0 or nt < 0 or (nn > 0 and nn != nv) or (nt > 0 and nt != nv):
    raise ModelError(f"invalid sizes in MSH file '{filename}'", file=filename)
  if nv >= _INT_MAX // 12 or nn >= _INT_MAX // 12 or nt >= _INT_MAX // 8 or nf >= _INT_MAX // 12:
    raise ModelError(f"too large sizes in MSH file '{filename}'.", file=filename)
  if len(data) != 16 + 12 * nv + 12 * nn + 8 * nt + 12 * nf:
    raise ModelError(f"unexpected file size in MSH file '{filename}'", file=filename)
  vert = np.frombuffer(data, '<f4', 3 * nv, 16).reshape(nv, 3)
  face = None
  if nf:
    off = 16 + 12 * nv + 12 * nn + 8 * nt
    face = np.frombuffer(data, '<i4', 3 * nf, off).reshape(nf, 3).astype(np.int32)
  return vert, face


def _read_stl(data: bytes, filename: str, allow_ascii_stl: bool):
  """Read a binary STL and merge bit-identical vertices, as MuJoCo's stl_decoder."""
  if not data:
    raise ModelError(f"STL file '{filename}' is empty", file=filename)
  nfaces = int(np.frombuffer(data, '<i4', 1, 80)[0]) if len(data) >= 84 else None
  if nfaces is None or not 1 <= nfaces <= _STL_MAX_FACES or nfaces * 50 != len(data) - 84:
    if allow_ascii_stl and data.lstrip()[:5].lower() == b'solid':
      tri = _parse_ascii_stl(data, filename)
    elif nfaces is None:
      raise ModelError(f"invalid header in STL file '{filename}'", file=filename)
    elif not 1 <= nfaces <= _STL_MAX_FACES:
      raise ModelError(
        f'number of faces should be between 1 and {_STL_MAX_FACES} in STL file '
        f"'{filename}'; perhaps this is an ASCII file?",
        file=filename,
      )
    else:
      raise ModelError(
        f"STL file '{filename}' has wrong size; perhaps this is an ASCII file?", file=filename
      )
  else:
    rec = np.dtype([('normal', '<f4', 3), ('vert', '<f4', (3, 3)), ('attr', '<u2')])
    tri = np.frombuffer(data, rec, nfaces, 84)['vert'].reshape(-1, 3)
  # NaN passes this test (as in the decoder) and is rejected later as not finite.
  if (np.abs(tri) > _STL_MAX_COORD).any():
    raise ModelError(f"vertex in STL file '{filename}' exceeds maximum bounds", file=filename)
  # Merge by bit pattern (so -0 and +0 stay distinct), numbering in order of first use.
  keys = np.ascontiguousarray(tri).view(np.int32)
  _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
  order = np.argsort(first)
  rank = np.empty_like(order)
  rank[order] = np.arange(len(order))
  face = rank[inverse.reshape(-1)].reshape(-1, 3).astype(np.int32)
  return tri[first[order]], face


def _parse_ascii_stl(data: bytes, filename: str) -> np.ndarray:
  """Parse ASCII STL facets into (3*nface, 3) float32 corners (MuJoCo itself rejects ASCII)."""
  tokens = data.decode('latin-1').split()
  corners = []
  # Skip 'solid' and its (possibly multi-word) name.
  i = 1
  while i < len(tokens) and tokens[i] not in ('facet', 'endsolid'):
    i += 1
  try:
    while i < len(tokens) and tokens[i] == 'facet':
      if tokens[i + 1] != 'normal' or tokens[i + 5 : i + 7] != ['outer', 'loop']:
        raise ValueError
      i += 7
      for _ in range(3):
        if tokens[i] != 'vertex':
          raise ValueError
        corners.append([float(t) for t in tokens[i + 1 : i + 4]])
        i += 4
      if tokens[i : i + 2] != ['endloop', 'endfacet']:
        raise ValueError
      i += 2
    if i >= len(tokens) or tokens[i] != 'endsolid' or not corners:
      raise ValueError
  except (ValueError, IndexError):
    raise ModelError(f"malformed ASCII STL file '{filename}'", file=filename) from None
  with np.errstate(over='ignore'):
    return np.array(corners, np.float64).astype(np.float32)


# OBJ: MuJoCo's obj_decoder runs tinyobjloader (triangulating) and keeps the first shape's faces.


def _parse_real(s: str) -> float | None:
  """Parse a number the way tinyobjloader's tryParseDouble does; None on failure."""
  n = len(s)
  if not n:
    return None
  i = 0
  sign = 1.0
  leading_dot = False
  if s[0] in '+-':
    sign = -1.0 if s[0] == '-' else 1.0
    i = 1
    leading_dot = i < n and s[i] == '.'
  elif s[0] == '.':
    leading_dot = True
  elif not s[0].isdigit() or not s[0].isascii():
    return None
  mantissa = 0.0
  exponent = 0
  if not leading_dot:
    start = i
    while i < n and '0' <= s[i] <= '9':
      mantissa = mantissa * 10 + (ord(s[i]) - 48)
      i += 1
    if i == start:
      return None
  if i < n:
    if s[i] == '.':
      i += 1
      read = 1
      while i < n and '0' <= s[i] <= '9':
        scale = _POW_LUT[read] if read < len(_POW_LUT) else math.pow(10.0, -read)
        mantissa += (ord(s[i]) - 48) * scale
        read += 1
        i += 1
    if i < n and s[i] in 'eE':
      i += 1
      exp_sign = 1
      if i < n and s[i] in '+-':
        exp_sign = -1 if s[i] == '-' else 1
        i += 1
      elif not (i < n and '0' <= s[i] <= '9'):
        return None
      start = i
      while i < n and '0' <= s[i] <= '9':
        if exponent > _INT_MAX // 10:
          return None
        exponent = exponent * 10 + (ord(s[i]) - 48)
        i += 1
      exponent *= exp_sign
      if i == start:
        return None
  if not exponent:
    return sign * mantissa
  try:
    return sign * math.ldexp(mantissa * math.pow(5.0, exponent), exponent)
  except OverflowError:
    return sign * math.inf


_POW_LUT = (1.0, 0.1, 0.01, 0.001, 0.0001, 0.00001, 0.000001, 0.0000001)


def _atoi(s: str) -> int:
  """C atoi on a token: optional sign and leading digits, 0 if none."""
  m = re.match(r'[ \t\n\v\f\r]*([+-]?\d+)', s)
  return int(m.group(1)) if m else 0


def _fix_index(idx: int, n: int, allow_zero: bool) -> int | None:
  """OBJ 1-based / negative-relative index to 0-based, as tinyobjloader's fixIndex."""
  if idx > 0:
    return idx - 1
  if idx == 0:
    return -1 if allow_zero else None
  return n + idx if n + idx >= 0 else None


def _parse_triple(tok: str, nv: int, nvn: int, nvt: int) -> int | None:
  """Vertex index of a face/line corner `v`, `v/t`, `v//n` or `v/t/n` (parseTriple)."""
  parts = tok.split('/')
  if len(parts) > 3:
    # Whatever follows the normal index starts a new corner with index 0, which fails.
    return None
  v = _fix_index(_atoi(parts[0]), nv, False)
  if v is None:
    return None
  # The texture and normal indices only matter for their validity.
  if len(parts) >= 2:
    if parts[1] == '' and len(parts) >= 3:
      if _fix_index(_atoi(parts[2]), nvn, True) is None:
        return None
    else:
      if _fix_index(_atoi(parts[1]), nvt, True) is None:
        return None
      if len(parts) >= 3 and _fix_index(_atoi(parts[2]), nvn, True) is None:
        return None
  return v


def _f32(x: float) -> float:
  """Round a double to float32, emulating tinyobjloader's single-precision arithmetic."""
  return float(np.float32(x))


_OBJ_MAX_FACE_VERTICES = 100


def _triangulate(poly: list[int], v: np.ndarray) -> list[tuple[int, int, int]]:
  """Split a polygon into triangles as tinyobjloader's exportGroupsToShape does."""
  n = len(poly)
  nv = len(v)
  if n == 3:
    return [tuple(poly)]
  valid = [0 <= p < nv for p in poly]
  if n == 4:
    # Quad: cut along the shorter diagonal (skipped entirely if any index is invalid).
    if not all(valid):
      return []
    p = [v[i] for i in poly]
    sq = []
    for a, b in ((p[0], p[2]), (p[1], p[3])):
      e = [_f32(b[k] - a[k]) for k in range(3)]
      sq.append(_f32(_f32(_f32(e[0] * e[0]) + _f32(e[1] * e[1])) + _f32(e[2] * e[2])))
    if sq[0] < sq[1]:
      return [(poly[0], poly[1], poly[2]), (poly[0], poly[2], poly[3])]
    return [(poly[0], poly[1], poly[3]), (poly[1], poly[2], poly[3])]
  # Ear clipping in the plane of the two axes least aligned with the first corner's normal.
  axes = [1, 2]
  eps = float(np.finfo(np.float32).eps)
  for k in range(n):
    idx = [poly[(k + j) % n] for j in range(3)]
    if not all(0 <= i < nv for i in idx):
      continue
    p0, p1, p2 = (v[i] for i in idx)
    e0 = [_f32(p1[j] - p0[j]) for j in range(3)]
    e1 = [_f32(p2[j] - p1[j]) for j in range(3)]
    cx = abs(_f32(_f32(e0[1] * e1[2]) - _f32(e0[2] * e1[1])))
    cy = abs(_f32(_f32(e0[2] * e1[0]) - _f32(e0[0] * e1[2])))
    cz = abs(_f32(_f32(e0[0] * e1[1]) - _f32(e0[1] * e1[0])))
    if cx > eps or cy > eps or cz > eps:
      if not (cx > cy and cx > cz):
        axes[0] = 0
        if cz > cx and cz > cy:
          axes[1] = 1
      break

  def planar(i: int) -> tuple[float, float]:
    return (v[i][axes[0]], v[i][axes[1]]) if 0 <= i < nv else (0.0, 0.0)

  out = []
  remaining = list(poly)
  guess = 0
  iterations = n
  previous = n
  while len(remaining) > 3 and iterations > 0:
    m = len(remaining)
    if guess >= m:
      guess -= m
    if previous != m:
      previous = m
      iterations = m
    else:
      iterations -= 1
    ind = [remaining[(guess + k) % m] for k in range(3)]
    pts = [planar(i) for i in ind]
    vx = [q[0] for q in pts]
    vy = [q[1] for q in pts]
    e0x, e0y = _f32(vx[1] - vx[0]), _f32(vy[1] - vy[0])
    e1x, e1y = _f32(vx[2] - vx[1]), _f32(vy[2] - vy[1])
    cross = _f32(_f32(e0x * e1y) - _f32(e0y * e1x))
    # tinyobjloader's "area" here uses only the first two corners; kept as is.
    area = _f32(_f32(_f32(vx[0] * vy[1]) - _f32(vy[0] * vx[1])) * 0.5)
    if _f32(cross * area) < 0:
      guess += 1
      continue
    overlap = False
    for other in range(3, m):
      o = remaining[(guess + other) % m]
      if not 0 <= o < nv:
        continue
      tx, ty = planar(o)
      if _point_in_triangle(vx, vy, tx, ty):
        overlap = True
        break
    if overlap:
      guess += 1
      continue
    out.append(tuple(ind))
    del remaining[(guess + 1) % m]
  if len(remaining) == 3:
    out.append(tuple(remaining))
  return out


def _point_in_triangle(vx: list[float], vy: list[float], tx: float, ty: float) -> bool:
  """Crossing-number test in float32, as tinyobjloader's pnpoly with 3 corners."""
  inside = False
  j = 2
  for i in range(3):
    if (vy[i] > ty) != (vy[j] > ty):
      t = _f32(_f32(_f32(vx[j] - vx[i]) * _f32(ty - vy[i])) / _f32(vy[j] - vy[i]))
      if tx < _f32(t + vx[i]):
        inside = not inside
    j = i
  return inside


def _read_obj(data: bytes, filename: str):
  """Read an OBJ file as MuJoCo's obj_decoder (tinyobjloader, first shape only)."""
  text = data.decode('latin-1')
  coords: list[float] = []
  nvn = nvt = 0
  # Primitives of the group being read, then shapes as tinyobjloader splits them.
  faces: list[list[int]] = []
  lines: list[list[int]] = []
  npoints = 0
  shape_tris: list[tuple[int, int, int]] = []
  shape_lines: list[list[int]] = []
  shape_points = 0
  shapes: list[tuple[list, list]] = []
  verts = np.zeros((0, 3))

  def export() -> bool:
    nonlocal shape_points, verts
    if not faces and not lines and not npoints:
      return False
    if faces and len(verts) != len(coords) // 3:
      with np.errstate(over='ignore'):
        verts = np.array(coords, np.float64).reshape(-1, 3).astype(np.float32).astype(float)
    for poly in faces:
      # mujoco 4.0.0's OBJ decoder yields no triangle for a face of more than 100 vertices
      # (measured: a convex 100-gon gives 98, a 101-gon none; the Stretch 3's gripper has a
      # 215-gon); its vertices stay
      if 3 <= len(poly) <= _OBJ_MAX_FACE_VERTICES:
        shape_tris.extend(_triangulate(poly, verts))
    shape_lines.extend(lines)
    shape_points += npoints
    return True

  def fail(kind: str, lineno: int):
    raise ModelError(
      f"obj_decoder: could not parse OBJ file '{filename}': failed to parse '{kind}' line "
      f'(zero or invalid relative vertex index)',
      file=filename,
      line=lineno,
    )

  for lineno, line in enumerate(re.split(r'\r\n|\r|\n', text), 1):
    tok = line.lstrip(' \t')
    if not tok or tok[0] == '#' or tok[0] == '\0':
      continue
    head, rest = tok[:1], tok[1:]
    second = rest[:1]
    if head == 'v' and second in (' ', '\t'):
      fields = re.split(r'[ \t\r]+', rest.strip(' \t\r'))
      for k in range(3):
        val = _parse_real(fields[k]) if k < len(fields) else None
        coords.append(0.0 if val is None else val)
    elif head == 'v' and second in ('n', 't') and rest[1:2] in (' ', '\t'):
      if second == 'n':
        nvn += 1
      else:
        nvt += 1
    elif head in ('f', 'l', 'p') and second in (' ', '\t'):
      corners = []
      for item in re.split(r'[ \t\r]+', rest.strip(' \t\r')):
        if not item:
          continue
        idx = _parse_triple(item, len(coords) // 3, nvn, nvt)
        if idx is None:
          fail(head, lineno)
        corners.append(idx)
      if head == 'f':
        faces.append(corners)
      elif head == 'l':
        lines.append(corners)
      else:
        npoints += len(corners)
    elif head in ('g', 'o') and second in (' ', '\t'):
      export()
      faces, lines, npoints = [], [], 0
      keep = shape_tris or (head == 'o' and (shape_lines or shape_points))
      if keep:
        shapes.append((shape_tris, shape_lines))
      shape_tris, shape_lines, shape_points = [], [], 0
    # usemtl never changes the material here (no .mtl is read), so it cannot split a shape.
  if export() or shape_tris:
    shapes.append((shape_tris, shape_lines))

  with np.errstate(over='ignore'):
    vert = np.array(coords, np.float64).reshape(-1, 3).astype(np.float32)
  face = None
  if shapes:
    tris, segs = shapes[0]
    if tris:
      face = np.array(tris, np.int32).reshape(-1, 3)
    elif segs:
      # The decoder stores line segments (a, b) as degenerate triangles (a, b, b).
      pairs = [(s[k], s[k + 1], s[k + 1]) for s in segs for k in range(len(s) - 1)]
      face = np.array(pairs, np.int32).reshape(-1, 3) if pairs else None
  return vert, face


# ------------------------------------------------------------------------------------------------
# small-vector helpers, each mirroring the user_util.cc function of the same name


def _normvec(vec: list[float]) -> list[float]:
  """Normalise unless tiny or already within mjEPS of unit length (mjuu_normvec)."""
  nrm = 0.0
  for x in vec:
    nrm += x * x
  if nrm < EPS:
    return list(vec)
  nrm = math.sqrt(nrm)
  if abs(nrm - 1) > EPS:
    return [x / nrm for x in vec]
  return list(vec)


def _quat2mat(q: Sequence[float]) -> list[float]:
  """Row-major rotation matrix of a unit quaternion (mjuu_quat2mat)."""
  if q[0] == 1 and q[1] == 0 and q[2] == 0 and q[3] == 0:
    return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
  q00, q01, q02, q03 = q[0] * q[0], q[0] * q[1], q[0] * q[2], q[0] * q[3]
  q11, q12, q13 = q[1] * q[1], q[1] * q[2], q[1] * q[3]
  q22, q23, q33 = q[2] * q[2], q[2] * q[3], q[3] * q[3]
  return [
    q00 + q11 - q22 - q33,
    2 * (q12 - q03),
    2 * (q13 + q02),
    2 * (q12 + q03),
    q00 - q11 + q22 - q33,
    2 * (q23 - q01),
    2 * (q13 - q02),
    2 * (q23 + q01),
    q00 - q11 - q22 + q33,
  ]


def _mulquat(a: Sequence[float], b: Sequence[float]) -> list[float]:
  """Quaternion product a*b, normalised (mjuu_mulquat)."""
  return _normvec(
    [
      a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
      a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
      a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
      a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ]
  )


def _mulmat(a: Sequence[float], b: Sequence[float]) -> list[float]:
  """3x3 row-major product (mjuu_mulmat)."""
  return [
    a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j]
    for i in range(3)
    for j in range(3)
  ]


def _rot_vec_quat(vec: Sequence[float], q: Sequence[float]) -> list[float]:
  """Rotate a vector by a unit quaternion (mjuu_rotVecQuat)."""
  if vec[0] == 0 and vec[1] == 0 and vec[2] == 0:
    return [0.0, 0.0, 0.0]
  if q[0] == 1 and q[1] == 0 and q[2] == 0 and q[3] == 0:
    return list(vec)
  t = [
    q[0] * vec[0] + q[2] * vec[2] - q[3] * vec[1],
    q[0] * vec[1] + q[3] * vec[0] - q[1] * vec[2],
    q[0] * vec[2] + q[1] * vec[1] - q[2] * vec[0],
  ]
  return [
    vec[0] + 2 * (q[2] * t[2] - q[3] * t[1]),
    vec[1] + 2 * (q[3] * t[0] - q[1] * t[2]),
    vec[2] + 2 * (q[1] * t[1] - q[2] * t[0]),
  ]


def eig3(mat: Sequence[float], tol: float) -> tuple[list[float], list[float]]:
  """Eigenvalues (decreasing) and eigenvector quaternion by Jacobi rotations (mjuu_eig3).

  MuJoCo 4's version takes a relative tolerance: iteration stops once the largest off-diagonal
  entry is within max(4e-15, tol) * max|mat|, and eigenvalues closer than max(1e-12, tol) *
  max|mat| are not reordered. Each rotation is built from the half-angle tangent.
  """
  maxabs = 0.0
  for x in mat:
    maxabs = max(abs(x), maxabs)
  stop = max(4e-15, tol) * maxabs
  quat = [1.0, 0.0, 0.0, 0.0]
  eigval = [0.0, 0.0, 0.0]
  for _ in range(500):
    # D = R' * mat * R with R the current eigenvector matrix.
    rot = _quat2mat(quat)
    rot_t = [rot[0], rot[3], rot[6], rot[1], rot[4], rot[7], rot[2], rot[5], rot[8]]
    d = _mulmat(_mulmat(rot_t, mat), rot)
    eigval = [d[0], d[4], d[8]]
    if abs(d[1]) > abs(d[2]) and abs(d[1]) > abs(d[5]):
      rk, ck, rotk = 0, 1, 2
    elif abs(d[2]) > abs(d[5]):
      rk, ck, rotk = 0, 2, 1
    else:
      rk, ck, rotk = 1, 2, 0
    off = d[3 * rk + ck]
    if abs(off) <= stop:
      break
    # 2x2 symmetric Schur decomposition: t = tan(angle), h = tan(angle / 2).
    tau = (d[4 * ck] - d[4 * rk]) / (off + off)
    root = math.sqrt(1 + tau * tau)
    t = 1.0 / (tau + root) if tau >= 0 else -1.0 / (root - tau)
    h = t / (1 + math.sqrt(1 + t * t))
    ch = 1 / math.sqrt(1 + h * h)
    step = [ch, 0.0, 0.0, 0.0]
    step[rotk + 1] = (h if rotk == 1 else -h) * ch
    quat = _normvec(_mulquat(quat, step))
  # Bubble sort into decreasing order (pairs 0-1, 1-2, 0-1), rotating the frame along.
  gap = max(1e-12, tol) * maxabs
  for j in range(3):
    j1 = j % 2
    if eigval[j1] + gap < eigval[j1 + 1]:
      eigval[j1], eigval[j1 + 1] = eigval[j1 + 1], eigval[j1]
      step = [0.707106781186548, 0.0, 0.0, 0.0]
      step[(j1 + 2) % 3 + 1] = step[0]
      quat = _normvec(_mulquat(quat, step))
  return eigval, quat


# ------------------------------------------------------------------------------------------------
# compilation


def _err(message: str) -> ModelError:
  return ModelError(message, element='mesh')


def _triangles(v: np.ndarray, face: np.ndarray):
  """Unit normals, centres and areas of triangles, as user_mesh.cc triangle()."""
  p1, p2, p3 = v[face[:, 0]], v[face[:, 1]], v[face[:, 2]]
  center = (p1 + p2 + p3) / 3
  b = p2 - p1
  c = p3 - p1
  n = np.stack(
    [
      b[:, 1] * c[:, 2] - b[:, 2] * c[:, 1],
      b[:, 2] * c[:, 0] - b[:, 0] * c[:, 2],
      b[:, 0] * c[:, 1] - b[:, 1] * c[:, 0],
    ],
    axis=1,
  )
  length = np.sqrt(n[:, 0] * n[:, 0] + n[:, 1] * n[:, 1] + n[:, 2] * n[:, 2])
  small = length < MINVAL
  # Small faces keep their raw normal and get zero area, as in triangle().
  normal = np.where(small[:, None], n, n / np.where(small, 1.0, length)[:, None])
  area = np.where(small, 0.0, 0.5 * length)
  return normal, center, area


def _dot3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]


def _seqsum(x: np.ndarray) -> float:
  """Sum in array order like a C accumulation loop (np.sum would sum pairwise)."""
  return float(np.cumsum(x)[-1]) if len(x) else 0.0


def compile_mesh(
  vert: np.ndarray,
  face: np.ndarray | None,
  *,
  scale: Sequence[float] = (1.0, 1.0, 1.0),
  refpos: Sequence[float] = (0.0, 0.0, 0.0),
  refquat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
  inertia: str = DEFAULT_INERTIA,
  maxhullvert: int = -1,
  name: str | None = None,
  need_hull: bool = True,
) -> MeshData:
  """Process a mesh into its compiled form, as mjCMesh::Compile / mjCMesh::Process.

  `need_hull` says whether MuJoCo would build the convex hull (some mesh geom referencing it has
  nonzero contype/conaffinity or is in an explicit pair); it is built regardless when the mesh has
  no faces or inertia='convex'. A left-handed scale (negative product) reverses the winding of the
  faces and of the hull faces, so that they stay outward after mirroring.
  """
  label = name if name is not None else ''
  if inertia not in INERTIA_MODES:
    raise _err(f"unknown mesh inertia '{inertia}'; expected one of {', '.join(INERTIA_MODES)}")
  # Check the counts before reshaping, so that bad counts are a ModelError, not numpy's ValueError.
  if np.size(vert) % 3:
    raise _err('vertex data must be points of 3 numbers')
  if face is not None and np.size(face) % 3:
    raise _err('face data must be triples of vertex indices')
  # Vertex data is single precision in mjsMesh, whatever it was specified with.
  with np.errstate(over='ignore'):
    v32 = np.asarray(vert, np.float64).reshape(-1, 3).astype(np.float32)
  bad = ~np.isfinite(v32).all(axis=1)
  if bad.any():
    raise _err(f'vertex coordinate {int(np.argmax(bad))} is not finite')
  nv = len(v32)
  if nv < 4:
    raise _err('at least 4 vertices required')
  f = np.zeros((0, 3), np.int32) if face is None else np.asarray(face, np.int32).reshape(-1, 3)
  if f.size and (f.min() < 0 or f.max() >= nv):
    i = int(np.argmax((f < 0) | (f >= nv)))
    raise _err(f'in face {i // 3}, vertex index {int(f.flat[i])} does not exist')
  scale = [float(s) for s in scale]
  righthand = scale[0] * scale[1] * scale[2] > 0
  dvert = v32.astype(np.float64)

  # Flipped faces show up as a directed edge used twice; only 'exact' refuses them.
  if f.size and inertia == 'exact':
    keep = _triangles(dvert, f)[2] > math.sqrt(MINVAL)
    ff = f[keep]
    edges = np.stack([ff, np.roll(ff, -1, axis=1)], axis=2).reshape(-1, 2)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    dup = np.flatnonzero((edges[1:] == edges[:-1]).all(axis=1))
    if dup.size:
      a, b = edges[dup[0]]
      raise _err(
        f"faces of mesh '{label}' have inconsistent orientation. Please check the faces "
        f'containing the vertices {a + 1} and {b + 1}.'
      )

  # The hull is built from the untransformed vertices, before scaling and re-orientation.
  hull_vert = hull_face = hull_tri = graph = None
  polygons: list[list[int]] = []
  if need_hull or not f.size or inertia == 'convex':
    hull_vert, hull_face, hull_tri = _make_hull(dvert, maxhullvert, label)
    # from the source vertices and the unmirrored hull; a mirror reverses each loop after its
    # first vertex, as it swaps the last two vertices of each face
    polygons = polylib.make_polygons(dvert, hull_face)
    if not righthand:
      polygons = [p[:1] + p[:0:-1] for p in polygons]
  if not f.size:
    f = hull_face.copy()
  if not righthand:
    f = f[:, [0, 2, 1]]
    if hull_face is not None:
      hull_face = hull_face[:, [0, 2, 1]]
  if hull_face is not None:
    graph = _encode_graph(hull_vert, hull_face, hull_tri, nv)

  dvert = _apply_transformations(dvert, refpos, refquat, scale)

  # Area-weighted centroid of the faces: the common apex of the pyramids.
  _, center, area = _triangles(dvert, f)
  total_area = _seqsum(area)
  facecen = np.array([_seqsum(area * center[:, k]) for k in range(3)])
  if total_area < MINVAL:
    raise _err(f'mesh surface area is too small: {label}')
  facecen = facecen / total_area

  mass_faces = hull_face if inertia == 'convex' else f
  if inertia == 'shell':
    com, size = _surface_com(dvert, f, facecen)
    if size < MINVAL:
      raise _err(f'mesh surface area is too small: {label}')
  else:
    com, size = _volume_com(dvert, mass_faces, facecen, inertia == 'legacy')
    if size < MINVAL:
      if size < 0:
        raise _err(f'mesh volume is negative (misoriented triangles): {label}')
      raise _err(f'mesh volume is too small: {label} . Try setting inertia to shell')

  inert, size = _inertia(dvert, mass_faces, com, inertia)
  full = [inert[0], inert[3], inert[4], inert[3], inert[1], inert[5], inert[4], inert[5], inert[2]]
  # Principal axes only to float32 vertex accuracy (Process passes a relative 1e-7).
  eigval, quat = eig3(full, 1e-7)
  if eigval[2] <= 0:
    raise _err(f'eigenvalue of mesh inertia must be positive: {label}')
  atol, rtol = 1e-9, 1e-6
  e0, e1, e2 = eigval
  if (
    e0 + e1 < e2 * (1.0 - rtol) - atol
    or e0 + e2 < e1 * (1.0 - rtol) - atol
    or e1 + e2 < e0 * (1.0 - rtol) - atol
  ):
    raise _err(f'eigenvalues of mesh inertia violate A + B >= C: {label}')
  # A difference inside the tolerance above can be slightly negative: its side is NaN, as
  # std::sqrt gives mjCMesh (and a geom that weighs the mesh then carries it).
  with np.errstate(invalid='ignore'):
    boxsz = 0.5 * np.sqrt(6 * np.array([e1 + e2 - e0, e0 + e2 - e1, e0 + e1 - e2]) / size)

  # Move the CoM to the origin and rotate into the principal frame.
  dvert = dvert - np.asarray(com)
  rot = _quat2mat([quat[0], -quat[1], -quat[2], -quat[3]])
  dvert = np.stack(
    [
      rot[3 * i] * dvert[:, 0] + rot[3 * i + 1] * dvert[:, 1] + rot[3 * i + 2] * dvert[:, 2]
      for i in range(3)
    ],
    axis=1,
  )
  # mjCMesh starts its bounds at +-mjMAXVAL
  aamm = np.concatenate(
    [np.minimum(dvert.min(axis=0), MAXVAL), np.maximum(dvert.max(axis=0), -MAXVAL)]
  )
  polynormal = polylib.polygon_normals(dvert, polygons)

  return MeshData(
    name=name,
    vert=dvert.astype(np.float32),
    face=np.ascontiguousarray(f, np.int32),
    pos=np.array(com, np.float64),
    quat=np.array(quat, np.float64),
    scale=np.array(scale, np.float64),
    inertia_mode=inertia,
    volume=float(size),
    inertia=_box_inertia(boxsz) * size,
    boxsz=boxsz,
    aamm=aamm,
    hull_vert=hull_vert,
    hull_face=hull_face,
    graph=graph,
    polygons=tuple(tuple(p) for p in polygons),
    polynormal=polynormal,
  )


def _apply_transformations(dvert, refpos, refquat, scale) -> np.ndarray:
  """Subtract refpos, rotate by the conjugate of refquat, scale (ApplyTransformations)."""
  refpos = [float(x) for x in refpos]
  refquat = [float(x) for x in refquat]
  if refpos[0] != 0 or refpos[1] != 0 or refpos[2] != 0:
    dvert = dvert - np.asarray(refpos)
  if refquat[0] != 1 or refquat[1] != 0 or refquat[2] != 0 or refquat[3] != 0:
    m = _quat2mat(_normvec(refquat))
    x, y, z = dvert[:, 0], dvert[:, 1], dvert[:, 2]
    dvert = np.stack([m[i] * x + m[3 + i] * y + m[6 + i] * z for i in range(3)], axis=1)
  if scale[0] != 1 or scale[1] != 1 or scale[2] != 1:
    dvert = dvert * np.asarray(scale)
  return dvert


def _volume_com(dvert, face, facecen, legacy: bool) -> tuple[list[float], float]:
  """Signed volume and CoM of the pyramids from facecen to each face (ComputeVolume)."""
  normal, center, area = _triangles(dvert, face)
  vol = _dot3(center - facecen, normal) * area / 3
  if legacy:
    vol = np.abs(vol)
  total = _seqsum(vol)
  com = [_seqsum(vol * (center[:, k] * 3.0 / 4.0 + facecen[k] / 4.0)) for k in range(3)]
  if total >= MINVAL:
    com = [c / total for c in com]
  return com, total


def _surface_com(dvert, face, facecen) -> tuple[list[float], float]:
  """Surface area and its centroid (ComputeSurfaceArea, with its pyramid-style weights)."""
  _, center, area = _triangles(dvert, face)
  total = _seqsum(area)
  com = [_seqsum(area * (center[:, k] * 3.0 / 4.0 + facecen[k] / 4.0)) for k in range(3)]
  if total >= MINVAL:
    com = [c / total for c in com]
  return com, total


def _inertia(dvert, face, com, mode: str) -> tuple[list[float], float]:
  """Unit-density inertia about the CoM and the recomputed volume/area (ComputeInertia)."""
  vc = dvert - np.asarray(com)
  normal, center, area = _triangles(vc, face)
  if mode == 'shell':
    vol = area
  else:
    vol = _dot3(center, normal) * area / 3
  if mode == 'legacy':
    vol = np.abs(vol)
  total = _seqsum(vol)
  d, e, f = vc[face[:, 0]], vc[face[:, 1]], vc[face[:, 2]]
  weight = vol / (12 if mode == 'shell' else 20)
  prods = []
  for a, b in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)):
    term = (
      2 * (d[:, a] * d[:, b] + e[:, a] * e[:, b] + f[:, a] * f[:, b])
      + d[:, a] * e[:, b]
      + d[:, b] * e[:, a]
      + d[:, a] * f[:, b]
      + d[:, b] * f[:, a]
      + e[:, a] * f[:, b]
      + e[:, b] * f[:, a]
    )
    prods.append(_seqsum(weight * term))
  p = prods
  return [p[1] + p[2], p[0] + p[2], p[0] + p[1], -p[3], -p[4], -p[5]], total


def _box_inertia(boxsz: np.ndarray) -> np.ndarray:
  """Per-unit-mass inertia of the equivalent box, as mjCGeom::SetInertia for mesh geoms."""
  b = boxsz
  return np.array(
    [
      (b[1] * b[1] + b[2] * b[2]) / 3,
      (b[0] * b[0] + b[2] * b[2]) / 3,
      (b[0] * b[0] + b[1] * b[1]) / 3,
    ]
  )


def _make_hull(dvert: np.ndarray, maxhullvert: int, label: str):
  """Convex hull of the source vertices, as mjCMesh::MakeGraph (qhull via scipy).

  Returns the hull point ids (increasing), the outward faces and qhull's own vertex order of
  each facet. The faces match MuJoCo's in order and winding (scipy runs the same qhull facet
  walk with the same options).
  """
  # scipy.spatial loads only when a hull is built: jaxsim.mjcf (and jaxsim) import without it
  from scipy.spatial import ConvexHull

  nv = len(dvert)
  # Degenerate point sets: qhull would fail, MuJoCo reports them first.
  dist = np.sqrt(((dvert[1:] - dvert[0]) ** 2).sum(axis=1))
  far = np.flatnonzero(dist > MINVAL)
  if not far.size:
    raise _err(
      f"mesh '{label}' has colocated vertices, cannot compute convex hull. Consider using a "
      'small sphere instead'
    )
  v1 = int(far[0]) + 1
  len1 = float(dist[v1 - 1])
  edge1 = dvert[v1] - dvert[0]
  normal = None
  for i in range(1, nv):
    if i == v1:
      continue
    edge2 = dvert[i] - dvert[0]
    len2 = math.sqrt(float(edge2 @ edge2))
    if len2 < MINVAL:
      continue
    cr = np.cross(edge1, edge2)
    norm = math.sqrt(float(cr @ cr))
    if norm > MINVAL * len1 * len2:
      normal = cr / norm
      break
  if normal is None:
    raise _err(
      f"mesh '{label}' has collinear vertices, cannot compute convex hull. Consider using a "
      'thin capsule instead'
    )
  if (np.abs(dvert @ normal - float(normal @ dvert[0])) <= MINVAL * len1).all():
    raise _err(
      f"mesh '{label}' has coplanar vertices, cannot compute convex hull. Consider using a "
      'primitive geom type (plane or thin box) instead'
    )

  options = 'Qt'
  if maxhullvert > -1:
    # Q9 + TA: stop after adding maxhullvert - 4 points beyond the initial simplex.
    options += f' Q9 TA{maxhullvert - 4}'
  try:
    hull = ConvexHull(dvert, qhull_options=options)
  except Exception as exc:  # scipy raises QhullError (or ValueError for bad options)
    raise _err(f"qhull error in mesh '{label}': {exc}") from None

  simplices = hull.simplices.astype(np.int32)
  # qhull marks some facets 'toporient'; MuJoCo swaps their first two vertices so that every
  # face winds counter-clockwise seen from outside, i.e. agrees with the facet's outward normal.
  p = dvert[simplices]
  cr = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
  flip = (cr * hull.equations[:, :3]).sum(axis=1) < 0
  faces = simplices.copy()
  faces[flip, 0], faces[flip, 1] = simplices[flip, 1], simplices[flip, 0]

  return np.unique(simplices).astype(np.int32), faces, simplices


def _encode_graph(hull_vert, hull_face, hull_tri, nv: int) -> np.ndarray:
  """Pack the hull as mjModel.mesh_graph: numvert, numface, vert_edgeadr, vert_globalid,
  edge_localid (neighbours of each vertex, -1 terminated) and face_globalid.

  MuJoCo lists the hull vertices in qhull's internal vertex order, which scipy does not expose;
  here they are by increasing point id. So vert_edgeadr, vert_globalid and the local ids in
  edge_localid are a permutation of MuJoCo's; the face block is identical.
  """
  local = np.full(nv, -1, np.int64)
  local[hull_vert] = np.arange(len(hull_vert))
  # Neighbours in the order of the incident facets and of each facet's qhull vertex list.
  incident: list[list[int]] = [[] for _ in range(len(hull_vert))]
  for fi, tri in enumerate(hull_tri):
    for gid in tri:
      incident[local[gid]].append(fi)
  edgeadr = []
  edges = []
  for k, gid in enumerate(hull_vert):
    edgeadr.append(len(edges))
    seen: list[int] = []
    for fi in incident[k]:
      for other in hull_tri[fi]:
        if other != gid and local[other] not in seen:
          seen.append(int(local[other]))
    edges.extend(seen)
    edges.append(-1)
  parts = [[len(hull_vert), len(hull_face)], edgeadr, hull_vert, edges, hull_face.reshape(-1)]
  return np.concatenate(parts).astype(np.int32)


# ------------------------------------------------------------------------------------------------
# geoms referencing a mesh


def _fit_size(mesh: MeshData, geom_type: int, fitaabb: bool, size: np.ndarray):
  """Primitive size fitted to the mesh and its centre offset, as mjCMesh::FitGeom."""
  size = size.copy()
  center = [0.0, 0.0, 0.0]
  if not fitaabb:
    # Equivalent-inertia box (volume- or shell-based, as the mesh's inertia mode).
    b = mesh.boxsz
    if geom_type == GeomType.SPHERE:
      size[0] = (b[0] + b[1] + b[2]) / 3
    elif geom_type == GeomType.CAPSULE:
      size[0] = (b[0] + b[1]) / 2
      size[1] = max(0.0, b[2] - size[0] / 2)
    elif geom_type == GeomType.CYLINDER:
      size[0] = (b[0] + b[1]) / 2
      size[1] = b[2]
    elif geom_type in (GeomType.ELLIPSOID, GeomType.BOX):
      size[:] = b
    else:
      raise _err(f'invalid geom type in fitting mesh {mesh.name}')
  else:
    a = mesh.aamm
    center = [(a[0] + a[3]) / 2, (a[1] + a[4]) / 2, (a[2] + a[5]) / 2]
    half = [a[3] - center[0], a[4] - center[1], a[5] - center[2]]
    if geom_type == GeomType.SPHERE:
      size[0] = max(max(half[0], half[1]), half[2])
    elif geom_type in (GeomType.CAPSULE, GeomType.CYLINDER):
      size[0] = max(half[0], half[1])
      size[1] = half[2]
      if geom_type == GeomType.CAPSULE:
        # The caps add a radius to the length.
        size[1] -= size[0]
    elif geom_type in (GeomType.ELLIPSOID, GeomType.BOX):
      size[:] = half
    else:
      raise _err(f'invalid fittype in mesh {mesh.name}')
  return size, center


def _primitive_inertia(geom_type: int, size: np.ndarray) -> tuple[float, np.ndarray]:
  """Volume and unit-density inertia of a solid primitive (mjCGeom GetVolume / SetInertia)."""
  r = size[0]
  if geom_type == GeomType.SPHERE:
    vol = 4 * math.pi * r * r * r / 3
    return vol, np.full(3, 2 * vol * r * r / 5)
  if geom_type == GeomType.CAPSULE:
    height = 2 * size[1]
    vol = math.pi * (r * r * height + 4 * r * r * r / 3)
    sphere_mass = vol * 4 * r / (4 * r + 3 * height)
    cyl_mass = vol - sphere_mass
    ixy = cyl_mass * (3 * r * r + height * height) / 12
    iz = cyl_mass * r * r / 2
    sphere_inertia = 2 * sphere_mass * r * r / 5
    ixy += sphere_inertia + sphere_mass * height * (3 * r + 2 * height) / 8
    iz += sphere_inertia
    return vol, np.array([ixy, ixy, iz])
  if geom_type == GeomType.CYLINDER:
    height = 2 * size[1]
    vol = math.pi * r * r * height
    ixy = vol * (3 * r * r + height * height) / 12
    return vol, np.array([ixy, ixy, vol * r * r / 2])
  s00, s11, s22 = size[0] * size[0], size[1] * size[1], size[2] * size[2]
  if geom_type == GeomType.ELLIPSOID:
    vol = 4 * math.pi * size[0] * size[1] * size[2] / 3
    return vol, np.array([vol * (s11 + s22) / 5, vol * (s00 + s22) / 5, vol * (s00 + s11) / 5])
  vol = size[0] * size[1] * size[2] * 8
  return vol, np.array([vol * (s11 + s22) / 3, vol * (s00 + s22) / 3, vol * (s00 + s11) / 3])


def mesh_geom(
  mesh: MeshData,
  geom_type: int,
  fitscale: float = 1.0,
  fitaabb: bool = False,
  *,
  pos: Sequence[float] = (0.0, 0.0, 0.0),
  quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
  size: Sequence[float] = (0.0, 0.0, 0.0),
) -> dict:
  """What a geom with mesh=... gets from the mesh, as the mesh branch of mjCGeom::Compile.

  `pos`/`quat` are the geom's own frame after orientation resolution, `size` its own size
  attribute (fitting overwrites only the entries the primitive uses; all three are then scaled
  by fitscale). Returns:
    pos, quat: the geom frame with the mesh offset accumulated (geom_pos, geom_quat);
    offset_pos, offset_quat: that offset alone (mesh_pos plus any fitted centre, mesh_quat);
    size: geom_size; keeps_mesh: whether the geom stays a mesh geom (geom_dataid = mesh id);
    volume, inertia: volume (surface area for a shell mesh) and unit-density principal moments
      in the geom frame; a fitted primitive gets the solid-primitive values, since MuJoCo drops
      the mesh reference and computes mass like any primitive (shell typeinertia not covered);
    box: for mesh geoms the equivalent-inertia box half-sizes, from which MuJoCo sets the geom
      inertia as mass * (b1^2 + b2^2) / 3 etc. (mjCGeom::SetInertia); None otherwise;
    aabb, rbound: geom_aabb and geom_rbound for mesh geoms (None for fitted primitives, which
      get the primitive ones).
  """
  geom_type = int(geom_type)
  size_arr = np.array([float(s) for s in size], np.float64)
  center = [0.0, 0.0, 0.0]
  keeps_mesh = geom_type == GeomType.MESH
  if not keeps_mesh:
    size_arr, center = _fit_size(mesh, geom_type, fitaabb, size_arr)
    size_arr = size_arr * float(fitscale)
  mq = [float(x) for x in mesh.quat]
  offset = _rot_vec_quat(center, mq)
  offset = [offset[k] + float(mesh.pos[k]) for k in range(3)]

  # mjuu_frameaccum: pos += R(quat) offset; quat = quat * mesh quat.
  gquat = _normvec([float(x) for x in quat])
  rot = _quat2mat(gquat)
  gpos = [
    float(pos[i])
    + (rot[3 * i] * offset[0] + rot[3 * i + 1] * offset[1] + rot[3 * i + 2] * offset[2])
    for i in range(3)
  ]
  gquat = _mulquat(gquat, mq)

  aabb = rbound = None
  if keeps_mesh:
    a = mesh.aamm
    size_arr = np.array([max(abs(a[k]), abs(a[k + 3])) for k in range(3)])
    volume = mesh.volume
    inertia = mesh.inertia
    aabb = mesh.aabb
    rbound = math.sqrt(
      size_arr[0] * size_arr[0] + size_arr[1] * size_arr[1] + size_arr[2] * size_arr[2]
    )
  else:
    volume, inertia = _primitive_inertia(geom_type, size_arr)
  return {
    'pos': np.array(gpos),
    'quat': np.array(gquat),
    'offset_pos': np.array(offset),
    'offset_quat': np.array(mq),
    'size': size_arr,
    'keeps_mesh': keeps_mesh,
    'volume': float(volume),
    'inertia': np.array(inertia, np.float64),
    'box': mesh.boxsz.copy() if keeps_mesh else None,
    'aabb': aabb,
    'rbound': rbound,
  }

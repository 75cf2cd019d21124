"""Builtin meshes (`<mesh builtin="..." params="..."/>`): vertices and faces made by the compiler.

MuJoCo makes these in mjs_makeMesh (src/user/user_api.cc), which checks the parameters and calls
one of mjCMesh::MakeSphere, MakeHemisphere, MakeCone, MakeSupersphere, MakeSupertorus, MakeWedge
and MakeRect (src/user/user_mesh.cc). The result is stored as user vertex data, so from there a
builtin mesh compiles like a mesh given by `vertex` (and `face`): scaled, centred, hull, inertia.

The generators here repeat MuJoCo's arithmetic step by step (double precision, stored as float32;
the icosphere in float32 throughout) and emit the vertices in MuJoCo's order, so that the compiled
mesh arrays agree index by index. Angles use Python's `math` functions, which call the C library
as MuJoCo does.

MuJoCo 4.0.0 also lists the procedural types grid, box, cylinder, ellipsoid, square and disc (the
shapes of <flexcomp>, kept as volumetric nodes); jaxsim refuses those with a ModelError.
"""

from __future__ import annotations

import math

import numpy as np

from jaxsim.errors import ModelError
from jaxsim.mjcf.parse import Element

UNSUPPORTED = ('grid', 'box', 'cylinder', 'ellipsoid', 'square', 'disc')

_INT_MIN = -(2**31)


def _cint(x: float) -> int:
  """static_cast<int> of a double on x86-64: truncation; NaN and overflow give INT_MIN."""
  if not math.isfinite(x) or not (_INT_MIN <= x < 2**31):
    return _INT_MIN
  return int(x)


def _f32(rows) -> np.ndarray:
  """(n, 3) float32 from double rows, rounded as MuJoCo stores them."""
  return np.asarray(rows, np.float64).reshape(-1, 3).astype(np.float32)


def _faces(rows) -> np.ndarray:
  return np.asarray(rows, np.int32).reshape(-1, 3)


# ------------------------------------------------------------------------------ generators


def sphere(subdiv: int) -> tuple[np.ndarray, np.ndarray]:
  """Icosphere: an icosahedron with `subdiv` rounds of edge splitting (mjCMesh::MakeSphere).

  MuJoCo computes it in single precision: the midpoint of each edge, normalised, is appended the
  first time a face reaches that edge.
  """
  f32 = np.float32
  phi = f32((1.0 + math.sqrt(5.0)) / 2.0)
  one = f32(1.0)
  corners = [
    (-one, phi, 0),
    (one, phi, 0),
    (-one, -phi, 0),
    (one, -phi, 0),
    (0, -one, phi),
    (0, one, phi),
    (0, -one, -phi),
    (0, one, -phi),
    (phi, 0, -one),
    (phi, 0, one),
    (-phi, 0, -one),
    (-phi, 0, one),
  ]
  # phi*phi in float, the sum and the root in double; each coordinate divided in double
  norm = math.sqrt(1.0 + float(phi * phi))
  vert = (np.array(corners, np.float32).astype(np.float64) / norm).astype(np.float32)
  face = [
    (0, 11, 5),
    (0, 5, 1),
    (0, 1, 7),
    (0, 7, 10),
    (0, 10, 11),
    (1, 5, 9),
    (5, 11, 4),
    (11, 10, 2),
    (10, 7, 6),
    (7, 1, 8),
    (3, 9, 4),
    (3, 4, 2),
    (3, 2, 6),
    (3, 6, 8),
    (3, 8, 9),
    (4, 9, 5),
    (2, 4, 11),
    (6, 2, 10),
    (8, 6, 7),
    (9, 8, 1),
  ]
  for _ in range(subdiv):
    cache: dict[tuple[int, int], int] = {}
    pairs: list[tuple[int, int]] = []
    nv = len(vert)

    def midpoint(a: int, b: int, cache=cache, pairs=pairs, nv=nv) -> int:
      key = (a, b) if a < b else (b, a)
      idx = cache.get(key)
      if idx is None:
        idx = cache[key] = nv + len(pairs)
        pairs.append((a, b))
      return idx

    new_face = []
    for v1, v2, v3 in face:
      m12 = midpoint(v1, v2)
      m23 = midpoint(v2, v3)
      m31 = midpoint(v3, v1)
      new_face += [(v1, m12, m31), (v2, m23, m12), (v3, m31, m23), (m12, m23, m31)]
    face = new_face
    # the new vertices, all at once in float32 (elementwise, so rounded as MuJoCo's scalar code)
    p = np.array(pairs, np.int64)
    mid = (vert[p[:, 0]] + vert[p[:, 1]]) / f32(2.0)
    mnorm = np.sqrt(mid[:, 0] * mid[:, 0] + mid[:, 1] * mid[:, 1] + mid[:, 2] * mid[:, 2])
    vert = np.concatenate([vert, mid / mnorm[:, None]]).astype(np.float32)
  return vert, _faces(face)


def hemisphere(res: int) -> tuple[np.ndarray, np.ndarray]:
  """Quad-projected hemisphere with a bottom cap (mjCMesh::MakeHemisphere, faces and cap made).

  The pole, then rings of 4*(row+1) points interpolated between the pole and the equator's four
  quadrant points and projected onto the unit sphere, then the cap's centre at the origin.
  """
  pole = (0.0, 0.0, 1.0)
  equator = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0))
  vert = [pole]
  for row in range(res + 1):
    for side in range(4):
      factor = float(row + 1) / (res + 1)
      a, b = equator[side], equator[(side + 1) % 4]
      start = [pole[k] + factor * (a[k] - pole[k]) for k in range(3)]
      end = [pole[k] + factor * (b[k] - pole[k]) for k in range(3)]
      delta = [(end[k] - start[k]) / (row + 1) for k in range(3)]
      for i in range(row + 1):
        p = [start[k] + i * delta[k] for k in range(3)]
        norm = math.sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2])
        vert.append((p[0] / norm, p[1] / norm, p[2] / norm))
  vert.append((0.0, 0.0, 0.0))
  nvert = len(vert)

  face = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 1)]
  for row in range(res):
    start_curr = 2 * row * (row + 1) + 1
    count_curr = 4 * (row + 1)
    start_next = start_curr + count_curr
    count_next = 4 * (row + 2)
    for side in range(4):
      for i in range(row + 2):
        c = i + (row + 1) * side
        n = i + (row + 2) * side
        c0, c1 = start_curr + c % count_curr, start_curr + (c + 1) % count_curr
        n0, n1 = start_next + n % count_next, start_next + (n + 1) % count_next
        face.append((c0, n0, n1))
        if i < row + 1:
          face.append((c0, n1, c1))
  # the cap: a fan around the centre vertex
  start, count = 2 * res * (res + 1) + 1, 4 * (res + 1)
  for i in range(count):
    face.append((start + i, nvert - 1, start + (i + 1) % count))
  return _f32(vert), _faces(face)


def _aux_c(w: float, m: float) -> float:
  c = math.cos(w)
  return math.copysign(math.pow(abs(c), m), c)


def _aux_s(w: float, m: float) -> float:
  s = math.sin(w)
  return math.copysign(math.pow(abs(s), m), s)


def supersphere(res: int, e: float, n: float) -> tuple[np.ndarray, np.ndarray]:
  """Superellipsoid with exponents e (east-west) and n (north-south) (mjCMesh::MakeSupersphere).

  The south pole, res-1 rings of res points from south to north, the north pole.
  """
  pi = math.pi
  vert = [(0.0, 0.0, -1.0)]
  for i in range(1, res):
    v = -pi / 2 + i * pi / res
    cv, sv = _aux_c(v, n), _aux_s(v, n)
    for j in range(res):
      u = -pi + j * 2 * pi / res
      vert.append((cv * _aux_c(u, e), cv * _aux_s(u, e), sv))
  vert.append((0.0, 0.0, 1.0))
  nvert = len(vert)

  face = [(0, 1 + (j + 1) % res, 1 + j) for j in range(res)]
  for i in range(res - 2):
    for j in range(res):
      v1 = 1 + i * res + j
      v2 = 1 + i * res + (j + 1) % res
      v4 = 1 + (i + 1) * res + j
      v3 = 1 + (i + 1) * res + (j + 1) % res
      face += [(v1, v2, v4), (v2, v3, v4)]
  last = 1 + (res - 2) * res
  face += [(last + j, last + (j + 1) % res, nvert - 1) for j in range(res)]
  return _f32(vert), _faces(face)


def supertorus(res: int, radius: float, s: float, t: float) -> tuple[np.ndarray, np.ndarray]:
  """Supertoroid of major radius 1 and minor radius `radius` (mjCMesh::MakeSupertorus).

  Vertex i*res + j is at angle 2*pi*i/res around the axis and 2*pi*j/res around the tube.
  """
  pi = math.pi
  vert = []
  for i in range(res):
    u = 2 * pi * i / res
    cu, su = _aux_c(u, t), _aux_s(u, t)
    for j in range(res):
      v = 2 * pi * j / res
      r = 1 + radius * _aux_c(v, s)
      vert.append((r * cu, r * su, radius * _aux_s(v, s)))
  face = []
  for i in range(res):
    for j in range(res):
      i1, j1 = (i + 1) % res, (j + 1) % res
      v1, v2, v3, v4 = i * res + j, i1 * res + j, i1 * res + j1, i * res + j1
      face += [(v1, v2, v4), (v2, v3, v4)]
  return _f32(vert), _faces(face)


def _linspace(lower: float, upper: float, n: int) -> list[float]:
  """Evenly spaced values as MuJoCo's LinSpace makes them: by repeated addition."""
  inc = (upper - lower) / (n - 1) if n > 1 else 0.0
  out = []
  for _ in range(n):
    out.append(lower)
    lower += inc
  return out


def _fovea(x: float, gamma: float) -> float:
  if not gamma:
    return x
  g = max(0.0, min(1.0, gamma))
  return g * math.pow(x, 5) + (1 - g) * x


def wedge(resolution: tuple[int, int], fov: tuple[float, float], gamma: float) -> np.ndarray:
  """Slice of the unit sphere, one vertex per (azimuth, elevation) bin (mjCMesh::MakeWedge).

  No faces: MuJoCo uses the convex hull. Vertex i*res[1] + j is the centre of azimuth bin i and
  elevation bin j; the bin edges are evenly spaced in [-1, 1], foveated by gamma and scaled by
  the field of view.
  """
  edges = []
  for k in range(2):
    scl = fov[k] * math.pi / 180
    edges.append([_fovea(x, gamma) * scl for x in _linspace(-1.0, 1.0, resolution[k] + 1)])
  xe, ye = edges
  vert = []
  for i in range(resolution[0]):
    a = 0.5 * (xe[i + 1] + xe[i])
    for j in range(resolution[1]):
      e = 0.5 * (ye[j + 1] + ye[j])
      vert.append((math.cos(e) * math.sin(a), math.sin(e), -math.cos(e) * math.cos(a)))
  return _f32(vert)


def plate(resolution: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
  """Flat grid of cell centres at z = -1, two triangles per cell of the grid (mjCMesh::MakeRect).

  Vertex i*res[1] + j is at x = -1 + (i + 1/2) * 2/res[0], y = -1 + (j + 1/2) * 2/res[1].
  """
  nx, ny = resolution
  dx, dy = 2.0 / nx, 2.0 / ny
  vert = [(-1 + (i + 0.5) * dx, -1 + (j + 0.5) * dy, -1.0) for i in range(nx) for j in range(ny)]
  face = []
  for i in range(1, nx):
    for j in range(1, ny):
      a, b = (i - 1) * ny + j - 1, i * ny + j - 1
      c, d = (i - 1) * ny + j, i * ny + j
      face += [(a, b, c), (d, c, b)]
  return _f32(vert), _faces(face)


def cone(nedge: int, radius: float) -> np.ndarray:
  """Regular polygon at z = -1 under a polygon of `radius` at z = 1, or under the apex (0, 0, 1)
  when radius is 0 (mjCMesh::MakeCone). No faces: MuJoCo uses the convex hull.

  The top polygon's angles run on from the bottom's (2*pi*i/nedge with i from nedge to
  2*nedge - 1), as in MuJoCo.
  """
  vert = [
    (math.cos(2 * i * math.pi / nedge), math.sin(2 * i * math.pi / nedge), -1.0)
    for i in range(nedge)
  ]
  if radius > 0:
    vert += [
      (radius * math.cos(2 * i * math.pi / nedge), radius * math.sin(2 * i * math.pi / nedge), 1.0)
      for i in range(nedge, 2 * nedge)
    ]
  else:
    vert.append((0.0, 0.0, 1.0))
  return _f32(vert)


# ------------------------------------------------------------------------------ entry point


def make(elem: Element, kind: str, params) -> tuple[np.ndarray, np.ndarray | None, str | None]:
  """Vertices, faces and the inertia mode forced on the mesh (None: the mesh's own) of builtin
  mesh `kind`, after mjs_makeMesh's checks of `params`. Faces are None for the types that make
  none (wedge, cone): the mesh keeps those of its `face` attribute, or else gets its convex hull.

  Bad parameters raise ModelError at `elem`'s params attribute, with MuJoCo's messages.
  """
  p = [float(x) for x in np.asarray(params, np.float64).reshape(-1)]
  n = len(p)

  def fail(message: str) -> ModelError:
    return elem.error(message, attribute='params')

  if kind == 'sphere':
    if n != 1:
      raise fail('Sphere mesh type requires 1 parameter')
    subdiv = _cint(p[0])
    if subdiv < 0:
      raise fail('Sphere subdivision cannot be negative')
    if subdiv > 4:
      raise fail('Sphere subdivision cannot be greater than 4')
    vert, face = sphere(subdiv)
    return vert, face, None

  if kind == 'hemisphere':
    if n != 1:
      raise fail('Hemisphere mesh type requires 1 parameter')
    res = _cint(p[0])
    if res < 0:
      raise fail('Hemisphere resolution cannot be negative')
    if res > 10:
      raise fail('Hemisphere resolution cannot be greater than 10')
    vert, face = hemisphere(res)
    return vert, face, None

  if kind == 'supersphere':
    if n != 3:
      raise fail('Supersphere mesh type requires 3 parameters')
    res = _cint(p[0])
    if res < 3:
      raise fail('Supersphere resolution must be greater than 2')
    if p[1] < 0:
      raise fail("Supersphere 'e' cannot be negative")
    if p[2] < 0:
      raise fail("Supersphere 'n' cannot be negative")
    vert, face = supersphere(res, p[1], p[2])
    return vert, face, None

  if kind == 'supertorus':
    if n != 4:
      raise fail('Supertorus mesh type requires 4 parameters')
    res = _cint(p[0])
    if res < 3:
      raise fail('Supertorus resolution must be greater than 3')
    if p[1] <= 0 or p[1] > 1:
      raise fail('Supertorus radius must be in (0, 1]')
    if p[2] <= 0:
      raise fail("Supertorus 's' must be greater than 0")
    if p[3] <= 0:
      raise fail("Supertorus 't' must be greater than 0")
    vert, face = supertorus(res, p[1], p[2], p[3])
    return vert, face, None

  if kind == 'wedge':
    if n != 5:
      raise fail('Wedge builtin mesh types require 5 parameters')
    resolution = (_cint(p[0]), _cint(p[1]))
    fov, gamma = (p[2], p[3]), p[4]
    if fov[0] <= 0 or fov[0] > 180:
      raise fail('fov[0] must be a float between (0, 180] degrees')
    if fov[1] <= 0 or fov[1] > 90:
      raise fail('`fov[1]` must be a float between (0, 90] degrees')
    if resolution[0] <= 0 or resolution[1] <= 0:
      raise fail('Horizontal and vertical resolutions must be positive')
    if gamma < 0 or gamma > 1:
      raise fail('`gamma` must be a nonnegative float between [0, 1]')
    return wedge(resolution, fov, gamma), None, None

  if kind == 'plate':
    if n != 2:
      raise fail('Plate builtin mesh type requires 2 parameters')
    resolution = (_cint(p[0]), _cint(p[1]))
    if resolution[0] <= 0 or resolution[1] <= 0:
      raise fail('Horizontal and vertical resolutions must be positive')
    vert, face = plate(resolution)
    # MakeRect sets the mesh's inertia to shell, whatever the attribute said: it has no volume.
    # Its faces (none for a single row or column) replace any given by the `face` attribute.
    return vert, face, 'shell'

  if kind == 'cone':
    if n != 2:
      raise fail('Cone mesh type requires 2 parameters')
    nedge = _cint(p[0])
    if nedge < 3:
      raise fail('Cone nvert must be at least 3')
    if not (0 <= p[1] <= 1):
      raise fail('Cone radius must be in [0, 1]')
    return cone(nedge, p[1]), None, None

  if kind in UNSUPPORTED:
    raise elem.error(
      f'builtin mesh type {kind!r} (a procedural volumetric mesh) is not supported by jaxsim',
      attribute='builtin',
    )
  raise elem.error('Unsupported mesh type', attribute='builtin')

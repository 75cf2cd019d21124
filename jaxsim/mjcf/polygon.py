"""Mesh polygons: coplanar convex-hull triangles merged into faces (mjCMesh::MakePolygons).

MuJoCo keys each hull triangle by its normal's azimuth and polar angle rounded to 0.01 rad,
merges the triangles of a key by cancelling shared edges (MeshPolygon::InsertFace), traces the
remaining boundary edges into one or more vertex loops (MeshPolygon::Paths), and lists the loops
in the iteration order of the std::unordered_map that held the keys. That order is part of
MuJoCo's output (multi-contact takes the first of tied faces), so `_HashMap` replays libc++'s
unordered_map (the MuJoCo 4 wheels link libc++): std::hash<double> is the bit pattern (0 for
+-0.0), buckets are hash % bucket_count, and the table grows to the next prime >= 2n + 1.

The normals are then recomputed by Newell's method over each loop in the final mesh frame
(MuJoCo 4's MakePolygonNormals; 3.x took the first three vertices), not taken from the key.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from jaxsim._src.enums import EPS, MINVAL

_ANGLE_TOL = 0.01  # kAngleTol
_MASK = (1 << 64) - 1


def _round(x: float) -> float:
  """std::round as the MuJoCo 4 wheels compile it: trunc(x + copysign(0.5 - ulp/4, x))."""
  return float(math.trunc(x + math.copysign(0.49999999999999994, x)))


def _key(v1: np.ndarray, v2: np.ndarray, v3: np.ndarray) -> tuple[float, float] | None:
  """Rounded (azimuth, polar) angle of a triangle's normal; None if degenerate (MeshPolygonKey)."""
  d12 = [float(v2[k] - v1[k]) for k in range(3)]
  d13 = [float(v3[k] - v1[k]) for k in range(3)]
  n = [
    d12[1] * d13[2] - d12[2] * d13[1],
    d12[2] * d13[0] - d12[0] * d13[2],
    d12[0] * d13[1] - d12[1] * d13[0],
  ]
  norm = math.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
  if norm < MINVAL:
    return None
  n = [n[k] / norm + 0.0 for k in range(3)]
  if abs(n[2]) > 1.0 - 1e-7:
    return (0.0, _round(math.pi / _ANGLE_TOL) if n[2] < 0 else 0.0)
  return (_round(math.atan2(n[1], n[0]) / _ANGLE_TOL), _round(math.acos(n[2]) / _ANGLE_TOL))


class _Polygon:
  """Boundary edges of the merged triangles, grouped in islands (MeshPolygon)."""

  def __init__(self, a: int, b: int, c: int):
    self.edges = [(a, b), (b, c), (c, a)]
    self.islands = [0, 0, 0]
    self.nisland = 1

  def _combine(self, i1: int, i2: int) -> int:
    if i2 < i1:
      i1, i2 = i2, i1
    self.islands = [i1 if s == i2 else (s - 1 if s > i2 else s) for s in self.islands]
    return i1

  def insert(self, v1: int, v2: int, v3: int):
    """Attach a triangle, cancelling the edges it shares (MeshPolygon::InsertFace)."""
    island = -1
    add = []
    for a, b in ((v1, v2), (v2, v3), (v3, v1)):
      try:
        i = self.edges.index((b, a))
      except ValueError:
        add.append((a, b))
        continue
      other = self.islands[i]
      if island == -1:
        island = other
      elif other != island:
        self.nisland -= 1
        island = self._combine(island, other)
      del self.edges[i]
      del self.islands[i]
    if island == -1:
      island = self.nisland
      self.nisland += 1
    for e in add:
      self.edges.append(e)
      self.islands.append(island)

  def paths(self) -> list[list[int]]:
    """Vertex loops of the boundary, one per island (MeshPolygon::Paths)."""
    # MuJoCo 3.x listed any 3 remaining edges as they came, which could wind a merged fan the
    # wrong way; MuJoCo 4 traces them like any other loop
    edges, islands = self.edges, self.islands
    out = []
    for i in range(self.nisland):
      path = []
      for j, (a, b) in enumerate(edges):
        if islands[j] == i:
          path = [a, b]
          break
      if not path:
        continue
      nxt = path[-1]
      for _ in range(len(edges)):
        finished = False
        # MuJoCo scans from the second edge on
        for k in range(1, len(edges)):
          if islands[k] == i and edges[k][0] == nxt:
            nxt = edges[k][1]
            if nxt == path[0]:
              out.append(path)
              finished = True
              break
            path.append(nxt)
            break
        if finished:
          break
    return out


def _bits(x: float) -> int:
  """std::hash<double> in libc++: the bit pattern, 0 for +-0.0."""
  if x == 0.0:
    return 0
  return struct.unpack('<Q', struct.pack('<d', x))[0]


def _hash(key: tuple[float, float]) -> int:
  """mujoco::user::PairHash: boost's hash_combine of the two std::hash<double> values."""
  h1, h2 = _bits(key[0]), _bits(key[1])
  return h1 ^ ((h2 + 0x9E3779B9 + (h1 << 6) + (h1 >> 2)) & _MASK)


def _is_prime(n: int) -> bool:
  if n < 2:
    return False
  k = 2
  while k * k <= n:
    if n % k == 0:
      return False
    k += 1
  return True


def _next_prime(n: int) -> int:
  while not _is_prime(n):
    n += 1
  return n


class _HashMap:
  """Key order of a libc++ std::unordered_map with PairHash, insertions only (__hash_table).

  libc++ keeps one singly linked node list in which each bucket's nodes are contiguous; it is
  held here as runs, one per bucket, in list order (scanning the flat list for each insertion
  was quadratic: 36 s of Unitree G1's 40 s load).
  """

  def __init__(self):
    self.order: list[int] = []  # buckets in list order
    self.runs: dict[int, list[tuple[tuple[float, float], int]]] = {}  # bucket -> (key, hash)
    self.size = 0
    self.bc = 0
    self.values: dict[tuple[float, float], object] = {}

  @property
  def nodes(self) -> list[tuple[tuple[float, float], int]]:
    return [node for b in self.order for node in self.runs[b]]

  def _bucket(self, h: int) -> int:
    bc = self.bc
    if bc & (bc - 1) == 0:
      return h & (bc - 1)
    return h if h < bc else h % bc

  def _rehash(self, n: int):
    """__rehash_unique + __do_rehash: relink the nodes so that each bucket is contiguous."""
    if n == 1:
      n = 2
    elif n & (n - 1):
      n = _next_prime(n)
    if n <= self.bc:
      return
    nodes = self.nodes
    self.bc = n
    self.order, self.runs = [], {}
    prev_bucket = None
    for node in nodes:
      b = self._bucket(node[1])
      if b == prev_bucket:
        self.runs[b].append(node)  # the last run: stays in place
      elif b not in self.runs:
        self.order.append(b)  # a new bucket: its run starts here
        self.runs[b] = [node]
        prev_bucket = b
      else:
        self.runs[b].insert(0, node)  # spliced in as the new head of its bucket's run

  def get(self, key: tuple[float, float]):
    return self.values.get(key)

  def insert(self, key: tuple[float, float], value):
    """Insert a new key (__emplace_unique_key_args)."""
    h = _hash(key)
    if self.size + 1 > self.bc or self.bc == 0:
      power2 = self.bc > 2 and not (self.bc & (self.bc - 1))
      self._rehash(max(2 * self.bc + (not power2), self.size + 1))
    b = self._bucket(h)
    # the new node heads its bucket's run, or the whole list if the bucket was empty
    if b in self.runs:
      self.runs[b].insert(0, (key, h))
    else:
      self.order.insert(0, b)
      self.runs[b] = [(key, h)]
    self.size += 1
    self.values[key] = value

  def items(self):
    return [(k, self.values[k]) for k, _ in self.nodes]


def make_polygons(dvert: np.ndarray, faces: np.ndarray) -> list[list[int]]:
  """Polygons (vertex loops, counter-clockwise from outside) of a convex hull (MakePolygons).

  dvert (nv, 3): the source vertices before any transformation, as the hull was built from;
  faces (nf, 3): the hull triangles in mesh_graph order.
  """
  dvert = np.asarray(dvert, np.float64)
  table = _HashMap()
  for a, b, c in np.asarray(faces, np.int64).tolist():
    key = _key(dvert[a], dvert[b], dvert[c])
    if key is None:
      continue
    poly = table.get(key)
    if poly is None:
      table.insert(key, _Polygon(a, b, c))
    else:
      poly.insert(a, b, c)
  out = []
  for _, poly in table.items():
    out.extend(p for p in poly.paths() if len(p) >= 3)
  return out


def polygon_normals(dvert: np.ndarray, polygons: list[list[int]]) -> np.ndarray:
  """(npoly, 3) unit normals by Newell's method over each loop (MuJoCo 4's MakePolygonNormals).

  dvert (nv, 3): the final mesh vertices in double precision (before narrowing to mesh_vert).
  Sums run vertex by vertex from 0.0, as MuJoCo's loop; a null normal becomes (1, 0, 0).
  """
  dvert = np.asarray(dvert, np.float64)
  out = np.zeros((len(polygons), 3))
  for i, p in enumerate(polygons):
    cur = dvert[np.asarray(p)]
    nxt = np.roll(cur, -1, axis=0)
    terms = np.stack(
      [
        (cur[:, 1] - nxt[:, 1]) * (cur[:, 2] + nxt[:, 2]),
        (cur[:, 2] - nxt[:, 2]) * (cur[:, 0] + nxt[:, 0]),
        (cur[:, 0] - nxt[:, 0]) * (cur[:, 1] + nxt[:, 1]),
      ],
      axis=1,
    )
    n = [0.0, 0.0, 0.0]
    for t in terms.tolist():
      n = [n[0] + t[0], n[1] + t[1], n[2] + t[2]]
    nrm = math.sqrt(n[2] * n[2] + (n[0] * n[0] + n[1] * n[1]))
    out[i] = (1.0, 0.0, 0.0) if nrm < EPS else (n[0] / nrm, n[1] / nrm, n[2] / nrm)
  return out


def polygon_map(polygons: list[list[int]], nvert: int) -> list[list[int]]:
  """Polygons at each vertex, in increasing order (mjCMesh polygon_map_)."""
  out: list[list[int]] = [[] for _ in range(nvert)]
  for i, p in enumerate(polygons):
    for v in p:
      out[v].append(i)
  return out


def model_arrays(meshes) -> dict[str, np.ndarray]:
  """mjModel's mesh_poly* arrays of compiled meshes (MeshData), laid out as mjCModel::CopyObjects.

  mesh_polyvertadr and mesh_polymapadr are global addresses; the ids in mesh_polyvert (vertices)
  and mesh_polymap (polygons) are local to their mesh. mesh_polymapadr/num are per mesh vertex.
  """
  polys = [p for md in meshes for p in md.polygons]
  maps = [q for md in meshes for q in polygon_map(list(md.polygons), len(md.vert))]
  polynum = np.array([len(md.polygons) for md in meshes], dtype=int)
  vertnum = np.array([len(p) for p in polys], dtype=int)
  mapnum = np.array([len(q) for q in maps], dtype=int)
  cat = lambda x: (
    np.concatenate([[0], np.cumsum(x)[:-1]]).astype(int) if len(x) else np.zeros(0, int)
  )  # noqa: E731
  normals = [md.polynormal for md in meshes if len(md.polygons)]
  return {
    'mesh_polynum': polynum,
    'mesh_polyadr': cat(polynum),
    'mesh_polynormal': np.concatenate(normals) if normals else np.zeros((0, 3)),
    'mesh_polyvertadr': cat(vertnum),
    'mesh_polyvertnum': vertnum,
    'mesh_polyvert': np.array([v for p in polys for v in p], dtype=int),
    'mesh_polymapadr': cat(mapnum),
    'mesh_polymapnum': mapnum,
    'mesh_polymap': np.array([i for q in maps for i in q], dtype=int),
  }

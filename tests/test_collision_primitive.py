"""Analytic colliders against MuJoCo's narrow phase on two-geom models at thousands of poses."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from jaxsim._src.collision import primitive
from jaxsim._src.collision.geom import NO_CONTACT, GeomInfo, MeshPoly, mesh_graph_arrays
from jaxsim._src.enums import GeomType

T = GeomType
NSAMPLE = 1000
TOL = 1e-6

# an irregular convex mesh with more than mjMESH_HILLCLIMB_MIN vertices, and a small one
_RNG = np.random.default_rng(7)
_BIG = _RNG.normal(size=(40, 3)) * np.array([0.12, 0.08, 0.05])
_SMALL = np.array([[0.1, 0, 0], [-0.1, 0.02, 0], [0, 0.12, 0], [0.01, -0.09, 0.03], [0, 0, 0.15]])
# a frustum on an irregular 11-gon, its caps tilted, the top one smaller and turned (polygons of
# more than four vertices, square to no axis of the mesh frame), and a box
_ANGLES = np.sort(_RNG.uniform(0, 2 * np.pi, 11))
_CAP = np.stack([0.1 * np.cos(_ANGLES), 0.06 * np.sin(_ANGLES), 0.03 * np.cos(_ANGLES)], axis=1)
_TOP = np.stack(
  [0.08 * np.cos(_ANGLES + 0.2), 0.05 * np.sin(_ANGLES + 0.2), 0.2 * np.cos(_ANGLES)], 1
)
_MESHES = {
  'big': _BIG,
  'small': _SMALL,
  'prism': np.concatenate([_CAP - [0.01, 0.005, 0.03], _TOP * [1, 1, 0.1] + [0.01, 0.005, 0.03]]),
  'box': np.array(list(np.ndindex(2, 2, 2))) * [0.2, 0.14, 0.1] - [0.1, 0.07, 0.05],
}


def _mesh_poly(mj) -> MeshPoly:
  """Mesh 0's polygons from MuJoCo's mesh_poly* arrays, padded with -1."""
  pn, vn = mj.mesh_polynum[0], mj.mesh_vertnum[0]

  def rows(flat, adr, num):
    out = np.full((len(num), max(num.max(), 1)), -1, np.int32)
    for i, (a, n) in enumerate(zip(adr, num, strict=True)):
      out[i, :n] = flat[a : a + n]
    return out

  pvert = rows(mj.mesh_polyvert, mj.mesh_polyvertadr[:pn], mj.mesh_polyvertnum[:pn])
  pmap = rows(mj.mesh_polymap, mj.mesh_polymapadr[:vn], mj.mesh_polymapnum[:vn])
  ints = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
  return MeshPoly(
    jnp.asarray(mj.mesh_polynormal[:pn]),
    ints(pvert),
    ints(mj.mesh_polyvertnum[:pn]),
    ints(pmap),
    ints(mj.mesh_polymapnum[:vn]),
  )


def _fmt(v):
  return ' '.join(f'{x:.9g}' for x in np.ravel(v))


# geom type -> (mjcf type, size) of the geom under test
_SIZES = {
  T.PLANE: ('plane', '0 0 1'),
  T.SPHERE: ('sphere', '0.1'),
  T.CAPSULE: ('capsule', '0.07 0.15'),
  T.ELLIPSOID: ('ellipsoid', '0.12 0.07 0.05'),
  T.CYLINDER: ('cylinder', '0.08 0.12'),
  T.BOX: ('box', '0.15 0.1 0.06'),
}
_SIZES2 = {
  T.SPHERE: ('sphere', '0.06'),
  T.CAPSULE: ('capsule', '0.05 0.2'),
  T.BOX: ('box', '0.09 0.13 0.04'),
}


def _xml(t1: int, t2: int, mesh: np.ndarray | None) -> str:
  """geom1 (static in the world when a plane, else on a free body) and geom2 on a free body."""
  typ1, size1 = _SIZES[t1]
  typ2, size2 = _SIZES2[t2] if t1 == t2 else _SIZES.get(t2, ('mesh', ''))
  g2 = f'type="{typ2}" size="{size2}"' if typ2 != 'mesh' else 'type="mesh" mesh="m"'
  g1 = f'<geom name="g1" type="{typ1}" size="{size1}"/>'
  body1 = g1 if t1 == T.PLANE else f'<body><freejoint/>{g1}</body>'
  asset = f'<asset><mesh name="m" vertex="{_fmt(mesh)}"/></asset>' if mesh is not None else ''
  return f"""<mujoco><option gravity="0 0 0"/>{asset}<worldbody>{body1}
    <body pos="0 0 1"><freejoint/><geom name="g2" {g2}/></body></worldbody></mujoco>"""


_AXIS_QUATS = None


def _axis_quats() -> np.ndarray:
  """The 24 rotations mapping coordinate axes to coordinate axes, as quaternions."""
  global _AXIS_QUATS
  if _AXIS_QUATS is None:
    out = []
    for perm in ([0, 1, 2], [1, 2, 0], [2, 0, 1], [1, 0, 2], [0, 2, 1], [2, 1, 0]):
      for signs in np.ndindex(2, 2, 2):
        mat = np.zeros((3, 3))
        mat[np.arange(3), perm] = np.where(np.array(signs) == 1, -1.0, 1.0)
        if np.linalg.det(mat) > 0:
          q = np.zeros(4)
          mujoco.mju_mat2Quat(q, mat.ravel())
          out.append(q)
    _AXIS_QUATS = np.array(out)
  return _AXIS_QUATS


def _quat(rng: np.random.Generator, kind: float) -> np.ndarray:
  """Random unit quaternion; an axis-aligned one (degenerate poses) when kind < 0.2."""
  if kind < 0.2:
    return _axis_quats()[rng.integers(24)]
  q = rng.normal(size=4)
  return q / np.linalg.norm(q)


def _poses(rng: np.random.Generator, n: int, reach: float):
  """Random relative poses: general, axis-aligned, coincident centres, deep and near contact."""
  ident = np.array([1.0, 0, 0, 0])
  q = rng.normal(size=4)
  q /= np.linalg.norm(q)
  z = np.zeros(3)
  # coincident centres with identical, random-identical and axis-swapped orientations
  out = [(z, ident, z, ident, 0.0), (z, q, z, q, 0.0), (z, ident, z, _axis_quats()[5], 0.01)]
  for _ in range(n - len(out)):
    kind = rng.uniform()
    q1, q2 = _quat(rng, kind), _quat(rng, kind)
    if 0.5 <= kind < 0.7:
      # axes parallel (or nearly) in a generic world orientation
      rel = _axis_quats()[rng.integers(24)].copy()
      if kind >= 0.65:
        rel += rng.normal(size=4) * 10.0 ** rng.uniform(-12, -4)
        rel /= np.linalg.norm(rel)
      mujoco.mju_mulQuat(q2, q1, rel)
    p1 = rng.normal(size=3) * 0.1
    d = rng.normal(size=3)
    d /= np.linalg.norm(d)
    if kind < 0.2:
      d = np.round(d * 2) / 2  # along axes and diagonals
    if 0.2 <= kind < 0.25:
      r = 0.0  # coincident centres
    elif 0.25 <= kind < 0.5:
      r = rng.uniform(0, 0.5) * reach  # deep penetration
    else:
      r = rng.uniform(0.3, 1.3) * reach
    p2 = p1 + d * r
    margin = 0.0 if rng.uniform() < 0.5 else rng.uniform(0, 0.1)
    out.append((p1, q1, p2, q2, margin))
  return out


class _Case:
  """MuJoCo model for one type pair and geom inputs/contacts at many poses."""

  def __init__(self, t1: int, t2: int, mesh: np.ndarray | None = None, seed: int = 0):
    self.mj = mujoco.MjModel.from_xml_string(_xml(t1, t2, mesh))
    self.md = mujoco.MjData(self.mj)
    self.plane = t1 == T.PLANE
    self.n = primitive.MAX_CONTACTS[(t1, t2)]
    self.fn = primitive.COLLIDERS[(t1, t2)]
    self.extra = {}
    if mesh is not None:
      mj = self.mj
      vert = mj.mesh_vert[mj.mesh_vertadr[0] : mj.mesh_vertadr[0] + mj.mesh_vertnum[0]]
      ga = mj.mesh_graphadr[0]
      if ga >= 0:
        nv, nf = mj.mesh_graph[ga], mj.mesh_graph[ga + 1]
        graph = mj.mesh_graph[ga : ga + 2 + 3 * nv + 3 * nf + 1 + 2 * nv + 3 * nf]
        gid, nbr = mesh_graph_arrays(graph)
        self.extra = dict(graph_globalid=gid, graph_neighbors=nbr, poly=_mesh_poly(mj))
      self.extra['vert'] = np.asarray(vert, np.float64)
      self.extra['rbound'] = mj.geom_rbound[1]
    rng = np.random.default_rng(seed)
    reach = 2 * (self.mj.geom_rbound[0] + self.mj.geom_rbound[1])
    if self.plane:
      reach = 2 * self.mj.geom_rbound[1]
    poses = _poses(rng, NSAMPLE, reach)
    rows = [self._run(*p) for p in poses]
    # near-touching copies: move geom2 along the normal so dist lands at 0 or the margin +- eps
    for p, row in zip(poses[: NSAMPLE // 2], rows[: NSAMPLE // 2]):
      if row[-1][0].size:
        dist, _, frame = (x[0] for x in row[-1])
        margin = p[4]
        for target in (margin, 0.0):
          eps = rng.choice([-1e-9, 0.0, 1e-9])
          p2 = p[2] + frame[0] * (target - dist + eps)
          poses.append((p[0], p[1], p2, p[3], margin))
          rows.append(self._run(*poses[-1]))
    self.poses = poses
    self.rows = rows

  def _run(self, p1, q1, p2, q2, margin):
    mj, md = self.mj, self.md
    if self.plane:
      mj.geom_pos[0], mj.geom_quat[0] = p1, q1
      md.qpos[:] = np.concatenate([p2, q2])
    else:
      md.qpos[:] = np.concatenate([p1, q1, p2, q2])
    mj.geom_margin[:] = 0.0, margin  # MuJoCo adds the two margins
    mujoco.mj_kinematics(mj, md)
    mujoco.mj_collision(mj, md)
    c = md.contact[: md.ncon]
    assert md.ncon <= self.n
    assert all((c.geom[:, 0] == 0) & (c.geom[:, 1] == 1))
    geoms = [
      (md.geom_xpos[g].copy(), md.geom_xmat[g].reshape(3, 3).copy(), mj.geom_size[g].copy())
      for g in (0, 1)
    ]
    contacts = (c.dist.copy(), c.pos.copy(), c.frame.reshape(-1, 3, 3).copy())
    return geoms, margin, contacts

  def inputs(self):
    """Batched (GeomInfo, GeomInfo, margin) for all poses."""
    g = [[np.stack([r[0][k][f] for r in self.rows]) for f in range(3)] for k in (0, 1)]
    extra = {k: jnp.asarray(v) for k, v in self.extra.items() if k in ('vert', 'rbound')}
    g1 = GeomInfo(*map(jnp.asarray, g[0]))
    g2 = GeomInfo(*map(jnp.asarray, g[1]))
    margin = jnp.asarray([r[1] for r in self.rows])
    return g1, g2, margin, extra

  def collide(self):
    """Contacts at all poses, and gradients of their dist/pos/frame w.r.t. both poses."""
    g1, g2, margin, extra = self.inputs()
    static = {k: v for k, v in self.extra.items() if k.startswith('graph') or k == 'poly'}
    fn = self.fn

    def loss(pos1, mat1, pos2, mat2, size1, size2, margin):
      g1 = GeomInfo(pos1, mat1, size1)
      g2 = GeomInfo(pos2, mat2, size2, **static, **extra)
      c = fn(g1, g2, margin)
      active = c.dist < NO_CONTACT / 2
      return jnp.sum(jnp.where(active, c.dist, 0.0)) + jnp.sum(c.pos) + jnp.sum(c.frame), c

    f = jax.vmap(jax.value_and_grad(loss, argnums=(0, 1, 2, 3), has_aux=True))
    (_, c), grads = jax.jit(f)(g1.pos, g1.mat, g2.pos, g2.mat, g1.size, g2.size, margin)
    self.grads = grads
    return c


def compare(case: _Case, out) -> dict:
  """Max errors over all poses and the poses whose contact lists differ.

  A contact whose dist equals the margin to rounding (the near-touching copies put some there on
  purpose) may be emitted by one side and not the other; such contacts are left out of both lists.
  """
  dist, pos, frame = (np.asarray(x) for x in out)
  err = {'count': [], 'order': [], 'dist': 0.0, 'pos': 0.0, 'frame': 0.0, 'ncon': 0}
  for s, row in enumerate(case.rows):
    mdist, mpos, mframe = row[-1]
    margin = row[1]
    valid = dist[s] < NO_CONTACT / 2
    if valid[valid.sum() :].any():  # valid slots come first
      err['count'].append(s)
      continue
    keep_mj = np.abs(mdist - margin) > 1e-12
    keep = valid & (np.abs(dist[s] - margin) > 1e-12)
    if keep_mj.sum() != keep.sum():
      err['count'].append(s)
      continue
    k = keep_mj.sum()
    err['ncon'] += k
    if not k:
      continue
    d, p, f = dist[s][keep], pos[s][keep], frame[s][keep]
    md, mp, mf = mdist[keep_mj], mpos[keep_mj], mframe[keep_mj]
    if np.abs(p - mp).max() > TOL:
      # at exact ties (e.g. parallel box faces) rounding picks the reference face, which only
      # permutes the same contacts: match by position and record the pose
      j = np.argmin(np.abs(p[None] - mp[:, None]).sum(-1), axis=1)
      d, p, f = d[j], p[j], f[j]
      err['order'].append(s)
    err['dist'] = max(err['dist'], np.abs(d - md).max())
    err['pos'] = max(err['pos'], np.abs(p - mp).max())
    err['frame'] = max(err['frame'], np.abs(f - mf).max())
  assert np.isfinite(dist).all() and np.isfinite(pos).all() and np.isfinite(frame).all()
  return err


PAIRS = [
  (T.PLANE, T.SPHERE),
  (T.PLANE, T.CAPSULE),
  (T.PLANE, T.ELLIPSOID),
  (T.PLANE, T.CYLINDER),
  (T.PLANE, T.BOX),
  (T.SPHERE, T.SPHERE),
  (T.SPHERE, T.CAPSULE),
  (T.SPHERE, T.CYLINDER),
  (T.SPHERE, T.BOX),
  (T.CAPSULE, T.CAPSULE),
  (T.CAPSULE, T.BOX),
  (T.BOX, T.BOX),
]


def _name(pair) -> str:
  return f'{pair[0].name}-{pair[1].name}'.lower()


def _degenerate(row) -> bool:
  """Whether some axis of geom1 is parallel to some axis of geom2 (faces tie exactly)."""
  rot = row[0][0][1].T @ row[0][1][1]
  return bool(np.any(1 - np.abs(rot) < 1e-12))


@pytest.mark.parametrize('pair', PAIRS, ids=_name)
def test_matches_mujoco(pair):
  case = _Case(*pair)
  err = compare(case, case.collide())
  # gradients are finite at every pose, coincident and touching ones included
  assert all(np.isfinite(np.asarray(g)).all() for g in case.grads)
  assert not err['count'], f'{len(err["count"])} poses differ in contact count: {err["count"][:10]}'
  assert err['dist'] < TOL and err['pos'] < TOL and err['frame'] < TOL, err
  # only exact ties may permute the contacts, and only few poses have them
  assert all(_degenerate(case.rows[s]) for s in err['order']), err['order']
  assert len(err['order']) <= len(case.rows) // 100
  # the poses reach every contact count the collider can produce (box-box: up to 7 here)
  counts = np.bincount([len(r[-1][0]) for r in case.rows], minlength=case.n + 1)
  assert (counts[: min(case.n, 7) + 1] > 0).all(), counts


@pytest.mark.parametrize('mesh', ['big', 'small', 'prism', 'box'])
def test_plane_mesh_matches_mujoco(mesh):
  """mjc_PlaneConvex on a mesh (MuJoCo 4): the support vertex, then the vertices of its polygon
  most facing the plane (a maximum-area quadrilateral of the prism's 11-gon caps) that are within
  the margin and below the mesh centre, in MuJoCo's order."""
  case = _Case(T.PLANE, T.MESH, mesh=_MESHES[mesh])
  err = compare(case, case.collide())
  assert all(np.isfinite(np.asarray(g)).all() for g in case.grads)
  assert not err['count'], f'{len(err["count"])} poses differ in contact count: {err["count"][:10]}'
  assert err['dist'] < TOL and err['pos'] < TOL and err['frame'] < TOL, err
  # the box's faces lie flat at axis-aligned poses: equally deep vertices may come in another order
  assert all(_degenerate(case.rows[s]) for s in err['order']), err['order']
  counts = np.bincount([len(r[-1][0]) for r in case.rows], minlength=5)
  assert (counts[: {'small': 4, 'big': 4}.get(mesh, 5)] > 0).all(), counts


if __name__ == '__main__':
  jax.config.update('jax_enable_x64', True)
  import sys

  for pair in PAIRS:
    if len(sys.argv) > 1 and _name(pair) not in sys.argv[1:]:
      continue
    case = _Case(*pair)
    err = compare(case, case.collide())
    counts = np.bincount([len(r[-1][0]) for r in case.rows])
    print(
      _name(pair),
      len(case.rows),
      counts,
      err['count'][:8],
      err['order'][:8],
      f'{err["dist"]:.2e} {err["pos"]:.2e} {err["frame"]:.2e}',
    )

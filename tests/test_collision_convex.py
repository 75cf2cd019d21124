"""mjc_Convex (GJK, EPA, multiccd) against MuJoCo on two-geom models at random relative poses."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src.collision import convex, driver
from jaxsim._src.collision import support as sp
from jaxsim._src.collision.geom import NO_CONTACT, GeomInfo
from tests.oracle import jit_run

TET = 'v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n'
OCT = (
  'v 1 0 0\nv -1 0 0\nv 0 1 0\nv 0 -1 0\nv 0 0 1\nv 0 0 -1\n'
  'f 1 3 5\nf 3 2 5\nf 2 4 5\nf 4 1 5\nf 3 1 6\nf 2 3 6\nf 4 2 6\nf 1 4 6\n'
)
CUBE = ''.join(f'v {x} {y} {z}\n' for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)) + (
  'f 1 2 4 3\nf 5 7 8 6\nf 1 5 6 2\nf 3 4 8 7\nf 1 3 7 5\nf 2 6 8 4\n'
)
ASSETS = {'tet.obj': TET.encode(), 'oct.obj': OCT.encode(), 'cube.obj': CUBE.encode()}
NAMES = {2: 'sphere', 3: 'capsule', 4: 'ellipsoid', 5: 'cylinder', 6: 'box'}
SIZES = {2: '0.3', 3: '0.2 0.3', 4: '0.3 0.2 0.4', 5: '0.25 0.3', 6: '0.3 0.2 0.25'}
NVERT = 8  # vertex slots (the cube's 8), padded by repeating a vertex
BATCH = 1024  # poses per case: every case is padded to it, so the collider compiles once
N_RANDOM, N_TOUCH = 800, 112  # random poses, and near-touching ones on each side of contact
PAIRS = sorted(convex.CONVEX_PAIRS)


def _geom(t: int, mesh: str, margin: float) -> str:
  if t == 7:
    return f'<geom type="mesh" mesh="{mesh}" margin="{margin}"/>'
  return f'<geom type="{NAMES[t]}" size="{SIZES[t]}" margin="{margin}"/>'


def _xml(t1: int, t2: int, margin: float) -> str:
  # mesh-mesh: octahedron vs tetrahedron; otherwise meshes are cubes (box-mesh) or octahedra
  m1 = 'oct'
  m2 = 'tet' if t1 == 7 else ('cube' if t1 == 6 else 'oct')
  return f"""<mujoco><asset>
  <mesh name="tet" file="tet.obj" scale="0.5 0.5 0.5"/>
  <mesh name="oct" file="oct.obj" scale="0.35 0.3 0.4"/>
  <mesh name="cube" file="cube.obj" scale="0.3 0.25 0.2"/></asset>
  <worldbody>
    <body><freejoint/>{_geom(t1, m1, margin)}</body>
    <body pos="1 0 0"><freejoint/>{_geom(t2, m2, margin)}</body>
  </worldbody></mujoco>"""


def _quats(rng, n):
  q = rng.normal(size=(n, 4))
  return q / np.linalg.norm(q, axis=1, keepdims=True)


def _poses(mj: mujoco.MjModel, rng, n: int, n_touch: int) -> np.ndarray:
  """Random poses: centres 0..0.8 apart (deep to separated) plus near-touching ones."""
  q = np.zeros((n + 2 * n_touch, 14))
  dirs = rng.normal(size=(len(q), 3))
  dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
  q[:, 3:7] = _quats(rng, len(q))
  q[:, 10:14] = _quats(rng, len(q))
  q[:n, 7:10] = dirs[:n] * rng.uniform(0.0, 0.8, size=(n, 1))
  # near-touching: bisect the centre distance where MuJoCo's contact appears, then +-1e-6
  md = mujoco.MjData(mj)
  for i in range(n, n + n_touch):
    lo, hi = 0.0, 2.0
    for _ in range(40):
      mid = 0.5 * (lo + hi)
      md.qpos[:] = q[i]
      md.qpos[7:10] = dirs[i] * mid
      mujoco.mj_forward(mj, md)
      lo, hi = (mid, hi) if md.ncon else (lo, mid)
    q[i, 7:10] = dirs[i] * (lo - 1e-6)
    q[i + n_touch] = q[i]
    q[i + n_touch, 7:10] = dirs[i] * (hi + 1e-6)
  return q


def _mujoco(mj: mujoco.MjModel, qpos: np.ndarray):
  """Geom poses and contacts (count, dist, pos, normal padded to 5) from MuJoCo."""
  md = mujoco.MjData(mj)
  n = len(qpos)
  xpos, xmat = np.zeros((n, 2, 3)), np.zeros((n, 2, 3, 3))
  ncon = np.zeros(n, int)
  dist, pos, normal = np.full((n, 5), NO_CONTACT), np.zeros((n, 5, 3)), np.zeros((n, 5, 3))
  for i, q in enumerate(qpos):
    md.qpos[:] = q
    mujoco.mj_forward(mj, md)
    xpos[i], xmat[i] = md.geom_xpos, md.geom_xmat.reshape(2, 3, 3)
    ncon[i] = md.ncon
    for j, c in enumerate(md.contact[: md.ncon]):
      assert tuple(c.geom) == (0, 1)
      dist[i, j], pos[i, j], normal[i, j] = c.dist, c.pos, c.frame[:3]
  return xpos, xmat, ncon, dist, pos, normal


def _verts(m: jaxsim.Model, g: int) -> np.ndarray:
  """Mesh vertices of geom g in its frame, padded to NVERT (zeros for primitives)."""
  if int(m.geom_type[g]) != 7:
    return np.zeros((NVERT, 3))
  mid = int(m.geom_dataid[g])
  adr, num = int(m.mesh_vertadr[mid]), int(m.mesh_vertnum[mid])
  v = np.asarray(m.mesh_vert[adr : adr + num], dtype=np.float64)
  return np.concatenate([v, np.repeat(v[:1], NVERT - num, axis=0)])


# padded sizes of MuJoCo's mesh polygon arrays (the octahedron has 8 triangles, the cube 6 quads)
NPOLY, NPOLYVERT, NMAP = 8, 4, 4


def _polys(mj: mujoco.MjModel, g: int) -> sp.MeshPoly:
  """MuJoCo's polygons of mesh geom g (mesh_poly*), padded; zeros for primitives."""
  normal = np.zeros((NPOLY, 3))
  vert = np.full((NPOLY, NPOLYVERT), -1)
  nvert = np.zeros(NPOLY, int)
  pmap = np.full((NVERT, NMAP), -1)
  nmap = np.zeros(NVERT, int)
  mid = int(mj.geom_dataid[g])
  if mid >= 0:
    pa, pn = mj.mesh_polyadr[mid], mj.mesh_polynum[mid]
    va, vn = mj.mesh_vertadr[mid], mj.mesh_vertnum[mid]
    normal[:pn] = mj.mesh_polynormal[pa : pa + pn]
    nvert[:pn] = mj.mesh_polyvertnum[pa : pa + pn]
    for i in range(pn):
      a = mj.mesh_polyvertadr[pa + i]
      vert[i, : nvert[i]] = mj.mesh_polyvert[a : a + nvert[i]]
    nmap[:vn] = mj.mesh_polymapnum[va : va + vn]
    for i in range(vn):
      a = mj.mesh_polymapadr[va + i]
      pmap[i, : nmap[i]] = mj.mesh_polymap[a : a + nmap[i]]
  return sp.MeshPoly(normal, vert, nvert, pmap, nmap)


def _case(t1: int, t2: int, margin: float, n: int, n_touch: int, seed: int):
  xml = _xml(t1, t2, margin)
  mj = mujoco.MjModel.from_xml_string(xml, ASSETS)
  m = jaxsim.load_string(xml, ASSETS)
  np.testing.assert_array_equal(np.asarray(m.geom_type), [t1, t2])
  q = _poses(mj, np.random.default_rng(seed), n, n_touch)
  xpos, xmat, ncon, dist, pos, normal = _mujoco(mj, q)
  k = len(q)
  size = np.asarray(m.geom_size, dtype=np.float64)
  inputs, polys = [], []
  for g in range(2):
    inputs.append(
      GeomInfo(
        jnp.asarray(xpos[:, g]),
        jnp.asarray(xmat[:, g]),
        jnp.asarray(np.tile(size[g], (k, 1))),
        jnp.asarray(np.tile(_verts(m, g), (k, 1, 1))),
      )
    )
    polys.append(
      jax.tree_util.tree_map(lambda x: jnp.asarray(np.tile(x, (k,) + (1,) * x.ndim)), _polys(mj, g))
    )
  types = (jnp.full(k, t1), jnp.full(k, t2))
  # the pair margin is the sum of the geom margins (mj_collision's getMargin)
  return inputs, polys, types, jnp.full(k, 2 * margin), (ncon, dist, pos, normal)


@pytest.fixture(scope='module')
def collide():
  """One compiled collider for every convex pair (geom types traced)."""

  def f(g1, g2, p1, p2, t1, t2, margin):
    return convex.collide_convex(g1, g2, margin, type1=t1, type2=t2, poly1=p1, poly2=p2)

  return jit_run(jax.vmap(f))  # run on 1,024 poses per case


def _match(jd, jp, jn, dist, pos, normal):
  """Largest difference over MuJoCo's contacts of one pair, each matched to our nearest one.

  The order of a pair's contacts is not part of the contract (MuJoCo's own order follows the
  rounding of its clipping loop); their number, depths, positions and normals are.
  """
  err = 0.0
  for j in range(len(dist)):
    near = np.abs(jp - pos[j]).max(axis=-1)
    k = int(np.argmin(near))
    err = max(err, near[k], abs(jd[k] - dist[j]), np.abs(jn[k] - normal[j]).max())
  return err


def _check(collide, t1, t2, margin, n, n_touch, seed):
  """Compare with MuJoCo; returns (MuJoCo's contact counts, per pose: jaxsim matches MuJoCo)."""
  (g1, g2), (p1, p2), (ty1, ty2), mg, (ncon, dist, pos, normal) = _case(
    t1, t2, margin, n, n_touch, seed
  )
  k = len(ncon)
  pad = lambda x: jnp.concatenate([x, jnp.repeat(x[:1], BATCH - k, axis=0)])  # noqa: E731
  args = jax.tree_util.tree_map(pad, (g1, g2, p1, p2, ty1, ty2, mg))
  res = jax.tree_util.tree_map(lambda x: x[:k], collide(*args))
  jd, jp, jn = np.asarray(res.dist), np.asarray(res.pos), np.asarray(res.frame[..., 0, :])
  count = np.sum(jd < NO_CONTACT, axis=1)
  assert np.all(jd[:, convex.CONVEX_PAIRS[(t1, t2)] :] == NO_CONTACT)
  errs = np.array(
    [_match(jd[i, : ncon[i]], jp[i, : ncon[i]], jn[i, : ncon[i]], dist[i, : ncon[i]],
            pos[i, : ncon[i]], normal[i, : ncon[i]]) for i in range(len(ncon))]
  )  # fmt: skip
  # the frame is orthonormal (rows 1, 2 from mju_makeFrame)
  fr = np.asarray(res.frame)[jd < NO_CONTACT]
  np.testing.assert_allclose(
    fr @ np.swapaxes(fr, 1, 2), np.broadcast_to(np.eye(3), fr.shape), atol=1e-12
  )
  return ncon, (count == ncon) & (errs < 1e-5)


# pairs where a few poses differ from MuJoCo 4.0.0: the share of the 1024 poses that must match
# (count, and dist/pos/normal within 1e-5), set a little below the share measured on this machine
# (in brackets: without margin, with margin). Where they differ, the count and the depth agree (to
# 1e-8) and the normal is 1e-5..4e-5 off: EPA on a smooth surface (sphere, capsule, ellipsoid,
# cylinder side) stops within ccd_tolerance of the optimum, at a normal that follows the path of
# its expansion, so a rounding step apart the two stop at slightly different normals.
NEAR = {
  (2, 4): 0.97,  # (1012, 1008)
  (3, 4): 0.97,  # (1018, 1011)
  (3, 5): 0.98,  # (1023, 1017)
  (4, 5): 0.98,  # (1023, 1016); the one without margin touches within ccd_tolerance (below)
  # EPA ties among coplanar faces of a cylinder cap: MuJoCo takes the first in its face map's
  # order, which decides the rim point a cylinder edge contact runs through (normals 1e-4..4e-3
  # off at a dozen deep poses); and poses touching to within ccd_tolerance (|dist| < 1e-6),
  # where EPA's normal is fixed only to ~1e-3 and follows the last bit of rounding (with fused
  # multiply-adds more of them differ than with the instruction set capped at AVX, as MuJoCo is
  # built)
  (5, 5): 0.98,  # (1022, 1020)
  (5, 6): 0.95,  # (999, 1023)
  (5, 7): 0.95,  # (999, 1022)
}
NEAR_MARGIN = {
  **NEAR,
  (4, 4): 0.95,  # (1024, 1001)
  (4, 6): 0.98,  # (1024, 1020)
  (4, 7): 0.98,  # (1024, 1016)
  (5, 6): 0.98,
  (5, 7): 0.98,
}


def _assert_matches(ok, share):
  if share is None:
    assert ok.all(), f'poses {np.flatnonzero(~ok)[:10]} differ from MuJoCo'
  else:
    assert ok.mean() >= share, ok.mean()


@pytest.mark.parametrize('t1, t2', PAIRS)
def test_convex_vs_mujoco(collide, t1, t2):
  ncon, ok = _check(collide, t1, t2, 0.0, N_RANDOM, N_TOUCH, seed=t1 * 10 + t2)
  assert np.sum(ncon > 0) > 400 and np.sum(ncon == 0) > 100  # deep, shallow and separated poses
  if convex.CONVEX_PAIRS[(t1, t2)] > 1:
    assert np.sum(ncon > 1) >= 10  # multi-contact poses (edge on face, face on face)
  _assert_matches(ok, NEAR.get((t1, t2)))


@pytest.mark.parametrize('t1, t2', PAIRS)
def test_convex_margin_vs_mujoco(collide, t1, t2):
  ncon, ok = _check(collide, t1, t2, 0.05, N_RANDOM, N_TOUCH, seed=t1 * 10 + t2 + 1)
  assert np.sum(ncon > 0) > 500
  _assert_matches(ok, NEAR_MARGIN.get((t1, t2)))


def test_static_types_checked():
  """Static type pairs are checked (the driver's static-type colliders are compared with MuJoCo
  in test_pipeline_mesh_contacts_vs_mujoco)."""
  (g1, g2), _, _, _, _ = _case(5, 6, 0.0, 2, 0, 7)
  with pytest.raises(ValueError, match='does not handle'):
    convex.collide_convex(g1, g2, 0.0, type1=6, type2=6)


def test_gradients_finite():
  """Gradients w.r.t. geom poses are finite at touching, coincident and separated poses."""

  def loss(p1, m1, g2, t1, t2):
    g1 = g2._replace(pos=p1, mat=m1, size=g2.size)
    c = convex.collide_convex(g1, g2, 0.01, type1=t1, type2=t2)
    on = c.dist < NO_CONTACT
    return jnp.sum(jnp.where(on, c.dist, 0.0)) + jnp.sum(c.pos) + jnp.sum(c.frame)

  grad = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1))))
  size = jnp.array([0.3, 0.25, 0.2])
  vert = jnp.asarray(
    np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * size
  )
  eye = jnp.eye(3)
  g2 = GeomInfo(jnp.zeros(3), eye, size, vert)
  cases = []
  for t1, t2 in [(4, 4), (5, 6), (6, 7), (7, 7), (3, 5), (2, 7)]:
    for p in ([0.0, 0.0, 0.0], [0.0, 0.0, 0.4], [0.0, 0.0, 0.5], [0.6, 0.0, 0.0], [2.0, 0, 0]):
      cases.append((jnp.array(p), t1, t2))
  p1 = jnp.stack([c[0] for c in cases])
  n = len(cases)
  g2s = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), g2)
  t1 = jnp.array([c[1] for c in cases])
  t2 = jnp.array([c[2] for c in cases])
  dp, dm = grad(p1, jnp.broadcast_to(eye, (n, 3, 3)), g2s, t1, t2)
  assert np.all(np.isfinite(np.asarray(dp))) and np.all(np.isfinite(np.asarray(dm)))


# a plane, a box, a cube mesh and an octahedron mesh on free bodies: the box collides with the
# cube only (contype/conaffinity): box-mesh and mesh-mesh pairs of two meshes share one GJK/EPA
# program (the meshes' tables padded to the larger), and plane-mesh pairs of both one program
PIPE_XML = """<mujoco><asset>
  <mesh name="cube" file="cube.obj" scale="0.2 0.15 0.1"/>
  <mesh name="oct" file="oct.obj" scale="0.3 0.25 0.35"/></asset>
  <worldbody><geom type="plane" size="0 0 1"/>
    <body><freejoint/><geom type="mesh" mesh="cube" contype="3" conaffinity="3"/></body>
    <body><freejoint/><geom type="mesh" mesh="oct"/></body>
    <body><freejoint/><geom type="box" size="0.15 0.1 0.12" contype="2" conaffinity="2"/></body>
  </worldbody></mujoco>"""


def test_pipeline_mesh_contacts_vs_mujoco():
  """kinematics + collision (the driver, static types, mesh polygons from the compiler) against
  mj_collision at random poses: mesh-box and mesh-mesh contacts (up to 4 per pair) match in
  count, dist, pos and frame, and so do plane-mesh contacts (up to 4: the support vertex and
  its face's vertices)."""
  from jaxsim._src import kinematics
  from jaxsim._src.collision import driver

  mj = mujoco.MjModel.from_xml_string(PIPE_XML, ASSETS)
  m = jaxsim.load_string(PIPE_XML, ASSETS)
  assert sorted(g['types'] for g in m.layout.groups) == [(-1, -1), (0, 7)]
  rng = np.random.default_rng(11)
  n = 48
  qpos = np.tile(mj.qpos0, (n, 1))
  for b in range(3):
    qpos[:, 7 * b : 7 * b + 3] = rng.uniform(-0.12, 0.12, (n, 3)) + [[0.15 * b, 0.0, 0.1]]
    qpos[:, 7 * b + 3 : 7 * b + 7] = _quats(rng, n)

  @jax.jit
  @jax.vmap
  def contacts(q):
    d = kinematics.kinematics(m, jaxsim.make_data(m).replace(qpos=q))
    c = driver.collision(m, d).contact
    return c.active, c.geom, c.dist, c.pos, c.frame

  act, geom, dist, pos, frame = (np.asarray(x) for x in contacts(jnp.asarray(qpos)))
  md = mujoco.MjData(mj)
  counts = {}
  for i in range(n):
    md.qpos[:] = qpos[i]
    mujoco.mj_kinematics(mj, md)
    mujoco.mj_collision(mj, md)
    con = md.contact[: md.ncon]
    pairs = {tuple(g) for g in con.geom} | {tuple(g) for g in geom[i][act[i]]}
    for pair in pairs:
      mi = np.flatnonzero((con.geom == pair).all(axis=1))
      ji = np.flatnonzero(act[i] & (geom[i] == pair).all(axis=1))
      plane = mj.geom_type[pair[0]] == 0 and mj.geom_type[pair[1]] == 7
      counts.setdefault((plane, len(mi)), 0)
      counts[(plane, len(mi))] += 1
      assert len(mi) == len(ji), (i, pair, len(mi), len(ji))
      for j in mi:
        k = ji[np.argmin(np.abs(pos[i, ji] - con.pos[j]).max(axis=-1))]
        np.testing.assert_allclose(dist[i, k], con.dist[j], atol=1e-6, err_msg=f'{i} {pair}')
        np.testing.assert_allclose(pos[i, k], con.pos[j], atol=1e-6, err_msg=f'{i} {pair}')
        np.testing.assert_allclose(
          frame[i, k].ravel(), con.frame[j], atol=1e-6, err_msg=f'{i} {pair}'
        )
  # face-on-face poses with several contacts, for the mesh-box and mesh-mesh pairs
  assert sum(v for (plane, c), v in counts.items() if not plane and c >= 2) >= 5, counts
  assert sum(v for (plane, c), v in counts.items() if not plane and c >= 3) >= 1, counts
  assert sum(v for (plane, c), v in counts.items() if plane and c >= 1) >= 10, counts
  assert sum(v for (plane, c), v in counts.items() if plane and c >= 3) >= 3, counts


@pytest.mark.parametrize('mixed', [False, True], ids=['one-type', 'mixed-types'])
def test_pipeline_without_multiccd_vs_mujoco(mixed):
  """With multiccd disabled every GJK/EPA pair has one contact slot, in a group of one geom type
  pair (static types) as in a group of mixed ones: Data.contact's fields agree in size, and the
  contacts and qacc of mj_forward match MuJoCo's (face-on cylinders: four contacts with multiccd,
  one without)."""
  extra = '<body pos="0.33 0 0"><freejoint/><geom type="ellipsoid" size=".25 .1 .1"/></body>'
  xml = f"""<mujoco><option tolerance="1e-12"><flag multiccd="disable"/></option><worldbody>
    <body><freejoint/><geom type="cylinder" size=".1 .1"/></body>
    <body pos="0 0 .19"><freejoint/><geom type="cylinder" size=".1 .1"/></body>
    {extra if mixed else ''}</worldbody></mujoco>"""
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  mujoco.mj_forward(mj, md)
  m = jaxsim.load_string(xml)
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m))
  c = d.contact
  assert c.dist.shape[0] == c.geom.shape[0] == c.dim.shape[0] == c.pos.shape[0]
  act = np.asarray(c.active)
  assert int(d.ncon) == md.ncon == (2 if mixed else 1)
  theirs = {tuple(g): k for k, g in enumerate(md.contact.geom)}
  for k in np.flatnonzero(act):
    j = theirs[tuple(np.asarray(c.geom[k]))]
    np.testing.assert_allclose(c.dist[k], md.contact.dist[j], atol=1e-6)
    np.testing.assert_allclose(c.pos[k], md.contact.pos[j], atol=1e-6)
  # contacts agree to GJK/EPA's tolerance (1e-6), which bounds the accelerations' agreement
  np.testing.assert_allclose(d.qacc, md.qacc, rtol=1e-5, atol=1e-4)


def test_mesh_polygon_map_with_interior_last_vertex():
  """A vertex off the hull has no polygons; last in the mesh, its polymapadr is one past the end
  of mesh_polymap (dm_control's kinova hand raised IndexError). Rows equal MuJoCo's."""
  xml = """<mujoco><asset><mesh name="m" vertex="0 0 0  1 0 0  0 1 0  0 0 1  .1 .1 .1"/></asset>
    <worldbody><geom type="mesh" mesh="m"/></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  assert mj.mesh_polymapnum[-1] == 0 and mj.mesh_polymapadr[-1] == len(mj.mesh_polymap)
  poly = driver.mesh_poly(m, 0)
  pmap, num = np.asarray(poly.map), np.asarray(poly.nmap)
  np.testing.assert_array_equal(num, mj.mesh_polymapnum)
  for v in range(mj.mesh_vertnum[0]):
    a, n = mj.mesh_polymapadr[v], mj.mesh_polymapnum[v]
    np.testing.assert_array_equal(pmap[v, :n], mj.mesh_polymap[a : a + n])
    assert np.all(pmap[v, n:] == -1)


def test_cylinder_standing_on_a_box_picks_mujocos_quadrilateral():
  """A cylinder resting on a box, tilted by 6e-5 rad (humanoid-bench's bookshelf): its 16-gon
  cap clips to 16 points whose inscribed squares tie within rounding, so polygonQuad's choice
  turns on the last bit of each area. jaxsim._src.xla caps XLA CPU at AVX (no FMA), as MuJoCo is
  built; with fused multiply-adds two of the four contacts land elsewhere (3.8 cm off)."""
  xml = """<mujoco><worldbody>
    <body pos="0.949999175846827 0.01996408265524824 1.2648909229012109"
          quat="0.9999999979471565 5.8390721383058915e-05 -2.6309250022708607e-05
                2.008499605891442e-06">
      <freejoint/><geom type="cylinder" size="0.1 0.015"/></body>
    <body pos="0.95 0 1.225"><geom type="box" size="0.3 0.4 0.025"/></body>
  </worldbody></mujoco>"""
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  mujoco.mj_forward(mj, md)
  m = jaxsim.load_string(xml)
  d = jax.jit(jaxsim._src.kinematics.kinematics)(m, jaxsim.make_data(m))
  d = jax.jit(driver.collision)(m, d)
  on = np.flatnonzero(np.asarray(d.contact.active))
  assert md.ncon == len(on) == 4
  np.testing.assert_allclose(np.asarray(d.contact.pos)[on], md.contact.pos, rtol=0, atol=1e-12)
  np.testing.assert_allclose(np.asarray(d.contact.dist)[on], md.contact.dist, rtol=0, atol=1e-15)

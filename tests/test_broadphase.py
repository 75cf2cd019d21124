"""The broadphase inside jit (collision/broadphase.py): limits that change nothing until they
overflow, and overflows that are counted.

A pile of ellipsoids, cylinders and capsules has enough GJK/EPA pairs (in one group of mixed
types) that the default pair and EPA limits are active; at random poses its contacts equal
MuJoCo's, which collides every pair. Limits set too low keep the nearest pairs (the first
prisms, the first EPA pairs) and count the overflow in mjWARN_CONTACTFULL.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import kinematics
from jaxsim._src.collision import broadphase, convex, driver, hfield
from jaxsim._src.collision.geom import NO_CONTACT, GeomInfo
from jaxsim._src.enums import GeomType

CONTACTFULL = int(mujoco.mjtWarning.mjWARN_CONTACTFULL)
SHAPES = (
  'type="ellipsoid" size=".06 .05 .04"',
  'type="cylinder" size=".05 .04"',
  'type="capsule" size=".03 .05"',
)
NBODY = 24
PILE = (
  '<mujoco><worldbody><geom type="plane" size="2 2 .1"/>'
  + ''.join(
    f'<body pos="{i % 6 * 0.3} {i // 6 * 0.3} .3"><freejoint/><geom {SHAPES[i % 3]}/></body>'
    for i in range(NBODY)
  )
  + '</worldbody></mujoco>'
)


def _poses(
  rng: np.random.Generator, n: int, nbody: int = NBODY, side: float = 0.45, high: float = 0.15
) -> np.ndarray:
  """n random poses of nbody free bodies in a square of `side` m, 0 to `high` m up (the pile's
  24 bodies in 0.45 m, 0.15 m high by default): many overlap."""
  q = np.zeros((n, 7 * nbody))
  for b in range(nbody):
    quat = rng.normal(size=(n, 4))
    q[:, 7 * b : 7 * b + 2] = rng.uniform(0, side, size=(n, 2))
    q[:, 7 * b + 2] = rng.uniform(0.0, high, size=n)
    q[:, 7 * b + 3 : 7 * b + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
  return q


@pytest.fixture(scope='module')
def pile():
  m = jaxsim.load_string(PILE)

  def contacts(m, qpos):
    d = jaxsim.make_data(m).replace(qpos=qpos)
    d = driver.collision(m, kinematics.kinematics(m, d))
    return d.contact, d.warning[CONTACTFULL]

  return m, contacts


def _listed(con, i: int) -> list[tuple]:
  """State i's active contacts as sorted (geom1, geom2, dist, pos, normal)."""
  a = np.asarray(con.active[i])
  rows = zip(
    np.asarray(con.geom1[i])[a],
    np.asarray(con.geom2[i])[a],
    np.asarray(con.dist[i])[a],
    np.asarray(con.pos[i])[a],
    np.asarray(con.frame[i, :, 0])[a],
    strict=True,
  )
  return sorted((int(g1), int(g2), float(d), tuple(p), tuple(n)) for g1, g2, d, p, n in rows)


def _assert_same(mine: list[tuple], ref: list[tuple], atol: float, what: str):
  assert [(a, b) for a, b, *_ in mine] == [(a, b) for a, b, *_ in ref], what
  for x, y in zip(mine, ref, strict=True):
    for k in (2, 3, 4):
      np.testing.assert_allclose(x[k], y[k], rtol=0, atol=atol, err_msg=what)


def test_limits_active_and_exact(pile):
  """Default limits on the pile's GJK/EPA group change no contact: the same pairs in contact, and
  the same contacts, as MuJoCo's (which collides every pair)."""
  m, contacts = pile
  grp = [g for g in m.layout.groups if g['convex']]
  assert len(grp) == 1 and grp[0]['types'] == (-1, -1)  # one group of mixed types
  g1, g2 = grp[0]['geom1'], grp[0]['geom2']
  k = broadphase.limit(g1, g2, True, None)
  assert k < len(g1) and broadphase.epa_limit(g1, g2, k, None) < k
  qpos = jnp.asarray(_poses(np.random.default_rng(3), 12))
  ours, full = jax.jit(jax.vmap(contacts, in_axes=(None, 0)))(m, qpos)
  assert not np.any(full)
  assert np.asarray(ours.active).sum() > 12 * 10  # a real pile: many contacts per state

  mj = mujoco.MjModel.from_xml_string(PILE)
  md = mujoco.MjData(mj)
  for i, q in enumerate(np.asarray(qpos)):
    mine = _listed(ours, i)
    md.qpos[:] = q
    mujoco.mj_forward(mj, md)
    ref = sorted(
      (int(c.geom[0]), int(c.geom[1]), float(c.dist), tuple(c.pos), tuple(c.frame[:3]))
      for c in md.contact[: md.ncon]
    )
    # 2e-4: the pile's random overlaps are deep (up to half a geom), where capsule cores overlap
    # and EPA and the capsule-cylinder multi-contact stop within ccd_tolerance of a face that
    # round-off can tip (test_collision_convex holds 1e-5 on its shallower poses); the pairs in
    # contact are compared exactly
    _assert_same(mine, ref, 2e-4, f'state {i}: vs MuJoCo')


# three meshes of 6, 8 and 13 vertices (octahedron, box, hexagonal prism) on 18 free bodies over
# a plane: 153 mesh-mesh pairs, more than broadphase.MIN_PAIRS, in one GJK/EPA group of padded
# mesh tables, and 18 plane-mesh pairs in one group (exhaustive search and hill climbing)
NMESH = 18
_HEX = '0.01 0 0 ' + ' '.join(  # an interior vertex first: hull ids are not vertex ids
  f'{0.05 * np.cos(a):.6f} {0.05 * np.sin(a):.6f} {z}'
  for z in (-0.04, 0.04)
  for a in np.arange(6) * np.pi / 3
)
MESH_PILE = (
  '<mujoco><asset>'
  '<mesh name="oct" vertex=".06 0 0 -.06 0 0 0 .05 0 0 -.05 0 0 0 .04 0 0 -.04"/>'
  '<mesh name="box" vertex="-.05 -.04 -.03 .05 -.04 -.03 -.05 .04 -.03 .05 .04 -.03 '
  '-.05 -.04 .03 .05 -.04 .03 -.05 .04 .03 .05 .04 .03"/>'
  f'<mesh name="hex" vertex="{_HEX}"/></asset><worldbody><geom type="plane" size="2 2 .1"/>'
  + ''.join(
    f'<body pos="{i % 5 * 0.3} {i // 5 * 0.3} .3"><freejoint/>'
    f'<geom type="mesh" mesh="{("oct", "box", "hex")[i % 3]}"/></body>'
    for i in range(NMESH)
  )
  + '</worldbody></mujoco>'
)


def test_mesh_pile_limited_group_vs_mujoco():
  """A pile of three meshes on a plane: its mesh-mesh pairs form one group (padded tables) with
  the default pair limit active; at random overlapping poses its contacts (up to 4 per pair) are
  MuJoCo's. Its plane-mesh pairs, one group too, give each mesh's own collide_plane_mesh
  contacts, which are MuJoCo's (support vertex and its face's vertices, in order)."""
  from jaxsim._src.collision import primitive

  m = jaxsim.load_string(MESH_PILE)
  grps = m.layout.groups
  plane = [g for g in grps if g['types'] == (0, 7)]
  assert len(plane) == 1 and plane[0]['mesh'] == (-2, -2) and len(plane[0]['geom1']) == NMESH
  grp = [g for g in grps if g['convex']]
  assert len(grp) == 1 and grp[0]['mesh'] == (-2, -2)
  assert len(set(grp[0]['mesh1']) | set(grp[0]['mesh2'])) == 3
  k = broadphase.limit(grp[0]['geom1'], grp[0]['geom2'], True, None)
  assert k < len(grp[0]['geom1'])
  n = 8
  q = _poses(np.random.default_rng(5), n, NMESH, 0.4, 0.1)

  mesh_of = np.asarray(m.geom_dataid)

  @jax.jit
  @jax.vmap
  def contacts(qpos):
    d = jaxsim.make_data(m).replace(qpos=qpos)
    d = driver.collision(m, kinematics.kinematics(m, d))
    # each plane-mesh pair on its own, with its mesh's own (unpadded) arrays
    alone = [
      primitive.collide_plane_mesh(
        *(
          jax.tree_util.tree_map(lambda x: x[0], driver.geom_info(m, d, np.array([g]), mesh))
          for g, mesh in ((0, -1), (g2, int(mesh_of[g2])))
        ),
        jnp.asarray(0.0),
      )
      for g2 in plane[0]['geom2']
    ]
    return d.contact, d.warning[CONTACTFULL], alone

  ours, full, alone = contacts(jnp.asarray(q))
  assert not np.any(np.asarray(full))
  mj = mujoco.MjModel.from_xml_string(MESH_PILE)
  md = mujoco.MjData(mj)
  total = planar = 0
  for i in range(n):
    md.qpos[:] = q[i]
    mujoco.mj_forward(mj, md)
    ref = [
      (int(c.geom[0]), int(c.geom[1]), float(c.dist), tuple(c.pos), tuple(c.frame[:3]))
      for c in md.contact[: md.ncon]
    ]
    act, geom = np.asarray(ours.active[i]), np.asarray(ours.geom[i])
    for j, g2 in enumerate(plane[0]['geom2']):
      slots = np.flatnonzero(act & (geom[:, 0] == 0) & (geom[:, 1] == g2))
      own = np.asarray(alone[j].dist[i])
      own = own[own < NO_CONTACT / 2]
      np.testing.assert_array_equal(np.asarray(ours.dist[i])[slots], own)
      theirs = [r for r in ref if r[:2] == (0, g2)]
      assert len(slots) == len(theirs), (i, g2)
      planar += len(theirs) > 1
      for s, r in zip(slots, theirs, strict=True):  # in MuJoCo's order
        np.testing.assert_allclose(float(ours.dist[i, s]), r[2], atol=1e-12)
        np.testing.assert_allclose(np.asarray(ours.pos[i, s]), r[3], atol=1e-12)
    mine = [r for r in _listed(ours, i) if r[0] != 0]
    ref = sorted(r for r in ref if r[0] != 0)
    total += len(ref)
    # polytopes: EPA ends on a face exactly (discrete), contacts agree to round-off
    _assert_same(mine, ref, 1e-9, f'state {i}: vs MuJoCo')
  assert total > n * 20  # a real pile: many multi-contact pairs per state
  assert planar > n * 4


def test_mesh_pairs_of_all_sizes_share_one_program():
  """GJK/EPA pairs with meshes of very different sizes (8 and 300 vertices, mesh-mesh and
  box-mesh) form one collider group, padded tables and all, and so do their plane-mesh pairs:
  each group is one GJK/EPA (or plane-mesh) program to compile."""
  big = np.random.default_rng(3).normal(size=(300, 3)) * [0.1, 0.07, 0.05]
  box = np.array(list(np.ndindex(2, 2, 2))) * 0.1
  xml = f"""<mujoco><asset>
    <mesh name="box" vertex="{' '.join(f'{x:.3f}' for x in box.ravel())}"/>
    <mesh name="big" vertex="{' '.join(f'{x:.6f}' for x in big.ravel())}"/></asset>
    <worldbody><geom type="plane" size="1 1 .1"/>
      <body><freejoint/><geom type="mesh" mesh="box"/></body>
      <body><freejoint/><geom type="mesh" mesh="big"/></body>
      <body><freejoint/><geom type="box" size=".05 .05 .05"/></body></worldbody></mujoco>"""
  m = jaxsim.load_string(xml)
  assert len({int(m.mesh_vertnum[0]), int(m.mesh_vertnum[1])}) == 2
  grps = m.layout.groups
  conv = [g for g in grps if g['convex']]
  plane = [g for g in grps if g['types'] == (GeomType.PLANE, GeomType.MESH)]
  assert len(conv) == 1 and conv[0]['mesh'] == (-2, -2) and len(conv[0]['geom1']) == 3
  assert set(conv[0]['mesh1']) | set(conv[0]['mesh2']) == {-1, 0, 1}
  assert len(plane) == 1 and len(plane[0]['geom1']) == 2


def test_pair_limit_overflow_keeps_nearest():
  """max_geom_pairs (MJX's custom numeric) of 1: of two touching pairs the nearer (by bounding
  spheres) collides, the overflow is counted; -1 collides both."""
  xml = """<mujoco><custom><numeric name="max_geom_pairs" data="1"/></custom><worldbody>
    <body><freejoint/><geom type="ellipsoid" size=".1 .1 .1"/></body>
    <body pos=".15 0 0"><freejoint/><geom type="cylinder" size=".1 .1"/></body>
    <body pos="1 0 0"><freejoint/><geom type="ellipsoid" size=".1 .1 .1"/></body>
    <body pos="1.19 0 0"><freejoint/><geom type="cylinder" size=".1 .1"/></body>
  </worldbody><option gravity="0 0 0"/></mujoco>"""
  m = jaxsim.load_string(xml)
  assert m.collision_pairs['max_geom_pairs'] == 1
  # the collision stage alone sets ncon and the overflow counter (a whole forward: 2x the compile)
  collide = jax.jit(lambda m: driver.collision(m, kinematics.kinematics(m, jaxsim.make_data(m))))
  d = collide(m)
  assert int(d.ncon) == 1 and int(d.warning[CONTACTFULL]) == 1
  a = np.asarray(d.contact.active)
  assert (int(d.contact.geom1[a][0]), int(d.contact.geom2[a][0])) == (0, 1)
  d = collide(jaxsim.with_max_geom_pairs(m, -1))
  assert int(d.ncon) == 2 and int(d.warning[CONTACTFULL]) == 0


def _sphere(pos, r):
  return GeomInfo(
    pos=jnp.asarray(pos, float), mat=jnp.eye(3), size=jnp.array([r, 0.0, 0.0]), rbound=r
  )


def test_epa_limit_overflow():
  """collide_convex_group with room for one EPA: of two overlapping ellipsoid pairs the first
  gets its contact, the second none, and the overflow is reported."""
  e = GeomType.ELLIPSOID

  def batch(*infos):
    return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *infos)

  g1 = batch(_sphere([0, 0, 0], 0.1), _sphere([1, 0, 0], 0.1))
  g2 = batch(_sphere([0.15, 0, 0], 0.1), _sphere([1.18, 0, 0], 0.1))
  g1 = g1._replace(size=jnp.full((2, 3), 0.1))
  g2 = g2._replace(size=jnp.full((2, 3), 0.1))
  args = (g1, g2, jnp.zeros(2))
  full, over = convex.collide_convex_group(*args, type1=int(e), type2=int(e), nepa=2)
  assert not bool(over)
  both = np.asarray(full.dist[:, 0])
  np.testing.assert_allclose(both, [-0.05, -0.02], atol=1e-4)  # EPA on round shapes: ~1e-4
  c, over = convex.collide_convex_group(*args, type1=int(e), type2=int(e), nepa=1)
  assert bool(over)
  np.testing.assert_allclose(np.asarray(c.dist[0, 0]), both[0], rtol=1e-12)
  assert np.asarray(c.dist[1, 0]) == NO_CONTACT


def test_hfield_item_limit_overflow():
  """collide_hfield_group with fewer CCD items than tested prisms: the first prisms (pair order)
  keep their contacts, the rest none, and the overflow is reported; with room for all, every
  pair's contacts equal collide_hfield's."""
  nrow = ncol = 5
  hf = hfield.HField(jnp.zeros((nrow, ncol)), jnp.array([1.0, 1.0, 0.5, 0.1]))
  win = hfield.window(nrow, ncol, np.asarray(hf.size), 0.2)
  h = GeomInfo(
    pos=jnp.zeros((2, 3)), mat=jnp.broadcast_to(jnp.eye(3), (2, 3, 3)), size=jnp.zeros((2, 3))
  )
  g = jax.tree_util.tree_map(
    lambda *x: jnp.stack(x), _sphere([-0.3, -0.3, 0.15], 0.2), _sphere([0.4, 0.3, 0.1], 0.2)
  )
  margin = jnp.zeros(2)
  s = int(GeomType.SPHERE)
  pick = lambda i: jax.tree_util.tree_map(lambda x: x[i], (h, g, margin))  # noqa: E731
  # compiled (op by op, the colliders' loops made this test take a minute)
  alone = jax.jit(lambda *a: hfield.collide_hfield(*a, hf, s, win=win))
  one = [alone(*pick(i)) for i in range(2)]
  assert all(np.sum(np.asarray(c.dist) < NO_CONTACT / 2) > 1 for c in one)
  nprism = 2 * win[0] * win[1]

  def group(nitems):
    return jax.jit(lambda *a: hfield.collide_hfield_group(*a, hf, s, win=win, nitems=nitems))(
      h, g, margin
    )

  c, over = group(2 * nprism)
  assert not bool(over)
  for i in range(2):
    np.testing.assert_array_equal(c.dist[i], one[i].dist)
    np.testing.assert_array_equal(c.pos[i], one[i].pos)
  # room for exactly the first pair's tested prisms
  first = int(np.sum(hfield.window_prisms(*pick(0), hf, s, win)[1]))
  c, over = group(first)
  assert bool(over)
  np.testing.assert_array_equal(c.dist[0], one[0].dist)
  assert np.all(np.asarray(c.dist[1]) == NO_CONTACT)


def test_map_live_computes_live_items_only():
  """map_live equals vmap(f) masked to the live items (fill elsewhere) under vmap with a
  different live set per world, spanning several chunks; f runs on the live items only; its
  derivatives (through its shared values, consts, too) are those of the masked vmap."""
  xs = jnp.linspace(-2.0, 3.0, 23)
  lives = jnp.stack([xs > 0.5, jnp.arange(23) % 4 == 1, jnp.zeros(23, bool)])
  calls = []

  def f(x, s):
    jax.debug.callback(lambda v: calls.append(v.shape), x)
    return {'y': jnp.sin(x) * s, 'on': x > 0}

  def run(s, live):
    return broadphase.map_live(f, live, xs, {'y': -1.0, 'on': True}, chunk=4, consts=(s,))

  def ref(s, live):
    return {'y': jnp.where(live, jnp.sin(xs) * s, -1.0), 'on': jnp.where(live, xs > 0, True)}

  out = jax.jit(jax.vmap(run, in_axes=(None, 0)))(1.5, lives)
  jax.block_until_ready(out)
  want = jax.vmap(ref, in_axes=(None, 0))(1.5, lives)
  np.testing.assert_array_equal(out['on'], want['on'])
  np.testing.assert_allclose(out['y'], want['y'], rtol=1e-12)
  # 11 live items in the busiest world: three chunks of four, not six (the callback runs once
  # per item of a chunk, for each of the three worlds)
  assert len(calls) == 3 * 4 * 3
  loss = lambda f: lambda s: jnp.sum(jax.vmap(f, in_axes=(None, 0))(s, lives)['y'] ** 2)  # noqa: E731
  np.testing.assert_allclose(jax.grad(loss(run))(1.5), jax.grad(loss(ref))(1.5), rtol=1e-12)
  np.testing.assert_allclose(jax.jacfwd(loss(run))(1.5), jax.grad(loss(ref))(1.5), rtol=1e-12)
  # a differentiated value closed over instead of passed in consts raises, never a silent zero
  closed = lambda s, live: broadphase.map_live(lambda x: f(x, s), live, xs, chunk=4)  # noqa: E731
  for d in (jax.grad, jax.jacfwd):
    with pytest.raises(jax.errors.UnexpectedTracerError):
      d(loss(closed))(1.5)


def test_oriented_box_test_keeps_touching_pairs_under_the_limit():
  """Ten planks crossing at the origin and ten small mesh cubes along them, each touching its
  plank: all 100 mesh-box pairs are within their bounding spheres (the planks' are 0.5 m), more
  than the group's default limit of 80, and ranked by those spheres the far cubes' pairs would
  be dropped. The oriented-box test (geom_aabb) passes only the pairs that can touch, so every
  contact is MuJoCo's and nothing overflows (as BiGym's cabinets: drawers inside their carcass)."""
  n = 10
  planks = ''.join(f'<geom type="box" size=".5 .01 .01" euler="0 0 {18 * k}"/>' for k in range(n))
  cubes = ''.join(
    f'<geom type="mesh" mesh="c" pos="{(0.12 + 0.035 * k) * np.cos(np.radians(18 * k)):.17g} '
    f'{(0.12 + 0.035 * k) * np.sin(np.radians(18 * k)):.17g} .02" euler="0 0 {18 * k}"/>'
    for k in range(n)
  )
  xml = f"""<mujoco><option gravity="0 0 0"/><asset><mesh name="c" vertex="-1 -1 -1 1 -1 -1
    1 1 -1 -1 1 -1 -1 -1 1 1 -1 1 1 1 1 -1 1 1" scale=".015 .015 .015"/></asset>
    <worldbody>{planks}<body><joint type="slide" axis="0 0 1"/>{cubes}</body></worldbody>
    </mujoco>"""
  m = jaxsim.load_string(xml)
  (grp,) = [g for g in m.layout.groups if g['convex']]
  assert broadphase.limit(grp['geom1'], grp['geom2'], True, None) == 80 < len(grp['geom1'])
  mj = mujoco.MjModel.from_xml_string(xml)
  md = mujoco.MjData(mj)
  forward = jax.jit(jaxsim.forward)
  for z in (0.0, -0.003, 0.004):
    md.qpos[:] = z
    mujoco.mj_forward(mj, md)
    d = forward(m, jaxsim.make_data(m).replace(qpos=jnp.full(1, z)))
    a = np.asarray(d.contact.active)
    assert md.ncon >= n and int(d.warning[CONTACTFULL]) == 0
    np.testing.assert_array_equal(np.asarray(d.contact.geom)[a], md.contact.geom[: md.ncon])
    np.testing.assert_allclose(np.asarray(d.contact.pos)[a], md.contact.pos[: md.ncon], atol=1e-9)


def test_partition_is_a_stable_argsort():
  """broadphase.partition (counting, no sort) orders items as a stable argsort of ~mask does."""
  rng = np.random.default_rng(0)
  for n in (1, 2, 7, 64):
    for p in (0.0, 0.3, 1.0):
      mask = rng.random(n) < p
      np.testing.assert_array_equal(
        np.asarray(broadphase.partition(jnp.asarray(mask))), np.argsort(~mask, kind='stable')
      )

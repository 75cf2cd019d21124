"""Builtin meshes (`<mesh builtin=... params=...>`, jaxsim/mjcf/mesh_builtin.py) against mujoco.

One model holds every case, each mesh on its own free body above a plane: the compiled mesh
arrays, the bodies' mass and inertia and the geoms' sizes must equal MuJoCo's index by index, and
the mesh-plane contacts of mj_forward (meshes pressed into the plane) must agree. Bad parameters
raise ModelError at the mesh's params attribute where MuJoCo refuses them.
"""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim.mjcf.frames import quat_to_mat

# (builtin, params, extra mesh attributes); the MuJoCo gallery's meshes first
CASES = [
  ('supertorus', '64 .2 .4 1', 'scale="1.7 1.7 .9"'),  # surfacevel/carousel.xml
  ('supersphere', '32 .3 .4', 'scale=".2 .13 .085"'),  # surfacevel/carousel.xml
  ('wedge', '37 37 45 45 0', 'scale=".3 .3 .3"'),  # tactile/tactile.xml
  ('plate', '37 37', 'scale=".3 .5 .2"'),  # tactile/tactile.xml
  ('sphere', '0', ''),
  ('sphere', '2', 'scale=".3 .2 .1"'),
  ('sphere', '4', 'scale=".2 .2 .2"'),
  ('hemisphere', '0', ''),
  ('hemisphere', '3', 'scale=".5 -.5 .5"'),  # mirrored: faces and hull reversed
  ('hemisphere', '10', 'scale=".3 .3 .2"'),
  ('cone', '3 0', ''),
  ('cone', '7.9 .25', 'scale=".2 .2 .4"'),  # a fractional count is truncated, as in C
  ('cone', '16 1', ''),
  ('supersphere', '32 .55 .5', 'scale=".17 .12 .075"'),
  ('supersphere', '8 1 1', ''),
  ('supersphere', '6 0 1', ''),  # e = 0: repeated vertices on each ring
  ('supersphere', '5 2 3', 'scale=".4 .3 .2"'),
  ('supertorus', '8 .5 1 1', ''),
  ('supertorus', '12 1 3 .5', 'scale=".5 .5 .5"'),
  ('wedge', '5 7 90 30 .5', ''),
  ('wedge', '6 4 180 90 1', ''),
  ('wedge', '3 3 45 45 0', 'face="0 1 2 0 2 3 0 3 1 1 3 2"'),  # keeps its own faces
  ('plate', '3 4', 'inertia="exact"'),  # a plate's inertia is always shell
]
PLATES = [i for i, c in enumerate(CASES) if c[0] == 'plate']
DEPTH = 0.01  # how far each mesh is pressed into the plane


def _xml() -> str:
  assets = ''.join(
    f'<mesh name="m{i}" builtin="{t}" params="{p}" {a}/>' for i, (t, p, a) in enumerate(CASES)
  )
  bodies = []
  for i in range(len(CASES)):
    x, y = 3.0 * (i % 6), 3.0 * (i // 6)
    if i in PLATES:
      # flat: no convex hull, so not colliding; carried by a box as in tactile.xml
      geoms = (
        '<geom type="box" size=".3 .5 .2" contype="2"/>'
        f'<geom type="mesh" mesh="m{i}" mass="0" contype="0" conaffinity="0"/>'
      )
    else:
      # meshes collide with the plane only (contype 2, conaffinity 1)
      geoms = f'<geom type="mesh" mesh="m{i}" contype="2"/>'
    bodies.append(f'<body pos="{x} {y} 2"><freejoint/>{geoms}</body>')
  return f"""<mujoco><option><flag gravity="disable"/></option>
  <asset>{assets}</asset>
  <worldbody><geom type="plane" size="0 0 1"/>{''.join(bodies)}</worldbody></mujoco>"""


@pytest.fixture(scope='module')
def pair():
  xml = _xml()
  return jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)


def _close(name, ours, theirs, rtol=1e-7):
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape, (name, ours.shape, theirs.shape)
  np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-12, err_msg=name)


def test_mesh_arrays(pair):
  """Vertices and faces in MuJoCo's order, after scaling, centring and principal axes."""
  m, mj = pair
  assert mj.nmesh == len(CASES)
  assert np.asarray(m.mesh_vert).shape == (mj.nmeshvert, 3)
  for k in ('mesh_vertadr', 'mesh_vertnum', 'mesh_faceadr', 'mesh_facenum', 'mesh_face'):
    np.testing.assert_array_equal(np.asarray(getattr(m, k)), getattr(mj, k), err_msg=k)
  for i, case in enumerate(CASES):
    a, n = mj.mesh_vertadr[i], mj.mesh_vertnum[i]
    _close(f'mesh_vert of {case}', np.asarray(m.mesh_vert)[a : a + n], mj.mesh_vert[a : a + n])
  _close('mesh_pos', m.mesh_pos, mj.mesh_pos)
  _close('mesh_quat', m.mesh_quat, mj.mesh_quat)


def test_mesh_polygons(pair):
  """The hulls' polygons, which the collision functions read."""
  m, mj = pair
  for k in (
    'mesh_polynum',
    'mesh_polyadr',
    'mesh_polyvertadr',
    'mesh_polyvertnum',
    'mesh_polyvert',
    'mesh_polymapadr',
    'mesh_polymapnum',
    'mesh_polymap',
  ):
    np.testing.assert_array_equal(np.asarray(getattr(m, k)), getattr(mj, k), err_msg=k)
  _close('mesh_polynormal', m.mesh_polynormal, mj.mesh_polynormal)


def test_body_mass_and_inertia(pair):
  """Mass, CoM and the inertia tensor (principal-axis order may differ)."""
  m, mj = pair
  _close('body_mass', m.body_mass, mj.body_mass)
  _close('body_ipos', m.body_ipos, mj.body_ipos)
  for i in range(mj.nbody):
    r1, r2 = quat_to_mat(np.asarray(m.body_iquat[i])), quat_to_mat(mj.body_iquat[i])
    t1 = r1 @ np.diag(np.asarray(m.body_inertia[i])) @ r1.T
    t2 = r2 @ np.diag(mj.body_inertia[i]) @ r2.T
    np.testing.assert_allclose(t1, t2, rtol=1e-7, atol=1e-12 * np.abs(t2).max(), err_msg=str(i))


def test_geoms(pair):
  m, mj = pair
  for k in ('geom_size', 'geom_rbound', 'geom_pos', 'geom_quat'):
    _close(k, getattr(m, k), getattr(mj, k))
  if hasattr(m, 'geom_aabb'):
    _close('geom_aabb', m.geom_aabb, mj.geom_aabb)


def _pressed_state(mj: mujoco.MjModel) -> np.ndarray:
  """qpos with random orientations and each body lowered until its lowest colliding point is
  DEPTH below the plane."""
  rng = np.random.default_rng(5)
  md = mujoco.MjData(mj)
  qpos = mj.qpos0.copy()
  for b in range(1, mj.nbody):
    q = rng.normal(size=4)
    qpos[7 * (b - 1) + 3 : 7 * b] = q / np.linalg.norm(q)
  md.qpos[:] = qpos
  mujoco.mj_kinematics(mj, md)
  for b in range(1, mj.nbody):
    low = np.inf
    for g in np.flatnonzero((mj.geom_bodyid == b) & (mj.geom_contype > 0)):
      if mj.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
        a, n = mj.mesh_vertadr[mj.geom_dataid[g]], mj.mesh_vertnum[mj.geom_dataid[g]]
        pts = mj.mesh_vert[a : a + n]
      else:  # the plates' box
        pts = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
        pts = pts * mj.geom_size[g]
      world = md.geom_xpos[g] + pts @ md.geom_xmat[g].reshape(3, 3).T
      low = min(low, world[:, 2].min())
    qpos[7 * (b - 1) + 2] -= low + DEPTH
  return qpos


def test_contacts_with_plane(pair):
  """mj_forward with every mesh pressed into the plane: the same contacts, at the same depths."""
  m, mj = pair
  qpos = _pressed_state(mj)
  md = mujoco.MjData(mj)
  md.qpos[:] = qpos
  mujoco.mj_forward(mj, md)
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m).replace(qpos=qpos))
  c = d.contact
  act = np.asarray(c.active)
  assert int(d.ncon) == md.ncon == int(act.sum())
  geoms, dists, pos = np.asarray(c.geom)[act], np.asarray(c.dist)[act], np.asarray(c.pos)[act]
  theirs = md.contact[: md.ncon]
  # every colliding geom touches the plane, the meshes at the depth they were pressed to
  assert {int(g) for g in theirs.geom[:, 1]} == {
    int(g) for g in np.flatnonzero(mj.geom_contype == 2)
  }
  for g in sorted({int(g) for g in theirs.geom[:, 1]}):
    ours = np.flatnonzero(geoms[:, 1] == g)
    ref = np.flatnonzero(theirs.geom[:, 1] == g)
    assert len(ours) == len(ref), (g, len(ours), len(ref))
    for j in ref:
      k = ours[np.argmin(np.abs(pos[ours] - theirs.pos[j]).max(axis=1))]
      np.testing.assert_allclose(pos[k], theirs.pos[j], atol=1e-9, err_msg=f'geom {g}')
      np.testing.assert_allclose(dists[k], theirs.dist[j], atol=1e-9, err_msg=f'geom {g}')
    assert np.isclose(theirs.dist[ref].min(), -DEPTH, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# parameters MuJoCo refuses

BAD = [
  ('sphere', '1 2', 'Sphere mesh type requires 1 parameter'),
  ('sphere', '-1', 'Sphere subdivision cannot be negative'),
  ('sphere', '5', 'Sphere subdivision cannot be greater than 4'),
  ('sphere', '1e10', 'Sphere subdivision cannot be negative'),  # int overflow, as in C
  ('hemisphere', '1 2', 'Hemisphere mesh type requires 1 parameter'),
  ('hemisphere', '-2', 'Hemisphere resolution cannot be negative'),
  ('hemisphere', '11', 'Hemisphere resolution cannot be greater than 10'),
  ('cone', '3', 'Cone mesh type requires 2 parameters'),
  ('cone', '2 .5', 'Cone nvert must be at least 3'),
  ('cone', '5 1.5', r'Cone radius must be in \[0, 1\]'),
  ('cone', '5 -1', r'Cone radius must be in \[0, 1\]'),
  ('supersphere', '8 1', 'Supersphere mesh type requires 3 parameters'),
  ('supersphere', '2.9 1 1', 'Supersphere resolution must be greater than 2'),
  ('supersphere', '8 -1 1', "Supersphere 'e' cannot be negative"),
  ('supersphere', '8 1 -1', "Supersphere 'n' cannot be negative"),
  ('supertorus', '8 .5 1', 'Supertorus mesh type requires 4 parameters'),
  ('supertorus', '2 .5 1 1', 'Supertorus resolution must be greater than 3'),
  ('supertorus', '8 0 1 1', r'Supertorus radius must be in \(0, 1\]'),
  ('supertorus', '8 1.5 1 1', r'Supertorus radius must be in \(0, 1\]'),
  ('supertorus', '8 .5 0 1', "Supertorus 's' must be greater than 0"),
  ('supertorus', '8 .5 1 -1', "Supertorus 't' must be greater than 0"),
  ('wedge', '3 3 45 45', 'Wedge builtin mesh types require 5 parameters'),
  ('wedge', '3 3 0 45 0', r'fov\[0\] must be a float between \(0, 180\] degrees'),
  ('wedge', '3 3 181 45 0', r'fov\[0\] must be a float between \(0, 180\] degrees'),
  ('wedge', '3 3 45 91 0', r'`fov\[1\]` must be a float between \(0, 90\] degrees'),
  ('wedge', '0 3 45 45 0', 'Horizontal and vertical resolutions must be positive'),
  ('wedge', '3 3 45 45 2', r'`gamma` must be a nonnegative float between \[0, 1\]'),
  ('plate', '3', 'Plate builtin mesh type requires 2 parameters'),
  ('plate', '3 0', 'Horizontal and vertical resolutions must be positive'),
  ('plate', '1 3', 'at least 4 vertices required'),  # too few to be a mesh
]


@pytest.mark.parametrize(('kind', 'params', 'match'), BAD, ids=[f'{b[0]}-{b[1]}' for b in BAD])
def test_bad_params_raise_like_mujoco(kind, params, match):
  xml = f"""<mujoco><asset>
  <mesh name="m" builtin="{kind}" params="{params}"/>
  </asset><worldbody><body><freejoint/>
  <geom type="box" size=".1 .1 .1"/><geom type="mesh" mesh="m" contype="0" conaffinity="0"/>
  </body></worldbody></mujoco>"""
  with pytest.raises(ValueError, match=match):
    mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(xml)
  assert (err.value.element, err.value.attribute, err.value.line) == ('mesh', 'params', 2)


@pytest.mark.parametrize(
  ('mesh', 'match', 'attribute'),
  [
    ('builtin="sphere"', 'required attribute missing', 'params'),
    ('builtin="sphere" params=""', 'required attribute missing', 'params'),
    # MuJoCo makes non-finite vertices and refuses them; jaxsim refuses the value itself
    ('builtin="supertorus" params="8 nan 1 1"', 'non-finite', 'params'),
    ('builtin="none" params="1"', 'Unsupported mesh type', 'builtin'),
    ('builtin="torus" params="8 .3"', 'torus', 'builtin'),
    ('builtin="sphere" params="1" vertex="0 0 0 1 0 0 0 1 0 0 0 1"', 'at most one of', 'vertex'),
    ('builtin="sphere" params="1" file="m.stl"', 'at most one of', 'file'),
  ],
)
def test_bad_builtin_attributes(mesh, match, attribute):
  xml = f"""<mujoco><asset>
  <mesh name="m" {mesh}/>
  </asset><worldbody><body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
  with pytest.raises(ValueError):
    mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(xml)
  assert (err.value.element, err.value.attribute, err.value.line) == ('mesh', attribute, 2)


def test_procedural_types_refused():
  """MuJoCo 4.0.0's volumetric types (the shapes of <flexcomp>) are not made by jaxsim."""
  xml = """<mujoco><asset>
  <mesh name="m" builtin="box" params="3 3 3 .1 .1 .1"/>
  </asset><worldbody><body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""
  mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match='not supported by jaxsim') as err:
    jaxsim.load_string(xml)
  assert (err.value.element, err.value.attribute) == ('mesh', 'builtin')

"""URDF loading, compiler fusestatic and discardvisual: the compiled Model agrees with MuJoCo's."""

from __future__ import annotations

import struct

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim.mjcf.frames import quat_to_mat
from tests import oracle
from tests.test_mjcf_compile import COUNTS, FIELDS, QUATS, _close


def _stl(scale: float = 1.0) -> bytes:
  """A binary STL tetrahedron."""
  v = scale * np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
  faces = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
  out = b'\0' * 80 + struct.pack('<I', len(faces))
  for f in faces:
    out += struct.pack('<3f', 0, 0, 0) + b''.join(struct.pack('<3f', *v[i]) for i in f) + b'\0\0'
  return out


ASSETS = {'tet.stl': _stl(), 'other.stl': _stl(0.5)}

ROBOT = """
<robot name="arm">
  <material name="blue"><color rgba="0 0 1 1"/></material>
  <link name="base">
    <inertial><origin xyz="0.1 0 0" rpy="0.3 0.2 0.1"/><mass value="2"/>
      <inertia ixx="0.3" iyy="0.2" izz="0.25" ixy="0.01" ixz="0.02" iyz="0.03"/></inertial>
    <collision name="base_box"><origin xyz="0 0 0.1" rpy="0 0.5 0"/>
      <geometry><box size="0.2 0.3 0.4"/></geometry></collision>
    <visual><geometry><sphere radius="0.3"/></geometry><material name="blue"/></visual>
  </link>
  <link name="upper">
    <inertial><origin xyz="0 0 0.1" rpy="0.1 -0.2 0.3"/><mass value="1"/>
      <inertia ixx="0.01" iyy="0.02" izz="0.025" ixy="0.001" ixz="0" iyz="-0.002"/></inertial>
    <collision><origin xyz="0 0 0.1"/><geometry><cylinder radius="0.05" length="0.2"/></geometry>
    </collision>
    <visual><geometry><mesh filename="package://arm/meshes/tet.stl"/></geometry></visual>
  </link>
  <link name="flange">
    <inertial><mass value="0.3"/><inertia ixx="0.001" iyy="0.002" izz="0.002" ixy="0" ixz="0"
      iyz="0"/></inertial>
    <collision><geometry><mesh filename="meshes/tet.stl" scale="0.1 0.1 0.1"/></geometry>
    </collision>
  </link>
  <link name="tool">
    <collision><origin rpy="1.0 0.2 -0.4"/>
      <geometry><mesh filename="tet.stl" scale="0.2 0.1 0.1"/></geometry></collision>
    <collision><geometry><mesh filename="other.stl"/></geometry></collision>
  </link>
  <link name="lower">
    <collision><geometry><capsule radius="0.03" length="0.3"/></geometry></collision>
    <collision><origin xyz="0 0.05 0.2"/><geometry><sphere radius="0.04"/></geometry></collision>
  </link>
  <link name="slider"><collision><geometry><box size="0.05 0.05 0.05"/></geometry></collision>
  </link>
  <link name="wheel"><collision><geometry><cylinder radius="0.1" length="0.02"/></geometry>
  </collision></link>
  <link name="ball"><collision><geometry><sphere radius="0.05"/></geometry></collision></link>
  <link name="puck"><collision><geometry><sphere radius="0.02"/></geometry></collision></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.5" rpy="0.1 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/>
    <dynamics damping="0.5" friction="0.1"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="lower"/>
    <origin xyz="0 0 0.2" rpy="0 0.3 0"/><axis xyz="1 1 0"/></joint>
  <joint name="mount" type="fixed"><parent link="lower"/><child link="flange"/>
    <origin xyz="0 0 0.15" rpy="0 0 1.57"/></joint>
  <joint name="tcp" type="fixed"><parent link="flange"/><child link="tool"/>
    <origin xyz="0.01 0 0.02"/></joint>
  <joint name="rail" type="prismatic"><parent link="base"/><child link="slider"/>
    <origin xyz="0.3 0 0"/><axis xyz="1 0 0"/><limit upper="0.3" effort="5"/></joint>
  <joint name="spin" type="revolute"><parent link="slider"/><child link="wheel"/>
    <origin xyz="0 0.1 0"/><axis xyz="0 0 1"/><limit lower="0.5" upper="-0.5"/></joint>
  <joint name="wrist" type="spherical"><parent link="wheel"/><child link="ball"/>
    <origin xyz="0 0 0.1"/></joint>
  <joint name="plane" type="planar"><parent link="ball"/><child link="puck"/>
    <origin xyz="0.1 0 0"/><axis xyz="0 1 1"/><dynamics damping="0.2"/></joint>
</robot>
"""

FUSE = """
<mujoco>
  <compiler fusestatic="true"/>
  <worldbody>
    <body name="ground" pos="0 0 -0.1"><geom type="plane" size="1 1 0.1"/></body>
    <body name="root" pos="0 0 1" euler="10 20 30">
      <joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" size="0.05 0.2" mass="1"/>
      <body name="static1" pos="0.1 0 0.2" quat="0.9 0.1 0.2 0.3">
        <geom type="box" size="0.05 0.06 0.07" mass="0.5" pos="0.01 0.02 0"/>
        <site name="s1" pos="0 0 0.1"/>
        <body pos="0 0.1 0" euler="0 30 0">
          <inertial pos="0.01 0 0" mass="0.2" diaginertia="0.001 0.002 0.003"/>
          <geom type="sphere" size="0.03" contype="0" conaffinity="0"/>
          <body name="moving" pos="0 0 0.1">
            <joint type="slide" axis="1 0 0"/>
            <geom type="sphere" size="0.04"/>
          </body>
        </body>
      </body>
      <body name="kept" pos="0 0.2 0"><geom type="sphere" size="0.02"/></body>
      <body name="sensed" pos="0 -0.2 0"><geom type="sphere" size="0.02"/>
        <site name="ft"/></body>
    </body>
  </worldbody>
  <contact><exclude body1="kept" body2="root"/></contact>
  <sensor><force site="ft"/><framepos objtype="site" objname="s1"/></sensor>
</mujoco>
"""

DISCARD = """
<mujoco>
  <compiler discardvisual="true"/>
  <asset>
    <mesh name="vis" file="tet.stl"/>
    <mesh name="col" file="other.stl"/>
    <mesh name="unused" file="tet.stl" scale="2 2 2"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body pos="0 0 1">
      <freejoint/>
      <geom type="mesh" mesh="vis" contype="0" conaffinity="0"/>
      <geom type="mesh" mesh="col"/>
      <geom name="paired" type="sphere" size="0.1" contype="0" conaffinity="0"/>
      <geom type="box" size="0.1 0.1 0.1" contype="0" conaffinity="0" group="2"/>
      <site name="s1" pos="0 0 .3"/>
    </body>
    <site name="s0" pos=".3 0 2"/>
    <geom name="wrapped" size="0.1" contype="0" conaffinity="0" pos="0 0 1.5"/>
  </worldbody>
  <contact><pair geom1="floor" geom2="paired"/></contact>
  <tendon><spatial><site site="s0"/><geom geom="wrapped"/><site site="s1"/></spatial></tendon>
</mujoco>
"""


def _compare(m: jaxsim.Model, mj: mujoco.MjModel) -> None:
  for k in COUNTS:
    assert getattr(m, k) == getattr(mj, k), k
  for f in FIELDS + ['body_ipos', 'dof_M0', 'body_invweight0', 'mesh_vertnum']:
    _close(f, getattr(m, f), getattr(mj, f))
  for k in QUATS:
    ours, theirs = np.asarray(getattr(m, k)), getattr(mj, k)
    sign = np.where(np.sum(ours * theirs, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    _close(k, ours * sign, theirs)
  for i in range(mj.nbody):
    r1 = quat_to_mat(np.asarray(m.body_iquat[i]))
    r2 = quat_to_mat(mj.body_iquat[i])
    t1 = r1 @ np.diag(np.asarray(m.body_inertia[i])) @ r1.T
    t2 = r2 @ np.diag(mj.body_inertia[i]) @ r2.T
    _close(f'inertia tensor of body {i}', t1, t2)
  for kind, count, objtype in (
    ('body', mj.nbody, mujoco.mjtObj.mjOBJ_BODY),
    ('joint', mj.njnt, mujoco.mjtObj.mjOBJ_JOINT),
    ('geom', mj.ngeom, mujoco.mjtObj.mjOBJ_GEOM),
    ('site', mj.nsite, mujoco.mjtObj.mjOBJ_SITE),
  ):
    theirs = tuple(mujoco.mj_id2name(mj, objtype, i) or '' for i in range(count))
    assert tuple(m.names.get(kind, ())) == theirs, kind


@pytest.mark.parametrize('xml', [ROBOT, FUSE, DISCARD], ids=['urdf', 'fusestatic', 'discard'])
def test_compiled_model(xml):
  _compare(jaxsim.load_string(xml, ASSETS), mujoco.MjModel.from_xml_string(xml, ASSETS))


def test_urdf_mujoco_section_and_file(tmp_path):
  """A <mujoco> child sets compiler options (here: keep visual geoms); load() reads .urdf."""
  xml = ROBOT.replace(
    '<robot name="arm">',
    '<robot name="arm"><mujoco><compiler discardvisual="false" balanceinertia="true"/>'
    '<option timestep="0.005"/></mujoco>',
  ).replace('package://arm/meshes/tet.stl', 'tet.stl')
  path = tmp_path / 'arm.urdf'
  path.write_text(xml)
  (tmp_path / 'meshes').mkdir()
  for name, data in ASSETS.items():
    (tmp_path / name).write_bytes(data)
    (tmp_path / 'meshes' / name).write_bytes(data)
  m, mj = jaxsim.load(str(path)), mujoco.MjModel.from_xml_path(str(path))
  assert m.opt.timestep == mj.opt.timestep == 0.005
  assert mj.ngeom > jaxsim.load_string(ROBOT, ASSETS).ngeom
  _compare(m, mj)


def test_urdf_dynamics_at_random_states():
  # contacts off (through the URDF's <mujoco> section) keeps this a test of the tree
  xml = ROBOT.replace(
    '<robot name="arm">',
    '<robot name="arm"><mujoco><option><flag contact="disable"/></option></mujoco>',
  )
  m = jaxsim.load_string(xml, ASSETS)
  mj = mujoco.MjModel.from_xml_string(xml, ASSETS)
  forward = jax.jit(jaxsim.forward)
  rng = np.random.default_rng(0)
  for _ in range(3):
    qpos, qvel, act, ctrl = oracle.random_state(mj, rng)
    md = oracle.mj_data(mj, qpos, qvel, act, ctrl)
    d = forward(m, oracle.jx_data(m, qpos, qvel, act, ctrl))
    for k in ('xpos', 'xquat', 'geom_xpos', 'qfrc_bias', 'qacc_smooth'):
      oracle.assert_close(k, getattr(d, k), getattr(md, k))


@pytest.mark.parametrize(
  'bad, attribute',
  [
    (('<child link="upper"/>', '<child link="nowhere"/>'), None),
    (('type="continuous"', 'type="hinge"'), 'type'),
    (('<box size="0.2 0.3 0.4"/>', '<box size="0.2 0.3"/>'), 'size'),
  ],
)
def test_urdf_errors_name_line_and_attribute(bad, attribute):
  with pytest.raises(jaxsim.ModelError) as info:
    jaxsim.load_string(ROBOT.replace(*bad), ASSETS)
  line = ROBOT[: ROBOT.index(bad[0])].count('\n') + 1
  assert info.value.line is not None and abs(info.value.line - line) <= 2
  if attribute:
    assert info.value.attribute == attribute

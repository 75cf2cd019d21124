"""`<asset><model>` and `<attach>` (from another model, self-attach, inside `<replicate>`): the
compiled Model agrees with mujoco's field by field, names and keyframes included, and the dynamics
of the attached model agree too."""

from __future__ import annotations

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from tests import oracle
from tests.test_mjcf_compile import COUNTS, FIELDS, QUATS

CHILD = """
<mujoco model="kid">
  <compiler autolimits="true"/>
  <default>
    <joint damping="0.5"/>
    <geom rgba="0.2 0.3 0.4 1"/>
    <default class="stiff"><joint stiffness="3" armature="0.01"/></default>
  </default>
  <asset>
    <material name="skin" rgba="0.9 0.1 0.1 1"/>
  </asset>
  <worldbody>
    <body name="arm" pos="0 0 1" euler="0 30 0">
      <joint name="hinge" axis="0 1 0" range="-60 80"/>
      <geom name="upper" type="capsule" size="0.05" fromto="0 0 0 0.3 0 0" material="skin"/>
      <body name="tip" pos="0.3 0 0" childclass="stiff">
        <joint name="wrist" axis="1 0 0"/>
        <geom name="ball" type="sphere" size="0.05"/>
        <site name="tipsite"/>
      </body>
    </body>
  </worldbody>
  <contact><exclude body1="arm" body2="tip"/></contact>
  <tendon>
    <fixed name="couple"><joint joint="hinge" coef="1"/><joint joint="wrist" coef="-0.5"/></fixed>
  </tendon>
  <actuator>
    <motor name="m" joint="hinge" gear="2"/>
    <position name="servo" joint="wrist" kp="3" dampratio="1"/>
    <motor name="mt" tendon="couple"/>
  </actuator>
  <sensor>
    <jointpos name="jp" joint="wrist"/>
    <framepos name="fp" objtype="site" objname="tipsite"/>
    <tendonpos name="tp" tendon="couple"/>
  </sensor>
  <keyframe><key name="bent" qpos="0.3 0.2" ctrl="0.5 -0.1 0.2"/></keyframe>
</mujoco>
"""

PARENT = """
<mujoco model="parent">
  <default><joint damping="7"/><geom friction="0.5 0.01 0.001"/></default>
  <asset><model name="kid" file="child.xml"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="1 0 0.2">
      <joint name="slide" type="slide" axis="1 0 0" range="-1 1"/>
      <geom size="0.1"/>
      <frame pos="0 0.5 0" euler="0 0 30">
        <attach model="kid" body="arm" prefix="a_"/>
      </frame>
    </body>
    <attach model="kid" prefix="w_"/>
    <frame name="spot" pos="0 -1 0"><geom name="marker" type="box" size="0.1 0.1 0.1"/></frame>
    <body name="holder" pos="0 2 0"><attach frame="spot" prefix="copy_"/></body>
    <replicate count="3" offset="0.5 0 0" sep="-">
      <attach model="kid" body="arm" prefix="r_"/>
    </replicate>
  </worldbody>
  <actuator><motor name="own" joint="slide"/></actuator>
  <keyframe><key name="mine" qpos="0.1"/></keyframe>
</mujoco>
"""


@pytest.fixture(scope='module')
def files(tmp_path_factory):
  d = tmp_path_factory.mktemp('attach')
  (d / 'child.xml').write_text(CHILD)
  (d / 'parent.xml').write_text(PARENT)
  return d


@pytest.fixture(scope='module')
def pair(files):
  path = str(files / 'parent.xml')
  return oracle.load(path), mujoco.MjModel.from_xml_path(path)


def test_fields_against_mujoco(pair):
  m, mj = pair
  assert (mj.nbody, mj.nkey) == (13, 4)  # the scene is what it claims
  _compare_fields(m, mj)


def test_names_against_mujoco(pair):
  m, mj = pair
  for kind, n in (
    ('body', mj.nbody),
    ('joint', mj.njnt),
    ('geom', mj.ngeom),
    ('site', mj.nsite),
    ('tendon', mj.ntendon),
    ('actuator', mj.nu),
    ('sensor', mj.nsensor),
    ('key', mj.nkey),
  ):
    theirs = [getattr(mj, kind)(i).name for i in range(n)]
    assert list(m.names.get(kind, ())) == theirs, kind


def test_forward_against_mujoco(pair):
  m, mj = pair
  m = jaxsim.with_options(m, disableflags=m.opt.disableflags | oracle.NO_CONSTRAINT)
  mj.opt.disableflags |= oracle.NO_CONSTRAINT
  md = mujoco.MjData(mj)
  mujoco.mj_resetDataKeyframe(mj, md, 2)
  mujoco.mj_forward(mj, md)
  d = jaxsim.make_data(m).replace(qpos=md.qpos.copy(), ctrl=md.ctrl.copy())
  d = jax.jit(jaxsim.forward)(m, d)
  for name in ('qacc', 'qfrc_actuator', 'ten_length', 'sensordata'):
    oracle.assert_close(name, getattr(d, name), getattr(md, name), rtol=1e-8)


def _compare_fields(m, mj):
  for k in COUNTS:
    assert getattr(m, k) == getattr(mj, k), k
  for k in FIELDS + QUATS + ['key_qpos', 'key_qvel', 'key_ctrl', 'key_act', 'dof_damping']:
    ours, theirs = np.asarray(getattr(m, k)), np.asarray(getattr(mj, k))
    assert ours.shape == theirs.shape, k
    if k in QUATS:
      ours = ours * np.where(np.sum(ours * theirs, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-9, err_msg=k)


def test_child_compiles_with_its_own_angle_unit_and_euler_sequence(files):
  """A radian child with its own Euler sequence and no autolimits, in a degree parent: its
  angles (body euler, hinge range and ref) are read as mujoco reads them, per model."""
  child = CHILD.replace(
    '<compiler autolimits="true"/>', '<compiler angle="radian" eulerseq="zyx" autolimits="false"/>'
  )
  child = child.replace('euler="0 30 0"', 'euler="0.2 0.5 0.1"')
  child = child.replace('range="-60 80"', 'range="-1 1.5" limited="true" ref="0.3"')
  (files / 'radian.xml').write_text(child)
  path = files / 'p_radian.xml'
  path.write_text(PARENT.replace('child.xml', 'radian.xml'))
  mj = mujoco.MjModel.from_xml_path(str(path))
  m = jaxsim.load(str(path))
  assert mj.jnt_range[1, 1] == 1.5  # radians, as written: the parent's degrees do not apply
  _compare_fields(m, mj)


def test_differing_inertia_settings_are_refused(files):
  child = CHILD.replace('<compiler ', '<compiler inertiafromgeom="true" ')
  (files / 'ifg.xml').write_text(child)
  path = files / 'p_ifg.xml'
  path.write_text(PARENT.replace('child.xml', 'ifg.xml'))
  mujoco.MjModel.from_xml_path(str(path))  # mujoco compiles it per model
  with pytest.raises(jaxsim.ModelError, match='inertiafromgeom') as err:
    jaxsim.load(str(path))
  assert (err.value.element, err.value.attribute) == ('attach', 'model')


@pytest.mark.parametrize(
  'attach, attribute',
  [
    ('<attach model="nope" body="arm" prefix="x_"/>', 'model'),
    ('<attach model="kid" body="nope" prefix="x_"/>', 'body'),
    ('<attach model="kid" body="arm"/>', 'prefix'),
    ('<attach body="base" frame="spot" prefix="x_"/>', 'frame'),
    ('<attach prefix="x_"/>', 'body'),
  ],
)
def test_bad_attach_raises_model_error(files, attach, attribute):
  xml = PARENT.replace('<attach model="kid" prefix="w_"/>', attach)
  path = files / f'bad_{attribute}.xml'
  path.write_text(xml)
  with pytest.raises(ValueError):
    mujoco.MjModel.from_xml_path(str(path))
  with pytest.raises(jaxsim.ModelError) as err:
    jaxsim.load(str(path))
  assert (err.value.element, err.value.attribute) == ('attach', attribute), str(err.value)
  assert err.value.line == xml.splitlines().index('    ' + attach) + 1


GLOBAL_CHILD = """<mujoco model="kid"><option timestep="0.003" iterations="70" ls_tolerance="0.02"
  noslip_iterations="4" {gravity}><flag damper="disable" energy="enable" {flag}/></option>
  <size nkey="2"/><worldbody><body name="cb"><joint/><geom size=".1"/></body></worldbody>
</mujoco>"""
GLOBAL_PARENT = """<mujoco model="top"><compiler {policy}/>
  <option tolerance="1e-7" timestep="0.005" ls_iterations="30" {parent}/>
  <asset><model name="c" file="{child}"/></asset><worldbody><body name="pb"><geom size=".2"/>
  <attach model="c" body="cb" prefix="c/"/></body></worldbody></mujoco>"""
OPT_FIELDS = ('timestep', 'iterations', 'ls_iterations', 'tolerance', 'ls_tolerance')
OPT_FIELDS += ('noslip_iterations', 'gravity', 'disableflags', 'enableflags')


@pytest.mark.parametrize('policy', ['', 'conflict="warning"', 'conflict="merge"'])
@pytest.mark.parametrize(
  'child, parent',
  [
    (dict(gravity='', flag=''), ''),
    (dict(gravity='gravity="0 0 -5"', flag='contact="enable"'), 'iterations="90"'),
    (dict(gravity='gravity="0 0 -5"', flag=''), 'ls_tolerance="0.005"'),
  ],
)
def test_attached_options_merge_by_the_conflict_policy(files, policy, child, parent):
  """mjs_attach's attribute merging (mujoco 4): "warning" keeps the parent's options, "merge"
  adopts what only the child authors, takes the smaller tolerance or timestep, the larger
  iteration count, the union of flags."""
  name = f'g_{abs(hash((policy, tuple(child.values()), parent)))}'
  (files / f'{name}_c.xml').write_text(GLOBAL_CHILD.format(**child))
  path = files / f'{name}.xml'
  path.write_text(GLOBAL_PARENT.format(policy=policy, parent=parent, child=f'{name}_c.xml'))
  mj = mujoco.MjModel.from_xml_path(str(path))
  m = jaxsim.load(str(path))
  for f in OPT_FIELDS:
    np.testing.assert_allclose(np.asarray(getattr(m.opt, f)), getattr(mj.opt, f), rtol=1e-7)
  if 'merge' in policy:  # the comparison can fail: the child's values arrive
    assert mj.opt.iterations >= 70 and mj.opt.disableflags and mj.opt.enableflags


@pytest.mark.parametrize(
  'policy, parent',
  [('conflict="error"', ''), ('conflict="merge"', 'gravity="0 0 -9"')],
)
def test_attach_conflicts_are_refused_where_mujoco_refuses(files, policy, parent):
  """An attribute both models author differently under "error", and differing physical
  constants under "merge", refuse the attach."""
  (files / 'gc.xml').write_text(GLOBAL_CHILD.format(gravity='gravity="0 0 -5"', flag=''))
  path = files / 'g_bad.xml'
  path.write_text(GLOBAL_PARENT.format(policy=policy, parent=parent, child='gc.xml'))
  with pytest.raises(ValueError, match='Attach conflict'):
    mujoco.MjModel.from_xml_path(str(path))
  with pytest.raises(jaxsim.ModelError, match='Attach conflict') as err:
    jaxsim.load(str(path))
  assert (err.value.element, err.value.attribute) == ('attach', 'model')


def test_attached_textures_read_their_own_model_classes(files):
  """An attached model's textures take their default classes from that model (MuJoCo 4's texture
  classes), whatever the parent's classes of the same names say."""
  (files / 'textured.xml').write_text(
    """<mujoco><default><texture builtin="checker" width="8" height="8"/>
    <default class="t"><texture type="2d" rgb1="1 0 0"/></default></default>
    <asset><texture name="a" class="t"/><texture name="b" type="skybox"/>
    <material name="m" texture="a"/></asset>
    <worldbody><body name="b"><geom size=".1" material="m"/></body></worldbody></mujoco>"""
  )
  path = files / 'p_textured.xml'
  path.write_text(
    """<mujoco><default><texture builtin="none"/><default class="t"><texture type="cube"/>
    </default></default><asset><model name="c" file="textured.xml"/></asset>
    <worldbody><body name="x"><geom size=".1"/><attach model="c" body="b" prefix="c-"/></body>
    </worldbody></mujoco>"""
  )
  mj = mujoco.MjModel.from_xml_path(str(path))
  m = jaxsim.load(str(path))
  names = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_TEXTURE, i) for i in range(mj.ntex)]
  assert list(m.names['texture']) == names == ['c-a', 'c-b']
  _compare_fields(m, mj)

"""The compiled Model agrees with mujoco.MjModel on the same file, field by field (float64)."""

from __future__ import annotations

import os

import jax
import mujoco
import numpy as np
import pytest

import jaxsim
from jaxsim._src import model as model_module
from jaxsim.mjcf.frames import quat_to_mat
from tests import oracle
from tests.models import all_models, model_id

RTOL = 1e-7
ATOL = 1e-9

COUNTS = (
  'nq nv nu na nbody njnt ngeom nsite ncam nlight nmesh nhfield ntendon nwrap neq npair '
  'nexclude nsensor nsensordata nkey nmocap nnumeric'
).split()

# Fields compared index by index. Quaternions are compared up to sign, separately.
FIELDS = (
  'qpos0 body_parentid body_rootid body_weldid body_mocapid body_jntnum body_jntadr body_dofnum '
  'body_dofadr body_geomnum body_geomadr body_pos body_mass body_subtreemass body_gravcomp '
  'jnt_type jnt_qposadr jnt_dofadr jnt_bodyid jnt_group jnt_limited jnt_actfrclimited jnt_axis '
  'jnt_pos jnt_solref jnt_solimp jnt_margin jnt_stiffness jnt_actfrcrange '
  'dof_bodyid dof_jntid dof_parentid dof_armature dof_damping dof_frictionloss dof_solref '
  'dof_solimp '
  'geom_type geom_bodyid geom_dataid geom_group geom_priority geom_size geom_pos geom_friction '
  'geom_contype geom_conaffinity geom_condim geom_margin geom_gap geom_solref geom_solimp '
  'geom_solmix geom_rbound geom_aabb geom_rgba geom_adhesion '
  'site_type site_bodyid site_size site_pos '
  'cam_bodyid cam_mode cam_targetbodyid cam_pos cam_fovy cam_resolution cam_sensorsize '
  'cam_intrinsic '
  'actuator_trntype actuator_dyntype actuator_gaintype actuator_biastype actuator_trnid '
  'actuator_actadr actuator_actnum actuator_group actuator_ctrllimited actuator_forcelimited '
  'actuator_actlimited actuator_actearly actuator_dynprm actuator_gainprm actuator_biasprm '
  'actuator_ctrlrange actuator_forcerange actuator_actrange actuator_gear actuator_cranklength '
  'actuator_lengthrange '
  'tendon_adr tendon_num tendon_limited tendon_range tendon_solref_lim tendon_solimp_lim '
  'tendon_solref_fri tendon_solimp_fri tendon_margin tendon_stiffness tendon_damping '
  'tendon_frictionloss tendon_armature wrap_type wrap_objid wrap_prm '
  'eq_type eq_obj1id eq_obj2id eq_objtype eq_active0 eq_solref eq_solimp '
  'pair_geom1 pair_geom2 pair_dim pair_signature pair_friction pair_solref pair_solimp '
  'pair_solreffriction pair_margin pair_gap pair_adhesion exclude_signature '
  'sensor_type sensor_datatype sensor_needstage sensor_objtype sensor_objid sensor_reftype '
  'sensor_refid sensor_dim sensor_adr sensor_cutoff sensor_noise '
  'key_time key_qpos key_qvel key_act key_ctrl key_mpos key_mquat '
  'numeric_size numeric_adr numeric_data hfield_size hfield_nrow hfield_ncol'
).split()
QUATS = 'body_quat geom_quat site_quat cam_quat'.split()


# compiler features no suite model exercises
ASSETS = [
  os.path.join(os.path.dirname(__file__), 'assets', f)
  for f in ('replicate.xml', 'tendons.xml', 'alignfree.xml')
]


@pytest.fixture(scope='module', params=all_models() + ASSETS, ids=model_id)
def pair(request):
  path = request.param
  return oracle.load(path), mujoco.MjModel.from_xml_path(path)


def _close(name, ours, theirs, atol=ATOL):
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape, f'{name}: shape {ours.shape} vs {theirs.shape}'
  if ours.size == 0:
    return
  bad = ~np.isclose(ours, theirs, rtol=RTOL, atol=atol)
  if bad.any():
    idx = tuple(np.argwhere(bad)[0])
    raise AssertionError(f'{name}{list(idx)}: jaxsim {ours[idx]!r} vs mujoco {theirs[idx]!r}')


def test_counts(pair):
  m, mj = pair
  for k in COUNTS:
    assert getattr(m, k) == getattr(mj, k), k


@pytest.mark.parametrize('field', FIELDS)
def test_field(pair, field):
  m, mj = pair
  _close(field, getattr(m, field), getattr(mj, field))


def test_quaternions(pair):
  m, mj = pair
  for k in QUATS:
    ours, theirs = np.asarray(getattr(m, k)), np.asarray(getattr(mj, k))
    assert ours.shape == theirs.shape, k
    # q and -q are the same rotation
    sign = np.where(np.sum(ours * theirs, axis=-1, keepdims=True) < 0, -1.0, 1.0)
    _close(k, ours * sign, theirs)


def test_joint_ranges_of_limited_joints(pair):
  m, mj = pair
  limited = np.asarray(mj.jnt_limited, bool)
  _close('jnt_range', np.asarray(m.jnt_range)[limited], mj.jnt_range[limited])


def test_body_inertia(pair):
  """ipos and the full inertia tensor, so that principal-axis order does not matter; to RTOL of
  the tensor's largest entry (the zeros off its diagonal come out as round-off of that size: 1e-8
  in both for a dm_control maze's walls, a 1e8 kg m^2 body)."""
  m, mj = pair
  _close('body_ipos', m.body_ipos, mj.body_ipos)
  for i in range(mj.nbody):
    r1, r2 = quat_to_mat(np.asarray(m.body_iquat[i])), quat_to_mat(mj.body_iquat[i])
    t1 = r1 @ np.diag(np.asarray(m.body_inertia[i])) @ r1.T
    t2 = r2 @ np.diag(mj.body_inertia[i]) @ r2.T
    _close(f'inertia tensor of body {i}', t1, t2, atol=ATOL + RTOL * np.abs(t2).max())


# Constants mj_setConst computes by running the dynamics at qpos0 (jaxsim/setconst.py).
SETCONST = (
  'dof_M0 body_invweight0 dof_invweight0 tendon_invweight0 tendon_length0 tendon_lengthspring '
  'actuator_length0 actuator_acc0 eq_data dof_length cam_pos0 cam_poscom0 cam_mat0'
).split()
STATISTICS = 'meaninertia meanmass meansize extent center'.split()


@pytest.mark.parametrize('field', SETCONST)
def test_setconst_field(pair, field):
  m, mj = pair
  _close(field, getattr(m, field), getattr(mj, field))


_MEMO_XML = """<mujoco><worldbody><body><joint name="j" type="hinge" axis="0 1 0"/>
<geom type="capsule" fromto="0 0 0 .3 0 0" size=".04" mass="{}"/></body></worldbody>
<actuator><motor joint="j" gear="2"/></actuator></mujoco>"""


def test_a_model_loaded_again_skips_the_qpos0_pass(monkeypatch):
  """Loading a model built before in this process reuses its mj_setConst results: the same
  constants as the first load and as MuJoCo's, while a model that differs in one mass gets its
  own (and the memo keeps no more than QPOS0_MEMO models)."""
  calls = []
  run = model_module.set_const
  monkeypatch.setattr(model_module, 'set_const', lambda c: calls.append(1) or run(c))
  # masses no other test loads: the first two loads run the pass
  a, b = _MEMO_XML.format(1.2345), _MEMO_XML.format(2.3456)
  first = jaxsim.load_string(a)
  other = jaxsim.load_string(b)
  again = jaxsim.load_string(a)
  assert len(calls) == 2
  mj_a, mj_b = mujoco.MjModel.from_xml_string(a), mujoco.MjModel.from_xml_string(b)
  for name in SETCONST:
    np.testing.assert_array_equal(getattr(again, name), getattr(first, name), err_msg=name)
    _close(name, getattr(again, name), getattr(mj_a, name))
    _close(name, getattr(other, name), getattr(mj_b, name))
  assert float(other.dof_M0[0]) != float(first.dof_M0[0])
  calls.clear()
  for k in range(model_module.QPOS0_MEMO + 1):
    jaxsim.load_string(_MEMO_XML.format(3.0001 + k))
  jaxsim.load_string(_MEMO_XML.format(3.0001))  # the oldest, no longer remembered
  assert len(calls) == model_module.QPOS0_MEMO + 2


def test_statistics(pair):
  m, mj = pair
  for k in STATISTICS:
    _close(f'stat.{k}', m.stat[k], getattr(mj.stat, k))


def test_equality_data_given_by_user(pair):
  """eq_data entries that come from the file (those computed at qpos0 are checked elsewhere)."""
  m, mj = pair
  for i, t in enumerate(mj.eq_type):
    ours, theirs = np.asarray(m.eq_data[i]), mj.eq_data[i]
    if t == mujoco.mjtEq.mjEQ_CONNECT and mj.eq_objtype[i] == mujoco.mjtObj.mjOBJ_BODY:
      _close(f'eq_data[{i}] anchor', ours[:3], theirs[:3])
    elif t == mujoco.mjtEq.mjEQ_WELD:
      _close(f'eq_data[{i}] torquescale', ours[10], theirs[10])
    elif t in (mujoco.mjtEq.mjEQ_JOINT, mujoco.mjtEq.mjEQ_TENDON):
      _close(f'eq_data[{i}] polycoef', ours[:5], theirs[:5])


def test_names(pair):
  m, mj = pair
  for kind, count, objtype in (
    ('body', mj.nbody, mujoco.mjtObj.mjOBJ_BODY),
    ('joint', mj.njnt, mujoco.mjtObj.mjOBJ_JOINT),
    ('geom', mj.ngeom, mujoco.mjtObj.mjOBJ_GEOM),
    ('site', mj.nsite, mujoco.mjtObj.mjOBJ_SITE),
    ('actuator', mj.nu, mujoco.mjtObj.mjOBJ_ACTUATOR),
    ('sensor', mj.nsensor, mujoco.mjtObj.mjOBJ_SENSOR),
    ('tendon', mj.ntendon, mujoco.mjtObj.mjOBJ_TENDON),
  ):
    theirs = tuple(mujoco.mj_id2name(mj, objtype, i) or '' for i in range(count))
    ours = tuple(m.names.get(kind, ()))
    assert ours == theirs, kind


_SHORTCUT_BASE = """<mujoco><default>{}</default><worldbody><body><joint name="j"/><geom size=".1"/>
</body></worldbody><actuator>{}</actuator></mujoco>"""
_GENERAL = '<general gainprm="5 6 7 8" biasprm="1 2 -3 4" dynprm="0.5 0.6 0.7" ctrlrange="0 1"/>'


@pytest.mark.parametrize(
  'default, actuators',
  [
    (
      _GENERAL,
      '<motor joint="j"/><position joint="j"/><position joint="j" kv="2"/><velocity joint="j"/>'
      '<intvelocity joint="j" actrange="-1 1"/><damper joint="j"/><cylinder joint="j"/>',
    ),
    (
      '<position kp="40" kv="4"/><motor ctrlrange="-1 1"/>',
      '<motor joint="j"/><general joint="j"/>',
    ),
    ('<position kp="40" timeconst="0.1"/>', '<position joint="j"/><general joint="j"/>'),
    ('<general dyntype="filter" dynprm="0.3"/>', '<position joint="j"/><cylinder joint="j"/>'),
    ('<general gaintype="affine" gainprm="1 2 -3"/>', '<damper joint="j" ctrlrange="0 1"/>'),
  ],
)
def test_actuator_shortcuts_reset_what_they_do_not_set(default, actuators):
  """A shortcut (motor, position, ...) does not inherit gain/bias/dynamics parameters it does not
  read from the default class (mujoco 4.0.0)."""
  xml = _SHORTCUT_BASE.format(default, actuators)
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('gainprm', 'biasprm', 'dynprm', 'dyntype', 'gaintype', 'biastype'):
    _close(f'actuator_{f}', getattr(m, f'actuator_{f}'), getattr(mj, f'actuator_{f}'))


def test_top_level_defaults_merge_into_main():
  """Several top-level <default> elements (as dm_control's kinova arm with its included
  common.xml): each updates class main, wherever it stands; a class keeps the main it copied."""
  xml = """<mujoco><default><geom rgba="1 0 0 1" friction=".5 .1 .1"/>
    <default class="a"><geom size=".3"/></default></default>
    <worldbody><geom size=".1"/><geom class="a"/><geom class="b"/></worldbody>
    <default><geom friction=".7 .1 .1" solref=".03 1"/><default class="b"><geom size=".4"/>
    </default></default></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('geom_rgba', 'geom_friction', 'geom_size', 'geom_solref'):
    _close(f, getattr(m, f), getattr(mj, f))
  assert len(set(np.asarray(m.geom_friction)[:, 0].tolist())) == 2


def test_one_springlength_in_a_default_sets_both():
  """OneTendon reads one springlength value as both ends, in a default class too (the
  Playground's aero_hand: springlength="0.021336" in its distal_spring class)."""
  xml = """<mujoco><default><default class="s"><tendon stiffness="40" springlength=".2"/>
    </default></default><worldbody><body><joint name="a"/><geom size=".1"/></body></worldbody>
    <tendon><fixed class="s"><joint joint="a" coef="1"/></fixed>
    <fixed springlength=".1"><joint joint="a" coef="1"/></fixed></tendon></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  _close('tendon_lengthspring', m.tendon_lengthspring, mj.tendon_lengthspring)


def test_fromto_with_zero_pos_is_accepted():
  """mjCGeom refuses pos with fromto only where pos is not zero (the Playground's ALOHA gives
  pos="0 0 0" with fromto)."""
  xml = """<mujoco><worldbody><body><joint/><geom type="capsule" pos="0 0 0" size=".02"
    fromto="0 0 0 .1 .2 .3"/><site type="box" pos="0 0 0" size=".02" fromto="0 0 0 .3 0 0"/>
    </body></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('geom_pos', 'geom_quat', 'geom_size', 'site_pos', 'site_quat', 'site_size'):
    _close(f, getattr(m, f), getattr(mj, f))


def test_own_orientation_replaces_the_default_classes():
  """An element's orientation of any kind replaces its class's of any kind (MuJoCo Menagerie's
  ANYmal B: class shank sets euler, a shank geom quat); nested classes likewise."""
  xml = """<mujoco><default><default class="a"><geom euler="0 90 0" size=".1"/>
    <site euler="0 90 0"/><default class="a2"><geom xyaxes="0 1 0 -1 0 0"/></default></default>
    <default class="b"><geom quat="0 1 0 0" size=".1"/></default></default><worldbody>
    <geom class="a" quat="1 0 0 1"/><geom class="a"/><geom class="a" axisangle="1 0 0 90"/>
    <geom class="b" euler="0 0 90"/><geom class="b"/><geom class="a2"/>
    <geom class="a2" zaxis="0 1 0"/><site class="a" quat="1 0 0 1"/>
    <body childclass="a"><geom quat="1 1 0 0"/></body></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('geom_quat', 'site_quat'):
    _close(f, getattr(m, f), getattr(mj, f))
  with pytest.raises(jaxsim.ModelError, match='orientation given twice'):
    jaxsim.load_string(
      '<mujoco><worldbody><geom size=".1" quat="1 0 0 1" euler="0 9 0"/></worldbody></mujoco>'
    )


def test_empty_numeric_attributes_are_absent():
  """mjXUtil::ReadAttr reads no number from an empty value, so the attribute counts as not given
  (Trossen's WXAI has rgba=""); an empty quat still displaces the class's euler, as in
  mjXReader; empty keywords stay errors."""
  xml = """<mujoco><default><default class="a"><geom rgba="1 0 0 1" euler="0 90 0"/></default>
    <default class="b"><geom quat="0 1 0 0" size=".1"/></default></default><worldbody><body>
    <freejoint/><geom size=".1" rgba="" mass="" pos=" " condim=""/>
    <geom class="a" size=".1" rgba="" quat=""/><geom class="b" quat=""/><geom class="b" euler=""/>
    <geom class="a" size=".1" euler=""/><geom class="a" size=".1" axisangle=""/>
    <geom class="b" axisangle=""/></body></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('geom_rgba', 'geom_pos', 'geom_quat', 'geom_condim', 'body_mass'):
    _close(f, getattr(m, f), getattr(mj, f))
  with pytest.raises(jaxsim.ModelError, match='keyword'):
    jaxsim.load_string('<mujoco><worldbody><geom size=".1" type=""/></worldbody></mujoco>')


def test_libccd_flag_is_named_unsupported():
  """nativeccd="disable" asks MuJoCo for libccd; jaxsim collides with its native CCD and says so."""
  xml = '<mujoco><option><flag nativeccd="disable"/></option><worldbody/></mujoco>'
  assert any('nativeccd' in u for u in jaxsim.load_string(xml).unsupported)
  assert not any('nativeccd' in u for u in jaxsim.load_string('<mujoco/>').unsupported)


@pytest.mark.parametrize(
  'key', ['qpos="1 2"', 'qpos="1 2 3 1 1"', 'qvel="3"', 'ctrl="0.5"', 'act=""', 'mpos="1 2"']
)
def test_short_keyframe_vectors_are_padded(key):
  """A keyframe vector shorter than its size (MuJoCo's own solver/humanoid.xml has 25 of 27
  qvel) is padded with the defaults; short mocap poses keep the body's pose (mujoco 4.0.0)."""
  xml = f"""<mujoco><worldbody><body pos="0 0 1"><freejoint/><geom size=".1"/>
    <body><joint name="a" ref="30"/><geom size=".1"/></body></body>
    <body mocap="true" pos="1 1 1" euler="0 0 30"><geom size=".1"/></body></worldbody>
    <actuator><motor joint="a"/><general joint="a" dyntype="integrator"/></actuator>
    <keyframe><key {key}/></keyframe></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('qpos', 'qvel', 'act', 'ctrl', 'mpos', 'mquat'):
    _close(f'key_{f}', getattr(m, f'key_{f}'), getattr(mj, f'key_{f}'))


def test_singular_mass_matrix():
  """Four slide joints in three dimensions (MJX's test_data/actuator/general_dyntype.xml): M is
  singular. MuJoCo 4 clamps the L'DL pivots at mjMINVAL, so the constants from M^-1 come out
  near 1e15; jaxsim computes them the same way and counts mjWARN_INERTIA in forward."""
  xml = """<mujoco><worldbody><body><joint type="slide" axis="1 0 0"/>
    <joint type="slide" axis="0 1 0"/><joint type="slide" axis="0 0 1"/>
    <joint name="j" type="slide" axis="1 1 0"/><geom type="box" size=".05 .05 .05" mass="1"/>
    </body></worldbody><actuator><motor joint="j" gear="2"/></actuator></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('dof_invweight0', 'actuator_acc0'):
    _close(f, getattr(m, f), getattr(mj, f))
  md = mujoco.MjData(mj)
  mujoco.mj_forward(mj, md)
  d = jax.jit(jaxsim.forward)(m, jaxsim.make_data(m))
  assert md.warning[mujoco.mjtWarning.mjWARN_INERTIA].number > 0
  assert int(d.warning[int(mujoco.mjtWarning.mjWARN_INERTIA)]) == 1


def _png_images():
  """(name, PIL image) in the PNG variants MuJoCo's lodepng turns into 8-bit grey."""
  from PIL import Image

  rng = np.random.default_rng(3)
  rgb = rng.integers(0, 256, (7, 5, 3), dtype=np.uint8)
  grey16 = rng.integers(0, 65536, (6, 9), dtype=np.uint16)
  return [
    ('grey8', Image.fromarray(rgb[..., 1])),
    ('rgb', Image.fromarray(rgb)),
    ('rgba', Image.fromarray(np.dstack([rgb, rgb[..., :1]]))),
    ('palette', Image.fromarray(rgb).quantize(16)),
    ('grey16', Image.fromarray(grey16)),
    ('flat', Image.fromarray(np.full((3, 4), 9, dtype=np.uint8))),
  ]


@pytest.mark.parametrize(
  'name, image', _png_images(), ids=lambda x: x if isinstance(x, str) else ''
)
def test_png_height_field(tmp_path, name, image):
  """PNG height fields (MJX's barkour model has one) as MuJoCo reads them: lodepng's 8-bit grey
  (the red channel, the high byte of 16-bit samples), rows bottom-up, scaled to [0, 1]."""
  image.save(tmp_path / 'h.png')
  path = tmp_path / 'm.xml'
  path.write_text(
    '<mujoco><asset><hfield name="h" file="h.png" size="1 2 .3 .1"/></asset>'
    '<worldbody><geom type="hfield" hfield="h"/></worldbody></mujoco>'
  )
  m, mj = jaxsim.load(str(path)), mujoco.MjModel.from_xml_path(str(path))
  for f in ('hfield_nrow', 'hfield_ncol', 'hfield_adr', 'hfield_data'):
    _close(f, getattr(m, f), getattr(mj, f))


def test_nameless_height_field_is_named_by_its_file(tmp_path):
  """A height field without a name takes its file's stem, as meshes and textures do (dm_control's
  mjcf/test_assets/model_with_nameless_assets.xml references hfield="deepmind")."""
  _png_images()[0][1].save(tmp_path / 'terrain.png')
  path = tmp_path / 'm.xml'
  path.write_text(
    '<mujoco><asset><hfield file="terrain.png" size="1 2 .3 .1"/></asset>'
    '<worldbody><geom type="hfield" hfield="terrain"/></worldbody></mujoco>'
  )
  m, mj = jaxsim.load(str(path)), mujoco.MjModel.from_xml_path(str(path))
  assert m.names['hfield'] == (mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_HFIELD, 0),)
  for f in ('geom_dataid', 'hfield_nrow', 'hfield_data'):
    _close(f, getattr(m, f), getattr(mj, f))


def test_attributes_without_whitespace_between_them():
  """tinyxml2 reads name="a"type="b" (MyoSuite's elbow exo model has one); other malformed XML
  stays an error at its line."""
  xml = """<mujoco><worldbody><body name="b"pos="0 0 1"><freejoint/>
    <geom name="g"type='box' size=".1 .2 .3"rgba="1 0 0 1"/></body></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('geom_type', 'geom_size', 'geom_rgba', 'body_pos'):
    _close(f, getattr(m, f), getattr(mj, f))
  assert m.names['geom'] == ('g',)
  with pytest.raises(jaxsim.ModelError, match='malformed XML') as err:
    jaxsim.load_string('<mujoco>\n<worldbody><geom name="g"type="box"<</worldbody></mujoco>')
  assert err.value.line == 2


def test_texture_files_are_opened(tmp_path):
  """A texture's image file that MuJoCo cannot open or decode fails the compile in both (a
  humanoid-bench kitchen model points at a missing PNG); builtin textures ignore their files."""
  png = b'\x89PNG\r\n\x1a\n' + bytes(64)
  (tmp_path / 'ok.png').write_bytes(png)
  (tmp_path / 'bad.png').write_bytes(b'not an image')
  (tmp_path / 'noext').write_bytes(png)
  ok = '<texture name="t" type="2d" builtin="checker" width="8" height="8" file="nope.png"/>'
  bad = {
    '<texture name="t" type="2d" file="nope.png"/>': 'cannot read',
    '<texture name="t" type="cube" fileright="nope.png"/>': 'cannot read',
    '<texture name="t" type="2d" file="noext"/>': 'content type',
    '<texture name="t" type="2d" file="bad.png"/>': 'not a PNG',
  }
  for tex, match in [(ok, None), *bad.items()]:
    path = tmp_path / 'm.xml'
    path.write_text(f'<mujoco><asset>{tex}</asset></mujoco>')
    if match is None:
      ntex = mujoco.MjModel.from_xml_path(str(path)).ntex
      assert len(jaxsim.load(str(path)).names['texture']) == ntex == 1
      continue
    with pytest.raises(ValueError):
      mujoco.MjModel.from_xml_path(str(path))
    with pytest.raises(jaxsim.ModelError, match=match) as err:
      jaxsim.load(str(path))
    assert err.value.element == 'texture'


def test_declared_plugins_without_instances_load():
  """humanoid-bench's H1 declares mujoco.sensor.touch_grid in <extension>: a plugin nothing
  instantiates changes nothing, so the model loads and matches mujoco's."""
  xml = """<mujoco><extension><plugin plugin="mujoco.sensor.touch_grid"/>
    <plugin plugin="mujoco.pid"/></extension><worldbody><body><joint/><geom size=".1"/></body>
    </worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  assert mj.nplugin == 0
  for f in ('body_mass', 'dof_armature', 'geom_size'):
    _close(f, getattr(m, f), getattr(mj, f))


def test_body_outside_worldbody_is_checked_and_ignored():
  """mjXReader's schema admits <body> and <frame> directly in <mujoco> and its compiler ignores
  them (humanoid-bench's shadow hand files have a <body> there); their element and attribute
  names are still checked."""
  xml = """<mujoco><body name="b" pos="0 0 1"><freejoint/><geom class="nope" size="x"/>
    <body><joint type="bogus"/><geom type="mesh" mesh="nope"/></body></body>
    <frame><body name="b"/></frame><worldbody><body name="b"><joint/><geom size=".1"/></body>
    </worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('nbody', 'njnt', 'ngeom', 'nq'):
    assert getattr(m, f) == getattr(mj, f), f
  for bad, match in (('<body foo="1"/>', 'foo'), ('<body><geom bar="1"/></body>', 'bar')):
    with pytest.raises(ValueError):
      mujoco.MjModel.from_xml_string(f'<mujoco>{bad}</mujoco>')
    with pytest.raises(jaxsim.ModelError, match=match):
      jaxsim.load_string(f'<mujoco>{bad}</mujoco>')
  with pytest.raises(jaxsim.ModelError, match='unknown element <foo>'):
    jaxsim.load_string('<mujoco><frame><foo/></frame></mujoco>')


def test_markup_after_the_root_element_is_skipped():
  """tinyxml2 skips further elements after the root and stops at a stray closing tag (Unitree's G1
  scene closes </mujoco> twice); MuJoCo reads the first root element. Text ending the document
  stays an error in both."""
  body = '<worldbody><body><freejoint/><geom size=".1"/></body></worldbody>'
  tails = ('</mujoco>', '\n </mujoco> text', '<!-- c --><mujoco><worldbody/></mujoco>')
  for tail in tails:
    xml = f'<mujoco>{body}</mujoco>{tail}'
    m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert (m.nbody, m.ngeom, m.nq) == (mj.nbody, mj.ngeom, mj.nq) == (2, 1, 7)
  xml = f'<mujoco>{body}</mujoco>\n<a/> text'
  with pytest.raises(ValueError):
    mujoco.MjModel.from_xml_string(xml)
  with pytest.raises(jaxsim.ModelError, match='malformed XML') as err:
    jaxsim.load_string(xml)
  assert err.value.line == 2


def test_dampratio_uses_reflected_inertia():
  """Position actuators with dampratio on a coupled chain, through a joint, a tendon and a site
  with refsite: mujoco 4 sets kv from the reflected inertia 1 / (J M^-1 J') at qpos0."""
  xml = """<mujoco><worldbody><site name="ref" pos="0 0 .5"/>
    <body><joint name="a" axis="0 1 0" armature=".01"/><geom type="capsule" fromto="0 0 0 .3 0 0"
    size=".03"/><body pos=".3 0 0"><joint name="b" axis="0 1 0"/><geom type="capsule"
    fromto="0 0 0 .3 0 0" size=".03"/><site name="tip" pos=".3 0 0"/></body></body></worldbody>
    <tendon><fixed name="t"><joint joint="a" coef="1"/><joint joint="b" coef="-.5"/></fixed>
    </tendon><actuator><position joint="b" kp="10" dampratio="1"/>
    <position tendon="t" kp="5" dampratio=".7"/>
    <position site="tip" refsite="ref" gear="0 0 1 0 0 0" kp="20" dampratio="1.3"/>
    </actuator></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  _close('actuator_biasprm', m.actuator_biasprm, mj.actuator_biasprm)


def test_inertial_with_mass_only_is_a_point_mass():
  """mjsBody's inertia defaults to zero, so an <inertial> without diaginertia or fullinertia is a
  point mass (BiGym's floating-base H1 gives mass only on its welded links)."""
  xml = """<mujoco><worldbody><body><joint/><geom size=".1"/>
    <body pos=".2 0 0"><inertial pos=".1 0 0" mass="2"/></body>
    <body pos="0 .3 0"><inertial pos="0 0 0" quat="1 1 0 0" mass="1e-15"/></body>
    </body></worldbody></mujoco>"""
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  for f in ('body_mass', 'body_inertia', 'body_ipos', 'body_subtreemass'):
    _close(f, getattr(m, f), getattr(mj, f))

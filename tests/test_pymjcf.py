"""dm_control's PyMJCF export loads: every locomotion walker and arena, and two composer tasks,
written by `mjcf_model.to_xml_string()` with its `get_assets()`, compile to mujoco.MjModel's
arrays on the same XML and assets (float64).

PyMJCF writes class="/" (its root default class) on every element its schema lets have one,
textures included (MuJoCo 4's texture default classes): the tail of this file checks what MuJoCo 4
accepts and refuses of the texture attributes in PyMJCF's schema (class, <default><texture>,
embed, compiler passthrough), of body fuse and of light directions.
"""

from __future__ import annotations

import functools
import io

import mujoco
import numpy as np
import pytest
from dm_control.locomotion import arenas, walkers
from dm_control.locomotion.arenas import labmaze_textures, padded_room
from dm_control.locomotion.examples import basic_cmu_2019, basic_rodent_2020
from dm_control.locomotion.walkers import cmu_humanoid, fruitfly_v2
from dm_control.mujoco.wrapper.mjbindings import sizes
from PIL import Image

import jaxsim
from tests.test_mjcf_compile import (
  ATOL,
  FIELDS,
  QUATS,
  RTOL,
  SETCONST,
  test_body_inertia,  # noqa: F401 (run here on the PyMJCF models)
  test_counts,  # noqa: F401
  test_equality_data_given_by_user,  # noqa: F401
  test_joint_ranges_of_limited_joints,  # noqa: F401
  test_names,  # noqa: F401
  test_quaternions,  # noqa: F401
  test_statistics,  # noqa: F401
)


def _mujoco4_physics(make):
  """Runs `make` with dm_control's Physics working on MuJoCo 4 (CMUHumanoidPositionControlledV2020
  builds one to rescale its masses): dm_control 1.0.50 indexes mjModel and mjData fields that
  MuJoCo 4 removed (flex_vertedge, ...), so those are left out of its size tables meanwhile."""
  m = mujoco.MjModel.from_xml_string('<mujoco/>')
  with pytest.MonkeyPatch.context() as mp:
    for struct, obj in (('mjmodel', m), ('mjdata', mujoco.MjData(m))):
      for field in [f for f in sizes.array_sizes[struct] if not hasattr(obj, f)]:
        mp.delitem(sizes.array_sizes[struct], field)
    return make()


def _seeded(make):
  """`make` with numpy's global random state seeded (RandomMazeWithTargets draws its maze's seed
  from it), restored afterwards."""

  @functools.wraps(make)
  def seeded():
    state = np.random.get_state()
    np.random.seed(0)
    try:
      return make()
    finally:
      np.random.set_state(state)

  return seeded


@_seeded
def _labmaze_maze():
  return arenas.RandomMazeWithTargets(
    x_cells=11,
    y_cells=11,
    skybox_texture=labmaze_textures.SkyBox('sky_03'),
    wall_textures=labmaze_textures.WallTextures('style_01'),
    floor_textures=labmaze_textures.FloorTextures('style_01'),
  )


def _task(example):
  """An example's composer task, built without its Environment (whose observation cameras need
  OpenGL), after the MJCF changes of a first episode (the maze's walls, the targets); its root
  entity holds the arena with the walker attached."""
  env_of = example.__globals__['composer']

  @_seeded
  def make():
    with pytest.MonkeyPatch.context() as mp:
      mp.setattr(env_of, 'Environment', lambda task, **_: task)
      task = example(random_state=np.random.RandomState(0))
    task.initialize_episode_mjcf(np.random.RandomState(0))
    return task.root_entity

  return make


ENTITIES = {
  # dm_control.locomotion.walkers
  'Ant': walkers.Ant,
  'CMUHumanoid': cmu_humanoid.CMUHumanoid,
  'CMUHumanoidPositionControlled': walkers.CMUHumanoidPositionControlled,
  'CMUHumanoidPositionControlledV2020': functools.partial(
    _mujoco4_physics, walkers.CMUHumanoidPositionControlledV2020
  ),
  'Rat': walkers.Rat,
  'JumpingBallWithHead': walkers.JumpingBallWithHead,
  'RollingBallWithHead': walkers.RollingBallWithHead,
  'FruitFly': fruitfly_v2.FruitFly,
  # dm_control.locomotion.arenas
  'Floor': arenas.Floor,
  'Floor-outdoor': functools.partial(arenas.Floor, aesthetic='outdoor_natural'),
  'Bowl': arenas.Bowl,
  'Bowl-outdoor': functools.partial(arenas.Bowl, aesthetic='outdoor_natural'),
  'EmptyCorridor': arenas.EmptyCorridor,
  'GapsCorridor': arenas.GapsCorridor,
  'WallsCorridor': arenas.WallsCorridor,
  'MazeWithTargets': lambda: arenas.MazeWithTargets(
    padded_room.PaddedRoom(room_size=5, num_objects=2, random_state=np.random.RandomState(1))
  ),
  'RandomMazeWithTargets-labmaze': _labmaze_maze,
  # composer tasks: a walker attached to an arena
  'cmu_humanoid_maze_forage': _task(basic_cmu_2019.cmu_humanoid_maze_forage),
  'rodent_escape_bowl': _task(basic_rodent_2020.rodent_escape_bowl),
}

# Fields both define under one name that mean different things: jaxsim's nconmax is its number
# of contact slots, MuJoCo's the <size nconmax> it was given.
DIFFERENT = {'nconmax'}
# Fields compared by the tests imported above: up to sign (quaternions), as tensors (principal
# inertia), where they are used (ranges of limited joints, the file's part of eq_data).
OWN_TESTS = {*QUATS, 'body_iquat', 'body_inertia', 'jnt_range', 'eq_data'}


@pytest.fixture(scope='module', params=list(ENTITIES))
def exported(request):
  """(PyMJCF's XML, its assets) of one entity."""
  model = ENTITIES[request.param]().mjcf_model
  return model.to_xml_string(), model.get_assets()


@pytest.fixture(scope='module')
def pair(exported):
  xml, assets = exported
  return jaxsim.load_string(xml, assets=assets), mujoco.MjModel.from_xml_string(xml, assets)


def _shared_fields(m, mj) -> list[str]:
  """The numeric fields of the jaxsim Model that mujoco.MjModel has too."""
  out = []
  for k in m.fields():
    theirs = getattr(mj, k, None)
    if k in DIFFERENT or k in OWN_TESTS or theirs is None:
      continue
    if isinstance(theirs, int | float) or (
      isinstance(theirs, np.ndarray) and theirs.dtype.kind in 'biuf'
    ):
      out.append(k)
  return out


def test_every_shared_field(pair):
  """Every compiled array both define (the counts, body_*, ..., light_*, mesh_*, hfield_*, the
  mj_setConst constants) equals MuJoCo's."""
  m, mj = pair
  shared = _shared_fields(m, mj)
  assert set(FIELDS + SETCONST) - OWN_TESTS <= set(shared)
  bad = []
  for k in shared:
    ours, theirs = np.asarray(getattr(m, k)), np.asarray(getattr(mj, k))
    if ours.shape != theirs.shape:
      bad.append(f'{k}: shape {ours.shape} vs {theirs.shape}')
      continue
    close = np.isclose(ours, theirs, rtol=RTOL, atol=ATOL)
    if not close.all():
      i = tuple(int(j) for j in np.argwhere(~close)[0])
      bad.append(f'{k}{list(i)}: jaxsim {ours[i]!r} vs mujoco {theirs[i]!r}')
  assert not bad, bad


# ---- MuJoCo 4's texture default classes, embed and passthrough, and body fuse


def _agree(xml: str, assets=None):
  """(jaxsim Model, mujoco.MjModel) of `xml`, or None where MuJoCo refuses it and so does jaxsim."""
  try:
    mj = mujoco.MjModel.from_xml_string(xml, assets or {})
  except ValueError:
    with pytest.raises(jaxsim.ModelError):
      jaxsim.load_string(xml, assets=assets)
    return None
  return jaxsim.load_string(xml, assets=assets), mj


_TEX = '<mujoco>{compiler}<default>{default}</default><asset>{asset}</asset></mujoco>'
_BUILTIN = 'builtin="checker" width="8" height="8"'


def _png() -> dict[str, bytes]:
  """An 8x8 PNG image in the assets (MuJoCo decodes it where it embeds the texture)."""
  out = io.BytesIO()
  Image.new('RGB', (8, 8), (200, 40, 40)).save(out, 'PNG')
  return {'in.png': out.getvalue()}


_PNG = _png()


@pytest.mark.parametrize(
  'compiler, default, asset',
  [
    # the class's attributes (nested classes inherit) make the texture builtin, or fail to
    ('', f'<texture {_BUILTIN}/>', '<texture name="t" type="2d"/>'),
    ('', f'<texture {_BUILTIN}/>', '<texture name="t" type="2d" class="main"/>'),
    (
      '',
      '<texture builtin="flat"/><default class="a"><texture width="4"/>'
      '<default class="b"><texture height="4"/></default></default>',
      '<texture name="t" type="2d" class="b"/>',
    ),
    (
      '',
      '<texture builtin="flat"/><default class="a"><texture width="4"/>'
      '<default class="b"><texture height="4"/></default></default>',
      '<texture name="t" type="2d" class="a"/>',
    ),
    ('', '', '<texture name="t" type="2d" class="nope"/>'),
    ('', '<default class="/"/>', f'<texture name="t" class="/" {_BUILTIN}/>'),
    ('', f'<texture {_BUILTIN}/>', '<texture name="t" type="2d" builtin="none"/>'),
    # a default class sets no name, class or file
    ('', '<texture file="in.png"/>', f'<texture name="t" {_BUILTIN}/>'),
    ('', '<texture content_type="image/png"/>', f'<texture name="t" {_BUILTIN}/>'),
    # a gridlayout given on the texture must fit the gridsize, its class's included
    ('', '<texture gridsize="1 2"/>', '<texture name="t" file="in.png" gridlayout="LRU"/>'),
    ('', '<texture gridsize="1 2"/>', '<texture name="t" file="in.png" gridlayout=""/>'),
    # by reference: a single file is not opened; embed="false" where that cannot be is refused
    ('', '', '<texture name="t" type="2d" file="missing.png" embed="false"/>'),
    ('', '<texture embed="false"/>', '<texture name="t" type="2d" file="missing.png"/>'),
    ('', '', '<texture name="t" type="2d" file="missing.png" embed="auto"/>'),
    ('', '', '<texture name="t" type="2d" file="missing.png" embed="maybe"/>'),
    ('', '', f'<texture name="t" type="2d" {_BUILTIN} embed="false"/>'),
    ('', '', '<texture name="t" type="2d" file="missing.png" hflip="true" embed="false"/>'),
    ('', '', '<texture name="t" type="skybox" file="missing.png" gridsize="1 2" embed="false"/>'),
    ('', '', '<texture name="t" type="cube" fileright="missing.png" embed="false"/>'),
    ('', '', '<texture name="t" type="2d" file="in.png" embed="false"/>'),
    ('<compiler passthrough="textures"/>', '', '<texture name="t" type="2d" file="missing.png"/>'),
    (
      '<compiler passthrough="textures"/>',
      '',
      '<texture name="t" type="2d" file="missing.png" embed="true"/>',
    ),
    (
      '<compiler passthrough="textures"/>',
      '',
      '<texture name="t" type="2d" file="missing.png" vflip="true"/>',
    ),
    ('<compiler passthrough="textures"/>', '', '<texture name="t" type="2d" file="in.png"/>'),
    ('<compiler passthrough="all"/>', '', ''),
    ('<compiler savecompiled="false" savecanonical="true"/>', '', ''),
  ],
)
def test_texture_classes_embed_and_passthrough(compiler, default, asset):
  """jaxsim accepts and refuses what MuJoCo 4 does."""
  _agree(_TEX.format(compiler=compiler, default=default, asset=asset), _PNG)


def test_body_fuse_false_keeps_the_body():
  """fusestatic leaves a body with fuse="false" (its static child is fused into it)."""
  xml = """<mujoco><compiler fusestatic="true"/><worldbody><body pos="0 0 1"><freejoint/>
    <geom size=".1"/><body pos=".1 0 0" fuse="false"><geom size=".05"/><body pos="0 .2 0">
    <geom size=".03"/></body></body><body pos="0 0 .1" fuse="auto"><geom size=".02"/></body>
    </body></worldbody></mujoco>"""
  m, mj = _agree(xml)
  assert m.nbody == mj.nbody == 3
  for f in ('body_mass', 'body_pos', 'body_ipos', 'geom_bodyid', 'geom_pos'):
    np.testing.assert_allclose(getattr(m, f), getattr(mj, f), rtol=RTOL, atol=ATOL, err_msg=f)
  _agree(xml.replace('fuse="auto"', 'fuse="true"'))


def test_light_direction_is_normalised():
  """mjCLight::Compile turns a light's dir by its frames and normalises it (dm_control's fruit
  fly has dir="0 1 -1"); a zero direction is refused."""
  xml = """<mujoco><worldbody><light dir="0 1 -1"/><frame euler="30 0 90"><light dir="1 0 2"/>
    </frame><body euler="0 40 0"><light dir="3 0 4"/><geom size=".1"/></body></worldbody>
    </mujoco>"""
  m, mj = _agree(xml)
  np.testing.assert_allclose(m.light_dir, mj.light_dir, rtol=RTOL, atol=ATOL)
  _agree('<mujoco><worldbody><light dir="0 0 1e-8"/></worldbody></mujoco>')

"""The static layout (jaxsim/_src/layout.py): made once per Model, never while tracing, and never
stale: the with_* modifiers remake it where what they change affects it."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxsim
from jaxsim._src import layout
from jaxsim._src.enums import ConstraintType, DisableBit

# contacts (a box, a sphere and a cylinder on a plane, condim 1, 3 and 6; the cylinder-box pair
# through GJK/EPA, whose slots multiccd decides), joint limits, friction loss, a connect and a
# joint equality, a limited tendon with friction loss
XML = """
<mujoco>
  <option cone="{cone}">{flags}</option>
  <worldbody>
    <geom type="plane" size="5 5 .1" condim="1"/>
    <body pos="0 0 .09">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" condim="1" priority="1"/>
    </body>
    <body pos=".5 0 .08">
      <freejoint/>
      <geom type="sphere" size=".1" condim="6"/>
    </body>
    <body pos="0 .5 .1">
      <freejoint/>
      <geom type="cylinder" size=".05 .05"/>
    </body>
    <body name="arm" pos="0 1 1">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-30 30" frictionloss=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/>
      <site name="s0"/>
      <body name="forearm" pos=".3 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-60 60"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/>
        <site name="s1" pos=".3 0 0"/>
      </body>
    </body>
    <body name="free" pos="1 1 1">
      <joint name="slide" type="slide" axis="1 0 0" range="-.5 .5" frictionloss=".2"/>
      <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <tendon>
    <spatial limited="true" range="0 .5" frictionloss=".05">
      <site site="s0"/>
      <site site="s1"/>
    </spatial>
  </tendon>
  <equality>
    <connect body1="free" body2="forearm" anchor="0 0 0"/>
    <joint joint1="hinge" joint2="elbow"/>
  </equality>
</mujoco>
"""


def _xml(cone: str = 'pyramidal', disable: tuple[str, ...] = ()) -> str:
  flags = ' '.join(f'{f.lower()}="disable"' for f in disable)
  return XML.format(cone=cone, flags=f'<flag {flags}/>' if flags else '')


def _bits(names: tuple[str, ...]) -> int:
  out = 0
  for n in names:
    out |= int(DisableBit[n])
  return out


@pytest.fixture(scope='module')
def model() -> jaxsim.Model:
  return jaxsim.load_string(_xml())


def _sizes(m: jaxsim.Model) -> tuple:
  """What a layout sizes: Data.contact slots and constraint rows, as the Model and Data see them."""
  d = jaxsim.make_data(m)
  lay = m.layout
  return (lay.ncon, lay.nefc, m.nconmax, m.nefcmax, d.contact.dist.shape[0], d.efc_J.shape[0])


def test_the_model_has_every_kind_of_row(model):
  """The model of these tests has contacts, limits, friction loss and equalities (rows of every
  kind), so the layout of each is exercised."""
  kinds = set(model.layout.type.tolist())
  for t in (
    ConstraintType.EQUALITY,
    ConstraintType.FRICTION_DOF,
    ConstraintType.FRICTION_TENDON,
    ConstraintType.LIMIT_JOINT,
    ConstraintType.LIMIT_TENDON,
    ConstraintType.CONTACT_FRICTIONLESS,
    ConstraintType.CONTACT_PYRAMIDAL,
  ):
    assert int(t) in kinds, t
  assert model.layout.ncon > 0 and model.nconmax == model.layout.ncon
  assert model.nefcmax == model.layout.nefc


@pytest.mark.parametrize('fn', ['step', 'forward', 'inverse'])
def test_layout_is_never_made_while_tracing(model, monkeypatch, fn):
  """Tracing jax.jit(jaxsim.step / forward / inverse) on a Model with contacts, limits, friction
  loss and equalities runs the layout functions zero times: the Model's layout is read."""
  calls = []

  def counted(name):
    real = getattr(layout, name)

    def wrapper(*args, **kwargs):
      calls.append(name)
      return real(*args, **kwargs)

    return wrapper

  for name in ('make_layout', 'groups', 'budget', 'slot_order', 'efc_rows', 'row_classes'):
    monkeypatch.setattr(layout, name, counted(name))
  d = jaxsim.make_data(model)
  jax.jit(getattr(jaxsim, fn)).trace(model, d)
  assert calls == []
  # the counter counts: remaking the layout goes through it
  layout.with_layout(model)
  assert 'make_layout' in calls


def test_layout_is_static_and_compared_by_content(model):
  """Two loads of one model have equal layouts (one jit trace serves both); options that change
  the layout give a different one."""
  again = jaxsim.load_string(_xml())
  assert again.layout is not model.layout
  assert again.layout == model.layout and hash(again.layout) == hash(model.layout)
  assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(model)
  assert jaxsim.with_options(model, cone='elliptic').layout != model.layout
  assert not model.layout.type.flags.writeable


@pytest.mark.parametrize(
  'disable',
  [('CONTACT',), ('CONSTRAINT',), ('LIMIT', 'EQUALITY'), ('FRICTIONLOSS',), ('MULTICCD',)],
  ids=lambda d: '+'.join(d),
)
def test_with_options_gives_the_layout_of_loading_with_those_options(model, disable):
  """with_options(disableflags=...) gives the layout, nconmax, nefcmax and make_data sizes of
  the XML loaded with those flags; with_options back gives the original ones."""
  flags = int(model.opt.disableflags)
  off = jaxsim.with_options(model, disableflags=flags | _bits(disable))
  loaded = jaxsim.load_string(_xml(disable=disable))
  assert off.layout == loaded.layout
  assert _sizes(off) == _sizes(loaded)
  if 'CONTACT' in disable or 'CONSTRAINT' in disable:
    assert not (off.layout.type >= ConstraintType.CONTACT_FRICTIONLESS).any()
    assert off.nefcmax < model.nefcmax
  back = jaxsim.with_options(off, disableflags=flags)
  assert back.layout == model.layout
  assert _sizes(back) == _sizes(model)


def test_with_options_gives_the_layout_of_loading_with_that_cone(model):
  elliptic = jaxsim.with_options(model, cone='elliptic')
  loaded = jaxsim.load_string(_xml(cone='elliptic'))
  assert elliptic.layout == loaded.layout and _sizes(elliptic) == _sizes(loaded)
  assert len(elliptic.layout.rows.con) == int((elliptic.layout.contact_dim > 1).sum())
  assert jaxsim.with_options(elliptic, cone='pyramidal').layout == model.layout


def test_with_options_keeps_the_layout_where_it_does_not_change(model):
  """Options the layout does not depend on keep the very layout object (no work)."""
  fast = jaxsim.with_options(model, integrator='euler', iterations=2)
  assert fast.layout is model.layout
  refsafe = jaxsim.with_options(model, disableflags=model.opt.disableflags | DisableBit.REFSAFE)
  assert refsafe.layout is model.layout
  assert jaxsim.with_max_geom_pairs(model, 2).layout is model.layout


def test_options_replaced_by_hand_are_refused(model):
  """A Model whose layout-relevant options were replaced without with_options is refused (its
  layout would be stale), naming with_options."""
  flags = model.opt.disableflags | DisableBit.CONTACT
  stale = model.replace(opt=model.opt.replace(disableflags=flags))
  with pytest.raises(ValueError, match='with_options'):
    jaxsim.make_data(stale)
  with pytest.raises(ValueError, match='with_options'):
    jax.jit(jaxsim.forward).trace(stale, jaxsim.make_data(model))


def _check_rows(lay: layout.Layout) -> None:
  """Each contact slot's rows are where the layout says, of its slot and condim's count."""
  contact = np.flatnonzero(lay.type >= ConstraintType.CONTACT_FRICTIONLESS)
  assert len(contact) == lay.contact_nrow.sum()
  assert lay.nefc == len(lay.type) == len(lay.id)
  for s in range(lay.ncon):
    rows = lay.contact_efcadr[s] + np.arange(lay.contact_nrow[s])
    assert (lay.id[rows] == s).all()
    dim = lay.contact_dim[s]
    assert lay.contact_nrow[s] == (1 if dim == 1 else 2 * (dim - 1))  # pyramidal


def test_with_ncon_max_changes_slots_and_rows_together(model):
  """A budget of n slots per condim class: n slots of each class (classes in the order of their
  first slot), their rows, the Model's and Data's sizes all follow; -1 gives every collider slot
  again."""
  full = model.layout
  assert not full.budget.capped
  capped = jaxsim.with_ncon_max(model, 1)
  lay = capped.layout
  # the classes in the order of their first collider slot (mj_collision's order)
  first = np.unique(full.contact_dim, return_index=True)[1]
  classes = full.contact_dim[np.sort(first)]
  assert not np.array_equal(classes, np.sort(classes))  # this model tells the orders apart
  assert lay.budget.capped and lay.ncon == len(classes) < full.ncon
  np.testing.assert_array_equal(lay.contact_dim, classes)
  assert (lay.contact_geom1 == -1).all() and (lay.contact_geom2 == -1).all()
  _check_rows(full)
  _check_rows(lay)
  # the rows that are not contacts do not change
  nc = full.nefc - full.contact_nrow.sum()
  assert lay.nefc == nc + lay.contact_nrow.sum()
  np.testing.assert_array_equal(lay.type[:nc], full.type[:nc])
  assert _sizes(capped) == (lay.ncon, lay.nefc) * 3
  d = jax.eval_shape(jaxsim.forward, capped, jaxsim.make_data(capped))
  assert jax.eval_shape(jaxsim.efc_J_dense, capped, d).shape == (lay.nefc, capped.nv)
  assert d.contact.dist.shape == (lay.ncon,)
  every = jaxsim.with_ncon_max(capped, -1)
  assert _sizes(every) == _sizes(model)
  np.testing.assert_array_equal(every.layout.type, full.type)
  np.testing.assert_array_equal(every.layout.contact_geom1, full.contact_geom1)


def test_with_modifiers_are_public():
  from jaxsim._src import model as model_mod

  assert jaxsim.with_options is model_mod.with_options
  assert jaxsim.with_ncon_max is model_mod.with_ncon_max
  assert jaxsim.with_max_geom_pairs is model_mod.with_max_geom_pairs
  assert jaxsim.with_hessian_rows is model_mod.with_hessian_rows
  assert jaxsim.hessian_rows is model_mod.hessian_rows

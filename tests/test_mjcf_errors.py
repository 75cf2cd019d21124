"""Malformed and hostile MJCF: every bad input raises jaxsim.ModelError naming where it went wrong.

Each case gives the model text, a regular expression the message must match, and where the
error must point: a substring of the offending line (`at`), the element's tag and the attribute.
Line numbers are found from `at`, so the layout of the XML below can change freely.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
import struct

import mujoco
import numpy as np
import pytest

import jaxsim

# ------------------------------------------------------------------------------------------------
# helpers


def line_of(xml: str, needle: str) -> int:
  """1-based number of the one line of `xml` that contains `needle`."""
  hits = [i for i, text in enumerate(xml.splitlines(), start=1) if needle in text]
  assert len(hits) == 1, f'{needle!r} found on lines {hits}, expected exactly one'
  return hits[0]


def model(body: str = '', world: str = '', top: str = '', pre: str = '') -> str:
  """A small valid model with body 'b', hinge 'j', sphere geom 'g' and site 's'.

  `pre` goes before <worldbody>, `world` inside it, `body` inside body 'b', `top` after it.
  """
  return f"""<mujoco model="probe">
{pre}
  <worldbody>
{world}
    <body name="b" pos="0 0 1">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <geom name="g" type="sphere" size="0.1"/>
      <site name="s" pos="0 0 0.1"/>
{body}
    </body>
  </worldbody>
{top}
</mujoco>
"""


@dataclasses.dataclass(frozen=True)
class Case:
  id: str
  xml: str
  match: str
  at: str | None = None  # substring of the line the error must name; None: no line expected
  element: str | None = None
  attribute: str | None = None
  line: int | None = None  # explicit line, for XML syntax errors
  # Why jaxsim does not (yet) do this: the case is then a strict xfail until the compiler is fixed.
  known_bug: str | None = None


def check(err: pytest.ExceptionInfo, case: Case, file: str = '<string>') -> None:
  """The error's location fields are the ones the case expects."""
  e = err.value
  assert isinstance(e, ValueError)
  assert e.reason, 'ModelError.reason must not be empty'
  if case.line is not None:
    assert e.line == case.line, str(e)
  elif case.at is not None:
    assert e.line == line_of(case.xml, case.at), str(e)
  if case.element is not None or case.at is not None:
    assert e.element == case.element, str(e)
  assert e.attribute == case.attribute, str(e)
  if e.line is not None:
    assert e.file == file, str(e)
    # The message starts with 'file:line'.
    assert str(e).startswith(f'{file}:{e.line}'), str(e)
  if e.element is not None:
    assert f'<{e.element}>' in str(e), str(e)
  if e.attribute is not None:
    assert f"attribute '{e.attribute}'" in str(e), str(e)


def xfail(reason: str):
  return pytest.mark.xfail(strict=True, reason=reason)


# ------------------------------------------------------------------------------------------------
# cases that load_string must refuse

C = Case
CASES = [
  # -------------------------------------------------------------- XML syntax
  C(
    'unclosed-tag',
    '<mujoco>\n  <worldbody>\n    <body>\n  </worldbody>\n</mujoco>\n',
    'malformed XML: mismatched tag',
    line=4,
  ),
  C('garbage-text', 'this is not xml at all', 'malformed XML: syntax error', line=1),
  # -------------------------------------------------------------- camera lens (mjCCamera::Compile)
  C(
    'camera-focal-without-sensorsize',
    model(world='<camera name="c" focal=".01 .01"/>'),
    'focal/principal require sensorsize',
    at='<camera name="c"',
    element='camera',
    attribute='sensorsize',
  ),
  C(
    'camera-sensorsize-without-resolution',
    model(world='<camera name="c" sensorsize=".01 .01" resolution="0 10"/>'),
    'sensorsize requires a positive resolution',
    at='<camera name="c"',
    element='camera',
    attribute='resolution',
  ),
  C(
    'camera-fovy-180',
    model(world='<camera name="c" fovy="180"/>'),
    'fovy too large',
    at='<camera name="c"',
    element='camera',
    attribute='fovy',
  ),
  C('garbage-bytes', b'\x00\xff\xfe\x89PNG\r\n', 'malformed XML', line=1),
  # -------------------------------------------------------------- visual/statistic (mjXReader)
  C(
    'visual-bad-number',
    model(pre='<visual>\n<map shadowclip="abc"/>\n</visual>'),
    "expected a number, got 'abc'",
    at='<map shadowclip',
    element='map',
    attribute='shadowclip',
  ),
  C(
    'visual-short-rgba',
    model(pre='<visual>\n<rgba fog="1 2"/>\n</visual>'),
    'expected 4 values, got 2',
    at='<rgba fog',
    element='rgba',
    attribute='fog',
  ),
  C(
    'visual-unknown-attribute',
    model(pre='<visual>\n<global bogus="1"/>\n</visual>'),
    'unknown attribute of <global>',
    at='<global bogus',
    element='global',
    attribute='bogus',
  ),
  C(
    'visual-twice',
    model(pre='<visual>\n<global/>\n<global fovy="30"/>\n</visual>'),
    'given twice in <visual>',
    at='<global fovy',
    element='global',
  ),
  C(
    'visual-realtime-zero',
    model(pre='<visual>\n<global realtime="0"/>\n</visual>'),
    'realtime must be greater than 0',
    at='<global realtime',
    element='global',
    attribute='realtime',
  ),
  C(
    'statistic-extent-zero',
    model(pre='<statistic extent="0"/>'),
    'extent must be strictly positive',
    at='<statistic',
    element='statistic',
    attribute='extent',
  ),
  C(
    'option-flag-twice',
    model(pre='<option>\n<flag gravity="disable"/>\n<flag contact="disable"/>\n</option>'),
    'given twice in <option>',
    at='<flag contact',
    element='flag',
  ),
  C('empty-document', '', 'malformed XML: no element found', line=1),
  C('truncated-document', '<mujoco>\n  <worldbody>\n', 'malformed XML: no element found', line=3),
  C(
    'junk-after-root',
    '<mujoco/>\n<mujoco/>\n',
    'malformed XML: junk after document element',
    line=2,
  ),
  C(
    'duplicate-xml-attribute',
    model(body='<geom size="0.1" rgba="1 0 0 1" rgba="0 1 0 1"/>'),
    'malformed XML: duplicate attribute',
    at='rgba="0 1 0 1"',
  ),
  C(
    'undefined-entity',
    '<mujoco model="&nope;">\n</mujoco>\n',
    'malformed XML: undefined entity',
    line=1,
  ),
  # -------------------------------------------------------------- hostile XML
  C(
    'billion-laughs',
    '<?xml version="1.0"?>\n'
    '<!DOCTYPE lolz [\n'
    '  <!ENTITY lol "lol">\n'
    '  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n'
    '  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">\n'
    '  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">\n'
    '  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">\n'
    '  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">\n'
    '  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">\n'
    '  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">\n'
    '  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">\n'
    '  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">\n'
    ']>\n'
    '<mujoco model="&lol9;">\n'
    '</mujoco>\n',
    'document type declarations and entities are not allowed',
    line=2,
  ),
  C(
    'external-entity',
    '<?xml version="1.0"?>\n'
    '<!DOCTYPE mujoco [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
    '<mujoco model="&xxe;"/>\n',
    'document type declarations and entities are not allowed',
    line=2,
  ),
  C(
    'external-dtd',
    '<?xml version="1.0"?>\n<!DOCTYPE mujoco SYSTEM "http://example.com/evil.dtd">\n<mujoco/>\n',
    'document type declarations and entities are not allowed',
    line=2,
  ),
  C(
    'doctype-without-entities',
    '<!DOCTYPE mujoco>\n<mujoco/>\n',
    'document type declarations and entities are not allowed',
    line=1,
  ),
  # -------------------------------------------------------------- structure
  C(
    'wrong-root',
    '<mjcf>\n  <worldbody/>\n</mjcf>\n',
    'root element must be <mujoco>',
    '<mjcf>',
    'mjcf',
  ),
  C(
    'root-attribute',
    '<mujoco modle="x">\n</mujoco>\n',
    'unknown attribute',
    '<mujoco',
    'mujoco',
    'modle',
  ),
  C(
    'unknown-element-in-body',
    model(body='<gemo size="0.1"/>'),
    r'unknown element <gemo> in <body>',
    '<gemo',
    'gemo',
  ),
  C(
    'unknown-top-level-element',
    model(top='<actuators/>'),
    r'unknown element <actuators> in <mujoco>',
    '<actuators/>',
    'actuators',
  ),
  C(
    'unknown-element-in-actuator',
    model(top='<actuator><engine joint="j"/></actuator>'),
    r'unknown element <engine> in <actuator>',
    '<engine',
    'engine',
  ),
  C(
    'unknown-sensor',
    model(top='<sensor><thermometer site="s"/></sensor>'),
    r'unknown element <thermometer> in <sensor>',
    '<thermometer',
    'thermometer',
  ),
  C(
    'child-of-geom',
    model(body='<geom size="0.1"><site/></geom>'),
    'unknown element <site> in <geom>',
    '<geom size="0.1"><site/>',
    'site',
  ),
  C(
    'unknown-attribute',
    model(body='<geom size="0.1" sise="1"/>'),
    'unknown attribute of <geom>',
    'sise=',
    'geom',
    'sise',
  ),
  C(
    'unknown-attribute-on-shortcut-actuator',
    model(top='<actuator><position joint="j" kpp="1"/></actuator>'),
    'unknown attribute of <position>',
    'kpp=',
    'position',
    'kpp',
  ),
  C(
    'worldbody-attribute',
    '<mujoco>\n  <worldbody name="w"/>\n</mujoco>\n',
    'world body cannot have attributes',
    '<worldbody',
    'worldbody',
    'name',
  ),
  # -------------------------------------------------------------- numbers
  C(
    'bad-number',
    model(body='<geom size="0.1" pos="1.2.3 0 0"/>'),
    r"expected a number, got '1\.2\.3'",
    'pos="1.2.3',
    'geom',
    'pos',
  ),
  C(
    'word-for-number',
    model(body='<geom size="zero"/>'),
    "expected a number, got 'zero'",
    'size="zero"',
    'geom',
    'size',
  ),
  C(
    'underscore-in-number',
    model(body='<geom size="1_0"/>'),
    "expected a number, got '1_0'",
    'size="1_0"',
    'geom',
    'size',
  ),
  C(
    'underscore-in-integer',
    model(body='<geom size="0.1" contype="1_0"/>'),
    "expected an integer, got '1_0'",
    'contype="1_0"',
    'geom',
    'contype',
  ),
  C(
    'non-ascii-digits',
    model(body='<geom size="\uff10.\uff15"/>'),
    'expected a number',
    'size="\uff10',
    'geom',
    'size',
  ),
  C(
    'integer-too-large',
    model(body='<geom size="0.1" contype="99999999999999999999999"/>'),
    r'(?i)too large|out of range',
    'contype=',
    'geom',
    'contype',
  ),
  C(
    'integer-beyond-int32',
    model(body='<geom size="0.1" group="4294967296"/>'),
    r'(?i)too large|out of range',
    'group=',
    'geom',
    'group',
  ),
  C(
    'comma-separated',
    model(body='<geom size="0.1" pos="1,2,3"/>'),
    r"expected a number, got '1,2,3'",
    'pos="1,2,3"',
    'geom',
    'pos',
  ),
  C(
    'too-few-numbers',
    model(body='<geom size="0.1" pos="1 2"/>'),
    'expected 3 values, got 2',
    'pos="1 2"',
    'geom',
    'pos',
  ),
  C(
    'too-many-numbers',
    model(body='<geom size="0.1" rgba="1 0 0 1 1"/>'),
    'expected 4 values, got 5',
    'rgba=',
    'geom',
    'rgba',
  ),
  C(
    'too-many-in-range-arity',
    model(body='<geom size="0.1 0.2 0.3 0.4"/>'),
    'expected 1 to 3 values, got 4',
    'size="0.1 0.2 0.3 0.4"',
    'geom',
    'size',
  ),
  C(
    'scalar-given-two',
    model(body='<geom size="0.1" mass="1 2"/>'),
    'expected one value, got 2',
    'mass="1 2"',
    'geom',
    'mass',
  ),
  C(
    'float-for-int',
    model(body='<geom size="0.1" condim="3.0"/>'),
    "expected an integer, got '3.0'",
    'condim="3.0"',
    'geom',
    'condim',
  ),
  C(
    'nan',
    model(body='<geom size="0.1" pos="nan 0 0"/>'),
    "non-finite value 'nan'",
    'pos="nan',
    'geom',
    'pos',
  ),
  C(
    'inf',
    model(body='<geom size="inf"/>'),
    "non-finite value 'inf'",
    'size="inf"',
    'geom',
    'size',
  ),
  C(
    'minus-infinity',
    model(pre='<option gravity="0 0 -Infinity"/>'),
    "non-finite value '-Infinity'",
    '<option',
    'option',
    'gravity',
  ),
  C(
    'overflow-to-inf',
    model(body='<inertial pos="0 0 0" mass="1e999" diaginertia="1 1 1"/>'),
    "non-finite value '1e999'",
    'mass="1e999"',
    'inertial',
    'mass',
  ),
  C(
    'nan-timestep',
    model(pre='<option timestep="NaN"/>'),
    'non-finite',
    '<option',
    'option',
    'timestep',
  ),
  C(
    'negative-timestep',
    model(pre='<option timestep="-0.01"/>'),
    'timestep must be positive',
    '<option',
    'option',
    'timestep',
  ),
  # -------------------------------------------------------------- keywords and bools
  C(
    'bad-joint-type',
    model(body='<body><joint type="hinj"/><geom size="0.1"/></body>'),
    r"unknown keyword 'hinj'; expected one of 'free', 'ball', 'slide', 'hinge'",
    'type="hinj"',
    'joint',
    'type',
  ),
  C(
    'bad-integrator',
    model(pre='<option integrator="RK5"/>'),
    "unknown keyword 'RK5'",
    '<option',
    'option',
    'integrator',
  ),
  C(
    'keyword-wrong-case',
    model(body='<geom type="Box" size="0.1 0.1 0.1"/>'),
    "unknown keyword 'Box'",
    'type="Box"',
    'geom',
    'type',
  ),
  C(
    'bad-bool',
    model(world='<body mocap="yes"/>'),
    "expected 'true' or 'false', got 'yes'",
    'mocap="yes"',
    'body',
    'mocap',
  ),
  C(
    'bool-as-number',
    model(pre='<compiler autolimits="1"/>'),
    "expected 'true' or 'false', got '1'",
    '<compiler',
    'compiler',
    'autolimits',
  ),
  C(
    'bad-flag',
    model(pre='<option><flag gravity="off"/></option>'),
    "unknown keyword 'off'",
    '<flag',
    'flag',
    'gravity',
  ),
  # -------------------------------------------------------------- default classes
  C(
    'unknown-class',
    model(body='<geom class="nope" size="0.1"/>'),
    "unknown default class 'nope'",
    'class="nope"',
    'geom',
    'class',
  ),
  C(
    'unknown-childclass',
    model(world='<body childclass="nope"><geom size="0.1"/></body>'),
    "unknown default class 'nope'",
    'childclass="nope"',
    'body',
    'childclass',
  ),
  C(
    'unknown-childclass-on-frame',
    model(world='<frame childclass="nope"/>'),
    "unknown default class 'nope'",
    'childclass="nope"',
    'frame',
    'childclass',
  ),
  C(
    'unknown-class-on-actuator',
    model(top='<actuator><motor class="nope" joint="j"/></actuator>'),
    "unknown default class 'nope'",
    'class="nope"',
    'motor',
    'class',
  ),
  C(
    'nested-default-without-class',
    model(pre='<default>\n<default>\n<geom rgba="1 0 0 1"/>\n</default>\n</default>'),
    'a nested <default> needs a class name',
    None,
    'default',
    'class',
    line=3,  # model() puts `pre` from line 2 on
  ),
  C(
    'duplicate-default-class',
    model(pre='<default>\n<default class="a"/>\n<default class="a">\n</default>\n</default>'),
    "duplicate default class 'a'",
    '<default class="a">',
    'default',
    'class',
  ),
  C(
    'top-default-not-main',
    model(pre='<default class="other"/>'),
    "top-level default class must be 'main'",
    '<default class="other"/>',
    'default',
    'class',
  ),
  C(
    'name-in-default',
    model(pre='<default><geom name="x"/></default>'),
    'cannot be set in a default class',
    '<default><geom',
    'geom',
    'name',
  ),
  C(
    'unknown-element-in-default',
    model(pre='<default><body pos="0 0 0"/></default>'),
    'unknown element in <default>',
    '<default><body',
    'body',
  ),
  # -------------------------------------------------------------- names
  C(
    'duplicate-body-name',
    model(world='<body name="b"><geom size="0.1"/></body>'),
    "repeated name 'b' in body namespace",
    '<body name="b" pos="0 0 1">',
    'body',
    'name',
  ),
  C(
    'duplicate-joint-name',
    model(body='<body><joint name="j"/><geom size="0.1"/></body>'),
    "repeated name 'j' in joint namespace",
    '<body><joint name="j"/>',
    'joint',
    'name',
  ),
  C(
    'duplicate-geom-name',
    model(world='<geom name="g" type="plane" size="1 1 1"/>'),
    "repeated name 'g' in geom namespace",
    '<geom name="g" type="sphere"',
    'geom',
    'name',
  ),
  C(
    'duplicate-site-name',
    model(body='<site name="s"/>'),
    "repeated name 's' in site namespace",
    '<site name="s"/>',
    'site',
    'name',
  ),
  C(
    'body-named-world',
    model(world='<body name="world"/>'),
    "repeated name 'world' in body namespace",
    '<body name="world"/>',
    'body',
    'name',
  ),
  C(
    'duplicate-actuator-name',
    model(top='<actuator><motor name="m" joint="j"/>\n<motor name="m" joint="j"/></actuator>'),
    "repeated name 'm' in actuator namespace",
    '<motor name="m" joint="j"/></actuator>',
    'motor',
    'name',
  ),
  # -------------------------------------------------------------- references
  C(
    'actuator-unknown-joint',
    model(top='<actuator><motor joint="nope"/></actuator>'),
    "unknown joint 'nope'",
    'joint="nope"',
    'motor',
    'joint',
  ),
  C(
    'actuator-unknown-tendon',
    model(top='<actuator><general tendon="nope"/></actuator>'),
    "unknown tendon 'nope'",
    'tendon="nope"',
    'general',
    'tendon',
  ),
  C(
    'tendon-unknown-joint',
    model(top='<tendon><fixed><joint joint="nope" coef="1"/></fixed></tendon>'),
    "unknown joint 'nope'",
    'joint="nope"',
    'joint',
    'joint',
  ),
  C(
    'hfield-one-row',
    model(pre='<asset>\n<hfield name="h" nrow="1" ncol="3" size="1 1 1 .1"/>\n</asset>'),
    'hfield dimensions must be at least 2',
    '<hfield',
    'hfield',
    'nrow',
  ),
  C(
    'skin-face-out-of-range',
    model(
      pre='<asset>\n<skin name="k" vertex="0 0 0 1 0 0 0 1 0" face="0 1 5">'
      '<bone body="b" bindpos="0 0 0" bindquat="1 0 0 0" vertid="0 1 2" vertweight="1 1 1"/>'
      '</skin>\n</asset>'
    ),
    'face vertex index 5 out of range in skin',
    '<skin',
    'skin',
    'face',
  ),
  C(
    'skin-bone-unknown-body',
    model(
      pre='<asset>\n<skin name="k" vertex="0 0 0 1 0 0 0 1 0" face="0 1 2">\n'
      '<bone body="nope" bindpos="0 0 0" bindquat="1 0 0 0" vertid="0 1 2" vertweight="1 1 1"/>'
      '\n</skin>\n</asset>'
    ),
    "unknown body 'nope' in skin",
    'body="nope"',
    'bone',
    'body',
  ),
  C(
    'skin-vertex-without-weight',
    model(
      pre='<asset>\n<skin name="k" vertex="0 0 0 1 0 0 0 1 0" face="0 1 2">\n'
      '<bone body="b" bindpos="0 0 0" bindquat="1 0 0 0" vertid="0 1" vertweight="1 1"/>'
      '\n</skin>\n</asset>'
    ),
    'vertex 2 must have positive total weight in skin',
    '<skin name="k"',
    'skin',
  ),
  C(
    'default-empty-class',
    model(pre='<default>\n<default class="">\n<geom size="1"/>\n</default>\n</default>'),
    'empty class name',
    '<default class="">',
    'default',
    'class',
  ),
  C(
    'builtin-texture-without-height',
    model(pre='<asset>\n<texture name="t" type="2d" builtin="checker" width="10"/>\n</asset>'),
    'invalid height of builtin texture',
    '<texture',
    'texture',
    'height',
  ),
  C(
    'texture-2d-without-file',
    model(pre='<asset>\n<texture name="t" type="2d"/>\n</asset>'),
    'a 2D texture needs a file',
    '<texture',
    'texture',
    'file',
  ),
  C(
    'texture-cube-without-files',
    model(pre='<asset>\n<texture name="t" type="cube"/>\n</asset>'),
    'a cube or skybox texture needs a file, cube files or a builtin',
    '<texture',
    'texture',
  ),
  C(
    'tendon-negative-armature',
    model(top='<tendon>\n<fixed armature="-1"><joint joint="j" coef="1"/></fixed>\n</tendon>'),
    'tendon armature cannot be negative',
    '<fixed',
    'fixed',
    'armature',
  ),
  C(
    'camprojection-without-resolution',
    model(
      world='<camera name="c" resolution="0 0"/>',
      top='<sensor>\n<camprojection site="s" camera="c"/>\n</sensor>',
    ),
    'camera projection sensor requires camera resolution',
    '<camprojection',
    'camprojection',
    'camera',
  ),
  C(
    'tendon-repeated-joint',
    model(
      top='<tendon><fixed>\n<joint joint="j" coef="1"/>\n<joint joint="j" coef="2"/>\n'
      '</fixed></tendon>'
    ),
    'joint at path element 1 is repeated',
    'coef="2"',
    'joint',
    'joint',
  ),
  C(
    'default-child-with-children',
    model(pre='<default><geom><site/></geom></default>'),
    'unknown element <site> in <geom>',
    '<default>',
    'site',
  ),
  C(
    'spatial-tendon-unknown-site',
    model(top='<tendon><spatial><site site="s"/><site site="nope"/></spatial></tendon>'),
    "unknown site 'nope'",
    'site="nope"',
    'site',
    'site',
  ),
  C(
    'sensor-unknown-site',
    model(top='<sensor><touch site="nope"/></sensor>'),
    "unknown site 'nope'",
    'site="nope"',
    'touch',
    'site',
  ),
  C(
    'sensor-unknown-joint',
    model(top='<sensor><jointpos joint="nope"/></sensor>'),
    "unknown joint 'nope'",
    'joint="nope"',
    'jointpos',
    'joint',
  ),
  C(
    'framepos-unknown-objname',
    model(top='<sensor><framepos objtype="body" objname="nope"/></sensor>'),
    "unknown body 'nope'",
    'objname="nope"',
    'framepos',
    'objname',
  ),
  C(
    'distance-unknown-geom',
    model(top='<sensor><distance geom1="g" geom2="nope"/></sensor>'),
    "unknown geom 'nope'",
    'geom2="nope"',
    'distance',
    'geom2',
  ),
  C(
    'distance-geom-and-body',
    model(top='<sensor><normal geom1="g" body1="b" body2="world"/></sensor>'),
    "at most one of 'geom1', 'body1' can be specified",
    '<normal',
    'normal',
    'body1',
  ),
  C(
    'distance-no-second-object',
    model(top='<sensor><fromto geom1="g"/></sensor>'),
    "one of 'geom2', 'body2' must be specified",
    '<fromto',
    'fromto',
    'geom2',
  ),
  C(
    'distance-same-body',
    model(top='<sensor><distance body1="b" body2="b"/></sensor>'),
    '1st body/geom must be different from 2nd body/geom',
    '<distance',
    'distance',
  ),
  C(
    'distance-height-field',
    model(
      pre='<asset><hfield name="h" nrow="2" ncol="2" size="1 1 .1 .1"/></asset>',
      world='<geom name="hf" type="hfield" hfield="h"/>',
      top='<sensor><distance geom1="g" geom2="hf"/></sensor>',
    ),
    'height fields are not supported in geom distance sensors',
    '<distance',
    'distance',
    'geom2',
  ),
  # contact sensors: mujoco 4.0.0 refuses each of these too (mjXReader::Sensor, mjCSensor)
  C(
    'contact-sensor-unknown-data',
    model(top='<sensor><contact geom1="g" data="found speed"/></sensor>'),
    "invalid keyword: 'speed'",
    '<contact',
    'contact',
    'data',
  ),
  C(
    'contact-sensor-data-order',
    model(top='<sensor><contact geom1="g" data="force found"/></sensor>'),
    'data attributes must be in order: found, force, torque, dist, pos, normal, tangent',
    '<contact',
    'contact',
    'data',
  ),
  C(
    'contact-sensor-geom-and-body',
    model(top='<sensor><contact geom1="g" body1="b"/></sensor>'),
    "at most one of 'geom1', 'body1', 'subtree1', 'site' can be specified",
    '<contact',
    'contact',
    'body1',
  ),
  C(
    'contact-sensor-num',
    model(top='<sensor><contact geom1="g" num="0"/></sensor>'),
    "'num' must be positive in sensor",
    '<contact',
    'contact',
    'num',
  ),
  C(
    'contact-sensor-netforce-velocity',
    model(top='<sensor><contact body2="b" data="linvel" reduce="netforce"/></sensor>'),
    'netforce reduction is incompatible with linvel or angvel',
    '<contact',
    'contact',
    'reduce',
  ),
  C(
    'contact-sensor-unknown-subtree',
    model(top='<sensor><contact subtree1="nope"/></sensor>'),
    "unknown body 'nope'",
    '<contact',
    'contact',
    'subtree1',
  ),
  C(
    'exclude-unknown-body',
    model(top='<contact><exclude body1="b" body2="nope"/></contact>'),
    "unknown body 'nope'",
    'body2="nope"',
    'exclude',
    'body2',
  ),
  C(
    'pair-unknown-geom',
    model(top='<contact><pair geom1="nope" geom2="g"/></contact>'),
    "unknown geom 'nope'",
    'geom1="nope"',
    'pair',
    'geom1',
  ),
  C(
    'equality-unknown-body',
    model(top='<equality><weld body1="nope"/></equality>'),
    "unknown body 'nope'",
    'body1="nope"',
    'weld',
    'body1',
  ),
  C(
    'equality-unknown-joint',
    model(top='<equality><joint joint1="j" joint2="nope"/></equality>'),
    "unknown joint 'nope'",
    'joint2="nope"',
    'joint',
    'joint2',
  ),
  C(
    'geom-unknown-mesh',
    model(body='<geom type="mesh" mesh="nope"/>'),
    "unknown mesh 'nope'",
    'mesh="nope"',
    'geom',
    'mesh',
  ),
  C(
    'geom-unknown-hfield',
    model(world='<geom type="hfield" hfield="nope"/>'),
    "unknown hfield 'nope'",
    'hfield="nope"',
    'geom',
    'hfield',
  ),
  C(
    'mesh-geom-without-mesh',
    model(body='<geom type="mesh"/>'),
    'a mesh geom needs a mesh',
    '<geom type="mesh"/>',
    'geom',
    'mesh',
  ),
  C(
    'reference-to-wrong-kind',
    model(top='<actuator><motor joint="g"/></actuator>'),
    "unknown joint 'g'",
    'joint="g"',
    'motor',
    'joint',
  ),
  C(
    'geom-unknown-material',
    model(body='<geom size="0.1" material="nope"/>'),
    "unknown material 'nope'",
    'material="nope"',
    'geom',
    'material',
  ),
  C(
    'material-unknown-texture',
    model(pre='<asset>\n<material name="mat" texture="nope"/>\n</asset>'),
    "unknown texture 'nope'",
    'texture="nope"',
    'material',
    'texture',
  ),
  C(
    'camera-unknown-target',
    model(world='<camera mode="targetbody" target="nope"/>'),
    "unknown body 'nope'",
    'target="nope"',
    'camera',
    'target',
  ),
  # -------------------------------------------------------------- mass and inertia
  C(
    'negative-mass',
    model(body='<inertial pos="0 0 0" mass="-1" diaginertia="1 1 1"/>'),
    'mass and inertia cannot be negative',
    'mass="-1"',
    'inertial',
    'mass',
  ),
  C(
    'negative-diaginertia',
    model(body='<inertial pos="0 0 0" mass="1" diaginertia="-1 1 1"/>'),
    'mass and inertia cannot be negative',
    'diaginertia="-1 1 1"',
    'inertial',
    'diaginertia',
  ),
  C(
    'negative-geom-mass',
    model(world='<body><joint/><geom size="0.1" mass="-1"/></body>'),
    'mass, inertia or density are negative',
    'mass="-1"',
    'geom',
    'mass',
  ),
  C(
    'negative-density',
    model(world='<body><joint/><geom size="0.1" density="-1000"/></body>'),
    'mass, inertia or density are negative',
    'density="-1000"',
    'geom',
    'density',
  ),
  C(
    'zero-size-sphere',
    model(world='<body><joint/><geom type="sphere" size="0"/></body>'),
    r'size\[0\] must be positive for a sphere',
    'size="0"',
    'geom',
    'size',
  ),
  C(
    'sphere-without-size',
    model(world='<body><freejoint/><geom type="sphere"/></body>'),
    r'size\[0\] must be positive for a sphere',
    '<geom type="sphere"/>',
    'geom',
    'size',
  ),
  C(
    'negative-box-size',
    model(world='<body><joint/><geom type="box" size="0.1 -0.1 0.1"/></body>'),
    r'size\[1\] must be positive for a box',
    'size="0.1 -0.1 0.1"',
    'geom',
    'size',
  ),
  C(
    'inertia-triangle-inequality',
    model(body='<inertial pos="0 0 0" mass="1" diaginertia="1 1 3"/>'),
    r'inertia must satisfy A \+ B >= C',
    'diaginertia="1 1 3"',
    'inertial',
    None,
  ),
  C(
    'fullinertia-not-positive',
    model(body='<inertial pos="0 0 0" mass="1" fullinertia="1 1 1 5 0 0"/>'),
    'fullinertia is not positive semi-definite',
    'fullinertia=',
    'inertial',
    'fullinertia',
  ),
  C(
    'inertial-without-mass',
    model(body='<inertial pos="0 0 0" diaginertia="1 1 1"/>'),
    'missing required attribute',
    '<inertial',
    'inertial',
    'mass',
  ),
  C(
    'massless-moving-body',
    model(world='<body name="empty">\n<joint/>\n<site/>\n</body>'),
    'mass and inertia of moving bodies',
    '<body name="empty">',
    'body',
  ),
  C(
    'moving-body-zero-mass-geom',
    model(world='<body name="light">\n<joint/>\n<geom size="0.1" mass="0"/>\n</body>'),
    'mass and inertia of moving bodies',
    '<body name="light">',
    'body',
  ),
  C(
    'huge-size-overflows-inertia',
    model(
      world='<body>\n<joint/>\n<geom type="capsule" size="1e300" fromto="0 0 0 1 0 0"/>\n'
      '<geom size="0.1"/>\n</body>'
    ),
    r'(?i)finite|overflow|too large',
    'size="1e300"',
    'geom',
    'size',
  ),
  C(
    'two-inertials',
    model(
      body='<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>\n'
      '<inertial pos="0 0 0" mass="2" diaginertia="1 1 1"/>'
    ),
    'only one <inertial>',
    'mass="2"',
    'inertial',
  ),
  # -------------------------------------------------------------- joints
  C(
    'freejoint-in-worldbody',
    model(world='<freejoint/>'),
    'the world body cannot have <freejoint>',
    '<freejoint/>',
    'freejoint',
  ),
  C(
    'joint-in-worldbody',
    model(world='<joint name="wj"/>'),
    'the world body cannot have <joint>',
    '<joint name="wj"/>',
    'joint',
  ),
  C(
    'inertial-in-worldbody',
    model(world='<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>'),
    'the world body cannot have <inertial>',
    '<inertial',
    'inertial',
  ),
  C(
    'freejoint-class',
    model(world='<body><freejoint class="main"/><geom size="0.1"/></body>'),
    'unknown attribute of <freejoint>',
    '<freejoint class',
    'freejoint',
    'class',
  ),
  C(
    'range-without-limited',
    model(pre='<compiler autolimits="false"/>', body='<body><joint range="0 1"/></body>'),
    "joint has 'range' but not 'limited'",
    'range="0 1"',
    'joint',
    'range',
  ),
  C(
    'range-reversed',
    model(body='<body><joint limited="true" range="1 0"/><geom size="0.1"/></body>'),
    r'range\[0\] must be smaller than range\[1\]',
    'range="1 0"',
    'joint',
    'range',
  ),
  C(
    'range-empty',
    model(body='<body><joint type="slide" limited="true" range="0.5 0.5"/></body>'),
    r'range\[0\] must be smaller than range\[1\]',
    'range="0.5 0.5"',
    'joint',
    'range',
  ),
  C(
    'zero-joint-axis',
    model(body='<body><joint axis="0 0 0"/><geom size="0.1"/></body>'),
    'joint axis is too small',
    'axis="0 0 0"',
    'joint',
    'axis',
  ),
  C(
    'too-many-dofs',
    model(world='<body><freejoint/><joint/><geom size="0.1"/></body>'),
    'more than 6 degrees of freedom',
    '<body><freejoint/>',
    'body',
  ),
  # -------------------------------------------------------------- orientations
  C(
    'quat-and-euler',
    model(world='<body quat="1 0 0 0" euler="0 0 90"><geom size="0.1"/></body>'),
    r'orientation given twice \(quat and euler\)',
    'euler="0 0 90"',
    'body',
    'euler',
  ),
  C(
    'axisangle-and-zaxis-on-geom',
    model(body='<geom size="0.1" axisangle="0 0 1 30" zaxis="1 0 0"/>'),
    'orientation given twice',
    'zaxis="1 0 0"',
    'geom',
    'zaxis',
  ),
  C(
    'zero-quat',
    model(world='<body quat="0 0 0 0"><geom size="0.1"/></body>'),
    'quaternion is zero',
    'quat="0 0 0 0"',
    'body',
    'quat',
  ),
  C(
    'zero-quat-on-geom',
    model(body='<geom size="0.1" quat="0 0 0 0"/>'),
    'quaternion is zero',
    'quat="0 0 0 0"',
    'geom',
    'quat',
  ),
  C(
    'zero-quat-on-site',
    model(body='<site quat="0 0 0 0"/>'),
    'quaternion is zero',
    'quat="0 0 0 0"',
    'site',
    'quat',
  ),
  C(
    'zero-quat-on-inertial',
    model(body='<inertial pos="0 0 0" mass="1" diaginertia="1 1 1" quat="0 0 0 0"/>'),
    'quaternion is zero',
    'quat="0 0 0 0"',
    'inertial',
    'quat',
  ),
  C(
    'axisangle-zero-axis',
    model(world='<body axisangle="0 0 0 1"><geom size="0.1"/></body>'),
    'axisangle axis is too small',
    'axisangle="0 0 0 1"',
    'body',
    'axisangle',
  ),
  C(
    'xyaxes-parallel',
    model(world='<frame xyaxes="1 0 0 2 0 0"/>'),
    'xyaxes y axis is too small or parallel to x',
    'xyaxes=',
    'frame',
    'xyaxes',
  ),
  C(
    'zero-zaxis',
    model(world='<camera zaxis="0 0 0"/>'),
    'zaxis is too small',
    'zaxis="0 0 0"',
    'camera',
    'zaxis',
  ),
  C(
    'bad-eulerseq',
    model(pre='<compiler eulerseq="xyw"/>'),
    'eulerseq must be 3 characters',
    '<compiler',
    'compiler',
    'eulerseq',
  ),
  C(
    'fromto-on-sphere',
    model(body='<geom type="sphere" size="0.1" fromto="0 0 0 0 0 1"/>'),
    'fromto requires a capsule, cylinder, box or ellipsoid',
    'fromto=',
    'geom',
    'fromto',
  ),
  C(
    'fromto-degenerate',
    model(body='<geom type="capsule" size="0.1" fromto="0 0 1 0 0 1"/>'),
    'fromto points are too close',
    'fromto=',
    'geom',
    'fromto',
  ),
  C(
    'fromto-and-pos',
    model(body='<geom type="capsule" size="0.1" pos="0 0 1" fromto="0 0 0 0 0 1"/>'),
    'both pos and fromto',
    'fromto=',
    'geom',
    'fromto',
  ),
  C(
    'site-fromto-and-pos',
    model(body='<site type="capsule" size="0.1" pos="0 1 0" fromto="0 0 0 0 0 1"/>'),
    'both pos and fromto',
    'fromto=',
    'site',
    'fromto',
  ),
  # -------------------------------------------------------------- geoms and contacts
  C(
    'condim-2',
    model(body='<geom size="0.1" condim="2"/>'),
    'condim must be 1, 3, 4 or 6, got 2',
    'condim="2"',
    'geom',
    'condim',
  ),
  C(
    'pair-condim-5',
    model(top='<contact><pair geom1="g" geom2="g" condim="5"/></contact>'),
    'condim must be 1, 3, 4 or 6, got 5',
    'condim="5"',
    'pair',
    'condim',
  ),
  C(
    'plane-in-moving-body',
    model(body='<geom type="plane" size="1 1 1"/>'),
    'planes are only allowed in static bodies',
    'type="plane"',
    'geom',
    'type',
  ),
  C(
    'plane-zero-spacing',
    model(world='<geom type="plane" size="1 1 0"/>'),
    r'plane size\[2\]',
    'type="plane"',
    'geom',
    'size',
  ),
  C(
    'site-plane',
    model(body='<site type="plane"/>'),
    'sites cannot be planes',
    '<site type="plane"/>',
    'site',
    'type',
  ),
  C(
    'free-joint-in-child-body',
    model(body='<body><freejoint/><geom size="0.1"/></body>'),
    'free joint can only be used on top level',
    '<freejoint',
    'freejoint',
    None,
  ),
  C(
    'insidesite-missing-site',
    model(top='<sensor><insidesite objtype="geom" objname="g"/></sensor>'),
    'missing required attribute',
    '<insidesite',
    'insidesite',
    'site',
  ),
  C(
    'insidesite-unknown-object',
    model(top='<sensor><insidesite site="s" objtype="geom" objname="nope"/></sensor>'),
    'nope',
    'objname=',
    'insidesite',
    'objname',
  ),
  C(
    'pair-missing-geom2',
    model(top='<contact><pair geom1="g"/></contact>'),
    'missing required attribute',
    '<pair',
    'pair',
    'geom2',
  ),
  # -------------------------------------------------------------- actuators
  C(
    'actuator-no-target',
    model(top='<actuator><motor name="m"/></actuator>'),
    'actuator has no transmission target',
    '<motor name="m"/>',
    'motor',
  ),
  C(
    'actuator-two-targets',
    model(top='<actuator><motor joint="j" site="s"/></actuator>'),
    'actuator has more than one transmission target',
    '<motor joint="j" site="s"/>',
    'motor',
    'site',
  ),
  C(
    'kv-and-dampratio',
    model(top='<actuator><position joint="j" kp="10" kv="1" dampratio="1"/></actuator>'),
    'kv and dampratio cannot both be defined',
    'dampratio="1"',
    'position',
    'dampratio',
  ),
  C(
    'negative-kv',
    model(top='<actuator><position joint="j" kv="-1"/></actuator>'),
    'kv cannot be negative',
    'kv="-1"',
    'position',
    'kv',
  ),
  C(
    'damper-negative-ctrlrange',
    model(top='<actuator><damper joint="j" kv="1" ctrlrange="-1 0"/></actuator>'),
    'damper control range cannot be negative',
    'ctrlrange="-1 0"',
    'damper',
    'ctrlrange',
  ),
  C(
    'ctrlrange-reversed',
    model(top='<actuator><motor joint="j" ctrllimited="true" ctrlrange="1 -1"/></actuator>'),
    r'ctrlrange\[0\] must be smaller than ctrlrange\[1\]',
    'ctrlrange="1 -1"',
    'motor',
    'ctrlrange',
  ),
  C(
    'ctrlrange-without-ctrllimited',
    model(
      pre='<compiler autolimits="false"/>',
      top='<actuator><motor joint="j" ctrlrange="-1 1"/></actuator>',
    ),
    "actuator has 'ctrlrange' but not 'ctrllimited'",
    'ctrlrange="-1 1"',
    'motor',
    'ctrlrange',
  ),
  C(
    'slidersite-without-crank',
    model(top='<actuator><motor joint="j" slidersite="s"/></actuator>'),
    'need a slider-crank transmission',
    'slidersite="s"',
    'motor',
    'slidersite',
  ),
  # -------------------------------------------------------------- tendons
  C(
    'spatial-tendon-starts-with-geom',
    model(top='<tendon>\n<spatial>\n<geom geom="g"/>\n<site site="s"/>\n</spatial>\n</tendon>'),
    'wrapping geom at path element 0 is not between two sites',
    '<spatial>',
    'spatial',
  ),
  C(
    'spatial-tendon-one-site',
    model(top='<tendon>\n<spatial>\n<site site="s"/>\n</spatial>\n</tendon>'),
    'site at path element 0 needs a neighbour that is not a pulley',
    '<spatial>',
    'spatial',
  ),
  C(
    'empty-tendon',
    model(top='<tendon>\n<fixed name="t"/>\n</tendon>'),
    'a tendon needs at least one path element',
    '<fixed name="t"/>',
    'fixed',
  ),
  C(
    'fixed-tendon-on-ball-joint',
    model(
      world='<body name="c"><joint name="ball" type="ball"/><geom size="0.1"/></body>',
      top='<tendon><fixed><joint joint="ball" coef="1"/></fixed></tendon>',
    ),
    'fixed tendons can only use hinge and slide joints',
    'joint="ball" coef',
    'joint',
    'joint',
  ),
  C(
    'fixed-tendon-missing-coef',
    model(top='<tendon><fixed><joint joint="j"/></fixed></tendon>'),
    'missing required attribute',
    '<fixed><joint',
    'joint',
    'coef',
  ),
  C(
    'tendon-wraps-box',
    model(
      world='<geom name="box" type="box" size="0.1 0.1 0.1"/>',
      top='<tendon><spatial><site site="s"/><geom geom="box"/><site site="s"/></spatial></tendon>',
    ),
    'tendons can only wrap around sphere and cylinder geoms',
    '<geom geom="box"/>',
    'geom',
    'geom',
  ),
  C(
    'pulley-zero-divisor',
    model(top='<tendon><spatial><site site="s"/><pulley divisor="0"/></spatial></tendon>'),
    'pulley divisor must be positive',
    'divisor="0"',
    'pulley',
    'divisor',
  ),
  # -------------------------------------------------------------- bodies
  C(
    'mocap-with-joint',
    model(world='<body mocap="true"><joint/><geom size="0.1"/></body>'),
    'a mocap body must be a fixed child of the world',
    'mocap="true"',
    'body',
    'mocap',
  ),
  C(
    'nested-mocap',
    model(body='<body mocap="true"><geom size="0.1"/></body>'),
    'a mocap body must be a fixed child of the world',
    'mocap="true"',
    'body',
    'mocap',
  ),
  C(
    'ball-then-hinge',
    model(world='<body><joint type="ball"/><joint type="hinge"/><geom size="0.1"/></body>'),
    'a ball joint cannot be followed by a rotational joint',
    'type="hinge"/><geom',
    'joint',
  ),
  # -------------------------------------------------------------- unsupported features
  C(
    'composite',
    model(world='<body><composite type="particle" count="2 2 2" spacing="0.1"/></body>'),
    r'composite objects \(<composite>\) are not supported by jaxsim',
    '<composite',
    'composite',
  ),
  C(
    'flexcomp',
    model(world='<flexcomp name="f" type="grid" count="3 3 1" spacing="0.1 0.1 0.1"/>'),
    r'flexible bodies \(<flexcomp>\) are not supported by jaxsim',
    '<flexcomp',
    'flexcomp',
  ),
  C(
    'plugin-in-body',
    model(body='<plugin instance="p"/>'),
    r'engine plugins \(<plugin>\) are not supported by jaxsim',
    '<plugin',
    'plugin',
  ),
  C(
    'plugin-instance',
    model(
      pre='<extension><plugin plugin="mujoco.sdf.torus"><instance name="p"/></plugin></extension>'
    ),
    'instances of the mujoco.sdf.torus plugin are not supported by jaxsim',
    '<instance',
    'instance',
  ),
  C(
    'pid-instance-unused',
    model(pre='<extension><plugin plugin="mujoco.pid"><instance name="p"/></plugin></extension>'),
    'actuator not found for plugin instance 0',
    '<instance',
    'instance',
  ),
  C(
    'unknown-plugin',
    model(pre='<extension><plugin plugin="mujoco.elasticity.cable"/></extension>'),
    'plugin mujoco.elasticity.cable not found',
    '<plugin',
    'plugin',
    'plugin',
  ),
  C(
    'geom-plugin',
    model(body='<geom type="sdf" size="0.1"><plugin instance="torus"/></geom>'),
    'geom plugins are not supported by jaxsim',
    'type="sdf"',
    'plugin',
  ),
  C(
    'sdf-geom',
    model(body='<geom type="sdf" size="0.1"/>'),
    'SDF geoms are not supported by jaxsim',
    'type="sdf"',
    'geom',
    'type',
  ),
  C(
    'dcmotor-actuator',
    model(top='<actuator><dcmotor joint="j"/></actuator>'),
    r'actuator type <dcmotor> is not supported by jaxsim',
    '<dcmotor',
    'dcmotor',
  ),
  C(
    'dcmotor-in-default',
    model(pre='<default><dcmotor/></default>'),
    r'actuator type <dcmotor> is not supported by jaxsim',
    '<dcmotor',
    'dcmotor',
  ),
  C(
    'plugin-actuator-undeclared',
    model(top='<actuator><plugin joint="j" plugin="mujoco.pid"/></actuator>'),
    r"unrecognized plugin 'mujoco.pid' \(not declared in <extension>\)",
    '<plugin',
    'plugin',
    'plugin',
  ),
  C(
    'plugin-sensor-undeclared',
    model(
      top='<sensor><plugin objtype="site" objname="s" plugin="mujoco.sensor.touch_grid"/></sensor>'
    ),
    r"unrecognized plugin 'mujoco.sensor.touch_grid'",
    '<plugin',
    'plugin',
    'plugin',
  ),
  C(
    'tactile-sensor',
    model(top='<sensor><tactile geom="g" mesh="m"/></sensor>'),
    r'sensor type <tactile> is not supported by jaxsim',
    '<tactile',
    'tactile',
  ),
  C(
    'attach',
    model(world='<attach model="other" body="b" prefix="o-"/>'),
    "could not find model 'other'",
    '<attach',
    'attach',
    'model',
  ),
  C(
    'replicate-zero-count',
    model(world='<replicate count="0" offset="1 0 0"><geom size="0.1"/></replicate>'),
    'count must be positive',
    '<replicate',
    'replicate',
    'count',
  ),
  C(
    'replicate-without-count',
    model(world='<replicate offset="1 0 0"><geom size="0.1"/></replicate>'),
    'missing required attribute',
    '<replicate',
    'replicate',
    'count',
  ),
  C(
    'replicate-duplicate-names',
    model(world='<replicate count="2"><body name="r"/></replicate>\n<body name="r0"/>'),
    "repeated name 'r0' in body namespace",
    '<body name="r0"/>',
    'body',
    'name',
  ),
  C(
    'asset-model',
    model(pre='<asset><model name="other" file="other.xml"/></asset>'),
    'cannot read model file',
    '<model name',
    'model',
    'file',
  ),
  C(
    'flex-equality',
    model(top='<equality><flex flex="f"/></equality>'),
    'flex equality constraints are not supported by jaxsim',
    '<flex flex',
    'flex',
  ),
  C(
    'builtin-mesh-params',
    model(pre='<asset><mesh name="m" builtin="sphere" params="5"/></asset>'),
    'Sphere subdivision cannot be greater than 4',
    '<mesh',
    'mesh',
    'params',
  ),
  C(
    'builtin-mesh-procedural',
    model(pre='<asset><mesh name="m" builtin="grid" params="3 4 1 .1 .1 .1 2"/></asset>'),
    "builtin mesh type 'grid' .* is not supported by jaxsim",
    '<mesh',
    'mesh',
    'builtin',
  ),
  C(
    'global-coordinates',
    model(pre='<compiler coordinate="global"/>'),
    'global coordinates are not supported',
    '<compiler',
    'compiler',
    'coordinate',
  ),
  C(
    'actdim-too-large',
    model(
      top='<actuator><general joint="j" dyntype="integrator" actdim="99999999999"/></actuator>'
    ),
    r'(?i)too large|out of range',
    'actdim=',
    'general',
    'actdim',
  ),
  # -------------------------------------------------------------- keyframes and custom
  C(
    'keyframe-qpos-wrong-length',
    model(top='<keyframe><key name="k" qpos="0 0"/></keyframe>'),
    'expected 1 values, got 2',
    'qpos="0 0"',
    'key',
    'qpos',
  ),
  C(
    'keyframe-ctrl-without-actuators',
    model(top='<keyframe><key ctrl="1"/></keyframe>'),
    'expected 0 values, got 1',
    'ctrl="1"',
    'key',
    'ctrl',
  ),
  C(
    'keyframe-nan',
    model(top='<keyframe><key qpos="nan"/></keyframe>'),
    "non-finite value 'nan'",
    'qpos="nan"',
    'key',
    'qpos',
  ),
  C(
    'numeric-too-small',
    model(top='<custom><numeric name="n" size="1" data="1 2"/></custom>'),
    'numeric size must be positive and hold the data',
    '<numeric',
    'numeric',
    'size',
  ),
  # -------------------------------------------------------------- assets given inline
  C(
    'numeric-size-too-large',
    model(top='<custom><numeric name="n" size="100000000000"/></custom>'),
    r'(?i)too large|out of range',
    '<numeric',
    'numeric',
    'size',
  ),
  C(
    'mesh-face-not-triples',
    model(pre='<asset>\n<mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1" face="0 1"/>\n</asset>'),
    'face data must be triples of vertex indices',
    '<mesh name="m"',
    'mesh',
    'face',
  ),
  C(
    'mesh-face-out-of-range',
    model(pre='<asset>\n<mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1" face="0 1 5"/>\n</asset>'),
    'face index out of range',
    '<mesh name="m"',
    'mesh',
    'face',
  ),
  C(
    'mesh-negative-face',
    model(pre='<asset>\n<mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1" face="0 -1 2"/>\n</asset>'),
    'face index out of range',
    '<mesh name="m"',
    'mesh',
    'face',
  ),
  C(
    'mesh-too-few-vertices',
    model(pre='<asset>\n<mesh name="m" vertex="0 0 0 1 0 0 0 1 0"/>\n</asset>'),
    'vertex data must be at least 4 points',
    '<mesh name="m"',
    'mesh',
    'vertex',
  ),
  C(
    'mesh-partial-vertex',
    model(pre='<asset>\n<mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1 5"/>\n</asset>'),
    'vertex data must be at least 4 points of 3 numbers',
    '<mesh name="m"',
    'mesh',
    'vertex',
  ),
  C(
    'mesh-nothing',
    model(pre='<asset>\n<mesh name="m"/>\n</asset>'),
    'a mesh needs a file or vertex data',
    '<mesh name="m"/>',
    'mesh',
    'file',
  ),
  C(
    'hfield-zero-size',
    model(pre='<asset>\n<hfield name="h" nrow="2" ncol="2" size="1 1 0 0.1"/>\n</asset>'),
    'hfield sizes must be positive',
    '<hfield',
    'hfield',
    'size',
  ),
  C(
    'hfield-too-large',
    model(pre='<asset>\n<hfield name="h" nrow="10000000000" ncol="2" size="1 1 1 0.1"/>\n</asset>'),
    r'(?i)too large|out of range',
    '<hfield',
    'hfield',
    'nrow',
  ),
  C(
    'hfield-elevation-count',
    model(
      pre='<asset>\n<hfield name="h" nrow="2" ncol="2" size="1 1 1 0.1" elevation="1 2"/>\n</asset>'
    ),
    r'expected nrow\*ncol = 4 values',
    '<hfield',
    'hfield',
    'elevation',
  ),
]


def params(cases: list[Case]) -> list:
  return [
    pytest.param(c, id=c.id, marks=[xfail(c.known_bug)] if c.known_bug else []) for c in cases
  ]


@pytest.mark.parametrize('case', params(CASES))
def test_load_string_refuses(case: Case):
  with pytest.raises(jaxsim.ModelError, match=case.match) as err:
    jaxsim.load_string(case.xml)
  check(err, case)


def mujoco_loads(xml: str):
  """mujoco's MjModel of `xml`, or None where mujoco refuses it."""
  try:
    return mujoco.MjModel.from_xml_string(xml)
  except ValueError:
    return None


def as_mujoco(xml: str, match: str | None = None):
  """Loads `xml` with both: (jaxsim Model, MjModel) where mujoco loads it; where mujoco refuses
  it, checks that jaxsim raises a ModelError matching `match` and returns (None, None)."""
  mj = mujoco_loads(xml)
  if mj is None:
    with pytest.raises(jaxsim.ModelError, match=match):
      jaxsim.load_string(xml)
    return None, None
  return jaxsim.load_string(xml), mj


# <visual> children: jaxsim refuses exactly what mjXReader refuses (the grammar only; mjVisual
# does not enter the physics)
VISUAL_SNIPPETS = [
  '<rgba fog=""/>',
  '<rgba fog="0.1 0.2 0.3 nan"/>',
  '<rgba fog="1 2 3 4 5"/>',
  '<headlight active="auto"/>',
  '<headlight active="2"/>',
  '<headlight active="3"/>',
  '<headlight active="true"/>',
  '<headlight ambient="1"/>',
  '<global offwidth="-5" fovy=" "/>',
  '<global offwidth="1.5"/>',
  '<global orthographic="1"/>',
  '<global realtime="nan"/>',
  '<global realtime="-1"/>',
  '<global fovy="1e400"/>',
  '<global fovy="0x1p3"/>',
  '<global cameraid="1e3"/>',
  '<map fogstart="-inf" zfar="-1"/>',
  '<map znear="0"/>',
  '<quality numslices="0"/>',
  '<quality shadowsize="abc"/>',
  '<scale framelength="2" frustum="x"/>',
  '<global><x/></global>',
]


@pytest.mark.parametrize('snippet', VISUAL_SNIPPETS)
def test_visual_grammar_as_mujoco(snippet):
  xml = model(pre=f'<visual>{snippet}</visual>')
  as_mujoco(xml, '<(global|quality|headlight|map|scale|rgba|x)>')


SIZE_SNIPPETS = [
  'nuserdata="-1"',
  'nuserdata="3"',
  'nuser_geom="-2"',
  'nuser_body="-1" nuser_geom=""',
  'njmax="-2"',
  'njmax=""',
  'nconmax="-2"',
  'nstack="-5"',
  'memory="-1"',
  'memory=" 10M "',
  'memory="10MB"',
  'memory="16E"',
  'memory=""',
]


@pytest.mark.parametrize('attrs', SIZE_SNIPPETS)
def test_size_checks_as_mujoco(attrs):
  """<size>: jaxsim refuses the counts and memory strings mjXReader::Size refuses (nuserdata < 0:
  mujoco cannot make its mjData)."""
  as_mujoco(
    model(pre=f'<size {attrs}/>'), r"<size> attribute '(nuser\w*|njmax|nconmax|nstack|memory)'"
  )


def test_unknown_replicate_attribute_is_named():
  """MuJoCo ignores attributes of <replicate> it does not know (its own test data has
  prefix="A"); jaxsim loads the model as MuJoCo does and names what it ignored."""
  xml = model(world='<replicate count="2" offest="1 0 0"><geom size="0.1"/></replicate>')
  m = jaxsim.load_string(xml)
  assert m.ngeom == mujoco.MjModel.from_xml_string(xml).ngeom
  assert any("'offest' of <replicate>" in u for u in m.unsupported)


# inside a <frame> or <replicate>, MuJoCo 4.0.0's schema check does not reach: unknown attributes
# and children of leaf elements are ignored there (known attributes are still read strictly)
FRAME_SUBTREES = [
  '<frame><body bogus="1"><geom size="1"/></body></frame>',
  '<frame><geom size="1" bogus="1"/></frame>',
  '<frame><geom size="1" mass="abc"/></frame>',
  '<replicate count="2"><geom size="1" bogus="1"/></replicate>',
  '<frame><body><bogus/><geom size="1"/></body></frame>',
  '<frame><body><geom size="1"/><joint bogus="2"/></body></frame>',
  '<frame><geom size="1"><site/></geom></frame>',
  '<replicate count="2"><frame><geom size="1"><freejoint/></geom></frame></replicate>',
  '<body><geom size="1" bogus="1"/></body>',
  '<body><geom size="1"><site/></geom></body>',
]
# a <body> directly in <mujoco> is checked by MuJoCo's schema and otherwise ignored, a
# <replicate> in it not even checked
TOP_LEVEL_BODIES = [
  '<body><replicate count="2"><geom size="1" bogus="2"/></replicate></body>',
  '<body><geom bogus="1"/></body>',
  '<body><bogus/></body>',
]


@pytest.mark.parametrize('tree', TOP_LEVEL_BODIES)
def test_top_level_bodies_as_mujoco(tree):
  m, mj = as_mujoco(f'<mujoco>{tree}<worldbody/></mujoco>')
  assert m is None or m.ngeom == mj.ngeom == 0


@pytest.mark.parametrize('tree', FRAME_SUBTREES)
def test_frame_subtrees_as_mujoco(tree):
  m, mj = as_mujoco(f'<mujoco><worldbody>{tree}</worldbody></mujoco>')
  if m is not None:
    assert (m.ngeom, m.nbody, m.njnt, m.nsite) == (mj.ngeom, mj.nbody, mj.njnt, mj.nsite)
    assert any('is ignored, as MuJoCo does inside a <frame>' in u for u in m.unsupported)


def test_top_level_default_with_empty_class_is_main():
  """<default class=""> at the top is MuJoCo's main class (it loads there, unnamed)."""
  xml = model(pre='<default class=""><geom size="0.2"/></default>', world='<geom/>')
  m, mj = jaxsim.load_string(xml), mujoco.MjModel.from_xml_string(xml)
  np.testing.assert_allclose(np.asarray(m.geom_size), mj.geom_size)


def test_unknown_frame_attribute_is_ignored_as_mujoco():
  """MuJoCo 4 ignores attributes of a <frame> in a body tree that it does not know (a fuzz run
  found a light retagged as a frame, its dir kept); jaxsim loads it the same and names them."""
  xml = model(world='<frame dir="0 0 1" pos="0.3 0 0" bogus="x"><geom size="0.1"/></frame>')
  m = jaxsim.load_string(xml)
  mj = mujoco.MjModel.from_xml_string(xml)
  assert m.ngeom == mj.ngeom
  np.testing.assert_allclose(np.asarray(m.geom_pos), mj.geom_pos)
  assert any("'dir' of <frame>" in u for u in m.unsupported)
  assert any("'bogus' of <frame>" in u for u in m.unsupported)


def test_deep_nesting_refused():
  """5000 nested bodies: refused with a ModelError (MuJoCo's XML parser stops at depth ~500)."""
  n = 5000
  xml = '<mujoco><worldbody>' + '<body><geom size="0.1"/>' * n + '</body>' * n
  xml += '</worldbody></mujoco>'
  with pytest.raises(jaxsim.ModelError, match=r'(?i)nest|deep|depth') as err:
    jaxsim.load_string(xml)
  assert err.value.element == 'body'
  assert err.value.line == 1


def test_pgs_solver_is_kept():
  """solver="PGS" compiles to mjSOL_PGS (jaxsim.pgs solves it) and is not listed as unsupported."""
  m = jaxsim.load_string(model(pre='<option solver="PGS"/>'))
  assert m.opt.solver == 0
  assert not any('PGS' in u for u in m.unsupported), m.unsupported


# ------------------------------------------------------------------------------------------------
# mesh and height-field files with bad contents, given as assets


def stl(nfaces: int, stored: int | None = None, corner: float = 0.0) -> bytes:
  """A binary STL whose header claims `nfaces` triangles, with `stored` of them present."""
  tri = struct.pack('<12fH', 0, 0, 1, corner, 0, 0, 1, 0, 0, 0, 1, 0, 0)
  return b'\0' * 80 + struct.pack('<I', nfaces) + tri * (nfaces if stored is None else stored)


MESH_MODEL = """<mujoco>
  <asset>
    <mesh name="m" file="{file}"/>
  </asset>
  <worldbody>
    <geom type="mesh" mesh="m"/>
  </worldbody>
</mujoco>
"""

MESH_FILES = [
  pytest.param('m.stl', b'garbage', 'invalid header in STL file', 'file', id='stl-garbage'),
  pytest.param('m.stl', b'', "STL file 'm.stl' is empty", 'file', id='stl-empty'),
  pytest.param('m.stl', stl(10, 1), 'has wrong size', 'file', id='stl-too-short'),
  pytest.param('m.stl', stl(10, 11), 'has wrong size', 'file', id='stl-too-long'),
  pytest.param(
    'm.stl', stl(2**31 - 1, 1), 'number of faces should be between', 'file', id='stl-huge-count'
  ),
  pytest.param('m.stl', stl(0, 0), 'number of faces should be between', 'file', id='stl-no-faces'),
  pytest.param('m.stl', stl(1, corner=math.nan), 'not finite', 'file', id='stl-nan-vertex'),
  pytest.param(
    'm.stl',
    b'solid x\n facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 1 0 0\n'
    b'   vertex 0 1 0\n  endloop\n endfacet\nendsolid x\n',
    'perhaps this is an ASCII file',
    'file',
    id='stl-ascii',
  ),
  pytest.param(
    'm.stl',
    stl(1),
    'at least 4 vertices required',
    'file',
    id='stl-one-triangle',
  ),
  pytest.param(
    'm.obj',
    b'v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 9\n',
    'vertex index 8 does not exist',
    'file',
    id='obj-face-out-of-range',
  ),
  pytest.param(
    'm.obj', b'\x00\x01\x02 garbage\xff\nf 1 2 3\n', 'bad mesh file', 'file', id='obj-binary'
  ),
  pytest.param('m.msh', b'\0' * 8, 'missing header in MSH file', 'file', id='msh-short'),
  pytest.param('m.ply', b'ply\n', 'no decoder found', 'file', id='unknown-format'),
]


@pytest.mark.parametrize('name, data, match, attribute', MESH_FILES)
def test_bad_mesh_file(name, data, match, attribute):
  xml = MESH_MODEL.format(file=name)
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(xml, assets={name: data})
  check(err, Case('mesh', xml, match, '<mesh name="m"', 'mesh', attribute))


HFIELD_MODEL = """<mujoco>
  <asset>
    <hfield name="h" file="h.bin" size="1 1 1 0.1"/>
  </asset>
  <worldbody>
    <geom type="hfield" hfield="h"/>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize(
  'data, match',
  [
    pytest.param(b'\1\0', 'is too short', id='short'),
    pytest.param(struct.pack('<ii', 2, 2) + b'\0' * 12, 'inconsistent size', id='truncated'),
    pytest.param(struct.pack('<ii', 2**30, 2**30), 'inconsistent size', id='huge'),
    pytest.param(struct.pack('<ii', -2, -2), 'inconsistent size', id='negative'),
  ],
)
def test_bad_hfield_file(data, match):
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(HFIELD_MODEL, assets={'h.bin': data})
  check(err, Case('hfield', HFIELD_MODEL, match, '<hfield', 'hfield', 'file'))


def test_bad_png_hfield_file():
  xml = HFIELD_MODEL.replace('h.bin', 'h.png')
  match = "error decoding PNG file 'h.png'"
  with pytest.raises(jaxsim.ModelError, match=match) as err:
    jaxsim.load_string(xml, assets={'h.png': b'\x89PNG\r\n\x1a\n' + b'\0' * 30})
  check(err, Case('hfield', xml, match, '<hfield', 'hfield', 'file'))


# ------------------------------------------------------------------------------------------------
# files and includes, loaded from disk


def write(path, text: str) -> str:
  path.write_text(text)
  return str(path)


def test_missing_model_file(tmp_path):
  path = str(tmp_path / 'nope.xml')
  with pytest.raises(jaxsim.ModelError, match='cannot read model file') as err:
    jaxsim.load(path)
  assert err.value.file == path
  assert err.value.line is None


def test_missing_mesh_file(tmp_path):
  xml = MESH_MODEL.format(file='missing.stl')
  path = write(tmp_path / 'model.xml', xml)
  with pytest.raises(jaxsim.ModelError, match="cannot read mesh file '.*missing.stl'") as err:
    jaxsim.load(path)
  check(err, Case('mesh', xml, '', '<mesh name="m"', 'mesh', 'file'), file=path)


def test_missing_mesh_file_in_meshdir(tmp_path):
  xml = MESH_MODEL.format(file='m.stl').replace('<asset>', '<compiler meshdir="meshes"/>\n<asset>')
  (tmp_path / 'm.stl').write_bytes(stl(4))  # next to the model, but not in meshdir
  path = write(tmp_path / 'model.xml', xml)
  with pytest.raises(jaxsim.ModelError, match=r"cannot read mesh file '.*meshes.m\.stl'") as err:
    jaxsim.load(path)
  check(err, Case('mesh', xml, '', '<mesh name="m"', 'mesh', 'file'), file=path)


def test_missing_include_file(tmp_path):
  xml = model(pre='<include file="parts/nope.xml"/>')
  path = write(tmp_path / 'model.xml', xml)
  with pytest.raises(jaxsim.ModelError, match="cannot read included file '.*nope.xml'") as err:
    jaxsim.load(path)
  check(err, Case('include', xml, '', '<include', 'include', 'file'), file=path)


def test_include_without_file(tmp_path):
  xml = model(pre='<include/>')
  with pytest.raises(jaxsim.ModelError, match='missing required attribute') as err:
    jaxsim.load_string(xml)
  check(err, Case('include', xml, '', '<include/>', 'include', 'file'))


def test_include_of_itself(tmp_path):
  xml = model(pre='<include file="model.xml"/>')
  path = write(tmp_path / 'model.xml', xml)
  with pytest.raises(jaxsim.ModelError, match='recursive include') as err:
    jaxsim.load(path)
  check(err, Case('include', xml, '', '<include', 'include', 'file'), file=path)


def test_include_of_itself_relative_path(tmp_path, monkeypatch):
  """The cycle is found however the file is named: relative path, './', '../dir/'."""
  monkeypatch.chdir(tmp_path)
  xml = model(pre=f'<include file="../{tmp_path.name}/./model.xml"/>')
  write(tmp_path / 'model.xml', xml)
  with pytest.raises(jaxsim.ModelError, match='recursive include') as err:
    jaxsim.load('model.xml')
  assert err.value.element == 'include'
  assert err.value.attribute == 'file'
  assert err.value.line == line_of(xml, '<include')


def test_mutual_include(tmp_path):
  main = model(pre='<include file="a.xml"/>')
  a = '<mujoco>\n  <include file="b.xml"/>\n</mujoco>\n'
  b = '<mujoco>\n\n  <include file="a.xml"/>\n</mujoco>\n'
  path = write(tmp_path / 'main.xml', main)
  write(tmp_path / 'a.xml', a)
  b_path = write(tmp_path / 'b.xml', b)
  with pytest.raises(jaxsim.ModelError, match=r"recursive include of '.*a\.xml'") as err:
    jaxsim.load(path)
  check(err, Case('include', b, '', '<include', 'include', 'file'), file=b_path)


def test_include_of_itself_from_assets():
  """load_string resolves includes against `assets`; a self-include there is refused too."""
  part = '<mujoco>\n  <include file="self.xml"/>\n</mujoco>\n'
  xml = model(pre='<include file="self.xml"/>')
  with pytest.raises(jaxsim.ModelError, match='recursive include') as err:
    jaxsim.load_string(xml, assets={'self.xml': part.encode()})
  check(err, Case('include', part, '', '<include', 'include', 'file'), file='self.xml')


def test_include_chain_too_deep():
  """Distinct files including each other 40 deep: refused at the depth limit, not a stack crash."""
  assets = {f'f{i}.xml': f'<mujoco><include file="f{i + 1}.xml"/></mujoco>' for i in range(40)}
  assets['f40.xml'] = '<mujoco/>'
  with pytest.raises(jaxsim.ModelError, match='include') as err:
    jaxsim.load_string(model(pre='<include file="f0.xml"/>'), assets=assets)
  assert err.value.element == 'include'
  assert err.value.attribute == 'file'


def test_error_in_included_file_names_that_file(tmp_path):
  part = '<mujoco>\n  <worldbody>\n    <geom size="0.1" sise="1"/>\n  </worldbody>\n</mujoco>\n'
  main = model(top='<include file="part.xml"/>')
  path = write(tmp_path / 'main.xml', main)
  part_path = write(tmp_path / 'part.xml', part)
  with pytest.raises(jaxsim.ModelError, match='unknown attribute') as err:
    jaxsim.load(path)
  check(err, Case('part', part, '', 'sise=', 'geom', 'sise'), file=part_path)


def test_malformed_included_file(tmp_path):
  part = '<mujoco>\n  <worldbody>\n    <geom size="0.1">\n</mujoco>\n'
  path = write(tmp_path / 'main.xml', model(top='<include file="part.xml"/>'))
  part_path = write(tmp_path / 'part.xml', part)
  with pytest.raises(jaxsim.ModelError, match='malformed XML: mismatched tag') as err:
    jaxsim.load(path)
  assert err.value.file == part_path
  assert err.value.line == 4


def test_entities_in_included_file_refused(tmp_path):
  part = '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">]>\n<mujoco model="&a;"/>\n'
  path = write(tmp_path / 'main.xml', model(top='<include file="part.xml"/>'))
  part_path = write(tmp_path / 'part.xml', part)
  with pytest.raises(jaxsim.ModelError, match='entities are not allowed') as err:
    jaxsim.load(path)
  assert err.value.file == part_path
  assert err.value.line == 1


# ------------------------------------------------------------------------------------------------
# random corruptions of a valid model: ModelError or success, never a Python internals error

FUZZ_BASE = """<mujoco model="fuzz">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.005" integrator="RK4" gravity="0 0 -9.81"/>
  <default>
    <joint damping="0.1" armature="0.01"/>
    <geom rgba="0.8 0.6 0.4 1" friction="1 0.005 0.0001"/>
    <default class="arm">
      <geom type="capsule" size="0.05"/>
    </default>
  </default>
  <asset>
    <mesh name="tet" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/>
    <hfield name="terrain" nrow="2" ncol="3" size="1 1 0.2 0.1" elevation="0 1 0 1 0 1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <geom name="ground" type="hfield" hfield="terrain" pos="3 0 0"/>
    <body name="torso" pos="0 0 1" euler="0 0 0.3">
      <freejoint name="root"/>
      <geom name="torso_geom" type="box" size="0.2 0.1 0.05" mass="2"/>
      <site name="imu" pos="0 0 0.05"/>
      <body name="upper" pos="0.2 0 0" childclass="arm">
        <joint name="shoulder" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
        <geom name="upper_geom" fromto="0 0 0 0.3 0 0"/>
        <site name="elbow_site" pos="0.3 0 0"/>
        <body name="lower" pos="0.3 0 0">
          <joint name="elbow" type="hinge" axis="0 1 0" range="0 2"/>
          <geom name="lower_geom" fromto="0 0 0 0.3 0 0"/>
          <geom name="hand" type="mesh" mesh="tet" pos="0.3 0 0" contype="0"/>
          <site name="tip" pos="0.3 0 0"/>
        </body>
      </body>
      <body name="ball_body" pos="-0.2 0 0">
        <joint name="neck" type="ball"/>
        <inertial pos="0 0 0" mass="0.5" diaginertia="0.01 0.01 0.01"/>
        <geom name="head" type="sphere" size="0.08" quat="1 0 0 0"/>
      </body>
    </body>
    <body name="target" mocap="true" pos="1 1 1">
      <geom type="box" size="0.05 0.05 0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <exclude body1="torso" body2="upper"/>
    <pair geom1="floor" geom2="head" condim="3"/>
  </contact>
  <tendon>
    <fixed name="coupling">
      <joint joint="shoulder" coef="1"/>
      <joint joint="elbow" coef="-0.5"/>
    </fixed>
    <spatial name="cable" range="0 2">
      <site site="imu"/>
      <site site="elbow_site"/>
      <site site="tip"/>
    </spatial>
  </tendon>
  <equality>
    <connect body1="lower" body2="target" anchor="0.3 0 0" active="false"/>
    <joint joint1="shoulder" joint2="elbow" polycoef="0 1 0 0 0" active="false"/>
  </equality>
  <actuator>
    <motor name="m_shoulder" joint="shoulder" gear="10" ctrlrange="-1 1"/>
    <position name="p_elbow" joint="elbow" kp="20" dampratio="1" ctrlrange="0 2"/>
    <velocity name="v_tendon" tendon="coupling" kv="2"/>
    <general name="g_site" site="tip" gear="0 0 1 0 0 0" dyntype="filter" dynprm="0.1"/>
  </actuator>
  <sensor>
    <jointpos joint="shoulder"/>
    <ballquat joint="neck"/>
    <accelerometer site="imu"/>
    <framepos objtype="site" objname="tip" reftype="body" refname="torso"/>
    <tendonpos tendon="cable"/>
    <actuatorfrc actuator="m_shoulder"/>
  </sensor>
  <keyframe>
    <key name="home" qpos="0 0 1 1 0 0 0 0.5 1 1 0 0 0" ctrl="0 1 0 0"/>
  </keyframe>
</mujoco>
"""

_TOKENS = ['nan', 'inf', '-1', '0', '1e400', '1.2.3', 'x', '', '1 2 3 4 5 6 7 8 9 10 11', 'torso']


def _corrupt(rng: random.Random, text: str) -> str:
  """One random corruption of `text`.

  Deleted characters, truncation, a duplicated value (pos="1 2 3 1 2 3") or attribute, a value
  replaced by a hostile token, a value or attribute or whole element line dropped.
  """
  attrs = list(re.finditer(r'(\w+)="([^"]*)"', text))
  kind = rng.choice(['delete', 'truncate', 'dup-value', 'dup-value', 'dup-attr', 'token', 'token'])
  kind = rng.choice([kind, 'drop-value', 'drop-attr', 'drop-line'])
  lines = text.splitlines(keepends=True)
  empty = [i for i, line in enumerate(lines) if line.rstrip().endswith('/>')]
  if not attrs or (kind == 'drop-line' and not empty):
    kind = 'delete'
  if kind == 'delete' and text:
    i = rng.randrange(len(text))
    return text[:i] + text[i + rng.randint(1, 12) :]
  a = rng.choice(attrs)
  start, end = a.span(2)
  if kind == 'truncate':
    return text[: rng.randrange(len(text))]
  if kind == 'dup-value':
    return text[:start] + f'{a.group(2)} {a.group(2)}' + text[end:]
  if kind == 'dup-attr':
    return text[: a.end()] + ' ' + a.group(0) + text[a.end() :]
  if kind == 'token':
    return text[:start] + rng.choice(_TOKENS) + text[end:]
  if kind == 'drop-value' and len(a.group(2).split()) > 1:
    parts = a.group(2).split()
    del parts[rng.randrange(len(parts))]
    return text[:start] + ' '.join(parts) + text[end:]
  if kind == 'drop-line':
    del lines[rng.choice(empty)]
    return ''.join(lines)
  return text[: a.start()] + text[a.end() :]


def _fuzz_inputs(n: int = 30, seed: int = 20240611) -> list[str]:
  rng = random.Random(seed)
  out = []
  while len(out) < n:
    text = _corrupt(rng, FUZZ_BASE)
    if text != FUZZ_BASE and text not in out:
      out.append(text)
  return out


FUZZ = _fuzz_inputs()


def test_fuzz_base_model_is_valid():
  """The corruptions start from a model that jaxsim and MuJoCo both load."""
  mujoco = pytest.importorskip('mujoco')
  m = jaxsim.load_string(FUZZ_BASE)
  mj = mujoco.MjModel.from_xml_string(FUZZ_BASE)
  assert (m.nq, m.nv, m.nu, m.nbody, m.ntendon, m.nsensor) == (
    mj.nq,
    mj.nv,
    mj.nu,
    mj.nbody,
    mj.ntendon,
    mj.nsensor,
  )


# where jaxsim refuses what mujoco loads, by design: non-finite numbers in a physical attribute
# (mujoco warns and simulates NaN), and a <pair>/<exclude> missing one of its two names (mujoco
# resolves the empty name to the first unnamed geom or body)
_STRICTER = r"non-finite value|<(pair|exclude)> attribute '(geom|body)[12]': missing"


@pytest.mark.parametrize('index', range(len(FUZZ)), ids=lambda i: f'fuzz{i:02d}')
def test_corrupted_model_raises_only_model_error(index):
  """A corrupted model loads in jaxsim exactly where it loads in mujoco (but for _STRICTER);
  elsewhere the only error is a ModelError with a line inside the text."""
  text = FUZZ[index]
  theirs = mujoco_loads(text) is not None
  try:
    jaxsim.load_string(text)
    assert theirs, 'jaxsim loads a model mujoco refuses'
  except jaxsim.ModelError as e:
    assert e.reason
    if e.line is not None:
      assert 1 <= e.line <= text.count('\n') + 1, str(e)
    assert not theirs or re.search(_STRICTER, str(e)), f'mujoco loads it: {e}'


_STRUCT_TAGS = 'joint geom site body inertial camera light freejoint motor position'.split()
_STRUCT_TAGS += ['weld', 'fixed', 'exclude', 'pair', 'default', 'frame', 'touch']


def _restructure(rng: random.Random, text: str) -> str | None:
  """One structural change of `text`: an element duplicated, removed, moved under another
  element or renamed, or one of its attributes deleted (None where the draw does not apply)."""
  import copy
  import xml.etree.ElementTree as ET

  root = ET.fromstring(text)
  parent = {c: p for p in root.iter() for c in p}
  e = rng.choice([x for x in root.iter() if x is not root])
  kind = rng.choice(['dup', 'remove', 'move', 'retag', 'delattr'])
  if kind == 'dup':
    parent[e].insert(list(parent[e]).index(e) + 1, copy.deepcopy(e))
  elif kind == 'remove':
    parent[e].remove(e)
  elif kind == 'move':
    target = rng.choice(list(root.iter()))
    if target is e or e in list(target.iter()):
      return None
    parent[e].remove(e)
    target.append(e)
  elif kind == 'retag':
    e.tag = rng.choice(_STRUCT_TAGS)
  else:
    if not e.attrib:
      return None
    del e.attrib[rng.choice(sorted(e.attrib))]
  return ET.tostring(root, encoding='unicode')


def test_restructured_models_as_mujoco():
  """150 structural changes of FUZZ_BASE: jaxsim loads exactly those MuJoCo loads and refuses
  the rest with a ModelError. (Excepted: a <pair> or <exclude> missing one of its two names,
  which MuJoCo resolves to the first unnamed geom or body; jaxsim refuses it as missing.)"""
  rng = random.Random(20261126)
  texts = []
  while len(texts) < 150:
    t = _restructure(rng, FUZZ_BASE)
    if t is not None and t not in texts:
      texts.append(t)
  differ = []
  for t in texts:
    theirs = mujoco_loads(t) is not None
    try:
      jaxsim.load_string(t)
      ours = True
    except jaxsim.ModelError as e:
      ours = False
      if theirs and re.search(_STRICTER, str(e)):
        continue
    if ours != theirs:
      differ.append(t)
  assert not differ, f'{len(differ)} differ from mujoco; first:\n{differ[0]}'


def test_include_of_same_file_twice(tmp_path):
  """IncludeXML refuses a file name it has included before, anywhere in the model."""
  import mujoco

  write(tmp_path / 'parts.xml', '<mujoco><worldbody><geom size="1"/></worldbody></mujoco>')
  xml = model(pre='<include file="parts.xml"/>\n<include file="parts.xml"/>')
  path = write(tmp_path / 'model.xml', xml)
  with pytest.raises(ValueError, match='already included'):
    mujoco.MjModel.from_xml_path(path)
  with pytest.raises(jaxsim.ModelError, match="'parts.xml' already included") as err:
    jaxsim.load(path)
  assert err.value.line == [i for i, ln in enumerate(xml.splitlines(), 1) if '<include' in ln][1]
  assert (err.value.element, err.value.attribute) == ('include', 'file')


@pytest.mark.parametrize('in_top', [True, False])
def test_nested_include_resolves_against_model_directory_first(tmp_path, in_top):
  """A file included from a sub-folder's file is looked for next to the model first (MuJoCo's
  legacy rule), then next to the including file."""
  import mujoco

  (tmp_path / 'sub').mkdir()
  part = '<mujoco><worldbody><body name="{}"><geom size=".1"/></body></worldbody></mujoco>'
  write(tmp_path / 'sub' / 'a.xml', '<mujoco><include file="b.xml"/></mujoco>')
  write(tmp_path / 'sub' / 'b.xml', part.format('beside_a'))
  if in_top:
    write(tmp_path / 'b.xml', part.format('beside_model'))
  path = write(tmp_path / 'model.xml', '<mujoco><include file="sub/a.xml"/></mujoco>')
  mm = mujoco.MjModel.from_xml_path(path)
  m = jaxsim.load(path)
  names = [mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(mm.nbody)]
  assert names[1] == ('beside_model' if in_top else 'beside_a')
  assert list(m.names['body']) == names

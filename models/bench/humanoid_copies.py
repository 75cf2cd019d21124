"""N copies of a one-robot MJCF model side by side in one scene, for scaling benchmarks.

  python models/bench/humanoid_copies.py N [--source RIG.xml] [--spacing 2] > scene.xml

Every named element inside the robot (the first body under <worldbody>) and in <actuator>,
<sensor>, <tendon>, <equality> and <contact> is copied with the prefix `c{i}_`, and so is every
reference to it. Copies stand on a square grid `spacing` metres apart and do not collide with
each other: each copy's contype/conaffinity bits are shifted to a range of their own and the
world's geoms get the bits of every copy, so a copy's contacts with itself and with the world are
the source model's. Keyframes are dropped (their qpos would need the world's free joints
interleaved); <include>s and visual-only elements (materials, textures, skybox, <visual>) are
dropped so the scene is self-contained.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
RIG = os.path.join(HERE, 'humanoid_rig.xml')

# attributes that name an element (or refer to one by name) and are renamed per copy
_NAME_REFS = frozenset(
  'name joint joint1 joint2 jointinparent body body1 body2 geom geom1 geom2 site site1 site2 '
  'tendon tendon1 tendon2 actuator objname refname target sidesite cranksite slidersite'.split()
)
_ROBOT_SECTIONS = ('actuator', 'sensor', 'tendon', 'equality', 'contact')
_DROPPED = ('include', 'keyframe', 'visual', 'texture', 'material', 'skin')


def _rename(elem: ET.Element, prefix: str) -> None:
  for e in elem.iter():
    for key, value in e.attrib.items():
      if key in _NAME_REFS:
        e.set(key, prefix + value)


def _body_order_geoms(body: ET.Element) -> list[ET.Element]:
  """Geoms in the compiler's order: a body's own geoms, then its child bodies depth first."""
  out = list(body.findall('geom'))
  for child in body.findall('body'):
    out += _body_order_geoms(child)
  return out


def _geom_bits(source_xml: str) -> tuple[list[int], list[int]]:
  """Each geom's contype and conaffinity in document order, defaults resolved by the compiler."""
  sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository root
  import jaxsim

  m = jaxsim.load_string(source_xml)
  return [int(v) for v in m.geom_contype], [int(v) for v in m.geom_conaffinity]


def copies_xml(n: int, source: str = RIG, spacing: float = 2.0) -> str:
  """MJCF text of a scene with n non-colliding copies of the robot in `source`."""
  if n < 1:
    raise ValueError('n must be at least 1')
  root = ET.parse(source).getroot()
  for tag in _DROPPED:
    for parent in list(root.iter()):
      for child in parent.findall(tag):
        parent.remove(child)
  for e in root.iter():
    for key in ('material', 'texture'):
      e.attrib.pop(key, None)
  worldbody = root.find('worldbody')
  robot = worldbody.find('body')
  if robot is None:
    raise ValueError(f'{source}: no body under <worldbody>')
  # geoms in document order: the world's direct geoms and the robot's, as the compiler numbers them
  body_geoms = set(map(id, robot.iter('geom')))
  for asset in root.findall('asset'):
    if not len(asset):
      root.remove(asset)
  contype, conaffinity = _geom_bits(ET.tostring(root, encoding='unicode'))
  geoms = _body_order_geoms(worldbody)
  if len(geoms) != len(contype):
    raise ValueError(f'{source}: geoms outside the first body are not supported')
  width = max(1, max(contype + conaffinity).bit_length())
  if width * n > 31:
    raise ValueError(f'{n} copies of {width} collision bits do not fit in 31 bits')
  for g, ct, ca in zip(geoms, contype, conaffinity, strict=True):
    if id(g) in body_geoms:
      g.set('contype', str(ct))
      g.set('conaffinity', str(ca))
    else:
      # the world touches every copy as it touched the one robot
      g.set('contype', str(sum(ct << (width * i) for i in range(n))))
      g.set('conaffinity', str(sum(ca << (width * i) for i in range(n))))

  sections = {tag: root.find(tag) for tag in _ROBOT_SECTIONS}
  originals = {tag: list(sec) for tag, sec in sections.items() if sec is not None}
  for sec in sections.values():
    if sec is not None:
      for child in list(sec):
        sec.remove(child)
  index = list(worldbody).index(robot)
  worldbody.remove(robot)
  cols = math.ceil(math.sqrt(n))
  pos0 = [float(v) for v in robot.get('pos', '0 0 0').split()]
  for i in range(n):
    prefix = f'c{i}_'
    body = copy.deepcopy(robot)
    _rename(body, prefix)
    for g in body.iter('geom'):
      g.set('contype', str(int(g.get('contype')) << (width * i)))
      g.set('conaffinity', str(int(g.get('conaffinity')) << (width * i)))
    row, col = divmod(i, cols)
    pos = (pos0[0] + spacing * col, pos0[1] + spacing * row, pos0[2])
    body.set('pos', ' '.join(f'{v:g}' for v in pos))
    worldbody.insert(index + i, body)
    for tag, children in originals.items():
      for child in children:
        child = copy.deepcopy(child)
        _rename(child, prefix)
        sections[tag].append(child)
  root.set('model', f'{root.get("model", "robot")}_x{n}')
  ET.indent(root, space='  ')
  return ET.tostring(root, encoding='unicode') + '\n'


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('n', type=int)
  parser.add_argument('--source', default=RIG, help='one-robot MJCF file (default: humanoid_rig)')
  parser.add_argument('--spacing', type=float, default=2.0, help='metres between copies')
  args = parser.parse_args(argv)
  sys.stdout.write(copies_xml(args.n, args.source, args.spacing))
  return 0


if __name__ == '__main__':
  sys.exit(main())

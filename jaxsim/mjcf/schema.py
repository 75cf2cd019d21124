"""The MJCF grammar jaxsim reads: elements, their attributes, types, defaults and enum keywords.

Types: `f` float, `i` int, `b` bool, `s` string, `e:NAME` enum keyword (see ENUMS), `fl:NAME` set of
flag keywords. A count suffix gives the arity: `f3` exactly 3, `f1-3` one to three (a short value
overwrites the leading entries of the default, as MuJoCo does), `f*` any number.
"""

from __future__ import annotations

import enum
import math
import re

import numpy as np

from jaxsim._src.enums import (
  GEOM_SDF,
  NIMP,
  NREF,
  BiasType,
  CamLight,
  ConeType,
  DataType,
  DisableBit,
  DynType,
  EnableBit,
  GainType,
  GeomType,
  IntegratorType,
  JointType,
  ObjType,
  SensorType,
  SolverType,
  Stage,
)
from jaxsim.mjcf.frames import ORIENTATIONS
from jaxsim.mjcf.parse import Element


def _keywords(kind: type[enum.IntEnum], *keywords: str) -> dict[str, int]:
  """The MJCF keywords of an mjt* enum, each its member's name in lower case, as plain ints."""
  return {k: int(kind[k.upper()]) for k in keywords}


ENUMS: dict[str, dict[str, int]] = {
  'bool': {'false': 0, 'true': 1},
  # mjVisual's headlight.active (MuJoCo 4: a keyword, or the number it stands for)
  'headlight': {'false': 0, 'true': 1, 'auto': 2, '0': 0, '1': 1, '2': 2},
  'limited': {'false': 0, 'true': 1, 'auto': 2},
  'angle': {'radian': 0, 'degree': 1},
  'coordinate': {'local': 0, 'global': 1},
  'enable': {'disable': 0, 'enable': 1},
  'jointtype': _keywords(JointType, 'free', 'ball', 'slide', 'hinge'),
  'geomtype': {
    **_keywords(GeomType, 'plane', 'hfield', 'sphere', 'capsule', 'ellipsoid', 'cylinder'),
    **_keywords(GeomType, 'box', 'mesh'),
    'sdf': GEOM_SDF,
  },
  'integrator': _keywords(
    IntegratorType, 'Euler', 'RK4', 'implicit', 'implicitfast', 'variational'
  ),
  'cone': _keywords(ConeType, 'pyramidal', 'elliptic'),
  'jacobian': {'dense': 0, 'sparse': 1, 'auto': 2},
  'solver': _keywords(SolverType, 'PGS', 'CG', 'Newton'),
  'dyn': _keywords(DynType, 'none', 'integrator', 'filter', 'filterexact', 'muscle', 'user'),
  'gain': _keywords(GainType, 'fixed', 'affine', 'muscle', 'user'),
  'bias': _keywords(BiasType, 'none', 'affine', 'muscle', 'user'),
  'camlight': _keywords(CamLight, 'fixed', 'track', 'trackcom', 'targetbody', 'targetbodycom'),
  'projection': {'perspective': 0, 'orthographic': 1},
  'lighttype': {'spot': 0, 'directional': 1, 'point': 2, 'image': 3},
  'meshinertia': {'convex': 0, 'exact': 1, 'legacy': 2, 'shell': 3},
  # mjtMeshBuiltin; jaxsim makes sphere to plate (jaxsim/mjcf/mesh_builtin.py)
  'meshbuiltin': {
    'none': 0,
    'sphere': 1,
    'hemisphere': 2,
    'cone': 3,
    'supersphere': 4,
    'supertorus': 5,
    'wedge': 6,
    'plate': 7,
    'grid': 8,
    'box': 9,
    'cylinder': 10,
    'ellipsoid': 11,
    'square': 12,
    'disc': 13,
  },
  'fluidshape': {'none': 0, 'ellipsoid': 1},
  'frameobj': _keywords(ObjType, 'body', 'xbody', 'joint', 'geom', 'site', 'camera'),
  'datatype': _keywords(DataType, 'real', 'positive', 'axis', 'quaternion'),
  'stage': _keywords(Stage, 'none', 'pos', 'vel', 'acc'),
  'texture': {'2d': 0, 'cube': 1, 'skybox': 2},
  'builtin': {'none': 0, 'gradient': 1, 'checker': 2, 'flat': 3},
  'mark': {'none': 0, 'edge': 1, 'cross': 2, 'random': 3},
  'colorspace': {'auto': 0, 'linear': 1, 'sRGB': 2},
  # a texture's pixels in the model, or left by reference to its file (MuJoCo 4)
  'embed': {'false': 0, 'true': 1, 'auto': 2},
  'passthrough': {'none': 0, 'textures': 1},
  # a body's fuse: whether compiler fusestatic may merge it into its parent (MuJoCo 4)
  'fuse': {'false': 0, 'auto': 1},
  'interp': {'zoh': 0, 'linear': 1, 'cubic': 2},
  'lrmode': {'none': 0, 'muscle': 1, 'muscleuser': 2, 'all': 3},
  'texrole': {
    'rgb': 0,
    'occlusion': 1,
    'roughness': 2,
    'metallic': 3,
    'normal': 4,
    'opacity': 5,
    'emissive': 6,
    'rgba': 7,
    'orm': 8,
  },
}

_ORIENT = {'quat': 'f4', 'axisangle': 'f4', 'xyaxes': 'f6', 'zaxis': 'f3', 'euler': 'f3'}
_SOL = {'solref': f'f1-{NREF}', 'solimp': f'f1-{NIMP}'}

# Attributes of each element kind. Element kinds whose attributes can be set in <default> share
# their table with the default's child of the same tag.
JOINT = {
  'name': 's',
  'class': 's',
  'type': 'e:jointtype',
  'group': 'i',
  'pos': 'f3',
  'axis': 'f3',
  'springdamper': 'f2',
  'limited': 'e:limited',
  'actuatorfrclimited': 'e:limited',
  'solreflimit': f'f1-{NREF}',
  'solimplimit': f'f1-{NIMP}',
  'solreffriction': f'f1-{NREF}',
  'solimpfriction': f'f1-{NIMP}',
  'stiffness': 'f1-3',
  'range': 'f2',
  'actuatorfrcrange': 'f2',
  'actuatorgravcomp': 'b',
  'margin': 'f',
  'ref': 'f',
  'springref': 'f',
  'armature': 'f',
  'damping': 'f1-3',
  'frictionloss': 'f',
  'user': 'f*',
}
FREEJOINT = {'name': 's', 'group': 'i', 'align': 'e:limited'}
GEOM = {
  'name': 's',
  'class': 's',
  'type': 'e:geomtype',
  'contype': 'i',
  'conaffinity': 'i',
  'condim': 'i',
  'group': 'i',
  'priority': 'i',
  'size': 'f1-3',
  'material': 's',
  'friction': 'f1-3',
  'mass': 'f',
  'density': 'f',
  'shellinertia': 'b',
  'solmix': 'f',
  **_SOL,
  'margin': 'f',
  'gap': 'f',
  'surfacevel': 'f1-6',
  'adhesion': 'f',
  'fromto': 'f6',
  'pos': 'f3',
  **_ORIENT,
  'hfield': 's',
  'mesh': 's',
  'fitscale': 'f',
  'rgba': 'f4',
  'fluidshape': 'e:fluidshape',
  'fluidcoef': 'f1-5',
  'user': 'f*',
}
SITE = {
  'name': 's',
  'class': 's',
  'type': 'e:geomtype',
  'group': 'i',
  'pos': 'f3',
  **_ORIENT,
  'material': 's',
  'size': 'f1-3',
  'fromto': 'f6',
  'rgba': 'f4',
  'user': 'f*',
}
CAMERA = {
  'name': 's',
  'class': 's',
  'projection': 'e:projection',
  'fovy': 'f',
  'ipd': 'f',
  'resolution': 'i2',
  'output': 's',
  'pos': 'f3',
  **_ORIENT,
  'mode': 'e:camlight',
  'target': 's',
  'focal': 'f2',
  'focalpixel': 'f2',
  'principal': 'f2',
  'principalpixel': 'f2',
  'sensorsize': 'f2',
  'user': 'f*',
  'orthographic': 'b',
}
CAMERA_LENS = ('focal', 'focalpixel', 'principal', 'principalpixel')
LIGHT = {
  'name': 's',
  'class': 's',
  'directional': 'b',
  'type': 'e:lighttype',
  'castshadow': 'b',
  'active': 'b',
  'pos': 'f3',
  'dir': 'f3',
  'bulbradius': 'f',
  'intensity': 'f',
  'range': 'f',
  'attenuation': 'f3',
  'cutoff': 'f',
  'softness': 'f',
  'exponent': 'f',
  'ambient': 'f3',
  'diffuse': 'f3',
  'specular': 'f3',
  'mode': 'e:camlight',
  'target': 's',
  'texture': 's',
}
PAIR = {
  'name': 's',
  'class': 's',
  'geom1': 's',
  'geom2': 's',
  'condim': 'i',
  'friction': 'f1-5',
  **_SOL,
  'solreffriction': f'f1-{NREF}',
  'gap': 'f',
  'margin': 'f',
  'adhesion': 'f',
}
EXCLUDE = {'name': 's', 'body1': 's', 'body2': 's'}
EQUALITY = {'name': 's', 'class': 's', 'active': 'b', **_SOL}
EQ_CONNECT = {**EQUALITY, 'body1': 's', 'body2': 's', 'anchor': 'f3', 'site1': 's', 'site2': 's'}
EQ_WELD = {**EQ_CONNECT, 'relpose': 'f7', 'torquescale': 'f'}
EQ_JOINT = {**EQUALITY, 'joint1': 's', 'joint2': 's', 'polycoef': 'f1-5'}
EQ_TENDON = {**EQUALITY, 'tendon1': 's', 'tendon2': 's', 'polycoef': 'f1-5'}
TENDON = {
  'name': 's',
  'class': 's',
  'group': 'i',
  'limited': 'e:limited',
  'actuatorfrclimited': 'e:limited',
  'range': 'f2',
  'actuatorfrcrange': 'f2',
  'solreflimit': f'f1-{NREF}',
  'solimplimit': f'f1-{NIMP}',
  'solreffriction': f'f1-{NREF}',
  'solimpfriction': f'f1-{NIMP}',
  'frictionloss': 'f',
  'springlength': 'f1-2',
  'width': 'f',
  'material': 's',
  'margin': 'f',
  'stiffness': 'f1-3',
  'damping': 'f1-3',
  'armature': 'f',
  'rgba': 'f4',
  'user': 'f*',
}
_ACT_BASE = {
  'name': 's',
  'class': 's',
  'group': 'i',
  'nsample': 'i',
  'interp': 'e:interp',
  'delay': 'f',
  'ctrlrange': 'f2',
  'user': 'f*',
  'ctrllimited': 'e:limited',
  'forcelimited': 'e:limited',
  'forcerange': 'f2',
  'lengthrange': 'f2',
  'gear': 'f1-6',
  'damping': 'f1-3',
  'armature': 'f',
  'cranklength': 'f',
}
_TRN = {
  'joint': 's',
  'jointinparent': 's',
  'tendon': 's',
  'slidersite': 's',
  'cranksite': 's',
  'site': 's',
  'refsite': 's',
  'body': 's',
}
GENERAL = {
  **_ACT_BASE,
  **_TRN,
  'actlimited': 'e:limited',
  'actrange': 'f2',
  'actdim': 'i',
  'dyntype': 'e:dyn',
  'gaintype': 'e:gain',
  'biastype': 'e:bias',
  'dynprm': 'f1-10',
  'gainprm': 'f1-10',
  'biasprm': 'f1-10',
  'actearly': 'b',
  'input': 's',
  'velrange': 'f2',
  'ffrange': 'f2',
}
SHORTCUT_PARAMS = {
  'motor': {},
  'position': {'kp': 'f', 'kv': 'f', 'dampratio': 'f', 'timeconst': 'f', 'inheritrange': 'f'},
  'velocity': {'kv': 'f'},
  'intvelocity': {
    'kp': 'f',
    'kv': 'f',
    'dampratio': 'f',
    'inheritrange': 'f',
    'actlimited': 'e:limited',
    'actrange': 'f2',
  },
  'damper': {'kv': 'f'},
  'cylinder': {'timeconst': 'f', 'area': 'f', 'diameter': 'f', 'bias': 'f3'},
  'muscle': {
    'timeconst': 'f2',
    'tausmooth': 'f',
    'range': 'f2',
    'force': 'f',
    'scale': 'f',
    'lmin': 'f',
    'lmax': 'f',
    'vmax': 'f',
    'fpmax': 'f',
    'fvmax': 'f',
  },
  'adhesion': {'gain': 'f'},
}
ACTUATORS = {
  'general': GENERAL,
  **{k: {**_ACT_BASE, **_TRN, **v} for k, v in SHORTCUT_PARAMS.items()},
}
UNSUPPORTED_ACTUATORS = ('orientation', 'pid', 'dcmotor')
# <actuator><plugin>: an engine plugin's actuator (mujoco.pid), with general's dynamics
ACTUATOR_PLUGIN = {
  **_ACT_BASE,
  **_TRN,
  'plugin': 's',
  'instance': 's',
  'actlimited': 'e:limited',
  'actrange': 'f2',
  'actdim': 'i',
  'dyntype': 'e:dyn',
  'dynprm': 'f1-10',
  'actearly': 'b',
}
MESH = {
  'name': 's',
  'class': 's',
  'content_type': 's',
  'file': 's',
  'vertex': 'f*',
  'normal': 'f*',
  'texcoord': 'f*',
  'face': 'i*',
  'refpos': 'f3',
  'refquat': 'f4',
  'scale': 'f3',
  'smoothnormal': 'b',
  'maxhullvert': 'i',
  'inertia': 'e:meshinertia',
  'builtin': 'e:meshbuiltin',
  'params': 'f*',
  'material': 's',
}
MATERIAL = {
  'name': 's',
  'class': 's',
  'texture': 's',
  'texrepeat': 'f2',
  'texuniform': 'b',
  'emission': 'f',
  'specular': 'f',
  'shininess': 'f',
  'reflectance': 'f',
  'metallic': 'f',
  'roughness': 'f',
  'rgba': 'f4',
}
LAYER = {'texture': 's', 'role': 'e:texrole'}
HFIELD = {
  'name': 's',
  'content_type': 's',
  'file': 's',
  'nrow': 'i',
  'ncol': 'i',
  'size': 'f4',
  'elevation': 'f*',
}
TEXTURE = {
  'name': 's',
  'class': 's',
  'type': 'e:texture',
  'colorspace': 'e:colorspace',
  'content_type': 's',
  'file': 's',
  'gridsize': 'i2',
  'gridlayout': 's',
  'fileright': 's',
  'fileleft': 's',
  'fileup': 's',
  'filedown': 's',
  'filefront': 's',
  'fileback': 's',
  'builtin': 'e:builtin',
  'rgb1': 'f3',
  'rgb2': 'f3',
  'mark': 'e:mark',
  'markrgb': 'f3',
  'random': 'f',
  'width': 'i',
  'height': 'i',
  'hflip': 'b',
  'vflip': 'b',
  'nchannel': 'i',
  'embed': 'e:embed',
}
# a cube or skybox texture's six face files
TEXTURE_CUBE_FILES = ('fileright', 'fileleft', 'fileup', 'filedown', 'filefront', 'fileback')
# what <default><texture> sets: all of a texture's attributes but its name, class and files
_NOT_TEXTURE_DEFAULT = ('name', 'class', 'content_type', 'file', *TEXTURE_CUBE_FILES)
TEXTURE_DEFAULT = {k: v for k, v in TEXTURE.items() if k not in _NOT_TEXTURE_DEFAULT}
SKIN = {
  'name': 's',
  'file': 's',
  'material': 's',
  'rgba': 'f4',
  'inflate': 'f',
  'vertex': 'f*',
  'texcoord': 'f*',
  'face': 'i*',
  'group': 'i',
}
BODY = {
  'name': 's',
  'childclass': 's',
  'pos': 'f3',
  **_ORIENT,
  'mocap': 'b',
  'gravcomp': 'f',
  'fuse': 'e:fuse',
  'sleep': 's',
  'simple': 's',
  'user': 'f*',
}
BONE = {'body': 's', 'bindpos': 'f3', 'bindquat': 'f4', 'vertid': 'i*', 'vertweight': 'f*'}
FRAME = {'name': 's', 'childclass': 's', 'pos': 'f3', **_ORIENT}
REPLICATE = {'count': 'i', 'offset': 'f3', 'euler': 'f3', 'sep': 's', 'childclass': 's'}
INERTIAL = {
  'pos': 'f3',
  'quat': 'f4',
  'mass': 'f',
  'diaginertia': 'f3',
  'axisangle': 'f4',
  'xyaxes': 'f6',
  'zaxis': 'f3',
  'euler': 'f3',
  'fullinertia': 'f6',
}
COMPILER = {
  'autolimits': 'b',
  'boundmass': 'f',
  'boundinertia': 'f',
  'settotalmass': 'f',
  'balanceinertia': 'b',
  'strippath': 'b',
  'coordinate': 'e:coordinate',
  'angle': 'e:angle',
  'fitaabb': 'b',
  'eulerseq': 's',
  'meshdir': 's',
  'texturedir': 's',
  'discardvisual': 'b',
  'usethread': 'b',
  'fusestatic': 'b',
  'inertiafromgeom': 'e:limited',
  'inertiagrouprange': 'i2',
  'saveinertial': 'b',
  'assetdir': 's',
  'alignfree': 'b',
  'conflict': 's',
  'passthrough': 'e:passthrough',
  # how the model is saved as MJCF (mj_saveXML): no effect on the compiled model
  'savecompiled': 'b',
  'savecanonical': 'b',
}
LENGTHRANGE = {
  'mode': 'e:lrmode',
  'useexisting': 'b',
  'uselimit': 'b',
  'accel': 'f',
  'maxforce': 'f',
  'timeconst': 'f',
  'timestep': 'f',
  'inttotal': 'f',
  'interval': 'f',
  'tolrange': 'f',
}
OPTION = {
  'timestep': 'f',
  'impratio': 'f',
  'tolerance': 'f',
  'ls_tolerance': 'f',
  'noslip_tolerance': 'f',
  'ccd_tolerance': 'f',
  'sleep_tolerance': 'f',
  'gravity': 'f3',
  'wind': 'f3',
  'magnetic': 'f3',
  'density': 'f',
  'viscosity': 'f',
  'o_margin': 'f',
  'o_solref': f'f1-{NREF}',
  'o_solimp': f'f1-{NIMP}',
  'o_friction': 'f1-5',
  'integrator': 'e:integrator',
  'cone': 'e:cone',
  'jacobian': 'e:jacobian',
  'solver': 'e:solver',
  'iterations': 'i',
  'ls_iterations': 'i',
  'noslip_iterations': 'i',
  'ccd_iterations': 'i',
  'sdf_iterations': 'i',
  'sdf_initpoints': 'i',
  'actuatorgroupdisable': 'i*',
}
# Disable flags (bit set when 'disable') and enable flags (bit set when 'enable'), by bit: a flag's
# index is its bit. The enable flags go on with MuJoCo 4's sleep and diagexact, which EnableBit
# leaves out (the engine does not implement them).
DISABLE_FLAGS = [bit.name.lower() for bit in DisableBit]
ENABLE_FLAGS = [bit.name.lower() for bit in EnableBit] + ['sleep', 'diagexact']
FLAG = {name: 'e:enable' for name in DISABLE_FLAGS + ENABLE_FLAGS}
SIZE = {
  'memory': 's',
  'njmax': 'i',
  'nconmax': 'i',
  'nstack': 'i',
  'nuserdata': 'i',
  'nkey': 'i',
  **{
    f'nuser_{k}': 'i'
    for k in ('body', 'jnt', 'geom', 'site', 'cam', 'tendon', 'actuator', 'sensor')
  },
}
STATISTIC = {'meaninertia': 'f', 'meanmass': 'f', 'meansize': 'f', 'extent': 'f', 'center': 'f3'}
# <visual>'s children: read only for their grammar (mjVisual does not enter the physics), so
# numbers are MuJoCo's plain reals ('r': nan and inf accepted, as mjXReader does)
VISUAL = {
  'global': {
    'cameraid': 'i',
    'orthographic': 'b',
    **dict.fromkeys(('fovy', 'ipd', 'azimuth', 'elevation', 'linewidth', 'glow', 'realtime'), 'r'),
    'offwidth': 'i',
    'offheight': 'i',
    'ellipsoidinertia': 'b',
    'bvactive': 'b',
  },
  'quality': dict.fromkeys(('shadowsize', 'offsamples', 'numslices', 'numstacks', 'numquads'), 'i'),
  'headlight': {'ambient': 'r3', 'diffuse': 'r3', 'specular': 'r3', 'active': 'e:headlight'},
  'map': dict.fromkeys(
    (
      'stiffness stiffnessrot force torque alpha fogstart fogend znear zfar haze shadowclip '
      'shadowscale actuatortendon'
    ).split(),
    'r',
  ),
  'scale': dict.fromkeys(
    (
      'forcewidth contactwidth contactheight connect com camera light selectpoint jointlength '
      'jointwidth actuatorlength actuatorwidth framelength framewidth constraint slidercrank '
      'frustum'
    ).split(),
    'r',
  ),
  'rgba': dict.fromkeys(
    (
      'fog haze force inertia joint actuator actuatornegative actuatorpositive com camera light '
      'selectpoint connect contactpoint contactforce contactfriction contacttorque contactgap '
      'rangefinder constraint slidercrank crankbroken frustum bv bvactive'
    ).split(),
    'r4',
  ),
}
KEY = {
  'name': 's',
  'time': 'f',
  'qpos': 'f*',
  'qvel': 'f*',
  'act': 'f*',
  'mpos': 'f*',
  'mquat': 'f*',
  'ctrl': 'f*',
}
NUMERIC = {'name': 's', 'size': 'i', 'data': 'f*'}
TEXT = {'name': 's', 'data': 's'}
TUPLE = {'name': 's'}
TUPLE_ELEMENT = {'objtype': 's', 'objname': 's', 'prm': 'f'}

# Sensors: MuJoCo's type code and the attributes naming the measured object.
_SENSOR_BASE = {
  'name': 's',
  'nsample': 'i',
  'interp': 'e:interp',
  'delay': 'f',
  'interval': 'f1-2',
  'cutoff': 'f',
  'noise': 'f',
  'user': 'f*',
}
_FRAME_OBJ = {'objtype': 'e:frameobj', 'objname': 's'}
_FRAME_REF = {'reftype': 'e:frameobj', 'refname': 's'}
_PAIR_OBJ = {'geom1': 's', 'geom2': 's', 'body1': 's', 'body2': 's'}
SENSOR_TYPES: dict[str, tuple[SensorType, dict[str, str]]] = {
  'touch': (SensorType.TOUCH, {'site': 's'}),
  'accelerometer': (SensorType.ACCELEROMETER, {'site': 's'}),
  'velocimeter': (SensorType.VELOCIMETER, {'site': 's'}),
  'gyro': (SensorType.GYRO, {'site': 's'}),
  'force': (SensorType.FORCE, {'site': 's'}),
  'torque': (SensorType.TORQUE, {'site': 's'}),
  'magnetometer': (SensorType.MAGNETOMETER, {'site': 's'}),
  'rangefinder': (SensorType.RANGEFINDER, {'site': 's', 'camera': 's', 'data': 's'}),
  'camprojection': (SensorType.CAMPROJECTION, {'site': 's', 'camera': 's'}),
  'jointpos': (SensorType.JOINTPOS, {'joint': 's'}),
  'jointvel': (SensorType.JOINTVEL, {'joint': 's'}),
  'tendonpos': (SensorType.TENDONPOS, {'tendon': 's'}),
  'tendonvel': (SensorType.TENDONVEL, {'tendon': 's'}),
  'actuatorpos': (SensorType.ACTUATORPOS, {'actuator': 's'}),
  'actuatorvel': (SensorType.ACTUATORVEL, {'actuator': 's'}),
  'actuatorfrc': (SensorType.ACTUATORFRC, {'actuator': 's'}),
  'jointactuatorfrc': (SensorType.JOINTACTFRC, {'joint': 's'}),
  'tendonactuatorfrc': (SensorType.TENDONACTFRC, {'tendon': 's'}),
  'ballquat': (SensorType.BALLQUAT, {'joint': 's'}),
  'ballangvel': (SensorType.BALLANGVEL, {'joint': 's'}),
  'jointlimitpos': (SensorType.JOINTLIMITPOS, {'joint': 's'}),
  'jointlimitvel': (SensorType.JOINTLIMITVEL, {'joint': 's'}),
  'jointlimitfrc': (SensorType.JOINTLIMITFRC, {'joint': 's'}),
  'tendonlimitpos': (SensorType.TENDONLIMITPOS, {'tendon': 's'}),
  'tendonlimitvel': (SensorType.TENDONLIMITVEL, {'tendon': 's'}),
  'tendonlimitfrc': (SensorType.TENDONLIMITFRC, {'tendon': 's'}),
  'framepos': (SensorType.FRAMEPOS, {**_FRAME_OBJ, **_FRAME_REF}),
  'framequat': (SensorType.FRAMEQUAT, {**_FRAME_OBJ, **_FRAME_REF}),
  'framexaxis': (SensorType.FRAMEXAXIS, {**_FRAME_OBJ, **_FRAME_REF}),
  'frameyaxis': (SensorType.FRAMEYAXIS, {**_FRAME_OBJ, **_FRAME_REF}),
  'framezaxis': (SensorType.FRAMEZAXIS, {**_FRAME_OBJ, **_FRAME_REF}),
  'framelinvel': (SensorType.FRAMELINVEL, {**_FRAME_OBJ, **_FRAME_REF}),
  'frameangvel': (SensorType.FRAMEANGVEL, {**_FRAME_OBJ, **_FRAME_REF}),
  'framelinacc': (SensorType.FRAMELINACC, _FRAME_OBJ),
  'frameangacc': (SensorType.FRAMEANGACC, _FRAME_OBJ),
  'subtreecom': (SensorType.SUBTREECOM, {'body': 's'}),
  'subtreelinvel': (SensorType.SUBTREELINVEL, {'body': 's'}),
  'subtreeangmom': (SensorType.SUBTREEANGMOM, {'body': 's'}),
  'insidesite': (SensorType.INSIDESITE, {'site': 's', **_FRAME_OBJ}),
  'distance': (SensorType.GEOMDIST, _PAIR_OBJ),
  'normal': (SensorType.GEOMNORMAL, _PAIR_OBJ),
  'fromto': (SensorType.GEOMFROMTO, _PAIR_OBJ),
  'contact': (
    SensorType.CONTACT,
    {
      **_PAIR_OBJ,
      'subtree1': 's',
      'subtree2': 's',
      'site': 's',
      'num': 'i',
      'data': 's',
      'reduce': 's',
    },
  ),
  'e_potential': (SensorType.E_POTENTIAL, {}),
  'e_kinetic': (SensorType.E_KINETIC, {}),
  'clock': (SensorType.CLOCK, {}),
  'plugin': (
    SensorType.PLUGIN,
    {'plugin': 's', 'instance': 's', 'objtype': 's', 'objname': 's', **_FRAME_REF},
  ),
  'user': (
    SensorType.USER,
    {
      'objtype': 's',
      'objname': 's',
      'datatype': 'e:datatype',
      'needstage': 'e:stage',
      'dim': 'i',
    },
  ),
}
SENSORS = {k: {**_SENSOR_BASE, **attrs} for k, (_, attrs) in SENSOR_TYPES.items()}
UNSUPPORTED_SENSORS = ('tactile',)

# Elements that MuJoCo accepts but jaxsim cannot compile: named in the error.
UNSUPPORTED_ELEMENTS = {
  'composite': 'composite objects (<composite>)',
  'flexcomp': 'flexible bodies (<flexcomp>)',
  'deformable': 'deformable objects (<deformable>)',
  'plugin': 'engine plugins (<plugin>)',
  'extension': 'engine plugins (<extension>)',
}

# Which table a child of <default> uses, keyed by tag.
DEFAULT_CHILDREN = {
  'mesh': MESH,
  'material': MATERIAL,
  'texture': TEXTURE_DEFAULT,
  'joint': JOINT,
  'geom': GEOM,
  'site': SITE,
  'camera': CAMERA,
  'light': LIGHT,
  'pair': PAIR,
  'equality': EQUALITY,
  'tendon': TENDON,
  **ACTUATORS,
}

# Attributes not settable in <default> (MuJoCo's 'nodefault').
NODEFAULT = {'name', 'class', 'lengthrange', *_TRN}

_ARITY = re.compile(r'^(f|i|r)(\*|\d+(?:-\d+)?)?$')


# Number tokens as MuJoCo's C-locale strtod/strtol read them (ASCII only: Python's float() and
# int() would also take '1_0' and non-ASCII digits). Tokens are separated by ASCII whitespace.
_SPACE = re.compile(r'[ \t\n\v\f\r]+')
_INT = re.compile(r'[+-]?[0-9]+')
_DECIMAL = re.compile(r'[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?')
_HEX = re.compile(r'[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?')
_NONFINITE = re.compile(r'[+-]?(?:inf(?:inity)?|nan(?:\([0-9a-zA-Z_]*\))?)', re.IGNORECASE)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _shown(token: str) -> str:
  """A token quoted for a message, shortened when long."""
  return repr(token if len(token) <= 40 else token[:37] + '...')


def _numbers(elem: Element, attr: str, text: str, kind: str) -> list[float]:
  out = []
  for p in _SPACE.split(text):
    if not p:
      continue
    if kind == 'i':
      if not _INT.fullmatch(p):
        raise elem.error(f'expected an integer, got {_shown(p)}', attribute=attr)
      # Python refuses to convert more than 4300 digits; any 11 significant digits are too many.
      v = int(p) if len(p.lstrip('+-').lstrip('0')) <= 10 else INT32_MAX + 1
      if not INT32_MIN <= v <= INT32_MAX:
        raise elem.error(
          f'number is too large: {_shown(p)} is out of the int32 range', attribute=attr
        )
    elif (decimal := _DECIMAL.fullmatch(p)) or _HEX.fullmatch(p):
      try:
        v = float(p) if decimal else float.fromhex(p)
      except OverflowError:
        v = math.inf
      if kind == 'r' and not math.isfinite(v):
        raise elem.error(f'number is too large: {_shown(p)}', attribute=attr)
    elif _NONFINITE.fullmatch(p):
      v = math.nan if 'nan' in p.lower() else math.copysign(math.inf, -1.0 if p[0] == '-' else 1.0)
    else:
      raise elem.error(f'expected a number, got {_shown(p)}', attribute=attr)
    if kind == 'f' and not math.isfinite(v):
      raise elem.error(f'non-finite value {_shown(p)}', attribute=attr)
    out.append(v)
  return out


def convert(elem: Element, attr: str, text: str, typ: str):
  """Converts one attribute's text to its Python value, raising ModelError on bad input."""
  if typ == 's':
    return text
  if typ == 'b':
    if text not in ('true', 'false'):
      raise elem.error(f"expected 'true' or 'false', got {text!r}", attribute=attr)
    return text == 'true'
  if typ.startswith('e:'):
    table = ENUMS[typ[2:]]
    if text not in table:
      keywords = ', '.join(repr(k) for k in table)
      raise elem.error(f'unknown keyword {text!r}; expected one of {keywords}', attribute=attr)
    return table[text]
  m = _ARITY.match(typ)
  if not m:
    raise AssertionError(f'bad schema type {typ}')
  kind, count = m.group(1), m.group(2)
  values = _numbers(elem, attr, text, kind)
  if count is None:
    if len(values) != 1:
      raise elem.error(f'expected one value, got {len(values)}', attribute=attr)
    return values[0]
  dtype = np.int64 if kind == 'i' else np.float64
  if count == '*':
    return np.array(values, dtype=dtype)
  lo, _, hi = count.partition('-')
  lo = int(lo)
  hi = int(hi) if hi else lo
  if not lo <= len(values) <= hi:
    want = str(lo) if lo == hi else f'{lo} to {hi}'
    raise elem.error(f'expected {want} values, got {len(values)}', attribute=attr)
  return np.array(values, dtype=dtype)


# attributes whose one value stands for both of their two (OneTendon's springlength)
REPEAT_SHORT = {'springlength'}


def read_attrs(
  elem: Element, table: dict[str, str], base: dict | None = None, allow_children=()
) -> dict:
  """Reads `elem`'s attributes against `table`, on top of `base` (a defaults dict).

  Arrays given shorter than their full length overwrite only their leading entries.
  """
  out = dict(base) if base else {}
  # An element's own orientation replaces its default class's, whichever kinds they are. As in
  # mjXReader, a quat attribute clears the class's alternatives even when empty (keeping the
  # class's quat then), while an empty alternative counts as not given.
  alt = any(k != 'quat' and elem.attrs.get(k, '').strip() for k in ORIENTATIONS)
  if alt or 'quat' in elem.attrs:
    for k in ORIENTATIONS:
      if alt or k != 'quat':
        out.pop(k, None)
  for attr, text in elem.attrs.items():
    typ = table.get(attr)
    if typ is None:
      raise elem.error(f'unknown attribute of <{elem.tag}>', attribute=attr)
    if _ARITY.match(typ) and not text.strip():
      continue  # mjXUtil::ReadAttr reads no number from an empty value: the attribute is absent
    value = convert(elem, attr, text, typ)
    if attr in REPEAT_SHORT and len(value) == 1:
      # a single value sets both entries wherever it is read (a default class included)
      value = np.repeat(value, 2)
    prev = out.get(attr)
    if (
      isinstance(value, np.ndarray)
      and isinstance(prev, np.ndarray)
      and '-' in typ
      and len(value) < len(prev)
    ):
      merged = prev.copy()
      merged[: len(value)] = value
      value = merged
    out[attr] = value
  return out


def unique_children(elem: Element, names) -> None:
  """Refuses a second child of a kind MJCF allows once (the schema's '?' elements)."""
  seen = set()
  for child in elem.children:
    if child.tag in names:
      if child.tag in seen:
        raise child.error(f'<{child.tag}> given twice in <{elem.tag}>')
      seen.add(child.tag)


def only_children(elem: Element, allowed: set[str]):
  """Refuses a child element not in `allowed`: by name where jaxsim lacks it, else as unknown."""
  for child in elem.children:
    if child.tag not in allowed:
      if child.tag in UNSUPPORTED_ELEMENTS:
        raise child.error(f'{UNSUPPORTED_ELEMENTS[child.tag]} are not supported by jaxsim')
      raise child.error(f'unknown element <{child.tag}> in <{elem.tag}>')

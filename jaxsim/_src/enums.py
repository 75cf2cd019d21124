"""MuJoCo's enums (mjt*) and constants (mj*), each defined once, for the engine and the compiler.

Plain Python, no JAX or NumPy import: jaxsim.mjcf and jaxsim._src both read these. Values are
MuJoCo 4.0.0's (mjmodel.h, mjdata.h, mjtnum.h).
"""

from __future__ import annotations

import enum

# ------------------------------------------------------------------------------ constants
MINVAL = 1e-15  # mjMINVAL: smallest value a divisor or norm may take
MAXVAL = 1e10  # mjMAXVAL: largest magnitude of a valid qpos, qvel, qacc (mj_checkPos ...)
MINIMP = 0.0001  # mjMINIMP: smallest constraint impedance
MAXIMP = 0.9999  # mjMAXIMP: largest constraint impedance
MINMU = 1e-5  # mjMINMU: smallest friction coefficient of a contact
EPS = 1e-14  # the model compiler's mjEPS
NPOLY = 2  # mjNPOLY: polynomial terms of springs and dampers
NGROUP = 6  # mjNGROUP: geom, site, joint ... groups
NREF = 2  # mjNREF: solref parameters
NIMP = 5  # mjNIMP: solimp parameters
MAXCONPAIR = 50  # mjMAXCONPAIR: contacts a geom pair may produce
NWARNING = 7  # mjNWARNING: warning counters in Data.warning


class JointType(enum.IntEnum):
  """mjtJoint."""

  FREE = 0
  BALL = 1
  SLIDE = 2
  HINGE = 3


class GeomType(enum.IntEnum):
  """mjtGeom."""

  PLANE = 0
  HFIELD = 1
  SPHERE = 2
  CAPSULE = 3
  ELLIPSOID = 4
  CYLINDER = 5
  BOX = 6
  MESH = 7


class IntegratorType(enum.IntEnum):
  """mjtIntegrator, plus jaxsim's linear-time variational integrator."""

  EULER = 0
  RK4 = 1
  IMPLICIT = 2
  IMPLICITFAST = 3
  VARIATIONAL = 100


class SolverType(enum.IntEnum):
  """mjtSolver."""

  PGS = 0
  CG = 1
  NEWTON = 2


class ConeType(enum.IntEnum):
  """mjtCone."""

  PYRAMIDAL = 0
  ELLIPTIC = 1


class JacobianType(enum.IntEnum):
  """mjtJacobian: the constraint Jacobian's storage (jaxsim: dense (nefc, nv) or compact rows)."""

  DENSE = 0
  SPARSE = 1
  AUTO = 2


class TrnType(enum.IntEnum):
  """mjtTrn."""

  JOINT = 0
  JOINTINPARENT = 1
  SLIDERCRANK = 2
  TENDON = 3
  SITE = 4
  BODY = 5


class DynType(enum.IntEnum):
  """mjtDyn."""

  NONE = 0
  INTEGRATOR = 1
  FILTER = 2
  FILTEREXACT = 3
  MUSCLE = 4
  USER = 7  # MuJoCo 4 numbering; the compiler reads it, the engine does not compute it


class GainType(enum.IntEnum):
  """mjtGain."""

  FIXED = 0
  AFFINE = 1
  MUSCLE = 2
  USER = 6  # MuJoCo 4 numbering; the compiler reads it, the engine does not compute it


class BiasType(enum.IntEnum):
  """mjtBias."""

  NONE = 0
  AFFINE = 1
  MUSCLE = 2
  USER = 5  # MuJoCo 4 numbering; the compiler reads it, the engine does not compute it


class EqType(enum.IntEnum):
  """mjtEq."""

  CONNECT = 0
  WELD = 1
  JOINT = 2
  TENDON = 3


class WrapType(enum.IntEnum):
  """mjtWrap."""

  NONE = 0
  JOINT = 1
  PULLEY = 2
  SITE = 3
  SPHERE = 4
  CYLINDER = 5


class DisableBit(enum.IntFlag):
  """mjtDisableBit."""

  CONSTRAINT = 1 << 0
  EQUALITY = 1 << 1
  FRICTIONLOSS = 1 << 2
  LIMIT = 1 << 3
  CONTACT = 1 << 4
  SPRING = 1 << 5
  DAMPER = 1 << 6
  GRAVITY = 1 << 7
  CLAMPCTRL = 1 << 8
  WARMSTART = 1 << 9
  FILTERPARENT = 1 << 10
  ACTUATION = 1 << 11
  REFSAFE = 1 << 12
  SENSOR = 1 << 13
  MIDPHASE = 1 << 14
  EULERDAMP = 1 << 15
  AUTORESET = 1 << 16
  NATIVECCD = 1 << 17
  ISLAND = 1 << 18
  MULTICCD = 1 << 19


class EnableBit(enum.IntFlag):
  """mjtEnableBit."""

  OVERRIDE = 1 << 0
  ENERGY = 1 << 1
  FWDINV = 1 << 2
  INVDISCRETE = 1 << 3


class SensorType(enum.IntEnum):
  """mjtSensor (MuJoCo 4.0)."""

  TOUCH = 0
  ACCELEROMETER = 1
  VELOCIMETER = 2
  GYRO = 3
  FORCE = 4
  TORQUE = 5
  MAGNETOMETER = 6
  RANGEFINDER = 7
  CAMPROJECTION = 8
  JOINTPOS = 9
  JOINTVEL = 10
  TENDONPOS = 11
  TENDONVEL = 12
  ACTUATORPOS = 13
  ACTUATORVEL = 14
  ACTUATORFRC = 15
  JOINTACTFRC = 16
  TENDONACTFRC = 17
  BALLQUAT = 18
  BALLANGVEL = 19
  JOINTLIMITPOS = 20
  JOINTLIMITVEL = 21
  JOINTLIMITFRC = 22
  TENDONLIMITPOS = 23
  TENDONLIMITVEL = 24
  TENDONLIMITFRC = 25
  FRAMEPOS = 26
  FRAMEQUAT = 27
  FRAMEXAXIS = 28
  FRAMEYAXIS = 29
  FRAMEZAXIS = 30
  FRAMELINVEL = 31
  FRAMEANGVEL = 32
  FRAMELINACC = 33
  FRAMEANGACC = 34
  SUBTREECOM = 35
  SUBTREELINVEL = 36
  SUBTREEANGMOM = 37
  INSIDESITE = 38
  GEOMDIST = 39
  GEOMNORMAL = 40
  GEOMFROMTO = 41
  CONTACT = 42
  E_POTENTIAL = 43
  E_KINETIC = 44
  CLOCK = 45
  TACTILE = 46
  PLUGIN = 47
  USER = 48


class ConstraintType(enum.IntEnum):
  """mjtConstraint: the kind of a constraint row (efc_type)."""

  EQUALITY = 0
  FRICTION_DOF = 1
  FRICTION_TENDON = 2
  LIMIT_JOINT = 3
  LIMIT_TENDON = 4
  CONTACT_FRICTIONLESS = 5
  CONTACT_PYRAMIDAL = 6
  CONTACT_ELLIPTIC = 7


class ObjType(enum.IntEnum):
  """mjtObj (the kinds jaxsim reads)."""

  UNKNOWN = 0
  BODY = 1
  XBODY = 2
  JOINT = 3
  DOF = 4
  GEOM = 5
  SITE = 6
  CAMERA = 7
  LIGHT = 8
  FLEX = 9
  MESH = 10
  SKIN = 11
  HFIELD = 12
  TEXTURE = 13
  MATERIAL = 14
  PAIR = 15
  EXCLUDE = 16
  EQUALITY = 17
  TENDON = 18
  ACTUATOR = 19
  SENSOR = 20


class Stage(enum.IntEnum):
  """mjtStage: the pipeline stage a sensor needs."""

  NONE = 0
  POS = 1
  VEL = 2
  ACC = 3


class DataType(enum.IntEnum):
  """mjtDataType: how a sensor's cutoff applies."""

  REAL = 0
  POSITIVE = 1
  AXIS = 2
  QUATERNION = 3


class CamLight(enum.IntEnum):
  """mjtCamLight: how a camera moves."""

  FIXED = 0
  TRACK = 1
  TRACKCOM = 2
  TARGETBODY = 3
  TARGETBODYCOM = 4


class WarningType(enum.IntEnum):
  """mjtWarning: the index of each counter in Data.warning."""

  INERTIA = 0
  CONTACTFULL = 1
  CNSTRFULL = 2
  BADQPOS = 3
  BADQVEL = 4
  BADQACC = 5
  BADCTRL = 6


class ConstraintState(enum.IntEnum):
  """mjtConstraintState: the zone of a constraint row's force law (efc_state)."""

  SATISFIED = 0
  QUADRATIC = 1
  LINEARNEG = 2
  LINEARPOS = 3
  CONE = 4


# mjtGeom's mjGEOM_SDF, outside GeomType: the engine builds its collision table over GeomType's
# members, and the compiler only refuses SDF geoms
GEOM_SDF = 8

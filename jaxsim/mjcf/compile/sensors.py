"""<sensor>: every sensor jaxsim computes, its object, reference, data size, stage and plugin
(mjXReader::Sensor in xml_native_reader.cc, mjCSensor::Compile in user_objects.cc).

Reads the <sensor> sections and the state's names, joints, geoms, cameras and plugin tables;
writes the sensor_* arrays, nsensor, nsensordata and nplugin into out and the sensor namespace.
"""

from __future__ import annotations

import numpy as np

from jaxsim._src.enums import DataType, GeomType, JointType, ObjType, Stage
from jaxsim.mjcf import plugin, schema
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.options import plugin_ref
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element

# contact sensors: matching attributes of each side, data fields (mjtConDataField) with their
# sizes, reductions
CONTACT_SIDE1 = ('geom1', 'body1', 'subtree1', 'site')
CONTACT_SIDE2 = ('geom2', 'body2', 'subtree2')
RAYDATA = ('dist', 'dir', 'origin', 'point', 'normal', 'depth')  # mjtRayDataField
RAYDATA_SIZE = (1, 3, 3, 3, 3, 1)
CONDATA = ('found', 'force', 'torque', 'dist', 'pos', 'normal', 'tangent', 'linvel', 'angvel')
CONDATA_SIZE = (1, 3, 3, 1, 3, 3, 3, 3, 3)
CONTACT_REDUCE = ('none', 'mindist', 'maxforce', 'netforce')
# the namespace of each mjtObj a frame sensor may name
_FRAME_OBJ = {
  ObjType.BODY: 'body',
  ObjType.XBODY: 'body',
  ObjType.GEOM: 'geom',
  ObjType.SITE: 'site',
  ObjType.CAMERA: 'camera',
}


def compile_sensors(s: CompileState, sections: list[Element]):
  """Reads every sensor and writes the sensor_* arrays, numbering implicit plugin instances."""
  out = s.out
  rows = []
  for sec in sections:
    for e in sec.children:
      if e.tag in schema.UNSUPPORTED_SENSORS:
        raise e.error(f'sensor type <{e.tag}> is not supported by jaxsim')
      if e.tag not in schema.SENSORS:
        raise e.error(f'unknown element <{e.tag}> in <sensor>')
      util.only(e, {'config'} if e.tag == 'plugin' else set())
      attrs = schema.read_attrs(e, schema.SENSORS[e.tag])
      s.register('sensor', e, len(rows))
      rows.append(_compile_sensor(s, e, attrs))
  dims = np.array([r['dim'] for r in rows], dtype=int)
  out['nsensor'] = len(rows)
  out['nsensordata'] = int(dims.sum()) if rows else 0
  out['sensor_type'] = np.array([r['type'] for r in rows], dtype=int)
  out['sensor_datatype'] = np.array([r['datatype'] for r in rows], dtype=int)
  out['sensor_needstage'] = np.array([r['needstage'] for r in rows], dtype=int)
  out['sensor_objtype'] = np.array([r['objtype'] for r in rows], dtype=int)
  out['sensor_objid'] = np.array([r['objid'] for r in rows], dtype=int)
  out['sensor_reftype'] = np.array([r['reftype'] for r in rows], dtype=int)
  out['sensor_refid'] = np.array([r['refid'] for r in rows], dtype=int)
  out['sensor_dim'] = dims
  out['sensor_adr'] = util.adr(dims)
  out['sensor_intprm'] = np.array([r['intprm'] for r in rows], dtype=int).reshape(-1, 3)
  out['sensor_cutoff'] = np.array([r['cutoff'] for r in rows], dtype=float)
  out['sensor_noise'] = np.array([r['noise'] for r in rows], dtype=float)
  # plugin instances: the named ones of <extension>, then one per sensor that names a plugin
  implicit = np.array([r.get('implicit', False) for r in rows], dtype=bool)
  first = len(s.plugin_instances) + s.implicit_actuator_plugins
  made = first + np.cumsum(implicit) - 1
  inst = [made[i] if implicit[i] else r.get('plugin', -1) for i, r in enumerate(rows)]
  out['nplugin'] = first + int(implicit.sum())
  out['sensor_plugin'] = np.array(inst, dtype=int)
  prm = [r.get('plugin_prm', (0.0,) * 6) for r in rows]
  out['sensor_plugin_prm'] = np.array(prm, dtype=float).reshape(-1, 6)


def _compile_sensor(s: CompileState, e: Element, a: dict) -> dict:
  """One sensor's row: type, datatype, stage, object, reference, dim, intprm, cutoff, noise."""
  tag = e.tag
  typ = schema.SENSOR_TYPES[tag][0]
  r = {'type': typ, 'datatype': DataType.REAL, 'needstage': Stage.POS}
  r.update(objtype=ObjType.UNKNOWN, objid=-1, reftype=ObjType.UNKNOWN)
  r.update(refid=-1, cutoff=a.get('cutoff', 0.0), noise=a.get('noise', 0.0), dim=1)
  r['intprm'] = (0, 0, 0)
  if r['cutoff'] < 0:
    raise e.error('cutoff cannot be negative', attribute='cutoff')

  def need(attr):
    if attr not in a:
      raise e.error('missing required attribute', attribute=attr)

  def obj(ns, attr):
    need(attr)
    r['objtype'] = ObjType[ns.upper()]
    r['objid'] = s.lookup(ns, e, attr)

  def frame_obj(type_attr, name_attr, message):
    """(mjtObj, id) of a frame object given by type and name ((x)body, geom, site, camera)."""
    need(type_attr)
    need(name_attr)
    ot = a[type_attr]
    ns = _FRAME_OBJ.get(ot)
    if ns is None:
      raise e.error(message, type_attr)
    return ot, s.lookup(ns, e, name_attr)

  acc = Stage.ACC
  vel = Stage.VEL
  pos = Stage.POS
  if tag in ('touch', 'accelerometer', 'velocimeter', 'gyro', 'force', 'torque', 'magnetometer'):
    obj('site', 'site')
    r['dim'] = 1 if tag == 'touch' else 3
    r['datatype'] = DataType.POSITIVE if tag == 'touch' else DataType.REAL
    r['needstage'] = {
      'touch': acc,
      'accelerometer': acc,
      'force': acc,
      'torque': acc,
      'velocimeter': vel,
      'gyro': vel,
      'magnetometer': pos,
    }[tag]
  elif tag == 'rangefinder':
    if 'camera' in a:
      raise e.error('rangefinders on cameras are not supported by jaxsim', attribute='camera')
    obj('site', 'site')
    fields = _data_fields(e, a.get('data', 'dist'), RAYDATA)
    if RAYDATA.index('normal') in fields:
      raise e.error('rangefinder surface normals are not supported by jaxsim', attribute='data')
    r['intprm'] = (sum(1 << f for f in fields), 0, 0)  # the mjtRayDataField bits
    r['dim'] = sum(RAYDATA_SIZE[f] for f in fields)
  elif tag == 'camprojection':
    obj('site', 'site')
    need('camera')
    r['reftype'] = ObjType.CAMERA
    r['refid'] = s.lookup('camera', e, 'camera')
    res = np.asarray(s.cameras[r['refid']].get('resolution', (1, 1)))
    if (res <= 0).any():
      raise e.error('camera projection sensor requires camera resolution', attribute='camera')
    r['dim'] = 2
  elif tag in (
    'jointpos',
    'jointvel',
    'jointactuatorfrc',
    'jointlimitpos',
    'jointlimitvel',
    'jointlimitfrc',
  ):
    obj('joint', 'joint')
    if s.joints[r['objid']]['type'] not in (JointType.SLIDE, JointType.HINGE):
      raise e.error(f'{tag} sensors need a hinge or slide joint', attribute='joint')
    r['needstage'] = {
      'jointpos': pos,
      'jointlimitpos': pos,
      'jointvel': vel,
      'jointlimitvel': vel,
    }.get(tag, acc)
  elif tag in ('ballquat', 'ballangvel'):
    obj('joint', 'joint')
    if s.joints[r['objid']]['type'] != JointType.BALL:
      raise e.error(f'{tag} sensors need a ball joint', attribute='joint')
    r['dim'] = 4 if tag == 'ballquat' else 3
    r['datatype'] = DataType.QUATERNION if tag == 'ballquat' else DataType.REAL
    r['needstage'] = pos if tag == 'ballquat' else vel
  elif tag in (
    'tendonpos',
    'tendonvel',
    'tendonactuatorfrc',
    'tendonlimitpos',
    'tendonlimitvel',
    'tendonlimitfrc',
  ):
    obj('tendon', 'tendon')
    r['needstage'] = {
      'tendonpos': pos,
      'tendonlimitpos': pos,
      'tendonvel': vel,
      'tendonlimitvel': vel,
    }.get(tag, acc)
  elif tag in ('actuatorpos', 'actuatorvel', 'actuatorfrc'):
    obj('actuator', 'actuator')
    r['needstage'] = {'actuatorpos': pos, 'actuatorvel': vel, 'actuatorfrc': acc}[tag]
  elif tag.startswith('frame'):
    r['objtype'], r['objid'] = frame_obj(
      'objtype', 'objname', 'frame sensors need a body, xbody, geom, site or camera'
    )
    if 'reftype' in a or 'refname' in a:
      r['reftype'], r['refid'] = frame_obj(
        'reftype', 'refname', 'reftype must be a body, xbody, geom, site or camera'
      )
    r['dim'] = 4 if tag == 'framequat' else 3
    axes = {'framexaxis', 'frameyaxis', 'framezaxis'}
    r['datatype'] = (
      DataType.QUATERNION if tag == 'framequat' else DataType.AXIS if tag in axes else DataType.REAL
    )
    r['needstage'] = {
      'framelinvel': vel,
      'frameangvel': vel,
      'framelinacc': acc,
      'frameangacc': acc,
    }.get(tag, pos)
  elif tag == 'insidesite':
    for attr in ('objtype', 'objname', 'site'):  # all required before any lookup
      need(attr)
    r['objtype'], r['objid'] = frame_obj(
      'objtype', 'objname', 'sensor must be attached to (x)body, geom, site or camera'
    )
    r['reftype'], r['refid'] = ObjType.SITE, s.lookup('site', e, 'site')
    r['datatype'] = DataType.POSITIVE
  elif tag.startswith('subtree'):
    obj('body', 'body')
    r['dim'] = 3
    r['needstage'] = pos if tag == 'subtreecom' else vel
  elif tag in ('distance', 'normal', 'fromto'):
    # each side a geom or all geoms of a body (mjSENS_GEOMDIST/GEOMNORMAL/GEOMFROMTO)
    for k, (gattr, battr) in enumerate((('geom1', 'body1'), ('geom2', 'body2'))):
      if gattr in a and battr in a:
        raise e.error(
          f"Schema violation: at most one of '{gattr}', '{battr}' can be specified", battr
        )
      if gattr not in a and battr not in a:
        raise e.error(f"Schema violation: one of '{gattr}', '{battr}' must be specified", gattr)
      ns, attr = ('body', battr) if battr in a else ('geom', gattr)
      oid = s.lookup(ns, e, attr)
      if ns == 'geom' and s.geoms[oid]['type'] == GeomType.HFIELD:
        raise e.error('height fields are not supported in geom distance sensors', attr)
      r['objtype' if k == 0 else 'reftype'] = ObjType[ns.upper()]
      r['objid' if k == 0 else 'refid'] = oid
    if (r['objtype'], r['objid']) == (r['reftype'], r['refid']):
      raise e.error('1st body/geom must be different from 2nd body/geom')
    r['dim'] = {'distance': 1, 'normal': 3, 'fromto': 6}[tag]
    r['datatype'] = DataType.AXIS if tag == 'normal' else DataType.REAL
  elif tag == 'contact':
    _contact_sensor(s, e, a, r)
  elif tag in ('e_potential', 'e_kinetic', 'clock'):
    # mujoco 4.0.0 marks e_kinetic as a position-stage sensor (computed with the energy)
    r['needstage'] = {'e_potential': pos, 'e_kinetic': pos, 'clock': pos}[tag]
  elif tag == 'plugin':
    _plugin_sensor(s, e, a, r)
  elif tag == 'user':
    need('dim')
    r['dim'] = a['dim']
    r['datatype'] = a.get('datatype', 0)
    r['needstage'] = a.get('needstage', Stage.ACC)
    if r['dim'] <= 0:
      raise e.error('user sensor dim must be positive', attribute='dim')
    if r['dim'] > util.MAX_ARRAY:
      raise e.error(f'user sensor dim is too large (at most {util.MAX_ARRAY:.0e})', 'dim')
    s.note_unsupported('user sensors (computed by a callback)')
  else:
    raise e.error(f'sensor type <{tag}> is not supported by jaxsim')
  return r


def _plugin_sensor(s: CompileState, e: Element, a: dict, r: dict) -> None:
  """A sensor computed by an engine plugin (mjSENS_PLUGIN): the touch_grid plugin, its instance
  named or made for this sensor; `plugin_prm` holds its parameters (plugin.touch_grid_params)."""
  ref, _, config, _ = plugin_ref(s, e, a, plugin.TOUCH_GRID, 'sensor')
  if ref == 'implicit':
    r['implicit'] = True  # an instance of its own, numbered in compile_sensors
  else:
    r['plugin'] = ref
  if a.get('objtype') != 'site' or 'objname' not in a:
    raise e.error('Touch Grid sensor must be attached to a site', attribute='objtype')
  r['objtype'] = ObjType.SITE
  r['objid'] = s.lookup('site', e, 'objname')
  r['plugin_prm'] = plugin.touch_grid_params(e, config)
  nchannel, sx, sy = r['plugin_prm'][:3]
  r['dim'] = nchannel * sx * sy
  r['needstage'] = Stage.ACC
  if r['dim'] > util.MAX_ARRAY:
    raise e.error(f'touch_grid sensor dim is too large (at most {util.MAX_ARRAY:.0e})', 'plugin')


def _contact_sensor(s: CompileState, e: Element, a: dict, r: dict) -> None:
  """A <contact> sensor's matching criteria, data fields, reduction and size (mjSENS_CONTACT as
  mjXReader::Sensor and mjCSensor::Compile read it): intprm is (dataspec, reduce, num)."""
  for k, sides in enumerate((CONTACT_SIDE1, CONTACT_SIDE2)):
    given = [attr for attr in sides if attr in a]
    if len(given) > 1:
      names = ', '.join(f"'{attr}'" for attr in sides)
      raise e.error(f'Schema violation: at most one of {names} can be specified', given[1])
    if given:
      ns = {'site': 'site', 'geom': 'geom', 'body': 'body', 'subt': 'xbody'}[given[0][:4]]
      r['objtype' if k == 0 else 'reftype'] = ObjType[ns.upper()]
      r['objid' if k == 0 else 'refid'] = s.lookup('body' if ns == 'xbody' else ns, e, given[0])
  fields = _data_fields(e, a.get('data', ''), CONDATA)
  reduce = a.get('reduce', 'none')
  if reduce not in CONTACT_REDUCE:
    raise e.error(f'invalid keyword: {reduce!r}', attribute='reduce')
  reduce = CONTACT_REDUCE.index(reduce)
  num = a.get('num', 1)
  if num <= 0:
    raise e.error("'num' must be positive in sensor", attribute='num')
  vel = {CONDATA.index('linvel'), CONDATA.index('angvel')} & set(fields)
  if reduce == CONTACT_REDUCE.index('netforce') and vel:
    raise e.error('netforce reduction is incompatible with linvel or angvel', 'reduce')
  r['intprm'] = (sum(1 << f for f in fields), reduce, num)
  r['dim'] = num * sum(CONDATA_SIZE[f] for f in fields)
  if r['dim'] > util.MAX_ARRAY:
    raise e.error(f'contact sensor dim is too large (at most {util.MAX_ARRAY:.0e})', 'num')
  # the stage its data needs (mujoco 4): forces at acc, velocities at vel, the rest at pos
  force = {CONDATA.index('force'), CONDATA.index('torque')} & set(fields) or reduce >= 2
  r['needstage'] = Stage.ACC if force else Stage.VEL if vel else Stage.POS


def _data_fields(e: Element, text: str, names: tuple[str, ...]) -> list[int]:
  """The indices of a sensor's `data` keywords (rangefinder, contact): known, each once, in the
  canonical order of `names`; the first field when none is given."""
  keys = text.split()
  for key in keys:
    if key not in names:
      raise e.error(f'invalid keyword: {key!r}', attribute='data')
  if len(set(keys)) < len(keys):
    dup = next(k for i, k in enumerate(keys) if k in keys[:i])
    raise e.error(f'duplicate keyword: {dup!r}', attribute='data')
  fields = [names.index(key) for key in keys] or [0]
  if fields != sorted(fields):
    raise e.error('data attributes must be in order: ' + ', '.join(names), attribute='data')
  return fields

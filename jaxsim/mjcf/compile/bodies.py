"""Compiles the body tree: bodies and their inertia, joints and dofs, geoms, sites, cameras and
lights (mjCBody, mjCJoint, mjCGeom, mjCSite, mjCCamera and mjCLight::Compile in user_objects.cc;
mjCModel's settotalmass and CheckBodyMassInertia in user_model.cc).

compile_bodies reads the element dicts tree.py left in the state (and the state's meshes and
hfields) and adds their compiled values under `_c` keys and MuJoCo-named ones (ipos, qposadr,
dofadr, xpos0 ...), and nq, nv; fuse.py may then merge or drop some; build_body_arrays writes the
body_*, jnt_*, dof_*, geom_*, site_*, cam_* and light_* arrays and their counts into out.
"""

from __future__ import annotations

import math

import numpy as np

from jaxsim._src.enums import EPS, GEOM_SDF, MAXVAL, MINVAL, GeomType, JointType
from jaxsim.mjcf import frames, inertia, schema
from jaxsim.mjcf import mesh as meshlib
from jaxsim.mjcf.compile import util
from jaxsim.mjcf.compile.state import CompileState
from jaxsim.mjcf.parse import Element

# geom and site types a fromto may give, and how many sizes each primitive type reads
_FROMTO_TYPES = (GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX)
_NSIZE = {
  GeomType.SPHERE: 1,
  GeomType.CAPSULE: 2,
  GeomType.ELLIPSOID: 3,
  GeomType.CYLINDER: 2,
  GeomType.BOX: 3,
}


def _geom_name(typ: int) -> str:
  """mjtGeom's keyword of a geom type, as errors name it."""
  return GeomType(typ).name.lower()


def compile_bodies(s: CompileState):
  """Compiles each body in id order: its geoms, inertial frame, joints and dofs, sites,
  cameras and lights; then settotalmass and the mass check of moving bodies."""
  lo, hi = s.comp['inertiagrouprange']
  ifg = s.comp['inertiafromgeom']
  nq = nv = 0
  for b in s.bodies:
    bid = b['id']
    e = b['elem']
    # geoms
    for g in b['geoms']:
      g['infer'] = bid > 0 and (not b['explicit_inertial'] or ifg == 1) and lo <= g['group'] <= hi
      _compile_geom(s, g)
    # inertial frame
    ipos, iquat, mass, inert = None, np.array([1.0, 0, 0, 0]), 0.0, np.zeros(3)
    if b['inertial'] is not None:
      ia = b['inertial']
      ie = ia['elem']
      ipos = ia['pos']
      mass = ia['mass']
      if mass < 0:
        raise ie.error('mass and inertia cannot be negative', attribute='mass')
      if 'diaginertia' in ia and (ia['diaginertia'] < 0).any():
        raise ie.error('mass and inertia cannot be negative', attribute='diaginertia')
      if 'fullinertia' in ia:
        if any(k in ia for k in frames.ORIENTATIONS):
          raise ie.error(
            'fullinertia and an inertial orientation cannot both be given',
            attribute='fullinertia',
          )
        if 'diaginertia' in ia:
          raise ie.error('fullinertia and diaginertia cannot both be given', 'fullinertia')
        fi = ia['fullinertia']
        tensor = np.array([[fi[0], fi[3], fi[4]], [fi[3], fi[1], fi[5]], [fi[4], fi[5], fi[2]]])
        w, iquat = inertia.principal_frame(tensor)
        if w.min() < 0 and w.min() < -1e-12 * max(1.0, w.max()):
          raise ie.error('fullinertia is not positive semi-definite', attribute='fullinertia')
        inert = np.maximum(w, 0.0)
      else:
        # mjsBody's inertia defaults to zero: an <inertial> with a mass only is a point mass.
        inert = np.array(ia.get('diaginertia', np.zeros(3)))
        iquat = frames.resolve_orientation(ia, s.degree(ie), s.eulerseq(ie), ie)
    if bid > 0 and (ifg == 1 or (ipos is None and ifg == 2)):
      sel = [g for g in b['geoms'] if lo <= g['group'] <= hi and g['mass_c'] > EPS]
      if len(sel) == 1:
        g = sel[0]
        ipos, iquat, mass, inert = g['pos_c'], g['quat_c'], g['mass_c'], g['inertia_c']
      elif len(sel) > 1:
        with np.errstate(over='ignore', invalid='ignore'):
          mass = sum(g['mass_c'] for g in sel)
          com = sum(g['mass_c'] * g['pos_c'] for g in sel) / mass
          tensor = np.zeros((3, 3))
          for g in sel:
            r = frames.quat_to_mat(g['quat_c'])
            tensor += r @ np.diag(g['inertia_c']) @ r.T
            d = g['pos_c'] - com
            tensor += g['mass_c'] * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
        if not (math.isfinite(mass) and np.isfinite(tensor).all()):
          raise e.error(
            'body mass or inertia from its geoms is not finite (too large sizes or positions)'
          )
        w, iquat = inertia.principal_frame(tensor)
        ipos, inert = com, w
    if ipos is None:
      # MuJoCo copies the body's own frame (relative to its parent) into an undefined inertial
      # frame; massless bodies thus get ipos = pos, which shows in xipos.
      ipos, iquat = np.array(b['pos'], dtype=float), np.array(b['quat'], dtype=float)
    if bid > 0:
      mass = max(mass, s.comp['boundmass'])
      inert = np.maximum(inert, s.comp['boundinertia'])
      where = b['inertial']['elem'] if b['inertial'] is not None else e
      if not (math.isfinite(mass) and np.isfinite(inert).all() and np.isfinite(iquat).all()):
        raise where.error('mass or inertia is not finite (overflow)')
      if mass < 0 or (inert < 0).any():
        raise where.error('mass and inertia cannot be negative')
      a, bb, c = inert
      tol = 1e-12 * max(1.0, a + bb + c)
      if a + bb + tol < c or a + c + tol < bb or bb + c + tol < a:
        if s.comp['balanceinertia']:
          inert = np.full(3, (a + bb + c) / 3)
        else:
          raise where.error("inertia must satisfy A + B >= C; use 'balanceinertia' to fix")
    b['ipos'], b['iquat'], b['mass'], b['inertia'] = (
      ipos,
      frames.normvec(iquat),
      mass,
      inert,
    )
    _align_free(s, b)
    # joints
    b['dofnum'] = 0
    has_ball = False
    for j in b['joints']:
      je = j['elem']
      typ = j['type']
      if typ == JointType.FREE:
        j['limited'] = 0
      elif j['limited'] == 2 and not s.autolimits(je) and (j['range'] != 0).any():
        raise je.error(
          "joint has 'range' but not 'limited'; set limited or autolimits", attribute='range'
        )
      rng = np.array(j['range'], dtype=np.float64)
      lim = j['limited'] == 1 or (j['limited'] == 2 and rng[0] < rng[1])
      if j['limited'] == 2 and typ == JointType.BALL:
        lim = rng[0] < rng[1] or (rng != 0).any()
      if lim:
        if rng[0] >= rng[1] and typ != JointType.BALL:
          raise je.error('range[0] must be smaller than range[1]', attribute='range')
        if typ == JointType.BALL and rng[0] != 0:
          raise je.error('range[0] must be 0 for a ball joint', attribute='range')
        if s.degree(je) and typ in (JointType.HINGE, JointType.BALL):
          rng = rng * math.pi / 180.0
      j['limited_c'] = int(lim)
      sd = j.get('springdamper', np.zeros(2))
      if (sd != 0).any() and (sd <= 0).any():
        raise je.error('springdamper values must be positive', attribute='springdamper')
      afl = j['actuatorfrclimited']
      afr = np.array(j['actuatorfrcrange'])
      if typ in (JointType.FREE, JointType.BALL):
        afl = 0
      elif afl == 2 and not s.autolimits(je) and (afr != 0).any():
        raise je.error(
          "joint has 'actuatorfrcrange' but not 'actuatorfrclimited'",
          attribute='actuatorfrcrange',
        )
      alim = afl == 1 or (afl == 2 and afr[0] < afr[1])
      if alim and afr[0] >= afr[1]:
        raise je.error('actuatorfrcrange[0] must be smaller than [1]', 'actuatorfrcrange')
      j['actfrclimited_c'] = int(alim)
      j['range_c'] = rng
      axis = np.array(j['axis'], dtype=np.float64)
      pos = np.array(j['pos'], dtype=np.float64)
      if typ in (JointType.FREE, JointType.BALL):
        axis = np.array([0.0, 0, 1])
      elif j['frame'] is not None:
        axis = frames.quat_rotate(j['frame'][1], axis)
      n = np.linalg.norm(axis)
      if n < EPS:
        raise je.error('joint axis is too small', attribute='axis')
      axis = axis / n
      if typ == JointType.FREE:
        pos = np.zeros(3)
      elif j['frame'] is not None:
        pos = j['frame'][0] + frames.quat_rotate(j['frame'][1], pos)
      j['axis_c'], j['pos_c'] = axis, pos
      ref, springref = j['ref'], j['springref']
      if typ == JointType.HINGE and s.degree(je):
        ref, springref = ref * math.pi / 180, springref * math.pi / 180
      j['ref_c'], j['springref_c'] = ref, springref
      if has_ball and typ in (JointType.BALL, JointType.HINGE):
        raise je.error('a ball joint cannot be followed by a rotational joint in the same body')
      has_ball |= typ == JointType.BALL
      j['qposadr'], j['dofadr'] = nq, nv
      ndof = {JointType.FREE: 6, JointType.BALL: 3}.get(typ, 1)
      nq += {JointType.FREE: 7, JointType.BALL: 4}.get(typ, 1)
      nv += ndof
      b['dofnum'] += ndof
      if typ == JointType.FREE and b['parent'] != 0:
        raise je.error('free joint can only be used on top level (in a child of the world)')
    if b['dofnum'] > 6:
      raise e.error('a body cannot have more than 6 degrees of freedom')
    if b['mocap'] and (b['joints'] or b['parent'] != 0):
      raise e.error('a mocap body must be a fixed child of the world', attribute='mocap')
    # global pose at qpos0 without joint transforms, as MuJoCo's compiler computes it
    if bid > 0:
      par = s.bodies[b['parent']]
      b['xpos0'] = par['xpos0'] + frames.quat_rotate(par['xquat0'], b['pos'])
      b['xquat0'] = frames.quat_mul(par['xquat0'], b['quat'])
    else:
      b['xpos0'], b['xquat0'] = np.zeros(3), np.array([1.0, 0, 0, 0])
    for site in b['sites']:
      _compile_site(s, site)
    for c in b.get('cameras', []):
      _compile_frame_only(s, c)
    for lt in b.get('lights', []):
      lt['quat'] = lt.get('quat', np.array([1.0, 0, 0, 0]))
      _compile_frame_only(s, lt, orient=False)
      _compile_light_dir(lt)
    _align_children(b)
  s.nq, s.nv = nq, nv
  # settotalmass
  total = s.comp['settotalmass']
  if total > 0:
    cur = sum(b['mass'] for b in s.bodies[1:])
    if cur > 0:
      scale = total / cur
      for b in s.bodies[1:]:
        b['mass'] *= scale
        b['inertia'] = b['inertia'] * scale
  for b in s.bodies[1:]:
    if b['joints'] and not _has_mass(b):
      raise b['elem'].error(
        'mass and inertia of moving bodies must be larger than 1e-15 (in the body or a '
        'static child welded to it)'
      )


def _compile_geom(s: CompileState, g: dict):
  """A geom's frame and size (fromto, mesh fitting, hfield size) and, when its body's inertia
  comes from its geoms, its mass and inertia (mjCGeom::Compile)."""
  e = g['elem']
  typ = g['type']
  size = np.array(g['size'], dtype=np.float64)
  pos = np.array(g['pos'], dtype=np.float64)
  if typ == GEOM_SDF:
    raise e.error('SDF geoms are not supported by jaxsim', attribute='type')
  if g['condim'] not in (1, 3, 4, 6):
    raise e.error(f'condim must be 1, 3, 4 or 6, got {g["condim"]}', attribute='condim')
  if 'fromto' in g:
    if typ not in _FROMTO_TYPES:
      raise e.error('fromto requires a capsule, cylinder, box or ellipsoid', attribute='fromto')
    if np.any(pos != 0):  # mjCGeom: an explicit pos="0 0 0" is allowed
      raise e.error('both pos and fromto are given', attribute='fromto')
    pos, quat, size = _fromto(e, g['fromto'], typ, size)
  else:
    quat = frames.resolve_orientation(g, s.degree(e), s.eulerseq(e), e)
  shell = bool(g['shellinertia'])
  mesh = None
  mesh_volume = None
  if 'mesh' in g:
    mid = s.lookup('mesh', e, 'mesh', g['mesh'])
    mesh = s.meshes[mid]
    if typ == GeomType.MESH and 'shellinertia' in e.attrs and shell:
      raise e.error('for mesh geoms, shell inertia is set on the mesh asset', 'shellinertia')
    info = meshlib.mesh_geom(
      mesh, typ, g['fitscale'], bool(s.comp['fitaabb']), pos=pos, quat=quat, size=size
    )
    pos, quat = info['pos'], info['quat']
    size = np.asarray(info['size'], dtype=np.float64)
    if typ == GeomType.MESH:
      g['dataid'] = mid
      g['aabb_c'] = info['aabb']
      mesh_volume = info
  elif typ == GeomType.MESH:
    raise e.error('a mesh geom needs a mesh', attribute='mesh')
  if typ == GeomType.HFIELD:
    if 'hfield' not in g:
      raise e.error('an hfield geom needs an hfield', attribute='hfield')
    hid = s.lookup('hfield', e, 'hfield', g['hfield'])
    hs = s.hfields[hid]['size']
    size = np.array([hs[0], hs[1], 0.25 * hs[2] + 0.5 * hs[3]])
    g['dataid'] = hid
  elif 'hfield' in g:
    raise e.error('only hfield geoms can reference an hfield', attribute='hfield')
  if typ == GeomType.PLANE:
    if size[2] <= 0:
      raise e.error('plane size[2] (grid spacing) must be positive', attribute='size')
  elif typ not in (GeomType.HFIELD, GeomType.MESH):
    for i in range(_NSIZE[typ]):
      if np.isnan(size[i]):
        # a mesh-fitted size from a NaN inertia box (a flat shell mesh), as mjCGeom refuses
        raise e.error(f'size[{i}] is NaN for a {_geom_name(typ)}', attribute='size')
      if size[i] <= 0:
        raise e.error(f'size[{i}] must be positive for a {_geom_name(typ)}', attribute='size')
  if g['frame'] is not None:
    pos, quat = frames.frame_accum(*g['frame'], pos, quat)
  g['pos_c'], g['quat_c'], g['size_c'] = pos, quat, size
  # mass and inertia
  g['mass_c'] = 0.0
  g['inertia_c'] = np.zeros(3)
  if g.get('infer', False):
    if mesh_volume is not None:
      volume = mesh_volume['volume']
    else:
      with np.errstate(over='ignore', invalid='ignore'):
        volume = float(inertia.geom_volume(typ, size, shell))
    density = g['density']
    if 'mass' in g:
      if g['mass'] == 0:
        mass = 0.0
        density = 0.0
      elif volume > EPS:
        mass = g['mass']
        density = mass / volume
      else:
        mass = 0.0
    else:
      mass = density * volume
    if mass < 0 or density < 0:
      raise e.error(
        'mass, inertia or density are negative', attribute='mass' if 'mass' in g else 'density'
      )
    g['mass_c'] = mass
    with np.errstate(over='ignore', invalid='ignore'):
      if mass != 0:
        if mesh_volume is not None:
          g['inertia_c'] = inertia.box_inertia(mesh_volume['box'], mass)
        else:
          g['inertia_c'] = inertia.geom_inertia(typ, size, mass, shell)
    if not (math.isfinite(mass) and np.isfinite(g['inertia_c']).all()):
      attr = 'mesh' if mesh_volume is not None else 'size'
      if math.isfinite(volume) and not math.isfinite(mass):
        attr = 'mass' if 'mass' in g else 'density'
      raise e.error(
        'geom mass or inertia is not finite (too large sizes, mass or density)', attribute=attr
      )


def _align_free(s: CompileState, b: dict):
  """Free-joint alignment (mjCBody::Compile): a childless body whose only joint is a free
  joint with align="true" (or "auto" under compiler alignfree) moves its frame to its inertial
  frame; its geoms, sites, cameras and lights keep their world placement."""
  js = b['joints']
  if len(js) != 1 or js[0]['type'] != JointType.FREE or b['children']:
    return
  align = js[0].get('align', 2)
  if not (align == 1 or (align == 2 and s.comp['alignfree'])):
    return
  ipos, iquat = b['ipos'], b['iquat']
  b['pos'], b['quat'] = frames.frame_accum(np.asarray(b['pos'], float), b['quat'], ipos, iquat)
  inv_quat = frames.quat_conj(iquat)
  inv_pos = -frames.quat_rotate(inv_quat, ipos)
  b['ipos'], b['iquat'] = np.zeros(3), np.array([1.0, 0, 0, 0])
  for g in b['geoms']:
    g['pos_c'], g['quat_c'] = frames.frame_accum(inv_pos, inv_quat, g['pos_c'], g['quat_c'])
  b['align_inv'] = (inv_pos, inv_quat)  # sites, cameras and lights: after their compile


def _align_children(b: dict):
  """Phase 2 of align_free: the body's sites, cameras and lights."""
  if 'align_inv' not in b:
    return
  inv_pos, inv_quat = b['align_inv']
  for obj in list(b['sites']) + list(b.get('cameras', [])):
    obj['pos_c'], obj['quat_c'] = frames.frame_accum(inv_pos, inv_quat, obj['pos_c'], obj['quat_c'])
  for lt in b.get('lights', []):
    lt['pos_c'] = frames.frame_accum(inv_pos, inv_quat, lt['pos_c'], np.array([1.0, 0, 0, 0]))[0]
    lt['dir'] = frames.quat_rotate(inv_quat, np.asarray(lt['dir'], float))


def _compile_site(s: CompileState, site: dict):
  """A site's frame and size (mjCSite::Compile)."""
  e = site['elem']
  typ = site['type']
  if typ in (GeomType.PLANE, GeomType.HFIELD, GeomType.MESH, GEOM_SDF):
    raise e.error('sites cannot be planes, hfields or meshes', attribute='type')
  size = np.array(site['size'], dtype=np.float64)
  if 'fromto' in site:
    if typ not in _FROMTO_TYPES:
      raise e.error('fromto requires a capsule, cylinder, box or ellipsoid', attribute='fromto')
    if np.any(np.asarray(site['pos']) != 0):
      raise e.error('both pos and fromto are given', attribute='fromto')
    pos, quat, size = _fromto(e, site['fromto'], typ, size)
  else:
    pos = np.array(site['pos'], dtype=np.float64)
    quat = frames.resolve_orientation(site, s.degree(e), s.eulerseq(e), e)
  for i in range(_NSIZE[typ]):
    if size[i] <= 0:
      raise e.error(f'size[{i}] must be positive', attribute='size')
  if site['frame'] is not None:
    pos, quat = frames.frame_accum(*site['frame'], pos, quat)
  site['pos_c'], site['quat_c'], site['size_c'] = pos, quat, size


def _compile_light_dir(lt: dict):
  """A light's direction (mjCLight::Compile): turned by its enclosing frames and normalised; a
  zero direction is refused."""
  d = np.asarray(lt['dir'], dtype=np.float64)
  if lt['frame'] is not None:
    d = frames.quat_rotate(lt['frame'][1], d)
  if sum(float(x) * float(x) for x in d) < EPS:
    raise lt['elem'].error('zero direction in light', attribute='dir')
  lt['dir'] = frames.normvec(d)


def _compile_frame_only(s: CompileState, obj: dict, orient=True):
  """A camera's or light's frame in its body (a light keeps no orientation of its own)."""
  e = obj['elem']
  pos = np.array(obj['pos'], dtype=np.float64)
  quat = (
    frames.resolve_orientation(obj, s.degree(e), s.eulerseq(e), e)
    if orient
    else np.array([1.0, 0, 0, 0])
  )
  if obj['frame'] is not None:
    pos, quat = frames.frame_accum(*obj['frame'], pos, quat)
  obj['pos_c'], obj['quat_c'] = pos, quat


def build_body_arrays(s: CompileState):
  """Writes the body_*, jnt_*, qpos0, dof_*, geom_*, site_*, cam_* and light_* arrays and their
  counts into out (the first section to write out)."""
  out = s.out
  bodies, joints, geoms, sites = s.bodies, s.joints, s.geoms, s.sites
  nbody = len(bodies)
  out.update(
    nbody=nbody,
    njnt=len(joints),
    ngeom=len(geoms),
    nsite=len(sites),
    ncam=len(s.cameras),
    nlight=len(s.lights),
    nq=s.nq,
    nv=s.nv,
    nmesh=len(s.meshes),
  )
  parent = np.array([b.get('parent', -1) for b in bodies])
  parent[0] = 0
  out['body_parentid'] = parent
  rootid = np.zeros(nbody, int)
  weldid = np.zeros(nbody, int)
  for b in bodies[1:]:
    i = b['id']
    p = b['parent']
    rootid[i] = i if p == 0 else rootid[p]
    weldid[i] = i if (b['joints'] or b['mocap']) else weldid[p]
  out['body_rootid'] = rootid
  out['body_weldid'] = weldid
  mocapid = -np.ones(nbody, int)
  nmocap = 0
  for b in bodies:
    if b['mocap']:
      mocapid[b['id']] = nmocap
      nmocap += 1
  out['body_mocapid'] = mocapid
  out['nmocap'] = nmocap
  out['body_jntnum'] = np.array([len(b['joints']) for b in bodies])
  out['body_jntadr'] = util.adr(out['body_jntnum'], empty=-1)
  out['body_dofnum'] = np.array([b.get('dofnum', 0) for b in bodies])
  out['body_dofadr'] = util.adr(out['body_dofnum'], empty=-1)
  out['body_geomnum'] = np.array([len(b['geoms']) for b in bodies])
  out['body_geomadr'] = util.adr(out['body_geomnum'], empty=-1)
  out['body_pos'] = np.array([b['pos'] for b in bodies])
  out['body_quat'] = np.array([frames.normvec(b['quat']) for b in bodies])
  out['body_ipos'] = np.array([b.get('ipos', np.zeros(3)) for b in bodies])
  out['body_iquat'] = np.array([b.get('iquat', np.array([1.0, 0, 0, 0])) for b in bodies])
  out['body_mass'] = np.array([b.get('mass', 0.0) for b in bodies])
  out['body_inertia'] = np.array([b.get('inertia', np.zeros(3)) for b in bodies])
  out['body_gravcomp'] = np.array([b['gravcomp'] for b in bodies])
  sub = out['body_mass'].copy()
  for i in range(nbody - 1, 0, -1):
    sub[parent[i]] += sub[i]
  out['body_subtreemass'] = sub
  out['body_depth'] = np.array([b['depth'] for b in bodies])
  # joints
  out['jnt_type'] = np.array([j['type'] for j in joints], dtype=int)
  out['jnt_qposadr'] = np.array([j['qposadr'] for j in joints], dtype=int)
  out['jnt_dofadr'] = np.array([j['dofadr'] for j in joints], dtype=int)
  out['jnt_bodyid'] = np.array([j['body'] for j in joints], dtype=int)
  out['jnt_group'] = np.array([j.get('group', 0) for j in joints], dtype=int)
  out['jnt_limited'] = np.array([j['limited_c'] for j in joints], dtype=int)
  out['jnt_actfrclimited'] = np.array([j['actfrclimited_c'] for j in joints], dtype=int)
  out['jnt_actgravcomp'] = np.array([int(j['actuatorgravcomp']) for j in joints], dtype=int)
  out['jnt_solref'] = util.rows([j['solreflimit'] for j in joints], 2)
  out['jnt_solimp'] = util.rows([j['solimplimit'] for j in joints], 5)
  out['jnt_pos'] = util.rows([j['pos_c'] for j in joints], 3)
  out['jnt_axis'] = util.rows([j['axis_c'] for j in joints], 3)
  out['jnt_range'] = util.rows([j['range_c'] for j in joints], 2)
  out['jnt_actfrcrange'] = util.rows([j['actuatorfrcrange'] for j in joints], 2)
  out['jnt_margin'] = np.array([j['margin'] for j in joints], dtype=float)
  stiff = [
    (np.array([j['springdamper'][0], 0, 0]) if _has_sd(j) else j['stiffness']) for j in joints
  ]
  damp = [(np.array([j['springdamper'][1], 0, 0]) if _has_sd(j) else j['damping']) for j in joints]
  out['jnt_stiffness'] = np.array([poly[0] for poly in stiff], dtype=float)
  out['jnt_stiffnesspoly'] = util.rows([poly[1:] for poly in stiff], 2)
  # springdamper: stiffness and damping from time constant and damping ratio need the mass
  # matrix (mj_setConst); recorded here, applied when constants are set.
  out['jnt_springdamper'] = util.rows([j.get('springdamper', np.zeros(2)) for j in joints], 2)
  qpos0, qpos_spring = [], []
  for j in joints:
    b = bodies[j['body']]
    if j['type'] == JointType.FREE:
      pose = np.concatenate([b['xpos0'], frames.normvec(b['xquat0'])])
      qpos0.append(pose)
      qpos_spring.append(pose)
    elif j['type'] == JointType.BALL:
      qpos0.append(np.array([1.0, 0, 0, 0]))
      qpos_spring.append(np.array([1.0, 0, 0, 0]))
    else:
      qpos0.append(np.array([j['ref_c']]))
      qpos_spring.append(np.array([j['springref_c']]))
  out['qpos0'] = np.concatenate(qpos0) if qpos0 else np.zeros(0)
  out['qpos_spring'] = np.concatenate(qpos_spring) if qpos_spring else np.zeros(0)
  # dofs
  dof_body, dof_jnt, dof_parent = [], [], []
  last_dof = -np.ones(nbody, int)  # last dof of each body's subtree path
  for b in bodies:
    i = b['id']
    prev = last_dof[b['parent']] if i > 0 else -1
    for j in b['joints']:
      nd = {JointType.FREE: 6, JointType.BALL: 3}.get(j['type'], 1)
      for _ in range(nd):
        dof_body.append(i)
        dof_jnt.append(j['id'])
        dof_parent.append(prev)
        prev = len(dof_body) - 1
    last_dof[i] = prev
  out['dof_bodyid'] = np.array(dof_body, dtype=int)
  out['dof_jntid'] = np.array(dof_jnt, dtype=int)
  out['dof_parentid'] = np.array(dof_parent, dtype=int)
  per_dof = lambda f: np.array([f(joints[k]) for k in dof_jnt], dtype=float)  # noqa: E731
  out['dof_armature'] = per_dof(lambda j: j['armature'])
  out['dof_damping'] = per_dof(lambda j: damp[j['id']][0])
  out['dof_dampingpoly'] = util.rows([damp[k][1:] for k in dof_jnt], 2)
  out['dof_frictionloss'] = per_dof(lambda j: j['frictionloss'])
  out['dof_solref'] = util.rows([joints[k]['solreffriction'] for k in dof_jnt], 2)
  out['dof_solimp'] = util.rows([joints[k]['solimpfriction'] for k in dof_jnt], 5)
  # geoms
  out['geom_type'] = np.array([g['type'] for g in geoms], dtype=int)
  out['geom_contype'] = np.array([g['contype'] for g in geoms], dtype=int)
  out['geom_conaffinity'] = np.array([g['conaffinity'] for g in geoms], dtype=int)
  out['geom_condim'] = np.array([g['condim'] for g in geoms], dtype=int)
  out['geom_bodyid'] = np.array([g['body'] for g in geoms], dtype=int)
  out['geom_dataid'] = np.array([g.get('dataid', -1) for g in geoms], dtype=int)
  out['geom_group'] = np.array([g['group'] for g in geoms], dtype=int)
  out['geom_priority'] = np.array([g['priority'] for g in geoms], dtype=int)
  out['geom_size'] = util.rows([g['size_c'] for g in geoms], 3)
  out['geom_pos'] = util.rows([g['pos_c'] for g in geoms], 3)
  out['geom_quat'] = util.rows([frames.normvec(g['quat_c']) for g in geoms], 4)
  out['geom_friction'] = util.rows([g['friction'] for g in geoms], 3)
  out['geom_solmix'] = np.array([g['solmix'] for g in geoms], dtype=float)
  out['geom_solref'] = util.rows([g['solref'] for g in geoms], 2)
  out['geom_solimp'] = util.rows([g['solimp'] for g in geoms], 5)
  out['geom_margin'] = np.array([g['margin'] for g in geoms], dtype=float)
  out['geom_gap'] = np.array([g['gap'] for g in geoms], dtype=float)
  out['geom_rgba'] = util.rows([g['rgba'] for g in geoms], 4)
  out['geom_rbound'] = np.array([_rbound(g, s.hfields) for g in geoms], dtype=float)
  out['geom_aabb'] = util.rows([_aabb(g, s.hfields) for g in geoms], 6)
  out['geom_fluidshape'] = np.array([g['fluidshape'] for g in geoms], dtype=int)
  out['geom_fluidcoef'] = util.rows([g['fluidcoef'] for g in geoms], 5)
  out['geom_surfacevel'] = util.rows([g['surfacevel'] for g in geoms], 6)
  out['geom_adhesion'] = np.array([g['adhesion'] for g in geoms], dtype=float)
  for g in geoms:
    if (
      g['type'] == GeomType.PLANE
      and weldid[g['body']] != 0
      and not bodies[weldid[g['body']]]['mocap']
    ):
      raise g['elem'].error('planes are only allowed in static bodies', attribute='type')
  # sites
  out['site_type'] = np.array([site['type'] for site in sites], dtype=int)
  out['site_bodyid'] = np.array([site['body'] for site in sites], dtype=int)
  out['site_group'] = np.array([site['group'] for site in sites], dtype=int)
  out['site_size'] = util.rows([site['size_c'] for site in sites], 3)
  out['site_pos'] = util.rows([site['pos_c'] for site in sites], 3)
  out['site_quat'] = util.rows([frames.normvec(site['quat_c']) for site in sites], 4)
  out['site_rgba'] = util.rows([site['rgba'] for site in sites], 4)
  # cameras and lights (kept for rendering)
  out['cam_bodyid'] = np.array([c['body'] for c in s.cameras], dtype=int)
  out['cam_mode'] = np.array([c['mode'] for c in s.cameras], dtype=int)
  out['cam_targetbodyid'] = np.array([c.get('targetbody', -1) for c in s.cameras], dtype=int)
  out['cam_pos'] = util.rows([c['pos_c'] for c in s.cameras], 3)
  out['cam_quat'] = util.rows([c['quat_c'] for c in s.cameras], 4)
  lens = [_camera_lens(c, s.znear) for c in s.cameras]
  out['cam_fovy'] = np.array([x[0] for x in lens], dtype=float)
  out['cam_resolution'] = np.array([x[1] for x in lens], dtype=np.int32).reshape(-1, 2)
  out['cam_sensorsize'] = util.rows([x[2] for x in lens], 2)
  out['cam_intrinsic'] = util.rows([x[3] for x in lens], 4)
  out['light_bodyid'] = np.array([lt['body'] for lt in s.lights], dtype=int)
  out['light_pos'] = util.rows([lt['pos_c'] for lt in s.lights], 3)
  out['light_dir'] = util.rows([lt['dir'] for lt in s.lights], 3)
  out['body_sameframe'] = _sameframe(out['body_ipos'], out['body_iquat'])
  for kind in ('geom', 'site'):
    body = out[f'{kind}_bodyid']
    out[f'{kind}_sameframe'] = _sameframe(
      out[f'{kind}_pos'], out[f'{kind}_quat'], out['body_ipos'][body], out['body_iquat'][body]
    )


def _fromto(e: Element, ft: np.ndarray, typ: int, size: np.ndarray):
  """Pos, quat and size of a capsule/cylinder/box/ellipsoid given by its two end points."""
  vec = ft[:3] - ft[3:]
  half = np.linalg.norm(vec) / 2
  if half < EPS:
    raise e.error('fromto points are too close', attribute='fromto')
  size = size.copy()
  if typ in (GeomType.ELLIPSOID, GeomType.BOX):
    size[2] = half
    size[1] = size[0]
  else:
    size[1] = half
  return (ft[:3] + ft[3:]) / 2, frames.z_to_quat(vec / np.linalg.norm(vec)), size


def _has_mass(b: dict) -> bool:
  """Mass and inertia above MINVAL in the body or a jointless descendant (CheckBodyMassInertia)."""
  if b['mass'] >= MINVAL and (np.asarray(b['inertia']) >= MINVAL).all():
    return True
  return any(_has_mass(c) for c in b['children'] if not c['joints'])


def _has_sd(j: dict) -> bool:
  """Whether a joint gives a nonzero springdamper (time constant, damping ratio)."""
  return 'springdamper' in j and bool((np.asarray(j['springdamper']) != 0).any())


def _sameframe(pos, quat, ipos=None, iquat=None) -> np.ndarray:
  """mjtSameFrame of objects whose frame coincides (within 1e-6) with their body's or inertia's."""

  def same_quat(a, b):
    return (np.abs(a - b) < 1e-6).all(-1) | (np.abs(a + b) < 1e-6).all(-1)

  unit = np.array([1.0, 0, 0, 0])
  nullpos = (np.abs(pos) < 1e-6).all(-1)
  nullrot = same_quat(quat, unit)
  out = np.zeros(len(pos), dtype=int)
  if ipos is not None:
    inertiarot = same_quat(quat, iquat)
    out[inertiarot] = 4
    out[inertiarot & (np.abs(pos - ipos) < 1e-6).all(-1)] = 2
  out[nullrot] = 3
  out[nullrot & nullpos] = 1
  return out


def _camera_lens(c: dict, znear: float):
  """(fovy, resolution, sensorsize, intrinsic) of a camera (mjCCamera::Compile).

  The lens attributes are single precision in MuJoCo (mjsCamera, mjModel.cam_intrinsic), so
  they are computed and rounded in float32 here too.
  """
  e = c['elem']
  f32 = np.float32
  fovy = float(c['fovy'])
  if fovy >= 180:
    raise e.error(f'fovy too large ({fovy:g}): must be below 180 degrees', attribute='fovy')
  res = np.array(c.get('resolution', (1, 1)), dtype=np.int64)
  ssize = np.array(c.get('sensorsize', (0, 0)), dtype=f32)
  lens = {k: np.array(c.get(k, (0, 0)), dtype=f32) for k in schema.CAMERA_LENS}
  has_intrinsic = any(v.any() for v in lens.values())
  has_ssize = bool(ssize[0] > 0 and ssize[1] > 0)
  if has_intrinsic and not has_ssize:
    raise e.error('focal/principal require sensorsize', attribute='sensorsize')
  if has_ssize and (res <= 0).any():
    raise e.error('sensorsize requires a positive resolution', attribute='resolution')
  intr = np.zeros(4, dtype=f32)
  if has_ssize:
    density = res.astype(f32) / ssize  # pixels per unit length
    for k, (length, pixel) in enumerate((('focal', 'focalpixel'), ('principal', 'principalpixel'))):
      for a in range(2):
        px = lens[pixel][a]
        intr[2 * k + a] = px / density[a] if px else lens[length][a]
    # atan2f (correctly rounded), then double
    fovy = float(f32(math.atan2(float(ssize[1] / f32(2)), float(intr[1])))) * 360.0 / math.pi
  else:
    intr[:2] = znear
  return fovy, res, ssize.astype(float), intr.astype(float)


def _rbound(g: dict, hfields: list[dict]) -> float:
  """geom_rbound: the radius of the geom's bounding sphere (0 for planes)."""
  s = g['size_c']
  t = g['type']
  if t == GeomType.SPHERE:
    return s[0]
  if t == GeomType.CAPSULE:
    return s[0] + s[1]
  if t == GeomType.CYLINDER:
    return math.hypot(s[0], s[1])
  if t == GeomType.ELLIPSOID:
    return max(s)
  if t == GeomType.BOX:
    return float(np.linalg.norm(s))
  if t == GeomType.MESH:
    return float(np.linalg.norm(s))
  if t == GeomType.HFIELD:
    hs = hfields[g['dataid']]['size']
    return math.sqrt(hs[0] ** 2 + hs[1] ** 2 + max(hs[2] ** 2, hs[3] ** 2))
  return 0.0


def _aabb(g: dict, hfields: list[dict]) -> np.ndarray:
  """geom_aabb (6,): centre and half-sizes of the bounding box in the geom frame
  (mjCGeom::ComputeAABB); planes are infinite, as mjMAXVAL boxes below their surface."""
  s, t = g['size_c'], g['type']
  if t == GeomType.MESH:
    return np.asarray(g['aabb_c'], dtype=float)
  if t == GeomType.PLANE:
    return np.array([0.0, 0.0, -MAXVAL / 2, MAXVAL, MAXVAL, MAXVAL / 2])
  if t == GeomType.HFIELD:
    hs = hfields[g['dataid']]['size']
    return np.array([0.0, 0.0, (hs[2] - hs[3]) / 2, hs[0], hs[1], (hs[2] + hs[3]) / 2])
  half = {
    GeomType.SPHERE: (s[0], s[0], s[0]),
    GeomType.CAPSULE: (s[0], s[0], s[0] + s[1]),
    GeomType.CYLINDER: (s[0], s[0], s[1]),
  }
  return np.concatenate([np.zeros(3), half.get(t, s[:3])])

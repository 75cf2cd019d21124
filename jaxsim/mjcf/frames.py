"""Frames: every MJCF orientation form -> unit quaternion, and frame composition (NumPy)."""

from __future__ import annotations

import math

import numpy as np

from jaxsim._src.enums import EPS

ORIENTATIONS = ('quat', 'axisangle', 'xyaxes', 'zaxis', 'euler')


def normvec(v) -> np.ndarray:
  """v scaled to unit length, left as it is within EPS of unit length (mjuu_normvec).

  The arithmetic follows MuJoCo's compiler operation by operation (these helpers mirror
  user_util.cc), so that compiled poses agree to the last bit: a box placed exactly on a plane
  then touches it with dist 0 in both engines.
  """
  v = [float(x) for x in v]
  nrm = 0.0
  for x in v:
    nrm += x * x
  if nrm < EPS:
    return np.array(v)
  nrm = math.sqrt(nrm)
  if abs(nrm - 1) > EPS:
    v = [x / nrm for x in v]
  return np.array(v)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Hamilton product a * b of (4,) quaternions, normalised (mjuu_mulquat)."""
  w1, x1, y1, z1 = (float(x) for x in a)
  w2, x2, y2, z2 = (float(x) for x in b)
  return normvec(
    [
      w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
      w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
      w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
      w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ]
  )


def quat_conj(q: np.ndarray) -> np.ndarray:
  """Conjugate (inverse of a unit quaternion)."""
  return np.array([q[0], -q[1], -q[2], -q[3]])


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
  """Rotates (3,) vector v by unit quaternion q (mjuu_quat2mat, mjuu_mulvecmat)."""
  m = quat_to_mat(q)
  x, y, z = (float(c) for c in v)
  return np.array([m[r, 0] * x + m[r, 1] * y + m[r, 2] * z for r in range(3)])


def quat_to_mat(q: np.ndarray) -> np.ndarray:
  """(3, 3) rotation matrix of a unit quaternion (mjuu_quat2mat)."""
  w, x, y, z = (float(c) for c in q)
  if w == 1 and x == 0 and y == 0 and z == 0:
    return np.eye(3)
  q00, q01, q02, q03 = w * w, w * x, w * y, w * z
  q11, q12, q13, q22, q23, q33 = x * x, x * y, x * z, y * y, y * z, z * z
  return np.array(
    [
      [q00 + q11 - q22 - q33, 2 * (q12 - q03), 2 * (q13 + q02)],
      [2 * (q12 + q03), q00 - q11 + q22 - q33, 2 * (q23 - q01)],
      [2 * (q13 - q02), 2 * (q23 + q01), q00 - q11 - q22 + q33],
    ]
  )


def mat_to_quat(m: np.ndarray) -> np.ndarray:
  """Unit quaternion of a (3, 3) rotation matrix, branch by largest component (mjuu_frame2quat)."""
  tr = m[0, 0] + m[1, 1] + m[2, 2]
  if tr > 0:
    w = 0.5 * math.sqrt(1 + tr)
    q = [
      w,
      0.25 * (m[2, 1] - m[1, 2]) / w,
      0.25 * (m[0, 2] - m[2, 0]) / w,
      0.25 * (m[1, 0] - m[0, 1]) / w,
    ]
  elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
    x = 0.5 * math.sqrt(1 + m[0, 0] - m[1, 1] - m[2, 2])
    q = [
      0.25 * (m[2, 1] - m[1, 2]) / x,
      x,
      0.25 * (m[0, 1] + m[1, 0]) / x,
      0.25 * (m[0, 2] + m[2, 0]) / x,
    ]
  elif m[1, 1] > m[2, 2]:
    y = 0.5 * math.sqrt(1 - m[0, 0] + m[1, 1] - m[2, 2])
    q = [
      0.25 * (m[0, 2] - m[2, 0]) / y,
      0.25 * (m[0, 1] + m[1, 0]) / y,
      y,
      0.25 * (m[1, 2] + m[2, 1]) / y,
    ]
  else:
    z = 0.5 * math.sqrt(1 - m[0, 0] - m[1, 1] + m[2, 2])
    q = [
      0.25 * (m[1, 0] - m[0, 1]) / z,
      0.25 * (m[0, 2] + m[2, 0]) / z,
      0.25 * (m[1, 2] + m[2, 1]) / z,
      z,
    ]
  q = np.array(q)
  return q / np.linalg.norm(q)


def z_to_quat(vec: np.ndarray) -> np.ndarray:
  """The minimal rotation taking +z to direction `vec` (mjuu_z2quat)."""
  vec = np.asarray(vec, dtype=np.float64)
  axis = np.cross([0.0, 0.0, 1.0], vec)
  s = np.linalg.norm(axis)
  if s < 1e-10:
    axis = np.array([1.0, 0.0, 0.0])
  else:
    axis = axis / s
  ang = math.atan2(s, vec[2])
  return np.concatenate([[math.cos(ang / 2)], axis * math.sin(ang / 2)])


def frame_accum(pos, quat, child_pos, child_quat) -> tuple[np.ndarray, np.ndarray]:
  """Composes a child frame onto a parent frame: (pos + quat*child_pos, quat*child_quat)."""
  return pos + quat_rotate(quat, child_pos), quat_mul(quat, child_quat)


def resolve_orientation(attrs: dict, degree: bool, eulerseq: str, elem, default_quat=None):
  """Unit quaternion from whichever orientation attribute is present (ResolveOrientation).

  Raises ModelError (through `elem.error`) when more than one is given or one is degenerate.
  """
  given = [k for k in ORIENTATIONS if k in attrs]
  if len(given) > 1:
    raise elem.error(f'orientation given twice ({given[0]} and {given[1]})', attribute=given[1])
  if not given:
    q = np.array([1.0, 0, 0, 0]) if default_quat is None else np.asarray(default_quat, float)
    return q
  key = given[0]
  v = np.asarray(attrs[key], dtype=np.float64)
  if key == 'quat':
    n = np.linalg.norm(v)
    if n < EPS:
      raise elem.error('quaternion is zero', attribute=key)
    return normvec(v)
  if key == 'axisangle':
    axis, angle = v[:3], v[3]
    if degree:
      angle = angle / 180.0 * math.pi
    n = np.linalg.norm(axis)
    if n < EPS:
      raise elem.error('axisangle axis is too small', attribute=key)
    axis = axis / n
    return np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])
  if key == 'xyaxes':
    x, y = v[:3].copy(), v[3:].copy()
    n = np.linalg.norm(x)
    if n < EPS:
      raise elem.error('xyaxes x axis is too small', attribute=key)
    x /= n
    y -= x * np.dot(x, y)
    n = np.linalg.norm(y)
    if n < EPS:
      raise elem.error('xyaxes y axis is too small or parallel to x', attribute=key)
    y /= n
    z = np.cross(x, y)
    n = np.linalg.norm(z)
    if n < EPS:
      raise elem.error('cross(xaxis, yaxis) is too small', attribute=key)
    z /= n
    return mat_to_quat(np.stack([x, y, z], axis=1))
  if key == 'zaxis':
    n = np.linalg.norm(v)
    if n < EPS:
      raise elem.error('zaxis is too small', attribute=key)
    return z_to_quat(v / n)
  # euler
  angles = v / 180.0 * math.pi if degree else v
  q = np.array([1.0, 0, 0, 0])
  for a, ax in zip(angles, eulerseq):
    rot = np.array([math.cos(a / 2), 0.0, 0.0, 0.0])
    rot['xyz'.index(ax.lower()) + 1] = math.sin(a / 2)
    q = quat_mul(q, rot) if ax.islower() else quat_mul(rot, q)
  return normvec(q)

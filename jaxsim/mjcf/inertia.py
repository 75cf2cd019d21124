"""Geom volumes and principal inertias (mjCGeom::GetVolume / SetInertia), body inertia frames."""

from __future__ import annotations

import math

import numpy as np

from jaxsim._src.enums import GeomType
from jaxsim.mjcf import frames
from jaxsim.mjcf.mesh import eig3


def geom_volume(typ: int, size: np.ndarray, shell: bool) -> float:
  """Volume (or surface area, for shell inertia) of a primitive geom."""
  r = size[0]
  if typ == GeomType.SPHERE:
    return 4 * math.pi * r**2 if shell else 4 * math.pi * r**3 / 3
  if typ == GeomType.CAPSULE:
    h = 2 * size[1]
    return (
      4 * math.pi * r * r + 2 * math.pi * r * h if shell else math.pi * (r * r * h + 4 * r**3 / 3)
    )
  if typ == GeomType.CYLINDER:
    h = 2 * size[1]
    return 2 * math.pi * r * r + 2 * math.pi * r * h if shell else math.pi * r * r * h
  if typ == GeomType.ELLIPSOID:
    a, b, c = size
    if not shell:
      return 4 * math.pi * a * b * c / 3
    p = 1.6075  # Thomsen's approximation of the ellipsoid surface area
    return 4 * math.pi * (((a * b) ** p + (b * c) ** p + (c * a) ** p) / 3) ** (1 / p)
  if typ in (GeomType.BOX, GeomType.HFIELD):
    a, b, c = size
    return 8 * (a * b + b * c + c * a) if shell else 8 * a * b * c
  return 0.0


def geom_inertia(typ: int, size: np.ndarray, mass: float, shell: bool) -> np.ndarray:
  """(3,) principal inertia of a primitive geom of the given mass, in the geom frame."""
  if typ == GeomType.SPHERE:
    return np.full(3, (2 / 3 if shell else 2 / 5) * mass * size[0] ** 2)
  if typ == GeomType.CAPSULE:
    r, hh = size[0], size[1]
    h = 2 * hh
    if not shell:
      ms = mass * 4 * r / (4 * r + 3 * h)
      mc = mass - ms
      ixy = mc * (3 * r * r + h * h) / 12 + 2 * ms * r * r / 5 + ms * h * (3 * r + 2 * h) / 8
      iz = mc * r * r / 2 + 2 * ms * r * r / 5
      return np.array([ixy, ixy, iz])
    a_s, a_c = 4 * math.pi * r * r, 2 * math.pi * r * h
    ms = mass * a_s / (a_s + a_c)
    mc = mass - ms
    hs_com = r / 2
    hs_pos = hh + hs_com
    ixy = mc * (6 * r * r + h * h) / 12 + 2 * ms * r * r / 3 + ms * (hs_pos**2 - hs_com**2)
    iz = mc * r * r + 2 * ms * r * r / 3
    return np.array([ixy, ixy, iz])
  if typ == GeomType.CYLINDER:
    r, hh = size[0], size[1]
    h = 2 * hh
    if not shell:
      ixy = mass * (3 * r * r + h * h) / 12
      return np.array([ixy, ixy, mass * r * r / 2])
    a_d, a_c = math.pi * r * r, 2 * math.pi * r * h
    md = mass * a_d / (2 * a_d + a_c)
    mc = mass - 2 * md
    ixy = mc * (6 * r * r + h * h) / 12 + 2 * (md * r * r / 4 + md * hh * hh)
    iz = mc * r * r + 2 * (md * r * r / 2)
    return np.array([ixy, ixy, iz])
  if typ == GeomType.ELLIPSOID:
    s2 = size**2
    solid = np.array([s2[1] + s2[2], s2[0] + s2[2], s2[0] + s2[1]]) / 5
    if not shell:
      return mass * solid
    # Shell: difference of two solid ellipsoids a small distance apart, as MuJoCo does.
    eps = 1e-6
    va = 4 * math.pi * size[0] * size[1] * size[2] / 3
    e = size + eps
    vb = 4 * math.pi * e[0] * e[1] * e[2] / 3
    density = mass / (vb - va)
    e2 = e**2
    outer = np.array([e2[1] + e2[2], e2[0] + e2[2], e2[0] + e2[1]]) / 5
    return vb * density * outer - va * density * solid
  if typ in (GeomType.BOX, GeomType.HFIELD):
    s2 = size**2
    if not shell:
      return mass * np.array([s2[1] + s2[2], s2[0] + s2[2], s2[0] + s2[1]]) / 3
    lx, ly, lz = 2 * size
    a0, a1, a2 = lx * ly, ly * lz, lz * lx
    total = 2 * (a0 + a1 + a2)
    m0, m1, m2 = mass * a0 / total, mass * a1 / total, mass * a2 / total
    i0 = np.array([ly * ly, lx * lx, lx * lx + ly * ly]) * m0 / 12
    i1 = np.array([ly * ly + lz * lz, lz * lz, ly * ly]) * m1 / 12
    i2 = np.array([lz * lz, lx * lx + lz * lz, lx * lx]) * m2 / 12
    return 2 * np.array(
      [
        m0 * s2[2] + m2 * s2[1] + i0[0] + i1[0] + i2[0],
        m0 * s2[2] + m1 * s2[0] + i0[1] + i1[1] + i2[1],
        m1 * s2[0] + m2 * s2[1] + i0[2] + i1[2] + i2[2],
      ]
    )
  return np.zeros(3)


def box_inertia(box: np.ndarray, mass: float) -> np.ndarray:
  """(3,) inertia of a solid box with half-sizes `box` (how MuJoCo turns a mesh into inertia)."""
  b2 = np.asarray(box) ** 2
  return mass * np.array([b2[1] + b2[2], b2[0] + b2[2], b2[0] + b2[1]]) / 3


def principal_frame(tensor: np.ndarray, tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
  """Principal moments (3,) in decreasing order and the frame's quaternion (4,) exactly as
  mjuu_eig3 returns it (sign included: a free body aligned to it shows it in qpos0)."""
  w, q = eig3([float(x) for x in np.asarray(tensor, dtype=float).reshape(9)], tol)
  return np.array(w), np.array(q, dtype=float)


def principal_axes(tensor: np.ndarray, tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
  """Principal moments (3,) in decreasing order and axes (3, 3) (columns) of an inertia tensor.

  Uses MuJoCo's Jacobi iteration (mjuu_eig3) so that the frame, not only the tensor, is MuJoCo's:
  the sign and order of the axes decide ximat.
  """
  w, q = eig3([float(x) for x in np.asarray(tensor, dtype=float).reshape(9)], tol)
  return np.array(w), frames.quat_to_mat(np.array(q))

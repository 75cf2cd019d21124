"""Quaternions, rotations and spatial (6D) algebra in MuJoCo's conventions; NaN-safe norms.

Quaternions are (w, x, y, z). Spatial vectors are (rotation, translation), as MuJoCo cvel, cdof
cfrc. A 10-vector body inertia (cinert) is (Ixx, Iyy, Izz, Ixy, Ixz, Iyz, m*c (3,), m).
Every function works on leading batch dimensions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp

from jaxsim._src.enums import MINVAL

F = TypeVar('F', bound=Callable)

# The matmul precision every engine function is traced with: float32 products in float32. JAX's
# default lets a GPU round float32 matmul inputs to TensorFloat-32 (10 mantissa bits) and a TPU
# to bfloat16; the solver's gradient and Hessian then carry errors of 1e-3 relative, far above
# the tolerance its stop test asks for, and worlds run to the iteration cap (the 2026-11-28 H200
# run: ball_in_cup 100 Newton trips batched for a per-world mean of 3).
MATMUL_PRECISION = 'highest'


def full_precision(f: F) -> F:
  """f traced under jax.default_matmul_precision(MATMUL_PRECISION), whatever the user's default.

  JAX reads the default precision when an operation is traced (lax.canonicalize_precision), so
  every dot_general that f and the functions it calls trace, loop bodies and derivative rules
  included, is full float32 (or float64). On a CPU float32 products are already exact: nothing
  changes there.
  """

  @functools.wraps(f)
  def wrapped(*args, **kwargs):
    with jax.default_matmul_precision(MATMUL_PRECISION):
      return f(*args, **kwargs)

  return wrapped  # type: ignore[return-value]


def safe_norm(x: jax.Array, axis: int = -1, keepdims: bool = False) -> jax.Array:
  """Euclidean norm whose gradient at zero is zero instead of NaN."""
  sq = jnp.sum(x * x, axis=axis, keepdims=keepdims)
  pos = sq > 0
  return jnp.where(pos, jnp.sqrt(jnp.where(pos, sq, 1.0)), 0.0)


def normalize(x: jax.Array, fallback: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(x / |x|, |x|); `fallback` where |x| < mjMINVAL, as mju_normalize3 (times 1/|x|)."""
  n = safe_norm(x, keepdims=True)
  small = n < MINVAL
  unit = jnp.where(small, fallback, x * (1.0 / jnp.where(small, 1.0, n)))
  return unit, n[..., 0]


def normalize3(v: jax.Array) -> tuple[jax.Array, jax.Array]:
  """mju_normalize3: unit vector and norm; (1, 0, 0) for a null vector."""
  return normalize(v, jnp.array([1.0, 0.0, 0.0], dtype=v.dtype))


@jax.custom_jvp
def quat_normalize(q: jax.Array) -> jax.Array:
  """mju_normalize4: unit quaternion; identity for a null quaternion.

  As MuJoCo, a quaternion within mjMINVAL of unit length is returned as it is: its last bits
  decide, e.g., whether a box placed exactly on a plane touches it (dist 0, no constraint row)
  or sinks by 1e-16. The derivative is that of q / |q| all the same.
  """
  unit = normalize(q, jnp.array([1.0, 0.0, 0.0, 0.0], dtype=q.dtype))[0]
  n = safe_norm(q, keepdims=True)
  return jnp.where(jnp.abs(n - 1.0) <= MINVAL, q, unit)


@quat_normalize.defjvp
def _quat_normalize_jvp(primals, tangents):
  (q,), (dq,) = primals, tangents
  n = safe_norm(q, keepdims=True)
  small = n < MINVAL
  inv = 1.0 / jnp.where(small, 1.0, n)
  u = q * inv
  dout = (dq - u * jnp.sum(u * dq, axis=-1, keepdims=True)) * inv
  return quat_normalize(q), jnp.where(small, 0.0, dout)


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
  """Quaternion product a * b (mju_mulQuat)."""
  aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
  bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
  return jnp.stack(
    [
      aw * bw - ax * bx - ay * by - az * bz,
      aw * bx + ax * bw + ay * bz - az * by,
      aw * by - ax * bz + ay * bw + az * bx,
      aw * bz + ax * by - ay * bx + az * bw,
    ],
    axis=-1,
  )


def quat_neg(q: jax.Array) -> jax.Array:
  """Conjugate quaternion (mju_negQuat)."""
  return q * jnp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_to_mat(q: jax.Array) -> jax.Array:
  """Rotation matrix (..., 3, 3) of a unit quaternion (mju_quat2Mat)."""
  w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
  ww, xx, yy, zz = w * w, x * x, y * y, z * z
  wx, wy, wz, xy, xz, yz = w * x, w * y, w * z, x * y, x * z, y * z
  rows = [
    [ww + xx - yy - zz, 2 * (xy - wz), 2 * (xz + wy)],
    [2 * (xy + wz), ww - xx + yy - zz, 2 * (yz - wx)],
    [2 * (xz - wy), 2 * (yz + wx), ww - xx - yy + zz],
  ]
  return jnp.stack([jnp.stack(r, axis=-1) for r in rows], axis=-2)


def rot_vec_quat(v: jax.Array, q: jax.Array) -> jax.Array:
  """Rotates v by unit quaternion q (mju_rotVecQuat)."""
  u = q[..., 1:]
  w = q[..., :1]
  t = 2.0 * jnp.cross(u, v)
  return v + w * t + jnp.cross(u, t)


def axis_angle_to_quat(axis: jax.Array, angle: jax.Array) -> jax.Array:
  """Quaternion rotating by `angle` about unit `axis` (mju_axisAngle2Quat)."""
  half = 0.5 * angle[..., None]
  return jnp.concatenate([jnp.cos(half), axis * jnp.sin(half)], axis=-1)


def quat_to_vel(q: jax.Array, dt: jax.Array | float = 1.0) -> jax.Array:
  """3D velocity of the rotation q over time dt (mju_quat2Vel)."""
  axis, sin_a_2 = normalize3(q[..., 1:])
  speed = 2.0 * jnp.arctan2(sin_a_2, q[..., 0])
  speed = jnp.where(speed > jnp.pi, speed - 2.0 * jnp.pi, speed) / dt
  return axis * speed[..., None]


def quat_sub(qa: jax.Array, qb: jax.Array) -> jax.Array:
  """Difference of orientations as a 3D velocity res with qb * quat(res) = qa (mju_subQuat)."""
  return quat_to_vel(quat_mul(quat_neg(qb), qa))


def quat_integrate(q: jax.Array, vel: jax.Array, scale: jax.Array | float) -> jax.Array:
  """Rotates q by the local angular velocity vel over time scale (mju_quatIntegrate)."""
  axis, n = normalize3(vel)
  qrot = axis_angle_to_quat(axis, scale * n)
  return quat_mul(quat_normalize(q), qrot)


def cross_motion(v: jax.Array, u: jax.Array) -> jax.Array:
  """Spatial motion cross product v x u (mju_crossMotion)."""
  vw, vl = v[..., :3], v[..., 3:]
  uw, ul = u[..., :3], u[..., 3:]
  return jnp.concatenate([jnp.cross(vw, uw), jnp.cross(vw, ul) + jnp.cross(vl, uw)], axis=-1)


def cross_force(v: jax.Array, f: jax.Array) -> jax.Array:
  """Spatial force cross product v x* f (mju_crossForce)."""
  vw, vl = v[..., :3], v[..., 3:]
  fw, fl = f[..., :3], f[..., 3:]
  return jnp.concatenate([jnp.cross(vw, fw) + jnp.cross(vl, fl), jnp.cross(vw, fl)], axis=-1)


def inert_mul(i: jax.Array, v: jax.Array) -> jax.Array:
  """Spatial inertia (10-vector) times motion vector (mju_mulInertVec)."""
  ixx, iyy, izz, ixy, ixz, iyz = (i[..., k] for k in range(6))
  h = i[..., 6:9]
  m = i[..., 9:10]
  w, lin = v[..., :3], v[..., 3:]
  iw = jnp.stack(
    [
      ixx * w[..., 0] + ixy * w[..., 1] + ixz * w[..., 2],
      ixy * w[..., 0] + iyy * w[..., 1] + iyz * w[..., 2],
      ixz * w[..., 0] + iyz * w[..., 1] + izz * w[..., 2],
    ],
    axis=-1,
  )
  return jnp.concatenate([iw + jnp.cross(h, lin), m * lin - jnp.cross(h, w)], axis=-1)


def inert_com(inertia: jax.Array, mat: jax.Array, dif: jax.Array, mass: jax.Array) -> jax.Array:
  """Body inertia (principal inertia (3,), frame mat) about a point dif away (mju_inertCom)."""
  full = jnp.einsum('...ij,...j,...kj->...ik', mat, inertia, mat)
  m = mass[..., None]
  dd = jnp.sum(dif * dif, axis=-1)
  x, y, z = dif[..., 0], dif[..., 1], dif[..., 2]
  mm = mass
  return jnp.stack(
    [
      full[..., 0, 0] + mm * (dd - x * x),
      full[..., 1, 1] + mm * (dd - y * y),
      full[..., 2, 2] + mm * (dd - z * z),
      full[..., 0, 1] - mm * x * y,
      full[..., 0, 2] - mm * x * z,
      full[..., 1, 2] - mm * y * z,
      m[..., 0] * x,
      m[..., 0] * y,
      m[..., 0] * z,
      mm,
    ],
    axis=-1,
  )


def dof_com(axis: jax.Array, offset: jax.Array, rotational: jax.Array) -> jax.Array:
  """Motion dof in the com frame (mju_dofCom): (axis, axis x offset) or (0, axis)."""
  rot = jnp.concatenate([axis, jnp.cross(axis, offset)], axis=-1)
  lin = jnp.concatenate([jnp.zeros_like(axis), axis], axis=-1)
  return jnp.where(rotational[..., None], rot, lin)


def transform_motion(vel: jax.Array, newpos: jax.Array, oldpos: jax.Array) -> jax.Array:
  """Shifts a spatial motion vector from oldpos to newpos (mju_transformSpatial, no rotation)."""
  dif = newpos - oldpos
  return jnp.concatenate([vel[..., :3], vel[..., 3:] - jnp.cross(dif, vel[..., :3])], axis=-1)


def _order_key(x: jax.Array) -> jax.Array:
  """Unsigned integers ordered as the floats x are (-0 below +0; NaN beyond the infinities)."""
  bits = 32 if x.dtype == jnp.float32 else 64
  it, ut = (jnp.int32, jnp.uint32) if bits == 32 else (jnp.int64, jnp.uint64)
  i = jax.lax.bitcast_convert_type(x, it)
  u = jax.lax.bitcast_convert_type(x, ut)
  sign = jnp.asarray(1 << (bits - 1), ut)
  # negative floats: all bits flipped (larger magnitude, smaller key); others: sign bit set
  return jnp.where(i < 0, ~u, u | sign)


def smallest(x: jax.Array, k: int) -> jax.Array:
  """Mask (n,) of the entries of x (n,) not above its k-th smallest (1 <= k <= n).

  A bisection on the floats' order (32 or 64 halvings of a count over x) instead of a sort or
  top_k: XLA's CPU sort is a comparator call per comparison, the slowest part of a compaction.
  Ties with the k-th smallest are all in the mask.
  """
  if x.dtype not in (jnp.float32, jnp.float64):
    x = x.astype(jnp.float32)
  key = _order_key(jnp.where(x == 0, jnp.zeros_like(x), x))  # -0 ties with +0, as <= has it
  bits = 32 if x.dtype == jnp.float32 else 64

  def halve(_, lohi):
    lo, hi = lohi
    mid = lo + (hi - lo) // 2
    enough = jnp.sum(key <= mid) >= k
    return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

  # the smallest key with at least k keys at or below it: the k-th smallest key
  _, kth = jax.lax.fori_loop(0, bits, halve, (jnp.min(key), jnp.max(key)))
  return key <= kth


def ranked(count: jax.Array, start: jax.Array | int, k: int) -> jax.Array:
  """Indices of the true entries of rank start .. start + k - 1 of a mask, by binary search on
  its running count (a gather: XLA's CPU runs a scatter as a loop over its updates).

  Arguments:
    count: (n,) the mask's cumsum (nondecreasing integers).
    start: () the rank of the first index wanted (0: the first true entry).
    k: how many indices (static).
  Returns:
    (k,) int32 indices into the mask, in order; n where the mask has fewer true entries.
  """
  want = start + jnp.arange(1, k + 1, dtype=count.dtype)
  return jnp.searchsorted(count, want, side='left', method='scan_unrolled').astype(jnp.int32)

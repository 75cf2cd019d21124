"""Dense Newton baseline for the variational integrator: the same DEL residual (DRNEA), the exact
Jacobian (nv forward-mode passes, O(n^2)) and an LU solve per iteration (O(n^3)).

Only a baseline for benchmarks/variational.py; the library's solver is RIQN (jaxsim.variational).
The Jacobian is taken in tangent coordinates of q_k+1, so hinge and slide chains are what it is
meant for (at a zero tangent, quaternion updates have a zero derivative in mj_integratePos).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxsim._src import variational as vi
from jaxsim._src.integrate import integrate_pos
from jaxsim._src.types import Data, Model


def newton_step_with_info(
  m: Model, d: Data, max_iter: int = vi.MAX_ITER, tolerance: float | None = None
) -> tuple[Data, dict]:
  """One variational step solved by Newton's method with the exact Jacobian of the residual."""
  h = m.opt.timestep
  tol = m.opt.tolerance if tolerance is None else tolerance
  c = vi.prepare(m, d)

  def f_of(q):
    return lambda eps: vi.residual(m, c, integrate_pos(m, q, eps, 1.0), d)

  def update(q):
    zero = jnp.zeros(m.nv, q.dtype)
    f = f_of(q)(zero)
    jac = jax.jacfwd(f_of(q))(zero)
    dq = jnp.linalg.solve(jac, f)
    # the same stopping rule as RIQN: the velocity correction dq / h
    return integrate_pos(m, q, dq, -1.0), jnp.max(jnp.abs(dq)) / h

  q, dvn = update(integrate_pos(m, d.qpos, d.qvel, h))

  def body(carry, _):
    q, dvn, it = carry
    done = dvn <= tol
    q, dvn = jax.lax.cond(done, lambda q: (q, dvn), update, q)
    return (q, dvn, it + jnp.where(done, 0, 1)), None

  (q, dvn, it), _ = jax.lax.scan(body, (q, dvn, jnp.zeros((), jnp.int32)), None, length=max_iter)
  qvel = vi.difference(m, q, d.qpos, h)
  out = d.replace(qpos=q, qvel=qvel, qacc=(qvel - d.qvel) / h, time=d.time + h)
  return out, {'iterations': it, 'converged': dvn <= tol, 'update': dvn}


def newton_step(m: Model, d: Data) -> Data:
  """One variational step by dense Newton."""
  return newton_step_with_info(m, d)[0]

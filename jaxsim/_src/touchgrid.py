"""Touch grid sensors: the mujoco.sensor.touch_grid engine plugin (TouchGrid::Compute)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxsim._src import rne_post
from jaxsim._src.types import Data, Model


def _bin_edges(n: int, fov: float, gamma: float) -> np.ndarray:
  """Angular bin edges (n + 1,) of a touch grid axis (touch_grid.cc BinEdges)."""
  # LinSpace's running sum, not np.linspace: the edges must round as MuJoCo's do
  step, x, edges = 2.0 / n, -1.0, []
  for _ in range(n + 1):
    edges.append(x)
    x += step
  edges = np.array(edges)
  if gamma:
    g = min(max(gamma, 0.0), 1.0)
    edges = g * edges**5 + (1 - g) * edges
  return edges * (fov * np.pi / 180)


def touch_grid(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
  """Contact forces and torques between each sensor's body and the others, binned by direction
  from the sensor's site into a grid of taxels (the mujoco.sensor.touch_grid plugin).

  Each contact's force:torque is rotated into the site's frame as (normal, tangent, tangent)
  components, pointing into the sensor's body, and summed into the bin of its direction in
  spherical coordinates (azimuth, elevation) about the site's -z axis; sensors with equal
  parameters are computed together.
  """
  prm = np.asarray(m.sensor_plugin_prm)[ids]
  dim = np.asarray(m.sensor_dim)[ids]
  out = jnp.zeros((len(ids), int(dim.max())), d.sensordata.dtype)
  if not d.contact.dist.shape[0]:
    return out
  weld = np.asarray(m.body_weldid)
  gb = jnp.asarray(np.asarray(m.geom_bodyid))
  con = d.contact
  b1, b2 = gb[con.geom1], gb[con.geom2]
  w1, w2 = jnp.asarray(weld)[b1], jnp.asarray(weld)[b2]
  frc = rne_post.contact_force(m, d)  # (ncon, 6), contact frame
  # contact frame -> world (frame rows are the axes)
  world = jnp.einsum('cji,ckj->cki', con.frame, frc.reshape(-1, 2, 3))
  for key in np.unique(prm, axis=0):
    sel = np.flatnonzero((prm == key).all(axis=1))
    nchannel, sx, sy = (int(v) for v in key[:3])
    site = np.asarray(m.sensor_objid)[ids[sel]]
    parent = jnp.asarray(weld[np.asarray(m.site_bodyid)[site]])  # (k,)
    xpos, xmat = d.site_xpos[site], d.site_xmat[site]  # (k, 3), (k, 3, 3)
    on = con.active[None, :] & ((w1[None, :] == parent[:, None]) | (w2[None, :] == parent[:, None]))
    f = jnp.einsum('sji,ckj->scki', xmat, world)  # (k, ncon, 2, 3) in the site frame
    # forces point from geom1 to geom2: flip those of contacts whose geom1 is on the sensor's body,
    # so that they all push into it (as mujoco 4.0.0's plugin does: measured, see the tests)
    flip = w1[None, :] == parent[:, None]
    f = jnp.where(flip[..., None, None], -f, f)
    f = f[..., jnp.array([2, 0, 1])].reshape(len(sel), -1, 6)  # (x, y, z) -> (z, x, y)
    p = jnp.einsum('sji,scj->sci', xmat, con.pos[None] - xpos[:, None])
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    # a contact on the site's z axis (x = z = 0) has azimuth 0: guard the gradients there
    axis = (x == 0) & (z == 0)
    azimuth = jnp.arctan2(x, jnp.where(axis, -1.0, -z))
    elevation = jnp.arctan2(y, jnp.sqrt(jnp.where(axis, 1.0, x * x + z * z)) * ~axis)
    ex = jnp.asarray(_bin_edges(sx, key[3], key[5]), p.dtype)
    ey = jnp.asarray(_bin_edges(sy, key[4], key[5]), p.dtype)
    ix = jnp.searchsorted(ex, azimuth, side='left')
    iy = jnp.searchsorted(ey, elevation, side='left')
    inside = on & (ix > 0) & (ix < sx + 1) & (iy > 0) & (iy < sy + 1)
    cell = (iy - 1) * sx + (ix - 1)  # (k, ncon), used where inside
    frame = sx * sy
    val = jnp.where(inside[..., None], f[..., :nchannel], 0.0)  # (k, ncon, nchannel)
    idx = cell[..., None] + frame * jnp.arange(nchannel)  # channel-major images
    # one scatter for all sensors of the group: sensor k's images start at k * nchannel * frame
    size = nchannel * frame
    nowhere = len(sel) * size  # past the end: dropped
    idx = jnp.where(inside[..., None], idx + size * jnp.arange(len(sel))[:, None, None], nowhere)
    grid = (
      jnp.zeros(len(sel) * size, val.dtype).at[idx.reshape(-1)].add(val.reshape(-1), mode='drop')
    )
    out = out.at[sel, :size].set(grid.reshape(len(sel), size).astype(out.dtype))
  return out

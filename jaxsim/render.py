"""Headless rendering of trajectories: geoms as shaded polygon meshes drawn by matplotlib.

Works without a screen, a GPU or MuJoCo: geom frames come from jaxsim's own kinematics, polygons
are drawn by matplotlib's Agg canvas (no pyplot, no backend switch) and frames are written as a
GIF with Pillow (a matplotlib dependency) or as an MP4 when `ffmpeg` is on the PATH. matplotlib is
not a jaxsim dependency (it is in the `bench` extra); it is imported only when a frame is drawn.

Colours are geom_rgba; geoms that keep MuJoCo's default grey get a colour per body, since jaxsim
does not compile materials. Geoms in groups 3 and up, or fully transparent, are hidden as in
MuJoCo's default visualisation. Height fields are not drawn.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

import jax
import numpy as np

import jaxsim
from jaxsim import GeomType, Model

_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
_PALETTE = np.array(
  [
    [0.90, 0.50, 0.20],
    [0.25, 0.45, 0.85],
    [0.30, 0.70, 0.35],
    [0.80, 0.30, 0.35],
    [0.60, 0.45, 0.75],
    [0.85, 0.75, 0.30],
    [0.35, 0.70, 0.75],
    [0.75, 0.55, 0.45],
  ]
)


def _import_matplotlib():
  try:
    import matplotlib  # noqa: F401
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection
  except ImportError as e:
    raise ImportError(
      'jaxsim.render needs matplotlib: pip install matplotlib (or jaxsim[bench])'
    ) from e
  return Figure, FigureCanvasAgg, Poly3DCollection


def geom_poses(m: Model, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """World frames of every geom along a trajectory (mj_kinematics per frame).

  qpos (T, nq) -> geom_xpos (T, ngeom, 3), geom_xmat (T, ngeom, 3, 3), as NumPy arrays.
  """
  d0 = jaxsim.make_data(m)
  qpos = np.asarray(qpos, dtype=np.asarray(m.qpos0).dtype)
  if qpos.ndim != 2 or qpos.shape[1] != m.nq:
    raise ValueError(f'qpos has shape {qpos.shape}; expected (T, nq) with nq = {m.nq}')

  @jax.jit
  def poses(q):
    d = jaxsim.kinematics(m, d0.replace(qpos=q))
    return d.geom_xpos, d.geom_xmat

  xpos, xmat = jax.vmap(poses)(qpos)
  return np.asarray(xpos), np.asarray(xmat)


def _quads(grid: np.ndarray) -> np.ndarray:
  """Quads (n, 4, 3) between neighbouring points of a (rows, cols, 3) grid."""
  a, b = grid[:-1, :-1], grid[:-1, 1:]
  c, d = grid[1:, 1:], grid[1:, :-1]
  return np.stack([a, b, c, d], axis=2).reshape(-1, 4, 3)


def _sphere_grid(n: int) -> np.ndarray:
  """Unit-sphere points (n + 1, 2n + 1, 3) by latitude and longitude."""
  lat = np.linspace(-np.pi / 2, np.pi / 2, n + 1)[:, None]
  lon = np.linspace(0, 2 * np.pi, 2 * n + 1)[None, :]
  return np.stack(
    np.broadcast_arrays(np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)),
    axis=-1,
  )


def _disk(r: float, z: float, n: int) -> np.ndarray:
  """A flat n-gon (triangle fan as degenerate quads) of radius r at height z."""
  a = np.linspace(0, 2 * np.pi, n + 1)
  ring = np.stack([r * np.cos(a), r * np.sin(a), np.full_like(a, z)], axis=-1)
  centre = np.array([0.0, 0.0, z])
  return np.stack([np.broadcast_to(centre, ring[:-1].shape), ring[:-1], ring[1:], ring[1:]], 1)


def geom_polygons(m: Model, g: int, segments: int = 12) -> np.ndarray | None:
  """Polygons (n, 4, 3) of geom g in its own frame (triangles repeat their last vertex).

  None for planes (drawn as floors by `render`) and for types that are not drawn.
  """
  gtype = int(np.asarray(m.geom_type)[g])
  size = np.asarray(m.geom_size, dtype=np.float64)[g]
  n = segments
  if gtype == GeomType.SPHERE:
    return _quads(size[0] * _sphere_grid(n))
  if gtype == GeomType.ELLIPSOID:
    return _quads(size * _sphere_grid(n))
  if gtype == GeomType.CAPSULE:
    s = size[0] * _sphere_grid(n + n % 2)
    half, up = s.shape[0] // 2, np.array([0.0, 0.0, size[1]])
    # two hemispheres, each with the equator, pulled apart by the half-length: the rows between
    # the two copies of the equator are the cylindrical side
    s = np.concatenate([s[: half + 1] - up, s[half:] + up], axis=0)
    return _quads(s)
  if gtype == GeomType.CYLINDER:
    a = np.linspace(0, 2 * np.pi, 2 * n + 1)
    ring = np.stack([size[0] * np.cos(a), size[0] * np.sin(a)], axis=-1)
    side = np.stack(
      [np.concatenate([ring, np.full((len(a), 1), z)], axis=-1) for z in (-size[1], size[1])]
    )
    return np.concatenate(
      [_quads(side), _disk(size[0], size[1], 2 * n), _disk(size[0], -size[1], 2 * n)]
    )
  if gtype == GeomType.BOX:
    corners = np.array([[i, j, k] for i in (-1, 1) for j in (-1, 1) for k in (-1, 1)], float)
    faces = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    return (corners * size)[np.array(faces)]
  if gtype == GeomType.MESH:
    mesh = int(np.asarray(m.geom_dataid)[g])
    vadr, vnum = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
    fadr, fnum = int(m.mesh_faceadr[mesh]), int(m.mesh_facenum[mesh])
    vert = np.asarray(m.mesh_vert, dtype=np.float64)[vadr : vadr + vnum]
    face = np.asarray(m.mesh_face)[fadr : fadr + fnum]
    return vert[face[:, [0, 1, 2, 2]]]
  return None


def _colour(m: Model, g: int) -> np.ndarray:
  rgba = np.asarray(m.geom_rgba, dtype=np.float64)[g]
  if np.allclose(rgba, _DEFAULT_RGBA):
    body = int(np.asarray(m.geom_bodyid)[g])
    rgba = np.append(_PALETTE[body % len(_PALETTE)], 1.0)
  return rgba


def _visible(m: Model, g: int) -> bool:
  group = int(np.asarray(m.geom_group)[g])
  return group < 3 and float(np.asarray(m.geom_rgba)[g, 3]) > 0


def _normals(polys: np.ndarray) -> np.ndarray:
  """Unit normals (n, 3) of polygons (n, 4, 3) from the diagonals (valid for triangles too)."""
  nrm = np.cross(polys[:, 2] - polys[:, 0], polys[:, 3] - polys[:, 1])
  tri = np.cross(polys[:, 1] - polys[:, 0], polys[:, 2] - polys[:, 0])
  nrm = np.where(np.linalg.norm(nrm, axis=-1, keepdims=True) > 1e-12, nrm, tri)
  return nrm / np.maximum(np.linalg.norm(nrm, axis=-1, keepdims=True), 1e-12)


def _eye_direction(elevation: float, azimuth: float) -> np.ndarray:
  e, a = np.deg2rad(elevation), np.deg2rad(azimuth)
  return np.array([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)])


def render(
  m: Model,
  qpos: np.ndarray,
  time: np.ndarray | None = None,
  *,
  width: int = 480,
  height: int = 360,
  elevation: float = 25.0,
  azimuth: float = -60.0,
  segments: int = 12,
  bounds: tuple[Sequence[float], Sequence[float]] | None = None,
  title: str | None = None,
) -> np.ndarray:
  """Images (T, height, width, 3) uint8 of the model at each qpos (T, nq) of a trajectory.

  The camera looks at the box that holds every drawn geom over the whole trajectory (or
  `bounds`, ((xmin, ymin, zmin), (xmax, ymax, zmax))), from `elevation` and `azimuth` degrees,
  and stays fixed so that motion shows. `time` (T,) is printed on each frame when given.
  """
  Figure, FigureCanvasAgg, Poly3DCollection = _import_matplotlib()
  qpos = np.asarray(qpos)
  if qpos.ndim == 1:
    qpos = qpos[None]
  xpos, xmat = geom_poses(m, qpos)
  geom_type = np.asarray(m.geom_type)
  drawn = [g for g in range(m.ngeom) if _visible(m, g)]
  planes = [g for g in drawn if geom_type[g] == GeomType.PLANE]

  # every solid geom's polygons in its own frame, with the geom each polygon belongs to
  local, owner, colour = [], [], []
  for g in drawn:
    polys = None if g in planes else geom_polygons(m, g, segments)
    if polys is None:
      continue
    local.append(polys)
    owner.append(np.full(len(polys), g))
    colour.append(np.broadcast_to(_colour(m, g), (len(polys), 4)))
  local = np.concatenate(local) if local else np.zeros((0, 4, 3))
  owner = np.concatenate(owner) if owner else np.zeros(0, int)
  colour = np.concatenate(colour) if colour else np.zeros((0, 4))
  # outward normals: primitives are convex and centred on their frame; meshes keep MuJoCo's
  # counter-clockwise winding
  nrm_local = _normals(local)
  centroid = local.mean(axis=1)
  is_mesh = geom_type[owner] == GeomType.MESH
  flip = ~is_mesh & (np.einsum('ni,ni->n', nrm_local, centroid) < 0)
  nrm_local = np.where(flip[:, None], -nrm_local, nrm_local)

  if bounds is None:
    solid = sorted(set(owner.tolist()))
    if solid:
      rb = np.asarray(m.geom_rbound, dtype=np.float64)[solid]
      pts = xpos[:, solid]
      lo = (pts - rb[:, None]).min(axis=(0, 1))
      hi = (pts + rb[:, None]).max(axis=(0, 1))
    else:
      lo, hi = -np.ones(3), np.ones(3)
    for g in planes:
      # keep a horizontal floor's height in view (not its origin: the scene may be far from it)
      if abs(xmat[0, g, 2, 2]) > 0.99:
        lo[2] = min(lo[2], xpos[0, g, 2] - 1e-3)
        hi[2] = max(hi[2], xpos[0, g, 2] + 1e-3)
  else:
    lo, hi = (np.asarray(b, dtype=np.float64) for b in bounds)
  # equal scale on every axis; flat scenes get a flat box (a floor fills the picture), but never
  # thinner than a quarter of its width
  span = np.maximum((hi - lo) * 1.1, 1e-3)
  span = np.maximum(span, 0.25 * span.max())
  centre = 0.5 * (lo + hi)
  lo_v, hi_v = centre - span / 2, centre + span / 2
  half = 0.5 * float(span.max())

  fig = Figure(figsize=(width / 100, height / 100), dpi=100)
  canvas = FigureCanvasAgg(fig)
  ax = fig.add_axes((0, 0, 1, 1), projection='3d')
  ax.computed_zorder = False
  ax.set_proj_type('persp', focal_length=0.6)
  ax.view_init(elev=elevation, azim=azimuth)
  ax.set_xlim(lo_v[0], hi_v[0])
  ax.set_ylim(lo_v[1], hi_v[1])
  ax.set_zlim(lo_v[2], hi_v[2])
  ax.set_box_aspect(tuple(span), zoom=1.1)
  ax.set_axis_off()

  light = _eye_direction(elevation + 30, azimuth + 40)
  eye = _eye_direction(elevation, azimuth)
  for g in planes:
    # a checkerboard under the view: around the view centre's foot on the plane, within the
    # plane's own extent (MuJoCo's size 0 is infinite)
    size = np.asarray(m.geom_size, dtype=np.float64)[g]
    foot = (xmat[0, g].T @ (centre - xpos[0, g]))[:2]
    lo_p, hi_p = foot - half * 1.2, foot + half * 1.2
    finite = size[:2] > 0
    lo_p = np.where(finite, np.clip(lo_p, -size[:2], size[:2]), lo_p)
    hi_p = np.where(finite, np.clip(hi_p, -size[:2], size[:2]), hi_p)
    if np.any(hi_p <= lo_p):
      continue
    nx = ny = 10
    u = np.linspace(lo_p[0], hi_p[0], nx + 1)
    v = np.linspace(lo_p[1], hi_p[1], ny + 1)
    grid = np.stack([*np.meshgrid(u, v, indexing='ij'), np.zeros((nx + 1, ny + 1))], axis=-1)
    quads = _quads(grid) @ xmat[0, g].T + xpos[0, g]
    rgba = _colour(m, g)
    checker = (np.add.outer(np.arange(nx), np.arange(ny)) % 2).reshape(-1, 1)
    fc = np.concatenate([rgba[:3] * (0.85 + 0.15 * checker), np.ones((len(quads), 1))], -1)
    ax.add_collection3d(Poly3DCollection(quads, facecolors=fc, edgecolors='none', zorder=0))

  solids = Poly3DCollection(np.zeros((0, 4, 3)), linewidths=0.3, zorder=1)
  ax.add_collection3d(solids)
  label = fig.text(0.02, 0.95, '', fontsize=10, family='monospace')
  if title:
    fig.text(0.98, 0.95, title, fontsize=10, ha='right')

  frames = np.zeros((len(qpos), height, width, 3), np.uint8)
  for t in range(len(qpos)):
    rot, pos = xmat[t, owner], xpos[t, owner]
    polys = np.einsum('nij,nkj->nki', rot, local) + pos[:, None]
    nrm = np.einsum('nij,nj->ni', rot, nrm_local)
    # cull faces that look away from the camera; depth sorting of the rest is matplotlib's
    keep = nrm @ eye > -0.05
    shade = 0.45 + 0.55 * np.clip(nrm[keep] @ light, 0, 1)
    fc = np.concatenate([colour[keep, :3] * shade[:, None], colour[keep, 3:]], axis=-1)
    solids.set_verts(polys[keep])
    solids.set_facecolor(fc)
    # edges in the face colour hide the seams between neighbouring polygons
    solids.set_edgecolor(fc)
    if time is not None:
      label.set_text(f't = {float(time[t]):.2f} s')
    canvas.draw()
    frames[t] = np.asarray(canvas.buffer_rgba())[:height, :width, :3]
  return frames


def save_gif(frames: np.ndarray, path: str, fps: float = 25.0) -> str:
  """Writes frames (T, H, W, 3) uint8 as a looping GIF (Pillow); returns the path."""
  from PIL import Image

  images = [Image.fromarray(f) for f in np.asarray(frames)]
  images[0].save(
    path,
    save_all=True,
    append_images=images[1:],
    duration=max(1, round(1000 / fps)),
    loop=0,
    optimize=False,
  )
  return path


def save_mp4(frames: np.ndarray, path: str, fps: float = 25.0) -> str:
  """Writes frames (T, H, W, 3) uint8 as an H.264 MP4 through the `ffmpeg` program."""
  ffmpeg = shutil.which('ffmpeg')
  if ffmpeg is None:
    raise RuntimeError('writing MP4 needs the ffmpeg program on the PATH; write a GIF instead')
  frames = np.asarray(frames)
  _, h, w, _ = frames.shape
  # yuv420p needs even sizes
  frames = frames[:, : h - h % 2, : w - w % 2]
  h, w = frames.shape[1:3]
  cmd = [ffmpeg, '-y', '-loglevel', 'error', '-f', 'rawvideo', '-pix_fmt', 'rgb24']
  cmd += ['-s', f'{w}x{h}', '-r', f'{fps:g}', '-i', '-', '-pix_fmt', 'yuv420p', path]
  subprocess.run(cmd, input=frames.tobytes(), check=True)
  return path

"""Playground's Go1 joystick task on jaxsim, with Playground's own domain randomisation: one
jitted step over a batch of worlds, each with its own randomised Model (jax.vmap over Models).

  python examples/go1_randomize.py --menagerie ~/mujoco_menagerie      # Menagerie checkout
  python examples/go1_randomize.py                                      # Playground's own path
  python examples/go1_randomize.py --stand-in-meshes /tmp/menagerie     # no Menagerie: see below

Playground's locomotion environments read the robots' files from MuJoCo Menagerie, which
Playground git-clones into site-packages/external_deps at first use. Where it is neither there
nor given with --menagerie (no network), this script says so and stops.

--stand-in-meshes DIR writes the four STL files the Go1 model reads from Menagerie as small
boxes under DIR and runs on those. They are the robot's visual meshes only (contype 0,
conaffinity 0; every body has an explicit <inertial>), so the physics is the real model's; the
pictures would not be. It exists to check jaxsim on this environment where Menagerie cannot be
fetched.

The randomisation is Playground's (`registry.get_domain_randomizer`: floor friction, joint
friction loss and armature, link masses, torso centre of mass, qpos0), applied through
`wrapper.wrap_for_brax_training(env, randomization_fn=...)` as Brax's training does. The script
prints each world's floor friction and torso mass and where its trunk is after --steps control
steps under a fixed trotting-like action, and with --check the same for MJX (impl='jax').
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxsim.playground

ENV = 'Go1JoystickFlatTerrain'
GO1_MESHES = ('trunk.stl', 'hip.stl', 'thigh.stl', 'thigh_mirror.stl', 'calf.stl')


def write_box_stl(path: str, half: float = 0.02) -> None:
  """A binary STL of an axis-aligned cube (12 triangles), the stand-in visual mesh."""
  v = np.array([[x, y, z] for x in (-half, half) for y in (-half, half) for z in (-half, half)])
  faces = [(0, 2, 3), (0, 3, 1), (4, 5, 7), (4, 7, 6), (0, 1, 5), (0, 5, 4),
           (2, 6, 7), (2, 7, 3), (0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5)]  # fmt: skip
  with open(path, 'wb') as f:
    f.write(b'jaxsim stand-in visual mesh'.ljust(80, b' '))
    f.write(struct.pack('<I', len(faces)))
    for a, b, c in faces:
      n = np.cross(v[b] - v[a], v[c] - v[a])
      n = n / np.linalg.norm(n)
      f.write(struct.pack('<12fH', *n, *v[a], *v[b], *v[c], 0))


def stand_in_menagerie(root: str) -> str:
  """A Menagerie folder holding only stand-in Go1 visual meshes; returns root."""
  assets = os.path.join(root, 'unitree_go1', 'assets')
  os.makedirs(assets, exist_ok=True)
  for name in GO1_MESHES:
    write_box_stl(os.path.join(assets, name))
  return root


def menagerie_present(root: str) -> bool:
  return all(os.path.isfile(os.path.join(root, 'unitree_go1', 'assets', m)) for m in GO1_MESHES)


def rollout(env, nworld: int, steps: int, seed: int):
  """Reset and step `nworld` randomised worlds through Playground's Brax training wrapper."""
  from mujoco_playground import registry, wrapper

  randomizer = registry.get_domain_randomizer(ENV)
  model_keys = jax.random.split(jax.random.PRNGKey(seed), nworld)
  wrapped = wrapper.wrap_for_brax_training(
    env,
    episode_length=1000,
    randomization_fn=functools.partial(randomizer, rng=model_keys),
  )
  models, _ = randomizer(env.mjx_model, model_keys)

  def run(rng):
    state = wrapped.reset(rng)

    def body(s, t):
      # a fixed gait-like action: the legs' joints swing in antiphase around the default pose
      phase = 2 * jnp.pi * t * env.dt * 2.0
      a = 0.3 * jnp.sin(phase + jnp.arange(env.action_size) * jnp.pi / 2)
      s = wrapped.step(s, jnp.broadcast_to(a, (nworld, env.action_size)))
      return s, None

    state, _ = jax.lax.scan(body, state, jnp.arange(steps))
    return (
      state.data.qpos[:, :3],
      state.done,
      state.obs['state'] if isinstance(state.obs, dict) else state.obs,
    )

  t = time.time()
  out = jax.block_until_ready(jax.jit(run)(jax.random.split(jax.random.PRNGKey(seed + 1), nworld)))
  return models, out, time.time() - t


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--menagerie', help='a MuJoCo Menagerie checkout')
  p.add_argument('--stand-in-meshes', metavar='DIR', help='stand-in Go1 visual meshes (see above)')
  p.add_argument('--worlds', type=int, default=4)
  p.add_argument('--steps', type=int, default=50, help='control steps (0.02 s each)')
  p.add_argument('--check', action='store_true', help='the same on MJX, and the difference')
  a = p.parse_args()

  if a.stand_in_meshes:
    root = stand_in_menagerie(a.stand_in_meshes)
    print(f"stand-in visual meshes (boxes) for Go1 under {root}: the physics is the real model's")
  else:
    root = a.menagerie or jaxsim.playground.menagerie_path()
  if not menagerie_present(root):
    print(
      f"MuJoCo Menagerie is not present at {root}: Playground's locomotion environments need its\n"
      'unitree_go1 files (Playground git-clones it at first use, which needs network). Clone it\n'
      '(git clone https://github.com/google-deepmind/mujoco_menagerie) and pass --menagerie PATH,\n'
      'or run with --stand-in-meshes DIR. Nothing was run.'
    )
    return
  jaxsim.playground.use_menagerie(root)

  engines = ['jaxsim', 'mjx'] if a.check else ['jaxsim']
  results = {}
  for engine in engines:
    if engine == 'jaxsim':
      env = jaxsim.playground.load(ENV)
    else:
      from mujoco_playground import registry

      env = registry.load(ENV, config_overrides={'impl': 'jax'})
    models, (pos, done, obs), seconds = rollout(env, a.worlds, a.steps, seed=0)
    results[engine] = pos
    print(f'{ENV} on {engine}: {a.worlds} randomised worlds x {a.steps} steps, '
          f'compile + run {seconds:.1f} s ({jax.devices()[0].platform})')  # fmt: skip
    friction = np.asarray(models.geom_friction)[:, 0, 0]
    torso = np.asarray(models.body_mass)[:, 1]
    for i in range(a.worlds):
      print(f'  world {i}: floor friction {friction[i]:.3f}  torso mass {torso[i]:.3f} kg  '
            f'trunk at {np.round(np.asarray(pos[i]), 3)}  done {bool(done[i])}')  # fmt: skip
    if not np.all(np.isfinite(np.asarray(obs))):
      sys.exit(f'{engine}: non-finite observations')
  if a.check:
    diff = float(np.max(np.abs(np.asarray(results['jaxsim']) - np.asarray(results['mjx']))))
    print(f'largest trunk position difference jaxsim - MJX: {diff:.2e} m')


if __name__ == '__main__':
  main()

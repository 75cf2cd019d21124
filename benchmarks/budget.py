"""Contact budget: memory per world and time per world-step from in-contact states.

  python benchmarks/budget.py [--model humanoid] [--batch 64 1024] [--steps 5] [--ncon N]
                              [--compare] [--copies 1 2 4 8] [--copies-source RIG.xml]
  python benchmarks/budget.py --sweep [FILE ...] [--seeds 2] [--sweep-steps 300]

Every world starts from the state after 100 C MuJoCo steps with random controls (uniform in
ctrlrange, one seed per world), so that the worlds touch the floor; jaxsim then runs
`jax.jit(jax.vmap(jaxsim.step))` in float32 with the model's own solver settings, sensors off.
Reported per batch: us per world-step (best of three timed calls of `--steps` steps each, after
a warm-up call), XLA's memory analysis of the compiled step (arguments + outputs + temporaries)
per world, the Data sizes (contact slots, constraint rows), mean and max active contacts and
rows, and the contact-overflow count (Data.warning[mjWARN_CONTACTFULL]). `--ncon N` runs with
`jaxsim.with_ncon_max(model, N)` (-1: every collider slot, the old default) instead of the
default budget. `--copies` reports the compiled step's memory per world for scenes of n
humanoid copies (models/bench/humanoid_copies.py) against n times that of one copy.
`--compare` times the default budget against every slot alternately in one process. `--sweep`
checks that the default budget keeps MuJoCo's active contacts at every state of C MuJoCo
rollouts with random controls (default: every dm_control suite model).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'models', 'bench'))

import humanoid_copies  # noqa: E402

import jaxsim  # noqa: E402
from jaxsim._src import kinematics  # noqa: E402
from jaxsim._src.collision import driver  # noqa: E402

SENSOR = int(mujoco.mjtDisableBit.mjDSBL_SENSOR)


def model_path(name: str) -> str:
  """A dm_control suite name or a path."""
  if os.path.exists(name):
    return name
  import dm_control

  return os.path.join(os.path.dirname(dm_control.__file__), 'suite', f'{name}.xml')


def contact_states(mj: mujoco.MjModel, batch: int, steps: int = 100) -> tuple:
  """(qpos, qvel, ctrl) (batch, .) after `steps` C MuJoCo steps with random controls."""
  qpos, qvel, ctrl = [], [], []
  lo, hi = mj.actuator_ctrlrange.T
  limited = mj.actuator_ctrllimited.astype(bool)
  for w in range(batch):
    rng = np.random.default_rng(w)
    md = mujoco.MjData(mj)
    for _ in range(steps):
      md.ctrl[:] = np.where(limited, rng.uniform(lo, hi), rng.normal(size=mj.nu))
      mujoco.mj_step(mj, md)
    qpos.append(md.qpos.copy())
    qvel.append(md.qvel.copy())
    ctrl.append(md.ctrl.copy())
  return np.array(qpos), np.array(qvel), np.array(ctrl)


def step_fn(m: jaxsim.Model, steps: int):
  def run(d):
    return jax.lax.fori_loop(0, steps, lambda _, d: jax.vmap(jaxsim.step, (None, 0))(m, d), d)

  return jax.jit(run)


def memory_per_world(compiled, batch: int) -> float:
  ma = compiled.memory_analysis()
  total = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
  return total / batch


def load(path: str, ncon: int | None, xml: str | None = None) -> tuple:
  m = jaxsim.load_string(xml) if xml is not None else jaxsim.load(path)
  m = jaxsim.with_options(m, disableflags=m.opt.disableflags | SENSOR)
  if ncon is not None:
    m = jaxsim.with_ncon_max(m, ncon)
  mj = (
    mujoco.MjModel.from_xml_string(xml) if xml is not None else mujoco.MjModel.from_xml_path(path)
  )
  mj.opt.disableflags |= SENSOR
  return m, mj


def batch_data(m: jaxsim.Model, qpos, qvel, ctrl) -> jaxsim.Data:
  d0 = jaxsim.make_data(m)
  f = lambda q, v, c: d0.replace(qpos=q, qvel=v, ctrl=c)  # noqa: E731
  return jax.vmap(f)(jnp.asarray(qpos, jnp.float32), jnp.asarray(qvel, jnp.float32),
                     jnp.asarray(ctrl, jnp.float32))  # fmt: skip


def timing(args: argparse.Namespace) -> None:
  path = model_path(args.model)
  m, mj = load(path, args.ncon)
  lay = m.layout
  print(
    f'{args.model}: collider slots {lay.budget.nfull}, Data.contact slots {lay.ncon}, '
    f'constraint rows {lay.nefc} (ncon arg {args.ncon})'
  )
  for batch in args.batch:
    qpos, qvel, ctrl = contact_states(mj, batch)
    d = batch_data(m, qpos, qvel, ctrl)
    run = step_fn(m, args.steps)
    t0 = time.perf_counter()
    compiled = run.lower(d).compile()
    tc = time.perf_counter() - t0
    mem = memory_per_world(compiled, batch)
    out = compiled(d)
    jax.block_until_ready(out)
    best = np.inf
    for _ in range(3):
      t0 = time.perf_counter()
      jax.block_until_ready(compiled(d))
      best = min(best, time.perf_counter() - t0)
    us = best / (batch * args.steps) * 1e6
    ncon = np.asarray(out.ncon)
    rows = np.asarray(out.efc_active).sum(-1)
    warn = int(np.asarray(out.warning)[:, int(mujoco.mjtWarning.mjWARN_CONTACTFULL)].sum())
    print(
      f'  batch {batch:5d}: {us:8.1f} us/world-step  memory {mem / 1e3:9.1f} kB/world  '
      f'compile {tc:5.1f} s  contacts mean {ncon.mean():.1f} max {ncon.max()}  '
      f'rows mean {rows.mean():.1f} max {rows.max()}  CONTACTFULL {warn}',
      flush=True,
    )


def compare(args: argparse.Namespace) -> None:
  """The default budget against every collider slot (with_ncon_max -1), per batch: one compiled
  step each, timed alternately (min of 7 calls each), so that a shared machine's load falls on
  both alike; with XLA's memory and cost analysis (loop bodies counted once) per world."""
  path = model_path(args.model)
  for batch in args.batch:
    runs = {}
    for name, n in (('default', None), ('every slot', -1)):
      m, mj = load(path, n)
      d = batch_data(m, *contact_states(mj, batch))
      c = step_fn(m, 1).lower(d).compile()
      cost = c.cost_analysis()
      cost = cost[0] if isinstance(cost, list) else cost
      jax.block_until_ready(c(d))
      runs[name] = (c, d, m.layout, memory_per_world(c, batch), cost)
    best = dict.fromkeys(runs, np.inf)
    for _ in range(7):
      for k, (c, d, *_) in runs.items():
        t0 = time.perf_counter()
        jax.block_until_ready(c(d))
        best[k] = min(best[k], time.perf_counter() - t0)
    for k, (_, _, lay, mem, cost) in runs.items():
      print(
        f'  batch {batch:5d} {k:10s}: slots {lay.ncon} rows {lay.nefc}  '
        f'{best[k] / batch * 1e6:8.1f} us/world-step  memory {mem / 1e3:.1f} kB/world  '
        f'XLA {cost.get("flops", 0) / batch / 1e6:.2f} MFLOP '
        f'{cost.get("bytes accessed", 0) / batch / 1e6:.2f} MB per world-step',
        flush=True,
      )


def copies(args: argparse.Namespace) -> None:
  base = None
  for n in args.copies:
    xml = humanoid_copies.copies_xml(n, args.copies_source)
    m, _ = load('', args.ncon, xml)
    d = batch_data(m, *(np.zeros((64, k)) for k in (m.nq, m.nv, m.nu)))
    d = d.replace(qpos=jnp.broadcast_to(m.qpos0, d.qpos.shape).astype(jnp.float32))
    mem = memory_per_world(step_fn(m, 1).lower(d).compile(), 64)
    base = base or mem
    print(
      f'  copies {n}: slots {m.layout.ncon} rows {m.layout.nefc}  '
      f'{mem / 1e3:9.1f} kB/world  x{mem / (n * base):.2f} of linear',
      flush=True,
    )


def rollout_states(mj: mujoco.MjModel, steps: int, seed: int) -> tuple:
  """(qpos (steps, nq), MuJoCo's active contacts per step as sorted (geom1, geom2) lists, the
  largest warning[mjWARN_CONTACTFULL]) of a C MuJoCo rollout with random controls from the first
  keyframe (qpos0 without one)."""
  rng = np.random.default_rng(seed)
  md = mujoco.MjData(mj)
  if mj.nkey:
    mujoco.mj_resetDataKeyframe(mj, md, 0)
  lo, hi = mj.actuator_ctrlrange.T
  limited = mj.actuator_ctrllimited.astype(bool)
  qpos, contacts = [], []
  for _ in range(steps):
    md.ctrl[:] = np.where(limited, rng.uniform(lo, hi), rng.normal(size=mj.nu))
    mujoco.mj_step(mj, md)
    mujoco.mj_forward(mj, md)  # contacts of the state now in qpos
    qpos.append(md.qpos.copy())
    contacts.append(sorted(map(tuple, md.contact.geom[: md.ncon].tolist())))
  return np.array(qpos), contacts, int(md.warning[1].number)


def contacts_at(m: jaxsim.Model, qpos: np.ndarray, chunk: int = 25) -> tuple[list, int]:
  """jaxsim's active contacts (sorted (geom1, geom2) lists) at each qpos, and the overflow count
  (Data.warning[mjWARN_CONTACTFULL]) summed over the states."""

  @jax.jit
  def collide(q):
    def one(q):
      d = jaxsim.make_data(m).replace(qpos=q)
      d = driver.collision(m, kinematics.kinematics(m, d))
      return d.contact.active, d.contact.geom, d.warning[int(mujoco.mjtWarning.mjWARN_CONTACTFULL)]

    return jax.vmap(one)(q)

  out, warn = [], 0
  for i in range(0, len(qpos), chunk):
    q = qpos[i : i + chunk]
    pad = chunk - len(q)
    q = np.concatenate([q, np.repeat(q[-1:], pad, axis=0)]) if pad else q
    act, geom, w = (np.asarray(x) for x in collide(q))
    for j in range(chunk - pad):
      out.append(sorted(map(tuple, geom[j][act[j]].tolist())))
    warn += int(w[: chunk - pad].sum())
  return out, warn


def sweep(paths: list[str], steps: int, seeds: int) -> int:
  """Every model's active contacts against MuJoCo's at every state of `seeds` rollouts of
  `steps` steps (float64, the default budget); returns the number of models that differ."""
  jax.config.update('jax_enable_x64', True)
  bad = 0
  for path in paths:
    mj = mujoco.MjModel.from_xml_path(path)
    m = jaxsim.load(path)
    lay = m.layout
    diff = warn = most = 0
    for seed in range(seeds):
      qpos, theirs, mjwarn = rollout_states(mj, steps, seed)
      ours, w = contacts_at(m, qpos)
      warn += w + mjwarn
      diff += sum(a != b for a, b in zip(ours, theirs, strict=True))
      most = max(most, max(len(c) for c in theirs))
    bad += bool(diff or warn)
    print(
      f'{os.path.basename(path):24s} slots {lay.ncon:6d} of {lay.budget.nfull:6d}  rows '
      f'{lay.nefc:6d}  MuJoCo max contacts {most:4d}  states differing {diff}  '
      f'CONTACTFULL {warn}',
      flush=True,
    )
  return bad


def main(argv: list[str] | None = None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--model', default='humanoid')
  p.add_argument('--batch', type=int, nargs='*', default=[64, 1024])
  p.add_argument('--steps', type=int, default=5)
  p.add_argument('--ncon', type=int, default=None)
  p.add_argument('--copies', type=int, nargs='*', default=[])
  p.add_argument('--copies-source', default=humanoid_copies.RIG)
  p.add_argument(
    '--sweep', nargs='*', default=None,
    help='check the default budget keeps MuJoCo\'s contacts on these files (none: the suite)',
  )  # fmt: skip
  p.add_argument('--compare', action='store_true', help='default vs every slot, interleaved')
  p.add_argument('--seeds', type=int, default=2)
  p.add_argument('--sweep-steps', type=int, default=300)
  args = p.parse_args(argv)
  if args.sweep is not None:
    import dm_control

    suite = os.path.join(os.path.dirname(dm_control.__file__), 'suite')
    paths = args.sweep or sorted(
      os.path.join(suite, f) for f in os.listdir(suite) if f.endswith('.xml')
    )
    return int(sweep(paths, args.sweep_steps, args.seeds) > 0)
  if args.compare:
    compare(args)
  elif args.batch:
    timing(args)
  if args.copies:
    copies(args)
  return 0


if __name__ == '__main__':
  sys.exit(main())

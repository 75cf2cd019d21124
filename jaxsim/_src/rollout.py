"""Batched rollouts: `lax.scan` over time, `vmap` over worlds (and models), sharded over devices.

One call steps a world, or a batch of worlds, through T timesteps of given controls. The batch
is the leading axis of `ctrls` (B, T, nu), of a batched Data, and optionally of a batched Model
(domain randomisation, parameter sweeps: only the Model's float leaves can differ, its structure
is static). With more than one device the batch is split over a 1-D mesh of devices with
`jax.sharding`, so the same call scales from a laptop to a multi-GPU node unchanged.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from jaxsim._src.forward import step as _step
from jaxsim._src.types import Data, Model

DEFAULT_RECORD = ('qpos', 'qvel', 'act', 'time')

Record = Sequence[str] | Callable[[Data], Any] | None


def _recorder(record: Record) -> Callable[[Data], Any]:
  if record is None:
    return lambda d: {}
  if callable(record):
    return record
  names = tuple(record)
  return lambda d: {k: getattr(d, k) for k in names}


def _scan_steps(m: Model, d: Data, ctrls: jax.Array, rec: Callable, chunk: int):
  """One world through ctrls (T, nu); with chunk > 0, sqrt-T style nested checkpointed scans."""

  def body(d, ctrl):
    d = _step(m, d.replace(ctrl=ctrl))
    return d, rec(d)

  if not chunk:
    return jax.lax.scan(body, d, ctrls)
  # Reverse mode then stores the Data at chunk boundaries (T / chunk of them) and, while it
  # recomputes one chunk, that chunk's states (chunk of them): O(T / chunk + chunk) Data
  # instead of every intermediate of every step.
  body = jax.checkpoint(body, prevent_cse=False)
  inner = jax.checkpoint(lambda d, cs: jax.lax.scan(body, d, cs), prevent_cse=False)
  t = ctrls.shape[0]
  n = t // chunk
  d, ys = jax.lax.scan(inner, d, ctrls[: n * chunk].reshape((n, chunk) + ctrls.shape[1:]))
  ys = jax.tree_util.tree_map(lambda y: y.reshape((n * chunk,) + y.shape[2:]), ys)
  if t % chunk:
    d, tail = jax.lax.scan(body, d, ctrls[n * chunk :])
    ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, tail)
  return d, ys


def _leaf_axes(m: Model, model_axes: Any) -> tuple[int | None, ...]:
  """The vmap axis (0 or None) of each of m's leaves, from an int/None or a Model-shaped prefix."""
  if model_axes is None or isinstance(model_axes, int):
    return (model_axes,) * len(jax.tree_util.tree_leaves(m))
  spec = jax.tree_util.tree_map(
    lambda ax, sub: jax.tree_util.tree_map(lambda _: -1 if ax is None else ax, sub),
    model_axes,
    m,
    is_leaf=lambda x: x is None,
  )
  return tuple(None if a == -1 else int(a) for a in jax.tree_util.tree_leaves(spec))


def _pad(x: jax.Array, n: int, axis: int = 0) -> jax.Array:
  """x with n copies of its last entry along axis appended."""
  last = jax.lax.index_in_dim(x, x.shape[axis] - 1, axis, keepdims=True)
  return jnp.concatenate([x, jnp.repeat(last, n, axis)], axis)


@functools.partial(jax.jit, static_argnames=('pad', 'axes', 'data_batched'))
def _pad_batch(m: Model, d: Data, ctrls: jax.Array, *, pad: int, axes, data_batched: bool):
  """The batched inputs grown by pad copies of their last world."""
  if ctrls.ndim == 3:
    ctrls = _pad(ctrls, pad)
  if data_batched:
    d = jax.tree_util.tree_map(lambda x: _pad(x, pad), d)
  leaves, treedef = jax.tree_util.tree_flatten(m)
  leaves = [x if ax is None else _pad(x, pad, ax) for x, ax in zip(leaves, axes)]
  return jax.tree_util.tree_unflatten(treedef, leaves), d, ctrls


@functools.partial(jax.jit, static_argnums=1)
def _trim(tree: Any, batch: int) -> Any:
  return jax.tree_util.tree_map(lambda x: x[:batch], tree)


def _batch_size(m: Model, axes, d: Data, ctrls: jax.Array) -> int | None:
  sizes = {}
  if ctrls.ndim == 3:
    sizes['ctrls'] = ctrls.shape[0]
  if jnp.ndim(d.time) == 1:
    sizes['data'] = d.time.shape[0]
  for leaf, ax in zip(jax.tree_util.tree_leaves(m), axes):
    if ax is not None:
      sizes['model'] = jnp.shape(leaf)[ax]
      break
  if len(set(sizes.values())) > 1:
    raise ValueError(f'rollout: batch sizes differ: {sizes}')
  return next(iter(sizes.values()), None)


@functools.partial(
  jax.jit, static_argnames=('axes', 'record', 'chunk', 'batch', 'data_batched', 'devices')
)
def _rollout(m, d, ctrls, *, axes, record, chunk, batch, data_batched, devices):
  rec = _recorder(record)
  ctrls = ctrls.astype(d.ctrl.dtype)
  if batch is None:
    return _scan_steps(m, d, ctrls, rec, chunk)

  # the batch axis leads on every batched input: broadcast what is shared
  if not data_batched:
    d = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (batch,) + jnp.shape(x)), d)
  if ctrls.ndim == 2:
    ctrls = jnp.broadcast_to(ctrls, (batch,) + ctrls.shape)
  leaves, treedef = jax.tree_util.tree_flatten(m)
  leaves = [x if ax is None else jnp.moveaxis(x, ax, 0) for x, ax in zip(leaves, axes)]
  batched = [ax is not None for ax in axes]

  m = jax.tree_util.tree_unflatten(treedef, leaves)
  in_axes_m = jax.tree_util.tree_unflatten(treedef, [0 if b else None for b in batched])
  run = jax.vmap(lambda m, d, c: _scan_steps(m, d, c, rec, chunk), in_axes=(in_axes_m, 0, 0))
  if devices is not None:
    # each device steps its share of the batch with its own while loops (shard_map): a loop
    # trip waits for the slowest world of the device, not of the whole batch, and no trip
    # needs a cross-device reduction (a sharding constraint on one vmapped program did both)
    mesh = Mesh(np.asarray(devices), ('batch',))
    part = PartitionSpec('batch')
    spec_m = jax.tree_util.tree_unflatten(
      treedef, [part if b else PartitionSpec() for b in batched]
    )
    run = jax.shard_map(
      run, mesh=mesh, in_specs=(spec_m, part, part), out_specs=part, check_vma=False
    )
  return run(m, d, ctrls)


def rollout(
  m: Model,
  d: Data,
  ctrls: jax.Array,
  record: Record = DEFAULT_RECORD,
  *,
  model_axes: Any = 'auto',
  checkpoint: bool | int = False,
  shard: bool | None = None,
  devices: Sequence[jax.Device] | None = None,
) -> tuple[Data, Any]:
  """Steps T times with ctrls (T, nu); a batch of B worlds with ctrls (B, T, nu) or a batched d.

  Batching: any of `ctrls` (B, T, nu), `d` (every leaf (B, ...)) and `m` may carry a leading
  batch axis of the same size B; the unbatched ones are shared by every world (ctrls (T, nu)
  drive every world alike). `model_axes` says which Model leaves are batched: 0 (all), None
  (none), or a Model-shaped pytree of 0/None such as
  `jax.tree_util.tree_map(lambda _: None, m).replace(body_mass=0)`; 'auto' is 0 when
  `m.opt.timestep` has a batch axis (a Model made with `jax.vmap`) and None otherwise. Integer
  arrays and options of a Model are static: every model of a batch shares them.

  Recording: `record` is a tuple of Data field names (a dict of (T, ...) or (B, T, ...) arrays
  is returned), a callable `d -> pytree` (its outputs stacked over time), or None (nothing).
  Each entry is the state after that step; only what is recorded is kept, so long rollouts stay
  small. A callable is a compile-cache key: reuse the same function object across calls.

  Gradients: `checkpoint=True` rematerialises in chunks of about sqrt(T) steps (an int k > 0
  sets the chunk length to k), so reverse mode through a long rollout stores O(sqrt(T)) Data
  instead of every intermediate of every step, for about one extra forward pass; values and
  gradients are the same as without it.

  Devices: a batch is split over `devices` (default `jax.local_devices()`) along a 1-D mesh when
  there are several (`shard=None`) or always (`shard=True`), each device stepping its share with
  its own loops (`jax.shard_map`; on a CPU, `jaxsim.configure_cpu(devices=N)` makes one device per
  core); `shard=False` leaves placement to JAX. Results come back sharded over the same mesh. B
  need not be a multiple of the device count: the batch is then padded with copies of its last
  world, which are dropped from the results (the trimmed results are no longer evenly sharded and
  JAX may gather them, so pick B as a multiple of the device count for large batches). On several
  hosts, call `jax.distributed.initialize()` in every process first; by default each process then
  rolls out its own batch on its own devices. For one global batch over every host, pass
  `devices=jax.devices()` and global arrays built with `jax.make_array_from_process_local_data` on
  `NamedSharding(Mesh(np.asarray(jax.devices()), ('batch',)), PartitionSpec('batch'))`.

  Works eagerly (compiled once per shape and options) and under jit, vmap and grad. Returns the
  final Data and the recording.
  """
  ctrls = jnp.asarray(ctrls)
  if ctrls.ndim not in (2, 3):
    raise ValueError(f'rollout: ctrls must be (T, nu) or (B, T, nu), got shape {ctrls.shape}')
  if ctrls.shape[-1] != m.nu:
    raise ValueError(f'rollout: ctrls have {ctrls.shape[-1]} columns, the model has nu={m.nu}')
  if isinstance(model_axes, str):
    if model_axes != 'auto':
      raise ValueError(
        f"rollout: model_axes must be 'auto', 0, None or a pytree, not {model_axes!r}"
      )
    model_axes = 0 if jnp.ndim(m.opt.timestep) == 1 else None
  axes = _leaf_axes(m, model_axes)
  batch = _batch_size(m, axes, d, ctrls)
  if isinstance(checkpoint, bool):
    chunk = max(1, round(math.sqrt(ctrls.shape[-2]))) if checkpoint else 0
  else:
    chunk = max(0, int(checkpoint))
  if record is not None and not callable(record):
    record = tuple(record)
  data_batched = jnp.ndim(d.time) == 1
  devs, pad = None, 0
  if batch is not None and shard is not False:
    devs = tuple(jax.local_devices() if devices is None else devices)
    if len(devs) < 2 and not shard:
      devs = None
    else:
      pad = -batch % len(devs)
  if pad:
    # copies of the last world make the batch a multiple of the device count; they are dropped
    # from the results (outside the compiled rollout, so B and B + pad share one compilation)
    m, d, ctrls = _pad_batch(m, d, ctrls, pad=pad, axes=axes, data_batched=data_batched)
  out = _rollout(
    m,
    d,
    ctrls,
    axes=axes,
    record=record,
    chunk=chunk,
    batch=batch + pad if batch is not None else None,
    data_batched=data_batched,
    devices=devs,
  )
  if pad:
    out = _trim(out, batch)
  return out

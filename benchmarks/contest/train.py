"""One compiled program per optimizer: a grid of peak rates and seeds, trained together.

``train`` maps one run (a peak rate and a seed) with ``jax.vmap`` over the
grid: the rate is a traced argument of the schedule, so every rate and seed
of an optimizer shares one compilation. A seed fixes the initialization and
the order of the batches, the same for every optimizer (paired runs). Each
run returns its mean training loss over each of ``CURVE_POINTS`` stretches
of steps, and its validation and test bits per character after the last step,
over every character of each split (``corpus.tiled_windows``).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.contest import model

CURVE_POINTS = 20
EVAL_BATCH = 256  # windows an evaluation step scores at once
WARMUP_FRACTION = 0.05


def schedule_shape(steps: int) -> optax.Schedule:
  """Warmup over the first 5% of the steps, then cosine decay to 0, peaking at 1."""
  return optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=1.0, warmup_steps=max(1, round(WARMUP_FRACTION * steps)),
      decay_steps=steps, end_value=0.0)


def _bits(params, windows, scored, heads):
  """Mean bits over the scored characters of ``windows`` (``scored``: their mask),
  ``EVAL_BATCH`` windows at a time.
  """
  pad = -len(windows) % EVAL_BATCH
  batches = jnp.concatenate([windows, jnp.zeros((pad, windows.shape[1]), windows.dtype)])
  batches = batches.reshape(-1, EVAL_BATCH, windows.shape[1])
  masks = jnp.concatenate([scored, jnp.zeros((pad, scored.shape[1]), scored.dtype)])
  masks = masks.reshape(-1, EVAL_BATCH, scored.shape[1]).astype(jnp.float32)

  def one(args):
    batch, mask = args
    inputs, targets = batch[:, :-1].astype(jnp.int32), batch[:, 1:].astype(jnp.int32)
    log_probs = jax.nn.log_softmax(model.logits(params, inputs, heads), axis=-1)
    return -jnp.sum(jnp.take_along_axis(log_probs, targets[..., None], -1)[..., 0] * mask)
  return jnp.sum(jax.lax.map(one, (batches, masks))) / jnp.sum(scored) / math.log(2.0)


@functools.cache
def program(build, size: model.Size, steps: int):
  """The jitted function ``(peaks, seeds, train, val, test, masks) -> results`` of one
  optimizer, whose ``peaks`` and ``seeds`` (one per run) are mapped together;
  kept, so that every call of a grid of one shape reuses one compilation.
  """
  shape = schedule_shape(steps)
  per_point = steps // CURVE_POINTS

  def run(peak, seed, train, val, test, val_scored, test_scored):
    optimizer = build(lambda count: peak * shape(count))
    key = jax.random.key(seed)
    params = model.init(jax.random.fold_in(key, 0), size)
    data_key = jax.random.fold_in(key, 1)

    def step(carry, t):
      params, state = carry
      starts = jax.random.randint(jax.random.fold_in(data_key, t), (size.batch,), 0,
                                  train.shape[0] - size.context - 1)
      windows = train[starts[:, None] + jnp.arange(size.context + 1)]
      loss, grads = jax.value_and_grad(model.nats)(params, windows, size.heads)
      updates, state = optimizer.update(grads, state, params)
      return (optax.apply_updates(params, updates), state), loss

    carry = (params, optimizer.init(params))
    carry, losses = jax.lax.scan(step, carry, jnp.arange(steps))
    params = carry[0]
    curve = losses[:per_point * CURVE_POINTS].reshape(CURVE_POINTS, per_point).mean(1)
    return {"train_loss": curve / math.log(2.0),
            "val": _bits(params, val, val_scored, size.heads),
            "test": _bits(params, test, test_scored, size.heads)}

  mapped = jax.vmap(run, in_axes=(0, 0, None, None, None, None, None))
  return jax.jit(mapped)


def train(build, size: model.Size, steps: int, peaks, seeds, data: dict) -> dict:
  """Trains one run per ``(peak, seed)`` pair; NumPy arrays with a leading axis of runs."""
  fn = program(build, size, steps)
  out = fn(jnp.asarray(peaks, jnp.float32), jnp.asarray(seeds, jnp.uint32),
           jnp.asarray(data["train"]), jnp.asarray(data["val"]), jnp.asarray(data["test"]),
           jnp.asarray(data["val_scored"]), jnp.asarray(data["test_scored"]))
  return {k: np.asarray(v, np.float64) for k, v in out.items()}

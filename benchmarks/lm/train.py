"""The language models' training loops: a grid of peak rates and seeds, one compiled program.

Every run is one lane of a ``jax.vmap``: the peak rate is a traced argument of
the schedule (5% linear warmup, then cosine decay to 0), so every rate and
seed of an optimizer shares one compilation. A seed fixes the initialization
and the order of the batches, the same for every optimizer (paired runs).
Validation and test are scored in bits per character over every character of
their split (``corpus.tiled_windows``). The studies declare which loop they run:

* ``train_drawn`` (the contest's): one program of the whole run, its batches'
  windows drawn at random with replacement; each run returns its mean
  training loss over each of ``CURVE_POINTS`` stretches of steps.
* ``train_chunks`` (the ladder's): a run is a matrix peak rate, an AdamW-part
  peak rate and a seed; the step count is traced, so one compilation serves
  every budget of an optimizer at a size; the windows are a permutation of the
  training split's, drawn without replacement (no character repeats in a run);
  it trains a chunk of steps a call, so that a caller can time the first
  chunks, project the rest, stop between chunks (a stopped program keeps
  nothing) or read the state between them (``observe``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.lm import model
from benchmarks.study_runner import Stopped  # raised where a deadline comes first

CURVE_POINTS = 20
EVAL_BATCH = 256  # windows an evaluation step scores at once
WARMUP_FRACTION = 0.05
TAIL_FRACTION = 0.05  # the ladder's final train loss: the mean over the last 5% of the steps


def schedule_shape(steps: int) -> optax.Schedule:
  """Warmup over the first 5% of the steps, then cosine decay to 0, peaking at 1."""
  return optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=1.0, warmup_steps=max(1, round(WARMUP_FRACTION * steps)),
      decay_steps=steps, end_value=0.0)


def bits(params, windows, scored, heads):
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
def drawn_program(build, size: model.Size, steps: int):
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
            "val": bits(params, val, val_scored, size.heads),
            "test": bits(params, test, test_scored, size.heads)}

  mapped = jax.vmap(run, in_axes=(0, 0, None, None, None, None, None))
  return jax.jit(mapped)


def train_drawn(build, size: model.Size, steps: int, peaks, seeds, data: dict) -> dict:
  """Trains one run per ``(peak, seed)`` pair; NumPy arrays with a leading axis of runs."""
  fn = drawn_program(build, size, steps)
  out = fn(jnp.asarray(peaks, jnp.float32), jnp.asarray(seeds, jnp.uint32),
           jnp.asarray(data["train"]), jnp.asarray(data["val"]), jnp.asarray(data["test"]),
           jnp.asarray(data["val_scored"]), jnp.asarray(data["test_scored"]))
  return {k: np.asarray(v, np.float64) for k, v in out.items()}


def traced_schedule_shape(count, steps):
  """``schedule_shape(steps)`` with ``steps`` traced: linear warmup over
  5% of the steps (at least one), then cosine decay to 0, peaking at 1.
  """
  steps = jnp.asarray(steps, jnp.float32)
  warmup = jnp.maximum(1.0, jnp.round(WARMUP_FRACTION * steps))
  count = jnp.asarray(count, jnp.float32)
  decay = jnp.maximum(steps - warmup, 1.0)
  cosine = 0.5 * (1 + jnp.cos(math.pi * jnp.clip(count - warmup, 0.0, decay) / decay))
  return jnp.where(count < warmup, count / warmup, cosine)


@dataclasses.dataclass(frozen=True)
class Program:
  """The jitted parts of one entry's program at one size."""
  init: callable  # (peaks, adam_peaks, seeds, steps, windows) -> state
  chunk: callable  # (state, t0, peaks, adam_peaks, steps, train) -> state
  evaluate: callable  # (state, val, test, val_scored, test_scored) -> {"val", "test"}


def windows_of(train_chars: int, context: int) -> int:
  """How many training windows (context + 1 characters, overlapping by one) there are."""
  return (train_chars - 1) // context


@functools.cache
def chunk_program(build, size: model.Size, chunk: int) -> Program:
  """The jitted parts of the program of the optimizer ``build(schedule, adam_schedule)``
  at ``size``, ``chunk`` steps a call; kept, so that every grid of one shape reuses them.
  """

  def optimizer(peak, adam_peak, steps):
    return build(lambda count: peak * traced_schedule_shape(count, steps),
                 lambda count: adam_peak * traced_schedule_shape(count, steps))

  def init(peak, adam_peak, seed, steps, windows):
    key = jax.random.key(seed)
    params = model.init(jax.random.fold_in(key, 0), size)
    order = jax.random.permutation(jax.random.fold_in(key, 1), windows).astype(jnp.int32)
    return {"params": params, "opt": optimizer(peak, adam_peak, steps).init(params),
            "order": order, "tail": jnp.zeros([], jnp.float32)}

  def run_chunk(state, t0, peak, adam_peak, steps, train):
    opt = optimizer(peak, adam_peak, steps)
    tail_from = steps - jnp.maximum(1, jnp.round(TAIL_FRACTION * steps).astype(jnp.int32))

    def step(state, t):
      rows = jax.lax.dynamic_slice(state["order"], (t * size.batch,), (size.batch,))
      windows = train[rows[:, None] * size.context + jnp.arange(size.context + 1)]
      loss, grads = jax.value_and_grad(model.nats)(state["params"], windows, size.heads)
      updates, opt_state = opt.update(grads, state["opt"], state["params"])
      new = {"params": optax.apply_updates(state["params"], updates), "opt": opt_state,
             "order": state["order"],
             "tail": state["tail"] + jnp.where(t >= tail_from, loss, 0.0)}
      # Steps past the run's end (its last chunk's padding) change nothing.
      return jax.tree.map(lambda a, b: jnp.where(t < steps, a, b), new, state), None

    state, _ = jax.lax.scan(step, state, t0 + jnp.arange(chunk))
    return state

  def evaluate(state, val, test, val_scored, test_scored):
    scored = lambda w, s: bits(state["params"], w, s, size.heads)
    return {"val": scored(val, val_scored), "test": scored(test, test_scored)}

  lanes = (0, 0, 0, None, None)
  return Program(
      init=jax.jit(jax.vmap(init, in_axes=lanes), static_argnums=4),
      chunk=jax.jit(jax.vmap(run_chunk, in_axes=(0, None, 0, 0, None, None)),
                    donate_argnums=0),
      evaluate=jax.jit(jax.vmap(evaluate, in_axes=(0, None, None, None, None))))


def train_chunks(build, size: model.Size, steps: int, peaks, adam_peaks, seeds, data: dict,
          chunk: int = 100, deadline: float | None = None,
          observe: Callable[[dict, int], None] | None = None) -> dict:
  """Trains one lane per ``(peak, adam_peak, seed)`` for ``steps`` steps.

  Returns NumPy arrays with a leading axis of lanes (``val``, ``test``: bits per
  character; ``train``: the mean train bits over the last 5% of the steps) and
  ``seconds`` (the program's wall time, compilation included), ``first_chunk``
  (the first chunk's, compilation included), ``per_chunk`` (the median of the
  others') and ``cpu_per_chunk`` (likewise, the process's CPU seconds). Raises
  ``Stopped``, keeping nothing, where ``deadline`` (``time.time()``) would pass before the
  next chunk ends. ``observe``, where given, is
  called after each chunk with the lanes' state and the steps done; it must not keep
  the state, which the next chunk reuses in place.
  """
  windows = windows_of(len(data["train"]), size.context)
  if steps * size.batch > windows:
    raise ValueError(f"steps={steps} of batch {size.batch} need {steps * size.batch} windows; "
                     f"the training split holds {windows} (data would repeat)")
  fn = chunk_program(build, size, chunk)
  started = time.perf_counter()
  lanes = [jnp.asarray(x, t) for x, t in ((peaks, jnp.float32), (adam_peaks, jnp.float32),
                                           (seeds, jnp.uint32))]
  steps_ = jnp.asarray(steps, jnp.int32)
  state = fn.init(*lanes, steps_, windows)
  times, cpu_times = [], []
  for t0 in range(0, steps, chunk):
    if deadline is not None and times and time.time() + max(times[1:] or times) > deadline:
      raise Stopped(f"stopped at step {t0} of {steps}: the deadline is near")
    begun, cpu_begun = time.perf_counter(), time.process_time()
    state = fn.chunk(state, jnp.asarray(t0, jnp.int32), lanes[0], lanes[1], steps_, data["train"])
    jax.block_until_ready(state["tail"])
    times.append(time.perf_counter() - begun)
    cpu_times.append(time.process_time() - cpu_begun)
    if observe is not None:
      observe(state, min(t0 + chunk, steps))
  out = fn.evaluate(state, data["val"], data["test"], data["val_scored"], data["test_scored"])
  tail = max(1, round(TAIL_FRACTION * steps))
  result = {k: np.asarray(v, np.float64) for k, v in out.items()}
  result["train"] = np.asarray(state["tail"], np.float64) / tail / math.log(2.0)
  result["seconds"] = time.perf_counter() - started
  result["first_chunk"] = times[0]
  result["per_chunk"] = float(np.median(times[1:])) if len(times) > 1 else times[0]
  # The process's CPU seconds a chunk: on a shared machine, a bound on an idle one's wall time.
  result["cpu_per_chunk"] = float(np.median(cpu_times[1:])) if len(times) > 1 else cpu_times[0]
  return result


def device_data(data: dict) -> dict:
  """The corpus's arrays on the default device, once for every program."""
  return {k: jnp.asarray(data[k]) for k in ("train", "val", "test", "val_scored", "test_scored")}

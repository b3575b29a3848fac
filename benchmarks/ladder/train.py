"""One rung's runs as one vmapped program, trained a chunk of steps a call.

A run is one lane: a matrix peak rate, an AdamW-part peak rate and a seed. The
lanes of a program (an entry's rates and seeds at one size and budget) are
mapped with ``jax.vmap``; the step count is a traced argument, so that one
compilation serves every budget of an entry at a size. Training is called a
chunk of ``chunk`` steps at a time, so that a caller can time the first
chunks, project the rest, and stop between chunks (a stopped program keeps
nothing). A seed fixes the initialization and a permutation of the training
split's windows, drawn without replacement: no character repeats in a run.
``train_with_readout`` trains VSGD-Muon's lanes with the same chunk program and reads
its effective beta1 between chunks (the momentum study's read-out).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

import vsgd_optax
from benchmarks.contest import model
from benchmarks.contest import train as contest_train
from benchmarks.ladder import entries
from benchmarks.ladder import protocol

TAIL_FRACTION = 0.05  # the final train loss: the mean over the last 5% of the steps
READOUT_ENTRY = "vsgd_muon"  # the entry whose effective beta1 the momentum study reads
QUANTILES = (0.1, 0.5, 0.9)  # of the read-out, over every element of every hidden kernel
# entries._vsgd_muon keeps vsgd_muon's own K_g and gamma; the read-out rebuilds each element's
# factored rates from them, so it takes them from the same place.
_VSGD_MUON = inspect.signature(vsgd_optax.vsgd_muon).parameters
VARIANCE_RATIO = float(_VSGD_MUON["variance_ratio"].default)
PRIOR_STRENGTH = float(_VSGD_MUON["prior_strength"].default)


def schedule_shape(count, steps):
  """``contest.train.schedule_shape(steps)`` with ``steps`` traced: linear warmup over
  5% of the steps (at least one), then cosine decay to 0, peaking at 1.
  """
  steps = jnp.asarray(steps, jnp.float32)
  warmup = jnp.maximum(1.0, jnp.round(contest_train.WARMUP_FRACTION * steps))
  count = jnp.asarray(count, jnp.float32)
  decay = jnp.maximum(steps - warmup, 1.0)
  cosine = 0.5 * (1 + jnp.cos(math.pi * jnp.clip(count - warmup, 0.0, decay) / decay))
  return jnp.where(count < warmup, count / warmup, cosine)


class Stopped(RuntimeError):
  """A program stopped before its end (a deadline); it keeps nothing."""


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
def program(entry: str, size: model.Size, chunk: int) -> Program:
  build = entries.builder(entry)

  def optimizer(peak, adam_peak, steps):
    return build(lambda count: peak * schedule_shape(count, steps),
                 lambda count: adam_peak * schedule_shape(count, steps))

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
    bits = lambda w, s: contest_train._bits(state["params"], w, s, size.heads)
    return {"val": bits(val, val_scored), "test": bits(test, test_scored)}

  lanes = (0, 0, 0, None, None)
  return Program(
      init=jax.jit(jax.vmap(init, in_axes=lanes), static_argnums=4),
      chunk=jax.jit(jax.vmap(run_chunk, in_axes=(0, None, 0, 0, None, None)),
                    donate_argnums=0),
      evaluate=jax.jit(jax.vmap(evaluate, in_axes=(0, None, None, None, None))))


def train(entry: str, size: model.Size, steps: int, peaks, adam_peaks, seeds, data: dict,
          chunk: int = 100, deadline: float | None = None,
          observe: Callable[[dict, int], None] | None = None) -> dict:
  """Trains one lane per ``(peak, adam_peak, seed)`` for ``steps`` steps.

  Returns NumPy arrays with a leading axis of lanes (``val``, ``test``: bits per
  character; ``train``: the mean train bits over the last 5% of the steps) and
  ``seconds`` (the program's wall time, compilation included), ``first_chunk``
  (the first chunk's, compilation included), ``per_chunk`` (the median of the
  others') and ``cpu_per_chunk`` (likewise, the process's CPU seconds). Raises ``Stopped``, keeping nothing, where ``deadline``
  (``time.time()``) would pass before the next chunk ends. ``observe``, where given, is
  called after each chunk with the lanes' state and the steps done; it must not keep
  the state, which the next chunk reuses in place.
  """
  windows = windows_of(len(data["train"]), size.context)
  if steps * size.batch > windows:
    raise ValueError(f"steps={steps} of batch {size.batch} need {steps * size.batch} windows; "
                     f"the training split holds {windows} (data would repeat)")
  fn = program(entry, size, chunk)
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


def matrices_state(opt_state):
  """The hidden kernels' VSGD state in a ``"vsgd_muon"`` entry's optimizer state: the
  entry is ``vsgd_optax.vsgd_muon`` itself, an ``optax.partition`` whose ``"muon"`` group
  holds them (its docstring names ``state.inner_states["muon"]`` for the read-outs).
  """
  return opt_state.inner_states["muon"]


@functools.cache
def beta1_quantiles() -> Callable:
  """Jitted over a program's lanes: ``state -> (lanes, 3)``, each lane's ``QUANTILES`` of
  ``vsgd_optax.effective_beta1`` over every element of every hidden kernel, pooled.
  """
  def one(state):
    beta1 = vsgd_optax.effective_beta1(matrices_state(state["opt"]),
                                       variance_ratio=VARIANCE_RATIO,
                                       prior_strength=PRIOR_STRENGTH)
    # The AdamW group's leaves are optax's MaskedNode, which holds no array.
    pooled = jnp.concatenate([leaf.ravel() for leaf in jax.tree.leaves(beta1)])
    return jnp.quantile(pooled, jnp.asarray(QUANTILES, jnp.float32))
  return jax.jit(jax.vmap(one))


def readout_chunk(steps: int) -> int:
  """The chunk that reads a run of ``steps`` at least ``protocol.READOUT_POINTS`` times
  (every step of a shorter one): the chunks end at evenly spread steps, the last at
  ``steps``.
  """
  return max(1, steps // protocol.READOUT_POINTS)


def train_with_readout(size: model.Size, steps: int, peaks, adam_peaks, seeds, data: dict,
                       deadline: float | None = None) -> dict:
  """``train`` of ``READOUT_ENTRY``'s lanes, its chunk ``readout_chunk(steps)``, with the
  read-out between chunks: ``train``'s result and ``"effective_beta1"``: ``step`` (the
  steps done at each point), ``q10``, ``median`` and ``q90`` (arrays of lanes x points).
  The chunk program is ``train``'s, so the lanes' bits are those ``train`` gives.
  """
  points: list[tuple[int, np.ndarray]] = []
  read = beta1_quantiles()

  def observe(state, done):
    # Read to the host now: the next chunk takes the state's buffers over.
    points.append((done, np.asarray(read(state), np.float64)))

  out = train(READOUT_ENTRY, size, steps, peaks, adam_peaks, seeds, data,
              chunk=readout_chunk(steps), deadline=deadline, observe=observe)
  values = np.stack([q for _, q in points], axis=1)  # lanes x points x quantiles
  out["effective_beta1"] = {"step": [done for done, _ in points], "q10": values[..., 0],
                            "median": values[..., 1], "q90": values[..., 2]}
  return out


def device_data(data: dict) -> dict:
  """The corpus's arrays on the default device, once for every program."""
  return {k: jnp.asarray(data[k]) for k in ("train", "val", "test", "val_scored", "test_scored")}

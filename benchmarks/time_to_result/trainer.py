"""The jitted loop that trains many runs of one optimizer at once, and its cost per step.

One jitted function trains a set of runs (learning rate, seed) of one
optimizer (``benchmarks.optimizers.REGISTRY``) on one workload side by side under
``jax.vmap``: ``lax.scan`` over evaluation intervals, each a ``lax.scan`` over
steps (see ``Trainer`` for the convolutional workload, which steps from Python).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

import vsgd_optax
from benchmarks import common
from benchmarks.optimizers import REGISTRY
from benchmarks.optimizers import Optimizer
from benchmarks.time_to_result import harness
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result.workloads import Workload


def make(entry: Optimizer, peak, schedule: str, steps: int) -> optax.GradientTransformation:
  """``entry`` at tuned rate ``peak`` (a traced scalar) under ``schedule`` for a run
  of ``steps``. An optimizer that decays by averaging (schedule-free) is given
  the schedule's warmup alone, and refuses a schedule that has none.
  """
  if entry.decays_by_averaging and schedule != "constant":
    if schedule != "warmup_cosine":
      raise ValueError(f"{entry.label} takes no {schedule!r} schedule; it decays by averaging "
                       "(run it under 'constant' or 'warmup_cosine')")
    return entry.build(optax.warmup_constant_schedule(0.0, peak, schedules.warmup_steps(steps)))
  return entry.build(schedules.learning_rate(schedule, steps, peak))


def _step_fn(workload: Workload, entry: Optimizer, schedule: str, learning_rate, data):
  """``(opt, step)``: ``step((params, aux, opt_state), key) -> (new carry, loss)``.

  Called inside the jitted function, so ``data`` and ``learning_rate`` are
  traced values there, not constants baked into the program.
  """
  opt = make(entry, learning_rate, schedule, workload.steps)
  if entry.per_example and workload.example_loss is None:
    raise ValueError(f"workload {workload.name!r} has no per-example loss")

  def step(carry, key):
    params, aux, opt_state = carry
    if entry.per_example:
      x, y = workload.batch(data, key)
      loss, grads, variance = vsgd_optax.per_example_value_and_grad(
          lambda p, xi, yi: workload.example_loss(p, aux, xi, yi))(params, x, y)
      extra = {"grad_variance": variance}
    else:
      (loss, aux), grads = jax.value_and_grad(workload.loss, has_aux=True)(
          params, aux, data, key)
      extra = {}
    updates, opt_state = opt.update(grads, opt_state, params, **extra)
    return (optax.apply_updates(params, updates), aux, opt_state), loss

  return opt, step


def _start(workload: Workload, entry: Optimizer, schedule: str, learning_rate, seed, data):
  """The first carry of a run and the key its batches are drawn from."""
  init_key, data_key = jax.random.split(jax.random.key(seed))
  params, aux = workload.init(init_key)
  opt, _ = _step_fn(workload, entry, schedule, learning_rate, data)
  return (params, aux, opt.init(params)), data_key


def _validate(workload: Workload, entry: Optimizer, carry, data, split="val"):
  params, aux, opt_state = carry
  metric = workload.validate if split == "val" else workload.test
  return metric(entry.eval_params(opt_state, params), aux, data)


def _step_keys(workload: Workload, data_key):
  """One key per step, shaped (intervals, eval_every)."""
  intervals = workload.steps // workload.eval_every
  keys = jax.random.split(data_key, intervals * workload.eval_every)
  return keys.reshape((intervals, workload.eval_every) + keys.shape[1:])


def _scanned_run(workload: Workload, entry: Optimizer, schedule: str, learning_rate, seed, data):
  """A whole run in one program: a scan over intervals, each a scan over steps."""
  carry, data_key = _start(workload, entry, schedule, learning_rate, seed, data)
  _, step = _step_fn(workload, entry, schedule, learning_rate, data)

  def interval(carry, keys):
    carry, losses = jax.lax.scan(step, carry, keys)
    return carry, (jnp.mean(losses), _validate(workload, entry, carry, data))

  carry, (train, val) = jax.lax.scan(interval, carry, _step_keys(workload, data_key))
  return {"train_loss": train, "val": val, "test": _validate(workload, entry, carry, data, "test")}


class Trainer:
  """The compiled programs of one optimizer on one workload, reused for every call
  with the same number of runs. Runs are vmapped; a workload whose model is made
  of convolutions (``harness.Settings.scan_steps`` false) steps from Python
  instead of inside ``lax.scan``, because XLA:CPU runs convolutions in a loop
  body about nine times slower (0.21 s against 1.9 s a step for the ConvMixer
  here). ``schedule`` (``schedules.NAMES``) shapes each run's rate over its steps.
  """

  def __init__(self, workload: Workload, name: str, schedule: str = "constant"):
    schedules.describe(schedule, workload.steps)  # rejects an unknown name here
    self.workload, self.entry = workload, REGISTRY[name]
    self.scan_steps = harness.settings(workload.name).scan_steps
    w, e = workload, self.entry
    lanes = (0, 0, None)
    if self.scan_steps:
      self._whole = jax.jit(jax.vmap(partial(_scanned_run, w, e, schedule), in_axes=lanes))
      return
    self._start = jax.jit(jax.vmap(partial(_start, w, e, schedule), in_axes=lanes))

    def step(learning_rate, carry, key, data):
      _, step = _step_fn(w, e, schedule, learning_rate, data)
      return step(carry, key)
    self._step = jax.jit(jax.vmap(step, in_axes=(0, 0, 0, None)), donate_argnums=1)
    self._val, self._test = (
        jax.jit(jax.vmap(partial(_validate, w, e, split=split), in_axes=(0, None)))
        for split in ("val", "test"))
    self._keys = jax.jit(jax.vmap(partial(_step_keys, w)))

  def __call__(self, learning_rates, seeds) -> dict:
    """Trains every (learning rate, seed) pair; numpy curves with a leading run axis."""
    lrs = jnp.asarray(learning_rates, jnp.float32)
    seeds = jnp.asarray(seeds, jnp.uint32)
    data = self.workload.data
    if self.scan_steps:
      out = self._whole(lrs, seeds, data)
    else:
      carry, data_key = self._start(lrs, seeds, data)
      keys = self._keys(data_key)
      train, val = [], []
      for i in range(keys.shape[1]):
        losses = []
        for j in range(keys.shape[2]):
          carry, loss = self._step(lrs, carry, keys[:, i, j], data)
          losses.append(loss)
        train.append(jnp.mean(jnp.stack(losses), axis=0))
        val.append(self._val(carry, data))
      out = {"train_loss": jnp.stack(train, 1), "val": jnp.stack(val, 1),
             "test": self._test(carry, data)}
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


def step_costs(workload: Workload, names, learning_rate=1e-3, steps=5, repeats=15,
               schedule: str = "constant") -> dict:
  """Milliseconds per training step of ONE run (not vmapped), for each optimizer,
  measured in this process with the calls interleaved
  (``common.interleaved_medians``) and compilation excluded; each sample is
  ``steps`` steps (in one jitted scan, or from Python as the workload runs).
  Returns, per optimizer, the median and its ratio to Adam's.
  """
  fns = {}
  scan_steps = harness.settings(workload.name).scan_steps
  for name in names:
    entry = REGISTRY[name]

    def advance(learning_rate, carry, keys, data, entry=entry):
      _, step = _step_fn(workload, entry, schedule, learning_rate, data)
      return jax.lax.scan(step, carry, keys)[0]

    def one(learning_rate, carry, key, data, entry=entry):
      _, step = _step_fn(workload, entry, schedule, learning_rate, data)
      return step(carry, key)[0]

    lr = jnp.float32(learning_rate)
    keys = jax.random.split(jax.random.key(1), steps)
    carry = [jax.jit(partial(_start, workload, entry, schedule))(lr, 0, workload.data)[0]]
    if scan_steps:
      advance = jax.jit(advance, donate_argnums=1)
    else:
      one = jax.jit(one, donate_argnums=1)

      def advance(learning_rate, carry, keys, data, one=one):
        for key in keys:
          carry = one(learning_rate, carry, key, data)
        return carry

    def sample(advance=advance, carry=carry, keys=keys, lr=lr):
      carry[0] = jax.block_until_ready(advance(lr, carry[0], keys, workload.data))
    sample()  # compiles
    fns[name] = sample
  samples = common.interleaved_medians(fns, repeats)
  return {name: {"step_ms": 1e3 * float(np.median(samples[name])) / steps,
                 **common.ratio_with_spread(samples[name], samples["adam"])}
          for name in names}

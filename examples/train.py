"""Train a model of the paper with VSGD (or a baseline optimizer), jitted end to end.

Data parallel over every device of every process: one ``data`` mesh axis, the
state replicated, each batch split along it. A workdir keeps ``run.json`` (the
config), Orbax checkpoints, ``metrics.jsonl`` and ``curves.png``; rerunning the
same config there resumes from the last checkpoint. The command line is
``examples/main.py`` (``python -m examples.main``).

This file is the training itself, in the shape of Flax's examples: the train
state, the train and eval steps, ``evaluate`` and the loop. What keeps a run
safe around the loop (the processes' agreement, the workdir's lock, a start
that fails on every process at once, stops) is ``runtime/guard.py``'s.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import vsgd_optax
from vsgd_optax import experimental

from . import augment
from . import configs
from . import datasets
from . import models
from . import optimizers
from .errors import ConfigError
from .errors import Diverged
from .errors import TrainingStopped
from .runtime import batches
from .runtime import checkpoints as checkpoints_lib
from .runtime import guard
from .runtime import reporting
from .runtime import stopping
from .runtime import workdirs


class TrainState(NamedTuple):
  """Everything a checkpoint holds: the step, parameters, batch statistics and optimizer state."""

  step: jax.Array
  params: Any
  batch_stats: Any
  opt_state: Any


def _cross_entropy(logits, labels):
  return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)


def _all_finite(tree) -> jax.Array:
  return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


def create_train_state(config: configs.Config, dataset: datasets.Dataset,
                       mesh: jax.sharding.Mesh | None = None,
                       schedule: optax.Schedule | None = None):
  """The model's graph, the optimizer, and the initial (params, stats, opt state).

  ``schedule`` is the learning rate the optimizer follows; by default the
  config's (``optimizers.learning_rate_schedule``). The training loop passes
  the one it also logs, so that both are the same function.

  The state is created by one jitted function, directly replicated over
  ``mesh`` (on the default device without one): no process builds it on the
  host and copies it over.
  """
  def build():
    return models.create_model(
        config.model, dataset.num_classes, dataset.train_images.shape[-1], seed=config.seed,
        dtype=jnp.bfloat16 if config.bf16 else None, **config.model_kwargs)
  try:
    graphdef = nnx.split(nnx.eval_shape(build), nnx.Param, nnx.BatchStat)[0]
  except (TypeError, ValueError) as err:
    raise ConfigError(f"model_kwargs {config.model_kwargs} do not build {config.model}: "
                      f"{str(err).splitlines()[0]}") from err
  if schedule is None:
    schedule = schedule_of(config)
  opt = optimizers.create_optimizer(
      config.optimizer, schedule, config.weight_decay, config.momentum,
      prior_strength=config.prior_strength, variance_ratio=config.variance_ratio,
      kappa_g=config.kappa_g, kappa_ghat=config.kappa_ghat,
      state_dtype=jnp.dtype(config.state_dtype), state_rounding=config.state_rounding)

  def init() -> TrainState:
    _, params, batch_stats = nnx.split(build(), nnx.Param, nnx.BatchStat)
    return TrainState(jnp.zeros([], jnp.int32), params, batch_stats, opt.init(params))

  replicated = None if mesh is None else jax.NamedSharding(mesh, jax.P())
  return graphdef, opt, jax.jit(init, out_shardings=replicated)()


def schedule_of(config: configs.Config) -> optax.Schedule:
  """The config's learning rate at each step."""
  return optimizers.learning_rate_schedule(config.learning_rate, config.schedule, config.steps,
                                           config.lr_halving_every)


def make_train_step(graphdef, opt, config: configs.Config, dataset):
  """train_step(state, images, labels, key) -> (state, metrics); pure, for jax.jit.

  ``metrics`` holds ``finite``: whether the loss and the update were finite.
  """

  def loss_fn(params, batch_stats, images, labels):
    logits, new_stats = models.apply(graphdef, params, batch_stats, images, train=True)
    loss = jnp.mean(_cross_entropy(logits, labels))
    return loss, (logits, new_stats)

  def train_step(state: TrainState, images, labels, key):
    images = augment.augment(key, augment.to_unit(images), dataset.name)
    images = augment.normalize(images, dataset.mean, dataset.std)
    extra = {}
    if config.per_example:
      # The batched forward pass gives the logged loss and the new batch-norm
      # statistics; the gradients come from the examples one by one, which
      # normalize with the running statistics held fixed (a single example
      # has no batch statistics of its own).
      loss, (logits, batch_stats) = loss_fn(state.params, state.batch_stats, images, labels)

      def example_loss(params, image, label):
        logits, _ = models.apply(graphdef, params, state.batch_stats, image[None], train=False)
        return _cross_entropy(logits, label[None])[0]
      per_example = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(
          state.params, images, labels)
      grads, extra["grad_variance"] = vsgd_optax.per_example_moments(per_example)
    else:
      grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
      (loss, (logits, batch_stats)), grads = grad_fn(state.params, state.batch_stats,
                                                     images, labels)
    updates, opt_state = opt.update(grads, state.opt_state, state.params, **extra)
    params = optax.apply_updates(state.params, updates)
    accuracy = jnp.mean(jnp.argmax(logits, -1) == labels)
    new_state = TrainState(state.step + 1, params, batch_stats, opt_state)
    finite = jnp.isfinite(loss) & _all_finite(updates)
    metrics = {"train_loss": loss, "train_accuracy": accuracy, "finite": finite}
    return new_state, metrics

  return train_step


def make_noise_scale_read_out(config: configs.Config):
  """read_out(opt_state) -> VSGD's gradient noise scale, or None where the config
  does not ask for it (``noise_scale``, off by default: in training the
  read-out is not usable, ``docs/howto.md``).

  It is a reduction of the state alone, run at the log steps only (where the
  host waits for the step anyway), so the train step stays the same program
  whichever optimizer runs.
  """
  if not config.noise_scale:
    return None
  return jax.jit(functools.partial(
      experimental.gradient_noise_scale, batch_size=config.batch_size,
      prior_strength=config.prior_strength, variance_ratio=config.variance_ratio,
      per_example=config.per_example))


def make_eval_step(graphdef, dataset):
  """eval_step(params, batch_stats, images, labels, mask) -> (loss sum, correct count)."""
  def eval_step(params, batch_stats, images, labels, mask):
    images = augment.normalize(augment.to_unit(images), dataset.mean, dataset.std)
    logits, _ = models.apply(graphdef, params, batch_stats, images, train=False)
    loss = jnp.sum(_cross_entropy(logits, labels) * mask)
    correct = jnp.sum((jnp.argmax(logits, -1) == labels) * mask)
    return loss, correct
  return eval_step


def evaluate(eval_step, state: TrainState, dataset: datasets.Dataset,
             sharding: jax.sharding.Sharding, batch_size: int,
             split: str = "test") -> tuple[float, float]:
  """Loss and accuracy on ``split`` ("test" or "validation"), each example
  counted once over all processes.

  Each process gathers its own rows of each batch; the sums inside
  ``eval_step`` are global, so every process gets the same totals.
  """
  arrays = (getattr(dataset, f"{split}_images"), getattr(dataset, f"{split}_labels"))
  n = len(arrays[1])
  loss = correct = 0.0
  for indices, mask in batches.padded_batches(n, batch_size):
    images, labels = batches.global_batch(sharding, indices, arrays)
    (weights,) = batches.global_batch(sharding, np.arange(batch_size), (mask,))
    batch_loss, batch_correct = eval_step(state.params, state.batch_stats, images, labels,
                                          weights)
    loss, correct = loss + float(batch_loss), correct + float(batch_correct)
  return loss / n, correct / n


def _batch_sizes(config: configs.Config, dataset, mesh) -> int:
  """Checks the training batch against the data and devices; the evaluation batch."""
  n_train, devices = len(dataset.train_labels), mesh.size
  if config.batch_size > n_train:
    raise ConfigError(f"batch_size {config.batch_size} is larger than the {n_train} "
                      f"training examples of {dataset.name}; use at most {n_train}.")
  if config.batch_size % devices:
    raise ConfigError(f"batch_size {config.batch_size} must be a multiple of the "
                      f"{devices} devices it is split over.")
  size = config.eval_batch_size or config.batch_size
  return -(-size // devices) * devices  # rounded up to split evenly


def non_finite_leaves(state) -> list[str]:
  """The paths of the arrays of ``state`` (params, batch statistics, optimizer
  state) that hold a NaN or an infinity; one device-side reduction per array.
  """
  flags = jax.jit(lambda tree: jax.tree.map(lambda x: jnp.all(jnp.isfinite(x)), tree))(state)
  return [jax.tree_util.keystr(path) for path, ok in jax.tree_util.tree_leaves_with_path(flags)
          if not bool(ok)]


def _diverged_message(done: int, metrics: dict, last_good: int | None, checkpoints,
                      config: configs.Config, bad_leaves: list[str] | None = None) -> str:
  loss = float(metrics["train_loss"])
  if bad_leaves:
    shown = ", ".join(bad_leaves[:3]) + (f" and {len(bad_leaves) - 3} more"
                                         if len(bad_leaves) > 3 else "")
    what = f"the state to be saved is not finite ({shown})"
  else:
    what = f"the loss is {loss}" if not np.isfinite(loss) else "the update is not finite"
  kept = (f"the last good checkpoint, step {last_good}, is intact in {checkpoints.directory}"
          if last_good is not None else "no checkpoint had been saved")
  return (f"training stopped at step {done}: {what}; {kept}. Lower the learning rate "
          f"(now {config.learning_rate:g}) or check the data.")


def train_and_evaluate(config: configs.Config, workdir: str, *, progress: bool = True,
                       stop_after: int | None = None, devices=None,
                       dataset: datasets.Dataset | None = None,
                       stop: stopping.GracefulStop | None = None) -> dict:
  """Trains ``config`` in ``workdir`` (resuming if it holds the same run).

  Every process of a multi-process run calls this alike; they first check
  that they hold the same settings (``guard.hold``). ``stop_after`` ends the
  run early after that many steps (as an interruption would), leaving the
  last checkpoint behind. ``devices`` defaults to ``jax.devices()``, the devices of all
  processes. ``dataset`` replaces the one ``config`` names (for a held-out
  validation split, say). ``stop``, entered by the caller, turns SIGTERM and
  SIGINT into a stop after the current step with a checkpoint; the result's
  ``interrupted`` is then the signal's number (else None). Returns the final
  metrics.

  Raises a ``TrainerError`` before training, with nothing written:
  ``ConfigError`` for bad settings or data or a workdir that cannot be
  written, ``WorkdirInUse`` for a workdir that another trainer holds,
  ``PortInUse`` for a taken coordinator port. Raises ``Diverged`` (a
  ``TrainingStopped``) when a step's loss or update is not finite, and a plain
  ``TrainingStopped`` when a checkpoint cannot be saved.
  """
  configs.validate(config)
  with guard.hold(config, workdir, stop_after, stop) as stop:
    return _train(config, workdir, progress, stop_after, devices, dataset, stop)


def _train(config, workdir, progress, stop_after, devices, dataset, stop) -> dict:
  """The body of ``train_and_evaluate``, once the workdir is locked and checked."""
  if dataset is None:
    dataset = guard.load_dataset(config)
  devices = list(devices or jax.devices())
  mesh = jax.make_mesh((len(devices),), ("data",), (jax.sharding.AxisType.Auto,),
                       devices=devices)
  eval_batch_size = _batch_sizes(config, dataset, mesh)
  replicated = jax.NamedSharding(mesh, jax.P())
  split = jax.NamedSharding(mesh, jax.P("data"))
  schedule = schedule_of(config)
  graphdef, opt, state = create_train_state(config, dataset, mesh, schedule)

  checkpoints = checkpoints_lib.Checkpoints(workdir)
  state = checkpoints.restore_latest(state) or state
  start = int(state.step)
  end = config.steps if stop_after is None else min(config.steps, start + stop_after)
  main_process = jax.process_index() == 0
  if dataset.synthetic and main_process:
    print(datasets.synthetic_notice(dataset), flush=True)

  step_fn = make_train_step(graphdef, opt, config, dataset)
  base_key = jax.random.key(config.seed)

  def train_step_at(state, images, labels, step):
    return step_fn(state, images, labels, jax.random.fold_in(base_key, step))
  train_step = jax.jit(train_step_at, donate_argnums=0, out_shardings=(replicated, replicated))
  noise_scale_of = make_noise_scale_read_out(config)
  eval_step = jax.jit(make_eval_step(graphdef, dataset), out_shardings=replicated)

  def make_batch(step: int):
    if dataset.synthetic:  # random stand-in data, drawn on the devices
      return datasets.synthetic_batch(dataset, config.seed, step, config.batch_size, split)
    indices = batches.batch_indices(config.seed, step, len(dataset.train_labels),
                                    config.batch_size)
    return batches.global_batch(split, indices, (dataset.train_images, dataset.train_labels))

  writer = bar = reporting.Silent()
  opened = False  # the workdir is claimed once a step has succeeded

  def check(done: int, metrics: dict) -> None:
    nonlocal opened, writer
    if not bool(metrics["finite"]):
      raise Diverged(_diverged_message(done, metrics, checkpoints.latest_step(),
                                              checkpoints, config))
    if not opened:
      workdirs.claim(workdir, config)
      if main_process:
        writer = reporting.MetricsWriter(workdir, start, config.tensorboard)
      opened = True
      stop.stoppable = True  # from now on a signal stops after a step, with a checkpoint

  def save(done: int, metrics: dict) -> None:
    # The loss and the update were finite; what is written must be too (a batch
    # statistic can overflow while the loss does not), so that the step the
    # stop message names as the last good checkpoint restores finite.
    bad = non_finite_leaves(state)
    if bad:
      raise Diverged(_diverged_message(done, metrics, checkpoints.latest_step(), checkpoints,
                                       config, bad))
    try:
      checkpoints.save(done, state)
    except checkpoints_lib.SaveFailed as err:
      raise TrainingStopped(str(err)) from None

  def evaluate_all(state) -> dict:
    """Test loss and accuracy, and validation's where the dataset has a split
    of its own (TinyImageNet's is the test split: its numbers are copied).
    """
    loss, accuracy = evaluate(eval_step, state, dataset, split, eval_batch_size)
    results = dict(test_loss=loss, test_accuracy=accuracy)
    if dataset.validation_is_test:
      results.update(validation_loss=loss, validation_accuracy=accuracy)
    elif dataset.validation_images is not None:
      loss, accuracy = evaluate(eval_step, state, dataset, split, eval_batch_size, "validation")
      results.update(validation_loss=loss, validation_accuracy=accuracy)
    return results

  if progress and main_process:
    bar = reporting.Progress(config.steps, start, f"{config.model}/{config.optimizer}")
  tic, window, last, pending = time.perf_counter(), [], {}, None
  interrupted = None
  try:
    with batches.Prefetcher(make_batch, start, end, config.prefetch) as batch_stream:
      # strict=False: at the end, zip must not pull one more batch from the stream.
      for step, (images, labels) in zip(range(start, end), batch_stream, strict=False):
        state, metrics = train_step(state, images, labels, np.int32(step))
        done = step + 1
        # The previous step is checked only now, so that this one runs meanwhile.
        if pending is not None:
          check(*pending)
        pending = (done, metrics)
        window.append(metrics)
        log_now = done % config.log_every == 0 or done == end
        eval_now = done % config.eval_every == 0 or done == config.steps
        save_now = done % config.checkpoint_every == 0 or done == end
        if log_now or eval_now or save_now:
          check(*pending)  # nothing is logged, evaluated or saved after a bad step
          pending = None
        if log_now:
          means = {k: float(np.mean([float(m[k]) for m in window]))
                   for k in ("train_loss", "train_accuracy")}
          speed = len(window) / (time.perf_counter() - tic)
          # This step's value, not a mean: it is read from the state that the step left.
          noise_scale = ({} if noise_scale_of is None else
                         {"gradient_noise_scale": float(noise_scale_of(state.opt_state))})
          writer.write(done, **means, **noise_scale, learning_rate=float(schedule(step)),
                       steps_per_second=speed)
          bar.log(done, loss=means["train_loss"], acc=means["train_accuracy"], it_s=speed)
          last.update(means)
          tic, window = time.perf_counter(), []
        if eval_now:
          results = evaluate_all(state)
          writer.write(done, **results)
          bar.log(done, test_loss=results["test_loss"], test_acc=results["test_accuracy"])
          last.update(results)
        if save_now:
          save(done, metrics)
        bar.step()
        # Every process stops at the same step, polled where the host waits anyway.
        asked = guard.stop_asked(stop, done, config)
        if asked and done < end:
          if pending is not None:
            check(*pending)
          if not save_now:
            save(done, metrics)
          interrupted = signal.Signals(asked)
          means = ({k: float(np.mean([float(m[k]) for m in window]))
                    for k in ("train_loss", "train_accuracy")} if window else {})
          writer.write(done, **means, interrupted=interrupted.name)
          break
  finally:
    bar.close()
  if interrupted is None and "test_accuracy" not in last:
    last.update(evaluate_all(state))
  metrics_path = os.path.join(workdir, "metrics.jsonl")
  plot = os.path.join(workdir, "curves.png")
  if main_process and (opened or start > 0):
    reporting.plot_curves(metrics_path, plot,
                          f"{config.dataset} / {config.model} / {config.optimizer}")
  checkpoints.close()
  if main_process and interrupted is None and int(state.step) == config.steps:
    workdirs.write_result(workdir, config, dataset, int(state.step), last)
  return {**last, "step": int(state.step), "trained_steps": int(state.step) - start,
          "metrics": metrics_path, "plot": plot, "state": state, "interrupted": interrupted,
          "checkpoints": checkpoints.directory}

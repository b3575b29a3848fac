"""Train a model of the paper with VSGD (or a baseline optimizer), jitted end to end.

Data parallel over every device of every process: one ``data`` mesh axis, the
state replicated, each batch split along it. A workdir keeps ``run.json`` (the
config), Orbax checkpoints, ``metrics.jsonl`` and ``curves.png``; rerunning the
same config there resumes from the last checkpoint. The command line is
``examples/main.py`` (``python -m examples.main``).

This file is the training itself, in the shape of Flax's examples: the train
state, the train and eval steps, ``evaluate`` and the loop. The loop reads as
Flax's ImageNet ``train_and_evaluate``: create the state, restore it, then
for each step train, log, evaluate and save, each a named function below that
takes what it needs as arguments. What keeps a run safe around the loop (the
processes' agreement, the workdir's lock, a start that fails on every process
at once, stops) is ``runtime/guard.py``'s.
"""

from __future__ import annotations

import functools
import os
import signal
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
  vsgd_settings = {name: getattr(config, name) for name in optimizers.VSGD_SETTINGS}
  vsgd_settings["state_dtype"] = jnp.dtype(config.state_dtype)  # the config holds its name
  opt = optimizers.create_optimizer(config.optimizer, schedule, config.weight_decay,
                                    config.momentum, **vsgd_settings)

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


def load_dataset(config: configs.Config) -> datasets.Dataset:
  """The config's dataset, loaded by every process (``guard.load_dataset_everywhere``)."""
  return guard.load_dataset_everywhere(config.dataset, config.data_dir, config.seed,
                                       config.validation_size, config.download)


def announce_synthetic_data(dataset: datasets.Dataset) -> None:
  """Says on process 0 that the data is a random stand-in, where it is one."""
  if dataset.synthetic and jax.process_index() == 0:
    print(datasets.synthetic_notice(dataset), flush=True)


def make_mesh(devices=None) -> jax.sharding.Mesh:
  """One ``data`` axis over ``devices``; by default the devices of all processes."""
  devices = list(devices or jax.devices())
  return jax.make_mesh((len(devices),), ("data",), (jax.sharding.AxisType.Auto,),
                       devices=devices)


def evaluation_batch_size(config: configs.Config, dataset: datasets.Dataset, mesh) -> int:
  """The evaluation batch, once the training batch is checked against the data and devices."""
  n_train, devices = len(dataset.train_labels), mesh.size
  if config.batch_size > n_train:
    raise ConfigError(f"batch_size {config.batch_size} is larger than the {n_train} "
                      f"training examples of {dataset.name}; use at most {n_train}.")
  if config.batch_size % devices:
    raise ConfigError(f"batch_size {config.batch_size} must be a multiple of the "
                      f"{devices} devices it is split over.")
  size = config.eval_batch_size or config.batch_size
  return -(-size // devices) * devices  # rounded up to split evenly


def jit_train_step(graphdef, opt, config: configs.Config, dataset: datasets.Dataset,
                   replicated: jax.sharding.Sharding):
  """train_step(state, images, labels, step) -> (state, metrics), jitted.

  The augmentations' key is the seed's, folded with the step, so that a
  resumed run draws what an uninterrupted one would. The state is donated;
  the new state and the metrics come back ``replicated``.
  """
  step_fn = make_train_step(graphdef, opt, config, dataset)
  base_key = jax.random.key(config.seed)

  def train_step_at(state, images, labels, step):
    return step_fn(state, images, labels, jax.random.fold_in(base_key, step))
  return jax.jit(train_step_at, donate_argnums=0, out_shardings=(replicated, replicated))


def train_batch(config: configs.Config, dataset: datasets.Dataset,
                batch_sharding: jax.sharding.Sharding, step: int) -> tuple[jax.Array, ...]:
  """The global training batch of ``step`` (images, labels), split along ``batch_sharding``."""
  if dataset.synthetic:  # random stand-in data, drawn on the devices
    return datasets.synthetic_batch(dataset, config.seed, step, config.batch_size,
                                    batch_sharding)
  indices = batches.batch_indices(config.seed, step, len(dataset.train_labels),
                                  config.batch_size)
  return batches.global_batch(batch_sharding, indices,
                              (dataset.train_images, dataset.train_labels))


def open_progress(progress: bool, config: configs.Config, start: int):
  """The progress bar of process 0 (``reporting.Progress``) where ``progress`` asks for one."""
  if progress and jax.process_index() == 0:
    return reporting.Progress(config.steps, start, f"{config.model}/{config.optimizer}")
  return reporting.Silent()


def due(config: configs.Config, done: int, end: int) -> tuple[bool, bool, bool]:
  """Whether step ``done`` logs, evaluates and saves a checkpoint.

  Each at its interval; the last step of this part of the run (``end``) also
  logs and saves, and the run's last step also evaluates.
  """
  return (done % config.log_every == 0 or done == end,
          done % config.eval_every == 0 or done == config.steps,
          done % config.checkpoint_every == 0 or done == end)


def non_finite_leaves(state) -> list[str]:
  """The paths of the arrays of ``state`` (params, batch statistics, optimizer
  state) that hold a NaN or an infinity; one device-side reduction per array.
  """
  flags = jax.jit(lambda tree: jax.tree.map(lambda x: jnp.all(jnp.isfinite(x)), tree))(state)
  return [jax.tree_util.keystr(path) for path, ok in jax.tree_util.tree_leaves_with_path(flags)
          if not bool(ok)]


def _diverged_message(done: int, metrics: dict, last_good: int | None, checkpoints,
                      learning_rate: float, bad_leaves: list[str] | None = None) -> str:
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
          f"(now {learning_rate:g}) or check the data.")


def stop_if_diverged(done: int, metrics: dict, checkpoints: checkpoints_lib.Checkpoints,
                     learning_rate: float) -> None:
  """Raises ``Diverged`` if the loss or the update of step ``done`` was not finite."""
  if not bool(metrics["finite"]):
    raise Diverged(_diverged_message(done, metrics, checkpoints.latest_step(), checkpoints,
                                     learning_rate))


def claim_workdir(workdir: str, config: configs.Config, start: int,
                  stop: stopping.GracefulStop):
  """Marks ``workdir`` as this run's (``run.json``), once a step has succeeded.

  From then on a signal stops the run after a step, with a checkpoint.
  Returns the metrics writer (process 0's; ``reporting.Silent`` on the others).
  """
  workdirs.claim(workdir, configs.json_settings(config))
  writer = (reporting.MetricsWriter(workdir, start, config.tensorboard)
            if jax.process_index() == 0 else reporting.Silent())
  stop.stoppable = True
  return writer


def confirm_step(unchecked: tuple[int, dict] | None, writer, checkpoints, config: configs.Config,
                 workdir: str, start: int, stop: stopping.GracefulStop):
  """Stops the run if step ``unchecked`` (its number and metrics; None: none)
  diverged, and claims the workdir at the first step found good.

  Returns the metrics writer: ``writer``, or the workdir's new one where this
  claimed it (``writer`` is None until then).
  """
  if unchecked is None:
    return writer
  stop_if_diverged(*unchecked, checkpoints, config.learning_rate)
  if writer is None:
    writer = claim_workdir(workdir, config, start, stop)
  return writer


def log_train_metrics(writer, bar, done: int, window: reporting.Window, learning_rate: float,
                      noise_scale_of, opt_state) -> dict:
  """Writes the window's mean train metrics at step ``done``, and empties it.

  The gradient noise scale, where ``noise_scale_of`` reads one, is this
  step's value, not a mean: it is read from the state that the step left.
  Returns the means.
  """
  means = window.means()
  speed = window.steps_per_second()
  noise_scale = ({} if noise_scale_of is None else
                 {"gradient_noise_scale": float(noise_scale_of(opt_state))})
  writer.write(done, **means, **noise_scale, learning_rate=learning_rate,
               steps_per_second=speed)
  bar.log(done, loss=means["train_loss"], acc=means["train_accuracy"], it_s=speed)
  window.restart()
  return means


def evaluate_all(eval_step, state: TrainState, dataset: datasets.Dataset,
                 sharding: jax.sharding.Sharding, batch_size: int) -> dict:
  """Test loss and accuracy, and validation's where the dataset has a split
  of its own (TinyImageNet's is the test split: its numbers are copied).
  """
  loss, accuracy = evaluate(eval_step, state, dataset, sharding, batch_size)
  results = dict(test_loss=loss, test_accuracy=accuracy)
  if dataset.validation_is_test:
    results.update(validation_loss=loss, validation_accuracy=accuracy)
  elif dataset.validation_images is not None:
    loss, accuracy = evaluate(eval_step, state, dataset, sharding, batch_size, "validation")
    results.update(validation_loss=loss, validation_accuracy=accuracy)
  return results


def log_evaluation(writer, bar, done: int, results: dict) -> dict:
  """Writes the evaluation ``results`` of step ``done``; returns them."""
  writer.write(done, **results)
  bar.log(done, test_loss=results["test_loss"], test_acc=results["test_accuracy"])
  return results


def save_checkpoint(checkpoints: checkpoints_lib.Checkpoints, done: int, state: TrainState,
                    metrics: dict, learning_rate: float) -> None:
  """Saves checkpoint ``done``; stops the run if it is not finite or cannot be written.

  The loss and the update were finite; what is written must be too (a batch
  statistic can overflow while the loss does not), so that the step the stop
  message names as the last good checkpoint restores finite.
  """
  bad = non_finite_leaves(state)
  if bad:
    raise Diverged(_diverged_message(done, metrics, checkpoints.latest_step(), checkpoints,
                                     learning_rate, bad))
  try:
    checkpoints.save(done, state)
  except checkpoints_lib.SaveFailed as err:
    raise TrainingStopped(str(err)) from None


def finish_run(config: configs.Config, workdir: str, dataset: datasets.Dataset,
               checkpoints: checkpoints_lib.Checkpoints, state: TrainState, start: int,
               last: dict, interrupted: signal.Signals | None, claimed: bool) -> dict:
  """Plots the curves, closes the checkpoints and, for a run with all its
  steps, writes ``result.json`` (process 0). Returns the run's result.
  """
  metrics_path = os.path.join(workdir, "metrics.jsonl")
  plot = os.path.join(workdir, "curves.png")
  main_process = jax.process_index() == 0
  if main_process and (claimed or start > 0):
    reporting.plot_curves(metrics_path, plot,
                          f"{config.dataset} / {config.model} / {config.optimizer}")
  checkpoints.close()
  step = int(state.step)
  if main_process and interrupted is None and step == config.steps:
    held_out = config.validation_size if dataset.validation_images is not None else None
    workdirs.write_result(workdir, step, last, configs.json_settings(config),
                          validation_is_test=dataset.validation_is_test, held_out=held_out)
  return {**last, "step": step, "trained_steps": step - start, "metrics": metrics_path,
          "plot": plot, "state": state, "interrupted": interrupted,
          "checkpoints": checkpoints.directory}


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
  with guard.hold(configs.json_settings(config), workdir, stop_after, stop,
                  not_compared=configs.NOT_PART_OF_THE_RUN,
                  defaults=configs.record_defaults()) as stop:
    return _train(config, workdir, progress, stop_after, devices, dataset, stop)


def _train(config, workdir, progress, stop_after, devices, dataset, stop) -> dict:
  """The body of ``train_and_evaluate``, once the workdir is locked and checked."""
  dataset = load_dataset(config) if dataset is None else dataset
  mesh = make_mesh(devices)
  eval_batch_size = evaluation_batch_size(config, dataset, mesh)
  replicated = jax.NamedSharding(mesh, jax.P())
  batch_sharding = jax.NamedSharding(mesh, jax.P("data"))
  schedule = schedule_of(config)
  graphdef, opt, state = create_train_state(config, dataset, mesh, schedule)
  checkpoints = checkpoints_lib.Checkpoints(workdir)
  state = checkpoints.restore_latest(state) or state
  start = int(state.step)
  end = config.steps if stop_after is None else min(config.steps, start + stop_after)
  announce_synthetic_data(dataset)
  train_step = jit_train_step(graphdef, opt, config, dataset, replicated)
  eval_step = jax.jit(make_eval_step(graphdef, dataset), out_shardings=replicated)
  noise_scale_of = make_noise_scale_read_out(config)
  make_batch = functools.partial(train_batch, config, dataset, batch_sharding)
  evaluate_state = functools.partial(evaluate_all, eval_step, dataset=dataset,
                                     sharding=batch_sharding, batch_size=eval_batch_size)
  confirm = functools.partial(confirm_step, checkpoints=checkpoints, config=config,
                              workdir=workdir, start=start, stop=stop)
  bar, writer, window = open_progress(progress, config, start), None, reporting.Window()
  last, unchecked, interrupted = {}, None, None
  try:
    with batches.Prefetcher(make_batch, start, end, config.prefetch) as batch_stream:
      # strict=False: at the end, zip must not pull one more batch from the stream.
      for step, (images, labels) in zip(range(start, end), batch_stream, strict=False):
        state, metrics = train_step(state, images, labels, np.int32(step))
        done = step + 1
        # The previous step is checked only now, so that this one runs meanwhile.
        writer, unchecked = confirm(unchecked, writer), (done, metrics)
        window.add(metrics)
        log_now, eval_now, save_now = due(config, done, end)
        if log_now or eval_now or save_now:  # never after a bad step
          writer, unchecked = confirm(unchecked, writer), None
        if log_now:
          last.update(log_train_metrics(writer, bar, done, window, float(schedule(step)),
                                        noise_scale_of, state.opt_state))
        if eval_now:
          last.update(log_evaluation(writer, bar, done, evaluate_state(state)))
        if save_now:
          save_checkpoint(checkpoints, done, state, metrics, config.learning_rate)
        bar.step()
        # Every process stops at the same step, polled where the host waits anyway.
        asked = guard.stop_asked(stop, done, polled_every=(
            config.log_every, config.eval_every, config.checkpoint_every))
        if asked and done < end:
          writer = confirm(unchecked, writer)
          if not save_now:
            save_checkpoint(checkpoints, done, state, metrics, config.learning_rate)
          interrupted = signal.Signals(asked)
          writer.write(done, **window.means(), interrupted=interrupted.name)
          break
  finally:
    bar.close()
  if interrupted is None and "test_accuracy" not in last:
    last.update(evaluate_state(state))
  return finish_run(config, workdir, dataset, checkpoints, state, start, last, interrupted,
                    claimed=writer is not None)

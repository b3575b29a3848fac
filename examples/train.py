"""Train a model of the paper with VSGD (or a baseline optimizer), jitted end to end.

    python -m examples.train                                  # digits, ConvMixer, VSGD
    python -m examples.train --config cifar100_vgg16 --data-dir data --workdir runs/vgg
    python -m examples.train --optimizer adam --set learning_rate=0.001

Data parallel over all local devices (one ``Mesh`` axis, ``NamedSharding``);
launched with ``--distributed``, ``jax.distributed`` joins the hosts. A workdir
keeps ``run.json`` (the config), Orbax checkpoints, ``metrics.jsonl`` and
``curves.png``; rerunning the same config there resumes from the last checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx

import vsgd_optax
from examples import configs
from examples import input_pipeline
from examples import models
from examples import optimizers
from examples import reporting


class ConfigError(Exception):
  """Bad user input; reported as one line, without a traceback."""


class TrainState(NamedTuple):
  step: jax.Array
  params: Any
  batch_stats: Any
  opt_state: Any


def _cross_entropy(logits, labels):
  return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels)


def create_train_state(config: configs.Config, dataset: input_pipeline.Dataset):
  """The model's graph, the optimizer, and the initial (params, stats, opt state)."""
  model = models.create_model(
      config.model, dataset.num_classes, dataset.train_images.shape[-1], seed=config.seed,
      dtype=jnp.bfloat16 if config.bf16 else None, **config.model_kwargs)
  graphdef, params, batch_stats = nnx.split(model, nnx.Param, nnx.BatchStat)
  opt = optimizers.create_optimizer(config.optimizer, config.learning_rate,
                                    config.lr_halving_every, config.weight_decay,
                                    config.momentum)
  state = TrainState(jnp.zeros([], jnp.int32), params, batch_stats, opt.init(params))
  return graphdef, opt, state


def _apply(graphdef, params, batch_stats, images, train: bool):
  model = nnx.merge(graphdef, params, batch_stats, copy=True)
  model.train() if train else model.eval()
  logits = model(images)
  return logits, nnx.state(model, nnx.BatchStat)


def make_train_step(graphdef, opt, config: configs.Config, dataset):
  """train_step(state, images, labels, key) -> (state, metrics); pure, for jax.jit."""

  def loss_fn(params, batch_stats, images, labels):
    logits, new_stats = _apply(graphdef, params, batch_stats, images, train=True)
    loss = jnp.mean(_cross_entropy(logits, labels))
    return loss, (logits, new_stats)

  def train_step(state: TrainState, images, labels, key):
    images = input_pipeline.augment(key, input_pipeline.to_unit(images), dataset.name)
    images = input_pipeline.normalize(images, dataset.mean, dataset.std)
    extra = {}
    if config.per_example:
      # The batched forward pass gives the logged loss and the new batch-norm
      # statistics; the gradients come from the examples one by one, which
      # normalize with the running statistics held fixed (a single example
      # has no batch statistics of its own).
      loss, (logits, batch_stats) = loss_fn(state.params, state.batch_stats, images, labels)

      def example_loss(params, image, label):
        logits, _ = _apply(graphdef, params, state.batch_stats, image[None], train=False)
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
    return new_state, {"train_loss": loss, "train_accuracy": accuracy}

  return train_step


def make_eval_step(graphdef, dataset):
  """eval_step(params, batch_stats, images, labels, mask) -> (loss sum, correct count)."""
  def eval_step(params, batch_stats, images, labels, mask):
    images = input_pipeline.normalize(input_pipeline.to_unit(images), dataset.mean, dataset.std)
    logits, _ = _apply(graphdef, params, batch_stats, images, train=False)
    loss = jnp.sum(_cross_entropy(logits, labels) * mask)
    correct = jnp.sum((jnp.argmax(logits, -1) == labels) * mask)
    return loss, correct
  return eval_step


def _evaluate(eval_step, state, images, labels, mesh, batch_size=1000):
  """Test loss and accuracy over the whole test set, in fixed-size masked batches."""
  n = len(labels)
  loss = correct = 0.0
  size = max(batch_size - batch_size % mesh.size, mesh.size)
  for start in range(0, n, size):
    idx = np.arange(start, start + size)
    mask = (idx < n).astype(np.float32)
    idx = np.minimum(idx, n - 1)
    batch = _shard_batch(mesh, images[idx], labels[idx], mask)
    l, c = eval_step(state.params, state.batch_stats, *batch)
    loss, correct = loss + float(l), correct + float(c)
  return loss / n, correct / n


def _shard_batch(mesh, *arrays):
  sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
  return tuple(jax.make_array_from_process_local_data(sharding, np.asarray(a)) for a in arrays)


def _check_workdir(workdir: str, config: configs.Config) -> None:
  """Refuses a workdir that holds another run, so that nothing is overwritten."""
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, "run.json")
  mine = dataclasses.asdict(config)
  if os.path.exists(path):
    with open(path) as f:
      theirs = json.load(f)
    if theirs != json.loads(json.dumps(mine)):
      changed = sorted(k for k in set(mine) | set(theirs) if theirs.get(k) != mine.get(k))
      raise ConfigError(
          f"{workdir} holds another run (its run.json differs in: {', '.join(changed)}); "
          "choose a new --workdir, or rerun with the same settings to resume it.")
  else:
    with open(path, "w") as f:
      json.dump(mine, f, indent=2)


def train_and_evaluate(config: configs.Config, workdir: str, *, progress: bool = True,
                       stop_after: int | None = None, devices=None,
                       dataset: input_pipeline.Dataset | None = None) -> dict:
  """Trains ``config`` in ``workdir`` (resuming if it holds the same run).

  ``stop_after`` ends the run early after that many steps (as an interruption
  would), leaving the last checkpoint behind. ``devices`` defaults to all of
  ``jax.devices()``. ``dataset`` replaces the one ``config`` names (for a
  held-out validation split, say). Returns the final metrics.
  """
  _validate(config)
  _check_workdir(workdir, config)
  if dataset is None:
    try:
      dataset = input_pipeline.load_dataset(config.dataset, config.data_dir, config.seed,
                                            allow_download=config.download)
    except input_pipeline.DatasetError as err:
      raise ConfigError(str(err)) from err
  mesh = jax.sharding.Mesh(np.array(devices or jax.devices()), ("data",))
  if config.batch_size % mesh.size:
    raise ConfigError(f"batch_size {config.batch_size} must be a multiple of the "
                      f"{mesh.size} devices it is split over.")
  replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  graphdef, opt, state = create_train_state(config, dataset)
  state = jax.device_put(state, replicated)

  manager = ocp.CheckpointManager(
      os.path.abspath(os.path.join(workdir, "checkpoints")),
      options=ocp.CheckpointManagerOptions(max_to_keep=2, create=True))
  if manager.latest_step() is not None:
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
    state = manager.restore(manager.latest_step(), args=ocp.args.StandardRestore(abstract))
  start = int(state.step)
  writer = reporting.MetricsWriter(workdir, start, config.tensorboard)

  train_step = jax.jit(make_train_step(graphdef, opt, config, dataset), donate_argnums=0)
  eval_step = jax.jit(make_eval_step(graphdef, dataset))
  schedule = optimizers.learning_rate_schedule(config.learning_rate, config.lr_halving_every)
  base_key = jax.random.key(config.seed)
  n_train = len(dataset.train_labels)
  end = config.steps if stop_after is None else min(config.steps, start + stop_after)

  bar = None
  if progress:
    from tqdm import tqdm
    bar = tqdm(total=config.steps, initial=start, unit="step", dynamic_ncols=True,
               desc=f"{config.model}/{config.optimizer}")
  tic, window, last = time.perf_counter(), [], {}
  for step in range(start, end):
    idx = input_pipeline.batch_indices(config.seed, step, n_train, config.batch_size)
    images, labels = _shard_batch(mesh, dataset.train_images[idx], dataset.train_labels[idx])
    state, metrics = train_step(state, images, labels, jax.random.fold_in(base_key, step))
    window.append(metrics)
    done = step + 1
    if done % config.log_every == 0 or done == end:
      means = {k: float(np.mean([m[k] for m in window])) for k in window[0]}
      speed = len(window) / (time.perf_counter() - tic)
      writer.write(done, **means, learning_rate=float(schedule(step)), steps_per_second=speed)
      last.update(means)
      if bar is not None:
        bar.set_postfix(loss=f"{means['train_loss']:.4f}",
                        acc=f"{means['train_accuracy']:.3f}", it_s=f"{speed:.1f}")
      tic, window = time.perf_counter(), []
    if done % config.eval_every == 0 or done == config.steps:
      test_loss, test_acc = _evaluate(eval_step, state, dataset.test_images,
                                      dataset.test_labels, mesh)
      writer.write(done, test_loss=test_loss, test_accuracy=test_acc)
      last.update(test_loss=test_loss, test_accuracy=test_acc)
    if done % config.checkpoint_every == 0 or done == end:
      manager.save(done, args=ocp.args.StandardSave(state))
    if bar is not None:
      bar.update(1)
  manager.wait_until_finished()
  if bar is not None:
    bar.close()
  if "test_accuracy" not in last:
    test_loss, test_acc = _evaluate(eval_step, state, dataset.test_images,
                                    dataset.test_labels, mesh)
    last.update(test_loss=test_loss, test_accuracy=test_acc)
  plot = reporting.plot_curves(writer.path, os.path.join(workdir, "curves.png"),
                               f"{config.dataset} / {config.model} / {config.optimizer}")
  return {**last, "step": int(state.step), "metrics": writer.path, "plot": plot,
          "state": state}


def _validate(config: configs.Config) -> None:
  checks = ((config.dataset, input_pipeline.DATASETS, "dataset"),
            (config.model, tuple(models.MODELS), "model"),
            (config.optimizer, optimizers.OPTIMIZERS, "optimizer"))
  for value, valid, what in checks:
    if value not in valid:
      raise ConfigError(f"unknown {what} {value!r}; choose one of: {', '.join(valid)}")
  if config.per_example and config.optimizer not in ("vsgd", "constant_vsgd"):
    raise ConfigError("per_example needs optimizer vsgd or constant_vsgd, "
                      f"not {config.optimizer!r}")
  for name in ("batch_size", "steps", "eval_every", "log_every", "checkpoint_every"):
    if getattr(config, name) <= 0:
      raise ConfigError(f"{name} must be a positive integer, got {getattr(config, name)}")


def parse_override(config: configs.Config, item: str) -> configs.Config:
  key, sep, raw = item.partition("=")
  fields = {f.name: f for f in dataclasses.fields(config)}
  if not sep or key not in fields:
    raise ConfigError(f"--set takes key=value with key one of: {', '.join(fields)}; got {item!r}")
  current = getattr(config, key)
  try:
    if isinstance(current, bool):
      if raw.lower() not in ("true", "false", "1", "0"):
        raise ValueError(raw)
      value = raw.lower() in ("true", "1")
    elif isinstance(current, dict):
      value = json.loads(raw)
    else:
      value = type(current)(raw)
  except ValueError as err:
    raise ConfigError(f"--set {key}: cannot read {raw!r} as {type(current).__name__}") from err
  return config.replace(**{key: value})


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="default",
                      help=f"one of: {', '.join(sorted(configs.CONFIGS))}")
  parser.add_argument("--workdir", default=None, help="default: runs/<config>-<optimizer>-seed<seed>")
  parser.add_argument("--optimizer", help=f"one of: {', '.join(optimizers.OPTIMIZERS)}")
  parser.add_argument("--learning-rate", type=float)
  parser.add_argument("--steps", type=int)
  parser.add_argument("--seed", type=int)
  parser.add_argument("--data-dir")
  parser.add_argument("--download", action="store_true",
                      help="download a missing CIFAR-100 / TinyImageNet archive")
  parser.add_argument("--per-example", action="store_true", help="per-example VSGD")
  parser.add_argument("--bf16", action="store_true", help="bfloat16 compute (GPU/TPU)")
  parser.add_argument("--distributed", action="store_true",
                      help="call jax.distributed.initialize() (multi-host launch)")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  args = parser.parse_args(argv)
  try:
    try:
      config = configs.get_config(args.config)
    except KeyError as err:
      raise ConfigError(err.args[0]) from err
    shortcuts = dict(optimizer=args.optimizer, learning_rate=args.learning_rate,
                     steps=args.steps, seed=args.seed, data_dir=args.data_dir)
    config = config.replace(**{k: v for k, v in shortcuts.items() if v is not None})
    if args.per_example:
      config = config.replace(per_example=True)
    if args.download:
      config = config.replace(download=True)
    if args.bf16:
      config = config.replace(bf16=True)
    for item in args.set:
      config = parse_override(config, item)
    if args.distributed:
      jax.distributed.initialize()
    workdir = args.workdir or os.path.join(
        "runs", f"{args.config}-{config.optimizer}-seed{config.seed}")
    result = train_and_evaluate(config, workdir)
  except ConfigError as err:
    print(f"error: {err}", file=sys.stderr)
    return 2
  print(f"test accuracy: {100 * result['test_accuracy']:.2f}% "
        f"({config.dataset}, {config.model}, {config.optimizer}, {result['step']} steps)")
  print(f"metrics: {result['metrics']}")
  print(f"plot: {result['plot']}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

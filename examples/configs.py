"""One config per experiment of the paper's Table 1, plus the default, and their checks.

Each config overrides ``default()``; change anything from the command line with
``--set key=value`` (``from_overrides`` applies them). The paper's grid of
learning rates, weight decays and momenta is ``examples/table1/grid.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
from dataclasses import dataclass
from dataclasses import field

import vsgd_optax

from . import datasets
from . import models
from . import optimizers
from .errors import ConfigError

# VSGD's hyperparameters default as the library's do: read from its signature, so
# that they are written once, in vsgd_optax.
_VSGD_DEFAULTS = {name: parameter.default for name, parameter
                  in inspect.signature(vsgd_optax.vsgd).parameters.items()}
STATE_DTYPES = ("float32", "bfloat16")
STATE_ROUNDINGS = ("stochastic", "nearest")


def _setting(default, help: str):
  """A config field that carries its own ``--help`` line."""
  if isinstance(default, dict):
    return field(default_factory=lambda: dict(default), metadata={"help": help})
  return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Config:
  """One run's settings; each field's help text is what ``--help`` lists."""

  dataset: str = _setting("digits", f"one of: {', '.join(datasets.DATASETS)}")
  data_dir: str = _setting("data", "folder holding the dataset archives")
  download: bool = _setting(False, "fetch a missing CIFAR-100 / TinyImageNet archive")
  model: str = _setting("convmixer", f"one of: {', '.join(models.MODELS)}")
  model_kwargs: dict = _setting({}, "JSON object of the model's constructor arguments")
  optimizer: str = _setting("vsgd", f"one of: {', '.join(optimizers.OPTIMIZERS)}")
  learning_rate: float = _setting(0.01, "peak learning rate, > 0 (the default is the start "
                                        "docs/choosing_lr.md computes)")
  weight_decay: float = _setting(0.0, "decoupled (VSGD, AdamW) or L2 (SGD) weight decay, >= 0")
  momentum: float = _setting(0.9, "SGD momentum, in [0, 1)")
  prior_strength: float = _setting(_VSGD_DEFAULTS["prior_strength"],
                                   "VSGD/Constant VSGD gamma (the paper's text also "
                                   "names 5e-8; the authors' code default is 1e-8), > 0")
  variance_ratio: float = _setting(_VSGD_DEFAULTS["variance_ratio"],
                                   "VSGD/Constant VSGD K_g, > 0")
  kappa_g: float = _setting(_VSGD_DEFAULTS["kappa_g"], "VSGD decay exponent of b_g, in [0, 1]")
  kappa_ghat: float = _setting(_VSGD_DEFAULTS["kappa_ghat"],
                               "VSGD decay exponent of b_ghat (Constant VSGD: its one "
                               "kappa), in [0, 1]")
  state_dtype: str = _setting("float32", "VSGD/Constant VSGD state: float32 (12 bytes a "
                                         "parameter) or bfloat16 (6)")
  state_rounding: str = _setting(_VSGD_DEFAULTS["state_rounding"],
                                 "how a bfloat16 state is stored: stochastic or nearest "
                                 "(which stops learning after about 1,000 steps)")
  per_example: bool = _setting(False, "VSGD/Constant VSGD: the paper's per-example variant")
  noise_scale: bool = _setting(False, "VSGD/Constant VSGD: log the experimental gradient noise "
                                      "scale at log steps (valid at frozen params, not in "
                                      "training: docs/howto.md)")
  batch_size: int = _setting(64, "global batch, split over all devices of all processes")
  eval_batch_size: int = _setting(
      0, "global evaluation batch; 0: batch_size (which fits, as training needs more memory)")
  steps: int = _setting(600, "training steps")
  schedule: str = _setting("warmup_cosine", "the learning rate over the run: warmup_cosine "
                                          "(5% linear warmup, then cosine decay to 0), "
                                          "constant, or step (the paper's: halved every "
                                          "lr_halving_every steps)")
  lr_halving_every: int = _setting(0, "the step schedule's halving interval, > 0 (0 for the "
                                      "other schedules)")
  eval_every: int = _setting(200, "evaluate on the test set every N steps")
  log_every: int = _setting(50, "write the mean train metrics every N steps (several "
                                "processes also look for a stop signal at these steps)")
  checkpoint_every: int = _setting(200, "save a checkpoint every N steps")
  seed: int = _setting(0, "seeds the model, the batch order and the augmentations, >= 0")
  validation_size: int = _setting(
      256, "training images held out for validation, chosen with a fixed seed (digits, "
      "CIFAR-100); TinyImageNet validates on its official val split, which is also its test "
      "set, as the authors do")
  prefetch: int = _setting(2, "batches prepared ahead of the step (0: none)")
  bf16: bool = _setting(False, "bfloat16 compute (for GPU and TPU)")
  tensorboard: bool = _setting(False, "also write TensorBoard logs (needs tensorboardX)")

  def replace(self, **changes) -> Config:
    return dataclasses.replace(self, **changes)


# How a run is carried out, not what it computes: a workdir may be resumed with
# these changed (say, with --download added after a missing-data error).
NOT_PART_OF_THE_RUN = ("download", "data_dir", "eval_batch_size", "prefetch", "tensorboard")
# Settings added after run records were first written: a record without one was
# trained at its default, and resumes as such.
ADDED_SINCE_FIRST_RECORDS = ("state_dtype", "state_rounding")


def record_defaults() -> dict:
  """The settings of ``ADDED_SINCE_FIRST_RECORDS`` at the defaults that the runs
  recorded before them had.
  """
  return {name: getattr(Config(), name) for name in ADDED_SINCE_FIRST_RECORDS}


def default() -> Config:
  """A small ConvMixer with VSGD on the embedded digits: a few minutes on 2 CPU cores."""
  return Config(model_kwargs=dict(dim=64, depth=4, kernel=3, patch=1))


def _cifar100(model: str, batch_size: int) -> Config:
  return Config(dataset="cifar100", model=model, batch_size=batch_size, steps=30_000,
                schedule="step", lr_halving_every=10_000, eval_every=1000, log_every=100,
                checkpoint_every=2000)


def _tinyimagenet(model: str, batch_size: int) -> Config:
  return Config(dataset="tinyimagenet", model=model, batch_size=batch_size, steps=60_000,
                schedule="step", lr_halving_every=20_000, eval_every=2000, log_every=100,
                checkpoint_every=4000)


CONFIGS = {
    "default": default,
    "cifar100_vgg16": lambda: _cifar100("vgg16", 256),
    "cifar100_convmixer": lambda: _cifar100("convmixer", 256),
    "cifar100_resnext18": lambda: _cifar100("resnext18", 128),
    "tinyimagenet_vgg19": lambda: _tinyimagenet("vgg19", 128),
    "tinyimagenet_convmixer": lambda: _tinyimagenet("convmixer", 128),
    "tinyimagenet_resnext18": lambda: _tinyimagenet("resnext18", 64),
}


# The paper's six experiments (every config but the default), in Table 1's order.
PAPER_CONFIGS = tuple(name for name in CONFIGS if name != "default")


def get_config(name: str) -> Config:
  if name not in CONFIGS:
    raise ConfigError(f"unknown config {name!r}; choose one of {sorted(CONFIGS)}")
  return CONFIGS[name]()


def from_overrides(name: str, overrides=(), **settings) -> Config:
  """The config ``name``, with ``settings`` (those not None) set over it, then
  each ``key=value`` of ``overrides`` applied in order, and checked.

  The trainer's command line and the Table 1 protocol both build their runs
  here, so that a run listed by one is the run the other trains.
  """
  config = get_config(name)
  config = config.replace(**{k: v for k, v in settings.items() if v is not None})
  for item in overrides:
    config = parse_override(config, item)
  validate(config)
  return config


def json_settings(config: Config) -> dict:
  """The config as ``run.json`` holds it (tuples as lists, and so on)."""
  return json.loads(json.dumps(dataclasses.asdict(config)))


def describe_settings() -> str:
  """The ``--set`` keys with their defaults and meaning, for ``--help``."""
  base = default()
  lines = ["--set KEY=VALUE keys (default config's value; --config changes some):"]
  for f in dataclasses.fields(Config):
    value = getattr(base, f.name)
    value = value if isinstance(value, str) else json.dumps(value)  # as typed after --set
    lines.append(f"  {f.name}={value}\n      {f.metadata['help']}")
  return "\n".join(lines)


def parse_override(config: Config, item: str) -> Config:
  """Applies one ``key=value`` from ``--set``, read as the field's type."""
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


def model_arguments(model: str) -> list[str]:
  """The constructor arguments of ``model`` that ``model_kwargs`` may set."""
  fixed = {"num_classes", "in_channels", "dtype", "rngs"}
  builder, bound = models.MODELS[model], 0
  if isinstance(builder, functools.partial):  # vgg16 = partial(VGG, "vgg16")
    builder, bound = builder.func, len(builder.args)
  params = list(inspect.signature(builder.__init__).parameters)[1 + bound:]  # 1: self
  return [p for p in params if p not in fixed]


def validate(config: Config) -> None:
  """Refuses a config that cannot run, before anything is loaded or written."""
  for value, valid, what in ((config.dataset, datasets.DATASETS, "dataset"),
                             (config.model, tuple(models.MODELS), "model"),
                             (config.optimizer, optimizers.OPTIMIZERS, "optimizer")):
    if value not in valid:
      raise ConfigError(f"unknown {what} {value!r}; choose one of: {', '.join(valid)}")
  if config.schedule not in optimizers.SCHEDULES:
    raise ConfigError(f"unknown schedule {config.schedule!r}; choose one of: "
                      f"{', '.join(optimizers.SCHEDULES)}")
  if (config.schedule == "step") != (config.lr_halving_every > 0):
    raise ConfigError(f"lr_halving_every={config.lr_halving_every} with schedule="
                      f"{config.schedule}: the step schedule needs lr_halving_every > 0, and "
                      "only it takes one")
  for name in ("per_example", "noise_scale"):
    if getattr(config, name) and config.optimizer not in optimizers.VSGD_OPTIMIZERS:
      raise ConfigError(f"{name} needs optimizer {' or '.join(optimizers.VSGD_OPTIMIZERS)}, "
                        f"not {config.optimizer!r}")
  for name in ("batch_size", "steps", "eval_every", "log_every", "checkpoint_every"):
    _check_int(config, name, minimum=1, meaning="a positive integer")
  for name in ("eval_batch_size", "lr_halving_every", "seed", "prefetch"):
    _check_int(config, name, minimum=0, meaning="an integer >= 0")
  _check_float(config, "learning_rate", lambda x: x > 0, "a finite number > 0")
  _check_float(config, "weight_decay", lambda x: x >= 0, "a finite number >= 0")
  _check_float(config, "momentum", lambda x: 0 <= x < 1, "a finite number in [0, 1)")
  _check_int(config, "validation_size", minimum=0, meaning="an integer >= 0")
  for name in ("prior_strength", "variance_ratio"):
    _check_float(config, name, lambda x: x > 0, "a finite number > 0")
  for name in ("kappa_g", "kappa_ghat"):
    _check_float(config, name, lambda x: 0 <= x <= 1, "a finite number in [0, 1]")
  for value, valid, name in ((config.state_dtype, STATE_DTYPES, "state_dtype"),
                             (config.state_rounding, STATE_ROUNDINGS, "state_rounding")):
    if value not in valid:
      raise ConfigError(f"{name} must be one of: {', '.join(valid)}; got {value!r}")
  optimizers.check_weight_decay(config.optimizer, config.weight_decay)
  if not isinstance(config.model_kwargs, dict):
    raise ConfigError(f"model_kwargs must be a JSON object such as '{{\"dim\": 64}}', "
                      f"got {config.model_kwargs!r}")
  accepted = model_arguments(config.model)
  unknown = sorted(set(config.model_kwargs) - set(accepted))
  if unknown:
    raise ConfigError(f"model_kwargs {', '.join(unknown)} not accepted by {config.model}; "
                      f"it takes: {', '.join(accepted) or 'nothing'} (--set model_kwargs={{}} "
                      "gives its defaults)")


def _check_int(config: Config, name: str, minimum: int, meaning: str) -> None:
  value = getattr(config, name)
  if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
    raise ConfigError(f"{name} must be {meaning}, got {value!r}")


def _check_float(config: Config, name: str, in_range, meaning: str) -> None:
  value = getattr(config, name)
  if (isinstance(value, bool) or not isinstance(value, (int, float))
      or not math.isfinite(value) or not in_range(value)):
    raise ConfigError(f"{name} must be {meaning}, got {value!r}")

"""Optimizers by name, and their learning-rate schedules."""

from __future__ import annotations

import optax

import vsgd_optax

from .errors import ConfigError

# The optimizers with VSGD's state: per-example moments and the noise-scale read-out.
VSGD_OPTIMIZERS = ("vsgd", "constant_vsgd")
OPTIMIZERS = (*VSGD_OPTIMIZERS, "adam", "adamw", "sgd")


SCHEDULES = ("warmup_cosine", "constant", "step")
# Of the run's steps. The benchmarks' main protocol builds its schedule here, so
# the trainer's default is the schedule its starting rate was measured under.
WARMUP_FRACTION = 0.05


def warmup_steps(steps: int) -> int:
  """The warmup of ``warmup_cosine`` in a run of ``steps`` steps: at least one."""
  return max(1, round(WARMUP_FRACTION * steps))


def learning_rate_schedule(peak: float, schedule: str, steps: int,
                           halving_every: int = 0) -> optax.Schedule:
  """The rate at each step: ``warmup_cosine`` warms up linearly over the first
  5% of ``steps`` and decays to 0 at the last; ``constant``; ``step``, the
  paper's, halves it every ``halving_every`` steps.
  """
  if schedule == "warmup_cosine":
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=peak, warmup_steps=warmup_steps(steps), decay_steps=steps,
        end_value=0.0)
  if schedule == "step":
    return optax.exponential_decay(peak, transition_steps=halving_every, decay_rate=0.5,
                                   staircase=True)
  if schedule == "constant":
    return optax.constant_schedule(peak)
  raise ConfigError(f"unknown schedule {schedule!r}; choose one of: {', '.join(SCHEDULES)}")


def check(name: str, weight_decay: float) -> None:
  """Refuses a weight decay that optimizer ``name`` does not take."""
  if name == "adam" and weight_decay != 0:
    raise ConfigError(f"optimizer adam takes no weight decay (got {weight_decay:g}); use "
                      "optimizer adamw for decoupled weight decay, or weight_decay=0")


def create_optimizer(name: str, schedule: optax.ScalarOrSchedule,
                     weight_decay: float = 0.0, momentum: float = 0.9, **vsgd_settings):
  """Optimizer ``name`` at the rate ``schedule`` (``learning_rate_schedule``).

  ``vsgd``/``constant_vsgd`` take decoupled weight decay and their own
  hyperparameters by name (``prior_strength``, ``variance_ratio``, ``kappa_g``,
  ``kappa_ghat``, ``state_dtype``, ``state_rounding``; any left out is the
  library's default; Constant VSGD's one kappa is ``kappa_ghat``); ``adam`` no decay
  (the paper's Adam; a nonzero one is refused), ``adamw`` decoupled, ``sgd``
  momentum plus L2 decay.
  """
  check(name, weight_decay)
  if name == "vsgd":
    return vsgd_optax.vsgd(schedule, weight_decay=weight_decay, **vsgd_settings)
  if name == "constant_vsgd":
    settings = dict(vsgd_settings)
    settings.pop("kappa_g", None)
    if "kappa_ghat" in settings:
      settings["kappa"] = settings.pop("kappa_ghat")
    return vsgd_optax.constant_vsgd(schedule, weight_decay=weight_decay, **settings)
  if name == "adam":
    return optax.adam(schedule, b1=0.9, b2=0.999)
  if name == "adamw":
    return optax.adamw(schedule, b1=0.9, b2=0.999, weight_decay=weight_decay)
  if name == "sgd":
    return optax.chain(optax.add_decayed_weights(weight_decay),
                       optax.sgd(schedule, momentum=momentum))
  raise KeyError(f"unknown optimizer {name!r}; choose one of {list(OPTIMIZERS)}")

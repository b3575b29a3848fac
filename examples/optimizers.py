"""The trainer's optimizers by name, and its learning-rate schedules.

``REGISTRY`` maps each ``--optimizer`` choice to its builder and the settings
of the trainer's config it takes. Every optimizer runs at its library's
defaults; only the learning rate, its schedule and the settings the config
names change. The benchmarks keep their own table (``benchmarks/optimizers.py``),
whose rows of the same names build the same optimizers.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import optax

import vsgd_optax
from vsgd_optax import experimental

from .errors import ConfigError

# VSGD's settings that the trainer's config holds; any left out is the library's default.
VSGD_SETTINGS = ("variance_ratio", "prior_strength", "kappa_g", "kappa_ghat", "state_dtype",
                 "state_rounding")


@dataclasses.dataclass(frozen=True)
class Optimizer:
  """An optimizer the trainer offers.

  Attributes:
    build: the optimizer from a learning rate or schedule and, by keyword, the
      settings in ``settings``.
    settings: the keyword settings ``build`` takes from the trainer's config
      (``weight_decay``, ``momentum``, VSGD's); a nonzero weight decay given
      to an optimizer that takes none is refused (``check_weight_decay``).
  """
  build: Callable[..., optax.GradientTransformation]
  settings: tuple[str, ...] = ()


def _constant_vsgd(learning_rate, *, kappa_ghat=None, **settings):
  """Constant VSGD has one kappa, its ``b_ghat``'s: the config's ``kappa_ghat``."""
  if kappa_ghat is not None:
    settings["kappa"] = kappa_ghat
  return vsgd_optax.constant_vsgd(learning_rate, **settings)


def _sgd_with_l2(learning_rate, *, weight_decay=0.0, momentum=0.9):
  """The paper's SGD: momentum, with weight decay added to the gradient (L2)."""
  return optax.chain(optax.add_decayed_weights(weight_decay),
                     optax.sgd(learning_rate, momentum=momentum))


_VSGD = (*VSGD_SETTINGS, "weight_decay")

REGISTRY: dict[str, Optimizer] = {
    "vsgd": Optimizer(vsgd_optax.vsgd, _VSGD),
    "constant_vsgd": Optimizer(_constant_vsgd, tuple(s for s in _VSGD if s != "kappa_g")),
    "factored_vsgd": Optimizer(experimental.factored_vsgd, _VSGD),
    # VSGD's posterior mean, orthogonalized as Muon does its momentum, on matrices;
    # AdamW at 0.316 of the rate on the other leaves. "vsgd_muon" keeps every
    # element's rates, "vsgd_muon_factored" is vsgd_optax.vsgd_muon's default.
    "vsgd_muon": Optimizer(functools.partial(vsgd_optax.vsgd_muon, min_dim_size_to_factor=None),
                           _VSGD),
    "vsgd_muon_factored": Optimizer(vsgd_optax.vsgd_muon, _VSGD),
    "adam": Optimizer(optax.adam),
    # optax's default decay, 1e-4, where no weight_decay is given.
    "adamw": Optimizer(optax.adamw, ("weight_decay",)),
    "sgd": Optimizer(_sgd_with_l2, ("weight_decay", "momentum")),
    "lion": Optimizer(optax.lion),
    # Muon orthogonalizes the momentum of 2-D leaves; every other leaf steps with
    # its Adam, at Muon's own rate.
    "muon": Optimizer(optax.contrib.muon),
    "adafactor+momentum": Optimizer(functools.partial(optax.adafactor, momentum=0.9)),
}


# What the example trainer offers, in its help's order.
OPTIMIZERS: tuple[str, ...] = tuple(REGISTRY)
# The optimizers with VSGD's state: per-example moments and the noise-scale read-out.
VSGD_OPTIMIZERS = ("vsgd", "constant_vsgd")


SCHEDULES = ("warmup_cosine", "constant", "step")
# Of the run's steps. The benchmarks' warmup_cosine is this schedule (a test holds
# them equal), so the trainer's default is the schedule its starting rate was
# measured under.
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


def check_weight_decay(name: str, weight_decay: float) -> None:
  """Refuses a nonzero weight decay for an optimizer that takes none."""
  if weight_decay != 0 and "weight_decay" not in REGISTRY[name].settings:
    takes = [n for n in OPTIMIZERS if "weight_decay" in REGISTRY[n].settings]
    raise ConfigError(f"optimizer {name} takes no weight decay (got {weight_decay:g}); use "
                      f"weight_decay=0, or one of {', '.join(takes)}"
                      + (" (adamw: Adam with decoupled weight decay)" if name == "adam" else ""))


def create_optimizer(name: str, schedule: optax.ScalarOrSchedule, weight_decay: float = 0.0,
                     momentum: float = 0.9, **vsgd_settings) -> optax.GradientTransformation:
  """Optimizer ``name`` at the rate ``schedule`` (``learning_rate_schedule``),
  as the trainer builds it.

  Each optimizer takes, of ``weight_decay``, ``momentum`` and VSGD's settings
  (``VSGD_SETTINGS``), those its ``Optimizer.settings`` name: ``vsgd`` and
  ``factored_vsgd`` all of VSGD's and decoupled decay, ``constant_vsgd`` the
  same with its one kappa as ``kappa_ghat``, ``adamw`` decoupled decay, ``sgd``
  momentum and L2 decay; ``adam`` (the paper's) and the rest none, and a
  nonzero weight decay for them is refused.
  """
  if name not in REGISTRY:
    raise ConfigError(f"unknown optimizer {name!r}; choose one of: {', '.join(REGISTRY)}")
  check_weight_decay(name, weight_decay)
  given = {"weight_decay": weight_decay, "momentum": momentum, **vsgd_settings}
  entry = REGISTRY[name]
  return entry.build(schedule, **{k: v for k, v in given.items() if k in entry.settings})

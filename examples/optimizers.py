"""Optimizers by name, with the paper's step schedule."""

from __future__ import annotations

import optax

import vsgd_optax
from examples.errors import ConfigError

OPTIMIZERS = ("vsgd", "constant_vsgd", "adam", "adamw", "sgd")
# The optimizers with VSGD's state: per-example moments and the noise-scale read-out.
VSGD_OPTIMIZERS = ("vsgd", "constant_vsgd")


def learning_rate_schedule(base: float, halving_every: int) -> optax.Schedule:
  """The paper's schedule: halve the rate every ``halving_every`` steps (0: constant)."""
  if halving_every <= 0:
    return optax.constant_schedule(base)
  return optax.exponential_decay(base, transition_steps=halving_every, decay_rate=0.5,
                                 staircase=True)


def check(name: str, weight_decay: float) -> None:
  """Refuses a weight decay that optimizer ``name`` does not take."""
  if name == "adam" and weight_decay != 0:
    raise ConfigError(f"optimizer adam takes no weight decay (got {weight_decay:g}); use "
                      "optimizer adamw for decoupled weight decay, or weight_decay=0")


def create_optimizer(name: str, learning_rate: float, halving_every: int = 0,
                     weight_decay: float = 0.0, momentum: float = 0.9, *,
                     prior_strength: float = 1e-8, variance_ratio: float = 30.0,
                     kappa_g: float = 0.81, kappa_ghat: float = 0.9):
  """``vsgd``/``constant_vsgd`` take decoupled weight decay and their own
  hyperparameters (Constant VSGD's one kappa is
  ``kappa_ghat``, whose default 0.9 is its own); ``adam`` no decay
  (the paper's Adam; a nonzero one is refused), ``adamw`` decoupled, ``sgd``
  momentum plus L2 decay.
  """
  check(name, weight_decay)
  schedule = learning_rate_schedule(learning_rate, halving_every)
  if name == "vsgd":
    return vsgd_optax.vsgd(schedule, variance_ratio=variance_ratio,
                           prior_strength=prior_strength, kappa_g=kappa_g,
                           kappa_ghat=kappa_ghat, weight_decay=weight_decay)
  if name == "constant_vsgd":
    return vsgd_optax.constant_vsgd(schedule, variance_ratio=variance_ratio,
                                    prior_strength=prior_strength, kappa=kappa_ghat,
                                    weight_decay=weight_decay)
  if name == "adam":
    return optax.adam(schedule, b1=0.9, b2=0.999)
  if name == "adamw":
    return optax.adamw(schedule, b1=0.9, b2=0.999, weight_decay=weight_decay)
  if name == "sgd":
    return optax.chain(optax.add_decayed_weights(weight_decay),
                       optax.sgd(schedule, momentum=momentum))
  raise KeyError(f"unknown optimizer {name!r}; choose one of {list(OPTIMIZERS)}")

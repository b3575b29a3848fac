"""Optimizers by name, with the paper's step schedule."""

from __future__ import annotations

import optax

import vsgd_optax

OPTIMIZERS = ("vsgd", "constant_vsgd", "adam", "adamw", "sgd")


def learning_rate_schedule(base: float, halving_every: int) -> optax.Schedule:
  """The paper's schedule: halve the rate every ``halving_every`` steps (0: constant)."""
  if halving_every <= 0:
    return optax.constant_schedule(base)
  return optax.exponential_decay(base, transition_steps=halving_every, decay_rate=0.5,
                                 staircase=True)


def create_optimizer(name: str, learning_rate: float, halving_every: int = 0,
                     weight_decay: float = 0.0, momentum: float = 0.9):
  """``vsgd``/``constant_vsgd`` take decoupled weight decay; ``adam`` none (the
  paper's Adam), ``adamw`` decoupled, ``sgd`` momentum plus L2 decay."""
  schedule = learning_rate_schedule(learning_rate, halving_every)
  if name == "vsgd":
    return vsgd_optax.vsgd(schedule, weight_decay=weight_decay)
  if name == "constant_vsgd":
    return vsgd_optax.constant_vsgd(schedule, weight_decay=weight_decay)
  if name == "adam":
    return optax.adam(schedule, b1=0.9, b2=0.999)
  if name == "adamw":
    return optax.adamw(schedule, b1=0.9, b2=0.999, weight_decay=weight_decay)
  if name == "sgd":
    return optax.chain(optax.add_decayed_weights(weight_decay),
                       optax.sgd(schedule, momentum=momentum))
  raise KeyError(f"unknown optimizer {name!r}; choose one of {list(OPTIMIZERS)}")

"""Every optimizer the benchmarks run, by name: the one table their result files name.

``REGISTRY`` maps a name to its builder and its label. Every benchmark and
result file names its optimizers by its keys, and the reporting gives each key
its short name, colour and line (``benchmarks/reporting/styles.py``). Its order
is the tables': each variant right after what it varies, ``base`` naming what
that is. A name is the optimizer's own (``vsgd``, ``adam``, ``sgd_momentum``);
a variant adds ``+`` and what differs (``vsgd+bf16_state``: VSGD keeping its
state in bfloat16, stochastically rounded as by default; ``vsgd+bf16_nearest``:
the same state rounded to nearest). Every optimizer runs at its library's
defaults; only the learning rate and its schedule change (but for
``vsgd_muon``'s AdamW part, at a tenth of the rate: its default when the
results were run, before the ladder chose 0.316). A name the contest
or the ladder alone builds (``normuon``: ``benchmarks/contest/``; ``muon_vs``:
``benchmarks/ladder/``) has no builder here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax.numpy as jnp
import optax

import vsgd_optax
from vsgd_optax import experimental


def _params_as_they_are(opt_state, params):
  del opt_state
  return params


@dataclasses.dataclass(frozen=True)
class Optimizer:
  """An optimizer by name.

  Attributes:
    build: the optimizer from a learning rate or schedule; None for a name only
      the contest builds.
    label: what it is, in the terms of its library, for the result files.
    base: the optimizer it varies or wraps (its state, its precision, a wrapper
      around it); None for an optimizer of its own.
    per_example: it also takes the per-example gradients' variance.
    eval_params: the parameters to evaluate, from the state and the params
      (schedule-free evaluates an average).
    decays_by_averaging: it replaces a schedule's decay by averaging, so it is
      given the schedule's warmup alone (the schedule-free authors' recipe).
  """
  build: Callable[[optax.ScalarOrSchedule], optax.GradientTransformation] | None
  label: str
  base: str | None = None
  per_example: bool = False
  eval_params: Callable = _params_as_they_are
  decays_by_averaging: bool = False


def _schedule_free(base: Callable[[optax.ScalarOrSchedule], optax.GradientTransformation]):
  """``optax.contrib.schedule_free`` around ``base``, at its default interpolation b1 = 0.9."""
  def build(learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
    return optax.contrib.schedule_free(base(learning_rate), learning_rate)
  return build


def _vsgd_muon_adamw_at_a_tenth(**settings):
  """``vsgd_optax.vsgd_muon`` with ``settings`` and its AdamW part at a tenth of
  the rate, the share its default took when the committed results were run.
  """
  def build(learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
    adam_learning_rate = ((lambda count: 0.1 * learning_rate(count)) if callable(learning_rate)
                          else 0.1 * learning_rate)
    return vsgd_optax.vsgd_muon(learning_rate, adam_learning_rate=adam_learning_rate,
                                **settings)
  return build


# Schedule-free VSGD keeps VSGD's mean, whose learned weight on the past is about
# 0.6 (docs/howto.md); "+short_mean" makes that memory short and fixed: Constant
# VSGD with variance_ratio 0.1 keeps 1/11 of the past, near the b1 = 0 of the
# Adam that schedule_free_adamw wraps.
SHORT_MEAN_RATIO = 0.1
_AVERAGED = {"eval_params": optax.contrib.schedule_free_eval_params,
             "decays_by_averaging": True}
_bf16 = jnp.bfloat16

REGISTRY: dict[str, Optimizer] = {
    "vsgd": Optimizer(vsgd_optax.vsgd, "vsgd_optax.vsgd"),
    "vsgd+bf16_state": Optimizer(
        functools.partial(vsgd_optax.vsgd, state_dtype=_bf16),
        "vsgd_optax.vsgd, state_dtype bfloat16 (stochastic rounding)", "vsgd"),
    "vsgd+bf16_nearest": Optimizer(
        functools.partial(vsgd_optax.vsgd, state_dtype=_bf16, state_rounding="nearest"),
        "vsgd_optax.vsgd, state_dtype bfloat16, rounded to nearest", "vsgd"),
    "vsgd+per_example": Optimizer(vsgd_optax.vsgd, "vsgd_optax.vsgd with grad_variance", "vsgd",
                                  per_example=True),
    "factored_vsgd": Optimizer(experimental.factored_vsgd,
                               "vsgd_optax.experimental.factored_vsgd", "vsgd"),
    "factored_vsgd+bf16_mu": Optimizer(
        functools.partial(experimental.factored_vsgd, state_dtype=_bf16),
        "vsgd_optax.experimental.factored_vsgd, state_dtype bfloat16 (its mu)", "factored_vsgd"),
    "schedule_free_vsgd": Optimizer(
        _schedule_free(vsgd_optax.vsgd), "optax.contrib.schedule_free around vsgd_optax.vsgd",
        "vsgd", **_AVERAGED),
    "schedule_free_vsgd+short_mean": Optimizer(
        _schedule_free(functools.partial(vsgd_optax.constant_vsgd,
                                         variance_ratio=SHORT_MEAN_RATIO)),
        "optax.contrib.schedule_free around vsgd_optax.constant_vsgd, "
        f"variance_ratio {SHORT_MEAN_RATIO}", "constant_vsgd", **_AVERAGED),
    "constant_vsgd": Optimizer(vsgd_optax.constant_vsgd, "vsgd_optax.constant_vsgd", "vsgd"),
    # VSGD's posterior mean, orthogonalized as Muon does its momentum, on matrices;
    # AdamW at a tenth of the rate on the other leaves. Named as the contest's
    # entries: "vsgd_muon" keeps every element's rates, "vsgd_muon_factored" is
    # vsgd_optax.vsgd_muon's default, factored rates (the contest promoted it).
    "vsgd_muon": Optimizer(
        _vsgd_muon_adamw_at_a_tenth(min_dim_size_to_factor=None),
        "vsgd_optax.vsgd_muon, min_dim_size_to_factor None (full rates), "
        "adam_learning_rate a tenth of the rate", "vsgd"),
    "vsgd_muon_factored": Optimizer(
        _vsgd_muon_adamw_at_a_tenth(),
        "vsgd_optax.vsgd_muon (its default: factored rates, 128), "
        "adam_learning_rate a tenth of the rate", "vsgd_muon"),
    "adam": Optimizer(optax.adam, "optax.adam"),
    "adam+bf16_mu": Optimizer(functools.partial(optax.adam, mu_dtype=_bf16),
                              "optax.adam, mu_dtype bfloat16", "adam"),
    # optax's default decay, 1e-4.
    "adamw": Optimizer(optax.adamw, "optax.adamw (weight decay 1e-4)", "adam"),
    "sgd_momentum": Optimizer(functools.partial(optax.sgd, momentum=0.9),
                              "optax.sgd, momentum 0.9"),
    "schedule_free_adamw": Optimizer(optax.contrib.schedule_free_adamw,
                                     "optax.contrib.schedule_free_adamw", "adamw", **_AVERAGED),
    "lion": Optimizer(optax.lion, "optax.lion (weight decay 1e-3)"),
    # Muon orthogonalizes the momentum of 2-D leaves; every other leaf (biases,
    # norms, convolution kernels) steps with its Adam, at Muon's own rate.
    "muon": Optimizer(optax.contrib.muon,
                      "optax.contrib.muon (Adam for leaves that are not matrices, same rate)"),
    # NorMuon (Li et al., 2025) normalizes Muon's step per output neuron: the
    # contest's peer of a normalized Muon, built there (benchmarks/lm/normuon.py).
    "normuon": Optimizer(None, "NorMuon (arXiv 2510.05491), the authors' update", "muon"),
    # Muon-VS (Li, Fan and Li, 2026) divides Muon's Nesterov momentum by its variance
    # before Newton-Schulz: the ladder's closest prior art to VSGD-Muon, built there
    # (benchmarks/lm/muon_vs.py).
    "muon_vs": Optimizer(None, "Muon-VS (arXiv 2601.14603), variance-adaptive Muon", "muon"),
    # Muon at other momenta, the ladder's momentum study (benchmarks/ladder/protocol.py's
    # MOMENTUM_GRID and MOMENTUM_GROWTH; 0.95 is "muon"), built there.
    **{f"muon_b{beta:g}": Optimizer(None, f"optax.contrib.muon at beta {beta:g}", "muon")
       for beta in (0.7, 0.8, 0.9, 0.98, 0.99)},
    # The ladder's VSGD-Muon with Muon's Nesterov look-ahead on its mean, the momentum
    # study's variant (benchmarks/ladder/protocol.py's VARIANTS), built there.
    "vsgd_muon_nesterov": Optimizer(None, "vsgd_optax.vsgd_muon, nesterov=True", "vsgd_muon"),
    # Adafactor, the memory peer of factored_vsgd: with momentum 0.9 (what is
    # compared) and plain (its memory, for the state table).
    "adafactor+momentum": Optimizer(functools.partial(optax.adafactor, momentum=0.9),
                                    "optax.adafactor, momentum 0.9", "adafactor"),
    "adafactor": Optimizer(optax.adafactor, "optax.adafactor"),
}
ORDER: tuple[str, ...] = tuple(REGISTRY)


def row(name: str) -> Optimizer:
  """``name``'s row; a name not in the table is an error that says where to add it."""
  if name not in REGISTRY:
    raise KeyError(f"{name!r} is not in benchmarks/optimizers.py's REGISTRY; add its row there "
                   f"(known: {', '.join(ORDER)})")
  return REGISTRY[name]


def root(name: str) -> str:
  """The optimizer ``name`` comes from, following ``base`` to its end."""
  while row(name).base is not None:
    name = row(name).base  # type: ignore[assignment]
  return name

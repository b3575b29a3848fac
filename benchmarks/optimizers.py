"""Every optimizer the benchmarks run, by name: the one table their result files name.

``REGISTRY`` maps a name to its row: its label, its builder on any network
(``build``, from a learning rate or schedule) and, for the language-model
studies, its form on the LM (``lm``). Every benchmark and result file names its
optimizers by its keys, and the reporting gives each key its short name,
colour and line (``benchmarks/reporting/styles.py``). Its order is the
tables': each variant right after what it varies, ``base`` naming what that
is. A name is the optimizer's own (``vsgd``, ``adam``, ``sgd_momentum``); a
variant adds ``+`` and what differs (``vsgd+bf16_state``: VSGD keeping its
state in bfloat16, stochastically rounded as by default;
``vsgd+bf16_nearest``: the same state rounded to nearest). Every optimizer
runs at its library's defaults; only the learning rate and its schedule change
(but for ``vsgd_muon``'s AdamW part, at a tenth of the rate: its default when
the results were run, before the ladder chose 0.316).

On the LM (``benchmarks.lm.model``) the Muon family steps the hidden kernels
and shares one AdamW part on every other leaf (the embedding, the positions,
the head and the vectors), as their users run them; how a study sets that part
and the matrices' decay is its ``LMRecipe``, declared in its protocol. An
``lm`` builder takes the matrices' schedule, the AdamW part's and the recipe.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optax

import vsgd_optax
from benchmarks.lm import model
from benchmarks.lm import muon_vs
from benchmarks.lm import normuon
from vsgd_optax import experimental


def _params_as_they_are(opt_state, params):
  del opt_state
  return params


@dataclasses.dataclass(frozen=True)
class LMRecipe:
  """How a study runs the Muon family on the LM: what it declares for every entry alike.

  Attributes:
    adamw: ``optax.adamw``'s arguments for the AdamW part (and the AdamW entry),
      besides its rate; it decays the 2-D leaves only (``decay_mask``).
    matrices: the arguments every matrix optimizer (Muon, NorMuon, Muon-VS) takes
      besides its rate, e.g. its ``weight_decay``.
    vsgd_muon: ``vsgd_optax.vsgd_muon``'s arguments besides its rates and the hidden
      kernels; they take precedence over a row's own (the ladder factors every kernel).
  """
  adamw: Mapping[str, Any]
  matrices: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  vsgd_muon: Mapping[str, Any] = dataclasses.field(default_factory=dict)


LMBuilder = Callable[[optax.Schedule, optax.Schedule, LMRecipe], optax.GradientTransformation]


def decay_mask(params):
  """Decay on the 2-D leaves only: the kernels, the embedding, the positions, the head."""
  return jax.tree.map(lambda leaf: leaf.ndim == 2, params)


def hidden_kernels(params):
  """Muon's dimension numbers for the LM's hidden kernels, None for every other leaf."""
  return jax.tree.map(
      lambda label: optax.contrib.MuonDimensionNumbers() if label == "matrices" else None,
      model.matrix_labels(params))


def adamw_part(schedule: optax.Schedule, recipe: LMRecipe) -> optax.GradientTransformation:
  """The recipe's AdamW at ``schedule``, decaying the 2-D leaves only."""
  return optax.adamw(schedule, **recipe.adamw, mask=decay_mask)


def _lm_adamw(schedule, adam_schedule, recipe):
  del schedule  # the AdamW entry is the AdamW part alone, at its own rate
  return adamw_part(adam_schedule, recipe)


def _partitioned(matrices: Callable[..., optax.GradientTransformation]) -> LMBuilder:
  """``matrices`` on the hidden kernels, the recipe's AdamW part on every other leaf."""
  def build(schedule, adam_schedule, recipe):
    return optax.multi_transform({"matrices": matrices(schedule, **recipe.matrices),
                                  "adamw": adamw_part(adam_schedule, recipe)},
                                 model.matrix_labels)
  return build


def _lm_vsgd_muon(**settings) -> LMBuilder:
  """``vsgd_optax.vsgd_muon``'s one documented call on the LM: its matrices the hidden
  kernels, its own AdamW part at the AdamW schedule, with ``settings`` (the row's) and
  then the recipe's.
  """
  def build(schedule, adam_schedule, recipe):
    return vsgd_optax.vsgd_muon(schedule, muon_weight_dimension_numbers=hidden_kernels,
                                adam_learning_rate=adam_schedule,
                                **{**settings, **recipe.vsgd_muon})
  return build


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
    lm: its form on the LM studies' model, from the matrices' schedule, the AdamW
      part's and the study's recipe; None where no LM study runs it.
  """
  build: Callable[[optax.ScalarOrSchedule], optax.GradientTransformation] | None
  label: str
  base: str | None = None
  per_example: bool = False
  eval_params: Callable = _params_as_they_are
  decays_by_averaging: bool = False
  lm: LMBuilder | None = None


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
        "adam_learning_rate a tenth of the rate", "vsgd",
        lm=_lm_vsgd_muon(min_dim_size_to_factor=None)),
    "vsgd_muon_factored": Optimizer(
        _vsgd_muon_adamw_at_a_tenth(),
        "vsgd_optax.vsgd_muon (its default: factored rates, 128), "
        "adam_learning_rate a tenth of the rate", "vsgd_muon",
        # Every kernel of both contest sizes has a fan-in and a fan-out of at least 128.
        lm=_lm_vsgd_muon(min_dim_size_to_factor=128)),
    "adam": Optimizer(optax.adam, "optax.adam"),
    "adam+bf16_mu": Optimizer(functools.partial(optax.adam, mu_dtype=_bf16),
                              "optax.adam, mu_dtype bfloat16", "adam"),
    # optax's default decay, 1e-4.
    "adamw": Optimizer(optax.adamw, "optax.adamw (weight decay 1e-4)", "adam", lm=_lm_adamw),
    "sgd_momentum": Optimizer(functools.partial(optax.sgd, momentum=0.9),
                              "optax.sgd, momentum 0.9"),
    "schedule_free_adamw": Optimizer(optax.contrib.schedule_free_adamw,
                                     "optax.contrib.schedule_free_adamw", "adamw", **_AVERAGED),
    "lion": Optimizer(optax.lion, "optax.lion (weight decay 1e-3)"),
    # Muon orthogonalizes the momentum of 2-D leaves; every other leaf (biases,
    # norms, convolution kernels) steps with its Adam, at Muon's own rate.
    # On the LM, optax.contrib.muon on a partition that holds only hidden kernels: its
    # Muon branch (scale_by_muon, its width scale, decay, rate) steps every leaf.
    "muon": Optimizer(optax.contrib.muon,
                      "optax.contrib.muon (Adam for leaves that are not matrices, same rate)",
                      lm=_partitioned(optax.contrib.muon)),
    # NorMuon (Li et al., 2025) normalizes Muon's step per output neuron: the
    # contest's peer of a normalized Muon (benchmarks/lm/normuon.py), on the LM alone.
    "normuon": Optimizer(None, "NorMuon (arXiv 2510.05491), the authors' update", "muon",
                         lm=_partitioned(normuon.normuon)),
    # Muon-VS (Li, Fan and Li, 2026) divides Muon's Nesterov momentum by its variance
    # before Newton-Schulz: the ladder's closest prior art to VSGD-Muon
    # (benchmarks/lm/muon_vs.py), on the LM alone.
    "muon_vs": Optimizer(None, "Muon-VS (arXiv 2601.14603), variance-adaptive Muon", "muon",
                         lm=_partitioned(muon_vs.muon_vs)),
    # Muon at other momenta, the ladder's momentum study (benchmarks/ladder/protocol.py's
    # MOMENTUM_GRID and MOMENTUM_GROWTH; 0.95 is "muon"), on the LM alone.
    **{f"muon_b{beta:g}": Optimizer(
        None, f"optax.contrib.muon at beta {beta:g}", "muon",
        lm=_partitioned(functools.partial(optax.contrib.muon, beta=beta)))
       for beta in (0.7, 0.8, 0.9, 0.98, 0.99)},
    # VSGD-Muon with Muon's Nesterov look-ahead on its mean, the momentum study's variant
    # (benchmarks/ladder/protocol.py's VARIANTS), on the LM alone.
    "vsgd_muon_nesterov": Optimizer(None, "vsgd_optax.vsgd_muon, nesterov=True", "vsgd_muon",
                                    lm=_lm_vsgd_muon(nesterov=True)),
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


def lm_builder(name: str) -> LMBuilder:
  """``name``'s form on the LM; a name no LM study runs is an error that says so."""
  built = row(name).lm
  if built is None:
    runs = ", ".join(n for n in ORDER if REGISTRY[n].lm is not None)
    raise KeyError(f"{name!r} has no form on the LM in benchmarks/optimizers.py (those with "
                   f"one: {runs}); give its row an lm builder")
  return built


def root(name: str) -> str:
  """The optimizer ``name`` comes from, following ``base`` to its end."""
  while row(name).base is not None:
    name = row(name).base  # type: ignore[assignment]
  return name

"""Every optimizer by name, for the trainer, the benchmarks and the results pages
alike, and the learning-rate schedules.

``REGISTRY`` is the one table of optimizers: names, builders, labels and the
lines that plots draw them with. The trainer builds its ``--optimizer`` from
it, every benchmark, result file and results table names its optimizers by its
keys, and the reporting takes each one's short name, colour and line from it.
Its order is the tables': each variant right after what it varies, ``base``
naming what that is. A name is the optimizer's own (``vsgd``,
``adam``, ``sgd_momentum``); a variant adds ``+`` and what differs
(``vsgd+bf16_state``: VSGD keeping its state in bfloat16, stochastically
rounded as by default; ``vsgd+bf16_nearest``: the same state rounded to
nearest). Every optimizer runs at its library's defaults; only the learning
rate, its schedule and the settings the trainer's config names change. A name
the contest alone builds (``normuon``: ``benchmarks/contest/``) has no
trainer's builder here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax.numpy as jnp
import optax

import vsgd_optax
from vsgd_optax import experimental

from .errors import ConfigError

# VSGD's settings that the trainer's config holds; any left out is the library's default.
VSGD_SETTINGS = ("variance_ratio", "prior_strength", "kappa_g", "kappa_ghat", "state_dtype",
                 "state_rounding")


def _params_as_they_are(opt_state, params):
  del opt_state
  return params


@dataclasses.dataclass(frozen=True)
class Optimizer:
  """An optimizer by name.

  Attributes:
    build: the optimizer from a learning rate or schedule and, by keyword, the
      settings in ``settings``; None for a name only the contest builds.
    label: what it is, in the terms of its library, for the results tables.
    short: what a table or a legend calls it.
    colour: its line's colour in plots (matplotlib's).
    line: its line's style in plots.
    base: the optimizer it varies or wraps (its state, its precision, a wrapper
      around it); None for an optimizer of its own.
    settings: the keyword settings ``build`` takes from the trainer's config
      (``weight_decay``, ``momentum``, VSGD's); a nonzero weight decay given
      to an optimizer that takes none is refused (``check_weight_decay``).
    per_example: it also takes the per-example gradients' variance.
    eval_params: the parameters to evaluate, from the state and the params
      (schedule-free evaluates an average).
    decays_by_averaging: it replaces a schedule's decay by averaging, so it is
      given the schedule's warmup alone (the schedule-free authors' recipe).
  """
  build: Callable[..., optax.GradientTransformation] | None
  label: str
  short: str
  colour: str
  line: str = "-"
  base: str | None = None
  settings: tuple[str, ...] = ()
  per_example: bool = False
  eval_params: Callable = _params_as_they_are
  decays_by_averaging: bool = False


def _constant_vsgd(learning_rate, *, kappa_ghat=None, **settings):
  """Constant VSGD has one kappa, its ``b_ghat``'s: the config's ``kappa_ghat``."""
  if kappa_ghat is not None:
    settings["kappa"] = kappa_ghat
  return vsgd_optax.constant_vsgd(learning_rate, **settings)


def _sgd_with_l2(learning_rate, *, weight_decay=0.0, momentum=0.9):
  """The paper's SGD: momentum, with weight decay added to the gradient (L2)."""
  return optax.chain(optax.add_decayed_weights(weight_decay),
                     optax.sgd(learning_rate, momentum=momentum))


def _schedule_free(base: Callable[[optax.ScalarOrSchedule], optax.GradientTransformation]):
  """``optax.contrib.schedule_free`` around ``base``, at its default interpolation b1 = 0.9."""
  def build(learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
    return optax.contrib.schedule_free(base(learning_rate), learning_rate)
  return build


# Schedule-free VSGD keeps VSGD's mean, whose learned weight on the past is about
# 0.6 (docs/howto.md); "+short_mean" makes that memory short and fixed: Constant
# VSGD with variance_ratio 0.1 keeps 1/11 of the past, near the b1 = 0 of the
# Adam that schedule_free_adamw wraps.
SHORT_MEAN_RATIO = 0.1
_VSGD = (*VSGD_SETTINGS, "weight_decay")
_AVERAGED = {"eval_params": optax.contrib.schedule_free_eval_params,
             "decays_by_averaging": True}
_bf16 = jnp.bfloat16

REGISTRY: dict[str, Optimizer] = {
    "vsgd": Optimizer(vsgd_optax.vsgd, "vsgd_optax.vsgd", "VSGD", "C0", settings=_VSGD),
    "vsgd+bf16_state": Optimizer(
        functools.partial(vsgd_optax.vsgd, state_dtype=_bf16),
        "vsgd_optax.vsgd, state_dtype bfloat16 (stochastic rounding)", "VSGD, bfloat16 state",
        "C0", "--", "vsgd"),
    "vsgd+bf16_nearest": Optimizer(
        functools.partial(vsgd_optax.vsgd, state_dtype=_bf16, state_rounding="nearest"),
        "vsgd_optax.vsgd, state_dtype bfloat16, rounded to nearest",
        "VSGD, bfloat16 to nearest", "C0", "-.", "vsgd"),
    "vsgd+per_example": Optimizer(vsgd_optax.vsgd, "vsgd_optax.vsgd with grad_variance",
                                  "VSGD, per-example variance", "C0", ":", "vsgd",
                                  per_example=True),
    "factored_vsgd": Optimizer(experimental.factored_vsgd,
                               "vsgd_optax.experimental.factored_vsgd", "factored VSGD", "C5",
                               "-", "vsgd", settings=_VSGD),
    "factored_vsgd+bf16_mu": Optimizer(
        functools.partial(experimental.factored_vsgd, state_dtype=_bf16),
        "vsgd_optax.experimental.factored_vsgd, state_dtype bfloat16 (its mu)",
        "factored VSGD, bfloat16 mu", "C5", "--", "factored_vsgd"),
    "schedule_free_vsgd": Optimizer(
        _schedule_free(vsgd_optax.vsgd),
        "optax.contrib.schedule_free around vsgd_optax.vsgd", "schedule-free VSGD", "C6", "-",
        "vsgd", **_AVERAGED),
    "schedule_free_vsgd+short_mean": Optimizer(
        _schedule_free(functools.partial(vsgd_optax.constant_vsgd,
                                         variance_ratio=SHORT_MEAN_RATIO)),
        "optax.contrib.schedule_free around vsgd_optax.constant_vsgd, "
        f"variance_ratio {SHORT_MEAN_RATIO}", "schedule-free VSGD, short mean", "C6", "--",
        "constant_vsgd", **_AVERAGED),
    "constant_vsgd": Optimizer(
        _constant_vsgd, "vsgd_optax.constant_vsgd", "Constant VSGD", "C9", "-", "vsgd",
        settings=tuple(s for s in _VSGD if s != "kappa_g")),
    # VSGD's posterior mean, orthogonalized as Muon does its momentum, on matrices;
    # AdamW at a tenth of the rate on the other leaves. Named as the contest's
    # entries: "vsgd_muon" keeps every element's rates, "vsgd_muon_factored" is
    # vsgd_optax.vsgd_muon as its defaults build it (the contest promoted it).
    "vsgd_muon": Optimizer(
        functools.partial(vsgd_optax.vsgd_muon, min_dim_size_to_factor=None),
        "vsgd_optax.vsgd_muon, min_dim_size_to_factor None (full rates)",
        "VSGD-Muon", "#8c564b", "-", "vsgd", settings=_VSGD),
    "vsgd_muon_factored": Optimizer(
        vsgd_optax.vsgd_muon, "vsgd_optax.vsgd_muon (its default: factored rates, 128)",
        "VSGD-Muon, factored rates", "#9467bd", "-", "vsgd_muon", settings=_VSGD),
    "adam": Optimizer(optax.adam, "optax.adam", "Adam", "C3"),
    "adam+bf16_mu": Optimizer(functools.partial(optax.adam, mu_dtype=_bf16),
                              "optax.adam, mu_dtype bfloat16", "Adam, bfloat16 mu", "C3", "--",
                              "adam"),
    # optax's default decay, 1e-4, where no weight_decay is given (the benchmarks).
    "adamw": Optimizer(optax.adamw, "optax.adamw (weight decay 1e-4)", "AdamW", "C1", "--",
                       "adam", settings=("weight_decay",)),
    "sgd_momentum": Optimizer(functools.partial(optax.sgd, momentum=0.9),
                              "optax.sgd, momentum 0.9", "SGD with momentum", "C7"),
    "sgd": Optimizer(_sgd_with_l2, "optax.sgd with momentum and L2 weight decay",
                     "SGD with momentum and L2", "C7", "--", "sgd_momentum",
                     settings=("weight_decay", "momentum")),
    "schedule_free_adamw": Optimizer(optax.contrib.schedule_free_adamw,
                                     "optax.contrib.schedule_free_adamw", "schedule-free AdamW",
                                     "C2", "-", "adamw", **_AVERAGED),
    "lion": Optimizer(optax.lion, "optax.lion (weight decay 1e-3)", "Lion", "C4"),
    # Muon orthogonalizes the momentum of 2-D leaves; every other leaf (biases,
    # norms, convolution kernels) steps with its Adam, at Muon's own rate.
    "muon": Optimizer(optax.contrib.muon,
                      "optax.contrib.muon (Adam for leaves that are not matrices, same rate)",
                      "Muon", "C8"),
    # NorMuon (Li et al., 2025) normalizes Muon's step per output neuron: the
    # contest's peer of a normalized Muon, built there (benchmarks/contest/normuon.py).
    "normuon": Optimizer(None, "NorMuon (arXiv 2510.05491), the authors' update",
                         "NorMuon", "#17becf", "-", "muon"),
    # Adafactor, the memory peer of factored_vsgd: with momentum 0.9 (what is
    # compared) and plain (its memory, for the state table).
    "adafactor+momentum": Optimizer(functools.partial(optax.adafactor, momentum=0.9),
                                    "optax.adafactor, momentum 0.9", "Adafactor with momentum",
                                    "#7f7f7f", ":", "adafactor"),
    "adafactor": Optimizer(optax.adafactor, "optax.adafactor", "Adafactor", "#7f7f7f", "-."),
}
ORDER: tuple[str, ...] = tuple(REGISTRY)


def row(name: str) -> Optimizer:
  """``name``'s row; a name not in the table is an error that says where to add it."""
  if name not in REGISTRY:
    raise KeyError(f"{name!r} is not in examples/optimizers.py's REGISTRY; add its row there "
                   f"(known: {', '.join(ORDER)})")
  return REGISTRY[name]


def root(name: str) -> str:
  """The optimizer ``name`` comes from, following ``base`` to its end."""
  while row(name).base is not None:
    name = row(name).base  # type: ignore[assignment]
  return name


# What the example trainer offers: the optimizers that evaluate their params as
# they are and step on the mean gradient alone.
OPTIMIZERS = ("vsgd", "constant_vsgd", "factored_vsgd", "vsgd_muon", "vsgd_muon_factored",
              "adam", "adamw", "sgd", "lion", "muon", "adafactor+momentum")
# The optimizers with VSGD's state: per-example moments and the noise-scale read-out.
VSGD_OPTIMIZERS = ("vsgd", "constant_vsgd")


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
  if entry.build is None:
    raise ConfigError(f"optimizer {name!r} is built by the contest alone "
                      f"(benchmarks/contest/); the trainer offers: {', '.join(OPTIMIZERS)}")
  return entry.build(schedule, **{k: v for k, v in given.items() if k in entry.settings})

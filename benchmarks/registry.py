"""The optimizers the benchmarks compare, each under the one name every benchmark,
result file and results table uses.

A name is the optimizer's own (``vsgd``, ``adam``, ``sgd_momentum``), and a
variant of it adds ``+`` and what differs (``vsgd+bf16_state``: VSGD keeping
its state in bfloat16, stochastically rounded as by default;
``vsgd+bf16_nearest``: the same state rounded to nearest). Every optimizer runs at its library defaults; only the
learning rate (and, in the time-to-result benchmark, its schedule: see
``time_to_result.schedules``) changes. ``ENTRIES`` is in the order the results
tables list the optimizers: each variant right after the optimizer it varies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

import vsgd_optax
from benchmarks.time_to_result import schedules
from vsgd_optax import experimental

# The plot style of an optimizer that a result file names and the registry does not hold.
UNLISTED_STYLE = ("k", "-")


@dataclasses.dataclass(frozen=True)
class Entry:
  """An optimizer as benchmarked: its constructor from a learning rate or a
  schedule, and how to read the parameters to evaluate (schedule-free
  evaluates an average). ``scheduled`` builds it instead where the optimizer
  takes its schedule in its own way (schedule-free: a warmup only). ``style``
  is the colour and line style of its curves on the plots.
  """
  build: Callable[[optax.ScalarOrSchedule], optax.GradientTransformation]
  per_example: bool = False
  eval_params: Callable = lambda opt_state, params: params
  label: str = ""
  scheduled: Callable[[jax.Array, str, int], optax.GradientTransformation] | None = None
  style: tuple[str, str] = UNLISTED_STYLE

  def make(self, peak, schedule: str, steps: int) -> optax.GradientTransformation:
    """The optimizer at tuned rate ``peak`` under ``schedule`` for a run of ``steps``."""
    if self.scheduled is not None and schedule != "constant":
      return self.scheduled(peak, schedule, steps)
    return self.build(schedules.learning_rate(schedule, steps, peak))


def _warmup_only(name: str, peak, schedule: str, steps: int) -> optax.Schedule:
  """The warmup of ``schedule`` alone, for an optimizer that replaces the decay by
  averaging (schedule-free AdamW and VSGD: the schedule-free authors' recipe).
  """
  if schedule != "warmup_cosine":
    raise ValueError(f"{name} takes no {schedule!r} schedule; it decays by averaging (run it "
                     "under 'constant' or 'warmup_cosine')")
  return optax.warmup_constant_schedule(0.0, peak, schedules.warmup_steps(steps))


# Schedule-free VSGD: optax.contrib.schedule_free around VSGD's own chain, at its
# default interpolation b1 = 0.9. The base as it is keeps VSGD's mean, whose learned
# weight on the past is about 0.6 (docs/howto.md); "+short_mean" makes that memory
# short and fixed: Constant VSGD with variance_ratio 0.1 keeps 1/11 of the past,
# near the b1 = 0 of the Adam that schedule_free_adamw wraps.
SHORT_MEAN_RATIO = 0.1


def _schedule_free_vsgd(base: Callable[[optax.ScalarOrSchedule], optax.GradientTransformation]):
  def build(learning_rate: optax.ScalarOrSchedule) -> optax.GradientTransformation:
    return optax.contrib.schedule_free(base(learning_rate), learning_rate)
  return build


def _scheduled(name: str, build):
  """``Entry.scheduled`` for a schedule-free optimizer: ``build`` given the warmup alone."""
  return lambda peak, schedule, steps: build(_warmup_only(name, peak, schedule, steps))


_SF_VSGD = _schedule_free_vsgd(vsgd_optax.vsgd)
_SF_SHORT = _schedule_free_vsgd(
    lambda lr: vsgd_optax.constant_vsgd(lr, variance_ratio=SHORT_MEAN_RATIO))


ENTRIES = {
    "vsgd": Entry(lambda lr: vsgd_optax.vsgd(lr), label="vsgd_optax.vsgd", style=("C0", "-")),
    "vsgd+bf16_state": Entry(lambda lr: vsgd_optax.vsgd(lr, state_dtype=jnp.bfloat16),
                             label="vsgd_optax.vsgd, state_dtype bfloat16 (stochastic rounding)",
                             style=("C0", "--")),
    "vsgd+bf16_nearest": Entry(lambda lr: vsgd_optax.vsgd(lr, state_dtype=jnp.bfloat16,
                                                          state_rounding="nearest"),
                               label="vsgd_optax.vsgd, state_dtype bfloat16, rounded to nearest",
                               style=("C0", "-.")),
    "vsgd+per_example": Entry(lambda lr: vsgd_optax.vsgd(lr), per_example=True,
                              label="vsgd_optax.vsgd with grad_variance", style=("C0", ":")),
    "factored_vsgd": Entry(lambda lr: experimental.factored_vsgd(lr),
                           label="vsgd_optax.experimental.factored_vsgd", style=("C5", "-")),
    "factored_vsgd+bf16_mu": Entry(
        lambda lr: experimental.factored_vsgd(lr, state_dtype=jnp.bfloat16),
        label="vsgd_optax.experimental.factored_vsgd, state_dtype bfloat16 (its mu)",
        style=("C5", "--")),
    "schedule_free_vsgd": Entry(_SF_VSGD, eval_params=optax.contrib.schedule_free_eval_params,
                                label="optax.contrib.schedule_free around vsgd_optax.vsgd",
                                scheduled=_scheduled("schedule_free_vsgd", _SF_VSGD),
                                style=("C6", "-")),
    "schedule_free_vsgd+short_mean": Entry(
        _SF_SHORT, eval_params=optax.contrib.schedule_free_eval_params,
        label="optax.contrib.schedule_free around vsgd_optax.constant_vsgd, "
              f"variance_ratio {SHORT_MEAN_RATIO}",
        scheduled=_scheduled("schedule_free_vsgd+short_mean", _SF_SHORT), style=("C6", "--")),
    "constant_vsgd": Entry(lambda lr: vsgd_optax.constant_vsgd(lr),
                           label="vsgd_optax.constant_vsgd", style=("C9", "-")),
    "adam": Entry(lambda lr: optax.adam(lr), label="optax.adam", style=("C3", "-")),
    "adam+bf16_mu": Entry(lambda lr: optax.adam(lr, mu_dtype=jnp.bfloat16),
                          label="optax.adam, mu_dtype bfloat16", style=("C3", "--")),
    "adamw": Entry(lambda lr: optax.adamw(lr), label="optax.adamw (weight decay 1e-4)",
                   style=("C1", "--")),
    "sgd_momentum": Entry(lambda lr: optax.sgd(lr, momentum=0.9),
                          label="optax.sgd, momentum 0.9", style=("C7", "-")),
    "schedule_free_adamw": Entry(lambda lr: optax.contrib.schedule_free_adamw(lr),
                                 eval_params=optax.contrib.schedule_free_eval_params,
                                 label="optax.contrib.schedule_free_adamw",
                                 scheduled=_scheduled("schedule_free_adamw",
                                                      optax.contrib.schedule_free_adamw),
                                 style=("C2", "-")),
    "lion": Entry(lambda lr: optax.lion(lr), label="optax.lion (weight decay 1e-3)",
                  style=("C4", "-")),
    # Muon orthogonalizes the momentum of 2-D leaves; every other leaf (biases,
    # norms, convolution kernels) steps with its Adam, at Muon's own rate.
    "muon": Entry(lambda lr: optax.contrib.muon(lr),
                  label="optax.contrib.muon (Adam for leaves that are not matrices, same rate)",
                  style=("C8", "-")),
    # Adafactor, the memory peer of factored_vsgd: with momentum 0.9 (what is
    # compared) and plain (its memory, for the state table).
    "adafactor+momentum": Entry(lambda lr: optax.adafactor(lr, momentum=0.9),
                                label="optax.adafactor, momentum 0.9", style=("C5", ":")),
    "adafactor": Entry(lambda lr: optax.adafactor(lr), label="optax.adafactor",
                       style=("C5", "-.")),
}


def style(name: str) -> tuple[str, str]:
  """The colour and line style of ``name``'s curves on the plots."""
  return ENTRIES[name].style if name in ENTRIES else UNLISTED_STYLE

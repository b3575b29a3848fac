"""This package's optimizers as the contest runs them on its transformer LM.

Each builder takes the schedule ``peak * warmup_cosine(step)`` and returns the
optimizer, as ``baselines``' do. VSGD steps every leaf. VSGD-Muon and its
factored form are ``vsgd_optax.vsgd_muon``'s one documented call (full rates,
and its default, factored ones): its matrices
are the hidden kernels (``model.matrix_labels``), and its defaults step the
embedding, the positions, the head and the vectors with AdamW, with decay 0.1
on the 2-D ones, as the Muon baselines do (``baselines.with_adamw_part``). The
AdamW part's rate is given, a tenth of the matrices' (``baselines.ADAMW_SHARE``),
as the contest ran it, so that its results stay reproducible: ``vsgd_muon``'s
default became 0.316 of the matrices' rate after the contest (the ladder's choice).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import optax

import vsgd_optax
from benchmarks.contest import baselines
from benchmarks.lm import model


def hidden_kernels(params):
  """Muon's dimension numbers for the hidden kernels, None for every other leaf."""
  return jax.tree.map(
      lambda label: optax.contrib.MuonDimensionNumbers() if label == "matrices" else None,
      model.matrix_labels(params))


def vsgd_muon(schedule: optax.Schedule, **kwargs) -> optax.GradientTransformation:
  return vsgd_optax.vsgd_muon(
      schedule, muon_weight_dimension_numbers=hidden_kernels,
      adam_learning_rate=lambda count: baselines.ADAMW_SHARE * schedule(count), **kwargs)


BUILDERS: dict[str, Callable[[optax.Schedule], optax.GradientTransformation]] = {
    "vsgd": vsgd_optax.vsgd,
    # Every element's two rates, as the entry ran before the promotion made the
    # factored form vsgd_muon's default.
    "vsgd_muon": lambda schedule: vsgd_muon(schedule, min_dim_size_to_factor=None),
    # Every kernel of both contest sizes has a fan-in and a fan-out of at least 128.
    "vsgd_muon_factored": lambda schedule: vsgd_muon(schedule, min_dim_size_to_factor=128),
}

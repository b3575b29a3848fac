"""This package's optimizers as the contest runs them on its transformer LM.

Each builder takes the schedule ``peak * warmup_cosine(step)`` and returns the
optimizer, as ``baselines``' do. VSGD steps every leaf; VSGD-Muon and its
factored form step the hidden 2-D kernels and leave the embedding, the
positions, the head and the vectors to AdamW at a tenth of the rate, as the
Muon baselines do (``baselines.with_adamw_part``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import optax

import vsgd_optax
from benchmarks.contest import baselines
from vsgd_optax import experimental

# Every kernel of both contest sizes has two axes of at least 128: all factor.
FACTORED = {"min_dim_size_to_factor": 128}

BUILDERS: dict[str, Callable[[optax.Schedule], optax.GradientTransformation]] = {
    "vsgd": vsgd_optax.vsgd,
    "vsgd_muon": baselines.with_adamw_part(experimental.vsgd_muon),
    "vsgd_muon_factored": baselines.with_adamw_part(
        functools.partial(experimental.vsgd_muon, **FACTORED)),
}

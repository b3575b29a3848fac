"""The contest's optimizers, each as its users run it on a transformer LM.

Every entry takes one traced number, the peak learning rate, and builds its
optimizer on the schedule ``peak * warmup_cosine(step)`` (5% linear warmup,
then cosine decay to 0: ``examples.optimizers.learning_rate_schedule``'s
shape), so one compiled program trains a whole grid of rates.

Weight decay (decoupled) is 0.1 where it is the default people use on an LM
(AdamW, and the AdamW part of Muon), on the 2-D leaves only, as nanoGPT and
nanochat do; Adam, VSGD and the orthogonalized matrices take none.

Muon as its users run it (Keller Jordan's reference, nanochat, Keras,
DeepSpeed): Newton-Schulz on the hidden 2-D kernels, AdamW on the embedding,
the positions, the head and the vectors (``model.matrix_labels``). The AdamW
part's peak rate is a tenth of the matrices' (the ratio of Adam's and Muon's
best rates in the 3.3M-parameter LM the contest was filed from, 0.00316 and
0.0316), for ``muon`` and ``vsgd_muon`` alike, so that one rate tunes both.
The ``_all`` entries are the same optimizers without that partition, as the
package and optax build them alone: every 2-D leaf orthogonalized, the
vectors stepped by the optimizer's own fallback (Adam for ``optax.contrib.muon``,
VSGD for ``vsgd_muon``) at the same rate.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import optax

import vsgd_optax
from benchmarks import optimizer_table
from benchmarks.contest import model
from vsgd_optax import experimental

DECAY = 0.1
ADAMW_SHARE = 0.1  # the AdamW part's peak, as a share of the matrices' peak


@dataclasses.dataclass(frozen=True)
class Entry:
  """One optimizer of the contest: how it is built from its rate schedule."""
  label: str
  build: Callable[[optax.Schedule], optax.GradientTransformation]
  weight_decay: str  # in words, for the pages
  baseline: bool  # a baseline (not one of this package's optimizers)


def _decay_mask(params):
  return jax.tree.map(lambda leaf: leaf.ndim == 2, params)


def _adamw(schedule):
  return optax.adamw(schedule, weight_decay=DECAY, mask=_decay_mask)


def _with_adamw_part(matrices: Callable[[optax.Schedule], optax.GradientTransformation]):
  def build(schedule):
    return optax.multi_transform(
        {"matrices": matrices(schedule),
         "adamw": _adamw(lambda count: ADAMW_SHARE * schedule(count))},
        model.matrix_labels)
  return build


ENTRIES = {
    "adam": Entry("Adam", optax.adam, "none", True),
    "adamw": Entry("AdamW", _adamw, "0.1 on 2-D leaves", True),
    "muon": Entry("Muon (AdamW on embedding, positions, head)",
                  _with_adamw_part(optax.contrib.muon),
                  "0.1 on the AdamW part's 2-D leaves", True),
    "muon_all": Entry("Muon on every matrix (optax.contrib.muon alone)", optax.contrib.muon,
                      "none", True),
    "vsgd": Entry("VSGD", vsgd_optax.vsgd, "none", False),
    "vsgd_muon": Entry("VSGD-Muon (AdamW on embedding, positions, head)",
                       _with_adamw_part(experimental.vsgd_muon),
                       "0.1 on the AdamW part's 2-D leaves", False),
    "vsgd_muon_all": Entry("VSGD-Muon on every matrix (vsgd_muon alone)",
                           experimental.vsgd_muon, "none", False),
    # The variants of what VSGD's noise model adds to Muon (protocol.VARIANT_RULE).
    **{name: Entry(description, _with_adamw_part(functools.partial(
        experimental.vsgd_muon, **optimizer_table.VSGD_MUON_VARIANT_ARGS[name])),
        "0.1 on the AdamW part's 2-D leaves", False) for name, description in (
            ("vsgd_muon_direction", "VSGD-Muon orthogonalizing VSGD's step"),
            ("vsgd_muon_signal", "VSGD-Muon orthogonalizing the mean weighted by its signal "
                                 "share"),
            ("vsgd_muon_rows", "VSGD-Muon with rows normalized by VSGD's variances"),
            ("vsgd_muon_factored", "VSGD-Muon with each matrix's rates as row and column "
                                   "means"))},
}

"""The contest's baselines, each as its users run it on a transformer LM.

Every builder takes the schedule ``peak * warmup_cosine(step)`` (the entry's
one traced number, its peak rate; ``lm.train.schedule_shape``) and returns the
optimizer.

Weight decay (decoupled) is 0.1 where it is the default people use on an LM
(AdamW, and the AdamW part of Muon and NorMuon), on the 2-D leaves only, as
nanoGPT and nanochat do; Adam and the orthogonalized matrices take none.

Muon and NorMuon as their users run them (Keller Jordan's reference, nanochat,
the NorMuon authors' code): their step on the hidden 2-D kernels, AdamW on the
embedding, the positions, the head and the vectors (``model.matrix_labels``).
The AdamW part's peak rate is a tenth of the matrices' (``ADAMW_SHARE``: the
ratio of Adam's and Muon's best rates on the 3.3M-parameter LM the contest was
filed from, 0.00316 and 0.0316), so that one rate tunes both parts.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import optax

from benchmarks.lm import model
from benchmarks.lm import normuon

DECAY = 0.1
ADAMW_SHARE = 0.1  # the AdamW part's peak, as a share of the matrices' peak


def decay_mask(params):
  """Decay on the 2-D leaves only: the kernels, the embedding, the positions, the head."""
  return jax.tree.map(lambda leaf: leaf.ndim == 2, params)


def adamw(schedule: optax.Schedule) -> optax.GradientTransformation:
  return optax.adamw(schedule, weight_decay=DECAY, mask=decay_mask)


def with_adamw_part(matrices: Callable[[optax.Schedule], optax.GradientTransformation]):
  """``matrices`` on the hidden kernels, AdamW at a tenth of the rate on the rest."""
  def build(schedule: optax.Schedule) -> optax.GradientTransformation:
    return optax.multi_transform(
        {"matrices": matrices(schedule),
         "adamw": adamw(lambda count: ADAMW_SHARE * schedule(count))},
        model.matrix_labels)
  return build


BUILDERS: dict[str, Callable[[optax.Schedule], optax.GradientTransformation]] = {
    "adam": optax.adam,
    "adamw": adamw,
    "muon": with_adamw_part(optax.contrib.muon),
    "normuon": with_adamw_part(normuon.normuon),
}

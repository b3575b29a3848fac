"""The ladder's entries: each optimizer of ``benchmarks/optimizers.py`` as the ladder runs it.

Every entry is built from two schedules, the matrices' (``peak * warmup_cosine``)
and the AdamW part's (the AdamW entry's chosen peak at that size and budget, the
same shape), under the ladder's one recipe (``RECIPE``): the AdamW part's betas,
eps and decay (``protocol.ADAMW_BETAS``, ``ADAMW_EPS``, ``DECAY``), the matrices'
decay, and VSGD-Muon factoring every hidden kernel at every size (the form users
get at width 128 and up) with that same AdamW part. The AdamW entry steps every
leaf with the AdamW part and ignores the first schedule. ``SOURCES`` names the
files each entry's numbers depend on, for the digest a ledger line carries.
"""

from __future__ import annotations

from collections.abc import Callable

import optax

from benchmarks import optimizers
from benchmarks.ladder import protocol

Builder = Callable[[optax.Schedule, optax.Schedule], optax.GradientTransformation]

_B1, _B2 = protocol.ADAMW_BETAS
_ADAMW = {"b1": _B1, "b2": _B2, "eps": protocol.ADAMW_EPS, "weight_decay": protocol.DECAY}
RECIPE = optimizers.LMRecipe(
    adamw=_ADAMW, matrices={"weight_decay": protocol.DECAY},
    vsgd_muon={"min_dim_size_to_factor": 2, "weight_decay": protocol.DECAY,
               **{f"adam_{k}": v for k, v in _ADAMW.items()},
               "adam_weight_decay_mask": optimizers.decay_mask})


def _bound(entry: str) -> Builder:
  """``entry``'s LM form under ``RECIPE``, built once so that its program is compiled once."""
  lm = optimizers.lm_builder(entry)
  return lambda schedule, adam_schedule: lm(schedule, adam_schedule, RECIPE)


# The ladder's own entries (protocol.ENTRIES), the momentum study's betas other than
# 0.95 (which is "muon") and its variants of VSGD-Muon (protocol.VARIANTS, addendum 6).
BUILDERS: dict[str, Builder] = {entry: _bound(entry) for entry in protocol.ENTRIES}
MOMENTUM_BUILDERS: dict[str, Builder] = {
    entry: _bound(entry) for entry in protocol.MOMENTUM_ENTRIES if entry != "muon"}
VARIANT_BUILDERS: dict[str, Builder] = {entry: _bound(entry) for entry in protocol.VARIANTS}


def builder(entry: str) -> Builder:
  """The builder of ``entry``: a ladder entry, a momentum study's beta or a variant."""
  for table in (BUILDERS, MOMENTUM_BUILDERS, VARIANT_BUILDERS):
    if entry in table:
      return table[entry]
  raise KeyError(f"no ladder entry {entry!r}: give one of protocol.ENTRIES, "
                 "protocol.MOMENTUM_ENTRIES or protocol.VARIANTS")


# What every run's numbers depend on, and each entry's own code besides.
SHARED_SOURCES = ("benchmarks/lm/model.py", "benchmarks/lm/corpus.py", "benchmarks/lm/train.py",
                  "benchmarks/optimizers.py", "benchmarks/ladder/entries.py",
                  "benchmarks/ladder/protocol.py")
_VSGD = ("vsgd_optax/**/*.py",)
SOURCES = {
    "adamw": (),
    "muon": (),
    "normuon": ("benchmarks/lm/normuon.py",),
    "muon_vs": ("benchmarks/lm/muon_vs.py",),
    "vsgd_muon": _VSGD,
    **{entry: () for entry in MOMENTUM_BUILDERS},  # like muon's
    **{entry: _VSGD for entry in VARIANT_BUILDERS},  # like vsgd_muon's
}
# The oldest optax each entry is trusted at: the benchmarks' NorMuon steps 1.5 times
# larger at 0.2.5 than at 0.2.8, and the ladder was declared at 0.2.8.
OPTAX_FLOOR = (0, 2, 8)

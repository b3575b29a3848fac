"""The ladder's entries, each with the one AdamW part every Muon-family entry shares.

Every builder takes two schedules, the matrices' (``peak * warmup_cosine``)
and the AdamW part's (the AdamW entry's chosen peak at that size and budget,
the same shape), and returns the optimizer. The AdamW entry steps every leaf
with the AdamW part and ignores the first. ``SOURCES`` names the files each
entry's numbers depend on, for the digest a ledger line carries.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import optax

import vsgd_optax
from benchmarks.contest import vsgd_entries
from benchmarks.ladder import protocol
from benchmarks.lm import model
from benchmarks.lm import muon_vs
from benchmarks.lm import normuon

Builder = Callable[[optax.Schedule, optax.Schedule], optax.GradientTransformation]


def decay_mask(params):
  """AdamW's decay on the 2-D leaves only (the embedding, positions and head here)."""
  return jax.tree.map(lambda leaf: leaf.ndim == 2, params)


def adamw_part(schedule: optax.Schedule) -> optax.GradientTransformation:
  b1, b2 = protocol.ADAMW_BETAS
  return optax.adamw(schedule, b1=b1, b2=b2, eps=protocol.ADAMW_EPS,
                     weight_decay=protocol.DECAY, mask=decay_mask)


def _partitioned(matrices: Callable[[optax.Schedule], optax.GradientTransformation]) -> Builder:
  """``matrices`` on the hidden kernels, the shared AdamW part on every other leaf."""
  def build(schedule, adam_schedule):
    return optax.multi_transform({"matrices": matrices(schedule),
                                  "adamw": adamw_part(adam_schedule)}, model.matrix_labels)
  return build


def _muon(schedule):
  # optax.contrib.muon on a partition that holds only hidden kernels: its Muon
  # branch (scale_by_muon, its width scale, decay, rate) steps every leaf.
  return optax.contrib.muon(schedule, weight_decay=protocol.DECAY)


def _muon_at(beta: float) -> Builder:
  """The ``"muon"`` entry with momentum ``beta`` in place of optax's 0.95."""
  return _partitioned(lambda s: optax.contrib.muon(s, beta=beta, weight_decay=protocol.DECAY))


def _vsgd_muon(schedule, adam_schedule, **changes):
  b1, b2 = protocol.ADAMW_BETAS
  # Every hidden kernel factored at every size: the form users get at width 128 and up.
  return vsgd_optax.vsgd_muon(
      schedule, muon_weight_dimension_numbers=vsgd_entries.hidden_kernels,
      min_dim_size_to_factor=2, weight_decay=protocol.DECAY, adam_learning_rate=adam_schedule,
      adam_b1=b1, adam_b2=b2, adam_eps=protocol.ADAMW_EPS, adam_weight_decay=protocol.DECAY,
      adam_weight_decay_mask=decay_mask, **changes)


def _vsgd_muon_with(changes: dict) -> Builder:
  """The ``"vsgd_muon"`` entry with ``changes`` to ``vsgd_optax.vsgd_muon``'s arguments."""
  return lambda schedule, adam_schedule: _vsgd_muon(schedule, adam_schedule, **changes)


BUILDERS: dict[str, Builder] = {
    "adamw": lambda schedule, adam_schedule: adamw_part(adam_schedule),
    "muon": _partitioned(_muon),
    "normuon": _partitioned(lambda s: normuon.normuon(s, weight_decay=protocol.DECAY)),
    "muon_vs": _partitioned(lambda s: muon_vs.muon_vs(s, weight_decay=protocol.DECAY)),
    "vsgd_muon": _vsgd_muon,
}
# The momentum study's betas other than 0.95 (which is "muon"). Apart from BUILDERS, which
# holds protocol.ENTRIES, the ladder's own: ``builder`` finds either.
MOMENTUM_BUILDERS: dict[str, Builder] = {
    protocol.momentum_entry(b): _muon_at(b)
    for b in (*protocol.MOMENTUM_GRID, *protocol.MOMENTUM_GROWTH.values()) if b != 0.95}


# The momentum study's variants of VSGD-Muon (protocol.VARIANTS, addendum 6).
VARIANT_BUILDERS: dict[str, Builder] = {
    entry: _vsgd_muon_with(changes) for entry, changes in protocol.VARIANTS.items()}


def builder(entry: str) -> Builder:
  """The builder of ``entry``: a ladder entry, a momentum study's beta or a variant."""
  for table in (BUILDERS, MOMENTUM_BUILDERS, VARIANT_BUILDERS):
    if entry in table:
      return table[entry]
  raise KeyError(f"no ladder entry {entry!r}: give one of protocol.ENTRIES, "
                 "protocol.MOMENTUM_ENTRIES or protocol.VARIANTS")

# What every run's numbers depend on, and each entry's own code besides.
SHARED_SOURCES = ("benchmarks/lm/model.py", "benchmarks/lm/corpus.py", "benchmarks/lm/train.py",
                  "benchmarks/ladder/entries.py", "benchmarks/ladder/protocol.py")
SOURCES = {
    "adamw": (),
    "muon": (),
    "normuon": ("benchmarks/lm/normuon.py",),
    "muon_vs": ("benchmarks/lm/muon_vs.py",),
    "vsgd_muon": ("vsgd_optax/**/*.py", "benchmarks/contest/vsgd_entries.py"),
    **{entry: () for entry in MOMENTUM_BUILDERS},  # like muon's
    **{entry: ("vsgd_optax/**/*.py", "benchmarks/contest/vsgd_entries.py")
       for entry in VARIANT_BUILDERS},  # like vsgd_muon's
}
# The oldest optax each entry is trusted at: the benchmarks' NorMuon steps 1.5 times
# larger at 0.2.5 than at 0.2.8, and the ladder was declared at 0.2.8.
OPTAX_FLOOR = (0, 2, 8)

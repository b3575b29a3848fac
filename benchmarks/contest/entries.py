"""The contest's optimizers: how each is built, what its numbers depend on, how pages name it.

The builders live in two modules, ``baselines`` (others' optimizers as their
users run them) and ``vsgd_entries`` (this package's), so that a run's record
names the code it depends on and no more (``sources``): a change to the
package reruns the package's entries, not the baselines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import optax

from benchmarks.contest import baselines
from benchmarks.contest import vsgd_entries

# What every run's numbers depend on: the model, the corpus and the jitted loop.
SHARED_SOURCES = ("benchmarks/lm/model.py", "benchmarks/lm/corpus.py",
                  "benchmarks/lm/train.py")
BASELINE_SOURCES = ("benchmarks/contest/baselines.py", "benchmarks/lm/normuon.py")
VSGD_SOURCES = ("vsgd_optax/**/*.py", "benchmarks/contest/vsgd_entries.py")


@dataclasses.dataclass(frozen=True)
class Entry:
  """One optimizer of the contest."""
  label: str
  build: Callable[[optax.Schedule], optax.GradientTransformation]
  weight_decay: str  # in words, for the pages
  baseline: bool  # a baseline (not one of this package's optimizers)
  sources: tuple[str, ...]  # the files (globs) its numbers depend on, besides SHARED_SOURCES


def _baseline(name, label, weight_decay):
  return Entry(label, baselines.BUILDERS[name], weight_decay, True, BASELINE_SOURCES)


def _ours(name, label, weight_decay):
  return Entry(label, vsgd_entries.BUILDERS[name], weight_decay, False, VSGD_SOURCES)


PARTITION_DECAY = "0.1 on the AdamW part's 2-D leaves"
ENTRIES = {
    "adam": _baseline("adam", "Adam", "none"),
    "adamw": _baseline("adamw", "AdamW", "0.1 on 2-D leaves"),
    "muon": _baseline("muon", "Muon (AdamW on embedding, positions, head)", PARTITION_DECAY),
    "normuon": _baseline("normuon", "NorMuon (AdamW on embedding, positions, head)",
                         PARTITION_DECAY),
    "vsgd": _ours("vsgd", "VSGD", "none"),
    "vsgd_muon": _ours("vsgd_muon", "VSGD-Muon (AdamW on embedding, positions, head)",
                       PARTITION_DECAY),
    "vsgd_muon_factored": _ours("vsgd_muon_factored",
                                "VSGD-Muon, factored rates (AdamW on embedding, positions, head)",
                                PARTITION_DECAY),
}

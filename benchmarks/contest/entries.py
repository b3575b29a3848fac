"""The contest's entries: each optimizer of ``benchmarks/optimizers.py`` as the contest runs
it on its transformer LM, what its numbers depend on, and how its pages name it.

Every entry is built from the schedule ``peak * warmup_cosine(step)`` (its one
traced number, its peak rate; ``lm.train.schedule_shape``). Adam and VSGD step
every leaf at the library's defaults. AdamW takes decoupled decay 0.1 on the
2-D leaves only, as nanoGPT and nanochat do. Muon, NorMuon and VSGD-Muon as
their users run them (Keller Jordan's reference, nanochat, the NorMuon
authors' code, ``vsgd_optax.vsgd_muon``'s one documented call): their step on
the hidden 2-D kernels, AdamW with that decay on the embedding, the positions,
the head and the vectors (``RECIPE``). The AdamW part's peak rate is a tenth of
the matrices' (``ADAMW_SHARE``: the ratio of Adam's and Muon's best rates on
the 3.3M-parameter LM the contest was filed from, 0.00316 and 0.0316), so that
one rate tunes both parts; VSGD-Muon is given it too, as the contest ran it,
so that its results stay reproducible (``vsgd_muon``'s default became 0.316
of the matrices' rate after the contest, the ladder's choice).

A run's record names the code its entry depends on and no more (``sources``):
a change to the package reruns the package's entries, not the baselines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import optax

from benchmarks import optimizers

DECAY = 0.1
ADAMW_SHARE = 0.1  # the AdamW part's peak, as a share of the matrices' peak
RECIPE = optimizers.LMRecipe(adamw={"weight_decay": DECAY})

# What every run's numbers depend on: the model, the corpus, the jitted loop, the builders.
SHARED_SOURCES = ("benchmarks/lm/model.py", "benchmarks/lm/corpus.py",
                  "benchmarks/lm/train.py", "benchmarks/optimizers.py",
                  "benchmarks/contest/entries.py")
BASELINE_SOURCES = ("benchmarks/lm/normuon.py",)
VSGD_SOURCES = ("vsgd_optax/**/*.py",)


@dataclasses.dataclass(frozen=True)
class Entry:
  """One optimizer of the contest."""
  label: str
  build: Callable[[optax.Schedule], optax.GradientTransformation]
  weight_decay: str  # in words, for the pages
  baseline: bool  # a baseline (not one of this package's optimizers)
  sources: tuple[str, ...]  # the files (globs) its numbers depend on, besides SHARED_SOURCES


def _every_leaf(name: str) -> Callable[[optax.Schedule], optax.GradientTransformation]:
  return optimizers.row(name).build  # type: ignore[return-value]


def _on_the_lm(name: str, adam_share: float | None = ADAMW_SHARE):
  """``name``'s LM form under ``RECIPE``, its AdamW part at ``adam_share`` of the rate
  (None: at the rate itself, the AdamW entry's).
  """
  lm = optimizers.lm_builder(name)

  def build(schedule: optax.Schedule) -> optax.GradientTransformation:
    adam_schedule = (schedule if adam_share is None
                     else lambda count: adam_share * schedule(count))
    return lm(schedule, adam_schedule, RECIPE)
  return build


PARTITION_DECAY = "0.1 on the AdamW part's 2-D leaves"
ENTRIES = {
    "adam": Entry("Adam", _every_leaf("adam"), "none", True, BASELINE_SOURCES),
    "adamw": Entry("AdamW", _on_the_lm("adamw", None), "0.1 on 2-D leaves", True,
                   BASELINE_SOURCES),
    "muon": Entry("Muon (AdamW on embedding, positions, head)", _on_the_lm("muon"),
                  PARTITION_DECAY, True, BASELINE_SOURCES),
    "normuon": Entry("NorMuon (AdamW on embedding, positions, head)", _on_the_lm("normuon"),
                     PARTITION_DECAY, True, BASELINE_SOURCES),
    "vsgd": Entry("VSGD", _every_leaf("vsgd"), "none", False, VSGD_SOURCES),
    # Every element's two rates, as the entry ran before the promotion made the factored
    # form vsgd_muon's default.
    "vsgd_muon": Entry("VSGD-Muon (AdamW on embedding, positions, head)",
                       _on_the_lm("vsgd_muon"), PARTITION_DECAY, False, VSGD_SOURCES),
    "vsgd_muon_factored": Entry(
        "VSGD-Muon, factored rates (AdamW on embedding, positions, head)",
        _on_the_lm("vsgd_muon_factored"), PARTITION_DECAY, False, VSGD_SOURCES),
}

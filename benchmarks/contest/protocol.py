"""The contest's protocol, declared before its runs: sizes, seeds, rates, the family, the rule.

Everything a verdict depends on is fixed here (and the margins in
``benchmarks/results/margins.json``, workloads ``contest_cpu`` and
``contest_gpu``), in a commit that comes before the runs it judges:

* **Corpus.** The pinned Django wheel (``corpus``), the same at both sizes;
  validation and test score every character of their split.
* **Runs.** Each entry (``entries.ENTRIES``) trains every rate of its window on
  each of the size's seeds; a seed fixes the initialization and the batches,
  the same for every entry, so that differences pair by seed.
* **Rates: one rule for every entry.** Half decades (``RATE_GRID``) from a
  window of three (``WINDOWS``), grown by one half decade at an edge while the
  best rate lies on it, up to ``MAX_RATES``; then the two quarter-decade rates
  beside the best half decade (``quarter_rates``). The entry's rate is the one
  of all these with the lowest mean *validation* bits per character over the
  seeds. The test split enters no choice.
* **The best baseline** is the baseline with the lowest mean validation bits at
  its chosen rate (ties: the earlier in ``ORDER``).
* **The family** (``FAMILY``): the comparisons that decide, each one a paired
  difference of test bits per character over the seeds, and each tested two
  ways: a difference (two-sided paired t, H0: no difference) and an
  equivalence (two one-sided paired t tests, H0: a difference of at least the
  declared margin). Holm's step-down correction at ``ALPHA`` runs over the
  family's p-values alone, both kinds together; where the best baseline is
  Adam, VSGD's two comparisons are one and count once. Every other p-value a
  page prints is descriptive. A comparison's verdict (``VERDICT_RULE``):
  *equivalent* where its equivalence holds under Holm, else a *win* or a
  *loss* (by the sign) where its difference holds under Holm, else
  *inconclusive*. The GPU size's family is the same comparisons, corrected on
  their own.
* **Promotion** (``PROMOTION_RULE``): whether VSGD-Muon becomes public API.
"""

from __future__ import annotations

import math

from benchmarks.lm import model

SEEDS = (0, 1, 2, 3, 4)
RATE_GRID = tuple(float(f"{10 ** (k / 2):.3g}") for k in range(-9, 1))  # 3.16e-5 to 1
MAX_RATES = 6  # half-decade rates at most, before the two quarter-decade ones
BASELINES = ("adam", "adamw", "muon", "normuon")
OURS = ("vsgd", "vsgd_muon", "vsgd_muon_factored")
# The order the entries train and the tables list them in.
ORDER = BASELINES + OURS
WINDOWS = {
    "adam": (1e-3, 3.16e-3, 1e-2), "adamw": (1e-3, 3.16e-3, 1e-2),
    "muon": (3.16e-3, 1e-2, 3.16e-2), "normuon": (3.16e-3, 1e-2, 3.16e-2),
    "vsgd": (3.16e-3, 1e-2, 3.16e-2), "vsgd_muon": (3.16e-3, 1e-2, 3.16e-2),
    "vsgd_muon_factored": (3.16e-3, 1e-2, 3.16e-2),
}
# The entries that decide (the family's), which the GPU size runs.
DECIDING = ("adam", "muon", "normuon", "vsgd", "vsgd_muon", "vsgd_muon_factored")

SIZES = {
    # 0.44M parameters: about an hour an entry on 2 CPU cores (7 rates of 5 seeds).
    "cpu": dict(size=model.Size(width=128, layers=2, heads=4, context=64, batch=16),
                steps=2000, seeds=SEEDS, entries=ORDER),
    # 3.2M parameters on an accelerator, the deciding entries at 5 seeds: each stage
    # of the rate rule (the window, a grown edge, the quarter decades) is one program
    # over its rates and seeds.
    "gpu": dict(size=model.Size(width=256, layers=4, heads=4, context=128, batch=64),
                steps=2000, seeds=SEEDS, entries=DECIDING),
    # CI's smoke test of the whole path: a few steps of a tiny model on 60 files.
    "smoke": dict(size=model.Size(width=16, layers=1, heads=2, context=16, batch=4),
                  steps=20, seeds=SEEDS[:2], entries=ORDER, files=60),
}
WORKLOAD = {"cpu": "contest_cpu", "gpu": "contest_gpu", "smoke": "contest_smoke"}


def next_rates(window: tuple[float, ...], best: float) -> tuple[float, ...]:
  """The window grown by one half decade where ``best`` lies on its edge and it
  holds fewer than ``MAX_RATES``; the window itself otherwise.
  """
  rates = sorted(window)
  if len(rates) >= MAX_RATES:
    return tuple(rates)
  grid = list(RATE_GRID)
  index = min(range(len(grid)), key=lambda i: abs(math.log(grid[i] / best)))
  if math.isclose(best, rates[0], rel_tol=1e-6) and index > 0:
    return (grid[index - 1], *rates)
  if math.isclose(best, rates[-1], rel_tol=1e-6) and index < len(grid) - 1:
    return (*rates, grid[index + 1])
  return tuple(rates)


def quarter_rates(best: float) -> tuple[float, float]:
  """The two quarter-decade rates beside the half-decade rate ``best``, to three digits."""
  low, high = (float(f"{best * 10 ** (side / 4):.3g}") for side in (-1, 1))
  return low, high


# The family, declared before the runs: (entry, against). "best" is the best
# baseline, chosen on validation.
BEST = "best"
FAMILY = (
    ("vsgd", BEST), ("vsgd", "adam"),
    ("vsgd_muon", "muon"), ("vsgd_muon", "normuon"),
    ("vsgd_muon_factored", "muon"), ("vsgd_muon_factored", "normuon"),
    ("vsgd_muon_factored", "vsgd_muon"),
)
TESTS = ("difference", "equivalence")  # each comparison's two hypotheses
ALPHA = 0.05  # Holm's family-wise level
VERDICT_RULE = (
    "equivalent where the equivalence test holds under Holm's correction over the family; "
    "else a win or a loss, by the sign of the mean difference, where the difference test "
    "holds under it; else inconclusive.")

# Whether VSGD-Muon leaves experimental, declared before the runs.
CANDIDATES = ("vsgd_muon", "vsgd_muon_factored")
PROMOTION_RULE = (
    "VSGD-Muon becomes public API (vsgd_optax.vsgd_muon) where one of its two forms "
    "(full rates, or factored rates) qualifies: at the CPU size its verdict is a win "
    "against Muon and a win or equivalent against NorMuon, both under the family's Holm "
    "correction; and at the GPU size, where it has run on this corpus, its verdict "
    "against Muon and against NorMuon is not a loss. Where the factored form qualifies "
    "and its verdict against the full form is a win or equivalent, the public default "
    "keeps factored rates (Muon's memory); otherwise full rates. Where neither form "
    "qualifies, it stays in vsgd_optax.experimental. The outcome is published either "
    "way, on the results page and in the API docs.")

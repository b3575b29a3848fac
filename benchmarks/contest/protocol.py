"""The contest's protocol, declared before its runs: sizes, seeds, rates, rules.

Everything a verdict depends on is fixed here (and the margins in
``benchmarks/results/margins.json``, workloads ``contest_cpu`` and
``contest_gpu``), in a commit that comes before the runs it judges:

* **Runs.** Each entry (``entries.ENTRIES``) trains every rate of its window on
  each of ``SEEDS``; a seed fixes the initialization and the batches, the same
  for every entry, so that differences are paired by seed.
* **Rates.** Half-decades (``RATE_GRID``). Every entry starts from three
  (``WINDOWS``) and the window grows by one half-decade at an edge while the
  best rate lies on it, up to ``MAX_RATES``: the same number of rates for every
  entry unless an edge says otherwise, and each chosen rate inside its window.
* **Choice.** An entry's rate is the one with the lowest mean *validation*
  bits per character over the seeds; the best baseline is the baseline with the
  lowest mean validation bits at its chosen rate (ties: the earlier in
  ``entries.ENTRIES``). The test split enters no choice; only its numbers are
  reported.
* **Verdicts.** An entry against a baseline: the paired differences of test
  bits per character over the seeds, a t interval at 95%, decided by the
  declared margin (``reporting.decisions.decide``: win, loss, equivalent or
  inconclusive), with Holm's correction across every verdict on the results page.
"""

from __future__ import annotations

import math

from benchmarks import optimizer_table
from benchmarks.contest import model

SEEDS = (0, 1, 2, 3, 4)
RATE_GRID = tuple(float(f"{10 ** (k / 2):.3g}") for k in range(-9, 1))  # 3.16e-5 to 1
MAX_RATES = 6
# The order the entries train in: the verdicts' entries first.
ORDER = ("adam", "vsgd", "muon", "vsgd_muon", "adamw", "muon_all", "vsgd_muon_all")
# vsgd_muon's variants (VARIANT_RULE below), run with --entries once the contest ran.
VARIANTS = optimizer_table.VSGD_MUON_VARIANTS
WINDOWS = {
    "adam": (1e-3, 3.16e-3, 1e-2), "adamw": (1e-3, 3.16e-3, 1e-2),
    "muon": (3.16e-3, 1e-2, 3.16e-2), "muon_all": (3.16e-3, 1e-2, 3.16e-2),
    "vsgd": (3.16e-3, 1e-2, 3.16e-2), "vsgd_muon": (3.16e-3, 1e-2, 3.16e-2),
    "vsgd_muon_all": (3.16e-3, 1e-2, 3.16e-2),
    **{variant: (3.16e-3, 1e-2, 3.16e-2) for variant in VARIANTS},
}

SIZES = {
    # About 40 minutes an entry on 2 CPU cores that other work shares (5 calls of 3 rates).
    "cpu": dict(size=model.Size(width=128, layers=2, heads=4, context=64, batch=16),
                steps=2000, eval_chars=250_000, seeds=SEEDS, entries=ORDER),
    # 3.2M parameters, every entry's grid in one program: about 12 s a run on an H200
    # (the rate of the LM the contest was filed from), so 3 seeds of the five
    # entries that decide (3 rates each, 45 runs) fit 8 minutes with their compiles.
    "gpu": dict(size=model.Size(width=256, layers=4, heads=4, context=128, batch=64),
                steps=2000, eval_chars=250_000, seeds=SEEDS[:3], entries=ORDER[:5]),
    # CI's smoke test of the whole path: a few steps of a tiny model.
    "smoke": dict(size=model.Size(width=16, layers=1, heads=2, context=16, batch=4),
                  steps=20, eval_chars=2_000, seeds=SEEDS[:2], entries=ORDER),
}
WORKLOAD = {"cpu": "contest_cpu", "gpu": "contest_gpu", "smoke": "contest_smoke"}


def next_rates(window: tuple[float, ...], best: float) -> tuple[float, ...]:
  """The window grown by one half-decade where ``best`` lies on its edge and it
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


# What VSGD's noise model can add to Muon (the variants of experimental.vsgd_muon),
# declared before any of their runs. Each variant runs through this protocol as an
# entry of its own, beside Muon run as its users run it.
VARIANT_RULE = (
    "A variant of vsgd_muon is documented as worth trying only where it wins against "
    "Muon (run as its users run it, AdamW on the embedding, the positions and the head) "
    "on the contest's CPU-size LM, by the declared margin with Holm's correction across "
    "the variants, and is not a loss against Muon on any other matrix workload that ran "
    "both; it leaves experimental only if it also wins at the GPU size. Otherwise its "
    "result is published and it stays experimental.")

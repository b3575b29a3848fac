"""From a comparison to a decision a user can act on: a win, a loss, equivalent
within the workload's declared margin, or inconclusive.

The margins (``benchmarks/results/margins.json``) were declared, with their
reasons, before the runs they judge. A difference ``a - b`` with 95% interval
``[low, high]`` is, in this order (two one-sided tests at the interval's level
decide equivalence first, since a difference smaller than what matters is not
a win even where the seeds are many enough to tell its sign):

* **equivalent**: the interval lies inside ``[-margin, +margin]``;
* **win** or **loss**: the interval excludes 0;
* **inconclusive**: the interval holds 0 and reaches past the margin: the
  runs could not tell a tie from a difference that matters.

Many comparisons are made at once, so each win and loss is also checked under
Holm's step-down correction of the family's p-values (``holm``).
"""

from __future__ import annotations

import json
import os

DECISIONS = ("win", "loss", "equivalent", "inconclusive")
MARGINS_FILE = "margins.json"


def _declared(results: str) -> dict[str, dict]:
  """Workload -> its margin and why, as ``margins.json`` in the results folder declares them."""
  path = os.path.join(results, MARGINS_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} does not exist: the verdicts need the workloads' declared "
                            "margins (benchmarks/results/margins.json holds them)")
  with open(path) as f:
    return json.load(f)["margins"]


def margins(results: str) -> dict[str, float]:
  """Workload -> its declared margin, from the results folder's ``margins.json``."""
  return {w: float(m["margin"]) for w, m in _declared(results).items()}


def reasons(results: str) -> dict[str, str]:
  """Workload -> why its margin is what it is, from ``margins.json``."""
  return {w: m["why"] for w, m in _declared(results).items()}


# Workloads whose declared margin cannot decide, left out of every verdict and
# decision (their numbers stay in the tables). Logistic regression's margin (5e-4 of
# suboptimality) was declared after its first verdicts were seen, and it is about as
# large as the suboptimality the optimizers reach (Adam: 6e-4 at 2,000 steps, 7e-5 at
# 20,000), so an "equivalent" there says nothing; a margin declared now would be
# declared after every logistic run.
NO_VERDICT = ("logreg",)


def decides(workload: str) -> bool:
  """Whether verdicts are drawn on ``workload`` (``NO_VERDICT``)."""
  return workload not in NO_VERDICT


def margin_for(declared: dict[str, float], workload: str) -> float:
  """``workload``'s declared margin from ``declared`` (``margins``); a workload
  without one is an error that names the file to declare it in.
  """
  if workload not in declared:
    raise ValueError(f"no practical-equivalence margin is declared for workload "
                     f"{workload!r} in benchmarks/results/{MARGINS_FILE}")
  return declared[workload]


def decide(low: float, high: float, difference: float, higher_is_better: bool,
           margin: float) -> str:
  """The decision for ``a`` against ``b`` (module docstring)."""
  if not margin > 0:
    raise ValueError(f"a margin must be a number > 0, got {margin!r}")
  if -margin <= low and high <= margin:
    return "equivalent"
  if low > 0 or high < 0:
    return "win" if (difference > 0) == higher_is_better else "loss"
  return "inconclusive"


def holm(p_values, alpha: float = 0.05) -> list[bool]:
  """Which of a family's hypotheses Holm's step-down procedure rejects at
  family-wise level ``alpha``: sorted ascending, the k-th smallest p (from 0)
  is rejected while p <= alpha / (m - k); the first that is not stops it.
  """
  # A p-value that is NaN (no spread to test) is never rejected: it sorts last.
  order = sorted(range(len(p_values)),
                 key=lambda i: p_values[i] if p_values[i] == p_values[i] else float("inf"))
  rejected = [False] * len(p_values)
  for k, i in enumerate(order):
    if not p_values[i] <= alpha / (len(p_values) - k):
      break
    rejected[i] = True
  return rejected


def unheld(verdict: str, holds: bool) -> str:
  """What a verdict's cell adds where Holm's correction does not keep it: a win or
  a loss that does not hold is marked; any other verdict has nothing to undo.
  """
  return " (not under Holm)" if verdict in ("win", "loss") and not holds else ""

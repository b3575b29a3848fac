"""Comparisons of two optimizers' per-seed results: the difference of their
means with a 95% confidence interval, the test behind it, and the equivalence
test within a margin (two one-sided tests, ``equivalence_p``).

A seed fixes a run's initialisation and batch order whatever the optimizer
(``runner``), so where two entries ran the same seeds their results pair by
seed and the paired t-test applies; otherwise Welch's t-test (unequal
variances). Spreads are sample standard deviations (ddof 1).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.stats

from benchmarks.reporting import decisions

CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class Comparison:
  """``a`` minus ``b``: the difference of means, its confidence interval, the
  two-sided p-value, and the test (``"paired t"`` or ``"Welch t"``) with its
  degrees of freedom and the number of seeds on each side.
  """
  difference: float
  low: float
  high: float
  p_value: float
  test: str
  dof: float
  n_a: int
  n_b: int
  se: float = math.nan  # the difference's standard error


def std(values) -> float:
  """Sample standard deviation (ddof 1); NaN for fewer than two values."""
  values = np.asarray(values, np.float64)
  return float(np.std(values, ddof=1)) if values.size > 1 else math.nan


def _t_result(difference: float, se: float, dof: float, confidence: float):
  if se == 0:
    p = 1.0 if difference == 0 else 0.0
    return difference, difference, p
  half = scipy.stats.t.ppf(0.5 + confidence / 2, dof) * se
  p = 2 * scipy.stats.t.sf(abs(difference) / se, dof)
  return difference - half, difference + half, float(p)


def paired(a, b, confidence: float = CONFIDENCE) -> Comparison:
  """Paired t-test of ``a - b``, element ``i`` of each from the same seed."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.shape != b.shape or a.size < 2:
    raise ValueError(f"paired values need equal lengths of at least 2, got {a.size}, {b.size}")
  d = a - b
  n = d.size
  difference = float(np.mean(d))
  se = std(d) / math.sqrt(n)
  low, high, p = _t_result(difference, se, n - 1, confidence)
  return Comparison(difference, low, high, p, "paired t", float(n - 1), n, n, se)


def welch(a, b, confidence: float = CONFIDENCE) -> Comparison:
  """Welch's t-test of ``mean(a) - mean(b)`` (unequal variances)."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.size < 2 or b.size < 2:
    raise ValueError(f"Welch's test needs at least 2 values a side, got {a.size}, {b.size}")
  va, vb = std(a) ** 2 / a.size, std(b) ** 2 / b.size
  se = math.sqrt(va + vb)
  dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) if se else 1.0
  difference = float(np.mean(a) - np.mean(b))
  low, high, p = _t_result(difference, se, dof, confidence)
  return Comparison(difference, low, high, p, "Welch t", float(dof), a.size, b.size, se)


def equivalence_p(c: Comparison, margin: float) -> float:
  """The p-value of two one-sided t tests (TOST) that the difference lies within
  ``[-margin, +margin]``: the larger of the two one-sided p-values, each against
  a difference of at least the margin on its side.
  """
  if not margin > 0:
    raise ValueError(f"a margin must be a number > 0, got {margin!r}")
  if c.se == 0:
    return 0.0 if abs(c.difference) < margin else 1.0
  below = scipy.stats.t.sf((c.difference + margin) / c.se, c.dof)
  above = scipy.stats.t.cdf((c.difference - margin) / c.se, c.dof)
  return float(max(below, above))


def compare(a, seeds_a, b, seeds_b, confidence: float = CONFIDENCE) -> Comparison:
  """``a`` against ``b``: paired by seed where both ran the same seeds, else Welch."""
  if list(seeds_a) == list(seeds_b):
    return paired(a, b, confidence)
  return welch(a, b, confidence)


def judged(a: dict, b: dict, higher_is_better: bool, margin: float) -> dict:
  """``a`` against ``b``, two entries of per-seed ``test`` values and their ``seeds``:
  the comparison (``compare``, ``a`` minus ``b``), the margin and the verdict, ``"win"``,
  ``"loss"``, ``"equivalent"`` or ``"inconclusive"`` by the declared rule
  (``decisions.decide``) with the workload's practical-equivalence ``margin``, in the
  metric's stored units.
  """
  c = compare(a["test"], a["seeds"], b["test"], b["seeds"])
  return {"comparison": c, "margin": margin,
          "verdict": decisions.decide(c.low, c.high, c.difference, higher_is_better, margin)}

"""The time-to-result comparisons against scipy.stats on fixed numbers."""

import numpy as np
import pytest
import scipy.stats

from benchmarks.reporting import stats

A = np.array([0.9944, 0.9916, 0.9972, 0.9916, 0.9944, 0.9889, 0.9972, 0.9916, 0.9944, 0.9861])
B = np.array([0.9861, 0.9861, 0.9916, 0.9916, 0.9944, 0.9833, 0.9889, 0.9889, 0.9916, 0.9861])


def test_paired_matches_scipy_ttest_rel():
  got = stats.paired(A, B)
  ref = scipy.stats.ttest_rel(A, B)
  low, high = ref.confidence_interval(0.95)
  assert got.test == "paired t" and got.dof == 9 and got.n_a == got.n_b == 10
  assert got.difference == pytest.approx(np.mean(A - B), rel=1e-12)
  assert got.p_value == pytest.approx(ref.pvalue, rel=1e-9)
  assert (got.low, got.high) == pytest.approx((low, high), rel=1e-9)


def test_welch_matches_scipy_ttest_ind():
  b = B[:7]
  got = stats.welch(A, b)
  ref = scipy.stats.ttest_ind(A, b, equal_var=False)
  low, high = ref.confidence_interval(0.95)
  assert got.test == "Welch t" and (got.n_a, got.n_b) == (10, 7)
  assert got.dof == pytest.approx(ref.df, rel=1e-9)
  assert got.p_value == pytest.approx(ref.pvalue, rel=1e-9)
  assert (got.low, got.high) == pytest.approx((low, high), rel=1e-9)


def test_std_is_the_sample_std():
  assert stats.std([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.2909944487358056, rel=1e-12)
  assert np.isnan(stats.std([1.0]))


def test_compare_pairs_only_on_the_same_seeds():
  seeds = list(range(10))
  assert stats.compare(A, seeds, B, seeds).test == "paired t"
  assert stats.compare(A, seeds, B, list(range(1, 11))).test == "Welch t"


def test_verdict_is_the_declared_rule_with_the_workloads_margin():
  seeds = list(range(10))
  a, b, same = ({"test": test, "seeds": seeds} for test in (A, B, A[::-1]))
  # A is higher on average by 0.39 points, p about 0.006: the interval lies above 0
  # and reaches past a half-point margin.
  win = stats.judged(a, b, higher_is_better=True, margin=0.005)
  assert win["comparison"].low > 0.001 and win["comparison"].high > 0.005
  assert win["verdict"] == "win"
  assert stats.judged(a, b, higher_is_better=False, margin=0.005)["verdict"] == "loss"
  # With a margin wider than the whole interval the same difference is equivalent.
  assert stats.judged(a, b, higher_is_better=True, margin=0.02)["verdict"] == "equivalent"
  tie = stats.judged(a, same, higher_is_better=True, margin=0.005)
  assert tie["comparison"].low < 0 < tie["comparison"].high
  assert tie["verdict"] == "equivalent"
  # A margin the interval reaches past: the runs could not tell.
  assert (tie["comparison"].high - tie["comparison"].low) / 2 > 0.001
  assert stats.judged(a, same, higher_is_better=True, margin=0.001)["verdict"] == "inconclusive"

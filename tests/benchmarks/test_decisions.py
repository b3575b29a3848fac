"""The decision rule of every verdict: equivalent within the declared margin,
win, loss or inconclusive, and Holm's correction of a family of comparisons.
"""

import json
import os

import pytest

from benchmarks.reporting import decisions

RESULTS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "results")


@pytest.mark.parametrize("low, high, diff, higher, want", [
    (-0.004, 0.004, 0.0, True, "equivalent"),      # inside +-0.005
    (0.001, 0.004, 0.0025, True, "equivalent"),    # excludes 0 but smaller than what matters
    (0.001, 0.012, 0.006, True, "win"),            # higher is better, interval above 0
    (0.001, 0.012, 0.006, False, "loss"),          # lower is better (a loss, bits or MSE)
    (-0.012, -0.001, -0.006, False, "win"),
    (-0.012, -0.001, -0.006, True, "loss"),
    (-0.0096, 0.0012, -0.0042, True, "inconclusive"),  # holds 0, reaches past the margin
    (-0.005, 0.005, 0.0, True, "equivalent"),      # the margin's own edge counts as inside
])
def test_decide_follows_the_declared_rule(low, high, diff, higher, want):
  assert decisions.decide(low, high, diff, higher, margin=0.005) == want


def test_a_margin_that_is_not_positive_is_refused():
  with pytest.raises(ValueError, match="margin"):
    decisions.decide(-1.0, 1.0, 0.0, True, margin=0)


def test_holm_steps_down_and_stops_at_the_first_it_keeps():
  # m = 4 at alpha 0.05: 0.005 <= 0.0125 and 0.01 <= 0.05/3 are rejected, 0.03 > 0.025
  # stops the procedure, so 0.04 is kept although it is under 0.05.
  assert decisions.holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
  assert decisions.holm([0.04, 0.04]) == [False, False]  # 0.04 > 0.025
  assert decisions.holm([0.02, 0.04]) == [True, True]    # 0.02 <= 0.025, then 0.04 <= 0.05
  assert decisions.holm([]) == []
  assert decisions.holm([float("nan"), 0.001]) == [False, True]


def test_only_a_win_or_loss_that_holm_does_not_keep_is_marked():
  assert [decisions.unheld(v, False) for v in decisions.DECISIONS] == [
      " (not under Holm)", " (not under Holm)", "", ""]
  assert [decisions.unheld(v, True) for v in decisions.DECISIONS] == ["", "", "", ""]


def test_every_workload_has_a_declared_margin_with_its_reason():
  with open(os.path.join(RESULTS, "margins.json")) as f:
    declared = json.load(f)
  assert declared["declared"] == "2026-11-27"
  held = decisions.margins(RESULTS)
  assert set(held) >= {"mlp", "convmixer", "charlm", "diabetes", "logreg", "mlp_wide",
                       "diabetes_wide", "charlm_wide"}
  assert held["mlp"] == 0.005 and held["charlm"] == 0.02
  assert all(isinstance(m["why"], str) and m["why"].strip()
             for m in declared["margins"].values())


def test_a_results_folder_without_declared_margins_is_refused_naming_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="margins.json"):
    decisions.margins(str(tmp_path))

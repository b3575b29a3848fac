"""The contest's verdicts as declared: the family alone under Holm's correction, the
equivalence before the difference, the best baseline on validation, and the
promotion rule's outcome in every case it can take.
"""

import inspect

import numpy as np
import pytest

import vsgd_optax
from benchmarks import common
from benchmarks.reporting import contest
from benchmarks.reporting import decisions
from benchmarks.reporting import stats
from vsgd_optax import experimental

SEEDS = [0, 1, 2, 3, 4]
# Seed-to-seed spreads: the same for every entry, so that paired differences are tight.
NOISE = np.array([0.01, -0.02, 0.0, 0.02, -0.01])


def _entry(val: float, test: float, baseline: bool, jitter: float = 0.0) -> dict:
  tests = test + NOISE + jitter * np.array([1.0, -1.0, 0.5, -0.5, 0.0])
  return {"label": "x", "weight_decay": "none", "baseline": baseline, "rates": [0.01, 0.0316],
          "val_by_rate": [val, val + 0.1], "test_by_rate": [test, test + 0.1], "chosen_rate": 0.01,
          "at_edge": False, "seeds": SEEDS, "val": [val] * 5, "test": tests.tolist(),
          "val_mean": val, "test_mean": float(np.mean(tests)), "train_curve": [3.0, 2.0]}


PROTOCOL = {
    "seeds": SEEDS, "entries": ["adam", "adamw", "muon", "normuon", "vsgd", "vsgd_muon",
                                "vsgd_muon_factored"],
    "family": [["vsgd", "best"], ["vsgd", "adam"], ["vsgd_muon", "muon"],
               ["vsgd_muon", "normuon"], ["vsgd_muon_factored", "muon"],
               ["vsgd_muon_factored", "normuon"], ["vsgd_muon_factored", "vsgd_muon"]],
    "best": "best", "tests": ["difference", "equivalence"], "alpha": 0.05,
    "candidates": ["vsgd_muon", "vsgd_muon_factored"]}


def _payload(**tests: float) -> dict:
  """A CPU contest whose entries' test means are ``tests`` (validation alike)."""
  baselines = {"adam", "adamw", "muon", "normuon"}
  return {"workload": {"name": "contest_cpu"}, "protocol": PROTOCOL,
          "entries": {n: _entry(t, t, n in baselines, jitter=0.004 * i)
                      for i, (n, t) in enumerate(tests.items())}}


RESULTS = dict(adam=2.30, adamw=2.29, muon=2.20, normuon=2.18, vsgd=2.30, vsgd_muon=2.15,
               vsgd_muon_factored=2.151)


def test_the_family_is_corrected_alone_and_its_verdicts_follow_the_declared_rule():
  payload = _payload(**RESULTS)
  rows = contest.family(payload, margin=0.02)
  by = {(r["name"], r["other"]): r for r in rows}
  # The best baseline on validation is NorMuon; VSGD against it and against Adam.
  assert contest.best_baseline(payload) == "normuon" and len(rows) == 7
  assert by["vsgd", "normuon"]["verdict"] == "loss"
  assert by["vsgd_muon", "muon"]["verdict"] == "win"
  # 0.001 apart with a tight spread: equivalent, which comes before a difference.
  assert by["vsgd_muon_factored", "vsgd_muon"]["verdict"] == "equivalent"
  # Holm over the family's 14 p-values: the k-th smallest against alpha / (14 - k).
  p = sorted(v for r in rows for v in (r["p_difference"], r["p_equivalence"]))
  assert len(p) == 14
  c = by["vsgd_muon", "normuon"]["comparison"]
  assert by["vsgd_muon", "normuon"]["p_equivalence"] == pytest.approx(
      stats.equivalence_p(c, 0.02))


def test_where_adam_is_the_best_baseline_vsgds_two_comparisons_count_once():
  results = {**RESULTS, "adam": 2.10, "adamw": 2.40, "muon": 2.40, "normuon": 2.40}
  rows = contest.family(_payload(**results), margin=0.02)
  assert [(r["name"], r["other"]) for r in rows][:2] == [("vsgd", "adam"), ("vsgd_muon", "muon")]
  assert len(rows) == 6


def test_an_entry_not_run_yet_leaves_its_comparisons_out():
  results = {k: v for k, v in RESULTS.items() if k != "normuon"}
  rows = contest.family(_payload(**results), margin=0.02)
  assert all("normuon" not in (r["name"], r["other"]) for r in rows)
  found = contest.promotion({"cpu": _payload(**results)}, {"contest_cpu": 0.02})
  assert not found["complete"]


def test_while_a_baseline_has_not_run_there_is_no_best_and_the_table_names_what_is_missing():
  # Muon beats AdamW and Adam here, but NorMuon has not run: no best baseline yet,
  # so VSGD's comparison against it waits, and the table says so.
  results = {k: v for k, v in RESULTS.items() if k != "normuon"}
  payload = _payload(**results)
  assert contest.best_baseline(payload) is None
  rows = contest.family(payload, margin=0.02)
  assert [(r["name"], r["other"]) for r in rows] == [
      ("vsgd", "adam"), ("vsgd_muon", "muon"), ("vsgd_muon_factored", "muon"),
      ("vsgd_muon_factored", "vsgd_muon")]
  table = contest.family_table(rows, PROTOCOL).splitlines()[2:]
  assert [line.split(" | ")[0] for line in table if "not run yet" in line] == [
      "| VSGD − the best baseline", "| VSGD-Muon − NorMuon",
      "| VSGD-Muon, factored rates − NorMuon"]
  assert contest.best_baseline(_payload(**RESULTS)) == "normuon"


@pytest.mark.parametrize("tests, default", [
    # Beats Muon, ties NorMuon, the factored form ties the full one: factored by default.
    ({}, "vsgd_muon_factored"),
    # The factored form loses to the full one: promoted with full rates.
    ({"vsgd_muon_factored": 2.19}, "vsgd_muon"),
    # Neither beats Muon: not promoted.
    ({"vsgd_muon": 2.20, "vsgd_muon_factored": 2.201}, None),
    # Both beat Muon but lose to NorMuon: not promoted.
    ({"normuon": 2.10}, None),
])
def test_the_promotion_rule_gives_its_declared_outcome(tests, default):
  found = contest.promotion({"cpu": _payload(**{**RESULTS, **tests})}, {"contest_cpu": 0.02})
  assert found["complete"] and found["default"] == default
  table = contest.promotion_table(found)
  assert ("**yes**" in table) == (default is not None)


def test_a_loss_at_the_gpu_size_where_it_ran_blocks_the_promotion():
  cpu = _payload(**RESULTS)
  gpu = {**_payload(**{**RESULTS, "vsgd_muon": 2.30, "vsgd_muon_factored": 2.30}),
         "workload": {"name": "contest_gpu"}}
  declared = {"contest_cpu": 0.02, "contest_gpu": 0.02}
  assert contest.promotion({"cpu": cpu}, declared)["default"] is not None
  assert contest.promotion({"cpu": cpu, "gpu": gpu}, declared)["default"] is None


def test_the_equivalence_p_value_is_the_larger_one_sided_test():
  c = stats.paired([2.001, 2.012, 1.995, 2.004, 2.0], [2.0, 2.01, 2.0, 2.0, 2.002])
  # By hand: t against each edge of the margin, one-sided, 4 degrees of freedom.
  import scipy.stats
  lower = scipy.stats.t.sf((c.difference + 0.02) / c.se, 4)
  upper = scipy.stats.t.cdf((c.difference - 0.02) / c.se, 4)
  assert stats.equivalence_p(c, 0.02) == pytest.approx(max(lower, upper))
  assert stats.equivalence_p(c, 0.02) < 0.01 < stats.equivalence_p(c, 0.003)
  with pytest.raises(ValueError, match="margin"):
    stats.equivalence_p(c, 0.0)


def test_the_package_ships_the_committed_contests_outcome():
  """The rule's outcome on the committed results is applied: promoted with factored
  rates means a public ``vsgd_muon`` whose default factors, and none left under
  ``experimental``'s names but the warning alias; with full rates, a default of
  None; not promoted, no public name.
  """
  found = contest.promotion(contest.load(common.RESULTS), decisions.margins(common.RESULTS))
  assert found["complete"]
  if found["default"] is None:
    assert not hasattr(vsgd_optax, "vsgd_muon")
    return
  default = inspect.signature(vsgd_optax.vsgd_muon).parameters["min_dim_size_to_factor"].default
  assert (default is None) == (found["default"] == "vsgd_muon")
  assert "vsgd_muon" in vsgd_optax.__all__ and "vsgd_muon" not in experimental.__all__

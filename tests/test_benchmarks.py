"""Smoke tests of the benchmarks' --quick modes: they run and write their results.

Speeds are not asserted here (they belong to the benchmark reports)."""

import json

import pytest

from benchmarks import quality
from benchmarks import step_cost
from benchmarks import train_step


def test_step_cost_quick(tmp_path):
  out = str(tmp_path / "sc")
  step_cost.main(["--quick", "--sizes", "2e5", "--repeats", "2", "--out", out])
  rows = json.load(open(out + ".json"))["rows"]
  assert {r["optimizer"] for r in rows} == set(step_cost.OPTIMIZERS)
  vsgd = next(r for r in rows if r["optimizer"] == "vsgd" and not r["donated"])
  # mu, b_g, b_ghat in float32, plus the 4-byte step count
  assert vsgd["state_bytes_per_param"] == pytest.approx(12.0, rel=1e-3)
  assert vsgd["median_ms"] > 0
  assert (tmp_path / "sc.png").stat().st_size > 0


def test_network_like_params_reach_the_target_size():
  n = sum(x.size for x in step_cost.network_like_params(int(1e6)).values())
  assert 0.9e6 < n < 1.1e6


def test_train_step_quick(tmp_path):
  out = str(tmp_path / "ts")
  train_step.main(["--quick", "--repeats", "1", "--out", out])
  row = json.load(open(out + ".json"))["rows"][0]
  assert row["config"] == "cifar100_convmixer" and row["model"] == "convmixer"
  assert row["image_size"] == 32 and row["batch"] == 4 and row["ratio"] > 0
  # Both optimizers' compiled steps hold at least the params and the batch.
  params_mb = 617_316 * 4 / 1e6
  assert row["adam_xla_peak_mb"] > params_mb and row["vsgd_xla_peak_mb"] > params_mb
  assert (tmp_path / "ts.png").stat().st_size > 0


def test_quality_quick(tmp_path):
  out = str(tmp_path / "q")
  quality.main(["--quick", "--entries", "vsgd", "adam", "--out", out])
  results = json.load(open(out + ".json"))["results"]
  assert set(results) == {"vsgd", "adam"}
  assert all(0.0 <= r["test_accuracy_mean"] <= 1.0 for r in results.values())

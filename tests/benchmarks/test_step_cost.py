"""The step-cost benchmark's quick mode runs and writes its results; its model sizes.

Speeds are not asserted here (they belong to the benchmark reports).
"""

import json

import pytest

from benchmarks import step_cost
from benchmarks.reporting import cost_plots
from benchmarks.reporting import costs


@pytest.mark.slow  # times repeated steps of every optimizer
def test_step_cost_quick(tmp_path):
  out = str(tmp_path / "sc")
  step_cost.main(["--quick", "--sizes", "2e5", "--repeats", "2", "--out", out])
  rows = json.load(open(out + ".json"))["rows"]
  assert {r["optimizer"] for r in rows} == set(step_cost.OPTIMIZERS)
  vsgd = next(r for r in rows if r["optimizer"] == "vsgd" and not r["donated"])
  # mu, b_g, b_ghat in float32, plus the 4-byte step count
  assert vsgd["state_bytes_per_param"] == pytest.approx(12.0, rel=1e-3)
  assert vsgd["median_ms"] > 0
  # The bf16-state steps (both roundings) over the float32-state step, in the same rounds.
  paired = [r for r in rows if "paired" in r]
  assert {(r["optimizer"], r["donated"]) for r in paired} == {
      (name, donated) for name in ("vsgd+bf16_state", "vsgd+bf16_nearest")
      for donated in (False, True)}
  assert all(r["paired"]["against"] == "vsgd" and r["paired"]["ratio"] > 0 for r in paired)
  assert "| vsgd+bf16_state / vsgd |" in "\n".join(costs._paired_table(rows))
  assert not (tmp_path / "sc.png").exists()  # the runner writes JSON alone
  cost_plots.step_cost(rows, out + ".png")
  assert (tmp_path / "sc.png").stat().st_size > 0

def test_network_like_params_reach_the_target_size():
  n = sum(x.size for x in step_cost.network_like_params(int(1e6)).values())
  assert 0.9e6 < n < 1.1e6

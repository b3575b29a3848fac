"""The results page's long-horizon section, from result files written here."""

import json

import numpy as np

from benchmarks.reporting import long_horizon
from benchmarks.reporting import stats
from benchmarks.reporting import verdict
from tests.support import verdict_payloads

SEEDS = list(range(10))


def _write(tmp_path, payload, name="mlp"):
  folder = tmp_path / long_horizon.FOLDER / "warmup_cosine"
  folder.mkdir(parents=True, exist_ok=True)
  (folder / f"ttr_{name}.json").write_text(json.dumps(payload))


def test_section_decides_each_rounding_against_float32_and_vsgd_against_the_baselines(tmp_path):
  rng = np.random.default_rng(3)
  float32 = list(0.98 + 0.003 * rng.standard_normal(10))
  stochastic = [x + 0.0002 * (-1) ** i for i, x in enumerate(float32)]  # within noise
  nearest = [x - 0.004 + 0.0005 * rng.standard_normal() for x in float32]  # clearly lower
  payload = verdict_payloads.payload({"vsgd": verdict_payloads.entry(float32, lr=1e-3), "adam": verdict_payloads.entry([x - 0.01 for x in float32]),
                      "schedule_free_adamw": verdict_payloads.entry([x + 0.01 for x in float32], lr=1e-2)})
  payload["workload"]["steps"] = 20000
  payload["machine"] = {"platform": "cpu", "device": "cpu", "cpu": "test", "cores": 2,
                        "jax": "0", "date": "2026-11-27"}
  payload["same_rate"] = {
      "vsgd+bf16_state": {"base": "vsgd", "learning_rate": 1e-3, "seeds": SEEDS,
                          "test": stochastic},
      "vsgd+bf16_nearest": {"base": "vsgd", "learning_rate": 1e-3, "seeds": SEEDS,
                            "test": nearest}}
  _write(tmp_path, payload)
  text = "\n".join(long_horizon.section(str(tmp_path)))
  assert text.startswith("## At the paper's horizon: 20,000 steps")
  # The precision table's rows have seven cells; the rounding is the fourth.
  rows = {line.split("|")[4].strip(): line for line in text.splitlines()
          if line.startswith("| MLP") and line.count("|") == 8}
  w = payload["workload"]
  for name, values, expected in (("stochastic (default)", stochastic, "**tie**"),
                                 ("to nearest", nearest, "**loss** (a frozen state")):
    row = rows[name]
    c = stats.compare(values, SEEDS, float32, SEEDS)
    assert verdict.difference_text(w, c) in row and expected in row, row
  # Tuned: schedule_free_adamw is best (a loss), Adam is beaten (a win), one row each.
  tuned = [line for line in text.splitlines() if "(best)" in line or "| adam:" in line]
  assert len(tuned) == 2
  assert "schedule_free_adamw (best)" in tuned[0] and "**loss**" in tuned[0]
  assert "adam: " in tuned[1] and "**win**" in tuned[1]
  assert "(paired t, 10 seeds)" in text


def test_no_long_horizon_results_no_section(tmp_path):
  assert long_horizon.section(str(tmp_path)) == []

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
  stochastic = [x + 0.0002 * (-1) ** i for i, x in enumerate(float32)]  # well inside +-0.5
  nearest = [x - 0.008 + 0.0005 * rng.standard_normal() for x in float32]  # past the margin
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
  verdict_payloads.write_margins(tmp_path)
  text = "\n".join(long_horizon.section(str(tmp_path)))
  assert text.startswith("## The long horizon\n")
  # The precision table's rows have five cells; the rounding is the fourth.
  rows = {line.split("|")[4].strip(): line for line in text.splitlines()
          if line.startswith("| MLP") and line.count("|") == 6}
  w = payload["workload"]
  for name, values, expected in (("stochastic (default)", stochastic, "**equivalent**"),
                                 ("to nearest", nearest, "**loss**")):
    row = rows[name]
    c = stats.compare(values, SEEDS, float32, SEEDS)
    assert f"{verdict.difference_text(w, c)} (±0.50), paired t, p " in row, row
    assert f"| {expected}: " in row and ("frozen state" in row) == (name == "to nearest"), row
  # Tuned: schedule_free_adamw is best (a loss), Adam is beaten by a point on every
  # seed (a win): a table each, each optimizer with its tuned rate.
  tuned = text[text.index("### Tuned VSGD against the baselines"):].splitlines()
  best, adam = (line for line in tuned if line.startswith("| MLP"))
  assert "| schedule_free_adamw: " in best and " (0.01) | **loss**" in best
  assert " (0.01) | **win**: +1.00 [" in adam
  assert "(paired t, 10 seeds)" in text
  assert "**tie**" not in text
  # Each rounding's verdicts in words: the how-to's sentence.
  assert ("the bfloat16 state rounded stochastically was equivalent on MLP; rounded to "
          "nearest, it lost on MLP.") in long_horizon.howto_sentence(str(tmp_path))


def test_a_difference_inside_the_margin_is_equivalent_not_a_win(tmp_path):
  """Rounded to nearest, 0.2 points below float32 on every seed: the interval
  excludes 0 but lies inside the half-point margin, so it is equivalent, and
  the frozen-state note (for a win or a loss) stays off.
  """
  rng = np.random.default_rng(4)
  float32 = list(0.98 + 0.003 * rng.standard_normal(10))
  nearest = [x - 0.002 + 0.0002 * (-1) ** i for i, x in enumerate(float32)]
  payload = verdict_payloads.payload({"vsgd": verdict_payloads.entry(float32, lr=1e-3)})
  payload["workload"]["steps"] = 20000
  payload["machine"] = {"platform": "cpu", "device": "cpu", "cpu": "test", "cores": 2,
                        "jax": "0", "date": "2026-11-27"}
  payload["same_rate"] = {"vsgd+bf16_nearest": {"base": "vsgd", "learning_rate": 1e-3,
                                                "seeds": SEEDS, "test": nearest}}
  _write(tmp_path, payload)
  verdict_payloads.write_margins(tmp_path)
  row = next(line for line in long_horizon.section(str(tmp_path)) if "to nearest" in line)
  c = stats.compare(nearest, SEEDS, float32, SEEDS)
  assert c.excludes_zero() and -0.005 < c.low and c.high < 0
  assert "| **equivalent**: -0.20 [" in row and "frozen" not in row, row


def test_no_long_horizon_results_no_section(tmp_path):
  assert long_horizon.section(str(tmp_path)) == []


def test_windows_text_names_the_workloads_whose_windows_started_wider():
  def with_grid(n):
    e = verdict_payloads.entry([0.9, 0.91])
    e["tuning"]["grid"] = [10 ** (k / 2) for k in range(n)]
    return {"entries": {"vsgd": e}}
  results = {"mlp": with_grid(3), "diabetes": with_grid(7), "logreg": with_grid(3)}
  assert long_horizon.windows_text(results) == (
      "a window of 3 half-decade rates (7 on diabetes)")
  assert long_horizon.windows_text({"mlp": with_grid(3)}) == "a window of 3 half-decade rates"

"""The results page's verdict and the generated learning-rate guide, on small
made-up result files and on the committed ones.
"""

import dataclasses
import json
import os

import numpy as np
import pytest

from benchmarks.time_to_result import guide
from benchmarks.time_to_result import harness
from benchmarks.time_to_result import run
from benchmarks.time_to_result import stats
from benchmarks.time_to_result import tables
from benchmarks.time_to_result import verdict
from benchmarks.time_to_result import workloads
from examples import configs
from tests.support import REPOSITORY

RESULTS = os.path.join(REPOSITORY, "benchmarks", "results")


def _entry(test, lr=1e-2, seeds=None):
  seeds = list(range(len(test))) if seeds is None else seeds
  return {"label": "x", "learning_rate": lr, "on_edge": False, "seeds": seeds, "test": test,
          "test_mean": float(np.mean(test)), "test_std": float(np.std(test, ddof=1)),
          "tuning": {"learning_rate": [3.16e-3, 1e-2, 3.16e-2], "seeds": [1000],
                     "grid": [3.16e-3, 1e-2, 3.16e-2], "grown": [], "val": [0.9, 0.97, 0.8],
                     "train_loss": [0.3, 0.1, 0.5]}}


def _payload(entries, higher_is_better=True):
  return {"workload": {"name": "mlp", "title": "MLP", "metric": "accuracy",
                       "higher_is_better": higher_is_better, "target": 0.95, "steps": 100,
                       "grid": [3.16e-3, 1e-2, 3.16e-2]},
          "schedule": {"name": "warmup_cosine"}, "machine": {}, "entries": entries}


def test_best_baseline_skips_vsgd_entries_and_variants():
  payload = _payload({"vsgd": _entry([0.99, 0.98]), "constant_vsgd": _entry([1.0, 1.0]),
                      "adam+bf16_mu": _entry([1.0, 1.0]), "adam": _entry([0.95, 0.96]),
                      "lion": _entry([0.97, 0.96])})
  assert verdict.best_baseline(payload) == "lion"
  assert verdict.best_baseline(_payload(payload["entries"], higher_is_better=False)) == "adam"


def test_compare_workload_pairs_by_seed_and_decides_by_the_interval():
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  a = [0.97, 0.975, 0.98, 0.98, 0.975]
  row = verdict.compare_workload(_payload({"vsgd": _entry(v), "adam": _entry(a)}))
  assert row["baseline"] == "adam" and row["verdict"] == "win"
  assert row["comparison"].test == "paired t"
  assert row["comparison"].difference == pytest.approx(np.mean(v) - np.mean(a))
  # other seeds: Welch's test, and lower is better turns the win into a loss
  row = verdict.compare_workload(_payload(
      {"vsgd": _entry(v), "adam": _entry(a, seeds=[5, 6, 7, 8, 9])}, higher_is_better=False))
  assert row["comparison"].test == "Welch t" and row["verdict"] == "loss"
  tie = verdict.compare_workload(_payload({"vsgd": _entry(v), "adam": _entry(v[::-1])}))
  assert tie["verdict"] == "tie"


def test_section_reads_the_main_protocol(tmp_path):
  folder = tmp_path / "warmup_cosine"
  folder.mkdir()
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  a = [0.97, 0.975, 0.98, 0.98, 0.975]
  (folder / "ttr_mlp.json").write_text(json.dumps(_payload({"vsgd": _entry(v),
                                                            "adam": _entry(a)})))
  text = "\n".join(verdict.section(str(tmp_path)))
  c = stats.paired(v, a)
  assert text.startswith("## When to pick VSGD")
  assert f"| {verdict.difference_text(_payload({})['workload'], c)} | paired t, 5 seeds |" in text
  assert "**win**" in text and "[choosing_lr.md](choosing_lr.md)" in text
  assert "tuning seed 1000; the reported seeds are fresh runs" in text


def test_difference_text_keeps_the_decimals_of_a_small_difference():
  w = {"metric": "MSE"}
  c = stats.Comparison(0.0076, 0.0023, 0.0128, 0.01, "paired t", 9, 10, 10)
  assert verdict.difference_text(w, c) == "+0.008 [+0.002, +0.013]"
  c = stats.Comparison(0.00026, 0.000014, 0.00051, 0.04, "paired t", 9, 10, 10)
  assert verdict.difference_text(w, c) == "+0.00026 [+0.00001, +0.00051]"
  assert verdict.difference_text({"metric": "accuracy"}, stats.Comparison(
      0.0045, -0.0027, 0.0116, 0.16, "paired t", 4, 5, 5)) == "+0.45 [-0.27, +1.16]"


def test_committed_guide_is_what_the_renderer_writes():
  with open(os.path.join(REPOSITORY, "docs", "choosing_lr.md")) as f:
    assert f.read() == guide.render(RESULTS)


def test_every_stated_start_is_the_guides():
  """The README, its snippet, the docs index, the how-to's first loop and the
  trainer's default all start at the rate the guide computes from the JSON,
  under warmup and cosine decay; the README's verdict sentence is the table's.
  """
  results = tables.load_protocol(RESULTS, tables.MAIN)
  lr, _, _ = guide.start_rate(results)
  rows = [verdict.compare_workload(p) for p in results.values()]
  counts = {v: sum(r["verdict"] == v for r in rows) for v in ("win", "tie", "loss")}
  words = ("none", "one", "two", "three", "four", "five")
  with open(os.path.join(REPOSITORY, "README.md")) as f:
    raw_readme = f.read()
  readme = " ".join(raw_readme.split())
  assert f"start from a peak of `{lr:g}` with warmup and cosine decay" in readme
  assert (f"beat the best tuned baseline on {words[counts['win']]} of {words[len(rows)]} "
          f"workloads: it tied on {words[counts['tie']]} and lost on "
          f"{words[counts['loss']]}") in readme
  # The snippets: the first optimizer each page builds is the recommended start.
  with open(os.path.join(REPOSITORY, "docs", "index.md")) as f:
    index = f.read()
  with open(os.path.join(REPOSITORY, "docs", "howto.md")) as f:
    howto = f.read()
  for page in (raw_readme, index, howto):
    first = page[page.index("warmup_cosine_decay_schedule("):]
    first = first[:first.index(")")]
    assert f"peak_value={lr:g}" in first, first
  default = configs.default()
  assert default.learning_rate == lr and default.schedule == "warmup_cosine"


def test_window_is_on_the_harness_half_decades():
  assert run.window(1e-2, 1) == (0.00316, 0.01, 0.0316)
  assert run.window(3.16e-3, 1) == (0.001, 0.00316, 0.01)
  assert set(run.window(3.16e-4, 2)) <= set(harness.FINE_GRID)


def test_last_rate_reads_the_schedule_then_the_constant_run(tmp_path):
  def write(folder, rates):
    folder.mkdir(parents=True, exist_ok=True)
    entries = {name: {"learning_rate": lr} for name, lr in rates.items()}
    (folder / "ttr_convmixer.json").write_text(json.dumps({"entries": entries}))
  write(tmp_path, {"vsgd": 0.1, "lion": 0.001})
  write(tmp_path / "warmup_cosine", {"vsgd": 0.01})
  assert run.last_rate(str(tmp_path), "warmup_cosine", "convmixer", "vsgd") == 0.01
  # lion never ran the ConvMixer under the schedule: the constant run's rate
  assert run.last_rate(str(tmp_path), "warmup_cosine", "convmixer", "lion") == 0.001
  assert run.last_rate(str(tmp_path), "warmup_cosine", "convmixer", "no_such") is None


def test_schedule_comparison_says_where_the_protocols_ran_different_lengths():
  protocols = {name: tables.load_protocol(RESULTS, name) for name in (guide.CONSTANT, guide.MAIN)}
  for payload in list(protocols[guide.CONSTANT].values()) + list(protocols[guide.MAIN].values()):
    payload["workload"]["steps"] = 100
  assert "different numbers of steps" not in "".join(guide.schedule_section(protocols))
  protocols[guide.MAIN]["mlp"]["workload"]["steps"] = 50
  text = "".join(guide.schedule_section(protocols))
  assert ("The two protocols ran different numbers of steps on MLP (50 steps against 100), "
          "so there the change mixes the schedule with the length of the run.") in text


@pytest.mark.slow
def test_run_workload_starts_each_entry_from_its_own_window():
  workload = dataclasses.replace(workloads.build("logreg", quick=True), steps=4)
  window = run.window(1e-2, 1)
  payload = run.run_workload(workload, ["vsgd"], True, "warmup_cosine", seeds=2,
                             grids={"vsgd": window})
  e = payload["entries"]["vsgd"]
  assert payload["workload"]["steps"] == 4
  assert payload["schedule"]["decay_steps"] == 4
  assert e["tuning"]["grid"] == list(window)
  assert e["tuning"]["seeds"] == [1000] and e["seeds"] == [0, 1]
  assert np.asarray(e["curves"]["val"]).shape == (2, 1)
  assert set(e["tuning"]["learning_rate"]) >= set(window)

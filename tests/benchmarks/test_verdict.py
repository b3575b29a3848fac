"""The results page's verdict and the generated learning-rate guide, on small
made-up result files and on the committed ones.
"""

import json
import os

import numpy as np
import pytest

from benchmarks.reporting import guide
from benchmarks.reporting import reading
from benchmarks.reporting import stats
from benchmarks.reporting import verdict
from examples import configs
from tests.support import REPOSITORY
from tests.support import verdict_payloads

RESULTS = os.path.join(REPOSITORY, "benchmarks", "results")


_entry, _payload = verdict_payloads.entry, verdict_payloads.payload


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
  """The answer first (the verdicts, then where to start), then the table against
  the best baseline and the one against Adam, then how they were made.
  """
  folder = tmp_path / "warmup_cosine"
  folder.mkdir()
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  a = [0.97, 0.975, 0.98, 0.98, 0.975]  # adam: below VSGD on every seed
  b = [0.996, 0.992, 0.995, 0.999, 0.997]  # lion, the best baseline: above it on every seed
  payload = _payload({"vsgd": _entry(v), "adam": _entry(a), "lion": _entry(b)})
  (folder / "ttr_mlp.json").write_text(json.dumps(payload))
  start = guide.start_line(reading.load_protocol(str(tmp_path), reading.MAIN))
  lines = verdict.section(str(tmp_path), start)
  text = "\n".join(lines)
  w = payload["workload"]
  assert lines[0] == "## When to pick VSGD\n"
  assert lines[1] == ("- **Against the best tuned baseline:** VSGD did not beat it; it lost "
                      "on MLP against lion.")
  assert lines[2] == "- **Against Adam**, the paper's baseline: it won on 1 (MLP) of 1."
  # The guide's rule picks the rate whose tuning run was best (0.97 at 0.01).
  assert lines[3] == ("- **Where to start:** a peak learning rate of 0.01 with warmup + cosine "
                      "decay, tuned by half decades around it ([the rule and its "
                      "evidence](choosing_lr.md); [in a training loop](howto.md)).")

  def cell(values):
    return f"{100 * np.mean(values):.2f} ± {100 * np.std(values, ddof=1):.2f}"
  best, adam = stats.paired(v, b), stats.paired(v, a)
  assert (f"| MLP, acc. % ↑ | {cell(v)} | lion: {cell(b)} | {verdict.difference_text(w, best)} "
          f"| paired t, 5 seeds | {best.p_value:.2g} | **loss** |") in lines
  assert (f"| MLP, acc. % ↑ | {cell(a)} | {verdict.difference_text(w, adam)} | paired t, 5 seeds "
          f"| {adam.p_value:.2g} | **win** |") in lines
  assert verdict.difference_text(w, adam) == "+1.40 [+0.88, +1.92]"  # t(0.975, 4) = 2.776
  order = [text.index(part) for part in (
      "Against the best tuned baseline", "**Where to start:**", "| workload | VSGD | best baseline |",
      "| workload | adam |", verdict.METHOD_HEADING, "Main protocol (warmup + cosine)",
      "How this run chose its rates")]
  assert order == sorted(order)
  assert "tuning seed 1000; the reported seeds are fresh runs" in text
  assert "Baselines not run" not in text
  # Without a start, the section goes from the verdicts straight to the table.
  assert "Where to start" not in "\n".join(verdict.section(str(tmp_path)))


def test_section_names_the_baselines_a_workload_did_not_run(tmp_path):
  folder = tmp_path / "warmup_cosine"
  folder.mkdir()
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  mlp = _payload({"vsgd": _entry(v), "adam": _entry(v[::-1]), "lion": _entry(v[1:] + v[:1])})
  convmixer = json.loads(json.dumps(mlp))
  convmixer["workload"]["name"] = "convmixer"
  del convmixer["entries"]["lion"]
  for name, payload in (("mlp", mlp), ("convmixer", convmixer)):
    (folder / f"ttr_{name}.json").write_text(json.dumps(payload))
  text = "\n".join(verdict.section(str(tmp_path)))
  assert "Baselines not run on a workload, and so not its best baseline: lion on ConvMixer." in text
  assert "it lost on none; it tied on 2 (ConvMixer and MLP)." in text
  assert "- **Against Adam**, the paper's baseline: it tied on 2 (ConvMixer, MLP) of 2." in text


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
  results = reading.load_protocol(RESULTS, reading.MAIN)
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


def test_schedule_comparison_says_where_the_protocols_ran_different_lengths():
  protocols = {name: reading.load_protocol(RESULTS, name) for name in (guide.CONSTANT, guide.MAIN)}
  for payload in list(protocols[guide.CONSTANT].values()) + list(protocols[guide.MAIN].values()):
    payload["workload"]["steps"] = 100
  assert "different numbers of steps" not in "".join(guide.schedule_section(protocols))
  protocols[guide.MAIN]["mlp"]["workload"]["steps"] = 50
  text = "".join(guide.schedule_section(protocols))
  assert ("The two protocols ran different numbers of steps on MLP (50 steps against 100), "
          "so there the change mixes the schedule with the length of the run.") in text

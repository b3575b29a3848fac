"""The results page: the committed page is what the renderer writes, and the
metrics print as the tables always printed them.
"""

import os

from benchmarks.reporting import guide
from benchmarks.reporting import reading
from benchmarks.reporting import render
from benchmarks.reporting import tables
from tests.support import REPOSITORY


def test_results_page_renders_the_committed_results():
  root = REPOSITORY
  text = render.render(os.path.join(root, "benchmarks", "results"),
                               "../benchmarks/results")
  # The committed page is what the renderer writes from the committed results.
  with open(os.path.join(root, "docs", "results.md")) as f:
    assert text == f.read()
  assert text.index("## Time to result") < text.index("## Step cost next to Adam")
  # Both train-step tables: the small common batch and each config's paper batch.
  small = text.index("## Whole train step, VSGD / Adam")
  paper = text.index("## Whole train step at the paper's batch sizes")
  assert "| cifar100_vgg16 | 8 |" in text[small:paper]
  assert "| cifar100_vgg16 | 256 |" in text[paper:]
  for line in text.splitlines():
    if line.startswith("!["):
      image = line[line.index("(") + 1:line.index(")")]
      assert os.path.exists(os.path.join(root, "docs", image)), image


def test_the_first_section_answers_first_and_says_where_to_start():
  results = os.path.join(REPOSITORY, "benchmarks", "results")
  text = render.render(results, "../benchmarks/results")
  first = text[text.index("## When to pick VSGD"):]
  first = first[:first.index("\n## ", 1)]
  lr, _, _ = guide.start_rate(reading.load_protocol(results, reading.MAIN))
  start = first.index(f"**Where to start:** a peak learning rate of {lr:g} with warmup + cosine "
                      "decay")
  assert f"[{guide.TITLE}](choosing_lr.md)" in first and "[choosing_lr.md]" not in first
  verdict_sentence = min(i for i in (first.find("VSGD beat"), first.find("VSGD is worth")) if i >= 0)
  best = first.index("| workload | VSGD | best baseline |")
  adam = first.index("| workload | adam |")
  method = first.index("Main protocol (warmup + cosine)")
  assert verdict_sentence < start < best < adam < method
  assert "Against Adam, the paper's baseline, it " in first[:start]
  # One Adam row per workload that ran both.
  rows = [line for line in first[adam:method].splitlines() if line.startswith("| ")]
  assert len(rows) == 1 + len(reading.load_protocol(results, reading.MAIN))


def test_each_kind_of_metric_prints_as_the_tables_print_it():
  e = {"test": [0.98, 0.99, 0.97], "test_mean": 0.98}
  accuracy, mse = {"metric": "accuracy"}, {"metric": "MSE"}
  suboptimality = {"metric": "suboptimality"}
  assert tables.fmt_metric(accuracy, 0.9512) == "95.12%"
  assert tables.fmt_metric(mse, 0.51234) == "0.512"
  assert tables.fmt_metric(suboptimality, 2.8e-4) == "2.80e-04"
  assert tables.fmt_metric(mse, float("nan")) == "diverged"
  assert tables.mean_std(accuracy, e) == "98.00 ± 1.00"
  assert tables.mean_std(mse, e) == "0.980 ± 0.010"
  assert tables.mean_std(suboptimality, {"test": [3e-4, 2e-4], "test_mean": 2.5e-4}) == (
      "2.5e-04 ± 7e-05")
  # t(0.975, 2) = 4.303: the mean's interval is 0.98 ± 4.303 * 0.01 / sqrt(3).
  assert tables.interval(accuracy, e) == "[95.52, 100.48]"
  assert tables.interval(mse, e) == "[0.955, 1.005]"
  assert tables.interval(suboptimality, {"test": [3e-4, 2e-4], "test_mean": 2.5e-4}) == (
      "[-3.9e-04, 8.9e-04]")
  assert tables.interval(mse, {"test": [0.5], "test_mean": 0.5}) == "—"
  # Every other metric prints as an MSE does.
  assert tables.metric_style({"metric": "bits per character"}) == tables.metric_style(mse)

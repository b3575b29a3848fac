"""The results pages are their templates filled from the committed JSON: the committed
pages and the two generated lines are what the renderer writes now, every value a
template names is given, no generated block is left in the API or the how-to, and the
reporting stays small.
"""

import glob
import os
import re

import pytest

from benchmarks.reporting import markdown
from benchmarks.reporting import render
from benchmarks.reporting import small
from tests.support import REPOSITORY

RESULTS = os.path.join(REPOSITORY, render.RESULTS)


def test_the_committed_pages_and_lines_are_what_the_renderer_writes():
  written = {**render.pages(RESULTS), **render.lines(RESULTS, REPOSITORY)}
  assert set(written) == {"docs/results.md", "docs/results_appendix.md", "docs/choosing_lr.md",
                          "README.md", "docs/index.md"}
  for path, text in written.items():
    with open(os.path.join(REPOSITORY, path)) as f:
      assert f.read() == text, f"{path} is stale: run python -m benchmarks.reporting"


def test_a_template_value_the_results_lack_is_an_error_naming_it():
  found = render.values(RESULTS)
  for page in (*render.PAGES, *(template for _, _, template in render.LINES)):
    assert markdown.slots(page) <= set(found), page
  del found["cpu_family"]
  with pytest.raises(ValueError, match="cpu_family"):
    markdown.fill("results", found)


def test_no_table_is_wider_than_the_text_column():
  with pytest.raises(ValueError, match="text column"):
    markdown.table(list("abcdefg"), [])
  with pytest.raises(ValueError, match="2 cells"):
    markdown.table(["a"], [["1", "2"]])


def test_only_the_readme_and_the_home_page_keep_a_generated_line():
  markers = {}
  for path in ["README.md", *glob.glob(os.path.join(REPOSITORY, "docs", "*.md"))]:
    with open(os.path.join(REPOSITORY, path)) as f:
      found = re.findall(r"<!-- ([\w-]+):start -->", f.read())
    if found:
      markers[os.path.relpath(os.path.join(REPOSITORY, path), REPOSITORY)] = found
  assert markers == {"README.md": ["verdict"], "docs/index.md": ["verdict"]}


def test_the_reporting_is_at_most_2000_lines_with_its_templates():
  folder = os.path.join(REPOSITORY, "benchmarks", "reporting")
  lines = 0
  for path in glob.glob(os.path.join(folder, "**", "*.*"), recursive=True):
    if path.endswith((".py", ".md")):
      with open(path) as f:
        lines += len(f.read().splitlines())
  assert lines <= 2000, lines


def _payload(entries: dict, higher: bool = False) -> dict:
  return {"workload": {"name": "charlm", "metric": "bits per character",
                       "higher_is_better": higher}, "entries": entries}


def _entry(test, rate=0.01):
  return {"test": test, "test_mean": sum(test) / len(test), "learning_rate": rate,
          "seeds": list(range(len(test)))}


def test_the_best_baseline_skips_vsgd_and_variants_but_not_adafactor_with_momentum():
  entries = {"vsgd": _entry([1.0, 1.1]), "adam": _entry([2.0, 2.1]),
             "adam+bf16_mu": _entry([0.5, 0.6]), "vsgd_muon": _entry([0.4, 0.5]),
             "adafactor+momentum": _entry([1.5, 1.6])}
  assert small.best_baseline(_payload(entries)) == "adafactor+momentum"
  assert small.best_baseline(_payload(entries, higher=True)) == "adam"


def test_a_comparison_is_decided_by_the_declared_margin_and_printed_in_one_cell():
  entries = {"vsgd": _entry([1.00, 1.01, 1.02, 0.99, 1.0]),
             "adam": _entry([1.10, 1.12, 1.11, 1.09, 1.1])}
  found = small.compare(_payload(entries), "vsgd", "adam", {"charlm": 0.02})
  assert found["verdict"] == "win" and found["comparison"].difference == pytest.approx(-0.1)
  assert small.cell(found).startswith("**win**: -0.100 [")
  assert small.compare(_payload(entries), "vsgd", "adam", {"charlm": 0.5})["verdict"] == \
      "equivalent"
  with pytest.raises(ValueError, match="margin"):
    small.compare(_payload(entries), "vsgd", "adam", {})


def test_the_start_rate_is_the_one_whose_worst_case_is_best():
  def tuned(val):
    return {**_entry([0.0]), "tuning": {"learning_rate": [0.001, 0.01, 0.1], "val": val}}
  results = {"a": {"workload": {"name": "a", "higher_is_better": False},
                   "entries": {"vsgd": tuned([2.0, 1.0, 1.5])}},
             "b": {"workload": {"name": "b", "higher_is_better": False},
                   "entries": {"vsgd": tuned([1.0, 1.2, 3.0])}}}
  # 0.01: worst 1.2x (on b); 0.001: 2x (on a); 0.1: 3x (on b).
  assert small.start_rate(results) == (0.01, pytest.approx(1.2), "b")

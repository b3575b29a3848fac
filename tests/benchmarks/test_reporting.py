"""The results pages are their templates filled from the committed JSON: the committed
pages and the two generated lines are what the renderer writes now, every value a
template names is given, and no generated block is left in the API or the how-to; the
reporting's size is checked outside the gate, by ``.ci/paperwork``.
"""

import glob
import json
import math
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


def _ladder_row(entry, minus_muon=None, speedup=None):
  return {"size": "xs", "params": 71_616, "budget": 2.5, "entry": entry, "rate": 0.1,
          "adam_rate": 0.01, "seeds": 3, "test_mean": 3.3821, "test_sd": 0.0241,
          "speedup_vs_adamw": speedup, "speedup_vs_muon": speedup, "minus_muon": minus_muon,
          "minus_normuon": None, "minus_muon_vs": None, "minus_adamw": None}


def test_the_ladder_sections_say_none_yet_until_a_summary_lands_then_give_its_rungs(tmp_path):
  from benchmarks.reporting import ladder
  from benchmarks.reporting import momentum
  empty = ladder.values(str(tmp_path), "img")
  assert empty["ladder_runs"] == "0" and empty["ladder_outcome"] == "none yet"
  assert empty["ladder_edge"] == empty["ladder_table"] == "none yet"
  assert empty["ladder_figure"] == ""  # no figure line on the page, not a "none yet" paragraph
  study = {"momentum_status": "none yet", "momentum_table": "none yet",
           "momentum_outcome": "none yet", "momentum_variants": "none yet",
           "momentum_figure": ""}
  assert momentum.values(str(tmp_path), "img") == study
  (tmp_path / "ladder").mkdir()
  summary = {"runs": 1234, "machines": ["AMD EPYC CPU, 2 cores"], "sizes_complete": ["xs"],
             "recommendation": {"outcome": "none: a CPU rung lacks a result", "s_star": None},
             "rows": [_ladder_row("adamw"),
                      _ladder_row("vsgd_muon", {"mean": -0.1431, "low": -0.1962, "high": -0.0907,
                                                "n": 3},
                                  {"mean": math.inf, "low": math.nan, "high": math.nan, "n": 3})]}
  (tmp_path / "ladder" / "summary.json").write_text(json.dumps(summary))
  found = ladder.values(str(tmp_path), "img")
  assert found["ladder_runs"] == "1,234" and found["ladder_complete"] == "71,616 parameters"
  assert found["ladder_outcome"] == "none yet (a CPU rung lacks a result)"
  assert found["ladder_figure"] == ""  # no speedup.png beside the summary
  assert momentum.values(str(tmp_path), "img") == study  # a summary without the study
  edge = found["ladder_edge"].splitlines()
  assert len(edge) == 3  # header, rule, and VSGD-Muon's one rung
  assert edge[2] == "| 71,616 · 2.5 | -0.143 [-0.196, -0.091] | - | - | - | unbounded |"
  table = found["ladder_table"].splitlines()
  assert table[2] == "| 71,616 · 2.5 | AdamW | 0.1 | 3.382 ± 0.024 (3) | - | - |"
  assert table[3].startswith("| 71,616 · 2.5 | VSGD-Muon | 0.1 (0.01) | 3.382 ± 0.024 (3) |")
  params = {"xs": 71_616, "s": 180_800, "m": 436_736}
  held = {"outcome": "vsgd_muon is the default up to S*", "s_star": "s", "s_star_params": 180_800,
          "beyond": "normuon", "sizes_measured": ["xs", "s", "m"], "params": params,
          "budgets": [2.5, 10.0]}
  scope = ("on character-level transformer LMs of 71,616, 180,800 and 436,736 parameters after "
           "2.5 and 10 training characters a parameter, against Muon at its default momentum "
           "(0.95, not tuned)")
  assert ladder.outcome(held) == ("`vsgd_muon` is the default at 71,616 and 180,800 parameters; "
                                  f"at 436,736, NorMuon, {scope}")
  assert ladder.outcome({**held, "s_star": "m"}) == (
      f"`vsgd_muon` is the default at 71,616, 180,800 and 436,736 parameters, {scope}")
  tuned = {"s_star": "xs", "s_star_params": 71_616, "never_behind": False, "best_beta": {}}
  assert ladder.outcome(held, tuned) == (
      "`vsgd_muon` is the default at 71,616 parameters; at 180,800 and 436,736, Muon at the best "
      "beta the study found at each size and budget, on character-level transformer LMs of "
      "71,616, 180,800 and 436,736 parameters after 2.5 and 10 training characters a parameter, "
      "against Muon with its momentum tuned (beta 0.8 to 0.98, grown to 0.7 or 0.99 at an edge, "
      "each at its own rate)")
  assert ladder.outcome({**held, "outcome": "vsgd_muon is not the default", "s_star": None,
                         "beyond": "muon"}) == f"`vsgd_muon` is not the default; the pick is Muon, {scope}"


def test_the_sensitivity_table_has_a_column_an_adamw_part_rate_and_dashes_where_not_run():
  from benchmarks.reporting import ladder
  def entry(rate, mean):
    return {"rate": rate, "test_mean": mean, "test_sd": 0.0051}
  ahead = {"mean": -0.0123, "low": -0.0201, "high": -0.0046, "n": 3, "verdict": "ahead"}
  rows = [{"factor": 1 / math.sqrt(10), "adam_rate": 0.001, "versus": {},
           "entries": {"muon": entry(0.01, 1.7404)}},
          {"factor": 1.0, "adam_rate": 0.00316, "versus": {"muon": ahead, "normuon": ahead},
           "entries": {"muon": entry(0.01, 1.7361), "normuon": entry(0.01, 1.7359),
                       "vsgd_muon": entry(0.0316, 1.7238)}}]
  table = ladder.sensitivity_table(rows).splitlines()
  assert table[0] == "| entry (matrix rate) | AdamW part 0.001 (×0.316) | AdamW part 0.00316 |"
  assert table[2:] == [
      "| Muon (0.01) | 1.740 ± 0.005 | 1.736 ± 0.005 |",
      "| NorMuon (0.01) | - | 1.736 ± 0.005 |",
      "| VSGD-Muon (0.0316) | - | 1.724 ± 0.005 |",
      "| VSGD-Muon − Muon | - | -0.012 [-0.020, -0.005] ahead |",
      "| VSGD-Muon − NorMuon | - | -0.012 [-0.020, -0.005] ahead |"]
  assert ladder.sensitivity_outcome(rows) == (
      "VSGD-Muon against Muon / NorMuon, by AdamW part: 0.001 - / -; 0.00316 ahead / ahead")


def test_the_own_best_outcome_names_each_entrys_adamw_part_and_whether_the_size_holds():
  from benchmarks.reporting import ladder
  assert ladder.own_best_outcome({"size": "xs", "rows": [], "best": {}, "versus": {},
                                  "holds": None}) == (
      "none yet (an entry lacks an AdamW part's runs); until then the size does not hold")
  ahead = {"mean": -0.0512, "low": -0.0803, "high": -0.0221, "n": 3, "verdict": "ahead"}
  tie = {"mean": -0.0101, "low": -0.0302, "high": 0.0100, "n": 3, "verdict": "tie"}
  best = {e: {"adam_rate": rate, "val_mean": 2.5, "test_mean": 2.5}
          for e, rate in (("muon", 0.0316), ("normuon", 0.0316), ("muon_vs", 0.01),
                          ("vsgd_muon", 0.00316))}
  found = {"size": "xs", "params": 71_616, "rows": [], "best": best,
           "versus": {"muon": ahead, "normuon": tie}, "holds": True}
  assert ladder.own_best_outcome(found) == (
      "each entry's own-best AdamW part: Muon 0.0316, NorMuon 0.0316, Muon-VS 0.01, VSGD-Muon "
      "0.00316. There, VSGD-Muon − Muon -0.051 [-0.080, -0.022] ahead; VSGD-Muon − NorMuon "
      "-0.010 [-0.030, +0.010] tie: **71,616 parameters keep holding**")
  lost = {**found, "versus": {"muon": tie, "normuon": tie}, "holds": False}
  assert ladder.own_best_outcome(lost).endswith("tie: **71,616 parameters no longer hold**")
  # A best at the capped window's edge is flagged.
  edge = {**found, "best": {**best, "muon": {**best["muon"], "adam_rate": 0.1, "on_edge": True}}}
  assert ladder.own_best_outcome(edge).startswith(
      "each entry's own-best AdamW part: Muon 0.1 (on its window's edge), NorMuon 0.0316,")


def test_the_shares_table_has_a_row_a_size_its_worst_shortfalls_and_dashes_where_not_run():
  from benchmarks.reporting import ladder
  def share(value, val, adam):
    return {"share": value, "adam_rate": adam, "val_mean": val, "test_mean": val + 0.08,
            "test_sd": 0.0064}
  third = 1 / math.sqrt(10)
  found = {"sizes": [{"size": "xs", "params": 71_616, "rate": 0.1,
                      "shares": [share(0.1, 2.5316, 0.01)]},
                     {"size": "m", "params": 436_736, "rate": 0.01,
                      "shares": [share(0.1, 1.7079, 0.000999), share(third, 1.6801, 0.00316),
                                 share(1.0, 1.6668, 0.00999)]}],
           "complete": False, "worst_shortfall": [], "default": 0.1}
  table = ladder.shares_table(found).splitlines()
  assert table[0] == "| parameters (matrix rate) | share 0.1 | share 0.316 | share 1 |"
  assert table[2:] == [
      "| 71,616 (0.1) | 2.532 (test 2.612 ± 0.006; AdamW part 0.01) | - | - |",
      "| 436,736 (0.01) | 1.708 (test 1.788 ± 0.006; AdamW part 0.000999) | 1.680 (test 1.760 "
      "± 0.006; AdamW part 0.00316) | 1.667 (test 1.747 ± 0.006; AdamW part 0.00999) |",
      "| largest shortfall | - | - | - |"]
  assert ladder.share_outcome(found) == "none yet (a size lacks a share); the default stays 0.1"
  done = {**found, "complete": True, "default": third,
          "worst_shortfall": [{"share": 0.1, "shortfall": 0.0411},
                              {"share": third, "shortfall": 0.0133},
                              {"share": 1.0, "shortfall": 0.09}]}
  assert ladder.shares_table(done).splitlines()[-1] == (
      "| largest shortfall | 0.041 | 0.013 | 0.090 |")
  assert ladder.share_outcome(done) == "the default share is 0.316"


def test_the_ladder_chart_is_drawn_once_a_speedup_has_been_measured(tmp_path):
  from benchmarks.reporting import plots
  interval = {"mean": 1.27, "low": 1.17, "high": 1.37, "n": 3}
  found = {"rows": [_ladder_row("adamw"), _ladder_row("vsgd_muon")]}
  assert plots.ladder_chart(found, str(tmp_path / "none.png")) is None
  assert not (tmp_path / "none.png").exists()
  # AdamW's own speedup is not drawn: the chart is the other entries' against it.
  found["rows"][0]["speedup_vs_adamw"] = interval
  assert plots.ladder_chart(found, str(tmp_path / "none.png")) is None
  found["rows"][1]["speedup_vs_adamw"] = interval
  path = plots.ladder_chart(found, str(tmp_path / "speedup.png"))
  assert path == str(tmp_path / "speedup.png") and os.path.getsize(path) > 1000

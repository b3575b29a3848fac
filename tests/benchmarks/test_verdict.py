"""The results page's verdict and the generated learning-rate guide, on small
made-up result files and on the committed ones.
"""

import json
import os

import numpy as np
import pytest

from benchmarks.reporting import decisions
from benchmarks.reporting import guide
from benchmarks.reporting import reading
from benchmarks.reporting import stats
from benchmarks.reporting import tables
from benchmarks.reporting import verdict
from examples import configs
from tests.support import REPOSITORY
from tests.support import verdict_payloads

RESULTS = os.path.join(REPOSITORY, "benchmarks", "results")


_entry, _payload = verdict_payloads.entry, verdict_payloads.payload
DECLARED = verdict_payloads.declared()


def test_best_baseline_skips_vsgd_entries_and_variants_but_not_adafactor_with_momentum():
  payload = _payload({"vsgd": _entry([0.99, 0.98]), "constant_vsgd": _entry([1.0, 1.0]),
                      "vsgd_muon": _entry([1.0, 1.0]),
                      "adam+bf16_mu": _entry([1.0, 1.0]), "adam": _entry([0.95, 0.96]),
                      "lion": _entry([0.97, 0.96])})
  assert verdict.best_baseline(payload) == "lion"
  assert verdict.best_baseline(_payload(payload["entries"], higher_is_better=False)) == "adam"
  payload["entries"]["adafactor+momentum"] = _entry([0.98, 0.975])
  assert verdict.best_baseline(payload) == "adafactor+momentum"
  payload["entries"]["muon"] = _entry([0.99, 0.985])
  assert verdict.best_baseline(payload) == "muon"
  assert [verdict.is_baseline(n) for n in ("adafactor", "adafactor+momentum", "muon",
                                           "adam+bf16_mu", "vsgd+bf16_state", "vsgd_muon")] \
      == [True, True, True, False, False, False]


def test_compare_workload_decides_by_the_rule_with_the_workloads_margin():
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  a = [0.97, 0.975, 0.98, 0.98, 0.975]
  row = verdict.compare_workload(_payload({"vsgd": _entry(v), "adam": _entry(a)}), DECLARED)
  # +1.40 points [+0.88, +1.92]: past the half-point margin, so a win
  assert row["baseline"] == "adam" and row["verdict"] == "win" and row["margin"] == 0.005
  assert row["comparison"].test == "paired t"
  assert row["comparison"].difference == pytest.approx(np.mean(v) - np.mean(a))
  # other seeds: Welch's test, and lower is better turns the win into a loss
  row = verdict.compare_workload(_payload(
      {"vsgd": _entry(v), "adam": _entry(a, seeds=[5, 6, 7, 8, 9])}, higher_is_better=False),
      DECLARED)
  assert row["comparison"].test == "Welch t" and row["verdict"] == "loss"
  # differences of one point either way: 0 [-0.88, +0.88] holds 0 and reaches past the margin
  unsure = verdict.compare_workload(_payload({"vsgd": _entry(v), "adam": _entry(v[::-1])}),
                                    DECLARED)
  assert verdict.difference_text(unsure["workload"], unsure["comparison"]) == \
      "+0.00 [-0.88, +0.88]"
  assert unsure["verdict"] == "inconclusive"
  # a tenth of a point either way: 0 [-0.12, +0.12] lies inside +-0.50
  close = [0.989, 0.986, 0.99, 0.994, 0.991]
  same = verdict.compare_workload(_payload({"vsgd": _entry(v), "adam": _entry(close)}), DECLARED)
  assert verdict.difference_text(same["workload"], same["comparison"]) == "+0.00 [-0.12, +0.12]"
  assert same["verdict"] == "equivalent"


def test_a_workload_without_a_declared_margin_is_an_error_naming_the_file():
  payload = _payload({"vsgd": _entry([0.99, 0.98]), "adam": _entry([0.95, 0.96])})
  payload["workload"]["name"] = "imagenet"
  with pytest.raises(ValueError, match="'imagenet' in benchmarks/results/margins.json"):
    verdict.compare_workload(payload, DECLARED)


def test_margins_show_in_the_tables_units():
  assert verdict.margin_text({"metric": "accuracy"}, 0.005) == "±0.50"
  assert verdict.margin_text({"metric": "MSE"}, 0.01) == "±0.010"
  assert verdict.margin_text({"metric": "bits per character"}, 0.02) == "±0.020"
  assert verdict.margin_text({"metric": "suboptimality"}, 0.0005) == "±5.0e-04"


def _row(name, metric, verdict_, p, low, high, margin):
  w = {"name": name, "metric": metric, "higher_is_better": metric == "accuracy"}
  c = stats.Comparison((low + high) / 2, low, high, p, "paired t", 9, 10, 10)
  return {"workload": w, "baseline": "adam", "comparison": c, "margin": margin,
          "verdict": verdict_}


# The committed main protocol's rows against the best baseline, as they stood when
# the margins were declared (ConvMixer, MLP, char LM, diabetes, logistic).
ROWS = [_row("convmixer", "accuracy", "inconclusive", 0.66, -0.0045, 0.0067, 0.005),
        _row("mlp", "accuracy", "equivalent", 0.24, -0.0011, 0.0039, 0.005),
        _row("charlm", "bits per character", "loss", 2.7e-9, 0.119, 0.145, 0.02),
        _row("diabetes", "MSE", "loss", 0.024, 0.001, 0.015, 0.01),
        _row("logreg", "suboptimality", "equivalent", 1.1e-6, 2.4e-4, 3.6e-4, 5e-4)]


def test_holm_s_result_is_in_the_cell_of_each_win_or_loss_it_does_not_keep():
  # p sorted: 2.7e-9 <= 0.05/5 and 1.1e-6 <= 0.05/4 are rejected; 0.024 > 0.05/3 stops it.
  rows = verdict.with_holm(ROWS)
  assert [r["holm"] for r in rows] == [False, False, True, False, True]
  charlm, diabetes = rows[2], rows[3]
  assert verdict.cell(charlm["workload"], charlm).startswith("**loss**: +0.132 [+0.119, +0.145]")
  assert verdict.cell(diabetes["workload"], diabetes).startswith(
      "**loss** (not under Holm): +0.008 [+0.001, +0.015] (±0.010), paired t, p 0.024")
  # An equivalent or an inconclusive result has nothing for Holm to undo.
  assert verdict.cell(rows[0]["workload"], rows[0]).startswith("**inconclusive**: ")
  # Alone in its family, the diabetes loss holds.
  alone = verdict.with_holm(ROWS[3:4])[0]
  assert alone["holm"] and verdict.cell(alone["workload"], alone).startswith("**loss**: ")


def test_section_reads_the_main_protocol(tmp_path):
  """The table against the best baseline and the one against Adam, each with its
  margin and Holm's result in the cell, then how they were made; the margins' own table.
  """
  folder = tmp_path / "warmup_cosine"
  folder.mkdir()
  verdict_payloads.write_margins(tmp_path)
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  a = [0.97, 0.975, 0.98, 0.98, 0.975]  # adam: below VSGD on every seed
  b = [0.996, 0.992, 0.995, 0.999, 0.997]  # lion, the best baseline: above it on every seed
  payload = _payload({"vsgd": _entry(v), "adam": _entry(a), "lion": _entry(b)})
  (folder / "ttr_mlp.json").write_text(json.dumps(payload))
  lines = verdict.section(str(tmp_path))
  text = "\n".join(lines)
  w = payload["workload"]
  assert lines[0] == "## VSGD against the tuned baselines"
  assert lines[2].startswith("The five workloads")

  def cell(values):  # at the entries' tuned rate, 0.01
    return f"{100 * np.mean(values):.2f} ± {100 * np.std(values, ddof=1):.2f} (0.01)"
  # -0.58 points [-0.74, -0.42]: it excludes 0 and reaches past the 0.50 margin
  best, adam = stats.paired(v, b), stats.paired(v, a)
  assert verdict.difference_text(w, best) == "-0.58 [-0.74, -0.42]"
  assert (f"| MLP, acc. % ↑ | {cell(v)} | lion: {cell(b)} | **loss**: -0.58 [-0.74, -0.42] "
          f"(±0.50), paired t, p {best.p_value:.2g} |") in lines
  assert (f"| MLP, acc. % ↑ | {cell(a)} | **win**: +1.40 [+0.88, +1.92] (±0.50), paired t, "
          f"p {adam.p_value:.2g} |") in lines
  assert verdict.difference_text(w, adam) == "+1.40 [+0.88, +1.92]"  # t(0.975, 4) = 2.776
  assert not any(line.startswith("Under Holm") for line in lines)  # the cells say it
  assert "Tests: paired t, 5 seeds. *Margin*: the workload's declared practical-" in text
  assert "| MLP | ±0.50 points of accuracy | half a point |" in verdict.margins_table(
      str(tmp_path))
  order = [text.index(part) for part in (
      "| workload | VSGD (rate) | best baseline (rate) |", "| workload | adam (rate) |",
      "### How the verdicts were made",
      "Main protocol (warmup + cosine)", "How this run chose its rates")]
  assert order == sorted(order)
  assert ("**equivalent**; else one whose interval excludes 0 is a **win** or a **loss**; "
          "else the runs could not tell a tie from a difference that matters: "
          "**inconclusive**") in text
  assert "tuning seed 1000; the reported seeds are fresh runs" in text
  assert "**tie**" not in text


def test_a_family_with_nothing_to_compare_says_so_rather_than_print_an_empty_table():
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  payload = _payload({"vsgd": _entry(v), "lion": _entry(v[::-1])})  # no Adam here
  rows, adam_rows = verdict.comparisons({"mlp": payload}, DECLARED)
  assert len(rows) == 1 and adam_rows == []
  best, adam = verdict.tables_of({"mlp": payload}, rows, adam_rows)
  assert best[0] == "| workload | VSGD (rate) | best baseline (rate) | difference, 95% CI (margin) |"
  assert adam == ["No run of both to compare."]


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
  under warmup and cosine decay (the README's verdict sentence: ``test_readme``).
  """
  results = reading.load_protocol(RESULTS, reading.MAIN)
  lr, _, _ = guide.start_rate(results)
  with open(os.path.join(REPOSITORY, "README.md")) as f:
    raw_readme = f.read()
  readme = " ".join(raw_readme.split())
  assert f"start from a peak of `{lr:g}` with warmup and cosine decay" in readme
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
  declared = decisions.margins(RESULTS)
  assert "different numbers of steps" not in "".join(guide.schedule_section(protocols, declared))
  protocols[guide.MAIN]["mlp"]["workload"]["steps"] = 50
  text = "".join(guide.schedule_section(protocols, declared))
  assert ("The two protocols ran different numbers of steps on MLP (50 steps against 100), "
          "so there the change mixes the schedule with the length of the run.") in text


def test_the_bfloat16_state_is_judged_at_vsgds_rate_where_it_chose_another():
  v = [0.99, 0.985, 0.99, 0.995, 0.99]
  low = [0.98, 0.975, 0.982, 0.984, 0.979]  # about a point lower on every seed
  payload = _payload({"vsgd": _entry(v, lr=1e-2), "vsgd+bf16_state": _entry(low, lr=1e-3)})
  protocols = {guide.MAIN: {"mlp": payload}}
  lines = guide.precision_section(protocols, DECLARED)
  assert lines[0] == "## bfloat16 state"
  mean_std = verdict.tables.mean_std
  w = payload["workload"]
  c = stats.paired(low, v)
  row = next(line for line in lines if line.startswith("| MLP"))
  # no run at vsgd's rate: judged at its own, where the rate and the rounding mix
  assert row == (f"| MLP | `vsgd+bf16_state` {mean_std(w, payload['entries']['vsgd+bf16_state'])}"
                 f" (0.001) | `vsgd` {mean_std(w, payload['entries']['vsgd'])} (0.01) | "
                 f"**loss**: {verdict.difference_text(w, c)} (±0.50), paired t, "
                 f"p {c.p_value:.2g} |")
  assert guide.precision_section({guide.MAIN: {"mlp": _payload({"vsgd": _entry(v)})}},
                                 DECLARED) == []
  # trained at vsgd's rate on its seeds too, it is judged there, by the rounding alone:
  # within 0.2 points of vsgd on every seed, equivalent within the 0.5 margin
  near = [0.991, 0.983, 0.99, 0.996, 0.989]
  payload["same_rate"] = {"vsgd+bf16_state": {"base": "vsgd", "learning_rate": 1e-2,
                                              "seeds": list(range(5)), "test": near}}
  row = next(line for line in guide.precision_section(protocols, DECLARED)
             if line.startswith("| MLP"))
  c = stats.paired(near, v)
  assert row == (f"| MLP | `vsgd+bf16_state` {mean_std(w, {'test': near, 'test_mean': np.mean(near)})}"
                 f" (0.01, `vsgd`'s) | `vsgd` {mean_std(w, payload['entries']['vsgd'])} (0.01) | "
                 f"**equivalent**: {verdict.difference_text(w, c)} (±0.50), paired t, "
                 f"p {c.p_value:.2g} |")


def test_every_chosen_rate_at_an_edge_of_its_window_is_named(tmp_path):
  """A chosen rate at the lowest or highest rate tried is shown, whichever
  protocol's folder holds it; one inside its window is not.
  """
  def write(folder, workload, entries):
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"workload": {"name": workload}, "entries": {
        name: {"learning_rate": lr, "tuning": {"learning_rate": tried}}
        for name, (lr, tried) in entries.items()}}
    (folder / f"ttr_{workload}.json").write_text(json.dumps(payload))
  write(tmp_path / "warmup_cosine", "mlp", {"vsgd": (0.01, [0.00316, 0.01, 0.0316]),
                                            "adam": (0.1, [0.01, 0.0316, 0.1])})
  write(tmp_path / "long_horizon" / "warmup_cosine", "diabetes",
        {"vsgd": (1e-5, [1e-5, 3.16e-5])})
  (tmp_path / "ttr_run.json").write_text(json.dumps({"wall_s": 1.0}))  # not a workload's
  assert verdict.edge_rates(str(tmp_path)) == [
      ("long_horizon/warmup_cosine", "diabetes", "vsgd", 1e-5, "lowest"),
      ("warmup_cosine", "mlp", "adam", 0.1, "highest")]
  assert verdict.edge_line(str(tmp_path)).endswith(
      "`vsgd` on diabetes (long_horizon/warmup_cosine): 1e-05, the lowest tried; `adam` on "
      "MLP (warmup_cosine): 0.1, the highest tried.")
  write(tmp_path / "warmup_cosine", "mlp", {"adam": (0.0316, [0.01, 0.0316, 0.1])})
  write(tmp_path / "long_horizon" / "warmup_cosine", "diabetes", {})
  assert verdict.edge_line(str(tmp_path)).startswith("Every chosen rate, in every protocol")


def test_tuning_text_names_the_workloads_of_each_set_of_tuning_seeds():
  def payload(*seed_sets):
    return {"entries": {f"e{i}": {"tuning": {"seeds": list(s)}} for i, s in enumerate(seed_sets)}}
  three = (1000, 1001, 1002)
  assert tables.tuning_text({"mlp": payload(three, three), "charlm": payload(three)}) == (
      "rates chosen on tuning seeds 1000, 1001, 1002; the reported seeds are fresh runs")
  # a workload still on one tuning seed is named, never folded into the others' set
  assert tables.tuning_text({"mlp": payload(three), "convmixer": payload((1000,))}) == (
      "rates chosen on tuning seeds 1000, 1001, 1002 for MLP; on tuning seed 1000 for "
      "ConvMixer; the reported seeds are fresh runs")
  assert tables.tuning_text({"mlp": payload(())}) == (
      "rates chosen on the seed-0 run, which is also one of the reported seeds")


def test_a_workload_whose_margin_cannot_decide_gets_no_verdict_anywhere():
  # Logistic's declared margin (5e-4) is about the suboptimality every optimizer
  # reaches: its rows stay in the tables as numbers, but no verdict is drawn on it.
  assert not decisions.decides("logreg") and decisions.decides("mlp")
  main = reading.load_protocol(RESULTS, reading.MAIN)
  declared = decisions.margins(RESULTS)
  logistic = main["logreg"]
  assert verdict.VSGD in logistic["entries"] and "adam" in logistic["entries"]
  assert verdict.compare_with(logistic, "adam", declared) is None
  assert verdict.compare_workload(logistic, declared) is None
  assert verdict.compare_with(main["mlp"], "adam", declared) is not None
  with open(os.path.join(REPOSITORY, "docs", "results_small_workloads.md")) as f:
    appendix = f.read()
  assert decisions.NO_VERDICT["logreg"] in appendix
  verdict_rows = [line for line in appendix.splitlines()
                  if line.startswith("| logistic") and "**" in line]
  assert verdict_rows == []  # no table row of logistic carries a verdict
  assert "| logistic, subopt. ↓ |" in appendix  # its numbers are still there


def test_a_cell_draws_no_verdict_on_a_workload_without_verdicts():
  c = stats.paired([0.98, 0.975, 0.982, 0.984, 0.979], [0.99, 0.985, 0.99, 0.995, 0.99])
  found = {"comparison": c, "margin": 0.005, "verdict": "loss"}
  mlp = {"name": "mlp", "metric": "accuracy"}
  assert verdict.cell(mlp, found).startswith(
      f"**loss**: {verdict.difference_text(mlp, c)} (±0.50), paired t, p ")
  logistic = {"name": "logreg", "metric": "accuracy"}
  assert not decisions.decides("logreg")
  assert verdict.cell(logistic, found) == (
      f"{verdict.difference_text(logistic, c)}, paired t, p {c.p_value:.2g} (no verdict on this "
      "workload)")

"""The small workloads' page's first section: per workload of the main
protocol, VSGD against the best tuned baseline and against Adam (the paper's
baseline), each decided on the per-seed test metric by the declared rule
(``decisions``: win, loss, equivalent within the workload's margin from
``margins.json``, or inconclusive) on a t-test's interval (``stats``); the
tables, then how they were made; and the one cell every comparison prints as
(``cell``).
"""

from __future__ import annotations

import glob
import os

from benchmarks import common
from benchmarks.reporting import decisions
from benchmarks.reporting import markdown
from benchmarks.reporting import reading
from benchmarks.reporting import stats
from benchmarks.reporting import tables

VSGD = "vsgd"
ADAM = "adam"  # the paper's baseline
# Entries with a "+" that are optimizers of their own, not a variant of one.
PLUS_BASELINES = ("adafactor+momentum",)
# Each decision as a verb phrase: "VSGD won", "it was equivalent".
VERBS = {"win": "won", "loss": "lost", "equivalent": "was equivalent",
         "inconclusive": "was inconclusive"}


def is_baseline(name: str) -> bool:
  """An optimizer VSGD is compared with: not a VSGD entry, not a variant (``+``,
  as ``adam+bf16_mu``) unless an optimizer of its own (``PLUS_BASELINES``).
  """
  return "vsgd" not in name and ("+" not in name or name in PLUS_BASELINES)


def margin_text(workload: dict, margin: float) -> str:
  """A margin in the table's units (accuracy in points): ``±0.50``."""
  return "±" + tables.metric_style(workload).change(margin).lstrip("+")


def best_baseline(payload: dict) -> str | None:
  """The baseline with the best mean test metric on a workload, or None."""
  sign = 1.0 if payload["workload"]["higher_is_better"] else -1.0
  found = [n for n, e in payload["entries"].items()
           if is_baseline(n) and e["test_mean"] == e["test_mean"]]
  return max(found, key=lambda n: sign * payload["entries"][n]["test_mean"], default=None)


def compare_with(payload: dict, other: str | None, declared: dict[str, float],
                 name: str = VSGD) -> dict | None:
  """``name`` (VSGD) against ``other`` on one workload: the names, the comparison
  (``name`` minus ``other``), the workload's declared margin (``declared``,
  ``decisions.margins``) and the verdict by the rule; None where either is missing.
  """
  entries = payload["entries"]
  if name not in entries or other is None or other not in entries:
    return None
  w = payload["workload"]
  if not decisions.decides(w["name"]):
    return None
  return {"workload": w, "baseline": other, **stats.judged(
      entries[name], entries[other], w["higher_is_better"],
      decisions.margin_for(declared, w["name"]))}


def compare_workload(payload: dict, declared: dict[str, float]) -> dict | None:
  """VSGD against the best baseline on one workload (``compare_with``)."""
  return compare_with(payload, best_baseline(payload), declared)


def difference_text(workload: dict, c: stats.Comparison) -> str:
  """A comparison's difference and its interval in the metric's units (accuracy
  in points), the three with the same number of decimals.
  """
  text = tables.metric_style(workload).differences((c.difference, c.low, c.high))
  return f"{text[0]} [{text[1]}, {text[2]}]"


def cell(workload: dict, found: dict | None) -> str:
  """A comparison in one cell: the verdict, the difference [95% interval] with the
  margin, the test and p; a dash where there is none. A workload on which no
  verdict is drawn (``decisions.NO_VERDICT``) shows its difference alone.
  """
  if found is None:
    return "-"
  c = found["comparison"]
  if not decisions.decides(workload["name"]):
    return (f"{difference_text(workload, c)}, {c.test}, p {c.p_value:.2g} (no verdict on "
            "this workload)")
  held = decisions.unheld(found["verdict"], found.get("holm", True))
  return (f"**{found['verdict']}**{held}: {difference_text(workload, c)} "
          f"({margin_text(workload, found['margin'])}), {c.test}, p {c.p_value:.2g}")


def with_holm(rows: list[dict]) -> list[dict]:
  """``rows`` (one table, a family of comparisons), each with ``holm``: whether its
  win or loss holds under Holm's correction of the family's p-values.
  """
  held = decisions.holm([r["comparison"].p_value for r in rows])
  return [{**r, "holm": holds} for r, holds in zip(rows, held, strict=True)]


def comparisons(results: dict, declared: dict[str, float]) -> tuple[list[dict], list[dict]]:
  """VSGD against the best tuned baseline on each workload of ``results`` that
  decides, and against Adam: the rows of the two tables (``tables_of``).
  """
  found = [compare_workload(p, declared) for p in results.values()]
  against_adam = [compare_with(p, ADAM, declared) for p in results.values()]
  return ([r for r in found if r is not None], [r for r in against_adam if r is not None])


def tests_text(compared: list[stats.Comparison]) -> str:
  """The tests a family of comparisons used, with their seeds."""
  return "; ".join(sorted({f"{c.test}, {c.n_a} seeds" for c in compared})) or "no comparison"


def tables_of(results: dict, rows: list, adam_rows: list) -> tuple[list[str], list[str]]:
  """The two tables, VSGD against the best tuned baseline, then against Adam, each
  a family for Holm's correction, whose result is in the cell.
  """
  def entry(r, name):  # the test metric at its tuned rate
    e = results[r["workload"]["name"]]["entries"][name]
    return f"{tables.mean_std(r['workload'], e)} ({e['learning_rate']:g})"

  def family(header, cells):  # no table where there is nothing to compare
    return markdown.table(header, cells) if cells else ["No run of both to compare."]
  return (family(["workload", "VSGD (rate)", "best baseline (rate)",
                  "difference, 95% CI (margin)"],
                 [[tables.short_header(r["workload"]), entry(r, VSGD),
                   f"{r['baseline']}: {entry(r, r['baseline'])}", cell(r["workload"], r)]
                  for r in with_holm(rows)]),
          family(["workload", "adam (rate)", "difference, 95% CI (margin)"],
                 [[tables.short_header(r["workload"]), entry(r, ADAM), cell(r["workload"], r)]
                  for r in with_holm(adam_rows)]))


def margins_table(folder: str) -> list[str]:
  """The appendix's table of the declared margins: workload, margin in the tables'
  units (from the workload's metric where a result file names it), and why, from
  ``margins.json``; nothing where no margin is declared.
  """
  if not os.path.exists(os.path.join(folder, decisions.MARGINS_FILE)):
    return []
  declared, why = decisions.margins(folder), decisions.reasons(folder)
  metrics = {}
  for sub in (folder, os.path.join(folder, reading.WIDE_FOLDER),
              os.path.join(folder, reading.LONG_HORIZON_FOLDER)):
    if os.path.isdir(os.path.join(sub, reading.MAIN)):
      metrics.update({n: p["workload"]["metric"]
                      for n, p in reading.load_protocol(sub, reading.MAIN).items()})
  rows = []
  for name, margin in declared.items():
    metric = metrics.get(name, "")
    unit = " points of accuracy" if metric == "accuracy" else f" {metric}".rstrip()
    rows.append([tables.SHORT_NAMES.get(name, name),
                 margin_text({"name": name, "metric": metric}, margin) + unit, why[name]])
  return markdown.section("results_appendix", "margins",
                          table=markdown.table(["workload", "margin", "why"], rows))


def section(folder: str) -> list[str]:
  """The verdict section's markdown lines (empty without main-protocol results): the
  tables, then how they were made.
  """
  results = reading.load_protocol(folder, reading.MAIN) if reading.MAIN in reading.load_all(
      folder) else {}
  if not any(VSGD in p["entries"] for p in results.values()):
    return []
  rows, adam_rows = comparisons(results, decisions.margins(folder))
  if not rows:
    return []
  best, adam = tables_of(results, rows, adam_rows)
  return markdown.section(
      "results_small_workloads", "verdicts",
      tests=tests_text([r["comparison"] for r in rows + adam_rows]),
      best=best, adam=adam, tuning=tables.tuning_text(results),
      no_verdict=[why for name, why in decisions.NO_VERDICT.items() if name in results],
      edges=edge_line(folder))


def at_base_rate(payload: dict, variant: str, declared: dict[str, float]) -> dict | None:
  """``variant`` trained at its base optimizer's tuned rate on the base's seeds
  (the protocol's ``same_rate`` runs) against the base, as ``compare_with``
  gives, with the run; None where the file holds no such run.
  """
  run = payload.get("same_rate", {}).get(variant)
  if run is None or run["base"] not in payload["entries"] or not decisions.decides(
      payload["workload"]["name"]):
    return None
  w = payload["workload"]
  return {"workload": w, "baseline": run["base"], "run": run, **stats.judged(
      run, payload["entries"][run["base"]], w["higher_is_better"],
      decisions.margin_for(declared, w["name"]))}


def edge_rates(folder: str) -> list[tuple[str, str, str, float, str]]:
  """Every chosen rate, in every protocol's result files under ``folder``, that
  lies at an edge of the rates its optimizer tried (after its window grew as
  far as the protocol allows): (protocol folder, workload, optimizer, rate,
  ``"lowest"`` or ``"highest"``).
  """
  found = []
  for path in sorted(glob.glob(os.path.join(folder, "**", "ttr_*.json"), recursive=True)):
    payload = common.read_json(path)
    entries = payload.get("entries") if isinstance(payload, dict) else None
    if not isinstance(entries, dict) or "workload" not in payload:
      continue
    where = os.path.relpath(os.path.dirname(path), folder)
    for name, e in entries.items():
      tried = e["tuning"]["learning_rate"]
      if e["learning_rate"] in (min(tried), max(tried)) and len(tried) > 1:
        side = "lowest" if e["learning_rate"] == min(tried) else "highest"
        found.append((where, payload["workload"]["name"], name, e["learning_rate"], side))
  return found


def edge_line(folder: str) -> str:
  """The sentence naming every chosen rate at an edge of its window (``edge_rates``)."""
  found = edge_rates(folder)
  if not found:
    return ("Every chosen rate, in every protocol here, lies inside the rates its optimizer "
            "tried.")
  return ("Chosen rates at an edge of the rates tried, where the window stopped growing (the "
          "optimum may lie beyond): " + "; ".join(
              f"`{name}` on {tables.SHORT_NAMES.get(w, w)} ({'main' if where == '.' else where}"
              f"): {rate:g}, the {side} tried" for where, w, name, rate, side in found) + ".")

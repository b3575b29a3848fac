"""The small workloads' long-horizon section: the bfloat16 state and the verdicts at 20,000 steps.

Reads ``benchmarks/results/long_horizon/`` (``python -m benchmarks.time_to_result
--long-horizon``) and decides, with the verdict's tests (``stats``) and its rule
with the declared margins (``decisions``):

* each bfloat16 state against the float32 state at the same rate and seeds,
  where the two differ by their rounding alone (equivalence within the
  workload's declared margin is what stochastic rounding should give);
* tuned VSGD against the best tuned baseline and against Adam.
"""

from __future__ import annotations

import os

from benchmarks import common
from benchmarks.reporting import decisions
from benchmarks.reporting import markdown
from benchmarks.reporting import reading
from benchmarks.reporting import stats
from benchmarks.reporting import tables
from benchmarks.reporting import verdict

FOLDER = reading.LONG_HORIZON_FOLDER
VARIANTS = (("vsgd+bf16_state", "stochastic (default)"),
            ("vsgd+bf16_nearest", "to nearest"))


def _row(w: dict, a: dict, b: dict, declared: dict) -> tuple[str, str, stats.Comparison]:
  """``a`` against ``b``: the cell (``verdict.cell``), the verdict by the rule, and
  the comparison itself.
  """
  found = stats.judged(a, b, w["higher_is_better"], decisions.margin_for(declared, w["name"]))
  return verdict.cell(w, found), found["verdict"], found["comparison"]


def precision_rows(results: dict, declared: dict) -> tuple[list[str], list[stats.Comparison]]:
  """Per workload and bfloat16 state, against float32 at the same rate and
  seeds: the table's lines, and its comparisons.
  """
  rows, compared = [], []
  for payload in results.values():
    w, same = payload["workload"], payload.get("same_rate", {})
    if not decisions.decides(w["name"]):
      continue
    base = payload["entries"].get(verdict.VSGD)
    for variant, rounding in VARIANTS:
      if variant not in same or base is None:
        continue
      v = same[variant]
      cell, decided, c = _row(w, v, base, declared)
      compared.append(c)
      if variant == "vsgd+bf16_nearest" and decided in ("win", "loss"):
        cell += " (a frozen state, not VSGD's update: below)"
      rows.append([tables.short_header(w), tables.mean_std(w, base),
                   tables.mean_std(w, tables.as_entry(v["test"])), rounding, cell])
  return markdown.table(["workload", "float32", "bfloat16", "rounding",
                         "bfloat16 minus float32, 95% CI"], rows), compared


def runs_text(results: dict) -> str:
  """How long each workload trained, on how many reported seeds, and on which
  tuning seeds its rates were chosen: one clause per set of workloads alike.
  """
  groups: dict[tuple, list[str]] = {}
  for name, payload in results.items():
    e = payload["entries"][verdict.VSGD]
    key = (payload["workload"]["steps"], len(e["seeds"]), tuple(e["tuning"]["seeds"]))
    groups.setdefault(key, []).append(tables.SHORT_NAMES.get(name, name))
  clauses = []
  for (steps, seeds, tuning), names in groups.items():
    chosen = (f"seed {tuning[0]}" if len(tuning) == 1
              else f"the mean of seeds {', '.join(map(str, tuning))}")
    clauses.append(f"{markdown.joined(names)} trained {steps:,} steps, {seeds} fresh seeds, "
                   f"rates chosen on {chosen} (not reported)")
  return "; ".join(clauses)


def windows_text(results: dict) -> str:
  """How many half-decade rates each workload's windows started with: the
  usual count, and the workloads that started with another.
  """
  sizes = {name: len(p["entries"][verdict.VSGD]["tuning"]["grid"])
           for name, p in results.items()}
  usual = max(set(sizes.values()), key=list(sizes.values()).count)
  others = [f"{n} on {tables.SHORT_NAMES.get(name, name)}" for name, n in sizes.items()
            if n != usual]
  return (f"a window of {usual} half-decade rates"
          + (f" ({', '.join(others)})" if others else ""))


def section(root: str) -> list[str]:
  """The section's markdown lines; empty where the long-horizon run is absent."""
  folder = os.path.join(root, FOLDER)
  results = reading.load_protocol(folder, reading.MAIN) if os.path.isdir(folder) else {}
  if not results:
    return []
  any_payload = next(iter(results.values()))
  run = common.read_json(os.path.join(folder, reading.MAIN, "ttr_run.json")) or {}
  machine = (common.machine_text(run["machine"]) if "machine" in run
             else common.machine_text(any_payload["machine"]))
  declared = decisions.margins(root)
  precision = precision_rows(results, declared)
  rows, adam_rows = verdict.comparisons(results, declared)
  best, adam = verdict.tables_of(results, rows, adam_rows)
  return markdown.section(
      "results_small_workloads", "long_horizon", runs=runs_text(results),
      windows=windows_text(results), machine=machine,
      precision_tests=verdict.tests_text(precision[1]), precision=precision[0],
      tuned_tests=verdict.tests_text([r["comparison"] for r in rows + adam_rows]), best=best,
      adam=adam)


def rounding_summary(results: dict, declared: dict) -> str:
  """Each rounding's verdicts against float32 at the same rate and seeds, in
  words: "the bfloat16 state rounded stochastically was ...; rounded to nearest,
  it was ..."; empty where no bfloat16 state ran.
  """
  said: list[str] = []
  for variant, _ in VARIANTS:
    by: dict[str, list[str]] = {}
    for payload in results.values():
      run, base = payload.get("same_rate", {}).get(variant), payload["entries"].get(verdict.VSGD)
      if run is None or base is None or not decisions.decides(payload["workload"]["name"]):
        continue
      decided = _row(payload["workload"], run, base, declared)[1]
      by.setdefault(decided, []).append(tables.SHORT_NAMES.get(payload["workload"]["name"],
                                                               payload["workload"]["name"]))
    if by:
      how = "rounded stochastically" if not said else "rounded to nearest, it"
      said.append(f"{how} " + markdown.joined([f"{verdict.VERBS[d]} on {markdown.joined(names)}"
                                       for d, names in by.items()]))
  return "the bfloat16 state " + "; ".join(said) if said else ""


def howto_sentence(root: str) -> str:
  """The how-to's sentence on the bfloat16 state at 20,000 steps: each rounding's
  verdicts against float32 at the same rate and seeds, by the rule, from the JSON.
  """
  folder = os.path.join(root, FOLDER)
  results = reading.load_protocol(folder, reading.MAIN) if os.path.isdir(folder) else {}
  summary = rounding_summary(results, decisions.margins(root))
  if not summary:
    return ""
  return ("Trained 20,000 steps at the float32 state's tuned rate on the same seeds and "
          "judged against it by the declared margins (*The long horizon* on the small "
          f"workloads' results page), {summary}.")

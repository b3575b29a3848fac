"""The small workloads' tables (``python -m benchmarks.time_to_result``): the learning-rate
guide's, the experiments decided on them, the bfloat16 state at 20,000 steps, the
declared margins.

Each comparison is one optimizer minus another on the per-seed test metric, decided by
the declared rule with the workload's margin (``decisions.decide``: win, loss,
equivalent or inconclusive); each table is a family for Holm's correction, whose
result its cells carry. The experiments' rules are the ones declared before their
runs (``RULES``).
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

VSGD, ADAM = "vsgd", "adam"
FACTORED, SF_ADAMW = "factored_vsgd", "schedule_free_adamw"
SCHEDULE_FREE = ("schedule_free_vsgd", "schedule_free_vsgd+short_mean")
HELD = ("win", "equivalent")  # what a rule counts as holding its own
# Entries with a "+" that are optimizers of their own, not a variant of one.
PLUS_BASELINES = ("adafactor+momentum",)
# The experiments' rules, declared before their runs: factored_vsgd becomes public
# API where it holds against vsgd on this many workloads that factor, at no more
# than this many bytes a parameter of a 1024 x 1024 float32 matrix; schedule-free
# VSGD is recommended where it holds against schedule-free AdamW.
FACTORED_RULE = (4, 4.1)


def is_baseline(name: str) -> bool:
  return "vsgd" not in name and ("+" not in name or name in PLUS_BASELINES)


def best_baseline(payload: dict) -> str | None:
  """The baseline with the best mean test metric on a workload."""
  sign = 1.0 if payload["workload"]["higher_is_better"] else -1.0
  found = [n for n, e in payload["entries"].items()
           if is_baseline(n) and e["test_mean"] == e["test_mean"]]
  return max(found, key=lambda n: sign * payload["entries"][n]["test_mean"], default=None)


def _judged(workload: dict, a: dict, b: dict, declared: dict, **extra) -> dict | None:
  """``a`` minus ``b`` on ``workload``, judged by its declared margin (``stats.judged``),
  with ``extra`` beside; None where the workload draws no verdict.
  """
  if not decisions.decides(workload["name"]):
    return None
  return {"workload": workload, **extra, **stats.judged(
      a, b, workload["higher_is_better"], decisions.margin_for(declared, workload["name"]))}


def compare(payload: dict, name: str, other: str | None, declared: dict) -> dict | None:
  """``name`` minus ``other`` on one workload and its verdict; None where either is
  missing or the workload draws no verdict.
  """
  entries = payload["entries"]
  if name not in entries or other not in entries:
    return None
  return _judged(payload["workload"], entries[name], entries[other], declared, other=other)


def at_base_rate(payload: dict, variant: str, declared: dict) -> dict | None:
  """``variant`` trained at its base's tuned rate on the base's seeds (the protocol's
  ``same_rate`` runs) against the base: they differ by the variant alone.
  """
  run = payload.get("same_rate", {}).get(variant)
  if run is None or run["base"] not in payload["entries"]:
    return None
  return _judged(payload["workload"], run, payload["entries"][run["base"]], declared,
                 other=run["base"], run=run)


def with_holm(rows: list[dict | None]) -> list[dict | None]:
  """A table's comparisons, each with whether its win or loss holds under Holm."""
  found = [r for r in rows if r is not None]
  held = iter(decisions.holm([r["comparison"].p_value for r in found]))
  return [None if r is None else {**r, "holm": next(held)} for r in rows]


def cell(found: dict | None) -> str:
  """A comparison in one cell: the verdict, the difference [95% interval] and p."""
  if found is None:
    return "-"
  c, style = found["comparison"], tables.metric_style(found["workload"])
  low, mid, high = style.differences((c.low, c.difference, c.high))
  held = decisions.unheld(found["verdict"], found.get("holm", True))
  return f"**{found['verdict']}**{held}: {mid} [{low}, {high}], p {c.p_value:.2g}"


def _rate(payload: dict, name: str) -> str:
  e = payload["entries"].get(name)
  return "" if e is None else f"{tables.mean_std(payload['workload'], e)} ({e['learning_rate']:g})"


def verdict_table(results: dict, declared: dict) -> str:
  """VSGD against the best tuned baseline and against Adam on each workload."""
  best = with_holm([compare(p, VSGD, best_baseline(p), declared) for p in results.values()])
  adam = with_holm([compare(p, VSGD, ADAM, declared) for p in results.values()])
  rows = [[tables.short_header(p["workload"]), _rate(p, VSGD),
           f"{b['other']}: {_rate(p, b['other'])}" if b else "-", cell(b), cell(a)]
          for p, b, a in zip(results.values(), best, adam, strict=True)]
  return markdown.table(["workload", "VSGD (rate)", "best baseline (rate)",
                         "VSGD minus best", "VSGD minus Adam"], rows)


def rates_table(protocols: dict) -> str:
  """The peak rate VSGD and Adam chose on validation, each protocol and workload."""
  rows = [[tables.SCHEDULE_HEADERS[schedule], tables.short_name(p["workload"]["name"]),
           f"{p['entries'][VSGD]['learning_rate']:g}", f"{p['entries'][ADAM]['learning_rate']:g}",
           f"{p['entries'][ADAM]['learning_rate'] / p['entries'][VSGD]['learning_rate']:.2g}"]
          for schedule, results in protocols.items() for p in results.values()
          if VSGD in p["entries"] and ADAM in p["entries"]]
  return markdown.table(["protocol", "workload", "VSGD", "Adam", "Adam / VSGD"], rows)


def schedule_table(protocols: dict, declared: dict) -> str:
  """VSGD and Adam at a constant rate and under warmup + cosine, at each protocol's
  tuned rate, and what the schedule changed for VSGD.
  """
  main, constant = protocols.get(reading.MAIN, {}), protocols.get("constant", {})
  rows = []
  for n in (n for n in main if n in constant):
    change = None
    if VSGD in main[n]["entries"] and VSGD in constant[n]["entries"]:
      change = _judged(main[n]["workload"], main[n]["entries"][VSGD],
                       constant[n]["entries"][VSGD], declared)
    rows.append([tables.short_header(main[n]["workload"]), _rate(constant[n], VSGD),
                 _rate(main[n], VSGD), _rate(constant[n], ADAM), _rate(main[n], ADAM),
                 cell(change)])
  return markdown.table(["workload", "VSGD constant", "VSGD warmup + cosine", "Adam constant",
                         "Adam warmup + cosine", "VSGD: schedule minus constant"], rows)


def regret(workload: dict, value: float, best: float) -> float:
  """How many times worse ``value`` is than ``best``: the ratio of the losses, or of
  the error rates where the metric is an accuracy (1 is best).
  """
  if workload["higher_is_better"]:
    value, best = 1 - value, 1 - best
  if not value == value:  # NaN: diverged
    return float("inf")
  return value / best if best > 0 else (1.0 if value <= 0 else float("inf"))


def start_rate(results: dict, entry: str = VSGD) -> tuple[float, float, str] | None:
  """Of the peak rates tuned on every workload, the one with the smallest worst-case
  regret of its validation value against the best rate's; ties go to the larger.
  Returns (rate, its worst regret, the workload where it is worst).
  """
  held = [p for p in results.values() if entry in p["entries"]]
  if not held:
    return None
  tried = [dict(zip(p["entries"][entry]["tuning"]["learning_rate"],
                    p["entries"][entry]["tuning"]["val"], strict=True)) for p in held]
  shared = set.intersection(*(set(t) for t in tried))
  bests = [max(t.values(), key=lambda v, w=p["workload"]: v if w["higher_is_better"] else -v)
           for p, t in zip(held, tried, strict=True)]
  best = None
  for lr in sorted(shared):
    worst = max((regret(p["workload"], t[lr], top), tables.short_name(p["workload"]["name"]))
                for p, t, top in zip(held, tried, bests, strict=True))
    if best is None or worst[0] <= best[1]:
      best = (lr, worst[0], worst[1])
  return best


def precision_table(results: dict, declared: dict) -> str:
  """Each bfloat16 state against its float32 optimizer at the float32 rate and seeds."""
  rows = []
  for p in results.values():
    for low, full in (("vsgd+bf16_state", VSGD), ("vsgd+bf16_nearest", VSGD),
                      ("adam+bf16_mu", ADAM)):
      found = at_base_rate(p, low, declared) or compare(p, low, full, declared)
      if found is not None:
        mine = tables.as_entry(found["run"]["test"]) if "run" in found else p["entries"][low]
        rows.append([tables.short_name(p["workload"]["name"]), low,
                     tables.mean_std(p["workload"], mine), _rate(p, full), cell(found)])
  return markdown.table(["workload", "bfloat16 state", "bfloat16", "float32 (rate)",
                         "bfloat16 minus float32"], rows)


def factored_table(main: dict, wide: dict, declared: dict, shares: dict) -> tuple[str, str]:
  """``factored_vsgd`` against ``vsgd`` and the best baseline, each workload where it
  factors, and the declared rule's status.
  """
  rows, held = [], 0
  for results in (main, wide):
    for name, p in results.items():
      if FACTORED not in p["entries"] or not shares.get(name):
        continue
      vsgd = compare(p, FACTORED, VSGD, declared)
      held += vsgd is not None and vsgd["verdict"] in HELD
      rows.append([tables.short_header(p["workload"]), f"{100 * shares[name]:.0f}%",
                   _rate(p, FACTORED), cell(vsgd),
                   cell(compare(p, FACTORED, best_baseline(p), declared))])
  needed, _ = FACTORED_RULE
  return (markdown.table(["workload", "share that factors", "factored VSGD (rate)",
                          "minus VSGD", "minus the best baseline"], rows),
          "public API" if held >= needed else "experimental")


def schedule_free_table(main: dict, declared: dict) -> tuple[str, str]:
  rows, recommended = [], []
  for name in SCHEDULE_FREE:
    for p in main.values():
      found = compare(p, name, SF_ADAMW, declared)
      if found is not None:
        rows.append([name, tables.short_header(p["workload"]), _rate(p, name), cell(found),
                     cell(compare(p, name, VSGD, declared))])
        if found["verdict"] in HELD:
          recommended.append(f"{name} on {tables.short_name(p['workload']['name'])}")
  return (markdown.table(["entry", "workload", "test (rate)", "minus schedule-free AdamW",
                          "minus VSGD"], rows), ", ".join(recommended) or "nowhere")


def margins_table(folder: str) -> str:
  declared, why = decisions.margins(folder), decisions.reasons(folder)
  return markdown.table(["workload", "margin", "why"],
                        [[tables.short_name(n), f"±{m:g}", why[n]]
                         for n, m in declared.items()])


def edge_table(folder: str) -> str:
  """Every chosen rate at an edge of the rates its optimizer tried."""
  rows = []
  for path in sorted(glob.glob(os.path.join(folder, "**", "ttr_*.json"), recursive=True)):
    payload = common.read_json(path)
    for name, e in (payload.get("entries") or {}).items() if "workload" in payload else ():
      tried = e["tuning"]["learning_rate"]
      if len(tried) > 1 and e["learning_rate"] in (min(tried), max(tried)):
        rows.append([os.path.relpath(os.path.dirname(path), folder),
                     tables.short_name(payload["workload"]["name"]), name,
                     f"{e['learning_rate']:g}",
                     "lowest" if e["learning_rate"] == min(tried) else "highest"])
  return markdown.table(["protocol folder", "workload", "optimizer", "rate", "edge"], rows)


def values(folder: str, declared: dict[str, float], shares: dict[str, float]) -> dict[str, str]:
  """The templates' small-workload values, judged by the ``declared`` margins; ``shares``:
  each workload's share of parameters that ``factored_vsgd`` factors (the runs record it).
  """
  protocols = reading.load_all(folder)
  main = protocols.get(reading.MAIN, {})
  wide = reading.load_protocol(os.path.join(folder, reading.WIDE_FOLDER), reading.MAIN)
  horizon = reading.load_protocol(os.path.join(folder, reading.LONG_HORIZON_FOLDER),
                                  reading.MAIN)
  start, adam_start = start_rate(main), start_rate(main, ADAM)
  factored, factored_status = factored_table(main, wide, declared, shares)
  schedule_free, recommended = schedule_free_table(main, declared)
  return {
      "small_workloads": str(len(main)), "small_verdicts": verdict_table(main, declared),
      "small_rates": rates_table(protocols), "small_schedule": schedule_table(protocols, declared),
      "start_rate": f"{start[0]:g}", "start_worst": f"{start[1]:.2f}x", "start_where": start[2],
      "adam_start_rate": f"{adam_start[0]:g}", "small_precision": precision_table(main, declared),
      "long_horizon_precision": precision_table(horizon, declared),
      "long_horizon_verdicts": verdict_table(horizon, declared),
      "factored": factored, "factored_status": factored_status,
      "factored_needed": str(FACTORED_RULE[0]), "factored_bytes": f"{FACTORED_RULE[1]:g}",
      "schedule_free": schedule_free, "schedule_free_recommended": recommended,
      "margins": margins_table(folder), "edges": edge_table(folder),
      "small_machine": common.machine_text(next(iter(main.values()))["machine"]),
      "horizon_machine": common.machine_text(next(iter(horizon.values()))["machine"]),
      "horizon_steps": f"{next(iter(horizon.values()))['workload']['steps']:,}",
  }

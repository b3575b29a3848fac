"""The results page's opening section, "When to pick VSGD": per workload of the
main protocol, VSGD against the best tuned baseline, decided by a t-test on the
per-seed test metric (``stats``), and a few sentences computed from the table
and from the step-cost results.
"""

from __future__ import annotations

import math

from benchmarks import common
from benchmarks.time_to_result import stats
from benchmarks.time_to_result import tables

VSGD = "vsgd"


def is_baseline(name: str) -> bool:
  """An optimizer VSGD is compared with: not a VSGD entry, not a variant (``+``)."""
  return "vsgd" not in name and "+" not in name


def best_baseline(payload: dict) -> str | None:
  """The baseline with the best mean test metric on a workload, or None."""
  sign = 1.0 if payload["workload"]["higher_is_better"] else -1.0
  found = [n for n, e in payload["entries"].items()
           if is_baseline(n) and e["test_mean"] == e["test_mean"]]
  return max(found, key=lambda n: sign * payload["entries"][n]["test_mean"], default=None)


def compare_workload(payload: dict) -> dict | None:
  """VSGD against the best baseline on one workload: the names, the comparison
  (VSGD minus the baseline) and its verdict; None where either is missing.
  """
  entries = payload["entries"]
  base = best_baseline(payload)
  if VSGD not in entries or base is None:
    return None
  v, b = entries[VSGD], entries[base]
  c = stats.compare(v["test"], v["seeds"], b["test"], b["seeds"])
  return {"workload": payload["workload"], "baseline": base, "comparison": c,
          "verdict": stats.verdict(c, payload["workload"]["higher_is_better"])}


def difference_text(workload: dict, c: stats.Comparison) -> str:
  """A comparison's difference and its interval in the metric's units (accuracy
  in points), the three with the same number of decimals.
  """
  values = (c.difference, c.low, c.high)
  if workload["metric"] == "suboptimality":
    text = [f"{v:+.1e}" for v in values]
  else:
    scale = 100.0 if workload["metric"] == "accuracy" else 1.0
    largest = max(abs(v) for v in values) * scale
    decimals = 2 if scale == 100.0 else 3
    if 0 < largest < 0.1:
      decimals = max(decimals, 1 - math.floor(math.log10(largest)))
    text = [f"{v * scale:+.{decimals}f}" for v in values]
  return f"{text[0]} [{text[1]}, {text[2]}]"


def _step_cost_range(folder: str) -> str | None:
  """VSGD's CPU step cost over Adam's from ``step_cost.json`` (donated state)."""
  step = common.load(folder, "step_cost")
  if not step:
    return None
  rows = [r for r in step["rows"] if r["optimizer"] == VSGD and r["donated"]]
  if not rows:
    return None
  low = min(rows, key=lambda r: r["ratio"])
  high = max(rows, key=lambda r: r["ratio"])
  return (f"{low['ratio']:.2f}x Adam's at {low['params']:,} parameters to {high['ratio']:.2f}x "
          f"at {high['params']:,} (CPU, state donated, `step_cost.json`)")


def _listing(rows: list) -> str:
  return ", ".join(f"{tables.SHORT_NAMES.get(r['workload']['name'], r['workload']['name'])} "
                   f"against {r['baseline']}" for r in rows)


def section(folder: str, choosing_lr: str = "choosing_lr.md") -> list[str]:
  """The verdict section's markdown lines (empty without main-protocol results)."""
  results = tables.load_protocol(folder, tables.MAIN) if tables.MAIN in tables.load_all(
      folder) else {}
  rows = [r for r in (compare_workload(p) for p in results.values()) if r is not None]
  if not rows:
    return []
  tests = sorted({r["comparison"].test for r in rows})
  out = ["## When to pick VSGD\n",
         f"Main protocol ({tables.SCHEDULE_HEADERS[tables.MAIN]}): on each workload, VSGD "
         "against the baseline with the best mean test metric (its bfloat16 and per-example "
         "variants aside). *Difference* is VSGD minus that baseline, in the metric's units "
         "(accuracy in points), with its 95% confidence interval; a **win** or a **loss** "
         "only where the interval excludes 0, else a **tie**. "
         + ("A seed fixes the initialisation and the batch order whatever the optimizer, so "
            "where both ran the same seeds the runs pair by seed and the paired t-test "
            "applies; " if "paired t" in tests else "")
         + ("Welch's t-test (unequal variances) where the seeds differ." if "Welch t" in tests
            else "no comparison here needed Welch's test.") + "\n",
         "| workload | VSGD | best baseline | difference, 95% CI | test | p | verdict |",
         "|---|---|---|---|---|---|---|"]
  every = {n for p in results.values() for n in p["entries"] if is_baseline(n)}
  for r in rows:
    w, c = r["workload"], r["comparison"]
    entries = results[w["name"]]["entries"]
    absent = sorted(every - set(entries))
    if absent:
      r["baseline_note"] = f" (not run here: {', '.join(absent)})"
    out.append(
        f"| {tables.SHORT_NAMES.get(w['name'], w['name'])}, {w['metric']} "
        f"{'↑' if w['higher_is_better'] else '↓'} | {tables.mean_std(w, entries[VSGD])} | "
        f"{r['baseline']}: {tables.mean_std(w, entries[r['baseline']])}"
        f"{r.get('baseline_note', '')} | "
        f"{difference_text(w, c)} | "
        f"{c.test}, {c.n_a if c.n_a == c.n_b else f'{c.n_a}/{c.n_b}'} seeds | "
        f"{c.p_value:.2g} | **{r['verdict']}** |")
  by = {v: [r for r in rows if r["verdict"] == v] for v in ("win", "tie", "loss")}
  sentences = []
  if by["win"]:
    sentences.append(f"VSGD is worth trying where it beat the best tuned baseline here: "
                     f"{_listing(by['win'])}.")
  else:
    sentences.append("VSGD beat the best tuned baseline on none of these workloads.")
  if by["loss"]:
    sentences.append(f"It is not worth switching where the baseline won: "
                     f"{_listing(by['loss'])}; on {len(by['tie'])} of {len(rows)} workloads "
                     "the difference is within noise.")
  else:
    sentences.append(f"It lost on none; on {len(by['tie'])} of {len(rows)} workloads the "
                     "difference is within noise.")
  cost = _step_cost_range(folder)
  if cost:
    sentences.append(f"A VSGD step costs {cost}" + (
        f", so where it tied ({_listing(by['tie'])}) the baseline gives as much for less."
        if by["tie"] else "."))
  sentences.append(f"Where to start its learning rate: [choosing_lr.md]({choosing_lr}).")
  out += ["", " ".join(sentences) + "\n"]
  out.append(f"How this run chose its rates: {tables.tuning_text(results)}." + "".join(
      f" The {tables.SHORT_NAMES.get(n, n)}'s grid had whole decades only." for n, p in
      results.items() if coarse(p)) + "\n")
  if any(r["workload"]["name"] == "logreg" for r in rows):
    out.append("Logistic regression has no held-out quantity (validation and test are both "
               "the training objective's suboptimality), so its rate is selected on the "
               "quantity it reports; its row measures optimization speed only.\n")
  out += variant_notes(results)
  return out


def coarse(payload: dict) -> bool:
  """Whether a workload's grid steps by whole decades (or more) for some entry."""
  for e in payload["entries"].values():
    start = sorted(e["tuning"].get("grid", payload["workload"]["grid"]))
    if len(start) > 1 and start[1] / start[0] > 5:
      return True
  return False


# Why a variant may differ from vsgd at the same rate and seeds, where it is known.
VARIANT_CAUSES = {
    "vsgd+bf16_nearest": "rounded to nearest, its state stops following the noise after about "
                         "step 1,000 (see *At the paper's horizon* on the results page)",
}


def variant_notes(results: dict,
                  variants: tuple = ("vsgd+bf16_state", "vsgd+bf16_nearest")) -> list[str]:
  """A line for each workload where a variant's test metric differs from
  VSGD's by the same test as the verdict (the interval excludes 0).
  """
  lines = []
  for payload in results.values():
    entries = payload["entries"]
    for variant in variants:
      if VSGD not in entries or variant not in entries:
        continue
      v, b = entries[variant], entries[VSGD]
      c = stats.compare(v["test"], v["seeds"], b["test"], b["seeds"])
      if c.excludes_zero():
        w = payload["workload"]
        same = v["learning_rate"] == b["learning_rate"]
        lines.append(f"`{variant}` differs from `vsgd` on "
                     f"{tables.SHORT_NAMES.get(w['name'], w['name'])}: "
                     f"{difference_text(w, c)} ({c.test}, p {c.p_value:.2g}), "
                     + ("at the same rate and seeds; " if same else "at its own rate; ")
                     + VARIANT_CAUSES.get(variant, "this run does not explain why") + ".\n")
  return lines

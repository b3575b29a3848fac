"""The results page's opening section, "When to pick VSGD": per workload of the
main protocol, VSGD against the best tuned baseline and against Adam (the
paper's baseline), each decided by a t-test on the per-seed test metric
(``stats``). The answer comes first, in a few sentences computed from the
tables and from the step-cost results, then the tables, then how they were made.
"""

from __future__ import annotations

from benchmarks import common
from benchmarks.reporting import reading
from benchmarks.reporting import stats
from benchmarks.reporting import tables

METHOD_HEADING = "### How the verdicts were made"
VSGD = "vsgd"
ADAM = "adam"  # the paper's baseline


def is_baseline(name: str) -> bool:
  """An optimizer VSGD is compared with: not a VSGD entry, not a variant (``+``)."""
  return "vsgd" not in name and "+" not in name


def best_baseline(payload: dict) -> str | None:
  """The baseline with the best mean test metric on a workload, or None."""
  sign = 1.0 if payload["workload"]["higher_is_better"] else -1.0
  found = [n for n, e in payload["entries"].items()
           if is_baseline(n) and e["test_mean"] == e["test_mean"]]
  return max(found, key=lambda n: sign * payload["entries"][n]["test_mean"], default=None)


def compare_with(payload: dict, other: str | None) -> dict | None:
  """VSGD against ``other`` on one workload: the names, the comparison (VSGD
  minus ``other``) and its verdict; None where either is missing.
  """
  entries = payload["entries"]
  if VSGD not in entries or other is None or other not in entries:
    return None
  v, b = entries[VSGD], entries[other]
  c = stats.compare(v["test"], v["seeds"], b["test"], b["seeds"])
  return {"workload": payload["workload"], "baseline": other, "comparison": c,
          "verdict": stats.verdict(c, payload["workload"]["higher_is_better"])}


def compare_workload(payload: dict) -> dict | None:
  """VSGD against the best baseline on one workload (``compare_with``)."""
  return compare_with(payload, best_baseline(payload))


def difference_text(workload: dict, c: stats.Comparison) -> str:
  """A comparison's difference and its interval in the metric's units (accuracy
  in points), the three with the same number of decimals.
  """
  text = tables.metric_style(workload).differences((c.difference, c.low, c.high))
  return f"{text[0]} [{text[1]}, {text[2]}]"


def _span(ratios: list[float]) -> str:
  return f"{min(ratios):.2f}x" if max(ratios) - min(ratios) < 0.005 else \
      f"{min(ratios):.2f}-{max(ratios):.2f}x"


def cost_lines(folder: str) -> list[str]:
  """What VSGD costs, from the JSON: its donated step over Adam's on a GPU (the
  device suite, ``device_suite.json``, where one ran on an accelerator) and on the
  CPU (``step_cost.json``), each with its machine, and its state's bytes a
  parameter against Adam's and with a bfloat16 state. Bullets of the first section.
  """
  out = []
  suite = common.load(folder, "device_suite")
  if suite and suite.get("machine", {}).get("platform", "cpu") != "cpu":
    rows = [r for r in suite["parts"].get("step_cost", {}).get("rows", [])
            if r["optimizer"] == VSGD and r["donated"]]
    if rows:
      sizes = sorted({r["params"] for r in rows})
      out.append(f"- **Cost on a GPU:** {_span([r['ratio'] for r in rows])} Adam's step on an "
                 f"{suite['machine']['device']}, {sizes[0] / 1e6:.0f}M to "
                 f"{sizes[-1] / 1e6:.0f}M parameters (`device_suite.json`).")
  step = common.load(folder, "step_cost")
  rows = [r for r in (step or {}).get("rows", []) if r["optimizer"] == VSGD and r["donated"]]
  if rows:
    low = min(rows, key=lambda r: r["params"])
    high = max(rows, key=lambda r: r["params"])
    out.append(f"- **Cost on the CPU:** {low['ratio']:.2f}x Adam's step at "
               f"{low['params'] / 1e6:.0f}M parameters to {high['ratio']:.2f}x at "
               f"{high['params'] / 1e6:.0f}M, {step['machine']['cores']} cores of an "
               f"{step['machine']['cpu']} CPU (`step_cost.json`).")
    bytes_of = {r["optimizer"]: r["state_bytes_per_param"] for r in step["rows"]}
    bf16 = (f"; {bytes_of['vsgd+bf16_state']:.0f} with `state_dtype=jnp.bfloat16`"
            if "vsgd+bf16_state" in bytes_of else "")
    adam = f", Adam's {bytes_of['adam']:.0f}" if "adam" in bytes_of else ""
    out.append(f"- **Memory:** the state holds {bytes_of[VSGD]:.0f} bytes a parameter{adam}"
               f"{bf16}.")
  return out


def _short(workload: dict) -> str:
  return tables.SHORT_NAMES.get(workload["name"], workload["name"])


def _listing(rows: list) -> str:
  """The rows' workloads against their baselines, grouped by baseline."""
  groups: dict[str, list[str]] = {}
  for r in rows:
    groups.setdefault(r["baseline"], []).append(_short(r["workload"]))
  return ", ".join(f"{_joined(names)} against {base}" for base, names in groups.items())


def _joined(items: list[str]) -> str:
  """``a``, ``a and b``, ``a, b and c``."""
  return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _by_verdict(rows: list) -> dict[str, list]:
  return {v: [r for r in rows if r["verdict"] == v] for v in ("win", "tie", "loss")}


def answer(rows: list, adam_rows: list, folder: str) -> list[str]:
  """The section's opening bullets: the verdicts in words, against the best tuned
  baseline (``rows``) and against Adam (``adam_rows``), then what VSGD costs.
  """
  by = _by_verdict(rows)
  if by["win"]:
    best = f"VSGD beat it on {_listing(by['win'])}"
  else:
    best = (f"VSGD beat it on none of the {len(rows)} workloads" if len(rows) > 1
            else "VSGD did not beat it")
  if by["loss"]:
    best += f"; it lost on {_listing(by['loss'])}"
  else:
    best += "; it lost on none"
  ties = [_short(r["workload"]) for r in by["tie"]]
  best += (f"; it tied on {len(ties)} ({_joined(ties)})." if ties else ".")
  out = [f"- **Against the best tuned baseline:** {best}"]
  if adam_rows:
    against = _by_verdict(adam_rows)
    parts = [f"{word} on {len(found)} ({', '.join(_short(r['workload']) for r in found)})"
             for word, found in (("won", against["win"]), ("tied", against["tie"]),
                                 ("lost", against["loss"])) if found]
    out.append(f"- **Against Adam**, the paper's baseline: it {_joined(parts)} of "
               f"{len(adam_rows)}.")
  cost = cost_lines(folder)
  if cost and ties:
    cost[-1] += f" Where VSGD tied ({_joined(ties)}), the baseline gives as much for less."
  return out + cost


def _decided(r: dict) -> str:
  """A row's last cells: the difference with its interval, the test, p and the verdict."""
  c = r["comparison"]
  seeds = c.n_a if c.n_a == c.n_b else f"{c.n_a}/{c.n_b}"
  return (f"{difference_text(r['workload'], c)} | {c.test}, {seeds} seeds | {c.p_value:.2g} | "
          f"**{r['verdict']}** |")


def _not_run(results: dict, rows: list) -> list[str]:
  """A line naming the baselines that some workload did not run, if any did not."""
  every = {n for p in results.values() for n in p["entries"] if is_baseline(n)}
  missing: dict[str, list[str]] = {}
  for r in rows:
    for name in sorted(every - set(results[r["workload"]["name"]]["entries"])):
      missing.setdefault(name, []).append(_short(r["workload"]))
  if not missing:
    return []
  return ["", "Baselines not run on a workload, and so not its best baseline: " + "; ".join(
      f"{name} on {_joined(found)}" for name, found in missing.items()) + "."]


def tables_of(results: dict, rows: list, adam_rows: list) -> list[str]:
  """The two tables: VSGD against the best tuned baseline, then against Adam."""
  out = ["| workload | VSGD | best baseline | difference, 95% CI | test | p | verdict |",
         "|---|---|---|---|---|---|---|"]
  for r in rows:
    w, entries = r["workload"], results[r["workload"]["name"]]["entries"]
    out.append(f"| {tables.short_header(w)} | {tables.mean_std(w, entries[VSGD])} | "
               f"{r['baseline']}: {tables.mean_std(w, entries[r['baseline']])} | {_decided(r)}")
  out += _not_run(results, rows)
  if adam_rows:
    out += ["", "VSGD against Adam, the paper's baseline, by the same tests (the VSGD column "
            "above):\n",
            "| workload | adam | difference, 95% CI | test | p | verdict |",
            "|---|---|---|---|---|---|"]
    for r in adam_rows:
      w, entries = r["workload"], results[r["workload"]["name"]]["entries"]
      out.append(f"| {tables.short_header(w)} | {tables.mean_std(w, entries[ADAM])} | "
                 f"{_decided(r)}")
  return out + [""]


def section(folder: str, start: str | None = None) -> list[str]:
  """The verdict section's markdown lines (empty without main-protocol results).

  The answer comes first: the verdicts in words, then ``start`` (a line on
  where to start VSGD's learning rate, ``guide.start_line``) where given; then
  the tables; then how they were made.
  """
  results = reading.load_protocol(folder, reading.MAIN) if reading.MAIN in reading.load_all(
      folder) else {}
  rows = [r for r in (compare_workload(p) for p in results.values()) if r is not None]
  if not rows:
    return []
  adam_rows = [r for r in (compare_with(p, ADAM) for p in results.values()) if r is not None]
  out = ["## When to pick VSGD\n", *answer(rows, adam_rows, folder)]
  if start:
    out.append(f"- {start}")
  out.append("")
  out += tables_of(results, rows, adam_rows)
  out.append(f"{METHOD_HEADING}\n")
  tests = sorted({r["comparison"].test for r in rows + adam_rows})
  out.append(
      f"Main protocol ({tables.SCHEDULE_HEADERS[reading.MAIN]}): on each workload, VSGD "
      "against the baseline with the best mean test metric (its bfloat16 and per-example "
      "variants aside) and against Adam. *Difference* is VSGD minus the baseline, in the "
      "metric's units (accuracy in points), with its 95% confidence interval; a **win** or a "
      "**loss** only where the interval excludes 0, else a **tie**. "
      + ("A seed fixes the initialisation and the batch order whatever the optimizer, so "
         "where both ran the same seeds the runs pair by seed and the paired t-test "
         "applies; " if "paired t" in tests else "")
      + ("Welch's t-test (unequal variances) where the seeds differ." if "Welch t" in tests
         else "no comparison here needed Welch's test.") + "\n")
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
                     f"{_short(w)}: "
                     f"{difference_text(w, c)} ({c.test}, p {c.p_value:.2g}), "
                     + ("at the same rate and seeds; " if same else "at its own rate; ")
                     + VARIANT_CAUSES.get(variant, "this run does not explain why") + ".\n")
  return lines

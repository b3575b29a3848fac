"""The experiments: ``factored_vsgd`` (its memory, its quality against ``vsgd``
and the best baseline, its cost), schedule-free VSGD (against schedule-free
AdamW and against ``vsgd``) and ``vsgd_muon`` and its variants (against Muon),
each decided by the rule declared before its runs, with the declared margins
(``decisions``): the results page's one table (``page_section``) and the
appendix's rows and decisions (``section``).
"""

from __future__ import annotations

import os

from benchmarks import common
from benchmarks import optimizer_table
from benchmarks.reporting import contest
from benchmarks.reporting import decisions
from benchmarks.reporting import markdown
from benchmarks.reporting import reading
from benchmarks.reporting import tables
from benchmarks.reporting import verdict

FACTORED = "factored_vsgd"
SCHEDULE_FREE = ("schedule_free_vsgd", "schedule_free_vsgd+short_mean")
SF_ADAMW = "schedule_free_adamw"
VSGD_MUON, MUON = "vsgd_muon", "muon"
# The workload vsgd_muon's promotion rule names (docs/algorithm.md, "VSGD's mean
# inside Muon"), besides at least one other matrix workload.
CHARLM = "charlm"
HELD = ("win", "equivalent")  # what a rule counts as holding its own
VERBS = verdict.VERBS
# The rule for leaving ``experimental``: wins or equivalents against vsgd on at least
# this many of the five main workloads, at no more than this many bytes a
# parameter for a 1024 x 1024 float32 matrix.
FACTORED_RULE = (4, 4.1)


def comparison(payload: dict, name: str, other: str, declared: dict) -> dict | None:
  """``name`` against ``other`` on one workload: the comparison, the workload's
  declared margin (``declared``, ``decisions.margins``) and the verdict by the rule.
  """
  found = verdict.compare_with(payload, other, declared, name=name)
  return None if found is None else {k: found[k] for k in ("comparison", "verdict", "margin")}


def _cell(payload: dict, found: dict | None) -> str:
  return verdict.cell(payload["workload"], found)


def _name(workload: dict) -> str:
  return tables.SHORT_NAMES.get(workload["name"], workload["name"])


def memory_table(payload: dict) -> list[str]:
  """The markdown table of ``state_memory.json``: bytes a parameter of each optimizer
  the file counted (its ``optimizers``, in their order), a row a model.
  """
  models = payload["rows"]
  return markdown.table(
      ["state", *(r["title"] for r in models)],
      [["parameters (share that factors)",
        *(f"{r['params']:,} ({100 * r['factored_share']:.1f}%)" for r in models)]]
      + [[f"`{n}`", *(f"{r['bytes_per_param'][n]:.2f}" for r in models)]
         for n in payload["optimizers"]])


def _cost_table(folder: str) -> list[str]:
  """The factored state's CPU step next to ``vsgd``'s and Adam's, donated
  (``python -m benchmarks.step_cost --factored``); nothing where not measured.
  """
  step = common.load(folder, "step_cost_factored")
  if not step:
    return []
  by = {(r["params"], r["optimizer"]): r for r in step["rows"] if r["donated"]}
  found = [by[size, name] for size in sorted({size for size, _ in by})
           for name in (FACTORED, FACTORED + "+bf16_mu", "vsgd") if (size, name) in by]
  return [f"Cost of a step on a CPU, state donated ({common.machine_text(step['machine'])}; "
          f"{step['repeats']} interleaved rounds, `python -m benchmarks.step_cost --factored`; "
          "ResNeXt-shaped parameters scaled in width, so at 1M parameters few leaves "
          "factor):\n",
          *markdown.table(
              ["params", "optimizer", "ms", "x Adam (p25-p75)", "x vsgd (p25-p75)",
               "state bytes/param"],
              [[f"{r['params']:,}", r["optimizer"], f"{r['median_ms']:.2f}", common.ratio_text(r),
                common.ratio_text(r["paired"]) if "paired" in r else "-",
                f"{r['state_bytes_per_param']:.2f}"] for r in found])]


def factored_rows(main: dict, wide: dict, shares: dict, declared: dict) -> list[dict]:
  """Per workload (the five main ones, then the wide variants): the share that
  factors, and factored_vsgd against vsgd and against the best baseline.
  """
  out = []
  for results in (main, wide):
    for name, payload in results.items():
      if not decisions.decides(payload["workload"]["name"]):
        continue
      best = verdict.best_baseline(payload)
      out.append({"payload": payload, "share": shares.get(name),
                  "vsgd": comparison(payload, FACTORED, verdict.VSGD, declared),
                  "baseline": best,
                  "best": comparison(payload, FACTORED, best, declared) if best else None})
  return out


def _factored_table(rows: list[dict]) -> list[str]:
  cells = []
  for r in rows:
    payload, w = r["payload"], r["payload"]["workload"]
    share = "-" if r["share"] is None else f"{100 * r['share']:.0f}%"
    if FACTORED not in payload["entries"]:
      cells.append([tables.short_header(w), share, "not run: nothing factors, so it is `vsgd` "
                    "(tested bit for bit)", "-", "-", "-"])
      continue
    base = (f"{r['baseline']}: {tables.mean_std(w, payload['entries'][r['baseline']])}"
            if r["baseline"] else "-")
    cells.append([tables.short_header(w), share,
                  tables.mean_std(w, payload["entries"][FACTORED]), _cell(payload, r["vsgd"]),
                  base, _cell(payload, r["best"])])
  return markdown.table(["workload", "share that factors", "factored_vsgd",
                         "against vsgd, 95% CI", "best baseline", "against it, 95% CI"],
                        cells)


def _square_bytes(memory: dict) -> float:
  """``factored_vsgd``'s state in bytes a parameter of a 1024 x 1024 float32 matrix."""
  return next(r for r in memory["rows"] if r["title"].startswith("1024"))[
      "bytes_per_param"][FACTORED]


def factored_outcome(rows: list[dict], memory: dict) -> dict:
  """What ``FACTORED_RULE`` decides: public API at enough wins or equivalents
  against ``vsgd`` at few enough bytes. A workload where nothing factors is no
  evidence (there ``factored_vsgd`` is ``vsgd``), so the rule counts where it factors.
  """
  needed, most = FACTORED_RULE
  factoring = [r for r in rows if r["share"] and r["vsgd"] is not None]
  held = [r for r in factoring if r["vsgd"]["verdict"] in HELD]
  per_param = _square_bytes(memory)
  moves = len(held) >= needed and per_param <= most
  return {"experiment": "factored state",
          "rule": f"public API if it holds against `vsgd` on {needed} workloads that factor, "
                  f"at ≤ {most} B/param",
          "result": f"{_said(factoring, 'vsgd')} (where it factors); {per_param:.2f} B/param "
                    "at 1024 x 1024",
          "status": "public API" if moves else "experimental",
          "why": f"{len(held)} wins or equivalents against `vsgd` of the {needed} needed, on "
                 f"the {len(factoring)} workloads that factor (where nothing factors it is "
                 f"`vsgd`: no evidence); {per_param:.2f} B/param of at most {most}"}


def schedule_free_rows(main: dict, declared: dict) -> list[dict]:
  """Per main workload and schedule-free VSGD entry: against schedule-free AdamW
  and against vsgd.
  """
  return [{"payload": payload, "name": name,
           "sf_adamw": comparison(payload, name, SF_ADAMW, declared),
           "vsgd": comparison(payload, name, verdict.VSGD, declared)}
          for name in SCHEDULE_FREE for payload in main.values()
          if name in payload["entries"] and decisions.decides(payload["workload"]["name"])]


def _schedule_free_table(rows: list[dict]) -> list[str]:
  return markdown.table(
      ["entry", "workload", "test metric", "against schedule-free AdamW, 95% CI",
       "against vsgd, 95% CI"],
      [[SHORT_NAMES[r["name"]], tables.short_header(r["payload"]["workload"]),
        tables.mean_std(r["payload"]["workload"], r["payload"]["entries"][r["name"]]),
        _cell(r["payload"], r["sf_adamw"]), _cell(r["payload"], r["vsgd"])]
       for r in rows])


def schedule_free_outcome(rows: list[dict]) -> dict:
  """Each schedule-free VSGD entry's verdicts against schedule-free AdamW, and where
  the rule recommends it: where it wins or is equivalent.
  """
  results, statuses = [], []
  for name in SCHEDULE_FREE:
    mine = [r for r in rows if r["name"] == name and r["sf_adamw"] is not None]
    if mine:
      held = [_name(r["payload"]["workload"]) for r in mine if r["sf_adamw"]["verdict"] in HELD]
      results.append(f"{SHORT_NAMES[name]}: {_said(mine, 'sf_adamw')}")
      statuses.append(f"{SHORT_NAMES[name]}: " + (f"on {markdown.joined(held)}" if held
                                                   else "nowhere"))
  return {"experiment": "schedule-free VSGD, plain and with a short mean",
          "rule": "recommended where it holds against schedule-free AdamW",
          "result": "; ".join(results), "status": "recommended: " + "; ".join(statuses),
          "why": "recommended only where it wins or is equivalent against schedule-free AdamW"}


def contest_row(root: str, declared: dict) -> dict | None:
  """``vsgd_muon`` against ``muon`` on the contest's LM (its GPU size where one ran),
  the char LM the rule names now that the contest decides; None before both ran.
  """
  found = contest.load(root)
  for size in ("gpu", "cpu"):
    payload = found.get(size)
    if payload and VSGD_MUON in payload["entries"] and MUON in payload["entries"]:
      margin = decisions.margin_for(declared, payload["workload"]["name"])
      found_row = contest.compare(payload, VSGD_MUON, MUON, margin)
      entries = {n: {**e, "learning_rate": e["chosen_rate"]}
                 for n, e in payload["entries"].items()}
      return {"payload": {**payload, "entries": entries}, "is_charlm": True,
              "muon": {k: found_row[k] for k in ("comparison", "verdict", "margin")}}
  return None


def vsgd_muon_rows(main: dict, declared: dict, charlm: dict | None = None) -> list[dict]:
  """Per main workload where both ran: ``vsgd_muon`` against ``muon``; the
  ``charlm`` row given (the contest's, ``contest_row``) replaces the main
  protocol's 150-step char LM.
  """
  rows = [{"payload": payload, "muon": comparison(payload, VSGD_MUON, MUON, declared),
           "is_charlm": payload["workload"]["name"] == CHARLM}
          for payload in main.values()
          if VSGD_MUON in payload["entries"] and MUON in payload["entries"]
          and decisions.decides(payload["workload"]["name"])]
  if charlm is not None:
    rows = [charlm] + [r for r in rows if not r["is_charlm"]]
  return rows


def _vsgd_muon_table(rows: list[dict]) -> list[str]:
  cells = []
  for r in rows:
    payload, w = r["payload"], r["payload"]["workload"]
    mine, theirs = payload["entries"][VSGD_MUON], payload["entries"][MUON]
    cells.append([tables.short_header(w),
                  f"{tables.mean_std(w, mine)} ({mine['learning_rate']:g})",
                  f"{tables.mean_std(w, theirs)} ({theirs['learning_rate']:g})",
                  _cell(payload, r["muon"])])
  return markdown.table(["workload", "`vsgd_muon` (rate)", "`muon` (rate)",
                         "difference, 95% CI (margin)"], cells)


def vsgd_muon_outcome(rows: list[dict]) -> dict:
  """What the promotion rule declared before the runs decides (docs/algorithm.md,
  "VSGD's mean inside Muon"): "worth trying" where ``vsgd_muon`` wins or is
  equivalent against Muon on the char LM and on at least one other matrix
  workload, "not decided" while the char LM has no run of both, else "experimental".
  """
  charlm = [r for r in rows if r.get("is_charlm")]
  others = [r for r in rows if not r.get("is_charlm")]
  held = [r for r in others if r["muon"]["verdict"] in HELD]
  if not charlm:
    status, why = "not decided", "no char LM run yet of both, and the rule needs one"
  elif charlm[0]["muon"]["verdict"] in HELD and held:
    status = "worth trying (in `experimental`)"
    why = "it holds on " + markdown.joined([_name(r["payload"]["workload"])
                                            for r in charlm + held])
  else:
    status = "experimental"
    why = "; ".join(
        ([f"it {VERBS[charlm[0]['muon']['verdict']]} on the char LM"]
         if charlm[0]["muon"]["verdict"] not in HELD else [])
        + ([] if held else ["no win or equivalent on another matrix workload"]))
  return {"experiment": "VSGD in Muon",
          "rule": "worth trying if it holds against Muon on the char LM (the contest's) and "
                  "one other matrix workload",
          "result": _said(charlm + others, "muon"),
          "status": status, "why": why}


def decision_p_values(root: str) -> list[float]:
  """The p-values of every comparison the page's decisions count (``factored_vsgd``
  against ``vsgd``, schedule-free VSGD against schedule-free AdamW, ``vsgd_muon``
  against Muon), for Holm's correction across the results page.
  """
  if not os.path.exists(os.path.join(root, decisions.MARGINS_FILE)):
    return []  # no verdicts without declared margins (a folder of cost results alone)
  found = _load(root, require_factored=False)
  counted = ([r["vsgd"] for r in found["rows"]] + [r["sf_adamw"] for r in found["sf_rows"]]
             + [r["muon"] for r in found["muon_rows"]])
  return [c["comparison"].p_value for c in counted if c is not None]


def _said(rows: list[dict], key: str) -> str:
  """The rows' verdicts in words, workloads grouped by verdict ("equivalent on MLP
  and diabetes; lost on char LM"), or a dash.
  """
  by: dict[str, list[str]] = {}
  for r in rows:
    if r[key] is not None:
      by.setdefault(r[key]["verdict"], []).append(_name(r["payload"]["workload"]))
  return "; ".join(f"{SHORT_VERBS[v]} on {markdown.joined(names)}" for v, names in by.items()) or "-"


# The overview table's words: short enough for its narrow columns.
SHORT_NAMES = {"schedule_free_vsgd": "plain", "schedule_free_vsgd+short_mean": "short mean"}
SHORT_VERBS = {"win": "won", "loss": "lost", "equivalent": "equivalent",
               "inconclusive": "inconclusive"}


def _cost_text(cost: dict | None) -> str:
  """VSGD-Muon's and its variants' state, step and compile next to Muon's
  (``benchmarks.contest.cost``), for the variants' row; empty where not measured.
  """
  if not cost:
    return ""
  rows = {r["optimizer"]: r for r in cost["rows"]}
  ours = [r for name, r in rows.items() if name != MUON]
  m = cost["machine"]
  full = ours[0]["state_bytes_per_param"]  # vsgd_muon's, which the variants keep but one
  lighter = "".join(f"{_variant(r['optimizer'])}: {r['state_bytes_per_param']:.1f}; "
                    for r in ours if abs(r["state_bytes_per_param"] - full) > 0.05)
  return (f". State {full:.1f} B/param ({lighter}"
          f"Muon {rows[MUON]['state_bytes_per_param']:.1f}); step "
          f"{min(r['ratio'] for r in ours):.2f}-{max(r['ratio'] for r in ours):.2f}x, "
          f"compile {min(r['compile_vs_muon'] for r in ours):.1f}-"
          f"{max(r['compile_vs_muon'] for r in ours):.1f}x Muon's ({m['platform'].upper()}, "
          f"{ours[0]['params'] / 1e6:.2f}M)")


def variants_outcome(variants: list[dict], cost: dict | None, base: dict | None) -> dict:
  """VSGD-Muon's variants against Muon (``contest.variant_rows``), grouped by verdict
  so that each verdict is said once, with their cost and their statuses.
  """
  by: dict[str, list[str]] = {}
  for r in variants:
    by.setdefault(SHORT_VERBS[r["verdict"]] + decisions.unheld(r["verdict"], r["holm"]),
                  []).append(_variant(r["name"]) + (
                      f" (at the GPU size {SHORT_VERBS[r['gpu']['verdict']]})" if r["gpu"] else ""))
  said = "; ".join(f"{verdict}: {', '.join(names)}" for verdict, names in by.items())
  itself = "" if base is None else f" (VSGD-Muon itself: {base['comparison'].difference:+.3f})"
  return {"experiment": "VSGD-Muon's variants",
          "rule": "worth trying if it beats Muon at the CPU size (Holm across them), losing "
                  "nowhere; out of `experimental` if at the GPU size too",
          "result": (said or "not run yet") + itself + _cost_text(cost),
          "status": _statuses(variants)}


def overview(outcomes: list[dict]) -> list[str]:
  """The page's one table of the experiments: each one's rule (declared before its
  runs), its result and its status, the outcomes the appendix's status lines give.
  """
  return markdown.table(
      ["experiment", "rule, declared before its runs (holds: wins or is equivalent)",
       "result (every row: the [appendix](results_appendix.md))", "status"],
      [[o["experiment"], o["rule"], o["result"], o["status"]] for o in outcomes]) + [""]


def status_line(outcome: dict) -> str:
  """An experiment's status in the appendix, below its rows: the status and why."""
  return f"**Status: {outcome['status']}.** {outcome['why'][:1].upper()}{outcome['why'][1:]}.\n"


def _statuses(variants: list[dict]) -> str:
  """The variants' statuses: one word where they share it, else each status other
  than ``experimental`` with the variants that have it, then the others'.
  """
  found = {r["status"] for r in variants}
  if len(found) <= 1:
    return (found.pop() if found else "experimental") + (" (each)" if len(variants) > 1 else "")
  by: dict[str, list[str]] = {}
  for r in variants:
    if r["status"] != "experimental":
      by.setdefault(r["status"], []).append(_variant(r["name"]))
  return "; ".join(f"{status}: {', '.join(names)}" for status, names in by.items()) + \
      "; the others: experimental"


def _variant(name: str) -> str:
  """A variant's short name in the variants' row, which says VSGD-Muon once: "of u"."""
  return optimizer_table.row(name).short.removeprefix("VSGD-Muon").lstrip(", ")


def _load(root: str, require_factored: bool = True) -> dict | None:
  """What the experiments read: the main and wide protocols' results, the state's
  bytes, the declared margins and each experiment's rows; None where
  ``factored_vsgd`` has no results and ``require_factored``.
  """
  main = reading.load_protocol(root, reading.MAIN)
  wide_folder = os.path.join(root, reading.WIDE_FOLDER)
  wide = reading.load_protocol(wide_folder, reading.MAIN) if os.path.isdir(wide_folder) else {}
  memory = common.load(root, "state_memory") or {}
  if require_factored and (not memory or not any(
      FACTORED in p["entries"] for p in [*main.values(), *wide.values()])):
    return None
  declared = decisions.margins(root)
  return {"main": main, "wide": wide, "memory": memory, "declared": declared,
          "rows": factored_rows(main, wide, memory.get("workload_shares", {}), declared),
          "sf_rows": schedule_free_rows(main, declared),
          "muon_rows": vsgd_muon_rows(main, declared, contest_row(root, declared))}


def _outcomes(root: str, found: dict) -> dict[str, dict]:
  """Each experiment's outcome from what ``_load`` found under ``root``."""
  said = {"factored": factored_outcome(found["rows"], found["memory"])}
  if found["sf_rows"]:
    said["schedule_free"] = schedule_free_outcome(found["sf_rows"])
  if found["muon_rows"]:
    said["vsgd_muon"] = vsgd_muon_outcome(found["muon_rows"])
  sizes = contest.load(root)
  if "cpu" in sizes:
    said["variants"] = variants_outcome(
        contest.variant_rows(sizes, found["declared"]),
        common.load(os.path.join(root, contest.FOLDER), "cost"),
        contest.base_row(sizes, found["declared"]))
  return said


def outcomes(root: str) -> dict[str, dict]:
  """Each experiment's outcome, by key: ``factored``, ``schedule_free``,
  ``vsgd_muon`` and ``variants``, where it ran; none before ``factored_vsgd`` ran.
  """
  found = _load(root)
  return {} if found is None else _outcomes(root, found)


def page_section(root: str) -> list[str]:
  """The results page's one table of the experiments (``overview``)."""
  found = outcomes(root)
  return markdown.section("results", "experiments", table=overview(list(found.values()))) \
      if found else []


def section(root: str) -> list[str]:
  """The appendix's section: each experiment's rows and its status."""
  found = _load(root)
  if found is None:
    return []
  main, wide, rows = found["main"], found["wide"], found["rows"]
  said = _outcomes(root, found)
  any_payload = next(iter(wide.values() or main.values()))
  out = markdown.section(
      "results_appendix", "factored", memory=memory_table(found["memory"]),
      seeds=str(len(any_payload["entries"][verdict.VSGD]["seeds"])),
      tuning=tables.tuning_text({**main, **wide}), table=_factored_table(rows),
      cost=_cost_table(root), decision=status_line(said["factored"]))
  if found["sf_rows"]:
    out += markdown.section("results_appendix", "schedule_free",
                            table=_schedule_free_table(found["sf_rows"]),
                            decision=status_line(said["schedule_free"]))
  if found["muon_rows"]:
    out += markdown.section("results_appendix", "vsgd_muon",
                            table=_vsgd_muon_table(found["muon_rows"]),
                            decision=status_line(said["vsgd_muon"]))
  return out

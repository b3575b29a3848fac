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


def factored_moves(rows: list[dict], memory: dict) -> bool:
  """Whether ``FACTORED_RULE`` moves ``factored_vsgd`` into the public API: enough
  wins or equivalents against ``vsgd`` where it factors, at few enough bytes.
  """
  needed, most = FACTORED_RULE
  square = next(r for r in memory["rows"] if r["title"].startswith("1024"))
  kept = [r for r in rows if r["share"] and r["vsgd"] is not None
          and r["vsgd"]["verdict"] in HELD]
  return len(kept) >= needed and square["bytes_per_param"][FACTORED] <= most


def factored_decision(rows: list[dict], memory: dict) -> str:
  """What the rule decides, in a sentence, from the rows and the bytes.

  A workload where nothing factors is no evidence: there ``factored_vsgd`` is
  ``vsgd``. So the rule's wins and equivalents (its "ties or wins", decided by
  the declared margins) are counted where it factors.
  """
  square = next(r for r in memory["rows"] if r["title"].startswith("1024"))
  per_param = square["bytes_per_param"][FACTORED]
  needed, most = FACTORED_RULE
  factoring = [r for r in rows if r["share"] and r["vsgd"] is not None]
  kept = [r for r in factoring if r["vsgd"]["verdict"] in HELD]
  lost = [r for r in factoring if r["vsgd"]["verdict"] not in HELD]
  models = [r for r in memory["rows"] if not r["title"].startswith("1024")]
  text = ("**Decision.** None of the five main workloads has a matrix that factors at the "
          "default threshold, so there `factored_vsgd` is `vsgd`, and a match there is no "
          f"evidence. Where it factors, it won or was equivalent to `vsgd` on {len(kept)} of "
          f"{len(factoring)} workloads")
  text += (" and " + markdown.joined([f"{VERBS[r['vsgd']['verdict']]} on "
                              f"{_name(r['payload']['workload'])}" for r in lost]) + ". "
           if lost else ". ")
  text += (f"At 1024 x 1024 it keeps {per_param:.2f} bytes a parameter, and "
           + ", ".join(f"{r['bytes_per_param'][FACTORED]:.2f} on {r['title']}" for r in models)
           + f". The rule moves it into the public API at {needed} wins or equivalents at no more "
           f"than {most} bytes a parameter: ")
  if factored_moves(rows, memory):
    return text + "met, so it moves.\n"
  reasons = []
  if len(kept) < needed:
    reasons.append(f"{len(kept)} wins or equivalents where it factors" + (
        f", of only {len(factoring)} workloads that factor" if len(factoring) < needed else ""))
  if per_param > most:
    reasons.append(f"{per_param:.2f} bytes")
  return (text + f"not met ({'; '.join(reasons)}), so it stays in "
          "`vsgd_optax.experimental`.\n")


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


def schedule_free_findings(rows: list[dict]) -> str:
  """Where schedule-free VSGD won or was equivalent against schedule-free AdamW,
  and where not (inconclusive or lost): one clause per optimizer, with no
  full stop, for the decision below and the how-to's sentence alike.
  """
  parts = []
  for name in SCHEDULE_FREE:
    mine = [r for r in rows if r["name"] == name and r["sf_adamw"] is not None]
    if not mine:
      continue
    held = [_name(r["payload"]["workload"]) for r in mine if r["sf_adamw"]["verdict"] in HELD]
    unsure = [_name(r["payload"]["workload"]) for r in mine
              if r["sf_adamw"]["verdict"] == "inconclusive"]
    lost = [_name(r["payload"]["workload"]) for r in mine if r["sf_adamw"]["verdict"] == "loss"]
    parts.append(f"`{name}` won or was equivalent against schedule-free AdamW on {len(held)} "
                 f"of {len(mine)}" + (f" ({markdown.joined(held)})" if held else "")
                 + (f", was inconclusive on {markdown.joined(unsure)}" if unsure else "")
                 + (f" and lost on {markdown.joined(lost)}" if lost else ""))
  return "; ".join(parts)


def schedule_free_decision(rows: list[dict]) -> str:
  """The appendix's decision: the findings, and what the how-to makes of them."""
  return ("**Decision.** " + schedule_free_findings(rows) + ". The how-to recommends "
          "schedule-free VSGD only where it wins or is equivalent against schedule-free "
          "AdamW, from these rows.\n")


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


def vsgd_muon_status(rows: list[dict]) -> str:
  """What the promotion rule declared before the runs decides (docs/algorithm.md,
  "VSGD's mean inside Muon"): "worth trying" where ``vsgd_muon`` wins or is
  equivalent against Muon on the char LM and on at least one other matrix
  workload, "not decided" while the char LM has no run of both, else
  "experimental".
  """
  charlm = [r for r in rows if r.get("is_charlm")]
  if not charlm:
    return "not decided"
  held = [r for r in rows if not r.get("is_charlm") and r["muon"]["verdict"] in HELD]
  return "worth trying" if charlm[0]["muon"]["verdict"] in HELD and held else "experimental"


def vsgd_muon_decision(rows: list[dict]) -> str:
  """``vsgd_muon_status`` in words, with the verdicts it reads."""
  def said(found: list[dict]) -> str:
    return markdown.joined([f"{VERBS[r['muon']['verdict']]} on "
                            f"{_name(r['payload']['workload'])}" for r in found])
  charlm = [r for r in rows if r.get("is_charlm")]
  others = [r for r in rows if not r.get("is_charlm")]
  held = [r for r in others if r["muon"]["verdict"] in HELD]
  status = vsgd_muon_status(rows)
  if status == "not decided":
    so_far = f" So far it {said(others)}." if others else ""
    return (f"**Decision.** Not decided: no char LM run yet of both `vsgd_muon` and "
            f"`muon`, and the rule needs one.{so_far}\n")
  text = f"**Decision.** Against Muon it {said(charlm + others)}. "
  if status == "worth trying":
    names = markdown.joined([_name(r["payload"]["workload"]) for r in charlm + held])
    return text + f"Documented as worth trying (it stays in `experimental`): on {names}.\n"
  on_charlm = charlm[0]["muon"]["verdict"]
  why = [f"it {VERBS[on_charlm]} on the char LM"] if on_charlm not in HELD else []
  if not held:
    why.append("no win or equivalent on another matrix workload" if others
               else "no other matrix workload ran both")
  return text + f"It stays experimental: {'; '.join(why)}.\n"


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


def overview(rows: list[dict], memory: dict, sf_rows: list[dict],
             muon_rows: list[dict], variants: list[dict] | None = None,
             cost: dict | None = None, base: dict | None = None) -> list[str]:
  """The page's one table of the experiments: each one's rule (declared before its
  runs), its result and its status, as the decisions in the appendix compute them.
  """
  needed, most = FACTORED_RULE
  square = next(r for r in memory["rows"] if r["title"].startswith("1024"))
  factoring = [r for r in rows if r["share"] and r["vsgd"] is not None]
  out = ["| experiment | rule, declared before its runs (holds: wins or is equivalent) | "
         "result (every row: the [appendix](results_appendix.md)) | status |",
         "|---|---|---|---|",
         f"| factored state | public API if it holds against `vsgd` on {needed} workloads "
         f"that factor, at ≤ {most} B/param | "
         f"{_said(factoring, 'vsgd')} (where it factors); "
         f"{square['bytes_per_param'][FACTORED]:.2f} B/param at 1024 x 1024 | "
         + ("public API" if factored_moves(rows, memory) else "experimental") + " |"]
  results, statuses = [], []
  for name in SCHEDULE_FREE:
    mine = [r for r in sf_rows if r["name"] == name]
    if mine:
      held = [_name(r["payload"]["workload"]) for r in mine
              if r["sf_adamw"] and r["sf_adamw"]["verdict"] in HELD]
      results.append(f"{SHORT_NAMES[name]}: {_said(mine, 'sf_adamw')}")
      statuses.append(f"{SHORT_NAMES[name]}: "
                      + (f"on {markdown.joined(held)}" if held else "nowhere"))
  if results:
    out.append("| schedule-free VSGD, plain and with a short mean | recommended where it "
               f"holds against schedule-free AdamW | {'; '.join(results)} | recommended: "
               f"{'; '.join(statuses)} |")
  if muon_rows:
    status = vsgd_muon_status(muon_rows)
    out.append("| VSGD in Muon | worth trying if it holds against Muon on the char LM (the "
               f"contest's) and one other matrix workload | {_said(muon_rows, 'muon')} | "
               + ("experimental; worth trying" if status == "worth trying" else status) + " |")
  if variants is not None:
    # Grouped by verdict, so that each verdict is said once.
    by: dict[str, list[str]] = {}
    for r in variants:
      by.setdefault(SHORT_VERBS[r["verdict"]] + decisions.unheld(r["verdict"], r["holm"]),
                    []).append(
          _variant(r["name"])
          + (f" (at the GPU size {SHORT_VERBS[r['gpu']['verdict']]})" if r["gpu"] else ""))
    said = [f"{verdict}: {', '.join(names)}" for verdict, names in by.items()]
    out.append("| VSGD-Muon's variants | worth trying if it beats Muon at the CPU size "
               "(Holm across them), losing nowhere; out of `experimental` if at the GPU "
               "size too | "
               + ("; ".join(said) if said else "not run yet")
               + ("" if base is None else
                  f" (VSGD-Muon itself: {base['comparison'].difference:+.3f})")
               + _cost_text(cost) + " | "
               + _statuses(variants) + " |")
  return out + [""]


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


def page_section(root: str) -> list[str]:
  """The results page's one table of the experiments (``overview``)."""
  found = _load(root)
  if found is None:
    return []
  sizes = contest.load(root)
  return markdown.section("results", "experiments", table=overview(
      found["rows"], found["memory"], found["sf_rows"], found["muon_rows"],
      contest.variant_rows(sizes, found["declared"]),
      common.load(os.path.join(root, contest.FOLDER), "cost"),
      contest.base_row(sizes, found["declared"])))


def section(root: str) -> list[str]:
  """The appendix's section: each experiment's rows and its decision."""
  found = _load(root)
  if found is None:
    return []
  main, wide, rows = found["main"], found["wide"], found["rows"]
  any_payload = next(iter(wide.values() or main.values()))
  out = markdown.section(
      "results_appendix", "factored", memory=memory_table(found["memory"]),
      seeds=str(len(any_payload["entries"][verdict.VSGD]["seeds"])),
      tuning=tables.tuning_text({**main, **wide}), table=_factored_table(rows),
      cost=_cost_table(root),
      decision=factored_decision(rows, found["memory"]))
  if found["sf_rows"]:
    out += markdown.section("results_appendix", "schedule_free",
                            table=_schedule_free_table(found["sf_rows"]),
                            decision=schedule_free_decision(found["sf_rows"]))
  if found["muon_rows"]:
    out += markdown.section("results_appendix", "vsgd_muon",
                            table=_vsgd_muon_table(found["muon_rows"]),
                            decision=vsgd_muon_decision(found["muon_rows"]))
  return out

"""Writes docs/choosing_lr.md, the guide to VSGD's learning rate and schedule,
from the time-to-result results: every number on it is computed here from the
committed JSON, as the results page's are.

    python -m benchmarks.reporting      # writes both pages
"""

from __future__ import annotations

from benchmarks import common
from benchmarks.reporting import contest
from benchmarks.reporting import decisions
from benchmarks.reporting import experiments
from benchmarks.reporting import markdown
from benchmarks.reporting import reading
from benchmarks.reporting import stats
from benchmarks.reporting import tables
from benchmarks.reporting import verdict

VSGD, ADAM = "vsgd", "adam"
CONSTANT, MAIN = "constant", reading.MAIN


def _name(workload: dict) -> str:
  return tables.SHORT_NAMES.get(workload["name"], workload["name"])


def _cell(payload: dict | None, entry: str) -> str:
  if payload is None or entry not in payload["entries"]:
    return ""
  return tables.mean_std(payload["workload"], payload["entries"][entry])


def _change(before: dict, after: dict, workload: dict, declared: dict) -> str:
  """The decision for ``after`` against ``before`` by the verdict's rule with the
  workload's declared margin: ``win``, ``loss``, ``equivalent`` or ``inconclusive``.
  """
  return stats.judged(after, before, workload["higher_is_better"],
                      decisions.margin_for(declared, workload["name"]))["verdict"]


def schedule_section(protocols: dict, declared: dict) -> list[str]:
  """VSGD and Adam at a constant rate and under warmup + cosine, and what the
  schedule changed for VSGD, by the verdict's rule with the declared margins.
  """
  main, constant = protocols.get(MAIN, {}), protocols.get(CONSTANT, {})
  names = [n for n in main if n in constant]
  if not names:
    return []
  rows = []
  changes: dict[str, list[str]] = {d: [] for d in decisions.DECISIONS}
  for n in names:
    w = main[n]["workload"]
    rows.append([f"{_name(w)}, {w['metric']}", _cell(constant[n], VSGD), _cell(main[n], VSGD),
                 _cell(constant[n], ADAM), _cell(main[n], ADAM)])
    if (VSGD in main[n]["entries"] and VSGD in constant[n]["entries"]
        and decisions.decides(w["name"])):  # no verdict where the margin cannot decide
      changes[_change(constant[n]["entries"][VSGD], main[n]["entries"][VSGD], w,
                      declared)].append(_name(w))
  text = []
  for key, label in (("win", "improved VSGD (a win) on"), ("loss", "made VSGD worse (a loss) on"),
                     ("equivalent", "left VSGD equivalent within the margin on"),
                     ("inconclusive", "were inconclusive on")):
    if changes[key]:
      text.append(f"{label} {', '.join(changes[key])}")
  # A protocol that was cut to fewer steps does not compare like for like.
  unequal = [f"{_name(main[n]['workload'])} ({main[n]['workload']['steps']} steps against "
             f"{constant[n]['workload']['steps']})" for n in names
             if main[n]["workload"]["steps"] != constant[n]["workload"]["steps"]]
  caveat = ("" if not unequal else " The two protocols ran different numbers of steps on "
            + ", ".join(unequal) + ", so there the change mixes the schedule with the length "
            "of the run.")
  paper = []
  for n, payload in protocols.get("paper_step", {}).items():
    w = payload["workload"]
    cells = [f"`{e}` {tables.mean_std(w, payload['entries'][e])} (rate "
             f"{payload['entries'][e]['learning_rate']:g})" for e in (VSGD, ADAM)
             if e in payload["entries"]]
    paper.append(f"The paper's step schedule on the {_name(w)} gave " + ", ".join(cells) +
                 f"; warmup + cosine gave `vsgd` {_cell(main.get(n), VSGD)} and `adam` "
                 f"{_cell(main.get(n), ADAM)}.\n")
  return markdown.section(
      "choosing_lr", "schedule", changes="; ".join(text), caveat=caveat, paper=paper,
      table=markdown.table(["workload", "`vsgd` constant", "`vsgd` warmup + cosine",
                            "`adam` constant", "`adam` warmup + cosine"], rows))


def rate_section(protocols: dict) -> list[str]:
  """The rates Adam and VSGD chose under each protocol, and their ratio."""
  rows, ratios = [], {}
  for schedule, results in protocols.items():
    for payload in results.values():
      e = payload["entries"]
      if VSGD in e and ADAM in e:
        ratio = e[ADAM]["learning_rate"] / e[VSGD]["learning_rate"]
        ratios.setdefault(schedule, []).append(ratio)
        rows.append([tables.SCHEDULE_HEADERS[schedule], _name(payload["workload"]),
                     f"{e[VSGD]['learning_rate']:g}", f"{e[ADAM]['learning_rate']:g}",
                     f"{ratio:.2g}"])
  if not rows:
    return []
  text = []
  for schedule, found in ratios.items():
    same = sum(abs(r - 1) < 1e-6 for r in found)
    text.append(f"{tables.SCHEDULE_HEADERS[schedule]}: the same rate on {same} of {len(found)} "
                f"workloads, Adam / VSGD from {min(found):.2g} to {max(found):.2g}")
  joined = "; ".join(text)
  return markdown.section(
      "choosing_lr", "rates", ratios=joined[0].upper() + joined[1:],
      table=markdown.table(["protocol", "workload", "`vsgd`", "`adam`", "Adam / VSGD"], rows))


def regret(workload: dict, value: float, best: float) -> float:
  """How many times worse ``value`` is than ``best`` on ``workload``: the ratio of
  the losses, or of the error rates where the metric is an accuracy (1 is best).
  """
  if workload["higher_is_better"]:
    value, best = 1 - value, 1 - best
  if not value == value:  # NaN: diverged
    return float("inf")
  return value / best if best > 0 else (1.0 if value <= 0 else float("inf"))


def start_rate(results: dict, entry: str = VSGD) -> tuple[float, float, str] | None:
  """The recommended start: of the peak rates tuned on every workload, the one
  with the smallest worst-case regret (``regret`` of its validation value
  against the best rate's on each workload); ties go to the larger rate.
  Returns (rate, its worst regret, the workload where it is worst).
  """
  held = [p for p in results.values() if entry in p["entries"]]
  if not held:
    return None
  tried = [dict(zip(p["entries"][entry]["tuning"]["learning_rate"],
                    p["entries"][entry]["tuning"]["val"], strict=True)) for p in held]
  shared = set.intersection(*(set(t) for t in tried))
  # Each workload's best validation value over every rate it tried.
  bests = [max(t.values(), key=lambda v, w=p["workload"]: v if w["higher_is_better"] else -v)
           for p, t in zip(held, tried, strict=True)]
  best = None
  for lr in sorted(shared):
    worst = max((regret(p["workload"], t[lr], top), _name(p["workload"]))
                for p, t, top in zip(held, tried, bests, strict=True))
    if best is None or worst[0] <= best[1]:
      best = (lr, worst[0], worst[1])
  return best


def start_section(protocols: dict) -> list[str]:
  main = protocols.get(MAIN, {})
  found = start_rate(main)
  if found is None:
    return []
  lr, worst, where = found
  adam = start_rate(main, ADAM)
  return markdown.section(
      "choosing_lr", "start", rate=f"{lr:g}", workloads=str(len(main)), worst=f"{worst:.2f}x",
      where=where, adam="" if adam is None else (
          f"By the same rule Adam's start is {adam[0]:g} (worst case {adam[1]:.2f}x, on the "
          f"{adam[2]}). "))


def precision_section(protocols: dict, declared: dict) -> list[str]:
  """bfloat16 state against float32 state, by the verdict's rule."""
  main = protocols.get(MAIN, {})
  rows = []
  for payload in main.values():
    w, e = payload["workload"], payload["entries"]
    for low, full in (("vsgd+bf16_state", VSGD), ("vsgd+bf16_nearest", VSGD),
                      ("adam+bf16_mu", ADAM)):
      if low in e and full in e:
        # at the float32 optimizer's rate where a same-rate run exists and the two
        # chose different rates: there they differ by the rounding alone
        at_base = (verdict.at_base_rate(payload, low, declared)
                   if e[low]["learning_rate"] != e[full]["learning_rate"] else None)
        if at_base is None:
          found = stats.judged(e[low], e[full], w["higher_is_better"],
                               decisions.margin_for(declared, w["name"]))
          mine, rate = e[low], f"{e[low]['learning_rate']:g}"
        else:
          found, mine = at_base, tables.as_entry(at_base["run"]["test"])
          rate = f"{e[full]['learning_rate']:g}, `{full}`'s"
        rows.append([_name(w), f"`{low}` {tables.mean_std(w, mine)} ({rate})",
                     f"`{full}` {tables.mean_std(w, e[full])} ({e[full]['learning_rate']:g})",
                     verdict.cell(w, found)])
  if not rows:
    return []
  return markdown.section("choosing_lr", "precision", table=markdown.table(
      ["workload", "bfloat16 (rate)", "float32 (rate)", "bfloat16 minus float32, 95% CI"], rows))


def render(folder: str = "benchmarks/results") -> str:
  """The guide's markdown from the results under ``folder``."""
  protocols = reading.load_all(folder)
  main = protocols.get(MAIN, {})
  steps = sorted({p["workload"]["steps"] for r in protocols.values() for p in r.values()})
  seeds = sorted({len(e["seeds"]) for r in protocols.values() for p in r.values()
                  for e in p["entries"].values()})
  machines = sorted({common.machine_text(p["machine"]) for r in protocols.values()
                     for p in r.values()})
  out = markdown.section(
      "choosing_lr", "head", workloads=str(len(main)), seeds=f"{seeds[0]} to {seeds[-1]}",
      steps=f"{steps[0]:,} to {steps[-1]:,}", machines="; ".join(machines))
  declared = decisions.margins(folder)
  rows = [r for r in (verdict.compare_workload(p, declared) for p in main.values())
          if r is not None]
  if rows:
    # The contest's answer first, as the README and the docs' home page give it.
    answer = contest.readme_sentence(folder, docs="",
                                     others=experiments.decision_p_values(folder))
    out += markdown.section(
        "choosing_lr", "worth_it", count=str(len(rows)), contest=answer or "",
        **{v: str(sum(r["verdict"] == v for r in rows)) for v in decisions.DECISIONS})
  out += schedule_section(protocols, declared)
  out += rate_section(protocols)
  out += start_section(protocols)
  out += precision_section(protocols, declared)
  return markdown.tidy(out)

"""The momentum study's summary (PROTOCOL.md's addendum 5) from the ledger and the read-outs.

At each rung of ``protocol.MOMENTUM_RUNGS``: every beta's chosen rate and its
validation and test bits/char, the momentum-tuned Muon (``rules.best_momentum``),
VSGD-Muon's paired test difference to it and the tuned Muon's gain over beta
0.95, and VSGD-Muon's effective beta1 read out over training
(``readouts.jsonl``). Then ``protocol.MOMENTUM_RECOMMENDATION_RULE``'s outcome,
None until every rung has its momentum-tuned Muon, and the variants of addendum 6
(``variants.report``). ``summary_file.write`` puts it in
``summary.json`` under ``"momentum"``; ``benchmarks.reporting`` draws the pages'
section and figure from there.
"""

from __future__ import annotations

import numpy as np

from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import summary
from benchmarks.ladder import variants


def _betas(lines: list[dict], size: str, budget: float, adam: float, seeds) -> list[dict]:
  """Each beta whose rate rule is done at the rung: its rate, validation and test bits."""
  rows = []
  for beta, (rate, val) in sorted(rules.momentum_choices(lines, size, budget, seeds).items()):
    test = summary._test_bits(lines, protocol.momentum_entry(beta), size, budget, rate, adam)
    rows.append({"beta": beta, "rate": rate, "val_mean": val,
                 "test": {s: test[s] for s in seeds}})
  return rows


def readout(readouts: list[dict], lines: list[dict], size: str, budget: float,
            seeds=protocol.SEEDS) -> dict | None:
  """The rung's read-out: the quantiles of VSGD-Muon's effective beta1 at each point, the
  mean over the seeds, and how far its bits lie from the ledger's runs it retrained (the
  read-out is one program of 3 lanes, a tuned rung's was often 9: the vmapped batch changes
  XLA's rounding, not the arithmetic). None until every seed's read-out is in.
  """
  found = {x["seed"]: x for x in readouts
           if (x["size"], float(x["budget"])) == (size, budget) and x["seed"] in seeds}
  if len(found) < len(seeds):
    return None
  ran = {ledger.key(x): x for x in lines}
  gaps = [abs(x[field] - ran[ledger.key(x)][field]) for x in found.values()
          for field in ("val_bits", "test_bits") if ledger.key(x) in ran]
  curves = {q: np.mean([found[s]["effective_beta1"][q] for s in seeds], axis=0).tolist()
            for q in ("q10", "median", "q90")}
  first = found[seeds[0]]
  return {"step": first["effective_beta1"]["step"], "steps": first["steps"], **curves,
          "end": {q: curves[q][-1] for q in curves},
          "runs": len(found), "reproduced": sum(bool(x["reproduces"]) for x in found.values()),
          "largest_gap": max(gaps) if gaps else None}


def rung(lines: list[dict], readouts: list[dict], held: dict, size: str, budget: float,
         seeds=protocol.SEEDS) -> dict:
  """One rung's report: its betas, the momentum-tuned Muon (None until the rule is done
  there), VSGD-Muon against it, its gain over beta 0.95, and the read-out.
  """
  out = {"size": size, "budget": budget, "betas": [], "best": None, "versus_tuned": None,
         "tuned_gain": None, "readout": readout(readouts, lines, size, budget, seeds)}
  if (size, budget, "adamw") not in held:
    return out
  adam = held[size, budget, "adamw"]["rate"]
  out["params"] = held[size, budget, "adamw"]["params"]
  out["betas"] = _betas(lines, size, budget, adam, seeds)
  best = rules.best_momentum(lines, size, budget, seeds)
  vsgd, muon = held.get((size, budget, "vsgd_muon")), held.get((size, budget, "muon"))
  if best is None or vsgd is None or muon is None:
    return out
  tuned = next(row for row in out["betas"] if row["beta"] == best[0])
  # The grid grows once a side (protocol.MOMENTUM_GROWTH): a best there may lie beyond it.
  out["best"] = {**tuned, "on_edge": best[0] in protocol.MOMENTUM_GROWTH.values()}
  out["vsgd_muon"] = {"rate": vsgd["rate"], "test": vsgd["test"]}
  out["versus_tuned"] = summary.paired(vsgd["test"], tuned["test"], seeds)
  out["tuned_gain"] = summary.paired(tuned["test"], muon["test"], seeds)
  return out


def outcome(rungs: list[dict], recommendation: dict) -> dict | None:
  """``protocol.MOMENTUM_RECOMMENDATION_RULE``'s outcome from ``rung``'s reports and the
  ladder rule's (``summary.recommendation``): once every rung has its tuned Muon, or
  earlier where the rungs still to come cannot change it (the smallest size already fails,
  so no size holds: PROTOCOL.md's note to addendum 5); None otherwise. ``pending`` names
  the rungs without a tuned Muon yet.
  """
  if not recommendation.get("per_size"):
    return None
  sizes = recommendation["sizes_measured"]
  behind = {r["size"] for r in rungs
            if r["versus_tuned"] is not None and r["versus_tuned"]["verdict"] == "behind"}
  pending = [f"{r['size']} {r['budget']:g}" for r in rungs if r["versus_tuned"] is None]
  smallest_fails = sizes[0] in behind or not all(recommendation["per_size"][sizes[0]].values())
  if pending and not smallest_fails:
    return None
  studied = {r["size"] for r in rungs}
  s_star = None
  for size in sizes:  # the last of the sizes that hold, smallest up
    # A size the study has no rung at (a GPU size) has no tuned Muon, and so fails.
    if (not all(recommendation["per_size"][size].values()) or size in behind
        or size not in studied or any(p.startswith(f"{size} ") for p in pending)):
      break
    s_star = size
  return {"s_star": s_star, "s_star_params": recommendation["params"][s_star] if s_star else None,
          "never_behind": not behind and not pending and studied >= set(sizes),
          "best_beta": {f"{r['size']} {r['budget']:g}": r["best"]["beta"] for r in rungs
                        if r["best"] is not None},
          "pending": pending}


def report(lines: list[dict], readouts: list[dict], held: dict, recommendation: dict,
           seeds=protocol.SEEDS) -> dict:
  """The study's section of ``summary.json``: a report a rung, its hours, the outcome."""
  rungs = [rung(lines, readouts, held, size, budget, seeds)
           for size, budget in protocol.MOMENTUM_RUNGS]
  return {"rungs": rungs, "hours": rules.study_hours(lines, readouts),
          "budget_hours": protocol.MOMENTUM_BUDGET_HOURS,
          "outcome": outcome(rungs, recommendation),
          "variants": variants.report(lines, held, seeds)}

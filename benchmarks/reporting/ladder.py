"""The results pages' ladder sections, from ``benchmarks/results/ladder/summary.json``
(``python -m benchmarks.ladder --summary`` writes it from the ledger).

The ladder lands over several sessions; its sections say how much has landed,
which sizes hold every rung, and the recommendation rule's outcome, which is
"none yet" until every CPU rung has run. Each rung's numbers are the summary's:
chosen rates, test bits/char, paired differences and speedups with their 95%
intervals over the seeds.
"""

from __future__ import annotations

import math
import os

from benchmarks import common
from benchmarks.reporting import markdown
from benchmarks.reporting import styles

FOLDER = "ladder"
NOT_YET = "none yet"


def _interval(found: dict | None, digits: int = 3, sign: str = "+") -> str:
  """``mean [low, high]``; ``-`` where not measured, ``unbounded`` beyond a fit's floor."""
  if not found:
    return "-"
  if not math.isfinite(found["mean"]):
    return "unbounded"
  if not (math.isfinite(found["low"]) and math.isfinite(found["high"])):
    return f"{found['mean']:{sign}.{digits}f}"
  return (f"{found['mean']:{sign}.{digits}f} [{found['low']:{sign}.{digits}f}, "
          f"{found['high']:{sign}.{digits}f}]")


def _speedup(found: dict | None) -> str:
  return _interval(found, digits=2, sign="")


def _rung(row: dict) -> str:
  return f"{row['params']:,} · {row['budget']:g}"


def edge_table(rows: list[dict]) -> str:
  """VSGD-Muon's paired test differences at each rung it has run, and its speedup
  against Muon: what the recommendation rule judges.
  """
  cells = [[_rung(r), _interval(r["minus_muon"]), _interval(r["minus_normuon"]),
            _interval(r["minus_muon_vs"]), _interval(r["minus_adamw"]),
            _speedup(r["speedup_vs_muon"])]
           for r in rows if r["entry"] == "vsgd_muon"]
  return markdown.table(["parameters · chars a parameter", "− Muon", "− NorMuon", "− Muon-VS",
                         "− AdamW", "speedup vs Muon"], cells)


def full_table(rows: list[dict]) -> str:
  """Every rung and entry: chosen rate (its AdamW part's), test bits/char, speedups."""
  cells = [[_rung(r), styles.short(r["entry"]),
            f"{r['rate']:g}" + ("" if r["entry"] == "adamw" else f" ({r['adam_rate']:g})"),
            f"{r['test_mean']:.3f} ± {r['test_sd']:.3f} ({r['seeds']})",
            _speedup(r["speedup_vs_adamw"]), _speedup(r["speedup_vs_muon"])]
           for r in rows]
  return markdown.table(["parameters · chars a parameter", "entry", "rate (AdamW part)",
                         "test bits/char (seeds)", "speedup vs AdamW", "vs Muon"], cells)


def outcome(recommendation: dict) -> str:
  """The recommendation rule's outcome in a few words."""
  if recommendation["outcome"].startswith("none"):
    return f"{NOT_YET} (a CPU rung lacks a result)"
  if recommendation["s_star"] is None:
    return f"`vsgd_muon` is not the default; the pick is {styles.short(recommendation['beyond'])}"
  return (f"`vsgd_muon` is the default up to {recommendation['s_star_params']:,} parameters; "
          f"beyond, {styles.short(recommendation['beyond'])}")


def values(folder: str, images: str) -> dict[str, str]:
  """The templates' ladder values; ``images`` is ``folder`` as the pages see it."""
  found = common.load(os.path.join(folder, FOLDER), "summary")
  if found is None:
    return {"ladder_runs": "0", "ladder_complete": NOT_YET, "ladder_outcome": NOT_YET,
            "ladder_machines": NOT_YET, "ladder_edge": NOT_YET, "ladder_table": NOT_YET,
            "ladder_figure": ""}
  params = {r["size"]: r["params"] for r in found["rows"]}
  figure = os.path.join(folder, FOLDER, "speedup.png")
  return {
      "ladder_runs": f"{found['runs']:,}",
      "ladder_complete": ", ".join(f"{params[s]:,} parameters" for s in found["sizes_complete"])
                         or NOT_YET,
      "ladder_outcome": outcome(found["recommendation"]),
      "ladder_machines": "; ".join(found["machines"]),
      "ladder_edge": edge_table(found["rows"]) if found["rows"] else NOT_YET,
      "ladder_table": full_table(found["rows"]) if found["rows"] else NOT_YET,
      "ladder_figure": (f"![Speedup against AdamW against parameters]({images}/{FOLDER}/"
                        "speedup.png)") if os.path.exists(figure) else "",
  }

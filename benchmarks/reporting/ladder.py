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

FOLDER = common.LADDER_FOLDER
FIGURE = "speedup.png"
NOT_YET = markdown.NOT_YET
MUON_FAMILY = ("muon", "normuon", "muon_vs", "vsgd_muon")  # the order the tables list them in
WORKLOAD = "character-level transformer LMs"


def load(folder: str) -> dict | None:
  """``summary.json`` under the results folder ``folder``; None before it is written."""
  return common.load(os.path.join(folder, FOLDER), "summary")


def figure(folder: str, images: str, name: str, alt: str) -> str:
  """The markdown of the figure ``name`` beside the summary once it is drawn, else nothing
  (the page then has no figure line); ``images`` is ``folder`` as the pages see it.
  """
  if not os.path.exists(os.path.join(folder, FOLDER, name)):
    return ""
  return f"![{alt}]({images}/{FOLDER}/{name})"


def rung(row: dict) -> str:
  """A rung as the tables name it, its parameters and budget (its size's name until it
  has a parameter count).
  """
  return f"{row['params']:,} · {row['budget']:g}" if "params" in row else (
      f"{row['size']} · {row['budget']:g}")


def difference(found: dict | None) -> str:
  """A paired difference of the summary, its interval and verdict; "-" where not run."""
  return "-" if found is None else f"{markdown.interval(found)} {found['verdict']}"


def _speedup(found: dict | None) -> str:
  """A speedup read off the reference's measured curve; past its budgets, the bound (a
  lower bound beyond the largest, an upper bound below the smallest) and how many seeds
  lie there.
  """
  read = markdown.interval(found, digits=2, sign="")
  if not found or found.get("range", "inside") == "inside":
    return read
  side = {"beyond": ">", "below": "<"}[found["range"]]
  if found["outside"] == found["n"]:
    return f"{side} {found['bound']:.2f} ({found['range']} the measured range)"
  return (f"{read} ({found['outside']} of {found['n']} seeds {found['range']} the measured "
          f"range, each at its bound {found['bound']:.2f})")


def edge_table(rows: list[dict]) -> str:
  """VSGD-Muon's paired test differences at each rung it has run, and its speedup
  against Muon: what the recommendation rule judges.
  """
  cells = [[rung(r), *(markdown.interval(r[f"minus_{other}"])
                       for other in ("muon", "normuon", "muon_vs", "adamw")),
            _speedup(r["speedup_vs_muon"])]
           for r in rows if r["entry"] == "vsgd_muon"]
  return markdown.table(["parameters · chars a parameter", "− Muon", "− NorMuon", "− Muon-VS",
                         "− AdamW", "speedup vs Muon"], cells)


def full_table(rows: list[dict]) -> str:
  """Every rung and entry: chosen rate (its AdamW part's), test bits/char, speedups."""
  cells = [[rung(r), styles.short(r["entry"]),
            f"{r['rate']:g}" + ("" if r["entry"] == "adamw" else f" ({r['adam_rate']:g})"),
            f"{markdown.mean_sd(r['test_mean'], r['test_sd'])} ({r['seeds']})",
            _speedup(r["speedup_vs_adamw"]), _speedup(r["speedup_vs_muon"])]
           for r in rows]
  return markdown.table(["parameters · chars a parameter", "entry", "rate (AdamW part)",
                         "test bits/char (seeds)", "speedup vs AdamW", "vs Muon"], cells)


def fits_table(fits: list[dict]) -> str:
  """The loss-against-data fit the speedups used until PROTOCOL.md's addendum 5: a row a
  size and reference, its floor E and exponent over the seeds, and its residuals (measured
  minus fitted test bits/char, mean over the seeds) at each budget, with their RMS.
  """
  groups: dict[tuple, list[dict]] = {}
  for row in fits:
    groups.setdefault((row["params"], row["reference"]), []).append(row)
  cells = []
  for (params, reference), rows in sorted(groups.items()):
    residuals = [sum(r["residuals"][i] for r in rows) / len(rows)
                 for i in range(len(rows[0]["budgets"]))]
    cells.append([f"{params:,}", styles.short(reference),
                  " / ".join(f"{r['E']:.2f}" for r in rows),
                  " / ".join(f"{r['beta']:.2f}" for r in rows),
                  ", ".join(f"{b:g}: {x:+.3f}" for b, x in zip(rows[0]["budgets"], residuals,
                                                               strict=True)),
                  f"{sum(r['rms'] for r in rows) / len(rows):.3f}"])
  return markdown.table(["parameters", "reference", "E by seed", "exponent by seed",
                         "residual by budget (mean of seeds)", "RMS"], cells)


def sensitivity_table(rows: list[dict]) -> str:
  """The AdamW-part sensitivity check: a column an AdamW-part rate, a row each Muon-family
  entry's test bits/char at its chosen matrix rate, then VSGD-Muon's paired differences to
  Muon and NorMuon with their verdicts ("-": not run).
  """
  names = [e for e in MUON_FAMILY if any(e in r["entries"] for r in rows)]
  rate = {e: next(r["entries"][e]["rate"] for r in rows if e in r["entries"]) for e in names}
  cells = [[f"{styles.short(e)} ({rate[e]:g})",
            *(markdown.mean_sd(r["entries"][e]["test_mean"], r["entries"][e]["test_sd"])
              if e in r["entries"] else "-" for r in rows)] for e in names]
  for other in ("muon", "normuon"):
    cells.append([f"{styles.short('vsgd_muon')} − {styles.short(other)}",
                  *(difference(r["versus"].get(other)) for r in rows)])
  return markdown.table(["entry (matrix rate)", *(
      f"AdamW part {r['adam_rate']:.3g}" + ("" if math.isclose(r["factor"], 1.0) else
                                            f" (×{r['factor']:.3g})") for r in rows)], cells)


def sensitivity_outcome(rows: list[dict]) -> str:
  """The sensitivity check's verdicts in a line: VSGD-Muon against Muon and NorMuon at each
  AdamW-part rate ("-": not run yet).
  """
  verdicts = [f"{r['adam_rate']:.3g} " + " / ".join(
      r["versus"][o]["verdict"] if o in r["versus"] else "-" for o in ("muon", "normuon"))
      for r in rows]
  return f"VSGD-Muon against Muon / NorMuon, by AdamW part: {'; '.join(verdicts)}"


def own_best_outcome(found: dict) -> str:
  """``protocol.OWN_BEST_RULE``'s outcome: each entry's own-best AdamW part (flagged where
  it lies on its window's edge at the cap of parts), VSGD-Muon's paired differences at
  them, and whether the size keeps holding.
  """
  if found["holds"] is None:
    return f"{NOT_YET} (an entry lacks an AdamW part's runs); until then the size does not hold"
  best = ", ".join(f"{styles.short(e)} {found['best'][e]['adam_rate']:.3g}"
                   + (" (on its window's edge)" if found["best"][e].get("on_edge") else "")
                   for e in MUON_FAMILY if e in found["best"])
  versus = "; ".join(f"{styles.short('vsgd_muon')} − {styles.short(o)} "
                     f"{difference(found['versus'][o])}" for o in ("muon", "normuon"))
  keeps = "keep holding" if found["holds"] else "no longer hold"
  return (f"each entry's own-best AdamW part: {best}. There, {versus}: "
          f"**{found['params']:,} parameters {keeps}**")


def shares_table(found: dict) -> str:
  """The AdamW-part share check: a row a size (VSGD-Muon's chosen matrix rate), a column a
  share, each cell the mean validation bits/char that decides and the test mean ± sd
  ("-": not run); then each share's largest shortfall to the best share at a size.
  """
  shares = sorted({row["share"] for size in found["sizes"] for row in size["shares"]})
  cells = []
  for size in found["sizes"]:
    at = {row["share"]: row for row in size["shares"]}
    cells.append([f"{size['params']:,} ({size['rate']:g})", *(
        f"{at[share]['val_mean']:.3f} (test "
        f"{markdown.mean_sd(at[share]['test_mean'], at[share]['test_sd'])}; "
        f"AdamW part {at[share]['adam_rate']:.3g})"
        if share in at else "-" for share in shares)])
  worst = {row["share"]: row["shortfall"] for row in found["worst_shortfall"]}
  cells.append(["largest shortfall", *(f"{worst[share]:.3f}" if share in worst else "-"
                                       for share in shares)])
  return markdown.table(["parameters (matrix rate)", *(f"share {share:.3g}" for share in shares)],
                        cells)


def share_outcome(found: dict) -> str:
  """The share rule's outcome in a few words."""
  if not found["complete"]:
    return f"{NOT_YET} (a size lacks a share); the default stays {found['default']:.3g}"
  return f"the default share is {found['default']:.3g}"


def _listed(words: list[str]) -> str:
  """``a``, ``a and b``, ``a, b and c``."""
  return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def outcome(recommendation: dict, momentum: dict | None = None) -> str:
  """The recommendation rule's outcome in a few words, with what it rests on: the
  workload, the sizes and budgets run, and Muon's momentum: once the momentum study's rule
  has an outcome (``momentum``, PROTOCOL.md's addendum 5), that rule's, against Muon with
  its momentum tuned; until then the ladder's, against Muon at 0.95, said to be untuned.
  """
  if recommendation["outcome"].startswith("none"):
    return f"{NOT_YET} (a CPU rung lacks a result)"
  sizes, params = recommendation["sizes_measured"], recommendation["params"]
  named = lambda names: _listed([f"{params[s]:,}" for s in names])
  budgets = _listed([f"{b:g}" for b in recommendation["budgets"]])
  against = ("against Muon with its momentum tuned (beta 0.8 to 0.98, grown to 0.7 or 0.99 at "
             "an edge, each at its own rate)"
             if momentum else "against Muon at its default momentum (0.95, not tuned)")
  scope = (f"on {WORKLOAD} of {named(sizes)} parameters after {budgets} training characters "
           f"a parameter, {against}")
  beyond = styles.short(recommendation["beyond"])
  if momentum:
    beyond = "Muon at the best beta the study found at each size and budget"
  s_star = (momentum or recommendation)["s_star"]
  if s_star is None:
    return f"`vsgd_muon` is not the default; the pick is {beyond}, {scope}"
  held, above = sizes[:sizes.index(s_star) + 1], sizes[sizes.index(s_star) + 1:]
  rest = f"; at {named(above)}, {beyond}" if above else ""
  return f"`vsgd_muon` is the default at {named(held)} parameters{rest}, {scope}"


def values(folder: str, images: str) -> dict[str, str]:
  """The templates' ladder values, each "none yet" until its part of the summary lands;
  ``images`` is ``folder`` as the pages see it.
  """
  found = load(folder) or {}
  params = {r["size"]: r["params"] for r in found.get("rows", [])}
  own = found.get("own_best") or {}
  tuned = (found.get("momentum") or {}).get("outcome")
  sensitivity, shares = found.get("sensitivity"), found.get("adamw_part_shares")
  return {
      "ladder_runs": f"{found.get('runs', 0):,}",
      "ladder_complete": ", ".join(f"{params[s]:,} parameters"
                                   for s in found.get("sizes_complete", [])) or NOT_YET,
      "ladder_outcome": markdown.or_none_yet(found.get("recommendation"),
                                             lambda rule: outcome(rule, tuned)),
      "ladder_machines": "; ".join(found.get("machines", [])) or NOT_YET,
      "ladder_edge": markdown.or_none_yet(found.get("rows"), edge_table),
      "ladder_table": markdown.or_none_yet(found.get("rows"), full_table),
      "ladder_fits": markdown.or_none_yet(found.get("reference_fits"), fits_table),
      "ladder_sensitivity": markdown.or_none_yet(sensitivity, sensitivity_table),
      "ladder_sensitivity_outcome": markdown.or_none_yet(sensitivity, sensitivity_outcome),
      "ladder_own_best": markdown.or_none_yet(own.get("rows"), sensitivity_table),
      "ladder_own_best_outcome": markdown.or_none_yet(own, own_best_outcome),
      "ladder_shares": markdown.or_none_yet(shares, shares_table),
      "ladder_share_outcome": markdown.or_none_yet(shares, share_outcome),
      "ladder_figure": figure(folder, images, FIGURE,
                              "Speedup against AdamW against parameters"),
  }

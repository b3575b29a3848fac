"""The results pages' section on the momentum study (the ladder's addendum 5), from the
``"momentum"`` part of ``benchmarks/results/ladder/summary.json``.

A row a rung: the betas run so far (mean validation bits/char at each one's chosen
rate), the momentum-tuned Muon, VSGD-Muon against it and the tuned Muon's gain over
beta 0.95 (paired test differences, 95% intervals over the seeds), and VSGD-Muon's
effective beta1 at the end of training. The figure draws the read-outs over
training beside each rung's best beta. The variants of addendum 6 follow, a row a
rung they ran.
"""

from __future__ import annotations

import numpy as np

from benchmarks.reporting import ladder
from benchmarks.reporting import markdown

FIGURE = "momentum.png"  # beside summary.json; plots.momentum_chart draws it


def _mean(bits: dict) -> float:
  return float(np.mean(list(bits.values())))


def _by_rung(found: dict) -> dict[str, dict]:
  """The study's rungs by the name its outcome and its variants give them, "size budget"."""
  return {f"{r['size']} {r['budget']:g}": r for r in found["rungs"]}


def table(rungs: list[dict]) -> str:
  """A row a rung of the study, in its order ("-": not run yet)."""
  cells = []
  for row in rungs:
    betas = ", ".join(f"{b['beta']:g}: {b['val_mean']:.3f}" for b in row["betas"]) or "-"
    best = row["best"]
    tuned = "-" if best is None else (
        f"{best['beta']:g}{' (edge)' if best['on_edge'] else ''} ({best['rate']:g}): "
        f"{_mean(best['test']):.3f} / {_mean(row['vsgd_muon']['test']):.3f}")
    end = row["readout"] and row["readout"]["end"]
    cells.append([
        ladder.rung(row), betas, tuned,
        ladder.difference(row["versus_tuned"]),
        # Where the best beta is 0.95, the tuned Muon is Muon itself: no gain to give.
        "0.95 itself" if best is not None and best["beta"] == 0.95 else
        ladder.difference(row["tuned_gain"]),
        "-" if not end else f"{end['median']:.2f} [{end['q10']:.2f}, {end['q90']:.2f}]"])
  # "(edge)": the best beta is the grid's one step grown a side, beyond which nothing ran.
  return markdown.table(["parameters · chars a parameter", "beta: validation at its rate",
                         "tuned Muon's beta (rate): its test / VSGD-Muon's",
                         "VSGD-Muon − tuned Muon", "tuned Muon − Muon 0.95",
                         "VSGD-Muon's effective beta1 at the end"], cells)


def status(found: dict) -> str:
  """How far the study has run: rungs with a tuned Muon, read-outs, hours of its budget."""
  done = sum(r["best"] is not None for r in found["rungs"])
  read = [r["readout"] for r in found["rungs"] if r["readout"]]
  reproduced = sum(r["reproduced"] for r in read)
  gaps = [r["largest_gap"] for r in read if r["largest_gap"] is not None]
  pending = ", ".join(ladder.rung(r) for r in found["rungs"] if r["best"] is None) or "none"
  return (f"{done} of {len(found['rungs'])} rungs have their momentum-tuned Muon, "
          f"{len(read)} their read-out; {found['hours']:.2f} of the study's "
          f"{found['budget_hours']:g} hours of program time spent. Not run yet: {pending}. "
          f"{reproduced} of {sum(r['runs'] for r in read)} read-out runs reproduce the ledger's "
          "bits exactly; "
          + (f"the largest gap is {max(gaps):.4f} bits/char (a program of 3 runs where the "
             "ledger's had 9: the vmapped batch changes XLA's rounding)" if gaps else
             "none is compared yet"))


def outcome(found: dict) -> str:
  """The momentum rule's outcome in a few words; "none yet" until the rungs run decide it."""
  result = found["outcome"]
  if result is None:
    return (f"{markdown.NOT_YET} (a rung lacks its momentum-tuned Muon); until then the ladder's "
            "rule above stands, against Muon with its momentum not tuned")
  by_rung = _by_rung(found)
  best = "; ".join(f"{ladder.rung(by_rung[rung])}: {beta:g}" for rung, beta in sorted(
      result["best_beta"].items(), key=lambda item: list(by_rung).index(item[0])))
  pick = f"Muon, with the best beta per rung ({best})"
  where = (f"`vsgd_muon` is the default at sizes up to {result['s_star_params']:,} parameters; "
           f"beyond, {pick}" if result["s_star"] else f"`vsgd_muon` is the default at no size "
           f"run; the pick is {pick}")
  never = ("; VSGD-Muon is behind the momentum-tuned Muon at no rung: Muon whose momentum needs "
           "no tuning" if result["never_behind"] else "")
  pending = ("" if not result["pending"] else
             f"; decided before {', '.join(ladder.rung(by_rung[p]) for p in result['pending'])} "
             "ran, which cannot change it (the smallest size already fails)")
  return f"{where}{never}{pending}"


def variants(found: dict) -> str:
  """Each variant of addendum 6: how far it ran and the rule's outcome, then a row a rung run
  (its rate, its test bits beside VSGD-Muon's, its paired differences to the momentum-tuned
  Muon and to VSGD-Muon).
  """
  by_rung = _by_rung(found)
  parts = []
  for variant in found.get("variants", []):
    rows = variant["rows"]
    changes = ", ".join(f"{k}={v}" for k, v in variant["changes"].items())
    not_run = ", ".join(ladder.rung(by_rung[r]) for r in variant["not_run"]) or "none"
    stopped = ("" if variant["stopped_at"] is None else
               " It is behind the momentum-tuned Muon at "
               f"{ladder.rung(by_rung[variant['stopped_at']])}, so its later rungs do not run.")
    if variant["replaces_default"]:
      verdict = "it replaces `vsgd_muon`'s default"
    elif variant["stopped_at"] or not variant["not_run"]:
      verdict = "the default stays"
    else:
      verdict = markdown.NOT_YET  # rungs still to run
    parts.append(f"`{variant['entry']}` ({changes}): "
                 f"{len(rows)} of {len(rows) + len(variant['not_run'])} rungs run; not run: "
                 f"{not_run}.{stopped} The rule's outcome: **{verdict}**.")
    if rows:
      cells = []
      for r in rows:
        at = by_rung[f"{r['size']} {r['budget']:g}"]
        vsgd = "-" if not at.get("vsgd_muon") else f"{_mean(at['vsgd_muon']['test']):.3f}"
        cells.append([ladder.rung(at), f"{r['rate']:g}", f"{_mean(r['test']):.3f} / {vsgd}",
                      ladder.difference(r["versus_tuned"]),
                      ladder.difference(r["versus_vsgd_muon"])])
      parts.append(markdown.table(["parameters · chars a parameter", "its rate",
                                   "its test / VSGD-Muon's", "it − tuned Muon",
                                   "it − VSGD-Muon"], cells))
  return "\n\n".join(parts) or markdown.NOT_YET


def values(folder: str, images: str) -> dict[str, str]:
  """The templates' momentum values, "none yet" until the summary has the study;
  ``images`` is ``folder`` as the pages see it.
  """
  found = (ladder.load(folder) or {}).get("momentum")
  return {"momentum_status": markdown.or_none_yet(found, status),
          "momentum_table": markdown.or_none_yet(found, lambda study: table(study["rungs"])),
          "momentum_outcome": markdown.or_none_yet(found, outcome),
          "momentum_variants": markdown.or_none_yet(found, variants),
          "momentum_figure": ladder.figure(folder, images, FIGURE,
                                           "VSGD-Muon's effective momentum over training")}

"""The figures the pages show, drawn from the JSON beside which each is written.

``contest_chart``: per contest size, each entry's test bits per character at every
peak rate its protocol tried (the metric the tables report), its chosen rate (on
validation) marked; each optimizer in its colour and line (``styles``).
``ladder_chart``: the ladder's speedup against AdamW against model size, one line
an entry (its colour) and data budget (its line), from ``ladder/summary.json``;
``momentum_chart``: the momentum study's read-outs, from the same file. The
noise-scale validation's figures are ``noise_scale.plot_all``'s.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks.reporting import contest
from benchmarks.reporting import ladder
from benchmarks.reporting import momentum
from benchmarks.reporting import noise_scale
from benchmarks.reporting import styles

BUDGET_LINES = ("-", "--", ":", "-.")  # the ladder's budgets, smallest first


def _axes(height: float):
  """A figure of the text column's width and ``height`` inches, and its axes.

  matplotlib is imported here, not with the module, so that the pages are written
  without it (``python -m benchmarks.reporting`` without ``--plots``).
  """
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt.subplots(figsize=(7.0, height))


def _save(fig, ax, path: str, legend_size: float) -> str:
  """``fig`` with its legend right of ``ax``, written to ``path`` and closed; ``path``."""
  import matplotlib.pyplot as plt
  ax.legend(fontsize=legend_size, loc="upper left", bbox_to_anchor=(1.01, 1.0))
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def contest_chart(payload: dict, path: str) -> str:
  fig, ax = _axes(2.8)
  for name in payload["protocol"]["entries"]:
    e = payload["entries"].get(name)
    if e is None:
      continue
    row = styles.style(name)
    ax.plot(e["rates"], e["test_by_rate"], row.line, color=row.colour, marker=".",
            label=row.short)
    chosen = e["rates"].index(e["chosen_rate"])
    ax.plot(e["chosen_rate"], e["test_by_rate"][chosen], "o", color=row.colour, markersize=7,
            markerfacecolor="none")
  best = min(min(e["test_by_rate"]) for e in payload["entries"].values())
  ax.set_ylim(best - 0.05, best + 0.6)
  ax.set_xscale("log")
  ax.set_xlabel("peak learning rate (circled: chosen on validation)")
  ax.set_ylabel("test bits/char, mean of seeds")
  ax.set_title(payload["workload"]["title"], fontsize=9)
  return _save(fig, ax, path, legend_size=7)


def ladder_chart(found: dict, path: str) -> str | None:
  """Speedup against AdamW (mean, 95% interval over seeds) against parameters; None,
  drawing nothing, before any speedup has been measured. A rung whose speedup was not
  read off inside AdamW's measured budgets for every seed is left out: it is a bound.
  """
  rows = [r for r in found["rows"] if r["speedup_vs_adamw"] and r["entry"] != "adamw"
          and r["speedup_vs_adamw"].get("range", "inside") == "inside"]
  if not rows:
    return None
  fig, ax = _axes(3.2)
  budgets = sorted({r["budget"] for r in rows})
  for name in styles.ORDER:
    for budget in budgets:
      points = sorted((r["params"], r["speedup_vs_adamw"]) for r in rows
                      if r["entry"] == name and r["budget"] == budget)
      if not points:
        continue
      x, s = zip(*points, strict=True)
      ax.errorbar(x, [p["mean"] for p in s],
                  yerr=[[p["mean"] - p["low"] for p in s], [p["high"] - p["mean"] for p in s]],
                  color=styles.style(name).colour, ls=BUDGET_LINES[budgets.index(budget) % 4],
                  marker="o", markersize=3, capsize=2,
                  label=f"{styles.short(name)}, {budget:g} chars/param")
  ax.axhline(1.0, color="grey", lw=0.8)
  ax.set(xscale="log", xlabel="parameters", ylabel="speedup against AdamW")
  return _save(fig, ax, path, legend_size=6)


def momentum_chart(found: dict, path: str) -> str | None:
  """Each rung's read-out, VSGD-Muon's effective beta1 over training (median, a band from
  the 10% to the 90% quantile, means over the seeds), and its best Muon beta as a dashed
  line; None, drawing nothing, before any read-out.
  """
  rungs = [r for r in found["rungs"] if r["readout"]]
  if not rungs:
    return None
  fig, ax = _axes(3.2)
  for i, row in enumerate(rungs):
    read, colour = row["readout"], f"C{i}"
    x = np.asarray(read["step"]) / read["steps"]
    ax.plot(x, read["median"], color=colour, marker=".", label=f"{ladder.rung(row)} chars/param")
    ax.fill_between(x, read["q10"], read["q90"], color=colour, alpha=0.15, lw=0)
    if row["best"] is not None:
      ax.axhline(row["best"]["beta"], color=colour, ls="--", lw=0.9)
  ax.set(xlabel="fraction of training", ylabel="effective beta1",
         title="VSGD-Muon's effective momentum (dashed: best Muon beta at the rung)")
  ax.title.set_fontsize(9)
  return _save(fig, ax, path, legend_size=6)


def draw_all(folder: str) -> list[str]:
  """Every figure the pages show, beside its JSON under ``folder``; their paths."""
  drawn = [contest_chart(payload, os.path.join(folder, contest.FOLDER, f"contest_{size}.png"))
           for size, payload in contest.load(folder).items()]
  found = ladder.load(folder)
  beside = os.path.join(folder, ladder.FOLDER)
  chart = found and ladder_chart(found, os.path.join(beside, ladder.FIGURE))
  study = found and found.get("momentum") and momentum_chart(
      found["momentum"], os.path.join(beside, momentum.FIGURE))
  return drawn + [c for c in (chart, study) if c] + noise_scale.plot_all(
      os.path.join(folder, "noise_scale"))

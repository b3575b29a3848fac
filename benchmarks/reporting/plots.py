"""The figures the pages show, drawn from the JSON beside which each is written.

``contest_chart``: per contest size, each entry's test bits per character at every
peak rate its protocol tried (the metric the tables report), its chosen rate (on
validation) marked; each optimizer in its colour and line (``styles``).
"""

from __future__ import annotations

import os

from benchmarks.reporting import contest
from benchmarks.reporting import noise_scale
from benchmarks.reporting import styles


def contest_chart(payload: dict, path: str) -> str:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(7.0, 2.8))
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
  ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def draw_all(folder: str) -> list[str]:
  """Every figure the pages show, beside its JSON under ``folder``; their paths."""
  drawn = [contest_chart(payload, os.path.join(folder, contest.FOLDER, f"contest_{size}.png"))
           for size, payload in contest.load(folder).items()]
  return drawn + noise_scale.plot_all(os.path.join(folder, "noise_scale"))

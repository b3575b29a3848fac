"""The figures the pages show, each beside its JSON: the step cost's (drawn here),
the contest's (``contest.charts``) and the noise scale's (``noise_scale``). The
pages only name them: writing a page draws nothing.
"""

from __future__ import annotations

import os

from benchmarks import common
from benchmarks.reporting import contest
from benchmarks.reporting import noise_scale
from benchmarks.reporting import styles


def step_cost(rows: list[dict], path: str) -> None:
  """Each optimizer's step over Adam's against the parameter count (``step_cost.json``)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  donations = sorted({r["donated"] for r in rows})
  fig, axes = plt.subplots(1, len(donations), figsize=(4 * len(donations) + 1.6, 3.4), sharey=True,
                           squeeze=False)
  axes = axes[0]
  sizes = sorted({r["params"] for r in rows})
  names = sorted({r["optimizer"] for r in rows}, key=styles.rank)
  for ax, donate in zip(axes, donations, strict=True):
    for name in names:
      ys = [next(r["ratio"] for r in rows if r["params"] == s and r["donated"] == donate
                 and r["optimizer"] == name) for s in sizes]
      colour, line = styles.style(name)
      ax.plot(sizes, ys, marker="o", color=colour, ls=line, label=name)
    ax.set(xscale="log", xlabel="parameters", title=f"donated={donate}")
  axes[0].set_ylabel("step time / Adam step time")
  axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def draw_all(root: str = common.RESULTS) -> list[str]:
  """Draws every figure the pages show beside its JSON under ``root``; returns the paths."""
  written = []
  step = common.load(root, "step_cost")
  if step and step.get("rows"):
    written.append(os.path.join(root, "step_cost.png"))
    step_cost(step["rows"], written[-1])
  return written + contest.charts(root) + noise_scale.plot_all(os.path.join(root, "noise_scale"))

"""The step cost's figure, beside its JSON: each optimizer's step against Adam's
over the parameter count (``step_cost.json``), the one cost a page draws; the
other cost results are the appendix's tables.
"""

from __future__ import annotations


def step_cost(rows: list[dict], path: str) -> None:
  """Each optimizer's step over Adam's against the parameter count (``step_cost.json``)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  donations = sorted({r["donated"] for r in rows})
  fig, axes = plt.subplots(1, len(donations), figsize=(5 * len(donations), 3.6), sharey=True,
                           squeeze=False)
  axes = axes[0]
  for ax, donate in zip(axes, donations, strict=True):
    sizes = sorted({r["params"] for r in rows})
    for name in dict.fromkeys(r["optimizer"] for r in rows):
      ys = [next(r["ratio"] for r in rows if r["params"] == s and r["donated"] == donate
                 and r["optimizer"] == name) for s in sizes]
      ax.plot(sizes, ys, marker="o", label=name)
    ax.set(xscale="log", xlabel="parameters", title=f"donated={donate}")
  axes[0].set_ylabel("step time / Adam step time")
  axes[-1].legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


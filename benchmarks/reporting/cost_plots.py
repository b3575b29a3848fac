"""Figures of the step costs, each beside its JSON: one optimizer step against
Adam's over the parameter count (``step_cost*.json``) and the trainer's whole step,
VSGD against Adam, per config (``train_step*.json``).
"""

from __future__ import annotations

import numpy as np


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


def _batch_title(rows: list[dict]) -> str:
  batches = sorted({r["batch"] for r in rows})
  return f"batch {batches[0]}" if len(batches) == 1 else "the paper's batch of each config"


def train_step(rows: list[dict], path: str) -> None:
  """VSGD's whole train step over Adam's, and both in ms, per config (``train_step.json``)."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, (ax_ratio, ax_ms) = plt.subplots(1, 2, figsize=(12, 3.8))
  names = [r["config"].replace("_", "\n", 1) for r in rows]
  ratios = np.array([r["ratio"] for r in rows])
  spread = np.array([[r["ratio"] - r["ratio_p25"] for r in rows],
                     [r["ratio_p75"] - r["ratio"] for r in rows]])
  ax_ratio.bar(names, ratios, yerr=np.clip(spread, 0, None), capsize=3)
  ax_ratio.axhline(1.0, color="k", lw=0.5)
  ax_ratio.set(ylabel="VSGD step / Adam step", title=_batch_title(rows))
  x = np.arange(len(rows))
  ax_ms.bar(x - 0.2, [r["adam_ms"] for r in rows], 0.4, label="Adam")
  ax_ms.bar(x + 0.2, [r["vsgd_ms"] for r in rows], 0.4, label="VSGD")
  ax_ms.set_xticks(x, names)
  ax_ms.set(ylabel="median step (ms)", yscale="log")
  ax_ms.legend()
  for ax in (ax_ratio, ax_ms):
    ax.tick_params(axis="x", labelsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)

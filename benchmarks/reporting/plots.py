"""Plots of the time-to-result benchmark, drawn from its JSON files.

Two overview figures put a protocol's workloads side by side, with one legend of
every optimizer: the final validation metric against the learning rate, and the
validation metric against the step at the chosen rate (mean over seeds, band from
the lowest to the highest seed). ``draw_all`` draws the other figures the pages
show: these for each protocol of the small workloads' page, the step cost's
(``cost_plots``) and the noise scale's (``noise_scale``); the contest's charts
are drawn with its section.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks import common
from benchmarks.reporting import cost_plots
from benchmarks.reporting import noise_scale
from benchmarks.reporting import reading
from benchmarks.reporting import styles


def _metric_axis(ax, workload, label):
  ax.set_ylabel(f"{label} {workload['metric']}")
  if workload["log_metric"]:
    ax.set_yscale("log")


def _positive(values, workload):
  """Values for a log axis: suboptimality can round below zero in float32."""
  values = np.asarray(values, float)
  return np.maximum(values, 1e-6) if workload["log_metric"] else values


def _curves(ax, payload):
  """The validation metric against the step, at each entry's chosen rate."""
  w = payload["workload"]
  for name, e in payload["entries"].items():
    curves = _positive(np.asarray(e["curves"]["val"], float), w)
    steps = w["eval_every"] * np.arange(1, curves.shape[1] + 1)
    color, style = styles.style(name)
    with np.errstate(invalid="ignore"):
      ax.plot(steps, np.nanmean(curves, 0), color=color, ls=style, label=name)
      ax.fill_between(steps, np.nanmin(curves, 0), np.nanmax(curves, 0), color=color, alpha=0.15)
  ax.axhline(w["target"], color="k", lw=0.8, ls="--")
  _metric_axis(ax, w, "validation")
  ax.set_ylim(*_sensible_range(payload))
  ax.set_xlabel("step")


def _sensible_range(payload):
  """Limits that show the good runs, not the diverged ones."""
  w = payload["workload"]
  finals = np.concatenate([e["val_final"] for e in payload["entries"].values()])
  finals = finals[np.isfinite(finals)]
  if w["higher_is_better"]:
    low = min(np.percentile(finals, 10), w["target"]) if finals.size else 0
    return max(0.0, low - 0.05), 1.0
  high = max(np.percentile(finals, 90), w["target"]) if finals.size else 1
  low = min(finals.min(), w["target"]) if finals.size else 0
  return (low / 3, 3 * high) if w["log_metric"] else (0.9 * low, 1.5 * high)


def _sensitivity(ax, payload):
  w = payload["workload"]
  for name, e in payload["entries"].items():
    color, style = styles.style(name)
    val = _positive(e["tuning"]["val"], w)
    ax.plot(e["tuning"]["learning_rate"], val, color=color, ls=style, marker="o", ms=3,
            label=name)
  ax.axhline(w["target"], color="k", lw=0.8, ls="--")
  ax.set_xscale("log")
  ax.set_xlabel("learning rate")
  _metric_axis(ax, w, "final validation")
  ax.set_ylim(*_sensible_range(payload))


def plot_all(folder: str) -> list[str]:
  """Writes the two overview figures of the JSON files in ``folder``; returns their
  paths (none where it holds no results).
  """
  import matplotlib
  matplotlib.use("Agg")
  results = reading.load_results(folder)
  written = []
  for kind, draw in (("lr", _sensitivity), ("val", _curves)) if results else ():
    path = os.path.join(folder, f"ttr_overview_{kind}.png")
    _overview(results, draw, path)
    written.append(path)
  return written


def _overview(results: dict, draw, path: str) -> None:
  """The workloads' panels side by side, three a row, and one legend of every
  optimizer in the panel left over (or below), at a size that stays readable
  where the page shrinks the figure to its text column (about 690 px).
  """
  import matplotlib.pyplot as plt
  columns = 3
  rows = -(-(len(results) + 1) // columns)
  with plt.rc_context({"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9,
                       "xtick.labelsize": 8, "ytick.labelsize": 8}):
    fig, axes = plt.subplots(rows, columns, figsize=(8.4, 2.6 * rows), squeeze=False)
    panels = axes.ravel()
    for ax, payload in zip(panels, results.values(), strict=False):
      draw(ax, payload)
      ax.set_title(payload["workload"]["title"].replace(" on the Python standard library", ""))
    handles: dict = {}
    for ax in panels[:len(results)]:
      for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
        handles.setdefault(label, handle)
    for ax in panels[len(results):]:
      ax.axis("off")
    order = sorted(handles, key=styles.rank)
    fig.tight_layout()
    panels[-1].legend([handles[n] for n in order], order, loc="center", frameon=False,
                      fontsize=9 if len(order) <= 10 else 8, handlelength=2.5)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def draw_all(root: str = common.RESULTS) -> list[str]:
  """Draws the figures the pages show (but the contest's) beside their JSON under
  ``root``; returns the paths.
  """
  written = []
  step = common.load(root, "step_cost")
  if step and step.get("rows"):
    written.append(os.path.join(root, "step_cost.png"))
    cost_plots.step_cost(step["rows"], written[-1])
  for schedule in reading.load_all(root):  # the protocols the small workloads' page shows
    written += plot_all(common.schedule_folder(root, schedule))
  written += noise_scale.plot_all(os.path.join(root, "noise_scale"))
  return written

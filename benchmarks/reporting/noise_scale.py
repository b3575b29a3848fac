"""Plots and the results-page section of the noise-scale validation, from its JSON
(``python -m benchmarks.noise_scale`` writes it).
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks import common
from benchmarks.reporting import markdown

BAR_MIDDLE, BAR_END = 2.0, 3.0


def phase(step: int, steps: int) -> str:
  """warmup: the first 10% of the run; end: the last 10%; middle: the 80% between."""
  if step <= 0.1 * steps:
    return "warmup"
  if step > 0.9 * steps:
    return "end"
  return "middle"


def _load(folder: str) -> list[dict]:
  found = (common.load(folder, name) for name in common.NOISE_SCALE_WORKLOADS)
  return [payload for payload in found if payload is not None]


def reference_of(point: dict) -> tuple[float, float]:
  """(value, standard error): the exact value where the workload has one (error 0 up to
  rounding), else the draw-based reference and its jackknife error.
  """
  if "exact" in point:
    return point["exact"], 0.0
  return point["reference"], point["reference_se"]


def ratios(payload_run: dict, key: str = "read_out") -> dict[str, list[float]]:
  """read-out / reference per phase."""
  out: dict[str, list[float]] = {"warmup": [], "middle": [], "end": []}
  for p in payload_run["points"]:
    ref = reference_of(p)[0]
    r = p[key] / ref if np.isfinite(ref) and ref > 0 else float("nan")
    out[phase(p["step"], payload_run["steps"])].append(r)
  return out


def _summary(values: list[float]) -> str:
  """The median (10%–90%) of the finite ``values``, and how many are not finite."""
  v = np.asarray(values, float)
  if v.size == 0:
    return "-"
  finite = v[np.isfinite(v)]
  bad = v.size - finite.size
  if finite.size == 0:
    return f"({bad} not finite)"
  spread = (f"{np.median(finite):.2g} ({np.percentile(finite, 10):.2g}–"
            f"{np.percentile(finite, 90):.2g})")
  return f"{spread}, {bad} not finite" if bad else spread


def meets_bar(payload_run: dict, key: str = "read_out") -> bool:
  """Within 2x over the middle 80% (every point) and, under warmup + cosine, 3x at the end."""
  r = ratios(payload_run, key)
  def within(vals, f):
    v = np.asarray(vals, float)
    return bool(v.size) and bool(np.all(np.isfinite(v) & (v <= f) & (v >= 1 / f)))
  ok = within(r["middle"], BAR_MIDDLE)
  if payload_run["schedule"]["name"] == "warmup_cosine":
    ok = ok and within(r["end"], BAR_END)
  return ok


def plot_all(folder: str) -> list[str]:
  """Draws a figure a workload's results in ``folder``; returns their paths."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  written = []
  for payload in _load(folder):
    runs = payload["runs"]
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for ax, r in zip(axes[0], runs, strict=True):
      pts = r["points"]
      step = np.array([p["step"] for p in pts])
      ref = np.array([p["reference"] for p in pts], float)
      se = np.array([p["reference_se"] for p in pts], float)
      ax.plot(step, ref, "k-", label=f"reference ({r['draws']} draws, ±1 s.e.)")
      ax.fill_between(step, np.clip(ref - se, 1e-3, None), ref + se, color="k", alpha=0.2)
      if "exact" in pts[0]:
        ax.plot(step, [p["exact"] for p in pts], "k:", label="exact (whole training set)")
      ax.plot(step, [p["read_out"] for p in pts], "o-", label="gradient_noise_scale")
      if "averaged" in pts[0]:
        ax.plot(step, [p["averaged"] for p in pts], "s-", label="parts averaged since last point")
      ax.plot(step, [p["naive"] for p in pts], "x--", alpha=0.6, label="naive B·Σs/Σμ²")
      ax.set_yscale("log")
      ax.set_xlabel("step")
      ax.set_title(f"{r['title']}\n{r['schedule']['name']}", fontsize=9)
      ax.legend(fontsize=7)
    axes[0][0].set_ylabel("B_simple")
    fig.tight_layout()
    written.append(os.path.join(folder, f"{payload['runs'][0]['workload']}.png"))
    fig.savefig(written[-1], dpi=90)
    plt.close(fig)
  return written


def validation_table(payloads: list[dict]) -> str:
  """Each run's read-out over the reference, per phase, and whether it met the bar."""
  rows = []
  for payload in payloads:
    for r in payload["runs"]:
      ph, naive = ratios(r), ratios(r, "naive")
      averaged = ratios(r, "averaged") if "averaged" in r["points"][0] else None
      refs = [reference_of(p) for p in r["points"]]
      rel = [se / ref for ref, se in refs if np.isfinite(ref) and ref > 0]
      bars = ("met" if meets_bar(r) else "missed") + " / " + (
          "-" if averaged is None else "met" if meets_bar(r, "averaged") else "missed")
      rows.append([f"{r['title']}, {r['schedule']['name']}",
                   "; ".join(_summary(ph[k]) for k in ("warmup", "middle", "end")),
                   "-" if averaged is None else
                   f"{_summary(averaged['middle'])}; {_summary(averaged['end'])}",
                   f"{_summary(naive['middle'])}; {_summary(naive['end'])}",
                   f"{np.median(rel) if rel else float('nan'):.2f}", bars])
  return markdown.table(["workload, schedule", "at the step: warmup; middle; end",
                         "averaged: middle; end", "naive: middle; end",
                         "median ref. s.e. / ref.", "bar (at the step / averaged)"], rows)


def exact_table(payloads: list[dict]) -> str:
  """Where a workload has the exact value: how far the draw reference lies from it."""
  rows = []
  for payload in payloads:
    exact = [(p["exact"], p["reference"], p["reference_se"]) for r in payload["runs"]
             for p in r["points"] if "exact" in p]
    z = [(e - ref) / se for e, ref, se in exact if np.isfinite(se) and se > 0]
    if z:
      rows.append([payload["runs"][0]["title"], f"{np.median(np.abs(z)):.2f}", str(len(z))])
  return markdown.table(["workload", "median abs(exact - reference) / s.e.", "points"], rows)


def invariance_table(inv: dict) -> str:
  """The MLP frozen, fresh states fed batches at rate 0: each stream's last read-out."""
  streams = inv.get("read_outs", {b: [v] for b, v in inv["read_out"].items()})
  averaged = inv.get("averaged", {})
  rows = [[str(b), ", ".join(f"{v:.3g}" for v in vals),
           ", ".join(f"{v['read_out']:.3g}" for v in averaged.get(b, [])) or "-"]
          for b, vals in streams.items()]
  return markdown.table(["batch", "read-outs at the last step", "parts averaged, divided"],
                        rows)


def values(folder: str, images: str) -> dict[str, str]:
  payloads = _load(folder)
  inv = common.load(folder, "invariance") or {}
  return {"noise_bar_middle": f"{BAR_MIDDLE:g}", "noise_bar_end": f"{BAR_END:g}",
          "noise_validation": validation_table(payloads) if payloads else "not run yet",
          "noise_exact": exact_table(payloads) if payloads else "not run yet",
          "noise_invariance": invariance_table(inv) if inv else "not run yet",
          "noise_invariance_exact": f"{inv['exact']:.3g}" if inv else "not run yet",
          "noise_invariance_frozen": str(inv.get("frozen_at_step", "not run yet")),
          "noise_figures": "\n\n".join(
              f"![{p['runs'][0]['workload']}]({images}/{p['runs'][0]['workload']}.png)"
              for p in payloads)}

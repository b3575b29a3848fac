"""Markdown tables of the time-to-result benchmark, for the results page."""

from __future__ import annotations

import os

from benchmarks import ttr_plots


def fmt_metric(workload: dict, value: float) -> str:
  if value != value:  # NaN: the run diverged
    return "diverged"
  if workload["metric"] == "accuracy":
    return f"{100 * value:.2f}%"
  if workload["metric"] == "suboptimality":
    return f"{value:.2e}"
  return f"{value:.3f}"


def _mean_std(workload: dict, e: dict) -> str:
  if workload["metric"] == "accuracy":
    return f"{100 * e['test_mean']:.2f} ± {100 * e['test_std']:.2f}"
  if workload["metric"] == "suboptimality":
    return f"{e['test_mean']:.1e} ± {e['test_std']:.0e}"
  return f"{e['test_mean']:.3f} ± {e['test_std']:.3f}"


def _to_target(e: dict) -> str:
  if e["median_steps_to_target"] is None:
    return f"not reached ({e['reached']}/{len(e['seeds'])})"
  return f"{e['median_steps_to_target']:.0f} ({e['reached']}/{len(e['seeds'])})"


def _seconds(e: dict) -> str:
  return "—" if e["seconds_to_target"] is None else f"{e['seconds_to_target']:.2f}"


def _metric_header(workload: dict) -> str:
  unit = " %" if workload["metric"] == "accuracy" else ""
  better = "higher" if workload["higher_is_better"] else "lower"
  return f"{workload['metric']}{unit}, {better} is better"


def summary(folder: str, images: str) -> list[str]:
  """The short table (optimizers by workloads) and the two overview plots."""
  results = ttr_plots.load_results(folder)
  if not results:
    return []
  names = []
  for payload in results.values():
    names += [n for n in payload["entries"] if n not in names]
  first = next(iter(results.values()))
  out = ["## Time to result\n",
         "Five workloads, each with a validation target; every optimizer at its library "
         "defaults with only the learning rate tuned, on the same log-spaced grid, chosen on "
         "the validation split with seed 0, then rerun with more seeds. Machine: "
         f"{_machine(first['machine'])}; how it was run is under *Protocol* below.\n",
         "Test metric at the chosen learning rate, mean ± std over seeds; below it the median "
         "step at which the validation target was reached (seeds that reached it / seeds).\n"]
  header = "| optimizer | " + " | ".join(
      f"{p['workload']['title']} ({_metric_header(p['workload'])})" for p in results.values())
  out += [header + " |", "|---" * (len(results) + 1) + "|"]
  for name in names:
    cells = []
    for payload in results.values():
      e = payload["entries"].get(name)
      cells.append("" if e is None else f"{_mean_std(payload['workload'], e)}<br>"
                   f"step {_to_target(e)}")
    out.append(f"| {name} | " + " | ".join(cells) + " |")
  out += ["", "Final validation metric against the learning rate (seed 0; the dashed line "
          "is the target):\n", f"![learning-rate sensitivity]({images}/ttr_overview_lr.png)\n",
          "Validation curves at the chosen learning rate (mean over seeds, band from the "
          "lowest to the highest seed):\n", f"![validation curves]({images}/ttr_overview_val.png)\n"]
  return out


def _machine(m: dict) -> str:
  return (f"{m['device']} ({m['platform']}, {m['cores']} cores, {m['cpu']}), "
          f"jax {m['jax']}, {m['date']}")


def details(folder: str, images: str) -> list[str]:
  """Per workload: its description, the full table and its three plots."""
  results = ttr_plots.load_results(folder)
  if not results:
    return []
  out = ["## Protocol\n",
         "- Each workload's grid is log-spaced and the same for every optimizer; a grid is "
         "extended by one step beyond its edge (at most twice) where an optimizer's best "
         "value lies on the edge. *edge* in the tables marks a best value still on the edge "
         "after that.",
         "- The learning rate is chosen by the validation metric at the last step of the "
         "seed-0 run; the chosen rate is rerun with seeds 1 to G (G the grid's length), and "
         "the test metric is reported over all seeds at that rate.",
         "- Steps to target: the first evaluation (every `eval_every` steps) at which the "
         "validation metric meets the target; the median over seeds is given when more than "
         "half the seeds reach it.",
         "- Cost per step: one run (not vmapped), compilation excluded, each optimizer timed "
         "in the same process with the calls interleaved with Adam's; the median over "
         "samples and the 25-75% range of the per-round ratio to Adam. Time to target is "
         "that cost times the median steps to target (evaluation time excluded).",
         "- The runs of a sweep train side by side under `jax.vmap` in one compiled "
         "`lax.scan`; the ConvMixer steps from Python instead (XLA:CPU runs its "
         "convolutions about nine times slower inside a loop).\n"]
  run = _load_run(folder)
  if run:
    out.append(f"The whole run took {run['wall_s'] / 60:.0f} minutes on this machine, "
               "which three other jobs shared at the time.\n")
  for name, payload in results.items():
    w = payload["workload"]
    out += [f"### {w['title']}\n", f"{w['description']} {w['steps']} steps, validation every "
            f"{w['eval_every']}; target: validation {w['metric']} "
            f"{'≥' if w['higher_is_better'] else '≤'} {fmt_metric(w, w['target'])}. Grid: "
            f"{', '.join(f'{lr:g}' for lr in w['grid'])}. Wall time "
            f"{payload['wall_s'] / 60:.1f} min.\n",
            "| optimizer | lr | test (mean ± std) | seeds | steps to target | s to target | "
            "ms/step | × Adam (p25-p75) |", "|---|---|---|---|---|---|---|---|"]
    for entry, e in payload["entries"].items():
      edge = " (edge)" if e["on_edge"] else ""
      out.append(f"| {entry} | {e['learning_rate']:g}{edge} | {_mean_std(w, e)} | "
                 f"{len(e['seeds'])} | {_to_target(e)} | {_seconds(e)} | {e['step_ms']:.2f} | "
                 f"{e['ratio']:.2f} ({e['ratio_p25']:.2f}-{e['ratio_p75']:.2f}) |")
    out += ["", "Final validation metric of every learning rate tried (seed 0):\n",
            "| optimizer | " + " | ".join(f"{lr:g}" for lr in _all_lrs(payload)) + " |",
            "|---" * (len(_all_lrs(payload)) + 1) + "|"]
    for entry, e in payload["entries"].items():
      by_lr = dict(zip(e["tuning"]["learning_rate"], e["tuning"]["val"], strict=True))
      out.append(f"| {entry} | " + " | ".join(
          fmt_metric(w, by_lr[lr]) if lr in by_lr else "" for lr in _all_lrs(payload)) + " |")
    out.append(f"\n![{name}]({images}/ttr_{name}.png)\n")
  return out


def _all_lrs(payload: dict) -> list[float]:
  return sorted({lr for e in payload["entries"].values() for lr in e["tuning"]["learning_rate"]})


def _load_run(folder: str) -> dict | None:
  import json
  path = os.path.join(folder, "ttr_run.json")
  if not os.path.exists(path):
    return None
  with open(path) as f:
    run = json.load(f)
  return None if run.get("quick") else run

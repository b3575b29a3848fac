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


def _steps_and_seconds(workload: dict, e: dict) -> str:
  seeds = f"{e['reached']}/{len(e['seeds'])}"
  if e["median_steps_to_target"] is None:
    return f"not reached ({seeds})"
  return f"{e['median_steps_to_target']:.0f}, {e['seconds_to_target']:.2f} s ({seeds})"


def _seconds(e: dict) -> str:
  return "—" if e["seconds_to_target"] is None else f"{e['seconds_to_target']:.2f}"


SHORT_NAMES = {"convmixer": "ConvMixer", "mlp": "MLP", "charlm": "char LM",
               "diabetes": "diabetes", "logreg": "logistic"}
SHORT_METRICS = {"accuracy": "acc. % ↑", "bits per character": "bits/char ↓", "MSE": "MSE ↓",
                 "suboptimality": "subopt. ↓"}


def _short_header(workload: dict) -> str:
  name = SHORT_NAMES.get(workload["name"], workload["name"])
  return f"{name}, {SHORT_METRICS.get(workload['metric'], workload['metric'])}"


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
         "Test metric at the chosen learning rate, mean ± std over seeds (the learning rate "
         "in brackets):\n"]
  out += _grid_table(results, names,
                     lambda w, e: f"{_mean_std(w, e)} ({e['learning_rate']:g})")
  out += ["", "To the validation target: median steps over seeds, the seconds those steps "
          "take at the measured cost per step, and the seeds that reached it:\n"]
  out += _grid_table(results, names, _steps_and_seconds)
  out += ["", "Cost of one training step relative to Adam's on the same workload:\n"]
  out += _grid_table(results, names, lambda w, e: f"{e['ratio']:.2f}x")
  out += ["", "Final validation metric against the learning rate (seed 0; the dashed line "
          "is the target):\n", f"![learning-rate sensitivity]({images}/ttr_overview_lr.png)\n",
          "Validation curves at the chosen learning rate (mean over seeds, band from the "
          "lowest to the highest seed):\n", f"![validation curves]({images}/ttr_overview_val.png)\n"]
  return out + one_rate_for_all(results)


def one_rate_for_all(results: dict) -> list[str]:
  """For each optimizer and each learning rate tried on every workload: on how
  many workloads the seed-0 run met the validation target. A default that
  holds across workloads is one that scores high here."""
  names = []
  for payload in results.values():
    names += [n for n in payload["entries"] if n not in names]
  common = None
  for payload in results.values():
    for e in payload["entries"].values():
      rates = set(e["tuning"]["learning_rate"])
      common = rates if common is None else common & rates
  rates = sorted(common or ())
  if not rates:
    return []
  out = ["## One learning rate for every workload\n",
         f"On how many of the {len(results)} workloads the seed-0 run at a learning rate met "
         "the validation target (rates tried on every workload):\n",
         "| optimizer | " + " | ".join(f"{lr:g}" for lr in rates) + " |",
         "|---" * (len(rates) + 1) + "|"]
  for name in names:
    cells = []
    for lr in rates:
      hits, runs = 0, 0
      for payload in results.values():
        e = payload["entries"].get(name)
        if e is None:
          continue
        runs += 1
        hits += _meets(payload["workload"], _seed0_vals(e)[lr])
      cells.append(f"{hits}/{runs}")
    out.append(f"| {name} | " + " | ".join(cells) + " |")
  return out + [""]


def _meets(workload: dict, value: float) -> bool:
  if value != value:
    return False
  return value >= workload["target"] if workload["higher_is_better"] else value <= workload["target"]


def _grid_table(results: dict, names: list, cell) -> list[str]:
  """Optimizers down, workloads across."""
  out = ["| optimizer | " + " | ".join(_short_header(p["workload"]) for p in results.values())
         + " |", "|---" * (len(results) + 1) + "|"]
  for name in names:
    cells = [("" if name not in p["entries"] else cell(p["workload"], p["entries"][name]))
             for p in results.values()]
    out.append(f"| {name} | " + " | ".join(cells) + " |")
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
         "- What was run is sized to finish in about an hour on 2 CPU cores: the ConvMixer "
         "trains 150 steps (the example trainer's default config trains 600) and tries whole "
         "decades of learning rate; the language model is small (two layers of width 64) "
         "and trains 300 steps. Each section below gives its workload's steps, target and "
         "grid.",
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
    out.append(f"The last run of all five workloads took {run['wall_s'] / 60:.0f} minutes on "
               "this machine, which other jobs shared at the time; a workload rerun on its "
               "own since then gives its wall time in its section.\n")
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
      by_lr = _seed0_vals(e)
      out.append(f"| {entry} | " + " | ".join(
          fmt_metric(w, by_lr[lr]) if lr in by_lr else "" for lr in _all_lrs(payload)) + " |")
    out.append(f"\n![{name}]({images}/ttr_{name}.png)\n")
  return out


def grid_check(folder: str, subfolder: str = "half_decades") -> list[str]:
  """The two decade-grid workloads rerun for some optimizers on the half decades
  between the grid's points (``--grid ... --out <folder>/half_decades``): does
  the coarse grid change the comparison?"""
  checks = ttr_plots.load_results(os.path.join(folder, subfolder))
  results = ttr_plots.load_results(folder)
  if not checks:
    return []
  out = ["## Does the decade grid decide the comparison?\n",
         "A workload whose grid has whole decades only was rerun for some optimizers, with "
         "the same protocol, on the half decades in between "
         f"(`--grid ... --out benchmarks/results/{subfolder}`); of the two choices, the "
         "one with the better seed-0 validation value is what a half-decade grid would "
         "have picked.\n",
         "| workload | optimizer | decade grid: lr, test | half decades: best lr, test | "
         "half decades tried (seed-0 validation) |", "|---|---|---|---|---|"]
  for name, check in checks.items():
    w = check["workload"]
    for entry, e in check["entries"].items():
      base = results.get(name, {}).get("entries", {}).get(entry)
      base_cell = "" if base is None else (
          f"{base['learning_rate']:g} (seed-0 validation "
          f"{fmt_metric(w, _seed0_vals(base)[base['learning_rate']])}), "
          f"{_mean_std(w, base)}")
      tried = ", ".join(f"{lr:g}: {fmt_metric(w, v)}" for lr, v in
                        zip(e["tuning"]["learning_rate"], e["tuning"]["val"], strict=True))
      out.append(f"| {w['title']} | {entry} | {base_cell} | {e['learning_rate']:g}, "
                 f"{_mean_std(w, e)} | {tried} |")
  return out + [""]


def _seed0_vals(e: dict) -> dict[float, float]:
  """Learning rate -> final validation metric of the seed-0 tuning run."""
  return dict(zip(e["tuning"]["learning_rate"], e["tuning"]["val"], strict=True))


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

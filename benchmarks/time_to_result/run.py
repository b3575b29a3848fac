"""Time to result: VSGD against the optimizers people use, on five workloads.

    python -m benchmarks.time_to_result             # main protocol: warmup + cosine decay
    python -m benchmarks.time_to_result --schedule constant      # the constant-rate table
    python -m benchmarks.time_to_result --schedule paper_step    # the paper's schedule, ConvMixer
    python -m benchmarks.time_to_result --quick     # smoke run of the harness (tiny sizes)
    python -m benchmarks.time_to_result --workloads mlp logreg --entries vsgd adam

Protocol, the same for every optimizer on a workload: each learning rate of the
workload's log-spaced grid is trained with seed 0 and scored on the validation
split at the last step; where the best value lies on the grid's edge, the grid
grows by one step beyond it (at most twice). The best learning rate is then
trained with more seeds, and the test metric is reported over all seeds at that
rate as mean and standard deviation, with the steps each seed took to reach the
workload's validation target. Every optimizer's cost per step is measured on
the same workload in the same process, interleaved with Adam's; wall-clock to
target is that cost times the steps to target.

The schedule (``schedules``) shapes the rate over each run; the tuned rate
is its peak. Each schedule's results live in a folder of their own (the
constant rate in the results folder itself, the others in a subfolder named
after the schedule), and every result file names its schedule, so results of
two schedules are never mixed.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import tempfile
import time

import numpy as np

from benchmarks import common
from benchmarks import registry
from benchmarks.time_to_result import harness
from benchmarks.time_to_result import runner
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import workloads

MAX_EXTENSIONS = 2
RESULTS = "benchmarks/results"
DEFAULT_ENTRIES = ("vsgd", "constant_vsgd", "adam", "adamw", "sgd_momentum",
                   "schedule_free_adamw", "lion")
# The scheduled protocols add the bfloat16-state entries, each next to its
# float32 counterpart.
SCHEDULED_ENTRIES = ("vsgd", "vsgd+bf16_state", "constant_vsgd", "adam", "adam+bf16_mu",
                     "adamw", "sgd_momentum", "schedule_free_adamw", "lion")


@dataclasses.dataclass(frozen=True)
class Sizing:
  """What one protocol runs, where the default differs per workload: the
  workloads, the entries on each, and the seeds at the chosen rate (None: the
  grid's length plus one, as in the constant-rate run).
  """
  workloads: tuple
  entries: tuple
  entries_on: dict = dataclasses.field(default_factory=dict)  # workload -> entries
  seeds_on: dict = dataclasses.field(default_factory=dict)  # workload -> seeds


# The scheduled run is sized to about 45 minutes on 2 cores (the constant-rate
# run took 52 for seven entries). On the two expensive workloads it runs 5 seeds
# at the chosen rate, and drops adamw (its weight decay of 1e-4 left it equal to
# adam to four digits in the constant run); the ConvMixer also drops the
# entries that do not compare VSGD with Adam or a float32 state with bfloat16.
SIZINGS = {
    "constant": Sizing(workloads.names(), DEFAULT_ENTRIES),
    "warmup_cosine": Sizing(
        workloads.names(), SCHEDULED_ENTRIES,
        entries_on={"charlm": tuple(n for n in SCHEDULED_ENTRIES if n != "adamw"),
                    "convmixer": ("vsgd", "vsgd+bf16_state", "adam", "adam+bf16_mu")},
        seeds_on={"charlm": 5, "convmixer": 5}),
    "paper_step": Sizing(("convmixer",), ("vsgd", "adam"), seeds_on={"convmixer": 5}),
}


def _score(workload: workloads.Workload, val_curve: np.ndarray) -> tuple:
  """Sort key, larger is better: the last validation value, then the mean of
  the last three (ties in accuracy are common). Diverged runs score worst.
  """
  sign = 1.0 if workload.higher_is_better else -1.0
  last, recent = val_curve[-1], np.mean(val_curve[-3:])
  if not np.isfinite(last):
    return (-math.inf, -math.inf)
  return (sign * last, sign * recent if np.isfinite(recent) else -math.inf)


def steps_to_target(workload: workloads.Workload, val_curve) -> int | None:
  """The first evaluated step whose validation value meets the target."""
  for i, value in enumerate(val_curve):
    if workload.reached(float(value)):
      return (i + 1) * workload.eval_every
  return None


def tune_and_repeat(workload: workloads.Workload, name: str, grid,
                    max_extensions: int = MAX_EXTENSIONS, seeds: int | None = None,
                    schedule: str = "constant") -> dict:
  """The protocol for one optimizer on one workload (see the module docstring),
  starting from the learning rates ``grid``: ``seeds`` runs at the chosen rate
  (default: the grid's length plus one).
  """
  train = runner.Runner(workload, name, schedule)
  grid = sorted(grid)
  width = len(grid)
  seeds = width + 1 if seeds is None else seeds
  factor = grid[1] / grid[0]
  t0 = time.perf_counter()
  tried = {}  # learning rate -> {"val": curve, "train_loss": curve}, seed 0
  by_seed = {}  # learning rate -> (seeds, the runs' output) where all seeds ran
  sweep = train(grid, [0] * width)
  for i, lr in enumerate(grid):
    tried[lr] = {k: sweep[k][i] for k in ("val", "train_loss", "test")}
  for _ in range(max_extensions):
    best = max(tried, key=lambda lr: _score(workload, tried[lr]["val"]))
    if best not in (min(tried), max(tried)):
      break
    beyond = float(f"{best * (factor if best == max(tried) else 1 / factor):.3g}")
    # a rate beyond the edge runs all its seeds at once: it is likely the best
    out = train([beyond] * seeds, list(range(seeds)))
    tried[beyond] = {k: out[k][0] for k in ("val", "train_loss", "test")}
    by_seed[beyond] = (list(range(seeds)), out)
  best = max(tried, key=lambda lr: _score(workload, tried[lr]["val"]))
  if best in by_seed:
    seeds, out = by_seed[best]
  else:
    more = list(range(1, seeds))
    out = train([best] * len(more), more)
    seeds = [0] + more
    out = {k: np.concatenate([tried[best][k][None], out[k]]) for k in ("val", "train_loss", "test")}
  lrs = sorted(tried)
  to_target = [steps_to_target(workload, curve) for curve in out["val"]]
  reached = [s for s in to_target if s is not None]
  return {
      "label": registry.ENTRIES[name].label, "learning_rate": best,
      "on_edge": best in (lrs[0], lrs[-1]),
      "tuning": {"learning_rate": lrs, "val": [float(tried[lr]["val"][-1]) for lr in lrs],
                 "train_loss": [float(tried[lr]["train_loss"][-1]) for lr in lrs]},
      "seeds": seeds, "test": [float(x) for x in out["test"]],
      "test_mean": float(np.mean(out["test"])), "test_std": float(np.std(out["test"])),
      "val_final": [float(c[-1]) for c in out["val"]],
      "curves": {"train_loss": out["train_loss"].tolist(), "val": out["val"].tolist()},
      "steps_to_target": to_target, "reached": len(reached),
      "median_steps_to_target": float(np.median(reached)) if len(reached) > len(seeds) / 2 else None,
      "wall_s": time.perf_counter() - t0}


def run_workload(workload: workloads.Workload, names, quick: bool,
                 schedule: str = "constant", seeds: int | None = None,
                 grid: tuple | None = None) -> dict:
  """Every entry's protocol on one workload, under one schedule: the result file's
  payload. ``grid``: the learning rates to start from (default: the harness's).
  """
  settings = harness.settings(workload.name, quick)
  grid = settings.grid if grid is None else grid
  names = list(names)
  if workload.example_loss is not None and "vsgd" in names:
    names.insert(names.index("vsgd") + 1, "vsgd+per_example")
  t0 = time.perf_counter()
  timing_names = names if "adam" in names else names + ["adam"]
  steps, repeats = (2, 2) if quick else ((5, 15) if settings.scan_steps else (2, 8))
  costs = runner.step_costs(workload, timing_names, steps=steps, repeats=repeats,
                            schedule=schedule)
  print(f"[{workload.name}] ms/step: " + ", ".join(
      f"{n} {c['step_ms']:.2f}" for n, c in costs.items()), flush=True)
  entries = {}
  for name in names:
    r = tune_and_repeat(workload, name, grid, 1 if quick else MAX_EXTENSIONS, seeds, schedule)
    r.update(costs[name])
    r["seconds_to_target"] = (None if r["median_steps_to_target"] is None
                              else r["median_steps_to_target"] * r["step_ms"] / 1e3)
    entries[name] = r
    print(f"[{workload.name}] {name:>20}: lr {r['learning_rate']:<8g} test {workload.metric} "
          f"{r['test_mean']:.4g} +- {r['test_std']:.2g}  target reached {r['reached']}/"
          f"{len(r['seeds'])}, median step {r['median_steps_to_target']}  "
          f"({r['wall_s']:.0f} s)", flush=True)
  w = workload
  return {"machine": common.machine(), "quick": quick,
          "schedule": schedules.describe(schedule, w.steps),
          "workload": {"name": w.name, "title": w.title, "description": w.description,
                       "metric": w.metric, "higher_is_better": w.higher_is_better,
                       "target": w.target, "steps": w.steps, "eval_every": w.eval_every,
                       "batch_size": w.batch_size, "grid": list(grid),
                       "log_metric": w.log_metric},
          "timing": {"steps_per_sample": steps, "samples": repeats},
          "entries": entries, "wall_s": time.perf_counter() - t0}


def _check_no_mix(folder: str, names, schedule: str) -> str | None:
  """A line saying why writing here would mix schedules, or None."""
  for name in names:
    path = os.path.join(folder, f"ttr_{name}.json")
    payload = common.read_json(path)
    if payload is not None:
      held = schedules.schedule_of(payload)
      if held != schedule:
        return (f"{path} holds {held!r} results, not {schedule!r} ones; pass the results "
                f"folder itself as --out (a {schedule!r} run writes into "
                f"{schedules.folder('<out>', schedule)}); nothing was run")
  return None


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.time_to_result",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="tiny models, 8 steps, 2 learning rates: checks the harness only")
  parser.add_argument("--schedule", default="warmup_cosine", choices=schedules.NAMES,
                      help="the learning-rate schedule of every run (default: warmup_cosine, "
                           "the main protocol)")
  parser.add_argument("--workloads", nargs="*", default=None, choices=workloads.names(),
                      help="default: the schedule's workloads (paper_step: convmixer only)")
  parser.add_argument("--entries", nargs="*", default=None,
                      choices=[n for n in registry.ENTRIES if n != "vsgd+per_example"],
                      help="optimizers (per-example VSGD joins vsgd where the model allows); "
                           "default: the schedule's entries, fewer on the expensive workloads")
  parser.add_argument("--seeds", type=int, default=None,
                      help="seeds at the chosen rate, at least 2 (default: the schedule's, "
                           "else the grid's length plus one)")
  parser.add_argument("--grid", type=float, nargs="*", default=None,
                      help="learning rates to try instead of each workload's grid (a check of "
                           "the grid's resolution, say)")
  parser.add_argument("--out", default=None,
                      help="results folder; a schedule other than constant writes into its "
                           "subfolder named after the schedule (default: benchmarks/results; "
                           "--quick: a new temporary folder)")
  parser.add_argument("--page", default=None,
                      help="results page to write (default: docs/results.md; --quick: none)")
  args = parser.parse_args(argv)
  if args.grid is not None and (len(args.grid) < 2 or not args.out):
    parser.error("--grid needs at least two learning rates and an --out folder of its own, "
                 "so that the workload's results are kept")
  if args.seeds is not None and args.seeds < 2:
    parser.error(f"--seeds must be at least 2 (a mean and a spread), got {args.seeds}")
  sizing = SIZINGS[args.schedule]
  names = list(args.workloads or sizing.workloads)
  root = args.out or (tempfile.mkdtemp(prefix="ttr-") if args.quick else RESULTS)
  out = schedules.folder(root, args.schedule)
  problem = _check_no_mix(out, names, args.schedule)
  if problem:
    parser.error(problem)
  page = args.page or (None if args.quick or args.grid else "docs/results.md")
  t0 = time.perf_counter()
  for name in names:
    workload = workloads.build(name, quick=args.quick)
    grid = tuple(sorted(args.grid)) if args.grid else None
    entries = args.entries or sizing.entries_on.get(name, sizing.entries)
    seeds = args.seeds or (None if args.quick else sizing.seeds_on.get(name))
    payload = run_workload(workload, entries, args.quick, args.schedule, seeds, grid)
    path = os.path.join(out, f"ttr_{name}.json")
    common.write_json(path, payload)
    print(f"wrote {path} ({payload['wall_s']:.0f} s)", flush=True)
  if set(names) == set(sizing.workloads):
    # the wall time of a whole run; a partial rerun leaves the last one's record
    common.write_json(os.path.join(out, "ttr_run.json"),
                      {"machine": common.machine(), "quick": args.quick,
                       "schedule": args.schedule,
                       "workloads": names, "entries": args.entries or list(sizing.entries),
                       "wall_s": time.perf_counter() - t0})
  from benchmarks import render_results
  from benchmarks.time_to_result import plots
  plots.plot_all(out)
  if page:
    render_results.write_page(page, root)
  print(f"done in {time.perf_counter() - t0:.0f} s; results in {out}", flush=True)


if __name__ == "__main__":
  main()

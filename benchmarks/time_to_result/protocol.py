"""Time to result: VSGD against the optimizers people use, on five workloads.

    python -m benchmarks.time_to_result             # main protocol: warmup + cosine decay
    python -m benchmarks.time_to_result --schedule constant      # the constant-rate table
    python -m benchmarks.time_to_result --schedule paper_step    # the paper's schedule, ConvMixer
    python -m benchmarks.time_to_result --quick     # smoke run of the harness (tiny sizes)
    python -m benchmarks.time_to_result --workloads mlp logreg --entries vsgd adam
    python -m benchmarks.time_to_result --long-horizon    # the cheap workloads at 20,000 steps

Protocol, the same for every optimizer on a workload: each learning rate of the
workload's log-spaced grid is trained with each of the three tuning seeds
(``TUNING_SEEDS``) and scored on their mean validation value at the last step;
where the best value lies on the grid's edge, the grid grows by one step beyond
it, until the best lies inside (at most ``MAX_EXTENSIONS`` times).
The best learning rate is then trained with fresh seeds 0, 1, ..., never used
in tuning, and the test metric is reported over those seeds as mean and
standard deviation (ddof 1), with the steps each seed took to reach the
workload's validation target. A seed fixes a run's initialisation and batch
order whatever the optimizer, so two optimizers' runs pair by seed. Every
optimizer's cost per step is measured on the same workload in the same
process, interleaved with Adam's; wall-clock to target is that cost times the
steps to target.

The schedule (``schedules``) shapes the rate over each run; the tuned rate
is its peak. Each schedule's results live in a folder of their own (the
constant rate in the results folder itself, the others in a subfolder named
after the schedule), and every result file names its schedule, so results of
two schedules are never mixed.

A protocol resumes where it was interrupted: every finished (optimizer, seed)
run is kept in the workload's ledger (``ledger``) until its result file is
written, and a rerun of the same command takes those runs from it. The command
itself (its options and the refusals before a run) is ``cli``'s.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np

from benchmarks import common
from benchmarks import ledger
from benchmarks import optimizers
from benchmarks import study_runner
from benchmarks.time_to_result import harness
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import trainer
from benchmarks.time_to_result import workloads

# A window grows at an edge until its best rate lies inside it, at most this often.
MAX_EXTENSIONS = 6
# Rates are chosen on the mean validation of these seeds, never reported; the
# reported seeds (0, 1, ...) are fresh runs.
TUNING_SEEDS = (1000, 1001, 1002)
RESULTS = "benchmarks/results"
# The code a run's numbers depend on (the optimizers, the models and data, the
# jitted loop); a ledger kept by other code is refused. How rates are chosen and
# reported is not here: a run's curves do not depend on it.
SOURCES = ("vsgd_optax/**/*.py", "benchmarks/optimizers.py",
           "benchmarks/time_to_result/trainer.py", "benchmarks/time_to_result/harness.py",
           "benchmarks/time_to_result/schedules.py", "benchmarks/time_to_result/workloads/*.py")


def ledger_path(folder: str, workload: str) -> str:
  """The ledger of ``workload``'s runs in progress, in the results folder ``folder``."""
  return os.path.join(folder, ledger.FOLDER, f"ttr_{workload}.jsonl")
DEFAULT_ENTRIES = ("vsgd", "constant_vsgd", "adam", "adamw", "sgd_momentum",
                   "schedule_free_adamw", "lion")
# The scheduled protocols add the bfloat16-state entries, each next to its
# float32 counterpart; Muon and Adafactor with momentum are what a user compares
# VSGD with today.
SCHEDULED_ENTRIES = ("vsgd", "vsgd+bf16_state", "constant_vsgd", "adam", "adam+bf16_mu",
                     "adamw", "sgd_momentum", "schedule_free_adamw", "lion", "muon",
                     "adafactor+momentum")
# The baselines the headline run compares VSGD with on its two expensive workloads.
HEADLINE_ENTRIES = ("vsgd", "adam", "adamw", "schedule_free_adamw", "lion", "muon",
                    "adafactor+momentum")


@dataclasses.dataclass(frozen=True)
class Sizing:
  """What one protocol runs, where the default differs per workload.

  Attributes:
    workloads: the workloads run.
    entries: the optimizers on each workload, unless ``entries_on`` names others.
    entries_on: workload -> its optimizers.
    seeds_on: workload -> reported seeds at the chosen rate (default: the grid's
      length plus one, as in the constant-rate run).
    steps_on: workload -> training steps, where fewer than the workload's own.
    window_on: workload -> half-width, in grid steps, of a grid centred on each
      optimizer's rate in the last committed run (instead of the harness's grid).
  """
  workloads: tuple
  entries: tuple
  entries_on: dict = dataclasses.field(default_factory=dict)
  seeds_on: dict = dataclasses.field(default_factory=dict)
  steps_on: dict = dataclasses.field(default_factory=dict)
  window_on: dict = dataclasses.field(default_factory=dict)
  per_example: bool = True  # per-example VSGD joins vsgd where the model allows
  pad_lanes: bool = True  # as the harness's settings say; False never pads


# The headline run (warmup + cosine) on the two expensive workloads: the full
# baseline set and 10 reported seeds; to fit the machine, fewer steps, a
# half-decade window of three rates around each optimizer's last chosen rate
# (grown at an edge), and no bfloat16-state entries.
SIZINGS = {
    "constant": Sizing(workloads.names(), DEFAULT_ENTRIES),
    "warmup_cosine": Sizing(
        workloads.names(), SCHEDULED_ENTRIES,
        entries_on={"charlm": HEADLINE_ENTRIES, "convmixer": HEADLINE_ENTRIES},
        seeds_on={"mlp": 10, "diabetes": 10, "logreg": 10, "charlm": 10, "convmixer": 10},
        steps_on={"charlm": 150, "convmixer": 90},
        window_on={"charlm": 1, "convmixer": 1}),
    "paper_step": Sizing(("convmixer",), ("vsgd", "adam"), seeds_on={"convmixer": 5}),
}

# The long-horizon protocol (``--long-horizon``, warmup + cosine): the three
# cheap workloads trained 20,000 steps, long after the averaging weights
# t**-kappa fall under half a bfloat16 spacing (about step 1,000), with the
# bfloat16 state rounded both ways. Each optimizer tunes a half-decade window
# around its rate in the main protocol (a variant around its base optimizer's),
# grown at an edge; runs are not padded to a fixed count, since at this length
# a run costs more than compiling it.
# Diabetes tunes seven rates (a decade and a half either side): at this length its
# validation MSE has a lower basin two decades below its rate in the main protocol
# (where windows grew at an edge, the bfloat16 states found 0.51 at 1e-5 to 3e-5,
# against 0.67-0.71 around 1e-3), which three rates there never reach.
# The char LM joins at 2,000 steps (13 times the main protocol's 150), where a
# ranking of its optimizers means more than their first few hundred steps do,
# with Muon, the optimizer a user compares VSGD with today; 5 reported seeds.
# Its wide variant, whose matrices factor, runs factored_vsgd against vsgd at the
# same length (and, by WIDE_SAME_RATE, at vsgd's rate on vsgd's seeds).
LONG_HORIZON_STEPS = 20000
LONG_HORIZON_WORKLOADS = ("mlp", "diabetes", "logreg")
CHARLM_LONG_STEPS = 2000
CHARLM_LONG_ENTRIES = ("vsgd", "muon", "adam", "schedule_free_adamw")
CHARLM_WIDE_LONG_ENTRIES = ("vsgd", "factored_vsgd")
_CHARLMS = ("charlm", "charlm_wide")
LONG_HORIZON = Sizing(
    (*LONG_HORIZON_WORKLOADS, *_CHARLMS),
    ("vsgd", "vsgd+bf16_state", "vsgd+bf16_nearest", "adam", "adam+bf16_mu",
     "schedule_free_adamw"),
    entries_on={"charlm": CHARLM_LONG_ENTRIES, "charlm_wide": CHARLM_WIDE_LONG_ENTRIES},
    seeds_on={**{w: 10 for w in LONG_HORIZON_WORKLOADS}, **{w: 5 for w in _CHARLMS}},
    steps_on={**{w: LONG_HORIZON_STEPS for w in LONG_HORIZON_WORKLOADS},
              **{w: CHARLM_LONG_STEPS for w in _CHARLMS}},
    window_on={**{w: 1 for w in (*LONG_HORIZON_WORKLOADS, *_CHARLMS)}, "diabetes": 3},
    per_example=False, pad_lanes=False)
LONG_HORIZON_FOLDER = common.LONG_HORIZON_FOLDER
# The wide protocol (``--wide``, warmup + cosine): factored_vsgd against vsgd and
# the baselines that were best in the main protocol, on the wider variants whose
# matrices factor at the default threshold of 128 (none of the five main workloads
# has one), with Adafactor with momentum, factored_vsgd's peer in memory. The char
# LM's variant tunes a half-decade window around each optimizer's rate on the char
# LM, grown at an edge, at the main run's 150 steps.
WIDE = Sizing(
    workloads.wide_names(),
    ("vsgd", "factored_vsgd", "adam", "schedule_free_adamw", "lion", "adafactor+momentum"),
    entries_on={"charlm_wide": ("vsgd", "factored_vsgd", "adam", "schedule_free_adamw",
                                "adafactor+momentum")},
    seeds_on={w: 10 for w in workloads.wide_names()}, steps_on={"charlm_wide": 150},
    window_on={"charlm_wide": 1}, per_example=False)
# Where a workload or an optimizer has no committed rate to centre its window on,
# the rate of its base: the narrower workload, the optimizer it wraps or varies.
# Muon and Adafactor, new here, start around Adam's rate, and grow from there.
WINDOW_BASE = {"charlm_wide": "charlm", "factored_vsgd": "vsgd", "schedule_free_vsgd": "vsgd",
               "schedule_free_vsgd+short_mean": "vsgd", "vsgd_muon": "vsgd", "muon": "adam",
               "adafactor+momentum": "adam"}
# In the long-horizon protocol, each variant also runs at its base optimizer's
# tuned rate on the same seeds, so that the two differ by their state's
# precision alone (``same_rate``).
SAME_RATE = {"vsgd+bf16_state": "vsgd", "vsgd+bf16_nearest": "vsgd", "adam+bf16_mu": "adam"}
# In the wide protocol, factored_vsgd also runs at vsgd's tuned rate on vsgd's seeds,
# so that the two differ by the factored rates alone, not by the rate each tuned.
WIDE_SAME_RATE = {"factored_vsgd": "vsgd"}


def window(centre: float, half_width: int) -> tuple:
  """The half-decade rates 10^(k/2) (three significant digits, as the harness's
  grids) nearest ``centre`` and ``half_width`` either side of it.
  """
  k0 = round(2 * math.log10(centre))
  return tuple(float(f"{10 ** (k / 2):.3g}") for k in range(k0 - half_width, k0 + half_width + 1))


def last_rate(root: str, schedule: str, workload: str, name: str) -> float | None:
  """``name``'s chosen rate on ``workload`` in the committed run of ``schedule``,
  else in the constant-rate run, else None.
  """
  for folder in (schedules.folder(root, schedule), root):
    payload = common.read_json(os.path.join(folder, f"ttr_{workload}.json"))
    if payload and name in payload["entries"]:
      return float(payload["entries"][name]["learning_rate"])
  return None


def window_centre(root: str, schedule: str, workload: str, name: str) -> float | None:
  """``last_rate``, falling back on the base workload and the base optimizer
  (``WINDOW_BASE``) where ``name`` has no rate of its own on ``workload``.
  """
  for w in dict.fromkeys((workload, WINDOW_BASE.get(workload, workload))):
    for n in dict.fromkeys((name, WINDOW_BASE.get(name, name), name.split("+")[0])):
      rate = last_rate(root, schedule, w, n)
      if rate is not None:
        return rate
  return None


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
                    schedule: str = "constant", pad_lanes: bool = True,
                    book: ledger.Ledger | None = None) -> dict:
  """The protocol for one optimizer on one workload (see the module docstring),
  starting from the learning rates ``grid``: every rate is tuned on the seeds
  ``TUNING_SEEDS``, then ``seeds`` fresh seeds (0, 1, ...; default: the grid's
  length plus one) run at the chosen rate and are the ones reported. With a
  ``book``, every run it holds is taken from it and every new one kept in it.
  """
  runs = trainer.Trainer(workload, name, schedule)
  grid = sorted(grid)
  width = len(grid)
  seeds = width + 1 if seeds is None else seeds
  factor = grid[1] / grid[0]
  t0 = time.perf_counter()
  tune = list(TUNING_SEEDS)
  lanes = max(width * len(tune), seeds)

  padded = pad_lanes and harness.settings(workload.name).fixed_lanes

  def padded_runs(lrs, run_seeds):
    """``runs`` on these pairs; on a cheap workload padded to ``lanes`` runs, so
    that one compiled program serves every call.
    """
    if not padded or len(lrs) >= lanes:
      return runs(lrs, run_seeds)
    pad = lanes - len(lrs)
    out = runs(list(lrs) + [lrs[-1]] * pad, list(run_seeds) + [run_seeds[-1]] * pad)
    return {k: v[:len(lrs)] for k, v in out.items()}

  def train(lrs, run_seeds):
    if book is None:
      return padded_runs(lrs, run_seeds)
    return study_runner.train_rates(book, name, padded_runs, lrs, run_seeds, together=padded)
  tried = {}  # learning rate -> {"val": curve, "train_loss": curve}, mean over tuning seeds

  def sweep(lrs):
    out = train([lr for lr in lrs for _ in tune], [s for _ in lrs for s in tune])
    for i, lr in enumerate(lrs):
      part = slice(i * len(tune), (i + 1) * len(tune))
      tried[lr] = {k: np.mean(out[k][part], axis=0) for k in ("val", "train_loss")}

  sweep(grid)
  grown = []
  for _ in range(max_extensions):
    best = max(tried, key=lambda lr: _score(workload, tried[lr]["val"]))
    if best not in (min(tried), max(tried)):
      break
    beyond = float(f"{best * (factor if best == max(tried) else 1 / factor):.3g}")
    sweep([beyond])
    grown.append(beyond)
  best = max(tried, key=lambda lr: _score(workload, tried[lr]["val"]))
  reported = list(range(seeds))
  out = train([best] * seeds, reported)
  lrs = sorted(tried)
  to_target = [steps_to_target(workload, curve) for curve in out["val"]]
  reached = [s for s in to_target if s is not None]
  return {
      "label": optimizers.REGISTRY[name].label, "learning_rate": best,
      "on_edge": best in (lrs[0], lrs[-1]),
      "tuning": {"learning_rate": lrs, "seeds": tune, "grid": list(grid), "grown": grown,
                 "val": [float(tried[lr]["val"][-1]) for lr in lrs],
                 "train_loss": [float(tried[lr]["train_loss"][-1]) for lr in lrs]},
      "seeds": reported, "test": [float(x) for x in out["test"]],
      "test_mean": float(np.mean(out["test"])),
      "test_std": float(np.std(out["test"], ddof=1)),
      "val_final": [float(c[-1]) for c in out["val"]],
      "curves": {"train_loss": out["train_loss"].tolist(), "val": out["val"].tolist()},
      "steps_to_target": to_target, "reached": len(reached),
      "median_steps_to_target": (float(np.median(reached)) if len(reached) > seeds / 2
                                 else None),
      "wall_s": time.perf_counter() - t0}


def run_workload(workload: workloads.Workload, names, quick: bool,
                 schedule: str = "constant", seeds: int | None = None,
                 grid: tuple | None = None, grids: dict | None = None,
                 per_example: bool = True, pad_lanes: bool = True,
                 book: ledger.Ledger | None = None) -> dict:
  """Every entry's protocol on one workload, under one schedule: the result file's
  payload. ``grid``: the learning rates to start from (default: the harness's);
  ``grids``: optimizer -> its own starting rates, where it has some;
  ``per_example``: add per-example VSGD next to vsgd where the model allows;
  ``pad_lanes``, ``book``: see ``tune_and_repeat``.
  """
  settings = harness.settings(workload.name, quick)
  grid = settings.grid if grid is None else grid
  names = list(names)
  if per_example and workload.example_loss is not None and "vsgd" in names:
    names.insert(names.index("vsgd") + 1, "vsgd+per_example")
  t0 = time.perf_counter()
  timing_names = names if "adam" in names else names + ["adam"]
  steps, repeats = (2, 2) if quick else ((5, 15) if settings.scan_steps else (2, 8))
  costs = trainer.step_costs(workload, timing_names, steps=steps, repeats=repeats,
                            schedule=schedule)
  print(f"[{workload.name}] ms/step: " + ", ".join(
      f"{n} {c['step_ms']:.2f}" for n, c in costs.items()), flush=True)
  entries = {}
  for name in names:
    # an entry's own window; a variant the caller gave none (vsgd+per_example,
    # added here) starts from its base optimizer's
    start = (grids or {}).get(name, (grids or {}).get(name.split("+")[0], grid))
    r = tune_and_repeat(workload, name, start, 1 if quick else MAX_EXTENSIONS, seeds, schedule,
                        pad_lanes, book)
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


def same_rate(workload: workloads.Workload, payload: dict, schedule: str,
              pairs: dict = SAME_RATE, book: ledger.Ledger | None = None) -> dict:
  """Each variant of ``pairs`` (default ``SAME_RATE``) in ``payload`` trained at its base
  optimizer's tuned rate with the base's reported seeds: variant -> its base, the rate,
  the seeds and the per-seed test metric.
  """
  out = {}
  for variant, base in pairs.items():
    if variant not in payload["entries"] or base not in payload["entries"]:
      continue
    rate, seeds = payload["entries"][base]["learning_rate"], payload["entries"][base]["seeds"]
    t0 = time.perf_counter()
    runs = trainer.Trainer(workload, variant, schedule)
    test = (runs([rate] * len(seeds), seeds) if book is None
            else study_runner.train_rates(book, variant, runs, [rate] * len(seeds), seeds))["test"]
    out[variant] = {"base": base, "learning_rate": rate, "seeds": list(seeds),
                    "test": [float(x) for x in test], "wall_s": time.perf_counter() - t0}
    print(f"[{workload.name}] {variant:>20} at {base}'s rate {rate:g}: test "
          f"{np.mean(test):.4g}", flush=True)
  return out

"""Markdown tables of the time-to-result benchmark, for the small workloads'
page, and the formatting of its metrics (``metric_style``, the one place that
tells an accuracy from a suboptimality from any other metric). Reading the
result files is ``reading``'s.

The main protocol's table of VSGD and the baselines comes first (``summary``),
then the protocol and each schedule's per-workload details, every entry with
its tuning run (``details``).
"""

from __future__ import annotations

import dataclasses
import math
import os

from benchmarks import common
from benchmarks.reporting import markdown
from benchmarks.reporting import reading
from benchmarks.reporting import stats

SCHEDULE_HEADERS = {"constant": "constant", "warmup_cosine": "warmup + cosine",
                    "paper_step": "paper's step schedule"}


@dataclasses.dataclass(frozen=True)
class MetricStyle:
  """How the pages print the values of one kind of metric.

  Attributes:
    scale: what a value is multiplied by before printing: 100 for an accuracy
      (printed in %, its differences in points), else 1.
    unit: what follows a single value ("%" for an accuracy).
    value: the format of a single value (a target, a tuning-run value).
    mean: the format of a mean over seeds.
    spread: the format of the std beside it.
    bound: the format of an interval's ends and, signed, of a change.
    decimals: the fixed-point decimals of a difference and its interval (more
      where the difference is small); None prints those in ``bound``'s
      scientific notation.
  """
  scale: float
  unit: str
  value: str
  mean: str
  spread: str
  bound: str
  decimals: int | None

  def single(self, value: float) -> str:
    return f"{self.scale * value:{self.value}}{self.unit}"

  def mean_std(self, mean: float, std: float) -> str:
    return f"{self.scale * mean:{self.mean}} ± {self.scale * std:{self.spread}}"

  def interval(self, low: float, high: float) -> str:
    return f"[{self.scale * low:{self.bound}}, {self.scale * high:{self.bound}}]"

  def change(self, value: float) -> str:
    return f"{self.scale * value:+{self.bound}}"

  def differences(self, values) -> list[str]:
    """Differences in the metric's units, all with the same number of decimals."""
    if self.decimals is None:
      return [self.change(v) for v in values]
    largest = max(abs(v) for v in values) * self.scale
    decimals = self.decimals
    if 0 < largest < 0.1:
      decimals = max(decimals, 1 - math.floor(math.log10(largest)))
    return [f"{v * self.scale:+.{decimals}f}" for v in values]


ACCURACY = MetricStyle(scale=100.0, unit="%", value=".2f", mean=".2f", spread=".2f",
                       bound=".2f", decimals=2)
SUBOPTIMALITY = MetricStyle(scale=1.0, unit="", value=".2e", mean=".1e", spread=".0e",
                            bound=".1e", decimals=None)
OTHER = MetricStyle(scale=1.0, unit="", value=".3f", mean=".3f", spread=".3f", bound=".3f",
                    decimals=3)


def metric_style(workload: dict) -> MetricStyle:
  """How a workload's metric is printed: the one switch on the kind of metric."""
  return {"accuracy": ACCURACY, "suboptimality": SUBOPTIMALITY}.get(workload["metric"], OTHER)


def fmt_metric(workload: dict, value: float) -> str:
  """One value of a workload's metric ("diverged" for NaN)."""
  if value != value:  # NaN: the run diverged
    return "diverged"
  return metric_style(workload).single(value)


def as_entry(test: list[float]) -> dict:
  """An entry-like dict of per-seed test values (a same-rate run's, say), as
  ``mean_std`` reads an entry.
  """
  return {"test": test, "test_mean": sum(test) / len(test)}


def mean_std(workload: dict, e: dict) -> str:
  """An entry's test metric over its seeds, as the tables print it: the mean and
  the sample std (ddof 1), computed from the per-seed values (an entry without
  them: the std it holds).
  """
  if e["test_mean"] != e["test_mean"]:  # NaN: a seed diverged
    return "diverged"
  std = stats.std(e["test"]) if "test" in e else e["test_std"]
  return metric_style(workload).mean_std(e["test_mean"], std)


def interval(workload: dict, e: dict) -> str:
  """The 95% confidence interval of an entry's mean test metric (t-interval)."""
  if e["test_mean"] != e["test_mean"] or len(e["test"]) < 2:
    return "—"
  low, high = stats.mean_interval(e["test"])
  return metric_style(workload).interval(low, high)


def _steps_and_seconds(workload: dict, e: dict) -> str:
  seeds = f"{e['reached']}/{len(e['seeds'])}"
  if e["median_steps_to_target"] is None:
    return f"not reached ({seeds})"
  return f"{e['median_steps_to_target']:.0f}, {e['seconds_to_target']:.2f} s ({seeds})"


SHORT_NAMES = {"convmixer": "ConvMixer", "mlp": "MLP", "charlm": "char LM",
               "diabetes": "diabetes", "logreg": "logistic", "mlp_wide": "wide MLP",
               "diabetes_wide": "wide diabetes", "charlm_wide": "wide char LM",
               "contest_cpu": "contest LM (CPU size)", "contest_gpu": "contest LM (GPU size)"}
SHORT_METRICS = {"accuracy": "acc. % ↑", "bits per character": "bits/char ↓", "MSE": "MSE ↓",
                 "suboptimality": "subopt. ↓"}


def short_header(workload: dict) -> str:
  name = SHORT_NAMES.get(workload["name"], workload["name"])
  return f"{name}, {SHORT_METRICS.get(workload['metric'], workload['metric'])}"


def is_plain(name: str) -> bool:
  """VSGD itself or a baseline: not a variant (``+``), not another VSGD."""
  return "+" not in name and ("vsgd" not in name or name == "vsgd")


def summary(folder: str, images: str) -> list[str]:
  """The main protocol's one table of VSGD and the baselines, with its overview
  plots; every entry's numbers under every schedule are ``details``'s, the
  learning-rate guide compares the schedules and the rates.
  """
  protocols = reading.load_all(folder)
  if not protocols:
    return []
  main = reading.MAIN if reading.MAIN in protocols else next(iter(protocols))
  results = protocols[main]
  sub = os.path.relpath(common.schedule_folder(folder, main), folder)
  prefix = images if sub == "." else f"{images}/{sub}"
  return markdown.section(
      "results_small_workloads", "time_to_result", runs=_sizing_notes(protocols, folder),
      title=common.SCHEDULE_TITLES[main], images=prefix,
      table=_grid_table(results, [n for n in reading.entry_names(results) if is_plain(n)],
                        mean_std))


def _sizing_notes(protocols: dict, folder: str) -> list[str]:
  """What each protocol's run was sized to, from its files: each workload's steps and
  seeds, how its rates were chosen, the machine and the whole run's wall time.
  """
  out = []
  for schedule, results in protocols.items():
    parts = [f"{SHORT_NAMES.get(name, name)} {p['workload']['steps']} steps, "
             f"{'/'.join(map(str, sorted({len(e['seeds']) for e in p['entries'].values()})))} "
             "seeds" for name, p in results.items()]
    run = reading.load_run(common.schedule_folder(folder, schedule))
    wall = f" The whole run took {run['wall_s'] / 60:.0f} minutes" if run else " Run"
    machine = common.machine_text(next(iter(results.values()))["machine"])
    out.append(f"- **{SCHEDULE_HEADERS[schedule]}**: {'; '.join(parts)}.{wall} on "
               f"{machine}; {tuning_text(results)}.")
  return out


def tuning_text(results: dict) -> str:
  """How a protocol's rates were chosen, from its files: on separate tuning seeds,
  or on seed 0, which is also reported (the files before tuning seeds existed).
  Where workloads were tuned on different seeds, each set names its workloads.
  """
  by_seeds: dict[tuple, list[str]] = {}
  for name, p in results.items():
    for tuned in dict.fromkeys(tuple(e["tuning"].get("seeds", []))
                               for e in p["entries"].values()):
      by_seeds.setdefault(tuned, []).append(SHORT_NAMES.get(name, name))
  clauses = []
  for tuned, names in by_seeds.items():
    clause = ("the seed-0 run, which is also one of the reported seeds" if not tuned
              else f"tuning seed{'s' if len(tuned) > 1 else ''} {', '.join(map(str, tuned))}")
    clauses.append(clause if len(by_seeds) == 1 else f"{clause} for {', '.join(names)}")
  fresh = "" if list(by_seeds) == [()] else "; the reported seeds are fresh runs"
  return f"rates chosen on {'; on '.join(clauses)}{fresh}"


def _grid_table(results: dict, names: list, cell) -> list[str]:
  """Optimizers down, workloads across."""
  return markdown.table(
      ["optimizer", *(short_header(p["workload"]) for p in results.values())],
      [[name, *("" if name not in p["entries"] else cell(p["workload"], p["entries"][name])
                for p in results.values())] for name in names])


def details(folder: str, images: str) -> list[str]:
  """The protocol, then per schedule and workload: its description, the full table,
  its tuning run and its plot.
  """
  protocols = reading.load_all(folder)
  if not protocols:
    return []
  out = markdown.section("results_small_workloads", "protocol")
  for schedule in sorted(protocols, key=lambda s: s != reading.MAIN):
    sub = os.path.relpath(common.schedule_folder(folder, schedule), folder)
    prefix = images if sub == "." else f"{images}/{sub}"
    plots = [] if schedule == reading.MAIN else [  # the main protocol's: the summary's
        "Final validation metric against the peak rate, and the validation curves at the "
        f"chosen rate:\n\n![learning-rate sensitivity]({prefix}/ttr_overview_lr.png)\n",
        f"![validation curves]({prefix}/ttr_overview_val.png)"]
    out += markdown.section("results_small_workloads", "details",
                            title=common.SCHEDULE_TITLES[schedule], plots=plots,
                            workloads=_workload_sections(protocols[schedule], prefix))
  return out


def _workload_sections(results: dict, images: str) -> list[str]:
  out = []
  for name, payload in results.items():
    w = payload["workload"]
    rows, tuning = [], []
    for entry, e in payload["entries"].items():
      edge = " (edge)" if e["on_edge"] else ""
      rows.append([entry, f"{e['learning_rate']:g}{edge}",
                   f"{mean_std(w, e)} {interval(w, e)}", str(len(e["seeds"])),
                   _steps_and_seconds(w, e),
                   f"{e['step_ms']:.2f}, {common.ratio_text(e, decimals=2)}"])
      by_lr = reading.tuning_values(e)
      tuning.append([entry, "; ".join(f"{lr:g}: {fmt_metric(w, by_lr[lr])}"
                                      for lr in reading.rates_tried(payload) if lr in by_lr)])
    out += markdown.section(
        "results_small_workloads", "workload", title=w["title"], name=name, images=images,
        description=(f"{w['description']} {w['steps']} steps, validation every "
                     f"{w['eval_every']}; target: validation {w['metric']} "
                     f"{'≥' if w['higher_is_better'] else '≤'} {fmt_metric(w, w['target'])}. "
                     f"Grid: {', '.join(f'{lr:g}' for lr in w['grid'])}. Wall time "
                     f"{payload['wall_s'] / 60:.1f} min."),
        entries=markdown.table(["optimizer", "lr", "test, mean ± std [95% CI]", "seeds",
                                "to target: median steps, s (seeds)",
                                "ms/step, × Adam (p25-p75)"], rows),
        tuning=markdown.table(["optimizer", "learning rate: validation"], tuning))
  return out

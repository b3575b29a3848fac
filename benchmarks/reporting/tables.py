"""Markdown tables of the time-to-result benchmark, for the small workloads'
page, and the formatting of its metrics (``metric_style``, the one place that
tells an accuracy from a suboptimality from any other metric). Reading the
result files is ``reading``'s.

What each protocol ran and the main protocol's test metric of VSGD and every
baseline (``summary``). Every entry's seeds, steps to the target and tuning run
are in its JSON, which the page names.
"""

from __future__ import annotations

import dataclasses
import math

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
    mean: the format of a mean over seeds.
    spread: the format of the std beside it.
    bound: the format of an interval's ends and, signed, of a change.
    decimals: the fixed-point decimals of a difference and its interval (more
      where the difference is small); None prints those in ``bound``'s
      scientific notation.
  """
  scale: float
  mean: str
  spread: str
  bound: str
  decimals: int | None

  def mean_std(self, mean: float, std: float) -> str:
    return f"{self.scale * mean:{self.mean}} ± {self.scale * std:{self.spread}}"

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


ACCURACY = MetricStyle(scale=100.0, mean=".2f", spread=".2f",
                       bound=".2f", decimals=2)
SUBOPTIMALITY = MetricStyle(scale=1.0, mean=".1e", spread=".0e",
                            bound=".1e", decimals=None)
OTHER = MetricStyle(scale=1.0, mean=".3f", spread=".3f", bound=".3f",
                    decimals=3)


def metric_style(workload: dict) -> MetricStyle:
  """How a workload's metric is printed: the one switch on the kind of metric."""
  return {"accuracy": ACCURACY, "suboptimality": SUBOPTIMALITY}.get(workload["metric"], OTHER)


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


def summary(folder: str) -> list[str]:
  """What each protocol ran, then the main protocol's test metric of VSGD and every
  baseline, then the protocol. The other schedules' VSGD and Adam are the
  learning-rate guide's; every entry's seeds, steps to target and tuning run, its JSON's.
  """
  protocols = reading.load_all(folder)
  if not protocols:
    return []
  main = protocols.get(reading.MAIN, {})
  names = [n for n in reading.entry_names(main) if is_plain(n)]
  return [*markdown.section("results_small_workloads", "time_to_result",
                            runs=_sizing_notes(protocols, folder),
                            table=_grid_table(main, names) if main else []),
          *markdown.section("results_small_workloads", "protocol")]


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


def _grid_table(results: dict, names: list) -> list[str]:
  """Each optimizer's test metric (``mean_std``): optimizers down, workloads across."""
  return markdown.table(
      ["optimizer", *(short_header(p["workload"]) for p in results.values())],
      [[name, *("" if name not in p["entries"] else mean_std(p["workload"], p["entries"][name])
                for p in results.values())] for name in names])

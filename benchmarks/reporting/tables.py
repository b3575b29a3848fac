"""How the small workloads' metrics are printed (``metric_style``, the one place that
tells an accuracy from a suboptimality from any other metric), and their short names.
Reading the result files is ``reading``'s.
"""

from __future__ import annotations

import dataclasses
import math

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

  def differences(self, values) -> list[str]:
    """Differences in the metric's units, all with the same number of decimals."""
    if self.decimals is None:
      return [f"{self.scale * v:+{self.bound}}" for v in values]
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


def short_name(workload: str) -> str:
  """What a table calls ``workload``: its short name, else its own."""
  return SHORT_NAMES.get(workload, workload)


def short_header(workload: dict) -> str:
  metric = SHORT_METRICS.get(workload["metric"], workload["metric"])
  return f"{short_name(workload['name'])}, {metric}"


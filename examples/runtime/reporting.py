"""What a run tells its user: the metrics file, TensorBoard, progress, and the plot.

Only process 0 of a multi-process run reports; the others get ``Silent``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

import numpy as np


def readable(value: float) -> float | None:
  """The shortest decimal that reads back as the same float32 (0.01, not
  0.009999999776482582): the metrics are float32 on the device. Non-finite
  values become None (JSON null), as JSON has no NaN.
  """
  value = float(value)
  if not math.isfinite(value):
    return None
  return float(str(np.float32(value)))


class MetricsWriter:
  """Appends one JSON object per line to ``metrics.jsonl`` (and TensorBoard)."""

  def __init__(self, workdir: str, resume_step: int, tensorboard: bool = False):
    self.path = os.path.join(workdir, "metrics.jsonl")
    # A resumed run drops what the interrupted one logged after its checkpoint.
    kept = [r for r in read_metrics(self.path) if r["step"] <= resume_step]
    with open(self.path, "w") as f:
      f.writelines(json.dumps(r, allow_nan=False) + "\n" for r in kept)
    self.tb = None
    if tensorboard:
      try:
        from tensorboardX import SummaryWriter
      except ImportError as err:
        raise RuntimeError("tensorboard=True needs `pip install tensorboardX`") from err
      self.tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

  def write(self, step: int, **values: float | str) -> None:
    """One record; numbers as ``readable`` makes them, strings (a note such as
    ``interrupted="SIGTERM"``) as they are.
    """
    record = {"step": int(step),
              **{k: v if isinstance(v, str) else readable(v) for k, v in values.items()}}
    with open(self.path, "a") as f:
      f.write(json.dumps(record, allow_nan=False) + "\n")
    if self.tb is not None:
      for k, v in values.items():
        if not isinstance(v, str):
          self.tb.add_scalar(k, float(v), step)


class Window:
  """The train metrics of the steps since the last log step, and when the first began.

  The metrics stay on the device until they are averaged, at a log step (where
  the host waits for the step anyway).
  """

  def __init__(self):
    self.metrics: list[dict] = []
    self.started = time.perf_counter()

  def add(self, metrics: dict) -> None:
    self.metrics.append(metrics)

  def means(self) -> dict[str, float]:
    """The mean train loss and accuracy over the window; empty for no steps."""
    if not self.metrics:
      return {}
    return {k: float(np.mean([float(m[k]) for m in self.metrics]))
            for k in ("train_loss", "train_accuracy")}

  def steps_per_second(self) -> float:
    return len(self.metrics) / (time.perf_counter() - self.started)

  def restart(self) -> None:
    """Empties the window; the next step begins it."""
    self.metrics, self.started = [], time.perf_counter()


class Progress:
  """A tqdm bar on a terminal; in a log file, one plain line per logged step."""

  def __init__(self, total: int, initial: int, desc: str):
    self.total, self.desc = total, desc
    self.bar = None
    if sys.stderr.isatty():
      from tqdm import tqdm
      self.bar = tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, desc=desc)

  def step(self) -> None:
    if self.bar is not None:
      self.bar.update(1)

  def log(self, step: int, **values: float) -> None:
    shown = {k: f"{v:.4g}" for k, v in values.items()}
    if self.bar is not None:
      self.bar.set_postfix(shown)
    else:
      pairs = ", ".join(f"{k} {v}" for k, v in shown.items())
      print(f"{self.desc} step {step}/{self.total}: {pairs}", file=sys.stderr, flush=True)

  def close(self) -> None:
    if self.bar is not None:
      self.bar.close()


class Silent:
  """Stands in for ``MetricsWriter`` and ``Progress`` on processes other than 0."""

  def write(self, step: int, **values: float | str) -> None:
    pass

  def step(self) -> None:
    pass

  def log(self, step: int, **values: float) -> None:
    pass

  def close(self) -> None:
    pass


def read_metrics(path: str) -> list[dict]:
  """The records of ``metrics.jsonl``, up to its first line that is not one.

  The file is a log, not the run's state: a damaged line (a hand edit, a
  write cut short) costs the lines from there on, with a one-line warning,
  and does not stop the run.
  """
  if not os.path.exists(path):
    return []
  records = []
  with open(path, errors="replace") as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
          raise ValueError("not an object with an integer step")
      except ValueError as err:
        print(f"warning: {path} line {number} is not a metrics record "
              f"({str(err).splitlines()[0][:100]}); keeping the {len(records)} records "
              "before it", file=sys.stderr)
        break
      records.append(record)
  return records


def plot_curves(metrics_path: str, png_path: str, title: str) -> str:
  """Train loss and test accuracy against steps, side by side."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  records = read_metrics(metrics_path)
  train = [r for r in records if r.get("train_loss") is not None]
  test = [r for r in records if r.get("test_accuracy") is not None]
  noise = [r for r in records if r.get("gradient_noise_scale") is not None]
  fig, axes = plt.subplots(1, 3 if noise else 2, figsize=(15 if noise else 10, 3.6))
  ax1, ax2 = axes[0], axes[1]
  ax1.plot([r["step"] for r in train], [r["train_loss"] for r in train])
  ax1.set(xlabel="step", ylabel="train loss", yscale="log", title="train loss")
  ax2.plot([r["step"] for r in test], [100 * r["test_accuracy"] for r in test], marker="o")
  ax2.set(xlabel="step", ylabel="test accuracy (%)", title="test accuracy")
  if noise:  # experimental: see docs/howto.md, "Reading the gradient noise scale"
    axes[2].plot([r["step"] for r in noise], [r["gradient_noise_scale"] for r in noise])
    axes[2].set(xlabel="step", ylabel="B_simple (experimental)", yscale="log",
                title="gradient noise scale")
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(png_path, dpi=100)
  plt.close(fig)
  return png_path

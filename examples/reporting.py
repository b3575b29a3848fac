"""Metrics file, optional TensorBoard, and the PNG plot of a run's curves."""

from __future__ import annotations

import json
import os


class MetricsWriter:
  """Appends one JSON object per line to ``metrics.jsonl`` (and TensorBoard)."""

  def __init__(self, workdir: str, resume_step: int, tensorboard: bool = False):
    self.path = os.path.join(workdir, "metrics.jsonl")
    # A resumed run drops what the interrupted one logged after its checkpoint.
    kept = [r for r in read_metrics(self.path) if r["step"] <= resume_step]
    with open(self.path, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in kept)
    self.tb = None
    if tensorboard:
      try:
        from tensorboardX import SummaryWriter
      except ImportError as err:
        raise RuntimeError("tensorboard=True needs `pip install tensorboardX`") from err
      self.tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

  def write(self, step: int, **values: float) -> None:
    record = {"step": int(step), **{k: float(v) for k, v in values.items()}}
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
    if self.tb is not None:
      for k, v in values.items():
        self.tb.add_scalar(k, float(v), step)


def read_metrics(path: str) -> list[dict]:
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def plot_curves(metrics_path: str, png_path: str, title: str) -> str:
  """Train loss and test accuracy against steps, side by side."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  records = read_metrics(metrics_path)
  train = [r for r in records if "train_loss" in r]
  test = [r for r in records if "test_accuracy" in r]
  fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
  ax1.plot([r["step"] for r in train], [r["train_loss"] for r in train])
  ax1.set(xlabel="step", ylabel="train loss", yscale="log", title="train loss")
  ax2.plot([r["step"] for r in test], [100 * r["test_accuracy"] for r in test], marker="o")
  ax2.set(xlabel="step", ylabel="test accuracy (%)", title="test accuracy")
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(png_path, dpi=100)
  plt.close(fig)
  return png_path

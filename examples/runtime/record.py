"""A run's final record, which the Table 1 protocol reads: ``result.json`` for a
finished run, ``failed.json`` for one that stopped for good.

The trainer writes ``result.json`` last, once a run has all its steps, so
its presence means the run is complete. ``failed.json`` is written by the
protocol for a run that would stop at the same step again (it diverged), so
that the table can be built showing the cell as stopped. A run stopped for a
reason that a rerun can mend (a failed save, a signal) gets neither.
"""

from __future__ import annotations

import json
import os

from .. import configs
from . import reporting
from .workdirs import write_json

RESULT_FILE = "result.json"
FAILED_FILE = "failed.json"


def write_result(workdir: str, config: configs.Config, dataset, step: int, last: dict) -> None:
  """``result.json``: the finished run's final numbers and settings."""
  keys = ("test_loss", "test_accuracy", "validation_loss", "validation_accuracy",
          "train_loss", "train_accuracy")
  record = {"step": step, **{k: reporting.readable(last[k]) for k in keys if k in last},
            "validation": ("the test split (TinyImageNet's official val split, as the "
                           "authors' protocol has it)" if dataset.validation_is_test else
                           f"{config.validation_size} held-out training images"
                           if dataset.validation_images is not None else None),
            "settings": configs.json_settings(config)}
  write_json(os.path.join(workdir, RESULT_FILE), record)


def write_failed(workdir: str, message: str) -> None:
  """``failed.json``: the run stopped for good, and why."""
  os.makedirs(workdir, exist_ok=True)  # a run that failed at its first step made none
  write_json(os.path.join(workdir, FAILED_FILE), {"failed": message})


def read_outcome(workdir: str) -> dict | None:
  """The run's final record, ``{"failed": message}`` for a run that stopped
  for good, or None while it is unfinished.
  """
  for name in (RESULT_FILE, FAILED_FILE):
    path = os.path.join(workdir, name)
    if os.path.exists(path):
      with open(path) as f:
        return json.load(f)
  return None

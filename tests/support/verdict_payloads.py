"""Small time-to-result payloads, as ``benchmarks/time_to_result`` writes them, for
the tests of the verdicts and of the long-horizon tables.
"""

import json
import os

import numpy as np


def entry(test, lr=1e-2, seeds=None):
  """One optimizer's entry: its test metric per seed at tuned rate ``lr``."""
  seeds = list(range(len(test))) if seeds is None else seeds
  return {"label": "x", "learning_rate": lr, "on_edge": False, "seeds": seeds, "test": test,
          "test_mean": float(np.mean(test)), "test_std": float(np.std(test, ddof=1)),
          "tuning": {"learning_rate": [3.16e-3, 1e-2, 3.16e-2], "seeds": [1000],
                     "grid": [3.16e-3, 1e-2, 3.16e-2], "grown": [], "val": [0.9, 0.97, 0.8],
                     "train_loss": [0.3, 0.1, 0.5]}}


def payload(entries, higher_is_better=True):
  """A workload's result file holding ``entries`` (name -> ``entry``)."""
  return {"workload": {"name": "mlp", "title": "MLP", "metric": "accuracy",
                       "higher_is_better": higher_is_better, "target": 0.95, "steps": 100,
                       "grid": [3.16e-3, 1e-2, 3.16e-2]},
          "schedule": {"name": "warmup_cosine"}, "machine": {}, "entries": entries}


# Declared margins for the made-up workloads, in the metric's stored units.
MARGINS = {"mlp": {"margin": 0.005, "why": "half a point"},
           "convmixer": {"margin": 0.005, "why": "as the MLP"}}


def write_margins(folder, margins=None) -> None:
  """Writes ``margins.json`` (``MARGINS`` unless given) into the results ``folder``."""
  with open(os.path.join(str(folder), "margins.json"), "w") as f:
    json.dump({"declared": "2026-11-27", "margins": MARGINS if margins is None else margins}, f)


def declared(margins=None) -> dict:
  """Workload -> margin, as ``decisions.margins`` reads ``write_margins``'s file."""
  return {w: m["margin"] for w, m in (MARGINS if margins is None else margins).items()}

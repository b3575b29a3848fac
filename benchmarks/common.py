"""Shared by the benchmarks: interleaved timing, machine description, results files.

It is the one module both sides import: the runners, which measure and write JSON,
and ``benchmarks.reporting``, which reads that JSON into pages and plots. The names
of the results' folders and schedules live here for that reason.

The device suite's parent process reads and writes its JSON through this module
and leaves JAX to its children, so JAX is imported only where a function needs it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import date

import numpy as np

RESULTS = os.path.join("benchmarks", "results")
# The time-to-result protocols' learning-rate schedules (``time_to_result.schedules``
# builds them) and the folders their result files live in.
SCHEDULES = ("constant", "warmup_cosine", "paper_step")
SCHEDULE_TITLES = {
    "constant": "constant rate",
    "warmup_cosine": "5% linear warmup, then cosine decay to 0",
    "paper_step": "the paper's step schedule: the rate halved after each third of the run"}
WIDE_FOLDER = "wide"  # the wide protocol's results folder, under the results folder
LONG_HORIZON_FOLDER = "long_horizon"  # the long-horizon protocol's, likewise
LADDER_FOLDER = "ladder"  # the ladder's results (its ledger, summary and figures)
NOISE_SCALE_FOLDER = os.path.join(RESULTS, "noise_scale")
NOISE_SCALE_WORKLOADS = ("mlp", "convmixer", "charlm")


def schedule_of(payload: dict) -> str:
  """The schedule a time-to-result file holds; files written before schedules
  existed trained at a constant rate.
  """
  return payload.get("schedule", {}).get("name", "constant")


def schedule_folder(root: str, name: str) -> str:
  """Where the result files of schedule ``name`` live under the results folder
  ``root``: the constant rate's in ``root`` itself, the others' in a subfolder
  named after the schedule.
  """
  return root if name == "constant" else os.path.join(root, name)


def _cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def machine() -> dict:
  """The machine the results come from: its first JAX device, CPU, cores and versions."""
  import jax
  device = jax.devices()[0]
  return {"date": date.today().isoformat(), "platform": device.platform,
          "device": device.device_kind, "cpu": _cpu_model(),
          "cores": os.cpu_count(), "jax": jax.__version__}


def machine_text(m: dict, cpu: bool = True) -> str:
  """``machine()``'s record as the results page names it; ``cpu`` false leaves the
  processor out (where the device is an accelerator, or the caller names it apart).
  """
  if m["platform"] == "cpu":  # the device is the processor: named once
    return f"{m['cpu']} CPU, {m['cores']} cores, jax {m['jax']}, {m['date']}"
  processor = f", {m['cpu']}" if cpu else ""
  return (f"{m['device']} ({m['platform']}, {m['cores']} cores{processor}), "
          f"jax {m['jax']}, {m['date']}")


def optimizer_step(opt):
  """``opt``'s step as a function of ``(params, state, grads)``: ``update`` then
  ``optax.apply_updates``, the step every cost runner times or compiles.
  """
  import optax

  def step(params, state, grads):
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state
  return step


def interleaved_medians(fns: dict, repeats: int) -> dict:
  """Times each zero-argument callable ``repeats`` times, round-robin, so that
  drift of the machine hits all of them alike; returns per-name samples (s).
  """
  samples = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      t0 = time.perf_counter()
      fn()
      samples[name].append(time.perf_counter() - t0)
  return samples


def ratio_with_spread(samples: list, baseline: list) -> dict:
  """Ratio of medians, and the 25-75% range of per-round ratios as its spread."""
  per_round = np.asarray(samples) / np.asarray(baseline)
  return {"ratio": float(np.median(samples) / np.median(baseline)),
          "ratio_p25": float(np.percentile(per_round, 25)),
          "ratio_p75": float(np.percentile(per_round, 75))}


def ratio_text(row: dict, prefix: str = "", decimals: int = 3) -> str:
  """``row``'s ratio (``prefix`` "control_": the control's) with its 25-75% spread, to
  ``decimals`` places; "-" for rows measured before the benchmark had a control.
  """
  if prefix + "ratio" not in row:
    return "-"
  ratio, low, high = (row[prefix + key] for key in ("ratio", "ratio_p25", "ratio_p75"))
  return f"{ratio:.{decimals}f} ({low:.{decimals}f}-{high:.{decimals}f})"


def write_json(path: str, payload: dict, indent: int = 2, sort_keys: bool = False) -> None:
  """Writes ``payload`` to ``path`` whole or not at all: it goes to a temporary file
  first, which replaces ``path`` in one step, so that a kill while writing leaves
  the previous file (the device suite rewrites its results after every part). The
  ladder's files are written with ``indent=1, sort_keys=True``, as they always were.
  """
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(payload, f, indent=indent, sort_keys=sort_keys)
  os.replace(path + ".tmp", path)


def read_json(path: str) -> dict | None:
  """The JSON at ``path``, or None where there is no such file."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def read_text(path: str) -> str | None:
  """The text at ``path``, or None where there is no such file."""
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return f.read()


def load(folder: str, name: str) -> dict | None:
  """The results file ``<folder>/<name>.json``, or None where it was never written."""
  return read_json(os.path.join(folder, name + ".json"))

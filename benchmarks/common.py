"""Shared by the benchmarks: interleaved timing, machine description, output."""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from datetime import date

import jax
import numpy as np


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
  device = jax.devices()[0]
  return {"date": date.today().isoformat(), "platform": device.platform,
          "device": device.device_kind, "cpu": _cpu_model(),
          "cores": os.cpu_count(), "jax": jax.__version__}


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


def minor_page_faults(fn, steps: int) -> float:
  """Minor page faults per call of ``fn``: freshly mapped memory, 4 KiB a fault.

  A step that allocates large temporaries each call pays for them here.
  """
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  for _ in range(steps):
    fn()
  return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


def ratio_with_spread(samples: list, baseline: list) -> dict:
  """Ratio of medians, and the 25-75% range of per-round ratios as its spread."""
  per_round = np.asarray(samples) / np.asarray(baseline)
  return {"ratio": float(np.median(samples) / np.median(baseline)),
          "ratio_p25": float(np.percentile(per_round, 25)),
          "ratio_p75": float(np.percentile(per_round, 75))}


def ratio_text(row: dict, prefix: str = "") -> str:
  """``row``'s ratio (``prefix`` "control_": the control's) with its 25-75% spread;
  "-" for rows measured before the benchmark had a control.
  """
  if prefix + "ratio" not in row:
    return "-"
  return (f"{row[prefix + 'ratio']:.3f} "
          f"({row[prefix + 'ratio_p25']:.3f}-{row[prefix + 'ratio_p75']:.3f})")


def write_json(path: str, payload: dict) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump(payload, f, indent=2)

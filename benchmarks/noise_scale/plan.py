"""What the noise-scale validation runs, where it writes, and where along a run it reads.

Shared by ``run`` (which trains and measures) and ``report`` (which plots and
renders from the JSON), so that neither imports the other's module for them.
"""

from __future__ import annotations

import os

import numpy as np

RESULTS = os.path.join("benchmarks", "results", "noise_scale")
WORKLOADS = ("mlp", "convmixer", "charlm")


def read_points(steps: int, points: int) -> list[int]:
  """``points`` steps along a run, at least three in each phase when ``points`` >= 9."""
  edge = 3 if points >= 9 else 1
  fractions = [0.1 * (i + 1) / edge for i in range(edge)]
  fractions += list(np.linspace(0.1, 0.9, points - 2 * edge + 2)[1:-1])
  fractions += list(np.linspace(0.9, 1.0, edge + 1)[1:])
  return sorted({min(steps, max(1, round(steps * f))) for f in fractions})


def phase(step: int, steps: int) -> str:
  """warmup: the first 10% of the run; end: the last 10%; middle: the 80% between."""
  if step <= 0.1 * steps:
    return "warmup"
  if step > 0.9 * steps:
    return "end"
  return "middle"

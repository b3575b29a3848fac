"""What the noise-scale validation runs, where it writes, and where along a run it reads.

The workloads and the folder are ``benchmarks.common``'s, which the reporting
(``benchmarks.reporting.noise_scale``) reads too.
"""

from __future__ import annotations

import numpy as np

from benchmarks import common

RESULTS = common.NOISE_SCALE_FOLDER
WORKLOADS = common.NOISE_SCALE_WORKLOADS


def read_points(steps: int, points: int) -> list[int]:
  """``points`` steps along a run, at least three in each phase when ``points`` >= 9."""
  edge = 3 if points >= 9 else 1
  fractions = [0.1 * (i + 1) / edge for i in range(edge)]
  fractions += list(np.linspace(0.1, 0.9, points - 2 * edge + 2)[1:-1])
  fractions += list(np.linspace(0.9, 1.0, edge + 1)[1:])
  return sorted({min(steps, max(1, round(steps * f))) for f in fractions})


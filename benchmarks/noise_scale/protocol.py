"""The noise-scale validation's protocol, declared before its runs: what it trains, where
it reads the state, how many draws make its reference, and where it writes.

* **Runs.** VSGD (``vsgd_optax.vsgd``, its default prior strength ``GAMMA`` and
  variance ratio ``K``) at the peak rate ``PEAK_LR`` on each workload of
  ``WORKLOADS`` (``benchmarks.common``'s, which the reporting reads too), under
  each schedule of ``SCHEDULES``; the read-out at ``POINTS`` steps along a run
  (``read_points``), against a reference of ``DRAWS`` batch gradients there.
* **Invariance.** The MLP frozen after ``INVARIANCE["steps"]`` steps, fed
  ``INVARIANCE["feed"]`` batches of B and of 4B on ``INVARIANCE["streams"]``
  independent streams each, against twice ``DRAWS`` draws.
* **Quick** (CI's smoke run): the MLP alone, with ``QUICK``'s sizes.
"""

from __future__ import annotations

import numpy as np

from benchmarks import common

RESULTS = common.NOISE_SCALE_FOLDER
WORKLOADS = common.NOISE_SCALE_WORKLOADS
SCHEDULES = ("warmup_cosine", "constant")
PEAK_LR = 0.01
GAMMA, K = 1e-8, 30.0  # vsgd's default prior strength and variance ratio
DRAWS, POINTS = 64, 16
INVARIANCE = {"steps": 300, "feed": 4000, "streams": 4}
QUICK = {"draws": 8, "points": 4, "invariance": {"steps": 4, "feed": 10, "streams": 2}}
# The code a run's numbers depend on: a part kept by other code is measured again.
SOURCES = ("vsgd_optax/**/*.py", "benchmarks/noise_scale/*.py",
           "benchmarks/time_to_result/schedules.py", "benchmarks/time_to_result/workloads/*.py")


def read_points(steps: int, points: int) -> list[int]:
  """``points`` steps along a run, at least three in each phase when ``points`` >= 9."""
  edge = 3 if points >= 9 else 1
  fractions = [0.1 * (i + 1) / edge for i in range(edge)]
  fractions += list(np.linspace(0.1, 0.9, points - 2 * edge + 2)[1:-1])
  fractions += list(np.linspace(0.9, 1.0, edge + 1)[1:])
  return sorted({min(steps, max(1, round(steps * f))) for f in fractions})

"""How the harness runs each workload: the learning rates it tries, and whether
its steps run inside ``lax.scan``.

These are choices of the benchmark, not of the problem: a workload
(``workloads``) is the model, its data and its target, whatever grid tunes it
and however its steps are driven.
"""

from __future__ import annotations

import dataclasses

# Learning-rate grids, log-spaced. The cheap workloads try half decades from 1e-5
# to 1; the language model (a minute a run on 2 cores) half decades from 1e-4
# to 1e-1; the ConvMixer (three minutes a run) whole decades from 1e-4 to 1.
# The protocol extends a grid where an optimizer's best value lies on its edge.
FINE_GRID = tuple(float(f"{10 ** (k / 2):.3g}") for k in range(-10, 1))
MID_GRID = FINE_GRID[2:-2]
COARSE_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
QUICK_GRID = (1e-3, 1e-2)


@dataclasses.dataclass(frozen=True)
class Settings:
  """``grid``: the learning rates tried, the same for every optimizer.
  ``scan_steps``: steps run inside ``lax.scan``; false for a model made of
  convolutions, which steps from Python (see ``trainer.Trainer``).
  ``fixed_lanes``: every call trains the same number of runs (padded), so one
  compilation serves them all, where a run costs less than compiling it.
  """
  grid: tuple
  scan_steps: bool = True
  fixed_lanes: bool = False


SETTINGS = {
    "mlp": Settings(FINE_GRID, fixed_lanes=True),
    "diabetes": Settings(FINE_GRID, fixed_lanes=True),
    "logreg": Settings(FINE_GRID, fixed_lanes=True),
    "charlm": Settings(MID_GRID),
    "convmixer": Settings(COARSE_GRID, scan_steps=False),
    "mlp_wide": Settings(FINE_GRID, fixed_lanes=True),
    "diabetes_wide": Settings(FINE_GRID, fixed_lanes=True),
    "charlm_wide": Settings(MID_GRID),
}


def settings(name: str, quick: bool = False) -> Settings:
  """The settings of workload ``name``; ``quick`` (the smoke run) tries two rates."""
  found = SETTINGS[name]
  return dataclasses.replace(found, grid=QUICK_GRID) if quick else found

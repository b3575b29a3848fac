"""Reading the time-to-result benchmark's result files, and checking them.

Each schedule's results live in a folder of their own (``common.schedule_folder``);
``load_protocol`` refuses a file that names another schedule, so two schedules'
results are never mixed. Rendering them is ``small``'s.
"""

from __future__ import annotations

import glob
import os

from benchmarks import common

MAIN = "warmup_cosine"  # the main protocol's schedule, shown first
WIDE_FOLDER = common.WIDE_FOLDER
LONG_HORIZON_FOLDER = common.LONG_HORIZON_FOLDER
WORKLOAD_ORDER = ("convmixer", "mlp", "charlm", "diabetes", "logreg")


def load_results(folder: str) -> dict:
  """Workload name -> payload of the result files in ``folder``, in the benchmark's order."""
  found = {}
  for path in glob.glob(os.path.join(folder, "ttr_*.json")):
    payload = common.read_json(path)
    if "workload" in payload:
      found[payload["workload"]["name"]] = payload
  order = [n for n in WORKLOAD_ORDER if n in found] + sorted(set(found) - set(WORKLOAD_ORDER))
  return {n: found[n] for n in order}


def load_protocol(root: str, schedule: str) -> dict:
  """Workload name -> payload of one schedule's results under ``root``; a file
  that names another schedule is an error, never a silent mix.
  """
  results = load_results(common.schedule_folder(root, schedule))
  for name, payload in results.items():
    held = common.schedule_of(payload)
    if held != schedule:
      raise ValueError(f"{common.schedule_folder(root, schedule)}/ttr_{name}.json holds "
                       f"{held!r} results where {schedule!r} results belong")
  return results


def load_all(root: str) -> dict:
  """Schedule -> its results (only the schedules that have any)."""
  found = {s: load_protocol(root, s) for s in common.SCHEDULES}
  return {s: r for s, r in found.items() if r}

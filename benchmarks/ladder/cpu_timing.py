"""The CPU rungs' timings (``timings.json``): one run of every rung, and the ladder's hours.

Each (size, entry) is timed as one run (one seed, the entry's contest rate)
for three chunks (``timing.time_rung``) and projected to each budget it runs
at. At each size one entry is timed again as 3 and 9 runs vmapped together,
which says whether a rung's rates and seeds train faster as one program; the
ladder's hours are projected with the faster packing.
"""

from __future__ import annotations

import os

from benchmarks import common
from benchmarks import ledger as ledgers
from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import run
from benchmarks.ladder import timing

PATH = os.path.join(common.RESULTS, "ladder", "timings.json")
RATES_ASSUMED = 4  # a window of three half decades, grown once: the projection's rates a rung
PACKING_ENTRY = "vsgd_muon"


def budgets_of(entry: str) -> tuple[float, ...]:
  return protocol.REFERENCE_BUDGETS if entry in protocol.REFERENCES else protocol.BUDGETS


def ladder_hours(rungs: list[dict], speedup: dict[str, float], sizes,
                 key: str = "seconds") -> dict:
  """The ladder's projected hours a size: every rung's runs (``RATES_ASSUMED`` rates,
  3 seeds; the untuned budgets one rate; the sensitivity check at its sizes),
  each run's ``key`` (``seconds``: wall; ``cpu_seconds``: the process's CPU time of its
  steps) divided by that size's vmap speedup.
  """
  hours = {}
  seeds = len(protocol.SEEDS)
  for size_name in sizes:
    total = 0.0
    for rung in (r for r in rungs if r["size"] == size_name):
      for p in rung["projected"]:
        rates = 1 if p["budget"] in protocol.UNTUNED_BUDGETS else RATES_ASSUMED
        total += rates * seeds * p[key]
        if (size_name in protocol.SENSITIVITY_SIZES and rung["entry"] in protocol.MUON_FAMILY
            and p["budget"] == max(protocol.BUDGETS)):
          total += len(protocol.SENSITIVITY_FACTORS) * seeds * p[key]
    hours[size_name] = round(total / speedup[size_name] / 3600, 2)
  return hours


def _packing(ctx: run.Context, out: dict, size_name: str, names) -> float:
  """Times one entry at ``size_name`` as 3 and 9 runs vmapped; the best packing's speedup."""
  one = next(r for r in out["rungs"] if r["size"] == size_name
             and r["entry"] == (PACKING_ENTRY if PACKING_ENTRY in names else names[-1]))
  packed = [timing.time_rung(ctx, one["entry"], size_name, lanes=n) for n in (3, 9)]
  for p in packed:
    p["load"] = timing.load()["loadavg_1_5_15"]
  out["packing"] = [p for p in out["packing"] if p["size"] != size_name] + packed
  # Judged on CPU seconds: the wall clock of a shared machine moves with the others' load.
  best = min([one, *packed], key=lambda m: m["cpu_per_step_per_run"])
  out.setdefault("vmap_speedup", {})[size_name] = {
      "best_lanes": best["lanes"],
      "cpu": round(one["cpu_per_step_per_run"] / best["cpu_per_step_per_run"], 2),
      "wall": round(one["per_step_per_run"] / best["per_step_per_run"], 2)}
  return one["cpu_per_step_per_run"] / best["cpu_per_step_per_run"]


def main(ctx: run.Context, sizes, names=protocol.ENTRIES, path: str = PATH,
         packing_sizes=None) -> dict:
  """Times every rung of ``sizes`` into ``path``, keeping its other sizes' timings; the
  packing at ``packing_sizes`` (default: ``sizes``); a size without one counts no speedup.
  """
  out = common.read_json(path) or {"rungs": [], "packing": []}
  out["rungs"] = [r for r in out["rungs"] if r["size"] not in sizes]
  out["machine"] = ledgers.machine()
  for size_name in sizes:
    for entry in names:
      measured = timing.time_rung(ctx, entry, size_name, lanes=1)
      measured["projected"] = [timing.projected(measured, b) for b in budgets_of(entry)]
      measured["load"] = timing.load()["loadavg_1_5_15"]
      out["rungs"].append(measured)
      print(f"timed {entry} {size_name}: {measured}", flush=True)
      ledger.write_json(path, out)
    if packing_sizes is None or size_name in packing_sizes:
      _packing(ctx, out, size_name, names)
      ledger.write_json(path, out)
  timed = sorted({r["size"] for r in out["rungs"]})
  speedup = {s: out.get("vmap_speedup", {}).get(s, {}).get("cpu", 1.0) for s in timed}
  out["ladder_hours_wall_under_load"] = ladder_hours(out["rungs"], speedup, timed)
  out["ladder_hours_cpu_seconds"] = ladder_hours(out["rungs"], speedup, timed, "cpu_seconds")
  out["load_after"] = timing.load()
  out["note"] = load_note(out["rungs"])
  ledger.write_json(path, out)
  return out


def load_note(rungs) -> str:
  """What the machine's load was while ``rungs`` were timed: times taken on shared
  cores run long, and the projection with them.
  """
  loads = [r["load"][0] for r in rungs]
  return (f"1-minute load average {min(loads):.1f} to {max(loads):.1f} while the rungs were "
          f"timed, on {os.cpu_count()} cores")

"""The GPU rungs (``protocol.GPU_RATE_RULE``) on a lent accelerator, in order of priority.

``run_gpu`` first times one program of every (size, entry) of the plan (the
compilation it pays is reused by the real programs of this process) and
writes the timings; then it trains the programs in the declared order, each
entry's rate as one program of its seeds, and skips a program that its timing
says would not end before the deadline. Every finished program's lines are in
the ledger and in the mirror ledger (``$OUT``) at once.
"""

from __future__ import annotations

import os

from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import run
from benchmarks.ladder import timing


def _window_order(centre: float) -> tuple[float, float, float]:
  low, mid, high = protocol.window(centre)
  return mid, low, high


def _muon_family(ctx, size_name, budget, seeds, names, adam) -> None:
  family = [n for n in protocol.GPU_PRIORITY if n in names]
  for position in range(3):  # the centres, then the lower half decades, then the upper
    for entry in family:
      rate = _window_order(protocol.CONTEST_RATES[entry])[position]
      run.run_program(ctx, entry, size_name, budget, [rate], seeds, adam)


def _size(ctx, size_name, budget, seeds, names) -> float | None:
  """AdamW's window, then the Muon family's; AdamW's chosen rate (None if none ran)."""
  for rate in _window_order(protocol.CONTEST_RATES["adamw"]):
    run.run_program(ctx, "adamw", size_name, budget, [rate], seeds, None)
  adam = run.chosen(ctx.lines(), "adamw", size_name, budget, seeds)
  if adam is not None:
    _muon_family(ctx, size_name, budget, seeds, names, adam)
  return adam


def run_gpu(ctx: run.Context, sizes=tuple(protocol.GPU_SIZES), budget=protocol.GPU_BUDGETS[0],
            reference_budgets=protocol.GPU_REFERENCE_BUDGETS, names=protocol.ENTRIES,
            seeds=protocol.SEEDS, timings_path: str | None = None) -> dict:
  """The GPU plan at ``sizes``; returns (and writes to ``timings_path``) the timings."""
  timings = {"machine": ledger.machine(), "load": timing.load(), "rungs": []}
  for size_name in sizes:
    for entry in names:
      measured = timing.time_rung(ctx, entry, size_name, lanes=len(seeds))
      measured["projected"] = [timing.projected(measured, b) for b in reference_budgets]
      timings["rungs"].append(measured)
      print(f"timed {entry} {size_name}: {measured}", flush=True)
      if timings_path:
        run.write_json(timings_path, timings)
  adam = {size_name: _size(ctx, size_name, budget, seeds, names) for size_name in sizes}
  for size_name in sizes:
    for extra in (b for b in reference_budgets if b != budget):
      if adam[size_name] is None:
        continue
      run.run_program(ctx, "adamw", size_name, extra, [adam[size_name]], seeds, None)
      if "muon" in names:
        rate = run.chosen(ctx.lines(), "muon", size_name, budget, seeds, adam[size_name])
        if rate is not None:
          run.run_program(ctx, "muon", size_name, extra, [rate], seeds, adam[size_name])
  return timings


def out_paths(out: str) -> tuple[str, str]:
  """The mirror ledger and the timings file under the folder ``out``."""
  return os.path.join(out, "runs.jsonl"), os.path.join(out, "timings_gpu.json")

"""The GPU rungs (``protocol.GPU_RATE_RULE``) on a lent accelerator, in order of priority.

``run_gpu`` goes a size at a time: it first times one program of every entry
the ledger still lacks runs of at that size (the compilation it pays is
reused by the real program in this process) and writes the timings; then it
trains the programs in the declared order, each entry's window of rates and
its seeds as one program, and skips a program that its timing says would not
end before the deadline. Every finished program's lines are in
the ledger and in the mirror ledger (``$OUT``) at once.
"""

from __future__ import annotations

import time

from benchmarks import ledger as ledgers
from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import run
from benchmarks.ladder import timing
from benchmarks.lm import train

TIMING_RESERVE = 90.0  # seconds a timing needs at least (a compilation and three chunks)


def _momentum(names) -> tuple[str, ...]:
  """The momentum study's betas (``protocol.MOMENTUM_ORDER``) that run at a GPU size: Muon's
  variants, so where ``names`` holds Muon.
  """
  if "muon" not in names:
    return ()
  return tuple(protocol.momentum_entry(b) for b in protocol.MOMENTUM_ORDER)


def _pending(ctx, entry, size_name, budget, seeds) -> bool:
  """Whether the ledger lacks a run of ``entry``'s window at this rung."""
  lines = ctx.lines()
  adam = rules.chosen(lines, "adamw", size_name, budget, seeds)
  if entry != "adamw" and adam is None:
    return True
  held = {ledger.key(line) for line in lines}
  return any((entry, size_name, float(budget), rate, rate if entry == "adamw" else adam, seed)
             not in held
             for rate in protocol.window(rules.contest_rate(entry)) for seed in seeds)


def _time(ctx, size_name, budget, reference_budgets, names, seeds, timings, path) -> None:
  """Times one program of each entry's window at ``size_name`` (its compilation then
  serves the real program), where the ledger lacks runs of it.
  """
  lanes = 3 * len(seeds)
  for entry in (*names, *_momentum(names)):
    if not _pending(ctx, entry, size_name, budget, seeds):
      continue
    if ctx.deadline is not None and time.time() + TIMING_RESERVE > ctx.deadline:
      print(f"no time left to time {entry} {size_name}", flush=True)
      return
    try:
      measured = _time_rung(ctx, entry, size_name, lanes)
    except train.Stopped:
      return
    measured["projected"] = [timing.projected(measured, b) for b in reference_budgets]
    timings["rungs"].append(measured)
    print(f"timed {entry} {size_name}: {measured}", flush=True)
    if path:
      ledger.write_json(path, timings)


def _time_rung(ctx, entry: str, size_name: str, lanes: int) -> dict:
  """``timing.time_rung``; a momentum beta's program is Muon's with another constant, so it
  takes Muon's timing (this invocation's, else one made now) under its own name.
  """
  if entry in protocol.CONTEST_RATES:
    return timing.time_rung(ctx, entry, size_name, lanes=lanes)
  muon = ctx.timings.get(("muon", size_name)) or timing.time_rung(ctx, "muon", size_name, lanes)
  measured = {**muon, "entry": entry, "timed_as": "muon"}
  ctx.timings[entry, size_name] = measured
  return measured


def _size(ctx, size_name, budget, seeds, names) -> float | None:
  """AdamW's window, then each Muon-family entry's (``protocol.GPU_PRIORITY``), then each
  momentum beta's (Muon's window), each one program of its rates and seeds; AdamW's chosen
  rate (None if it did not run).
  """
  run.run_program(ctx, "adamw", size_name, budget,
                  protocol.window(protocol.CONTEST_RATES["adamw"]), seeds, None)
  adam = rules.chosen(ctx.lines(), "adamw", size_name, budget, seeds)
  if adam is not None:
    for entry in (*(n for n in protocol.GPU_PRIORITY if n in names), *_momentum(names)):
      run.run_program(ctx, entry, size_name, budget, protocol.window(rules.contest_rate(entry)),
                      seeds, adam)
  return adam


def run_gpu(ctx: run.Context, sizes=tuple(protocol.GPU_SIZES), budget=protocol.GPU_BUDGETS[0],
            reference_budgets=protocol.GPU_REFERENCE_BUDGETS, names=protocol.ENTRIES,
            seeds=protocol.SEEDS, timings_path: str | None = None) -> dict:
  """The GPU plan at ``sizes``, a size at a time (its timings, then its programs); then the
  references' other budgets. Returns (and writes to ``timings_path``) the timings.
  """
  timings = {"machine": ledgers.machine(), "load": timing.load(), "rungs": []}
  adam = {}
  for size_name in sizes:
    _time(ctx, size_name, budget, reference_budgets, names, seeds, timings, timings_path)
    adam[size_name] = _size(ctx, size_name, budget, seeds, names)
  for size_name in sizes:
    for extra in (b for b in reference_budgets if b != budget):
      if adam[size_name] is None:
        continue
      run.run_program(ctx, "adamw", size_name, extra, [adam[size_name]], seeds, None)
      if "muon" in names:
        rate = rules.chosen(ctx.lines(), "muon", size_name, budget, seeds, adam[size_name])
        if rate is not None:
          run.run_program(ctx, "muon", size_name, extra, [rate], seeds, adam[size_name])
  return timings

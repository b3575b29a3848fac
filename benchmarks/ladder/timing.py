"""Timings of the ladder's rungs, measured before they run, to size the ladder.

``time_rung`` trains one program of an entry at a size for two chunks and
evaluates it: the compilation (kept, so the rung's real program reuses it in
the same process), the median chunk, the evaluation. A rung's run is projected
from them at each budget: compilation + chunks x chunk + evaluation.
"""

from __future__ import annotations

import math
import os
import time

from benchmarks.ladder import entries
from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import run
from benchmarks.lm import model
from benchmarks.lm import train


def time_rung(ctx: run.Context, entry: str, size_name: str, lanes: int = 1) -> dict:
  """Measures one program of ``lanes`` runs (seeds 0, 1, ...) of ``entry`` at ``size_name``;
  raises ``train.Stopped`` where ``ctx.deadline`` comes first.
  """
  size = rules.SIZES[size_name]
  rate = protocol.CONTEST_RATES[entry]
  seeds = list(range(lanes))
  out = train.train_chunks(entries.builder(entry), size, 3 * ctx.chunk, [rate] * lanes,
                           [protocol.CONTEST_RATES["adamw"]] * lanes, seeds, ctx.data,
                           chunk=ctx.chunk, deadline=ctx.deadline)
  train_seconds = out["first_chunk"] + 2 * out["per_chunk"]
  measured = {"entry": entry, "size": size_name, "params": model.count(size), "lanes": lanes,
              "chunk": ctx.chunk, "first_chunk": round(out["first_chunk"], 3),
              "per_chunk": round(out["per_chunk"], 4),
              "cpu_per_chunk": round(out["cpu_per_chunk"], 4),
              "evaluate": round(max(0.0, out["seconds"] - train_seconds), 3),
              "per_step_per_run": round(out["per_chunk"] / ctx.chunk / lanes, 6),
              "cpu_per_step_per_run": round(out["cpu_per_chunk"] / ctx.chunk / lanes, 6)}
  ctx.timings[entry, size_name] = measured
  return measured


def projected(measured: dict, budget: float) -> dict:
  """One run of the rung at ``budget``, projected from ``measured``: its steps, its wall
  seconds (compilation and evaluation included) and the CPU seconds of its chunks.
  """
  size = rules.SIZES[measured["size"]]
  steps = protocol.steps_for(measured["params"], budget, size)
  chunks = math.ceil(steps / measured["chunk"])
  seconds = (measured["first_chunk"] + measured["per_chunk"] * (chunks - 1)
             + measured["evaluate"])
  return {"budget": budget, "steps": steps, "seconds": round(seconds, 1),
          "cpu_seconds": round(measured["cpu_per_chunk"] * chunks, 1)}


def load() -> dict:
  """The machine's load and how it was read, for the timings' record."""
  return {"loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()],
          "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}

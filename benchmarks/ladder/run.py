"""Runs the ladder's protocol (``protocol``): its programs, its rate rules, its timings.

A *program* is one entry's rates and seeds at one size and budget, trained as
one vmapped program (``train.train``); its runs are appended to the ledger
(``ledger``) together when it ends, and a run already there is not trained
again, so every driver here resumes where the last stopped. ``run_cpu`` is the
CPU ladder, size by size; ``run_gpu`` the GPU rungs in their declared order of
priority, with a timing of each rung first; both stop cleanly before
``deadline`` (``time.time()``), keeping every program that finished.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import numpy as np

from benchmarks.contest import model
from benchmarks.ladder import entries
from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import train

SIZES = {**protocol.SIZES, "toy": protocol.TOY}


def check_versions() -> None:
  """Refuses optax older than the entries need (``entries.OPTAX_FLOOR``)."""
  import optax
  found = tuple(int(p) for p in optax.__version__.split(".")[:3] if p.isdigit())
  if found < entries.OPTAX_FLOOR:
    floor = ".".join(map(str, entries.OPTAX_FLOOR))
    raise RuntimeError(f"optax {optax.__version__} is older than {floor}, which the ladder's "
                       f"entries need (NorMuon steps 1.5x larger at 0.2.5); install optax>={floor}")


@dataclasses.dataclass
class Context:
  """What every program of one invocation shares."""
  data: dict  # train.device_data of the corpus
  corpus: str  # the corpus file's sha256 (its first 16 digits)
  path: str = ledger.PATH
  mirror: str | None = None  # a second ledger that gets this invocation's new lines ($OUT)
  deadline: float | None = None
  chunk: int = 100
  timings: dict = dataclasses.field(default_factory=dict)  # (entry, size) -> measured
  kind: str = "cpu"

  def lines(self) -> list[dict]:
    return ledger.read(self.path)


def _steps(size_name: str, budget: float) -> int:
  size = SIZES[size_name]
  return protocol.steps_for(model.count(size), budget, size)


def _projected(ctx: Context, lines: list[dict], entry: str, size_name: str, steps: int,
               lanes: int) -> float | None:
  """Seconds a program of ``lanes`` runs of ``steps`` is expected to take: from this
  invocation's timing of the rung where there is one, else from the ledger's ``lines``
  (``_from_ledger``); None where neither has it.
  """
  measured = ctx.timings.get((entry, size_name))
  if measured is None:
    return _from_ledger(lines, entry, size_name, steps, lanes, ctx.kind)
  return measured["per_chunk"] * math.ceil(steps / ctx.chunk) + measured["evaluate"]


def _from_ledger(lines: list[dict], entry: str, size_name: str, steps: int, lanes: int,
                 kind: str) -> float | None:
  """A program's seconds scaled from a finished one at the same size on the same kind of
  machine, in proportion to runs x steps: the entry's own program with the nearest number
  of steps, else the costliest of any entry's with the nearest steps. A program with fewer
  steps carries more compilation and evaluation a step, so it overestimates a longer one:
  the deadline then skips rather than cuts.
  """
  done = [line for line in lines if line["size"] == size_name and line.get("kind") == kind]
  own = [line for line in done if line["entry"] == entry]
  pool = own or done
  if not pool:
    return None
  nearest = min(abs(line["steps"] - steps) for line in pool)
  per_run_step = max(line["seconds"] / (line["lanes"] * line["steps"]) for line in pool
                     if abs(line["steps"] - steps) == nearest)
  return per_run_step * lanes * steps


def _line(ctx, entry, size_name, budget, steps, lane, out, i, lanes) -> dict:
  rate, adam_rate, seed = lane
  return {"entry": entry, "size": size_name, "params": model.count(SIZES[size_name]),
          "budget": budget, "steps": steps, "rate": rate, "adam_rate": adam_rate, "seed": seed,
          "train_bits": float(out["train"][i]), "val_bits": float(out["val"][i]),
          "test_bits": float(out["test"][i]), "seconds": round(float(out["seconds"]), 2),
          "lanes": lanes, "source": ledger.source_digest(entry), "corpus": ctx.corpus,
          "kind": ctx.kind, "chunk": ctx.chunk, "date": time.strftime("%Y-%m-%d"),
          **ledger.machine()}


def run_program(ctx: Context, entry: str, size_name: str, budget: float, rates, seeds,
                adam_rate: float | None) -> list[dict] | None:
  """The runs of ``entry`` at ``rates`` x ``seeds`` (AdamW part at ``adam_rate``; the
  AdamW entry's is its rate), trained where the ledger lacks them; their lines, or
  None where the deadline leaves no time for the program.
  """
  lanes = [(float(r), float(r) if entry == "adamw" else float(adam_rate), int(s))
           for r in rates for s in seeds]
  # Keyed as the ledger keys a line (rates to 6 significant digits), so that a rate off
  # the grid, such as a sensitivity factor's AdamW part, finds its runs once written.
  wanted = {ledger.key({"entry": entry, "size": size_name, "budget": budget, "rate": rate,
                        "adam_rate": adam, "seed": seed}): (rate, adam, seed)
            for rate, adam, seed in lanes}
  lines = ctx.lines()
  held = {ledger.key(line): line for line in lines}
  missing = [lane for k, lane in wanted.items() if k not in held]
  steps = _steps(size_name, budget)
  if missing:
    projected = _projected(ctx, lines, entry, size_name, steps, len(missing))
    if (ctx.deadline is not None and projected is not None
        and time.time() + projected > ctx.deadline):
      print(f"skip {entry} {size_name} {budget}: {projected:.0f} s do not fit", flush=True)
      return None
    try:
      out = train.train(entry, SIZES[size_name], steps, *zip(*missing, strict=True), ctx.data,
                        chunk=ctx.chunk, deadline=ctx.deadline)
    except train.Stopped as stopped:
      print(f"stopped {entry} {size_name} {budget}: {stopped}", flush=True)
      return None
    made = [_line(ctx, entry, size_name, budget, steps, lane, out, i, len(missing))
            for i, lane in enumerate(missing)]
    ledger.append(made, ctx.path)
    if ctx.mirror:
      ledger.append(made, ctx.mirror)
    held.update({ledger.key(line): line for line in made})
    print(f"{entry} {size_name} {budget}: {len(made)} runs, {out['seconds']:.0f} s", flush=True)
  return [held[k] for k in wanted]


def chosen(lines: list[dict], entry: str, size_name: str, budget: float, seeds=protocol.SEEDS,
           adam_rate: float | None = None) -> float | None:
  """The rate of ``entry`` with the lowest mean validation bits over ``seeds``, among the
  rates every seed has run (at the AdamW-part rate ``adam_rate``, where given).
  """
  held = None if adam_rate is None or entry == "adamw" else ("adam_rate", adam_rate)
  means = _mean_val_by(lines, entry, size_name, budget, seeds, "rate", held)
  return min(means, key=means.__getitem__) if means else None


def _mean_val_by(lines: list[dict], entry: str, size_name: str, budget: float, seeds,
                 field: str, held: tuple[str, float] | None) -> dict[float, float]:
  """``{value of field: mean validation bits}`` of ``entry``'s runs at one rung, where the
  field ``held[0]`` is ``held[1]`` (if given), over the values every seed has run. A value
  is as the ledger first wrote it; values equal to its 6 digits are one.
  """
  by_value: dict[float, dict[int, float]] = {}
  first: dict[float, float] = {}
  for line in lines:
    if ((line["entry"], line["size"], float(line["budget"])) != (entry, size_name, budget)
        or (held is not None and not math.isclose(line[held[0]], held[1], rel_tol=1e-6))):
      continue
    value = first.setdefault(ledger.rounded(line[field]), line[field])
    by_value.setdefault(value, {})[line["seed"]] = line["val_bits"]
  return {value: float(np.mean([v[s] for s in seeds])) for value, v in by_value.items()
          if all(s in v for s in seeds)}


def grown(rates, best: float, max_rates: int) -> tuple[float, ...]:
  """``rates`` grown by one half decade where ``best`` lies on an edge and fewer than
  ``max_rates`` are held; ``rates`` otherwise.
  """
  rates = sorted(rates)
  grid = list(protocol.RATE_GRID)
  if len(rates) >= max_rates:
    return tuple(rates)
  if math.isclose(best, rates[0], rel_tol=1e-6) and grid.index(rates[0]) > 0:
    return (grid[grid.index(rates[0]) - 1], *rates)
  if math.isclose(best, rates[-1], rel_tol=1e-6) and grid.index(rates[-1]) < len(grid) - 1:
    return (*rates, grid[grid.index(rates[-1]) + 1])
  return tuple(rates)


def tune(ctx: Context, entry: str, size_name: str, budget: float, centre: float,
         max_rates: int, adam_rate: float | None, seeds=protocol.SEEDS) -> float | None:
  """The rate rule at one rung: ``centre``'s window, grown at an edge; the chosen rate."""
  rates = protocol.window(centre)
  while True:
    if run_program(ctx, entry, size_name, budget, rates, seeds, adam_rate) is None:
      return None
    best = chosen(ctx.lines(), entry, size_name, budget, seeds, adam_rate)
    more = grown(rates, best, max_rates)
    if more == tuple(sorted(rates)):
      return best
    rates = more


def run_cpu_size(ctx: Context, size_name: str, previous: str | None,
                 seeds=protocol.SEEDS) -> bool:
  """Every CPU rung of one size (``previous``: the next smaller size, whose chosen rates
  transfer; None at the smallest); False where the deadline stopped it.
  """
  max_rates = protocol.MAX_RATES_SMALLEST if previous is None else protocol.MAX_RATES_TRANSFERRED
  tuned = sorted(set(protocol.BUDGETS) | set(protocol.REFERENCE_BUDGETS)
                 - set(protocol.UNTUNED_BUDGETS))
  for budget in tuned:
    names = protocol.ENTRIES if budget in protocol.BUDGETS else protocol.REFERENCES
    adam = None
    for entry in names:
      centre = (protocol.CONTEST_RATES[entry] if previous is None
                else _transferred(ctx.lines(), entry, previous, budget, seeds))
      if centre is None:
        return False
      best = tune(ctx, entry, size_name, budget, centre, max_rates, adam, seeds)
      if best is None:
        return False
      adam = best if entry == "adamw" else adam
  return (_untuned_and_sensitivity(ctx, size_name, seeds)
          and _adamw_part_shares(ctx, size_name, seeds)
          and _own_best_windows(ctx, size_name, seeds))


def _transferred(lines, entry: str, previous: str, budget: float, seeds) -> float | None:
  """The rate ``entry`` chose at the size ``previous`` (its AdamW part at AdamW's choice)."""
  adam = chosen(lines, "adamw", previous, budget, seeds)
  return chosen(lines, entry, previous, budget, seeds, None if entry == "adamw" else adam)


def _untuned_and_sensitivity(ctx: Context, size_name: str, seeds) -> bool:
  lines = ctx.lines()
  top = max(protocol.BUDGETS)
  adam = chosen(lines, "adamw", size_name, top, seeds)
  for budget in protocol.UNTUNED_BUDGETS:
    for entry in protocol.REFERENCES:
      rate = chosen(lines, entry, size_name, top, seeds, adam)
      if run_program(ctx, entry, size_name, budget, [rate], seeds, adam) is None:
        return False
  if size_name not in protocol.SENSITIVITY_SIZES:
    return True
  for factor in protocol.SENSITIVITY_FACTORS:
    for entry in protocol.MUON_FAMILY:
      rate = chosen(lines, entry, size_name, top, seeds, adam)
      if run_program(ctx, entry, size_name, top, [rate], seeds, adam * factor) is None:
        return False
  return True


def adamw_part_means(lines: list[dict], entry: str, size_name: str, budget: float, rate: float,
                     seeds=protocol.SEEDS) -> dict[float, float]:
  """``{AdamW part: mean validation bits}`` of ``entry`` at ``rate`` at one rung, over the
  parts every seed has run (a part as the ledger first wrote it; parts equal to the
  ledger's 6 digits are one part).
  """
  return _mean_val_by(lines, entry, size_name, budget, seeds, "adam_rate", ("rate", rate))


def adamw_part_beyond(val_by_part: dict[float, float]) -> float | None:
  """PROTOCOL.md's addendum 4: the AdamW part a half decade beyond the edge of
  ``val_by_part`` (mean validation bits by part) where its lowest lies, while fewer than
  ``protocol.OWN_BEST_MAX_PARTS`` have run; None where the lowest is inside, or at the cap.
  """
  parts = sorted(val_by_part)
  best = min(parts, key=val_by_part.__getitem__)
  if len(parts) >= protocol.OWN_BEST_MAX_PARTS or parts[0] < best < parts[-1]:
    return None
  return best * math.sqrt(10.0) if best == parts[-1] else best / math.sqrt(10.0)


def _own_best_windows(ctx: Context, size_name: str, seeds) -> bool:
  """At ``protocol.OWN_BEST_SIZE``, each Muon-family entry's AdamW parts grown at the edge
  where its own best lies (``adamw_part_beyond``), after the sensitivity check's three.
  """
  if size_name != protocol.OWN_BEST_SIZE:
    return True
  top = max(protocol.BUDGETS)
  for entry in protocol.MUON_FAMILY:
    while True:
      lines = ctx.lines()
      rate = chosen(lines, entry, size_name, top, seeds, chosen(lines, "adamw", size_name, top,
                                                                 seeds))
      beyond = adamw_part_beyond(adamw_part_means(lines, entry, size_name, top, rate, seeds))
      if beyond is None:
        break
      if run_program(ctx, entry, size_name, top, [rate], seeds, beyond) is None:
        return False
  return True


def adamw_part_at_share(share: float, rate: float, adam: float) -> float:
  """The AdamW-part rate that stands for ``share`` of the matrix rate ``rate``: AdamW's own
  rate ``adam`` times the power of sqrt(10) nearest to ``share * rate / adam``, so that a
  share at AdamW's own rate is the tuned rung's runs (PROTOCOL.md, addendum 2).
  """
  return adam * math.sqrt(10.0) ** round(2 * math.log10(share * rate / adam))


def _adamw_part_shares(ctx: Context, size_name: str, seeds) -> bool:
  """``protocol.SHARE_RULE``'s runs at one size: VSGD-Muon at its chosen rate, the top
  budget, with the AdamW part at each of ``protocol.ADAMW_PART_SHARES`` of that rate.
  """
  lines = ctx.lines()
  top = max(protocol.BUDGETS)
  adam = chosen(lines, "adamw", size_name, top, seeds)
  rate = chosen(lines, "vsgd_muon", size_name, top, seeds, adam)
  for share in protocol.ADAMW_PART_SHARES:
    if run_program(ctx, "vsgd_muon", size_name, top, [rate], seeds,
                   adamw_part_at_share(share, rate, adam)) is None:
      return False
  return True


def run_cpu(ctx: Context, sizes=None, seeds=protocol.SEEDS) -> bool:
  """The CPU ladder at ``sizes`` (default ``protocol.CPU_SIZES``), smallest first."""
  sizes = list(sizes or protocol.CPU_SIZES)
  if not sizes:
    raise ValueError("sizes: protocol.CPU_SIZES is not fixed yet; fix it from the timings")
  sizes.sort(key=lambda name: model.count(SIZES[name]))
  for i, name in enumerate(sizes):
    if not run_cpu_size(ctx, name, sizes[i - 1] if i else None, seeds):
      return False
  return True


def write_json(path: str, payload: dict) -> None:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path + ".tmp", "w") as f:
    json.dump(payload, f, indent=1, sort_keys=True)
  os.replace(path + ".tmp", path)

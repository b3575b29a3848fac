"""Runs the ladder's protocol (``protocol``): its programs, its rate rules, its timings.

A *program* is one entry's rates and seeds at one size and budget, trained as
one vmapped program (``lm.train.train_chunks``) by the one runner
(``benchmarks.study_runner``): its runs are appended to the ledger (``ledger``)
together when it ends, and a run already there is not trained again, so every
driver here resumes where the last stopped. ``run_cpu`` is the
CPU ladder, size by size; ``run_gpu`` the GPU rungs in their declared order of
priority, with a timing of each rung first; ``run_momentum`` the momentum study
(``protocol.MOMENTUM_RUNGS``) within its budget of hours, then ``run_variants`` its
variants (addendum 6). The rules they follow are ``rules``'. All stop cleanly before
``deadline`` (``time.time()``), keeping every program that finished.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import time
from collections.abc import Callable

from benchmarks import ledger as ledgers
from benchmarks import study_runner
from benchmarks.ladder import entries
from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import readout
from benchmarks.ladder import rules
from benchmarks.ladder import variants
from benchmarks.lm import model
from benchmarks.lm import train


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
  readouts: str = ledger.READOUTS  # the momentum study's read-outs (a ledger of their own)
  # Seconds a new program may still take (a study's budget); None: no limit but the deadline.
  allowance: Callable[[], float] | None = None

  def lines(self) -> list[dict]:
    return ledgers.read(self.path)

  def runner(self) -> study_runner.Runner:
    """The runner of the ladder's programs into its ledger (and the mirror)."""
    return study_runner.Runner(self.path, ledger.runs_of, self.deadline, self.allowance,
                               self.mirror)

  def readout_runner(self) -> study_runner.Runner:
    """The runner of the momentum study's read-outs into their ledger (and the mirror's)."""
    mirror = (None if self.mirror is None else
              os.path.join(os.path.dirname(self.mirror), os.path.basename(ledger.READOUTS)))
    return study_runner.Runner(self.readouts, ledger.runs_of, self.deadline, self.allowance,
                               mirror)


def _steps(size_name: str, budget: float) -> int:
  size = rules.SIZES[size_name]
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


def _lines(ctx: Context, entry: str, size_name: str, budget: float, steps: int, lanes: list,
           out: dict) -> list[dict]:
  """The ledger lines of a program's ``lanes`` (rate, AdamW part, seed) and its output."""
  common_to_all = {"entry": entry, "size": size_name,
                   "params": model.count(rules.SIZES[size_name]), "budget": budget,
                   "steps": steps, "seconds": round(float(out["seconds"]), 2), "lanes": len(lanes),
                   "source": ledger.source_digest(entry), "corpus": ctx.corpus,
                   "kind": ctx.kind, "chunk": ctx.chunk,
                   "date": time.strftime("%Y-%m-%d"), **ledgers.machine()}
  return [{**common_to_all, "rate": rate, "adam_rate": adam_rate, "seed": seed,
           "train_bits": float(out["train"][i]), "val_bits": float(out["val"][i]),
           "test_bits": float(out["test"][i])}
          for i, (rate, adam_rate, seed) in enumerate(lanes)]


def run_program(ctx: Context, entry: str, size_name: str, budget: float, rates, seeds,
                adam_rate: float | None) -> list[dict] | None:
  """The runs of ``entry`` at ``rates`` x ``seeds`` (AdamW part at ``adam_rate``; the
  AdamW entry's is its rate), trained where the ledger lacks them; their lines, or
  None where the deadline or the budget leaves no time for the program.
  """
  lanes = [(float(r), float(r) if entry == "adamw" else float(adam_rate), int(s))
           for r in rates for s in seeds]
  # Keyed as the ledger keys a line (rates to 6 significant digits), so that a rate off
  # the grid, such as a sensitivity factor's AdamW part, finds its runs once written.
  wanted = {ledger.key({"entry": entry, "size": size_name, "budget": budget, "rate": rate,
                        "adam_rate": adam, "seed": seed}): (rate, adam, seed)
            for rate, adam, seed in lanes}
  steps = _steps(size_name, budget)
  return ctx.runner().run(study_runner.Program(
      lanes=wanted,
      train=lambda missing: train.train_chunks(
          entries.builder(entry), rules.SIZES[size_name], steps, *zip(*missing, strict=True),
          ctx.data, chunk=ctx.chunk, deadline=ctx.deadline),
      lines=lambda missing, out: _lines(ctx, entry, size_name, budget, steps, missing, out),
      what=f"{entry} {size_name} {budget}",
      seconds=lambda lines, n: _projected(ctx, lines, entry, size_name, steps, n)))


def tune(ctx: Context, entry: str, size_name: str, budget: float, centre: float,
         max_rates: int, adam_rate: float | None, seeds=protocol.SEEDS) -> float | None:
  """The rate rule at one rung: ``centre``'s window, grown at an edge; the chosen rate."""
  rates = protocol.window(centre)
  while True:
    if run_program(ctx, entry, size_name, budget, rates, seeds, adam_rate) is None:
      return None
    best = rules.chosen(ctx.lines(), entry, size_name, budget, seeds, adam_rate)
    more = rules.grown(rates, best, max_rates)
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
                else rules.transferred(ctx.lines(), entry, previous, budget, seeds))
      if centre is None:
        return False
      best = tune(ctx, entry, size_name, budget, centre, max_rates, adam, seeds)
      if best is None:
        return False
      adam = best if entry == "adamw" else adam
  return (_untuned_and_sensitivity(ctx, size_name, seeds)
          and _adamw_part_shares(ctx, size_name, seeds)
          and _own_best_windows(ctx, size_name, seeds))


def _untuned_and_sensitivity(ctx: Context, size_name: str, seeds) -> bool:
  lines = ctx.lines()
  top = max(protocol.BUDGETS)
  adam = rules.chosen(lines, "adamw", size_name, top, seeds)
  for budget in protocol.UNTUNED_BUDGETS:
    for entry in protocol.REFERENCES:
      rate = rules.chosen(lines, entry, size_name, top, seeds, adam)
      if run_program(ctx, entry, size_name, budget, [rate], seeds, adam) is None:
        return False
  if size_name not in protocol.SENSITIVITY_SIZES:
    return True
  for factor in protocol.SENSITIVITY_FACTORS:
    for entry in protocol.MUON_FAMILY:
      rate = rules.chosen(lines, entry, size_name, top, seeds, adam)
      if run_program(ctx, entry, size_name, top, [rate], seeds, adam * factor) is None:
        return False
  return True


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
      adam = rules.chosen(lines, "adamw", size_name, top, seeds)
      rate = rules.chosen(lines, entry, size_name, top, seeds, adam)
      beyond = rules.adamw_part_beyond(
          rules.adamw_part_means(lines, entry, size_name, top, rate, seeds))
      if beyond is None:
        break
      if run_program(ctx, entry, size_name, top, [rate], seeds, beyond) is None:
        return False
  return True


def _adamw_part_shares(ctx: Context, size_name: str, seeds) -> bool:
  """``protocol.SHARE_RULE``'s runs at one size: VSGD-Muon at its chosen rate, the top
  budget, with the AdamW part at each of ``protocol.ADAMW_PART_SHARES`` of that rate.
  """
  lines = ctx.lines()
  top = max(protocol.BUDGETS)
  adam = rules.chosen(lines, "adamw", size_name, top, seeds)
  rate = rules.chosen(lines, "vsgd_muon", size_name, top, seeds, adam)
  for share in protocol.ADAMW_PART_SHARES:
    if run_program(ctx, "vsgd_muon", size_name, top, [rate], seeds,
                   rules.adamw_part_at_share(share, rate, adam)) is None:
      return False
  return True


def run_cpu(ctx: Context, sizes=None, seeds=protocol.SEEDS) -> bool:
  """The CPU ladder at ``sizes`` (default ``protocol.CPU_SIZES``), smallest first."""
  sizes = list(sizes or protocol.CPU_SIZES)
  if not sizes:
    raise ValueError("sizes: protocol.CPU_SIZES is not fixed yet; fix it from the timings")
  sizes.sort(key=lambda name: model.count(rules.SIZES[name]))
  for i, name in enumerate(sizes):
    if not run_cpu_size(ctx, name, sizes[i - 1] if i else None, seeds):
      return False
  return True


# --- The momentum study (protocol.MOMENTUM_*) ----------------------------------------------
def study_allowance(path: str, readouts: str) -> float:
  """Seconds the study may still spend: its budget less ``study_hours`` so far (the ledger
  at ``path``, the read-outs at ``readouts``).
  """
  used = rules.study_hours(ledgers.read(path), ledgers.read(readouts))
  return 3600.0 * (protocol.MOMENTUM_BUDGET_HOURS - used)


def _readout_lines(ctx: Context, runs: list[dict], size_name: str, budget: float, steps: int,
                   lanes: list, out: dict) -> list[dict]:
  """The read-out program's lines: ``_lines``', its chunk, its read-out, and whether its
  bits are those of the line of the same key in ``runs`` (runs.jsonl's), exactly.
  """
  held = {ledger.key(line): line for line in runs}
  beta1 = out["effective_beta1"]
  made = _lines(ctx, readout.READOUT_ENTRY, size_name, budget, steps, lanes, out)
  for i, line in enumerate(made):
    line["chunk"] = readout.readout_chunk(steps)
    line["effective_beta1"] = {"step": list(beta1["step"]),
                               **{q: [float(v) for v in beta1[q][i]]
                                  for q in ("q10", "median", "q90")}}
    ran = held.get(ledger.key(line))
    line["reproduces"] = ran is not None and (ran["val_bits"], ran["test_bits"]) == (
        line["val_bits"], line["test_bits"])
  return made


def run_readout(ctx: Context, size_name: str, budget: float,
                seeds=protocol.SEEDS) -> list[dict] | None:
  """A rung's read-out: VSGD-Muon's runs at its chosen rate, the AdamW part at AdamW's (the
  lanes runs.jsonl holds), trained again with its effective beta1 read; their lines in
  ``ctx.readouts`` (trained where missing), or None where the rung has no choice yet or the
  deadline or the budget stopped it.
  """
  lines = ctx.lines()
  adam = rules.chosen(lines, "adamw", size_name, budget, seeds)
  rate = (None if adam is None
          else rules.chosen(lines, readout.READOUT_ENTRY, size_name, budget, seeds, adam))
  if rate is None:
    print(f"no read-out at {size_name} {budget}: the rung has no choice yet", flush=True)
    return None
  keys = {ledger.key({"entry": readout.READOUT_ENTRY, "size": size_name, "budget": budget,
                      "rate": rate, "adam_rate": adam, "seed": seed}): (rate, adam, seed)
          for seed in seeds}
  steps = _steps(size_name, budget)
  return ctx.readout_runner().run(study_runner.Program(
      lanes=keys,
      train=lambda missing: readout.train_with_readout(
          rules.SIZES[size_name], steps, *zip(*missing, strict=True), ctx.data,
          deadline=ctx.deadline),
      lines=lambda missing, out: _readout_lines(ctx, lines, size_name, budget, steps, missing,
                                                out),
      what=f"the read-out {size_name} {budget}",
      seconds=lambda readouts, n: _projected(ctx, lines + readouts, readout.READOUT_ENTRY,
                                             size_name, steps, n)))


def _momentum_rung(ctx: Context, size_name: str, budget: float, seeds) -> bool:
  """One rung of the study: the read-out, then each beta's rate rule, then any growth."""
  if run_readout(ctx, size_name, budget, seeds) is None:
    return False
  adam = rules.chosen(ctx.lines(), "adamw", size_name, budget, seeds)
  done: set[float] = set()
  while todo := [b for b in rules.momentum_window(ctx.lines(), size_name, budget, seeds)
                 if b not in done]:
    for beta in todo:
      centre = rules.momentum_centre(ctx.lines(), beta, size_name, budget, seeds)
      if centre is None:
        print(f"no centre for beta {beta:g} at {size_name} {budget}", flush=True)
        return False
      if tune(ctx, protocol.momentum_entry(beta), size_name, budget, centre,
              rules.momentum_max_rates(size_name), adam, seeds) is None:
        return False
      done.add(beta)
  return True


def _adamw_extension(ctx: Context, size_name: str, seeds) -> bool:
  """AdamW's ``protocol.ADAMW_EXTENSION`` budgets at ``size_name``, at the rate it chose at
  ``protocol.ADAMW_EXTENSION_FROM``, untuned.
  """
  for name, budget in protocol.ADAMW_EXTENSION:
    if name != size_name:
      continue
    rate = rules.chosen(ctx.lines(), "adamw", name, protocol.ADAMW_EXTENSION_FROM, seeds)
    if rate is None or run_program(ctx, "adamw", name, budget, [rate], seeds, None) is None:
      return False
  return True


def run_momentum(ctx: Context, seeds=protocol.SEEDS) -> bool:
  """The momentum study, resumable: at each rung of ``protocol.MOMENTUM_RUNGS`` the read-out,
  each beta's rate rule and any growth beta; AdamW's extension right after the rung whose
  rate it takes. Each program starts only where the study's hours (``study_hours``) and its
  projection stay within ``protocol.MOMENTUM_BUDGET_HOURS`` and ``ctx.deadline``; False
  where either stopped it, keeping every program that finished.
  """
  study = dataclasses.replace(ctx, allowance=functools.partial(study_allowance, ctx.path,
                                                                     ctx.readouts))
  for size_name, budget in protocol.MOMENTUM_RUNGS:
    if not _momentum_rung(study, size_name, budget, seeds):
      return False
    if budget == protocol.ADAMW_EXTENSION_FROM and not _adamw_extension(study, size_name, seeds):
      return False
  return True


def run_variant(ctx: Context, entry: str, seeds=protocol.SEEDS) -> bool:
  """One variant at every rung of ``protocol.VARIANT_RUNGS``, resumable, up to the first rung
  where it is behind the momentum-tuned Muon; False where the deadline, the budget or a
  missing choice stopped it.
  """
  for size_name, budget in protocol.VARIANT_RUNGS:
    lines = ctx.lines()
    adam = rules.chosen(lines, "adamw", size_name, budget, seeds)
    start = variants.centre(lines, entry, size_name, budget, seeds)
    if adam is None or start is None:
      print(f"no window for {entry} at {size_name} {budget}: a choice it needs is missing",
            flush=True)
      return False
    if tune(ctx, entry, size_name, budget, start, rules.momentum_max_rates(size_name), adam,
            seeds) is None:
      return False
    found = variants.row(ctx.lines(), {}, entry, size_name, budget, seeds)
    if found is None or found["versus_tuned"] is None:
      print(f"{entry} at {size_name} {budget}: no momentum-tuned Muon to compare", flush=True)
      return False
    if variants.behind(found):
      print(f"{entry} is behind the momentum-tuned Muon at {size_name} {budget}: its later "
            "rungs do not run (addendum 6's early stop)", flush=True)
      return True
  return True


def run_variants(ctx: Context, seeds=protocol.SEEDS) -> bool:
  """Every variant of ``protocol.VARIANTS``, in turn, within the momentum study's budget."""
  study = dataclasses.replace(ctx, allowance=functools.partial(study_allowance, ctx.path,
                                                              ctx.readouts))
  return all(run_variant(study, entry, seeds) for entry in protocol.VARIANTS)

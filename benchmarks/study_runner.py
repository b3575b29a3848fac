"""The one runner of every study's training: a study declares its programs, this trains them.

A *program* is one training call of a study: the runs it must hold, each keyed as
the study's ledger keys a run, the trainer that trains any of them in one call,
and how the call's output becomes ledger lines. ``Runner.run`` trains the runs
the ledger lacks (none, where it holds them all), appends their lines in one
synced write when the call ends (``benchmarks.ledger.append``), and gives back
every run the program asked for, in its order. So every study resumes where it
stopped, the same way: the contest and the time-to-result workloads (through
``benchmarks.ledger.Ledger``), the ladder's programs and its momentum read-outs.

What a study decides stays the study's (its protocol: the grid, the rate rule,
the verdicts); what every study does alike is here: resuming, the deadline, the
budget, the mirror that copies a lease's new lines out.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections.abc import Callable
from collections.abc import Hashable
from collections.abc import Iterable
from collections.abc import Mapping

import numpy as np

from benchmarks import common
from benchmarks import ledger as ledgers


class Stopped(RuntimeError):
  """A trainer stopped before its end (a deadline); it keeps nothing."""


@dataclasses.dataclass(frozen=True)
class Program:
  """One training call of a study.

  Attributes:
    lanes: the runs the program must hold, ``key -> lane``: the key as the runner's
      ledger keys a run, the lane what ``train`` needs to train that run.
    train: trains a list of lanes in one call; raises ``Stopped`` where a deadline
      comes first.
    lines: the ledger lines of the lanes trained and the call's output.
    what: how the log names the program; empty for a study that logs its own way.
    seconds: the seconds a call of ``n`` lanes is projected to take, given the
      ledger's lines (None: unknown, and so never declined).
  """
  lanes: Mapping[Hashable, tuple]
  train: Callable[[list[tuple]], dict]
  lines: Callable[[list[tuple], dict], list[dict]]
  what: str = ""
  seconds: Callable[[list[dict], int], float | None] = lambda lines, n: None


@dataclasses.dataclass
class Runner:
  """Trains programs into the ledger at ``path``.

  Attributes:
    path: the ledger (JSON lines, ``benchmarks.ledger``'s format).
    runs_of: the runs one ledger line holds, as ``(key, run)`` pairs (a line of
      several learning rates holds several runs; a header line none).
    deadline: ``time.time()`` before which every program must end; a program
      projected past it is declined.
    allowance: seconds the study's budget still allows, asked before each program;
      None: no budget but the deadline.
    mirror: a second ledger that gets every new line too (a lease's ``$OUT``).
    sort_keys: whether lines are written with their keys sorted (False: in their order,
      for lines read back into a result file as they were made).
  """
  path: str
  runs_of: Callable[[dict], Iterable[tuple[Hashable, object]]]
  deadline: float | None = None
  allowance: Callable[[], float] | None = None
  mirror: str | None = None
  sort_keys: bool = True
  _lines: list[dict] | None = dataclasses.field(default=None, init=False, repr=False)

  def lines(self) -> list[dict]:
    """The ledger's lines: read once, then kept with every line this runner appends (a
    runner is made for one study's calls, and is its ledger's one writer meanwhile).
    """
    if self._lines is None:
      self._lines = ledgers.read(self.path)
    return self._lines

  def held(self, lines: Iterable[dict]) -> dict:
    """``{key: run}`` of every run ``lines`` hold."""
    return {key: run for line in lines for key, run in self.runs_of(line)}

  def run(self, program: Program) -> list | None:
    """Every run of ``program``, in its order, trained in one call where the ledger lacks
    them; None where the deadline or the budget declined or stopped the call.
    """
    lines = self.lines()
    held = self.held(lines)
    missing = [lane for key, lane in program.lanes.items() if key not in held]
    if missing:
      if self._declined(program.what, program.seconds(lines, len(missing))):
        return None
      try:
        out = program.train(missing)
      except Stopped as stopped:
        print(f"stopped {program.what}: {stopped}", flush=True)
        return None
      made = program.lines(missing, out)
      ledgers.append(made, self.path, self.sort_keys)
      if self.mirror:
        ledgers.append(made, self.mirror, self.sort_keys)
      lines.extend(made)
      held.update(self.held(made))
      if program.what:
        print(f"{program.what}: {len(made)} runs, {out['seconds']:.0f} s", flush=True)
    return [held[key] for key in program.lanes]

  def _declined(self, what: str, projected: float | None) -> bool:
    """Whether a program projected to take ``projected`` seconds must not start: it would
    end past the deadline, or take more than the budget allows.
    """
    if projected is None:
      return False
    if self.deadline is not None and time.time() + projected > self.deadline:
      print(f"skip {what}: {projected:.0f} s do not fit", flush=True)
      return True
    left = None if self.allowance is None else self.allowance()
    if left is not None and projected > left:
      print(f"stop before {what}: {projected:.0f} s projected, {max(0.0, left):.0f} s of the "
            f"budget left", flush=True)
      return True
    return False


def train_rates(book: ledgers.Ledger, entry: str, runs, learning_rates, seeds,
                together: bool = False) -> dict:
  """``runs(lrs, seeds)`` on the (rate, seed) pairs of ``entry`` that ``book`` lacks, each
  call's runs kept as it finishes; then every pair's curves, in order (the contest's and
  the time-to-result workloads' ledgers). One seed a call, unless ``together``: one call
  for all, where the trainer pads every call to the same lanes anyway (a cheap workload,
  whose call takes seconds).
  """
  pairs = list(zip((float(lr) for lr in learning_rates), (int(s) for s in seeds), strict=True))
  missing = list(dict.fromkeys(p for p in pairs if book.held(entry, p[1], p[0]) is None))
  groups = [missing] if together else [[p for p in missing if p[1] == seed]
                                       for seed in dict.fromkeys(s for _, s in missing)]
  runner = Runner(book.path, ledgers.runs_of)
  for group in filter(None, groups):
    lanes = {(entry, seed, lr): (lr, seed) for lr, seed in group}
    got = runner.run(Program(lanes=lanes,
                             train=lambda lanes: runs(*map(list, zip(*lanes, strict=True))),
                             lines=functools.partial(book.lines_of, entry)))
    book.keep(entry, dict(zip(lanes, got or [], strict=True)))
  got = [book.held(entry, s, lr) for lr, s in pairs]
  return {k: np.asarray([g[k] for g in got], np.float64)  # type: ignore[index]
          for k in ledgers.RUN_FIELDS}


def run_parts(path: str, parts: Mapping[str, Callable[[], object]], settings: dict) -> dict:
  """Each of a study's ``parts`` (name -> the call that measures it) measured where the
  ledger at ``path`` lacks it under ``settings``, and kept as it finishes: the runs of a
  study whose run is a whole measurement (the cost's sections, the noise scale's runs).
  ``settings`` (with the digest of the code, and the machine where a time is measured)
  are part of each line's key, so that a part of other settings is measured again.

  Returns ``{name: {"output", "seconds", "load", "machine"}}``: the call's output (in
  its order of keys, fresh or resumed), its seconds, the machine's load before and
  after it (1, 5 and 15-minute means; the machine may be shared) and the machine.
  """
  runner = Runner(path, _part_of, sort_keys=False)
  held = json.dumps(settings, sort_keys=True)
  out = {}
  for name, measure in parts.items():
    got = runner.run(Program(
        lanes={(name, held): (name,)}, train=lambda lanes, measure=measure: _measured(measure),
        lines=lambda lanes, measured, name=name: [
            {"part": name, "settings": settings, **measured}]))
    out[name] = got[0]  # type: ignore[index]
  return out


def _measured(measure: Callable[[], object]) -> dict:
  load, started = os.getloadavg(), time.perf_counter()
  output = measure()
  return {"output": output, "seconds": time.perf_counter() - started,
          "load": {"start": load, "end": os.getloadavg()}, "machine": common.machine()}


def _part_of(line: dict) -> list[tuple[tuple, dict]]:
  return [((line["part"], json.dumps(line["settings"], sort_keys=True)),
           {k: line[k] for k in ("output", "seconds", "load", "machine")})]

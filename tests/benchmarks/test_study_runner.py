"""The one runner: a program trains what its ledger lacks, once; a deadline, a budget or a
stopped trainer keeps every line written before it and writes none of its own; a study's
parts resume one by one, as a fresh run gives them.
"""

import json
import time

import pytest

from benchmarks import ledger as ledgers
from benchmarks import study_runner


def _runs_of(line):
  return [((line["name"], line["seed"]), line)]


class Trainer:
  """A trainer whose output is a function of its lanes, counting its calls."""

  def __init__(self, error=None):
    self.calls, self.error = [], error

  def __call__(self, lanes):
    self.calls.append(list(lanes))
    if self.error is not None:
      raise self.error
    return {"value": [10 * seed + 1 for _, seed in lanes], "seconds": 2.0}


def _program(trainer, seeds, seconds=lambda lines, n: None):
  return study_runner.Program(
      lanes={("a", seed): ("a", seed) for seed in seeds}, train=trainer,
      lines=lambda lanes, out: [{"name": name, "seed": seed, "value": value}
                                for (name, seed), value in zip(lanes, out["value"], strict=True)],
      what="a", seconds=seconds)


def test_a_program_trains_only_the_runs_its_ledger_lacks_in_one_call(tmp_path):
  path, mirror = str(tmp_path / "runs.jsonl"), str(tmp_path / "out" / "runs.jsonl")
  runner = study_runner.Runner(path, _runs_of, mirror=mirror)
  trainer = Trainer()
  assert [line["value"] for line in runner.run(_program(trainer, [0, 1]))] == [1, 11]
  got = runner.run(_program(trainer, [2, 1, 0]))
  assert [line["value"] for line in got] == [21, 11, 1]  # in the program's order
  assert trainer.calls == [[("a", 0), ("a", 1)], [("a", 2)]]
  assert ledgers.read(path) == ledgers.read(mirror) and len(ledgers.read(path)) == 3
  assert runner.lines() == ledgers.read(path)  # read once, kept with what it appended
  seen = []
  runner.run(_program(trainer, [3], seconds=lambda lines, n: seen.append((len(lines), n))))
  assert seen == [(3, 1)]  # the projection is given the ledger's lines as the runner holds them
  assert runner.run(_program(trainer, [0, 2])) == [got[2], got[0]]
  assert len(trainer.calls) == 3  # held, so not trained again


def test_a_program_past_the_deadline_or_the_budget_is_declined_and_writes_nothing(tmp_path):
  path = str(tmp_path / "runs.jsonl")
  trainer = Trainer()
  late = study_runner.Runner(path, _runs_of, deadline=time.time() + 60)
  assert late.run(_program(trainer, [0], seconds=lambda lines, n: 120.0 * n)) is None
  poor = study_runner.Runner(path, _runs_of, allowance=lambda: 100.0)
  assert poor.run(_program(trainer, [0, 1], seconds=lambda lines, n: 60.0 * n)) is None
  assert trainer.calls == [] and ledgers.read(path) == []
  # Within both, and where the time is unknown, it runs.
  both = study_runner.Runner(path, _runs_of, deadline=time.time() + 600, allowance=lambda: 100.0)
  assert both.run(_program(trainer, [0], seconds=lambda lines, n: 60.0 * n)) is not None
  assert both.run(_program(trainer, [1])) is not None
  assert len(ledgers.read(path)) == 2


def test_a_stopped_trainer_keeps_the_earlier_programs_and_writes_none_of_its_own(tmp_path):
  path = str(tmp_path / "runs.jsonl")
  runner = study_runner.Runner(path, _runs_of)
  runner.run(_program(Trainer(), [0]))
  stopped = Trainer(study_runner.Stopped("the deadline is near"))
  assert runner.run(_program(stopped, [0, 1])) is None
  assert stopped.calls == [[("a", 1)]]
  assert [line["seed"] for line in ledgers.read(path)] == [0]
  with pytest.raises(ZeroDivisionError):  # any other failure is the operator's to see
    runner.run(_program(Trainer(ZeroDivisionError()), [1]))
  assert [line["seed"] for line in ledgers.read(path)] == [0]


def test_a_studys_parts_resume_one_by_one_as_a_fresh_run_gives_them(tmp_path):
  path = str(tmp_path / "runs" / "study.jsonl")
  calls = []

  def part(name, fail=False):
    def measure():
      calls.append(name)
      if fail:
        raise KeyboardInterrupt  # the operator stops the study
      return {"zeta": 1.5, "alpha": [name, float("inf")]}  # keys not in sorted order
    return measure

  settings = {"quick": True, "source": "code-a"}
  with pytest.raises(KeyboardInterrupt):
    study_runner.run_parts(path, {"one": part("one"), "two": part("two", fail=True)}, settings)
  fresh = study_runner.run_parts(str(tmp_path / "other.jsonl"),
                                 {"one": part("one"), "two": part("two")}, settings)
  calls.clear()
  resumed = study_runner.run_parts(path, {"one": part("one"), "two": part("two")}, settings)
  assert calls == ["two"]  # "one" was kept before the interruption
  assert json.dumps({k: v["output"] for k, v in resumed.items()}) == json.dumps(
      {k: v["output"] for k, v in fresh.items()})
  assert list(resumed["one"]["output"]) == ["zeta", "alpha"]
  assert resumed["one"]["seconds"] >= 0 and len(resumed["one"]["load"]["start"]) == 3
  assert resumed["one"]["machine"]["platform"] == "cpu"
  # Another code's digest (or any other setting) is another part: measured again.
  calls.clear()
  study_runner.run_parts(path, {"one": part("one")}, {**settings, "source": "code-b"})
  assert calls == ["one"]

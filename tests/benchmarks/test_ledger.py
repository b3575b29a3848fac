"""The protocol's ledger: an interrupted protocol resumes where it stopped, with
the result an uninterrupted one writes, and an operator's mistakes are refused.
"""

import json
import os

import numpy as np
import pytest

from benchmarks import ledger
from benchmarks import study_runner
from benchmarks.time_to_result import cli
from benchmarks.time_to_result import protocol
from benchmarks.time_to_result import trainer

SETTINGS = {"workload": "logreg", "steps": 8, "schedule": "warmup_cosine"}
CODE = "code-a"  # the digest of the training code, given here


class FakeRuns:
  """A runner whose curves are a function of (rate, seed), counting its calls."""

  def __init__(self):
    self.calls = []

  def __call__(self, lrs, seeds):
    self.calls.append((list(lrs), list(seeds)))
    lrs, seeds = np.asarray(lrs, np.float64), np.asarray(seeds, np.float64)
    val = np.stack([lrs + seeds, lrs * seeds], axis=1)
    return {"val": val, "train_loss": val + 1, "test": lrs - seeds}


def test_runs_are_kept_one_seed_at_a_time_and_never_trained_twice(tmp_path):
  path = str(tmp_path / "runs" / "ttr_logreg.jsonl")
  runs = FakeRuns()
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    out = study_runner.train_rates(book, "vsgd", runs, [0.1, 0.3, 0.1, 0.3],
                                   [1000, 1000, 1001, 1001])
  assert runs.calls == [([0.1, 0.3], [1000, 1000]), ([0.1, 0.3], [1001, 1001])]
  np.testing.assert_array_equal(out["test"], [0.1 - 1000, 0.3 - 1000, 0.1 - 1001, 0.3 - 1001])
  again = FakeRuns()
  with ledger.Ledger(path, SETTINGS, CODE) as book:  # a new process reads what the last one kept
    out2 = study_runner.train_rates(book, "vsgd", again, [0.3, 0.1, 1.0], [1001, 1000, 1000])
    together = study_runner.train_rates(book, "adam", again, [0.1, 0.3], [5, 6], together=True)
  assert again.calls == [([1.0], [1000]), ([0.1, 0.3], [5, 6])]
  np.testing.assert_array_equal(out2["val"][:2], [[1001.3, 300.3], [1000.1, 100.0]])
  np.testing.assert_array_equal(together["test"], [0.1 - 5, 0.3 - 6])
  # one header line, then one line per (optimizer, seed) call
  lines = open(path).read().splitlines()
  assert json.loads(lines[0]) == {"settings": SETTINGS, "source": CODE}
  assert [(r["entry"], r["seed"]) for r in map(json.loads, lines[1:])] == [
      ("vsgd", 1000), ("vsgd", 1001), ("vsgd", 1000), ("adam", 5), ("adam", 6)]


def test_a_ledger_of_other_settings_or_other_code_is_refused_in_one_line(tmp_path):
  path = str(tmp_path / "ttr_logreg.jsonl")
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    study_runner.train_rates(book, "vsgd", FakeRuns(), [0.1], [0])
  other = {**SETTINGS, "steps": 20000}
  with pytest.raises(ledger.LedgerError, match="steps") as error:
    ledger.Ledger(path, other, CODE).__enter__()
  assert "\n" not in str(error.value)
  assert not os.path.exists(path + ".lock")  # the refused process left its lock behind


def test_a_ledger_of_other_code_is_refused_unless_the_operator_resumes_across_it(tmp_path):
  path = str(tmp_path / "ttr_logreg.jsonl")
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    study_runner.train_rates(book, "vsgd", FakeRuns(), [0.1], [0])
  with pytest.raises(ledger.LedgerError, match="--resume-across-code"):
    ledger.Ledger(path, SETTINGS, "code-b").__enter__()
  runs = FakeRuns()
  with ledger.Ledger(path, SETTINGS, "code-b", across_code=True) as book:
    study_runner.train_rates(book, "vsgd", runs, [0.1, 0.1], [0, 1])
    assert book.sources == {"code-a", "code-b"}
  assert runs.calls == [([0.1], [1])]
  assert [json.loads(line).get("source") for line in open(path).read().splitlines()[1:]] == [
      "code-a", "code-b"]


def test_the_first_ledgers_with_their_digest_among_the_settings_still_resume(tmp_path):
  path = str(tmp_path / "ttr_logreg.jsonl")
  with open(path, "w") as f:
    f.write(json.dumps({"settings": {**SETTINGS, "source": CODE}}) + "\n")
    f.write(json.dumps({"entry": "vsgd", "seed": 0, "learning_rates": [0.1], "val": [[1.0]],
                        "train_loss": [[2.0]], "test": [3.0]}) + "\n")
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    assert book.held("vsgd", 0, 0.1) == {"val": [1.0], "train_loss": [2.0], "test": 3.0}
    assert book.sources == {CODE}


def test_a_second_live_process_is_refused_and_a_dead_ones_lock_is_taken(tmp_path):
  path = str(tmp_path / "ttr_logreg.jsonl")
  with open(path + ".lock", "w") as f:
    f.write(str(os.getppid()))  # a live process: the one that started this test
  with pytest.raises(ledger.LedgerError, match=str(os.getppid())):
    ledger.Ledger(path, SETTINGS, CODE).__enter__()
  with open(path + ".lock", "w") as f:
    f.write("999999999")  # no such process: its lock is stale
  with ledger.Ledger(path, SETTINGS, CODE):
    assert open(path + ".lock").read() == str(os.getpid())
  assert not os.path.exists(path + ".lock")


def test_a_run_cut_off_while_written_is_lost_alone_and_damage_elsewhere_refused(tmp_path):
  path = str(tmp_path / "ttr_logreg.jsonl")
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    study_runner.train_rates(book, "vsgd", FakeRuns(), [0.1, 0.1], [0, 1])
  with open(path, "a") as f:
    f.write('{"entry": "vsgd", "seed": 2, "learn')  # killed mid-line
  runs = FakeRuns()
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    study_runner.train_rates(book, "vsgd", runs, [0.1, 0.1, 0.1], [0, 1, 2])
  assert runs.calls == [([0.1], [2])]
  lines = open(path).read().splitlines()
  lines.insert(1, "not json")
  open(path, "w").write("\n".join(lines) + "\n")
  with pytest.raises(ledger.LedgerError, match="line 2"):
    ledger.Ledger(path, SETTINGS, CODE).__enter__()


def test_the_workloads_source_digest_follows_the_code(tmp_path):
  for name in ("vsgd_optax/a.py", "benchmarks/optimizers.py", "benchmarks/common.py",
               "docs/c.md"):
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("x = 1\n")
  before = ledger.digest_of(protocol.SOURCES, str(tmp_path))
  (tmp_path / "docs/c.md").write_text("changed\n")  # not code: same digest
  (tmp_path / "benchmarks/common.py").write_text("changed\n")  # not the runs' code either
  assert ledger.digest_of(protocol.SOURCES, str(tmp_path)) == before
  (tmp_path / "benchmarks/optimizers.py").write_text("x = 2\n")
  assert ledger.digest_of(protocol.SOURCES, str(tmp_path)) != before
  before = ledger.digest_of(protocol.SOURCES, str(tmp_path))
  (tmp_path / "vsgd_optax/a.py").write_text("x = 2\n")
  assert ledger.digest_of(protocol.SOURCES, str(tmp_path)) != before


class Interrupted(Exception):
  """Stands for a protocol killed in the middle of a run."""


def _stripped(path):
  """A result file without what differs from run to run: times and the machine."""
  payload = json.load(open(path))
  payload.pop("wall_s"), payload.pop("machine")
  for e in payload["entries"].values():
    for key in ("wall_s", "step_ms", "ratio", "ratio_p25", "ratio_p75", "seconds_to_target"):
      e.pop(key, None)
  return payload


@pytest.mark.slow  # three quick protocols on the logistic workload
def test_an_interrupted_protocol_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
  args = ["--quick", "--workloads", "logreg", "--entries", "vsgd", "adam"]
  cli.main([*args, "--out", str(tmp_path / "whole")])
  calls, real = [], trainer.Trainer.__call__

  def interrupted_on_the_third(self, lrs, seeds):
    calls.append(list(seeds))
    if len(calls) == 3:
      raise Interrupted
    return real(self, lrs, seeds)
  monkeypatch.setattr(trainer.Trainer, "__call__", interrupted_on_the_third)
  with pytest.raises(Interrupted):
    cli.main([*args, "--out", str(tmp_path / "cut")])
  folder = tmp_path / "cut" / "warmup_cosine"
  assert not (folder / "ttr_logreg.json").exists()
  assert len(open(folder / "runs" / "ttr_logreg.jsonl").read().splitlines()) > 1
  monkeypatch.setattr(trainer.Trainer, "__call__", real)
  resumed = []
  monkeypatch.setattr(trainer.Trainer, "__call__",
                      lambda self, lrs, seeds: resumed.append(1) or real(self, lrs, seeds))
  cli.main([*args, "--out", str(tmp_path / "cut")])
  assert len(resumed) < len(calls) + 3  # what the ledger held was not trained again
  assert not (folder / "runs").exists()  # the ledger goes once the result is written
  assert _stripped(folder / "ttr_logreg.json") == _stripped(
      tmp_path / "whole" / "warmup_cosine" / "ttr_logreg.json")


def test_a_cut_last_line_is_dropped_and_a_damaged_earlier_line_refused_in_every_ledger(tmp_path):
  """One line store under the workloads', the contest's and the ladder's ledgers: a run cut
  short while written trains again, and its partial line is gone before the next append; a
  damaged line before the last is refused in one line that says what to do.
  """
  path = str(tmp_path / "runs" / "ttr_logreg.jsonl")
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    study_runner.train_rates(book, "vsgd", FakeRuns(), [0.1], [1000])
  with open(path, "a") as f:
    f.write('{"entry": "vsgd", "se')  # a process killed inside its write
  runs = FakeRuns()
  with ledger.Ledger(path, SETTINGS, CODE) as book:
    study_runner.train_rates(book, "vsgd", runs, [0.1, 0.3], [1000, 1000])
  assert runs.calls == [([0.3], [1000])]  # the run kept before the cut is not trained again
  with open(path) as f:
    texts = f.read().splitlines()
  assert len(texts) == 3 and all(json.loads(text) for text in texts)
  with open(path, "w") as f:
    f.write("\n".join([texts[0], texts[1][:-5], texts[2]]) + "\n")
  with pytest.raises(ledger.LedgerError) as error:
    ledger.Ledger(path, SETTINGS, CODE).__enter__()
  assert str(error.value) == (f"{path} line 2 is not JSON; the ledger is damaged (move it away "
                              "to start afresh)")
  assert not os.path.exists(path + ".lock")  # a refused start leaves nothing behind

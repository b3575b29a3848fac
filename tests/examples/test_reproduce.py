"""examples.table1 (the Table 1 protocol): a tiny digits grid builds the table (selection on validation,
mean and std over seeds); two workers give one worker's table; a rerun runs
nothing; a stopped run, and a killed one, resume; a CIFAR-100 archive loads with its validation split.

The grid, 2 learning rates x 1 decay x 2 seeds of 4 steps with the tiny model,
is run twice (one worker; two workers), once for all the tests of this file.
"""

import contextlib
import dataclasses
import io
import json
import os
import pickle
import shlex
import signal
import subprocess
import tarfile

import numpy as np
import pytest

from examples import datasets
from examples import main as trainer_main
from examples import train
from examples.table1 import reproduce
from tests.support import REPOSITORY
from tests.support import trainer

GRID = ["--table", "digits", "--optimizers", "vsgd", "--learning-rates", "0.005,0.02",
        "--weight-decays", "0", "--seeds", "0,1", "--set", "steps=4", "--set", "model=tiny",
        "--set", "model_kwargs={}", "--set", "eval_every=4", "--set", "log_every=4",
        "--set", "checkpoint_every=4", "--set", "batch_size=32"]


def _reproduce(*extra) -> tuple[int, str]:
  out = io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    status = reproduce.main([*GRID, *extra], progress=False)
  return status, out.getvalue()


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
  one = str(tmp_path_factory.mktemp("one_worker"))
  two = str(tmp_path_factory.mktemp("two_workers"))
  # One worker, after the first run was started from its --list line and
  # stopped after 2 of its 4 steps, as an interruption leaves it.
  status, listing = _reproduce("--root", one, "--list")
  first = listing.splitlines()[0]
  with contextlib.redirect_stdout(io.StringIO()):
    assert trainer_main.main(shlex.split(first)[3:] + ["--stop-after", "2"]) == 0
  status, out_one = _reproduce("--root", one)
  assert status == 0, out_one
  # Two workers, one after the other: the first cannot write the table yet.
  status, out_first = _reproduce("--root", two, "--worker", "0", "--workers", "2")
  assert status == 0 and "2 of 4 runs of the table are unfinished" in out_first, out_first
  assert not os.path.exists(os.path.join(two, "table1_digits.json"))
  status, out_second = _reproduce("--root", two, "--worker", "1", "--workers", "2")
  assert status == 0, out_second
  return dict(one=one, two=two, listing=listing, out_one=out_one)


def _table(root):
  with open(os.path.join(root, "table1_digits.json")) as f:
    return json.load(f)


def _result(root, lr, seed):
  with open(os.path.join(root, "default", f"vsgd-lr{lr:g}-wd0-seed{seed}", "result.json")) as f:
    return json.load(f)


@pytest.mark.slow  # roots trains two grids
def test_table_picks_the_best_validation_cell_and_averages_its_seeds(roots):
  (row,) = _table(roots["one"])["rows"]
  scores = {lr: np.mean([_result(roots["one"], lr, s)["validation_accuracy"] for s in (0, 1)])
            for lr in (0.005, 0.02)}
  best = max(scores, key=lambda lr: (scores[lr], lr == 0.005))  # a tie: the first cell
  assert row["learning_rate"] == best and row["weight_decay"] == 0 and row["seeds"] == [0, 1]
  assert row["validation_mean"] == pytest.approx(scores[best], abs=1e-12)
  test = [_result(roots["one"], best, s)["test_accuracy"] for s in (0, 1)]
  assert row["test_per_seed"] == test
  assert row["test_mean"] == pytest.approx((test[0] + test[1]) / 2, abs=1e-12)
  assert row["test_std"] == pytest.approx(abs(test[0] - test[1]) / np.sqrt(2), abs=1e-12)
  assert row["cells_tried"] == 2 and row["paper"] is None
  with open(os.path.join(roots["one"], "table1_digits.md")) as f:
    text = f.read()
  assert f"| default | {100 * row['test_mean']:.1f} ± {100 * row['test_std']:.1f} |" in text
  assert "Validation: 256 held-out training images." in text


@pytest.mark.slow  # roots trains two grids
def test_two_workers_give_the_table_of_one(roots):
  assert _table(roots["two"]) == _table(roots["one"])


@pytest.mark.slow  # roots trains two grids
def test_a_stopped_run_resumes_where_it_stopped(roots):
  assert "[1/4] default vsgd: lr 0.005 wd 0 seed 0: running" in roots["out_one"]
  run = os.path.join(roots["one"], "default", "vsgd-lr0.005-wd0-seed0")
  with open(os.path.join(run, "metrics.jsonl")) as f:
    steps = [json.loads(line)["step"] for line in f]
  assert steps[0] == 2 and steps[-1] == 4  # the stopped part's record was kept: resumed
  # The same final model as the run that was never stopped (the train metrics
  # are means over the steps since the last log, which the stop split).
  resumed, whole = _result(roots["one"], 0.005, 0), _result(roots["two"], 0.005, 0)
  for key in ("test_loss", "test_accuracy", "validation_loss", "validation_accuracy"):
    assert resumed[key] == whole[key], key


@pytest.mark.slow  # roots trains two grids
def test_a_rerun_of_a_finished_table_runs_nothing(roots, monkeypatch):
  monkeypatch.setattr(train, "train_and_evaluate",
                      lambda *a, **k: pytest.fail("a finished run was run again"))
  status, out = _reproduce("--root", roots["one"])
  assert status == 0 and out.count("finished before, skipped") == 4, out


@pytest.mark.slow  # roots trains two grids
def test_finished_runs_made_with_other_settings_are_refused(roots):
  """A finished run is only skipped, and read into the table, if it is this
  table's run: results of a quick trial with other steps never enter it.
  """
  for extra in ([], ["--assemble"]):
    status, out = _reproduce("--root", roots["one"], "--set", "steps=5", *extra)
    assert status == 2 and len(out.strip().splitlines()) == 1, out
    assert "holds another run (its run.json differs in: steps)" in out


@pytest.mark.slow  # roots trains two grids
def test_list_shares_the_runs_between_workers(roots):
  lines = roots["listing"].splitlines()
  shares = [_reproduce("--root", roots["one"], "--list", "--worker", str(i), "--workers", "3")[1]
            .splitlines() for i in range(3)]
  assert len(lines) == 4 and sorted(sum(shares, [])) == sorted(lines)
  assert shares[0] == [lines[0], lines[3]]
  assert all(line.startswith("python -m examples.main --config default ") for line in lines)


def test_bad_input_is_refused_in_one_line(tmp_path):
  for extra, expected in ((["--set", "learning_rate=0.1"], "use --learning-rates"),
                          (["--configs", "cifar100_vgg16"], "not in table digits"),
                          (["--optimizers", "lion"], "unknown column 'lion'"),
                          (["--worker", "2", "--workers", "2"], "--worker must be in 0..1"),
                          (["--optimizers", "vsgd,adamw"], "--weight-decays has no nonzero"),
                          (["--set", "validation_size=0"], "nothing to choose the cells on"),
                          (["--learning-rates", "-1", "--list"],
                           "--learning-rates must be numbers >= 0, got [-1.0]"),
                          (["--learning-rates", "0", "--list"], "--learning-rates must be > 0"),
                          (["--workers", "-1", "--list"],
                           "--workers must be a positive number of workers, got -1"),
                          (["--workers", "0"], "--workers must be a positive number")):
    status, out = _reproduce("--root", str(tmp_path / "r"), *extra)
    assert status == 2 and expected in out and len(out.strip().splitlines()) == 1, out
  assert not (tmp_path / "r").exists()


def test_assemble_on_a_folder_without_runs_says_so(tmp_path):
  status, out = _reproduce("--root", str(tmp_path / "empty"), "--assemble")
  assert status == 1 and len(out.strip().splitlines()) == 1, out
  assert out.startswith(f"--assemble found no runs of table digits under {tmp_path / 'empty'}")
  assert not (tmp_path / "empty").exists()


def test_help_names_the_command_and_its_whole_first_sentence():
  out = io.StringIO()
  with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
    reproduce.main(["--help"])
  text = " ".join(out.getvalue().split())
  assert text.startswith("usage: python -m examples.table1 ")
  first = " ".join(reproduce.__doc__.split("\n\n")[0].split())
  assert first.endswith("next to the paper's numbers.") and first in text


def test_cifar100_archive_loads_with_a_disjoint_validation_split(tmp_path):
  n_train, n_test = 40, 10
  # Image i holds the value i in its first pixel: each image can be told apart.
  data = np.zeros((n_train, 3072), np.uint8)
  data[:, 0] = np.arange(n_train)
  with tarfile.open(tmp_path / "cifar-100-python.tar.gz", "w:gz") as tar:
    for split, images, labels in (("train", data, list(range(n_train))),
                                  ("test", data[:n_test], list(range(n_test)))):
      blob = pickle.dumps({"data": images, "fine_labels": labels})
      info = tarfile.TarInfo(f"cifar-100-python/{split}")
      info.size = len(blob)
      tar.addfile(info, io.BytesIO(blob))
  loaded = datasets.load_dataset("cifar100", str(tmp_path), validation_size=8)
  train_ids = loaded.train_images[:, 0, 0, 0].tolist()
  validation_ids = loaded.validation_images[:, 0, 0, 0].tolist()
  assert len(train_ids) == 32 and len(validation_ids) == 8
  assert not set(train_ids) & set(validation_ids)
  assert sorted(train_ids + validation_ids) == list(range(n_train))
  assert loaded.train_labels.tolist() == train_ids  # labels stay with their images
  assert loaded.validation_labels.tolist() == validation_ids
  assert train_ids == sorted(train_ids)  # the rest keep their order
  assert loaded.test_labels.tolist() == list(range(n_test)) and not loaded.validation_is_test
  again = datasets.load_dataset("cifar100", str(tmp_path), validation_size=8)
  assert again.validation_labels.tolist() == validation_ids  # a fixed choice


def test_a_signal_stops_the_current_run_and_starts_no_other(tmp_path, monkeypatch):
  started = []
  def stopped_by_sigterm(config, workdir, **kwargs):
    started.append(workdir)
    assert kwargs["stop"] is not None  # the run gets a graceful stop of its own
    return {"interrupted": signal.SIGTERM, "step": 2}
  monkeypatch.setattr(train, "train_and_evaluate", stopped_by_sigterm)
  status, out = _reproduce("--root", str(tmp_path))
  assert status == 143 and len(started) == 1, out
  assert "stopped by SIGTERM at step 2 of [1/4]" in out and "rerun the same command" in out
  assert not (tmp_path / "table1_digits.json").exists()


@pytest.mark.slow  # a subprocess of 300 steps
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
  """A kill -9 in the middle of a grid's run: the rerun resumes that run from its
  last checkpoint and ends with the model of a run that was never killed.
  """
  one_cell = [*GRID, "--learning-rates", "0.005", "--seeds", "0", "--set", "steps=300"]
  killed, whole = tmp_path / "killed", tmp_path / "whole"
  run = killed / "default" / "vsgd-lr0.005-wd0-seed0"
  # The devices of this process (tests/conftest.py's eight), as the reruns below have.
  proc = trainer.start(REPOSITORY, *one_cell, "--root", str(killed), module="examples.table1",
                       devices=None, output=subprocess.DEVNULL)
  try:
    # A checkpoint to kill after: saved every 4 steps.
    trainer.wait_for(lambda: (run / "checkpoints" / "8").is_dir(), proc, 180)
    proc.send_signal(signal.SIGKILL)
  finally:
    proc.kill()
    proc.wait(timeout=60)
  assert not (run / "result.json").exists()  # killed before its end
  with open(run / "metrics.jsonl") as f:
    before = [json.loads(line)["step"] for line in f]
  with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    assert reproduce.main([*one_cell, "--root", str(killed)], progress=False) == 0
    assert reproduce.main([*one_cell, "--root", str(whole)], progress=False) == 0
  with open(run / "metrics.jsonl") as f:
    after = [json.loads(line)["step"] for line in f]
  assert after[:len(before)] == before and after[-1] == 300  # the same log, continued
  assert after[len(before)] <= before[-1] + 4  # from the last checkpoint, not from step 0
  resumed = json.loads((run / "result.json").read_text())
  never_killed = json.loads(
      (whole / "default" / "vsgd-lr0.005-wd0-seed0" / "result.json").read_text())
  for key in ("test_loss", "test_accuracy", "validation_loss", "validation_accuracy"):
    assert resumed[key] == never_killed[key], key


# The operator's cases of the protocol: a run that diverges at once, a save
# that fails for want of disk, and runs started from --list lines.

ONE_RUN = ["--learning-rates", "0.005", "--seeds", "0"]


@pytest.fixture
def all_nan_training_images(monkeypatch):
  """Every run's training images are NaN: each diverges at its first step."""
  real = train.load_dataset

  def poisoned(config):
    data = real(config)
    return dataclasses.replace(data, train_images=np.full_like(data.train_images, np.nan))
  monkeypatch.setattr(train, "load_dataset", poisoned)


@pytest.mark.slow
def test_a_run_diverging_at_its_first_step_is_recorded_in_one_line(tmp_path,
                                                                    all_nan_training_images):
  status, out = _reproduce("--root", str(tmp_path), *ONE_RUN)
  assert status == 1 and "Traceback" not in out, out
  assert "[1/1] default vsgd: lr 0.005 wd 0 seed 0: stopped for good: training stopped at " \
         "step 1" in out
  record = json.loads((tmp_path / "default" / "vsgd-lr0.005-wd0-seed0" / "failed.json")
                      .read_text())
  assert record["failed"].startswith("training stopped at step 1: the loss is nan")
  assert _table(tmp_path)["rows"][0]["failed"] == [record["failed"]]


@pytest.mark.slow
def test_a_failed_save_is_resumed_by_the_rerun_not_recorded_as_stopped(tmp_path, monkeypatch):
  run = tmp_path / "default" / "vsgd-lr0.005-wd0-seed0"
  final_rename = trainer.disk_full_at(monkeypatch, run / "checkpoints" / "4")
  status, out = _reproduce("--root", str(tmp_path), *ONE_RUN, "--set", "checkpoint_every=2")
  assert status == 1 and "No space left on device" in out and "Traceback" not in out, out
  assert "stopped for good" not in out and not (run / "failed.json").exists()
  assert not (tmp_path / "table1_digits.json").exists()
  # Disk freed: the rerun resumes the run from its last checkpoint and writes the table.
  monkeypatch.setattr(os, "rename", final_rename)
  status, out = _reproduce("--root", str(tmp_path), *ONE_RUN, "--set", "checkpoint_every=2")
  assert status == 0 and "[1/1] default vsgd: lr 0.005 wd 0 seed 0: running" in out, out
  assert json.loads((run / "result.json").read_text())["step"] == 4
  assert "test_mean" in _table(tmp_path)["rows"][0]


@pytest.mark.slow
def test_a_run_from_a_list_line_that_diverges_is_recorded(tmp_path, all_nan_training_images):
  status, listing = _reproduce("--root", str(tmp_path), *ONE_RUN, "--list")
  (line,) = listing.splitlines()
  with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    assert trainer_main.main(shlex.split(line)[3:]) == 1
  record = json.loads((tmp_path / "default" / "vsgd-lr0.005-wd0-seed0" / "failed.json")
                      .read_text())
  assert record["failed"].startswith("training stopped at step 1: the loss is nan")
  status, out = _reproduce("--root", str(tmp_path), *ONE_RUN)  # the table shows it stopped
  assert status == 0 and "finished before, skipped" in out, out
  assert _table(tmp_path)["rows"][0]["failed"] == [record["failed"]]

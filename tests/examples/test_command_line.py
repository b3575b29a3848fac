"""The trainer's command line when nothing is wrong: the help lists every
setting, progress in a log file is one line a log, the metrics records are
strict JSON with readable numbers, and a copy of the package under another
name runs as a module and as a script.

Its faults and its operation (signals, locks, failed saves) are
``test_faults.py``.
"""

import dataclasses
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from examples import configs
from examples import main
from examples.runtime import reporting
from tests.support import REPOSITORY
from tests.support import trainer


def test_help_lists_the_settings(capsys):
  with pytest.raises(SystemExit):
    main.main(["--help"])
  text = capsys.readouterr().out
  assert text.startswith("usage: python -m examples.main ")
  for f in dataclasses.fields(configs.Config):
    assert f"  {f.name}=" in text


def test_metrics_are_strict_json_with_readable_numbers(tmp_path):
  writer = reporting.MetricsWriter(str(tmp_path), 0)
  writer.write(1, learning_rate=np.float32(0.01), train_loss=float("nan"),
               test_loss=float("inf"))
  assert trainer.strict_json_lines(tmp_path / "metrics.jsonl") == [
      {"step": 1, "learning_rate": 0.01, "train_loss": None, "test_loss": None}]


def test_progress_in_a_log_file_is_one_line_per_log(capsys):
  progress = reporting.Progress(total=10, initial=0, desc="tiny/vsgd")
  for step in range(1, 11):
    progress.step()
    if step % 5 == 0:
      progress.log(step, loss=0.5)
  progress.close()
  err = capsys.readouterr().err
  assert err == "tiny/vsgd step 5/10: loss 0.5\ntiny/vsgd step 10/10: loss 0.5\n"


@pytest.mark.slow  # trains a run to its end, then starts it again
def test_a_finished_run_says_it_did_not_train_again(tmp_path, capsys):
  args = ["--workdir", str(tmp_path / "run"), "--set", "model=tiny", "--set", "model_kwargs={}",
          "--set", "steps=4",
          "--set", "eval_every=4", "--set", "log_every=2", "--set", "checkpoint_every=4",
          "--set", "batch_size=8"]
  assert main.main(args) == 0
  first = capsys.readouterr().out.splitlines()[0]
  assert first.startswith("test accuracy: ") and "nothing trained" not in first
  assert main.main(args) == 0
  again = capsys.readouterr().out.splitlines()[0]
  # The same result, and in the same line, that this call trained nothing.
  assert again.startswith(first.split(";")[0])
  assert f"; nothing trained: {tmp_path / 'run'} held this finished run" in again


def test_a_fork_runs_under_any_folder_name_as_a_module_and_as_a_script(tmp_path):
  fork = tmp_path / "myfork"
  shutil.copytree(os.path.join(REPOSITORY, "examples"), fork,
                  ignore=shutil.ignore_patterns("__pycache__"))
  # The library alone is importable, not ``examples``: an import of it left in
  # the copy fails.
  library = tmp_path / "library"
  library.mkdir()
  (library / "vsgd_optax").symlink_to(os.path.join(REPOSITORY, "vsgd_optax"))
  environment = {**os.environ, "PYTHONPATH": str(library), "JAX_PLATFORMS": "cpu"}
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  for command, cwd in (([sys.executable, "-m", "myfork.main", "--help"], tmp_path),
                       ([sys.executable, str(fork / "main.py"), "--help"], elsewhere)):
    done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "--config" in done.stdout, done.stderr[-2000:]

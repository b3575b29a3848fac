"""The trainer under faults: divergence, corrupt checkpoints and archives, failed
starts, silent servers and bad input; and as it is operated: one trainer per
workdir, SIGTERM and SIGINT, failed saves, unusable workdirs, unreadable records.

What it shows when nothing is wrong (help, progress, metrics records) is
``test_command_line.py``.
"""

import dataclasses
import io
import json
import os
import pickle
import re
import signal
import socket
import tarfile
import time
import zipfile

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from examples import configs
from examples import datasets
from examples import errors
from examples import main
from examples import train
from examples.runtime import batches
from tests.support import trainer


def _tiny(**changes) -> configs.Config:
  base = dict(model="tiny", batch_size=8, steps=6, eval_every=100, log_every=1,
              checkpoint_every=2, seed=3)
  return configs.Config(**{**base, **changes})


def _poisoned_digits(config: configs.Config, step: int) -> datasets.Dataset:
  """Digits with one training image all NaN, first drawn at (0-based) ``step``."""
  data = datasets.load_digits(config.seed)
  first_seen = batches.batch_indices(config.seed, step, len(data.train_labels),
                                     config.batch_size)[0]
  images = data.train_images.copy()
  images[first_seen] = np.nan
  return dataclasses.replace(data, train_images=images)


@pytest.mark.slow
def test_a_non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
  config = _tiny(steps=12)
  data = _poisoned_digits(config, step=5)  # the 6th step sees it
  with pytest.raises(errors.TrainingStopped,
                     match=r"step 6: the loss is nan; the last good checkpoint, step 4"):
    train.train_and_evaluate(config, str(tmp_path), progress=False, dataset=data)
  steps = sorted(int(s) for s in os.listdir(tmp_path / "checkpoints"))
  assert steps == [2, 4]
  restored = ocp.StandardCheckpointer().restore(tmp_path / "checkpoints" / "4" / "default")
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(restored))
  records = trainer.strict_json_lines(tmp_path / "metrics.jsonl")
  assert [r["step"] for r in records] == [1, 2, 3, 4, 5]


@pytest.mark.slow
def test_divergence_from_the_command_line_exits_non_zero(tmp_path, capsys):
  code = main.main(["--optimizer", "sgd", "--set", "learning_rate=1e6", "--set", "model=tiny",
                    "--set", "model_kwargs={}", "--set", "steps=30", "--set", "log_every=5",
                    "--workdir", str(tmp_path / "run")])
  err = capsys.readouterr().err
  assert code == 1 and "error: training stopped at step" in err and "Traceback" not in err


@pytest.mark.slow
def test_the_checkpoint_named_good_after_divergence_restores_finite(tmp_path, capsys):
  """SGD at rate 1e6 under the default warmup + cosine schedule: the loss stays
  finite a step longer than the batch statistics (a running variance reaches
  inf first). The step the stop message calls the last good checkpoint must
  restore finite in every leaf: params, batch statistics and optimizer state.
  """
  workdir = tmp_path / "run"
  code = main.main(["--optimizer", "sgd", "--set", "learning_rate=1e6", "--steps", "30",
                    "--set", "checkpoint_every=2", "--set", "log_every=1",
                    "--set", "eval_every=30", "--workdir", str(workdir)])
  err = capsys.readouterr().err
  assert code == 1, err
  named = re.search(r"the last good checkpoint, step (\d+), is intact", err)
  assert named, err
  saved = sorted(int(s) for s in os.listdir(workdir / "checkpoints"))
  assert saved and int(named.group(1)) == saved[-1]
  for step in saved:  # every checkpoint written, the one named among them
    restored = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / str(step) / "default")
    bad = [jax.tree_util.keystr(p) for p, x in jax.tree_util.tree_leaves_with_path(restored)
           if not np.isfinite(np.asarray(x)).all()]
    assert not bad, (step, bad)


@pytest.mark.slow
def test_a_run_failing_at_its_first_step_leaves_no_workdir(tmp_path):
  config = _tiny()
  data = _poisoned_digits(config, step=0)
  with pytest.raises(errors.TrainingStopped, match="step 1: .* no checkpoint had been saved"):
    train.train_and_evaluate(config, str(tmp_path / "run"), progress=False, dataset=data)
  assert not (tmp_path / "run").exists()
  # The workdir is free for a run with other settings.
  result = train.train_and_evaluate(config.replace(learning_rate=0.02, steps=2),
                                    str(tmp_path / "run"), progress=False)
  assert result["step"] == 2


def test_missing_data_leaves_the_workdir_free(tmp_path, capsys):
  workdir = tmp_path / "run"
  code = main.main(["--set", "dataset=cifar100", "--data-dir", str(tmp_path / "none"),
                    "--workdir", str(workdir)])
  err = capsys.readouterr().err
  assert code == 2 and "--download" in err and len(err.strip().splitlines()) == 1
  assert not workdir.exists()


def _garble_arrays(step_dir) -> None:
  for root, _, files in os.walk(step_dir):
    if os.path.basename(root) == "d":  # TensorStore's data files
      for name in files:
        path = os.path.join(root, name)
        data = open(path, "rb").read()
        open(path, "wb").write(data[:len(data) // 2])


@pytest.mark.slow
def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, capsys):
  config = _tiny(steps=6, log_every=3)
  whole = train.train_and_evaluate(config, str(tmp_path / "whole"), progress=False)
  train.train_and_evaluate(config, str(tmp_path / "cut"), progress=False, stop_after=4)
  _garble_arrays(tmp_path / "cut" / "checkpoints" / "4")
  capsys.readouterr()
  resumed = train.train_and_evaluate(config, str(tmp_path / "cut"), progress=False)
  err = capsys.readouterr().err
  assert len(err.strip().splitlines()) == 1, err
  assert "checkpoint 4" in err and "unreadable" in err and "corrupt_checkpoints" in err
  assert os.listdir(tmp_path / "cut" / "corrupt_checkpoints") == ["4"]  # kept, set aside
  jax.tree.map(np.testing.assert_array_equal, whole["state"].params, resumed["state"].params)


class _RunsCode:
  def __reduce__(self):
    return (os.system, ("touch pwned",))


def test_a_code_running_pickle_in_the_cifar_archive_is_refused(tmp_path, capsys, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with tarfile.open(tmp_path / "cifar-100-python.tar.gz", "w:gz") as tar:
    for split in ("train", "test"):
      blob = pickle.dumps({"data": _RunsCode(), "fine_labels": [0]})
      info = tarfile.TarInfo(f"cifar-100-python/{split}")
      info.size = len(blob)
      tar.addfile(info, io.BytesIO(blob))
  code = main.main(["--set", "dataset=cifar100", "--data-dir", str(tmp_path),
                    "--workdir", str(tmp_path / "run")])
  err = capsys.readouterr().err
  assert code == 2 and len(err.strip().splitlines()) == 1
  assert "posix.system" in err or "nt.system" in err
  assert "refusing it" in err and not (tmp_path / "pwned").exists()


def test_a_truncated_jpeg_is_named(tmp_path):
  from PIL import Image
  buf = io.BytesIO()
  Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(buf, "JPEG")
  with zipfile.ZipFile(tmp_path / "tiny-imagenet-200.zip", "w") as zf:
    zf.writestr("tiny-imagenet-200/wnids.txt", "n00000001")
    zf.writestr("tiny-imagenet-200/train/n00000001/images/a.JPEG", buf.getvalue()[:300])
  with pytest.raises(datasets.DatasetError, match="train/n00000001/images/a.JPEG"):
    datasets.load_tinyimagenet(str(tmp_path))


def test_a_download_from_a_silent_server_times_out(tmp_path, monkeypatch):
  for proxy in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
    monkeypatch.delenv(proxy, raising=False)
  with socket.socket() as server:  # accepts connections, never answers
    server.bind(("127.0.0.1", 0))
    server.listen()
    url = f"http://127.0.0.1:{server.getsockname()[1]}/cifar-100-python.tar.gz"
    with pytest.raises(datasets.DatasetError, match=r"no answer within 0.5 s"):
      datasets.download("cifar100", str(tmp_path), url=url, timeout=0.5)
  assert os.listdir(tmp_path) == []  # no partial file


@pytest.mark.parametrize("setting,expected", [
    ("learning_rate=nan", "learning_rate must be a finite number > 0, got nan"),
    ("learning_rate=inf", "learning_rate must be a finite number > 0, got inf"),
    ("learning_rate=-0.01", "learning_rate must be a finite number > 0, got -0.01"),
    ("weight_decay=-1", "weight_decay must be a finite number >= 0, got -1.0"),
    ("momentum=1", "momentum must be a finite number in [0, 1), got 1.0"),
    ("lr_halving_every=-3", "lr_halving_every must be an integer >= 0, got -3"),
    ("eval_batch_size=-8", "eval_batch_size must be an integer >= 0, got -8"),
    ('model_kwargs={"bogus": 1}', "model_kwargs bogus not accepted by convmixer; it takes: dim"),
    ("model_kwargs=[1]", "model_kwargs must be a JSON object"),
    ('model_kwargs={"dim": "wide"}', "model_kwargs {'dim': 'wide'} do not build convmixer"),
    ("batch_size=100000", "batch_size 100000 is larger than the 1182 training examples"),
    ("validation_size=-1", "validation_size must be an integer >= 0, got -1"),
    ("validation_size=1438", "validation_size 1438 leaves no training images out of the 1438"),
    ("prior_strength=0", "prior_strength must be a finite number > 0, got 0.0"),
    ("kappa_g=1.5", "kappa_g must be a finite number in [0, 1], got 1.5"),
    ("schedule=cosine", "unknown schedule 'cosine'; choose one of: warmup_cosine, constant, step"),
    ("lr_halving_every=100", "lr_halving_every=100 with schedule=warmup_cosine: the step "
                             "schedule needs lr_halving_every > 0"),
    ("schedule=step", "lr_halving_every=0 with schedule=step"),
    ("steps=1e3", "--set steps: cannot read '1e3' as int"),
])
def test_bad_settings_give_one_line_errors(tmp_path, capsys, setting, expected):
  code = main.main(["--set", setting, "--workdir", str(tmp_path / "run")])
  err = capsys.readouterr().err
  assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "run").exists()


@pytest.mark.slow  # a trainer subprocess
def test_distributed_without_a_cluster_gives_a_one_line_error(tmp_path):
  proc = trainer.start(tmp_path, "--distributed", devices=None,
                       without=("SLURM", "OMPI", "PMI", "JAX_COORDINATOR", "TPU", "MEGASCALE"))
  code, err = trainer.finish(proc, 120)
  assert code == 2, err
  assert err.startswith("error: could not join a multi-process run")
  assert len(err.strip().splitlines()) == 1 and "--coordinator-address" in err
  partial = main.main(["--num-processes", "2"])
  assert partial == 2


# Operating the trainer: one run per workdir, signals, failed saves, unusable
# workdirs and unreadable records. Long-running trainers are real subprocesses
# (the tiny model, one CPU device); each test bounds how long it waits.

TINY_ARGS = ["--set", "model=tiny", "--set", "model_kwargs={}", "--set", "batch_size=8",
             "--set", "seed=3"]
# Far more steps than a test waits for: the run is still going when signalled.
ENDLESS_ARGS = TINY_ARGS + ["--set", "steps=1000000", "--set", "log_every=1",
                            "--set", "eval_every=1000000", "--set", "checkpoint_every=1000000"]


def _lines(path) -> int:
  return len(open(path).readlines()) if os.path.exists(path) else 0


@pytest.mark.slow  # a trainer subprocess
def test_one_trainer_per_workdir_and_a_killed_ones_lock_does_not_block(tmp_path, capsys):
  workdir = tmp_path / "run"
  first = trainer.start(tmp_path, "--workdir", str(workdir), *ENDLESS_ARGS)
  trainer.wait_for(lambda: _lines(workdir / "metrics.jsonl") >= 2, first)
  # The same command again, and again with another learning rate: refused at once.
  for extra in ([], ["--learning-rate", "0.5"]):
    code = main.main(["--workdir", str(workdir), *ENDLESS_ARGS, *extra])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"is in use by another trainer (pid {first.pid} on host {socket.gethostname()}, " \
           "started 20" in err
  first.kill()  # kill -9: no chance to clean up
  first.communicate(timeout=30)
  assert json.loads((workdir / "lock").read_text())["pid"] == first.pid  # left behind
  code = main.main(["--workdir", str(workdir), *ENDLESS_ARGS, "--stop-after", "2"])
  assert code == 0, capsys.readouterr().err
  assert not (workdir / "lock").exists()


def _not_progress(err: str) -> list[str]:
  """Stderr without the progress lines (one per logged step in a log file)."""
  return [line for line in err.strip().splitlines() if not line.startswith("tiny/vsgd step ")]


def _config_of(args: list[str]) -> configs.Config:
  return main._config_from(main._parser().parse_args(args))


@pytest.mark.slow  # a trainer subprocess
def test_sigterm_stops_after_a_step_with_a_checkpoint_and_the_resume_is_exact(tmp_path):
  workdir = tmp_path / "run"
  proc = trainer.start(tmp_path, "--workdir", str(workdir), *ENDLESS_ARGS)
  trainer.wait_for(lambda: _lines(workdir / "metrics.jsonl") >= 3, proc)
  proc.send_signal(signal.SIGTERM)
  code, err = trainer.finish(proc, 60)
  last = err.strip().splitlines()[-1]
  assert code == 143 and "Traceback" not in err, err
  stopped_at = int(re.fullmatch(r"stopped by SIGTERM at step (\d+): checkpoint \1 is saved in "
                                r".*; rerun the same command to resume\.", last)[1])
  assert os.listdir(workdir / "checkpoints") == [str(stopped_at)]
  records = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
  assert [r["step"] for r in records] == list(range(1, stopped_at + 1)) + [stopped_at]
  assert records[-1] == {"step": stopped_at, "interrupted": "SIGTERM"}  # log_every=1: no window
  # Resumed in this process, five steps on: exactly where an uninterrupted run is.
  config, one_device = _config_of(ENDLESS_ARGS), jax.devices()[:1]  # as in the subprocess
  resumed = train.train_and_evaluate(config, str(workdir), progress=False, stop_after=5,
                                     devices=one_device)
  whole = train.train_and_evaluate(config, str(tmp_path / "whole"), progress=False,
                                   stop_after=stopped_at + 5, devices=one_device)
  assert resumed["step"] == whole["step"] == stopped_at + 5
  jax.tree.map(np.testing.assert_array_equal, resumed["state"], whole["state"])


@pytest.mark.slow  # a trainer subprocess
def test_a_second_signal_exits_at_once(tmp_path):
  workdir = tmp_path / "run"
  proc = trainer.start(tmp_path, "--workdir", str(workdir), *ENDLESS_ARGS)
  trainer.wait_for(lambda: _lines(workdir / "metrics.jsonl") >= 2, proc)
  proc.send_signal(signal.SIGTERM)
  time.sleep(0.02)  # lands in the stop's checkpoint, which takes longer than this
  proc.send_signal(signal.SIGINT)
  code, err = trainer.finish(proc, 60)
  assert code == 130 and err.strip().splitlines()[-1] == (
      "error: SIGINT after SIGTERM: exiting at once, without a checkpoint of this step; "
      "the last one saved is kept"), err
  assert "Traceback" not in err
  saved = [n for n in _listdir(workdir / "checkpoints") if n.isdigit()]
  assert saved == [] and "interrupted" not in (workdir / "metrics.jsonl").read_text()


def _listdir(path) -> list[str]:
  return os.listdir(path) if os.path.isdir(path) else []


@pytest.mark.slow  # a trainer subprocess
def test_a_signal_during_the_first_compile_exits_in_one_line(tmp_path):
  workdir = tmp_path / "run"
  proc = trainer.start(tmp_path, "--workdir", str(workdir))  # the default model
  trainer.wait_for(lambda: (workdir / "lock").exists(), proc)  # locked: data load, then compile
  time.sleep(0.3)  # into the data load or the compiles, which take longer than this
  proc.send_signal(signal.SIGINT)
  code, err = trainer.finish(proc, 60)
  assert code == 130, err
  assert err.strip().splitlines()[-1] == ("error: stopped by SIGINT before the first step "
                                          "had finished; nothing was saved")
  assert "Traceback" not in err and not workdir.exists()  # a failed start leaves nothing


@pytest.mark.slow
def test_a_failed_save_stops_the_run_there_and_keeps_the_last_checkpoint(tmp_path, capsys,
                                                                           monkeypatch):
  workdir = tmp_path / "run"
  trainer.disk_full_at(monkeypatch, workdir / "checkpoints" / "4")
  args = ["--workdir", str(workdir), *TINY_ARGS, "--set", "steps=8", "--set",
          "checkpoint_every=2", "--set", "log_every=1"]
  code = main.main(args)
  (err,) = _not_progress(capsys.readouterr().err)
  assert code == 1
  assert err.startswith(f"error: could not save checkpoint 4 in {workdir / 'checkpoints'}: "
                        "[Errno 28] No space left on device")
  assert "checkpoint 2 is intact" in err
  assert os.listdir(workdir / "checkpoints") == ["2"]  # the partial one is gone
  restored = ocp.StandardCheckpointer().restore(workdir / "checkpoints" / "2" / "default")
  assert int(restored["step"]) == 2
  assert [r["step"] for r in trainer.strict_json_lines(workdir / "metrics.jsonl")] == [1, 2, 3, 4]


@pytest.mark.parametrize("where,expected", [
    ("a_file", "is a file, or inside one, not a folder"),
    ("a_file/run", "is a file, or inside one, not a folder"),
    ("/sys/vsgd-optax-run", "cannot create the workdir /sys/vsgd-optax-run"),  # even for root
])
def test_an_unusable_workdir_is_refused_before_the_data_load(tmp_path, monkeypatch, capsys,
                                                             where, expected):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "a_file").write_text("")
  monkeypatch.setattr(train, "load_dataset", lambda config: pytest.fail("data loaded"))
  code = main.main(["--workdir", where])
  err = capsys.readouterr().err
  assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
  assert sorted(os.listdir(tmp_path)) == ["a_file"]


@pytest.mark.slow
def test_records_that_cannot_be_read_are_refused_or_named(tmp_path, capsys):
  workdir = tmp_path / "run"
  args = ["--workdir", str(workdir), *TINY_ARGS, "--set", "steps=4", "--set",
          "checkpoint_every=2", "--set", "log_every=1", "--set", "eval_every=4"]
  assert main.main(args + ["--stop-after", "2"]) == 0
  record = (workdir / "run.json").read_text()

  def refused() -> str:
    capsys.readouterr()
    code = main.main(args)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert os.listdir(workdir / "checkpoints") == ["2"]  # not resumed, not set aside
    assert not (workdir / "corrupt_checkpoints").exists()
    return err

  (workdir / "run.json").write_text(record[:len(record) // 2])  # cut short
  assert f"error: {workdir / 'run.json'} is unreadable (" in refused()
  (workdir / "run.json").unlink()
  err = refused()
  assert "holds checkpoints but no run.json" in err and "restore its run.json" in err
  (workdir / "run.json").write_text(record)
  # A damaged metrics line: the records before it are kept, with a warning.
  lines = open(workdir / "metrics.jsonl").readlines()
  (workdir / "metrics.jsonl").write_text(lines[0] + '{"step": 2, "train_lo\n' + lines[1])
  assert main.main(args) == 0
  err = capsys.readouterr().err
  warnings = [line for line in err.splitlines() if line.startswith("warning:")]
  assert warnings == [f"warning: {workdir / 'metrics.jsonl'} line 2 is not a metrics record "
                      "(Invalid control character at: line 1 column 22 (char 21)); "
                      "keeping the 1 records before it"]
  steps = [r["step"] for r in trainer.strict_json_lines(workdir / "metrics.jsonl")]
  assert steps == [1, 3, 4, 4]  # step 2's record was on the damaged line

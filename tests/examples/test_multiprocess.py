"""Two processes with one CPU device each train exactly as one process with two devices;
processes that disagree, never meet or are signalled stop together, in one line.

The processes are started as a user would start them (``python
examples/main.py`` with the cluster flags, from another directory), talk
through JAX's CPU collectives on 127.0.0.1, and are interrupted and resumed
halfway.
"""

import json
import os
import re
import signal
import socket
import subprocess

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from examples import configs
from examples import datasets
from examples import train
from tests.support import archives
from tests.support import evaluation
from tests.support import trainer

# Every test starts trainer processes.
pytestmark = pytest.mark.slow

# The default model, shrunk; a few dozen steps.
SETTINGS = ['model_kwargs={"dim": 16, "depth": 1, "kernel": 3, "patch": 1}',
            "learning_rate=0.05", "steps=24", "log_every=1", "eval_every=12",
            "checkpoint_every=12", "seed=7"]


def _run_two_processes(cwd, workdir: str, *extra: str) -> list[str]:
  """Runs the trainer as processes 0 and 1 of one run; returns their stdouts."""
  # One CPU device each; the compilation cache lets the resumed run skip compiling.
  env = dict(JAX_COMPILATION_CACHE_DIR=str(cwd / "jax_cache"),
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
  port = trainer.free_port()
  command = ["--workdir", workdir, "--num-processes", "2",
             "--coordinator-address", f"127.0.0.1:{port}", *extra]
  for item in SETTINGS:
    command += ["--set", item]
  procs = [trainer.start(cwd, *command, "--process-id", str(i), env=env) for i in range(2)]
  outputs = []
  try:
    for proc in procs:
      out, err = proc.communicate(timeout=240)
      assert proc.returncode == 0, err[-3000:]
      outputs.append(out)
  finally:
    for proc in procs:
      if proc.poll() is None:
        proc.kill()
  return outputs


def test_two_processes_equal_one_process_with_two_devices(tmp_path):
  config = configs.default()
  for item in SETTINGS:
    config = configs.parse_override(config, item)
  one = train.train_and_evaluate(config, str(tmp_path / "one"), progress=False,
                                 devices=jax.devices()[:2])

  # Half the run, then a resume from the checkpoint the two processes wrote.
  first = _run_two_processes(tmp_path, "two", "--stop-after", "12")
  assert "test accuracy" in first[0] and "test accuracy" not in first[1]  # process 0 reports
  assert sorted(os.listdir(tmp_path / "two" / "checkpoints")) == ["12"]
  second = _run_two_processes(tmp_path, "two")
  assert "(digits, convmixer, vsgd, 24 steps)" in second[0] and "accuracy" not in second[1]

  records = [json.loads(line) for line in open(tmp_path / "two" / "metrics.jsonl")]
  train_records = [r for r in records if "train_loss" in r]
  test_records = [r for r in records if "test_accuracy" in r]
  assert [r["step"] for r in train_records] == list(range(1, 25))  # each once
  assert [r["step"] for r in test_records] == [12, 24]
  expected = [json.loads(line) for line in open(tmp_path / "one" / "metrics.jsonl")]
  np.testing.assert_allclose([r["train_loss"] for r in train_records],
                             [r["train_loss"] for r in expected if "train_loss" in r], rtol=1e-6)
  expected_test = [r for r in expected if "test_accuracy" in r]
  assert ([r["test_accuracy"] for r in test_records]
          == [r["test_accuracy"] for r in expected_test])
  np.testing.assert_allclose([r["test_loss"] for r in test_records],
                             [r["test_loss"] for r in expected_test], rtol=1e-6)
  # Each test example counted once: the same share of the test split that the
  # final params classify right when all of it is evaluated in one batch.
  assert one["test_accuracy"] == pytest.approx(
      evaluation.direct_test_accuracy(config, one["state"]), abs=1e-9)

  restored = ocp.StandardCheckpointer().restore(
      tmp_path / "two" / "checkpoints" / "24" / "default",
      jax.tree.map(ocp.utils.to_shape_dtype_struct, one["state"]))
  assert int(restored.step) == 24
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
               restored.params, one["state"].params)


# Starting and stopping a multi-process run. Every process is bounded: a small
# --initialization-timeout, and a timeout on waiting for it.

TINY = ["--set", "model=tiny", "--set", "model_kwargs={}", "--set", "batch_size=8",
        "--initialization-timeout", "10"]


def _start(cwd, port: int, process_id: int, *args: str,
           num_processes: int = 2) -> subprocess.Popen:
  # Without the test session's persistent compilation cache: at jax 0.9.1 (the examples'
  # floor) two processes that read their step back from it never finish their first
  # step (seen on an AMD EPYC with AVX-512).
  return trainer.start(cwd, "--coordinator-address", f"127.0.0.1:{port}",
                       "--num-processes", str(num_processes), "--process-id", str(process_id),
                       *args, without=("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE"))


def _finish(proc: subprocess.Popen, seconds: float = 120.0) -> tuple[int, str]:
  return trainer.finish(proc, seconds)


def _last_line(err: str) -> str:
  return err.strip().splitlines()[-1] if err.strip() else ""


def _accepts(host: str, port: int) -> bool:
  try:
    socket.create_connection((host, port), timeout=2).close()
    return True
  except OSError:
    return False


def test_processes_with_different_settings_all_stop_naming_them(tmp_path):
  port = trainer.free_port()
  procs = [_start(tmp_path, port, i, "--workdir", "run", *TINY, "--seed", str(i),
                  "--steps", str(60 + 20 * i)) for i in range(2)]
  for i, proc in enumerate(procs):
    code, err = _finish(proc)
    assert code == 2 and "Traceback" not in err, err
    assert _last_line(err) == (
        f"error: the processes' settings differ in: seed, steps (process {i} has seed={i}, "
        f"steps={60 + 20 * i}); start every process with the same settings.")
  assert not (tmp_path / "run").exists()


def test_processes_that_cannot_meet_end_in_one_line(tmp_path):
  ports = [trainer.free_port() for _ in range(4)]
  with socket.create_server(("127.0.0.1", ports[2])) as taken, \
       socket.create_server(("127.0.0.1", ports[3])) as stranger:
    lone_0 = _start(tmp_path, ports[0], 0, *TINY, "--initialization-timeout", "6")
    lone_1 = _start(tmp_path, ports[1], 1, *TINY, "--initialization-timeout", "6")
    port_taken = _start(tmp_path, ports[2], 0, *TINY)
    to_a_stranger = _start(tmp_path, ports[3], 1, *TINY, "--initialization-timeout", "6")
    # While process 0 waits, it listens on the host it was given and no other.
    trainer.wait_for(lambda: _accepts("127.0.0.1", ports[0]), lone_0, 60)
    assert not _accepts("127.0.0.2", ports[0])
    stranger.settimeout(60)
    conn, _ = stranger.accept()  # answers what is not a coordinator's answer
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    results = [_finish(p) for p in (lone_0, lone_1, port_taken, to_a_stranger)]
    conn.close()
    del taken
  for code, err in results:
    assert code == 2 and len(err.strip().splitlines()) == 1, err
  assert results[0][1].strip() == (
      f"error: process 0 waited 6 s at 127.0.0.1:{ports[0]} for process(es) 1 of 2, which did "
      f"not come; start each with --coordinator-address 127.0.0.1:{ports[0]} --num-processes 2"
      " --process-id 1, or raise --initialization-timeout.")
  assert results[1][1].strip() == (
      f"error: process 1 waited 6 s for the coordinator (process 0) at 127.0.0.1:{ports[1]}; "
      f"start process 0 on that host with --coordinator-address 127.0.0.1:{ports[1]} "
      "--num-processes 2 --process-id 0, or raise --initialization-timeout.")
  assert results[2][1].strip() == (
      f"error: process 0 cannot host the coordinator at 127.0.0.1:{ports[2]}: port "
      f"{ports[2]} is in use (by another run?); choose a free port.")
  assert "something answers there, but not process 0 of a run" in results[3][1]


def _endless_pair(cwd, port: int, log_every: int, records: int) -> list[subprocess.Popen]:
  """Processes 0 and 1 of an endless run in ``cwd / "run"``, logging every
  ``log_every`` steps; returns them once ``records`` metrics lines are written.
  """
  endless = ["--set", "steps=1000000", "--set", f"log_every={log_every}", "--set",
             "eval_every=1000000", "--set", "checkpoint_every=1000000"]
  procs = [_start(cwd, port, i, "--workdir", "run", *TINY, *endless) for i in range(2)]
  metrics = cwd / "run" / "metrics.jsonl"
  trainer.wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= records,
                   procs, 120)
  return procs


def test_a_signal_to_one_process_stops_all_at_one_step_with_a_checkpoint(tmp_path):
  port = trainer.free_port()
  procs = _endless_pair(tmp_path, port, log_every=1, records=3)
  metrics = tmp_path / "run" / "metrics.jsonl"
  # JAX's coordinator, now up, listens on the host it was given and no other.
  assert _accepts("127.0.0.1", port) and not _accepts("127.0.0.2", port)
  procs[1].send_signal(signal.SIGTERM)
  results = [_finish(p) for p in procs]
  lines = [_last_line(err) for _, err in results]
  assert [code for code, _ in results] == [143, 143], results
  assert lines[0] == lines[1], lines
  stopped_at = int(re.fullmatch(r"stopped by SIGTERM at step (\d+): checkpoint \1 is saved in "
                                r".*; rerun the same command to resume\.", lines[0])[1])
  assert os.listdir(tmp_path / "run" / "checkpoints") == [str(stopped_at)]
  records = [json.loads(line) for line in open(metrics)]
  assert records[-1] == {"step": stopped_at, "interrupted": "SIGTERM"}
  # The checkpoint is whole: it restores, here onto one device.
  config = configs.Config(model="tiny", model_kwargs={}, batch_size=8)
  _, _, like = train.create_train_state(config, datasets.load_digits(config.seed))
  restored = ocp.StandardCheckpointer().restore(
      tmp_path / "run" / "checkpoints" / str(stopped_at) / "default",
      jax.tree.map(ocp.utils.to_shape_dtype_struct, like))
  assert int(restored.step) == stopped_at


def test_a_process_that_cannot_load_the_data_stops_every_process_naming_it(tmp_path):
  """data_dir may differ between hosts; one without the data must not leave the
  others waiting for it at their first collective.
  """
  data = tmp_path / "data"
  data.mkdir()
  archives.write_cifar(data)
  cifar = ["--set", "dataset=cifar100", "--set", "validation_size=8", "--set", "steps=4"]
  port = trainer.free_port()
  procs = [_start(tmp_path, port, i, "--workdir", "run", *TINY, *cifar, "--data-dir",
                  str(data if i == 0 else tmp_path / "elsewhere")) for i in range(2)]
  (code_0, err_0), (code_1, err_1) = [_finish(p, seconds=90) for p in procs]
  assert code_1 == 2 and len(err_1.strip().splitlines()) == 1, err_1
  assert _last_line(err_1).startswith("error: CIFAR-100 not found: expected ")
  assert code_0 == 2 and "Traceback" not in err_0, err_0
  assert _last_line(err_0) == ("error: process(es) 1 of this run could not start (their own "
                               "output says why); this process stops too.")
  assert not (tmp_path / "run").exists()


def test_several_processes_look_for_a_stop_only_at_steps_that_wait_anyway(tmp_path):
  """Gathering a stop flag is a collective that makes the host wait for the
  step: it happens at logged, evaluated or saved steps, so the run stops at
  the first such step after the signal, on every process alike.
  """
  port = trainer.free_port()
  procs = _endless_pair(tmp_path, port, log_every=7, records=2)
  metrics = tmp_path / "run" / "metrics.jsonl"
  procs[0].send_signal(signal.SIGTERM)
  results = [_finish(p) for p in procs]
  assert [code for code, _ in results] == [143, 143], results
  lines = [_last_line(err) for _, err in results]
  assert lines[0] == lines[1], lines
  stopped_at = int(re.match(r"stopped by SIGTERM at step (\d+):", lines[0])[1])
  assert stopped_at % 7 == 0, stopped_at
  records = [json.loads(line) for line in open(metrics)]
  assert records[-1] == {"step": stopped_at, "interrupted": "SIGTERM"}

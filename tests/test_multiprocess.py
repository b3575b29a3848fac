"""Two processes with one CPU device each train exactly as one process with two devices.

The processes are started as a user would start them (``python
examples/train.py`` with the cluster flags, from another directory), talk
through JAX's CPU collectives on 127.0.0.1, and are interrupted and resumed
halfway.
"""

import json
import os
import socket
import subprocess
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp

from examples import configs
from examples import train

TRAIN_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "examples", "train.py")
# The default model, shrunk; a few dozen steps.
SETTINGS = ['model_kwargs={"dim": 16, "depth": 1, "kernel": 3, "patch": 1}',
            "learning_rate=0.05", "steps=24", "log_every=1", "eval_every=12",
            "checkpoint_every=12", "seed=7"]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _run_two_processes(cwd, workdir: str, *extra: str) -> list[str]:
  """Runs the trainer as processes 0 and 1 of one run; returns their stdouts."""
  # One CPU device each; the compilation cache lets the resumed run skip compiling.
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS="--xla_force_host_platform_device_count=1",
             JAX_COMPILATION_CACHE_DIR=str(cwd / "jax_cache"),
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
  port = _free_port()
  command = [sys.executable, TRAIN_SCRIPT, "--workdir", workdir, "--num-processes", "2",
             "--coordinator-address", f"127.0.0.1:{port}", *extra]
  for item in SETTINGS:
    command += ["--set", item]
  procs = [subprocess.Popen(command + ["--process-id", str(i)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(2)]
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
  assert 0.0 <= one["test_accuracy"] <= 1.0  # each test example counted once

  restored = ocp.StandardCheckpointer().restore(
      tmp_path / "two" / "checkpoints" / "24" / "default",
      jax.tree.map(ocp.utils.to_shape_dtype_struct, one["state"]))
  assert int(restored.step) == 24
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
               restored.params, one["state"].params)

"""The device suite: its --quick run on the CPU covers every part, a part out of
time keeps what it wrote, and the results page shows a device's numbers.
"""

import json
import math
import os
import shutil
import sys

import pytest

from benchmarks import device_suite
from benchmarks import step_cost
from benchmarks.reporting import costs
from benchmarks.reporting import render
from examples import datasets
from tests.support import REPOSITORY
from vsgd_optax import _factored

ROOT = REPOSITORY


@pytest.fixture
def plain_cpu(monkeypatch):
  """The suite's processes see the one CPU device a user's machine has, not the
  eight that conftest.py asks XLA for.
  """
  flags = os.environ.get("XLA_FLAGS", "").replace("--xla_force_host_platform_device_count=8", "")
  monkeypatch.setenv("XLA_FLAGS", flags.strip())


@pytest.mark.slow  # each part in a subprocess
def test_quick_suite_runs_every_part_on_the_cpu(tmp_path, plain_cpu):
  out = tmp_path / "suite.json"
  device_suite.main(["--quick", "--out", str(out)])
  suite = json.loads(out.read_text())
  assert suite["quick"] and suite["machine"]["platform"] == "cpu"
  parts = suite["parts"]
  assert {name: part["status"] for name, part in parts.items()} == {
      "step_cost": "done", "train_step": "done", "trainer_synthetic": "done",
      "trainer_digits": "done"}

  rows = parts["step_cost"]["rows"]
  assert [(r["optimizer"], r["donated"]) for r in rows] == [
      (name, True) for name in device_suite.STEP_COST_OPTIMIZERS]
  # Bytes a parameter: Adam mu and nu, VSGD mu, b_g and b_ghat, Constant VSGD mu and
  # b_ghat, in float32 or bfloat16 (Adam's bfloat16 entry: mu only), plus a 4-byte
  # step count over 200,000 parameters.
  expected = {"adam": 8, "adam+bf16_mu": 6, "vsgd": 12, "vsgd+bf16_state": 6,
              "vsgd+bf16_nearest": 6, "constant_vsgd": 8}
  # The factored state's bytes, counted here from the same parameters' shapes
  # (in plain Python: this process's JAX must keep the eight devices it started
  # with, and plain_cpu has removed them from the environment): mu per element,
  # and float32 row and column means of two rates where a leaf factors, else the
  # full rates in mu's dtype.
  shapes = step_cost.network_like_shapes(200_000)
  count = sum(math.prod(s) for s in shapes.values())
  for name, mu_bytes in (("factored_vsgd", 4), ("factored_vsgd+bf16_mu", 2)):
    total = 4  # the step count
    for shape in shapes.values():
      axes = _factored.factored_axes(shape, 128)
      size = math.prod(shape)
      if axes is None:
        total += 3 * mu_bytes * size
      else:
        total += mu_bytes * size + 2 * 4 * (size // shape[axes[1]] + size // shape[axes[0]])
    expected[name] = total / count
  assert expected["factored_vsgd"] < 12 and expected["factored_vsgd+bf16_mu"] < 6
  for r in rows:
    assert r["state_bytes_per_param"] == pytest.approx(expected[r["optimizer"]], rel=1e-3)
    assert r["median_ms"] > 0 and r["ratio"] > 0

  (step,) = parts["train_step"]["rows"]
  assert parts["train_step"]["configs"] == {"cifar100_convmixer": "done"}
  assert step["model_kwargs"] == device_suite.QUICK_CONVMIXER and step["batch"] == 4
  assert step["vsgd_images_per_s"] == pytest.approx(4 / (step["vsgd_ms"] / 1e3))
  assert step["device_peak_mb"] is None  # the CPU keeps no device-memory statistics

  synthetic, digits = parts["trainer_synthetic"], parts["trainer_digits"]
  assert synthetic["synthetic"] and synthetic["config"]["dataset"] == "synthetic_cifar100"
  assert synthetic["config"]["bf16"] and synthetic["steps"] == 6
  assert not digits["synthetic"] and digits["config"]["dataset"] == "digits"
  assert digits["steps"] == 6
  # A share of the digits' test split: a whole number of its examples.
  n_test = len(datasets.load_digits().test_labels)
  assert digits["test_accuracy"] * n_test == pytest.approx(
      round(digits["test_accuracy"] * n_test), abs=1e-6)
  assert 0 < digits["test_accuracy"] <= 1
  for run in (synthetic, digits):
    assert run["images_per_second"] == pytest.approx(
        run["steps_per_second"] * run["config"]["batch_size"])

  # A smoke test's numbers never stand for a device's on the results page.
  shutil.copy(out, tmp_path / "device_suite.json")
  assert "## On an accelerator" not in render.appendix(str(tmp_path), ".")


@pytest.mark.slow  # subprocesses, one waited on for 10 s
def test_a_part_out_of_time_keeps_what_it_wrote_and_a_failure_says_why(tmp_path):
  part_out = str(tmp_path / "part.json")
  writes_then_hangs = ("import json, sys, time\n"
                       f"json.dump({{'rows': [1, 2]}}, open({part_out!r}, 'w'))\n"
                       "time.sleep(600)\n")
  result = device_suite.run_child([sys.executable, "-c", writes_then_hangs], part_out, 10)
  assert result["status"] == "timed out after 10 s" and result["rows"] == [1, 2]
  os.remove(part_out)
  fails = "raise RuntimeError('out of device memory')"
  result = device_suite.run_child([sys.executable, "-c", fails], part_out, 60)
  assert result["status"] == "failed: RuntimeError: out of device memory"
  assert "rows" not in result


def test_full_suite_refuses_a_cpu_and_writes_nothing(tmp_path, plain_cpu):
  out = tmp_path / "suite.json"
  with pytest.raises(SystemExit, match="found no accelerator .* --quick"):
    device_suite.main(["--out", str(out)])
  assert not out.exists()


def _gpu_suite() -> dict:
  """A small suite result as a GPU would write it (numbers made up for the test)."""
  step_rows = [
      {"params": p, "donated": True, "optimizer": o, "median_ms": ms, "ratio": ratio,
       "ratio_p25": ratio - 0.01, "ratio_p75": ratio + 0.01, "state_bytes_per_param": b}
      for p in (9_300_000, 50_000_000)
      for o, ms, ratio, b in (("adam", 1.0, 1.0, 8.0), ("vsgd", 1.25, 1.25, 12.0),
                              ("constant_vsgd", 1.05, 1.05, 8.0))]
  train_row = {"config": "cifar100_vgg16", "batch": 256, "adam_ms": 20.0, "vsgd_ms": 20.4,
               "ratio": 1.02, "ratio_p25": 1.01, "ratio_p75": 1.03, "control_ratio": 1.0,
               "control_ratio_p25": 0.99, "control_ratio_p75": 1.01,
               "adam_images_per_s": 12800.0, "vsgd_images_per_s": 12549.0,
               "device_peak_mb": 3210.0}
  trainer = {"status": "done", "elapsed_s": 30.0, "steps": 200, "wall_s": 25.0,
             "steps_per_second": 40.0, "images_per_second": 10240.0, "test_accuracy": 0.011,
             "train_loss": 4.6, "synthetic": True,
             "config": {"dataset": "synthetic_cifar100", "model": "convmixer",
                        "optimizer": "vsgd", "bf16": True, "batch_size": 256}}
  return {"quick": False, "budget_s": 470, "started": "2026-12-01T10:00:00+00:00",
          "elapsed_s": 400.0,
          "machine": {"date": "2026-12-01", "platform": "gpu", "device": "NVIDIA H100 80GB HBM3",
                      "cpu": "x", "cores": 16, "jax": "0.10.2"},
          "parts": {"step_cost": {"status": "done", "rows": step_rows},
                    "train_step": {"status": "incomplete", "rows": [train_row],
                                   "configs": {"cifar100_vgg16": "done",
                                               "cifar100_resnext18": "timed out after 35 s"}},
                    "trainer_synthetic": trainer,
                    "trainer_digits": {"status": "timed out after 70 s", "elapsed_s": 70.0}}}


def test_the_appendix_shows_the_device_suite(tmp_path):
  suite = _gpu_suite()
  suite["notes"] = ["cifar100_resnext18 was measured again alone."]
  (tmp_path / "device_suite.json").write_text(json.dumps(suite))
  page = render.appendix(str(tmp_path), ".")
  section = page[page.index("## On an accelerator: the device suite"):]
  assert "Device: NVIDIA H100 80GB HBM3 (gpu, 16 cores), jax 0.10.2, 2026-12-01" in section
  assert ("Not finished: train_step (incomplete); trainer_digits (timed out after 70 s). "
          "cifar100_resnext18 was measured again alone.") in section
  # The optimizer step, timed call by call, stays in the JSON.
  assert "| 9,300,000 |" not in section and "step_cost rows stay in `device_suite.json`" in section
  assert ("| cifar100_vgg16 | 256 | 20.0, 12,800 | 20.4, 12,549 | 1.020 (1.010-1.030); "
          "1.000 (0.990-1.010) | 3,210 |") in section
  assert "Not measured: cifar100_resnext18 (timed out after 35 s)." in section
  assert ("| synthetic_cifar100 / convmixer / vsgd / bf16 | 200 | 256 | 10,240 | 25 | "
          "1.1% (random data: meaningless) |") in section
  assert "| trainer_digits | timed out after 70 s |" in section


def test_the_step_cost_table_names_its_machine_and_its_load(tmp_path):
  rows = [{"params": 1_000_000, "donated": d, "optimizer": o, "median_ms": ms, "ratio": ms / 2,
           "ratio_p25": ms / 2, "ratio_p75": ms / 2, "state_bytes_per_param": b,
           "compile_s": 0.1}
          for d in (False, True)
          for o, ms, b in (("adam", 2.0, 8.0), ("vsgd", 3.0, 12.0))]
  machine = {"date": "2026-11-26", "platform": "cpu", "device": "cpu", "cpu": "x", "cores": 2,
             "jax": "0.10.2"}
  (tmp_path / "step_cost.json").write_text(json.dumps(
      {"machine": machine, "load_average": {"start": [5.5, 5.0, 3.0], "end": [6.0, 5.9, 4.0]},
       "rows": rows}))
  section = "\n".join(costs.step_cost_section(str(tmp_path), "."))
  assert ("Machine: x CPU, 2 cores, jax 0.10.2, 2026-11-26; load average (1, 5, 15 "
          "min) 5.5/5.0/3.0 at the start and 6.0/5.9/4.0 at the end.") in section
  assert "| 1,000,000, True | vsgd | 3.00, 1.50 (1.50-1.50) | 12 | 0.10 | - |" in section
  assert "## Step cost" in render.appendix(str(tmp_path), ".")


def test_every_part_times_out_and_the_suite_still_ends_within_its_budget(tmp_path, monkeypatch):
  """Each part runs to its limit (a simulated clock, advanced by each part's limit):
  the suite ends at its budget, the train steps share what is left, and the
  JSON keeps what the parts wrote before they were stopped.
  """
  clock, calls = [0.0], []

  def times_out(command, part_out, timeout_s):
    part = command[command.index("--part") + 1]
    calls.append((part, timeout_s))
    clock[0] += timeout_s
    if part == "machine":
      return {"status": "done", "elapsed_s": timeout_s,
              "machine": {"date": "2026-12-01", "platform": "gpu", "device": "NVIDIA H100",
                          "cpu": "x", "cores": 16, "jax": "0.10.2"}}
    return {"status": f"timed out after {timeout_s:.0f} s", "elapsed_s": timeout_s,
            "rows": [{"part": part}]}
  monkeypatch.setattr(device_suite, "run_child", times_out)
  monkeypatch.setattr(device_suite.time, "perf_counter", lambda: clock[0])
  out = tmp_path / "suite.json"
  device_suite.main(["--out", str(out)])

  limits = {part: limit[0] for part, limit in device_suite.PART_LIMITS_S.items()}
  assert [part for part, _ in calls] == ["machine", "step_cost", "trainer_synthetic",
                                         "trainer_digits", *["train_step"] * 6]
  assert [t for _, t in calls[:4]] == [limits[p] for p, _ in calls[:4]]
  # 560 s less 60 + 180 + 90 + 70 leaves 160 s: 26.7 s for each of the six configs.
  assert [t for _, t in calls[4:]] == pytest.approx([160 / 6] * 6)
  assert clock[0] == pytest.approx(device_suite.BUDGET_S[False])
  suite = json.loads(out.read_text())
  assert suite["parts"]["trainer_digits"] == {
      "status": "timed out after 70 s", "elapsed_s": 70, "rows": [{"part": "trainer_digits"}]}
  assert suite["parts"]["train_step"]["status"] == "incomplete"
  assert len(suite["parts"]["train_step"]["rows"]) == 6
  assert set(suite["parts"]["train_step"]["configs"].values()) == {"timed out after 27 s"}

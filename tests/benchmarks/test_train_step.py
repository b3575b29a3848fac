"""The train-step benchmark's quick mode runs and writes its results; its flags.

Speeds are not asserted here (they belong to the benchmark reports).
"""

import argparse
import json

import pytest

from benchmarks import train_step


@pytest.mark.slow  # times repeated train steps of both optimizers
def test_train_step_quick(tmp_path):
  out = str(tmp_path / "ts")
  train_step.main(["--quick", "--repeats", "1", "--out", out])
  row = json.load(open(out + ".json"))["rows"][0]
  assert row["config"] == "cifar100_convmixer" and row["model"] == "convmixer"
  assert row["image_size"] == 32 and row["batch"] == 4 and row["ratio"] > 0
  # The control (a second Adam step) is timed in the same rounds as the other two.
  assert row["control_ratio_p25"] <= row["control_ratio_p75"] and row["control_ratio"] > 0
  # Both optimizers' compiled steps hold at least the params and the batch.
  params_mb = 617_316 * 4 / 1e6
  assert row["adam_xla_peak_mb"] > params_mb and row["vsgd_xla_peak_mb"] > params_mb
  assert not (tmp_path / "ts.png").exists()  # the runner writes JSON alone

def test_train_step_batch_is_a_positive_count_or_the_papers():
  assert train_step._batch_arg("paper") == "paper"
  assert train_step._batch_arg("16") == 16
  for bad in ("0", "-3", "eight", "2.5"):
    with pytest.raises(argparse.ArgumentTypeError, match="positive integer or 'paper'"):
      train_step._batch_arg(bad)

"""The runners that no other test runs, each in its quick form: a runner that
rots (a renamed function, a changed config) fails here, not on the next
person who runs it.
"""

import json
import math

import pytest

from benchmarks import prefetch_speed
from benchmarks import process_step


@pytest.mark.slow
def test_prefetch_speed_runs_and_gives_a_ratio():
  ratios = prefetch_speed.main(["--quick"])
  assert list(ratios) == ["tiny"] and len(ratios["tiny"]) == 1
  ratio = ratios["tiny"][0]
  assert math.isfinite(ratio) and 0.1 < ratio < 10.0  # steps/s with prefetch over without


@pytest.mark.slow
def test_process_step_runs_two_processes_and_writes_its_json(tmp_path):
  out = tmp_path / "process_step.json"
  result = process_step.main(["--rounds", "1", "--steps", "75", "--out", str(out)])
  written = json.loads(out.read_text())
  assert written["rounds"] == result["rounds"] and len(written["rounds"]) == 1
  row = written["rounds"][0]
  assert row["one_process"] > 0 and row["two_processes"] > 0
  assert written["ratio_median"] == pytest.approx(row["two_processes"] / row["one_process"])
  assert written["steps"] == 75 and written["machine"]["platform"] == "cpu"

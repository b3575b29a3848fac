"""The runners that no other test runs, each in its quick form: a runner that
rots (a renamed function, a changed config) fails here, not on the next
person who runs it.
"""

import json
import math

import pytest

from benchmarks import prefetch_speed
from benchmarks import process_step
from benchmarks.contest import cost as contest_cost


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


@pytest.mark.slow
def test_contest_cost_runs_and_counts_each_state(tmp_path):
  out = tmp_path / "cost.json"
  result = contest_cost.main(["--quick", "--out", str(out)])
  rows = {r["optimizer"]: r for r in json.loads(out.read_text())["rows"]}
  assert rows.keys() == set(contest_cost.NAMES) and result["size"] == "smoke"
  assert rows["muon"]["ratio"] == 1.0 and rows["muon"]["compile_vs_muon"] == 1.0
  # Every VSGD-Muon keeps VSGD's three arrays where Muon keeps one momentum: the
  # variants change what is orthogonalized, not the state; the factored one keeps
  # its rates whole too at the smoke size, whose matrices (16 wide) are under the
  # 128 at which it factors.
  bytes_of = {n: r["state_bytes_per_param"] for n, r in rows.items()}
  assert all(bytes_of[n] == bytes_of["vsgd_muon"] for n in contest_cost.NAMES[1:])
  assert bytes_of["vsgd_muon"] > bytes_of["muon"]
  assert all(r["median_ms"] > 0 and math.isfinite(r["ratio"]) for r in rows.values())

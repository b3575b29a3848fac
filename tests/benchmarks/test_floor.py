"""``benchmarks.floor``: each state's floor, its counted work an element, and the
bounds CI holds it to.
"""

import os

import pytest

from benchmarks import common
from benchmarks import floor
from tests.support import REPOSITORY


def test_the_floors_are_the_bytes_an_ideal_step_moves():
  # float32 params read and written, the gradient read, each state array read and written
  assert floor.FLOOR_BYTES["adam"] == 28 and floor.FLOOR_BYTES["vsgd"] == 36
  assert floor.FLOOR_BYTES["vsgd+bf16_state"] == floor.FLOOR_BYTES["adam+bf16_mu"] == 24
  assert floor.FLOOR_BYTES["factored_vsgd"] == 20  # mu alone is per element
  assert set(floor.FLOOR_BYTES) == set(floor.BOUNDS)


def test_every_state_is_within_its_bound_on_a_small_tree(capsys):
  floor.main(["--check"])  # raises SystemExit naming a state past its bound
  printed = capsys.readouterr().out
  assert all(name in printed for name in floor.BOUNDS)


def test_a_count_past_its_bound_is_named():
  result = {"rows": [{"state": "vsgd", "flops_per_element": 60.0, "bytes_per_element": 88.0,
                      "bound": [48, 93]},
                     {"state": "adam", "flops_per_element": 13.0, "bytes_per_element": 40.0,
                      "bound": [14, 42]}]}
  assert floor.over_bounds(result) == ["vsgd: 60.0 flops and 88.0 bytes an element, bound 48 "
                                       "and 93"]


def test_the_committed_table_holds_every_state_with_its_machine():
  result = common.load(os.path.join(REPOSITORY, common.RESULTS), "floor")
  assert result is not None, "python -m benchmarks.floor writes it"
  assert {r["state"] for r in result["rows"]} == set(floor.BOUNDS)
  assert result["machine"]["platform"] == "cpu" and not floor.over_bounds(result)
  by = {r["state"]: r for r in result["rows"]}
  assert by["vsgd"]["floor_vs_adam"] == pytest.approx(36 / 28)
  # The stochastic rounding moves no more bytes than rounding to nearest.
  # (Its seeds' few scalar bytes aside.)
  assert by["vsgd+bf16_state"]["bytes_per_element"] == pytest.approx(
      by["vsgd+bf16_nearest"]["bytes_per_element"], rel=1e-4)


def test_the_gpu_counts_come_from_a_gpu_run_alone(tmp_path):
  machine = {"date": "2026-11-28", "platform": "cpu", "device": "cpu", "cpu": "x", "cores": 2,
             "jax": "0.10.2"}
  counts = {"vsgd": {"flops_per_element": 37.0, "bytes_per_element": 36.0}}
  assert floor.gpu_counts(str(tmp_path)) == ({}, None)  # no run
  for platform, quick, found in (("cpu", False, False), ("gpu", True, False), ("gpu", False, True)):
    common.write_json(str(tmp_path / "gpu_ablation.json"),
                      {"machine": {**machine, "platform": platform}, "quick": quick,
                       "counts": counts})
    got, on = floor.gpu_counts(str(tmp_path))
    assert (got, on is not None) == ((counts, True) if found else ({}, False))

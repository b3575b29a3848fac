"""``python -m benchmarks.cost``: its sections, each state's floor and the bounds on
its counted work, the memory counts, and the committed parts.
"""

import os

import pytest

from benchmarks import common
from benchmarks.cost import __main__ as cost
from benchmarks.cost import compile as compile_time
from benchmarks.cost import floor
from benchmarks.cost import memory
from benchmarks.time_to_result import workloads
from tests.support import REPOSITORY

RESULTS = os.path.join(REPOSITORY, common.RESULTS)


def test_the_floors_are_the_bytes_an_ideal_step_moves():
  # float32 params read and written, the gradient read, each state array read and written
  assert floor.FLOOR_BYTES["adam"] == 28 and floor.FLOOR_BYTES["vsgd"] == 36
  assert floor.FLOOR_BYTES["vsgd+bf16_state"] == floor.FLOOR_BYTES["adam+bf16_mu"] == 24
  assert floor.FLOOR_BYTES["factored_vsgd"] == 20  # mu alone is per element
  assert set(floor.FLOOR_BYTES) == set(floor.BOUNDS)


def test_every_state_is_within_its_bound_on_a_small_leaf():
  rows = floor.measure(128)
  assert {r["state"] for r in rows} == set(floor.BOUNDS)
  assert floor.over_bounds(rows) == []
  by = {r["state"]: r for r in rows}
  # The stochastic rounding moves no more bytes than rounding to nearest.
  assert by["vsgd+bf16_state"]["bytes_per_element"] == pytest.approx(
      by["vsgd+bf16_nearest"]["bytes_per_element"], rel=1e-3)


def test_a_count_past_its_bound_is_named():
  rows = [{"state": "vsgd", "flops_per_element": 60.0, "bytes_per_element": 88.0},
          {"state": "adam", "flops_per_element": 13.0, "bytes_per_element": 40.0}]
  assert floor.over_bounds(rows) == [
      f"vsgd: 60.0 flops and 88.0 bytes an element, bound {floor.BOUNDS['vsgd'][0]} and "
      f"{floor.BOUNDS['vsgd'][1]}"]


@pytest.mark.slow  # every section, small; the memory counts are checked here too
def test_the_quick_command_writes_every_section(tmp_path):
  out = tmp_path / "cost.json"
  result = cost.main(["--quick", "--out", str(out)])
  assert result["part"] == "cpu" and common.read_json(str(out))["part"] == "cpu"
  assert {r["method"] for r in result["step"]} == {"per call", "donated per call"}
  adam = [r for r in result["step"] if r["optimizer"] == "adam"]
  assert adam and all(r["ratio"] == 1.0 for r in adam)
  assert {r["optimizer"] for r in result["compile"]} == set(compile_time.STATES)
  family = {r["optimizer"]: r for r in result["muon_family"]["rows"]}
  assert family["muon"]["ratio"] == 1.0 and family["muon"]["compile_vs_muon"] == 1.0
  # VSGD-Muon keeps VSGD's three arrays where Muon keeps one momentum (the smoke
  # size's 16-wide matrices are under the 128 at which the factored form factors).
  assert family["vsgd_muon"]["state_bytes_per_param"] > family["muon"]["state_bytes_per_param"]
  # The memory section (the paper's models and every small workload, built abstractly).
  square = result["memory"]["rows"][0]
  assert square["title"] == "1024 x 1024 matrix" and square["factored_share"] == 1.0
  held = square["bytes_per_param"]
  assert held["adam"] == 8 and held["vsgd"] == 12 and held["vsgd+bf16_state"] == 6
  assert held["muon"] == pytest.approx(4.0, abs=1e-4)
  # mu and the two rates' row and column means: 4 + 2 * 2 * 1024 * 4 / 1024**2 bytes.
  assert held["factored_vsgd"] == held["vsgd_muon_factored"] == pytest.approx(4 + 16 / 1024)
  shares = result["memory"]["workload_shares"]
  assert all(shares[name] == 0 for name in workloads.names())
  assert all(shares[name] > 0.5 for name in workloads.wide_names())


def test_the_committed_parts_hold_every_section_with_their_machines():
  for part, sections in (("cpu", ("step", "cpu_form", "compile", "floor", "memory",
                                  "muon_family")), ("gpu", ("step", "compile", "floor"))):
    held = common.load(RESULTS, f"cost_{part}")
    assert held is not None and held["part"] == part and not held["quick"], part
    assert set(sections) <= set(held), part
    assert (held["machine"]["platform"] == "cpu") == (part == "cpu")
    methods = {r["method"] for r in held["step"]}
    assert methods == ({"per call", "donated per call"} if part == "cpu"
                       else {"per call", "in one program"})


@pytest.mark.parametrize("model", memory.MODELS)
def test_the_memory_tables_models_are_the_example_trainers_leaf_for_leaf(model):
  """The shapes the memory table counts are the parameters of the trainer's models
  (for CIFAR-100), one leaf for each, so its bytes a parameter are theirs.
  """
  import jax
  from flax import nnx

  from examples import models
  params = nnx.eval_shape(lambda: nnx.state(models.create_model(model, num_classes=100),
                                            nnx.Param))
  theirs = sorted((leaf.shape, leaf.dtype) for leaf in jax.tree.leaves(params))
  ours = sorted((leaf.shape, leaf.dtype) for leaf in memory.model_params(model).values())
  assert ours == theirs


def test_an_interrupted_cost_resumes_section_by_section(tmp_path, monkeypatch):
  """Each section is kept as it finishes: a second command measures only what the first
  did not finish, and its result file holds every section; its ledger then goes.
  """
  from benchmarks.cost import protocol
  calls, stop_at = [], ["floor"]

  def section(name, output):
    def measure():
      calls.append(name)
      if name in stop_at:
        raise KeyboardInterrupt  # the operator stops the command here
      return output
    return measure

  row = {"params": 10, "method": "per call", "optimizer": "adam", "median_ms": 1.0,
         "ratio": 1.0, "ratio_p25": 1.0, "ratio_p75": 1.0}
  outputs = {f"step {size}": [row] for size in protocol.sizes(True)}
  outputs |= {"compile": [{"optimizer": "adam"}], "floor": [{"state": "adam"}],
              "memory": {"rows": []}, "muon_family": {"rows": []}}
  monkeypatch.setattr(protocol, "sections",
                      lambda part, quick: {k: section(k, v) for k, v in outputs.items()})
  out = tmp_path / "cost.json"
  with pytest.raises(KeyboardInterrupt):
    cost.main(["--quick", "--out", str(out)])
  assert not out.exists()
  calls.clear()
  stop_at.clear()
  result = cost.main(["--quick", "--out", str(out)])
  assert calls == ["floor", "memory", "muon_family"]  # the steps and compile were kept
  assert result["step"] == [row] and result["floor"] == [{"state": "adam"}]
  assert common.read_json(str(out))["compile"] == [{"optimizer": "adam"}]
  assert not (tmp_path / "runs").exists()

"""The time-to-result harness: its tuning protocol end to end in the quick mode,
its refusal to mix schedules, and its runs against independent references.
"""

import dataclasses
import json
import os

import jax
import numpy as np
import optax
import pytest

from benchmarks.reporting import reading
from benchmarks.reporting import small
from benchmarks.time_to_result import cli
from benchmarks.time_to_result import harness
from benchmarks.time_to_result import protocol
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import trainer
from benchmarks.time_to_result import workloads
from tests.support import REPOSITORY


@pytest.mark.slow  # trains two workloads' grids
def test_time_to_result_quick(tmp_path):
  # At the quick sizes every workload takes the same path through the protocol;
  # the MLP's adds the per-example entry. Each workload's build has its own tests.
  ran = ["mlp", "logreg"]
  root = str(tmp_path / "ttr")
  cli.main(["--quick", "--workloads", *ran, "--entries", "vsgd", "--out", root])
  out = os.path.join(root, "warmup_cosine")  # the main protocol's folder
  # The run writes JSON alone; the page is the reporting's.
  assert not [f for f in os.listdir(out) if not f.endswith(".json")]
  for name in ran:
    payload = json.load(open(os.path.join(out, f"ttr_{name}.json")))
    steps = payload["workload"]["steps"]
    assert payload["schedule"] == {
        "name": "warmup_cosine", "title": schedules.TITLES["warmup_cosine"],
        "warmup_steps": max(1, round(0.05 * steps)), "decay_steps": steps, "end_value": 0.0}
    entries = payload["entries"]
    assert set(entries) == ({"vsgd", "vsgd+per_example"} if name == "mlp" else {"vsgd"})
    for e in entries.values():
      # the best rate lay on the 2-point grid's edge, so the grid grew by one point
      assert len(e["tuning"]["learning_rate"]) == 3
      assert e["learning_rate"] in e["tuning"]["learning_rate"]
      assert len(e["test"]) == len(e["seeds"]) == len(set(e["seeds"])) >= 2
      assert e["test_mean"] == pytest.approx(np.mean(e["test"]))
      assert e["test_std"] == pytest.approx(np.std(e["test"], ddof=1))
      # rates are tuned on seeds that are never reported
      assert e["tuning"]["seeds"] == list(protocol.TUNING_SEEDS)
      assert not set(e["seeds"]) & set(e["tuning"]["seeds"])
      assert e["tuning"]["grown"] == [lr for lr in e["tuning"]["learning_rate"]
                                      if lr not in e["tuning"]["grid"]]
      assert np.asarray(e["curves"]["val"]).shape == (len(e["seeds"]), 2)
      assert e["step_ms"] > 0 and e["ratio"] > 0
  assert not os.path.exists(os.path.join(root, "ttr_mlp.json"))  # no constant results
  # The reporting reads them: a row a workload in the rates the guide gives.
  table = small.rates_table({"warmup_cosine": reading.load_protocol(root, "warmup_cosine")})
  assert len(table.splitlines()) == 2  # header and rule: no Adam ran, so no rate ratio
  assert small.start_rate(reading.load_protocol(root, "warmup_cosine")) is not None


def test_time_to_result_refuses_to_mix_schedules(tmp_path):
  """A folder holding one schedule's results is never written with another's."""
  root = tmp_path / "ttr"
  root.mkdir()
  held = root / "ttr_logreg.json"
  held.write_text(json.dumps({"schedule": {"name": "warmup_cosine"},
                              "workload": {"name": "logreg"}}))
  with pytest.raises(SystemExit):
    cli.main(["--quick", "--schedule", "constant", "--workloads", "logreg",
                         "--entries", "vsgd", "--out", str(root)])
  assert sorted(p.name for p in root.iterdir()) == ["ttr_logreg.json"]
  # The results page refuses such a folder too, naming the file.
  with pytest.raises(ValueError, match="ttr_logreg.json"):
    reading.load_protocol(str(root), "constant")

@pytest.mark.slow
def test_steps_to_target_is_the_first_evaluation_that_meets_it():
  w = workloads.build("logreg", quick=True)
  lower = dataclasses.replace(w, target=0.5, eval_every=10)
  assert protocol.steps_to_target(lower, [0.9, 0.6, 0.5, 0.4]) == 30
  assert protocol.steps_to_target(lower, [0.9, float("nan"), 0.6]) is None
  higher = dataclasses.replace(lower, higher_is_better=True, target=0.95)
  assert protocol.steps_to_target(higher, [0.5, 0.96, 0.9]) == 20

@pytest.mark.slow  # trains a workload twice
def test_vmapped_runs_equal_runs_trained_alone():
  """Per-example VSGD on the MLP: two lanes of one vmapped sweep give what each
  run gives on its own.
  """
  w = workloads.build("mlp", quick=True)
  side_by_side = trainer.Trainer(w, "vsgd+per_example")
  both = side_by_side([1e-3, 3e-2], [0, 5])
  alone = trainer.Trainer(w, "vsgd+per_example")
  for lane, (lr, seed) in enumerate([(1e-3, 0), (3e-2, 5)]):
    one = alone([lr], [seed])
    np.testing.assert_allclose(both["val"][lane], one["val"][0], rtol=1e-5)
    np.testing.assert_allclose(both["train_loss"][lane], one["train_loss"][0], rtol=1e-4)

@pytest.mark.slow  # trains a workload twice
def test_scanned_run_equals_a_plain_python_loop():
  """Logistic regression with Adam: the harness's run against optax by hand."""
  w = workloads.build("logreg", quick=True)
  out = trainer.Trainer(w, "adam")([1e-2], [3])
  init_key, data_key = jax.random.split(jax.random.key(3))
  params, aux = w.init(init_key)
  opt = optax.adam(1e-2)
  state = opt.init(params)
  grad_fn = jax.jit(jax.grad(lambda p, key: w.loss(p, aux, w.data, key)[0]))
  val = []
  for i, key in enumerate(jax.random.split(data_key, w.steps)):
    grads = grad_fn(params, key)
    updates, state = opt.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    if (i + 1) % w.eval_every == 0:
      val.append(float(w.validate(params, aux, w.data)))
  np.testing.assert_allclose(out["val"][0], val, rtol=1e-4)
  assert out["test"][0] == pytest.approx(val[-1], rel=1e-4)


def test_window_is_on_the_harness_half_decades():
  assert protocol.window(1e-2, 1) == (0.00316, 0.01, 0.0316)
  assert protocol.window(3.16e-3, 1) == (0.001, 0.00316, 0.01)
  assert set(protocol.window(3.16e-4, 2)) <= set(harness.FINE_GRID)


def test_last_rate_reads_the_schedule_then_the_constant_run(tmp_path):
  def write(folder, rates):
    folder.mkdir(parents=True, exist_ok=True)
    entries = {name: {"learning_rate": lr} for name, lr in rates.items()}
    (folder / "ttr_convmixer.json").write_text(json.dumps({"entries": entries}))
  write(tmp_path, {"vsgd": 0.1, "lion": 0.001})
  write(tmp_path / "warmup_cosine", {"vsgd": 0.01})
  assert protocol.last_rate(str(tmp_path), "warmup_cosine", "convmixer", "vsgd") == 0.01
  # lion never ran the ConvMixer under the schedule: the constant run's rate
  assert protocol.last_rate(str(tmp_path), "warmup_cosine", "convmixer", "lion") == 0.001
  assert protocol.last_rate(str(tmp_path), "warmup_cosine", "convmixer", "no_such") is None


@pytest.mark.slow
def test_run_workload_starts_each_entry_from_its_own_window():
  workload = dataclasses.replace(workloads.build("logreg", quick=True), steps=4)
  window = protocol.window(1e-2, 1)
  payload = protocol.run_workload(workload, ["vsgd"], True, "warmup_cosine", seeds=2,
                                  grids={"vsgd": window})
  e = payload["entries"]["vsgd"]
  assert payload["workload"]["steps"] == 4
  assert payload["schedule"]["decay_steps"] == 4
  assert e["tuning"]["grid"] == list(window)
  assert e["tuning"]["seeds"] == [1000, 1001, 1002] and e["seeds"] == [0, 1]
  assert np.asarray(e["curves"]["val"]).shape == (2, 1)
  assert set(e["tuning"]["learning_rate"]) >= set(window)
  # an entry whose name holds a "+" starts from its own window, not from that of
  # the name before the "+" (Adafactor with momentum is not a variant of an entry
  # "adafactor"), nor from the whole grid
  grids = {"adafactor+momentum": protocol.window(1e-1, 1), "vsgd": window}
  payload = protocol.run_workload(workload, ["adafactor+momentum"], True, "warmup_cosine",
                                  seeds=2, grids=grids)
  assert payload["entries"]["adafactor+momentum"]["tuning"]["grid"] == [0.0316, 0.1, 0.316]


def test_window_centre_falls_back_on_the_base_workload_and_optimizer(tmp_path):
  def write(folder, workload, rates):
    folder.mkdir(parents=True, exist_ok=True)
    entries = {name: {"learning_rate": lr} for name, lr in rates.items()}
    (folder / f"ttr_{workload}.json").write_text(json.dumps({"entries": entries}))
  write(tmp_path / "warmup_cosine", "charlm", {"vsgd": 0.01, "adam": 0.00316})
  centre = lambda w, n: protocol.window_centre(str(tmp_path), "warmup_cosine", w, n)  # noqa: E731
  assert centre("charlm", "factored_vsgd") == 0.01  # vsgd's rate, the optimizer it varies
  assert centre("charlm_wide", "adam") == 0.00316  # the narrower workload's rate
  assert centre("charlm_wide", "schedule_free_vsgd+short_mean") == 0.01
  assert centre("charlm_wide", "lion") is None  # no rate anywhere: the harness's grid


def test_add_refuses_a_missing_file_or_an_entry_already_there(tmp_path, capsys):
  root = tmp_path / "ttr"
  folder = root / "warmup_cosine"
  folder.mkdir(parents=True)
  held = {"schedule": {"name": "warmup_cosine"}, "workload": {"name": "logreg"},
          "entries": {"vsgd": {"learning_rate": 0.01}}}
  (folder / "ttr_logreg.json").write_text(json.dumps(held))
  before = (folder / "ttr_logreg.json").read_text()
  for workload, entries, says in (("logreg", ["vsgd"], "already holds vsgd"),
                                  ("mlp", ["adam"], "does not exist")):
    with pytest.raises(SystemExit):
      cli.main(["--add", "--workloads", workload, "--entries", *entries,
                     "--out", str(root)])
    assert says in capsys.readouterr().err
  with pytest.raises(SystemExit):
    cli.main(["--add", "--workloads", "logreg", "--out", str(root)])
  assert "--add needs --entries" in capsys.readouterr().err
  assert (folder / "ttr_logreg.json").read_text() == before
  assert sorted(p.name for p in folder.iterdir()) == ["ttr_logreg.json"]


def test_added_entries_join_the_held_ones_and_leave_them_as_they_were():
  held = {"machine": "m0", "wall_s": 5.0, "entries": {"vsgd": {"test": [1.0]}}}
  new = {"machine": "m1", "wall_s": 2.0, "entries": {"factored_vsgd": {"test": [2.0]}}}
  merged = cli._added(held, new)
  assert merged["entries"] == {"vsgd": {"test": [1.0]}, "factored_vsgd": {"test": [2.0]}}
  assert merged["wall_s"] == 5.0 and merged["machine"] == "m0"
  assert merged["added"] == [{"entries": ["factored_vsgd"], "machine": "m1", "wall_s": 2.0}]
  assert held["entries"] == {"vsgd": {"test": [1.0]}}  # not changed in place


def test_wide_refuses_another_schedule(capsys):
  for extra in (["--schedule", "constant"], ["--long-horizon"]):
    with pytest.raises(SystemExit):
      cli.main(["--wide", *extra])
    assert "--wide runs the main protocol's schedule" in capsys.readouterr().err


@pytest.mark.slow  # trains a wide workload, tiny
def test_wide_quick_writes_a_wide_workload_with_its_same_rate_run(tmp_path):
  # One wide workload: at the quick sizes each takes the same path.
  root = str(tmp_path / "wide")
  cli.main(["--wide", "--quick", "--workloads", "mlp_wide",
                 "--entries", "vsgd", "factored_vsgd", "--out", root])
  payload = json.load(open(os.path.join(root, "warmup_cosine", "ttr_mlp_wide.json")))
  assert set(payload["entries"]) == {"vsgd", "factored_vsgd"}
  run = payload["same_rate"]["factored_vsgd"]
  vsgd = payload["entries"]["vsgd"]
  assert run["base"] == "vsgd" and run["learning_rate"] == vsgd["learning_rate"]
  assert run["seeds"] == vsgd["seeds"] and len(run["test"]) == len(vsgd["seeds"])
  assert all(np.isfinite(run["test"]))


@pytest.mark.slow  # trains the logistic workload's quick protocol twice
def test_same_rate_adds_what_a_result_file_lacks_and_gives_what_a_full_run_gives(
    tmp_path, capsys):
  root = str(tmp_path)
  cli.main(["--quick", "--workloads", "logreg", "--entries", "vsgd", "vsgd+bf16_state",
                 "--out", root])
  path = os.path.join(root, "warmup_cosine", "ttr_logreg.json")
  full = json.load(open(path))
  run = full["same_rate"]["vsgd+bf16_state"]
  assert run["learning_rate"] == full["entries"]["vsgd"]["learning_rate"]
  assert run["seeds"] == full["entries"]["vsgd"]["seeds"]
  # a file from before the same-rate runs: --same-rate adds them, the rest untouched
  lacking = {k: v for k, v in full.items() if k != "same_rate"}
  with open(path, "w") as f:
    json.dump(lacking, f)
  cli.main(["--quick", "--same-rate", "--workloads", "logreg", "--out", root])
  added = json.load(open(path))
  assert added["entries"] == full["entries"]
  # the same runs, though vmapped beside other lanes there and alone here: equal
  # to float32 rounding, as test_vmapped_runs_equal_runs_trained_alone allows
  np.testing.assert_allclose(added["same_rate"]["vsgd+bf16_state"]["test"], run["test"],
                             rtol=1e-5)
  assert added["same_rate"]["vsgd+bf16_state"]["seeds"] == run["seeds"]
  with pytest.raises(SystemExit):
    cli.main(["--quick", "--same-rate", "--workloads", "mlp", "--out", root])
  assert "ttr_mlp.json does not exist: --same-rate adds runs" in capsys.readouterr().err


def test_each_run_record_names_the_tuning_seeds_its_workloads_used():
  """A run record's ``tuning_seeds`` are those its workloads' result files hold (a
  rerun that tuned on more seeds rewrites the record's, not only the workloads').
  """
  import glob
  import json

  for record in glob.glob(os.path.join(REPOSITORY, "benchmarks", "results", "**", "ttr_run.json"),
                          recursive=True):
    with open(record) as f:
      held = json.load(f).get("tuning_seeds")
    if held is None:
      continue  # a record from before rates were tuned on their own seeds
    used = set()
    for path in glob.glob(os.path.join(os.path.dirname(record), "ttr_*.json")):
      with open(path) as f:
        payload = json.load(f)
      if isinstance(payload.get("entries"), dict):
        used |= {s for e in payload["entries"].values()
                 for s in e.get("tuning", {}).get("seeds", [])}
    assert sorted(used) == sorted(held), record

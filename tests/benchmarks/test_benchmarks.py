"""Smoke tests of the benchmarks' --quick modes: they run and write their results.

Speeds are not asserted here (they belong to the benchmark reports). The
time-to-result benchmark's parts are checked against independent references.
"""

import argparse
import dataclasses
import json
import os

import jax
import numpy as np
import optax
import pytest

from benchmarks import registry
from benchmarks import render_results
from benchmarks import step_cost
from benchmarks import train_step
from benchmarks.time_to_result import run as time_to_result
from benchmarks.time_to_result import runner
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import tables
from benchmarks.time_to_result import workloads
from benchmarks.time_to_result.workloads import charlm
from benchmarks.time_to_result.workloads import digits
from tests.support import REPOSITORY


@pytest.mark.slow  # times repeated steps of every optimizer
def test_step_cost_quick(tmp_path):
  out = str(tmp_path / "sc")
  step_cost.main(["--quick", "--sizes", "2e5", "--repeats", "2", "--out", out])
  rows = json.load(open(out + ".json"))["rows"]
  assert {r["optimizer"] for r in rows} == set(step_cost.OPTIMIZERS)
  vsgd = next(r for r in rows if r["optimizer"] == "vsgd" and not r["donated"])
  # mu, b_g, b_ghat in float32, plus the 4-byte step count
  assert vsgd["state_bytes_per_param"] == pytest.approx(12.0, rel=1e-3)
  assert vsgd["median_ms"] > 0
  # The bf16-state steps (both roundings) over the float32-state step, in the same rounds.
  paired = [r for r in rows if "paired" in r]
  assert {(r["optimizer"], r["donated"]) for r in paired} == {
      (name, donated) for name in ("vsgd+bf16_state", "vsgd+bf16_nearest")
      for donated in (False, True)}
  assert all(r["paired"]["against"] == "vsgd" and r["paired"]["ratio"] > 0 for r in paired)
  assert "| vsgd+bf16_state / vsgd |" in "\n".join(render_results._paired_table(rows))
  assert (tmp_path / "sc.png").stat().st_size > 0


def test_network_like_params_reach_the_target_size():
  n = sum(x.size for x in step_cost.network_like_params(int(1e6)).values())
  assert 0.9e6 < n < 1.1e6


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
  assert (tmp_path / "ts.png").stat().st_size > 0


def test_train_step_batch_is_a_positive_count_or_the_papers():
  assert train_step._batch_arg("paper") == "paper"
  assert train_step._batch_arg("16") == 16
  for bad in ("0", "-3", "eight", "2.5"):
    with pytest.raises(argparse.ArgumentTypeError, match="positive integer or 'paper'"):
      train_step._batch_arg(bad)


@pytest.mark.slow  # trains every workload's grid
def test_time_to_result_quick(tmp_path):
  root, page = str(tmp_path / "ttr"), str(tmp_path / "results.md")
  time_to_result.main(["--quick", "--entries", "vsgd", "--out", root, "--page", page])
  out = os.path.join(root, "warmup_cosine")  # the main protocol's folder
  for name in workloads.names():
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
      assert e["tuning"]["seeds"] == list(time_to_result.TUNING_SEEDS)
      assert not set(e["seeds"]) & set(e["tuning"]["seeds"])
      assert e["tuning"]["grown"] == [lr for lr in e["tuning"]["learning_rate"]
                                      if lr not in e["tuning"]["grid"]]
      assert np.asarray(e["curves"]["val"]).shape == (len(e["seeds"]), 2)
      assert e["step_ms"] > 0 and e["ratio"] > 0
    assert (tmp_path / "ttr" / "warmup_cosine" / f"ttr_{name}.png").stat().st_size > 0
  assert not os.path.exists(os.path.join(root, "ttr_mlp.json"))  # no constant results
  text = open(page).read()
  assert "## Time to result" in text and "### Character-level transformer" in text
  assert "### Main protocol: 5% linear warmup, then cosine decay to 0" in text
  for image in ("ttr_overview_lr.png", "ttr_overview_val.png", "ttr_logreg.png"):
    assert f"(ttr/warmup_cosine/{image})" in text


def test_time_to_result_refuses_to_mix_schedules(tmp_path):
  """A folder holding one schedule's results is never written with another's."""
  root = tmp_path / "ttr"
  root.mkdir()
  held = root / "ttr_logreg.json"
  held.write_text(json.dumps({"schedule": {"name": "warmup_cosine"},
                              "workload": {"name": "logreg"}}))
  with pytest.raises(SystemExit):
    time_to_result.main(["--quick", "--schedule", "constant", "--workloads", "logreg",
                         "--entries", "vsgd", "--out", str(root)])
  assert sorted(p.name for p in root.iterdir()) == ["ttr_logreg.json"]
  # The results page refuses such a folder too, naming the file.
  with pytest.raises(ValueError, match="ttr_logreg.json holds 'warmup_cosine' results"):
    tables.load_protocol(str(root), "constant")


def test_schedules_against_their_definitions():
  """Each schedule at a peak of 0.3 over 200 steps, against float64 formulas."""
  peak, steps = 0.3, 200
  count = np.arange(steps + 1)
  assert schedules.learning_rate("constant", steps, peak) == peak
  cosine = schedules.learning_rate("warmup_cosine", steps, peak)
  warmup = 10  # 5% of 200
  expected = np.where(count < warmup, peak * count / warmup,
                      0.5 * peak * (1 + np.cos(np.pi * (count - warmup) / (steps - warmup))))
  np.testing.assert_allclose(np.asarray(cosine(count), np.float64), expected, rtol=1e-6,
                             atol=1e-8)
  step = schedules.learning_rate("paper_step", steps, peak)
  halvings = count // 67  # 200 / 3, rounded: the paper's 10,000 of 30,000 iterations
  np.testing.assert_allclose(np.asarray(step(count), np.float64), peak * 0.5 ** halvings,
                             rtol=1e-6)
  assert schedules.describe("paper_step", steps)["halve_every"] == 67
  with pytest.raises(ValueError, match="unknown schedule 'linear'"):
    schedules.describe("linear", steps)


def test_schedule_reaches_the_optimizer():
  """What the runner builds for an entry (``Entry.make``) follows the schedule:
  plain SGD's step is the rate itself, so its moves are the schedule's values.
  """
  sgd = registry.Entry(lambda lr: optax.sgd(lr))
  for schedule in schedules.NAMES:
    opt = sgd.make(jax.numpy.float32(0.3), schedule, 9)
    params, moves = np.float32(0.0), []
    state = opt.init(params)
    for _ in range(9):
      updates, state = opt.update(np.float32(-1.0), state, params)  # gradient -1
      moves.append(float(updates))
    expected = schedules.learning_rate(schedule, 9, 0.3)
    expected = [expected] * 9 if schedule == "constant" else [expected(i) for i in range(9)]
    np.testing.assert_allclose(moves, expected, rtol=1e-6)
  # the last loop's schedule, paper_step: halved after steps 3 and 6 of 9
  np.testing.assert_allclose([moves[2], moves[3], moves[6]], [0.3, 0.15, 0.075], rtol=1e-6)
  with pytest.raises(ValueError, match="schedule_free_adamw takes no 'paper_step' schedule"):
    registry.ENTRIES["schedule_free_adamw"].make(1e-2, "paper_step", 9)


def test_results_page_renders_the_committed_results():
  root = REPOSITORY
  text = render_results.render(os.path.join(root, "benchmarks", "results"),
                               "../benchmarks/results")
  # The committed page is what the renderer writes from the committed results.
  with open(os.path.join(root, "docs", "results.md")) as f:
    assert text == f.read()
  assert text.index("## Time to result") < text.index("## Step cost next to Adam")
  # Both train-step tables: the small common batch and each config's paper batch.
  small = text.index("## Whole train step, VSGD / Adam")
  paper = text.index("## Whole train step at the paper's batch sizes")
  assert "| cifar100_vgg16 | 8 |" in text[small:paper]
  assert "| cifar100_vgg16 | 256 |" in text[paper:]
  for line in text.splitlines():
    if line.startswith("!["):
      image = line[line.index("(") + 1:line.index(")")]
      assert os.path.exists(os.path.join(root, "docs", image)), image


def test_logistic_optimum_matches_scikit_learn():
  from sklearn.linear_model import LogisticRegression
  rng = np.random.default_rng(7)
  x = rng.normal(size=(200, 5))
  y = rng.integers(0, 3, size=200)
  value, theta = digits.logistic_optimum(x, y, classes=3)
  # scikit-learn minimizes  sum of losses + |w|^2 / (2C):  C = 1 / (n * l2) is our objective
  model = LogisticRegression(C=1 / (200 * digits.LOGISTIC_L2), tol=1e-12, max_iter=10_000)
  model.fit(x, y)
  reference = digits.logistic_objective(model.coef_.T, model.intercept_, x, y, xp=np)
  assert value == pytest.approx(reference, abs=1e-9)
  assert value <= reference + 1e-12
  np.testing.assert_allclose(theta[:15].reshape(5, 3), model.coef_.T, atol=1e-4)


def test_stdlib_sources_leave_out_tests_and_site_packages(tmp_path):
  for path in ("a.py", "pkg/b.py", "pkg/tests/c.py", "test/d.py", "site-packages/e.py",
               "idlelib/idle_test/f.py", "pkg/notes.txt", "test_like_name.py"):
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("x = 1\n")
  found = [p.relative_to(tmp_path).as_posix() for p in charlm.stdlib_sources(str(tmp_path))]
  assert found == ["a.py", "pkg/b.py", "test_like_name.py"]


def test_corpus_splits_by_file():
  files = list(range(95))
  splits = charlm.split_files(files)
  assert [len(splits[k]) for k in ("train", "val", "test")] == [77, 9, 9]
  assert sorted(splits["train"] + splits["val"] + splits["test"]) == files


def test_encoding_and_windows():
  np.testing.assert_array_equal(charlm.encode("a\n\u20ac~"), [97, 10, 127, 126])
  corpus = np.arange(100, dtype=np.uint8)
  windows = charlm.fixed_windows(corpus, 3, 10)
  np.testing.assert_array_equal(windows[:, 0], [0, 45, 90])
  np.testing.assert_array_equal(windows[-1], np.arange(90, 100))


@pytest.mark.slow
def test_steps_to_target_is_the_first_evaluation_that_meets_it():
  w = workloads.build("logreg", quick=True)
  lower = dataclasses.replace(w, target=0.5, eval_every=10)
  assert time_to_result.steps_to_target(lower, [0.9, 0.6, 0.5, 0.4]) == 30
  assert time_to_result.steps_to_target(lower, [0.9, float("nan"), 0.6]) is None
  higher = dataclasses.replace(lower, higher_is_better=True, target=0.95)
  assert time_to_result.steps_to_target(higher, [0.5, 0.96, 0.9]) == 20


@pytest.mark.slow  # trains a workload twice
def test_vmapped_runs_equal_runs_trained_alone():
  """Per-example VSGD on the MLP: two lanes of one vmapped sweep give what each
  run gives on its own.
  """
  w = workloads.build("mlp", quick=True)
  side_by_side = runner.Runner(w, "vsgd+per_example")
  both = side_by_side([1e-3, 3e-2], [0, 5])
  alone = runner.Runner(w, "vsgd+per_example")
  for lane, (lr, seed) in enumerate([(1e-3, 0), (3e-2, 5)]):
    one = alone([lr], [seed])
    np.testing.assert_allclose(both["val"][lane], one["val"][0], rtol=1e-5)
    np.testing.assert_allclose(both["train_loss"][lane], one["train_loss"][0], rtol=1e-4)


@pytest.mark.slow  # trains a workload twice
def test_scanned_run_equals_a_plain_python_loop():
  """Logistic regression with Adam: the harness's run against optax by hand."""
  w = workloads.build("logreg", quick=True)
  out = runner.Runner(w, "adam")([1e-2], [3])
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


@pytest.mark.parametrize("steps", [150, 1000, 301, 10])
def test_paper_step_schedule_halves_twice_whatever_the_length(steps):
  unit = schedules.unit("paper_step", steps)
  rates = [float(unit(count)) for count in range(steps)]
  assert rates[0] == 1.0 and rates[-1] == 0.25
  assert sorted(set(rates), reverse=True) == [1.0, 0.5, 0.25]

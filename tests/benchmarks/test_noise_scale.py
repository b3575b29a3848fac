"""The noise-scale validation runs end to end in its quick mode and gives its tables."""

import json

import chex
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from benchmarks.noise_scale import run
from benchmarks.reporting import noise_scale as report
from vsgd_optax import experimental


@pytest.mark.slow  # trains the MLP and computes its references
def test_quick_validation_writes_results_and_renders(tmp_path):
  run.main(["--quick", "--out", str(tmp_path)])
  payload = json.loads((tmp_path / "mlp.json").read_text())
  points = payload["runs"][0]["points"]
  assert len(points) >= 3
  for p in points:
    assert p["exact"] > 0 and p["reference_se"] >= 0
    assert p["exact"] == pytest.approx(p["parts"]["exact_trace"] / p["parts"]["exact_signal"])
  inv = json.loads((tmp_path / "invariance.json").read_text())
  assert set(inv["read_out"]) == {"32", "128"}
  assert inv["exact"] == pytest.approx(inv["exact_trace"] / inv["exact_signal"])
  for parts in inv["parts"].values():
    assert len(parts) == inv["streams"]
    assert all(p["noise_trace"] > 0 and p["mean_square"] > 0 for p in parts)
  assert not (tmp_path / "mlp.png").exists()  # the runner writes JSON alone
  assert report.plot_all(str(tmp_path)) == [str(tmp_path / "mlp.png")]
  assert (tmp_path / "mlp.png").exists()
  found = report.values(str(tmp_path), "img")
  assert found["noise_validation"].splitlines()[2].startswith("| MLP on digits, warmup_cosine |")
  assert found["noise_figures"] == "![mlp](img/mlp.png)"
  assert found["noise_invariance_frozen"] == "4"
  assert set(inv["averaged"]) == {"32", "128"}
  assert len(found["noise_invariance"].splitlines()) == 4  # header, rule, two batches
  assert all(p["averaged"] > 0 for p in points)


def test_phases_split_the_run_10_80_10():
  assert [report.phase(s, 100) for s in (1, 10, 11, 90, 91, 100)] == [
      "warmup", "warmup", "middle", "middle", "end", "end"]


def test_state_parts_read_the_mean_against_the_true_gradient():
  # After one step from a fresh state, mu = g / (K + 1): the first step's prior
  # variances are gamma and K gamma (docs/algorithm.md).
  opt = vsgd_optax.vsgd(0.0)
  params = {"w": jnp.zeros(3)}
  g = np.array([1.0, 2.0, 3.0])
  _, state = opt.update({"w": jnp.asarray(g, jnp.float32)}, opt.init(params), params)
  parts = run.state_parts(state, 4, g)
  assert parts["slope"] == pytest.approx(1 / 31, rel=1e-5)
  assert parts["mean_square"] == pytest.approx(14 / 31**2, rel=1e-5)
  noise = vsgd_optax.observation_noise_variance(state, prior_strength=run.GAMMA)["w"]
  trace, squared_norm = experimental.gradient_noise_scale_parts(
      state, batch_size=4, prior_strength=run.GAMMA, variance_ratio=run.K)
  assert parts["noise_trace"] == pytest.approx(float(trace))
  assert parts["squared_norm"] == pytest.approx(float(squared_norm))
  assert parts["weight_median"] == pytest.approx(
      float(np.median(np.asarray(vsgd_optax.posterior_variance(
          state, prior_strength=run.GAMMA)["w"], np.float64) / np.asarray(noise, np.float64))))


def test_vsgd_mean_finds_the_one_vsgd_state_by_its_public_type():
  # A chained state, VSGD's wrapped by inject_hyperparams: its mean after one
  # step is g / (K + 1), as above.
  opt = optax.chain(optax.scale(1.0), optax.inject_hyperparams(vsgd_optax.vsgd)(0.1))
  params = {"w": jnp.zeros(3)}
  _, state = opt.update({"w": jnp.array([1.0, 2.0, 3.0])}, opt.init(params), params)
  chex.assert_trees_all_close(run.vsgd_mean(state), {"w": np.array([1.0, 2.0, 3.0]) / 31},
                              rtol=1e-5)
  with pytest.raises(ValueError, match="VSGD state"):
    run.vsgd_mean(optax.adam(0.1).init(params))


def test_an_interrupted_validation_resumes_run_by_run_as_a_whole_one_writes(tmp_path,
                                                                             monkeypatch):
  """Each run is kept as it finishes: a second command trains only what the first did not
  finish, writes what an uninterrupted command writes, and removes its ledger.
  """
  calls, stop_at = [], ["constant"]

  def run_one(name, schedule, *, quick, draws, points, seed=0):
    calls.append(schedule)
    if schedule in stop_at:
      raise KeyboardInterrupt  # the operator stops the command here
    return {"workload": name, "schedule": schedule, "draws": draws,
            "points": [{"step": points, "read_out": 2.5 * len(schedule)}]}

  monkeypatch.setattr(run, "run_one", run_one)
  stopped, whole = tmp_path / "stopped", tmp_path / "whole"
  with pytest.raises(KeyboardInterrupt):
    run.main(["--quick", "--no-invariance", "--out", str(stopped)])
  assert (stopped / "runs" / "noise_scale.jsonl").exists() and not (stopped / "mlp.json").exists()
  calls.clear()
  stop_at.clear()
  run.main(["--quick", "--no-invariance", "--out", str(stopped)])
  assert calls == ["constant"]  # warmup_cosine was kept
  run.main(["--quick", "--no-invariance", "--out", str(whole)])
  resumed, fresh = (json.loads((folder / "mlp.json").read_text()) for folder in (stopped, whole))
  assert resumed["runs"] == fresh["runs"] and len(fresh["runs"]) == 2
  assert not (stopped / "runs").exists()  # its ledger goes once the files are written

"""The step-cost benchmark's quick mode runs and writes its results; its model sizes.

Speeds are not asserted here (they belong to the benchmark reports).
"""

import json

import pytest

from benchmarks import step_cost
from benchmarks.reporting import costs
from benchmarks.reporting import plots


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
  assert "| vsgd+bf16_state / vsgd |" in "\n".join(costs._paired_table(rows))
  assert not (tmp_path / "sc.png").exists()  # the runner writes JSON alone
  plots.step_cost(rows, out + ".png")
  assert (tmp_path / "sc.png").stat().st_size > 0


def test_steps_in_one_program_are_the_steps_called_one_by_one():
  # An accelerator's sample runs its steps in one program (the device's time, not
  # the host's dispatch): it must be the same steps as calling the step each time.
  import jax
  import jax.numpy as jnp

  from examples.optimizers import REGISTRY
  opt = REGISTRY["vsgd+bf16_state"].build(step_cost.LEARNING_RATE)
  params = {"w": jnp.linspace(-1.0, 1.0, 96, dtype=jnp.float32).reshape(8, 12)}
  grads = {"w": jnp.cos(jnp.arange(96, dtype=jnp.float32)).reshape(8, 12)}
  called = [params, opt.init(params)]
  one_by_one = step_cost._step_fn(opt, donate=False)
  for _ in range(3):
    called = one_by_one(*called, grads)
  in_one = step_cost._step_fn(opt, donate=True, steps=3)(params, opt.init(params), grads)
  for a, b in zip(jax.tree.leaves(called), jax.tree.leaves(in_one), strict=True):
    assert a.dtype == b.dtype and jnp.array_equal(a, b)
  assert int(in_one[1][0].count) == 3


def test_steps_in_one_program_are_donated_only():
  with pytest.raises(ValueError, match="donated only"):
    step_cost._step_fn(None, donate=False, steps=2)


def test_network_like_params_reach_the_target_size():
  n = sum(x.size for x in step_cost.network_like_params(int(1e6)).values())
  assert 0.9e6 < n < 1.1e6

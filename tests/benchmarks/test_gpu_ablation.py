"""``benchmarks.gpu_ablation``: its kernels compute the package's step, its stages
come back after each use, and its quick form runs every part.

Speeds are not asserted here (they belong to the benchmark reports).
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from benchmarks import common
from benchmarks import floor
from benchmarks import gpu_ablation
from tests.support import REPOSITORY
from vsgd_optax import _rounding
from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import experimental


def _package_step(opt, params, grads, state):
  updates, state = opt.update(grads, state, params)
  return optax.apply_updates(params, updates), state


def _at_step(state, count):
  """``state`` (a chain's) with its step count set, so that the next step is the
  kernels' fixed ``PALLAS_STEP``.
  """
  return (state[0]._replace(count=jnp.int32(count)),) + tuple(state[1:])


def test_the_bfloat16_kernel_is_the_packages_step_rounded_to_nearest():
  n = 2048
  rng = np.random.default_rng(7)
  params = jnp.asarray(rng.normal(size=n), jnp.float32)
  grads = jnp.asarray(rng.normal(size=n) * 1e-2, jnp.float32)
  opt = vsgd_optax.vsgd(gpu_ablation.PALLAS_LEARNING_RATE, state_dtype=jnp.bfloat16,
                        state_rounding="nearest")
  state = opt.init({"w": params})
  for _ in range(3):  # a state away from its priors
    _, state = _package_step(opt, {"w": params}, {"w": grads * 3}, state)
  state = _at_step(state, gpu_ablation.PALLAS_STEP - 1)
  new_params, new_state = _package_step(opt, {"w": params}, {"w": grads}, state)
  kernel = gpu_ablation._pallas_step(n, 512, interpret=True)
  out = kernel(params, state[0].mu["w"], state[0].b_g["w"], state[0].b_ghat["w"], grads)
  # The state, rounded to bfloat16, bit for bit; the params to float32's rounding
  # (the CPU compiles the package's in-place form of the same equations).
  for got, want in zip(out[1:], (new_state[0].mu, new_state[0].b_g, new_state[0].b_ghat),
                       strict=True):
    assert got.dtype == jnp.bfloat16 and jnp.array_equal(got, want["w"])
  np.testing.assert_allclose(out[0], new_params["w"], rtol=0, atol=1e-7)
  assert not jnp.array_equal(out[0], params)


def test_the_factored_kernel_is_the_packages_factored_step():
  m, n = 128, 256
  rng = np.random.default_rng(11)
  params = jnp.asarray(rng.normal(size=(m, n)), jnp.float32)
  grads = jnp.asarray(rng.normal(size=(m, n)) * 1e-2, jnp.float32)
  opt = experimental.factored_vsgd(gpu_ablation.PALLAS_LEARNING_RATE)
  state = opt.init({"w": params})
  for k in range(3):  # row and column means that differ from each other
    _, state = _package_step(opt, {"w": params}, {"w": grads * (1 + k * params)}, state)
  state = _at_step(state, gpu_ablation.PALLAS_STEP - 1)
  new_params, new_state = _package_step(opt, {"w": params}, {"w": grads}, state)
  b_g, b_ghat = state[0].b_g["w"], state[0].b_ghat["w"]
  assert isinstance(b_g, experimental.FactoredRate)
  kernel = gpu_ablation._pallas_factored_step(m, n, (32, 64, 4), interpret=True)
  out = kernel(params, state[0].mu["w"], b_g.row, b_g.col, b_ghat.row, b_ghat.col, grads)
  new_b_g, new_b_ghat = new_state[0].b_g["w"], new_state[0].b_ghat["w"]
  want = (new_params["w"], new_state[0].mu["w"], new_b_g.row, new_b_g.col, new_b_ghat.row,
          new_b_ghat.col)
  # The means are summed in another order (the tiles' sums, then theirs): float32 rounding.
  for got, expected in zip(out, want, strict=True):
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-7)
  assert not jnp.allclose(new_b_g.row, b_g.row)


def test_each_stage_left_out_comes_back():
  originals = {(module, name): getattr(module, name) for module, name in (
      (_transforms, "jax"), (_update_rules, "variances"), (_update_rules, "_rates_and_direction"),
      (_update_rules, "finite"), (_rounding, "random_word"))}
  with gpu_ablation.left_out(("per_leaf_jit", "divides", "clamps", "hash")):
    assert all(getattr(module, name) is not original
               for (module, name), original in originals.items())
  assert all(getattr(module, name) is original for (module, name), original in originals.items())
  with pytest.raises(KeyError), gpu_ablation.left_out(("clamps", "no such stage")):
    pass
  assert _update_rules.finite is originals[_update_rules, "finite"]


def test_a_stage_left_out_changes_the_step_and_only_while_it_is_out():
  params = {"w": jnp.linspace(-1.0, 1.0, 64, dtype=jnp.float32)}
  grads = {"w": jnp.sin(jnp.arange(64, dtype=jnp.float32))}
  opt = vsgd_optax.vsgd(1e-3)

  def step():  # traced afresh each time: a stage is left out at trace time
    return jax.jit(lambda p, g, s: _package_step(opt, p, g, s))(
        params, grads, opt.init(params))[0]["w"]
  before = step()
  with gpu_ablation.left_out(("divides",)):
    without_divides = step()
  assert not jnp.allclose(before, without_divides)
  assert jnp.array_equal(step(), before)


@pytest.mark.slow  # compiles every state's step and both kernels in interpret mode
def test_gpu_ablation_quick_runs_every_part(tmp_path):
  out = tmp_path / "gpu_ablation.json"
  result = gpu_ablation.main(["--quick", "--out", str(out)])
  written = json.loads(out.read_text())
  assert written["quick"] and written["machine"]["platform"] == "cpu"
  assert set(written["counts"]) == set(floor.FLOOR_BYTES)
  stages = written["stages"]["rows"]
  assert set(stages) == {" - ".join((state,) + left) for state, lefts in
                         gpu_ablation.STAGES.items() for left in lefts}
  assert all(stages[state]["dispatch_ms"] > 0 for state in gpu_ablation.STAGES)
  assert stages["adam"]["ratio"] == 1.0
  leaf = written["one_leaf"]
  assert leaf["failed"] == {} and result["one_leaf"]["params"] == leaf["params"]
  assert {"pallas, bf16 nearest, block 1024", "factored_vsgd",
          "pallas, factored, tile 32x64, 4 warps"} <= set(leaf["rows"])
  assert all(r["median_ms"] > 0 for r in leaf["rows"].values())


def test_the_committed_gpu_run_counts_the_bfloat16_states_at_their_floor():
  # On a GPU, XLA's compiled step moves each bfloat16 state's floor bytes (24 an
  # element) and the float32 state's (36); the factored state's two passes over
  # its full-size rates are what put it above its 20.
  result = common.load(os.path.join(REPOSITORY, common.RESULTS), "gpu_ablation")
  assert result["machine"]["platform"] == "gpu" and not result["quick"]
  counts = result["counts"]
  for state in ("adam", "vsgd", "vsgd+bf16_nearest", "vsgd+bf16_state"):
    assert counts[state]["bytes_per_element"] == pytest.approx(floor.FLOOR_BYTES[state],
                                                               abs=0.01)
  assert counts["factored_vsgd"]["bytes_per_element"] > 2 * floor.FLOOR_BYTES["factored_vsgd"]
  committed = {r["state"]: r for r in common.load(os.path.join(REPOSITORY, common.RESULTS),
                                                  "floor")["rows"]}
  assert all(committed[s]["gpu_bytes_per_element"] == counts[s]["bytes_per_element"]
             for s in counts)

"""``experimental.factored_vsgd``: its step against a float64 reference of the
factored equations, its exact case (rank-one statistics) against full VSGD,
leaves that do not factor against ``vsgd`` bit for bit, and its memory.
"""

import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference
from vsgd_optax import experimental
from vsgd_optax.experimental import _factored_vsgd


def _run(opt, grads, params):
  state = opt.init(params)
  update = jax.jit(opt.update)
  for g in grads:
    updates, state = update(g, state, params)
    params = optax.apply_updates(params, updates)
  return params, state


def _scaling_state(state):
  return state[0]  # the chain's first part: the scaling transform's state


@pytest.mark.parametrize("shape, axes", [((6, 5), (0, 1)), ((2, 6, 5), (1, 2)),
                                         ((6, 2, 5), (0, 2))],
                         ids=["matrix", "batched", "axes_apart"])
def test_the_factored_step_matches_the_float64_reference(shape, axes):
  rng = np.random.default_rng(7)
  # Not rank one: each element has its own scale and its own noise.
  scale = rng.uniform(0.1, 3.0, size=shape)
  grads = [scale * (0.4 + rng.normal(size=shape)) for _ in range(40)]
  expected = reference.factored_vsgd_steps(grads, *axes)
  with jax.enable_x64(True):
    opt = experimental.scale_by_factored_vsgd(min_dim_size_to_factor=5)
    state = opt.init(jnp.zeros(shape, jnp.float64))
    update = jax.jit(opt.update)
    for g, (u, mu, means) in zip(grads, expected, strict=True):
      direction, state = update(jnp.asarray(g), state)
      chex.assert_trees_all_close(direction, u, rtol=1e-10, atol=1e-14)
      chex.assert_trees_all_close(state.mu, mu, rtol=1e-10, atol=1e-14)
      for name in ("b_g", "b_ghat"):
        held = getattr(state, name)
        assert isinstance(held, vsgd_optax.FactoredRate)
        chex.assert_trees_all_close(held.row, means[name][0], rtol=1e-10)
        chex.assert_trees_all_close(held.col, means[name][1], rtol=1e-10)
    assert int(state.count) == len(grads)


@pytest.mark.parametrize("constant_along", [0, 1], ids=["rows_alike", "columns_alike"])
def test_rank_one_statistics_make_it_full_vsgd(constant_along):
  """Gradients that vary along one axis only give per-element rates that are
  truly rank one, which the factored state then holds exactly.
  """
  rng = np.random.default_rng(11)
  n, m = 6, 5
  def grad():
    varying = rng.normal(size=(n, 1) if constant_along == 1 else (1, m))
    return {"w": jnp.asarray(np.broadcast_to(0.3 + varying, (n, m)))}
  with jax.enable_x64(True):
    grads = [grad() for _ in range(60)]
    params = {"w": jnp.asarray(rng.normal(size=(n, m)))}
    factored_params, factored = _run(
        experimental.factored_vsgd(0.05, min_dim_size_to_factor=5), grads, params)
    full_params, full = _run(vsgd_optax.vsgd(0.05), grads, params)
    chex.assert_trees_all_close(factored_params["w"], full_params["w"], rtol=1e-12)
    factored, full = _scaling_state(factored), _scaling_state(full)
    chex.assert_trees_all_close(factored.mu["w"], full.mu["w"], rtol=1e-11, atol=1e-15)
    for name in ("b_g", "b_ghat"):
      rate = getattr(factored, name)["w"]
      full_rate = np.asarray(getattr(full, name)["w"])
      chex.assert_trees_all_close(rate.row, full_rate.mean(axis=1, keepdims=True), rtol=1e-11)
      chex.assert_trees_all_close(rate.col, full_rate.mean(axis=0, keepdims=True), rtol=1e-11)


@pytest.mark.parametrize("state_dtype", [None, jnp.bfloat16], ids=["float32", "bfloat16"])
def test_leaves_that_do_not_factor_step_as_vsgd_bit_for_bit(state_dtype):
  rng = np.random.default_rng(3)
  shapes = {"big": (130, 129), "narrow": (130, 127), "vector": (300,), "kernel": (3, 3, 8, 16)}
  params = {k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
  grads = [{k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
           for _ in range(12)]
  factored_params, factored = _run(experimental.factored_vsgd(0.01, state_dtype=state_dtype),
                                   grads, params)
  full_params, full = _run(vsgd_optax.vsgd(0.01, state_dtype=state_dtype), grads, params)
  factored, full = _scaling_state(factored), _scaling_state(full)
  assert isinstance(factored.b_g["big"], vsgd_optax.FactoredRate)
  for key in ("narrow", "vector", "kernel"):
    chex.assert_trees_all_equal(factored_params[key], full_params[key])
    for name in ("mu", "b_g", "b_ghat"):
      held, expected = getattr(factored, name)[key], getattr(full, name)[key]
      assert held.dtype == expected.dtype
      chex.assert_trees_all_equal(held, expected)
  # the factored leaf's mu is rounded with the same bits as vsgd's would be
  assert factored.mu["big"].dtype == full.mu["big"].dtype
  assert not np.array_equal(factored_params["big"], full_params["big"])


def _state_bytes(opt, params) -> int:
  state = jax.eval_shape(opt.init, params)
  return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state)
             if leaf.ndim > 0)


@pytest.mark.parametrize("state_dtype, most", [(None, 4.1), (jnp.bfloat16, 2.1)],
                         ids=["float32", "bfloat16"])
def test_a_1024_square_matrix_keeps_its_bytes_per_parameter_under_the_target(state_dtype, most):
  params = {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)}
  factored = _state_bytes(experimental.factored_vsgd(1e-2, state_dtype=state_dtype), params)
  full = _state_bytes(vsgd_optax.vsgd(1e-2, state_dtype=state_dtype), params)
  per_param = factored / 1024 ** 2
  mu_bytes = 2 if state_dtype is not None else 4
  assert per_param <= most
  # mu per element, and four float32 vectors of 1024: two rates, rows and columns
  assert factored == 1024 ** 2 * mu_bytes + 4 * 1024 * 4
  assert full == 3 * 1024 ** 2 * mu_bytes


def test_signature_and_defaults_are_vsgds():
  factored = inspect.signature(experimental.factored_vsgd).parameters
  full = inspect.signature(vsgd_optax.vsgd).parameters
  assert factored["min_dim_size_to_factor"].default == 128
  assert factored["min_dim_size_to_factor"].kind is inspect.Parameter.KEYWORD_ONLY
  assert set(factored) == set(full) | {"min_dim_size_to_factor"}
  for name, parameter in full.items():
    assert factored[name].default == parameter.default, name


@pytest.mark.parametrize("bad", [1, 0, 2.5, True, "128"])
def test_a_threshold_that_cannot_factor_is_refused(bad):
  with pytest.raises(ValueError, match="min_dim_size_to_factor"):
    experimental.factored_vsgd(1e-2, min_dim_size_to_factor=bad)


def test_a_state_factored_at_another_threshold_is_refused():
  """Whether a rate is factored is the state's layout: a state made with another
  min_dim_size_to_factor is refused, either way, and never stepped as it is.
  """
  params = {"w": jnp.ones((4, 4)), "b": jnp.ones(4)}
  grads = {"w": jnp.eye(4), "b": jnp.ones(4)}
  full, factoring = experimental.factored_vsgd(1e-2), experimental.factored_vsgd(
      1e-2, min_dim_size_to_factor=2)
  for opt, state, held in ((factoring, full.init(params), "full"),
                           (full, factoring.init(params), "factored")):
    with pytest.raises(ValueError, match=rf"\['w'\] \(4, 4\) \({held}\)"):
      opt.update(grads, state, params)


def test_factored_axes_are_the_two_largest_in_order():
  assert _factored_vsgd.factored_axes((3, 3, 256, 512), 128) == ((2,), (3,))
  assert _factored_vsgd.factored_axes((512, 3, 256), 128) == ((0,), (2,))
  assert _factored_vsgd.factored_axes((256, 256, 3), 128) == ((0,), (1,))
  assert _factored_vsgd.factored_axes((1024, 127), 128) is None
  assert _factored_vsgd.factored_axes((4096,), 128) is None


def test_the_bare_transforms_defaults_are_the_aliases():
  """``scale_by_factored_vsgd``, ``scale_by_vsgd`` and ``scale_by_constant_vsgd``
  default as the optimizers built on them: a bfloat16 state rounds stochastically.
  """
  pairs = [(experimental.scale_by_factored_vsgd, experimental.factored_vsgd),
           (vsgd_optax.scale_by_vsgd, vsgd_optax.vsgd),
           (vsgd_optax.scale_by_constant_vsgd, vsgd_optax.constant_vsgd)]
  for bare, alias in pairs:
    bare_defaults = inspect.signature(bare).parameters
    for name, parameter in inspect.signature(alias).parameters.items():
      if name in bare_defaults:
        assert bare_defaults[name].default == parameter.default, (bare.__name__, name)
  # And the bare factored transform's default does what it says: stochastic, not nearest.
  params = {"w": jnp.zeros((8, 8)), "b": jnp.zeros(64)}
  rng = np.random.default_rng(21)
  grads = [{"w": jnp.asarray(rng.normal(size=(8, 8)), jnp.float32),
            "b": jnp.asarray(rng.normal(size=64), jnp.float32)} for _ in range(5)]
  default = _run(experimental.scale_by_factored_vsgd(state_dtype=jnp.bfloat16,
                                                     min_dim_size_to_factor=4), grads, params)[1]
  nearest = _run(experimental.scale_by_factored_vsgd(state_dtype=jnp.bfloat16,
                                                     state_rounding="nearest",
                                                     min_dim_size_to_factor=4), grads, params)[1]
  stochastic = _run(experimental.scale_by_factored_vsgd(state_dtype=jnp.bfloat16,
                                                        state_rounding="stochastic",
                                                        min_dim_size_to_factor=4), grads, params)[1]
  for x, y in zip(jax.tree.leaves(default), jax.tree.leaves(stochastic), strict=True):
    chex.assert_trees_all_equal(np.asarray(x, np.float64), np.asarray(y, np.float64))
  assert any(not np.array_equal(np.asarray(x, np.float64), np.asarray(y, np.float64))
             for x, y in zip(jax.tree.leaves(default), jax.tree.leaves(nearest), strict=True))


def test_a_state_handed_back_as_mappings_steps_as_the_named_tuples():
  """Flax NNX's ``nnx.Optimizer`` hands the state back with each named tuple a
  mapping of its fields; built here by hand, without flax. The step from it
  equals the step from the state as ``init`` made it, and the factored rates
  come back as ``FactoredRate``s; a params dict whose keys are ``row`` and
  ``col`` is left alone.
  """
  opt = experimental.factored_vsgd(1e-2, min_dim_size_to_factor=4)
  params = {"w": jnp.ones((8, 6)), "row": jnp.ones(3), "col": jnp.ones((5, 5))}
  rng = np.random.default_rng(22)
  grads = jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params)
  state = opt.init(params)
  as_mappings = jax.tree.map(lambda x: dict(x._asdict()) if isinstance(x, vsgd_optax.FactoredRate)
                             else x, state,
                             is_leaf=lambda x: isinstance(x, vsgd_optax.FactoredRate))
  assert isinstance(as_mappings[0].b_g["w"], dict)
  want_updates, want_state = opt.update(grads, state, params)
  got_updates, got_state = opt.update(grads, as_mappings, params)
  for x, y in zip(jax.tree.leaves((want_updates, want_state)),
                  jax.tree.leaves((got_updates, got_state)), strict=True):
    chex.assert_trees_all_equal(np.asarray(x), np.asarray(y))
  assert isinstance(got_state[0].b_g["w"], vsgd_optax.FactoredRate)
  assert isinstance(got_state[0].b_g["col"], vsgd_optax.FactoredRate)

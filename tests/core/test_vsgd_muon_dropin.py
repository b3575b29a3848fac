"""``vsgd_muon`` where ``optax.contrib.muon`` goes: each input a user gives Muon,
given to both, and ``vsgd_muon`` doing what Muon does or better (accepted and
stepping, or refused in one line that names the argument).
"""

import functools

import chex
import jax
import jax.numpy as jnp
import optax
import pytest

import vsgd_optax
from tests.support.helpers import DIMS

MUON = optax.contrib.muon
VSGD_MUON = vsgd_optax.vsgd_muon


def _steps(opt, params, grads=None):
  state = opt.init(params)
  updates, state = opt.update(params if grads is None else grads, state, params)
  return updates, state


@pytest.mark.parametrize("make", [MUON, VSGD_MUON], ids=["muon", "vsgd_muon"])
def test_a_dimension_numbers_tree_under_masked_or_multi_transform(make):
  """The tree names a leaf that ``masked`` hides (a ``MaskedNode`` in the params)."""
  params = {"w1": jnp.ones((8, 16)), "b1": jnp.zeros(16), "w2": jnp.ones((16, 4))}
  dims = {"w1": DIMS(), "b1": None, "w2": DIMS()}
  masked = optax.masked(make(1e-2, muon_weight_dimension_numbers=dims),
                        {"w1": False, "b1": True, "w2": True})
  frozen = optax.multi_transform(
      {"train": make(1e-2, muon_weight_dimension_numbers=dims), "frozen": optax.set_to_zero()},
      {"w1": "frozen", "b1": "train", "w2": "train"})
  for opt in (masked, frozen):
    updates, _ = _steps(opt, params)
    chex.assert_tree_all_finite(updates)
    assert not jnp.array_equal(updates["w2"], params["w2"])


def test_a_dimension_numbers_tree_that_leaves_out_a_leaf_is_refused_naming_it():
  params = {"w1": jnp.ones((8, 16)), "w2": jnp.ones((16, 4)), "b": jnp.ones(16)}
  with pytest.raises(ValueError):  # Muon: a pytree structure error
    MUON(1e-2, muon_weight_dimension_numbers={"w1": DIMS()}).init(params)
  with pytest.raises(ValueError, match=r"leaves out \['b'\], \['w2'\]"):
    VSGD_MUON(1e-2, muon_weight_dimension_numbers={"w1": DIMS()}).init(params)
  with pytest.raises(ValueError, match=r"\['nothing'\]"):
    VSGD_MUON(1e-2, muon_weight_dimension_numbers={"nothing": DIMS()}).init(params)
  with pytest.raises(TypeError, match=r"muon_weight_dimension_numbers\['w1'\]"):
    VSGD_MUON(1e-2, muon_weight_dimension_numbers={"w1": (0, 1), "w2": None, "b": None}).init(
        params)


@pytest.mark.parametrize("make", [MUON, VSGD_MUON], ids=["muon", "vsgd_muon"])
def test_inject_hyperparams_with_the_defaults_under_jit(make):
  params = {"w": jnp.ones((8, 16)), "b": jnp.ones(16)}
  opt = optax.inject_hyperparams(make)(learning_rate=1e-2)
  updates, _ = jax.jit(opt.update)(params, jax.jit(opt.init)(params), params)
  chex.assert_tree_all_finite(updates)


@pytest.mark.parametrize("name", ["adam_b1", "adam_b2"])
def test_an_adam_decay_rate_of_one_is_refused(name):
  params = {"w": jnp.ones((8, 16)), "b": jnp.ones(16)}
  updates, _ = _steps(MUON(1e-2, **{name: 1.0}), params)
  assert not jnp.all(jnp.isfinite(updates["b"]))  # Muon: NaN after the first step
  with pytest.raises(ValueError, match=name):
    VSGD_MUON(1e-2, **{name: 1.0})
  chex.assert_tree_all_finite(_steps(VSGD_MUON(1e-2, **{name: 0.0}), params)[0])


@pytest.mark.parametrize("dims, message", [
    (DIMS(0, 7), "out of range"), (DIMS(-3, 1), "out of range"), (DIMS(0, 0), "disjoint"),
    (DIMS((), 1), "non-empty")])
def test_dimension_numbers_outside_the_leaf_are_refused(dims, message):
  params = {"w": jnp.ones((8, 16)), "b": jnp.ones(16)}
  spec = {"w": dims, "b": None}
  if dims != DIMS((), 1):  # Muon wraps the axis, or reads no axes, silently
    chex.assert_tree_all_finite(_steps(MUON(1e-2, muon_weight_dimension_numbers=spec), params)[0])
  with pytest.raises(ValueError, match=rf"muon_weight_dimension_numbers\['w'\].*{message}"):
    VSGD_MUON(1e-2, muon_weight_dimension_numbers=spec).init(params)
  with pytest.raises(ValueError, match="2 or more axes"):
    VSGD_MUON(1e-2, muon_weight_dimension_numbers={"w": DIMS(), "b": DIMS()}).init(params)


def test_an_integer_leaf_is_refused_as_vsgd_refuses_it():
  params = {"w": jnp.ones((8, 16)), "n": jnp.asarray(3)}
  grads = {"w": jnp.ones((8, 16)), "n": jnp.asarray(0)}
  updates, _ = _steps(MUON(1e-2), params, grads)
  assert jnp.isnan(updates["n"])  # Muon: a NaN update of an integer
  for make in (vsgd_optax.vsgd, VSGD_MUON):
    with pytest.raises(TypeError, match=r"\['n'\] has dtype int32"):
      make(1e-2).init(params)


@pytest.mark.parametrize("make", [MUON, VSGD_MUON], ids=["muon", "vsgd_muon"])
def test_one_nan_spreads_over_its_matrix_and_apply_if_finite_skips_the_step(make):
  params = {"w": jnp.ones((8, 16)), "b": jnp.ones(16)}
  grads = {"w": jnp.ones((8, 16)).at[0, 0].set(jnp.nan), "b": jnp.ones(16)}
  updates, _ = _steps(make(1e-2), params, grads)
  assert jnp.all(jnp.isnan(updates["w"])) and jnp.all(jnp.isfinite(updates["b"]))
  guarded = optax.apply_if_finite(make(1e-2), max_consecutive_errors=3)
  state = guarded.init(params)
  updates, after = guarded.update(grads, state, params)
  chex.assert_trees_all_equal(after.inner_state, state.inner_state)
  chex.assert_trees_all_equal(updates, jax.tree.map(jnp.zeros_like, params))
  assert int(after.notfinite_count) == 1


@pytest.mark.parametrize("make", [MUON, VSGD_MUON, functools.partial(VSGD_MUON, nesterov=True)],
                         ids=["muon", "vsgd_muon", "vsgd_muon_nesterov"])
def test_a_zero_a_nan_and_a_1e20_gradient_as_muon_takes_them(make):
  """Two jitted steps each: a zero gradient steps by nothing, one NaN spreads over its
  matrix alone, and one element of 1e20 leaves every update finite, as in Muon.
  """
  params = {"w": jnp.ones((8, 16)), "b": jnp.ones(16)}
  opt = make(1e-2)
  update = jax.jit(opt.update)

  def twice(w):
    state, out = opt.init(params), None
    for _ in range(2):
      out, state = update({"w": w, "b": jnp.ones(16)}, state, params)
    return out

  zero = twice(jnp.zeros((8, 16)))
  assert float(jnp.max(jnp.abs(zero["w"]))) == 0.0
  nan = twice(jnp.ones((8, 16)).at[0, 0].set(jnp.nan))
  assert jnp.all(jnp.isnan(nan["w"])) and jnp.all(jnp.isfinite(nan["b"]))
  chex.assert_tree_all_finite(twice(jnp.ones((8, 16)).at[0, 0].set(1e20)))

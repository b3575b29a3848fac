"""Saved states keep working: the golden checkpoints of ``tests/support/golden/``, restored today.

Each was written by release 0.1.0 after ``SAVED_STEPS`` steps
(``tests/support/golden_state.py`` tells how). Restored into today's ``opt.init``
tree by path, as a checkpoint library restores it, it must fit that tree leaf
for leaf (the layout), and ten more steps must match the float64 reference
started from the saved values (the meaning). A change that breaks either needs
a migration note in ``CHANGELOG.md``.
"""

import re

import chex
import jax
import numpy as np
import optax
import pytest

from tests.support import golden_state
from tests.support import reference

VERSIONS = ["0.1.0"]


def _restore(saved, prefix, template):
  """The leaves of ``template`` replaced by the saved arrays at the same paths."""
  paths_and_leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
  expected_keys = {prefix + jax.tree_util.keystr(p) for p, _ in paths_and_leaves}
  saved_keys = {key for key in saved.files if key.startswith(prefix)}
  assert saved_keys == expected_keys, (
      f"the state's layout changed: saved only {sorted(saved_keys - expected_keys)}, "
      f"expected only {sorted(expected_keys - saved_keys)}; CHANGELOG.md needs a migration note")
  leaves = []
  for p, leaf in paths_and_leaves:
    array = saved[prefix + jax.tree_util.keystr(p)]
    assert (array.shape, array.dtype) == (leaf.shape, leaf.dtype), jax.tree_util.keystr(p)
    leaves.append(array)
  return jax.tree_util.tree_unflatten(treedef, leaves)


def _continue(name, version):
  """Restores ``name``'s params and state and takes the continued steps."""
  opt = golden_state.OPTIMIZERS[name](golden_state.LEARNING_RATE)
  template_params = golden_state.initial_params()
  with np.load(golden_state.path(version)) as saved:
    params = _restore(saved, f"{name}/params", template_params)
    state = _restore(saved, f"{name}/state", opt.init(template_params))
  start_params, start = params, state[0]
  assert int(start.count) == golden_state.SAVED_STEPS
  update = jax.jit(opt.update)
  history = []
  for grads in golden_state.gradients()[golden_state.SAVED_STEPS:]:
    updates, state = update(grads, state, params)
    params = optax.apply_updates(params, updates)
    history.append((params, state[0]))
  return start_params, start, history


def _continued_grads(leaf):
  return [g[leaf] for g in golden_state.gradients()[golden_state.SAVED_STEPS:]]


@pytest.mark.parametrize("version", VERSIONS)
def test_vsgd_state_restores_and_continues_as_the_reference(version):
  start_params, start, history = _continue("vsgd", version)
  assert len(history) == golden_state.CONTINUED_STEPS == 10
  for leaf in golden_state.SHAPES:
    expected = reference.vsgd_reference(
        _continued_grads(leaf), start_params[leaf], lambda i: golden_state.LEARNING_RATE,
        start=(golden_state.SAVED_STEPS, start.mu[leaf], start.b_g[leaf], start.b_ghat[leaf]))
    for (params, state), (e_params, e_mu, e_b_g, e_b_ghat) in zip(history, expected, strict=True):
      np.testing.assert_allclose(params[leaf], e_params, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(state.mu[leaf], e_mu, rtol=1e-4, atol=1e-7)
      np.testing.assert_allclose(state.b_g[leaf], e_b_g, rtol=1e-5)
      np.testing.assert_allclose(state.b_ghat[leaf], e_b_ghat, rtol=1e-5)


@pytest.mark.parametrize("version", VERSIONS)
def test_constant_vsgd_state_restores_and_continues_as_the_reference(version):
  start_params, start, history = _continue("constant_vsgd", version)
  for leaf in golden_state.SHAPES:
    expected = reference.constant_vsgd_reference(
        _continued_grads(leaf), start_params[leaf], lambda i: golden_state.LEARNING_RATE,
        start=(golden_state.SAVED_STEPS, start.mu[leaf], start.b_ghat[leaf]))
    for (params, state), (e_params, e_mu, e_b) in zip(history, expected, strict=True):
      np.testing.assert_allclose(params[leaf], e_params, rtol=1e-5, atol=1e-6)
      np.testing.assert_allclose(state.mu[leaf], e_mu, rtol=1e-4, atol=1e-7)
      np.testing.assert_allclose(state.b_ghat[leaf], e_b, rtol=1e-5)


def test_a_state_of_another_meaning_is_caught():
  """The check has teeth: b_g stored as twice the rate (as the authors' code
  stores it) leaves the reference within a few steps.
  """
  start_params, start, history = _continue("vsgd", VERSIONS[-1])
  opt = golden_state.OPTIMIZERS["vsgd"](golden_state.LEARNING_RATE)
  state = opt.init(start_params)
  state = (state[0]._replace(count=start.count, mu=start.mu,
                             b_g=jax.tree.map(lambda b: 2 * b, start.b_g), b_ghat=start.b_ghat),
           *state[1:])
  params = start_params
  for grads in golden_state.gradients()[golden_state.SAVED_STEPS:]:
    updates, state = opt.update(grads, state, params)
    params = optax.apply_updates(params, updates)
  worst = max(float(np.max(np.abs(state[0].b_g[leaf] / history[-1][1].b_g[leaf] - 1)))
              for leaf in golden_state.SHAPES)
  assert worst > 1e-2


_STATE_FIELDS = ("count", "mu", "nu", "b_g", "b_ghat")


def _field_suffix(path) -> str:
  """A state leaf's path from its state field on (``.b_g['w'].row``): what stays
  the same however the optimizer nests its states.
  """
  keys = [jax.tree_util.keystr((key,)) for key in path]
  start = max(i for i, key in enumerate(path)
              if isinstance(key, jax.tree_util.GetAttrKey) and key.name in _STATE_FIELDS)
  return "".join(keys[start:])


def _restore_by_field(saved, prefix, template):
  """The leaves of ``template`` replaced by the saved arrays whose paths end the
  same from their state field on, as a checkpoint of an older nesting is migrated.
  """
  field = re.compile(r"\.(" + "|".join(_STATE_FIELDS) + r")(?=[\[.]|$)")
  by_suffix: dict = {}
  for key in saved.files:
    if key.startswith(prefix):
      start = list(field.finditer(key))[-1].start()
      by_suffix.setdefault(key[start:], []).append(saved[key])
  unused = set(by_suffix)
  def restored(path, leaf):
    unused.discard(_field_suffix(path))
    found = by_suffix[_field_suffix(path)]
    for array in found[1:]:  # the counts of several states: one value
      np.testing.assert_array_equal(array, found[0])
    assert (found[0].shape, found[0].dtype) == (leaf.shape, leaf.dtype), path
    return found[0]
  tree = jax.tree_util.tree_map_with_path(restored, template)
  assert not unused, f"saved but not restored: {sorted(unused)}"
  return tree


@pytest.mark.parametrize("name", ["vsgd_muon", "factored_vsgd"])
def test_factored_state_restores_and_continues_bit_for_bit(name):
  """A factored state saved by 0.1.0 (``FactoredVSGDState`` then) restores into
  today's state and continues exactly as 0.1.0 continued it.
  """
  opt = golden_state.factored_optimizers()[name](golden_state.LEARNING_RATE)
  template = golden_state.factored_initial_params()
  with np.load(golden_state.factored_path("0.1.0")) as saved:
    params = _restore(saved, f"{name}/saved/params", template)
    state = _restore_by_field(saved, f"{name}/saved/state", opt.init(template))
    expected_params = _restore(saved, f"{name}/continued/params", template)
    expected_state = _restore_by_field(saved, f"{name}/continued/state", opt.init(template))
  update = jax.jit(opt.update)
  for grads in golden_state.factored_gradients()[golden_state.SAVED_STEPS:]:
    updates, state = update(grads, state, params)
    params = optax.apply_updates(params, updates)
  chex.assert_trees_all_equal((params, state), (expected_params, expected_state))

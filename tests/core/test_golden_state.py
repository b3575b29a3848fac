"""Saved states keep working: the golden checkpoints of ``tests/support/golden/``, restored today."""

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
@pytest.mark.parametrize("name", ["vsgd", "constant_vsgd"])
def test_state_restores_and_continues_as_the_reference(name, version):
  start_params, start, history = _continue(name, version)
  assert len(history) == golden_state.CONTINUED_STEPS == 10
  rates = ("b_g", "b_ghat") if name == "vsgd" else ("b_ghat",)
  for leaf in golden_state.SHAPES:
    expected = getattr(reference, f"{name}_reference")(
        _continued_grads(leaf), start_params[leaf], lambda i: golden_state.LEARNING_RATE,
        start=(golden_state.SAVED_STEPS, start.mu[leaf],
               *(getattr(start, rate)[leaf] for rate in rates)))
    for (params, state), (e_params, e_mu, *e_rates) in zip(history, expected, strict=True):
      chex.assert_trees_all_close(params[leaf], e_params, rtol=1e-5, atol=1e-6)
      chex.assert_trees_all_close(state.mu[leaf], e_mu, rtol=1e-4, atol=1e-7)
      chex.assert_trees_all_close([getattr(state, rate)[leaf] for rate in rates], e_rates,
                                  rtol=1e-5)


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


# A state leaf's path from its state field on (".b_g['w'].row"): the same however the
# optimizer nests its states.
_FROM_FIELD = re.compile(r"\.(count|mu|nu|b_g|b_ghat)(?=[\[.]|$).*$")


def _restore_by_field(saved, prefix, template):
  """``template``'s leaves replaced by the saved arrays whose paths end the same from
  their state field on, as a checkpoint of another nesting is migrated.
  """
  by_field: dict = {}
  for key in saved.files:
    if key.startswith(prefix):
      by_field.setdefault(list(_FROM_FIELD.finditer(key))[-1].group(), []).append(saved[key])
  unused = set(by_field)

  def restored(path, leaf):
    field = list(_FROM_FIELD.finditer(jax.tree_util.keystr(path)))[-1].group()
    unused.discard(field)
    first, *others = by_field[field]
    for array in others:  # the counts of several states: one value
      chex.assert_trees_all_equal(array, first)
    assert (first.shape, first.dtype) == (leaf.shape, leaf.dtype), path
    return first
  tree = jax.tree_util.tree_map_with_path(restored, template)
  assert not unused, f"saved but not restored: {sorted(unused)}"
  return tree


# Bit for bit at the versions that wrote the files, within golden_state's stated share
# elsewhere (XLA sums the factored means in another order there).
@pytest.mark.parametrize("name", ["vsgd_muon", "factored_vsgd"])
def test_factored_state_restores_and_continues_as_0_1_0_did(name):
  """A factored state saved by 0.1.0 (``FactoredVSGDState`` then) restores into
  today's state and continues as 0.1.0 continued it: the state bit for bit, the
  params to a few float32 ulps of their scale (about 1), since Newton-Schulz's
  matmuls round differently where XLA's CPU code uses AVX-512 (one ulp, on an
  AMD EPYC with AVX-512, of files written on one without).
  """
  opt = golden_state.factored_optimizers()[name](golden_state.LEARNING_RATE)
  template = golden_state.initial_params(golden_state.FACTORED_SHAPES)
  with np.load(golden_state.factored_path("0.1.0")) as saved:
    params = _restore(saved, f"{name}/saved/params", template)
    state = _restore_by_field(saved, f"{name}/saved/state", opt.init(template))
    expected_params = _restore(saved, f"{name}/continued/params", template)
    expected_state = _restore_by_field(saved, f"{name}/continued/state", opt.init(template))
  update = jax.jit(opt.update)
  for grads in golden_state.gradients(golden_state.FACTORED_SHAPES)[golden_state.SAVED_STEPS:]:
    updates, state = update(grads, state, params)
    params = optax.apply_updates(params, updates)
  golden_state.assert_matches_golden(state, expected_state)
  golden_state.assert_matches_golden(params, expected_params, rtol=1e-6, atol=1e-6)

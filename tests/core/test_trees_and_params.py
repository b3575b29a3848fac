"""Where ``optax.adam`` goes, ``vsgd`` goes: other people's trees and calls."""

import inspect
import typing

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference
from tests.support.helpers import FACTORIES
from tests.support.helpers import factored_vsgd
from tests.support.helpers import factored_vsgd_muon
from tests.support.helpers import make_grads
from tests.support.helpers import make_params


@pytest.mark.parametrize("factory", FACTORIES)
def test_none_leaves_pass_through_like_adam(factory):
  """Equinox's ``opt.init(eqx.filter(model, eqx.is_array))`` gives ``None``
  for every non-array field; the arrays must step as they would alone.
  """
  def with_none(tree):
    return {"w": tree["w"], "act": None, "inner": {"b": tree["b"], "name": None}}
  opt = factory(0.05)
  for variance in (False, True):
    extra = lambda i: {"grad_variance": with_none(jax.tree.map(jnp.abs, make_grads(i)))}
    plain_extra = lambda i: {"grad_variance": jax.tree.map(jnp.abs, make_grads(i))}
    params, plain_params = with_none(make_params()), make_params()
    state, plain_state = opt.init(params), opt.init(plain_params)
    for i in range(4):
      kw, plain_kw = (extra(i), plain_extra(i)) if variance else ({}, {})
      updates, state = jax.jit(opt.update)(with_none(make_grads(i)), state, params, **kw)
      params = optax.apply_updates(params, updates)
      plain_updates, plain_state = jax.jit(opt.update)(make_grads(i), plain_state, plain_params,
                                                       **plain_kw)
      plain_params = optax.apply_updates(plain_params, plain_updates)
    assert params["act"] is None and params["inner"]["name"] is None
    chex.assert_trees_all_equal(params["w"], plain_params["w"])
    chex.assert_trees_all_equal(params["inner"]["b"], plain_params["b"])


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("variance", [False, True])
def test_masked_and_multi_transform_with_and_without_grad_variance(factory, variance):
  """``MaskedNode`` entries, with ``grad_variance`` passed whole (as
  ``optax.masked`` passes extra arguments) or already masked.
  """
  kw = lambda i: {"grad_variance": jax.tree.map(jnp.abs, make_grads(i))} if variance else {}
  masked = optax.masked(factory(0.05), {"w": True, "b": False})
  params = make_params()
  state = masked.init(params)
  alone = factory(0.05)
  alone_state = alone.init({"w": params["w"]})
  for i in range(4):
    updates, state = masked.update(make_grads(i), state, params, **kw(i))
    one = {"grad_variance": {"w": kw(i)["grad_variance"]["w"]}} if variance else {}
    alone_updates, alone_state = alone.update({"w": make_grads(i)["w"]}, alone_state, **one)
    chex.assert_trees_all_equal(updates["w"], alone_updates["w"])
    chex.assert_trees_all_equal(updates["b"], make_grads(i)["b"])  # masked out: untouched
  multi = optax.multi_transform({"v": factory(0.05), "sgd": optax.sgd(0.1)},
                                {"w": "v", "b": "sgd"})
  got = _run_picked(multi, variance)
  chex.assert_trees_all_equal(got["w"], _run_picked(factory(0.05), variance, only="w")["w"])


def _run_picked(opt, variance, only=None):
  """Four steps on the params (or only the entry ``only``)."""
  pick = (lambda t: {only: t[only]}) if only else (lambda t: t)
  params = pick(make_params())
  state = opt.init(params)
  for i in range(4):
    g = pick(make_grads(i))
    kw = {"grad_variance": jax.tree.map(jnp.abs, g)} if variance else {}
    updates, state = opt.update(g, state, params, **kw)
    params = optax.apply_updates(params, updates)
  return params


@pytest.mark.parametrize("factory", FACTORIES)
def test_update_needs_params_only_for_weight_decay(factory):
  opt = factory(0.05)
  state = opt.init(make_params())
  without, _ = opt.update(make_grads(0), state)
  with_params, _ = opt.update(make_grads(0), state, make_params())
  chex.assert_trees_all_equal(without["w"], with_params["w"])
  decayed = factory(0.05, weight_decay=0.1)
  with pytest.raises(ValueError, match="params"):
    decayed.update(make_grads(0), decayed.init(make_params()))
  # Zero decay with a mask keeps the state layout of nonzero decay.
  mask = {"w": True, "b": False}
  assert (jax.tree.structure(factory(0.05, weight_decay=0.0, weight_decay_mask=mask)
                             .init(make_params()))
          == jax.tree.structure(factory(0.05, weight_decay=0.1, weight_decay_mask=mask)
                                .init(make_params())))


@pytest.mark.parametrize("factory", FACTORIES)
def test_update_without_params_under_inject_hyperparams(factory):
  """optax.inject_hyperparams makes even the default weight_decay=0.0 an array,
  whose value the chain cannot know: an update without params is refused in one
  line that says what to do, and doing it steps as the plain optimizer does.
  """
  static = ("min_dim_size_to_factor",) if factory is factored_vsgd else ()
  injected = optax.inject_hyperparams(factory, static_args=static)(learning_rate=0.05)
  with pytest.raises(ValueError, match="weight_decay"):
    injected.update(make_grads(0), injected.init(make_params()))
  injected = optax.inject_hyperparams(factory, static_args=(*static, "weight_decay"))(
      learning_rate=0.05)
  without, _ = injected.update(make_grads(0), injected.init(make_params()))
  plain, _ = factory(0.05).update(make_grads(0), factory(0.05).init(make_params()))
  chex.assert_trees_all_close(without["w"], plain["w"], rtol=1e-6)
  decayed = factory(0.05, weight_decay=0.1)
  with pytest.raises(ValueError, match="weight_decay"):
    decayed.update(make_grads(0), decayed.init(make_params()))


@pytest.mark.parametrize("factory", [*FACTORIES, factored_vsgd_muon])
def test_python_number_leaves_step_as_scalar_arrays_do(factory):
  """A Python float is a leaf in optax (a config's scale, say): it steps as the
  float32 scalar array it stands for, in the params and in the gradients.
  """
  def tree(scale):
    return {"scale": scale, "w": make_params()["w"]}
  grads = {"scale": 0.1, "w": make_grads(0)["w"]}
  opt = factory(0.05)
  as_number, state = opt.update(grads, opt.init(tree(0.5)), tree(0.5))
  as_array, expected = opt.update({**grads, "scale": jnp.asarray(0.1)},
                                  opt.init(tree(jnp.asarray(0.5))), tree(jnp.asarray(0.5)))
  assert as_number["scale"].dtype == jnp.float32 and as_number["scale"].shape == ()
  if factory is factored_vsgd_muon:
    # Its vector leaves step with optax.adamw (10**-0.5 of the rate, no decay on
    # a leaf of no axes), which itself steps a Python number an ulp away from
    # its scalar array; they step here as they do there.
    adamw = optax.adamw(0.05 * 10 ** -0.5, weight_decay=0.1, mask={"scale": False})
    for scale in (0.5, jnp.asarray(0.5)):
      alone, _ = adamw.update({"scale": 0.1 if isinstance(scale, float) else jnp.asarray(0.1)},
                              adamw.init({"scale": scale}), {"scale": scale})
      got = as_number if isinstance(scale, float) else as_array
      chex.assert_trees_all_equal(got["scale"], alone["scale"])
    as_number, as_array = as_number["w"], as_array["w"]
    state, expected = state.inner_states["muon"], expected.inner_states["muon"]
  chex.assert_trees_all_equal((as_number, state), (as_array, expected))


@pytest.mark.parametrize("factory", FACTORIES)
def test_schedule_annotation_resolves_for_signature_readers(factory):
  signature = inspect.signature(factory)
  assert signature.parameters["learning_rate"].annotation == optax.ScalarOrSchedule
  assert typing.get_type_hints(factory)["learning_rate"] == optax.ScalarOrSchedule
  assert signature.return_annotation is optax.GradientTransformationExtraArgs


@pytest.mark.parametrize("factory", FACTORIES)
def test_fresh_state_is_valid_at_any_count(factory):
  """A fresh state stepped at count c takes step t = c + 1 from the prior: the
  direction is the first step's whatever t is, and the new rates are averaged
  with the weights of step t (at c = 0, weight 1 on the new rates).
  """
  K, gamma = 30.0, 1e-8
  g = np.array([0.3, -2.0, 1e-4])
  for count in (0, 1, 10**6, np.iinfo(np.int32).max - 1):
    with jax.enable_x64(True):
      opt = factory(1.0)
      state = opt.init(jnp.zeros(3, jnp.float64))
      inner = state[0]._replace(count=jnp.asarray(count, jnp.int32))
      updates, new_state = opt.update(jnp.asarray(g), (inner,) + tuple(state[1:]))
    new = new_state[0]
    assert int(new.count) == count + 1
    if factory in (vsgd_optax.vsgd, factored_vsgd):  # a vector does not factor
      # The direction is the first step's whatever t is: the reference's from t = 1.
      direction, mu = reference.vsgd_steps([g])[0][:2]
      b_g0, b_ghat0 = reference.vsgd_prior_rates(K, gamma)
      _, e_mu, e_b_g, e_b_ghat = reference.vsgd_steps(
          [g], start=(count, np.zeros(3), np.full(3, b_g0), np.full(3, b_ghat0)))[0]
      chex.assert_trees_all_close(new.b_g, e_b_g, rtol=1e-12)
      chex.assert_trees_all_close(new.b_ghat, e_b_ghat, rtol=1e-12)
    else:
      # Past the first step the shape is gamma + 1; the fresh rate gamma + 1
      # gives the same first variance, so the reference goes on from there.
      start = None if count == 0 else (count, np.zeros(3), np.full(3, gamma + 1))
      _, e_mu, e_b = reference.constant_vsgd_reference([g], np.zeros(3), lambda i: 0.0,
                                                       start=start)[0]
      first = reference.constant_vsgd_reference([g], np.zeros(3), lambda i: -1.0)[0]
      direction, mu = first[0], first[1]  # a rate of -1 moves the params by the direction
      chex.assert_trees_all_close(new.b_ghat, e_b, rtol=1e-12)
    chex.assert_trees_all_close(new.mu, e_mu, rtol=1e-12)
    chex.assert_trees_all_close(new.mu, mu, rtol=1e-12)
    chex.assert_trees_all_close(-updates, direction, rtol=1e-12)

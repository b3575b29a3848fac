"""Posterior read-outs, on bare, chained and injected states."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax


def _after_steps(opt, steps=4):
  params = {"w": jnp.linspace(-1, 1, 5)}
  state = opt.init(params)
  for i in range(steps):
    grads = {"w": jnp.sin(jnp.arange(5.0) + i)}
    _, state = opt.update(grads, state, params)
  return state


def _inner(state):
  return [s for s in jax.tree.leaves(
      state, is_leaf=lambda x: isinstance(x, vsgd_optax.ScaleByVSGDState))
      if isinstance(s, vsgd_optax.ScaleByVSGDState)][0]


def test_vsgd_read_outs_follow_from_the_rates():
  state = _after_steps(vsgd_optax.vsgd(0.1, prior_strength=1e-4))
  s = _inner(state)
  a = 1e-4 + 0.5 + 5e-5
  bg, bgh = np.asarray(s.b_g["w"]), np.asarray(s.b_ghat["w"])
  np.testing.assert_allclose(vsgd_optax.effective_beta1(state)["w"], bgh / (bg + bgh), rtol=1e-6)
  sg = vsgd_optax.systematic_noise_variance(state, prior_strength=1e-4)["w"]
  sgh = vsgd_optax.observation_noise_variance(state, prior_strength=1e-4)["w"]
  np.testing.assert_allclose(sg, bg / a, rtol=1e-6)
  np.testing.assert_allclose(sgh, bgh / a, rtol=1e-6)
  np.testing.assert_allclose(vsgd_optax.posterior_variance(state, prior_strength=1e-4)["w"],
                             sg * sgh / (sg + sgh), rtol=1e-5)
  beta1 = np.asarray(vsgd_optax.effective_beta1(state)["w"])
  assert np.all((beta1 > 0) & (beta1 < 1))


def test_injected_hyperparameters_are_used():
  opt = optax.inject_hyperparams(vsgd_optax.vsgd)(learning_rate=0.1, prior_strength=1e-3)
  state = _after_steps(opt)
  a = 1e-3 + 0.5 + 5e-5
  s = state.inner_state[0]
  np.testing.assert_allclose(vsgd_optax.systematic_noise_variance(state)["w"],
                             np.asarray(s.b_g["w"]) / a, rtol=1e-6)


def test_constant_vsgd_read_outs():
  state = _after_steps(vsgd_optax.constant_vsgd(0.1, variance_ratio=9.0))
  b = np.asarray(state[0].b_ghat["w"])
  np.testing.assert_allclose(vsgd_optax.effective_beta1(state, variance_ratio=9.0)["w"], 0.9 * np.ones(5), rtol=1e-6)
  np.testing.assert_allclose(vsgd_optax.observation_noise_variance(state)["w"], b / (1 + 1e-8), rtol=1e-6)
  np.testing.assert_allclose(vsgd_optax.posterior_variance(state, variance_ratio=9.0)["w"],
                             b / (10 * (1 + 1e-8)), rtol=1e-6)


def test_missing_or_ambiguous_state_is_an_error():
  with pytest.raises(ValueError, match="found 0"):
    vsgd_optax.effective_beta1(optax.adam(0.1).init({"w": jnp.ones(2)}))
  multi = optax.multi_transform({"a": vsgd_optax.vsgd(0.1), "b": vsgd_optax.vsgd(0.1)},
                                {"x": "a", "y": "b"})
  with pytest.raises(ValueError, match="found 2"):
    vsgd_optax.effective_beta1(multi.init({"x": jnp.ones(2), "y": jnp.ones(2)}))

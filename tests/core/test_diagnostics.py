"""Posterior read-outs against the variances the next step of the float64
reference uses, on bare, chained, injected and fresh states.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference

K, GAMMA = 12.0, 1e-3  # not the defaults: a read-out must use the optimizer's own
STEPS = 5


def _grads():
  return reference.gradient_stream(seed=5, steps=STEPS, shape=(6,))


def _state_after(opt, grads):
  params = {"w": jnp.zeros(6, jnp.float64)}
  state = opt.init(params)
  for g in grads:
    _, state = opt.update({"w": jnp.asarray(g)}, state, params)
  return state


def _vsgd_variances_before_step(t):
  """(s_g, s_ghat) that step t of the reference uses: its t == 1 prior, or the
  rates after step t - 1 over the shape.
  """
  a = reference.vsgd_shape(GAMMA)
  if t == 1:
    return reference.vsgd_prior_variances(K, GAMMA)
  _, _, b_g, b_ghat = reference.vsgd_reference(
      _grads()[:t - 1], np.zeros(6), lambda i: 0.1, K=K, gamma=GAMMA)[-1]
  return b_g / a, b_ghat / a


@pytest.mark.parametrize("steps", [0, STEPS])
@pytest.mark.parametrize("injected", [False, True])
def test_vsgd_read_outs_are_the_next_steps_variances(steps, injected):
  with jax.enable_x64(True):
    if injected:
      opt = optax.inject_hyperparams(vsgd_optax.vsgd)(
          learning_rate=0.1, variance_ratio=K, prior_strength=GAMMA)
      given = {}
    else:
      opt = vsgd_optax.vsgd(0.1, variance_ratio=K, prior_strength=GAMMA)
      given = {"prior_strength": GAMMA}
    state = _state_after(opt, _grads()[:steps])
    s_g, s_ghat = _vsgd_variances_before_step(steps + 1)
    check = lambda got, want: chex.assert_trees_all_close(got["w"], want, rtol=1e-12)
    check(vsgd_optax.systematic_noise_variance(state, **given), s_g)
    check(vsgd_optax.observation_noise_variance(state, **given), s_ghat)
    check(vsgd_optax.posterior_variance(state, **given), s_g * s_ghat / (s_g + s_ghat))
    # The weight on the previous mean: 1 - s_g / (s_g + s_ghat).
    check(vsgd_optax.effective_beta1(state), s_ghat / (s_g + s_ghat))


@pytest.mark.parametrize("steps", [0, STEPS])
def test_constant_vsgd_read_outs_are_the_next_steps_variances(steps):
  with jax.enable_x64(True):
    opt = vsgd_optax.constant_vsgd(0.1, variance_ratio=K, prior_strength=GAMMA)
    state = _state_after(opt, _grads()[:steps])
    if steps == 0:
      b, a = reference.constant_vsgd_prior(GAMMA)  # Algorithm 2's b_0 and a_0
    else:
      b = reference.constant_vsgd_reference(
          _grads()[:steps], np.zeros(6), lambda i: 0.1, K=K, gamma=GAMMA)[-1][2]
      a = GAMMA + 1
    hyper = {"prior_strength": GAMMA, "variance_ratio": K}
    check = lambda got, want: chex.assert_trees_all_close(got["w"], want, rtol=1e-12)
    check(vsgd_optax.observation_noise_variance(state, prior_strength=GAMMA), b / a)
    check(vsgd_optax.systematic_noise_variance(state, **hyper), b / (a * K))
    check(vsgd_optax.posterior_variance(state, **hyper), b / ((K + 1) * a))
    check(vsgd_optax.effective_beta1(state, variance_ratio=K), np.full(6, K / (K + 1)))


@pytest.mark.parametrize("steps", [0, STEPS])
def test_factored_read_outs_are_the_next_steps_variances(steps):
  """``vsgd_muon``'s default state keeps a matrix of 128 or more each way as its
  rates' row and column means; the read-outs give the variances its next step
  rebuilds from them (the float64 reference of factored rates), and need both
  priors to rebuild them.
  """
  shape = (128, 130)
  grads = reference.gradient_stream(seed=9, steps=steps, shape=shape)
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd_muon(0.1, variance_ratio=K, prior_strength=GAMMA)
    params = {"w": jnp.zeros(shape, jnp.float64), "b": jnp.zeros(3, jnp.float64)}
    state = opt.init(params)
    for g in grads:
      _, state = opt.update({"w": jnp.asarray(g), "b": jnp.ones(3, jnp.float64)}, state,
                            params)
    matrices = state.inner_states["muon"]
    assert isinstance(matrices.inner_state[0].b_g["w"], vsgd_optax.FactoredRate)
    if steps == 0:
      s_g, s_ghat = reference.vsgd_prior_variances(K, GAMMA)
    else:
      means = reference.factored_vsgd_steps(grads, 0, 1, K=K, gamma=GAMMA)[-1][2]
      a = reference.vsgd_shape(GAMMA)
      s_g = reference.rebuilt_rate(*means["b_g"], GAMMA, 0) / a
      s_ghat = reference.rebuilt_rate(*means["b_ghat"], K * GAMMA, 0) / a
    hyper = {"prior_strength": GAMMA, "variance_ratio": K}
    check = lambda got, want: chex.assert_trees_all_close(
        got["w"], np.broadcast_to(want, shape), rtol=1e-10)
    check(vsgd_optax.systematic_noise_variance(matrices, **hyper), s_g)
    check(vsgd_optax.observation_noise_variance(matrices, **hyper), s_ghat)
    check(vsgd_optax.posterior_variance(matrices, **hyper), s_g * s_ghat / (s_g + s_ghat))
    check(vsgd_optax.effective_beta1(matrices, **hyper), s_ghat / (s_g + s_ghat))
    for missing in hyper:
      with pytest.raises(ValueError, match=missing):
        vsgd_optax.effective_beta1(
            matrices, **{k: v for k, v in hyper.items() if k != missing})


def test_a_missing_hyperparameter_is_an_error_not_a_default():
  vsgd_state = vsgd_optax.vsgd(0.1, prior_strength=GAMMA).init({"w": jnp.ones(2)})
  with pytest.raises(ValueError, match="prior_strength"):
    vsgd_optax.observation_noise_variance(vsgd_state)
  with pytest.raises(ValueError, match="prior_strength"):
    vsgd_optax.posterior_variance(vsgd_state)
  constant_state = vsgd_optax.constant_vsgd(0.1).init({"w": jnp.ones(2)})
  with pytest.raises(ValueError, match="variance_ratio"):
    vsgd_optax.effective_beta1(constant_state)
  with pytest.raises(ValueError, match="variance_ratio"):
    vsgd_optax.systematic_noise_variance(constant_state, prior_strength=1e-8)


def test_missing_or_ambiguous_state_is_an_error():
  with pytest.raises(ValueError, match="found 0"):
    vsgd_optax.effective_beta1(optax.adam(0.1).init({"w": jnp.ones(2)}))
  multi = optax.multi_transform({"a": vsgd_optax.vsgd(0.1), "b": vsgd_optax.vsgd(0.1)},
                                {"x": "a", "y": "b"})
  with pytest.raises(ValueError, match="found 2"):
    vsgd_optax.effective_beta1(multi.init({"x": jnp.ones(2), "y": jnp.ones(2)}))

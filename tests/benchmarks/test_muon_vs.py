"""Muon-VS (arXiv 2601.14603) against its equations in float64, and its refusal of a vector."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.lm import muon_vs
from tests.support import reference


def muon_vs_steps(grads, beta=0.95, eps=1e-8):
  """Muon-VS's steps of one ``(fan_in, fan_out)`` kernel, in float64, from the paper's
  equations: momentum M and variance Gamma about the previous momentum, both
  bias-corrected, the Nesterov look-ahead G + beta / (1 - beta) M_hat divided by
  sqrt(Gamma_hat + eps), Newton-Schulz, Muon's width scale.
  """
  m = np.zeros_like(np.asarray(grads[0], np.float64))
  gamma = np.zeros_like(m)
  steps = []
  for t, g in enumerate(grads, start=1):
    g = np.asarray(g, np.float64)
    m, gamma = beta * m + (1 - beta) * g, beta * gamma + beta * (1 - beta) * (m - g) ** 2
    m_hat, gamma_hat = m / (1 - beta ** t), gamma / (1 - beta ** t)
    lookahead = g + beta / (1 - beta) * m_hat
    fan_in, fan_out = g.shape
    steps.append(reference.newton_schulz(lookahead / np.sqrt(gamma_hat + eps))
                 * np.sqrt(max(1.0, fan_out / fan_in)))
  return steps


def test_muon_vs_matches_its_equations_in_float64():
  rng = np.random.default_rng(0)
  for shape in ((6, 4), (4, 9)):
    # Gradients about a drifting mean, so that the variance tracker is not the
    # gradient's square alone.
    grads = [rng.normal(size=shape) * 0.1 + 0.05 * t for t in range(6)]
    want = muon_vs_steps(grads)
    with jax.enable_x64(True):
      opt = muon_vs.scale_by_muon_vs()
      state = opt.init(jnp.zeros(shape, jnp.float64))
      for g, expected in zip(grads, want, strict=True):
        step, state = opt.update(jnp.asarray(g), state)
        np.testing.assert_allclose(step, expected, rtol=1e-9, atol=1e-12)
      assert int(state.count) == len(grads)


def test_the_first_step_is_the_orthogonalized_sign_of_the_gradient():
  # At t = 1: M_hat = G, Gamma_hat = beta G^2, so the look-ahead over the root
  # is sign(G) / ((1 - beta) sqrt(beta)) where eps is negligible.
  g = np.random.default_rng(1).normal(size=(5, 5))
  with jax.enable_x64(True):
    opt = muon_vs.scale_by_muon_vs(eps=1e-30)
    step, _ = opt.update(jnp.asarray(g), opt.init(jnp.zeros((5, 5), jnp.float64)))
  lookahead = np.sign(g) / ((1 - 0.95) * np.sqrt(0.95))
  np.testing.assert_allclose(step, reference.newton_schulz(lookahead), rtol=1e-9, atol=1e-12)


def test_muon_vs_decays_the_weights_times_the_rate_and_steps_against_the_update():
  g, w = (np.random.default_rng(2).normal(size=(4, 6)) for _ in range(2))
  with jax.enable_x64(True):
    opt = muon_vs.muon_vs(0.1, weight_decay=0.5)
    params = jnp.asarray(w)
    update, _ = opt.update(jnp.asarray(g), opt.init(params), params)
  want = -0.1 * (muon_vs_steps([g])[0] + 0.5 * w)
  np.testing.assert_allclose(update, want, rtol=1e-9, atol=1e-12)


def test_muon_vs_refuses_a_leaf_that_is_not_a_2d_kernel():
  with pytest.raises(ValueError, match="bias"):
    muon_vs.scale_by_muon_vs().init({"bias": jnp.zeros(3)})

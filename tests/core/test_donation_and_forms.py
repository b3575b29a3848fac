"""What the step costs and how it is computed: donating the state alone needs at
most one temporary per parameter array (two where factored_vsgd factors it), and each form of the VSGD step (in
place on the CPU, as written elsewhere) matches the float64 reference.
"""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.support import reference
from tests.support.helpers import FACTORIES
from tests.support.helpers import factored_vsgd


def _temp_bytes(opt, params, grads, donate):
  def step(params, state, grads):
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state
  compiled = jax.jit(step, donate_argnums=donate).lower(
      params, opt.init(params), grads).compile()
  return compiled.memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("factory", FACTORIES)
def test_donating_only_the_state_needs_at_most_one_temporary_per_leaf(factory):
  """From the compiled program's memory analysis, not from timing: beyond
  what Adam's step holds, at most one full-size array per parameter array.
  """
  params = {f"layer{i}": jnp.ones((256, 128 + 32 * i)) for i in range(4)}
  grads = jax.tree.map(lambda p: p * 1e-3, params)
  largest = max(p.nbytes for p in jax.tree.leaves(params))
  total = sum(p.nbytes for p in jax.tree.leaves(params))
  # A factored leaf also holds its two rebuilt rates, which XLA:CPU keeps as
  # full-size arrays to take their row and column means (docs/algorithm.md),
  # and its new means: vectors; and the gradient with its elements too large
  # to observe read as 0 (a spike: _factored), which XLA:CPU keeps in one
  # buffer that the leaves share.
  allowed = total
  if factory is factored_vsgd:
    state = factory(1e-3).init(params)[0]
    allowed = (2 * total + largest
               + sum(x.nbytes for x in jax.tree.leaves((state.b_g, state.b_ghat))))
  adam = _temp_bytes(optax.adam(1e-3), params, grads, donate=(1,))
  ours = _temp_bytes(factory(1e-3), params, grads, donate=(1,))
  assert adam < largest  # Adam's donated step holds no full-size temporary
  assert ours <= adam + allowed, (ours, adam, total)
  # Donating params and state together as well.
  ours_both = _temp_bytes(factory(1e-3), params, grads, donate=(0, 1))
  assert ours_both <= _temp_bytes(optax.adam(1e-3), params, grads, donate=(0, 1)) + allowed


def _form_trajectory(in_place, with_variance):
  from vsgd_optax import _update_rules
  grads = reference.gradient_stream(seed=21, steps=200, shape=(5,))
  rng = np.random.default_rng(22)
  variances = ([rng.uniform(0.1, 2.0, size=5) * np.abs(g) ** 2 for g in grads]
               if with_variance else None)
  K, gamma = 30.0, 1e-8
  b_g, b_ghat = _update_rules.prior_rates(K, gamma)
  mu = jnp.zeros(5, jnp.float64)
  b_g, b_ghat = jnp.full(5, b_g), jnp.full(5, b_ghat)
  theta = jnp.linspace(-1.0, 1.0, 5)
  step = _update_rules.vsgd_in_place if in_place else _update_rules.vsgd_as_written
  names = ("t", "K", "gamma", "kappa_g", "kappa_ghat", "eps")
  form = jax.jit(lambda g, mu, b_g, b_ghat, *hyper, v: step(
      g, mu, b_g, b_ghat, **dict(zip(names, hyper, strict=True)), grad_variance=v))
  out = []
  for t, g in enumerate(grads, start=1):
    v = None if variances is None else jnp.asarray(variances[t - 1])
    direction, mu, b_g, b_ghat = form(jnp.asarray(g), mu, b_g, b_ghat, float(t), K,
                                      gamma, 0.81, 0.9, 1e-8, v=v)
    theta = theta - 0.01 * direction
    out.append((theta, mu, b_g, b_ghat))
  return grads, variances, out


@pytest.mark.parametrize("with_variance", [False, True], ids=["mean", "per_example"])
@pytest.mark.parametrize("in_place", [False, True], ids=["as_written", "in_place"])
def test_each_form_of_the_vsgd_step_matches_the_reference(in_place, with_variance):
  """The CPU takes the in-place form, other backends the form as written
  (``jax.lax.platform_dependent``); both are called directly here, on the
  CPU, with and without per-example variances, so that what a GPU or TPU
  compiles is checked on every machine.
  """
  with jax.enable_x64(True):
    grads, variances, got = _form_trajectory(in_place, with_variance)
    want = reference.vsgd_reference(grads, np.linspace(-1.0, 1.0, 5), lambda i: 0.01,
                                    grad_variances=variances)
    for step_got, step_want in zip(got, want, strict=True):
      for x, y in zip(step_got, step_want, strict=True):
        chex.assert_trees_all_close(x, y, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("with_variance", [False, True], ids=["mean", "per_example"])
def test_the_constant_vsgd_step_matches_the_reference(with_variance):
  """Constant VSGD has one form for every backend; called directly, with and
  without per-example variances, against Algorithm 2 in float64.
  """
  from vsgd_optax import _update_rules
  K, gamma = 30.0, 1e-8
  grads = reference.gradient_stream(seed=23, steps=200, shape=(5,))
  rng = np.random.default_rng(24)
  variances = ([rng.uniform(0.1, 2.0, size=5) * np.abs(g) ** 2 for g in grads]
               if with_variance else None)
  want = reference.constant_vsgd_reference(grads, np.linspace(-1.0, 1.0, 5), lambda i: 0.01,
                                           grad_variances=variances)
  with jax.enable_x64(True):
    mu = jnp.zeros(5, jnp.float64)
    b_ghat = jnp.full(5, _update_rules.constant_prior_rate(gamma), jnp.float64)
    theta = jnp.linspace(-1.0, 1.0, 5)
    for t, (g, (e_theta, e_mu, e_b)) in enumerate(zip(grads, want, strict=True), start=1):
      v = None if variances is None else jnp.asarray(variances[t - 1])
      update = _update_rules.constant_vsgd_leaf(
          jnp.asarray(g), mu, b_ghat, t=jnp.float64(t), K=K, gamma=gamma, kappa=0.9,
          eps=1e-8, grad_variance=v)
      mu, b_ghat = update.mu, update.b_ghat
      theta = theta - 0.01 * update.direction
      chex.assert_trees_all_close(theta, e_theta, rtol=1e-10, atol=1e-14)
      chex.assert_trees_all_close(mu, e_mu, rtol=1e-10, atol=1e-14)
      chex.assert_trees_all_close(b_ghat, e_b, rtol=1e-10)


def test_the_two_named_forms_agree_with_each_other():
  """``vsgd_as_written`` and ``vsgd_in_place`` on the same float64 inputs, with
  and without per-example variances: equal up to rounding, and the forms
  ``scale_by_vsgd`` hands the compilers (``VSGD_FORMS``) take the in-place one
  on the CPU bit for bit.
  """
  from vsgd_optax import _update_rules

  def rule(*args, **kwargs):
    return jax.lax.platform_dependent(**{
        compiler: functools.partial(form, *args, **kwargs)
        for compiler, form in _update_rules.VSGD_FORMS.items()})
  with jax.enable_x64(True):
    rng = np.random.default_rng(23)
    shape = (64,)
    g = jnp.asarray(rng.normal(size=shape))
    mu = jnp.asarray(rng.normal(size=shape) * 0.1)
    b_g = jnp.asarray(rng.uniform(1e-6, 1e-2, size=shape))
    b_ghat = jnp.asarray(rng.uniform(1e-5, 1e-1, size=shape))
    hyper = dict(t=jnp.asarray(7.0), K=30.0, gamma=1e-8, kappa_g=0.81, kappa_ghat=0.9, eps=1e-8)
    for v in (None, jnp.asarray(rng.uniform(0.1, 1.0, size=shape))):
      written = _update_rules.vsgd_as_written(g, mu, b_g, b_ghat, **hyper, grad_variance=v)
      in_place = _update_rules.vsgd_in_place(g, mu, b_g, b_ghat, **hyper, grad_variance=v)
      for a, b in zip(written, in_place, strict=True):
        chex.assert_trees_all_close(np.asarray(a), np.asarray(b), rtol=1e-12)
      chosen = jax.jit(lambda *args, v=v: rule(
          *args, **hyper, grad_variance=v))(g, mu, b_g, b_ghat)
      direct = jax.jit(lambda *args, v=v: _update_rules.vsgd_in_place(
          *args, **hyper, grad_variance=v))(g, mu, b_g, b_ghat)
      for a, b in zip(chosen, direct, strict=True):
        chex.assert_trees_all_equal(np.asarray(a), np.asarray(b))

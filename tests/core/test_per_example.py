"""Per-example VSGD: the closed form against the appendix's loop over examples."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference

STEPS, M, D = 200, 6, 5


def _per_example_stream(seed):
  rng = np.random.default_rng(seed)
  scale = 10.0 ** rng.uniform(-2, 1, size=D)
  drift = np.cumsum(rng.normal(size=(STEPS, D)), axis=0) * 0.1
  return [(drift[i] + rng.normal(size=(M, D)) * rng.uniform(0.1, 3)) * scale
          for i in range(STEPS)]


def _run(opt, batches, params0, use_variance=True):
  params = jnp.asarray(params0, jnp.float64)
  state = opt.init(params)
  update = jax.jit(opt.update)
  history = []
  for batch in batches:
    mean, var = vsgd_optax.per_example_moments(jnp.asarray(batch, jnp.float64))
    extra = {"grad_variance": var} if use_variance else {}
    updates, state = update(mean, state, params, **extra)
    params = optax.apply_updates(params, updates)
    history.append((params, state[0]))
  return history


def test_vsgd_closed_form_equals_naive_loop():
  batches = _per_example_stream(0)
  params0 = np.linspace(-1, 1, D)
  expected = reference.vsgd_per_example_naive(batches, params0, lambda i: 0.01, K=20.0)
  with jax.enable_x64(True):
    got = _run(vsgd_optax.vsgd(0.01, variance_ratio=20.0), batches, params0)
    for (p, s), (ep, emu, ebg, ebgh) in zip(got, expected, strict=True):
      chex.assert_trees_all_close(p, ep, rtol=1e-10, atol=1e-12)
      chex.assert_trees_all_close(s.mu, emu, rtol=1e-9, atol=1e-13)
      chex.assert_trees_all_close(s.b_g, ebg, rtol=1e-9)
      chex.assert_trees_all_close(s.b_ghat, ebgh, rtol=1e-9)


def test_constant_vsgd_closed_form_equals_naive_loop():
  batches = _per_example_stream(1)
  params0 = np.linspace(-1, 1, D)
  expected = reference.constant_vsgd_per_example_naive(batches, params0, lambda i: 0.01)
  with jax.enable_x64(True):
    got = _run(vsgd_optax.constant_vsgd(0.01), batches, params0)
    for (p, s), (ep, emu, eb) in zip(got, expected, strict=True):
      chex.assert_trees_all_close(p, ep, rtol=1e-10, atol=1e-12)
      chex.assert_trees_all_close(s.mu, emu, rtol=1e-9, atol=1e-13)
      chex.assert_trees_all_close(s.b_ghat, eb, rtol=1e-9)


def test_without_variance_matches_plain_vsgd_on_the_mean():
  batches = _per_example_stream(2)
  params0 = np.linspace(-1, 1, D)
  means = [b.mean(axis=0) for b in batches]
  expected = reference.vsgd_reference(means, params0, lambda i: 0.01)
  with jax.enable_x64(True):
    got = _run(vsgd_optax.vsgd(0.01), batches, params0, use_variance=False)
    for (p, s), (ep, emu, ebg, ebgh) in zip(got, expected, strict=True):
      chex.assert_trees_all_close(p, ep, rtol=1e-10, atol=1e-12)
      chex.assert_trees_all_close(s.mu, emu, rtol=1e-9, atol=1e-13)
      chex.assert_trees_all_close(s.b_g, ebg, rtol=1e-9)
      chex.assert_trees_all_close(s.b_ghat, ebgh, rtol=1e-9)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_zero_variance_is_the_ordinary_update(factory):
  # Up to rounding: without a variance VSGD may be computed in another form
  # of the same equations (vsgd_optax/_lowering.py).
  opt = factory(0.05)
  params = {"w": jnp.linspace(-1, 1, 4)}
  s1 = s2 = opt.init(params)
  for i in range(5):
    g = {"w": jnp.cos(jnp.arange(4.0) * (i + 1))}
    u1, s1 = opt.update(g, s1, params)
    u2, s2 = opt.update(g, s2, params, grad_variance={"w": jnp.zeros(4)})
    chex.assert_trees_all_close(u1["w"], u2["w"], rtol=1e-6)
  chex.assert_trees_all_close(s1, s2, rtol=1e-5)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_grad_variance_flows_through_chain_and_keeps_dtypes(factory):
  """Through ``optax.chain`` and ``jit``: one trace, updates in the params'
  bfloat16, and the state the float64 reference computes with the variances;
  a chain that dropped them would give the reference without variances.
  """
  opt = optax.chain(optax.clip_by_global_norm(10.0), factory(0.1))
  params = {"w": jnp.ones(3, jnp.bfloat16)}
  state = opt.init(params)
  traces = []

  @jax.jit
  def step(params, state, g, v):
    traces.append(1)
    return opt.update(g, state, params, grad_variance=v)

  grads = [np.array([1.0, -2.0, 0.5]) * (1.0 + i) for i in range(3)]  # norms under 10
  variances = [np.array([0.5, 2.0, 0.25]) * (1.0 + i) for i in range(3)]
  for g, v in zip(grads, variances, strict=True):
    updates, state = step(params, state, {"w": jnp.asarray(g, jnp.bfloat16)},
                          {"w": jnp.asarray(v, jnp.bfloat16)})
  assert len(traces) == 1 and updates["w"].dtype == jnp.bfloat16
  inner = state[1][0]
  zeros = np.zeros(3)
  if factory is vsgd_optax.vsgd:
    with_v = reference.vsgd_reference(grads, zeros, lambda i: 0.1, grad_variances=variances)
    without = reference.vsgd_reference(grads, zeros, lambda i: 0.1)
    got, want, plain = inner.b_ghat["w"], with_v[-1][3], without[-1][3]
    chex.assert_trees_all_close(np.asarray(inner.b_g["w"]), with_v[-1][2], rtol=1e-5)
  else:
    with_v = reference.constant_vsgd_reference(grads, zeros, lambda i: 0.1,
                                               grad_variances=variances)
    without = reference.constant_vsgd_reference(grads, zeros, lambda i: 0.1)
    got, want, plain = inner.b_ghat["w"], with_v[-1][2], without[-1][2]
  chex.assert_trees_all_close(np.asarray(got), want, rtol=1e-5)
  assert np.all(np.abs(want / plain - 1) > 0.05)  # the variances matter here


def test_per_example_moments_and_value_and_grad():
  grads = {"w": jnp.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])}
  mean, var = vsgd_optax.per_example_moments(grads)
  chex.assert_trees_all_close(mean["w"], np.array([3.0, 3.0]), rtol=1e-7)
  chex.assert_trees_all_close(var["w"], np.var(np.asarray(grads["w"]), axis=0), rtol=1e-6)
  with pytest.raises(ValueError, match="per_example_grads"):
    vsgd_optax.per_example_moments({"w": jnp.asarray(1.0)})

  def loss(params, x, y):
    return (jnp.dot(params["w"], x) - y) ** 2

  params = {"w": jnp.array([0.5, -1.0])}
  xs, ys = jnp.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]]), jnp.array([1.0, 0.0, 2.0])
  mean_loss, mean_grad, variance = vsgd_optax.per_example_value_and_grad(loss)(params, xs, ys)
  examples = list(zip(xs, ys, strict=True))
  per = np.stack([np.asarray(jax.grad(loss)(params, x, y)["w"]) for x, y in examples])
  chex.assert_trees_all_close(mean_grad["w"], per.mean(0), rtol=1e-6)
  chex.assert_trees_all_close(variance["w"], per.var(0), rtol=1e-5)
  chex.assert_trees_all_close(mean_loss, np.mean([loss(params, x, y) for x, y in examples]),
                              rtol=1e-6)

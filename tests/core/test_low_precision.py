"""VSGD with low-precision parameters or state, against float64 references."""

import chex
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference

K, GAMMA, KAPPA_G, KAPPA_GHAT, EPS = 30.0, 1e-8, 0.81, 0.9, 1e-8
SHAPE = reference.vsgd_shape(GAMMA)  # the authors' 2a = 2 gamma + 1 + 1e-4, halved
LR = 1e-2


def _gradients(steps, size, dtype, seed):
  """Fixed gradients spanning four decades, exactly representable in ``dtype``:
  a drift plus noise, so that both noise rates of VSGD move.
  """
  rng = np.random.default_rng(seed)
  scale = np.logspace(-3, 1, size)
  drift = rng.standard_normal(size) * scale
  out = [drift + 0.5 * scale * rng.standard_normal(size) for _ in range(steps)]
  return [np.asarray(np.asarray(g, dtype), np.float64) for g in out]


def _bf16(x):
  return np.asarray(np.asarray(x, ml_dtypes.bfloat16), np.float64)


def _reference_states(grads, mu, b_g, b_ghat, shape=SHAPE, state_dtype=None):
  """Per step ``(direction, mu, b_g, b_ghat)`` of the float64 reference, from
  the state given, each stored state value rounded to ``state_dtype``.
  """
  return reference.vsgd_steps(grads, K=K, gamma=GAMMA, kappa_g=KAPPA_G, kappa_ghat=KAPPA_GHAT,
                              eps=EPS, start=(0, mu, b_g, b_ghat), shape=shape,
                              state_dtype=state_dtype)


def _run(params, grads, **kwargs):
  """The package's ``vsgd`` on fixed gradients: per step (params, state)."""
  opt = vsgd_optax.vsgd(LR, **kwargs)
  state = opt.init(params)
  init = state[0]
  step = jax.jit(lambda g, s, p: opt.update(g, s, p))
  history = []
  for g in grads:
    updates, state = step(jnp.asarray(g, params.dtype), state, params)
    assert updates.dtype == params.dtype
    params = optax.apply_updates(params, updates)
    history.append((params, state[0]))
  return init, history


def _f64(x):
  return np.asarray(jnp.asarray(x, jnp.float32), np.float64)


@pytest.mark.parametrize("param_dtype", [jnp.bfloat16, jnp.float16])
def test_low_precision_params_with_float32_state(param_dtype):
  """bfloat16 or float16 parameters, default state: the state is float32, the
  update is computed in float32, and it matches float64 to float32 rounding.
  """
  np_dtype = np.dtype(param_dtype)
  grads = _gradients(6, 64, np_dtype, seed=3)
  params0 = jnp.asarray(np.linspace(-2, 2, 64), param_dtype)
  init, history = _run(params0, grads)
  assert init.mu.dtype == init.b_g.dtype == init.b_ghat.dtype == jnp.float32
  b_g0, b_ghat0 = reference.vsgd_prior_rates(K, GAMMA)
  chex.assert_trees_all_close(_f64(init.b_g), b_g0, rtol=1e-6)
  chex.assert_trees_all_close(_f64(init.b_ghat), b_ghat0, rtol=1e-6)
  expected = _reference_states(grads, _f64(init.mu), _f64(init.b_g), _f64(init.b_ghat))
  theta = np.asarray(params0, np.float64)
  for (params, state), (direction, mu, b_g, b_ghat) in zip(history, expected, strict=True):
    assert params.dtype == param_dtype and state.mu.dtype == jnp.float32
    assert np.all(np.isfinite(_f64(params)))
    # b_g and mu are looser: on the CPU, b_g's residual is rescaled from mu's
    # by s_g / sigma2 - 1, which loses float32 digits when s_g << s_ghat.
    chex.assert_trees_all_close(_f64(state.b_g), b_g, rtol=1e-4)
    chex.assert_trees_all_close(_f64(state.b_ghat), b_ghat, rtol=2e-6)
    chex.assert_trees_all_close(_f64(state.mu), mu, rtol=1e-4, atol=1e-9)
    # The update is the float32 direction rounded once to the parameters'
    # dtype, then added there: the parameters stay within a rounding of each
    # step's exact move.
    step = np.asarray(np.asarray(-LR * direction, np_dtype), np.float64)
    theta = np.asarray(np.asarray(theta + step, np_dtype), np.float64)
    ulp = np.abs(theta) * float(jnp.finfo(param_dtype).eps)
    chex.assert_trees_all_close(_f64(params), theta, rtol=0, atol=1.01 * ulp.max())


def test_shape_constant_is_not_rounded_to_the_parameter_dtype():
  """Rounded to bfloat16, the shape 0.50005 becomes 0.5. The package's state
  after a few steps with bfloat16 parameters must match the reference with the
  true shape, and be told apart from one with the rounded shape.
  """
  rounded = float(_bf16(SHAPE))
  assert rounded == 0.5  # what the authors' code would use in bfloat16
  grads = _gradients(4, 64, np.dtype(jnp.bfloat16), seed=5)
  params0 = jnp.zeros(64, jnp.bfloat16)
  init, history = _run(params0, grads)
  start = _f64(init.mu), _f64(init.b_g), _f64(init.b_ghat)
  true_shape = _reference_states(grads, *start)
  bf16_shape = _reference_states(grads, *start, shape=rounded)
  got = _f64(history[-1][1].b_ghat)
  err_true = np.max(np.abs(got / true_shape[-1][3] - 1))
  err_rounded = np.max(np.abs(got / bf16_shape[-1][3] - 1))
  assert err_true < 1e-6
  assert err_rounded > 30 * err_true


def test_bfloat16_state_with_float32_params():
  """``state_dtype=bfloat16`` rounded to nearest: the state is stored in
  bfloat16 and computed in float32; it matches float64 equations whose state
  is rounded to nearest bfloat16, from the first step, and the parameters stay
  close to the float32 run's. The default, stochastic rounding, is checked
  against its own reference in ``test_stochastic_rounding.py``.
  """
  grads = _gradients(8, 64, np.float32, seed=7)
  params0 = jnp.asarray(np.linspace(-2, 2, 64), jnp.float32)
  init, history = _run(params0, grads, state_dtype=jnp.bfloat16, state_rounding="nearest")
  assert init.mu.dtype == init.b_g.dtype == init.b_ghat.dtype == jnp.bfloat16
  # The prior rates are stored rounded to bfloat16 (8 significant bits).
  b_g0, b_ghat0 = reference.vsgd_prior_rates(K, GAMMA)
  chex.assert_trees_all_close(_f64(init.b_g), b_g0, rtol=2 ** -8)
  chex.assert_trees_all_close(_f64(init.b_ghat), b_ghat0, rtol=2 ** -8)
  expected = _reference_states(grads, _f64(init.mu), _f64(init.b_g), _f64(init.b_ghat),
                               state_dtype=ml_dtypes.bfloat16)
  theta = np.asarray(params0, np.float64)
  for (params, state), (direction, mu, b_g, b_ghat) in zip(history, expected, strict=True):
    assert params.dtype == jnp.float32 and state.b_g.dtype == jnp.bfloat16
    assert np.all(np.isfinite(_f64(params)))
    assert np.all(_f64(state.b_g) > 0) and np.all(_f64(state.b_ghat) > 0)
    # The float32 and float64 arithmetic before the rounding to bfloat16 may
    # rarely land on either side of a rounding boundary: one bfloat16 unit.
    chex.assert_trees_all_close(_f64(state.b_g), b_g, rtol=2 ** -7)
    chex.assert_trees_all_close(_f64(state.b_ghat), b_ghat, rtol=2 ** -7)
    chex.assert_trees_all_close(_f64(state.mu), mu, rtol=2 ** -7, atol=1e-12)
    theta = theta - LR * direction
    chex.assert_trees_all_close(_f64(params), theta, rtol=1e-5, atol=1e-6)
  # Against the float32-state run: every coordinate moved the same way, and
  # the moves differ by 0.14% in norm here (a bfloat16 unit is 0.4%).
  _, full = _run(params0, grads)
  move_bf16 = _f64(history[-1][0]) - np.asarray(params0, np.float64)
  move_f32 = _f64(full[-1][0]) - np.asarray(params0, np.float64)
  assert np.all(np.sign(move_bf16) == np.sign(move_f32))
  assert np.linalg.norm(move_bf16 - move_f32) < 0.004 * np.linalg.norm(move_f32)


@pytest.mark.slow  # trains 300 steps, twice
def test_bfloat16_state_and_bfloat16_params_stay_finite():
  """Both in bfloat16, many steps of a noisy quadratic: finite throughout,
  and the loss falls as it does with float32 everything.
  """
  rng = np.random.default_rng(11)
  target = rng.standard_normal(256) * np.logspace(-2, 1, 256)

  def train(dtype, state_dtype):
    params = jnp.zeros(256, dtype)
    opt = vsgd_optax.vsgd(0.05, state_dtype=state_dtype)
    state = opt.init(params)

    def step(carry, key):
      params, state = carry
      noise = jax.random.normal(key, params.shape)
      grad = (params.astype(jnp.float32) - target + 0.1 * noise).astype(dtype)
      updates, state = opt.update(grad, state, params)
      params = optax.apply_updates(params, updates)
      return (params, state), jnp.all(jnp.isfinite(params))

    keys = jax.random.split(jax.random.key(0), 300)
    (params, _), finite = jax.jit(lambda c, k: jax.lax.scan(step, c, k))((params, state), keys)
    assert np.all(np.asarray(finite))
    return float(np.mean((_f64(params) - target) ** 2))

  start = float(np.mean(target ** 2))
  low, full = train(jnp.bfloat16, jnp.bfloat16), train(jnp.float32, None)
  assert full < 0.05 * start
  assert low < 0.05 * start
  assert abs(low - full) < 0.5 * full + 1e-3

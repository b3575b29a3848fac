r"""The gradient noise scale and the posterior signal-to-noise ratio, from VSGD's state.

McCandlish et al. (2018) define the simple noise scale
:math:`B_\text{simple} = \operatorname{tr}\Sigma / |G|^2`, with :math:`\Sigma` the
covariance of one example's gradient and :math:`G` the true gradient. VSGD's
state holds, per parameter, an estimate of the mini-batch gradient's noise
variance and a smoothed mean of the gradient; ``docs/algorithm.md`` derives
the estimator below from the update and states its assumptions:

* noise of one mini-batch gradient, per coordinate: :math:`n_i = s_{\hat g, i}`
  (``observation_noise_variance``), or :math:`s_{\hat g, i} / B` for per-example
  VSGD, whose observations are single examples;
* :math:`\operatorname{tr}\hat\Sigma = B \sum_i n_i`;
* the mean is an exponential average with weight :math:`w_i = \sigma^2_i /
  s_{\hat g, i}` on each new gradient, so at fixed parameters its sampling
  variance is :math:`w_i n_i / (2 - w_i)`, which is subtracted from
  :math:`\mu_i^2`: :math:`|\hat G|^2 = \sum_i \mu_i^2 - w_i n_i / (2 - w_i)`.

Nothing here reads a gradient or changes the update: it is a function of the
state alone, cheap enough to run inside a jitted training step.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _diagnostics


def _check_batch_size(batch_size: Any) -> int:
  if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
    raise TypeError(
        f"batch_size must be a positive int, the number of examples in each mini-batch the "
        f"optimizer saw; got {batch_size!r} of type {type(batch_size).__name__}.")
  if batch_size < 1:
    raise ValueError(
        f"batch_size must be a positive int, the number of examples in each mini-batch the "
        f"optimizer saw; got {batch_size}.")
  return int(batch_size)


def _moments(opt_state, prior_strength, variance_ratio):
  """``(state, mu, n_ghat, sigma2)`` as pytrees: the mean, the observation
  noise variance and the posterior variance the next step would use.
  """
  state, _ = _diagnostics._find(opt_state)
  n_ghat = _diagnostics.observation_noise_variance(opt_state, prior_strength=prior_strength)
  sigma2 = _diagnostics.posterior_variance(
      opt_state, prior_strength=prior_strength, variance_ratio=variance_ratio)
  return state, state.mu, n_ghat, sigma2


def gradient_noise_scale(
    opt_state: Any, *,
    batch_size: int,
    prior_strength: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike | None = None,
    per_example: bool = False,
    per_leaf: bool = False) -> Any:
  r"""The simple gradient noise scale :math:`\operatorname{tr}\Sigma / |G|^2`, from the state.

  :math:`B_\text{simple}` (McCandlish et al., 2018) predicts the critical
  batch size: well below it, doubling the batch nearly halves the steps to a
  result; well above it, a larger batch buys few steps. The estimate is
  :math:`B \sum_i n_i / \sum_i (\mu_i^2 - w_i n_i / (2 - w_i))`, with
  :math:`n_i` the mini-batch noise variance the state holds and
  :math:`w_i = \sigma_i^2 / s_{\hat g, i}` the weight of a new gradient in
  :math:`\mu` (derivation and assumptions: ``docs/algorithm.md``).

  It is a snapshot of smoothed statistics, not an exact value: see the
  validation in ``docs/results.md`` before reading much into one number.

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state
      (bare, chained, masked, or wrapped by ``optax.inject_hyperparams``).
    batch_size: the number of examples in each mini-batch the optimizer was
      given (a positive int).
    prior_strength: :math:`\gamma`, as the optimizer was built; ``None``
      takes the value ``optax.inject_hyperparams`` holds.
    variance_ratio: :math:`K_g` (Constant VSGD only, which needs it); ``None``
      as above.
    per_example: True if the state was updated with per-example moments
      (``update(..., grad_variance=...)``), whose noise variance is that of
      one example rather than of the mini-batch.
    per_leaf: False for one scalar for the whole model; True for a pytree
      like the params with one scalar per leaf (per layer).

  Returns:
    A scalar, or a pytree of scalars. ``inf`` where the bias-corrected
    :math:`|G|^2` is not positive (the signal is below the noise the state
    can resolve); ``nan`` on a fresh state, which has seen no gradient.

  Raises:
    TypeError: ``batch_size`` is not an int.
    ValueError: ``batch_size`` is not positive, or a hyperparameter it needs
      was neither passed nor injected.

  Examples:
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import optax
    >>> import vsgd_optax
    >>> opt = vsgd_optax.vsgd(0.0)  # a rate of 0 keeps the params where they are
    >>> params = {"w": jnp.zeros(64)}
    >>> state = opt.init(params)
    >>> keys = jax.random.split(jax.random.key(0), 300)
    >>> update = jax.jit(opt.update)
    >>> for key in keys:  # true gradient 0.5; batch gradients of noise variance 1
    ...   _, state = update({"w": 0.5 + jax.random.normal(key, (64,))}, state, params)
    >>> from vsgd_optax import experimental
    >>> # With batch 8: tr Sigma = 8 * 64 * 1 = 512 and |G|^2 = 64 * 0.25 = 16: B_simple = 32.
    >>> b = experimental.gradient_noise_scale(state, batch_size=8, prior_strength=1e-8)
    >>> bool(20 < b < 45)
    True
  """
  batch_size = _check_batch_size(batch_size)
  state, mu, n_ghat, sigma2 = _moments(opt_state, prior_strength, variance_ratio)
  fresh = state.count == 0

  steps = state.count

  def parts(m, n, s2):
    m, n, s2 = (jnp.asarray(x, jnp.promote_types(x.dtype, jnp.float32)) for x in (m, n, s2))
    w = s2 / n                            # weight of a new gradient in mu
    noise = n / batch_size if per_example else n  # of one mini-batch gradient
    trace = batch_size * jnp.sum(noise)
    # mu started at 0: after t steps at weight w, 1 - (1 - w)**t of it is data.
    log_keep = steps * jnp.log1p(-w)
    data_weight = -jnp.expm1(log_keep)
    data_weight = jnp.where(data_weight > 0, data_weight, 1)
    # Sampling variance of mu at fixed params, w**2 n (1 - (1-w)**2t) / (1 - (1-w)**2).
    var_mu = noise * w * -jnp.expm1(2 * log_keep) / (2 - w)
    signal = jnp.sum((jnp.square(m) - var_mu) / jnp.square(data_weight))
    return trace, signal

  def ratio(trace, signal):
    value = jnp.where(signal > 0, trace / jnp.where(signal > 0, signal, 1), jnp.inf)
    return jnp.where(fresh, jnp.nan, value)

  pairs = jax.tree.map(parts, mu, n_ghat, sigma2)
  if per_leaf:
    return jax.tree.map(lambda p: ratio(*p), pairs, is_leaf=lambda x: isinstance(x, tuple))
  leaves = jax.tree.leaves(pairs, is_leaf=lambda x: isinstance(x, tuple))
  if not leaves:
    raise ValueError("the VSGD state holds no parameters; there is nothing to read.")
  trace = sum(p[0] for p in leaves)
  signal = sum(p[1] for p in leaves)
  return ratio(trace, signal)


def gradient_snr(opt_state: Any, *,
                 prior_strength: jax.typing.ArrayLike | None = None,
                 variance_ratio: jax.typing.ArrayLike | None = None) -> optax.Updates:
  r"""The posterior signal-to-noise ratio :math:`\mu_i^2 / \sigma_i^2`, per parameter.

  The update's direction is :math:`\mu / \sqrt{\mu^2 + \sigma^2} =
  \operatorname{sign}(\mu) \sqrt{r / (1 + r)}` with :math:`r` this ratio:
  where it is well above 1 VSGD steps like sign descent, where it is well
  below 1 the step shrinks towards 0.

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state.
    prior_strength: :math:`\gamma`, as the optimizer was built; ``None``
      takes the value ``optax.inject_hyperparams`` holds.
    variance_ratio: :math:`K_g` (Constant VSGD only, which needs it); ``None``
      as above.

  Returns:
    A pytree like the params (0 on a fresh state, whose mean is 0).

  Raises:
    ValueError: a hyperparameter it needs was neither passed nor injected.

  Examples:
    >>> import jax.numpy as jnp
    >>> import vsgd_optax
    >>> opt = vsgd_optax.vsgd(0.1)
    >>> params = {"w": jnp.zeros(2)}
    >>> _, state = opt.update({"w": jnp.array([1.0, -2.0])}, opt.init(params), params)
    >>> from vsgd_optax import experimental
    >>> snr = experimental.gradient_snr(state, prior_strength=1e-8)
    >>> snr["w"].shape
    (2,)
  """
  _, mu, _, sigma2 = _moments(opt_state, prior_strength, variance_ratio)
  return jax.tree.map(lambda m, s2: jnp.square(m) / s2, mu, sigma2)

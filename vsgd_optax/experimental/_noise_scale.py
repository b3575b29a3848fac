r"""The gradient noise scale and the posterior signal-to-noise ratio, from VSGD's state.

McCandlish et al.'s (2018) simple noise scale
:math:`B_\text{simple} = \operatorname{tr}\Sigma / |G|^2`, estimated from the state
alone (``docs/algorithm.md`` derives it and says where it fails): cheap enough to
run inside a jitted training step.
"""

from typing import Any

import jax
import jax.numpy as jnp
import optax

from vsgd_optax import _diagnostics
from vsgd_optax import _factored
from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import _validation


def _read(opt_state, prior_strength, variance_ratio, batch_size, per_example):
  """Per leaf, ``(trace, squared_norm)``: ``B sum(n)`` and ``sum(mu**2 - Var mu)``
  rescaled by the mean's weight on data.
  """
  state, hyper = _diagnostics.find_vsgd_state(opt_state)
  if _factored.has_factored_rates(state):
    # Its derivation reads each element's own residual average from its rate; a
    # rebuilt rank-one rate holds no such average, so its answer would be unfounded.
    raise ValueError("the gradient noise scale reads per-element rates, and this state's "
                     "rates are factored; read it from vsgd's state, or build vsgd_muon "
                     "with min_dim_size_to_factor=None.")
  gamma = _diagnostics.hyperparameter("prior_strength", prior_strength, hyper)
  k = _diagnostics.hyperparameter("variance_ratio", variance_ratio, hyper)
  s_ghat = _diagnostics.observation_noise_variance(opt_state, prior_strength=gamma)
  sigma2 = _diagnostics.posterior_variance(opt_state, prior_strength=gamma, variance_ratio=k)
  constant = isinstance(state, _transforms.ScaleByConstantVSGDState)
  if constant and per_example:
    raise ValueError("per_example=True is for VSGD's state; Constant VSGD takes no "
                     "per-example moments. Pass per_example=False.")

  def leaf(m, s, s2):
    m, s, s2 = (jnp.asarray(x, jnp.promote_types(x.dtype, jnp.float32)) for x in (m, s, s2))
    w = s2 / s  # the weight of a new gradient in mu
    n = _batch_noise(s, w, gamma, k, batch_size, constant, per_example)
    # mu started at 0: after t steps at weight w, 1 - (1 - w)**t of it is data (exact for
    # Constant VSGD's fixed weight; for VSGD it takes today's weight as every step's).
    log_keep = state.count * jnp.log1p(-w)
    data = -jnp.expm1(log_keep)
    data = jnp.where(data > 0, data, 1)
    var_mu = w * n * -jnp.expm1(2 * log_keep) / (2 - w)
    return batch_size * jnp.sum(n), jnp.sum((jnp.square(m) - var_mu) / jnp.square(data))

  return jax.tree.map(leaf, state.mu, s_ghat, sigma2)


def _batch_noise(s_ghat, w, gamma, k, batch_size, constant, per_example):
  """The variance of one mini-batch gradient around the true one, per coordinate:
  the rate less its prior floor and posterior variance, undone of the mean's
  shrinkage ``E (mu_t - g_t)**2 = (1 - w)**2 2 n / (2 - w)``.
  """
  if constant:
    # b = gamma + (K+1) sigma2 / 2 + (1 - w) n / (2 - w), sigma2 = b / ((K+1)(gamma+1)).
    return jnp.maximum(s_ghat * (gamma + 0.5) - gamma, 0) * (2 - w) / (1 - w)
  a = _update_rules.gamma_shape(gamma)
  # s_ghat = K gamma / a + (w s_ghat + E residual**2) / (2a).
  half = 0.5 / a
  excess = jnp.maximum(s_ghat * (1 - half * w) - k * gamma / a, 0) / (half * jnp.square(1 - w))
  if per_example:
    # Each example is an observation: the rate adds the within-batch variance,
    # (B - 1) n in expectation, to the mean's residual.
    return excess / (2 / (2 - w) + batch_size - 1)
  return excess * (2 - w) / 2


def gradient_noise_scale_parts(
    opt_state: Any,
    *,
    batch_size: int,
    prior_strength: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike | None = None,
    per_example: bool = False,
    per_leaf: bool = False,
) -> Any:
  r"""The two halves of the gradient noise scale: :math:`(\operatorname{tr}\hat\Sigma, |\hat G|^2)`.

  Each is an estimate from the state at one step, and :math:`|\hat G|^2`
  is noisy: the mean averages only about :math:`1/w` recent gradients. Average
  each half over many steps (as McCandlish et al. do with their two-batch
  estimates) and divide the averages, rather than averaging ratios.

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state
      (bare, chained, masked, or wrapped by ``optax.inject_hyperparams``).
    batch_size: the number of examples in each mini-batch the optimizer was
      given (a positive int).
    prior_strength: :math:`\gamma`, as the optimizer was built; ``None``
      takes the value ``optax.inject_hyperparams`` holds.
    variance_ratio: :math:`K_g`, as the optimizer was built; ``None`` as above.
    per_example: True if the state was updated with per-example moments
      (``update(..., grad_variance=...)``).
    per_leaf: False for the whole model's two scalars; True for a pytree like
      the params with a pair of scalars per leaf.

  Returns:
    ``(trace, squared_norm)``: float32 scalars (float64 under x64), or a
    pytree of such pairs. ``squared_norm`` can be negative where the signal is
    below the noise.
  """
  batch_size = _validation.check_batch_size(batch_size)
  pairs = _read(opt_state, prior_strength, variance_ratio, batch_size, per_example)
  if per_leaf:
    return pairs
  leaves = jax.tree.leaves(pairs, is_leaf=lambda x: isinstance(x, tuple))
  if not leaves:
    raise ValueError("the VSGD state holds no parameters; there is nothing to read.")
  return sum(p[0] for p in leaves), sum(p[1] for p in leaves)


def gradient_noise_scale(
    opt_state: Any,
    *,
    batch_size: int,
    prior_strength: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike | None = None,
    per_example: bool = False,
    per_leaf: bool = False,
) -> Any:
  r"""The simple gradient noise scale :math:`\operatorname{tr}\Sigma / |G|^2`, from the state.

  :math:`B_\text{simple}` (McCandlish et al., 2018) predicts the critical batch
  size. This is the ratio of ``gradient_noise_scale_parts`` at one step, a noisy
  snapshot: to follow it over a run, average the two parts over steps and divide.

  Args:
    opt_state: as in :func:`gradient_noise_scale_parts`.
    batch_size: as there.
    prior_strength: as there.
    variance_ratio: as there.
    per_example: as there.
    per_leaf: False for one scalar for the whole model; True for one per leaf.

  Returns:
    A scalar, or a pytree of scalars. ``inf`` where the estimated
    :math:`|G|^2` is not positive (the signal is below the noise the state
    can resolve); ``nan`` on a fresh state, which has seen no gradient.

  Examples:
    >>> import jax
    >>> import jax.numpy as jnp
    >>> import optax
    >>> import vsgd_optax
    >>> opt = vsgd_optax.vsgd(0.0)  # a rate of 0: the params stay put
    >>> params = {"w": jnp.zeros(64)}
    >>> state = opt.init(params)
    >>> keys = jax.random.split(jax.random.key(0), 300)
    >>> update = jax.jit(opt.update)
    >>> # The true gradient is 0.5; batch gradients have noise variance 1.
    >>> for key in keys:
    ...   grads = {"w": 0.5 + jax.random.normal(key, (64,))}
    ...   _, state = update(grads, state, params)
    >>> from vsgd_optax import experimental
    >>> # Batch 8: tr Sigma = 8 * 64 * 1 = 512, |G|^2 = 64 * 0.25 = 16,
    >>> # so B_simple = 32.
    >>> b = experimental.gradient_noise_scale(
    ...     state, batch_size=8, prior_strength=1e-8, variance_ratio=30.0)
    >>> bool(20 < b < 45)
    True
  """
  parts = gradient_noise_scale_parts(opt_state, batch_size=batch_size,
                                     prior_strength=prior_strength,
                                     variance_ratio=variance_ratio, per_example=per_example,
                                     per_leaf=per_leaf)
  fresh = _diagnostics.find_vsgd_state(opt_state)[0].count == 0

  def ratio(pair):
    trace, signal = pair
    value = jnp.where(signal > 0, trace / jnp.where(signal > 0, signal, 1), jnp.inf)
    return jnp.where(fresh, jnp.nan, value)

  if per_leaf:
    return jax.tree.map(ratio, parts, is_leaf=lambda x: isinstance(x, tuple))
  return ratio(parts)


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

  Examples:
    >>> import jax.numpy as jnp
    >>> import vsgd_optax
    >>> opt = vsgd_optax.vsgd(0.1)
    >>> params = {"w": jnp.zeros(2)}
    >>> grads = {"w": jnp.array([1.0, -2.0])}
    >>> _, state = opt.update(grads, opt.init(params), params)
    >>> from vsgd_optax import experimental
    >>> snr = experimental.gradient_snr(state, prior_strength=1e-8)
    >>> snr["w"].shape
    (2,)
  """
  state, _ = _diagnostics.find_vsgd_state(opt_state)
  sigma2 = _diagnostics.posterior_variance(
      opt_state, prior_strength=prior_strength, variance_ratio=variance_ratio)
  return jax.tree.map(lambda m, s2: jnp.square(m) / s2, state.mu, sigma2)

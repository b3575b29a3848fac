"""``vsgd`` and ``constant_vsgd``: the optimizers users call.

Each is a chain of the scaling transform, decoupled weight decay and the
learning rate, as :func:`optax.adamw` is; the documentation lives here.
"""

from collections.abc import Callable
from typing import Any

import jax
import optax

from vsgd_optax import _rounding
from vsgd_optax import _transforms
from vsgd_optax import _validation


def decoupled_decay(weight_decay, weight_decay_mask) -> optax.GradientTransformation:
  """``optax.add_decayed_weights``, or where ``weight_decay`` is a plain 0 its states'
  shape without the decay: no decay needs no params (as ``optax.adam``), and a
  checkpoint fits both.
  """
  if not _validation.is_plain_zero("weight_decay", weight_decay):
    return optax.add_decayed_weights(weight_decay, weight_decay_mask)
  if weight_decay_mask is None:
    return optax.identity()
  return optax.masked(optax.identity(), weight_decay_mask)


def chain_with_decay(scaling, learning_rate, weight_decay, weight_decay_mask, *,
                     state_type: type, optimizer: str):
  """``scaling``, decoupled decay and the learning rate, as :func:`optax.adamw`
  chains them; checks ``learning_rate`` and ``weight_decay``.
  """
  _validation.check_learning_rate(learning_rate)
  _validation.check_non_negative("weight_decay", weight_decay)
  decays = not _validation.is_plain_zero("weight_decay", weight_decay)
  chain = optax.chain(scaling, decoupled_decay(weight_decay, weight_decay_mask),
                      optax.scale_by_learning_rate(learning_rate))

  def update_fn(updates, state, params=None, **extra_args):
    _validation.check_chain_state(state, state_type, optimizer)
    if decays:
      _validation.check_decay_has_params(optimizer, weight_decay, params)
    return chain.update(updates, state, params, **extra_args)

  return optax.GradientTransformationExtraArgs(chain.init, update_fn)


def vsgd(
    learning_rate: optax.ScalarOrSchedule,
    *,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    weight_decay: jax.typing.ArrayLike = 0.0,
    weight_decay_mask: Any | Callable[[Any], Any] | None = None,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: _rounding.Rounding = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Variational Stochastic Gradient Descent (VSGD).

  VSGD treats the true gradient :math:`g_t` as a latent Gaussian variable and
  the mini-batch gradient :math:`\hat g_t` as a noisy observation of it, with
  Gamma-distributed precisions for the systematic noise (:math:`w_g`) and
  the observation noise (:math:`w_{\hat g}`). Each step runs one step of
  stochastic variational inference and moves the parameters along the
  normalized posterior mean. Elementwise, with :math:`K = K_g`
  (``variance_ratio``), :math:`\gamma` (``prior_strength``) and
  :math:`a = \gamma + 0.5 + 5\cdot 10^{-5}`:

  .. math::

    s_g &= b_{g} / a, \quad s_{\hat g} = b_{\hat g} / a
      \quad (t = 1:\ s_g = \gamma / (a - 0.5),\ s_{\hat g} = K\gamma/(a - 0.5)) \\
    \mu_t &= \frac{s_g \hat g_t + s_{\hat g} \mu_{t-1}}{s_g + s_{\hat g}}, \quad
    \sigma^2_t = \frac{s_g s_{\hat g}}{s_g + s_{\hat g}} \\
    b'_g &= \gamma + \tfrac12 (\sigma^2_t + (\mu_t - \mu_{t-1})^2), \quad
    b'_{\hat g} = K\gamma + \tfrac12 (\sigma^2_t + (\mu_t - \hat g_t)^2) \\
    b_g &\leftarrow (1 - t^{-\kappa_g}) b_g + t^{-\kappa_g} b'_g, \quad
    b_{\hat g} \leftarrow (1 - t^{-\kappa_{\hat g}}) b_{\hat g}
      + t^{-\kappa_{\hat g}} b'_{\hat g} \\
    \theta_t &= \theta_{t-1} - \eta_t \left(
      \frac{\mu_t}{\sqrt{\mu_t^2 + \sigma^2_t} + \epsilon}
      + \lambda \theta_{t-1} \right)

  Where this follows the authors' code rather than the paper's text is on the
  documentation's page "The algorithm" (``docs/algorithm.md``).

  Args:
    learning_rate: a scalar or an :class:`optax.Schedule` of the step count.
    variance_ratio: :math:`K_g`, the prior ratio of observation-noise to
      systematic-noise variance, > 0.
    prior_strength: :math:`\gamma`, the prior strength in pseudo-observations, > 0.
    kappa_g: SVI decay exponent for ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent for ``b_ghat``, in [0, 1].
    eps: added to the denominator outside the square root, >= 0.
    weight_decay: decoupled (AdamW-style) weight decay :math:`\lambda`, >= 0.
    weight_decay_mask: a pytree of booleans like the params, or a function
      of the params that returns one; ``True`` where decay applies.
    state_dtype: dtype of ``mu``, ``b_g`` and ``b_ghat``; ``None`` for the
      params' dtype promoted to at least float32. ``jnp.bfloat16`` keeps 6 bytes
      a parameter (computed in float32); float16 is refused.
    state_rounding: how a bfloat16 state is stored: ``"stochastic"`` (default;
      exact in expectation, deterministic given the step, ``seed`` and the leaf's
      path) or ``"nearest"``, with which the state stops learning after a few
      thousand steps (``docs/algorithm.md``).
    seed: keys the stochastic rounding's bits: a whole number in [0, 2**32) or
      an integer scalar array. Give a different one to each optimizer whose
      leaves' paths coincide (the members of an ensemble under ``vmap``).

  Returns:
    The corresponding :class:`optax.GradientTransformationExtraArgs`. Its
    ``update`` accepts ``grad_variance=`` (the biased variance of
    per-example gradients) for per-example VSGD.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> import vsgd_optax
    >>> def f(x): return jnp.sum(x ** 2)
    >>> params = jnp.array([1.0, -2.0, 3.0])
    >>> opt = vsgd_optax.vsgd(learning_rate=0.1)
    >>> state = opt.init(params)
    >>> for _ in range(100):
    ...   grads = jax.grad(f)(params)
    ...   updates, state = opt.update(grads, state, params)
    ...   params = optax.apply_updates(params, updates)
    >>> bool(f(params) < 2.0)  # from 14.0
    True

  References:
    Chen, Kuzina, Esmaeili and Tomczak, `Variational Stochastic Gradient
    Descent for Deep Neural Networks <https://openreview.net/forum?id=xu4ATNjcdy>`_,
    TMLR 2025.
  """
  scaling = _transforms.scale_by_vsgd(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
      kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
      seed=seed)
  return chain_with_decay(scaling, learning_rate, weight_decay, weight_decay_mask,
                          state_type=_transforms.ScaleByVSGDState, optimizer="vsgd")


def constant_vsgd(
    learning_rate: optax.ScalarOrSchedule,
    *,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    weight_decay: jax.typing.ArrayLike = 0.0,
    weight_decay_mask: Any | Callable[[Any], Any] | None = None,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: _rounding.Rounding = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Constant VSGD: VSGD with a fixed ratio of the two noise variances.

  The systematic noise is tied to the observation noise by the constant
  factor :math:`1/K_g`, so one Gamma-distributed precision :math:`\omega`
  remains and the weight on the new gradient is fixed at :math:`1/(K+1)`
  (Adam's first moment with :math:`\beta_1 = K/(K+1)`). Following the
  paper's Algorithm 2, with :math:`a_0 = b_0 = \gamma`, :math:`\mu_0 = 0`
  and :math:`a_t = \gamma + 1` for :math:`t \ge 1`:

  .. math::

    \mu_t &= \tfrac{K}{K+1}\mu_{t-1} + \tfrac{1}{K+1}\hat g_t, \quad
    \sigma^2_t = \frac{b_{t-1}}{(K+1) a_{t-1}} \\
    b_t &= (1 - t^{-\kappa}) b_{t-1} + t^{-\kappa}\left[\gamma
      + \tfrac12(\sigma^2_t + (\mu_t - \hat g_t)^2)
      + \tfrac{K}{2}(\sigma^2_t + (\mu_t - \mu_{t-1})^2)\right] \\
    \theta_t &= \theta_{t-1} - \eta_t \left(
      \frac{\mu_t}{\sqrt{\mu_t^2 + \sigma^2_t} + \epsilon}
      + \lambda \theta_{t-1} \right)

  Args:
    learning_rate: a scalar or an :class:`optax.Schedule`.
    variance_ratio: :math:`K_g`, > 0.
    prior_strength: :math:`\gamma`, > 0.
    kappa: SVI decay exponent for ``b_ghat``, in [0, 1].
    eps: added to the denominator outside the square root, >= 0.
    weight_decay: decoupled weight decay, >= 0.
    weight_decay_mask: where decay applies, as in :func:`vsgd`.
    state_dtype: dtype of ``mu`` and ``b_ghat``, as in :func:`vsgd`.
    state_rounding: how a bfloat16 state is stored, as in :func:`vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd`.

  Returns:
    The corresponding :class:`optax.GradientTransformationExtraArgs`.

  Examples:
    >>> import jax, jax.numpy as jnp
    >>> import vsgd_optax
    >>> opt = vsgd_optax.constant_vsgd(learning_rate=0.1)
    >>> params = {"w": jnp.ones(3)}
    >>> state = opt.init(params)
    >>> grads = {"w": jnp.array([1.0, -1.0, 2.0])}
    >>> updates, state = opt.update(grads, state, params)
    >>> updates["w"].round(3)  # first step: prior-dominated variance
    Array([-0.018,  0.018, -0.034], dtype=float32)

  References:
    Chen, Kuzina, Esmaeili and Tomczak, `Variational Stochastic Gradient
    Descent for Deep Neural Networks <https://openreview.net/forum?id=xu4ATNjcdy>`_,
    TMLR 2025, Algorithm 2.
  """
  scaling = _transforms.scale_by_constant_vsgd(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa=kappa, eps=eps,
      state_dtype=state_dtype, state_rounding=state_rounding, seed=seed)
  return chain_with_decay(scaling, learning_rate, weight_decay, weight_decay_mask,
                          state_type=_transforms.ScaleByConstantVSGDState,
                          optimizer="constant_vsgd")

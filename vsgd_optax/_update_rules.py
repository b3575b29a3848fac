"""The update rules of VSGD and Constant VSGD, one coordinate at a time.

Elementwise ``jax.numpy`` on arrays of one dtype; ``_transforms.py`` maps it over
pytrees. Symbols follow the paper (Chen et al., TMLR 2025): ``K`` is K_g, ``gamma``
the prior strength, ``t`` the 1-based step, ``g`` the mini-batch gradient (the
paper's g-hat), ``a`` the Gamma shape, ``b_g`` and ``b_ghat`` the Gamma rates.
Where this follows the authors' code rather than the paper's text is in
``docs/algorithm.md``.

VSGD's step comes in two forms, equal up to rounding: ``vsgd_as_written`` (GPU,
TPU) and ``vsgd_in_place`` (XLA:CPU). XLA:CPU runs one loop per output, and over a
donated state a loop may not overwrite an old ``mu`` or ``b_ghat`` that a later loop
still reads; so in that form each output reads, besides its own old value, only
values no other loop overwrites first (``docs/algorithm.md``, "Two forms").
"""

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Added to the paper's Gamma shape gamma + 0.5, as the authors' code does.
SHAPE_OFFSET = 5e-5


class LeafUpdate(NamedTuple):
  """New values for one parameter array."""
  direction: jax.Array  # u_t = mu_t / (sqrt(mu_t**2 + sigma2_t) + eps)
  mu: jax.Array
  b_g: Any  # None for Constant VSGD; a FactoredRate where the rates are factored
  b_ghat: Any


def gamma_shape(gamma):
  """The shared Gamma shape a = a_g = a_ghat of VSGD (constant over steps)."""
  return gamma + 0.5 + SHAPE_OFFSET


def prior_rates(K, gamma):
  """The initial ``(b_g, b_ghat)`` of VSGD: ``a`` times the prior variances
  ``gamma / (a - 0.5)`` and ``K gamma / (a - 0.5)``.
  """
  # a - 0.5 summed directly: (gamma + 0.5 + 5e-5) - 0.5 cancels in float32.
  scale = gamma_shape(gamma) / (gamma + SHAPE_OFFSET)
  return gamma * scale, K * gamma * scale


def clamp_to_finite(x, dtype=None):
  """``x`` clamped to the finite range of ``dtype`` (default: its own); NaN stays NaN.

  An overflowing square saturates the rates, as Adam's ``nu`` does, instead of
  turning infinite and then NaN.
  """
  largest = np.asarray(jnp.finfo(x.dtype if dtype is None else dtype).max, x.dtype)
  return jax.lax.clamp(-largest, x, largest)  # one primitive: cheap to trace and compile


class Variances(NamedTuple):
  """VSGD's variances of one coordinate, from its two rates."""
  s_g: jax.Array     # of the true gradient g_t around mu_{t-1}: b_g / a
  s_ghat: jax.Array  # of the observation around g_t: b_ghat / a
  total: jax.Array   # s_g + s_ghat
  sigma2: jax.Array  # the posterior variance, Eq. (sigg)
  w: jax.Array       # the posterior mean's weight on the observation


def variances(b_g, b_ghat, gamma) -> Variances:
  """The inverse expected precisions ``b / a`` and what follows from them."""
  # One scalar reciprocal for both rates (a > 0.5, so 1 / a is normal). The total's
  # is not shared: a saturated total has a subnormal reciprocal, which GPUs flush.
  inv_a = 1 / gamma_shape(gamma)
  s_g, s_ghat = clamp_to_finite(b_g * inv_a), clamp_to_finite(b_ghat * inv_a)
  total = clamp_to_finite(s_g + s_ghat)
  sigma2 = s_g * (s_ghat / total)  # Eq. (sigg); s_g * s_ghat overflows near 1e15
  w = s_g / total
  return Variances(s_g, s_ghat, total, sigma2, w)


def posterior_mean(g, mu_prev, w):
  """Eqs. (mug) and (mugc): the mean moved towards the observation by ``w``."""
  return mu_prev + w * clamp_to_finite(g - mu_prev)


def vsgd_as_written(g, mu_prev, b_g, b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
                    grad_variance=None) -> LeafUpdate:
  """One VSGD step for one array, by the paper's equations as written.

  ``grad_variance``: the biased variance of per-example gradients, when each
  example is an observation of its own (``g`` is then their mean); or None.
  """
  v = variances(b_g, b_ghat, gamma)
  mu = posterior_mean(g, mu_prev, v.w)     # Eq. (mug)
  sq_residual_g = jnp.square(mu - mu_prev)
  sq_residual_ghat = jnp.square(mu - g)
  return _rates_and_direction(mu, v.sigma2, sq_residual_g, sq_residual_ghat, v.w,
                              v.s_ghat / v.total, b_g, b_ghat, t=t, K=K, gamma=gamma,
                              kappa_g=kappa_g, kappa_ghat=kappa_ghat, eps=eps,
                              grad_variance=grad_variance)


def vsgd_in_place(g, mu_prev, b_g, b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
                  grad_variance=None) -> LeafUpdate:
  """The step of ``vsgd_as_written`` in XLA:CPU's form (module docstring)."""
  v = variances(b_g, b_ghat, gamma)
  # sigma2 is the one full-size temporary; the barrier keeps XLA from recomputing
  # it from b_ghat inside later loops.
  sigma2 = jax.lax.optimization_barrier(v.sigma2)
  w = sigma2 / v.s_ghat                      # = s_g / (s_g + s_ghat)
  mu = posterior_mean(g, mu_prev, w)         # Eq. (mug)
  residual = g - mu
  sq_residual_ghat = jnp.square(residual)    # (mu_t - g_t)**2
  # (mu_t - mu_{t-1})**2 = ((g_t - mu_t) s_g / s_ghat)**2, s_g / s_ghat = s_g / sigma2 - 1,
  # saturated so that a residual of 0 gives 0, not NaN.
  sq_residual_g = jnp.square(residual * clamp_to_finite(v.s_g / sigma2 - 1))
  # w and 1 - w from the same values: 1 - sigma2 / s_g and 1 - sigma2 / s_ghat.
  w_obs, w_prior = 1 - sigma2 / v.s_g, 1 - sigma2 / v.s_ghat
  return _rates_and_direction(mu, sigma2, sq_residual_g, sq_residual_ghat, w_obs, w_prior,
                              b_g, b_ghat, t=t, K=K, gamma=gamma, kappa_g=kappa_g,
                              kappa_ghat=kappa_ghat, eps=eps, grad_variance=grad_variance)


# VSGD's step by compiler, as ``jax.lax.platform_dependent`` takes its branches:
# XLA:CPU compiles the in-place form, every other compiler the form as written.
VSGD_FORMS = {"cpu": vsgd_in_place, "default": vsgd_as_written}


def _rates_and_direction(mu, sigma2, sq_residual_g, sq_residual_ghat, w_obs, w_prior, b_g,
                         b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
                         grad_variance) -> LeafUpdate:
  """The new rates and the direction, shared by both forms."""
  if grad_variance is not None:
    # Averaging the per-example terms adds the spread of the examples.
    sq_residual_g = sq_residual_g + jnp.square(w_obs) * grad_variance          # w**2 v
    sq_residual_ghat = sq_residual_ghat + jnp.square(w_prior) * grad_variance  # (1-w)**2 v
  b_g_new = gamma + 0.5 * (sigma2 + sq_residual_g)              # Eq. (bpg)
  b_ghat_new = K * gamma + 0.5 * (sigma2 + sq_residual_ghat)    # Eq. (bphg)
  rho_g, rho_ghat = t ** -kappa_g, t ** -kappa_ghat              # SVI step sizes
  b_g = clamp_to_finite((1 - rho_g) * b_g + rho_g * b_g_new)                  # Eq. (bg)
  b_ghat = clamp_to_finite((1 - rho_ghat) * b_ghat + rho_ghat * b_ghat_new)   # Eq. (bhg)
  direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (vsgdt)
  return LeafUpdate(direction, mu, b_g, b_ghat)


def constant_prior_rate(gamma):
  """The initial ``b_ghat`` of Constant VSGD: ``gamma + 1``, whose first variance
  ``b / a = 1`` is Algorithm 2's ``b_0 / a_0`` with one shape for every step.
  """
  return gamma + 1


def constant_variances(b_ghat, K, gamma) -> Variances:
  """Constant VSGD's variances from its one rate (shape ``gamma + 1``, ``s_g = s_ghat / K``)."""
  w = 1 / (K + 1)
  s_ghat = b_ghat / (gamma + 1)
  s_g = s_ghat / K
  return Variances(s_g, s_ghat, s_g + s_ghat, w * b_ghat / (gamma + 1), w)  # Eq. (siggc)


def constant_vsgd_leaf(g, mu_prev, b_ghat, *, t, K, gamma, kappa, eps,
                       grad_variance=None) -> LeafUpdate:
  """One Constant VSGD step (paper, Algorithm 2) for one array.

  One form serves every compiler: the new ``b_ghat`` reads only its old value,
  ``g`` and the new ``mu``.
  """
  v = constant_variances(b_ghat, K, gamma)
  w = v.w                             # fixed weight on the new observation
  sigma2 = v.sigma2                   # Eq. (siggc)
  mu = posterior_mean(g, mu_prev, w)  # Eq. (mugc)
  # mu_t - g_t = -(g_t - mu_t) and mu_t - mu_{t-1} = (g_t - mu_t) / K.
  residual = g - mu
  sq_residual_ghat = jnp.square(residual)
  sq_residual_g = jnp.square(residual / K)
  if grad_variance is not None:
    sq_residual_ghat = sq_residual_ghat + jnp.square(1 - w) * grad_variance
    sq_residual_g = sq_residual_g + jnp.square(w) * grad_variance
  b_new = gamma + 0.5 * (sigma2 + sq_residual_ghat) + 0.5 * K * (sigma2 + sq_residual_g)
  rho = t ** -kappa                   # SVI step size
  b_ghat = clamp_to_finite((1 - rho) * b_ghat + rho * b_new)    # Eq. (bhgc)
  direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (updatec)
  return LeafUpdate(direction, mu, None, b_ghat)

"""The update rules of VSGD and Constant VSGD, one coordinate at a time.

Everything here is elementwise ``jax.numpy`` on arrays of one dtype; the
pytree, dtype and state plumbing lives in ``_transforms.py``. Symbols follow
the paper (Chen et al., TMLR 2025): ``K`` is K_g, ``gamma`` the prior
strength, ``t`` the 1-based step, ``g`` the observed mini-batch gradient (the
paper's g-hat), ``a`` the Gamma shape, ``b_g`` and ``b_ghat`` the Gamma rates
of the systematic- and observation-noise precisions.

The state starts at the prior rates (``prior_rates``), so that a fresh state is
valid at any step count; the first step takes them from the hyperparameters
as they are then (``_transforms.at_prior_on_first_step``), as the authors' code does.
Where this, the Gamma shape and the rest differ from the paper's text, in
favour of the authors' code, is written out in ``docs/algorithm.md``.

VSGD's equations come in two forms that are equal up to rounding;
``scale_by_vsgd`` hands each backend its own through
``jax.lax.platform_dependent``:

* as written (every backend but the CPU): the residuals are
  ``mu_t - mu_{t-1}`` and ``mu_t - g_t``. XLA on GPU and TPU fuses all the
  outputs into one loop that reads each input once, so nothing else is needed.
* in place (XLA:CPU). XLA:CPU emits one loop per output array. When the state
  buffers are donated, a loop may not overwrite an old ``mu`` or ``b_ghat``
  that a later loop still reads, so XLA would first copy it: the equations as
  written cost three full-size temporaries per parameter array. So in this
  form every output reads, besides its own old value, only values that no
  other loop overwrites before it runs:

  - ``sigma2`` is the one full-size temporary (an optimization barrier keeps
    XLA from recomputing it from ``b_ghat`` inside later loops);
  - ``mu`` reads ``b_g`` and ``b_ghat`` before anything overwrites them;
  - ``b_g`` and ``b_ghat`` take their residuals from the new ``mu``:
    ``mu_t - g_t = -(g_t - mu_t)`` and
    ``mu_t - mu_{t-1} = (g_t - mu_t) s_g / s_ghat``, with
    ``s_g / s_ghat = s_g / sigma2 - 1``;
  - the direction reads the new ``mu`` and ``sigma2``.
"""

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# The authors' code adds this to the paper's Gamma shape gamma + 0.5
# (docs/algorithm.md).
SHAPE_OFFSET = 5e-5


class LeafUpdate(NamedTuple):
  """New values for one parameter array."""
  direction: jax.Array  # u_t = mu_t / (sqrt(mu_t**2 + sigma2_t) + eps)
  mu: jax.Array
  # None for Constant VSGD, which has no b_g; factored_vsgd's row and column
  # means (a FactoredRate) where it factors the array.
  b_g: Any
  b_ghat: Any


def gamma_shape(gamma):
  """The shared Gamma shape a = a_g = a_ghat of VSGD (constant over steps)."""
  return gamma + 0.5 + SHAPE_OFFSET


def prior_rates(K, gamma):
  """The initial ``(b_g, b_ghat)`` of VSGD.

  The authors' code gives the first step the prior variances
  ``gamma / (a - 0.5)`` and ``K gamma / (a - 0.5)``; rates of ``a`` times
  those make ``b / a`` equal them. ``a - 0.5`` is summed directly, since
  ``(gamma + 0.5 + 5e-5) - 0.5`` cancels in float32.
  """
  scale = gamma_shape(gamma) / (gamma + SHAPE_OFFSET)
  return gamma * scale, K * gamma * scale


def finite(x, dtype=None):
  """``x`` clipped to the finite range of ``dtype`` (by default its own): where a
  square or a sum of a huge but finite gradient overflows, the rates saturate
  (as Adam's ``nu`` does) instead of turning infinite and then NaN, and a
  state stored in a narrower dtype never holds an infinity that a finite
  value became. The identity on every value already in range; NaN stays NaN.
  """
  largest = np.asarray(jnp.finfo(x.dtype if dtype is None else dtype).max, x.dtype)
  return jax.lax.clamp(-largest, x, largest)  # one primitive: cheap to trace and to compile


class Variances(NamedTuple):
  """VSGD's variances of one coordinate, from its two rates: what the step and
  every read-out (``vsgd_optax.posterior_variance`` and the rest) use.
  """
  s_g: jax.Array     # of the true gradient g_t around mu_{t-1}: b_g / a
  s_ghat: jax.Array  # of the observation around g_t: b_ghat / a
  total: jax.Array   # s_g + s_ghat
  sigma2: jax.Array  # the posterior variance, Eq. (sigg)
  w: jax.Array       # the posterior mean's weight on the observation


def variances(b_g, b_ghat, gamma) -> Variances:
  """The inverse expected precisions ``b / a`` and what follows from them,
  saturated at the dtype's largest value (``finite``).
  """
  # One scalar reciprocal instead of a divide an element for each rate; a is
  # above 0.5, so 1 / a is a normal number and the product rounds once.
  # (The total's reciprocal is not shared the same way: a total that saturated
  # has a subnormal reciprocal, which a GPU flushes to zero, and w would be 0.)
  inv_a = 1 / gamma_shape(gamma)
  s_g, s_ghat = finite(b_g * inv_a), finite(b_ghat * inv_a)
  total = finite(s_g + s_ghat)
  # Eq. (sigg). (s_g * s_ghat would overflow float32 for gradients near 1e15.)
  sigma2 = s_g * (s_ghat / total)
  w = s_g / total                          # weight on the observation
  return Variances(s_g, s_ghat, total, sigma2, w)


def vsgd_as_written(g, mu_prev, b_g, b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
                    grad_variance=None) -> LeafUpdate:
  """One VSGD step (the authors' optimizer) for one array of coordinates, by the
  paper's equations as written: what GPUs and TPUs compile.

  The step and the hyperparameters are keyword-only, so that a caller cannot
  swap two of them by position. ``grad_variance`` is the biased variance of
  per-example gradients when the mini-batch examples are observations of their
  own (paper appendix "Treating Samples Separately"); ``g`` is then their mean.
  """
  v = variances(b_g, b_ghat, gamma)
  mu = mu_prev + v.w * finite(g - mu_prev)     # Eq. (mug)
  # A square that overflows is inf, which the averaged rates' ``finite`` saturates.
  dev_g = jnp.square(mu - mu_prev)
  dev_ghat = jnp.square(mu - g)
  w_obs, w_prior = v.w, v.s_ghat / v.total
  return _rates_and_direction(mu, v.sigma2, dev_g, dev_ghat, w_obs, w_prior, b_g, b_ghat,
                              t=t, K=K, gamma=gamma, kappa_g=kappa_g, kappa_ghat=kappa_ghat,
                              eps=eps, grad_variance=grad_variance)


def vsgd_in_place(g, mu_prev, b_g, b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
                  grad_variance=None) -> LeafUpdate:
  """The step of ``vsgd_as_written``, written for XLA:CPU's loops over a donated
  state (module docstring): every output reads, besides its own old value,
  only values that no other loop overwrites first.
  """
  v = variances(b_g, b_ghat, gamma)
  sigma2 = jax.lax.optimization_barrier(v.sigma2)
  w = sigma2 / v.s_ghat                      # = s_g / (s_g + s_ghat)
  mu = mu_prev + w * finite(g - mu_prev)     # Eq. (mug)
  residual = g - mu                                       # g_t - mu_t
  dev_ghat = jnp.square(residual)                         # (mu_t - g_t)**2
  # (mu_t - mu_{t-1})**2
  # (A ratio that overflows is saturated, so that a residual of 0 gives 0, not NaN.)
  dev_g = jnp.square(residual * finite(v.s_g / sigma2 - 1))
  # The weights of the observation and of the prior mean, from the same
  # values: w = 1 - sigma2 / s_g and 1 - w = 1 - sigma2 / s_ghat.
  w_obs, w_prior = 1 - sigma2 / v.s_g, 1 - sigma2 / v.s_ghat
  return _rates_and_direction(mu, sigma2, dev_g, dev_ghat, w_obs, w_prior, b_g, b_ghat,
                              t=t, K=K, gamma=gamma, kappa_g=kappa_g, kappa_ghat=kappa_ghat,
                              eps=eps, grad_variance=grad_variance)


def _rates_and_direction(mu, sigma2, dev_g, dev_ghat, w_obs, w_prior, b_g, b_ghat, *, t, K,
                         gamma, kappa_g, kappa_ghat, eps, grad_variance) -> LeafUpdate:
  """The end both forms share: the new rates, Eqs. (bpg) to (bhg), and the
  direction, Eq. (vsgdt), from the squared residuals ``dev_g`` and ``dev_ghat``.
  """
  if grad_variance is not None:
    # Averaging the per-example terms adds the spread of the examples.
    dev_g = dev_g + jnp.square(w_obs) * grad_variance          # w**2 v
    dev_ghat = dev_ghat + jnp.square(w_prior) * grad_variance  # (1-w)**2 v
  b_g_new = gamma + 0.5 * (sigma2 + dev_g)              # Eq. (bpg)
  b_ghat_new = K * gamma + 0.5 * (sigma2 + dev_ghat)    # Eq. (bphg)
  rho_g, rho_ghat = t ** -kappa_g, t ** -kappa_ghat      # SVI step sizes
  b_g = finite((1 - rho_g) * b_g + rho_g * b_g_new)                  # Eq. (bg)
  b_ghat = finite((1 - rho_ghat) * b_ghat + rho_ghat * b_ghat_new)   # Eq. (bhg)
  direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (vsgdt)
  return LeafUpdate(direction, mu, b_g, b_ghat)


def constant_prior_rate(gamma):
  """The initial ``b_ghat`` of Constant VSGD.

  Algorithm 2 starts at ``a_0 = b_0 = gamma`` and uses ``a_t = gamma + 1``
  after; starting at ``b = gamma + 1`` gives the same first variance
  ``b / a = 1`` with one shape for every step.
  """
  return gamma + 1


def constant_variances(b_ghat, K, gamma) -> Variances:
  """Constant VSGD's variances, from its one rate: the observation noise's
  ``s_ghat = b / (gamma + 1)`` (Algorithm 2's shape), the systematic noise's
  ``s_g = s_ghat / K`` (the two are tied by ``K``), the fixed weight
  ``w = 1 / (K + 1)`` and the posterior variance ``sigma2 = w b / (gamma + 1)``,
  Eq. (siggc): VSGD's ``s_g s_ghat / (s_g + s_ghat)`` for these two.
  """
  w = 1 / (K + 1)
  s_ghat = b_ghat / (gamma + 1)
  s_g = s_ghat / K
  return Variances(s_g, s_ghat, s_g + s_ghat, w * b_ghat / (gamma + 1), w)


def constant_vsgd_leaf(g, mu_prev, b_ghat, *, t, K, gamma, kappa, eps,
                       grad_variance=None) -> LeafUpdate:
  """One Constant VSGD step (paper, Algorithm 2) for one array of coordinates.

  The step and the hyperparameters are keyword-only, as in ``vsgd_as_written``.

  One form serves every compiler: the new ``b_ghat`` reads, besides its own
  old value, only ``g`` and the new ``mu``, so XLA:CPU's loops can write it
  in place.
  """
  v = constant_variances(b_ghat, K, gamma)
  w = v.w                             # fixed weight on the new observation
  # The direction needs the old b_ghat after the new one is written, so XLA
  # keeps one copy of it: the one full-size temporary this step needs.
  sigma2 = v.sigma2                   # Eq. (siggc)
  mu = mu_prev + w * finite(g - mu_prev)    # Eq. (mugc)
  # Residuals from the new mean: mu_t - g_t = -(g_t - mu_t) and
  # mu_t - mu_{t-1} = (g_t - mu_t) / K.
  residual = g - mu
  dev_ghat = jnp.square(residual)     # (mu_t - g_t)**2
  dev_g = jnp.square(residual / K)    # (mu_t - mu_{t-1})**2
  if grad_variance is not None:
    dev_ghat = dev_ghat + jnp.square(1 - w) * grad_variance
    dev_g = dev_g + jnp.square(w) * grad_variance
  b_new = gamma + 0.5 * (sigma2 + dev_ghat) + 0.5 * K * (sigma2 + dev_g)
  rho = t ** -kappa                   # SVI step size
  b_ghat = finite((1 - rho) * b_ghat + rho * b_new)    # Eq. (bhgc)
  direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (updatec)
  return LeafUpdate(direction, mu, None, b_ghat)

"""The update rules of VSGD and Constant VSGD, one coordinate at a time.

Everything here is elementwise arithmetic on arrays of one dtype; the pytree,
dtype and state plumbing lives in ``_transforms.py``, and which form of the
VSGD step each compiler is given is decided in ``_lowering.py``. Symbols
follow the paper (Chen et al., TMLR 2025): ``K`` is K_g, ``gamma`` is the prior
strength, ``t`` the 1-based step, ``g`` the observed mini-batch gradient (the
paper's g-hat).

``vsgd_leaf`` has two forms of the same equations, equal up to rounding:

* as written (``in_place=False``): the residuals are ``mu_t - mu_{t-1}`` and
  ``mu_t - g_t``. Compilers that fuse several outputs into one loop (XLA on
  GPU and TPU) read every input once and need nothing else. The compiled
  XLA:CPU loop of ``_cpu_kernel.cc`` computes this form too, with its four
  divisions shared as one.
* for in-place loops (``in_place=True``), for XLA:CPU where the compiled loop
  cannot be used. XLA:CPU emits one loop per output array. When the state
  buffers are donated, an old ``b_ghat`` or
  ``mu`` that a loop still needs after another loop has overwritten it in
  place is first copied, and each such copy is a full-size temporary in
  freshly mapped memory: the equations as written cost three of them, about
  29,000 page faults and 6x Adam's step time at 10M parameters. So in this
  form every output reads, besides its own old value, only values that
  cannot be overwritten before it runs:

  - ``sigma2`` is the one shared temporary (an optimization barrier keeps XLA
    from rewriting ``s_g / sigma2`` back into terms of ``b_ghat``);
  - ``mu`` reads ``b_g`` and ``b_ghat`` before anything overwrites them;
  - ``b_g`` and ``b_ghat`` take their residuals from the new ``mu``:
    ``mu_t - g_t = -(1 - w) d`` and
    ``mu_t - mu_{t-1} = w d = (g_t - mu_t) s_g / s_ghat``
    with ``d = g_t - mu_{t-1}`` and ``s_g / s_ghat = s_g / sigma2 - 1``;
  - the direction reads the new ``mu`` and ``sigma2``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# The authors' code uses the Gamma shape 2a = 2 * gamma + 1 + 1e-4; the paper has
# a = gamma + 0.5. We follow the code: a = gamma + 0.5 + SHAPE_OFFSET.
SHAPE_OFFSET = 5e-5


class LeafUpdate(NamedTuple):
  """New values for one parameter array."""
  direction: jax.Array  # u_t = mu_t / (sqrt(mu_t**2 + sigma2_t) + eps)
  mu: jax.Array
  b_g: jax.Array | None  # None for Constant VSGD, which has no b_g
  b_ghat: jax.Array


class Step(NamedTuple):
  """The scalars of step t that every coordinate shares."""
  first: jax.Array     # t == 1, when the authors' code uses the prior rates
  rho_g: jax.Array     # t ** -kappa_g, the SVI step size of b_g
  rho_ghat: jax.Array  # t ** -kappa_ghat, the SVI step size of b_ghat


class ConstantStep(NamedTuple):
  """The scalars of step t of Constant VSGD."""
  first: jax.Array  # t == 1, when the prior shape a_0 = gamma applies
  rho: jax.Array    # t ** -kappa, the SVI step size of b_ghat


def vsgd_step(t, kappa_g, kappa_ghat) -> Step:
  return Step(t == 1, t ** -kappa_g, t ** -kappa_ghat)


def constant_vsgd_step(t, kappa) -> ConstantStep:
  return ConstantStep(t == 1, t ** -kappa)


def gamma_shape(gamma: jax.Array) -> jax.Array:
  """The shared Gamma shape a = a_g = a_ghat (constant over steps)."""
  return gamma + 0.5 + SHAPE_OFFSET


def _first_step_scale(gamma: jax.Array) -> jax.Array:
  """a - 0.5, summed directly: (gamma + 0.5 + 5e-5) - 0.5 cancels in float32."""
  return gamma + SHAPE_OFFSET


def vsgd_leaf(g, mu_prev, b_g, b_ghat, step: Step, K, gamma, eps,
              grad_variance=None, *, in_place=False) -> LeafUpdate:
  """One VSGD step (the authors' optimizer) for one array of coordinates.

  ``grad_variance`` is the biased variance of per-example gradients when the
  mini-batch examples are observations of their own (paper appendix
  "Treating Samples Separately"); ``g`` is then their mean. ``in_place``
  picks the form for one-loop-per-output compilers (module docstring).
  """
  a = gamma_shape(gamma)
  # Prior variances of g_t (around mu_{t-1}) and of g-hat_t (around g_t): the
  # inverse expected precisions b / a. On the first step the authors' code
  # uses the prior rates gamma and K * gamma over a - 0.5.
  a_half = _first_step_scale(gamma)
  s_g = jnp.where(step.first, gamma / a_half, b_g / a)
  s_ghat = jnp.where(step.first, K * gamma / a_half, b_ghat / a)
  # Eq. (sigg). (s_g * s_ghat would overflow float32 for gradients near 1e15.)
  sigma2 = s_g * (s_ghat / (s_g + s_ghat))
  if in_place:
    # The barrier keeps XLA from rewriting s_g / sigma2 below back into an
    # expression of b_ghat.
    sigma2 = jax.lax.optimization_barrier(sigma2)
    w = sigma2 / s_ghat                       # = s_g / (s_g + s_ghat)
  else:
    w = s_g / (s_g + s_ghat)                  # weight on the observation
  mu = mu_prev + w * (g - mu_prev)            # Eq. (mug)
  if in_place:
    # The residuals from the new mean: mu_t - g_t = -(1 - w) d and
    # mu_t - mu_{t-1} = w d = (g_t - mu_t) * s_g / s_ghat, with d = g_t - mu_{t-1}
    # and s_g / s_ghat = s_g / sigma2 - 1.
    e_ghat = g - mu
    dev_ghat = jnp.square(e_ghat)                            # (mu_t - g_t)**2
    dev_g = jnp.square(e_ghat * (s_g / sigma2 - 1))          # (mu_t - mu_{t-1})**2
    # The weights of the observation and of the prior mean, from the same
    # values: w = 1 - sigma2 / s_g and 1 - w = 1 - sigma2 / s_ghat.
    w_obs, w_prior = 1 - sigma2 / s_g, 1 - sigma2 / s_ghat
  else:
    dev_g = jnp.square(mu - mu_prev)
    dev_ghat = jnp.square(mu - g)
    w_obs, w_prior = w, s_ghat / (s_g + s_ghat)
  if grad_variance is not None:
    # Averaging the per-example terms adds the spread of the examples.
    dev_g = dev_g + jnp.square(w_obs) * grad_variance       # w**2 v
    dev_ghat = dev_ghat + jnp.square(w_prior) * grad_variance  # (1-w)**2 v
  b_g_new = gamma + 0.5 * (sigma2 + dev_g)              # Eq. (bpg)
  b_ghat_new = K * gamma + 0.5 * (sigma2 + dev_ghat)    # Eq. (bphg)
  b_g = (1 - step.rho_g) * b_g + step.rho_g * b_g_new              # Eq. (bg)
  b_ghat = (1 - step.rho_ghat) * b_ghat + step.rho_ghat * b_ghat_new  # Eq. (bhg)
  direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (vsgdt)
  return LeafUpdate(direction, mu, b_g, b_ghat)


def constant_vsgd_leaf(g, mu_prev, b_ghat, step: ConstantStep, K, gamma, eps,
                       grad_variance=None) -> LeafUpdate:
  """One Constant VSGD step (paper, Algorithm 2) for one array of coordinates.

  One form serves every compiler: the new ``b_ghat`` reads, besides its own
  old value, only ``g`` and the new ``mu``, so XLA:CPU's loops can write it
  in place (``_lowering.py`` says which compiler gets which loop).
  """
  w = 1 / (K + 1)                     # fixed weight on the new observation
  a_prev = jnp.where(step.first, gamma, gamma + 1)  # a_0 = gamma, a_t = gamma + 1
  # The direction needs the old b_ghat after the new one is written, so XLA
  # keeps one copy of it: the one full-size temporary this step needs.
  sigma2 = w * b_ghat / a_prev        # Eq. (siggc)
  mu = mu_prev + w * (g - mu_prev)    # Eq. (mugc)
  # Residuals from the new mean: mu_t - g_t = -(1 - w) d and
  # mu_t - mu_{t-1} = w d = (g_t - mu_t) / K, with d = g_t - mu_{t-1}.
  e_ghat = g - mu
  dev_ghat = jnp.square(e_ghat)       # (mu_t - g_t)**2
  dev_g = jnp.square(e_ghat / K)      # (mu_t - mu_{t-1})**2
  if grad_variance is not None:
    dev_ghat = dev_ghat + jnp.square(1 - w) * grad_variance
    dev_g = dev_g + jnp.square(w) * grad_variance
  b_new = gamma + 0.5 * (sigma2 + dev_ghat) + 0.5 * K * (sigma2 + dev_g)
  b_ghat = (1 - step.rho) * b_ghat + step.rho * b_new    # Eq. (bhgc)
  direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (updatec)
  return LeafUpdate(direction, mu, None, b_ghat)

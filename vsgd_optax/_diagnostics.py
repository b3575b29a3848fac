"""Read-outs of VSGD's posterior, for logging during training.

Each takes an optimizer state (bare, chained, masked or wrapped by
``optax.inject_hyperparams``) and returns a pytree like the params. Pass the
hyperparameters the optimizer was built with, or wrap it in
``optax.inject_hyperparams``: there are no defaults, since a wrong prior would give
wrong numbers silently. Factored rates are read as the step rebuilds them.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _factored
from vsgd_optax import _transforms
from vsgd_optax import _update_rules


def find_vsgd_state(opt_state: Any):
  """The one VSGD state inside ``opt_state``, and injected hyperparameters."""
  found, hyper = [], {}
  def walk(node):
    if _transforms.any_vsgd_state(node):
      found.append(node)
      return
    # inject_hyperparams returns InjectStatefulHyperparamsState in recent optax.
    if isinstance(getattr(node, "hyperparams", None), dict):
      hyper.update(node.hyperparams)
    children = jax.tree.leaves(node, is_leaf=lambda child: child is not node)
    for child in children:
      if child is not node:
        walk(child)
  walk(opt_state)
  if len(found) != 1:
    raise ValueError(
        f"expected exactly one VSGD state in the optimizer state, found "
        f"{len(found)}; pass the sub-state that holds the one you want "
        "(for example opt_state.inner_states['group'].inner_state).")
  return found[0], hyper


def hyperparameter(name, given, injected):
  """The value given, else the one ``inject_hyperparams`` holds."""
  if given is not None:
    return given
  if name in injected:
    return injected[name]
  raise ValueError(
      f"pass {name}=..., the value the optimizer was built with (or build it "
      f"with optax.inject_hyperparams, whose state holds {name}).")


def rates_of_every_element(state, hyper: dict, prior_strength, variance_ratio):
  """``(b_g, b_ghat)`` of each element of a VSGD state, factored rates rebuilt."""
  if not _factored.has_factored_rates(state):
    return state.b_g, state.b_ghat
  gamma = hyperparameter("prior_strength", prior_strength, hyper)
  k = hyperparameter("variance_ratio", variance_ratio, hyper)
  b_g, b_ghat = (_factored.as_factored(state.mu, rates) for rates in (state.b_g, state.b_ghat))
  pairs = jax.tree.map(
      lambda mu, rate_g, rate_ghat: _factored.element_rates(rate_g, rate_ghat, np.shape(mu), k,
                                                            gamma),
      state.mu, b_g, b_ghat)
  return jax.tree.transpose(jax.tree.structure(state.mu), jax.tree.structure((0, 0)), pairs)


def _variance(opt_state: Any, field: str, prior_strength, variance_ratio) -> optax.Updates:
  """One of ``_update_rules.Variances``' fields, per parameter, from the one VSGD
  or Constant VSGD state inside ``opt_state``: the read-outs below, each a
  field of what the step itself computes.
  """
  state, hyper = find_vsgd_state(opt_state)
  gamma = hyperparameter("prior_strength", prior_strength, hyper)
  if not isinstance(state, _transforms.ScaleByConstantVSGDState):
    b_g, b_ghat = rates_of_every_element(state, hyper, gamma, variance_ratio)
    return jax.tree.map(lambda b_g, b_ghat: getattr(_update_rules.variances(
        b_g, b_ghat, gamma), field), b_g, b_ghat)
  # Constant VSGD's observation noise is its rate over gamma + 1 alone; the
  # rest are tied to it by K.
  k = 1.0 if field == "s_ghat" else hyperparameter("variance_ratio", variance_ratio, hyper)
  return jax.tree.map(lambda b: getattr(_update_rules.constant_variances(b, k, gamma), field),
                      state.b_ghat)


def effective_beta1(opt_state: Any, *,
                    variance_ratio: jax.typing.ArrayLike | None = None,
                    prior_strength: jax.typing.ArrayLike | None = None) -> optax.Updates:
  r"""Weight that the next step puts on the previous mean, per parameter.

  For VSGD this is :math:`b_{\hat g} / (b_g + b_{\hat g})`, the analogue of
  Adam's :math:`\beta_1`, which the authors log during training; for
  Constant VSGD it is the fixed :math:`K/(K+1)`.

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state
      (factored rates included).
    variance_ratio: :math:`K_g` (Constant VSGD and factored rates, which need
      it); ``None`` takes the value ``optax.inject_hyperparams`` holds.
    prior_strength: :math:`\gamma` (factored rates only, which rebuild each
      element's rates from their prior); ``None`` as above.

  Returns:
    A pytree like the params.
  """
  state, hyper = find_vsgd_state(opt_state)
  if isinstance(state, _transforms.ScaleByConstantVSGDState):
    k = hyperparameter("variance_ratio", variance_ratio, hyper)
    return jax.tree.map(lambda m: jnp.full_like(m, k / (k + 1)), state.mu)
  b_g, b_ghat = rates_of_every_element(state, hyper, prior_strength, variance_ratio)
  return jax.tree.map(lambda bg, bgh: bgh / (bg + bgh), b_g, b_ghat)


def systematic_noise_variance(
    opt_state: Any, *,
    prior_strength: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike | None = None) -> optax.Updates:
  r"""Estimated variance of the true gradient around the previous mean.

  The plug-in :math:`1/\mathbb{E}[w_g] = b_g / a` for VSGD; for Constant VSGD
  the observation-noise variance divided by :math:`K_g`.

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state.
    prior_strength: :math:`\gamma`, as the optimizer was built; ``None``
      takes the value ``optax.inject_hyperparams`` holds.
    variance_ratio: :math:`K_g` (Constant VSGD and factored rates, which
      need it); ``None`` as above.

  Returns:
    A pytree like the params.
  """
  return _variance(opt_state, "s_g", prior_strength, variance_ratio)


def observation_noise_variance(
    opt_state: Any, *,
    prior_strength: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike | None = None) -> optax.Updates:
  r"""Estimated variance of the mini-batch gradient around the true gradient.

  The plug-in :math:`1/\mathbb{E}[w_{\hat g}] = b_{\hat g} / a` (for
  Constant VSGD, :math:`a = \gamma + 1`).

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state.
    prior_strength: :math:`\gamma`, as the optimizer was built; ``None``
      takes the value ``optax.inject_hyperparams`` holds.
    variance_ratio: :math:`K_g` (factored rates only, whose ``b_ghat`` is
      rebuilt from its prior :math:`K_g \gamma`); ``None`` as above.

  Returns:
    A pytree like the params.
  """
  return _variance(opt_state, "s_ghat", prior_strength, variance_ratio)


def posterior_variance(
    opt_state: Any, *,
    prior_strength: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike | None = None) -> optax.Updates:
  r"""Posterior variance :math:`\sigma^2` that the next step will use.

  Computed from the current rates: :math:`s_g s_{\hat g} / (s_g + s_{\hat g})`
  with :math:`s = b / a` for VSGD, :math:`b / ((K+1)(\gamma+1))` for
  Constant VSGD. Its square root next to :math:`|\mu|` tells how confident
  the optimizer is about the sign of each coordinate's gradient.

  Args:
    opt_state: a state containing exactly one VSGD or Constant VSGD state.
    prior_strength: :math:`\gamma`, as the optimizer was built; ``None``
      takes the value ``optax.inject_hyperparams`` holds.
    variance_ratio: :math:`K_g` (Constant VSGD and factored rates, which
      need it); ``None`` as above.

  Returns:
    A pytree like the params.
  """
  return _variance(opt_state, "sigma2", prior_strength, variance_ratio)

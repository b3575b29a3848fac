"""Factored VSGD: every large leaf's two rates kept as row and column means.

``vsgd_optax._factored`` keeps the rates of the leaves a rule names as their
means along its axes. ``factored_vsgd``'s rule is Adafactor's: a leaf factors
along its two largest axes where both are at least ``min_dim_size_to_factor`` long.
"""

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import optax

from vsgd_optax import _aliases
from vsgd_optax import _factored
from vsgd_optax import _rounding
from vsgd_optax import _transforms


def factored_axes(shape: tuple[int, ...],
                  min_dim_size_to_factor: int) -> _factored.FactoredAxes | None:
  """``((row_axis,), (col_axis,))``: the two largest axes in their order in ``shape``
  (of equal ones the later, as in ``optax.adafactor``), or None where the smaller
  is under ``min_dim_size_to_factor``.
  """
  if len(shape) < 2:
    return None
  first, second = sorted(np.argsort(shape, kind="stable")[-2:])
  if min(shape[first], shape[second]) < min_dim_size_to_factor:
    return None
  return (int(first),), (int(second),)


def largest_axes(min_dim_size_to_factor: int) -> _factored.FactoringRule:
  """``factored_vsgd``'s rule for a whole tree (``factored_axes`` of each leaf)."""
  def axes_of(tree):
    found = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
      axes = factored_axes(np.shape(leaf), min_dim_size_to_factor)
      if axes is not None:
        found[_transforms.leaf_path(path)] = axes
    return found
  return axes_of


def scale_by_factored_vsgd(
    *,
    min_dim_size_to_factor: Any = _factored.DEFAULT_THRESHOLD,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: _rounding.Rounding = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Rescale updates as :func:`vsgd_optax.scale_by_vsgd` does, with factored rates.

  A leaf whose two largest axes both have at least ``min_dim_size_to_factor``
  elements keeps ``b_g`` and ``b_ghat`` as their means along each of the two
  (:class:`vsgd_optax.FactoredRate`); every other leaf keeps them whole.
  :func:`factored_vsgd` chains this with the decay and the rate.

  Args:
    min_dim_size_to_factor: a leaf factors where its two largest axes are
      both at least this long: a whole number >= 2, or None for no factoring.
      Under ``optax.inject_hyperparams``, call ``init`` outside ``jit`` (or
      name it in ``static_args``).
    variance_ratio: as in :func:`vsgd_optax.scale_by_vsgd`.
    prior_strength: as in :func:`vsgd_optax.scale_by_vsgd`.
    kappa_g: as in :func:`vsgd_optax.scale_by_vsgd`.
    kappa_ghat: as in :func:`vsgd_optax.scale_by_vsgd`.
    eps: as in :func:`vsgd_optax.scale_by_vsgd`.
    state_rounding: as in :func:`vsgd_optax.scale_by_vsgd`.
    seed: as in :func:`vsgd_optax.scale_by_vsgd`.
    state_dtype: dtype of ``mu`` and of the full rates; the means are kept in at
      least float32.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` with a
    :class:`vsgd_optax.ScaleByVSGDState`, whose ``update`` accepts ``grad_variance=``
    and does not need ``params``.
  """
  settings = _transforms.VSGDSettings.checked(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
      kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
      seed=seed)
  return _transforms.scale_by_vsgd_with_factoring(largest_axes, min_dim_size_to_factor,
                                                  settings, "scale_by_factored_vsgd")


def factored_vsgd(
    learning_rate: optax.ScalarOrSchedule,
    *,
    min_dim_size_to_factor: Any = _factored.DEFAULT_THRESHOLD,
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
  r"""VSGD whose two rates of each large matrix are kept as row and column means.

  Experimental. For a leaf whose two largest axes both have at least
  ``min_dim_size_to_factor`` elements, ``b_g`` and ``b_ghat`` are kept as their
  means along each of the two axes, and each step rebuilds every element's
  rate as the prior constant plus the rank-one matrix with those means (as
  Adafactor does for Adam's second moment). ``mu`` stays per element, in
  ``state_dtype``, rounded as by :func:`vsgd_optax.vsgd`; the means are kept
  in at least float32. A 1024 x 1024 matrix then keeps about 4.02 bytes a
  parameter with a float32 ``mu`` and 2.02 with a bfloat16 one, against
  :func:`vsgd_optax.vsgd`'s 12 and Adam's 8. Every other leaf, and every leaf
  of a tree without large matrices, steps exactly as :func:`vsgd_optax.vsgd`.

  What is lost, how large gradients and NaNs are kept out of the means, and the
  measured quality are on the pages "The algorithm" and "Results".

  Args:
    learning_rate: a scalar or an :class:`optax.Schedule` of the step count.
    min_dim_size_to_factor: a leaf factors where its two largest axes are
      both at least this long (default 128, as :func:`optax.adafactor`'s):
      a whole number >= 2, or None for no factoring.
    variance_ratio: as in :func:`vsgd_optax.vsgd`.
    prior_strength: as in :func:`vsgd_optax.vsgd`.
    kappa_g: as in :func:`vsgd_optax.vsgd`.
    kappa_ghat: as in :func:`vsgd_optax.vsgd`.
    eps: as in :func:`vsgd_optax.vsgd`.
    weight_decay: as in :func:`vsgd_optax.vsgd`.
    weight_decay_mask: as in :func:`vsgd_optax.vsgd`.
    state_rounding: as in :func:`vsgd_optax.vsgd`.
    seed: as in :func:`vsgd_optax.vsgd`.
    state_dtype: dtype of ``mu`` and of the full rates; the means are kept in at
      least float32.

  Returns:
    The corresponding :class:`optax.GradientTransformationExtraArgs`.

  Examples:
    >>> import jax.numpy as jnp
    >>> from vsgd_optax import experimental
    >>> params = {"w": jnp.zeros((1024, 1024)), "b": jnp.zeros(1024)}
    >>> rates = experimental.factored_vsgd(1e-2).init(params)[0].b_g
    >>> rates["w"].row.shape, rates["w"].col.shape, rates["b"].shape
    ((1024, 1), (1, 1024), (1024,))
  """
  scaling = scale_by_factored_vsgd(
      min_dim_size_to_factor=min_dim_size_to_factor, variance_ratio=variance_ratio,
      prior_strength=prior_strength, kappa_g=kappa_g, kappa_ghat=kappa_ghat, eps=eps,
      state_dtype=state_dtype, state_rounding=state_rounding, seed=seed)
  return _aliases.chain_with_decay(scaling, learning_rate, weight_decay, weight_decay_mask,
                                   state_type=_transforms.ScaleByVSGDState,
                                   optimizer="factored_vsgd")

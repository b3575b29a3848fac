"""Factored rates: a matrix's two Gamma rates kept as their row and column means.

Each rate is the prior constant ``c`` plus an SVI average ``D`` of squared residuals,
and the update is affine, so the row and column means follow it exactly. Each step
rebuilds every element's rate as ``c`` plus the rank-one matrix with the means of
``D`` (as Adafactor rebuilds Adam's second moment):

    D_ij ~= mean_j(D)_i * mean_i(D)_j / mean(D).

``mu`` stays per element. A leaf's rows and columns may each be several axes; the
other axes are batch axes. ``docs/algorithm.md`` ("Factored rates") derives it.
"""

from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp

from vsgd_optax import _update_rules

# The shortest axis that factors by default, optax.adafactor's.
MIN_DIM_SIZE_TO_FACTOR = 128


class DefaultThreshold:
  """``min_dim_size_to_factor``'s default, ``MIN_DIM_SIZE_TO_FACTOR``.

  Not an int, because ``optax.inject_hyperparams`` turns every int it is given
  into a traced array, and this number sets the state's shapes, which
  ``jax.jit(init)`` must know.
  """

  def __repr__(self):
    return repr(MIN_DIM_SIZE_TO_FACTOR)

  def __eq__(self, other):  # equal to the number it stands for, as a signature reads
    return other is self or other == MIN_DIM_SIZE_TO_FACTOR

  def __hash__(self):
    return hash(MIN_DIM_SIZE_TO_FACTOR)


DEFAULT_THRESHOLD = DefaultThreshold()
# A leaf's factored axes: (row axes, column axes); the rest are batch axes.
FactoredAxes = tuple[tuple[int, ...], tuple[int, ...]]
# A tree's factored leaves, by ``_transforms.leaf_path``: a factoring rule.
FactoringRule = Callable[[Any], dict[tuple[str, ...], FactoredAxes]]


class FactoredRate(NamedTuple):
  """One Gamma rate of a matrix, as its means along its rows and along its columns.

  Attributes:
    row: the mean over the column axes, kept with size 1.
    col: the mean over the row axes, kept with size 1.
  """
  row: jax.Array
  col: jax.Array


def is_factored(rate) -> bool:
  return isinstance(rate, FactoredRate)


def axes_of_rate(rate: FactoredRate, shape: tuple[int, ...]) -> FactoredAxes:
  """The row and column axes of a factored rate, read off its means' shapes (an axis
  of length 1 reads as neither, which changes no mean).
  """
  cols = tuple(i for i, (r, n) in enumerate(zip(rate.row.shape, shape, strict=True)) if r != n)
  rows = tuple(i for i, (c, n) in enumerate(zip(rate.col.shape, shape, strict=True)) if c != n)
  return rows, cols


def rank_one(rate: FactoredRate, prior, rows: tuple[int, ...]) -> jax.Array:
  """Every element's rate: ``prior`` plus the rank-one matrix with the row and
  column means of ``rate``'s excess over ``prior``.
  """
  # The excess is >= 0 in exact arithmetic; a rounding below the prior is 0.
  row, col = jnp.maximum(rate.row - prior, 0), jnp.maximum(rate.col - prior, 0)
  total = jnp.mean(row, axis=rows, keepdims=True)
  # Where the total is 0, so is every row: the excess is 0, not 0 / 0.
  return _update_rules.clamp_to_finite(prior + row * (col / jnp.where(total > 0, total, 1)))


def element_rates(b_g, b_ghat, shape: tuple[int, ...], K, gamma):
  """Each element's ``(b_g, b_ghat)`` for an array of ``shape``: full rates as they
  are, factored ones rebuilt as the step rebuilds them.
  """
  if not is_factored(b_g):
    return b_g, b_ghat
  rows, _ = axes_of_rate(b_g, shape)
  return rank_one(b_g, gamma, rows), rank_one(b_ghat, K * gamma, rows)


def factor(full: jax.Array, axes: FactoredAxes, kept: jax.Array) -> FactoredRate:
  """The row and column means of a full rate, a NaN element read as its ``kept`` rate."""
  # A NaN stays in its own element (as in vsgd and Adam), out of its row's and
  # column's means; a mean whose sum overflowed saturates.
  rows, cols = axes
  full = jnp.where(jnp.isnan(full), kept, full)
  def mean(over):
    return _update_rules.clamp_to_finite(jnp.mean(full, axis=over, keepdims=True))
  return FactoredRate(mean(cols), mean(rows))


def as_factored(mu, rates):
  """``rates`` with each factored rate a ``FactoredRate`` again, where Flax NNX's
  ``nnx.Optimizer`` handed it back as a mapping of its fields.
  """
  # Only what stands where mu has a leaf is a rate: a params dict with keys of
  # those names is left alone.
  return jax.tree.map(lambda _, rate: FactoredRate(**rate) if isinstance(rate, Mapping) else rate,
                      mu, rates)


def has_factored_rates(state) -> bool:
  """Whether any rate of a VSGD state is factored (Constant VSGD's never are)."""
  if not hasattr(state, "b_g"):
    return False
  rates = as_factored(state.mu, state.b_g)
  return any(map(is_factored, jax.tree.leaves(rates, is_leaf=is_factored)))


def vsgd_leaf(g, mu_prev, b_g, b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
              grad_variance=None, form=_update_rules.vsgd_as_written) -> _update_rules.LeafUpdate:
  """One VSGD step for one array whose rates may be factored; ``form`` is the
  full-rate rule (``_update_rules.vsgd_as_written`` or ``vsgd_in_place``).
  """
  hyper = {"t": t, "K": K, "gamma": gamma, "kappa_g": kappa_g, "kappa_ghat": kappa_ghat,
           "eps": eps, "grad_variance": grad_variance}
  if not is_factored(b_g):
    return form(g, mu_prev, b_g, b_ghat, **hyper)
  axes = axes_of_rate(b_g, g.shape)
  # A gradient whose square could overflow would saturate its row's and column's
  # means and pull every rebuilt rate there to the prior: it is read as a zero.
  too_large = jnp.abs(g) >= jnp.sqrt(jnp.finfo(g.dtype).max) / 2
  rebuilt_g, rebuilt_ghat = rank_one(b_g, gamma, axes[0]), rank_one(b_ghat, K * gamma, axes[0])
  new = form(jnp.where(too_large, 0, g), mu_prev, rebuilt_g, rebuilt_ghat, **hyper)
  return _update_rules.LeafUpdate(new.direction, new.mu, factor(new.b_g, axes, rebuilt_g),
                                  factor(new.b_ghat, axes, rebuilt_ghat))


"""Factored rates: VSGD's two rates of a matrix kept as their row and column means.

VSGD keeps two Gamma rates per parameter. Each is the prior constant plus an
SVI average of squared residuals (``docs/algorithm.md``, "Factored rates"):

    b_t = c + D_t,   c = gamma for b_g and K gamma for b_ghat,
    D_t = (1 - rho_t) D_{t-1} + rho_t (sigma2_t + residual_t**2) / 2.

The update is affine, so the row means of ``b`` follow the same update with
the row means of the new terms, and likewise the column means: no
approximation there. What is approximated is the matrix itself. Each step
rebuilds it from its means as the prior constant plus the rank-one matrix
with the same row and column means of the excess ``D``:

    D_ij ~= mean_j(D)_i * mean_i(D)_j / mean(D),

which is exact where ``D`` is rank one, and which Adafactor uses for Adam's
second moment. ``mu`` stays per element.

A leaf's "rows" and "columns" may each be several of its axes, and any other
axis is a batch axis with matrices of its own. Which leaves factor, and along
which axes, is the caller's rule (``factored_scaling``'s ``axes_of``):
``vsgd_muon`` factors the reduction and output axes that Muon's dimension
numbers give it, so that a leaf steps as its 2-D reshape does, and
``experimental.factored_vsgd`` a leaf's two largest axes. Every other leaf
keeps the full rates and steps exactly as ``vsgd``.
"""

import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import _validation

# A leaf's factored axes: (row axes, column axes); the rest are batch axes.
Axes = tuple[tuple[int, ...], tuple[int, ...]]
# A tree's factored leaves, by ``_transforms.leaf_path``: what ``factored_scaling`` takes.
AxesOf = Callable[[Any], dict[tuple[str, ...], Axes]]


class FactoredRate(NamedTuple):
  """One Gamma rate of a matrix, as its means along its rows and along its columns.

  Attributes:
    row: the mean over the column axes, which it keeps with size 1.
    col: the mean over the row axes, which it keeps with size 1.
  """
  row: jax.Array
  col: jax.Array


class FactoredVSGDState(NamedTuple):
  """State of VSGD with factored rates: :func:`vsgd_optax.scale_by_vsgd_muon`'s
  (its default) and ``experimental.scale_by_factored_vsgd``'s.

  Attributes:
    count: number of steps taken so far; shape=(), int32, saturating.
    mu: posterior mean of the true gradient, per element, in ``state_dtype``.
    b_g: like the params, where each leaf that factors holds a
      :class:`FactoredRate` (at least float32) and every other leaf the full
      rate, as in :class:`vsgd_optax.ScaleByVSGDState`.
    b_ghat: the same for the observation-noise rate.
  """
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates
  b_g: optax.Updates
  b_ghat: optax.Updates


def _axes_of(rate: FactoredRate, shape: tuple[int, ...]) -> Axes:
  """The row and column axes of a factored rate, read off its means' shapes: each
  is where the other's mean was taken. An axis of length 1 reads as neither,
  which changes no mean.
  """
  cols = tuple(i for i, (r, n) in enumerate(zip(rate.row.shape, shape, strict=True)) if r != n)
  rows = tuple(i for i, (c, n) in enumerate(zip(rate.col.shape, shape, strict=True)) if c != n)
  return rows, cols


def rank_one(rate: FactoredRate, prior, rows: tuple[int, ...]) -> jax.Array:
  """The rate of every element: ``prior`` plus the rank-one matrix whose row and
  column means are those of ``rate``'s excess over ``prior``.
  """
  # The excess is >= 0 in exact arithmetic; a rounding below the prior is 0.
  row, col = jnp.maximum(rate.row - prior, 0), jnp.maximum(rate.col - prior, 0)
  total = jnp.mean(row, axis=rows, keepdims=True)
  # Where the total is 0, so is every row: the excess is 0, not 0 / 0.
  return _update_rules.finite(prior + row * (col / jnp.where(total > 0, total, 1)))


def element_rates(b_g, b_ghat, shape: tuple[int, ...], K, gamma):
  """Each element's ``(b_g, b_ghat)`` for an array of ``shape``: full rates as they
  are, factored ones rebuilt as the step rebuilds them (``rank_one``).
  """
  if not isinstance(b_g, FactoredRate):
    return b_g, b_ghat
  rows, _ = _axes_of(b_g, shape)
  return rank_one(b_g, gamma, rows), rank_one(b_ghat, K * gamma, rows)


def factor(full: jax.Array, axes: Axes, kept: jax.Array) -> FactoredRate:
  """The row and column means of a full rate.

  One element must not reach the rest of its matrix through the means. Where
  its new rate is NaN (its mean became NaN, as vsgd's and Adam's would), the
  rate the element was rebuilt with, ``kept``, stands in for it: its rows and
  columns then move as if it had stayed put. A mean whose sum overflowed
  saturates (the rates of the rest of that row grow huge, so their steps go
  to 0, as a saturated element's own does).
  """
  rows, cols = axes
  full = jnp.where(jnp.isnan(full), kept, full)
  def mean(over):
    return _update_rules.finite(jnp.mean(full, axis=over, keepdims=True))
  return FactoredRate(mean(cols), mean(rows))


def as_factored(mu, rates):
  """``rates`` with each factored rate a ``FactoredRate`` again: Flax NNX's
  ``nnx.Optimizer`` hands the state back with each named tuple turned into a
  mapping of its fields. Only what stands where ``mu`` has a leaf is a rate,
  so a params dict with keys of those names is left alone.
  """
  return jax.tree.map(lambda _, rate: FactoredRate(**rate) if isinstance(rate, Mapping) else rate,
                      mu, rates)


def factored_vsgd_leaf(g, mu_prev, b_g, b_ghat, *, t, K, gamma, kappa_g, kappa_ghat, eps,
                       grad_variance=None, form=_update_rules.vsgd_as_written
                       ) -> _update_rules.LeafUpdate:
  """One VSGD step for one array whose rates may be factored.

  A full leaf steps as VSGD's ``form`` does. A factored one rebuilds its rates
  (``rank_one``), takes VSGD's step per element with them, and keeps the new
  rates' row and column means: as the update is affine, these are the old
  means moved by the means of the new terms.
  """
  hyper = {"t": t, "K": K, "gamma": gamma, "kappa_g": kappa_g, "kappa_ghat": kappa_ghat,
           "eps": eps, "grad_variance": grad_variance}
  if not isinstance(b_g, FactoredRate):
    return form(g, mu_prev, b_g, b_ghat, **hyper)
  axes = _axes_of(b_g, g.shape)
  # A gradient whose squared residual could overflow (1e20 or an infinity in
  # float32) would saturate the element's rates. vsgd keeps them in the
  # element; here they would enter its row's and column's means and pull every
  # other element's rebuilt rate to the prior for thousands of steps. So such a
  # gradient is read as missing, a zero, as for a parameter the loss does not
  # reach. Every gradient kept is under half the root of the largest value, so
  # is every mean (an average of them), and no residual overflows. The test
  # reads the gradient alone, so the step needs no temporary. A NaN stays in
  # its own element, as in vsgd and Adam, and out of the means (``factor``).
  too_large = jnp.abs(g) >= jnp.sqrt(jnp.finfo(g.dtype).max) / 2
  rebuilt_g, rebuilt_ghat = rank_one(b_g, gamma, axes[0]), rank_one(b_ghat, K * gamma, axes[0])
  new = form(jnp.where(too_large, 0, g), mu_prev, rebuilt_g, rebuilt_ghat, **hyper)
  return _update_rules.LeafUpdate(new.direction, new.mu, factor(new.b_g, axes, rebuilt_g),
                                  factor(new.b_ghat, axes, rebuilt_ghat))


def _init_rates(params, state_dtype, axes: dict, value_of):
  """A rate tree like ``params``: full leaves as ``vsgd``'s, factored ones (those in
  ``axes``) as row and column means of at least float32, all at ``value_of(dtype)``.

  The means are means of zeros shaped, placed and sharded as their leaf, so
  that each keeps the leaf's sharding where its axes are not averaged, inside
  ``jit`` and out, as the step's own means do.
  """
  def leaf_rate(path, leaf):
    found = axes.get(_transforms.leaf_path(path))
    if found is None:
      return _transforms.init_moments(leaf, state_dtype, value_of)
    # The means are few, and kept at least as precise as the float32 update.
    dtype = np.dtype(jnp.promote_types(_transforms.state_dtype_of(leaf.dtype, state_dtype),
                                       jnp.float32))
    zeros = _transforms.init_moments(leaf, dtype)
    rows, cols = found
    return FactoredRate(*(jnp.mean(zeros, axis=over, keepdims=True) + value_of(dtype)
                          for over in (cols, rows)))
  return jax.tree_util.tree_map_with_path(leaf_rate, params)


def _check_factoring(mu, b_g, axes: dict, optimizer: str, why: str) -> None:
  """Each rate factored along the axes this optimizer factors it along, and only
  there: a state made otherwise is refused, not stepped with the layout it happens
  to hold. Checked at trace time: free when the step runs.
  """
  is_rate = lambda x: isinstance(x, FactoredRate)
  wrong = []
  for (path, leaf), rate in zip(jax.tree_util.tree_leaves_with_path(mu),
                                jax.tree.leaves(b_g, is_leaf=is_rate), strict=True):
    want = axes.get(_transforms.leaf_path(path))
    shape = np.shape(leaf)
    held = _axes_of(rate, shape) if is_rate(rate) else None
    if want is not None:  # as _axes_of reads them: an axis of length 1 is neither
      want = tuple(tuple(a for a in side if shape[a] != 1) for side in want)
    if want != held:
      wrong.append(f"{jax.tree_util.keystr(path)} {np.shape(leaf)} "
                   f"({'factored' if held else 'full'})")
  if wrong:
    raise ValueError(
        f"{optimizer}'s update got a state whose rates are factored otherwise than {why} "
        "factors them: " + ", ".join(wrong) + ". Pass the state this optimizer's init makes, "
        "or build the optimizer as the state was built.")


def _check_state_dtypes(mu, rates, state_dtype, optimizer: str) -> None:
  """``mu`` and the full rates in the state's dtype, the means at least float32."""
  is_rate = lambda x: isinstance(x, FactoredRate)
  full = jax.tree.map(lambda x: None if is_rate(x) else x, rates, is_leaf=is_rate)
  means = [x for x in jax.tree.leaves(rates, is_leaf=is_rate) if is_rate(x)]
  _validation.check_state_dtypes({"mu": mu, "b_g": full[0], "b_ghat": full[1]}, state_dtype,
                                 optimizer)
  means_dtype = None if state_dtype is None else jnp.promote_types(state_dtype, jnp.float32)
  _validation.check_state_dtypes({"means": means}, means_dtype, optimizer)


def factored_scaling(axes_of: AxesOf | None, *, variance_ratio, prior_strength, kappa_g,
                     kappa_ghat, eps, state_dtype, state_rounding, seed, optimizer: str,
                     why: str) -> optax.GradientTransformationExtraArgs:
  """VSGD's scaling with the rates of the leaves ``axes_of`` names factored along
  the axes it gives them (``scale_by_vsgd_muon``;
  ``experimental.scale_by_factored_vsgd``). ``axes_of`` is None where they are
  not known when the optimizer is built (a threshold that
  ``inject_hyperparams`` traces): ``init`` then refuses to guess, and the step
  reads each rate's axes off the state. ``why`` names the rule in errors.
  """
  _validation.check_vsgd_hyperparams(variance_ratio=variance_ratio,
                                     prior_strength=prior_strength, kappa_g=kappa_g,
                                     kappa_ghat=kappa_ghat, eps=eps)
  _validation.check_storage(state_dtype, state_rounding, seed)
  hyperparams = {"K": variance_ratio, "gamma": prior_strength, "kappa_g": kappa_g,
                 "kappa_ghat": kappa_ghat, "eps": eps}
  prior_g, prior_ghat = (_transforms.prior_rate(variance_ratio, prior_strength, which)
                         for which in (0, 1))

  def init_fn(params):
    if axes_of is None:
      raise ValueError(
          f"{optimizer}'s init needs to know which axes to factor, and {why} is an array "
          "whose value is not known here (optax.inject_hyperparams under jit): call init "
          "outside jit, or name it in static_args.")
    axes = axes_of(params)
    return FactoredVSGDState(
        count=jnp.zeros([], jnp.int32),
        mu=_transforms.init_moments(params, state_dtype),
        b_g=_init_rates(params, state_dtype, axes, prior_g),
        b_ghat=_init_rates(params, state_dtype, axes, prior_ghat))

  def update_fn(updates, state, params=None, *, grad_variance=None, **extra_args):
    del params, extra_args
    _validation.check_state(state, FactoredVSGDState, optimizer)
    b_g, b_ghat = as_factored(state.mu, state.b_g), as_factored(state.mu, state.b_ghat)
    _check_state_dtypes(state.mu, (b_g, b_ghat), state_dtype, optimizer)
    if axes_of is not None:
      _check_factoring(state.mu, b_g, axes_of(updates), optimizer, why)
    count = optax.safe_increment(state.count)
    rule = _transforms.per_backend(
        factored_vsgd_leaf,
        cpu=functools.partial(factored_vsgd_leaf, form=_update_rules.vsgd_in_place))
    direction, (mu, b_g, b_ghat) = _transforms.leafwise(
        rule, hyperparams, count, updates, (state.mu, b_g, b_ghat), grad_variance,
        state_rounding, seed,
        priors=_transforms.first_step_priors(variance_ratio, prior_strength,
                                             priors=(None, prior_g, prior_ghat)))
    return direction, FactoredVSGDState(count, mu, b_g, b_ghat)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)

"""Factored VSGD: the rates of a large matrix kept as their row and column means.

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
second moment. ``mu`` stays per element. Leaves whose two largest axes are not
both at least ``min_dim_size_to_factor`` keep the full rates and step exactly
as ``vsgd``.
"""

import functools
import numbers
from collections.abc import Mapping
from typing import NamedTuple
from typing import Unpack

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _aliases
from vsgd_optax import _hyperparams
from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import _validation


class FactoredRate(NamedTuple):
  """One Gamma rate of a matrix, as its means along each of its two largest axes.

  Attributes:
    row: the mean over the column axis, which it keeps with size 1.
    col: the mean over the row axis, which it keeps with size 1.
  """
  row: jax.Array
  col: jax.Array


class FactoredVSGDState(NamedTuple):
  """State of :func:`scale_by_factored_vsgd`.

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


def factored_axes(shape: tuple[int, ...], min_dim_size_to_factor: int) -> tuple[int, int] | None:
  """``(row_axis, col_axis)``: the two largest axes in their order in ``shape``, or
  None where the smaller of them is under ``min_dim_size_to_factor``.

  Of axes of equal size, the later ones count as larger (as in ``optax.adafactor``).
  """
  if len(shape) < 2:
    return None
  first, second = sorted(np.argsort(shape, kind="stable")[-2:])
  if min(shape[first], shape[second]) < min_dim_size_to_factor:
    return None
  return int(first), int(second)


def _reduced(shape: tuple[int, ...], axis: int) -> tuple[int, ...]:
  return shape[:axis] + (1,) + shape[axis + 1:]


def _axes_of(rate: FactoredRate, shape: tuple[int, ...]) -> tuple[int, int]:
  """The row and column axes of a factored rate: each is the one axis along
  which the other's statistic was averaged (factored axes have size >= 2).
  """
  col_axis, = (i for i, (r, n) in enumerate(zip(rate.row.shape, shape, strict=True)) if r != n)
  row_axis, = (i for i, (c, n) in enumerate(zip(rate.col.shape, shape, strict=True)) if c != n)
  return row_axis, col_axis


def rank_one(rate: FactoredRate, prior, row_axis: int) -> jax.Array:
  """The rate of every element: ``prior`` plus the rank-one matrix whose row and
  column means are those of ``rate``'s excess over ``prior``.
  """
  # The excess is >= 0 in exact arithmetic; a rounding below the prior is 0.
  row, col = jnp.maximum(rate.row - prior, 0), jnp.maximum(rate.col - prior, 0)
  total = jnp.mean(row, axis=row_axis, keepdims=True)
  # Where the total is 0, so is every row: the excess is 0, not 0 / 0.
  return _update_rules.finite(prior + row * (col / jnp.where(total > 0, total, 1)))


def element_rates(b_g, b_ghat, shape: tuple[int, ...], K, gamma):
  """Each element's ``(b_g, b_ghat)`` for an array of ``shape``: full rates as they
  are, factored ones rebuilt as the step rebuilds them (``rank_one``).
  """
  if not isinstance(b_g, FactoredRate):
    return b_g, b_ghat
  row_axis, _ = _axes_of(b_g, shape)
  return rank_one(b_g, gamma, row_axis), rank_one(b_ghat, K * gamma, row_axis)


def factor(full: jax.Array, row_axis: int, col_axis: int, prior) -> FactoredRate:
  """The row and column means of a full rate.

  One element must not reach the rest of its matrix through the means: where
  its new rate is NaN (a NaN gradient) the ``prior`` stands in, and a mean
  whose sum overflowed saturates (the rates of the rest of that row grow
  huge, so their steps go to 0, as a saturated element's own does).
  """
  full = jnp.where(jnp.isnan(full), prior, full)
  def mean(axis):
    return _update_rules.finite(jnp.mean(full, axis=axis, keepdims=True))
  return FactoredRate(mean(col_axis), mean(row_axis))


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
  row_axis, col_axis = _axes_of(b_g, g.shape)
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
  new = form(jnp.where(too_large, 0, g), mu_prev, rank_one(b_g, gamma, row_axis),
             rank_one(b_ghat, K * gamma, row_axis), **hyper)
  return _update_rules.LeafUpdate(new.direction, new.mu,
                                  factor(new.b_g, row_axis, col_axis, gamma),
                                  factor(new.b_ghat, row_axis, col_axis, K * gamma))


def _means_sharding(leaf, axis: int):
  """Where a mean over ``axis`` of ``leaf`` lives: a named sharding of the leaf
  with ``axis`` not split, so that each mean sits with the rows or columns it
  summarizes; None (the default placement) for anything else, such as a
  tracer inside ``jit``, whose compiler then places it.
  """
  try:
    sharding = leaf.sharding
  except Exception:  # noqa: BLE001  (a tracer may have no concrete sharding)
    return None
  if not isinstance(sharding, jax.sharding.NamedSharding):
    return None
  spec = list(sharding.spec) + [None] * (len(leaf.shape) - len(sharding.spec))
  spec[axis] = None
  return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*spec))


def _init_rates(params, state_dtype, min_dim_size_to_factor: int, value_of):
  """A rate tree like ``params``: full leaves as ``vsgd``'s, factored ones as
  row and column means of at least float32, all at ``value_of(dtype)``.
  """
  def leaf_rate(leaf):
    axes = factored_axes(np.shape(leaf), min_dim_size_to_factor)
    if axes is None:
      return _transforms.init_moments(leaf, state_dtype, value_of)
    # The means are few, and kept at least as precise as the float32 update.
    dtype = np.dtype(jnp.promote_types(_transforms.state_dtype_of(leaf.dtype, state_dtype),
                                       jnp.float32))
    row_axis, col_axis = axes
    shape = tuple(leaf.shape)
    return FactoredRate(*(
        jnp.zeros(_reduced(shape, axis), dtype, device=_means_sharding(leaf, axis))
        + value_of(dtype) for axis in (col_axis, row_axis)))
  return jax.tree.map(leaf_rate, params)


def _check_factoring(mu, b_g, min_dim_size_to_factor: int) -> None:
  """Each rate factored where ``min_dim_size_to_factor`` factors its leaf, and only
  there: a state made with another threshold is refused, not stepped with the
  layout it happens to hold. Checked at trace time: free when the step runs.
  """
  is_rate = lambda x: isinstance(x, FactoredRate)
  wrong = [f"{jax.tree_util.keystr(path)} {np.shape(leaf)} "
           f"({'factored' if is_rate(rate) else 'full'})"
           for (path, leaf), rate in zip(jax.tree_util.tree_leaves_with_path(mu),
                                         jax.tree.leaves(b_g, is_leaf=is_rate), strict=True)
           if is_rate(rate) != (factored_axes(np.shape(leaf), min_dim_size_to_factor)
                                is not None)]
  if wrong:
    raise ValueError(
        "scale_by_factored_vsgd's update got a state whose rates are factored otherwise than "
        f"min_dim_size_to_factor={min_dim_size_to_factor} factors them: " + ", ".join(wrong)
        + ". It was made with another min_dim_size_to_factor; pass the state this "
        "optimizer's init makes, or build the optimizer with the threshold the state has.")


def _check_state_dtypes(mu, rates, state_dtype) -> None:
  """``mu`` and the full rates in the state's dtype, the means at least float32
  (``_transforms.check_state_dtypes``).
  """
  is_rate = lambda x: isinstance(x, FactoredRate)
  full = jax.tree.map(lambda x: None if is_rate(x) else x, rates, is_leaf=is_rate)
  means = [x for x in jax.tree.leaves(rates, is_leaf=is_rate) if is_rate(x)]
  _transforms.check_state_dtypes({"mu": mu, "b_g": full[0], "b_ghat": full[1]}, state_dtype,
                                 "scale_by_factored_vsgd")
  means_dtype = None if state_dtype is None else jnp.promote_types(state_dtype, jnp.float32)
  _transforms.check_state_dtypes({"means": means}, means_dtype, "scale_by_factored_vsgd")


@_hyperparams.takes(_hyperparams.VSGDArgs)
def scale_by_factored_vsgd(
    *,
    min_dim_size_to_factor: int = 128,
    **args: Unpack[_hyperparams.VSGDArgs],
) -> optax.GradientTransformationExtraArgs:
  """Rescale updates as :func:`vsgd_optax.scale_by_vsgd` does, with factored rates.

  See :func:`factored_vsgd` for the arguments.
  """
  if (isinstance(min_dim_size_to_factor, bool)
      or not isinstance(min_dim_size_to_factor, numbers.Integral) or min_dim_size_to_factor < 2):
    raise ValueError(
        "min_dim_size_to_factor must be a whole number >= 2 (an axis of size 1 has nothing to "
        f"factor), got {min_dim_size_to_factor!r}. It sets the state's shapes, so it cannot be "
        "an array: under optax.inject_hyperparams, name it in static_args.")
  hyperparams = _validation.vsgd_hyperparams(**_hyperparams.of(_hyperparams.VSGDRuleArgs, args))
  variance_ratio, prior_strength = args["variance_ratio"], args["prior_strength"]
  state_dtype, state_rounding, seed = _transforms.check_storage(args)

  prior_g, prior_ghat = (_transforms.prior_rate(variance_ratio, prior_strength, which)
                         for which in (0, 1))

  def init_fn(params):
    return FactoredVSGDState(
        count=jnp.zeros([], jnp.int32),
        mu=_transforms.init_moments(params, state_dtype),
        b_g=_init_rates(params, state_dtype, min_dim_size_to_factor, prior_g),
        b_ghat=_init_rates(params, state_dtype, min_dim_size_to_factor, prior_ghat))

  def update_fn(updates, state, params=None, *, grad_variance=None, **extra_args):
    del params, extra_args
    _transforms.check_state(state, FactoredVSGDState, "scale_by_factored_vsgd")
    b_g, b_ghat = as_factored(state.mu, state.b_g), as_factored(state.mu, state.b_ghat)
    _check_state_dtypes(state.mu, (b_g, b_ghat), state_dtype)
    _check_factoring(state.mu, b_g, min_dim_size_to_factor)
    count = optax.safe_increment(state.count)
    rule = _transforms.per_backend(
        factored_vsgd_leaf,
        cpu=functools.partial(factored_vsgd_leaf, form=_update_rules.vsgd_in_place))
    direction, (mu, b_g, b_ghat) = _transforms.leafwise(
        rule, hyperparams, count, updates,
        (state.mu, b_g, b_ghat),
        grad_variance, state_rounding, seed,
        priors=_transforms.first_step_priors(variance_ratio, prior_strength,
                                             priors=(None, prior_g, prior_ghat)))
    return direction, FactoredVSGDState(count, mu, b_g, b_ghat)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


@_hyperparams.takes(_hyperparams.VSGDOptimizerArgs)
def factored_vsgd(
    learning_rate: optax.ScalarOrSchedule,
    *,
    min_dim_size_to_factor: int = 128,
    **args: Unpack[_hyperparams.VSGDOptimizerArgs],
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

  What is lost: the weight of the mean on a new gradient,
  :math:`b_{\hat g} / (b_g + b_{\hat g})`, can no longer vary freely per
  element. Beyond the priors, the ratio of the two rates of element
  :math:`(i, j)` is a row factor times a column factor. The derivation, and
  the measured quality and cost, are on the documentation's pages "The
  algorithm" and "Results". The read-outs of :mod:`vsgd_optax` (such as
  :func:`vsgd_optax.posterior_variance`) read full states only.

  Args:
    learning_rate: a scalar or an :class:`optax.Schedule` of the step count.
    min_dim_size_to_factor: a leaf factors where its two largest axes are
      both at least this long (default 128, as :func:`optax.adafactor`'s);
      at least 2.
    variance_ratio: :math:`K_g`, as in :func:`vsgd_optax.vsgd`.
    prior_strength: :math:`\gamma`, as in :func:`vsgd_optax.vsgd`.
    kappa_g: SVI decay exponent for ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent for ``b_ghat``, in [0, 1].
    eps: added to the denominator outside the square root, >= 0.
    weight_decay: decoupled weight decay, >= 0.
    weight_decay_mask: where decay applies, as in :func:`vsgd_optax.vsgd`.
    state_dtype: dtype of ``mu`` and of the full rates of leaves that do not
      factor; ``None`` as in :func:`vsgd_optax.vsgd`.
    state_rounding: how a bfloat16 state is stored, as in
      :func:`vsgd_optax.vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd_optax.vsgd`.

  Returns:
    The corresponding :class:`optax.GradientTransformationExtraArgs`. Its
    ``update`` accepts ``grad_variance=`` as :func:`vsgd_optax.vsgd`'s does.

  Examples:
    >>> import jax.numpy as jnp
    >>> from vsgd_optax import experimental
    >>> params = {"w": jnp.zeros((1024, 1024)), "b": jnp.zeros(1024)}
    >>> rates = experimental.factored_vsgd(1e-2).init(params)[0].b_g
    >>> rates["w"].row.shape, rates["w"].col.shape, rates["b"].shape
    ((1024, 1), (1, 1024), (1024,))
  """
  scaling = scale_by_factored_vsgd(min_dim_size_to_factor=min_dim_size_to_factor,
                                   **_hyperparams.of(_hyperparams.VSGDArgs, args))
  return _aliases.chain_with_decay(scaling, learning_rate, args["weight_decay"],
                                   args["weight_decay_mask"],
                                  state_type=FactoredVSGDState, optimizer="factored_vsgd")

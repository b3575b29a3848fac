"""``scale_by_vsgd`` and ``scale_by_constant_vsgd``: the states, and the rules of
``_update_rules.py`` and ``_factored.py`` mapped over pytrees (``None`` and
``optax.MaskedNode`` leaves pass through, as in every optax optimizer).

A VSGD builder checks its hyperparameters once, into a ``VSGDSettings``, and every
layer below takes that record. An update reaches the equations in three steps:
``update_fn``, ``step_every_leaf`` (the tree) and ``_leaf_step`` (one leaf, jitted
once for all leaves alike), which calls the rule of ``_update_rules`` the compiler
takes.
"""

import functools
import itertools
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _factored
from vsgd_optax import _rounding
from vsgd_optax import _update_rules
from vsgd_optax import _validation


class ScaleByVSGDState(NamedTuple):
  """State of :func:`scale_by_vsgd` and of every VSGD whose rates may be factored.

  Attributes:
    count: number of steps taken so far; shape=(), int32, saturating.
    mu: posterior mean of the true gradient; like params, in ``state_dtype``.
    b_g: Gamma rate of the systematic-noise precision; per leaf, like the param,
      or a :class:`vsgd_optax.FactoredRate` (its row and column means, at least
      float32) where the leaf's rates are factored.
    b_ghat: Gamma rate of the observation-noise precision, laid out as ``b_g``.
  """
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates
  b_g: optax.Updates
  b_ghat: optax.Updates


# Deprecated: the state of factored VSGD is ScaleByVSGDState. The name stays, the
# same class, so that code and checkpoints (pickles included) of 0.1.0 load.
FactoredVSGDState = ScaleByVSGDState


class ScaleByConstantVSGDState(NamedTuple):
  """State of :func:`scale_by_constant_vsgd`.

  Attributes:
    count: number of steps taken so far; shape=(), int32, saturating.
    mu: posterior mean of the true gradient; like params. Starts at 0.
    b_ghat: Gamma rate of the observation-noise precision; like params.
  """
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates
  b_ghat: optax.Updates


class VSGDSettings(NamedTuple):
  r"""VSGD's hyperparameters and its state's storage, as a builder was given them.

  Built once, checked, where a public builder is called (``VSGDSettings.checked``);
  every layer below takes the record whole. Each field is the argument of
  :func:`vsgd_optax.scale_by_vsgd` of its name.

  Attributes:
    variance_ratio: :math:`K_g`, the prior ratio of observation to systematic noise
      variance.
    prior_strength: :math:`\gamma`, the prior strength.
    kappa_g: SVI decay exponent of ``b_g``.
    kappa_ghat: SVI decay exponent of ``b_ghat``.
    eps: added to the direction's denominator.
    state_dtype: dtype of ``mu`` and the rates; None for the params' dtype promoted
      to at least float32.
    state_rounding: how a bfloat16 state is stored.
    seed: keys the stochastic rounding's bits.
  """
  variance_ratio: jax.typing.ArrayLike
  prior_strength: jax.typing.ArrayLike
  kappa_g: jax.typing.ArrayLike
  kappa_ghat: jax.typing.ArrayLike
  eps: jax.typing.ArrayLike
  state_dtype: jax.typing.DTypeLike | None
  state_rounding: _rounding.Rounding
  seed: int | jax.Array

  @classmethod
  def checked(cls, **settings) -> "VSGDSettings":
    """The record of ``settings`` (every field, by name), each value checked."""
    _validation.check_vsgd(**settings)
    return cls(**settings)

  def rule_hyperparams(self) -> dict:
    """The hyperparameters by the names ``_update_rules``' VSGD step takes them."""
    return {"K": self.variance_ratio, "gamma": self.prior_strength, "kappa_g": self.kappa_g,
            "kappa_ghat": self.kappa_ghat, "eps": self.eps}


Rule = Callable[..., _update_rules.LeafUpdate]


class LeafRule(NamedTuple):
  """What the step of every leaf takes from the optimizer's builder: the rule's
  hyperparameters by its argument names, the rounding and seed the state is stored
  with, and the jitted step of one leaf (``leaf_rule``).
  """
  hyperparams: dict
  rounding: _rounding.Rounding
  seed: Any
  step: Callable


def leaf_rule(forms: Mapping[str, Rule], hyperparams: dict, priors: tuple,
              rounding: _rounding.Rounding, seed) -> LeafRule:
  """The ``LeafRule`` of an elementwise rule, given by compiler as
  ``jax.lax.platform_dependent`` takes its branches (``_update_rules.VSGD_FORMS``),
  and per moment None or the ``value_of`` of the prior that the first step takes
  instead. Its one jitted step, built once with the optimizer, serves every leaf:
  leaves alike in shape, dtype and rounding plan share its trace and lowering, which
  cuts the compile time of many-leaf trees, and an update outside ``jit`` reuses what
  it compiled.
  """
  step = jax.jit(functools.partial(_leaf_step, forms, priors), static_argnames="plan")
  return LeafRule(hyperparams, rounding, seed, step)


def state_dtype_of(leaf_dtype, state_dtype) -> np.dtype:
  """At least float32: b_g and b_ghat live near prior_strength (1e-8)."""
  if state_dtype is not None:
    return np.dtype(state_dtype)
  return np.dtype(jnp.promote_types(leaf_dtype, jnp.float32))


def init_moments(params, state_dtype, value_of=None) -> optax.Params:
  """A tree like ``params`` (shapes and shardings) in the state dtype, zero or
  ``value_of(dtype)``, computed in that dtype as an injected one would be.
  """
  def leaf_moment(leaf):
    dtype = state_dtype_of(jnp.result_type(leaf), state_dtype)
    if isinstance(leaf, jax.ShapeDtypeStruct):
      zeros = jnp.zeros(leaf.shape, dtype, device=leaf.sharding)
    else:
      zeros = jnp.zeros_like(leaf, dtype=dtype)
    return zeros if value_of is None else zeros + value_of(dtype)
  return jax.tree.map(leaf_moment, params)


def init_rates(params, state_dtype, axes: dict, value_of) -> optax.Params:
  """A rate tree like ``params`` at ``value_of(dtype)``: full, or the row and column
  means (at least float32) of the leaves in ``axes``.
  """
  def leaf_rate(path, leaf):
    found = axes.get(leaf_path(path))
    if found is None:
      return init_moments(leaf, state_dtype, value_of)
    dtype = np.dtype(jnp.promote_types(state_dtype_of(leaf.dtype, state_dtype), jnp.float32))
    # Means of zeros shaped and placed as the leaf keep its sharding, as the step's do.
    zeros = init_moments(leaf, dtype)
    return _factored.FactoredRate(*(jnp.mean(zeros, axis=over, keepdims=True) + value_of(dtype)
                                    for over in found[::-1]))
  return jax.tree_util.tree_map_with_path(leaf_rate, params)


def prior_rate(variance_ratio, prior_strength, which: int) -> Callable:
  """VSGD's prior rate ``which`` (0: ``b_g``, 1: ``b_ghat``) as a function of a dtype."""
  return lambda dtype: _update_rules.prior_rates(
      jnp.asarray(variance_ratio, dtype), jnp.asarray(prior_strength, dtype))[which]


def at_prior_on_first_step(t, rates, value_of):
  """``rates``, except at step 1: the prior the hyperparameters give now.

  As in the authors' code, the first step takes its prior from the
  hyperparameters, so that one set after ``init`` (``inject_hyperparams``) counts.
  """
  return jax.tree.map(lambda rate: jnp.where(t == 1, value_of(rate.dtype), rate), rates)


def first_step_priors(*hyperparams, priors: tuple) -> tuple:
  """``priors`` where a hyperparameter they depend on is an array (it may change
  after ``init``); none where all are plain numbers, which ``init`` stored.
  """
  return () if _validation.are_plain(*hyperparams) else priors


def leaf_path(path) -> tuple[str, ...]:
  """A leaf's path as the strings of its keys, less a trailing ``.value``, so that a
  Flax NNX ``Variable``'s leaf and its array's have one path.
  """
  keys = tuple(jax.tree_util.keystr((key,)) for key in path)
  return keys[:-1] if keys[-1:] == (".value",) else keys


def _like_updates(grad_variance, updates):
  """``grad_variance`` with the updates' empty entries (``optax.masked`` passes
  extra arguments through whole).
  """
  try:
    return jax.tree.map(lambda u, v: u if _validation.is_empty(u) else v,
                        updates, grad_variance, is_leaf=_validation.is_empty)
  except ValueError as error:
    raise ValueError(
        f"grad_variance must have the updates' tree; got {jax.tree.structure(grad_variance)} "
        f"for updates {jax.tree.structure(updates)}.") from error


def _compute_dtype(*leaves) -> np.dtype:
  """At least float32, whatever the gradients' and the state's dtypes."""
  return np.dtype(jnp.result_type(jnp.float32, *(x.dtype for x in leaves)))


def _leaf_step(forms: Mapping[str, Rule], priors: tuple, g, old, v, t, hyper, leaf_seeds,
               plan: _rounding.LeafPlan):
  """One leaf's step in its compute dtype: ``(direction, *new moments)``."""
  # A moment may be a small pytree (a FactoredRate); each array is cast and stored alike.
  dtype = _compute_dtype(*jax.tree.leaves((g, old, v)))
  cast = lambda x: jax.tree.map(lambda y: jnp.asarray(y, dtype), x)
  # Here, inside the leaf's loop, the first step's select costs no buffer of its own.
  at_step = tuple(o if value_of is None else at_prior_on_first_step(t, o, value_of)
                  for o, value_of in itertools.zip_longest(old, priors))
  if any(map(_factored.is_factored, old)):  # a matrix's rates kept as row and column means
    forms = {compiler: functools.partial(_factored.vsgd_leaf, form=form)
             for compiler, form in forms.items()}
  args = (cast(g), *map(cast, at_step))
  kwargs = {"t": cast(t), **cast(hyper), "grad_variance": None if v is None else cast(v)}
  # Each form bound to the arguments, so that the compiler's is called directly.
  branches = {compiler: functools.partial(form, *args, **kwargs)
              for compiler, form in forms.items()}
  new = (jax.lax.platform_dependent(**branches) if len(branches) > 1
         else branches["default"]())
  new_moments = [m for m in new[1:] if m is not None]
  return ((new.direction.astype(g.dtype),)
          + _rounding.store_moments(new_moments, old, plan, leaf_seeds))


def _entries(updates, tree) -> list:
  """``tree``'s entries at the leaves of ``updates``, in their order; an entry that
  is a subtree (a FactoredRate) stays whole.
  """
  treedef = jax.tree.structure(updates)
  return treedef.flatten_up_to(tree)  # type: ignore[attr-defined]  # not in its stub


def step_every_leaf(rule: LeafRule, count, updates, moments: tuple, grad_variance):
  """Maps ``rule`` over the leaves: the direction in the gradients' dtype, and each
  moment (given in the rule's order) in its state dtype, stored as ``rule`` says.

  Returns:
    ``(direction, new_moments)``: a tree like ``updates`` and a tuple of trees.
  """
  with_path = jax.tree_util.tree_leaves_with_path(updates)
  per_moment = [_entries(updates, moment) for moment in moments]
  olds = [tuple(m[i] for m in per_moment) for i in range(len(with_path))]
  streams = _rounding.leaf_streams(
      count, rule.seed, rule.rounding,
      [(jax.tree_util.keystr(path), old) for (path, _), old in zip(with_path, olds, strict=True)])
  variances = ([None] * len(with_path) if grad_variance is None
               else _entries(updates, _like_updates(grad_variance, updates)))
  per_leaf = []  # a loop: on Python 3.11 a comprehension is one more frame to read through
  for (_, g), old, v, (seeds, plan) in zip(with_path, olds, variances, streams, strict=True):
    per_leaf.append(rule.step(g, old, v, count, rule.hyperparams, seeds, plan=plan))
  # Each leaf gives (direction, *moments), whose moments may be subtrees.
  direction, *new_moments = (jax.tree.unflatten(jax.tree.structure(updates),
                                                [out[k] for out in per_leaf])
                             for k in range(1 + len(moments)))
  return direction, tuple(new_moments)


def _check_update(updates, state, state_type: type, state_dtype, optimizer: str,
                  axes: dict | None = None):
  """One update's trace-time checks (free at run time): the state's type, tree,
  dtypes and, where ``axes`` is known, factoring. Returns its rates (``as_factored``).
  """
  _validation.check_state(state, state_type, optimizer)
  _validation.check_real_floating(updates, "gradients")
  _validation.check_matches_state(updates, state.mu)
  names = [name for name in ("b_g", "b_ghat") if name in state._fields]
  rates = [_factored.as_factored(state.mu, getattr(state, name)) for name in names]
  full = [jax.tree.map(lambda x: None if _factored.is_factored(x) else x, r,
                       is_leaf=_factored.is_factored) for r in rates]
  _validation.check_state_dtypes({"mu": state.mu, **dict(zip(names, full, strict=True))},
                                 state_dtype, optimizer)
  means = [x for r in rates for x in jax.tree.leaves(r, is_leaf=_factored.is_factored)
           if _factored.is_factored(x)]
  means_dtype = None if state_dtype is None else jnp.promote_types(state_dtype, jnp.float32)
  _validation.check_state_dtypes({"means": means}, means_dtype, optimizer)
  if axes is not None:
    _check_factoring(state.mu, rates[0], axes, optimizer)
  return rates


def _check_factoring(mu, b_g, axes: dict, optimizer: str) -> None:
  """Each rate factored along the axes this optimizer factors it along, and only there."""
  wrong = []
  for (path, leaf), rate in zip(jax.tree_util.tree_leaves_with_path(mu),
                                jax.tree.leaves(b_g, is_leaf=_factored.is_factored),
                                strict=True):
    shape = np.shape(leaf)
    held = _factored.axes_of_rate(rate, shape) if _factored.is_factored(rate) else None
    want = axes.get(leaf_path(path))
    if want is not None:  # as axes_of_rate reads them: an axis of length 1 is neither
      want = tuple(tuple(a for a in side if shape[a] != 1) for side in want)
    if want != held:
      wrong.append(f"{jax.tree_util.keystr(path)} {shape} ({'factored' if held else 'full'})")
  if wrong:
    raise ValueError(
        f"{optimizer}'s update got a state whose rates are factored otherwise than its "
        f"min_dim_size_to_factor factors them: {', '.join(wrong)}. Pass the state this "
        "optimizer's init makes, or build the optimizer as the state was built.")


def _nothing_factors(tree) -> dict:
  del tree
  return {}


def _vsgd_scaling(settings: VSGDSettings, optimizer: str,
                  axes_of: _factored.FactoringRule | None = _nothing_factors,
                  ) -> optax.GradientTransformationExtraArgs:
  """VSGD's scaling, the rates of the leaves ``axes_of`` names factored along its
  axes. ``axes_of`` None (an injected threshold): ``init`` refuses, and the step
  reads each rate's axes off the state. ``optimizer`` names it in errors.
  """
  k, gamma, dtype = settings.variance_ratio, settings.prior_strength, settings.state_dtype
  priors = (None,) + tuple(prior_rate(k, gamma, which) for which in (0, 1))
  rule = leaf_rule(_update_rules.VSGD_FORMS, settings.rule_hyperparams(),
                   first_step_priors(k, gamma, priors=priors), settings.state_rounding,
                   settings.seed)

  def init_fn(params):
    if axes_of is None:
      raise ValueError(
          f"{optimizer}'s init needs min_dim_size_to_factor's value, and it is a traced array "
          "(optax.inject_hyperparams under jit): call init outside jit, or pass "
          "static_args=('min_dim_size_to_factor',) to inject_hyperparams.")
    _validation.check_real_floating(params, "parameters")
    axes = axes_of(params)
    return ScaleByVSGDState(
        count=jnp.zeros([], jnp.int32), mu=init_moments(params, dtype),
        b_g=init_rates(params, dtype, axes, priors[1]),
        b_ghat=init_rates(params, dtype, axes, priors[2]))

  def update_fn(updates, state, params=None, *, grad_variance=None, **extra_args):
    del params, extra_args
    b_g, b_ghat = _check_update(updates, state, ScaleByVSGDState, dtype, optimizer,
                                None if axes_of is None else axes_of(updates))
    count = optax.safe_increment(state.count)
    direction, (mu, b_g, b_ghat) = step_every_leaf(
        rule, count, updates, (state.mu, b_g, b_ghat), grad_variance)
    return direction, ScaleByVSGDState(count, mu, b_g, b_ghat)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def scale_by_vsgd_with_factoring(
    rule_for: Callable[[int], _factored.FactoringRule], min_dim_size_to_factor,
    settings: VSGDSettings, optimizer: str) -> optax.GradientTransformationExtraArgs:
  """VSGD's scaling factored by ``rule_for(min_dim_size_to_factor)``; full rates
  where ``min_dim_size_to_factor`` is None.
  """
  if isinstance(min_dim_size_to_factor, _factored.DefaultThreshold):
    min_dim_size_to_factor = _factored.MIN_DIM_SIZE_TO_FACTOR
  if min_dim_size_to_factor is None:
    axes_of: _factored.FactoringRule | None = _nothing_factors
  else:
    threshold = _validation.check_whole_number("min_dim_size_to_factor",
                                               min_dim_size_to_factor, 2)
    axes_of = None if threshold is None else rule_for(threshold)
  return _vsgd_scaling(settings, optimizer, axes_of)


def scale_by_vsgd(
    *,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: _rounding.Rounding = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Rescale updates by VSGD's posterior estimate of the true gradient.

  Emits ``mu / (sqrt(mu**2 + sigma2) + eps)``, as :func:`optax.scale_by_adam` emits
  its ratio. See :func:`vsgd_optax.vsgd` for the equations.

  Args:
    variance_ratio: the prior ratio :math:`K_g` of observation to systematic
      noise variance, > 0.
    prior_strength: the prior strength :math:`\gamma`, > 0.
    kappa_g: SVI decay exponent of ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent of ``b_ghat``, in [0, 1].
    eps: added to the denominator, outside the square root, >= 0.
    state_dtype: dtype of ``mu``, ``b_g`` and ``b_ghat``; ``None`` for the params'
      dtype promoted to at least float32.
    state_rounding: how a bfloat16 state is stored: ``"stochastic"`` or
      ``"nearest"`` (see :func:`vsgd_optax.vsgd`).
    seed: keys the stochastic rounding's bits (see :func:`vsgd_optax.vsgd`).

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` whose ``update`` accepts an
    optional ``grad_variance`` (per-example VSGD) and does not need ``params``.
  """
  settings = VSGDSettings.checked(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
      kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
      seed=seed)
  return _vsgd_scaling(settings, "scale_by_vsgd")


def scale_by_constant_vsgd(
    *,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: _rounding.Rounding = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Rescale updates by Constant VSGD's posterior estimate of the gradient.

  See :func:`vsgd_optax.constant_vsgd` for the equations.

  Args:
    variance_ratio: the fixed ratio :math:`K_g` of observation to systematic
      noise variance, > 0.
    prior_strength: the prior strength :math:`\gamma`, > 0.
    kappa: SVI decay exponent of ``b_ghat``, in [0, 1].
    eps: added to the denominator, outside the square root, >= 0.
    state_dtype: dtype of ``mu`` and ``b_ghat``, as in :func:`scale_by_vsgd`.
    state_rounding: how a bfloat16 state is stored, as in :func:`scale_by_vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`scale_by_vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` whose ``update`` accepts an
    optional ``grad_variance`` and does not need ``params``.
  """
  _validation.check_vsgd(variance_ratio=variance_ratio, prior_strength=prior_strength,
                         kappa=kappa, eps=eps, state_dtype=state_dtype,
                         state_rounding=state_rounding, seed=seed)

  def prior(dtype):
    return _update_rules.constant_prior_rate(jnp.asarray(prior_strength, dtype))
  rule = leaf_rule({"default": _update_rules.constant_vsgd_leaf},  # one form for every compiler
                   {"K": variance_ratio, "gamma": prior_strength, "kappa": kappa, "eps": eps},
                   first_step_priors(prior_strength, priors=(None, prior)), state_rounding, seed)

  def init_fn(params):
    _validation.check_real_floating(params, "parameters")
    return ScaleByConstantVSGDState(count=jnp.zeros([], jnp.int32),
                                    mu=init_moments(params, state_dtype),
                                    b_ghat=init_moments(params, state_dtype, prior))

  def update_fn(updates, state, params=None, *, grad_variance=None, **extra_args):
    del params, extra_args
    _check_update(updates, state, ScaleByConstantVSGDState, state_dtype,
                  "scale_by_constant_vsgd")
    count = optax.safe_increment(state.count)
    direction, (mu, b_ghat) = step_every_leaf(rule, count, updates, (state.mu, state.b_ghat),
                                              grad_variance)
    return direction, ScaleByConstantVSGDState(count, mu, b_ghat)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def any_vsgd_state(x: Any) -> bool:
  return isinstance(x, (ScaleByVSGDState, ScaleByConstantVSGDState))


"""``scale_by_vsgd`` and ``scale_by_constant_vsgd``: the optax plumbing.

The arithmetic is in ``_update_rules.py``; this module maps it over pytrees,
owns the optimizer states, and keeps dtypes stable from step to step.
``_factored.py`` (factored rates: ``vsgd_muon``'s default and
``experimental.factored_vsgd``) uses the same plumbing. Trees may hold
``None`` (Equinox's filtered models) and ``optax.MaskedNode`` (``optax.masked``,
``optax.multi_transform``) wherever the params do: like every optax
optimizer, both are empty subtrees that the maps pass by.
"""

import itertools
from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _rounding
from vsgd_optax import _update_rules
from vsgd_optax import _validation


class ScaleByVSGDState(NamedTuple):
  """State of :func:`scale_by_vsgd`.

  Attributes:
    count: number of steps taken so far (``t - 1`` for the next step);
      shape=(), int32, saturates instead of overflowing.
    mu: posterior mean of the true gradient, ``mu_t``; like params, in
      ``state_dtype``. Starts at 0.
    b_g: Gamma rate of the systematic-noise precision ``w_g``; like params.
      Starts at the prior rate (see ``prior_rates`` in ``_update_rules``).
    b_ghat: Gamma rate of the observation-noise precision ``w_ghat``; like
      params. Starts at ``variance_ratio`` times the prior rate of ``b_g``.
  """
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates
  b_g: optax.Updates
  b_ghat: optax.Updates


class ScaleByConstantVSGDState(NamedTuple):
  """State of :func:`scale_by_constant_vsgd`.

  Attributes:
    count: number of steps taken so far; shape=(), int32, saturating.
    mu: posterior mean of the true gradient; like params. Starts at 0.
    b_ghat: Gamma rate of the observation-noise precision ``omega``; like
      params. Starts at ``prior_strength + 1`` (with the shape
      ``prior_strength + 1``, the paper's first variance ``b_0 / a_0 = 1``).
  """
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates
  b_ghat: optax.Updates


def state_dtype_of(leaf_dtype, state_dtype) -> np.dtype:
  """At least float32: b_g and b_ghat live near prior_strength (1e-8)."""
  if state_dtype is not None:
    return np.dtype(state_dtype)
  return np.dtype(jnp.promote_types(leaf_dtype, jnp.float32))


def checked_count(state, expected: type, state_dtype, optimizer: str) -> jax.Array:
  """The count of the step about to be taken from ``state``, once it is checked
  to be an ``expected`` whose moments have ``state_dtype``'s dtypes.
  """
  _validation.check_state(state, expected, optimizer)
  _validation.check_state_dtypes(state._asdict(), state_dtype, optimizer)
  return optax.safe_increment(state.count)


def init_moments(params, state_dtype, value_of=None) -> optax.Params:
  """A tree like ``params`` in the state dtype, zero or ``value_of(dtype)``.

  Each leaf has its param's shape and, for arrays and ShapeDtypeStructs, its
  sharding, so that the state lives where the params do. ``value_of`` is
  computed in the state dtype itself, as it is when ``inject_hyperparams``
  passes the hyperparameters as arrays, so both give the same state.
  """
  _validation.check_real_floating(params, "parameters")
  def leaf_moment(leaf):
    # A Python number is a leaf too, as in every optax optimizer.
    dtype = state_dtype_of(jnp.result_type(leaf), state_dtype)
    if isinstance(leaf, jax.ShapeDtypeStruct):
      zeros = jnp.zeros(leaf.shape, dtype, device=leaf.sharding)
    else:
      zeros = jnp.zeros_like(leaf, dtype=dtype)
    return zeros if value_of is None else zeros + value_of(dtype)
  return jax.tree.map(leaf_moment, params)


def prior_rate(variance_ratio, prior_strength, which: int) -> Callable:
  """VSGD's prior rate ``which`` (0: ``b_g``, 1: ``b_ghat``) as a function of a
  dtype, computed in that dtype: the ``value_of`` of ``init_moments``.
  """
  return lambda dtype: _update_rules.prior_rates(
      jnp.asarray(variance_ratio, dtype), jnp.asarray(prior_strength, dtype))[which]


def at_prior_on_first_step(t, rates, value_of):
  """``rates``, except at the first step (``t`` 1): there the prior rate that the
  hyperparameters give now (``value_of``, computed as ``init`` computes it).

  The authors' code computes its first step from the hyperparameters, not from
  a state. So here too a prior set after ``init`` (``optax.inject_hyperparams``
  lets one) is the prior of the first step, and not the one ``init`` stored;
  with the hyperparameters unchanged, both are the same numbers.
  """
  return jax.tree.map(lambda rate: jnp.where(t == 1, value_of(rate.dtype), rate), rates)


def first_step_priors(*hyperparams, priors: tuple) -> tuple:
  """``leafwise``'s ``priors``: ``priors`` where a hyperparameter they depend on is
  an array, which may have been set since ``init`` (``optax.inject_hyperparams``);
  none where all are plain numbers, which ``init`` stored as they are. The select
  costs a few operations an element on a CPU, which the usual step need not pay.
  """
  return () if _validation.are_plain(*hyperparams) else priors


def leaf_path(path) -> tuple[str, ...]:
  """A leaf's path as the strings of its keys, without the ``.value`` at the end
  that a Flax NNX ``Variable`` adds: the Variables' tree (``nnx.Optimizer``'s
  ``init``) and the arrays' tree (its ``update``) give one leaf one path, and a
  plain dict of the same names matches both. Only a trailing ``.value`` goes,
  so two leaves never share a path: one cannot end where the other goes on.
  """
  keys = tuple(jax.tree_util.keystr((key,)) for key in path)
  return keys[:-1] if keys[-1:] == (".value",) else keys


def _like_updates(grad_variance, updates):
  """``grad_variance`` with the updates' ``None`` and ``MaskedNode`` entries.

  ``optax.masked`` masks the updates but may pass extra arguments through
  whole; where the updates have an empty entry, so does the result.
  """
  try:
    return jax.tree.map(lambda u, v: u if _validation.is_empty(u) else v,
                        updates, grad_variance, is_leaf=_validation.is_empty)
  except ValueError as error:
    raise ValueError(
        "grad_variance must have the same tree structure as the updates "
        f"(the mini-batch mean gradient); got {jax.tree.structure(grad_variance)}"
        f" for updates {jax.tree.structure(updates)}.") from error


def _compute_dtype(*leaves) -> np.dtype:
  """At least float32, whatever the gradients' and the state's dtypes."""
  return np.dtype(jnp.result_type(jnp.float32, *(x.dtype for x in leaves)))


def _rounding_plan(updates, moments, rounding: str):
  """Which stream and slot rounds each state array stored stochastically.

  A leaf's arrays of one shape share a stream (keyed by the leaf's path in the
  full tree and the shape), each taking its own 16 bits of it, in the order of
  the moments: ``_rounding.array_bits``.

  Returns:
    ``(keys, slots)``: the streams' keys, and by ``(leaf position, moment, the
    array's path inside the moment)`` the ``(stream, slot)`` that rounds it.
  """
  treedef = jax.tree.structure(updates)
  per_moment = [treedef.flatten_up_to(moment)  # type: ignore[attr-defined]  # in PyTreeDef, not its stub
                for moment in moments]
  keys: list[int] = []
  slots: dict = {}
  for position, (path, _) in enumerate(jax.tree_util.tree_leaves_with_path(updates)):
    streams: dict = {}  # shape -> (stream, arrays so far)
    for which, moment in enumerate(per_moment):
      for inner, array in jax.tree_util.tree_leaves_with_path(moment[position]):
        if not _rounding.rounds_stochastically(array.dtype, rounding):
          continue
        shape = tuple(array.shape)
        if shape not in streams:
          streams[shape] = (len(keys), 0)
          keys.append(_rounding.stream_key(jax.tree_util.keystr(path), shape))
        stream, used = streams[shape]
        assert used < _rounding.ARRAYS_PER_STREAM, "a stream serves at most three arrays"
        slots[position, which, jax.tree_util.keystr(inner)] = (stream, used)
        streams[shape] = (stream, used + 1)
  return keys, slots


Rule = Callable[..., _update_rules.LeafUpdate]


def per_backend(rule: Rule, *, cpu: Rule) -> Rule:
  """``rule`` on every backend but XLA:CPU, which compiles ``cpu``: the same
  step written for its loops over a donated state (``_update_rules``' module
  docstring says why). Both are traced; the compiler keeps one.
  """
  def chosen(*args, **kwargs):
    return jax.lax.platform_dependent(cpu=lambda: cpu(*args, **kwargs),
                                      default=lambda: rule(*args, **kwargs))
  return chosen


def leafwise(rule: Rule, hyperparams: dict[str, jax.typing.ArrayLike], count, updates,
             moments, grad_variance, rounding: str, seed=0, priors=()):
  """Maps an elementwise update rule over the leaves, in each leaf's compute
  dtype: the tree plumbing of every transform here, as ``optax.tree_utils``
  is of optax's.

  ``hyperparams`` maps the rule's argument names to their values and goes in
  by keyword, as does the step ``t``, so that no two can swap places.
  ``moments`` go in after the gradient in the rule's (and the state's) order.
  The direction comes back in the gradient's dtype and each moment in its
  state dtype, stored with ``rounding`` (``_rounding.store``), so that
  nothing changes dtype from one step to the next. Each state array draws its
  rounding bits from its own 16 bits of a stream keyed by the leaf's path, the
  array's shape and the optimizer's ``seed`` (``_rounding_plan``). ``priors``
  gives, for each moment in order, None or the ``value_of`` of its prior, which
  the first step takes in its place (``at_prior_on_first_step``).

  Returns:
    ``(direction, new_moments)``: a tree like ``updates`` and a tuple of
    trees in the order of ``moments``.
  """
  _validation.check_real_floating(updates, "gradients")
  _validation.check_matches_state(updates, moments[0])
  leaves, treedef = jax.tree.flatten(updates)
  positions = jax.tree.unflatten(treedef, range(len(leaves)))
  keys, slots = _rounding_plan(updates, moments, rounding)
  seeds = _rounding.stream_seeds(count, seed, keys)

  def leaf_step(g, old, v, t, hyper, leaf_seeds, plan):
    # A moment may be a small pytree of its own (factored_vsgd's row and
    # column statistics); each of its arrays is cast and stored alike.
    dtype = _compute_dtype(*jax.tree.leaves((g, old, v)))
    cast = lambda x: jax.tree.map(lambda y: jnp.asarray(y, dtype), x)
    # Here, inside the leaf's loop, the first step's select costs no buffer of its own.
    taken = tuple(o if value_of is None else at_prior_on_first_step(t, o, value_of)
                  for o, value_of in itertools.zip_longest(old, priors))
    new = rule(cast(g), *map(cast, taken), t=cast(t), **cast(hyper),
               grad_variance=None if v is None else cast(v))
    new_moments = [m for m in new[1:] if m is not None]
    rounded = {(which, inner): (stream, index) for which, inner, stream, index in plan}
    word_of = {}  # each stream's word, hashed once for all the arrays it serves

    def stored(which, path, new_array, old_array):
      slot = rounded.get((which, jax.tree_util.keystr(path)))
      if slot is None:
        return _rounding.store(new_array, old_array.dtype, None)
      stream, index = slot
      if stream not in word_of:
        word_of[stream] = _rounding.random_word(new_array.shape, leaf_seeds[stream])
      return _rounding.store(new_array, old_array.dtype,
                             _rounding.array_bits(word_of[stream], index))
    return (new.direction.astype(g.dtype),) + tuple(
        jax.tree.map_with_path(lambda path, n_, o_, i=i: stored(i, path, n_, o_), n, o)
        for i, (n, o) in enumerate(zip(new_moments, old, strict=True)))

  # One jitted step for every leaf: leaves alike in shape, dtype and rounding plan
  # share its trace and its lowering, which cuts the compile time of trees of
  # many leaves (the compiled program is the same).
  step_of_leaf = jax.jit(leaf_step, static_argnames="plan")

  by_position: dict = {}
  for (at, which, inner), (stream, index) in slots.items():
    by_position.setdefault(at, []).append((which, inner, stream, index))

  def leaf(g, position, *old, v=None):
    mine = sorted(by_position.get(position, ()))
    streams = sorted({stream for _, _, stream, _ in mine})
    local = {stream: k for k, stream in enumerate(streams)}
    plan = tuple((which, inner, local[stream], index) for which, inner, stream, index in mine)
    return step_of_leaf(g, old, v, count, hyperparams, tuple(seeds[s] for s in streams),
                        plan=plan)

  if grad_variance is None:
    per_leaf = jax.tree.map(leaf, updates, positions, *moments)
  else:
    per_leaf = jax.tree.map(lambda g, p, *rest: leaf(g, p, *rest[:-1], v=rest[-1]),
                            updates, positions, *moments,
                            _like_updates(grad_variance, updates))
  # Each leaf's outputs are a tuple (direction, *moments), whose moments may be
  # subtrees, so the tuples are split where the updates have their leaves.
  direction, *new_moments = (jax.tree.map(lambda _, out, k=k: out[k], updates, per_leaf)
                             for k in range(1 + len(moments)))
  return direction, tuple(new_moments)


def scale_by_vsgd(
    *,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: str = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Rescale updates by VSGD's posterior estimate of the true gradient.

  Emits ``mu / (sqrt(mu**2 + sigma2) + eps)`` with the sign of the gradient,
  as :func:`optax.scale_by_adam` does. See :func:`vsgd_optax.vsgd` for the
  equations.

  Args:
    variance_ratio: the prior ratio :math:`K_g` of observation to systematic
      noise variance (authors' code: ``ghattg``), > 0.
    prior_strength: the prior strength :math:`\gamma` (code: ``ps``), > 0.
    kappa_g: SVI decay exponent of ``b_g`` (code: ``tau1``), in [0, 1].
    kappa_ghat: SVI decay exponent of ``b_ghat`` (code: ``tau2``), in [0, 1].
    eps: added to the denominator, outside the square root, >= 0.
    state_dtype: dtype of ``mu``, ``b_g`` and ``b_ghat``; default: the
      params' dtype promoted to at least float32. A bfloat16 state costs
      more per step than a float32 one on a CPU (see :func:`vsgd_optax.vsgd`).
    state_rounding: how a state narrower than float32 (bfloat16) is stored:
      ``"stochastic"`` (default) or ``"nearest"``, which stops the state
      learning after about 1,000 steps (see :func:`vsgd_optax.vsgd`).
    seed: keys the stochastic rounding's bits (see :func:`vsgd_optax.vsgd`).

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` whose ``update``
    accepts an optional ``grad_variance`` extra argument (per-example VSGD)
    and does not need ``params``.
  """
  _validation.check_vsgd_hyperparams(variance_ratio=variance_ratio,
                                     prior_strength=prior_strength, kappa_g=kappa_g,
                                     kappa_ghat=kappa_ghat, eps=eps)
  _validation.check_storage(state_dtype, state_rounding, seed)
  hyperparams = {"K": variance_ratio, "gamma": prior_strength, "kappa_g": kappa_g,
                 "kappa_ghat": kappa_ghat, "eps": eps}
  prior_g, prior_ghat = (prior_rate(variance_ratio, prior_strength, which) for which in (0, 1))

  def init_fn(params):
    return ScaleByVSGDState(
        count=jnp.zeros([], jnp.int32),
        mu=init_moments(params, state_dtype),
        b_g=init_moments(params, state_dtype, prior_g),
        b_ghat=init_moments(params, state_dtype, prior_ghat))

  def update_fn(updates, state, params=None, *, grad_variance=None,
                **extra_args):
    del params, extra_args
    count = checked_count(state, ScaleByVSGDState, state_dtype, "scale_by_vsgd")
    rule = per_backend(_update_rules.vsgd_as_written, cpu=_update_rules.vsgd_in_place)
    direction, (mu, b_g, b_ghat) = leafwise(
        rule, hyperparams, count, updates,
        (state.mu, state.b_g, state.b_ghat), grad_variance, state_rounding, seed,
        priors=first_step_priors(variance_ratio, prior_strength,
                                 priors=(None, prior_g, prior_ghat)))
    return direction, ScaleByVSGDState(count, mu, b_g, b_ghat)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def scale_by_constant_vsgd(
    *,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: str = "stochastic",
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
    state_dtype: dtype of ``mu`` and ``b_ghat``; default: the params' dtype
      promoted to at least float32.
    state_rounding: how a bfloat16 state is stored, as in
      :func:`scale_by_vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`scale_by_vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` whose ``update``
    accepts an optional ``grad_variance`` extra argument and does not need
    ``params``.
  """
  _validation.check_vsgd_hyperparams(variance_ratio=variance_ratio,
                                     prior_strength=prior_strength, kappa=kappa, eps=eps)
  _validation.check_storage(state_dtype, state_rounding, seed)
  hyperparams = {"K": variance_ratio, "gamma": prior_strength, "kappa": kappa, "eps": eps}

  def prior(dtype):
    return _update_rules.constant_prior_rate(jnp.asarray(prior_strength, dtype))

  def init_fn(params):
    return ScaleByConstantVSGDState(
        count=jnp.zeros([], jnp.int32),
        mu=init_moments(params, state_dtype),
        b_ghat=init_moments(params, state_dtype, prior))

  def update_fn(updates, state, params=None, *, grad_variance=None,
                **extra_args):
    del params, extra_args
    count = checked_count(state, ScaleByConstantVSGDState, state_dtype, "scale_by_constant_vsgd")
    direction, (mu, b_ghat) = leafwise(
        _update_rules.constant_vsgd_leaf, hyperparams, count, updates,
        (state.mu, state.b_ghat), grad_variance, state_rounding, seed,
        priors=first_step_priors(prior_strength, priors=(None, prior)))
    return direction, ScaleByConstantVSGDState(count, mu, b_ghat)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def any_vsgd_state(x: Any) -> bool:
  return isinstance(x, (ScaleByVSGDState, ScaleByConstantVSGDState))

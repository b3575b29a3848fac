"""VSGD-Muon: Muon whose momentum is VSGD's posterior mean.

Composed as ``optax.contrib.muon`` is: ``scale_by_vsgd_muon`` (VSGD's scaling,
then Newton-Schulz on the new posterior mean, ``orthogonalize_mean``), Muon's
shape scale, the decay and the rate on the matrices, and
``optax.adamw`` on every other leaf, combined by ``optax.partition``. Which
leaves are matrices is resolved once, when ``init`` first sees the params.
"""

import functools
import math
import typing
from typing import Any
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _aliases
from vsgd_optax import _diagnostics
from vsgd_optax import _factored
from vsgd_optax import _rounding
from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import _validation

MuonDimensionNumbers = optax.contrib.MuonDimensionNumbers

# Muon's coefficients of the quintic Newton-Schulz step (optax.contrib.muon's default).
MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)
# How Newton-Schulz normalizes its input first (optax.contrib.muon's choices).
Preconditioning = Literal["frobenius", "spectral", "aol", "schatten"]
PRECONDITIONINGS = typing.get_args(Preconditioning)
# The AdamW part's rate as a share of the matrices' where none is given: a half
# decade below them, as a study chose (docs/results.md, the ladder).
ADAM_SHARE = 10.0 ** -0.5


def _is_variable(node) -> bool:
  """A Flax NNX ``Variable`` as jax sees it: a node whose one child is ``.value``."""
  children = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda x: x is not node)[0]
  return len(children) == 1 and jax.tree_util.keystr(children[0][0]) == ".value"


def _without_variables(tree):
  """``tree`` with each NNX ``Variable`` replaced by its value, so that a function
  of the params sees at ``init`` (Variables) the paths it sees at ``update`` (arrays).
  """
  return jax.tree.map(lambda x: jax.tree.leaves(x)[0] if _is_variable(x) else x, tree,
                      is_leaf=_is_variable)


def _checked(dims, shape, where: str):
  """``dims`` for a leaf of ``shape``, its axes as tuples of non-negative ints."""
  ndim = len(shape)
  if ndim < 2:
    raise ValueError(f"muon_weight_dimension_numbers{where} is {dims} for a {ndim}-D leaf; "
                     "only leaves of 2 or more axes are matrices: give it None.")
  axes = []
  for axis in (dims.reduction_axis, dims.output_axis):
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    if not all(-ndim <= a < ndim for a in axis):
      raise ValueError(f"muon_weight_dimension_numbers{where} ({dims}) names an axis out of "
                       f"range for its leaf of shape {shape}: axes lie in [-{ndim}, {ndim}).")
    axes.append(tuple(a % ndim for a in axis))
  if not axes[0] or not axes[1] or set(axes[0]) & set(axes[1]):
    raise ValueError(f"muon_weight_dimension_numbers{where} ({dims}) must name disjoint, "
                     f"non-empty reduction and output axes of its leaf of shape {shape}.")
  return MuonDimensionNumbers(*axes)


def _is_dims(x) -> bool:
  return x is None or isinstance(x, MuonDimensionNumbers)


def resolve_dimension_numbers(spec, params) -> dict:
  """Each leaf of ``params`` by ``_transforms.leaf_path``: its dimension numbers
  (axes as tuples of non-negative ints), or None where it steps with AdamW.

  ``spec`` is ``muon_weight_dimension_numbers``: None (every 2-D leaf), a tree
  whose entries cover every leaf of ``params`` (an entry covers its subtree),
  or a function of ``params`` returning one. A leaf without elements is no
  matrix: it has nothing to orthogonalize, and no fan-in to scale by.
  """
  _validation.check_real_floating(params, "params")
  shapes = {_transforms.leaf_path(path): np.shape(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(params)}
  if spec is None:
    return {path: MuonDimensionNumbers((0,), (1,)) if len(shape) == 2 and 0 not in shape
            else None for path, shape in shapes.items()}
  spec = spec(params) if callable(spec) else spec
  # optax.masked's MaskedNode and Equinox's None: covered by nothing, needing nothing.
  empty = [_transforms.leaf_path(path) for path, node in jax.tree_util.tree_leaves_with_path(
      params, is_leaf=_validation.is_empty) if _validation.is_empty(node)]
  found: dict[tuple[str, ...], Any] = {}
  for path, dims in jax.tree_util.tree_leaves_with_path(spec, is_leaf=_is_dims):
    key, where = (_transforms.leaf_path(path) if path else ()), jax.tree_util.keystr(path)
    if not _is_dims(dims):
      raise TypeError(f"muon_weight_dimension_numbers{where} must be a MuonDimensionNumbers "
                      f"or None, got {dims!r}.")
    covered = [leaf for leaf in shapes if leaf[:len(key)] == key]
    if not covered and not any(leaf[:len(key)] == key for leaf in empty):
      raise ValueError(f"muon_weight_dimension_numbers names {where}, which the params do "
                       "not have; give a tree like the params.")
    for leaf in covered:
      found[leaf] = (None if dims is None or 0 in shapes[leaf]
                     else _checked(dims, shapes[leaf], where))
  missing = ["".join(leaf) for leaf in shapes if leaf not in found]
  if missing:
    raise ValueError("muon_weight_dimension_numbers leaves out " + ", ".join(missing)
                     + ": give each leaf a MuonDimensionNumbers, or None for AdamW.")
  return found


def dimension_numbers_of(spec):
  """A function of a tree of params or updates: its leaves' dimension numbers by
  leaf path. They are resolved the first time a leaf's path and shape are seen
  (at ``init``) and kept, so that ``update`` steps what ``init`` resolved.
  """
  resolved: dict[tuple, Any] = {}  # by (leaf path, shape): MuonDimensionNumbers or None

  def dims_of(tree):
    shapes = {_transforms.leaf_path(path): np.shape(leaf)
              for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}
    if any(item not in resolved for item in shapes.items()):
      found = resolve_dimension_numbers(spec, _without_variables(tree))
      resolved.update(((path, shapes[path]), dims) for path, dims in found.items())
    return {path: resolved[path, shape] for path, shape in shapes.items()}
  return dims_of


def _matrix_dims(dims_of, tree):
  """A tree like ``tree`` with each leaf's dimension numbers; every leaf a matrix."""
  dims = dims_of(tree)
  others = [path for path, found in dims.items() if found is None]
  if others:
    raise ValueError(
        "scale_by_vsgd_muon orthogonalizes matrices only; by muon_weight_dimension_numbers "
        f"these are not: {', '.join(''.join(path) for path in others)}. Use "
        "vsgd_optax.vsgd_muon, which steps them with AdamW.")
  return jax.tree_util.tree_map_with_path(
      lambda path, _: dims[_transforms.leaf_path(path)], tree)


def _stack_order(ndim: int, dims) -> tuple[int, ...]:
  """The axes of a leaf as its stack of matrices takes them: batch, reduction, output."""
  reduction, output = dims
  return tuple(sorted(set(range(ndim)) - set(reduction) - set(output))) + reduction + output


def _tall_matrices(gradient, mu, dims):
  """``mu`` as Newton-Schulz takes it here: in at least float32, whole where it is
  sharded on an explicit mesh (the products of a sharded matrix with its transpose
  have no sharding rule there), as a ``(fan_in, fan_out)`` matrix, or a stack of
  them where the leaf has batch axes (or other dimension numbers), each tall or square.
  """
  mean = mu.astype(jnp.result_type(jnp.float32, gradient.dtype, mu.dtype))
  if any(axis is not None for axis in jax.typeof(mean).sharding.spec):
    mean = jax.sharding.reshard(mean, jax.P())
  if mean.ndim != 2 or dims != ((0,), (1,)):
    order = _stack_order(mean.ndim, dims)
    batch = order[:len(order) - len(dims[0]) - len(dims[1])]
    mean = mean.transpose(order).reshape(
        [math.prod(mean.shape[a] for a in axes) for axes in (batch, *dims)])
  # optax iterates on the wide orientation either way; fed tall, as it always was
  # here, XLA lays the products out as before, and the steps keep their last bits.
  return mean.mT if mean.shape[-2] < mean.shape[-1] else mean


def _leaf_direction(direction, gradient, mu, dims):
  """``direction``, from ``_tall_matrices(gradient, mu, dims)``, in the leaf's shape,
  its sharding and the gradient's dtype.
  """
  fan_in, fan_out = (math.prod(mu.shape[a] for a in axes) for axes in dims)
  if fan_in < fan_out:
    direction = direction.mT
  if mu.ndim != 2 or dims != ((0,), (1,)):
    order = _stack_order(mu.ndim, dims)
    direction = direction.reshape([mu.shape[a] for a in order]).transpose(np.argsort(order))
  spec = jax.typeof(mu).sharding.spec
  if any(axis is not None for axis in spec):
    direction = jax.sharding.reshard(direction, spec)
  return direction.astype(gradient.dtype)


def _stacked_dims(matrices):
  """Muon's dimension numbers for ``_tall_matrices``' output: a 2-D matrix is one
  (optax's Newton-Schulz reads no numbers there), a 3-D stack one a batch index.
  """
  return jax.tree.map(lambda _: MuonDimensionNumbers(1, 2), matrices)


def nesterov_mean(updates, state, *, variance_ratio, prior_strength):
  r"""Muon's Nesterov look-ahead on VSGD's posterior mean, element by element.

  The mean the next step would reach were its gradient this step's:
  Eq. (mug) once more, :math:`\mu_t + w\,(g_t - \mu_t)`, with :math:`w =
  b_g / (b_g + b_{\hat g})` from the rates after step :math:`t` (one minus
  :func:`vsgd_optax.effective_beta1`). With a fixed weight :math:`w = 1 -
  \beta` this is Muon's Nesterov momentum, :math:`\beta m_t + (1 - \beta)
  g_t`. Computed in at least float32; factored rates are rebuilt per element
  as the step rebuilds them.
  """
  def leaf(gradient, mu, rate_g, rate_ghat):
    dtype = jnp.result_type(jnp.float32, gradient.dtype, mu.dtype)
    w = _update_rules.variances(rate_g.astype(dtype), rate_ghat.astype(dtype), prior_strength).w
    return _update_rules.posterior_mean(gradient.astype(dtype), mu.astype(dtype), w)
  b_g, b_ghat = _diagnostics.rates_of_every_element(state, {}, prior_strength, variance_ratio)
  return jax.tree.map(leaf, updates, state.mu, b_g, b_ghat)


def orthogonalize_mean(scaling, muon, dims_of, look_ahead, updates, state, params=None,
                       **extra_args):
  """``scale_by_vsgd_muon``'s update: VSGD's step (``scaling``), then Muon's
  Newton-Schulz orthogonalization of its new posterior mean ``state.mu``, or of
  ``look_ahead(updates, state)`` where that is given (``nesterov_mean``).

  ``muon`` is :func:`optax.contrib.scale_by_muon` with ``beta=0`` and no
  Nesterov step, which orthogonalizes its input as it is: its momentum is the
  input, and its bias correction divides by 1.
  """
  del params
  _, state = scaling.update(updates, state, None, **extra_args)
  dims = _matrix_dims(dims_of, updates)
  means = state.mu if look_ahead is None else look_ahead(updates, state)
  matrices = jax.tree.map(_tall_matrices, updates, means, dims)
  directions, _ = muon.update(matrices, muon.init(matrices))
  return jax.tree.map(_leaf_direction, directions, updates, state.mu, dims), state


def _factored_axes(dims_of, threshold: int):
  """VSGD-Muon's factoring rule: each matrix whose fan-in and fan-out are both at
  least ``threshold`` factors along its reduction and output axes.
  """
  def axes_of(tree):
    shapes = {_transforms.leaf_path(path): np.shape(leaf)
              for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}
    fans = lambda path, axes: math.prod(shapes[path][a] for a in axes)
    return {path: tuple(dims) for path, dims in dims_of(tree).items()
            if dims is not None and min(fans(path, dims[0]), fans(path, dims[1])) >= threshold}
  return axes_of


def _scaled_by_shape(update, dims, *, consistent_rms):
  fan_in, fan_out = (math.prod(update.shape[a] for a in axes) for axes in dims)
  if consistent_rms is None:
    return update * float(np.sqrt(max(1.0, fan_out / fan_in)))
  return update * (float(np.sqrt(max(fan_in, fan_out))) * consistent_rms)


def _scale_by_shape(dims_of, consistent_rms) -> optax.GradientTransformation:
  """Muon's scale of each orthogonalized matrix, by its fan-in and fan-out: the width
  scale ``sqrt(max(1, fan_out / fan_in))``, or ``sqrt(max(fan_in, fan_out)) *
  consistent_rms`` (``optax.contrib.muon``'s).
  """
  scaled = functools.partial(_scaled_by_shape, consistent_rms=consistent_rms)

  def update_fn(updates, state, params=None):
    del params
    return jax.tree.map(scaled, updates, _matrix_dims(dims_of, updates)), state
  return optax.GradientTransformation(optax.init_empty_state, update_fn)


def _check_newton_schulz(ns_coeffs, ns_steps, ns_eps, preconditioning) -> None:
  _validation.check_newton_schulz(ns_coeffs, ns_steps, ns_eps)
  _validation.check_choice("preconditioning", preconditioning, PRECONDITIONINGS)


def _scale_by_vsgd_muon(dims_of, min_dim_size_to_factor, settings: _transforms.VSGDSettings, *,
                        ns_coeffs, ns_steps, ns_eps, preconditioning: Preconditioning,
                        nesterov: bool, optimizer: str):
  """``scale_by_vsgd_muon`` over the matrices that ``dims_of`` resolves, with VSGD's
  ``settings``; ``optimizer`` names it in errors.
  """
  _check_newton_schulz(ns_coeffs, ns_steps, ns_eps, preconditioning)
  _validation.check_bool("nesterov", nesterov)
  look_ahead = (functools.partial(nesterov_mean, variance_ratio=settings.variance_ratio,
                                  prior_strength=settings.prior_strength)
                if nesterov else None)
  scaling = _transforms.scale_by_vsgd_with_factoring(
      functools.partial(_factored_axes, dims_of), min_dim_size_to_factor, settings, optimizer)
  muon = optax.contrib.scale_by_muon(
      ns_coeffs, ns_steps, beta=0.0, eps=ns_eps, nesterov=False,
      preconditioning=preconditioning, weight_dimension_numbers=_stacked_dims)

  def init_fn(params):
    _matrix_dims(dims_of, params)
    return scaling.init(params)

  return optax.GradientTransformationExtraArgs(
      init_fn, functools.partial(orthogonalize_mean, scaling, muon, dims_of, look_ahead))


def scale_by_vsgd_muon(
    *,
    ns_coeffs: Any = MUON_NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: jax.typing.ArrayLike = 1e-8,
    preconditioning: Preconditioning = "frobenius",
    nesterov: bool = False,
    muon_weight_dimension_numbers: Any = None,
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
  r"""Muon's orthogonalization of VSGD's posterior mean, for matrices.

  VSGD's inference runs on each leaf as :func:`vsgd_optax.scale_by_vsgd`'s;
  the update is the Newton-Schulz orthogonalization of the new mean
  :math:`\mu_t` (``orthogonalize_mean``), as
  :func:`optax.contrib.scale_by_muon`'s is of its momentum. Muon's shape
  scale is not applied: :func:`vsgd_muon` chains it after.

  Args:
    ns_coeffs: Newton-Schulz coefficients ``(a, b, c)``, or one triple a step.
    ns_steps: Newton-Schulz steps, >= 1.
    ns_eps: added to the norm that Newton-Schulz divides by first, >= 0.
    preconditioning: ``"frobenius"``, ``"spectral"``, ``"aol"`` or
      ``"schatten"``, as :func:`optax.contrib.muon` takes it.
    nesterov: orthogonalize the mean's Nesterov look-ahead
      (``nesterov_mean``) in place of the mean: per element, Muon's Nesterov
      step at :math:`\beta` = :func:`vsgd_optax.effective_beta1`. False
      (default) orthogonalizes :math:`\mu_t`.
    muon_weight_dimension_numbers: which axes of each leaf are the matrix's, as
      :func:`vsgd_muon` takes it; every leaf must be a matrix.
    min_dim_size_to_factor: a matrix whose fan-in and fan-out are both at
      least this keeps its two rates as their means along its reduction and
      output axes (:class:`vsgd_optax.FactoredRate`); a smaller one keeps
      them whole. Default 128, as :func:`optax.adafactor`'s; None keeps them
      whole everywhere.
    variance_ratio: :math:`K_g`, > 0, as in :func:`vsgd_optax.vsgd`.
    prior_strength: :math:`\gamma`, > 0.
    kappa_g: SVI decay exponent of ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent of ``b_ghat``, in [0, 1].
    eps: VSGD's eps, >= 0.
    state_dtype: dtype of ``mu`` and the rates, as in :func:`vsgd_optax.vsgd`.
    state_rounding: how a bfloat16 state is stored, as in :func:`vsgd_optax.vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd_optax.vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` whose state is
    :class:`vsgd_optax.ScaleByVSGDState`.
  """
  settings = _transforms.VSGDSettings.checked(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
      kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
      seed=seed)
  return _scale_by_vsgd_muon(
      dimension_numbers_of(muon_weight_dimension_numbers), min_dim_size_to_factor, settings,
      ns_coeffs=ns_coeffs, ns_steps=ns_steps, ns_eps=ns_eps, preconditioning=preconditioning,
      nesterov=nesterov, optimizer="scale_by_vsgd_muon")


def _check_adam(adam_b1, adam_b2, adam_eps, adam_weight_decay) -> None:
  for name, value in (("adam_b1", adam_b1), ("adam_b2", adam_b2)):
    _validation.check_unit_interval(name, value)
    try:
      one = float(value) == 1.0
    except (TypeError, jax.errors.ConcretizationTypeError):
      one = False  # a traced value, unknown until the step runs
    if one:
      raise ValueError(f"{name} must lie in [0, 1), got {value!r}: at 1 Adam's bias "
                       "correction divides by zero.")
  _validation.check_non_negative("adam_eps", adam_eps)
  _validation.check_non_negative("adam_weight_decay", adam_weight_decay)


def _at_least_two_axes(params):
  return jax.tree.map(lambda leaf: np.ndim(leaf) >= 2, params)


def _labels(dims_of, tree):
  dims = dims_of(tree)
  return jax.tree_util.tree_map_with_path(
      lambda path, _: "adam" if dims[_transforms.leaf_path(path)] is None else "muon", tree)


def vsgd_muon(
    learning_rate: optax.ScalarOrSchedule,
    *,
    adam_learning_rate: optax.ScalarOrSchedule | None = None,
    adam_b1: jax.typing.ArrayLike = 0.9,
    adam_b2: jax.typing.ArrayLike = 0.999,
    adam_eps: jax.typing.ArrayLike = 1e-8,
    adam_weight_decay: jax.typing.ArrayLike = 0.1,
    adam_weight_decay_mask: Any = None,
    ns_coeffs: Any = MUON_NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: jax.typing.ArrayLike = 1e-8,
    preconditioning: Preconditioning = "frobenius",
    nesterov: bool = False,
    consistent_rms: jax.typing.ArrayLike | None = None,
    muon_weight_dimension_numbers: Any = None,
    min_dim_size_to_factor: Any = _factored.DEFAULT_THRESHOLD,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    weight_decay: jax.typing.ArrayLike = 0.0,
    weight_decay_mask: Any = None,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: _rounding.Rounding = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""VSGD-Muon: Muon whose momentum is VSGD's posterior mean; AdamW elsewhere.

  On each matrix, VSGD's inference runs as in :func:`vsgd_optax.vsgd`, and
  the step is Muon's: the Newton-Schulz orthogonalization of the posterior
  mean :math:`\mu_t` in place of Muon's momentum, times Muon's shape scale.
  The mean's weight on a new gradient, :math:`b_g / (b_g + b_{\hat g})`, is
  set per element from the noise VSGD measures, where Muon's :math:`\beta` is
  fixed. Every other leaf steps with :func:`optax.adamw`. As in Muon, one NaN
  in a matrix's mean spreads over that matrix through Newton-Schulz; wrap the
  optimizer in :func:`optax.apply_if_finite` to skip such a step.

  Where it is recommended over :func:`optax.contrib.muon`, at which model
  sizes and data budgets and against what tuning of Muon, is on the results
  page (``docs/results.md``, its ladder); that evidence is on
  character-level transformer LMs alone.

  Args:
    learning_rate: the matrices' rate, a scalar or an :class:`optax.Schedule`.
    adam_learning_rate: the AdamW part's rate, a scalar or a schedule. None
      (default) takes ``learning_rate`` times 0.316 (:math:`10^{-1/2}`), the
      share a study on the results page chose (its ladder's AdamW part).
    adam_b1: AdamW's :math:`\beta_1`, in [0, 1).
    adam_b2: AdamW's :math:`\beta_2`, in [0, 1).
    adam_eps: AdamW's eps, >= 0.
    adam_weight_decay: AdamW's decoupled weight decay, >= 0.
    adam_weight_decay_mask: where AdamW decays, a tree of booleans or a
      function of the params; None (default) decays the leaves of two or more
      axes, not the vectors.
    ns_coeffs: Newton-Schulz coefficients ``(a, b, c)``, or one triple a step.
    ns_steps: Newton-Schulz steps, >= 1.
    ns_eps: added to the norm that Newton-Schulz divides by first, >= 0.
    preconditioning: ``"frobenius"``, ``"spectral"``, ``"aol"`` or
      ``"schatten"``, as :func:`optax.contrib.muon` takes it.
    nesterov: True to orthogonalize the mean's Nesterov look-ahead,
      :math:`\mu_t + w\,(g_t - \mu_t)` with the next step's weight :math:`w`:
      per element, Muon's Nesterov step (:func:`optax.contrib.muon`'s
      default) at :math:`\beta` = :func:`vsgd_optax.effective_beta1`. False
      (default) orthogonalizes :math:`\mu_t`, as VSGD steps with it.
    consistent_rms: None for Muon's width scale
      :math:`\sqrt{\max(1, d_\text{out}/d_\text{in})}`; a number :math:`r` for
      :math:`\sqrt{\max(d_\text{in}, d_\text{out})}\, r`, as
      :func:`optax.contrib.muon`'s.
    muon_weight_dimension_numbers: which leaves are matrices, as
      :func:`optax.contrib.muon` takes it: None (default) for every 2-D leaf;
      or a tree like the params (an entry covers its subtree) of
      :class:`optax.contrib.MuonDimensionNumbers`, or None for a leaf that
      steps with AdamW; or a function of the params returning one. It is
      resolved once, at ``init``; a tree that leaves out a leaf is refused.
    min_dim_size_to_factor: a matrix whose fan-in and fan-out are both at
      least this keeps its two rates as their means along its reduction and
      output axes (:class:`vsgd_optax.FactoredRate`), so that its state is
      about Muon's bytes; a smaller one keeps them whole. Default 128, as
      :func:`optax.adafactor`'s; None keeps them whole everywhere. Under
      ``optax.inject_hyperparams`` and ``jit``, an explicit number must be
      named in ``static_args``.
    variance_ratio: :math:`K_g`, > 0, as in :func:`vsgd_optax.vsgd`.
    prior_strength: :math:`\gamma`, > 0.
    kappa_g: SVI decay exponent of ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent of ``b_ghat``, in [0, 1].
    eps: VSGD's eps, >= 0.
    weight_decay: the matrices' decoupled weight decay, >= 0.
    weight_decay_mask: where the matrices' decay applies.
    state_dtype: dtype of ``mu`` and the rates, as in :func:`vsgd_optax.vsgd`;
      AdamW's moments stay in the params' dtype.
    state_rounding: how a bfloat16 state is stored, as in :func:`vsgd_optax.vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd_optax.vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs`, the
    :func:`optax.partition` of a ``"muon"`` and an ``"adam"`` group. The
    read-outs such as :func:`vsgd_optax.effective_beta1` take the matrices'
    state, ``state.inner_states["muon"]``.

  Examples:
    >>> import jax.numpy as jnp
    >>> import vsgd_optax
    >>> opt = vsgd_optax.vsgd_muon(3e-2)
    >>> params = {"w": jnp.ones((4, 3)), "b": jnp.ones(3)}
    >>> state = opt.init(params)
    >>> grads = {"w": jnp.eye(4, 3), "b": jnp.ones(3)}
    >>> updates, state = opt.update(grads, state, params)
    >>> updates["w"].shape, updates["b"].shape
    ((4, 3), (3,))
  """
  _validation.check_learning_rate(learning_rate)
  if adam_learning_rate is None:
    adam_learning_rate = (
        (lambda count: ADAM_SHARE * learning_rate(count)) if callable(learning_rate)
        else ADAM_SHARE * learning_rate)
  _validation.check_learning_rate(adam_learning_rate, "adam_learning_rate")
  _check_adam(adam_b1, adam_b2, adam_eps, adam_weight_decay)
  _validation.check_non_negative("weight_decay", weight_decay)
  if consistent_rms is not None:
    _validation.check_positive("consistent_rms", consistent_rms)
  settings = _transforms.VSGDSettings.checked(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
      kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
      seed=seed)
  dims_of = dimension_numbers_of(muon_weight_dimension_numbers)
  scaling = _scale_by_vsgd_muon(
      dims_of, min_dim_size_to_factor, settings, ns_coeffs=ns_coeffs, ns_steps=ns_steps,
      ns_eps=ns_eps, preconditioning=preconditioning, nesterov=nesterov, optimizer="vsgd_muon")
  matrices = optax.chain(scaling, _scale_by_shape(dims_of, consistent_rms),
                         _aliases.decoupled_decay(weight_decay, weight_decay_mask),
                         optax.scale_by_learning_rate(learning_rate))
  others = optax.adamw(adam_learning_rate, b1=adam_b1, b2=adam_b2, eps=adam_eps,
                       weight_decay=adam_weight_decay,
                       mask=(_at_least_two_axes if adam_weight_decay_mask is None
                             else adam_weight_decay_mask))
  return optax.partition({"muon": matrices, "adam": others},
                         functools.partial(_labels, dims_of))

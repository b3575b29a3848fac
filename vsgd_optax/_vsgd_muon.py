"""VSGD's posterior mean inside Muon: ``vsgd_muon``.

Muon orthogonalizes (Newton-Schulz) a momentum average of each matrix's
gradient. Here the average is VSGD's posterior mean ``mu``, whose weight on
the new gradient adapts to the noise VSGD measures. The matrices' state is
VSGD's, each large matrix's two rates kept as their means along its reduction
and output axes (``_factored``, the default) or whole (as
:func:`vsgd_optax.scale_by_vsgd` keeps them), and its update runs as it is;
only its direction is replaced by Muon's orthogonalization of the new ``mu``,
which ``optax.contrib.scale_by_muon`` computes (with ``beta=0`` and no
Nesterov step, it orthogonalizes its input as it is). The other leaves (the
embedding, the head, the vectors) step with AdamW, as Muon's users run them.
``docs/algorithm.md`` ("VSGD's mean inside Muon") says why there is no
Nesterov step.
"""

import inspect
import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _aliases
from vsgd_optax import _factored
from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import _validation

# Muon's coefficients of the quintic Newton-Schulz step (optax.contrib.muon's default).
MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)
PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
# What Newton-Schulz orthogonalizes (docs/algorithm.md, "What VSGD's noise model adds
# to Muon"): the posterior mean, VSGD's own step, or the mean weighted by its signal.
ORTHOGONALIZED = ("mean", "direction", "signal")
NORMALIZED = (None, "rows", "columns")
# The AdamW part's rate as a share of the matrices' where none is given: the ratio
# of AdamW's and VSGD-Muon's tuned rates on the contest's LM (docs/howto.md).
ADAM_SHARE = 0.1
# optax's scale_by_muon takes a preconditioning from 0.2.8 on; before, it
# always divided by the Frobenius norm.
_MUON_TAKES_PRECONDITIONING = (
    "preconditioning" in inspect.signature(optax.contrib.scale_by_muon).parameters)

Axes = tuple[tuple[int, ...], tuple[int, ...]]


def shape_scale(shape: Sequence[int], consistent_rms=None) -> float:
  """Muon's scale of an orthogonalized ``(fan_in, fan_out)`` matrix: its width
  scaling ``sqrt(max(1, fan_out / fan_in))``, or, with ``consistent_rms``,
  ``sqrt(max(fan_in, fan_out)) * consistent_rms`` (optax.contrib.muon's).
  """
  fan_in, fan_out = shape
  if consistent_rms is None:
    return float(np.sqrt(max(1.0, fan_out / fan_in)))
  return float(np.sqrt(max(fan_in, fan_out))) * consistent_rms


def _is_dims(x) -> bool:
  """A leaf of a dimension-numbers tree: None (not a matrix) or Muon's
  ``MuonDimensionNumbers``: a named tuple with ``reduction_axis`` and
  ``output_axis`` (optax before 0.2.6 has no class of its own). A Flax NNX
  ``Variable`` that holds one passes attribute lookups through but is no named
  tuple, so the walk goes on into it.
  """
  return x is None or (isinstance(x, tuple) and hasattr(x, "_fields")
                       and hasattr(x, "reduction_axis") and hasattr(x, "output_axis"))


def _axes(axis, ndim: int) -> tuple[int, ...]:
  return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))


def matrix_axes(spec, tree) -> dict[tuple[str, ...], Axes]:
  """Which leaves of ``tree`` are matrices, and how: by each leaf's path
  (``_transforms.leaf_path``), its ``(reduction axes, output axes)``.

  ``spec`` is ``optax.contrib.muon``'s ``muon_weight_dimension_numbers``: None for
  every 2-D leaf as ``(fan_in, fan_out)``; or a tree like ``tree`` whose leaves
  are ``MuonDimensionNumbers`` (the axes to reduce over and to output; the
  others are batch axes, each orthogonalized apart) or None (not a matrix), or
  a function of ``tree`` that returns one. The tree may stop short of the
  params' leaves: an entry names every leaf below it. Paths are matched as
  ``leaf_path`` reads them, so a plain dict of names matches Flax NNX's
  Variables and a function of them alike.
  """
  leaves = {_transforms.leaf_path(path): np.shape(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}
  if spec is None:
    return {path: ((0,), (1,)) for path, shape in leaves.items() if len(shape) == 2}
  if callable(spec):
    spec = spec(tree)
  entries = {}
  for path, dims in jax.tree_util.tree_flatten_with_path(spec, is_leaf=_is_dims)[0]:
    key = _transforms.leaf_path(path) if path else ()
    if dims is None:
      continue
    if not _is_dims(dims):
      raise TypeError(f"muon_weight_dimension_numbers{jax.tree_util.keystr(path)} must be a "
                      f"MuonDimensionNumbers or None, got {dims!r}.")
    named = [leaf for leaf in leaves if leaf[:len(key)] == key]
    if not named:
      raise ValueError(f"muon_weight_dimension_numbers names {''.join(key)}, which the params "
                       "do not have; give a tree like the params (None where a leaf is not a "
                       "matrix).")
    for leaf in named:
      entries[leaf] = (key, dims)
  found = {}
  for leaf, (key, dims) in entries.items():
    ndim = len(leaves[leaf])
    reduction, output = _axes(dims.reduction_axis, ndim), _axes(dims.output_axis, ndim)
    if ndim < 2 or not reduction or not output or set(reduction) & set(output):
      raise ValueError(f"muon_weight_dimension_numbers{''.join(key)} ({dims}) must name "
                       f"disjoint, non-empty reduction and output axes of its {ndim}-D leaf "
                       f"{''.join(leaf)}.")
    found[leaf] = (reduction, output)
  return found


def _check_matrices(tree, axes: dict, what: str) -> None:
  wrong = [f"{jax.tree_util.keystr(path)} {np.shape(leaf)}"
           for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
           if _transforms.leaf_path(path) not in axes]
  if wrong:
    raise ValueError(
        f"scale_by_vsgd_muon orthogonalizes matrices only; these {what} are not 2-D, or "
        "muon_weight_dimension_numbers says they are no matrix: " + ", ".join(wrong)
        + ". Use vsgd_optax.vsgd_muon, which steps them with AdamW.")


def _as_matrices(x, reduction, output):
  """``x`` as a stack of ``(fan_in, fan_out)`` matrices, and the function back."""
  batch = tuple(sorted(set(range(x.ndim)) - set(reduction) - set(output)))
  order = batch + reduction + output
  size = lambda axes: math.prod(x.shape[a] for a in axes)
  stacked = x.transpose(order).reshape(size(batch), size(reduction), size(output))
  inverse = tuple(sorted(range(x.ndim), key=lambda i: order[i]))
  return stacked, lambda y: y.reshape(tuple(x.shape[a] for a in order)).transpose(inverse)


def _factored_matrices(spec, min_dim_size_to_factor: int):
  """``factored_scaling``'s rule for VSGD-Muon: each matrix whose fan-in and
  fan-out (the products of its reduction and output axes) are both at least
  ``min_dim_size_to_factor`` factors along those axes, as its 2-D reshape would.
  """
  def axes_of(tree):
    shapes = {_transforms.leaf_path(path): np.shape(leaf)
              for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}
    return {path: (reduction, output)
            for path, (reduction, output) in matrix_axes(spec, tree).items()
            if min(math.prod(shapes[path][a] for a in reduction),
                   math.prod(shapes[path][a] for a in output)) >= min_dim_size_to_factor}
  return axes_of


def scale_by_vsgd_muon(
    *,
    ns_coeffs: Any = MUON_NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: jax.typing.ArrayLike = 1e-8,
    preconditioning: str = "frobenius",
    nesterov: bool = False,
    consistent_rms: jax.typing.ArrayLike | None = None,
    muon_weight_dimension_numbers: Any = None,
    orthogonalize: str = "mean",
    normalize: str | None = None,
    min_dim_size_to_factor: int | None = 128,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: str = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Rescale the updates of matrices to Muon's orthogonalization of VSGD's mean.

  Every leaf must be a matrix: 2-D ``(fan_in, fan_out)``, or as
  ``muon_weight_dimension_numbers`` says. VSGD's inference runs on each as
  :func:`vsgd_optax.scale_by_vsgd` does; the direction is Muon's Newton-Schulz
  orthogonalization of the new mean :math:`\mu_t` (each batch index of a leaf a
  matrix of its own), times Muon's shape scale. :func:`vsgd_muon` chains this
  with the decay and the rate, and steps the other leaves with AdamW.

  Args:
    ns_coeffs: Newton-Schulz coefficients ``(a, b, c)``, or a sequence of
      such triples, one a step (default: Muon's).
    ns_steps: Newton-Schulz steps, a whole number >= 1 (an injected integer
      array is taken as optax's muon takes it).
    ns_eps: added to the norm that Newton-Schulz divides by first, >= 0.
    preconditioning: Muon's scaling before Newton-Schulz: ``"frobenius"``
      (default), ``"spectral"``, ``"aol"`` or ``"schatten"`` (the last three
      need optax >= 0.2.8).
    nesterov: orthogonalize :math:`\mu_t + w_{t+1}(\hat g_t - \mu_t)`, the
      mean after seeing :math:`\hat g_t` twice, instead of :math:`\mu_t`
      (see :func:`vsgd_muon`).
    consistent_rms: ``None`` for Muon's width scale
      :math:`\sqrt{\max(1, d_\text{out}/d_\text{in})}`; a number :math:`r` for
      :math:`\sqrt{\max(d_\text{in}, d_\text{out})}\, r`, as
      ``optax.contrib.muon``'s.
    muon_weight_dimension_numbers: which leaves are matrices, and how: None
      for every 2-D leaf as ``(fan_in, fan_out)``, or a tree (or a function of
      the params returning one) of ``optax.contrib.MuonDimensionNumbers``;
      here every leaf must be one (see :func:`vsgd_muon`).
    orthogonalize: what Newton-Schulz orthogonalizes: ``"mean"`` (default),
      :math:`\mu_t`; ``"direction"``, VSGD's own step
      :math:`u_t = \mu_t / (\sqrt{\mu_t^2 + \sigma_t^2} + \epsilon)`;
      ``"signal"``, :math:`\mu_t u_t^2`.
    normalize: None (default), ``"rows"`` or ``"columns"``: each row (fan-in
      index) or column (fan-out index) of the orthogonalized step divided by
      the root of its mean posterior variance :math:`\sigma_t^2`, then scaled
      back to the step's Frobenius norm (a zero step stays zero).
    min_dim_size_to_factor: each matrix whose fan-in and fan-out are both at
      least this long (default 128, as :func:`optax.adafactor`'s) keeps its
      two rates as their means along the reduction and the output axes
      (:class:`vsgd_optax.FactoredRate`), so that it holds ``mu`` and a few
      means; a smaller matrix keeps them whole. None keeps two rates per
      element everywhere. It sets the state's shapes: under
      ``optax.inject_hyperparams``, ``init`` must run outside ``jit`` (or
      name it in ``static_args``).
    variance_ratio: :math:`K_g`, > 0, as in :func:`vsgd_optax.vsgd`.
    prior_strength: :math:`\gamma`, > 0.
    kappa_g: SVI decay exponent of ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent of ``b_ghat``, in [0, 1].
    eps: VSGD's eps, >= 0: in the step that ``orthogonalize="direction"``
      and ``"signal"`` read (the mean's orthogonalization does not).
    state_dtype: dtype of ``mu`` and the rates, as in :func:`vsgd_optax.vsgd`;
      the orthogonalization computes in at least float32.
    state_rounding: how a bfloat16 state is stored, as in
      :func:`vsgd_optax.vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd_optax.vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs` with a
    :class:`vsgd_optax.FactoredVSGDState` (a
    :class:`vsgd_optax.ScaleByVSGDState` where ``min_dim_size_to_factor`` is
    None), whose ``update`` does not need ``params``.
  """
  if not isinstance(nesterov, (bool, np.bool_)):
    raise TypeError(f"nesterov must be a bool, got {nesterov!r}.")
  _validation.check_choice("orthogonalize", orthogonalize, ORTHOGONALIZED)
  _validation.check_choice("normalize", normalize, NORMALIZED)
  if nesterov and orthogonalize != "mean":
    raise ValueError(f"nesterov=True looks ahead with the mean; orthogonalize={orthogonalize!r} "
                     "orthogonalizes another quantity. Use one or the other.")
  _validation.check_newton_schulz(ns_coeffs, ns_steps, ns_eps)
  _validation.check_choice("preconditioning", preconditioning, PRECONDITIONINGS)
  if preconditioning != "frobenius" and not _MUON_TAKES_PRECONDITIONING:
    raise ValueError(f"preconditioning={preconditioning!r} needs optax >= 0.2.8, whose "
                     f"scale_by_muon takes it; this is optax {optax.__version__}. Use "
                     "'frobenius' (the default) or upgrade optax.")
  if consistent_rms is not None:
    _validation.check_positive("consistent_rms", consistent_rms)
  spec = muon_weight_dimension_numbers
  if min_dim_size_to_factor is None:
    inner = _transforms.scale_by_vsgd(
        variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
        kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
        seed=seed)
  else:
    # The memory-honest form: mu and a few means a matrix, Muon's bytes and a sliver.
    threshold = _validation.check_whole_number(
        "min_dim_size_to_factor", min_dim_size_to_factor, 2,
        "the shortest fan-in or fan-out that factors")
    inner = _factored.factored_scaling(
        None if threshold is None else _factored_matrices(spec, threshold),
        variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
        kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
        seed=seed, optimizer="scale_by_vsgd_muon",
        why=f"min_dim_size_to_factor={min_dim_size_to_factor!r}")
  # With beta = 0 and no Nesterov step, optax's Muon orthogonalizes its input
  # as it is: its moment is the input, and its bias correction divides by 1.
  preconditioned = {"preconditioning": preconditioning} if _MUON_TAKES_PRECONDITIONING else {}
  orthogonalize_with_muon = optax.contrib.scale_by_muon(
      ns_coeffs=ns_coeffs, ns_steps=ns_steps, beta=0.0, eps=ns_eps, nesterov=False,
      **preconditioned)

  # At the first step, the prior of injected hyperparameters as they are then, as
  # the inner update takes it (none where they are plain numbers, which init stored).
  first_step_priors = _transforms.first_step_priors(
      variance_ratio, prior_strength,
      priors=tuple(_transforms.prior_rate(variance_ratio, prior_strength, which)
                   for which in (0, 1)))

  def init_fn(params):
    _check_matrices(params, matrix_axes(spec, params), "params")
    return inner.init(params)

  def orthogonalized(matrix):
    # Muon is given the matrix tall (or square). Its Newton-Schulz transposes a
    # tall matrix to iterate on the wide one, so the result is the same to the
    # bit; and optax before 0.2.7, whose scale_by_muon also multiplied by the
    # width scale sqrt(max(1, columns / rows)), multiplies a tall one by 1.
    if matrix.size == 0:  # nothing to orthogonalize, and no width to scale by
      return matrix
    wide = matrix.shape[0] < matrix.shape[1]
    tall = matrix.T if wide else matrix
    ortho, _ = orthogonalize_with_muon.update(tall, orthogonalize_with_muon.init(tall))
    return (ortho.T if wide else ortho) * shape_scale(matrix.shape, consistent_rms)

  def normalized(ortho, variance):
    """``ortho`` with each row (or column) divided by the root of its mean
    posterior variance, then scaled back to ``ortho``'s Frobenius norm.

    The norms are taken of ``ortho`` over its largest magnitude, so that a tiny
    step's squares do not underflow; a zero step stays zero (not 0 / 0).
    """
    scale = jnp.sqrt(jnp.mean(variance, axis=1 if normalize == "rows" else 0, keepdims=True))
    largest = jnp.max(jnp.abs(ortho))
    unit = ortho / jnp.where(largest > 0, largest, 1)
    divided = unit / scale
    size = jnp.linalg.norm(divided)
    return divided * (largest * jnp.linalg.norm(unit) / jnp.where(size > 0, size, 1))

  def step_of(x, variance):
    # ``orthogonalized`` carries the shape scale, which the normalization keeps.
    ortho = orthogonalized(x)
    return ortho if normalize is None else normalized(ortho, variance)

  def element_variances(b_g, b_ghat, shape, dtype):
    """VSGD's variances of each element from its rates (full or factored), in ``dtype``."""
    hyper = [jnp.asarray(h, dtype) for h in (variance_ratio, prior_strength)]
    cast = lambda rate: jax.tree.map(lambda x: x.astype(dtype), rate)
    b_g, b_ghat = _factored.element_rates(cast(b_g), cast(b_ghat), shape, *hyper)
    return _update_rules.variances(b_g, b_ghat, hyper[1])

  def direction(axes, g, mu, b_g, b_ghat, vsgd_step, old_b_g, old_b_ghat):
    # At least float32, as vsgd computes; the step goes out in the gradient's dtype.
    dtype = jnp.result_type(jnp.float32, g.dtype, mu.dtype)
    mean = mu.astype(dtype)
    if nesterov:
      # The mean VSGD's next step would hold if the next gradient repeated g.
      weight = element_variances(b_g, b_ghat, g.shape, dtype).w
      mean = mean + weight * (g.astype(dtype) - mean)
    if orthogonalize == "direction":  # VSGD's own step, mu / (sqrt(mu**2 + sigma2) + eps)
      mean = vsgd_step.astype(dtype)
    elif orthogonalize == "signal":  # mu weighted by the step's square, its signal share
      mean = mean * jnp.square(vsgd_step.astype(dtype))
    # The posterior variance of this step (sigma2_t, from the rates before it), which
    # VSGD's own step divides by; only the normalization reads it.
    variance = (None if normalize is None
                else element_variances(old_b_g, old_b_ghat, g.shape, dtype).sigma2)
    if mean.ndim == 2 and axes == ((0,), (1,)):
      return step_of(mean, variance).astype(g.dtype)
    # Each batch index a matrix of its own, each a reshape to (fan_in, fan_out).
    stack, back = _as_matrices(mean, *axes)
    variances = None if variance is None else _as_matrices(variance, *axes)[0]
    return back(jax.vmap(step_of)(stack, variances)).astype(g.dtype)

  def update_fn(updates, state, params=None, **extra_args):
    del params
    axes = matrix_axes(spec, updates)
    _check_matrices(updates, axes, "gradients")
    old_b_g, old_b_ghat = state.b_g, state.b_ghat
    if min_dim_size_to_factor is not None:  # NNX hands back a factored rate as a mapping
      old_b_g, old_b_ghat = (_factored.as_factored(state.mu, old_b_g),
                             _factored.as_factored(state.mu, old_b_ghat))
    if first_step_priors:  # the rates the step starts from
      old_b_g, old_b_ghat = (
          _transforms.at_prior_on_first_step(state.count + 1, rates, value_of)
          for rates, value_of in zip((old_b_g, old_b_ghat), first_step_priors, strict=True))
    vsgd_step, state = inner.update(updates, state, None, **extra_args)
    out = jax.tree_util.tree_map_with_path(
        lambda path, *leaves: direction(axes[_transforms.leaf_path(path)], *leaves),
        updates, state.mu, state.b_g, state.b_ghat, vsgd_step, old_b_g, old_b_ghat)
    return out, state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _at_least_two_axes(params):
  return jax.tree.map(lambda leaf: np.ndim(leaf) >= 2, params)


def vsgd_muon(
    learning_rate: optax.ScalarOrSchedule,
    *,
    adam_learning_rate: optax.ScalarOrSchedule | None = None,
    adam_b1: jax.typing.ArrayLike = 0.9,
    adam_b2: jax.typing.ArrayLike = 0.999,
    adam_eps: jax.typing.ArrayLike = 1e-8,
    adam_weight_decay: jax.typing.ArrayLike = 0.1,
    adam_weight_decay_mask: Any | Callable[[Any], Any] | None = None,
    ns_coeffs: Any = MUON_NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: jax.typing.ArrayLike = 1e-8,
    preconditioning: str = "frobenius",
    nesterov: bool = False,
    consistent_rms: jax.typing.ArrayLike | None = None,
    muon_weight_dimension_numbers: Any = None,
    orthogonalize: str = "mean",
    normalize: str | None = None,
    min_dim_size_to_factor: int | None = 128,
    variance_ratio: jax.typing.ArrayLike = 30.0,
    prior_strength: jax.typing.ArrayLike = 1e-8,
    kappa_g: jax.typing.ArrayLike = 0.81,
    kappa_ghat: jax.typing.ArrayLike = 0.9,
    eps: jax.typing.ArrayLike = 1e-8,
    weight_decay: jax.typing.ArrayLike = 0.0,
    weight_decay_mask: Any | Callable[[Any], Any] | None = None,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: str = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  r"""Muon whose momentum is VSGD's posterior mean; AdamW for the other leaves.

  On each matrix (every 2-D leaf, or as ``muon_weight_dimension_numbers``
  says) VSGD's inference runs as in :func:`vsgd_optax.scale_by_vsgd` (state
  ``mu``, ``b_g``, ``b_ghat``; a large matrix keeps its two rates as row and
  column means, so that its state is Muon's bytes and a sliver), and the
  step is Muon's: the Newton-Schulz orthogonalization of the new posterior
  mean :math:`\mu_t` (in place of Muon's momentum with a fixed :math:`\beta`),
  times Muon's shape scale :math:`\sqrt{\max(1, d_\text{out}/d_\text{in})}` for
  :math:`d_\text{in}` rows and :math:`d_\text{out}` columns. The posterior
  variance :math:`\sigma_t^2` does not enter a matrix's step; the mean's
  weight on the new gradient, :math:`w = b_g / (b_g + b_{\hat g})`, does.
  Newton-Schulz starts from :math:`\mu_t` divided by its norm, so the mean's
  small start (:math:`\mu_1 = \hat g_1 / (1 + K_g)`) needs no bias correction.

  Every other leaf steps with :func:`optax.adamw` at ``adam_learning_rate``,
  with ``adam_weight_decay`` on the leaves of two or more axes: the contest's
  recipe, which its results rank first (``docs/howto.md``, "VSGD-Muon"). Its
  defaults are that recipe, so a language model needs one call that names
  its hidden kernels:

  .. code-block:: python

    schedule = optax.warmup_cosine_decay_schedule(
        0.0, 0.0316, warmup_steps=total // 20, decay_steps=total)
    opt = vsgd_optax.vsgd_muon(
        schedule, muon_weight_dimension_numbers=hidden_kernels)

  where ``hidden_kernels(params)`` gives ``MuonDimensionNumbers()`` for each
  hidden kernel and None for the embedding, the positions, the head and the
  vectors. Without it every 2-D leaf is a matrix, as in ``optax.contrib.muon``.

  No Nesterov step by default. Muon's orthogonalizes
  :math:`\beta m_t + (1-\beta)\hat g_t = m_t + (1-\beta)(\hat g_t - m_t)`, the
  mean its next step would hold if the next gradient repeated
  :math:`\hat g_t`. VSGD's literal analogue, :math:`\mu_t + w_{t+1}(\hat g_t -
  \mu_t)` with the updated rates, is the posterior mean after observing
  :math:`\hat g_t` twice. Under VSGD's model the next true gradient is drawn
  around :math:`\mu_t`, so :math:`\mu_t` is already its best estimate; reusing
  :math:`\hat g_t` counts its observation noise twice, and the extra weight
  on the newest gradient that Nesterov sets by hand is the one VSGD already
  sets per element from the measured noise. ``nesterov=True`` gives the
  analogue, for comparison.

  Public by the contest's promotion rule, declared before its runs
  (``benchmarks/contest/protocol.py``): on the contest's transformer LM
  (CPU size, 5 seeds) the factored form won against Muon and against
  NorMuon under the family's Holm correction, and was equivalent to the full
  rates, so factored rates are the default. The results page gives the
  numbers.

  Args:
    learning_rate: the matrices' rate: a scalar or an :class:`optax.Schedule`
      of the step count.
    adam_learning_rate: the AdamW part's rate; ``None`` (default) takes a
      tenth of ``learning_rate`` (``ADAM_SHARE``), the ratio the contest tuned.
    adam_b1: AdamW's :math:`\beta_1`.
    adam_b2: AdamW's :math:`\beta_2`.
    adam_eps: AdamW's eps.
    adam_weight_decay: AdamW's decoupled weight decay, >= 0 (default 0.1, as
      language models take it).
    adam_weight_decay_mask: where AdamW decays: a tree of booleans like the
      params or a function of them; None (default): the leaves of two or
      more axes (the embedding, the positions, the head), not the vectors,
      as nanoGPT decays them.
    ns_coeffs: Newton-Schulz coefficients ``(a, b, c)``, or a sequence of
      such triples, one a step (default: Muon's).
    ns_steps: Newton-Schulz steps, >= 1.
    ns_eps: added to the norm that Newton-Schulz divides by first, >= 0.
    preconditioning: Muon's scaling before Newton-Schulz (see
      :func:`scale_by_vsgd_muon`).
    nesterov: orthogonalize :math:`\mu_t + w_{t+1}(\hat g_t - \mu_t)` instead
      of :math:`\mu_t` (see above).
    consistent_rms: ``None`` for Muon's width scale; a number :math:`r` for
      :math:`\sqrt{\max(d_\text{in}, d_\text{out})}\, r` (as
      ``optax.contrib.muon``'s).
    muon_weight_dimension_numbers: which leaves are matrices, as
      ``optax.contrib.muon`` takes it: None (default) for every 2-D leaf as
      ``(fan_in, fan_out)``; or a tree like the params (or a prefix of one)
      whose leaves are ``optax.contrib.MuonDimensionNumbers`` (the axes to
      reduce over and to output; any others are batch axes, each
      orthogonalized apart) or None for a leaf that steps with AdamW; or a
      function of the params that returns such a tree. Flax NNX's
      Variables, Linen's and Equinox's trees all work.
    orthogonalize: ``"mean"`` (default), ``"direction"`` or ``"signal"``
      (see :func:`scale_by_vsgd_muon`).
    normalize: None (default), ``"rows"`` or ``"columns"`` (see
      :func:`scale_by_vsgd_muon`).
    min_dim_size_to_factor: each matrix whose fan-in and fan-out are both at
      least this long (default 128, as :func:`optax.adafactor`'s) keeps its
      two rates as their means along the reduction and output axes
      (:class:`vsgd_optax.FactoredRate`, rebuilt each step as the prior plus
      a rank-one excess), so that it holds ``mu`` and a few means: about 4
      bytes a parameter in float32, as Muon's momentum. A smaller matrix
      keeps them whole. None keeps two rates per element everywhere, as
      :func:`vsgd_optax.vsgd` (12 bytes a parameter); the contest found the
      two equivalent. Under ``optax.inject_hyperparams``, ``init`` must run
      outside ``jit`` (or name it in ``static_args``).
    variance_ratio: :math:`K_g`, as in :func:`vsgd_optax.vsgd`.
    prior_strength: :math:`\gamma`, as in :func:`vsgd_optax.vsgd`.
    kappa_g: SVI decay exponent for ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent for ``b_ghat``, in [0, 1].
    eps: VSGD's eps (see :func:`scale_by_vsgd_muon`).
    weight_decay: the matrices' decoupled weight decay, >= 0 (multiplied by
      the learning rate, as :func:`vsgd_optax.vsgd`'s); default none.
    weight_decay_mask: where the matrices' decay applies, as in
      :func:`vsgd_optax.vsgd`.
    state_dtype: dtype of ``mu``, ``b_g`` and ``b_ghat``, as in
      :func:`vsgd_optax.vsgd`; the orthogonalization computes in at least
      float32. AdamW's moments stay in the params' dtype.
    state_rounding: how a bfloat16 state is stored, as in
      :func:`vsgd_optax.vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd_optax.vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs`: an ``optax.partition``
    of a ``"muon"`` group (``scale_by_vsgd_muon``, decay, learning rate) and
    an ``"adam"`` group (:func:`optax.adamw`). The read-outs such as
    :func:`vsgd_optax.effective_beta1` take the matrices' state,
    ``state.inner_states["muon"]``. Its ``update`` needs the params, as
    AdamW's does.

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
  for name, value in (("adam_b1", adam_b1), ("adam_b2", adam_b2)):
    _validation.check_unit_interval(name, value)
  _validation.check_non_negative("adam_eps", adam_eps)
  _validation.check_non_negative("adam_weight_decay", adam_weight_decay)

  def partition_for(spec):
    """The two groups for a tree whose matrices ``spec`` (a tree or None) names."""
    scaling = scale_by_vsgd_muon(
        ns_coeffs=ns_coeffs, ns_steps=ns_steps, ns_eps=ns_eps, preconditioning=preconditioning,
        nesterov=nesterov, consistent_rms=consistent_rms, muon_weight_dimension_numbers=spec,
        orthogonalize=orthogonalize, normalize=normalize,
        min_dim_size_to_factor=min_dim_size_to_factor, variance_ratio=variance_ratio,
        prior_strength=prior_strength, kappa_g=kappa_g, kappa_ghat=kappa_ghat, eps=eps,
        state_dtype=state_dtype, state_rounding=state_rounding, seed=seed)
    # As vsgd's chain: no decay needs no params (and checks the rate and the decay).
    matrices = _aliases.chain_with_decay(
        scaling, learning_rate, weight_decay, weight_decay_mask,
        state_type=(_transforms.ScaleByVSGDState if min_dim_size_to_factor is None
                    else _factored.FactoredVSGDState),
        optimizer="vsgd_muon")
    others = optax.adamw(adam_learning_rate, b1=adam_b1, b2=adam_b2, eps=adam_eps,
                         weight_decay=adam_weight_decay,
                         mask=(_at_least_two_axes if adam_weight_decay_mask is None
                               else adam_weight_decay_mask))

    def labels(tree):
      axes = matrix_axes(spec, tree)
      return jax.tree_util.tree_map_with_path(
          lambda path, _: "muon" if _transforms.leaf_path(path) in axes else "adam", tree)
    return optax.partition({"muon": matrices, "adam": others}, labels)

  def resolved(tree):
    """``muon_weight_dimension_numbers`` for the whole tree, a function called on
    it here, so that the matrix group never calls it on its masked part.
    """
    spec = muon_weight_dimension_numbers
    spec = spec(tree) if callable(spec) else spec
    matrix_axes(spec, tree)  # checked against the whole tree
    return spec

  partition_for(None)  # the hyperparameters are checked when the optimizer is built

  def init_fn(params):
    return partition_for(resolved(params)).init(params)

  def update_fn(updates, state, params=None, **extra_args):
    groups = getattr(state, "inner_states", None)
    if not (isinstance(groups, Mapping) and set(groups) == {"muon", "adam"}):
      raise TypeError(
          f"vsgd_muon's update got {_validation.describe(state)}, not the state its init "
          "returns: optax.partition's state of a 'muon' and an 'adam' group. Pass the state "
          "made by vsgd_muon's init; another optimizer's state cannot continue here.")
    return partition_for(resolved(updates)).update(updates, state, params, **extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)

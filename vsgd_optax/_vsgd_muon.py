"""VSGD's posterior mean inside Muon: ``experimental.vsgd_muon``.

Muon orthogonalizes (Newton-Schulz) a momentum average of each matrix's
gradient. Here the average is VSGD's posterior mean ``mu``, whose weight on
the new gradient adapts to the noise VSGD measures. The matrices' state is
:func:`vsgd_optax.scale_by_vsgd`'s, whose update runs as it is; only its
direction is replaced by Muon's orthogonalization of the new ``mu``, which
``optax.contrib.scale_by_muon`` computes (with ``beta=0`` and no Nesterov
step, it orthogonalizes its input as it is). Every other leaf steps with
:func:`vsgd_optax.vsgd`. ``docs/algorithm.md`` ("VSGD's mean inside Muon")
says why there is no Nesterov step.
"""

import inspect
import math
import numbers
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import TypedDict
from typing import Unpack

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _aliases
from vsgd_optax import _factored
from vsgd_optax import _hyperparams
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
# optax's scale_by_muon takes a preconditioning from 0.2.8 on; before, it
# always divided by the Frobenius norm.
_MUON_TAKES_PRECONDITIONING = (
    "preconditioning" in inspect.signature(optax.contrib.scale_by_muon).parameters)


class MuonArgs(TypedDict, total=False):
  """How the matrices are orthogonalized and which are matrices (see :func:`vsgd_muon`)."""
  ns_coeffs: Any
  ns_steps: int
  ns_eps: jax.typing.ArrayLike
  preconditioning: str
  nesterov: bool
  consistent_rms: jax.typing.ArrayLike | None
  muon_weight_dimension_numbers: Any
  orthogonalize: str
  normalize: str | None
  min_dim_size_to_factor: int | None


class VSGDMuonArgs(MuonArgs, _hyperparams.VSGDArgs, total=False):
  """``scale_by_vsgd_muon``'s: Muon's, then VSGD's."""


class VSGDMuonOptimizerArgs(MuonArgs, _hyperparams.VSGDOptimizerArgs, total=False):
  """``vsgd_muon``'s, after the learning rate and ``vsgd_learning_rate``."""


# Muon's defaults are optax.contrib.muon's, with the mean orthogonalized as it
# is and full rates kept.
DEFAULTS = {**_hyperparams.DEFAULTS, "ns_coeffs": MUON_NS_COEFFS, "ns_steps": 5, "ns_eps": 1e-8,
            "preconditioning": "frobenius", "nesterov": False, "consistent_rms": None,
            "muon_weight_dimension_numbers": None, "orthogonalize": "mean", "normalize": None,
            "min_dim_size_to_factor": None}


def _check_ns(ns_coeffs, ns_steps, ns_eps, preconditioning, consistent_rms) -> np.ndarray:
  if isinstance(ns_steps, jax.Array):  # inject_hyperparams made it a value
    raise TypeError(
        f"ns_steps must be a whole number >= 1, got the array {ns_steps!r}. It sets how many "
        "Newton-Schulz steps are traced, so it cannot be a hyperparameter: under "
        "optax.inject_hyperparams, name it in static_args=('ns_steps',).")
  if (isinstance(ns_steps, bool) or not isinstance(ns_steps, numbers.Integral)
      or ns_steps < 1):
    raise ValueError(f"ns_steps must be a whole number >= 1, got {ns_steps!r}.")
  try:
    coeffs = np.asarray(ns_coeffs, np.float64)
  except (TypeError, ValueError) as error:
    raise ValueError("ns_coeffs must be three numbers (a, b, c) or a sequence of such "
                     f"triples, one a Newton-Schulz step; got {ns_coeffs!r}.") from error
  if coeffs.ndim not in (1, 2) or coeffs.shape[-1] != 3 or not np.all(np.isfinite(coeffs)):
    raise ValueError("ns_coeffs must be three finite numbers (a, b, c) or a sequence of such "
                     f"triples, one a Newton-Schulz step; got shape {coeffs.shape}.")
  if coeffs.ndim == 2 and not 1 <= coeffs.shape[0] <= ns_steps:
    raise ValueError(f"ns_coeffs has {coeffs.shape[0]} triples, one a step; ns_steps "
                     f"({ns_steps}) must be at least that many (optax's scale_by_muon rule).")
  _validation.check_non_negative("ns_eps", ns_eps)
  if preconditioning not in PRECONDITIONINGS:
    raise ValueError(f"preconditioning must be one of {PRECONDITIONINGS}, got "
                     f"{preconditioning!r}.")
  if preconditioning != "frobenius" and not _MUON_TAKES_PRECONDITIONING:
    raise ValueError(f"preconditioning={preconditioning!r} needs optax >= 0.2.8, whose "
                     f"scale_by_muon takes it; this is optax {optax.__version__}. Use "
                     "'frobenius' (the default) or upgrade optax.")
  if consistent_rms is not None:
    _validation.check_positive("consistent_rms", consistent_rms)
  return coeffs


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
  ``MuonDimensionNumbers`` (anything with ``reduction_axis`` and ``output_axis``).
  """
  return x is None or (hasattr(x, "reduction_axis") and hasattr(x, "output_axis"))


def _axes(axis, ndim: int) -> tuple[int, ...]:
  return tuple(a % ndim for a in ((axis,) if isinstance(axis, int) else axis))


def matrix_axes(spec, tree) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
  """Which leaves of ``tree`` are matrices, and how: by each leaf's path
  (``jax.tree_util.keystr``), its ``(reduction axes, output axes)``.

  ``spec`` is ``optax.contrib.muon``'s ``muon_weight_dimension_numbers``: None for
  every 2-D leaf as ``(fan_in, fan_out)``; or a tree like ``tree`` whose leaves
  are ``MuonDimensionNumbers`` (the axes to reduce over and to output; the
  others are batch axes, each orthogonalized apart) or None (not a matrix), or
  a function of ``tree`` that returns one.
  """
  if spec is None:
    return {jax.tree_util.keystr(path): ((0,), (1,))
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree) if np.ndim(leaf) == 2}
  if callable(spec):
    spec = spec(tree)
  shapes = {jax.tree_util.keystr(path): np.shape(leaf)
            for path, leaf in jax.tree_util.tree_leaves_with_path(tree)}
  found = {}
  for path, dims in jax.tree_util.tree_flatten_with_path(spec, is_leaf=_is_dims)[0]:
    if dims is None:
      continue
    key = jax.tree_util.keystr(path)
    if not _is_dims(dims):
      raise TypeError(f"muon_weight_dimension_numbers{key} must be a MuonDimensionNumbers or "
                      f"None, got {dims!r}.")
    if key not in shapes:
      raise ValueError(f"muon_weight_dimension_numbers names {key}, which the params do not "
                       "have; give a tree like the params (None where a leaf is not a matrix).")
    ndim = len(shapes[key])
    reduction, output = _axes(dims.reduction_axis, ndim), _axes(dims.output_axis, ndim)
    if ndim < 2 or not reduction or not output or set(reduction) & set(output):
      raise ValueError(f"muon_weight_dimension_numbers{key} ({dims}) must name disjoint, "
                       f"non-empty reduction and output axes of its {ndim}-D leaf.")
    found[key] = (reduction, output)
  return found


def _check_matrices(tree, axes: dict, what: str) -> None:
  wrong = [f"{jax.tree_util.keystr(path)} {np.shape(leaf)}"
           for path, leaf in jax.tree_util.tree_leaves_with_path(tree)
           if jax.tree_util.keystr(path) not in axes]
  if wrong:
    raise ValueError(
        f"scale_by_vsgd_muon orthogonalizes matrices only; these {what} are not 2-D, or "
        "muon_weight_dimension_numbers says they are no matrix: " + ", ".join(wrong)
        + ". Use experimental.vsgd_muon, which steps them with vsgd.")


def _as_matrices(x, reduction, output):
  """``x`` as a stack of ``(fan_in, fan_out)`` matrices, and the function back."""
  batch = tuple(sorted(set(range(x.ndim)) - set(reduction) - set(output)))
  order = batch + reduction + output
  size = lambda axes: math.prod(x.shape[a] for a in axes)
  stacked = x.transpose(order).reshape(size(batch), size(reduction), size(output))
  inverse = tuple(sorted(range(x.ndim), key=lambda i: order[i]))
  return stacked, lambda y: y.reshape(tuple(x.shape[a] for a in order)).transpose(inverse)


@_hyperparams.takes(VSGDMuonArgs, DEFAULTS)
def scale_by_vsgd_muon(**args: Unpack[VSGDMuonArgs]) -> optax.GradientTransformationExtraArgs:
  """Rescale the updates of matrices to Muon's orthogonalization of VSGD's mean.

  Every leaf must be a matrix: 2-D ``(fan_in, fan_out)``, or as
  ``muon_weight_dimension_numbers`` says (see :func:`vsgd_muon`). The state is
  :class:`vsgd_optax.ScaleByVSGDState`, updated by
  :func:`vsgd_optax.scale_by_vsgd` as it is; the direction is Muon's
  Newton-Schulz orthogonalization of the new ``mu`` (or, with ``nesterov``,
  of ``mu + w (g - mu)``), times Muon's shape scale. See :func:`vsgd_muon`
  for the arguments.
  """
  ns_coeffs, ns_steps, ns_eps = args["ns_coeffs"], args["ns_steps"], args["ns_eps"]
  preconditioning, consistent_rms = args["preconditioning"], args["consistent_rms"]
  nesterov, orthogonalize, normalize = args["nesterov"], args["orthogonalize"], args["normalize"]
  min_dim_size_to_factor = args["min_dim_size_to_factor"]
  variance_ratio, prior_strength = args["variance_ratio"], args["prior_strength"]
  if not isinstance(nesterov, (bool, np.bool_)):
    raise TypeError(f"nesterov must be a bool, got {nesterov!r}.")
  if orthogonalize not in ORTHOGONALIZED:
    raise ValueError(f"orthogonalize must be one of {ORTHOGONALIZED}, got {orthogonalize!r}.")
  if normalize not in NORMALIZED:
    raise ValueError(f"normalize must be one of {NORMALIZED}, got {normalize!r}.")
  if nesterov and orthogonalize != "mean":
    raise ValueError(f"nesterov=True looks ahead with the mean; orthogonalize={orthogonalize!r} "
                     "orthogonalizes another quantity. Use one or the other.")
  _check_ns(ns_coeffs, ns_steps, ns_eps, preconditioning, consistent_rms)
  vsgd_args = _hyperparams.of(_hyperparams.VSGDArgs, args)
  # The memory-honest form keeps each matrix's rates as their row and column
  # means (factored_vsgd's state): mu and a few means, Muon's bytes and a sliver.
  inner = (_transforms.scale_by_vsgd(**vsgd_args) if min_dim_size_to_factor is None
           else _factored.scale_by_factored_vsgd(
               min_dim_size_to_factor=min_dim_size_to_factor, **vsgd_args))
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
    _check_matrices(params, matrix_axes(args["muon_weight_dimension_numbers"], params), "params")
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
    """
    scale = jnp.sqrt(jnp.mean(variance, axis=1 if normalize == "rows" else 0, keepdims=True))
    out = ortho / scale
    return out * (jnp.linalg.norm(ortho) / jnp.linalg.norm(out))

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
    if axes == ((0,), (1,)):
      return step_of(mean, variance).astype(g.dtype)
    stack, back = _as_matrices(mean, *axes)  # each batch index a matrix of its own
    if variance is None:
      return back(jax.vmap(orthogonalized)(stack)).astype(g.dtype)
    variances, _ = _as_matrices(variance, *axes)
    return back(jax.vmap(step_of)(stack, variances)).astype(g.dtype)

  def update_fn(updates, state, params=None, **extra_args):
    del params
    axes = matrix_axes(args["muon_weight_dimension_numbers"], updates)
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
        lambda path, *leaves: direction(axes[jax.tree_util.keystr(path)], *leaves),
        updates, state.mu, state.b_g, state.b_ghat, vsgd_step, old_b_g, old_b_ghat)
    return out, state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


@_hyperparams.takes(VSGDMuonOptimizerArgs, DEFAULTS)
def vsgd_muon(
    learning_rate: optax.ScalarOrSchedule,
    *,
    vsgd_learning_rate: optax.ScalarOrSchedule | None = None,
    **args: Unpack[VSGDMuonOptimizerArgs],
) -> optax.GradientTransformationExtraArgs:
  r"""Muon whose momentum is VSGD's posterior mean; VSGD for the other leaves.

  Experimental. On each 2-D leaf (Muon's rule, with the first axis the
  input and the second the output) VSGD's inference runs as in
  :func:`vsgd_optax.scale_by_vsgd` (state ``mu``, ``b_g``, ``b_ghat``), and
  the step is Muon's: the Newton-Schulz orthogonalization of the new
  posterior mean :math:`\mu_t` (in place of Muon's momentum with a fixed
  :math:`\beta`), times Muon's shape scale
  :math:`\sqrt{\max(1, d_\text{out}/d_\text{in})}` for :math:`d_\text{in}`
  rows and :math:`d_\text{out}` columns. The posterior
  variance :math:`\sigma_t^2` does not enter a matrix's step; the mean's
  weight on the new gradient, :math:`w = b_g / (b_g + b_{\hat g})`, does.
  Newton-Schulz starts from :math:`\mu_t` divided by its norm, so the
  mean's small start (:math:`\mu_1 = \hat g_1 / (1 + K_g)`) needs no bias
  correction. Every other leaf steps exactly as :func:`vsgd_optax.vsgd`.

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

  Promotion rule, fixed before any runs: documented as worth trying only
  where it is a win or equivalent (within the workload's declared
  practical-equivalence margin) against Muon on the char LM and on at
  least one other matrix workload; otherwise it stays experimental with its
  result published.

  Args:
    learning_rate: a scalar or an :class:`optax.Schedule` of the step count.
    ns_coeffs: Newton-Schulz coefficients ``(a, b, c)``, or a sequence of
      such triples, one a step (default: Muon's).
    ns_steps: Newton-Schulz steps, >= 1.
    ns_eps: added to the norm that Newton-Schulz divides by first, >= 0.
    preconditioning: Muon's scaling before Newton-Schulz: ``"frobenius"``
      (default), ``"spectral"``, ``"aol"`` or ``"schatten"`` (the last three
      need optax >= 0.2.8).
    nesterov: orthogonalize :math:`\mu_t + w_{t+1}(\hat g_t - \mu_t)` instead
      of :math:`\mu_t` (see above).
    consistent_rms: ``None`` for Muon's width scale; a number :math:`r` for
      :math:`\sqrt{\max(d_\text{in}, d_\text{out})}\, r` (as
      ``optax.contrib.muon``'s).
    muon_weight_dimension_numbers: which leaves are matrices, as
      ``optax.contrib.muon`` takes it: None (default) for every 2-D leaf as
      ``(fan_in, fan_out)``; or a tree like the params whose leaves are
      ``optax.contrib.MuonDimensionNumbers`` (the axes to reduce over and to
      output; any others are batch axes, each orthogonalized apart) or None
      for a leaf that steps with :func:`vsgd_optax.vsgd`, or a function of
      the params that returns such a tree. Muon's users keep the embedding
      and the head out (None) and step them with AdamW.
    orthogonalize: what Newton-Schulz orthogonalizes: ``"mean"`` (default),
      the posterior mean :math:`\mu_t`; ``"direction"``, VSGD's own step
      :math:`u_t = \mu_t / (\sqrt{\mu_t^2 + \sigma_t^2} + \epsilon)`; ``"signal"``,
      :math:`\mu_t u_t^2`, the mean weighted by its share of the second moment
      (``docs/algorithm.md``, "What VSGD's noise model adds to Muon").
    normalize: None (default), or ``"rows"`` or ``"columns"``: the orthogonalized
      step's rows (or columns) divided by the root of their mean posterior
      variance :math:`\sigma_t^2`, then scaled back to its Frobenius norm, as
      NorMuon normalizes by a second moment.
    min_dim_size_to_factor: None (default) keeps two rates per element, as
      :func:`vsgd_optax.vsgd`; a whole number keeps them, for each matrix whose
      two largest axes are both at least that long, as their row and column
      means (:func:`factored_vsgd`'s state, rebuilt each step as the prior plus
      a rank-one excess), so that a matrix holds ``mu`` and a few means: about
      4 bytes a parameter in float32, as Muon's momentum.
    variance_ratio: :math:`K_g`, as in :func:`vsgd_optax.vsgd`.
    prior_strength: :math:`\gamma`, as in :func:`vsgd_optax.vsgd`.
    kappa_g: SVI decay exponent for ``b_g``, in [0, 1].
    kappa_ghat: SVI decay exponent for ``b_ghat``, in [0, 1].
    eps: added to the denominator of the steps of the leaves that are not
      matrices, as in :func:`vsgd_optax.vsgd`.
    weight_decay: decoupled weight decay, >= 0, on every leaf (as
      :func:`vsgd_optax.vsgd`'s: multiplied by the learning rate).
    weight_decay_mask: where decay applies, as in :func:`vsgd_optax.vsgd`.
    vsgd_learning_rate: the rate of the leaves that are not matrices;
      ``None`` takes ``learning_rate``.
    state_dtype: dtype of ``mu``, ``b_g`` and ``b_ghat``, as in
      :func:`vsgd_optax.vsgd`; the orthogonalization computes in at least
      float32.
    state_rounding: how a bfloat16 state is stored, as in
      :func:`vsgd_optax.vsgd`.
    seed: keys the stochastic rounding's bits, as in :func:`vsgd_optax.vsgd`.

  Returns:
    An :class:`optax.GradientTransformationExtraArgs`: an ``optax.partition``
    of a ``"muon"`` group (``scale_by_vsgd_muon``, decay, learning rate) and
    a ``"vsgd"`` group (:func:`vsgd_optax.vsgd`), each with a
    :class:`vsgd_optax.ScaleByVSGDState`; the read-outs such as
    :func:`vsgd_optax.effective_beta1` take one group's, as
    ``state.inner_states["muon"]``. With ``weight_decay`` 0, ``update`` needs
    no params.

  Examples:
    >>> import jax.numpy as jnp
    >>> from vsgd_optax import experimental
    >>> opt = experimental.vsgd_muon(1e-2)
    >>> params = {"w": jnp.ones((4, 3)), "b": jnp.ones(3)}
    >>> state = opt.init(params)
    >>> grads = {"w": jnp.eye(4, 3), "b": jnp.ones(3)}
    >>> updates, state = opt.update(grads, state)
    >>> updates["w"].shape, updates["b"].shape
    ((4, 3), (3,))
  """
  if vsgd_learning_rate is None:
    vsgd_learning_rate = learning_rate

  def partition_for(spec):
    """The two groups for a tree whose matrices ``spec`` (a tree or None) names."""
    scaling = scale_by_vsgd_muon(
        **{**_hyperparams.of(VSGDMuonArgs, args), "muon_weight_dimension_numbers": spec})
    # As vsgd's chain: no decay needs no params (and checks the rate and the decay).
    matrices = _aliases.chain_with_decay(scaling, learning_rate, args["weight_decay"],
                                        args["weight_decay_mask"],
                                        state_type=(_transforms.ScaleByVSGDState
                                                    if args["min_dim_size_to_factor"] is None
                                                    else _factored.FactoredVSGDState),
                                        optimizer="vsgd_muon")
    others = _aliases.vsgd(
        vsgd_learning_rate, **_hyperparams.of(_hyperparams.VSGDOptimizerArgs, args))

    def labels(tree):
      axes = matrix_axes(spec, tree)
      return jax.tree_util.tree_map_with_path(
          lambda path, _: "muon" if jax.tree_util.keystr(path) in axes else "vsgd", tree)
    return optax.partition({"muon": matrices, "vsgd": others}, labels)

  def resolved(tree):
    """``muon_weight_dimension_numbers`` for the whole tree, a function called on
    it here, so that the matrix group never calls it on its masked part.
    """
    spec = args["muon_weight_dimension_numbers"]
    spec = spec(tree) if callable(spec) else spec
    matrix_axes(spec, tree)  # checked against the whole tree
    return spec

  partition_for(None)  # the hyperparameters are checked when the optimizer is built

  def init_fn(params):
    return partition_for(resolved(params)).init(params)

  def update_fn(updates, state, params=None, **extra_args):
    groups = getattr(state, "inner_states", None)
    if not (isinstance(groups, Mapping) and set(groups) == {"muon", "vsgd"}):
      raise TypeError(
          f"vsgd_muon's update got {_transforms.describe(state)}, not the state its init "
          "returns: optax.partition's state of a 'muon' and a 'vsgd' group. Pass the state "
          "made by vsgd_muon's init; another optimizer's state cannot continue here.")
    return partition_for(resolved(updates)).update(updates, state, params, **extra_args)

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)

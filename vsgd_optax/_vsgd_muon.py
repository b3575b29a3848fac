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
import numbers
from collections.abc import Mapping
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _aliases
from vsgd_optax import _transforms
from vsgd_optax import _update_rules
from vsgd_optax import _validation

# Muon's coefficients of the quintic Newton-Schulz step (optax.contrib.muon's default).
MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)
PRECONDITIONINGS = ("frobenius", "spectral", "aol", "schatten")
# optax's scale_by_muon takes a preconditioning from 0.2.8 on; before, it
# always divided by the Frobenius norm.
_MUON_TAKES_PRECONDITIONING = (
    "preconditioning" in inspect.signature(optax.contrib.scale_by_muon).parameters)


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


def _check_matrices(tree, what: str) -> None:
  wrong = [f"{jax.tree_util.keystr(path)} {tuple(leaf.shape)}"
           for path, leaf in jax.tree_util.tree_leaves_with_path(tree) if len(leaf.shape) != 2]
  if wrong:
    raise ValueError(
        f"scale_by_vsgd_muon orthogonalizes matrices only; these {what} are not 2-D: "
        + ", ".join(wrong) + ". Use experimental.vsgd_muon, which steps them with vsgd.")


def scale_by_vsgd_muon(
    *,
    ns_coeffs=MUON_NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: jax.typing.ArrayLike = 1e-8,
    preconditioning: str = "frobenius",
    nesterov: bool = False,
    consistent_rms: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike = _update_rules.VARIANCE_RATIO,
    prior_strength: jax.typing.ArrayLike = _update_rules.PRIOR_STRENGTH,
    kappa_g: jax.typing.ArrayLike = _update_rules.KAPPA_G,
    kappa_ghat: jax.typing.ArrayLike = _update_rules.KAPPA_GHAT,
    eps: jax.typing.ArrayLike = _update_rules.EPS,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: str = "stochastic",
    seed: int | jax.Array = 0,
) -> optax.GradientTransformationExtraArgs:
  """Rescale the updates of 2-D leaves to Muon's orthogonalization of VSGD's mean.

  Every leaf must be a matrix ``(fan_in, fan_out)``. The state is
  :class:`vsgd_optax.ScaleByVSGDState`, updated by
  :func:`vsgd_optax.scale_by_vsgd` as it is; the direction is Muon's
  Newton-Schulz orthogonalization of the new ``mu`` (or, with ``nesterov``,
  of ``mu + w (g - mu)``), times Muon's shape scale. See :func:`vsgd_muon`
  for the arguments.
  """
  if not isinstance(nesterov, (bool, np.bool_)):
    raise TypeError(f"nesterov must be a bool, got {nesterov!r}.")
  _check_ns(ns_coeffs, ns_steps, ns_eps, preconditioning, consistent_rms)
  inner = _transforms.scale_by_vsgd(
      variance_ratio=variance_ratio, prior_strength=prior_strength, kappa_g=kappa_g,
      kappa_ghat=kappa_ghat, eps=eps, state_dtype=state_dtype, state_rounding=state_rounding,
      seed=seed)
  # With beta = 0 and no Nesterov step, optax's Muon orthogonalizes its input
  # as it is: its moment is the input, and its bias correction divides by 1.
  preconditioned = {"preconditioning": preconditioning} if _MUON_TAKES_PRECONDITIONING else {}
  orthogonalize_with_muon = optax.contrib.scale_by_muon(
      ns_coeffs=ns_coeffs, ns_steps=ns_steps, beta=0.0, eps=ns_eps, nesterov=False,
      **preconditioned)

  def init_fn(params):
    _check_matrices(params, "params")
    return inner.init(params)

  def direction(g, mu, b_g, b_ghat):
    # At least float32, as vsgd computes; the step goes out in the gradient's dtype.
    dtype = jnp.result_type(jnp.float32, g.dtype, mu.dtype)
    mean = mu.astype(dtype)
    if nesterov:
      # The mean VSGD's next step would hold if the next gradient repeated g.
      b_g, b_ghat = b_g.astype(dtype), b_ghat.astype(dtype)
      mean = mean + b_g / (b_g + b_ghat) * (g.astype(dtype) - mean)
    # Muon is given the matrix tall (or square). Its Newton-Schulz transposes a
    # tall matrix to iterate on the wide one, so the result is the same to the
    # bit; and optax before 0.2.7, whose scale_by_muon also multiplied by the
    # width scale sqrt(max(1, columns / rows)), multiplies a tall one by 1.
    wide = mean.shape[0] < mean.shape[1]
    tall = mean.T if wide else mean
    ortho, _ = orthogonalize_with_muon.update(tall, orthogonalize_with_muon.init(tall))
    ortho = ortho.T if wide else ortho
    return (shape_scale(mu.shape, consistent_rms) * ortho).astype(g.dtype)

  def update_fn(updates, state, params=None, **extra_args):
    del params
    _check_matrices(updates, "gradients")
    _, state = inner.update(updates, state, None, **extra_args)
    out = jax.tree.map(direction, updates, state.mu, state.b_g, state.b_ghat)
    return out, state

  return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def _labels(params):
  return jax.tree.map(lambda leaf: "muon" if len(leaf.shape) == 2 else "vsgd", params)


def vsgd_muon(
    learning_rate: optax.ScalarOrSchedule,
    *,
    ns_coeffs=MUON_NS_COEFFS,
    ns_steps: int = 5,
    ns_eps: jax.typing.ArrayLike = 1e-8,
    preconditioning: str = "frobenius",
    nesterov: bool = False,
    consistent_rms: jax.typing.ArrayLike | None = None,
    variance_ratio: jax.typing.ArrayLike = _update_rules.VARIANCE_RATIO,
    prior_strength: jax.typing.ArrayLike = _update_rules.PRIOR_STRENGTH,
    kappa_g: jax.typing.ArrayLike = _update_rules.KAPPA_G,
    kappa_ghat: jax.typing.ArrayLike = _update_rules.KAPPA_GHAT,
    eps: jax.typing.ArrayLike = _update_rules.EPS,
    weight_decay: jax.typing.ArrayLike = 0.0,
    weight_decay_mask=None,
    vsgd_learning_rate: optax.ScalarOrSchedule | None = None,
    state_dtype: jax.typing.DTypeLike | None = None,
    state_rounding: str = "stochastic",
    seed: int | jax.Array = 0,
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
    >>> updates, state = opt.update({"w": jnp.eye(4, 3), "b": jnp.ones(3)}, state)
    >>> updates["w"].shape, updates["b"].shape
    ((4, 3), (3,))
  """
  if vsgd_learning_rate is None:
    vsgd_learning_rate = learning_rate
  scaling = scale_by_vsgd_muon(
      ns_coeffs=ns_coeffs, ns_steps=ns_steps, ns_eps=ns_eps, preconditioning=preconditioning,
      nesterov=nesterov, consistent_rms=consistent_rms, variance_ratio=variance_ratio,
      prior_strength=prior_strength, kappa_g=kappa_g, kappa_ghat=kappa_ghat, eps=eps,
      state_dtype=state_dtype, state_rounding=state_rounding, seed=seed)
  # As vsgd's chain: no decay needs no params (and checks the rate and the decay).
  matrices = _aliases.chain_with_decay(scaling, learning_rate, weight_decay, weight_decay_mask,
                                      state_type=_transforms.ScaleByVSGDState,
                                      optimizer="vsgd_muon")
  others = _aliases.vsgd(
      vsgd_learning_rate, variance_ratio=variance_ratio, prior_strength=prior_strength,
      kappa_g=kappa_g, kappa_ghat=kappa_ghat, eps=eps, weight_decay=weight_decay,
      weight_decay_mask=weight_decay_mask, state_dtype=state_dtype,
      state_rounding=state_rounding, seed=seed)
  partition = optax.partition({"muon": matrices, "vsgd": others}, _labels)

  def update_fn(updates, state, params=None, **extra_args):
    groups = getattr(state, "inner_states", None)
    if not (isinstance(groups, Mapping) and set(groups) == {"muon", "vsgd"}):
      raise TypeError(
          f"vsgd_muon's update got {_transforms.describe(state)}, not the state its init "
          "returns: optax.partition's state of a 'muon' and a 'vsgd' group. Pass the state "
          "made by vsgd_muon's init; another optimizer's state cannot continue here.")
    return partition.update(updates, state, params, **extra_args)

  return optax.GradientTransformationExtraArgs(partition.init, update_fn)

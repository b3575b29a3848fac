"""The package's input checks: a mistake fails in one line, before a step.

Hyperparameters are checked where they are plain numbers; arrays and tracers (as
``optax.inject_hyperparams`` passes them) are left alone, since reading a traced
value would fail under ``jit``. States are checked at trace time, free at run time.
"""

import math
import numbers
import typing
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _rounding

ROUNDINGS = typing.get_args(_rounding.Rounding)


def _is_boolean(value: Any) -> bool:
  dtype = getattr(value, "dtype", None)
  return isinstance(value, (bool, np.bool_)) or (dtype is not None and np.dtype(dtype) == np.bool_)


def _is_real_dtype(dtype) -> bool:
  return jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)


def _plain_number(name: str, value: Any) -> float | None:
  """``value`` as a float, or None for an array or tracer whose value is not known
  yet; a bool, a string or anything else that is no real number is refused.
  """
  if _is_boolean(value):
    raise TypeError(f"{name} must be a number, got the boolean {value!r}.")
  if isinstance(value, numbers.Real):
    return float(value)
  dtype = getattr(value, "dtype", None)
  if dtype is not None and _is_real_dtype(dtype):
    if isinstance(value, np.ndarray) and value.ndim == 0:
      return float(value)
    return None
  raise TypeError(f"{name} must be a number or a real scalar array, got {value!r}.")


def _check(name: str, value: Any, holds, wanted: str) -> None:
  x = _plain_number(name, value)
  if x is not None and not holds(x):  # NaN fails every comparison
    raise ValueError(f"{name} must {wanted}, got {value!r}.")


def check_positive(name: str, value: Any) -> None:
  _check(name, value, lambda x: math.isfinite(x) and x > 0, "be a finite number > 0")


def check_unit_interval(name: str, value: Any) -> None:
  _check(name, value, lambda x: 0.0 <= x <= 1.0, "lie in [0, 1]")


def check_non_negative(name: str, value: Any) -> None:
  _check(name, value, lambda x: x >= 0.0, "be >= 0")


def check_bool(name: str, value: Any) -> None:
  # A number here is most likely a momentum meant for Muon's ``beta``; it would
  # read as True and silently change the step.
  if not isinstance(value, (bool, np.bool_)):
    raise TypeError(f"{name} must be True or False, got {value!r}.")


def are_plain(*values: Any) -> bool:
  """Whether every value is a plain number, fixed when the optimizer is built."""
  return all(_plain_number("a hyperparameter", value) is not None for value in values)


def is_plain_zero(name: str, value: Any) -> bool:
  return _plain_number(name, value) == 0.0


def check_vsgd(*, variance_ratio, prior_strength, eps, state_dtype, state_rounding, seed,
               kappa_g=None, kappa_ghat=None, kappa=None) -> None:
  """VSGD's hyperparameters (Constant VSGD's ``kappa`` for the two) and its storage."""
  check_positive("variance_ratio", variance_ratio)
  check_positive("prior_strength", prior_strength)
  for name, value in (("kappa_g", kappa_g), ("kappa_ghat", kappa_ghat), ("kappa", kappa)):
    if value is not None:
      check_unit_interval(name, value)
  check_non_negative("eps", eps)
  _check_state_dtype(state_dtype, state_rounding)
  _check_seed(seed)


def check_learning_rate(value: Any, name: str = "learning_rate") -> None:
  """A finite number >= 0, a scalar array (injected) or a schedule (unchecked)."""
  if callable(value):
    return
  dtype = getattr(value, "dtype", None)
  if dtype is not None and not _is_boolean(value) and getattr(value, "shape", ()) != ():
    raise ValueError(f"{name} must be a scalar or an optax schedule, got an array of shape "
                     f"{tuple(value.shape)}.")
  _check(name, value, math.isfinite, "be a finite number or an optax schedule")
  _check(name, value, lambda x: x >= 0,
         "be >= 0 (for gradient ascent, chain optax.scale(-1.0) after the optimizer)")


def check_whole_number(name: str, value: Any, least: int) -> int | None:
  """A whole number >= ``least``, or None for an integer array whose value is not
  known yet (``inject_hyperparams`` under ``jit``).
  """
  if isinstance(value, (jax.Array, np.ndarray)) and np.ndim(value) == 0 and jnp.issubdtype(
      value.dtype, jnp.integer):
    try:
      value = int(value)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError):
      return None
  if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
      or value < least:
    raise ValueError(f"{name} must be a whole number >= {least}, got {value!r}.")
  return int(value)


def check_choice(name: str, value: Any, choices: tuple) -> None:
  if value not in choices:
    raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


def _check_state_dtype(state_dtype, state_rounding: Any) -> None:
  """A dtype that holds the rates (bfloat16's range at least), and a rounding for it."""
  if not isinstance(state_rounding, str):
    raise TypeError(f"state_rounding must be 'stochastic' or 'nearest', got {state_rounding!r}"
                    " (under optax.inject_hyperparams, name it in static_args).")
  check_choice("state_rounding", state_rounding, ROUNDINGS)
  if state_dtype is None:
    return
  if isinstance(state_dtype, (jax.Array, np.ndarray)):
    raise TypeError(f"state_dtype must be a dtype or None, got the array {state_dtype!r} "
                    "(under optax.inject_hyperparams, name it in static_args).")
  try:
    dtype = np.dtype(state_dtype)
  except TypeError as error:
    raise TypeError(f"state_dtype must be a dtype or None, got {state_dtype!r}.") from error
  if not jnp.issubdtype(dtype, jnp.floating) or dtype == np.float16 or dtype.itemsize < 2:
    raise ValueError(f"state_dtype must be bfloat16, float32 or wider, got {dtype}: the rates "
                     "stay near prior_strength (1e-8), which float16 cannot hold.")
  if _rounding.rounds_stochastically(dtype, state_rounding) and dtype != np.dtype(jnp.bfloat16):
    raise ValueError(f"state_dtype={dtype} has no stochastic rounding; use bfloat16, or pass "
                     "state_rounding='nearest'.")


def _check_seed(seed) -> None:
  """A whole number in [0, 2**32), or an integer scalar array (taken modulo 2**32)."""
  if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
    if not 0 <= int(seed) < 2 ** 32:
      raise ValueError(f"seed must lie in [0, 2**32), got {seed!r}.")
    return
  dtype = getattr(seed, "dtype", None)
  if dtype is None or not jnp.issubdtype(dtype, jnp.integer) or np.shape(seed) != ():
    raise TypeError(f"seed must be a whole number or an integer scalar array, got {seed!r}.")


def describe(state) -> str:
  """A state's type, or a tuple's types, for an error message."""
  if isinstance(state, tuple) and not hasattr(state, "_fields"):
    return "a tuple of (" + ", ".join(type(part).__name__ for part in state) + ")"
  return type(state).__name__


def check_state(state, expected: type, optimizer: str) -> None:
  if not isinstance(state, expected):
    raise TypeError(f"{optimizer}'s update got {describe(state)}, not the {expected.__name__} "
                    f"its init returns; pass the state made by {optimizer}'s init.")


def check_state_dtypes(moments: dict, state_dtype, optimizer: str) -> None:
  """Each state array in ``init``'s dtype: ``state_dtype``, or float32 or wider."""
  for path, leaf in jax.tree_util.tree_leaves_with_path(moments):
    dtype = np.dtype(leaf.dtype)
    if state_dtype is None:
      wrong = not (jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize >= 4)
    else:
      wrong = dtype != np.dtype(state_dtype)
    if wrong:
      raise TypeError(
          f"{optimizer}'s update got a state whose {jax.tree_util.keystr(path)} is {dtype}, "
          f"not what its init makes for state_dtype={state_dtype}; pass a state made by an "
          "optimizer with the same state_dtype.")


def check_real_floating(tree, what: str) -> None:
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    dtype = jnp.result_type(leaf)
    if jnp.issubdtype(dtype, jnp.complexfloating):
      raise TypeError(f"VSGD does not support complex {what} ({jax.tree_util.keystr(path)} is "
                      f"{dtype}); optimize the real and imaginary parts as two real ones.")
    if not jnp.issubdtype(dtype, jnp.floating):
      raise TypeError(
          f"VSGD needs real floating-point {what}; {jax.tree_util.keystr(path)} has dtype "
          f"{dtype}. Exclude it with optax.masked or multi_transform.")


def check_matches_state(updates, mu) -> None:
  """The gradients have the tree and shapes of the params that ``init`` saw."""
  if jax.tree.structure(updates) != jax.tree.structure(mu):  # type: ignore[operator]
    got = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(updates)}
    held = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(mu)}
    raise ValueError(
        f"update got gradients whose tree is not the params' init was given (only in the "
        f"gradients: {sorted(got - held)}; only in the state: {sorted(held - got)}); pass "
        "gradients of the same params, or init again.")
  wrong = [f"{jax.tree_util.keystr(path)} {np.shape(g)} (init: {np.shape(m)})"
           for (path, g), m in zip(jax.tree_util.tree_leaves_with_path(updates),
                                   jax.tree.leaves(mu), strict=True)
           if np.shape(g) != np.shape(m)]
  if wrong:
    raise ValueError(f"update got gradients of other shapes than the params init was given: "
                     f"{', '.join(wrong)}; pass gradients of the same params, or init again.")


def check_decay_has_params(optimizer: str, weight_decay, params) -> None:
  """An update that decays needs the params; optax's own error names no cause."""
  if params is None:
    raise ValueError(
        f"{optimizer}'s update needs params to decay them (weight_decay); pass params to update "
        "(under inject_hyperparams without decay, name 'weight_decay' in static_args).")


def check_chain_state(state, state_type: type, optimizer: str) -> None:
  """The state of ``_aliases.chain_with_decay``: (``state_type``, decay's, rate's)."""
  if not (isinstance(state, tuple) and len(state) == 3 and isinstance(state[0], state_type)):
    raise TypeError(
        f"{optimizer}'s update got {describe(state)}, not the ({state_type.__name__}, decay, "
        f"learning rate) states its init returns; pass the state made by {optimizer}'s init.")


def check_newton_schulz(ns_coeffs, ns_steps, ns_eps) -> None:
  """Muon's Newton-Schulz coefficients (a triple, or one triple a step), steps and eps."""
  steps = check_whole_number("ns_steps", ns_steps, 1)
  try:
    coeffs = np.asarray(ns_coeffs, np.float64)
  except (TypeError, ValueError) as error:
    raise ValueError(f"ns_coeffs must be three numbers (a, b, c) or a sequence of such "
                     f"triples, got {ns_coeffs!r}.") from error
  if coeffs.ndim not in (1, 2) or coeffs.shape[-1] != 3 or not np.all(np.isfinite(coeffs)):
    raise ValueError(f"ns_coeffs must be three finite numbers (a, b, c) or a sequence of "
                     f"such triples, got shape {coeffs.shape}.")
  if coeffs.ndim == 2 and steps is not None and not 1 <= coeffs.shape[0] <= steps:
    raise ValueError(f"ns_coeffs has {coeffs.shape[0]} triples, one a step; ns_steps "
                     f"({steps}) must be at least that many.")
  check_non_negative("ns_eps", ns_eps)


def check_batch_size(batch_size: Any) -> int:
  """The number of examples in each mini-batch a noise scale's state saw."""
  if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
    raise TypeError(f"batch_size must be a positive int, got {batch_size!r}.")
  if batch_size < 1:
    raise ValueError(f"batch_size must be a positive int, got {batch_size}.")
  return int(batch_size)


def is_empty(node) -> bool:
  """``None`` (Equinox's filtered leaves) or ``optax.MaskedNode``: an empty subtree."""
  return node is None or isinstance(node, optax.MaskedNode)

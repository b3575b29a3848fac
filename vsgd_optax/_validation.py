"""Eager checks of hyperparameters, so that a typo fails at construction.

Only plain Python / NumPy numbers are checked: arrays and tracers (as
``optax.inject_hyperparams`` passes them) are left alone, because inspecting a
traced value would force a host sync or fail under ``jit``.
"""

import math
import numbers
from typing import Any

import jax.numpy as jnp
import numpy as np

from vsgd_optax import _update_rules


def _is_boolean(value: Any) -> bool:
  """A Python or NumPy bool, or an array of booleans (a tracer's dtype is known too)."""
  dtype = getattr(value, "dtype", None)
  return isinstance(value, (bool, np.bool_)) or (dtype is not None and np.dtype(dtype) == np.bool_)


def _is_real_dtype(dtype) -> bool:
  return jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating)


def _plain_number(name: str, value: Any) -> float | None:
  """``value`` as a float where it is a plain number, None where it is an array
  or a tracer whose value is not known yet; a bool, a boolean array, a string
  or anything else that is no number is refused, since ``float`` would take
  ``True`` as 1.0 and ``'30'`` as 30.0 and train on them.
  """
  if _is_boolean(value):
    raise TypeError(f"{name} must be a number, got the boolean {value!r}.")
  if isinstance(value, numbers.Real):
    return float(value)
  dtype = getattr(value, "dtype", None)
  if dtype is not None and _is_real_dtype(dtype):
    if isinstance(value, np.ndarray) and value.ndim == 0:
      return float(value)
    return None  # an array or a tracer (inject_hyperparams): its value is not known yet
  raise TypeError(f"{name} must be a number or a real scalar array, got {value!r} of type "
                  f"{type(value).__name__}.")


def check_positive(name: str, value: Any) -> None:
  x = _plain_number(name, value)
  if x is not None and not (math.isfinite(x) and x > 0):
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")


def check_unit_interval(name: str, value: Any) -> None:
  x = _plain_number(name, value)
  if x is not None and not 0.0 <= x <= 1.0:  # NaN fails both comparisons
    raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")


def check_non_negative(name: str, value: Any) -> None:
  x = _plain_number(name, value)
  if x is not None and not (x >= 0.0):
    raise ValueError(f"{name} must be >= 0 and not NaN, got {value!r}.")


def check_learning_rate(value: Any) -> None:
  """A rate is a finite number >= 0, a scalar array (injected), or a schedule (a
  callable). A schedule's values are not checked: they are known only as it runs.
  """
  if callable(value):
    return  # a schedule
  if _is_boolean(value):
    raise TypeError(f"learning_rate must be a number or an optax schedule, got the boolean "
                    f"{value!r}.")
  dtype = getattr(value, "dtype", None)
  if dtype is not None and getattr(value, "shape", ()) != ():
    raise ValueError(
        f"learning_rate must be a scalar, got an array of shape {tuple(value.shape)}; pass "
        "one number, or an optax schedule for a rate that changes with the step.")
  if not isinstance(value, numbers.Real) and not (dtype is not None and _is_real_dtype(dtype)):
    raise TypeError(
        f"learning_rate must be a number or an optax schedule (a function of the step "
        f"count), got {value!r} of type {type(value).__name__}.")
  x = _plain_number("learning_rate", value)
  if x is None:
    return  # a scalar array or a tracer (inject_hyperparams): its value is not known yet
  if not math.isfinite(x):
    raise ValueError(
        f"learning_rate must be a finite number or a schedule, got {value!r}.")
  if x < 0:
    raise ValueError(
        f"learning_rate must be >= 0, got {value!r}: a negative rate climbs the loss. "
        "For gradient ascent, chain optax.scale(-1.0) after the optimizer.")


def are_plain(*values: Any) -> bool:
  """Whether every value is a plain number, fixed when the optimizer is built;
  not an array or a tracer, as ``optax.inject_hyperparams`` passes, which a user
  may change between steps (values checked already).
  """
  return all(_plain_number("a hyperparameter", value) is not None for value in values)


def is_plain_zero(name: str, value: Any) -> bool:
  """Whether ``value`` is a plain number equal to 0 (never true of a traced
  or injected value, whose value is unknown when the optimizer is built).
  """
  return _plain_number(name, value) == 0.0


# VSGD's hyperparameters, one row each: the default of every signature that
# takes it, its check, and the name the update rules give it (the paper's
# symbol). vsgd, constant_vsgd, factored_vsgd and vsgd_muon all read it.
VSGD_HYPERPARAMS = {
    "variance_ratio": (_update_rules.VARIANCE_RATIO, check_positive, "K"),
    "prior_strength": (_update_rules.PRIOR_STRENGTH, check_positive, "gamma"),
    "kappa_g": (_update_rules.KAPPA_G, check_unit_interval, "kappa_g"),
    "kappa_ghat": (_update_rules.KAPPA_GHAT, check_unit_interval, "kappa_ghat"),
    "kappa": (_update_rules.KAPPA_GHAT, check_unit_interval, "kappa"),  # Constant VSGD's one
    "eps": (_update_rules.EPS, check_non_negative, "eps"),
}


def vsgd_hyperparams(**given: Any) -> dict[str, Any]:
  """VSGD's hyperparameters, given by keyword under their public names and
  checked (``VSGD_HYPERPARAMS``), under the names the update rules take.
  """
  rule_names = {}
  for name, value in given.items():
    _, check, symbol = VSGD_HYPERPARAMS[name]
    check(name, value)
    rule_names[symbol] = value
  return rule_names

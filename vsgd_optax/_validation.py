"""Eager checks of hyperparameters, so that a typo fails at construction.

Only plain Python / NumPy numbers are checked: arrays and tracers (as
``optax.inject_hyperparams`` passes them) are left alone, because inspecting a
traced value would force a host sync or fail under ``jit``.
"""

import math
import numbers
from typing import Any

import numpy as np


def _plain_number(value: Any) -> float | None:
  if isinstance(value, bool):
    return float(value)
  if isinstance(value, numbers.Real):
    return float(value)
  if isinstance(value, np.ndarray) and value.ndim == 0 and np.isrealobj(value):
    return float(value)
  return None


def check_positive(name: str, value: Any) -> None:
  x = _plain_number(value)
  if x is not None and not (math.isfinite(x) and x > 0):
    raise ValueError(f"{name} must be a finite number > 0, got {value!r}.")


def check_unit_interval(name: str, value: Any) -> None:
  x = _plain_number(value)
  if x is not None and not 0.0 <= x <= 1.0:  # NaN fails both comparisons
    raise ValueError(f"{name} must lie in [0, 1], got {value!r}.")


def check_non_negative(name: str, value: Any) -> None:
  x = _plain_number(value)
  if x is not None and not (x >= 0.0):
    raise ValueError(f"{name} must be >= 0 and not NaN, got {value!r}.")


def check_learning_rate(value: Any) -> None:
  """A rate is a finite number >= 0, a scalar array (injected), or a schedule (a
  callable). A schedule's values are not checked: they are known only as it runs.
  """
  if callable(value):
    return  # a schedule
  if isinstance(value, (bool, np.bool_)):
    raise TypeError(f"learning_rate must be a number or an optax schedule, got the bool {value!r}.")
  x = _plain_number(value)
  if x is None and hasattr(value, "dtype"):
    if getattr(value, "shape", ()) != ():
      raise ValueError(
          f"learning_rate must be a scalar, got an array of shape {tuple(value.shape)}; pass "
          "one number, or an optax schedule for a rate that changes with the step.")
    return  # a scalar array or a tracer (inject_hyperparams): its value is not known yet
  if x is None:
    raise TypeError(
        f"learning_rate must be a number or an optax schedule (a function of the step "
        f"count), got {value!r} of type {type(value).__name__}.")
  if not math.isfinite(x):
    raise ValueError(
        f"learning_rate must be a finite number or a schedule, got {value!r}.")
  if x < 0:
    raise ValueError(
        f"learning_rate must be >= 0, got {value!r}: a negative rate climbs the loss. "
        "For gradient ascent, chain optax.scale(-1.0) after the optimizer.")


def is_plain_zero(value: Any) -> bool:
  """Whether ``value`` is a plain number equal to 0 (never true of a traced
  or injected value, whose value is unknown when the optimizer is built).
  """
  return _plain_number(value) == 0.0

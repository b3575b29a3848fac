"""Every input check of the package, so that a mistake fails in one line, before a step.

Hyperparameters are checked where they are plain Python or NumPy numbers:
arrays and tracers (as ``optax.inject_hyperparams`` passes them) are left
alone, because inspecting a traced value would force a host sync or fail under
``jit``. States are checked at trace time (their types, dtypes and shapes are
known then), so the checks cost nothing when the step runs.
"""

import math
import numbers
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vsgd_optax import _rounding

ROUNDINGS = ("stochastic", "nearest")
_WORD = 2 ** 32


# Numbers.

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


def check_vsgd_hyperparams(*, variance_ratio, prior_strength, eps, kappa_g=None,
                           kappa_ghat=None, kappa=None) -> None:
  """VSGD's hyperparameters (Constant VSGD's one ``kappa`` in place of the two)."""
  check_positive("variance_ratio", variance_ratio)
  check_positive("prior_strength", prior_strength)
  for name, value in (("kappa_g", kappa_g), ("kappa_ghat", kappa_ghat), ("kappa", kappa)):
    if value is not None:
      check_unit_interval(name, value)
  check_non_negative("eps", eps)


def check_learning_rate(value: Any, name: str = "learning_rate") -> None:
  """A rate is a finite number >= 0, a scalar array (injected), or a schedule (a
  callable). A schedule's values are not checked: they are known only as it runs.
  """
  if callable(value):
    return  # a schedule
  if _is_boolean(value):
    raise TypeError(f"{name} must be a number or an optax schedule, got the boolean "
                    f"{value!r}.")
  dtype = getattr(value, "dtype", None)
  if dtype is not None and getattr(value, "shape", ()) != ():
    raise ValueError(
        f"{name} must be a scalar, got an array of shape {tuple(value.shape)}; pass "
        "one number, or an optax schedule for a rate that changes with the step.")
  if not isinstance(value, numbers.Real) and not (dtype is not None and _is_real_dtype(dtype)):
    raise TypeError(
        f"{name} must be a number or an optax schedule (a function of the step "
        f"count), got {value!r} of type {type(value).__name__}.")
  x = _plain_number(name, value)
  if x is None:
    return  # a scalar array or a tracer (inject_hyperparams): its value is not known yet
  if not math.isfinite(x):
    raise ValueError(f"{name} must be a finite number or a schedule, got {value!r}.")
  if x < 0:
    raise ValueError(
        f"{name} must be >= 0, got {value!r}: a negative rate climbs the loss. "
        "For gradient ascent, chain optax.scale(-1.0) after the optimizer.")


def check_whole_number(name: str, value: Any, least: int, why: str) -> int | None:
  """A whole number >= ``least``: the number, or None where it is an integer array
  whose value is not known yet (``inject_hyperparams`` under ``jit``). ``why``
  says what the number sets, for the message.
  """
  if isinstance(value, (jax.Array, np.ndarray)) and np.ndim(value) == 0 and _is_real_dtype(
      value.dtype) and jnp.issubdtype(value.dtype, jnp.integer):
    try:
      value = int(value)  # an injected array whose value is known (outside jit)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError):
      return None
  if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
      or value < least:
    raise ValueError(f"{name} must be a whole number >= {least} ({why}), got {value!r}.")
  return int(value)


def check_choice(name: str, value: Any, choices: tuple) -> None:
  if value not in choices:
    raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


# The state's storage.

def check_rounding(rounding: Any) -> None:
  if not isinstance(rounding, str):
    raise TypeError(f"state_rounding must be 'stochastic' or 'nearest', got {rounding!r}; "
                    "under optax.inject_hyperparams it is passed through as it is.")
  if rounding not in ROUNDINGS:
    raise ValueError(f"state_rounding must be 'stochastic' or 'nearest', got {rounding!r}.")


def check_state_dtype(state_dtype, state_rounding: Any) -> None:
  """A state dtype that can hold the rates (at least bfloat16's range; not
  float16), and a rounding that can store it (stochastic rounding is bfloat16's).
  """
  check_rounding(state_rounding)
  if state_dtype is None:
    return
  if isinstance(state_dtype, (jax.Array, np.ndarray)):  # inject_hyperparams made it a value
    raise TypeError(
        f"state_dtype must be a dtype (such as jnp.bfloat16) or None, got the array "
        f"{state_dtype!r}. It sets the state's dtype, so it cannot be a hyperparameter: under "
        "optax.inject_hyperparams, name it in static_args=('state_dtype',).")
  try:
    dtype = np.dtype(state_dtype)
  except TypeError as error:
    raise TypeError(f"state_dtype must be a dtype (such as jnp.bfloat16) or None, got "
                    f"{state_dtype!r}.") from error
  if not jnp.issubdtype(dtype, jnp.floating):
    raise ValueError(f"state_dtype must be a real floating dtype, got {dtype}.")
  if dtype == np.float16 or dtype.itemsize < 2:
    raise ValueError(
        f"state_dtype={dtype} cannot hold b_g and b_ghat, which stay near "
        "prior_strength (1e-8) and underflow to zero in it; use bfloat16, "
        "float32 or None.")
  if _rounding.rounds_stochastically(dtype, state_rounding) and dtype != np.dtype(jnp.bfloat16):
    raise ValueError(
        f"state_dtype={dtype} has no stochastic rounding here; use "
        "bfloat16 or float32, or pass state_rounding='nearest' to round to nearest.")


def check_seed(seed) -> None:
  """A seed is a whole number in [0, 2**32) or an integer scalar array (traced
  under ``vmap``, say), whose value is taken modulo 2**32.
  """
  if isinstance(seed, bool):
    raise TypeError(f"seed must be a whole number or an integer scalar array, got {seed!r}.")
  if isinstance(seed, (int, np.integer)):
    if not 0 <= int(seed) < _WORD:
      raise ValueError(f"seed must lie in [0, 2**32), got {seed!r}.")
    return
  dtype, shape = getattr(seed, "dtype", None), getattr(seed, "shape", None)
  if dtype is None or not jnp.issubdtype(dtype, jnp.integer) or shape != ():
    raise TypeError(f"seed must be a whole number or an integer scalar array, got {seed!r}.")


def check_storage(state_dtype, state_rounding, seed) -> None:
  check_state_dtype(state_dtype, state_rounding)
  check_seed(seed)


# Trees and states, at trace time.

def describe(state) -> str:
  """A state's type, or a tuple's types, in a few words for an error message."""
  if isinstance(state, tuple) and not hasattr(state, "_fields"):
    return "a tuple of (" + ", ".join(type(part).__name__ for part in state) + ")"
  return type(state).__name__


def check_state(state, expected: type, optimizer: str) -> None:
  """The state must be the one ``optimizer``'s ``init`` makes: another
  optimizer's state is refused, not read field by field.
  """
  if not isinstance(state, expected):
    raise TypeError(
        f"{optimizer}'s update got {describe(state)}, not the {expected.__name__} that its init "
        f"returns; pass the state made by {optimizer}'s init (a state of another optimizer, or "
        "of another dtype, cannot continue here).")


def check_state_dtypes(moments: dict, state_dtype, optimizer: str) -> None:
  """Each state array in the dtype that ``init`` gives it: ``state_dtype``, or at
  least float32 where it is None. A state of another dtype (a bfloat16
  checkpoint handed to a float32 optimizer, say) is refused, never kept.
  """
  for path, leaf in jax.tree_util.tree_leaves_with_path(moments):
    if not path or path[0] == jax.tree_util.DictKey("count"):
      continue  # the step count is int32 whatever the state's dtype
    dtype = np.dtype(leaf.dtype)
    if state_dtype is None:
      wrong = not (jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize >= 4)
      wanted = "float32 or wider (state_dtype=None)"
    else:
      wrong = dtype != np.dtype(state_dtype)
      wanted = f"{np.dtype(state_dtype)} (state_dtype)"
    if wrong:
      raise TypeError(
          f"{optimizer}'s update got a state whose {jax.tree_util.keystr(path)} is {dtype}, "
          f"where its init makes {wanted}; pass a state made by an optimizer with the same "
          "state_dtype, or init again.")


def check_real_floating(tree, what: str) -> None:
  for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
    dtype = jnp.result_type(leaf)
    if jnp.issubdtype(dtype, jnp.complexfloating):
      raise TypeError(
          f"VSGD does not support complex {what} ({jax.tree_util.keystr(path)}"
          f" has dtype {dtype}): its Gaussian model is for real gradients. "
          "Optimize the real and imaginary parts as separate real parameters.")
    if not jnp.issubdtype(dtype, jnp.floating):
      raise TypeError(
          f"VSGD needs floating-point {what}; {jax.tree_util.keystr(path)} has "
          f"dtype {dtype}. Exclude it with optax.masked or multi_transform.")


def check_matches_state(updates, mu) -> None:
  """The gradients must have the tree and shapes of the params that ``init`` saw."""
  structure, held_structure = jax.tree.structure(updates), jax.tree.structure(mu)
  if structure != held_structure:  # type: ignore[operator]  # PyTreeDef compares; its stub says not
    got = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(updates)}
    held = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(mu)}
    differ = "; ".join(part for part in (
        f"only in the gradients: {', '.join(sorted(got - held))}" if got - held else "",
        f"only in the state: {', '.join(sorted(held - got))}" if held - got else "") if part)
    raise ValueError(
        "update got gradients whose tree is not that of the params init was given ("
        + (differ or f"{structure} against {held_structure}")
        + "); pass gradients of the same params, or init the optimizer again.")
  wrong = [f"{jax.tree_util.keystr(path)} {np.shape(g)} (init: {np.shape(m)})"
           for (path, g), m in zip(jax.tree_util.tree_leaves_with_path(updates),
                                   jax.tree.leaves(mu), strict=True)
           if np.shape(g) != np.shape(m)]
  if wrong:
    raise ValueError("update got gradients of other shapes than the params init was given: "
                     + ", ".join(wrong) + "; pass gradients of the same params, or init the "
                     "optimizer again.")


def check_decay_has_params(optimizer: str, weight_decay, params) -> None:
  """An update that decays needs the params; optax's own error names no cause."""
  if params is not None:
    return
  # optax.inject_hyperparams passes every number as an array, the default 0.0
  # included, and an array's value is unknown when the chain is built.
  given = (f"weight_decay={weight_decay!r}" if are_plain(weight_decay)
           else "weight_decay is an array (optax.inject_hyperparams makes every number "
                "one, the default 0.0 included), whose value is unknown until the step runs")
  raise ValueError(
      f"{optimizer}'s update needs params to decay them: {given}. Pass params to "
      "update; under inject_hyperparams without decay, name 'weight_decay' in "
      "static_args instead.")


def check_chain_state(state, state_type: type, optimizer: str) -> None:
  """The state of an optimizer that chains ``state_type``'s scaling, the decay and
  the rate (``_aliases.chain_with_decay``); another optimizer's state would
  otherwise meet optax's "called init first!" or a missing field.
  """
  if not (isinstance(state, tuple) and len(state) == 3 and isinstance(state[0], state_type)):
    raise TypeError(
        f"{optimizer}'s update got {describe(state)}, not the state its init returns: a "
        f"tuple of ({state_type.__name__}, the decay's state, the learning rate's state). "
        f"Pass the state made by {optimizer}'s init; another optimizer's state cannot "
        "continue here.")


# VSGD-Muon's and the noise-scale read-outs' own arguments.

def check_newton_schulz(ns_coeffs, ns_steps, ns_eps) -> None:
  """Muon's Newton-Schulz coefficients (a triple, or one triple a step), steps and eps."""
  steps = check_whole_number("ns_steps", ns_steps, 1, "the Newton-Schulz steps")
  try:
    coeffs = np.asarray(ns_coeffs, np.float64)
  except (TypeError, ValueError) as error:
    raise ValueError("ns_coeffs must be three numbers (a, b, c) or a sequence of such "
                     f"triples, one a Newton-Schulz step; got {ns_coeffs!r}.") from error
  if coeffs.ndim not in (1, 2) or coeffs.shape[-1] != 3 or not np.all(np.isfinite(coeffs)):
    raise ValueError("ns_coeffs must be three finite numbers (a, b, c) or a sequence of such "
                     f"triples, one a Newton-Schulz step; got shape {coeffs.shape}.")
  if coeffs.ndim == 2 and steps is not None and not 1 <= coeffs.shape[0] <= steps:
    raise ValueError(f"ns_coeffs has {coeffs.shape[0]} triples, one a step; ns_steps "
                     f"({steps}) must be at least that many (optax's scale_by_muon rule).")
  check_non_negative("ns_eps", ns_eps)


def check_batch_size(batch_size: Any) -> int:
  """The number of examples in each mini-batch a noise scale's state saw."""
  if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)):
    raise TypeError(
        f"batch_size must be a positive int, the number of examples in each mini-batch the "
        f"optimizer saw; got {batch_size!r} of type {type(batch_size).__name__}.")
  if batch_size < 1:
    raise ValueError(
        f"batch_size must be a positive int, the number of examples in each mini-batch the "
        f"optimizer saw; got {batch_size}.")
  return int(batch_size)


def is_empty(node) -> bool:
  """``None`` (Equinox's filtered leaves) or ``optax.MaskedNode``: an empty subtree."""
  return node is None or isinstance(node, optax.MaskedNode)

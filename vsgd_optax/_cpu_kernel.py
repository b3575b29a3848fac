"""The compiled XLA:CPU loop of one VSGD or Constant VSGD step.

``_cpu_kernel.cc`` is built with the package (``setup.py``) into the Python
module ``_cpu_kernel_lib``, whose handlers are registered here as XLA FFI
targets. ``_lowering.py`` emits calls to them on XLA:CPU. ``AVAILABLE`` is
False when the module was not built (no C++17 compiler at install time), was
built against a newer jaxlib than the one installed, or this JAX cannot
register it; XLA:CPU then gets the steps written in JAX, and the first step
compiled for it warns once (``warn_unavailable``).
"""

from __future__ import annotations

import importlib.metadata
import re
import warnings

import jax
import numpy as np

_TARGETS = {
    # (optimizer, dtype): the handler's name in _cpu_kernel_lib
    ("vsgd", np.dtype(np.float32)): "vsgd_f32",
    ("vsgd", np.dtype(np.float64)): "vsgd_f64",
    ("constant_vsgd", np.dtype(np.float32)): "constant_vsgd_f32",
    ("constant_vsgd", np.dtype(np.float64)): "constant_vsgd_f64",
}


def _register() -> str | None:
  """Registers the handlers; returns why not, or None when it worked."""
  try:
    from vsgd_optax import _cpu_kernel_lib  # pylint: disable=g-import-not-at-top
  except ImportError as error:
    return f"vsgd_optax._cpu_kernel_lib was not built ({error})."
  # The XLA FFI accepts handlers built against older headers, not newer ones.
  built_with = _cpu_kernel_lib.built_with_jaxlib
  running = importlib.metadata.version("jaxlib")
  if _release(running) < _release(built_with):
    return (f"vsgd_optax._cpu_kernel_lib was built against jaxlib {built_with}"
            f" and jaxlib {running} is installed; reinstall vsgd-optax with "
            "pip's --no-build-isolation to build it against this jaxlib.")
  try:
    for handler in _TARGETS.values():
      jax.ffi.register_ffi_target(_target_name(handler),
                                  getattr(_cpu_kernel_lib, handler),
                                  platform="cpu")
  except Exception as error:  # pylint: disable=broad-except
    return f"this JAX cannot register XLA FFI handlers ({error!r})."
  return None


def _release(version: str) -> tuple[int, ...]:
  """The leading numbers of a version: "0.10.2.dev20261101" -> (0, 10, 2)."""
  numbers = re.match(r"[0-9]+(\.[0-9]+)*", version)
  return tuple(int(n) for n in numbers.group().split(".")) if numbers else ()


def _target_name(handler: str) -> str:
  return f"vsgd_optax_{handler}"


UNAVAILABLE_BECAUSE = _register()
AVAILABLE = UNAVAILABLE_BECAUSE is None


def warn_unavailable() -> None:
  """Says once per process that XLA:CPU steps run without the loop."""
  global _warned
  if not AVAILABLE and not _warned:
    _warned = True
    warnings.warn(
        "vsgd_optax: the compiled XLA:CPU loop is unavailable, so VSGD steps "
        "on the CPU take the slower form written in JAX (1.6-3.5x Adam's step "
        f"time instead of 0.9-1.3x). {UNAVAILABLE_BECAUSE}", RuntimeWarning,
        stacklevel=2)


_warned = False


def supports(dtype) -> bool:
  return AVAILABLE and np.dtype(dtype) in (np.float32, np.float64)


def step(optimizer: str, arrays, scalars, *, K: float, gamma: float,
         eps: float, write_over: tuple[bool, ...]):
  """One step of ``optimizer`` ("vsgd" or "constant_vsgd") for one array.

  Args:
    arrays: ``(g, mu, b_g, b_ghat)`` for VSGD, ``(g, mu, b_ghat)`` for
      Constant VSGD, all of one shape and of dtype float32 or float64.
    scalars: the step's scalars, ``(first, rho_g, rho_ghat)`` or
      ``(first, rho)``; cast to the arrays' dtype.
    write_over: for each array, whether its output (the direction for ``g``,
      the new state for the state) is written over it. XLA first copies an
      array that is still needed elsewhere, so this is right whatever the
      buffers, and free when the array is donated or dead after the step.

  Returns:
    The direction and the new state, in the order of ``arrays[1:]``.
  """
  g = arrays[0]
  like_g = jax.ShapeDtypeStruct(g.shape, g.dtype)
  call = jax.ffi.ffi_call(
      _target_name(_TARGETS[optimizer, np.dtype(g.dtype)]),
      (like_g,) * len(arrays),
      input_output_aliases={i: i for i, w in enumerate(write_over) if w})
  scalars = tuple(s.astype(g.dtype) for s in scalars)
  return tuple(call(*arrays, *scalars, K=np.float64(K), gamma=np.float64(gamma),
                    eps=np.float64(eps)))

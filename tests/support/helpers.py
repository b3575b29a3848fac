"""Shared test inputs: the optimizers under test, small params and gradients, a loop.

Written once here so that the drop-in and integration tests feed the same
values to every optimizer; the seeds are part of each test's data.
"""

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import optax

import vsgd_optax
from vsgd_optax import experimental

DIMS = optax.contrib.MuonDimensionNumbers


def _factoring_at_three(factory):
  """``factory`` with a threshold at which ``make_params()``'s 3 x 4 leaf factors
  and its vector does not, so that both paths are exercised. Its signature is
  the optimizer's, with that threshold as the default, so that
  ``optax.inject_hyperparams`` and signature readers see the real one.
  """
  def with_threshold(learning_rate, **kwargs):
    kwargs.setdefault("min_dim_size_to_factor", 3)
    return factory(learning_rate, **kwargs)
  signature = inspect.signature(factory)
  with_threshold.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
      p.replace(default=3) if p.name == "min_dim_size_to_factor" else p
      for p in signature.parameters.values()])
  with_threshold.__annotations__ = dict(factory.__annotations__)
  with_threshold.__name__ = with_threshold.__qualname__ = factory.__name__
  return with_threshold


def _vsgd_muon_factoring_at_three(learning_rate, **kwargs):
  return vsgd_optax.vsgd_muon(learning_rate, min_dim_size_to_factor=3, **kwargs)


factored_vsgd = _factoring_at_three(experimental.factored_vsgd)
# vsgd_muon with its matrices' rates kept as row and column means. The threshold
# is fixed and left out of the signature: it sets the state's shapes, so
# optax.inject_hyperparams, which traces every number it sees, must not see it.
factored_vsgd_muon = _vsgd_muon_factoring_at_three
_signature = inspect.signature(vsgd_optax.vsgd_muon)
factored_vsgd_muon.__signature__ = _signature.replace(parameters=[  # type: ignore[attr-defined]
    p for p in _signature.parameters.values() if p.name != "min_dim_size_to_factor"])
factored_vsgd_muon.__name__ = "vsgd_muon"

FACTORIES = [vsgd_optax.vsgd, vsgd_optax.constant_vsgd, factored_vsgd]


def _form(factory, **fixed):
  """``factory`` with ``fixed`` given, under the factory's name; its signature is
  the factory's with the fixed arguments as defaults, as ``inject_hyperparams``
  reads it (not ``__wrapped__``'s, whose defaults would override them).
  """
  form = functools.partial(factory, **fixed)
  form.__name__ = factory.__name__  # type: ignore[attr-defined]
  return form


# Every optimizer of the package, each form of vsgd_muon, and optax.adam beside
# them: what the shared drop-in sweep (tests/core/test_common.py) and the Flax
# NNX loop (tests/examples/test_flax_nnx.py) run alike.
DROP_IN = {
    "vsgd": vsgd_optax.vsgd, "constant_vsgd": vsgd_optax.constant_vsgd,
    "factored_vsgd": factored_vsgd, "vsgd_muon": vsgd_optax.vsgd_muon,
    "vsgd_muon_factored": factored_vsgd_muon,
    "vsgd_muon_full": _form(vsgd_optax.vsgd_muon, min_dim_size_to_factor=None),
    "adam": optax.adam,
}


def make_params():
  """Two leaves of different shapes and non-zero values."""
  return {"w": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "b": jnp.full((4,), 0.5)}


def make_grads(i):
  """Step ``i``'s gradients: standard normal, seeded by the step, like the params."""
  rng = np.random.default_rng(100 + i)
  return jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape), p.dtype), make_params())


def run(opt, steps=4, params=None, grads=make_grads, jit=False, **update_kwargs):
  """``steps`` updates applied to ``params`` (default ``make_params()``).

  Returns:
    ``(params, state)`` after the last step.
  """
  params = make_params() if params is None else params
  state = opt.init(params)
  update = jax.jit(opt.update) if jit else opt.update
  for i in range(steps):
    updates, state = update(grads(i), state, params, **update_kwargs)
    params = optax.apply_updates(params, updates)
  return params, state

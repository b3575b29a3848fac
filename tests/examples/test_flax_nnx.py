"""Flax NNX's ``nnx.Optimizer`` drives ``vsgd`` and ``factored_vsgd`` as a plain
optax loop does.

The core's drop-in tests (``tests/core/test_trees_and_params.py`` and
``tests/core/test_jax_transformations.py``) need no Flax; this one does, so it
runs with the examples' dependencies.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import vsgd_optax
from vsgd_optax import experimental

# The 3 x 2 kernel factors at a threshold of 2; the bias does not.
FACTORED = functools.partial(experimental.factored_vsgd, min_dim_size_to_factor=2)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, FACTORED], ids=["vsgd", "factored_vsgd"])
def test_flax_nnx_optimizer_matches_a_plain_optax_loop(factory):
  model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
  optimizer = nnx.Optimizer(model, factory(0.05), wrt=nnx.Param)
  x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
  y = jnp.arange(8.0).reshape(4, 2) / 8

  def loss(m):
    return jnp.mean((m(x) - y) ** 2)

  _, params = nnx.split(model, nnx.Param)
  params = nnx.to_pure_dict(params)
  opt = factory(0.05)
  state = opt.init(params)
  plain_loss = lambda p: jnp.mean((x @ p["kernel"] + p["bias"] - y) ** 2)

  @nnx.jit
  def step(model, optimizer):
    grads = nnx.grad(loss)(model)
    optimizer.update(model, grads)

  for _ in range(5):
    step(model, optimizer)
    updates, state = opt.update(jax.grad(plain_loss)(params), state, params)
    params = optax.apply_updates(params, updates)
  np.testing.assert_allclose(model.kernel[...], params["kernel"], rtol=1e-6)
  np.testing.assert_allclose(model.bias[...], params["bias"], rtol=1e-6)

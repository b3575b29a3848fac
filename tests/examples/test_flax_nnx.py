"""Flax NNX's ``nnx.Optimizer`` drives every optimizer of the drop-in sweep (each
form of ``vsgd_muon`` included) as a plain optax loop does, and ``vsgd_muon``'s
dimension numbers in every form a user writes them.

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
from tests.support.helpers import DIMS
from tests.support.helpers import DROP_IN


@pytest.mark.parametrize("name", sorted(DROP_IN))
def test_flax_nnx_optimizer_matches_a_plain_optax_loop(name):
  # The 3 x 4 kernel factors at the drop-in forms' threshold of 3; the bias does not.
  factory = DROP_IN[name]
  model = nnx.Linear(3, 4, rngs=nnx.Rngs(0))
  optimizer = nnx.Optimizer(model, factory(0.05), wrt=nnx.Param)
  x = jnp.linspace(-1.0, 1.0, 12).reshape(4, 3)
  y = jnp.arange(16.0).reshape(4, 4) / 16

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
    updates, state = jax.jit(opt.update)(jax.grad(plain_loss)(params), state, params)
    params = optax.apply_updates(params, updates)
  np.testing.assert_allclose(model.kernel[...], params["kernel"], rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(model.bias[...], params["bias"], rtol=2e-5, atol=1e-7)


class TwoLayers(nnx.Module):
  """A hidden kernel, a head and their biases."""

  def __init__(self, rngs):
    self.l1 = nnx.Linear(4, 8, rngs=rngs)
    self.l2 = nnx.Linear(8, 2, rngs=rngs)

  def __call__(self, x):
    return self.l2(jax.nn.gelu(self.l1(x)))


# The hidden kernel is a matrix; the head and the biases step with AdamW.
PLAIN_DIMS = {"l1": {"kernel": DIMS(), "bias": None}, "l2": {"kernel": None, "bias": None}}
SPECS = {
    "dict": PLAIN_DIMS,
    "function_of_params": lambda params: PLAIN_DIMS,
    # As a user writes it over nnx.state: the numbers come back inside Variables.
    "function_over_variables": lambda params: jax.tree.map(
        lambda x: DIMS() if x.ndim == 2 and x.shape == (4, 8) else None, params),
    # By the kernel's path: init sees it end in .value, update not; resolved once, at init,
    # from the tree without its Variables, so both see the path the user wrote.
    "function_of_paths": lambda params: jax.tree_util.tree_map_with_path(
        lambda path, _: DIMS() if jax.tree_util.keystr(path).endswith("['l1']['kernel']")
        else None, params),
}
FORMS = {"full": {}, "factored": {"min_dim_size_to_factor": 4}}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("spec", sorted(SPECS))
def test_vsgd_muon_under_nnx_optimizer_takes_dimension_numbers_in_every_form(spec, form):
  """``nnx.Optimizer`` hands ``init`` Variables (paths end in ``.value``) and
  ``update`` arrays; each form of the dimension numbers names the same matrix,
  and the model steps as a plain optax loop with the dict does (before: "names
  ['l1']['kernel'], which the params do not have" in every form).
  """
  model = TwoLayers(nnx.Rngs(0))
  build = functools.partial(vsgd_optax.vsgd_muon, 0.05, **FORMS[form])
  optimizer = nnx.Optimizer(model, build(muon_weight_dimension_numbers=SPECS[spec]),
                            wrt=nnx.Param)
  x = jnp.linspace(-1.0, 1.0, 24).reshape(6, 4)
  y = jnp.arange(12.0).reshape(6, 2) / 12

  def loss(m):
    return jnp.mean((m(x) - y) ** 2)

  _, params = nnx.split(model, nnx.Param)
  params = nnx.to_pure_dict(params)
  opt = build(muon_weight_dimension_numbers=PLAIN_DIMS)
  state = opt.init(params)

  def plain_loss(p):
    hidden = jax.nn.gelu(x @ p["l1"]["kernel"] + p["l1"]["bias"])
    return jnp.mean((hidden @ p["l2"]["kernel"] + p["l2"]["bias"] - y) ** 2)

  @nnx.jit
  def step(model, optimizer):
    optimizer.update(model, nnx.grad(loss)(model))

  for _ in range(4):
    step(model, optimizer)
    updates, state = jax.jit(opt.update)(jax.grad(plain_loss)(params), state, params)
    params = optax.apply_updates(params, updates)
  # Two programs (NNX's model, the plain loss) whose gradients round apart; a matrix
  # named wrong moves a step by about the rate, 0.05. A weight near 0.03 of the
  # factored form lands 1e-6 apart at jax 0.9.1 (on this AVX-512 AMD EPYC).
  for layer in ("l1", "l2"):
    for name in ("kernel", "bias"):
      np.testing.assert_allclose(getattr(getattr(model, layer), name)[...],
                                 params[layer][name], rtol=2e-5, atol=3e-6)

"""``vsgd_muon`` (with and without ``nesterov``), ``vsgd`` and ``experimental.factored_vsgd``
on an explicit mesh of 4 host devices (tests/conftest.py makes 8; the meshes take the
first 4), where ``optax.contrib.muon``'s first jitted update fails inside Newton-Schulz.
"""

import functools

import chex
import jax
import numpy as np
import optax
import pytest

import vsgd_optax
from vsgd_optax import experimental

OPTIMIZERS = {"vsgd_muon": vsgd_optax.vsgd_muon,
              # Its look-ahead rebuilds the factored rates per element on the mesh.
              "vsgd_muon_nesterov": functools.partial(vsgd_optax.vsgd_muon, nesterov=True),
              "vsgd": vsgd_optax.vsgd,
              "factored_vsgd": experimental.factored_vsgd}
# The matrix split along either axis of a 2 x 2 mesh, along both, and over a 1 x 4 one.
MESHES = [((2, 2), (None, "x")), ((2, 2), ("y", None)), ((2, 2), ("x", "y")),
          ((1, 4), (None, "y"))]


def _explicit_mesh(shape):
  return jax.make_mesh(shape, ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2,
                       devices=jax.devices("cpu")[:4])


def _problem(seed=20261204, steps=3):
  rng = np.random.default_rng(seed)
  shapes = {"w": (256, 128), "b": (128,)}
  params = {k: rng.normal(size=s).astype(np.float32) * 0.05 for k, s in shapes.items()}
  grads = [{k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
           for _ in range(steps)]
  return params, grads


def _steps(opt, params, grads):
  """The updates of jitted steps, and the state's types after ``jit(init)`` and each step."""
  state = jax.jit(opt.init)(params)
  types, updates = [jax.tree.map(jax.typeof, state)], []
  for g in grads:
    u, state = jax.jit(opt.update)(g, state, params)
    updates.append(u)
    types.append(jax.tree.map(jax.typeof, state))
  return updates, types


@pytest.mark.parametrize("mesh_shape, spec", MESHES, ids=lambda x: str(x))
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_steps_on_an_explicit_mesh_as_on_one_device(name, mesh_shape, spec):
  """The state keeps the params' sharding after ``jit(init)`` and every jitted
  update, and the updates are the unsharded run's within float32 rounding: the
  sharded programs sum the norms and the means in another order (measured: up to
  6e-9 on updates of about 1e-2, 7 ulps; the bound is 100 ulps).
  """
  params, grads = _problem()
  want, _ = _steps(OPTIMIZERS[name](0.01), params, grads)
  with jax.set_mesh(_explicit_mesh(mesh_shape)):
    put = lambda tree: {"w": jax.device_put(tree["w"], jax.P(*spec)),
                        "b": jax.device_put(tree["b"], jax.P())}
    got, types = _steps(OPTIMIZERS[name](0.01), put(params), [put(g) for g in grads])
  for later in types[1:]:
    assert later == types[0]
  held = [t for t in jax.tree.leaves(types[0]) if t.shape == params["w"].shape]
  assert held and all(t.sharding.spec == jax.P(*spec) for t in held), held
  chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-7)


def test_muon_fails_there_and_vsgd_muon_steps():
  """Beside ``optax.contrib.muon`` on the same sharded params: its Newton-Schulz
  multiplies the sharded matrix by its transpose, which has no sharding rule.
  """
  params, grads = _problem(steps=1)
  with jax.set_mesh(_explicit_mesh((2, 2))):
    sharded = {"w": jax.device_put(params["w"], jax.P(None, "x")),
               "b": jax.device_put(params["b"], jax.P())}
    muon = optax.contrib.muon(0.01)
    with pytest.raises(Exception, match="dot_general"):
      jax.jit(muon.update)(sharded, jax.jit(muon.init)(sharded), sharded)
    opt = vsgd_optax.vsgd_muon(0.01)
    updates, _ = jax.jit(opt.update)(sharded, jax.jit(opt.init)(sharded), sharded)
  chex.assert_tree_all_finite(updates)

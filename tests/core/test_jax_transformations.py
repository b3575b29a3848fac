"""Where ``optax.adam`` goes, ``vsgd`` goes: under JAX's transformations.

``shard_map`` over eight host devices, ``jax.vmap`` over problems,
``jax.grad`` through a step, and ``jax.export`` called in a fresh process
without the package. Each result is checked against the same computation done
plainly, not only for running.
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from tests.support.helpers import FACTORIES
from tests.support.helpers import make_grads
from tests.support.helpers import make_params


def _devices(n):
  devices = jax.devices("cpu")
  assert len(devices) >= n, "tests/conftest.py sets eight host devices"
  return devices[:n]


@pytest.mark.parametrize("factory", FACTORIES)
def test_shard_map_with_averaged_gradients_matches_one_device(factory):
  mesh = jax.sharding.Mesh(np.array(_devices(4)), ("data",))
  opt = factory(0.05)
  per_device = jnp.stack([make_grads(i)["w"] for i in range(4)])  # one row per device

  def step(params, state, grads):
    grads = jax.lax.pmean(grads[0], "data")
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  params = make_params()["w"]
  sharded = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P(), P("data")),
                                  out_specs=(P(), P())))
  got, got_state = sharded(params, opt.init(params), per_device)
  want, want_state = _one_device_step(opt, params, per_device.mean(0))
  np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(got_state[0].mu, want_state[0].mu, rtol=1e-6, atol=1e-7)


def _one_device_step(opt, params, grads):
  updates, state = opt.update(grads, opt.init(params), params)
  return optax.apply_updates(params, updates), state


@pytest.mark.parametrize("factory", FACTORIES + [optax.adam])
def test_shard_map_with_per_device_state_is_jaxs_ordinary_error(factory):
  """Per-device gradients make a per-device state: declaring it replicated
  must fail as it does for Adam, not return one device's copy.
  """
  mesh = jax.sharding.Mesh(np.array(_devices(4)), ("data",))
  opt = factory(0.05)

  def step(params, state, grads):
    updates, state = opt.update(grads[0], state, params)
    return optax.apply_updates(params, updates), state

  params = make_params()["w"]
  per_device = jnp.stack([make_grads(i)["w"] for i in range(4)])
  sharded = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P(), P(), P("data")),
                                  out_specs=(P(), P())))
  with pytest.raises(Exception, match=r"(?i)(varying|replicat)"):
    sharded(params, opt.init(params), per_device)


@pytest.mark.parametrize("factory", FACTORIES)
def test_vmap_over_problems_equals_one_at_a_time(factory):
  opt = factory(0.05)
  batch = jnp.stack([make_grads(i)["w"] for i in range(3)])
  params = jnp.stack([make_params()["w"] * (i + 1) for i in range(3)])

  def two_steps(p, g):
    state = opt.init(p)
    for _ in range(2):
      updates, state = opt.update(g, state, p)
      p = optax.apply_updates(p, updates)
    return p
  got = jax.jit(jax.vmap(two_steps))(params, batch)
  for i in range(3):
    np.testing.assert_allclose(got[i], jax.jit(two_steps)(params[i], batch[i]),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("factory", FACTORIES)
def test_gradient_through_an_update_matches_finite_differences(factory):
  """Meta-learning differentiates through the step; float64 central
  differences check the derivative with respect to the gradient.
  """
  with jax.enable_x64(True):
    opt = factory(0.05)
    params = jnp.linspace(-1.0, 1.0, 4)
    state = opt.init(params)
    _, state = opt.update(jnp.array([0.3, -0.2, 0.1, 0.5]), state, params)

    def after(g):
      updates, _ = opt.update(g, state, params)
      return jnp.sum(jnp.sin(optax.apply_updates(params, updates)))
    g = jnp.array([0.2, 0.4, -0.3, 0.1])
    analytic = jax.grad(after)(g)
    h = 1e-6
    numeric = np.array([(after(g.at[i].add(h)) - after(g.at[i].add(-h))) / (2 * h)
                        for i in range(4)])
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-9)


_FRESH_PROCESS = """
import sys
import jax, numpy as np
exported = jax.export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
args = np.load(sys.argv[2], allow_pickle=False)
out = exported.call([args[f"arr_{i}"] for i in range(len(args.files))])
np.savez(sys.argv[3], *[np.asarray(x) for x in out])
assert "vsgd_optax" not in sys.modules
"""


def _to_wire(x):
  """bfloat16 as its uint16 bits: NumPy's .npz has no bfloat16."""
  return jax.lax.bitcast_convert_type(x, jnp.uint16) if x.dtype == jnp.bfloat16 else x


@pytest.mark.slow  # a fresh Python process
@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("platforms", [("cpu",), ("cpu", "cuda")])
@pytest.mark.parametrize("state_dtype", [None, jnp.bfloat16], ids=["default", "bfloat16"])
def test_export_runs_in_a_fresh_process_without_the_package(factory, platforms, state_dtype,
                                                            tmp_path):
  """Exported, serialized and called in a process that never imports the
  package; with a bfloat16 state, its stochastic rounding included.
  """
  opt = factory(0.05, state_dtype=state_dtype)

  def step(params, state, grads):
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  params = make_params()
  state = opt.init(params)
  _, state = step(params, state, make_grads(0))  # a state past its first step
  args = (params, state, make_grads(1))
  # Flat arrays in and out, as for serving: the fresh process knows no state
  # classes (nor would it for optax.adam's).
  leaves, treedef = jax.tree.flatten(args)
  dtypes = [x.dtype for x in leaves]

  def flat_step(wire):
    leaves = [jax.lax.bitcast_convert_type(x, d) if d == jnp.bfloat16 else x
              for x, d in zip(wire, dtypes, strict=True)]
    return [_to_wire(x) for x in jax.tree.leaves(step(*jax.tree.unflatten(treedef, leaves)))]

  wire = [np.asarray(_to_wire(x)) for x in leaves]
  exported = jax.export.export(jax.jit(flat_step), platforms=platforms)(wire)
  assert exported.platforms == platforms
  (tmp_path / "step.bin").write_bytes(exported.serialize())
  np.savez(tmp_path / "args.npz", *wire)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(tmp_path / "step.bin"),
                  str(tmp_path / "args.npz"), str(tmp_path / "out.npz")],
                 check=True, cwd=tmp_path, env=env, timeout=120)
  got = np.load(tmp_path / "out.npz")
  want = jax.jit(flat_step)(wire)
  assert len(got.files) == len(want)
  for i, leaf in enumerate(want):
    np.testing.assert_array_equal(got[f"arr_{i}"], leaf)

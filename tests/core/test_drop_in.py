"""Where ``optax.adam`` goes, ``vsgd`` goes: inside other people's code.

Equinox-style trees with ``None`` leaves, ``MaskedNode``s from
``optax.masked`` and ``multi_transform``, ``shard_map``, ``jax.export`` called
in a fresh process, donation of the state alone, and ``update`` without params
(Flax NNX's ``nnx.Optimizer``, which needs Flax, is
``tests/examples/test_flax_nnx.py``). Each result is checked against the same
computation done plainly, not only for running.
"""

import inspect
import os
import pathlib
import shutil
import subprocess
import sys
import typing
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import vsgd_optax
from tests.support import reference
from tests.support.helpers import FACTORIES
from tests.support.helpers import make_grads
from tests.support.helpers import make_params

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("factory", FACTORIES)
def test_none_leaves_pass_through_like_adam(factory):
  """Equinox's ``opt.init(eqx.filter(model, eqx.is_array))`` gives ``None``
  for every non-array field; the arrays must step as they would alone.
  """
  def with_none(tree):
    return {"w": tree["w"], "act": None, "inner": {"b": tree["b"], "name": None}}
  opt = factory(0.05)
  for variance in (False, True):
    extra = lambda i: {"grad_variance": with_none(jax.tree.map(jnp.abs, make_grads(i)))}
    plain_extra = lambda i: {"grad_variance": jax.tree.map(jnp.abs, make_grads(i))}
    params, plain_params = with_none(make_params()), make_params()
    state, plain_state = opt.init(params), opt.init(plain_params)
    for i in range(4):
      kw, plain_kw = (extra(i), plain_extra(i)) if variance else ({}, {})
      updates, state = jax.jit(opt.update)(with_none(make_grads(i)), state, params, **kw)
      params = optax.apply_updates(params, updates)
      plain_updates, plain_state = jax.jit(opt.update)(make_grads(i), plain_state, plain_params,
                                                       **plain_kw)
      plain_params = optax.apply_updates(plain_params, plain_updates)
    assert params["act"] is None and params["inner"]["name"] is None
    np.testing.assert_array_equal(params["w"], plain_params["w"])
    np.testing.assert_array_equal(params["inner"]["b"], plain_params["b"])


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("variance", [False, True])
def test_masked_and_multi_transform_with_and_without_grad_variance(factory, variance):
  """``MaskedNode`` entries, with ``grad_variance`` passed whole (as
  ``optax.masked`` passes extra arguments) or already masked.
  """
  kw = lambda i: {"grad_variance": jax.tree.map(jnp.abs, make_grads(i))} if variance else {}
  masked = optax.masked(factory(0.05), {"w": True, "b": False})
  params = make_params()
  state = masked.init(params)
  alone = factory(0.05)
  alone_state = alone.init({"w": params["w"]})
  for i in range(4):
    updates, state = masked.update(make_grads(i), state, params, **kw(i))
    one = {"grad_variance": {"w": kw(i)["grad_variance"]["w"]}} if variance else {}
    alone_updates, alone_state = alone.update({"w": make_grads(i)["w"]}, alone_state, **one)
    np.testing.assert_array_equal(updates["w"], alone_updates["w"])
    np.testing.assert_array_equal(updates["b"], make_grads(i)["b"])  # masked out: untouched
  multi = optax.multi_transform({"v": factory(0.05), "sgd": optax.sgd(0.1)},
                                {"w": "v", "b": "sgd"})
  got = _run_picked(multi, variance)
  np.testing.assert_array_equal(got["w"], _run_picked(factory(0.05), variance, only="w")["w"])


def _run_picked(opt, variance, only=None):
  """Four steps on the params (or only the entry ``only``)."""
  pick = (lambda t: {only: t[only]}) if only else (lambda t: t)
  params = pick(make_params())
  state = opt.init(params)
  for i in range(4):
    g = pick(make_grads(i))
    kw = {"grad_variance": jax.tree.map(jnp.abs, g)} if variance else {}
    updates, state = opt.update(g, state, params, **kw)
    params = optax.apply_updates(params, updates)
  return params


@pytest.mark.parametrize("factory", FACTORIES)
def test_update_needs_params_only_for_weight_decay(factory):
  opt = factory(0.05)
  state = opt.init(make_params())
  without, _ = opt.update(make_grads(0), state)
  with_params, _ = opt.update(make_grads(0), state, make_params())
  np.testing.assert_array_equal(without["w"], with_params["w"])
  decayed = factory(0.05, weight_decay=0.1)
  with pytest.raises(ValueError, match="params"):
    decayed.update(make_grads(0), decayed.init(make_params()))
  # Zero decay with a mask keeps the state layout of nonzero decay.
  mask = {"w": True, "b": False}
  assert (jax.tree.structure(factory(0.05, weight_decay=0.0, weight_decay_mask=mask)
                             .init(make_params()))
          == jax.tree.structure(factory(0.05, weight_decay=0.1, weight_decay_mask=mask)
                                .init(make_params())))


@pytest.mark.parametrize("factory", FACTORIES)
def test_schedule_annotation_resolves_for_signature_readers(factory):
  signature = inspect.signature(factory)
  assert signature.parameters["learning_rate"].annotation == optax.ScalarOrSchedule
  assert typing.get_type_hints(factory)["learning_rate"] == optax.ScalarOrSchedule
  assert signature.return_annotation is optax.GradientTransformationExtraArgs


@pytest.mark.parametrize("factory", FACTORIES)
def test_fresh_state_is_valid_at_any_count(factory):
  """A fresh state stepped at count c takes step t = c + 1 from the prior."""
  K, gamma = 30.0, 1e-8
  g = np.array([0.3, -2.0, 1e-4])
  for count in (0, 10**6, np.iinfo(np.int32).max - 1):
    with jax.enable_x64(True):
      opt = factory(1.0)
      state = opt.init(jnp.zeros(3, jnp.float64))
      inner = state[0]._replace(count=jnp.asarray(count, jnp.int32))
      updates, _ = opt.update(jnp.asarray(g), (inner,) + tuple(state[1:]))
    if factory is vsgd_optax.vsgd:
      # The authors' first-step prior variances, whatever t is.
      s_g, s_ghat = gamma / (gamma + 5e-5), K * gamma / (gamma + 5e-5)
      mu = s_g * g / (s_g + s_ghat)
      sigma2 = s_g * s_ghat / (s_g + s_ghat)
    else:
      mu, sigma2 = g / (K + 1), 1 / (K + 1)  # b_0 / a_0 = 1
    np.testing.assert_allclose(-updates, mu / (np.sqrt(mu**2 + sigma2) + 1e-8), rtol=1e-12)


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


_FRESH_PROCESS = """
import sys
import jax, numpy as np
exported = jax.export.deserialize(bytearray(open(sys.argv[1], "rb").read()))
args = np.load(sys.argv[2], allow_pickle=False)
out = exported.call([args[f"arr_{i}"] for i in range(len(args.files))])
np.savez(sys.argv[3], *[np.asarray(x) for x in out])
assert "vsgd_optax" not in sys.modules
"""


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("platforms", [("cpu",), ("cpu", "cuda")])
def test_export_runs_in_a_fresh_process_without_the_package(factory, platforms, tmp_path):
  opt = factory(0.05)

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
  flat_step = lambda leaves: jax.tree.leaves(step(*jax.tree.unflatten(treedef, leaves)))
  exported = jax.export.export(jax.jit(flat_step), platforms=platforms)(leaves)
  assert exported.platforms == platforms
  (tmp_path / "step.bin").write_bytes(exported.serialize())
  np.savez(tmp_path / "args.npz", *leaves)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(tmp_path / "step.bin"),
                  str(tmp_path / "args.npz"), str(tmp_path / "out.npz")],
                 check=True, cwd=tmp_path, env=env, timeout=120)
  got = np.load(tmp_path / "out.npz")
  want = jax.jit(flat_step)(leaves)
  assert len(got.files) == len(want)
  for i, leaf in enumerate(want):
    np.testing.assert_array_equal(got[f"arr_{i}"], leaf)


def _temp_bytes(opt, params, grads, donate):
  def step(params, state, grads):
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state
  compiled = jax.jit(step, donate_argnums=donate).lower(
      params, opt.init(params), grads).compile()
  return compiled.memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("factory", FACTORIES)
def test_donating_only_the_state_needs_at_most_one_temporary_per_leaf(factory):
  """From the compiled program's memory analysis, not from timing: beyond
  what Adam's step holds, at most one full-size array per parameter array.
  """
  params = {f"layer{i}": jnp.ones((256, 128 + 32 * i)) for i in range(4)}
  grads = jax.tree.map(lambda p: p * 1e-3, params)
  largest = max(p.nbytes for p in jax.tree.leaves(params))
  total = sum(p.nbytes for p in jax.tree.leaves(params))
  adam = _temp_bytes(optax.adam(1e-3), params, grads, donate=(1,))
  ours = _temp_bytes(factory(1e-3), params, grads, donate=(1,))
  assert adam < largest  # Adam's donated step holds no full-size temporary
  assert ours <= adam + total, (ours, adam, total)
  # Donating params and state together as well.
  ours_both = _temp_bytes(factory(1e-3), params, grads, donate=(0, 1))
  assert ours_both <= _temp_bytes(optax.adam(1e-3), params, grads, donate=(0, 1)) + total


def _form_trajectory(in_place):
  from vsgd_optax import _update_rules
  grads = reference.gradient_stream(seed=21, steps=200, shape=(5,))
  K, gamma = 30.0, 1e-8
  b_g, b_ghat = _update_rules.prior_rates(K, gamma)
  mu = jnp.zeros(5, jnp.float64)
  b_g, b_ghat = jnp.full(5, b_g), jnp.full(5, b_ghat)
  theta = jnp.linspace(-1.0, 1.0, 5)
  form = jax.jit(lambda *a: _update_rules.vsgd_leaf_form(*a, in_place=in_place))
  out = []
  for t, g in enumerate(grads, start=1):
    direction, mu, b_g, b_ghat = form(jnp.asarray(g), mu, b_g, b_ghat, float(t), K,
                                      gamma, 0.81, 0.9, 1e-8)
    theta = theta - 0.01 * direction
    out.append((theta, mu, b_g, b_ghat))
  return grads, out


@pytest.mark.parametrize("in_place", [False, True])
def test_each_form_of_the_vsgd_step_matches_the_reference(in_place):
  """The CPU takes the in-place form, other backends the form as written
  (``jax.lax.platform_dependent``); both are checked here on the CPU.
  """
  with jax.enable_x64(True):
    grads, got = _form_trajectory(in_place)
    want = reference.vsgd_reference(grads, np.linspace(-1.0, 1.0, 5), lambda i: 0.01)
    for step_got, step_want in zip(got, want, strict=True):
      for x, y in zip(step_got, step_want, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-14)


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


def test_wheel_is_pure_python(tmp_path):
  """Installing needs no compiler: the wheel is py3-none-any, with no binary."""
  source = tmp_path / "source"  # a copy, so the build leaves the checkout clean
  shutil.copytree(ROOT / "vsgd_optax", source / "vsgd_optax",
                  ignore=shutil.ignore_patterns("__pycache__"))
  for name in ("pyproject.toml", "README.md", "LICENSE"):
    if (ROOT / name).exists():
      shutil.copy(ROOT / name, source / name)
  subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                  "--no-build-isolation", "-q", "-w", str(tmp_path), str(source)],
                 check=True, timeout=300)
  (wheel,) = tmp_path.glob("*.whl")
  assert wheel.name.endswith("-py3-none-any.whl"), wheel.name
  names = zipfile.ZipFile(wheel).namelist()
  assert not [n for n in names if n.endswith((".so", ".pyd", ".dll", ".dylib", ".cc"))]
  assert "vsgd_optax/_update_rules.py" in names

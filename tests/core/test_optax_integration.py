"""The optimizers inside the optax machinery users combine them with."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference
from tests.support.helpers import DROP_IN
from tests.support.helpers import FACTORIES
from tests.support.helpers import factored_vsgd
from tests.support.helpers import factored_vsgd_muon
from tests.support.helpers import make_grads
from tests.support.helpers import make_params
from tests.support.helpers import run


class JitBehaviour(chex.TestCase):
  """Every optimizer of the shared drop-in sweep (each form of ``vsgd_muon`` and
  ``optax.adam`` included) gives the same result jitted and not.
  """

  @chex.variants(with_jit=True, without_jit=True)
  def test_same_result_with_and_without_jit(self):
    for name, factory in DROP_IN.items():
      opt = factory(0.05) if name == "adam" else factory(0.05, weight_decay=0.01)
      update = self.variant(opt.update)
      params, state = make_params(), opt.init(make_params())
      for i in range(5):
        updates, state = update(make_grads(i), state, params)
        params = optax.apply_updates(params, updates)
      ref, _ = run(opt, steps=5, jit=True)
      # Fusion may round differently in the last bit (it does on GPUs).
      chex.assert_trees_all_close(params, ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("factory", FACTORIES)
def test_inject_hyperparams_gives_identical_results(factory):
  kw = dict(variance_ratio=12.0, prior_strength=1e-6, eps=1e-7, weight_decay=0.05)
  plain = factory(0.03, **kw)
  # factored_vsgd's threshold sets the state's shapes: a static argument.
  static = ("min_dim_size_to_factor",) if factory is factored_vsgd else ()
  injected = optax.inject_hyperparams(factory, static_args=static)(learning_rate=0.03, **kw)
  p1, _ = run(plain, steps=20, jit=True)
  p2, s2 = run(injected, steps=20, jit=True)
  # Not bitwise: XLA folds Python-float constants differently from arrays.
  chex.assert_trees_all_close(p1, p2, rtol=1e-6, atol=1e-7)
  # Changing an injected hyperparameter takes effect without recompiling.
  s2.hyperparams["learning_rate"] = jnp.asarray(0.0)
  updates, _ = jax.jit(injected.update)(make_grads(0), s2, p2)
  chex.assert_trees_all_equal(updates, jax.tree.map(jnp.zeros_like, updates))


@pytest.mark.parametrize("factory", [*FACTORIES, factored_vsgd_muon])
def test_a_prior_set_after_init_is_the_one_the_first_step_takes(factory):
  """docs/howto.md sets an injected prior_strength right after init. The state
  init made holds the old prior's rates; the first step must take the prior the
  hyperparameters give when it runs, as the authors' code does, so that the run
  is the one of an optimizer built with the new values.
  """
  static = {factored_vsgd: ("min_dim_size_to_factor",),
            factored_vsgd_muon: ("ns_steps",)}.get(factory, ())
  new = {"variance_ratio": 5.0, "prior_strength": 0.25}
  injected = optax.inject_hyperparams(factory, static_args=static)(learning_rate=0.03)

  def steps(opt, state, n=3):
    params = make_params()
    for i in range(n):
      updates, state = jax.jit(opt.update)(make_grads(i), state, params)
      params = optax.apply_updates(params, updates)
    return params

  set_after = optax.tree_utils.tree_set(injected.init(make_params()),
                                        **{k: jnp.asarray(v) for k, v in new.items()})
  built = factory(0.03, **new)
  expected = steps(built, built.init(make_params()))
  chex.assert_trees_all_close(steps(injected, set_after), expected, rtol=1e-5, atol=1e-7)
  # The check has teeth: the defaults' prior gives another run.
  unchanged = steps(injected, injected.init(make_params()))
  assert float(jnp.max(jnp.abs(unchanged["w"] - expected["w"]))) > 1e-3


@pytest.mark.parametrize("static", ["prior_strength", "variance_ratio"])
@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, factored_vsgd,
                                     functools.partial(vsgd_optax.vsgd_muon,
                                                       min_dim_size_to_factor=None)],
                         ids=["vsgd", "factored_vsgd", "vsgd_muon_full_rates"])
def test_a_prior_half_set_after_init_with_the_other_half_static(factory, static):
  """The prior is ``variance_ratio`` and ``prior_strength`` together: with one of
  them static (a plain number) and the other injected and set after init, the
  first step still takes the prior they give then.
  """
  changed = "variance_ratio" if static == "prior_strength" else "prior_strength"
  value = {"variance_ratio": 3.0, "prior_strength": 1e-3}[changed]
  static_args = (static, "min_dim_size_to_factor") if factory is factored_vsgd else (static,)
  injected = optax.inject_hyperparams(factory, static_args=static_args)(learning_rate=0.03)

  def second_update(opt, state):
    # Two steps: Newton-Schulz of vsgd_muon's first mean, a multiple of the first
    # gradient, is the same whatever the prior; the second step's mean is not.
    for i in range(2):
      updates, state = opt.update(make_grads(i), state, make_params())
    return updates

  state = injected.init(make_params())
  state.hyperparams[changed] = jnp.asarray(value, jnp.float32)
  got = second_update(injected, state)
  built = factory(0.03, **{changed: value})
  want = second_update(built, built.init(make_params()))
  # Not bitwise: an injected (array) hyperparameter is not folded into constants.
  chex.assert_trees_all_close(got, want, rtol=1e-5, atol=1e-7)
  # The check has teeth: the prior init stored gives other steps.
  stale = second_update(injected, injected.init(make_params()))
  assert float(jnp.max(jnp.abs(stale["w"] - want["w"]))) > 1e-4


@pytest.mark.parametrize("factory", FACTORIES)
def test_schedule_learning_rate(factory):
  sched = optax.piecewise_constant_schedule(0.1, {3: 0.0})
  params, state = run(factory(sched), steps=3, jit=True)
  later, _ = run(factory(sched), steps=6, jit=True)
  chex.assert_trees_all_close(params, later)  # lr 0 from step 3 on


@pytest.mark.parametrize("factory", FACTORIES)
def test_no_recompilation_and_stable_dtypes(factory):
  opt = factory(0.01)
  params = {"f32": jnp.ones(3), "bf16": jnp.ones(3, jnp.bfloat16),
            "f16": jnp.ones(3, jnp.float16)}
  state = opt.init(params)
  traces = []

  @jax.jit
  def step(params, state, grads):
    traces.append(1)
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state, updates

  before = jax.tree.map(lambda x: (x.dtype, jnp.asarray(x).weak_type), state)
  for i in range(3):
    grads = jax.tree.map(lambda p: jnp.full_like(p, 0.5 + i), params)  # noqa: B023 (used at once)
    params, state, updates = step(params, state, grads)
  assert len(traces) == 1
  after = jax.tree.map(lambda x: (x.dtype, jnp.asarray(x).weak_type), state)
  assert before == after
  for name, dtype in (("f32", jnp.float32), ("bf16", jnp.bfloat16), ("f16", jnp.float16)):
    assert updates[name].dtype == dtype and params[name].dtype == dtype
    assert state[0].mu[name].dtype == jnp.float32  # at least float32 inside
    assert bool(jnp.all(jnp.isfinite(params[name])))
    assert bool(jnp.all(params[name] < 1.0))  # moved against the positive gradient


@pytest.mark.parametrize("factory", FACTORIES)
def test_safe_inside_lax_cond(factory):
  opt = factory(0.01)
  params = make_params()
  state = opt.init(params)

  @jax.jit
  def maybe_step(flag, params, state):
    return jax.lax.cond(flag, lambda s: opt.update(make_grads(0), s, params),
                        lambda s: (jax.tree.map(jnp.zeros_like, params), s), state)

  updates, new_state = maybe_step(True, params, state)
  assert int(new_state[0].count) == 1
  _, same = maybe_step(False, params, state)
  chex.assert_trees_all_equal(same, state)


def test_state_dtype_option_and_float64():
  opt = vsgd_optax.vsgd(0.1, state_dtype=jnp.bfloat16)
  state = opt.init({"w": jnp.ones(2)})
  assert state[0].b_g["w"].dtype == jnp.bfloat16
  _, state = opt.update({"w": jnp.ones(2)}, state, {"w": jnp.ones(2)})
  assert state[0].b_g["w"].dtype == jnp.bfloat16 and state[0].mu["w"].dtype == jnp.bfloat16
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd(0.1)
    p = jnp.ones(2, jnp.float64)
    updates, state = opt.update(p, opt.init(p), p)
    assert updates.dtype == jnp.float64 and state[0].b_ghat.dtype == jnp.float64


def test_count_saturates():
  opt = vsgd_optax.scale_by_vsgd()
  _, state = opt.update(jnp.ones(2), opt.init(jnp.ones(2)))
  state = state._replace(count=jnp.asarray(np.iinfo(np.int32).max, jnp.int32))
  updates, state = opt.update(jnp.ones(2), state)
  assert int(state.count) == np.iinfo(np.int32).max
  assert bool(jnp.all(jnp.isfinite(updates)))


@pytest.mark.parametrize("factory", FACTORIES)
def test_chain_clip_masked_and_multi_transform(factory):
  params = make_params()
  # clip_by_global_norm in front: same as feeding clipped gradients.
  clipped = optax.chain(optax.clip_by_global_norm(0.1), factory(0.01))
  state = clipped.init(params)
  u1, _ = clipped.update(make_grads(0), state, params)
  clip = optax.clip_by_global_norm(0.1)
  g, _ = clip.update(make_grads(0), clip.init(params))
  plain = factory(0.01)
  u2, _ = plain.update(g, plain.init(params), params)
  chex.assert_trees_all_close(u1, u2)
  # masked: the unmasked leaf passes through untouched.
  masked = optax.masked(factory(0.01), {"w": True, "b": False})
  u, _ = masked.update(make_grads(0), masked.init(params), params)
  chex.assert_trees_all_equal(u["b"], make_grads(0)["b"])
  # multi_transform: VSGD on weights, SGD on biases.
  multi = optax.multi_transform({"v": factory(0.01), "s": optax.sgd(0.5)},
                                {"w": "v", "b": "s"})
  u, _ = multi.update(make_grads(0), multi.init(params), params)
  chex.assert_trees_all_close(u["b"], -0.5 * make_grads(0)["b"])
  chex.assert_trees_all_close(u["w"], u2["w"] * 0 + plain.update(
      make_grads(0), plain.init(params), params)[0]["w"])


@pytest.mark.parametrize("factory", FACTORIES)
def test_multi_steps_accumulates(factory):
  opt = optax.MultiSteps(factory(0.05), every_k_schedule=2)
  params = make_params()
  state = opt.init(params)
  u0, state = opt.update(make_grads(0), state, params)
  chex.assert_trees_all_equal(u0, jax.tree.map(jnp.zeros_like, u0))
  u1, state = opt.update(make_grads(1), state, params)
  mean = jax.tree.map(lambda a, b: (a + b) / 2, make_grads(0), make_grads(1))
  inner = factory(0.05)
  expected, _ = inner.update(mean, inner.init(params), params)
  chex.assert_trees_all_close(u1, expected, rtol=1e-6)


@pytest.mark.parametrize("factory", FACTORIES)
def test_apply_if_finite_leaves_state_untouched(factory):
  opt = optax.apply_if_finite(factory(0.05), max_consecutive_errors=5)
  params = make_params()
  _, state = opt.update(make_grads(0), opt.init(params), params)
  for bad in (jnp.nan, jnp.inf):
    grads = make_grads(1)
    grads["w"] = grads["w"].at[0, 0].set(bad)
    updates, new_state = jax.jit(opt.update)(grads, state, params)
    chex.assert_trees_all_equal(new_state.inner_state, state.inner_state)
    chex.assert_trees_all_equal(updates, jax.tree.map(jnp.zeros_like, updates))


@pytest.mark.parametrize("factory", FACTORIES)
@pytest.mark.parametrize("magnitude", [1e-30, 1e-10, 1.0, 1e8, 1e15])
def test_extreme_gradient_magnitudes_give_finite_updates(factory, magnitude):
  opt = factory(0.01)
  params = make_params()
  state = opt.init(params)
  for i in range(6):
    grads = jax.tree.map(lambda g: g * magnitude * (-1) ** i, make_grads(i))  # noqa: B023 (used at once)
    updates, state = jax.jit(opt.update)(grads, state, params)
    for leaf in jax.tree.leaves((updates, state)):
      assert bool(jnp.all(jnp.isfinite(leaf))), (magnitude, i)
    # Each step's update is the float64 reference's, whose direction does not
    # depend on the gradients' scale once the prior is outweighed.
    for name, got in updates.items():
      fed = [np.asarray(jnp.asarray(make_grads(j)[name] * magnitude * (-1) ** j, jnp.float32),
                        np.float64) for j in range(i + 1)]
      if factory is factored_vsgd and name == "w":  # the 3 x 4 leaf factors
        want = reference.factored_vsgd_steps(fed, 0, 1)[-1][0]
      elif factory in (vsgd_optax.vsgd, factored_vsgd):  # a vector steps as vsgd's
        want = reference.vsgd_steps(fed)[-1][0]
      else:  # the reference gives params: at rate 1 from 0, the last move is -direction
        path = [np.zeros(fed[0].shape)] + [p for p, *_ in reference.constant_vsgd_reference(
            fed, np.zeros(fed[0].shape), lambda j: 1.0)]
        want = path[-2] - path[-1]
      np.testing.assert_allclose(np.asarray(got, np.float64), -0.01 * want, rtol=1e-3,
                                 atol=1e-5 * 0.01, err_msg=f"{name} at step {i}")


@pytest.mark.parametrize("factory", FACTORIES)
def test_init_on_shape_dtype_struct(factory):
  opt = factory(0.01)
  structs = {"w": jax.ShapeDtypeStruct((3, 4), jnp.bfloat16)}
  state = opt.init(structs)
  assert state[0].mu["w"].shape == (3, 4) and state[0].mu["w"].dtype == jnp.float32
  shapes = jax.eval_shape(opt.init, structs)
  assert jax.tree.structure(shapes) == jax.tree.structure(state)
  for shape, leaf in zip(jax.tree.leaves(shapes), jax.tree.leaves(state), strict=True):
    assert (shape.shape, shape.dtype) == (leaf.shape, leaf.dtype)
  # the rate is full where it does not factor, and its row and column means where it does
  expected = ((3, 4),) if factory is not factored_vsgd else ((3, 1), (1, 4))
  assert tuple(x.shape for x in jax.tree.leaves(shapes[0].b_ghat["w"])) == expected


@pytest.mark.parametrize("factory", FACTORIES)
def test_complex_and_integer_params_are_refused(factory):
  opt = factory(0.01)
  with pytest.raises(TypeError, match=r"complex.*\['z'\].*complex64"):
    opt.init({"z": jnp.ones(2, jnp.complex64)})
  with pytest.raises(TypeError, match=r"floating-point.*\['i'\]"):
    opt.init({"i": jnp.ones(2, jnp.int32)})
  state = opt.init({"z": jnp.ones(2)})
  with pytest.raises(TypeError, match="complex"):
    opt.update({"z": jnp.ones(2, jnp.complex64)}, state)


def test_weight_decay_mask_spares_biases():
  params = {"w": jnp.ones(3), "b": jnp.ones(3)}
  zero = {"w": jnp.zeros(3), "b": jnp.zeros(3)}
  opt = vsgd_optax.vsgd(0.1, weight_decay=0.5,
                        weight_decay_mask=lambda p: {"w": True, "b": False})
  updates, _ = opt.update(zero, opt.init(params), params)
  np.testing.assert_allclose(updates["w"], -0.1 * 0.5 * np.ones(3), rtol=1e-6)
  np.testing.assert_allclose(updates["b"], np.zeros(3))


def test_sharded_state_follows_params_and_update_matches():
  devices = jax.devices("cpu")  # also on a machine with an accelerator
  assert len(devices) == 8, "tests/conftest.py sets eight host devices"
  mesh = jax.sharding.Mesh(np.array(devices).reshape(4, 2), ("data", "model"))
  spec = jax.sharding.PartitionSpec("data", "model")
  sharding = jax.sharding.NamedSharding(mesh, spec)
  params = {"w": jax.device_put(jnp.arange(64.0).reshape(8, 8) / 64, sharding)}
  for factory in FACTORIES:
    opt = factory(0.01)
    state = opt.init(params)
    structs = {"w": jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=sharding)}
    for fresh in (state, opt.init(structs)):
      assert fresh[0].mu["w"].sharding.is_equivalent_to(sharding, 2)
      if factory is factored_vsgd:
        # each mean is split as the rows or columns it summarizes
        rate = fresh[0].b_ghat["w"]
        for mean, kept in ((rate.row, ("data", None)), (rate.col, (None, "model"))):
          kept_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*kept))
          assert mean.sharding.is_equivalent_to(kept_sharding, 2), mean.sharding
      else:
        assert fresh[0].b_ghat["w"].sharding.is_equivalent_to(sharding, 2)
    grads = {"w": jax.device_put(jnp.cos(jnp.arange(64.0)).reshape(8, 8), sharding)}
    updates, new_state = jax.jit(opt.update)(grads, state, params)
    assert new_state[0].mu["w"].sharding.is_equivalent_to(sharding, 2)
    single = jax.tree.map(np.asarray, (grads, params))
    ref, _ = jax.jit(opt.update)(single[0], opt.init(single[1]), single[1])
    np.testing.assert_allclose(updates["w"], ref["w"], rtol=1e-5)

"""Bad arguments fail when the optimizer is built, or at trace time, naming the argument."""

import ast
import inspect

import chex
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference
from vsgd_optax import experimental

NAN, INF = float("nan"), float("inf")

VSGD_BAD = [
    ("variance_ratio", 0.0), ("variance_ratio", -1.0), ("variance_ratio", INF),
    ("variance_ratio", NAN), ("prior_strength", 0.0), ("prior_strength", -1e-8),
    ("prior_strength", INF), ("prior_strength", NAN), ("kappa_g", -0.1),
    ("kappa_g", 1.5), ("kappa_g", NAN), ("kappa_ghat", 2.0), ("kappa_ghat", NAN),
    ("eps", -1e-8), ("eps", NAN), ("weight_decay", -0.1), ("weight_decay", NAN),
]
CONSTANT_BAD = [(n, v) for n, v in VSGD_BAD if not n.startswith("kappa")] + [
    ("kappa", -0.5), ("kappa", 1.01), ("kappa", NAN)]
FACTORIES = {"vsgd": vsgd_optax.vsgd, "constant_vsgd": vsgd_optax.constant_vsgd,
             "factored_vsgd": experimental.factored_vsgd, "vsgd_muon": vsgd_optax.vsgd_muon}
RATE_FACTORIES = [vsgd_optax.vsgd, vsgd_optax.constant_vsgd, experimental.factored_vsgd]


@pytest.mark.parametrize("name,value", VSGD_BAD)
def test_vsgd_rejects(name, value):
  with pytest.raises(ValueError, match=name):
    vsgd_optax.vsgd(0.1, **{name: value})


@pytest.mark.parametrize("name,value", CONSTANT_BAD)
def test_constant_vsgd_rejects(name, value):
  with pytest.raises(ValueError, match=name):
    vsgd_optax.constant_vsgd(0.1, **{name: value})


@pytest.mark.parametrize("factory", RATE_FACTORIES)
def test_a_bad_learning_rate_is_refused(factory):
  for bad, error in ((NAN, ValueError), (INF, ValueError), (-INF, ValueError),
                     (np.float32("nan"), ValueError), (-1, ValueError), ("1e-2", TypeError),
                     (None, TypeError), ([0.1], TypeError), (True, TypeError),
                     (np.bool_(True), TypeError), (jnp.array(False), TypeError),
                     (jnp.array([1e-2, 1e-2]), ValueError),
                     (np.full((1, 1), 1e-2, np.float32), ValueError)):
    with pytest.raises(error, match="learning_rate"):
      factory(bad)
  # Zero (a frozen read-out), arrays and schedules are rates.
  for good in (0.0, np.float32(0.1), jnp.asarray(0.1), optax.linear_schedule(0.1, 0.0, 10)):
    assert isinstance(factory(good), optax.GradientTransformation)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_state_dtype_and_rounding_are_checked_together(factory):
  for dtype in (jnp.float16, jnp.int32, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn):
    for rounding in ("stochastic", "nearest"):
      with pytest.raises(ValueError, match="state_dtype"):
        factory(0.1, state_dtype=dtype, state_rounding=rounding)
  with pytest.raises(ValueError, match="state_rounding"):
    factory(0.1, state_rounding="up")
  with pytest.raises(TypeError, match="state_rounding"):
    factory(0.1, state_rounding=1)
  for ok in ({"state_dtype": jnp.bfloat16, "state_rounding": "nearest"},
             {"state_dtype": jnp.bfloat16}, {"state_dtype": jnp.float32}):
    assert isinstance(factory(0.1, **ok), optax.GradientTransformation)


def test_edges_of_valid_ranges_are_accepted_and_used():
  """Kappa 0 and 1 and eps 0 build, and step as the float64 reference does."""
  grads = reference.gradient_stream(seed=61, steps=3, shape=(4,))
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd(0.1, kappa_g=0.0, kappa_ghat=1.0, eps=0.0, weight_decay=0.0)
    state = opt.init(jnp.zeros(4, jnp.float64))
    for g, (direction, *_) in zip(grads, reference.vsgd_steps(grads, kappa_g=0.0,
                                                               kappa_ghat=1.0, eps=0.0),
                                  strict=True):
      updates, state = opt.update(jnp.asarray(g), state)
      chex.assert_trees_all_close(updates, -0.1 * direction, rtol=1e-12)
    opt = vsgd_optax.constant_vsgd(optax.constant_schedule(0.1), kappa=1.0)
    state = opt.init(jnp.zeros(4, jnp.float64))
    path = [np.zeros(4)] + [p for p, *_ in reference.constant_vsgd_reference(
        grads, np.zeros(4), lambda i: 0.1, kappa=1.0)]
    for i, g in enumerate(grads):
      updates, state = opt.update(jnp.asarray(g), state)
      chex.assert_trees_all_close(updates, path[i + 1] - path[i], rtol=1e-12)


def test_array_values_skip_the_eager_check():
  """inject_hyperparams passes arrays, which are not inspected when built; a valid
  array steps as the same number does.
  """
  assert isinstance(vsgd_optax.vsgd(jnp.asarray(0.1), variance_ratio=jnp.asarray(-1.0)),
                    optax.GradientTransformation)
  g = jnp.array([0.5, -1.0, 2.0])
  plain, arrays = (vsgd_optax.vsgd(0.1, variance_ratio=12.0),
                   vsgd_optax.vsgd(jnp.asarray(0.1), variance_ratio=jnp.asarray(12.0)))
  chex.assert_trees_all_equal(plain.update(g, plain.init(g))[0],
                              arrays.update(g, arrays.init(g))[0])


def test_grad_variance_structure_is_checked():
  opt = vsgd_optax.scale_by_vsgd()
  state = opt.init({"a": jnp.ones(2)})
  with pytest.raises(ValueError, match="grad_variance"):
    opt.update({"a": jnp.ones(2)}, state, grad_variance={"b": jnp.ones(2)})


def test_injected_hyperparameters_stay_float32_under_bfloat16_params():
  """``hyperparam_dtype=jnp.float32`` keeps them exact; without it optax stores them
  in the params' bfloat16 (kappa_g 0.81 becomes 0.8086).
  """
  params = jnp.zeros(8, jnp.bfloat16)
  kept = optax.inject_hyperparams(vsgd_optax.vsgd, hyperparam_dtype=jnp.float32)(
      learning_rate=1e-3, kappa_g=0.81).init(params)
  assert kept.hyperparams["kappa_g"].dtype == jnp.float32
  assert float(kept.hyperparams["kappa_g"]) == np.float32(0.81)
  assert float(kept.hyperparams["learning_rate"]) == np.float32(1e-3)
  rounded = optax.inject_hyperparams(vsgd_optax.vsgd)(learning_rate=1e-3, kappa_g=0.81).init(params)
  assert float(rounded.hyperparams["kappa_g"]) != np.float32(0.81)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_gradients_unlike_the_params_are_named(factory):
  opt = factory(0.1)
  state = opt.init({"w": jnp.ones((2, 3)), "b": jnp.ones(3)})
  for grads, at_fault in (({"w": jnp.ones((2, 3)), "b": jnp.ones(3), "c": jnp.ones(1)}, "'c'"),
                          ({"w": jnp.ones((2, 3))}, "'b'"),
                          ({"w": jnp.ones((3, 2)), "b": jnp.ones(3)}, r"'w'\] \(3, 2\)")):
    with pytest.raises(ValueError, match=at_fault):
      jax.jit(opt.update)(grads, state)  # at trace time, under jit as in a train step


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_boolean_or_a_string_is_refused_for_every_number(name):
  """``float`` would read True as 1.0 and '30' as 30.0; each is refused, naming the argument."""
  kappa = "kappa" if name == "constant_vsgd" else "kappa_g"
  for arg in ("variance_ratio", "prior_strength", kappa, "eps", "weight_decay"):
    for bad in (True, jnp.array(False), "30"):
      with pytest.raises(TypeError, match=arg):
        FACTORIES[name](0.1, **{arg: bad})


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_arguments_that_shape_the_state_name_static_args_under_inject_hyperparams(name):
  """inject_hyperparams turns every number (and jnp.bfloat16, a callable) into an
  array; a dtype must be static. A threshold is read where its value is known, so
  the defaults work; an init under jit that cannot know the layout is refused.
  """
  params = {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}
  inject = lambda *more: optax.inject_hyperparams(FACTORIES[name], static_args=more)
  with pytest.raises(TypeError, match="state_dtype"):
    inject()(0.1, state_dtype=jnp.bfloat16).init(params)
  opt = inject("state_dtype")(0.1, state_dtype=jnp.bfloat16)
  state = opt.init(params)
  assert np.dtype(jnp.bfloat16) in {x.dtype for x in jax.tree.leaves(state.inner_state)}
  opt.update(params, state, params)
  defaults = inject()(0.1)
  jax.jit(defaults.update)(params, jax.jit(defaults.init)(params), params)
  if name == "factored_vsgd":
    factoring = inject()(0.1, min_dim_size_to_factor=3)
    state = factoring.init(params)
    assert isinstance(state.inner_state[0].b_g["w"], vsgd_optax.FactoredRate)
    jax.jit(factoring.update)(params, state, params)  # reads the layout off the state
    with pytest.raises(ValueError, match="min_dim_size_to_factor"):
      jax.jit(factoring.init)(params)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_state_that_is_not_this_optimizers_is_refused(name):
  params = {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}
  opt = FACTORIES[name](0.1)
  # vsgd's and factored_vsgd's are one state, and nothing factors here.
  alike = {"vsgd", "factored_vsgd"} if name in ("vsgd", "factored_vsgd") else {name}
  others = {other: FACTORIES[other](0.1).init(params) for other in FACTORIES
            if other not in alike}
  # vsgd_muon is optax.partition's, as Muon is: a state that is no partition's fails
  # there, as Muon's does (a check in front would put a frame on the way to Newton-Schulz).
  foreign = (TypeError, AttributeError) if name == "vsgd_muon" else TypeError
  for state in [*others.values(), optax.adam(0.1).init(params)]:
    with pytest.raises(foreign, match=name if foreign is TypeError else None):
      opt.update(params, state, params)
  for other in alike:
    jax.jit(opt.update)(params, FACTORIES[other](0.1).init(params), params)
  # A state of another dtype is refused both ways, never kept.
  bf16 = FACTORIES[name](0.1, state_dtype=jnp.bfloat16)
  with pytest.raises(TypeError, match="state_dtype"):
    opt.update(params, bf16.init(params), params)
  with pytest.raises(TypeError, match="state_dtype"):
    bf16.update(params, opt.init(params), params)


# Every public factory that takes VSGD's hyperparameters.
BUILDERS = [
    vsgd_optax.vsgd, vsgd_optax.scale_by_vsgd, vsgd_optax.constant_vsgd,
    vsgd_optax.scale_by_constant_vsgd, experimental.factored_vsgd,
    experimental.scale_by_factored_vsgd, vsgd_optax.vsgd_muon, vsgd_optax.scale_by_vsgd_muon]
# VSGD's defaults (docs/algorithm.md): what every signature that takes the argument writes.
DEFAULTS = {"variance_ratio": 30.0, "prior_strength": 1e-8, "kappa_g": 0.81, "kappa_ghat": 0.9,
            "kappa": 0.9, "eps": 1e-8, "weight_decay": 0.0, "weight_decay_mask": None,
            "state_dtype": None, "state_rounding": "stochastic", "seed": 0}


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_every_signature_writes_out_vsgds_defaults_and_refuses_a_bad_value_by_name(build):
  """Each ``def`` writes every keyword and its default as a literal, as optax's do."""
  parameters = inspect.signature(build).parameters
  taken = {name: p.default for name, p in parameters.items() if name in DEFAULTS}
  assert len(taken) >= 7, taken
  node = ast.parse(inspect.getsource(build)).body[0]
  written = {arg.arg: ast.literal_eval(default)
             for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
             if arg.arg in DEFAULTS}
  assert written == taken == {name: DEFAULTS[name] for name in taken}, build.__name__
  rate = (0.1,) if "learning_rate" in parameters else ()
  for name in ("variance_ratio", "prior_strength", "kappa_g", "kappa_ghat", "kappa", "eps"):
    if name in taken:
      with pytest.raises(ValueError, match=name):
        build(*rate, **{name: 2.0 if name.startswith("kappa") else -1.0})


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_every_argument_after_the_rate_is_by_keyword_and_binds_as_pythons(build):
  """A misspelt name or an extra positional argument fails as Python's own check;
  ``optax.inject_hyperparams``, which reads the signature, holds every default.
  """
  parameters = inspect.signature(build).parameters
  rate = (0.1,) if "learning_rate" in parameters else ()
  assert all(p.kind is inspect.Parameter.KEYWORD_ONLY
             for name, p in parameters.items() if name != "learning_rate")
  with pytest.raises(TypeError, match="variance_ration"):
    build(*rate, variance_ration=3.0)
  with pytest.raises(TypeError, match=build.__name__):
    build(*rate, 30.0)
  held = optax.inject_hyperparams(build)(*rate).init({"w": jnp.ones((3, 2))}).hyperparams
  assert {name: held[name] for name in ("variance_ratio", "prior_strength", "eps")} == {
      "variance_ratio": np.float32(30.0), "prior_strength": np.float32(1e-8),
      "eps": np.float32(1e-8)}

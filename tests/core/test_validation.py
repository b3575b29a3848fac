"""Bad hyperparameters fail at construction with a message naming them."""

import re

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


@pytest.mark.parametrize("name,value", VSGD_BAD)
def test_vsgd_rejects(name, value):
  with pytest.raises(ValueError, match=name):
    vsgd_optax.vsgd(0.1, **{name: value})


CONSTANT_BAD = [(n, v) for n, v in VSGD_BAD if not n.startswith("kappa")] + [
    ("kappa", -0.5), ("kappa", 1.01), ("kappa", NAN)]


@pytest.mark.parametrize("name,value", CONSTANT_BAD)
def test_constant_vsgd_rejects(name, value):
  with pytest.raises(ValueError, match=name):
    vsgd_optax.constant_vsgd(0.1, **{name: value})


@pytest.mark.parametrize("lr", [NAN, INF, -INF, np.float32("nan")])
def test_non_finite_learning_rate(lr):
  for factory in (vsgd_optax.vsgd, vsgd_optax.constant_vsgd):
    with pytest.raises(ValueError, match="learning_rate"):
      factory(lr)


def test_state_dtype_rejects_float16_and_integers():
  with pytest.raises(ValueError, match="state_dtype=float16"):
    vsgd_optax.vsgd(0.1, state_dtype=jnp.float16)
  with pytest.raises(ValueError, match="state_dtype"):
    vsgd_optax.constant_vsgd(0.1, state_dtype=jnp.int32)


def test_edges_of_valid_ranges_are_accepted_and_used():
  """Kappa 0 and 1 and eps 0 build, and step as the float64 reference does
  with those values (kappa_g = 0 replaces b_g each step; eps 0 adds nothing).
  """
  grads = reference.gradient_stream(seed=61, steps=3, shape=(4,))
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd(0.1, kappa_g=0.0, kappa_ghat=1.0, eps=0.0, weight_decay=0.0)
    state = opt.init(jnp.zeros(4, jnp.float64))
    for g, (direction, *_) in zip(grads, reference.vsgd_steps(grads, kappa_g=0.0,
                                                               kappa_ghat=1.0, eps=0.0),
                                  strict=True):
      updates, state = opt.update(jnp.asarray(g), state)
      np.testing.assert_allclose(updates, -0.1 * direction, rtol=1e-12)
    opt = vsgd_optax.constant_vsgd(optax.constant_schedule(0.1), kappa=1.0)
    state = opt.init(jnp.zeros(4, jnp.float64))
    path = [np.zeros(4)] + [p for p, *_ in reference.constant_vsgd_reference(
        grads, np.zeros(4), lambda i: 0.1, kappa=1.0)]
    for i, g in enumerate(grads):
      updates, state = opt.update(jnp.asarray(g), state)
      np.testing.assert_allclose(updates, path[i + 1] - path[i], rtol=1e-12)


def test_array_values_skip_the_eager_check():
  """inject_hyperparams passes arrays, which are not inspected eagerly: the
  value that fails as a number builds as an array, and a valid array steps as
  the same number does.
  """
  with pytest.raises(ValueError, match="variance_ratio"):
    vsgd_optax.vsgd(0.1, variance_ratio=-1.0)
  assert isinstance(vsgd_optax.vsgd(jnp.asarray(0.1), variance_ratio=jnp.asarray(-1.0)),
                    optax.GradientTransformation)
  g = jnp.array([0.5, -1.0, 2.0])
  plain, arrays = (vsgd_optax.vsgd(0.1, variance_ratio=12.0),
                   vsgd_optax.vsgd(jnp.asarray(0.1), variance_ratio=jnp.asarray(12.0)))
  np.testing.assert_array_equal(plain.update(g, plain.init(g))[0],
                                arrays.update(g, arrays.init(g))[0])


def test_grad_variance_structure_is_checked():
  opt = vsgd_optax.scale_by_vsgd()
  state = opt.init({"a": jnp.ones(2)})
  with pytest.raises(ValueError, match="grad_variance must have the same tree structure"):
    opt.update({"a": jnp.ones(2)}, state, grad_variance={"b": jnp.ones(2)})


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_a_negative_or_non_numeric_rate_is_refused_at_construction(factory):
  with pytest.raises(ValueError, match=r"learning_rate must be >= 0.*optax\.scale\(-1\.0\)"):
    factory(-1)
  for bad in ("1e-2", None, [0.1]):
    with pytest.raises(TypeError, match="learning_rate must be a number or an optax schedule"):
      factory(bad)
  # Zero (a frozen read-out), arrays and schedules are rates.
  for good in (0.0, np.float32(0.1), jnp.asarray(0.1), optax.linear_schedule(0.1, 0.0, 10)):
    assert isinstance(factory(good), optax.GradientTransformation)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd,
                                     experimental.factored_vsgd])
def test_a_bool_or_a_non_scalar_array_rate_is_refused_in_one_line(factory):
  for bad in (True, False, np.bool_(True)):
    with pytest.raises(TypeError, match="learning_rate must be a number .* got the bool"):
      factory(bad)
  for bad in (jnp.array([1e-2, 1e-2]), np.full((1, 1), 1e-2, np.float32)):
    with pytest.raises(ValueError, match=r"learning_rate must be a scalar, got an array of shape"):
      factory(bad)


def test_injected_hyperparameters_stay_float32_under_bfloat16_params():
  """``hyperparam_dtype=jnp.float32`` keeps them exact (``docs/howto.md``); without
  it optax stores them in the params' bfloat16 (kappa_g 0.81 becomes 0.8086).
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
def test_gradients_unlike_the_params_are_named_in_one_line(factory):
  opt = factory(0.1)
  state = opt.init({"w": jnp.ones((2, 3)), "b": jnp.ones(3)})
  cases = (({"w": jnp.ones((2, 3)), "b": jnp.ones(3), "c": jnp.ones(1)},
            r"update got gradients whose tree .*\(only in the gradients: \['c'\]\);"),
           ({"w": jnp.ones((2, 3))}, r"update got gradients whose tree .*only in the state: "
                                     r"\['b'\]"),
           ({"w": jnp.ones((3, 2)), "b": jnp.ones(3)},
            r"update got gradients of other shapes .*\['w'\] \(3, 2\) \(init: \(2, 3\)\);"))
  for grads, first_line in cases:
    with pytest.raises(ValueError) as caught:
      jax.jit(opt.update)(grads, state)  # at trace time, under jit as in a train step
    line = str(caught.value).splitlines()[0]  # JAX may append a note on its own lines
    assert re.match(first_line, line) and line.endswith("or init the optimizer again."), line


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_state_rounding_is_named_and_matched_to_the_state_dtype(factory):
  with pytest.raises(ValueError, match="state_rounding must be 'stochastic' or 'nearest', "
                                       "got 'up'"):
    factory(0.1, state_rounding="up")
  # float8 cannot hold the rates in either rounding (it failed at the first update
  # with JAX's TypePromotionError where rounded to nearest).
  for rounding in ("stochastic", "nearest"):
    for dtype in (ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn):
      with pytest.raises(ValueError, match=r"state_dtype=float8_\w+ cannot hold b_g and b_ghat"):
        factory(0.1, state_dtype=dtype, state_rounding=rounding)
  for ok in ({"state_dtype": jnp.bfloat16, "state_rounding": "nearest"},
             {"state_dtype": jnp.bfloat16}, {"state_dtype": jnp.float32}):
    assert isinstance(factory(0.1, **ok), optax.GradientTransformation)
  with pytest.raises(TypeError, match="state_rounding must be 'stochastic' or 'nearest', got 1"):
    factory(0.1, state_rounding=1)


FACTORIES = {"vsgd": vsgd_optax.vsgd, "constant_vsgd": vsgd_optax.constant_vsgd,
             "factored_vsgd": experimental.factored_vsgd, "vsgd_muon": vsgd_optax.vsgd_muon}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_boolean_or_a_string_is_refused_for_every_number(name):
  """``float`` would read True as 1.0 and '30' as 30.0; each is refused, naming the argument."""
  for bad in (jnp.array(True), np.bool_(False)):
    with pytest.raises(TypeError, match="learning_rate must be a number .* got the boolean"):
      FACTORIES[name](bad)
  kappa = "kappa" if name == "constant_vsgd" else "kappa_g"
  for arg in ("variance_ratio", "prior_strength", kappa, "eps", "weight_decay"):
    for bad in (True, jnp.array(False)):
      with pytest.raises(TypeError, match=f"{arg} must be a number, got the boolean"):
        FACTORIES[name](0.1, **{arg: bad})
    with pytest.raises(TypeError, match=f"{arg} must be a number or a real scalar array, got '30'"):
      FACTORIES[name](0.1, **{arg: "30"})


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_arguments_that_shape_the_state_name_static_args_under_inject_hyperparams(name):
  """inject_hyperparams turns every number (and jnp.bfloat16, which is callable)
  into an array; a dtype must be static. A threshold or a count of steps is
  read where its value is known (outside jit, as optax's muon reads ns_steps),
  so the defaults work; an init under jit that cannot know the layout names
  static_args.
  """
  params = {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}
  inject = lambda *more: optax.inject_hyperparams(FACTORIES[name], static_args=more)
  with pytest.raises(TypeError, match=re.escape("static_args=('state_dtype',)")):
    inject()(0.1, state_dtype=jnp.bfloat16).init(params)
  opt = inject("state_dtype")(0.1, state_dtype=jnp.bfloat16)
  state = opt.init(params)
  assert np.dtype(jnp.bfloat16) in {x.dtype for x in jax.tree.leaves(state.inner_state)}
  opt.update(params, state, params)  # steps
  defaults = inject()(0.1)
  jax.jit(defaults.update)(params, defaults.init(params), params)  # steps with every default
  if name == "factored_vsgd":
    factoring = inject()(0.1, min_dim_size_to_factor=3)
    state = factoring.init(params)
    assert isinstance(state.inner_state[0].b_g["w"], vsgd_optax.FactoredRate)
    jax.jit(factoring.update)(params, state, params)  # reads the layout off the state
    with pytest.raises(ValueError, match="min_dim_size_to_factor=.* name it in static_args"):
      jax.jit(factoring.init)(params)


def _others_state(name, params):
  """A state of each other optimizer here, and Adam's."""
  others = {other: FACTORIES[other](0.1).init(params) for other in FACTORIES if other != name}
  others["adam"] = optax.adam(0.1).init(params)
  return others


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_state_that_is_not_this_optimizers_is_refused_naming_what_was_expected(name):
  params = {"w": jnp.ones((3, 4)), "b": jnp.ones(4)}
  opt = FACTORIES[name](0.1)
  for state in _others_state(name, params).values():
    with pytest.raises(TypeError, match=f"{name}'s update got .*not the state its init returns"):
      opt.update(params, state, params)
  # A state of another dtype is refused both ways, never kept.
  bf16 = FACTORIES[name](0.1, state_dtype=jnp.bfloat16)
  with pytest.raises(TypeError, match=r"is bfloat16, where its init makes float32 or wider"):
    opt.update(params, bf16.init(params), params)
  with pytest.raises(TypeError, match=r"is float32, where its init makes bfloat16"):
    bf16.update(params, opt.init(params), params)
  # Its own state steps, under jit too.
  jax.jit(opt.update)(params, opt.init(params), params)


# Every public factory that takes VSGD's hyperparameters: the optimizers and their transforms.
BUILDERS = [
    vsgd_optax.vsgd, vsgd_optax.scale_by_vsgd, vsgd_optax.constant_vsgd,
    vsgd_optax.scale_by_constant_vsgd, experimental.factored_vsgd,
    experimental.scale_by_factored_vsgd, vsgd_optax.vsgd_muon, vsgd_optax.scale_by_vsgd_muon]
# VSGD's defaults, the paper's and its authors' code's (docs/algorithm.md), and the
# state's: what every signature that takes the argument writes out.
DEFAULTS = {"variance_ratio": 30.0, "prior_strength": 1e-8, "kappa_g": 0.81, "kappa_ghat": 0.9,
            "kappa": 0.9, "eps": 1e-8, "weight_decay": 0.0, "weight_decay_mask": None,
            "state_dtype": None, "state_rounding": "stochastic", "seed": 0}


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_every_signature_writes_out_vsgds_defaults_and_refuses_a_bad_value_by_name(build):
  """Each factory's ``def`` writes every keyword and its default, as optax's do:
  its source shows them, ``inspect.signature`` reads them, and a bad value is
  refused under its own name.
  """
  import inspect
  parameters = inspect.signature(build).parameters
  taken = {name: p.default for name, p in parameters.items() if name in DEFAULTS}
  assert len(taken) >= 7, taken
  # The defaults as the def writes them: literals in its own source.
  import ast
  node = ast.parse(inspect.getsource(build)).body[0]
  written = {arg.arg: ast.literal_eval(default)
             for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)
             if arg.arg in DEFAULTS}
  assert written == taken, build.__name__
  for name, default in taken.items():
    assert default == DEFAULTS[name], (build.__name__, name)
  needs_rate = "learning_rate" in parameters
  for name in ("variance_ratio", "prior_strength", "kappa_g", "kappa_ghat", "kappa", "eps"):
    if name in taken:
      bad = 2.0 if name.startswith("kappa") else -1.0
      with pytest.raises(ValueError, match=name):
        build(*((0.1,) if needs_rate else ()), **{name: bad})


@pytest.mark.parametrize("build", BUILDERS, ids=lambda build: build.__name__)
def test_every_argument_after_the_rate_is_by_keyword_and_binds_as_pythons(build):
  """A misspelt name or an extra positional argument fails as Python's own check
  does, naming the function; ``optax.inject_hyperparams``, which reads the
  signature, holds every numeric default, with no argument named static.
  """
  import inspect
  parameters = inspect.signature(build).parameters
  rate = (0.1,) if "learning_rate" in parameters else ()
  assert all(p.kind is inspect.Parameter.KEYWORD_ONLY
             for name, p in parameters.items() if name != "learning_rate")
  with pytest.raises(TypeError, match=rf"^{build.__name__}\(\) got an unexpected keyword "
                                      r"argument 'variance_ration'"):
    build(*rate, variance_ration=3.0)
  with pytest.raises(TypeError, match=rf"^{build.__name__}\(\) takes"):
    build(*rate, 30.0)
  injected = optax.inject_hyperparams(build)(*rate)
  held = injected.init({"w": jnp.ones((3, 2))}).hyperparams
  assert {name: held[name] for name in ("variance_ratio", "prior_strength", "eps")} == {
      "variance_ratio": np.float32(30.0), "prior_strength": np.float32(1e-8),
      "eps": np.float32(1e-8)}

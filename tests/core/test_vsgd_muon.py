"""``vsgd_optax.vsgd_muon``: its steps against float64 references (VSGD's mean
from ``reference.vsgd_steps`` or ``reference.factored_vsgd_steps``, Newton-Schulz
written out), its matrix direction against ``optax.contrib.muon``'s, its other
leaves against ``optax.adamw`` bit for bit, leaves that dimension numbers
describe against their 2-D reshapes, and its defaults. Beside Muon on the same
inputs: ``test_vsgd_muon_dropin.py``; on an explicit mesh: ``test_mesh.py``.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference
from tests.support.helpers import DIMS
from tests.support.reference import newton_schulz


def muon_scale(shape, consistent_rms=None):
  fan_in, fan_out = shape
  if consistent_rms is None:
    return np.sqrt(max(1.0, fan_out / fan_in))
  return np.sqrt(max(fan_in, fan_out)) * consistent_rms


def matrices(state):
  """The matrices' ``FactoredVSGDState``."""
  return state.inner_states["muon"].inner_state[0]


def stream(seed, shapes, steps):
  rng = np.random.default_rng(seed)
  params = {k: rng.normal(size=s) for k, s in shapes.items()}
  grads = [{k: rng.normal(size=s) * rng.uniform(0.1, 3.0) + 0.5 for k, s in shapes.items()}
           for _ in range(steps)]
  return params, grads


def run(opt, params, grads):
  """``opt`` over ``grads`` under ``jit``: the params and the state after the last."""
  state, update = opt.init(params), jax.jit(opt.update)
  for g in grads:
    updates, state = update(g, state, params)
    params = optax.apply_updates(params, updates)
  return params, state


@pytest.mark.parametrize("kwargs", [
    {}, {"weight_decay": 0.1}, {"consistent_rms": 0.2}, {"ns_eps": 0.5},
    {"adam_learning_rate": 0.004, "weight_decay": 0.1}, {"min_dim_size_to_factor": 4}],
    ids=["plain", "weight_decay", "consistent_rms", "ns_eps", "adam_learning_rate",
         "factored"])
def test_steps_match_the_float64_reference(kwargs):
  """A tall and a wide matrix (Newton-Schulz iterates one transposed; the wide one's
  width scale is above 1), each step Muon's orthogonalization of VSGD's mean
  (whole rates, or factored ones), and a vector that ``optax.adamw`` steps.
  """
  shapes = {"tall": (6, 4), "wide": (4, 7), "bias": (5,)}
  params0, grads = stream(20261127, shapes, steps=8)
  lr, wd, ns_eps = 0.03, kwargs.get("weight_decay", 0.0), kwargs.get("ns_eps", 1e-8)
  if "min_dim_size_to_factor" in kwargs:
    steps = {k: reference.factored_vsgd_steps([g[k] for g in grads], 0, 1) for k in ("tall",
                                                                                      "wide")}
  else:
    steps = {k: reference.vsgd_steps([g[k] for g in grads]) for k in ("tall", "wide")}
  theta = {k: params0[k] for k in ("tall", "wide")}
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd_muon(lr, **kwargs)
    # The AdamW part a half decade below the matrices' rate unless given.
    adamw = optax.adamw(kwargs.get("adam_learning_rate", lr * 10 ** -0.5), weight_decay=0.1,
                        mask={"bias": False})
    params, state = jax.tree.map(jnp.asarray, params0), opt.init(params0)
    bias, adamw_state = {"bias": params["bias"]}, adamw.init({"bias": params0["bias"]})
    for i, g in enumerate(grads):
      updates, state = jax.jit(opt.update)(jax.tree.map(jnp.asarray, g), state, params)
      params = optax.apply_updates(params, updates)
      alone, adamw_state = adamw.update({"bias": g["bias"]}, adamw_state, bias)
      bias = optax.apply_updates(bias, alone)
      chex.assert_trees_all_equal(params["bias"], bias["bias"])
      for k, x in theta.items():
        mu = steps[k][i][1]
        direction = muon_scale(x.shape, kwargs.get("consistent_rms")) * newton_schulz(
            mu, eps=ns_eps)
        theta[k] = x - lr * (direction + wd * x)
        chex.assert_trees_all_close(params[k], theta[k], rtol=1e-10, atol=1e-13)
        chex.assert_trees_all_close(matrices(state).mu[k], mu, rtol=1e-10, atol=1e-15)
  assert int(matrices(state).count) == len(grads)


NESTEROV_SHAPES = {"square": (5, 5), "tall": (6, 4), "wide": (4, 7), "stacked": (3, 4, 5),
                   "long_row": (2, 70_000), "bias": (5,)}
NESTEROV_DIMS = {"square": DIMS(), "tall": DIMS(), "wide": DIMS(), "long_row": DIMS(), "bias": None,
                 "stacked": optax.contrib.MuonDimensionNumbers(1, 2)}


def _nesterov_reference(grads, factored: bool):
  """Per step, each matrix's look-ahead ``mu_t + w (g_t - mu_t)`` in float64, ``w``
  from the rates after step t, by ``reference.vsgd_steps`` (whole rates) or
  ``reference.factored_vsgd_steps`` (a matrix of fan-in and fan-out 4 or more).
  """
  gamma, K = 1e-8, 30.0
  ahead = {}
  for k, shape in NESTEROV_SHAPES.items():
    if k == "bias":
      continue
    row_axis = len(shape) - 2
    history = [g[k] for g in grads]
    if factored and min(shape[-2:]) >= 4:
      steps = reference.factored_vsgd_steps(history, row_axis, row_axis + 1)
      rates = [(reference.rebuilt_rate(*m["b_g"], gamma, row_axis),
                reference.rebuilt_rate(*m["b_ghat"], K * gamma, row_axis)) for _, _, m in steps]
    else:
      steps = reference.vsgd_steps(history)
      rates = [(b_g, b_ghat) for _, _, b_g, b_ghat in steps]
    ahead[k] = [step[1] + b_g / (b_g + b_ghat) * (g - step[1])
                for step, (b_g, b_ghat), g in zip(steps, rates, history, strict=True)]
  return ahead


@pytest.mark.parametrize("factored", [False, True], ids=["full", "factored"])
def test_nesterov_steps_match_the_float64_reference(factored):
  """``nesterov=True``: each step is Muon's orthogonalization, matrix by matrix, of the
  look-ahead ``mu_t + w (g_t - mu_t)`` with ``w = b_g / (b_g + b_ghat)`` of the rates
  after step t, on a square, a tall, a wide and a stacked matrix and one whose row is
  longer than 2**16; factored or whole rates as ``min_dim_size_to_factor`` says.
  """
  params0, grads = stream(20261207, NESTEROV_SHAPES, steps=6)
  ahead = _nesterov_reference(grads, factored)
  lr = 0.01
  theta = {k: params0[k] for k in ahead}
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd_muon(lr, nesterov=True, muon_weight_dimension_numbers=NESTEROV_DIMS,
                               min_dim_size_to_factor=4 if factored else None)
    params, state = jax.tree.map(jnp.asarray, params0), opt.init(params0)
    for i, g in enumerate(grads):
      updates, state = jax.jit(opt.update)(jax.tree.map(jnp.asarray, g), state, params)
      params = optax.apply_updates(params, updates)
      for k, x in theta.items():
        fan_in, fan_out = x.shape[-2:]
        scale = muon_scale((fan_in, fan_out))
        look = ahead[k][i]
        direction = (np.stack([newton_schulz(m) for m in look]) if look.ndim == 3
                     else newton_schulz(look))
        theta[k] = x - lr * scale * direction
        chex.assert_trees_all_close(params[k], theta[k], rtol=1e-10, atol=1e-13)


def test_nesterov_is_static_under_inject_hyperparams_and_jit():
  """``nesterov`` is a bool, which ``optax.inject_hyperparams`` keeps static: the
  injected optimizer under ``jit(init)`` steps as the plain one, and unlike it
  without the look-ahead.
  """
  params = {"w": jnp.linspace(-1.0, 1.0, 15).reshape(5, 3), "b": jnp.ones(3)}
  grads = [jax.tree.map(lambda x, i=i: x * 0.5 + 0.1 * i ** 2, params) for i in range(4)]
  injected = optax.inject_hyperparams(vsgd_optax.vsgd_muon)(learning_rate=0.01, nesterov=True)
  assert "nesterov" not in jax.jit(injected.init)(params).hyperparams
  ahead = run(vsgd_optax.vsgd_muon(0.01, nesterov=True), params, grads)[0]
  chex.assert_trees_all_close(run(injected, params, grads)[0], ahead, rtol=1e-6, atol=1e-8)
  plain = run(vsgd_optax.vsgd_muon(0.01), params, grads)[0]
  assert float(jnp.max(jnp.abs(ahead["w"] - plain["w"]))) > 1e-4


def test_one_step_of_a_diagonal_matrix_follows_the_scalar_polynomial():
  """Worked out by hand: a 2 x 3 gradient with orthogonal rows. mu_1 = g / 31;
  divided by its norm its singular values are 1/sqrt(5) and 2/sqrt(5), and each
  Newton-Schulz step maps a singular value s to a s + b s**3 + c s**5; the
  width scale of a (2, 3) matrix is sqrt(3/2).
  """
  g = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
  singular = np.array([1.0, 2.0]) / np.sqrt(5.0)
  a, b, c = reference.MUON_NS_COEFFS
  for _ in range(5):
    singular = a * singular + b * singular ** 3 + c * singular ** 5
  expected = np.zeros((2, 3))
  expected[[0, 1], [0, 1]] = -0.5 * np.sqrt(1.5) * singular
  with jax.enable_x64(True):
    opt = vsgd_optax.vsgd_muon(0.5)
    params = {"w": jnp.zeros((2, 3))}
    updates, _ = opt.update({"w": jnp.asarray(g)}, opt.init(params), params)
    chex.assert_trees_all_close(updates["w"], expected, rtol=1e-6, atol=1e-15)
  # both singular values end near 1, neither at it (Muon's coefficients)
  assert np.all(np.abs(singular - 1) < 0.35) and np.all(singular != 1)


def test_the_matrix_direction_is_muons_orthogonalization_of_mu():
  rng = np.random.default_rng(5)
  # a signal whose singular values span three decades, plus noise
  left, _ = np.linalg.qr(rng.normal(size=(12, 8)))
  right, _ = np.linalg.qr(rng.normal(size=(8, 8)))
  signal = left @ np.diag(np.logspace(0, -3, 8)) @ right.T
  grads = [{"w": jnp.asarray(signal + 0.01 * rng.normal(size=(12, 8)), jnp.float32)}
           for _ in range(5)]
  opt = vsgd_optax.vsgd_muon(1.0)
  params = {"w": jnp.zeros((12, 8))}
  state = opt.init(params)
  for g in grads:
    updates, state = jax.jit(opt.update)(g, state, params)
  mu = matrices(state).mu["w"]
  # optax's Muon with beta = 0 and no Nesterov step orthogonalizes its input as it is
  muon = optax.contrib.muon(1.0, beta=0.0, nesterov=False)
  muon_updates, _ = muon.update({"w": mu}, muon.init({"w": mu}), {"w": mu})
  chex.assert_trees_all_close(updates, muon_updates, rtol=2e-5, atol=1e-7)
  mu_singular = np.linalg.svd(np.asarray(mu, np.float64), compute_uv=False)
  singular = np.linalg.svd(-np.asarray(updates["w"], np.float64), compute_uv=False)
  assert mu_singular[0] / mu_singular[-1] > 10  # mu is far from orthogonal
  assert 0.6 < singular.min() and singular.max() < 1.2  # Muon's iteration: near 1


@pytest.mark.parametrize("state_dtype, weight_decay", [(None, 0.0), (jnp.bfloat16, 0.05)],
                         ids=["float32", "bfloat16_decay"])
def test_leaves_that_are_not_matrices_step_as_adamw_bit_for_bit(state_dtype, weight_decay):
  """The vectors, scalars and 4-D kernels step as ``optax.adamw`` a half decade below
  the rate with decay 0.1 on the leaves of two or more axes; the matrix's state is
  ``vsgd``'s, its step is not.
  """
  rng = np.random.default_rng(31)
  shapes = {"w": (9, 4), "bias": (4,), "scalar": (), "kernel": (3, 3, 2, 4)}
  params = {k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
  grads = [{k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
           for _ in range(10)]
  some = lambda tree, keys: {k: tree[k] for k in keys}
  others = ("bias", "scalar", "kernel")
  got, state = run(vsgd_optax.vsgd_muon(0.01, weight_decay=weight_decay,
                                        state_dtype=state_dtype, seed=3), params, grads)
  adamw = optax.adamw(0.01 * 10 ** -0.5, weight_decay=0.1, mask=lambda p: jax.tree.map(
      lambda x: x.ndim >= 2, p))
  want, _ = run(adamw, some(params, others), [some(g, others) for g in grads])
  chex.assert_trees_all_equal(some(got, others), want)
  vsgd_params, vsgd_state = run(vsgd_optax.vsgd(
      0.01, weight_decay=weight_decay, state_dtype=state_dtype, seed=3),
      some(params, "w"), [some(g, "w") for g in grads])
  chex.assert_trees_all_equal(
      [getattr(matrices(state), name)["w"] for name in ("mu", "b_g", "b_ghat")],
      [getattr(vsgd_state[0], name)["w"] for name in ("mu", "b_g", "b_ghat")])
  assert not np.allclose(got["w"], vsgd_params["w"])


def test_the_recipe_built_by_hand_is_one_call():
  """VSGD-Muon on the hidden kernels, AdamW at 10**-0.5 of the rate with decay 0.1 on
  the embedding and the head, none on the vectors, as Muon's users build it with
  ``multi_transform``, is ``vsgd_muon``'s one call: the same updates, on a schedule.
  """
  rng = np.random.default_rng(20261202)
  shapes = {"embed": (16, 8), "hidden": (8, 8), "up": (8, 12), "head": (8, 16), "bias": (8,)}
  params = {k: jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32) for k, s in shapes.items()}
  schedule = optax.warmup_cosine_decay_schedule(0.0, 0.03, warmup_steps=2, decay_steps=12)
  is_hidden = lambda path: path[0].key in ("hidden", "up")
  hidden_kernels = lambda tree: jax.tree_util.tree_map_with_path(
      lambda path, _: DIMS() if is_hidden(path) else None, tree)
  one_call = vsgd_optax.vsgd_muon(schedule, muon_weight_dimension_numbers=hidden_kernels)
  labels = lambda tree: jax.tree_util.tree_map_with_path(
      lambda path, _: "matrices" if is_hidden(path) else "adamw", tree)
  by_hand = optax.multi_transform(
      {"matrices": vsgd_optax.vsgd_muon(schedule),
       "adamw": optax.adamw(lambda count: 10 ** -0.5 * schedule(count), weight_decay=0.1,
                            mask=lambda p: jax.tree.map(lambda x: x.ndim == 2, p))}, labels)
  grads = [{k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
           for _ in range(12)]
  chex.assert_trees_all_equal(run(one_call, params, grads)[0], run(by_hand, params, grads)[0])


def test_the_default_factors_each_matrix_of_fan_in_and_fan_out_128_or_more():
  """Factored rates where a matrix's fan-in and fan-out (the products of its
  reduction and output axes) are both at least 128, whole rates elsewhere; the
  same steps as ``min_dim_size_to_factor=128`` written out. The default is no
  int, so that ``inject_hyperparams`` keeps it static and ``jit(init)`` works.
  """
  rng = np.random.default_rng(20261203)
  shapes = {"big": (128, 256), "thin": (127, 512), "stack": (2, 64, 2, 128), "bias": (16,)}
  spec = {"big": DIMS(), "thin": DIMS(), "stack": DIMS((1, 2), 3), "bias": None}
  params = {k: jnp.asarray(rng.normal(size=s) * 0.1, jnp.float32) for k, s in shapes.items()}
  grads = [{k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
           for _ in range(2)]
  default = vsgd_optax.vsgd_muon(0.01, muon_weight_dimension_numbers=spec)
  assert repr(vsgd_optax.vsgd_muon.__kwdefaults__["min_dim_size_to_factor"]) == "128"
  rates = matrices(default.init(params)).b_g
  assert (rates["stack"].row.shape, rates["stack"].col.shape) == ((2, 64, 2, 1), (2, 1, 1, 128))
  assert isinstance(rates["big"], vsgd_optax.FactoredRate) and rates["thin"].shape == (127, 512)
  written = vsgd_optax.vsgd_muon(0.01, muon_weight_dimension_numbers=spec,
                                 min_dim_size_to_factor=128)
  chex.assert_trees_all_equal(run(default, params, grads), run(written, params, grads))
  injected = optax.inject_hyperparams(vsgd_optax.vsgd_muon)(
      learning_rate=0.01, muon_weight_dimension_numbers=spec)
  state = jax.jit(injected.init)(params)
  assert isinstance(matrices(state.inner_state).b_g["big"], vsgd_optax.FactoredRate)
  # An explicit threshold is traced there, and the state's shapes hang on it.
  explicit = optax.inject_hyperparams(vsgd_optax.vsgd_muon)(
      learning_rate=0.01, min_dim_size_to_factor=64)
  with pytest.raises(ValueError, match=r"static_args=\('min_dim_size_to_factor',\)"):
    jax.jit(explicit.init)(params)
  # Made outside jit, its layout is read off the state by the jitted update, as factored_vsgd's.
  state = explicit.init(params)
  assert isinstance(matrices(state.inner_state).b_g["big"], vsgd_optax.FactoredRate)
  jax.jit(explicit.update)(grads[0], state, params)


def test_jit_none_leaves_and_the_read_outs():
  rng = np.random.default_rng(2)
  params = {"w": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32), "frozen": None,
            "b": jnp.zeros(3)}
  grads = {"w": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32), "frozen": None,
           "b": jnp.ones(3)}
  opt = vsgd_optax.vsgd_muon(0.1)
  state = opt.init(params)
  for _ in range(3):
    updates, state = jax.jit(opt.update)(grads, state, params)
  assert updates["frozen"] is None and matrices(state).mu["frozen"] is None
  held = matrices(state)
  chex.assert_trees_all_equal(
      vsgd_optax.effective_beta1(state.inner_states["muon"], variance_ratio=30.0,
                                 prior_strength=1e-8)["w"],
      held.b_ghat["w"] / (held.b_g["w"] + held.b_ghat["w"]))
  # Three singular values near 1 (width scale 1): a norm near sqrt(3) times the rate.
  assert 1.2 < float(jnp.linalg.norm(updates["w"])) / 0.1 < 2.1
  # The vector steps by Adam's normalized mean a half decade below the rate.
  chex.assert_trees_all_close(updates["b"], jnp.full(3, -0.1 * 10 ** -0.5), rtol=1e-4)


def test_bfloat16_params_get_bfloat16_steps_computed_in_float32():
  rng = np.random.default_rng(8)
  grads = {"w": jnp.asarray(rng.normal(size=(6, 4)), jnp.bfloat16),
           "b": jnp.asarray(rng.normal(size=4), jnp.bfloat16)}
  opt = vsgd_optax.vsgd_muon(1.0)
  params = jax.tree.map(jnp.zeros_like, grads)
  updates, state = jax.jit(opt.update)(grads, opt.init(params), params)
  chex.assert_trees_all_equal_dtypes(updates, grads)
  mu = matrices(state).mu["w"]
  assert mu.dtype == jnp.float32  # vsgd's default state dtype
  chex.assert_trees_all_close(np.asarray(updates["w"], np.float64), -newton_schulz(mu),
                              rtol=1e-2, atol=1e-2)


def test_an_empty_matrix_steps_with_adamw_by_nothing():
  """A leaf with no elements has nothing to orthogonalize: AdamW steps it (Muon's
  width scale divides by its zero fan-in), and the other leaves step as alone.
  """
  for shape in [(0, 4), (4, 0), (0, 0)]:
    params = {"w": jnp.ones((3, 4)), "empty": jnp.ones(shape)}
    opt = vsgd_optax.vsgd_muon(0.02)
    updates, state = opt.update(params, opt.init(params), params)
    alone, _ = opt.update({"w": params["w"]}, opt.init({"w": params["w"]}), {"w": params["w"]})
    assert updates["empty"].shape == shape
    chex.assert_trees_all_equal(updates["w"], alone["w"])
    assert isinstance(matrices(state).mu["empty"], optax.MaskedNode)


def test_weight_decay_needs_the_params():
  opt = vsgd_optax.vsgd_muon(0.1, weight_decay=0.1)
  params = {"w": jnp.ones((3, 2))}
  with pytest.raises(ValueError, match="params"):
    opt.update(params, opt.init(params))


@pytest.mark.parametrize("kwargs, error, name", [
    ({"ns_steps": 0}, ValueError, "ns_steps"), ({"ns_steps": 2.5}, ValueError, "ns_steps"),
    ({"ns_steps": True}, ValueError, "ns_steps"), ({"ns_coeffs": (1.0, 2.0)}, ValueError,
                                                   "ns_coeffs"),
    ({"ns_coeffs": ((1.0, 2.0, 3.0),) * 6}, ValueError, "ns_steps"),
    ({"ns_eps": -1.0}, ValueError, "ns_eps"),
    ({"preconditioning": "polar"}, ValueError, "preconditioning"),
    ({"consistent_rms": 0.0}, ValueError, "consistent_rms"),
    ({"weight_decay": -0.1}, ValueError, "weight_decay"),
    ({"kappa_g": 1.5}, ValueError, "kappa_g"), ({"variance_ratio": 0.0}, ValueError,
                                                "variance_ratio"),
    ({"state_rounding": "up"}, ValueError, "rounding"),
    ({"adam_weight_decay": -0.1}, ValueError, "adam_weight_decay"),
    ({"adam_b2": 1.5}, ValueError, "adam_b2"),
    ({"adam_learning_rate": -1.0}, ValueError, "adam_learning_rate"),
    ({"min_dim_size_to_factor": 1}, ValueError, "min_dim_size_to_factor"),
    # The research switches are gone: Python's own error names each.
    ({"normalize": "rows"}, TypeError, "normalize"),
    # A momentum meant for Muon's beta: it would read as True.
    ({"nesterov": 0.9}, TypeError, "nesterov must be True or False"),
    ({"orthogonalize": "direction"}, TypeError, "orthogonalize"),
])
def test_bad_arguments_are_refused_when_built(kwargs, error, name):
  with pytest.raises(error, match=name):
    vsgd_optax.vsgd_muon(0.01, **kwargs)
  with pytest.raises(ValueError, match="^learning_rate"):
    vsgd_optax.vsgd_muon(-0.01)


def test_the_scaling_alone_refuses_leaves_that_are_not_matrices():
  opt = vsgd_optax.scale_by_vsgd_muon()
  with pytest.raises(ValueError, match=r"\['b'\]"):
    opt.init({"w": jnp.zeros((3, 3)), "b": jnp.zeros(3)})
  matrix = {"w": jnp.asarray(np.random.default_rng(1).normal(size=(3, 5)), jnp.float32)}
  updates, _ = opt.update(matrix, opt.init(matrix))  # no params needed, no shape scale
  chex.assert_trees_all_close(updates["w"], newton_schulz(matrix["w"] / 31), rtol=2e-5,
                              atol=1e-6)


def test_a_spectral_preconditioning_steps_near_the_frobenius_one():
  params = {"w": jnp.asarray(np.random.default_rng(8).normal(size=(3, 5)), jnp.float32)}
  steps = {}
  for preconditioning in ("frobenius", "spectral"):
    opt = vsgd_optax.vsgd_muon(0.1, preconditioning=preconditioning)
    steps[preconditioning], _ = opt.update(params, opt.init(params), params)
  chex.assert_tree_all_finite(steps)
  a, b = steps["spectral"]["w"], steps["frobenius"]["w"]
  assert not np.array_equal(a, b)
  assert np.sum(a * b) / (np.linalg.norm(a) * np.linalg.norm(b)) > 0.9


def test_dimension_numbers_name_the_matrices_as_optax_contrib_muon_takes_them():
  """The embedding left to AdamW (None), a 3-D kernel orthogonalized per batch index
  over its last two axes, a 2-D kernel as usual; each step against the float64
  reference, with the tree given and as a function of the params.
  """
  shapes = {"embed": (6, 4), "stack": (2, 3, 5), "kernel": (4, 6)}
  spec = {"embed": None, "stack": DIMS(reduction_axis=1, output_axis=2), "kernel": DIMS()}
  params0, grads = stream(20261128, shapes, steps=5)
  lr = 0.03
  steps = {k: reference.vsgd_steps([g[k] for g in grads]) for k in shapes}
  with jax.enable_x64(True):
    for given in (spec, lambda params: spec):
      opt = vsgd_optax.vsgd_muon(lr, muon_weight_dimension_numbers=given)
      params, state = jax.tree.map(jnp.asarray, params0), opt.init(params0)
      theta = dict(params0)
      assert [x.shape for x in jax.tree.leaves(state.inner_states["adam"].inner_state[0].mu)
              ] == [shapes["embed"]]
      for i, g in enumerate(grads):
        updates, state = jax.jit(opt.update)(jax.tree.map(jnp.asarray, g), state, params)
        params = optax.apply_updates(params, updates)
        mu = {k: steps[k][i][1] for k in ("stack", "kernel")}
        theta["stack"] = theta["stack"] - lr * muon_scale((3, 5)) * np.stack(
            [newton_schulz(m) for m in mu["stack"]])
        theta["kernel"] = theta["kernel"] - lr * muon_scale((4, 6)) * newton_schulz(mu["kernel"])
        chex.assert_trees_all_close({k: params[k] for k in mu}, {k: theta[k] for k in mu},
                                    rtol=1e-10, atol=1e-13)


def reshaped_run(opt_of, shape, to_matrix, steps=6, seed=20261202):
  """``opt_of(True)``'s params after ``steps`` on a leaf of ``shape``, read through
  ``to_matrix``, and ``opt_of(False)``'s on the leaf's 2-D reshape ``to_matrix(leaf)``.
  """
  rng = np.random.default_rng(seed)
  leaf = jnp.asarray(rng.normal(size=shape), jnp.float32)
  grads = [jnp.asarray(rng.normal(size=shape) * rng.uniform(0.2, 2.0, size=shape[-1]) + 0.3,
                       jnp.float32) for _ in range(steps)]
  described, _ = run(opt_of(True), {"w": leaf}, [{"w": g} for g in grads])
  reshaped, _ = run(opt_of(False), {"w": to_matrix(leaf)}, [{"w": to_matrix(g)} for g in grads])
  return to_matrix(described["w"]), reshaped["w"]


@pytest.mark.parametrize("factored", [False, True], ids=["full", "factored"])
def test_a_leaf_that_dimension_numbers_describe_steps_as_its_2d_reshape(factored):
  """A (4, 16, 8) kernel reducing over axis 1 and outputting (0, 2) is the (16, 32)
  matrix ``x.transpose(1, 0, 2).reshape(16, 32)``: its steps are that matrix's, in
  the full and the factored form (which factors those axes). Negative axes name
  the same ones.
  """
  to_matrix = lambda x: x.transpose(1, 0, 2).reshape(16, 32)
  for spec in (DIMS(1, (0, 2)), DIMS(-2, (-3, -1))):
    def opt_of(described, spec=spec):
      return vsgd_optax.vsgd_muon(
          0.02, min_dim_size_to_factor=16 if factored else None,
          muon_weight_dimension_numbers={"w": spec} if described else None)
    got, want = reshaped_run(opt_of, (4, 16, 8), to_matrix)
    chex.assert_trees_all_close(got, want, rtol=2e-5, atol=2e-6)
  if factored:  # the state holds the (16, 32) matrix's means, as the reshape's does
    rate = matrices(opt_of(True).init({"w": jnp.zeros((4, 16, 8))})).b_g["w"]
    assert (rate.row.shape, rate.col.shape) == ((1, 16, 1), (4, 1, 8))


def test_a_batched_leaf_steps_as_its_matrices_do_apart():
  """A 3-D leaf with ``MuonDimensionNumbers(0, 1)``: one matrix per index of its
  last axis, each stepping as that matrix alone.
  """
  rng = np.random.default_rng(7)
  params = {"w": jnp.asarray(rng.normal(size=(6, 4, 3)), jnp.float32)}
  grads = [{"w": jnp.asarray(rng.normal(size=(6, 4, 3)) + 0.2, jnp.float32)} for _ in range(4)]
  got, _ = run(vsgd_optax.vsgd_muon(0.02, muon_weight_dimension_numbers={"w": DIMS(0, 1)}),
               params, grads)
  for k in range(3):
    alone, _ = run(vsgd_optax.vsgd_muon(0.02), {"w": params["w"][..., k]},
                   [{"w": g["w"][..., k]} for g in grads])
    chex.assert_trees_all_close(got["w"][..., k], alone["w"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("scale", [0.0, 1e-30, 1e-42], ids=["zero", "tiny", "subnormal"])
def test_a_zero_or_tiny_gradient_steps_finite(scale):
  params = {"w": jnp.ones((4, 6))}
  grad = {"w": scale * jnp.asarray(np.random.default_rng(3).normal(size=(4, 6)), jnp.float32)}
  opt = vsgd_optax.vsgd_muon(0.1)
  updates, state = jax.jit(opt.update)(grad, opt.init(params), params)
  chex.assert_tree_all_finite(updates)
  if scale == 0.0:
    chex.assert_trees_all_equal(updates["w"], jnp.zeros((4, 6)))
  chex.assert_tree_all_finite(jax.jit(opt.update)(grad, state, params)[0])


class Variable:
  """A stand-in for a Flax NNX ``Variable`` (Flax is not a core dependency): a
  pytree node whose one child is its ``.value``, passing attribute lookups through.
  """

  def __init__(self, value):
    self.value = value

  def __getattr__(self, name):
    return getattr(self.__dict__["value"], name)


jax.tree_util.register_pytree_with_keys(
    Variable, lambda v: (((jax.tree_util.GetAttrKey("value"), v.value),), None),
    lambda _, children: Variable(*children))


def test_dimension_numbers_of_variables_are_resolved_once_at_init():
  """As ``nnx.Optimizer`` hands them over: ``init`` sees Variables (paths end in
  ``.value``), ``update`` plain arrays. A plain dict of the names, a function of
  the params that tests a path's end, and a tree made once from the Variables all
  name the same matrices; the function is called once, at ``init``, on the arrays.
  """
  rng = np.random.default_rng(9)
  arrays = {"l1": {"kernel": jnp.asarray(rng.normal(size=(4, 6)), jnp.float32),
                   "bias": jnp.zeros(6)}, "l2": {"kernel": jnp.zeros((6, 2))}}
  variables = jax.tree.map(Variable, arrays)
  grads = jax.tree.map(lambda x: x + 0.5, arrays)
  plain = {"l1": {"kernel": DIMS(), "bias": None}, "l2": {"kernel": None}}
  calls = []

  def by_path(tree):
    calls.append(tree)
    return jax.tree_util.tree_map_with_path(lambda path, _: DIMS() if jax.tree_util.keystr(
        path).endswith("['l1']['kernel']") else None, tree)
  reference_opt = vsgd_optax.vsgd_muon(0.1, muon_weight_dimension_numbers=plain)
  want, _ = jax.jit(reference_opt.update)(grads, reference_opt.init(arrays), arrays)
  over_variables = jax.tree.map(lambda x: DIMS() if x.shape == (4, 6) else None, variables)
  for spec in (plain, by_path, over_variables):
    opt = vsgd_optax.vsgd_muon(0.1, muon_weight_dimension_numbers=spec)
    # nnx.Optimizer keeps the state init makes of the Variables as plain arrays.
    state = jax.tree.map(lambda x: x.value if isinstance(x, Variable) else x,
                         opt.init(variables), is_leaf=lambda x: isinstance(x, Variable))
    got, _ = jax.jit(opt.update)(grads, state, arrays)
    chex.assert_trees_all_equal(got, want)
  assert len(calls) == 1  # at init, on the arrays the Variables hold
  chex.assert_trees_all_equal(calls[0], arrays)


def test_inject_hyperparams_takes_vsgd_muon_with_its_defaults():
  """As it takes ``optax.contrib.muon``: ``ns_steps`` injected as an integer array,
  under ``jit`` too (init included), stepping as the plain optimizer does.
  """
  params = {"w": jnp.linspace(-1.0, 1.0, 15).reshape(5, 3), "b": jnp.ones(3)}
  grads = [jax.tree.map(lambda x, i=i: x * 0.5 + 0.1 * i, params) for i in range(3)]
  injected = optax.inject_hyperparams(vsgd_optax.vsgd_muon)(learning_rate=0.01)
  plain = vsgd_optax.vsgd_muon(0.01)
  assert jax.jit(injected.init)(params).hyperparams["ns_steps"].dtype == jnp.int32
  chex.assert_trees_all_close(run(injected, params, grads)[0], run(plain, params, grads)[0],
                              rtol=1e-6, atol=1e-8)


def test_newton_schulz_takes_one_triple_a_step_up_to_ns_steps():
  """Optax's rule: a sequence of triples runs one a step, at most ``ns_steps`` of
  them; as many as the steps is allowed, and fewer run from the last.
  """
  triple = reference.MUON_NS_COEFFS
  params = {"w": jnp.asarray(np.random.default_rng(6).normal(size=(4, 5)), jnp.float32)}
  same = vsgd_optax.vsgd_muon(0.1, ns_coeffs=(triple,) * 5, ns_steps=5)
  plain = vsgd_optax.vsgd_muon(0.1)
  chex.assert_trees_all_close(same.update(params, same.init(params), params)[0],
                              plain.update(params, plain.init(params), params)[0], rtol=1e-6)
  one = vsgd_optax.vsgd_muon(0.1, ns_coeffs=(triple,), ns_steps=5)
  chex.assert_tree_all_finite(one.update(params, one.init(params), params)[0])


@pytest.mark.parametrize("state_dtype, expected", [(None, 4.0), (jnp.bfloat16, 2.0)],
                         ids=["float32", "bfloat16"])
def test_the_factored_form_keeps_muons_bytes_and_a_sliver(state_dtype, expected):
  """A 1024 x 1024 matrix: ``mu`` and its rates' 2 x 2 x 1024 float32 means."""
  params = {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)}

  def bytes_a_parameter(opt):
    state = jax.eval_shape(opt.init, params)
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state)
               if x.ndim) / 1024 ** 2
  factored = bytes_a_parameter(vsgd_optax.vsgd_muon(0.01, state_dtype=state_dtype))
  assert factored == pytest.approx(expected + 4 * 1024 * 4 / 1024 ** 2)
  full = bytes_a_parameter(vsgd_optax.vsgd_muon(
      0.01, min_dim_size_to_factor=None, state_dtype=state_dtype))
  assert full == pytest.approx(3 * expected)


def test_the_experimental_names_resolve_to_the_public_ones_with_a_warning():
  from vsgd_optax import experimental
  for name in ("vsgd_muon", "scale_by_vsgd_muon"):
    with pytest.warns(DeprecationWarning, match=rf"vsgd_optax\.{name}"):
      moved = getattr(experimental, name)
    assert moved is getattr(vsgd_optax, name)
  with pytest.raises(AttributeError, match="vsgd_moun"):
    experimental.vsgd_moun  # noqa: B018  (a misspelt name is an error, not a warning)

"""``experimental.vsgd_muon``: its steps against a float64 NumPy reference
(VSGD's mean from ``reference.vsgd_steps``, Newton-Schulz written out with
Muon's coefficients), its matrix direction against ``optax.contrib.muon``'s
orthogonalization of the same mean, its other leaves against ``vsgd`` bit for
bit, and its use under ``jit`` with ``None`` leaves and no params.
"""

import inspect
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests.support import reference
from vsgd_optax import experimental

MUON_COEFFS = (3.4445, -4.7750, 2.0315)


def newton_schulz(x, coeffs=MUON_COEFFS, steps=5, eps=1e-8):
  """Muon's quintic Newton-Schulz iteration on a float64 matrix, as written:
  the wide orientation, divided by its Frobenius norm, then
  ``X <- a X + (b A + c A A) X`` with ``A = X X^T``.
  """
  a, b, c = coeffs
  x = np.array(x, np.float64)
  tall = x.shape[0] > x.shape[1]
  if tall:
    x = x.T
  x = x / (np.linalg.norm(x) + eps)
  for _ in range(steps):
    gram = x @ x.T
    x = a * x + (b * gram + c * gram @ gram) @ x
  return x.T if tall else x


def muon_scale(shape, consistent_rms=None):
  fan_in, fan_out = shape
  if consistent_rms is None:
    return np.sqrt(max(1.0, fan_out / fan_in))
  return np.sqrt(max(fan_in, fan_out)) * consistent_rms


def vsgd_muon_reference(grads, params0, lr, weight_decay=0.0, nesterov=False,
                        consistent_rms=None, ns_eps=1e-8, vsgd_lr=None):
  """Float64 steps of ``vsgd_muon`` on a dict of leaves: per step, the
  params and each leaf's (mu, b_g, b_ghat). The leaves that are not matrices
  step at ``vsgd_lr`` (default: ``lr``).
  """
  steps = {k: reference.vsgd_steps([g[k] for g in grads]) for k in params0}
  theta = {k: np.array(v, np.float64) for k, v in params0.items()}
  history = []
  for i, g in enumerate(grads):
    for k in theta:
      u, mu, b_g, b_ghat = steps[k][i]
      if theta[k].ndim == 2:
        mean = mu + b_g / (b_g + b_ghat) * (g[k] - mu) if nesterov else mu
        direction = muon_scale(theta[k].shape, consistent_rms) * newton_schulz(mean, eps=ns_eps)
        rate = lr
      else:
        direction, rate = u, lr if vsgd_lr is None else vsgd_lr
      theta[k] = theta[k] - rate * (direction + weight_decay * theta[k])
    history.append(({k: v.copy() for k, v in theta.items()},
                    {k: steps[k][i][1:] for k in theta}))
  return history


def _groups(state):
  """The two groups' ``ScaleByVSGDState``s: ``(matrices, others)``."""
  return tuple(state.inner_states[name].inner_state[0] for name in ("muon", "vsgd"))


def _stream(seed, shapes, steps):
  rng = np.random.default_rng(seed)
  params = {k: rng.normal(size=s) for k, s in shapes.items()}
  grads = [{k: rng.normal(size=s) * rng.uniform(0.1, 3.0) + 0.5 for k, s in shapes.items()}
           for _ in range(steps)]
  return params, grads


@pytest.mark.parametrize("nesterov, weight_decay, consistent_rms, more",
                         [(False, 0.0, None, {}), (True, 0.0, None, {}), (False, 0.1, None, {}),
                          (False, 0.0, 0.2, {}), (False, 0.0, None, {"ns_eps": 0.5}),
                          (False, 0.1, None, {"vsgd_learning_rate": 0.004})],
                         ids=["plain", "nesterov", "weight_decay", "consistent_rms", "ns_eps",
                              "vsgd_learning_rate"])
def test_steps_match_the_float64_reference(nesterov, weight_decay, consistent_rms, more):
  # a tall and a wide matrix (Newton-Schulz transposes one; the width scale is
  # above 1 for the wide one) and a vector
  shapes = {"tall": (6, 4), "wide": (3, 7), "bias": (5,)}
  params0, grads = _stream(20261127, shapes, steps=8)
  lr = 0.03
  expected = vsgd_muon_reference(grads, params0, lr, weight_decay, nesterov, consistent_rms,
                                 ns_eps=more.get("ns_eps", 1e-8),
                                 vsgd_lr=more.get("vsgd_learning_rate"))
  with jax.enable_x64(True):
    opt = experimental.vsgd_muon(lr, nesterov=nesterov, weight_decay=weight_decay,
                                 consistent_rms=consistent_rms, **more)
    params = {k: jnp.asarray(v) for k, v in params0.items()}
    state = opt.init(params)
    update = jax.jit(opt.update)
    for g, (theta, moments) in zip(grads, expected, strict=True):
      updates, state = update({k: jnp.asarray(v) for k, v in g.items()}, state, params)
      params = optax.apply_updates(params, updates)
      matrices, others = _groups(state)
      for k in shapes:
        assert params[k].dtype == jnp.float64
        np.testing.assert_allclose(params[k], theta[k], rtol=1e-10, atol=1e-13)
        held = matrices if k != "bias" else others
        for name, value in zip(("mu", "b_g", "b_ghat"), moments[k], strict=True):
          np.testing.assert_allclose(getattr(held, name)[k], value, rtol=1e-10, atol=1e-15)
    assert int(matrices.count) == int(others.count) == len(grads)


def test_one_step_of_a_diagonal_matrix_follows_the_scalar_polynomial():
  """Worked out by hand: a 2 x 3 gradient with orthogonal rows. mu_1 = g / 31;
  divided by its norm its singular values are 1/sqrt(5) and 2/sqrt(5), and each
  Newton-Schulz step maps a singular value s to a s + b s**3 + c s**5; the
  width scale of a (2, 3) matrix is sqrt(3/2).
  """
  g = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
  singular = np.array([1.0, 2.0]) / np.sqrt(5.0)
  a, b, c = MUON_COEFFS
  for _ in range(5):
    singular = a * singular + b * singular ** 3 + c * singular ** 5
  expected = np.zeros((2, 3))
  expected[[0, 1], [0, 1]] = -0.5 * np.sqrt(1.5) * singular
  (theta, _), = vsgd_muon_reference([{"w": g}], {"w": np.zeros((2, 3))}, lr=0.5)
  np.testing.assert_allclose(theta["w"], expected, rtol=1e-6, atol=1e-15)
  with jax.enable_x64(True):
    opt = experimental.vsgd_muon(0.5)
    updates, _ = opt.update({"w": jnp.asarray(g)}, opt.init({"w": jnp.zeros((2, 3))}))
    np.testing.assert_allclose(updates["w"], expected, rtol=1e-6, atol=1e-15)
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
  opt = experimental.vsgd_muon(1.0)
  state = opt.init({"w": jnp.zeros((12, 8))})
  update = jax.jit(opt.update)
  for g in grads:
    updates, state = update(g, state)
  mu = _groups(state)[0].mu["w"]
  # optax's Muon, fed mu as its gradient with beta = 0 and no Nesterov step,
  # orthogonalizes mu itself
  muon = optax.contrib.muon(1.0, beta=0.0, nesterov=False)
  # (its decay, at 0, still asks for params)
  muon_updates, _ = muon.update({"w": mu}, muon.init({"w": mu}), {"w": mu})
  np.testing.assert_allclose(updates["w"], muon_updates["w"], rtol=2e-5, atol=1e-7)
  mu_singular = np.linalg.svd(np.asarray(mu, np.float64), compute_uv=False)
  singular = np.linalg.svd(-np.asarray(updates["w"], np.float64), compute_uv=False)
  assert mu_singular[0] / mu_singular[-1] > 10  # mu is far from orthogonal (15 here)
  # Muon's iteration leaves the singular values near 1 (here 0.69 to 1.13),
  # not at it; 12 x 8 has width scale 1
  assert 0.6 < singular.min() and singular.max() < 1.2
  assert singular.max() / singular.min() < 1.75
  # and it points where mu does (cosine 0.80 here)
  cosine = np.sum(-np.asarray(updates["w"]) * np.asarray(mu)) / (
      np.linalg.norm(updates["w"]) * np.linalg.norm(mu))
  assert cosine > 0.7


@pytest.mark.parametrize("state_dtype, weight_decay", [(None, 0.0), (jnp.bfloat16, 0.05)],
                         ids=["float32", "bfloat16_decay"])
def test_leaves_that_are_not_matrices_step_as_vsgd_bit_for_bit(state_dtype, weight_decay):
  rng = np.random.default_rng(31)
  shapes = {"w": (9, 4), "bias": (4,), "scalar": (), "kernel": (3, 3, 2, 4)}
  params = {k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
  grads = [{k: jnp.asarray(rng.normal(size=s), jnp.float32) for k, s in shapes.items()}
           for _ in range(10)]

  def run(opt):
    p, state = params, opt.init(params)
    update = jax.jit(opt.update)
    for g in grads:
      updates, state = update(g, state, p)
      p = optax.apply_updates(p, updates)
    return p, state

  muon_params, muon_state = run(experimental.vsgd_muon(
      0.01, weight_decay=weight_decay, state_dtype=state_dtype, seed=3))
  vsgd_params, vsgd_state = run(vsgd_optax.vsgd(
      0.01, weight_decay=weight_decay, state_dtype=state_dtype, seed=3))
  others, full = _groups(muon_state)[1], vsgd_state[0]
  for key in ("bias", "scalar", "kernel"):
    np.testing.assert_array_equal(muon_params[key], vsgd_params[key])
    for name in ("mu", "b_g", "b_ghat"):
      held, expected = getattr(others, name)[key], getattr(full, name)[key]
      assert held.dtype == expected.dtype
      np.testing.assert_array_equal(held, expected)
  # the matrix's state is VSGD's too (its inference is unchanged), its step is not
  matrices = _groups(muon_state)[0]
  for name in ("mu", "b_g", "b_ghat"):
    np.testing.assert_array_equal(getattr(matrices, name)["w"], getattr(full, name)["w"])
  assert not np.allclose(muon_params["w"], vsgd_params["w"])


def test_jit_none_leaves_and_no_params():
  rng = np.random.default_rng(2)
  params = {"w": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32), "frozen": None,
            "b": jnp.zeros(3)}
  opt = experimental.vsgd_muon(0.1)
  state = opt.init(params)
  update = jax.jit(opt.update)
  grads = {"w": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32), "frozen": None,
           "b": jnp.ones(3)}
  for _ in range(3):
    updates, state = update(grads, state)  # no params: weight_decay is 0
  assert updates["frozen"] is None
  matrices, others = _groups(state)
  assert isinstance(matrices, vsgd_optax.ScaleByVSGDState)
  for name in ("mu", "b_g", "b_ghat"):
    assert getattr(matrices, name)["w"].shape == (5, 3)
    assert getattr(others, name)["b"].shape == (3,)
    assert getattr(matrices, name)["frozen"] is None
  # the read-outs take one group's state
  np.testing.assert_array_equal(
      vsgd_optax.effective_beta1(state.inner_states["muon"])["w"],
      matrices.b_ghat["w"] / (matrices.b_g["w"] + matrices.b_ghat["w"]))
  # the step is mu's orthogonalization times the rate: a (5, 3) matrix of
  # width scale 1 whose three singular values are near 1, so its norm is
  # near sqrt(3) = 1.73 times the rate
  assert 1.2 < float(jnp.linalg.norm(updates["w"])) / 0.1 < 2.1
  # the vector steps by VSGD's normalized mean, near -lr where the gradient is constant
  np.testing.assert_array_less(updates["b"], -0.05)


@pytest.mark.parametrize("nesterov", [False, True], ids=["plain", "nesterov"])
def test_bfloat16_params_get_bfloat16_steps_computed_in_float32(nesterov):
  rng = np.random.default_rng(8)
  grads = {"w": jnp.asarray(rng.normal(size=(6, 4)), jnp.bfloat16),
           "b": jnp.asarray(rng.normal(size=4), jnp.bfloat16)}
  opt = experimental.vsgd_muon(1.0, nesterov=nesterov)
  state = opt.init(jax.tree.map(jnp.zeros_like, grads))
  updates, state = jax.jit(opt.update)(grads, state)
  assert updates["w"].dtype == updates["b"].dtype == jnp.bfloat16
  matrices = _groups(state)[0]
  assert matrices.mu["w"].dtype == jnp.float32  # vsgd's default state dtype
  mean = np.asarray(matrices.mu["w"], np.float64)
  if nesterov:
    b_g, b_ghat = (np.asarray(getattr(matrices, n)["w"], np.float64) for n in ("b_g", "b_ghat"))
    mean = mean + b_g / (b_g + b_ghat) * (np.asarray(grads["w"], np.float64) - mean)
  np.testing.assert_allclose(np.asarray(updates["w"], np.float64), -newton_schulz(mean),
                             rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (0, 0)])
def test_an_empty_matrix_steps_by_nothing_and_leaves_the_others_alone(shape):
  """Adam steps a leaf with no elements; so does vsgd_muon, whose width scale
  would otherwise divide by a zero fan-in.
  """
  params = {"w": jnp.ones((3, 4)), "empty": jnp.ones(shape)}
  opt = experimental.vsgd_muon(0.02)
  updates, _ = opt.update(params, opt.init(params), params)
  alone, _ = opt.update({"w": params["w"]}, opt.init({"w": params["w"]}), {"w": params["w"]})
  assert updates["empty"].shape == shape
  np.testing.assert_array_equal(updates["w"], alone["w"])


def test_weight_decay_needs_the_params():
  opt = experimental.vsgd_muon(0.1, weight_decay=0.1)
  params = {"w": jnp.ones((3, 2))}
  state = opt.init(params)
  with pytest.raises(ValueError):
    opt.update(params, state)
  updates, _ = opt.update(params, state, params)
  assert updates["w"].shape == (3, 2)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"ns_steps": 0}, ValueError, "ns_steps must be a whole number >= 1"),
    ({"ns_steps": 2.5}, ValueError, "ns_steps must be a whole number >= 1"),
    ({"ns_steps": True}, ValueError, "ns_steps must be a whole number >= 1"),
    ({"ns_coeffs": (1.0, 2.0)}, ValueError, "ns_coeffs must be three finite numbers"),
    ({"ns_coeffs": "dion"}, ValueError, "ns_coeffs must be three"),
    ({"ns_coeffs": ((1.0, 2.0, 3.0),) * 6}, ValueError, "ns_steps .5. must be at least"),
    ({"ns_eps": -1.0}, ValueError, "ns_eps must be >= 0"),
    ({"preconditioning": "polar"}, ValueError, "preconditioning must be one of"),
    ({"consistent_rms": 0.0}, ValueError, "consistent_rms must be a finite number > 0"),
    ({"nesterov": 1}, TypeError, "nesterov must be a bool"),
    ({"weight_decay": -0.1}, ValueError, "weight_decay must be >= 0"),
    ({"kappa_g": 1.5}, ValueError, "kappa_g must lie in"),
    ({"variance_ratio": 0.0}, ValueError, "variance_ratio must be a finite number > 0"),
    ({"state_rounding": "up"}, ValueError, "rounding"),
])
def test_bad_arguments_are_refused_when_built(kwargs, error, match):
  with pytest.raises(error, match=match):
    experimental.vsgd_muon(0.01, **kwargs)


def test_bad_learning_rates_are_refused():
  with pytest.raises(ValueError, match="learning_rate must be >= 0"):
    experimental.vsgd_muon(-0.01)
  with pytest.raises(ValueError, match="learning_rate must be >= 0"):
    experimental.vsgd_muon(0.01, vsgd_learning_rate=-1.0)


def test_the_scaling_alone_refuses_leaves_that_are_not_matrices():
  opt = experimental.scale_by_vsgd_muon()
  with pytest.raises(ValueError, match=r"not 2-D, or .*no matrix: \['b'\] \(3,\)"):
    opt.init({"w": jnp.zeros((3, 3)), "b": jnp.zeros(3)})


def test_preconditionings_other_than_frobenius_run_from_optax_0_2_8_and_are_refused_before():
  params = {"w": jnp.asarray(np.random.default_rng(8).normal(size=(3, 5)), jnp.float32)}
  if "preconditioning" in inspect.signature(optax.contrib.scale_by_muon).parameters:
    steps = {}
    for preconditioning in ("frobenius", "spectral"):
      opt = experimental.vsgd_muon(0.1, preconditioning=preconditioning)
      steps[preconditioning], _ = opt.update(params, opt.init(params))
    # the same direction, scaled before Newton-Schulz by another norm
    assert np.all(np.isfinite(steps["spectral"]["w"]))
    assert not np.array_equal(steps["spectral"]["w"], steps["frobenius"]["w"])
    cosine = np.sum(steps["spectral"]["w"] * steps["frobenius"]["w"]) / (
        np.linalg.norm(steps["spectral"]["w"]) * np.linalg.norm(steps["frobenius"]["w"]))
    assert cosine > 0.9
  else:
    with pytest.raises(ValueError, match=r"preconditioning='spectral' needs optax >= 0.2.8"):
      experimental.vsgd_muon(0.1, preconditioning="spectral")


class MatrixDims(NamedTuple):
  """Dimension numbers as optax before 0.2.6 has none: the fields of optax's."""
  reduction_axis: int | tuple[int, ...] = 0
  output_axis: int | tuple[int, ...] = 1


def test_dimension_numbers_name_the_matrices_as_optax_contrib_muon_takes_them():
  """A tree of dimension numbers: the embedding left to vsgd (None), a 3-D
  kernel orthogonalized per batch index over its last two axes, a 2-D kernel
  as usual; each step against the float64 reference. A function of the params
  that returns the tree gives the same steps.
  """
  # optax's class from 0.2.6 on; before, any named tuple of the two fields.
  dims = getattr(optax.contrib, "MuonDimensionNumbers", MatrixDims)
  shapes = {"embed": (6, 4), "stack": (2, 3, 5), "kernel": (4, 6)}
  spec = {"embed": None, "stack": dims(reduction_axis=1, output_axis=2), "kernel": dims()}
  params0, grads = _stream(20261128, shapes, steps=5)
  lr = 0.03
  steps = {k: reference.vsgd_steps([g[k] for g in grads]) for k in shapes}
  with jax.enable_x64(True):
    for given in (spec, lambda params: spec):
      opt = experimental.vsgd_muon(lr, muon_weight_dimension_numbers=given)
      params = {k: jnp.asarray(v) for k, v in params0.items()}
      theta = {k: np.array(v) for k, v in params0.items()}
      state = opt.init(params)
      vsgd_part = state.inner_states["vsgd"].inner_state[0].mu
      assert [x.shape for x in jax.tree.leaves(vsgd_part)] == [shapes["embed"]]
      for i, g in enumerate(grads):
        updates, state = jax.jit(opt.update)({k: jnp.asarray(v) for k, v in g.items()}, state)
        params = optax.apply_updates(params, updates)
        for k in shapes:
          u, mu = steps[k][i][:2]
          if k == "embed":
            direction = u
          elif k == "stack":
            direction = np.stack([muon_scale((3, 5)) * newton_schulz(m) for m in mu])
          else:
            direction = muon_scale(mu.shape) * newton_schulz(mu)
          theta[k] = theta[k] - lr * direction
          np.testing.assert_allclose(params[k], theta[k], rtol=1e-10, atol=1e-13)
  with pytest.raises(ValueError, match="names \\['nothing'\\], which the params do not have"):
    experimental.vsgd_muon(lr, muon_weight_dimension_numbers={"nothing": dims()}).init(params0)
  with pytest.raises(ValueError, match="disjoint, non-empty"):
    experimental.vsgd_muon(lr, muon_weight_dimension_numbers={
        **spec, "kernel": dims(reduction_axis=0, output_axis=0)}).init(params0)


def _posterior_variance(b_g, b_ghat, gamma=1e-8):
  a = reference.vsgd_shape(gamma)
  s_g, s_ghat = b_g / a, b_ghat / a
  return s_g * s_ghat / (s_g + s_ghat)


def _variant_params(params0, lr, steps, orthogonalize, normalize):
  """Float64 params of a ``vsgd_muon`` variant on one matrix, from VSGD's ``(u, mu,
  sigma2)`` of each step (``sigma2`` from the rates before it): Newton-Schulz of
  the mean, of VSGD's step u, or of mu u**2; then, where ``normalize`` says, each
  row (or column) divided by the root of its mean posterior variance and scaled
  back to the Frobenius norm.
  """
  theta = np.array(params0, np.float64)
  history = []
  for u, mu, variance in steps:
    x = {"mean": mu, "direction": u, "signal": mu * u ** 2}[orthogonalize]
    ortho = muon_scale(theta.shape) * newton_schulz(x)
    if normalize is not None:
      scale = np.sqrt(np.mean(variance, axis=1 if normalize == "rows" else 0, keepdims=True))
      scaled = ortho / scale
      ortho = scaled * np.linalg.norm(ortho) / np.linalg.norm(scaled)
    theta = theta - lr * ortho
    history.append(theta.copy())
  return history


def variant_reference(grads, params0, lr, orthogonalize, normalize):
  """``_variant_params`` on VSGD's inference (``reference.vsgd_steps``)."""
  def steps():
    rates = reference.vsgd_prior_rates(30.0, 1e-8)
    for u, mu, b_g, b_ghat in reference.vsgd_steps(grads):
      yield u, mu, _posterior_variance(*(np.broadcast_to(r, mu.shape) for r in rates))
      rates = (b_g, b_ghat)
  return _variant_params(params0, lr, steps(), orthogonalize, normalize)


@pytest.mark.parametrize("orthogonalize, normalize",
                         [("direction", None), ("signal", None), ("mean", "rows"),
                          ("mean", "columns"), ("direction", "rows")])
def test_each_variant_matches_its_float64_reference(orthogonalize, normalize):
  """Rows of unequal noise, so that the posterior variances differ from row to row."""
  rng = np.random.default_rng(20261128)
  shape = (4, 7)
  noise = rng.uniform(0.1, 3.0, size=(shape[0], 1))
  params0 = rng.normal(size=shape)
  grads = [rng.normal(size=shape) * noise + 0.5 for _ in range(8)]
  lr = 0.03
  expected = variant_reference(grads, params0, lr, orthogonalize, normalize)
  with jax.enable_x64(True):
    opt = experimental.vsgd_muon(lr, orthogonalize=orthogonalize, normalize=normalize)
    params = {"w": jnp.asarray(params0)}
    state = opt.init(params)
    update = jax.jit(opt.update)
    for g, theta in zip(grads, expected, strict=True):
      updates, state = update({"w": jnp.asarray(g)}, state, params)
      params = optax.apply_updates(params, updates)
      np.testing.assert_allclose(params["w"], theta, rtol=1e-10, atol=1e-13)
  # Each variant steps differently from the plain mean's.
  plain = variant_reference(grads, params0, lr, "mean", None)
  assert not np.allclose(expected[-1], plain[-1], rtol=1e-6)


def test_a_variant_is_named_or_refused_in_one_line():
  with pytest.raises(ValueError, match="orthogonalize must be one of"):
    experimental.vsgd_muon(0.01, orthogonalize="sign")
  with pytest.raises(ValueError, match="normalize must be one of"):
    experimental.vsgd_muon(0.01, normalize="row")
  with pytest.raises(ValueError, match="nesterov=True looks ahead with the mean"):
    experimental.vsgd_muon(0.01, nesterov=True, orthogonalize="signal")
  with pytest.raises(ValueError, match="min_dim_size_to_factor must be a whole number >= 2"):
    experimental.vsgd_muon(0.01, min_dim_size_to_factor=1)


def _rebuilt(means, K=30.0, gamma=1e-8):
  """Each element's rates from factored means, as factored VSGD rebuilds them."""
  out = []
  for (row, col), c in zip((means["b_g"], means["b_ghat"]), (gamma, K * gamma), strict=True):
    total = np.mean(row - c, axis=0, keepdims=True)
    out.append(c + (row - c) * (col - c) / total)
  return out


def factored_variant_reference(grads, params0, lr, orthogonalize, normalize):
  """``_variant_params`` on factored VSGD's inference (``reference.factored_vsgd_steps``):
  the mean, the step u and the posterior variance all from the rank-one rates.
  """
  shape = np.shape(grads[0])
  prior = reference.vsgd_prior_rates(30.0, 1e-8)
  def steps():
    means = {name: (np.full((shape[0], 1), p), np.full((1, shape[1]), p))
             for name, p in zip(("b_g", "b_ghat"), prior, strict=True)}
    for u, mu, new_means in reference.factored_vsgd_steps(grads, 0, 1):
      yield u, mu, _posterior_variance(*_rebuilt(means))
      means = new_means
  return _variant_params(params0, lr, steps(), orthogonalize, normalize)


@pytest.mark.parametrize("orthogonalize, normalize",
                         [("mean", None), ("direction", None), ("mean", "rows"),
                          ("signal", "columns")])
def test_the_factored_form_matches_its_float64_reference(orthogonalize, normalize):
  """``min_dim_size_to_factor``: a matrix's rates kept as row and column means, its
  state ``mu`` and those means alone, each step the reference's, and a step of
  its own (the rank-one rates are not the full ones).
  """
  rng = np.random.default_rng(20261129)
  shape = (6, 9)
  noise = rng.uniform(0.1, 3.0, size=(shape[0], 1)) * rng.uniform(0.5, 2.0, size=(1, shape[1]))
  params0 = rng.normal(size=shape)
  grads = [rng.normal(size=shape) * noise + 0.3 for _ in range(8)]
  lr = 0.03
  expected = factored_variant_reference(grads, params0, lr, orthogonalize, normalize)
  with jax.enable_x64(True):
    opt = experimental.vsgd_muon(lr, orthogonalize=orthogonalize, normalize=normalize,
                                 min_dim_size_to_factor=4)
    params = {"w": jnp.asarray(params0), "b": jnp.zeros(3)}
    state = opt.init(params)
    muon_state, _ = _groups(state)
    rates = muon_state.b_g["w"]
    assert isinstance(rates, experimental.FactoredRate)
    assert (rates.row.shape, rates.col.shape) == ((6, 1), (1, 9))
    update = jax.jit(opt.update)
    for g, theta in zip(grads, expected, strict=True):
      updates, state = update({"w": jnp.asarray(g), "b": jnp.ones(3)}, state, params)
      params = optax.apply_updates(params, updates)
      np.testing.assert_allclose(params["w"], theta, rtol=1e-10, atol=1e-13)
  plain = variant_reference(grads, params0, lr, orthogonalize, normalize)
  assert not np.allclose(expected[-1], plain[-1], rtol=1e-6)


@pytest.mark.parametrize("state_dtype, expected", [(None, 4.0), (jnp.bfloat16, 2.0)],
                         ids=["float32", "bfloat16"])
def test_the_factored_form_keeps_muons_bytes_and_a_sliver(state_dtype, expected):
  """A 1024 x 1024 matrix: ``mu`` and its rates' 2 x 2 x 1024 float32 means."""
  params = {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)}
  def bytes_a_parameter(opt):
    state = jax.eval_shape(opt.init, params)
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state)
               if x.ndim) / 1024 ** 2
  factored = bytes_a_parameter(experimental.vsgd_muon(
      0.01, min_dim_size_to_factor=128, state_dtype=state_dtype))
  assert factored == pytest.approx(expected + 4 * 1024 * 4 / 1024 ** 2)
  full = bytes_a_parameter(experimental.vsgd_muon(0.01, state_dtype=state_dtype))
  assert full == pytest.approx(3 * expected)

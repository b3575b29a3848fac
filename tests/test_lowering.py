"""Each form of the VSGD step that ``vsgd_optax/_lowering.py`` hands to XLA.

XLA:CPU gets one multi-output loop when the state comes in fresh (not
donated) arguments of the jitted step, and the in-place form otherwise; other
paths (vmap, jvp, traced hyperparameters) use the equations as written. Each
is checked against the float64 reference, and the choice itself is checked
in the compiled program.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests import reference

STEPS = 200
LR = 0.01


def _grads(steps=STEPS, shape=(3, 4), seed=0):
  return np.stack(reference.gradient_stream(seed, steps, shape))


def _step(opt):
  def step(params, state, g):
    updates, state = opt.update(g, state, params)
    return optax.apply_updates(params, updates), state
  return step


ON_CPU = jax.default_backend() == "cpu"


def _one_loop_in(compiled_text: str) -> bool:
  """Whether the step was compiled with XLA:CPU's one-loop form."""
  return "reduce-window" in compiled_text


def _run_jitted(opt, grads, params, donate):
  step = jax.jit(_step(opt), donate_argnums=(1,) if donate else ())
  state = opt.init(params)
  text = step.lower(params, state, grads[0]).compile().as_text()
  history = []
  for g in grads:
    params, state = step(params, state, g)
    # Copies: the next donated step reuses the state's buffers.
    history.append(jax.tree.map(np.array, (params, state[0])))
  return text, history


def _run_scanned(opt, grads, params):
  """All steps inside one lax.scan: the state is a loop carry."""
  def body(carry, g):
    carry = _step(opt)(*carry, g)
    return carry, (carry[0], carry[1][0])
  scan = jax.jit(lambda params, grads: jax.lax.scan(
      body, (params, opt.init(params)), grads)[1])
  text = scan.lower(params, grads).compile().as_text()
  params_seq, inner = scan(params, grads)
  history = [(params_seq[i], jax.tree.map(lambda x, i=i: x[i], inner))
             for i in range(len(grads))]
  return text, history


@pytest.mark.parametrize("form", ["fresh_state", "donated_state", "scanned"])
def test_each_form_matches_reference_in_float64(form):
  grads = _grads()
  params0 = np.linspace(-1, 1, 12).reshape(3, 4)
  expected = reference.vsgd_reference(list(grads), params0, lambda i: LR,
                                      weight_decay=0.1)
  opt = vsgd_optax.vsgd(LR, weight_decay=0.1)
  with jax.enable_x64(True):
    params = jnp.asarray(params0)
    grads = jnp.asarray(grads)
    if form == "scanned":
      text, got = _run_scanned(opt, grads, params)
    else:
      text, got = _run_jitted(opt, grads, params, form == "donated_state")
    assert _one_loop_in(text) == (ON_CPU and form == "fresh_state"), form
    for (p, s), (ep, emu, ebg, ebgh) in zip(got, expected):
      np.testing.assert_allclose(p, ep, rtol=1e-10, atol=1e-12)
      np.testing.assert_allclose(s.mu, emu, rtol=1e-10, atol=1e-14)
      np.testing.assert_allclose(s.b_g, ebg, rtol=1e-10, atol=0)
      np.testing.assert_allclose(s.b_ghat, ebgh, rtol=1e-10, atol=0)


def test_fresh_and_donated_forms_agree_in_float32():
  grads = jnp.asarray(_grads(seed=1), jnp.float32)
  params = jnp.linspace(-1, 1, 12, dtype=jnp.float32).reshape(3, 4)
  opt = vsgd_optax.vsgd(LR)
  _, fresh = _run_jitted(opt, grads, params, donate=False)
  _, donated = _run_jitted(opt, grads, params, donate=True)
  for (p1, s1), (p2, s2) in zip(fresh, donated):
    np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)
    chex.assert_trees_all_close(s1, s2, rtol=2e-3, atol=1e-30)


def test_traced_hyperparameters_take_the_in_place_form():
  params = jnp.ones((3, 4))
  g = jnp.asarray(_grads(steps=1)[0], jnp.float32)
  injected = optax.inject_hyperparams(vsgd_optax.vsgd)(learning_rate=LR)
  static = optax.inject_hyperparams(
      vsgd_optax.vsgd, static_args=("variance_ratio", "prior_strength", "eps"))(
          learning_rate=LR)
  texts = {}
  results = {}
  for name, opt in (("injected", injected), ("static", static)):
    step = jax.jit(_step(opt))
    state = opt.init(params)
    texts[name] = step.lower(params, state, g).compile().as_text()
    results[name] = step(params, state, g)
  assert not _one_loop_in(texts["injected"])
  assert _one_loop_in(texts["static"]) == ON_CPU
  chex.assert_trees_all_close(results["injected"][0], results["static"][0],
                              rtol=1e-6)


def test_vmap_over_a_batch_of_optimizers():
  """vmap (e.g. over seeds) takes the equations as written, row by row."""
  opt = vsgd_optax.vsgd(LR)
  params = jnp.ones((2, 3, 4))
  grads = jnp.asarray(_grads(steps=2), jnp.float32)
  update = jax.jit(jax.vmap(opt.update))
  states = jax.vmap(opt.init)(params)
  batched, new_states = update(grads, states, params)
  for row in range(2):
    single, single_state = jax.jit(opt.update)(
        grads[row], opt.init(params[row]), params[row])
    np.testing.assert_allclose(batched[row], single, rtol=1e-6)
    chex.assert_trees_all_close(
        jax.tree.map(lambda x, row=row: x[row], new_states), single_state,
        rtol=1e-6)


def test_gradient_through_an_update():
  """jvp and grad through a step (meta-learning) differentiate the equations."""
  opt = vsgd_optax.vsgd(LR)
  params = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
  g0 = jnp.asarray(_grads(steps=2)[1], jnp.float32)
  state = opt.init(params)
  _, state = opt.update(g0, state, params)

  def direction_norm(scale):
    updates, new_state = opt.update(scale * g0, state, params)
    return jnp.sum(updates ** 2) + jnp.sum(new_state[0].b_ghat)

  with jax.enable_x64(True):
    # Central differences in float64 of the same function.
    params64 = params.astype(jnp.float64)
    state64 = jax.tree.map(
        lambda x: x.astype(jnp.float64) if x.dtype == jnp.float32 else x, state)
    def f64(scale):
      updates, new_state = opt.update(scale * g0.astype(jnp.float64), state64,
                                      params64)
      return jnp.sum(updates ** 2) + jnp.sum(new_state[0].b_ghat)
    h = 1e-6
    numeric = float((f64(1.0 + h) - f64(1.0 - h)) / (2 * h))
  analytic = float(jax.jit(jax.grad(direction_norm))(1.0))
  np.testing.assert_allclose(analytic, numeric, rtol=1e-3)

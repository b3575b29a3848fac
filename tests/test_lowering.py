"""Each form of a step that ``vsgd_optax/_lowering.py`` hands to XLA.

On XLA:CPU the compiled loop of ``_cpu_kernel.cc`` takes the step, writing
each output over its input (the direction over the gradient, the new state
over the old) unless that input is a fresh (not donated) argument of the
jitted step; traced hyperparameters take the in-place form written in JAX;
vmap and jvp use the equations as written. Each is checked
against the float64 reference, and the choice itself is checked in the
compiled program.
"""

import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from tests import reference
from vsgd_optax import _cpu_kernel

STEPS = 200
LR = 0.01
ON_CPU = jax.default_backend() == "cpu"
STATIC = ("variance_ratio", "prior_strength", "eps")


def _grads(steps=STEPS, shape=(3, 4), seed=0):
  return np.stack(reference.gradient_stream(seed, steps, shape))


def _step(opt):
  def step(params, state, g):
    updates, state = opt.update(g, state, params)
    return optax.apply_updates(params, updates), state
  return step


def _compiled_loop_calls(compiled_text: str) -> list[tuple[int, ...]]:
  """The program's calls of the compiled loop: for each, the operands whose
  buffers its outputs take (0 is the gradient, then the state)."""
  return [tuple(int(i) for i in re.findall(r"\{\d+\}: \((\d+),", line))
          for line in compiled_text.splitlines()
          if 'custom_call_target="vsgd_optax_' in line]


def _run_jitted(opt, grads, params, donate):
  step = jax.jit(_step(opt), donate_argnums=(1,) if donate else ())
  state = opt.init(params)
  text = step.lower(params, state, grads[0]).compile().as_text()
  history = []
  for g in grads:
    params, state = step(params, state, g)
    # Copies: the next donated step reuses the state's buffers.
    history.append(jax.tree.map(np.array, (params, _inner(state))))
  return text, history


def _inner(state):
  """The VSGD state inside a chain or an inject_hyperparams state."""
  state = getattr(state, "inner_state", state)
  return state[0]


def _run_scanned(opt, grads, params):
  """All steps inside one lax.scan: the state is a loop carry."""
  def body(carry, g):
    carry = _step(opt)(*carry, g)
    return carry, (carry[0], _inner(carry[1]))
  scan = jax.jit(lambda params, grads: jax.lax.scan(
      body, (params, opt.init(params)), grads)[1])
  text = scan.lower(params, grads).compile().as_text()
  params_seq, inner = scan(params, grads)
  history = [(params_seq[i], jax.tree.map(lambda x, i=i: x[i], inner))
             for i in range(len(grads))]
  return text, history


# How each case's gradient and state reach the step, and which of them the
# compiled loop writes over on XLA:CPU: the caller's non-donated arguments
# stay untouched; state that is donated or carried by a loop, and a gradient
# that is a value of the loop, are written over.
FORMS = {
    "fresh_state": "nothing",
    "donated_state": "state",
    "scanned": "everything",
    "traced_hyperparameters": None,  # the in-place form written in JAX
}


def _expected_calls(form, n_arrays):
  if not ON_CPU or FORMS[form] is None:
    return []
  written_over = {"nothing": (), "state": tuple(range(1, n_arrays)),
                  "everything": tuple(range(n_arrays))}
  return [written_over[FORMS[form]]]


def _run_form(factory, form, grads, params):
  if form == "traced_hyperparameters":
    opt = optax.inject_hyperparams(factory)(learning_rate=LR, weight_decay=0.1)
  else:
    opt = factory(LR, weight_decay=0.1)
  if form == "scanned":
    return _run_scanned(opt, grads, params)
  return _run_jitted(opt, grads, params, form == "donated_state")


def test_compiled_loop_is_built():
  assert _cpu_kernel.AVAILABLE, (
      f"The compiled XLA:CPU loop is unavailable: {_cpu_kernel.UNAVAILABLE_BECAUSE}."
      " Reinstall the package with a C++17 compiler (pip install -e .).")


@pytest.mark.parametrize("form", FORMS)
def test_each_vsgd_form_matches_reference_in_float64(form):
  grads = _grads()
  params0 = np.linspace(-1, 1, 12).reshape(3, 4)
  expected = reference.vsgd_reference(list(grads), params0, lambda i: LR,
                                      weight_decay=0.1)
  with jax.enable_x64(True):
    text, got = _run_form(vsgd_optax.vsgd, form, jnp.asarray(grads),
                          jnp.asarray(params0))
    assert _compiled_loop_calls(text) == _expected_calls(form, 4), form
    for (p, s), (ep, emu, ebg, ebgh) in zip(got, expected):
      np.testing.assert_allclose(p, ep, rtol=1e-10, atol=1e-12)
      np.testing.assert_allclose(s.mu, emu, rtol=1e-10, atol=1e-14)
      np.testing.assert_allclose(s.b_g, ebg, rtol=1e-10, atol=0)
      np.testing.assert_allclose(s.b_ghat, ebgh, rtol=1e-10, atol=0)


@pytest.mark.parametrize("form", FORMS)
def test_each_constant_vsgd_form_matches_reference_in_float64(form):
  grads = _grads(seed=2)
  params0 = np.linspace(-1, 1, 12).reshape(3, 4)
  expected = reference.constant_vsgd_reference(
      list(grads), params0, lambda i: LR, weight_decay=0.1)
  with jax.enable_x64(True):
    text, got = _run_form(vsgd_optax.constant_vsgd, form, jnp.asarray(grads),
                          jnp.asarray(params0))
    assert _compiled_loop_calls(text) == _expected_calls(form, 3), form
    for (p, s), (ep, emu, eb) in zip(got, expected):
      np.testing.assert_allclose(p, ep, rtol=1e-10, atol=1e-12)
      np.testing.assert_allclose(s.mu, emu, rtol=1e-10, atol=1e-14)
      np.testing.assert_allclose(s.b_ghat, eb, rtol=1e-10, atol=0)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_compiled_loop_agrees_with_the_jax_form_in_float32(factory):
  """The same 200 float32 steps, once through the compiled loop (static
  hyperparameters) and once through the form written in JAX (traced)."""
  grads = jnp.asarray(_grads(seed=1), jnp.float32)
  params = jnp.linspace(-1, 1, 12, dtype=jnp.float32).reshape(3, 4)
  text, compiled = _run_jitted(factory(LR), grads, params, donate=True)
  n_arrays = len(factory(LR).init(params)[0])  # g, then the state's arrays
  assert _compiled_loop_calls(text) == _expected_calls("donated_state", n_arrays)
  injected = optax.inject_hyperparams(factory)(learning_rate=LR)
  _, in_jax = _run_jitted(injected, grads, params, donate=True)
  for (p1, s1), (p2, s2) in zip(compiled, in_jax):
    np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)
    chex.assert_trees_all_close(s1, s2, rtol=2e-3, atol=1e-30)


def test_static_hyperparameters_under_inject_hyperparams_keep_the_loop():
  params = jnp.ones((3, 4))
  g = jnp.asarray(_grads(steps=1)[0], jnp.float32)
  static = optax.inject_hyperparams(vsgd_optax.vsgd, static_args=STATIC)(
      learning_rate=LR)
  step = jax.jit(_step(static))
  state = static.init(params)
  text = step.lower(params, state, g).compile().as_text()
  assert _compiled_loop_calls(text) == _expected_calls("fresh_state", 4)
  plain = vsgd_optax.vsgd(LR)
  chex.assert_trees_all_close(step(params, state, g)[0],
                              jax.jit(_step(plain))(params, plain.init(params),
                                                    g)[0], rtol=1e-6)


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_a_train_step_writes_everything_in_place(factory):
  """Gradients computed in the step and donated state: each call writes its
  outputs over its operands, the program runs no copy of an array, and the
  steps agree with the form written in JAX."""
  params = {"w": jnp.linspace(-0.1, 0.1, 64 * 32).reshape(64, 32),
            "b": jnp.zeros((32,))}
  xs = jnp.asarray(_grads(steps=3, shape=(8, 64)), jnp.float32)

  def train_step_of(opt):
    def train_step(params, state, x):
      def loss(params):
        return jnp.mean(jnp.tanh(x @ params["w"] + params["b"]) ** 2)
      updates, state = opt.update(jax.grad(loss)(params), state, params)
      return optax.apply_updates(params, updates), state
    return jax.jit(train_step, donate_argnums=(0, 1))

  opt = factory(LR)
  step = train_step_of(opt)
  state = opt.init(params)
  text = step.lower(params, state, xs[0]).compile().as_text()
  n_arrays = len(state[0])  # the gradient, then the state less its count
  if ON_CPU:
    assert _compiled_loop_calls(text) == [tuple(range(n_arrays))] * 2
  entry = text[text.index("ENTRY"):]
  assert " copy(" not in entry
  injected = optax.inject_hyperparams(factory)(learning_rate=LR)
  in_jax_step = train_step_of(injected)
  copy = lambda tree: jax.tree.map(jnp.copy, tree)  # each run donates its own
  compiled = (copy(params), state)
  in_jax = (copy(params), injected.init(params))
  for x in xs:
    compiled = step(*compiled, x)
    in_jax = in_jax_step(*in_jax, x)
  chex.assert_trees_all_close(compiled[0], in_jax[0], rtol=1e-5, atol=1e-6)
  # The gradients depend on the parameters, so rounding differences grow
  # where terms cancel: tolerances relative to each array's scale.
  for got, want in zip(jax.tree.leaves(compiled[1][0]),
                       jax.tree.leaves(in_jax[1].inner_state[0])):
    np.testing.assert_allclose(got, want, rtol=1e-3,
                               atol=1e-4 * np.max(np.abs(want)))
  assert not np.allclose(compiled[0]["w"], params["w"])


@pytest.mark.parametrize("factory", [vsgd_optax.vsgd, vsgd_optax.constant_vsgd])
def test_scalar_and_empty_leaves(factory):
  """A 0-d leaf goes through the compiled loop like any other; XLA folds away
  the call on the empty leaf, whose state stays empty."""
  params = {"scalar": jnp.float32(0.5), "empty": jnp.zeros((0, 3)),
            "matrix": jnp.ones((2, 3))}
  grads = [jax.tree.map(lambda p, i=i: jnp.full_like(p, 0.1 * (i + 1) - 0.2),
                        params) for i in range(3)]
  compiled_text, compiled = _run_jitted(factory(LR), grads, params, donate=True)
  assert len(_compiled_loop_calls(compiled_text)) == (2 if ON_CPU else 0)
  injected = optax.inject_hyperparams(factory)(learning_rate=LR)
  _, in_jax = _run_jitted(injected, grads, params, donate=True)
  for (p1, s1), (p2, s2) in zip(compiled, in_jax):
    chex.assert_trees_all_close(p1, p2, rtol=1e-6)
    chex.assert_trees_all_close(s1, s2, rtol=1e-5, atol=1e-30)
  assert compiled[-1][0]["empty"].shape == (0, 3)
  assert compiled[-1][1].mu["empty"].shape == (0, 3)


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


def test_without_the_compiled_loop_a_cpu_step_warns_and_takes_the_jax_form(
    monkeypatch):
  monkeypatch.setattr(_cpu_kernel, "AVAILABLE", False)
  monkeypatch.setattr(_cpu_kernel, "UNAVAILABLE_BECAUSE", "(reason)")
  monkeypatch.setattr(_cpu_kernel, "_warned", False)
  opt = vsgd_optax.vsgd(LR)
  params = jnp.linspace(-1, 1, 12, dtype=jnp.float32).reshape(3, 4)
  g = jnp.asarray(_grads(steps=1)[0], jnp.float32)
  step = jax.jit(_step(opt))
  if ON_CPU:
    with pytest.warns(RuntimeWarning, match=r"compiled XLA:CPU loop is "
                      r"unavailable.*\(reason\)"):
      text = step.lower(params, opt.init(params), g).compile().as_text()
  else:
    text = step.lower(params, opt.init(params), g).compile().as_text()
  assert _compiled_loop_calls(text) == []
  expected = reference.vsgd_reference([np.asarray(g)], np.asarray(params),
                                      lambda i: LR)[0][0]
  np.testing.assert_allclose(step(params, opt.init(params), g)[0], expected,
                             rtol=1e-5, atol=1e-6)

"""What ``optax.adam`` survives, VSGD survives; and each optimizer rounds with bits of its own."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from vsgd_optax import _rounding
from vsgd_optax import _update_rules
from vsgd_optax import experimental

FACTORIES = {"vsgd": vsgd_optax.vsgd, "constant_vsgd": vsgd_optax.constant_vsgd,
             "factored_vsgd": experimental.factored_vsgd}
SHAPE = (256, 256)
BAD_STEP = 1  # the 0-based step whose gradient holds the bad element


def _grads(bad_value, steps=6, seed=11):
  rng = np.random.default_rng(seed)
  grads = [rng.normal(0.3, 1.0, SHAPE).astype(np.float32) for _ in range(steps)]
  grads[BAD_STEP][0, 0] = bad_value
  return grads


def _run(opt, grads):
  """Per step: the update and the state's arrays, as NumPy."""
  params = jnp.zeros(SHAPE)
  state = opt.init(params)
  update = jax.jit(opt.update)
  out = []
  for g in grads:
    updates, state = update(jnp.asarray(g), state, params)
    out.append((np.asarray(updates), [np.asarray(x, np.float64) for x in jax.tree.leaves(state)
                                      if np.ndim(x) > 0]))
  return out


def _as_written_on_every_backend(monkeypatch):
  monkeypatch.setattr(_update_rules.jax.lax, "platform_dependent",
                      lambda *args, default, **branches: default(*args))


def test_adam_survives_a_huge_gradient_and_saturates_that_element():
  """The behaviour matched below: every update finite, that element's near 0."""
  history = _run(optax.adam(1e-3), _grads(1e20))
  assert all(np.isfinite(u).all() for u, _ in history)
  assert abs(history[BAD_STEP + 1][0][0, 0]) < 1e-6


@pytest.mark.parametrize("form", ["in_place", "as_written"])
@pytest.mark.parametrize("state_dtype", [None, jnp.bfloat16])
@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("bad", [1e20, 3e38, np.inf, -np.inf])
def test_a_huge_or_infinite_gradient_leaves_every_update_and_state_finite(
    name, state_dtype, form, bad, monkeypatch):
  if form == "as_written":
    _as_written_on_every_backend(monkeypatch)
  history = _run(FACTORIES[name](1e-3, state_dtype=state_dtype), _grads(bad))
  for step, (updates, state) in enumerate(history):
    assert np.isfinite(updates).all(), (step, int((~np.isfinite(updates)).sum()))
    assert all(np.isfinite(x).all() for x in state), step
  # That element's step goes to 0 or stays a step of at most the rate, as Adam's.
  assert abs(history[BAD_STEP][0][0, 0]) <= 1e-3 * (1 + 1e-6)
  # And every other element steps as it would have without it.
  clean = _run(FACTORIES[name](1e-3, state_dtype=state_dtype), _grads(0.3))
  if name != "factored_vsgd":  # its rates are shared along rows and columns
    others = np.ones(SHAPE, bool)
    others[0, 0] = False
    for (updates, _), (want, _) in zip(history, clean, strict=True):
      chex.assert_trees_all_equal(updates[others], want[others])


@pytest.mark.parametrize("form", ["in_place", "as_written"])
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_nan_stays_in_its_own_element(name, form, monkeypatch):
  """Like Adam, the element that saw a NaN keeps NaN; in the factored state the
  row and column means leave it out, so every other element stays finite.
  """
  if form == "as_written":
    _as_written_on_every_backend(monkeypatch)
  history = _run(FACTORIES[name](1e-3), _grads(np.nan))
  adam = _run(optax.adam(1e-3), _grads(np.nan))
  for (updates, _), (adam_updates, _) in zip(history, adam, strict=True):
    others = np.ones(SHAPE, bool)
    others[0, 0] = False
    assert np.isfinite(updates[others]).all()
    assert np.isfinite(updates[0, 0]) == np.isfinite(adam_updates[0, 0])


def test_finite_is_the_identity_on_values_that_did_not_overflow():
  x = jnp.asarray([0.0, -1e-30, 3.0, -3e38, 3.4e38, np.inf, -np.inf, np.nan], jnp.float32)
  got = np.asarray(_update_rules.clamp_to_finite(x))
  largest = np.finfo(np.float32).max
  chex.assert_trees_all_equal(got[:5], np.asarray(x)[:5])
  chex.assert_trees_all_equal(got[5:7], np.array([largest, -largest]))
  assert np.isnan(got[7])


def test_a_bfloat16_state_saturates_to_its_own_largest_value():
  """float32's largest value rounds to infinity in bfloat16; the store clips first."""
  largest32 = np.finfo(np.float32).max
  x = jnp.asarray([largest32, -largest32, 1.0], jnp.float32)
  seed, = _rounding.stream_seeds(jnp.int32(1), 0, [_rounding.stream_key("", x.shape)])
  bits = _rounding.array_bits(_rounding.random_word(x.shape, seed), 0)
  for stored in (_rounding.store(x, jnp.bfloat16, None), _rounding.store(x, jnp.bfloat16, bits)):
    got = np.asarray(stored, np.float64)
    big = float(jnp.finfo(jnp.bfloat16).max)
    chex.assert_trees_all_equal(got, np.array([big, -big, 1.0]))


# ---- each optimizer its own bits ---------------------------------------------------

def _bf16_states(opt, grads_of_step, params, steps=50):
  state = opt.init(params)
  update = jax.jit(opt.update)
  for t in range(steps):
    _, state = update(grads_of_step(t), state, params)
  return state


def _shared_fraction(a, b):
  """The share of elements whose stored bfloat16 values are bit-identical."""
  a, b = np.asarray(a).view(np.uint16), np.asarray(b).view(np.uint16)
  return float(np.mean(a == b))


def _same_gradients(t, shape=(64, 64)):
  g = np.random.default_rng(1000 + t).normal(0.1, 1.0, shape).astype(np.float32)
  return {"a": jnp.asarray(g), "b": jnp.asarray(g)}


def test_multi_transform_groups_fed_the_same_gradients_draw_different_bits():
  params = {"a": jnp.zeros((64, 64)), "b": jnp.zeros((64, 64))}
  opt = optax.multi_transform(
      {"one": vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16),
       "two": vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16)},
      {"a": "one", "b": "two"})
  state = _bf16_states(opt, _same_gradients, params)
  inner = {name: state.inner_states[name].inner_state[0] for name in ("one", "two")}
  b_ghat_a, b_ghat_b = inner["one"].b_ghat["a"], inner["two"].b_ghat["b"]
  # Identical inputs, different bits: the states part (before, they were bit-identical).
  assert _shared_fraction(b_ghat_a, b_ghat_b) < 0.9
  # Yet each is the plain optimizer's state on its own leaf, path for path.
  plain = _bf16_states(vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16), _same_gradients, params)
  assert _shared_fraction(b_ghat_a, plain[0].b_ghat["a"]) == 1.0
  assert _shared_fraction(b_ghat_b, plain[0].b_ghat["b"]) == 1.0


def test_the_parts_of_masked_draw_different_bits():
  params = {"a": jnp.zeros((64, 64)), "b": jnp.zeros((64, 64))}
  make = lambda: vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16)
  opt = optax.chain(optax.masked(make(), {"a": True, "b": False}),
                    optax.masked(make(), {"a": False, "b": True}))
  state = _bf16_states(opt, _same_gradients, params)
  first, second = state[0].inner_state[0], state[1].inner_state[0]
  assert _shared_fraction(first.b_ghat["a"], second.b_ghat["b"]) < 0.9


def test_seeds_part_separate_optimizers_and_ensemble_members():
  params = {"w": jnp.zeros((64, 64))}
  grads = lambda t: {"w": _same_gradients(t)["a"]}
  states = {seed: _bf16_states(vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16, seed=seed),
                               grads, params, steps=30)[0].b_ghat["w"] for seed in (0, 1)}
  assert _shared_fraction(states[0], states[1]) < 0.9
  # A vmapped ensemble: the seed mapped like the params.
  members = 3

  def member_state(seed, g_stack):
    opt = vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16, seed=seed)
    state = opt.init(params)
    for g in g_stack:
      _, state = opt.update({"w": g}, state, params)
    return state[0].b_ghat["w"]
  g_stack = jnp.stack([grads(t)["w"] for t in range(20)])
  ensemble = jax.jit(jax.vmap(member_state, in_axes=(0, None)))
  different = np.asarray(ensemble(jnp.arange(members, dtype=jnp.uint32), g_stack))
  assert max(_shared_fraction(different[i], different[j])
             for i in range(members) for j in range(i)) < 0.9
  same = np.asarray(ensemble(jnp.zeros(members, jnp.uint32), g_stack))
  assert all(_shared_fraction(same[0], same[i]) == 1.0 for i in range(members))
  # Each member is the optimizer built with its seed, run alone.
  alone = jax.jit(member_state)(jnp.uint32(2), g_stack)
  assert _shared_fraction(different[2], alone) == 1.0


def test_seeds_past_two_to_the_16_are_whole_words_as_ints_and_as_arrays():
  """A seed keys all 32 of its bits: 70,000 and 4,464 (70,000 mod 2**16) round
  apart, and an array seed (as ``inject_hyperparams`` and ``vmap`` pass one)
  rounds as the same whole number.
  """
  params = {"w": jnp.zeros((64, 64))}
  grads = lambda t: {"w": _same_gradients(t)["a"]}
  def b_ghat(seed):
    opt = vsgd_optax.vsgd(1e-3, state_dtype=jnp.bfloat16, seed=seed)
    return _bf16_states(opt, grads, params, steps=20)[0].b_ghat["w"]
  as_int, low_int = b_ghat(70_000), b_ghat(70_000 % 2 ** 16)
  assert _shared_fraction(as_int, low_int) < 0.9
  for dtype in (jnp.uint32, jnp.int32):
    assert _shared_fraction(b_ghat(jnp.asarray(70_000, dtype)), as_int) == 1.0
  assert _shared_fraction(b_ghat(jnp.uint32(2 ** 32 - 1)), b_ghat(2 ** 32 - 1)) == 1.0
  assert _shared_fraction(b_ghat(2 ** 32 - 1), b_ghat(2 ** 16 - 1)) < 0.9


def _spiked_scan(opt, bad, steps, shape, seed):
  """Updates and ``mu`` per step of ``opt`` on N(0.3, 1) gradients whose element
  [0, ...] is ``bad`` at step 2, run as one compiled scan.
  """
  params = jnp.zeros(shape)
  first = (jnp.arange(np.prod(shape)) == 0).reshape(shape)

  def step(state, inputs):
    t, key = inputs
    g = jnp.where(first & (t == 2), bad, jax.random.normal(key, shape) + 0.3)
    updates, state = opt.update(g, state, params)
    return state, (updates, state[0].mu)
  inputs = (jnp.arange(1, steps + 1), jax.random.split(jax.random.key(seed), steps))
  _, (updates, mu) = jax.jit(lambda: jax.lax.scan(step, opt.init(params), inputs))()
  return np.asarray(updates), np.asarray(mu)


@pytest.mark.parametrize("bad", [np.inf, -np.inf])
def test_vsgds_element_tracks_the_gradient_again_after_an_infinity(bad):
  """After an infinite gradient both of the element's rates saturate, so its
  mean weighs the next gradients fully and returns to their scale (not a mean
  near 1e35 that stays), while every other element steps as in a clean run.
  """
  steps = 400
  updates, mu = _spiked_scan(vsgd_optax.vsgd(1e-3), bad, steps, (64,), seed=3)
  clean_updates, _ = _spiked_scan(vsgd_optax.vsgd(1e-3), 0.3, steps, (64,), seed=3)
  assert abs(mu[1, 0]) > 1e30  # the infinity entered the mean, saturated
  assert np.all(np.abs(mu[300:, 0]) < 10), np.abs(mu[300:, 0]).max()
  chex.assert_trees_all_equal(updates[:, 1:], clean_updates[:, 1:])


@pytest.mark.parametrize("form", ["in_place", "as_written"])
@pytest.mark.parametrize("bad", [1e20, np.inf])
def test_a_factored_state_recovers_from_one_spike_as_vsgd_does(bad, form, monkeypatch):
  """One element of 1e20 (or inf) of a 256 x 256 factored matrix is read as a zero
  gradient, so the other elements' updates stay within 1e-5 of a clean run's.
  """
  if form == "as_written":
    _as_written_on_every_backend(monkeypatch)
  steps = 1000
  updates, mu = _spiked_scan(experimental.factored_vsgd(1e-3), bad, steps, SHAPE, seed=7)
  clean, _ = _spiked_scan(experimental.factored_vsgd(1e-3), 0.3, steps, SHAPE, seed=7)
  assert np.isfinite(updates).all() and np.isfinite(mu).all()
  assert abs(updates[1, 0, 0]) <= 1e-3 and abs(mu[1, 0, 0]) <= abs(mu[0, 0, 0])  # read as 0
  others = np.ones(SHAPE, bool)
  others[0, 0] = False
  differ = {t: float(np.mean(np.abs(updates[t - 1] - clean[t - 1])[others] > 1e-5))
            for t in (10, 100, 1000)}
  assert differ[10] <= 0.01 and differ[100] <= 0.01 and differ[1000] == 0.0, differ
  # The rebuilt rates are not pulled to the prior: the mean step stays the clean run's.
  assert np.mean(np.abs(updates[9][others])) < 1.1 * np.mean(np.abs(clean[9][others]))


def test_one_nan_in_a_factored_state_stays_in_its_own_element():
  """A NaN at one element of a factored matrix: that element's update is NaN from
  then on (as vsgd's and Adam's), its rows and columns move as if it had stayed put.
  """
  updates, mu = _spiked_scan(experimental.factored_vsgd(1e-3), np.nan, 100, SHAPE, seed=7)
  clean, _ = _spiked_scan(experimental.factored_vsgd(1e-3), 0.3, 100, SHAPE, seed=7)
  assert np.isnan(updates[1:, 0, 0]).all() and np.isnan(mu[1:, 0, 0]).all()
  others = np.ones(SHAPE, bool)
  others[0, 0] = False
  assert np.isfinite(updates[:, others]).all()
  differ = np.abs(updates[99] - clean[99])[others]
  assert differ.max() < 1e-5, (float(np.mean(differ > 1e-5)), float(differ.max()))


def test_a_factored_spike_is_read_as_exactly_a_zero_gradient_and_only_past_its_bound():
  """The bound is half the root of the largest float32 (9.2e18): a gradient at it
  steps exactly as a zero gradient there would (every element, every step), and
  one just under it is kept, its mean near 9e18 times the weight on it.
  """
  bound = float(np.sqrt(np.finfo(np.float32).max) / 2)
  spiked, spiked_mu = _spiked_scan(experimental.factored_vsgd(1e-3), bound, 6, SHAPE, seed=5)
  zeroed, zeroed_mu = _spiked_scan(experimental.factored_vsgd(1e-3), 0.0, 6, SHAPE, seed=5)
  chex.assert_trees_all_equal(spiked, zeroed)
  chex.assert_trees_all_equal(spiked_mu, zeroed_mu)
  _, kept_mu = _spiked_scan(experimental.factored_vsgd(1e-3), 0.97 * bound, 6, SHAPE, seed=5)
  assert kept_mu[1, 0, 0] > 1e16 and np.isfinite(kept_mu).all()


@pytest.mark.parametrize("seed,error", [(True, TypeError), (-1, ValueError), (2 ** 32, ValueError),
                                        (1.5, TypeError), (jnp.zeros(2, jnp.int32), TypeError),
                                        (jnp.float32(1.0), TypeError)])
def test_a_bad_seed_is_refused_in_one_line(seed, error):
  for factory in FACTORIES.values():
    with pytest.raises(error, match="seed"):
      factory(1e-3, seed=seed)


def test_a_saturated_rate_beside_a_zero_residual_stays_finite_in_place():
  """The in-place form's ratio s_g / sigma2 overflows where b_g has saturated
  and b_ghat sits at its prior; with a gradient equal to the mean the residual
  is exactly 0, and 0 times an infinite ratio would be NaN.
  """
  K, gamma = 30.0, 1e-8
  _, prior_ghat = _update_rules.prior_rates(K, gamma)
  g = jnp.full(4, 0.5, jnp.float32)
  new = _update_rules.vsgd_in_place(
      g, g, jnp.full(4, 1e38, jnp.float32), jnp.full(4, prior_ghat, jnp.float32),
      t=jnp.float32(2.0), K=K, gamma=gamma, kappa_g=0.81, kappa_ghat=0.9, eps=1e-8)
  for name, value in zip(new._fields, new, strict=True):
    assert np.isfinite(np.asarray(value)).all(), name


def test_a_row_of_huge_gradients_keeps_the_factored_means_finite():
  """A whole row of gradients just under the size that is read as missing
  (9e18: each square near 8e37): the sum behind the row's mean of rates would
  overflow; the mean saturates, and every update stays finite.
  """
  grads = _grads(0.3)
  grads[BAD_STEP][0, :] = 9e18
  for updates, state in _run(experimental.factored_vsgd(1e-3), grads):
    assert np.isfinite(updates).all()
    assert all(np.isfinite(x).all() for x in state)

"""The bfloat16 state's stochastic rounding, against an independent NumPy reference."""

import chex
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import vsgd_optax
from tests.support import reference
from vsgd_optax import _rounding
from vsgd_optax import _update_rules

BF16 = ml_dtypes.bfloat16


def _f64(x):
  return np.asarray(jnp.asarray(x, jnp.float32), np.float64)


def _spacing_below(x):
  """The bfloat16 neighbours of float32 ``x``: truncated and one unit up in magnitude."""
  x32 = np.asarray(x, np.float32)
  low = (x32.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
  high = ((x32.view(np.uint32) & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32)
  return low.astype(np.float64), high.astype(np.float64)


def _bits(shape, count, path="", slot=0, seed=0):
  """The package's bits for one state array, from its stream's seed as the optimizer
  makes it (inside its loop on the CPU).
  """
  @jax.jit
  def bits(count):
    stream_seed, = _rounding.stream_seeds(count, seed, [_rounding.stream_key(path, shape)])
    return _rounding.array_bits(_rounding.random_word(shape, stream_seed), slot)
  return np.asarray(bits(jnp.int32(count)))


@pytest.mark.parametrize("shape,count,path,slot,seed",
                         [((7, 5), 1, "", 0, 0), ((1000,), 12345, "['w']", 2, 0),
                          ((), 3, "[0]", 1, 7), ((3, 4, 5), 2 ** 31 - 1, "['a']['b']", 0, 2 ** 32 - 1),
                          ((3, 4, 5), 8, "['a']['b']", 1, 5)])
def test_bits_are_the_references(shape, count, path, slot, seed):
  got = _bits(shape, count, path, slot, seed)
  assert got.dtype == np.uint32 and got.shape == shape
  # The rounding reads the upper 16 bits alone.
  chex.assert_trees_all_equal(got >> 16,
                              reference.rounding_bits(shape, count, path, slot, seed) >> 16)


def test_an_array_past_two_to_the_32_gives_each_slot_bits_of_both_index_words():
  """The index of a (80, 8192, 28672) array (4.4 * 2**32 elements) in two words,
  evaluated at chosen elements (no such array is made): the words are the
  exact index's, and every slot's bits are the reference's (which takes the
  index as an exact integer), so elements k and k + 2**32 differ in each slot.
  """
  shape = (80, 8192, 28672)
  flat = [5, 2 ** 32 + 5, 3 * 2 ** 32 + 123456789, int(np.prod(shape)) - 1, 2 ** 32 - 1, 2 ** 32,
          1103, 2 ** 32 + 1103]
  coordinates = [jnp.asarray(np.array([int(c) for c in axis], np.uint32))
                 for axis in np.unravel_index(np.array(flat, np.int64), shape)]
  low, high = _rounding.index_words(coordinates, shape)
  chex.assert_trees_all_equal(np.asarray(low), np.array([k % 2 ** 32 for k in flat]))
  chex.assert_trees_all_equal(np.asarray(high), np.array([k // 2 ** 32 for k in flat]))
  # Arrays under 2**32 elements have one word, as the reference writes it.
  assert _rounding.index_words(coordinates, (2 ** 16, 2 ** 16))[1] is None
  stream_seed = np.uint32(0x12345678)
  word = _rounding.word_at(low, high, jnp.uint32(stream_seed))
  for slot in range(_rounding.ARRAYS_PER_STREAM):
    got = np.asarray(_rounding.array_bits(word, slot)) >> 16
    expected = reference.rounding_bits_at(flat, stream_seed, slot) >> 16
    chex.assert_trees_all_equal(got, expected)
    for k in (0, 4, 6):  # k and k + 2**32
      assert got[k] != got[k + 1], (slot, flat[k])
  # Where the upper word is 0, the word is that of the one-word index.
  assert int(word[0]) == int(_rounding.word_at(low[:1], None, jnp.uint32(stream_seed))[0])
  # And random_word does this for an array over 2**32 elements (traced, never made).
  traced = jax.eval_shape(lambda s: _rounding.random_word(shape, s), jnp.uint32(stream_seed))
  assert traced.shape == shape


def test_only_arrays_under_two_to_the_32_take_the_one_word_key(monkeypatch):
  """``random_word`` keys an element by its index in one word where the array has
  at most 2**32 elements (the same words as ``word_at``'s, in fewer operations)
  and by both index words past that, so that k and k + 2**32 differ.
  """
  taken = []
  one_word = _rounding._keyed_index
  monkeypatch.setattr(_rounding, "_keyed_index",
                      lambda shape, key: taken.append(shape) or one_word(shape, key))
  stream_seed = jnp.uint32(0x12345678)
  jax.eval_shape(lambda s: _rounding.random_word((80, 8192, 28672), s), stream_seed)
  assert taken == []
  small = (3, 4, 5)
  got = np.asarray(_rounding.random_word(small, stream_seed))
  assert taken == [small]
  low, high = _rounding._element_index(small)
  assert high is None
  chex.assert_trees_all_equal(got, np.asarray(_rounding.word_at(low, None, stream_seed)))


def test_the_wide_product_is_exact():
  """The index's 64-bit products from 16-bit halves, against Python's integers."""
  rng = np.random.default_rng(41)
  a = rng.integers(0, 2 ** 32, size=200, dtype=np.uint64)
  for b in (1, 28672, 234_881_024, 2 ** 32 - 1, 2 ** 32 + 12345, 3 * 2 ** 40 + 7,
            int(rng.integers(2 ** 33, 2 ** 63))):
    low, high = _rounding._wide_product(jnp.asarray(a.astype(np.uint32)), b)
    exact = [int(x) * b % 2 ** 64 for x in a]
    chex.assert_trees_all_equal(np.asarray(low), np.array([e % 2 ** 32 for e in exact]))
    chex.assert_trees_all_equal(np.asarray(high), np.array([e // 2 ** 32 for e in exact]))


def test_rounding_with_given_bits_is_the_references():
  rng = np.random.default_rng(4)
  x = rng.normal(size=20000) * np.logspace(-30, 30, 20000)
  bits = reference.rounding_bits(x.shape, 9, "", 1)
  got = _rounding.stochastic_round_to_bfloat16(jnp.asarray(x, jnp.float32), jnp.asarray(bits))
  assert got.dtype == jnp.bfloat16
  chex.assert_trees_all_equal(_f64(got), reference.stochastic_bfloat16(x, bits))


def test_rounding_lands_on_a_neighbour_and_keeps_exact_values_and_specials():
  rng = np.random.default_rng(5)
  x = (rng.normal(size=5000) * np.logspace(-20, 20, 5000)).astype(np.float32)
  low, high = _spacing_below(x)
  for bits in (np.zeros(x.shape, np.uint32), np.full(x.shape, 0xFFFFFFFF, np.uint32),
               reference.rounding_bits(x.shape, 3)):
    got = _f64(_rounding.stochastic_round_to_bfloat16(jnp.asarray(x), jnp.asarray(bits)))
    assert np.all((got == low) | (got == high))
    # Symmetric in sign: -x rounds to minus what x rounds to, with the same bits.
    neg = _f64(_rounding.stochastic_round_to_bfloat16(jnp.asarray(-x), jnp.asarray(bits)))
    chex.assert_trees_all_equal(neg, -got)
  # No random bits truncates; all ones rounds every inexact value up in magnitude.
  zeros = _f64(_rounding.stochastic_round_to_bfloat16(jnp.asarray(x), jnp.zeros(x.shape,
                                                                                 jnp.uint32)))
  chex.assert_trees_all_equal(zeros, low)
  ones = _f64(_rounding.stochastic_round_to_bfloat16(
      jnp.asarray(x), jnp.full(x.shape, 0xFFFFFFFF, jnp.uint32)))
  chex.assert_trees_all_equal(ones, np.where(low == x, low, high))
  # Values that bfloat16 holds, infinities and NaN come back as they are.
  special = np.array([0.0, -0.0, 1.0, -3.0, 2.0 ** -130, np.inf, -np.inf, np.nan,
                      float(np.asarray(1e-8, BF16))], np.float32)
  full = jnp.full(special.shape, 0xFFFFFFFF, jnp.uint32)
  got = _f64(_rounding.stochastic_round_to_bfloat16(jnp.asarray(special), full))
  chex.assert_trees_all_equal(got, special.astype(np.float64))
  # A NaN whose payload sits in the lower half would carry into an infinity, and
  # one whose upper mantissa is all ones into a zero of the other sign.
  payloads = np.array([0x7F800001, 0xFFFFFFFF, 0x7FFFFFFF, 0xFF80FFFF], np.uint32)
  got = _f64(_rounding.stochastic_round_to_bfloat16(jnp.asarray(payloads.view(np.float32)),
                                                     full[:4]))
  assert np.all(np.isnan(got))


def _share_rounded_up(fraction, n, count_of):
  """The share of ``n`` stores of 1.5 + ``fraction`` of a spacing that land above
  1.5, the i-th at step ``count_of(i)`` (1.5 is a bfloat16; its spacing 2**-7).
  """
  base = np.float32(1.5)
  x = jnp.full((n,), base + fraction * 2.0 ** -7, jnp.float32)
  return np.mean(_f64(count_of(x)) > base)


def _stream_bits(x, count):
  stream_seed, = _rounding.stream_seeds(count, 0, [_rounding.stream_key("", x.shape)])
  return _rounding.array_bits(_rounding.random_word(x.shape, stream_seed), 2)


@pytest.mark.parametrize("fraction", [0.03, 0.25, 0.5, 0.9])
def test_rounding_is_unbiased_over_elements(fraction):
  """A value ``fraction`` of a spacing above a bfloat16 rounds up with that
  probability, over 2**16 elements at one step.
  """
  n = 2 ** 16
  share = _share_rounded_up(
      fraction, n, lambda x: _rounding.store(x, jnp.bfloat16, _stream_bits(x, jnp.int32(7))))
  assert abs(share - fraction) < 5 * np.sqrt(fraction * (1 - fraction) / n)


def test_rounding_is_unbiased_over_steps():
  """One element over 4,000 steps: its bits change with the step count alone."""
  steps, fraction = 4000, 0.25
  store = jax.vmap(lambda x, t: _rounding.store(x, jnp.bfloat16, _stream_bits(x, t)))
  share = _share_rounded_up(
      fraction, steps,
      lambda x: store(x[:, None], jnp.arange(1, steps + 1, dtype=jnp.int32))[:, 0])
  assert abs(share - fraction) < 5 * np.sqrt(fraction * (1 - fraction) / steps)


def test_streams_and_steps_draw_unrelated_bits():
  """Neighbouring streams and steps share no more bits than chance, bit by bit:
  the three arrays of one leaf, two leaves, two seeds.
  """
  n = 2 ** 15
  streams = {0: ("['a']", 0, 0), 1: ("['a']", 1, 0), 2: ("['b']", 0, 0), 3: ("['a']", 0, 1),
             4: ("['a']", 2, 0)}
  bits = {(t, s): _bits((n,), t, *streams[s]) for t in (1, 2) for s in streams}
  pairs = [((1, 0), (1, 1)), ((1, 1), (1, 2)), ((1, 0), (2, 0)), ((1, 2), (2, 2)),
           ((1, 3), (2, 0)), ((1, 0), (1, 3)), ((1, 0), (1, 4)), ((1, 1), (1, 4))]
  for a, b in pairs:
    upper_a, upper_b = bits[a] >> 16, bits[b] >> 16
    agree = np.mean(((upper_a ^ upper_b) >> 15) == 0)  # the top bit, which decides halves
    assert abs(agree - 0.5) < 5 * 0.5 / np.sqrt(n), (a, b, agree)
    correlation = np.corrcoef(upper_a.astype(np.float64), upper_b.astype(np.float64))[0, 1]
    assert abs(correlation) < 5 / np.sqrt(n), (a, b, correlation)
  # And each stream's 16 bits are uniform: the mean of their share of 2**16 is 1/2.
  for key, value in bits.items():
    share = (value >> 16).astype(np.float64) / 2 ** 16
    assert abs(share.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n), key


def _package_run(grads, factory=vsgd_optax.vsgd, **kwargs):
  """``factory(0.0)`` on fixed gradients, jitted; per step the inner state."""
  opt = factory(0.0, **kwargs)
  params = jnp.zeros(grads[0].shape, jnp.float32)
  state = opt.init(params)
  step = jax.jit(lambda g, s: opt.update(g, s)[1])
  history = []
  for g in grads:
    state = step(jnp.asarray(g, jnp.float32), state)
    history.append(state[0])
  return opt.init(params)[0], history


def _as_written_on_every_backend(monkeypatch):
  """Makes the CPU take the form that GPUs and TPUs compile (``_update_rules``)."""
  monkeypatch.setattr(_update_rules.jax.lax, "platform_dependent",
                      lambda *args, default, **branches: default())


@pytest.mark.parametrize("form", ["in_place", "as_written"])
def test_bfloat16_state_follows_the_stochastic_reference(form, monkeypatch):
  """The package's stored bfloat16 state against the float64 step stored with
  the reference's stochastic rounding, in each form of the update. A float32
  value that lands on the other side of a random threshold from the float64
  one moves an element by one bfloat16 unit, so that is the tolerance; nearly
  every element must agree exactly.
  """
  if form == "as_written":
    _as_written_on_every_backend(monkeypatch)
  grads = [np.asarray(g, np.float32).astype(np.float64)
           for g in reference.gradient_stream(seed=31, steps=40, shape=(256,))]
  init, history = _package_run(grads, state_dtype=jnp.bfloat16)
  expected = reference.vsgd_steps(
      grads, start=(0, _f64(init.mu), _f64(init.b_g), _f64(init.b_ghat)),
      state_dtype=BF16, stochastic=True)
  exact = []
  for state, (_, mu, b_g, b_ghat) in zip(history, expected, strict=True):
    assert state.mu.dtype == state.b_g.dtype == state.b_ghat.dtype == jnp.bfloat16
    for got, want in ((state.mu, mu), (state.b_g, b_g), (state.b_ghat, b_ghat)):
      chex.assert_trees_all_close(_f64(got), want, rtol=2 ** -7, atol=1e-30)
      exact.append(np.mean(_f64(got) == want))
  assert np.mean(exact) > 0.97, np.mean(exact)


def test_bfloat16_gradients_and_state_are_computed_in_float32():
  """Gradients and state both bfloat16 (a bfloat16 model with a bfloat16
  state): the step still computes in float32, so the stored state is the
  float64 step stochastically rounded; computed in bfloat16 it would be off by
  several units.
  """
  grads = [np.asarray(np.asarray(g, BF16), np.float64)
           for g in reference.gradient_stream(seed=36, steps=20, shape=(256,))]
  opt = vsgd_optax.vsgd(0.0, state_dtype=jnp.bfloat16)
  params = jnp.zeros(256, jnp.bfloat16)
  state = opt.init(params)
  init = state[0]
  step = jax.jit(lambda g, s: opt.update(g, s)[1])
  expected = reference.vsgd_steps(
      grads, start=(0, _f64(init.mu), _f64(init.b_g), _f64(init.b_ghat)),
      state_dtype=BF16, stochastic=True)
  exact = []
  for g, (_, mu, b_g, b_ghat) in zip(grads, expected, strict=True):
    state = step(jnp.asarray(g, jnp.bfloat16), state)
    for got, want in ((state[0].mu, mu), (state[0].b_g, b_g), (state[0].b_ghat, b_ghat)):
      exact.append(np.mean(_f64(got) == want))
  assert np.mean(exact) > 0.97, np.mean(exact)


@pytest.mark.parametrize("form", ["in_place", "as_written"])
def test_bfloat16_state_is_not_the_nearest_one(form, monkeypatch):
  """The same run with ``state_rounding='nearest'`` follows the reference
  rounded to nearest, and the two roundings differ: the option is honoured.
  """
  if form == "as_written":
    _as_written_on_every_backend(monkeypatch)
  grads = [np.asarray(g, np.float32).astype(np.float64)
           for g in reference.gradient_stream(seed=32, steps=10, shape=(256,))]
  init, nearest = _package_run(grads, state_dtype=jnp.bfloat16, state_rounding="nearest")
  _, stochastic = _package_run(grads, state_dtype=jnp.bfloat16)
  expected = reference.vsgd_steps(
      grads, start=(0, _f64(init.mu), _f64(init.b_g), _f64(init.b_ghat)), state_dtype=BF16)
  for state, (_, mu, b_g, b_ghat) in zip(nearest, expected, strict=True):
    chex.assert_trees_all_close(_f64(state.b_g), b_g, rtol=2 ** -7)
    chex.assert_trees_all_close(_f64(state.b_ghat), b_ghat, rtol=2 ** -7)
    chex.assert_trees_all_close(_f64(state.mu), mu, rtol=2 ** -7, atol=1e-30)
  assert np.mean(_f64(nearest[-1].b_ghat) != _f64(stochastic[-1].b_ghat)) > 0.2


def test_constant_vsgd_rounds_its_two_arrays_with_their_streams():
  """Constant VSGD stores ``mu`` with stream 0 and ``b_ghat`` with stream 1:
  one step from a known state equals the float64 step rounded with those bits.
  """
  grads = [np.asarray(g, np.float32).astype(np.float64)
           for g in reference.gradient_stream(seed=33, steps=3, shape=(512,))]
  _, history = _package_run(grads, factory=vsgd_optax.constant_vsgd, state_dtype=jnp.bfloat16)
  start = history[1]
  want = reference.constant_vsgd_reference(
      grads[2:], np.zeros(512), lambda i: 0.0,
      start=(2, _f64(start.mu), _f64(start.b_ghat)))[0]
  got = history[2]
  for array, exact, stream in ((got.mu, want[1], 0), (got.b_ghat, want[2], 1)):
    rounded = reference.stochastic_bfloat16(exact, reference.rounding_bits((512,), 3, "", stream))
    assert np.mean(_f64(array) == rounded) > 0.99
    chex.assert_trees_all_close(_f64(array), rounded, rtol=2 ** -7)


def test_float32_and_float64_states_are_never_rounded_stochastically():
  """Wider states are stored as before: the float32 state of a bfloat16 param
  and a float32 state are bit for bit those of ``state_rounding='nearest'``.
  """
  grads = [np.asarray(g, np.float32)
           for g in reference.gradient_stream(seed=34, steps=5, shape=(64,))]
  for state_dtype in (None, jnp.float32):
    _, a = _package_run(grads, state_dtype=state_dtype)
    _, b = _package_run(grads, state_dtype=state_dtype, state_rounding="nearest")
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
      chex.assert_trees_all_equal(np.asarray(x), np.asarray(y))


def _tree_run(opt, params, steps, start=None, first=0):
  state = opt.init(params) if start is None else start
  step = jax.jit(opt.update)
  for i in range(first, first + steps):
    rng = np.random.default_rng(500 + i)
    grads = jax.tree.map(lambda p, rng=rng: jnp.asarray(rng.normal(size=p.shape), jnp.float32),
                         params)
    _, state = step(grads, state, params)
  return state


def _same_bits(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    chex.assert_trees_all_equal(np.asarray(x).view(np.uint16 if x.dtype == jnp.bfloat16
                                                     else np.uint32),
                                np.asarray(y).view(np.uint16 if y.dtype == jnp.bfloat16
                                                     else np.uint32))


def test_runs_repeat_bit_for_bit_and_a_restored_state_continues_exactly():
  params = {"a": jnp.zeros((16, 8)), "b": jnp.zeros((16, 8)), "c": jnp.zeros(5)}
  opt = vsgd_optax.vsgd(0.01, state_dtype=jnp.bfloat16)
  first, second = _tree_run(opt, params, 30), _tree_run(opt, params, 30)
  _same_bits(first, second)
  # A checkpoint: the state through NumPy and back, then the remaining steps.
  middle = _tree_run(opt, params, 12)
  restored = jax.tree.map(lambda x: jnp.asarray(np.asarray(x)), middle)
  _same_bits(_tree_run(opt, params, 18, start=restored, first=12), first)


def test_each_leaf_rounds_with_the_streams_of_its_path():
  """Two leaves fed the same gradients: each follows the reference with the
  bits of its own path in the tree, so their states differ.
  """
  grads = [np.asarray(g, np.float32).astype(np.float64)
           for g in reference.gradient_stream(seed=37, steps=12, shape=(256,))]
  opt = vsgd_optax.vsgd(0.0, state_dtype=jnp.bfloat16)
  params = {"a": jnp.zeros(256), "b": jnp.zeros(256)}
  state = opt.init(params)
  init = state[0]
  step = jax.jit(lambda g, s: opt.update(g, s)[1])
  for g in grads:
    state = step({"a": jnp.asarray(g, jnp.float32), "b": jnp.asarray(g, jnp.float32)}, state)
  inner = state[0]
  for name in ("a", "b"):
    start = (0, _f64(init.mu[name]), _f64(init.b_g[name]), _f64(init.b_ghat[name]))
    _, mu, b_g, b_ghat = reference.vsgd_steps(grads, start=start, state_dtype=BF16,
                                              stochastic=True, path=f"['{name}']")[-1]
    assert np.mean(_f64(inner.b_ghat[name]) == b_ghat) > 0.97
    assert np.mean(_f64(inner.b_g[name]) == b_g) > 0.97
  assert np.mean(_f64(inner.b_ghat["a"]) != _f64(inner.b_ghat["b"])) > 0.2


def test_sharded_params_under_jit_round_as_unsharded_ones():
  """The bits come from each element's index in the whole array, so a state
  sharded over eight devices is bit for bit the unsharded state.
  """
  devices = np.array(jax.devices("cpu")[:8]).reshape(4, 2)
  mesh = jax.sharding.Mesh(devices, ("rows", "cols"))
  params = {"w": jnp.zeros((64, 32)), "b": jnp.zeros(32)}
  shardings = {"w": NamedSharding(mesh, P("rows", "cols")), "b": NamedSharding(mesh, P("cols"))}
  opt = vsgd_optax.vsgd(0.01, state_dtype=jnp.bfloat16)
  plain = _tree_run(opt, params, 6)
  sharded_params = jax.device_put(params, shardings)
  sharded = _tree_run(opt, sharded_params, 6)
  assert sharded[0].b_ghat["w"].sharding.is_equivalent_to(shardings["w"], 2)
  _same_bits(plain, sharded)


def test_under_shard_map_each_block_rounds_as_a_leaf_of_its_shape():
  """Inside ``shard_map`` an array is its block, so the index (and the bits)
  are the block's: each device's state equals the plain state of a leaf of
  the block's shape fed that block's gradients. Deterministic and unbiased,
  but not the unsharded run's bits; ``docs/howto.md`` says so.
  """
  mesh = jax.sharding.Mesh(np.array(jax.devices("cpu")[:4]), ("blocks",))
  opt = vsgd_optax.vsgd(0.01, state_dtype=jnp.bfloat16)
  params = jnp.zeros((4 * 16, 8))
  rng = np.random.default_rng(77)
  grads = [jnp.asarray(rng.normal(size=params.shape), jnp.float32) for _ in range(5)]

  def steps(params, state, *grads):
    for g in grads:
      _, state = opt.update(g, state, params)
    return state
  spec = P("blocks")
  state_spec = jax.tree.map(lambda x: P() if x.ndim == 0 else spec, opt.init(params))
  blocked = jax.jit(jax.shard_map(steps, mesh=mesh,
                                  in_specs=(spec, state_spec) + (spec,) * 5,
                                  out_specs=state_spec))(params, opt.init(params), *grads)
  for block in range(4):
    rows = slice(16 * block, 16 * (block + 1))
    alone = jax.jit(steps)(params[rows], opt.init(params[rows]), *(g[rows] for g in grads))
    for x, y in zip(jax.tree.leaves(blocked), jax.tree.leaves(alone), strict=True):
      if x.ndim:
        chex.assert_trees_all_equal(np.asarray(x[rows]).view(np.uint16),
                                    np.asarray(y).view(np.uint16))


def test_inject_hyperparams_takes_the_rounding_as_a_static_argument():
  params = jnp.zeros(64)
  grads = [np.asarray(g, np.float32)
           for g in reference.gradient_stream(seed=35, steps=4, shape=(64,))]
  for rounding in ("stochastic", "nearest"):
    injected = optax.inject_hyperparams(vsgd_optax.vsgd, static_args=("state_dtype",))(
        learning_rate=0.01, state_dtype=jnp.bfloat16, state_rounding=rounding)
    plain = vsgd_optax.vsgd(0.01, state_dtype=jnp.bfloat16, state_rounding=rounding)
    a, b = injected.init(params), plain.init(params)
    for g in grads:
      _, a = injected.update(jnp.asarray(g), a, params)
      _, b = plain.update(jnp.asarray(g), b, params)
    _same_bits(a.inner_state, b)

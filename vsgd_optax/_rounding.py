"""Storing the state in bfloat16: stochastic rounding with bits from the step count.

Round-to-nearest stops a bfloat16 state learning once ``t**-kappa`` times a change
is under half a spacing (``docs/algorithm.md``); stochastic rounding is exact in
expectation. Its bits are a counter-based hash of the step count, the optimizer's
``seed``, the stream (the leaf's path in the full tree and the arrays' shape) and
each element's index, in two 32-bit words for arrays of 2**32 elements or more.
So the state needs no key, a restored checkpoint continues bit for bit, and the
per-element work is a few integer operations fused into the update's loop. Under
``jit`` the index is the whole array's, so a sharded array rounds as an unsharded one.
"""

import hashlib
import math
from collections.abc import Sequence
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from vsgd_optax import _update_rules

# MurmurHash3's finalizer constants, and the golden-ratio step.
_MIX_1, _MIX_2, _GOLDEN = 0x85EBCA6B, 0xC2B2AE35, 0x9E3779B9
_WORD = 2 ** 32
_QUIET_NAN = 0x00400000  # float32's quiet bit: the top of the mantissa, in bfloat16's half

# How a state narrower than float32 is stored (``state_rounding``).
Rounding = Literal["stochastic", "nearest"]


def rounds_stochastically(state_dtype, rounding: str) -> bool:
  """Whether a state of ``state_dtype`` is narrower than float32 and rounds stochastically."""
  dtype = np.dtype(state_dtype)
  return rounding == "stochastic" and dtype.itemsize < np.dtype(np.float32).itemsize


def _mix(x: jax.Array) -> jax.Array:
  """MurmurHash3's finalizer: a bijection of uint32 (0 maps to 0)."""
  x = x ^ (x >> 16)
  x = x * jnp.uint32(_MIX_1)
  x = x ^ (x >> 13)
  x = x * jnp.uint32(_MIX_2)
  return x ^ (x >> 16)


def stream_key(path: str, shape: tuple[int, ...]) -> int:
  """A stream's 32-bit key from the leaf's path and its arrays' shape; not Python's
  ``hash``, which changes with each process.
  """
  digest = hashlib.blake2b(f"{path}#{shape}".encode(), digest_size=4).digest()
  return int.from_bytes(digest, "little")


def _wide_product(a: jax.Array, b: int) -> tuple[jax.Array, jax.Array]:
  """``a * b`` (uint32 ``a``, ``0 <= b < 2**64``) as low and high 32-bit words,
  from 16-bit halves so that no product overflows.
  """
  b_low, b_high = b % _WORD, b // _WORD % _WORD
  a0, a1 = a & jnp.uint32(0xFFFF), a >> 16
  b0, b1 = jnp.uint32(b_low & 0xFFFF), jnp.uint32(b_low >> 16)
  p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
  middle = (p00 >> 16) + (p01 & jnp.uint32(0xFFFF)) + (p10 & jnp.uint32(0xFFFF))
  low = a * jnp.uint32(b_low)
  high = p11 + (p01 >> 16) + (p10 >> 16) + (middle >> 16) + a * jnp.uint32(b_high)
  return low, high


def index_words(coordinates: Sequence[jax.Array], shape: tuple[int, ...]):
  """The row-major index of the elements at ``coordinates`` (one uint32 array
  per axis of ``shape``) as ``(low, high)`` 32-bit words; ``high`` is None for
  arrays of fewer than 2**32 elements, whose index fits one word.
  """
  if math.prod(shape) <= _WORD:
    low = jnp.zeros(jnp.shape(coordinates[0]) if coordinates else (), jnp.uint32)
    for axis, coordinate in enumerate(coordinates):
      low = low + coordinate * jnp.uint32(math.prod(shape[axis + 1:]) % _WORD)
    return low, None
  low = high = jnp.zeros(jnp.shape(coordinates[0]), jnp.uint32)
  for axis, coordinate in enumerate(coordinates):
    term_low, term_high = _wide_product(coordinate, math.prod(shape[axis + 1:]))
    total = low + term_low
    high = high + term_high + (total < low).astype(jnp.uint32)  # the carry
    low = total
  return low, high


def _element_index(shape: tuple[int, ...]):
  """Each element's index words; one iota an axis, so that it partitions like the array."""
  return index_words([jax.lax.broadcasted_iota(jnp.uint32, shape, axis)
                      for axis in range(len(shape))], shape)


def _keyed_index(shape: tuple[int, ...], key: jax.Array) -> jax.Array:
  """``index * _GOLDEN + key`` (modulo 2**32) for every element of an array of
  fewer than 2**32 elements: one term an axis, computed on its own length and
  broadcast, so a full-size array costs one addition an axis.
  """
  total = jnp.asarray(key, jnp.uint32)
  for axis, size in enumerate(shape):
    stride = math.prod(shape[axis + 1:]) * _GOLDEN % _WORD
    term = jnp.arange(size, dtype=jnp.uint32) * jnp.uint32(stride)
    if axis == 0:  # the key rides on the first axis's short term
      total, term = jnp.zeros((), jnp.uint32), term + total
    total = total + jax.lax.broadcast_in_dim(term, shape, (axis,))
  return total


def _inside_a_loop(count: jax.Array, fn, keys: Sequence[int]) -> tuple[jax.Array, ...]:
  """``fn(key)`` for each key, inside a loop that runs once with a trip count the
  compiler cannot see.
  """
  # A seed XLA can fold into a constant makes every leaf's fused kernel distinct
  # (on XLA:CPU, a 290-leaf step compiled 24 times slower than Adam's); a seed out
  # of a loop is a runtime value, and leaves of one shape share their kernels.
  trips = jnp.asarray(count).astype(jnp.int32) >> 31  # always 0: the count is >= 0

  def body(carry):
    trips, values = carry
    # + trips (0 in the one trip) ties each value to the loop.
    return trips + 1, tuple(fn(value + trips.astype(jnp.uint32)) for value in values)
  _, out = jax.lax.while_loop(lambda carry: carry[0] < 1, body,
                              (trips, tuple(jnp.uint32(key) for key in keys)))
  return out


def stream_seeds(count: jax.Array, seed, keys: Sequence[int]) -> tuple[jax.Array, ...]:
  """Each stream's 32-bit seed at step ``count``, from the step, ``seed`` and its key."""
  seed_word = (jnp.uint32(seed) if isinstance(seed, (int, np.integer))
               else jnp.asarray(seed).astype(jnp.uint32))
  salt = _mix(seed_word + jnp.uint32(_GOLDEN))
  step = _mix(jnp.asarray(count).astype(jnp.uint32))
  seed_of = lambda key: _mix(step + (key ^ salt))
  # The loop only where it pays: on XLA:CPU (``_inside_a_loop``).
  return tuple(jax.lax.platform_dependent(
      cpu=lambda: _inside_a_loop(count, seed_of, keys),
      default=lambda: tuple(seed_of(jnp.uint32(key)) for key in keys)))


# The state arrays of one shape in one leaf that a stream's word serves.
ARRAYS_PER_STREAM = 3


def random_word(shape: tuple[int, ...], stream_seed: jax.Array) -> jax.Array:
  """A 32-bit word of pseudo-random bits per element, from the stream's seed and
  the element's index alone (``word_at``).
  """
  if math.prod(shape) <= _WORD:
    return _mix(_keyed_index(shape, stream_seed))  # word_at's, in fewer operations
  low, high = _element_index(shape)
  return word_at(low, high, stream_seed)


def word_at(low: jax.Array, high: jax.Array | None, stream_seed: jax.Array) -> jax.Array:
  """``random_word`` of the elements whose index words are ``low`` and ``high``
  (elements ``k`` and ``k + 2**32`` differ by the mix of their upper words).
  """
  key = stream_seed if high is None else stream_seed + _mix(high)
  return _mix(low * jnp.uint32(_GOLDEN) + key)


def array_bits(word: jax.Array, slot: int) -> jax.Array:
  """The upper 16 bits for a stream's ``slot``-th array: the halves' xor, the upper
  half, the lower half. Any two are independent, so one hash serves three arrays.
  """
  return (word ^ (word << 16), word, word << 16)[slot]


def stochastic_round_to_bfloat16(x: jax.Array, bits: jax.Array) -> jax.Array:
  """``x`` rounded to a neighbouring bfloat16, up in magnitude with probability
  equal to the part of a spacing past the lower neighbour.
  """
  # bfloat16 is float32's upper half: 16 random bits added to the lower half carry
  # with exactly that probability. The sign stays out of the sum; a NaN keeps its
  # own upper half with the quiet bit set (a carry could make it infinite or zero).
  raw = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
  carried = raw + (bits >> 16)
  kept = jnp.where(x != x, raw | jnp.uint32(_QUIET_NAN), carried)
  return jax.lax.bitcast_convert_type((kept >> 16).astype(jnp.uint16), jnp.bfloat16)


def store(x: jax.Array, dtype, bits: jax.Array | None) -> jax.Array:
  """``x`` in the state's ``dtype``, rounded stochastically with ``bits`` where they
  are given, else to nearest; saturated first, so no finite value becomes infinite.
  """
  if np.dtype(dtype).itemsize < np.dtype(x.dtype).itemsize:
    x = _update_rules.clamp_to_finite(x, dtype)
  if bits is None:
    return x.astype(dtype)
  return stochastic_round_to_bfloat16(x, bits)


# A leaf's rounding plan: per stochastically stored array, ``(moment, path inside
# it, stream among the leaf's, slot)``; a static argument of the leaf's jitted step.
LeafPlan = tuple[tuple[int, str, int, int], ...]


def _leaf_plan(path: str, moments: Sequence, rounding: Rounding, keys: list[int]) -> LeafPlan:
  """The plan of the leaf at ``path`` whose moments (each an array or a small pytree)
  are ``moments``; appends the key of each stream it opens to ``keys``.
  """
  streams: dict = {}  # shape -> (stream among the leaf's, arrays it serves so far)
  plan = []
  for which, moment in enumerate(moments):
    for inner, array in jax.tree_util.tree_leaves_with_path(moment):
      if not rounds_stochastically(array.dtype, rounding):
        continue
      shape = tuple(array.shape)
      if shape not in streams:
        streams[shape] = (len(streams), 0)
        keys.append(stream_key(path, shape))
      stream, used = streams[shape]
      assert used < ARRAYS_PER_STREAM, "a stream serves at most three arrays"
      plan.append((which, jax.tree_util.keystr(inner), stream, used))
      streams[shape] = (stream, used + 1)
  return tuple(sorted(plan))


def leaf_streams(count: jax.Array, seed, rounding: Rounding, leaves: Sequence[tuple[str, Sequence]],
                 ) -> list[tuple[tuple[jax.Array, ...], LeafPlan]]:
  """For each of ``leaves``, given as its path in the full tree and its moments (each
  an array or a small pytree): the seeds at step ``count`` of the streams it draws
  from, and its plan. A stream per leaf and shape, keyed by the leaf's path, serves
  up to three of that leaf's arrays (``array_bits``).
  """
  keys: list[int] = []
  opened, plans = [], []
  for path, moments in leaves:
    first = len(keys)
    plans.append(_leaf_plan(path, moments, rounding, keys))
    opened.append(range(first, len(keys)))
  seeds = stream_seeds(count, seed, keys)
  return [(tuple(seeds[s] for s in streams), plan)
          for streams, plan in zip(opened, plans, strict=True)]


def store_moments(new_moments: Sequence, old_moments: Sequence, plan: LeafPlan,
                  leaf_seeds: tuple[jax.Array, ...]) -> tuple:
  """One leaf's new moments in their old dtypes, each array rounded with its own
  bits where ``plan`` names it, else to nearest.
  """
  rounded = {(which, inner): (stream, slot) for which, inner, stream, slot in plan}
  word_of_stream: dict = {}  # each stream's word, hashed once for all the arrays it serves

  def stored(which, path, new_array, old_array):
    found = rounded.get((which, jax.tree_util.keystr(path)))
    if found is None:
      return store(new_array, old_array.dtype, None)
    stream, slot = found
    if stream not in word_of_stream:
      word_of_stream[stream] = random_word(new_array.shape, leaf_seeds[stream])
    return store(new_array, old_array.dtype, array_bits(word_of_stream[stream], slot))
  return tuple(jax.tree.map_with_path(lambda path, n_, o_, i=i: stored(i, path, n_, o_), n, o)
               for i, (n, o) in enumerate(zip(new_moments, old_moments, strict=True)))

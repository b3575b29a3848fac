"""Storing the state in bfloat16: stochastic rounding with bits from the step count.

VSGD's rates are averages with weights ``rho_t = t**-kappa``. bfloat16 keeps
8 significant bits, so once ``rho_t`` times a change is under half a spacing
of the stored value (0.2 to 0.4% of it), round-to-nearest gives back the old
value: past about step 1,000 the state can no longer decrease, and the
optimizer silently stops tracking the noise (``docs/algorithm.md``).
Stochastic rounding rounds up with probability equal to the fraction of a
spacing that the exact value passed, so the stored value is exact in
expectation and small weights still move it.

The random bits are a counter-based integer hash of four things:

* the step count, so that each step draws new bits;
* the optimizer's ``seed``, which tells apart optimizers that a path cannot
  (two optimizers on trees of one shape, the members of an ensemble under
  ``vmap``);
* the stream: the leaf's path in the tree and which array of the state it
  is. The path is the full tree's, also inside ``optax.masked`` and
  ``optax.multi_transform``, so their groups draw bits of their own;
* each element's index in its array, in two 32-bit words, so that elements
  ``k`` and ``k + 2**32`` of a very large array draw different bits.

One hash round an element gives one 32-bit word, whose halves and their xor
round up to three state arrays of a leaf (``array_bits``).

They need no key in the state (whose fields stay those of release 0.1.0), the
same steps give the same bits, so a restored checkpoint continues bit for
bit, and the per-element part is a handful of integer operations that XLA
fuses into the update's own loop, with no extra pass over memory. Under
``jit`` the index is the element's index in the whole array, so a sharded
array rounds as an unsharded one does; under ``shard_map`` it is the index
within the block.
"""

import hashlib
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vsgd_optax import _update_rules

# The odd constants of MurmurHash3's 32-bit finalizer, and the golden-ratio
# step that spreads consecutive integers over the 32-bit range.
_MIX_1, _MIX_2, _GOLDEN = 0x85EBCA6B, 0xC2B2AE35, 0x9E3779B9
_WORD = 2 ** 32
_QUIET_NAN = 0x00400000  # float32's quiet bit: the top of the mantissa, in bfloat16's half


def rounds_stochastically(state_dtype, rounding: str) -> bool:
  """Whether a state of ``state_dtype`` is stored with stochastic rounding:
  only where it holds fewer bits than the float32 that the update computes in.
  """
  dtype = np.dtype(state_dtype)
  return rounding == "stochastic" and dtype.itemsize < np.dtype(np.float32).itemsize


def _mix(x: jax.Array) -> jax.Array:
  """MurmurHash3's finalizer: a bijection of uint32 in which every input bit
  flips each output bit with probability about 1/2 (and 0 maps to 0).
  """
  x = x ^ (x >> 16)
  x = x * jnp.uint32(_MIX_1)
  x = x ^ (x >> 13)
  x = x * jnp.uint32(_MIX_2)
  return x ^ (x >> 16)


def stream_key(path: str, shape: tuple[int, ...]) -> int:
  """A stream's 32-bit key: a hash of the leaf's path and the shape of the state
  arrays it serves (a leaf's arrays of one shape share a stream, 16 bits each:
  ``array_bits``). Fixed by the text alone (not Python's ``hash``, which
  changes with each process), so that runs repeat and checkpoints continue
  across processes.
  """
  digest = hashlib.blake2b(f"{path}#{shape}".encode(), digest_size=4).digest()
  return int.from_bytes(digest, "little")


def _wide_product(a: jax.Array, b: int) -> tuple[jax.Array, jax.Array]:
  """``a * b`` for uint32 ``a`` and an integer ``0 <= b < 2**64``, as its low
  and high 32-bit words (modulo 2**64), from 16-bit halves so that no product
  overflows.
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
  """Each element's index in an array of ``shape``, as ``index_words`` gives it.

  Built from one iota per axis rather than a reshaped flat iota, so that it is
  elementwise in ``shape`` and partitions like the array it indexes.
  """
  return index_words([jax.lax.broadcasted_iota(jnp.uint32, shape, axis)
                      for axis in range(len(shape))], shape)


def _keyed_index(shape: tuple[int, ...], key: jax.Array) -> jax.Array:
  """``index * _GOLDEN + key`` (modulo 2**32) for every element of an array of
  fewer than 2**32 elements, as a sum of one term per axis.

  Each axis's term is computed on that axis's own length and broadcast, so a
  full-size array costs one addition an axis, not a multiply-add an axis and
  a multiply: the same words, from fewer operations in each of the loops that
  round a state array.
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
  """``fn(key)`` for each key, computed inside a loop that runs once, with a trip
  count that the compiler cannot see.

  Why: XLA compiles each distinct fused loop once and reuses it for every
  identical one, so leaves of one shape share their kernels. A stream seed
  that XLA can fold into a constant makes every leaf's kernel distinct (on
  XLA:CPU, a 290-leaf step then compiled 24 times slower than Adam's); a
  seed that comes out of a loop is a runtime value, and the kernels stay
  identical. Inside the loop each key is a loop variable, so its seed's
  operations are the same kernel for every key too. The loop costs a few
  scalar operations a step.
  """
  trips = jnp.asarray(count).astype(jnp.int32) >> 31  # always 0: the count is >= 0

  def body(carry):
    trips, values = carry
    # + trips (0 in the one trip) ties each value to the loop.
    return trips + 1, tuple(fn(value + trips.astype(jnp.uint32)) for value in values)
  _, out = jax.lax.while_loop(lambda carry: carry[0] < 1, body,
                              (trips, tuple(jnp.uint32(key) for key in keys)))
  return out


def stream_seeds(count: jax.Array, seed, keys: Sequence[int]) -> tuple[jax.Array, ...]:
  """Each stream's 32-bit seed at step ``count``: a hash of the step, the
  optimizer's ``seed`` and the stream's key (``stream_key``).
  """
  seed_word = (jnp.uint32(seed) if isinstance(seed, (int, np.integer))
               else jnp.asarray(seed).astype(jnp.uint32))
  salt = _mix(seed_word + jnp.uint32(_GOLDEN))
  step = _mix(jnp.asarray(count).astype(jnp.uint32))
  seed_of = lambda key: _mix(step + (key ^ salt))
  # The loop only where it pays: on XLA:CPU (``_inside_a_loop``).
  return tuple(jax.lax.platform_dependent(
      cpu=lambda: _inside_a_loop(count, seed_of, keys),
      default=lambda: tuple(seed_of(jnp.uint32(key)) for key in keys)))


# The state arrays of one shape in one leaf that a stream's word serves: its
# upper half, its lower half, and the two halves' xor.
ARRAYS_PER_STREAM = 3


def random_word(shape: tuple[int, ...], stream_seed: jax.Array) -> jax.Array:
  """A 32-bit word of pseudo-random bits per element of an array of ``shape``,
  a function of the stream's seed at this step (``stream_seeds``) and the
  element's index alone (``word_at``).
  """
  if math.prod(shape) <= _WORD:
    return _mix(_keyed_index(shape, stream_seed))  # word_at's, in fewer operations
  low, high = _element_index(shape)
  return word_at(low, high, stream_seed)


def word_at(low: jax.Array, high: jax.Array | None, stream_seed: jax.Array) -> jax.Array:
  """``random_word`` of the elements whose index words are ``low`` and ``high``.

  One finalizer round of the index keyed with the stream's seed and, where the
  array has one, the index's upper word: elements ``k`` and ``k + 2**32`` have
  keys that differ by the mix of their upper words, so every bit drawn from
  the word sees both index words.
  """
  key = stream_seed if high is None else stream_seed + _mix(high)
  return _mix(low * jnp.uint32(_GOLDEN) + key)


def array_bits(word: jax.Array, slot: int) -> jax.Array:
  """The bits of the ``slot``-th state array that a stream serves, in the upper
  16 bits that the rounding reads (``stochastic_round_to_bfloat16``): the
  word's two halves xored, its upper half, its lower half. Each is uniform
  and any two are independent (the xor of two independent uniform halves is
  independent of either), so one hash serves all of a leaf's arrays of one
  shape: one finalizer round an element, not two.
  """
  return (word ^ (word << 16), word, word << 16)[slot]


def stochastic_round_to_bfloat16(x: jax.Array, bits: jax.Array) -> jax.Array:
  """``x`` rounded to a neighbouring bfloat16, up in magnitude with probability
  equal to the part of a spacing past the lower neighbour.

  bfloat16 is float32's upper 16 bits. Adding 16 random bits to the lower 16
  carries into the upper half with exactly that probability; keeping the
  upper half then truncates. The sign bit stays out of the sum, so the
  rounding is symmetric in sign, and infinities stay infinite. A NaN could
  carry into an infinity or a zero, so it keeps its own upper half, with the
  quiet bit set so that the half is a NaN whatever its payload was. All of it
  is integer work on the float's bits, with no conversion between floats.
  """
  raw = jax.lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
  carried = raw + (bits >> 16)
  kept = jnp.where(x != x, raw | jnp.uint32(_QUIET_NAN), carried)
  return jax.lax.bitcast_convert_type((kept >> 16).astype(jnp.uint16), jnp.bfloat16)


def store(x: jax.Array, dtype, bits: jax.Array | None) -> jax.Array:
  """``x`` in the state's ``dtype``: stochastically rounded with ``bits`` where
  they are given (a bfloat16 state rounded stochastically), else by ``astype``
  (to nearest). A narrower dtype's finite range is smaller than the
  update's (bfloat16's largest value is under float32's), so ``x`` is
  saturated to it first: a finite value is never stored as an infinity.
  """
  if np.dtype(dtype).itemsize < np.dtype(x.dtype).itemsize:
    x = _update_rules.finite(x, dtype)
  if bits is None:
    return x.astype(dtype)
  return stochastic_round_to_bfloat16(x, bits)

"""Storing the state in bfloat16: stochastic rounding with bits from the step count.

VSGD's rates are averages with weights ``rho_t = t**-kappa``. bfloat16 keeps
8 significant bits, so once ``rho_t`` times a change is under half a spacing
of the stored value (0.2 to 0.4% of it), round-to-nearest gives back the old
value: past about step 1,000 the state can no longer decrease, and the
optimizer silently stops tracking the noise (``docs/algorithm.md``).
Stochastic rounding rounds up with probability equal to the fraction of a
spacing that the exact value passed, so the stored value is exact in
expectation and small weights still move it.

The random bits are a counter-based integer hash of the step count, a stream
number (the leaf and the buffer) and each element's index in its array. They
need no key in the state (whose fields stay those of release 0.1.0), the same
steps give the same bits, so a restored checkpoint continues bit for bit,
and the hash is a handful of integer operations that XLA fuses into the
update's own loop, with no extra pass over memory. Under ``jit`` the index is
the element's index in the whole array, so a sharded array rounds as an
unsharded one does; under ``shard_map`` it is the index within the block.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

ROUNDINGS = ("stochastic", "nearest")

# The odd constants of MurmurHash3's 32-bit finalizer, and the golden-ratio
# step that spreads consecutive integers over the 32-bit range.
_MIX_1, _MIX_2, _GOLDEN = 0x85EBCA6B, 0xC2B2AE35, 0x9E3779B9


def check_rounding(rounding: str) -> None:
  if rounding not in ROUNDINGS:
    raise ValueError(
        f"state_rounding must be 'stochastic' or 'nearest', got {rounding!r}.")


def rounds_stochastically(state_dtype, rounding: str) -> bool:
  """Whether a state of ``state_dtype`` is stored with stochastic rounding:
  only where it holds fewer bits than the float32 that the update computes in.
  """
  dtype = np.dtype(state_dtype)
  return rounding == "stochastic" and dtype.itemsize < np.dtype(np.float32).itemsize


def check_state_dtype(state_dtype, rounding: str) -> None:
  """The stochastic rounding here is bfloat16's: the upper half of float32."""
  if rounds_stochastically(state_dtype, rounding) and np.dtype(state_dtype) != np.dtype(
      jnp.bfloat16):
    raise ValueError(
        f"state_dtype={np.dtype(state_dtype)} has no stochastic rounding here; use "
        "bfloat16 or float32, or pass state_rounding='nearest' to round to nearest.")


def _mix(x: jax.Array) -> jax.Array:
  """MurmurHash3's finalizer: a bijection of uint32 in which every input bit
  flips each output bit with probability about 1/2.
  """
  x = x ^ (x >> 16)
  x = x * jnp.uint32(_MIX_1)
  x = x ^ (x >> 13)
  x = x * jnp.uint32(_MIX_2)
  return x ^ (x >> 16)


def _element_index(shape: tuple[int, ...]) -> jax.Array:
  """Each element's row-major index in an array of ``shape``, as uint32.

  Built from one iota per axis rather than a reshaped flat iota, so that it is
  elementwise in ``shape`` and partitions like the array it indexes.
  """
  index = jnp.zeros(shape, jnp.uint32)
  for axis in range(len(shape)):
    stride = math.prod(shape[axis + 1:])
    iota = jax.lax.broadcasted_iota(jnp.uint32, shape, axis)
    index = index + iota * jnp.uint32(stride % 2 ** 32)
  return index


def random_bits(shape: tuple[int, ...], count: jax.Array, stream: int) -> jax.Array:
  """32 pseudo-random bits per element, a function of the step ``count``, the
  ``stream`` (which array of the state) and the element's index alone.

  The second round keys each element's hash with the seed again, so that no
  stream is another one's bits shifted along the index.
  """
  seed = _mix(_mix(jnp.asarray(count).astype(jnp.uint32))
              + jnp.uint32(stream * _GOLDEN % 2 ** 32))
  first = _mix(_element_index(shape) * jnp.uint32(_GOLDEN) + seed)
  return _mix(first ^ seed)


def stochastic_round_to_bfloat16(x: jax.Array, bits: jax.Array) -> jax.Array:
  """``x`` rounded to a neighbouring bfloat16, up in magnitude with probability
  equal to the part of a spacing past the lower neighbour.

  bfloat16 is float32's upper 16 bits. Adding 16 random bits to the lower 16
  carries into the upper half with exactly that probability; clearing the
  lower half then truncates. The sign bit stays out of the sum, so the
  rounding is symmetric in sign; infinities stay infinite, and NaN is kept
  (a carry could turn one into an infinity or a zero).
  """
  x = x.astype(jnp.float32)
  raw = jax.lax.bitcast_convert_type(x, jnp.uint32)
  carried = (raw + (bits >> 16)) & jnp.uint32(0xFFFF0000)
  rounded = jax.lax.bitcast_convert_type(carried, jnp.float32).astype(jnp.bfloat16)
  return jnp.where(jnp.isnan(x), x.astype(jnp.bfloat16), rounded)


def store(x: jax.Array, dtype, rounding: str, count: jax.Array, stream: int) -> jax.Array:
  """``x`` in the state's ``dtype``: stochastically rounded where that is
  bfloat16 and ``rounding`` asks for it, else by ``astype`` (to nearest).
  """
  if not rounds_stochastically(dtype, rounding):
    return x.astype(dtype)
  return stochastic_round_to_bfloat16(x, random_bits(x.shape, count, stream))

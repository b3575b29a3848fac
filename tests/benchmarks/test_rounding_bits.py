"""``benchmarks.rounding_bits`` runs: it swaps the package's word of rounding
bits for ``jax.random``'s while a step is traced, and restores it after.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import rounding_bits
from vsgd_optax import _rounding


@pytest.mark.slow
def test_a_small_measurement_times_every_state_and_restores_the_hash():
  kept = _rounding.random_word
  result = rounding_bits.measure(20_000, repeats=1)
  assert _rounding.random_word is kept
  assert set(result["rows"]) == {"adam", "vsgd", "bf16 nearest", "bf16 stochastic, hash",
                                 "bf16 stochastic, jax.random"}
  assert result["rows"]["adam"]["vs_adam"]["ratio"] == 1.0
  assert all(row["median_ms"] > 0 for row in result["rows"].values())
  # While swapped, the step really draws jax.random's bits.
  with rounding_bits._bits_from(rounding_bits._random_word_from_jax_random):
    swapped = np.asarray(_rounding.random_word((64,), jnp.uint32(5)))
  np.testing.assert_array_equal(
      swapped, np.asarray(rounding_bits._random_word_from_jax_random((64,), jnp.uint32(5))))
  assert not np.array_equal(swapped, np.asarray(_rounding.random_word((64,), jnp.uint32(5))))

"""Where the bfloat16 state's rounding bits should come from: a hash or ``jax.random``.

    python -m benchmarks.rounding_bits             # 9.3M parameters
    python -m benchmarks.rounding_bits --quick     # 1M, few repeats

VSGD's bfloat16 state is stochastically rounded with bits hashed from the
step count and each element's index (``vsgd_optax._rounding``). This times the
donated step with those bits against the same step drawing them from
``jax.random.bits`` (a key folded with the count and the stream), and against
rounding to nearest and the float32 state, round-robin with Adam in one
process, on ``step_cost``'s network-shaped params. The result decides nothing
at run time; it is the record of why the package hashes.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

import vsgd_optax
from benchmarks import common
from benchmarks import step_cost
from vsgd_optax import _rounding

RESULTS = "benchmarks/results/rounding_bits.json"


def _random_word_from_jax_random(shape, stream_seed):
  key = jax.random.fold_in(jax.random.key(0), stream_seed)
  return jax.random.bits(key, shape, jnp.uint32)


@contextlib.contextmanager
def _bits_from(source):
  """Swaps the package's word of bits per element (``_rounding.random_word``)
  for ``source`` while a step is traced.
  """
  kept = _rounding.random_word
  _rounding.random_word = source
  try:
    yield
  finally:
    _rounding.random_word = kept


def _runner(opt, params, grads, bits=None):
  """``step_cost``'s donated step of ``opt``, compiled with ``bits`` as the
  rounding's bits (the package's own where None); a call runs one step.
  """
  carry = [jax.tree.map(jnp.copy, params), opt.init(params)]
  with _bits_from(bits) if bits is not None else contextlib.nullcontext():
    compiled = step_cost._step_fn(opt, donate=True).lower(*carry, grads).compile()

  def run():
    carry[0], carry[1] = compiled(carry[0], carry[1], grads)
    jax.block_until_ready(carry)
  run()
  return run


def measure(size: int, repeats: int) -> dict:
  params = step_cost.network_like_params(size)
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  bf16 = dict(state_dtype=jnp.bfloat16)
  runners = {
      "adam": _runner(optax.adam(1e-3), params, grads),
      "vsgd": _runner(vsgd_optax.vsgd(1e-3), params, grads),
      "bf16 nearest": _runner(vsgd_optax.vsgd(1e-3, **bf16, state_rounding="nearest"),
                              params, grads),
      "bf16 stochastic, hash": _runner(vsgd_optax.vsgd(1e-3, **bf16), params, grads),
      "bf16 stochastic, jax.random": _runner(vsgd_optax.vsgd(1e-3, **bf16), params, grads,
                                             bits=_random_word_from_jax_random),
  }
  samples = {k: np.asarray(v) for k, v in common.interleaved_medians(runners, repeats).items()}
  n = sum(x.size for x in jax.tree.leaves(params))
  return {"params": n, "repeats": repeats,
          "rows": {name: {"median_ms": 1e3 * float(np.median(s)),
                          "vs_adam": common.ratio_with_spread(s, samples["adam"]),
                          "vs_nearest": common.ratio_with_spread(s, samples["bf16 nearest"])}
                   for name, s in samples.items()}}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.rounding_bits",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="1M parameters, 5 rounds")
  parser.add_argument("--out", default=None, help=f"result file (default: {RESULTS})")
  args = parser.parse_args(argv)
  result = measure(1_000_000, 5) if args.quick else measure(9_300_000, 40)
  result["machine"] = common.machine()
  for name, row in result["rows"].items():
    print(f"{name:>28}: {row['median_ms']:8.2f} ms  {row['vs_adam']['ratio']:.2f}x adam  "
          f"{row['vs_nearest']['ratio']:.2f}x nearest")
  out = args.out or (None if args.quick else RESULTS)
  if out:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    common.write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
  main()

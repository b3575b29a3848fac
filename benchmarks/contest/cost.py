"""What each contest entry's optimizer step costs next to Muon's, on the contest's model.

    python -m benchmarks.contest.cost [--size gpu] [--repeats 20]   # the GPU size's model
    python -m benchmarks.contest.cost --quick                        # CI's smoke test

For Muon and each VSGD-Muon (as the contest builds them: AdamW on the
embedding, the positions and the head), on the params of the contest's model:
the state's bytes a parameter, the donated step's (``update`` +
``apply_updates``) median time over Muon's, timed round-robin in one process,
and its lower + compile time over Muon's. Writes
``benchmarks/results/contest/cost.json`` (its machine and model size inside).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks import common
from benchmarks.contest import entries as contest_entries
from benchmarks.contest import model
from benchmarks.contest import protocol

NAMES = ("muon", "normuon", "vsgd_muon", "vsgd_muon_factored")
RATE = 0.01


def _step(opt):
  return jax.jit(common.optimizer_step(opt), donate_argnums=(0, 1))


def measure(size: model.Size, repeats: int, names=NAMES) -> list[dict]:
  """One row an entry: state bytes a parameter, step and compile over Muon's."""
  params = model.init(jax.random.key(0), size)
  n = sum(x.size for x in jax.tree.leaves(params))
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  runners, info = {}, {}
  for name in names:
    opt = contest_entries.ENTRIES[name].build(optax.constant_schedule(RATE))
    step = _step(opt)
    carry = [jax.tree.map(jnp.copy, params), opt.init(params)]
    started = time.perf_counter()
    compiled = step.lower(*carry, grads).compile()
    info[name] = {"compile_s": time.perf_counter() - started,
                  "state_bytes_per_param": sum(x.nbytes for x in jax.tree.leaves(carry[1])) / n}

    def run(compiled=compiled, carry=carry):
      carry[0], carry[1] = compiled(carry[0], carry[1], grads)
      jax.block_until_ready(carry)
    run()  # warm-up outside the timings
    runners[name] = run
  samples = common.interleaved_medians(runners, repeats)
  return [{"optimizer": name, "params": n, "median_ms": 1e3 * float(np.median(samples[name])),
           **common.ratio_with_spread(samples[name], samples["muon"]),
           "compile_vs_muon": info[name]["compile_s"] / info["muon"]["compile_s"], **info[name]}
          for name in names]


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.contest.cost",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--size", choices=sorted(protocol.SIZES), default="gpu")
  parser.add_argument("--repeats", type=int, default=None, help="default 20 (--quick: 2)")
  parser.add_argument("--quick", action="store_true", help="the smoke size, two rounds")
  parser.add_argument("--out", default=None,
                      help="JSON path (default benchmarks/results/contest/cost.json; --quick: "
                           "the temporary folder)")
  args = parser.parse_args(argv)
  size = "smoke" if args.quick else args.size
  repeats = args.repeats or (2 if args.quick else 20)
  rows = measure(protocol.SIZES[size]["size"], repeats)
  result = {"machine": common.machine(), "size": size, "repeats": repeats, "rows": rows}
  out = args.out or (os.path.join(tempfile.gettempdir(), "contest_cost.json") if args.quick
                     else os.path.join(common.RESULTS, "contest", "cost.json"))
  common.write_json(out, result)
  for r in rows:
    print(f"{r['optimizer']:>20}: {r['state_bytes_per_param']:.1f} B/param, step "
          f"{r['ratio']:.2f}x Muon's, compile {r['compile_vs_muon']:.2f}x")
  print(f"wrote {out}")
  return result


if __name__ == "__main__":
  main()

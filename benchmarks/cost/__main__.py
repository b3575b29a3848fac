"""python -m benchmarks.cost: the cost's part for this machine (see ``benchmarks.cost``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import jax

from benchmarks import common
from benchmarks.contest import protocol as contest_protocol
from benchmarks.cost import compile as compile_time
from benchmarks.cost import floor
from benchmarks.cost import memory
from benchmarks.cost import muon_family
from benchmarks.cost import step

SIZES = (1_000_000, 9_300_000, 50_000_000)


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.cost",
                                   description=__doc__.split(":", 1)[1].strip())
  parser.add_argument("--quick", action="store_true",
                      help="every section, small: 1M parameters, few repeats (the CI test)")
  parser.add_argument("--out", default=None,
                      help="result file (default benchmarks/results/cost_<part>.json; "
                           "--quick: the temporary folder's)")
  args = parser.parse_args(argv)
  part = "cpu" if jax.default_backend() == "cpu" else "gpu"
  started = time.perf_counter()
  sizes, repeats = ((1_000_000,), 3) if args.quick else (SIZES, 30 if part == "cpu" else 50)
  methods = ("per call", "donated per call") if part == "cpu" else ("per call", "in one program")
  result = {"machine": common.machine(), "part": part, "quick": args.quick,
            "command": "python -m benchmarks.cost" + (" --quick" if args.quick else ""),
            # The machine may be shared: its load (1, 5, 15-minute means) goes with the times.
            "load_average": {"start": os.getloadavg()}}
  result["step"] = [row for size in sizes
                    for row in step.measure(size, repeats, 20, methods)]
  result["compile"] = compile_time.measure(
      (6,) if args.quick else compile_time.LAYERS, () if args.quick else compile_time.STACKED,
      1 if args.quick else 3)
  result["floor"] = floor.measure(128 if args.quick else floor.SIDE)
  result["memory"] = {"rows": memory.rows(), "workload_shares": memory.workload_shares()}
  size = contest_protocol.SIZES["smoke" if args.quick else "gpu"]["size"]
  result["muon_family"] = {"size": dataclasses.asdict(size),
                           "rows": muon_family.measure(size, 3 if args.quick else 20)}
  result["load_average"]["end"] = os.getloadavg()
  result["elapsed_s"] = round(time.perf_counter() - started, 1)
  out = args.out or (os.path.join("/tmp" if args.quick else common.RESULTS, f"cost_{part}.json"))
  common.write_json(out, result)
  for row in result["step"]:
    print(f"{row['params']:>10} {row['method']:>16} {row['optimizer']:>22}: "
          f"{row['median_ms']:8.2f} ms, {row['ratio']:.2f}x Adam's "
          f"({row['ratio_p25']:.2f}-{row['ratio_p75']:.2f})")
  print(f"wrote {out} in {result['elapsed_s']:.0f} s")
  return result


if __name__ == "__main__":
  main()

"""python -m benchmarks.cost: the cost's part for this machine (see ``benchmarks.cost``)."""

from __future__ import annotations

import argparse
import contextlib
import os

import jax

from benchmarks import common
from benchmarks import ledger as ledgers
from benchmarks import study_runner
from benchmarks.cost import protocol


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
  out = args.out or (os.path.join("/tmp" if args.quick else common.RESULTS, f"cost_{part}.json"))
  # Each section is kept as it finishes, and measured again only on this machine and
  # code: its ratios are to Adam in its own process, so sections may come from two.
  ledger = os.path.join(os.path.dirname(os.path.abspath(out)), ledgers.FOLDER,
                        f"cost_{part}.jsonl")
  settings = {"part": part, "quick": args.quick, "machine": ledgers.machine(),
              "source": ledgers.digest_of(protocol.SOURCES)}
  measured = study_runner.run_parts(ledger, protocol.sections(part, args.quick), settings)
  result = {"machine": common.machine(), "part": part, "quick": args.quick,
            "command": "python -m benchmarks.cost" + (" --quick" if args.quick else ""),
            # The machine may be shared: its load (1, 5, 15-minute means) goes with the times.
            "load_average": {"start": next(iter(measured.values()))["load"]["start"]}}
  result["step"] = [row for size in protocol.sizes(args.quick)
                    for row in measured[f"step {size}"]["output"]]
  for name in ("compile", "floor", "memory", "muon_family"):
    result[name] = measured[name]["output"]
  result["load_average"]["end"] = measured["muon_family"]["load"]["end"]
  result["elapsed_s"] = round(sum(section["seconds"] for section in measured.values()), 1)
  common.write_json(out, result)
  with contextlib.suppress(FileNotFoundError):
    os.remove(ledger)  # the result file is written: a later run measures afresh
  with contextlib.suppress(OSError):
    os.rmdir(os.path.dirname(ledger))  # only where no other ledger is left in it
  for row in result["step"]:
    print(f"{row['params']:>10} {row['method']:>16} {row['optimizer']:>22}: "
          f"{row['median_ms']:8.2f} ms, {row['ratio']:.2f}x Adam's "
          f"({row['ratio_p25']:.2f}-{row['ratio_p75']:.2f})")
  print(f"wrote {out} in {result['elapsed_s']:.0f} s")
  return result


if __name__ == "__main__":
  main()

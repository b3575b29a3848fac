"""python -m benchmarks.contest: the contest at one size (see ``benchmarks.contest``)."""

import argparse

from benchmarks.contest import protocol
from benchmarks.contest import run


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.contest",
                                   description=__doc__.split(":")[1].strip())
  parser.add_argument("--size", choices=sorted(protocol.SIZES), default="cpu",
                      help="cpu (default): 2,000 steps of a 0.44M-parameter LM on this CPU; "
                           "gpu: 2,000 steps of a 3.2M-parameter LM, each stage of the rate "
                           "rule in one program; smoke: a few steps, to check the path")
  parser.add_argument("--entries", nargs="+", default=None,
                      choices=list(protocol.ORDER),
                      help="the optimizers (default: the size's, protocol.SIZES)")
  parser.add_argument("--out", default=run.FOLDER,
                      help=f"results folder (default {run.FOLDER}): <size>.json and its ledger")
  parser.add_argument("--resume-across-code", action="store_true",
                      help="keep a ledger's runs made by other training code")
  args = parser.parse_args(argv)
  run.run(args.size, args.entries, folder=args.out, across_code=args.resume_across_code)


if __name__ == "__main__":
  main()

"""python -m benchmarks.ladder: the ladder's corpus, timings, CPU and GPU rungs, momentum study."""

from __future__ import annotations

import argparse
import os
import pathlib
import time

from benchmarks import ledger as ledgers
from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import run
from benchmarks.lm import corpus


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.ladder", description=__doc__)
  todo = parser.add_mutually_exclusive_group(required=True)
  todo.add_argument("--build-corpus", action="store_true",
                    help="fetch the pinned wheels and write the corpus file")
  todo.add_argument("--time-cpu", nargs="+", metavar="SIZE",
                    help="time one run of every rung of these CPU sizes into timings.json")
  todo.add_argument("--cpu", nargs="*", metavar="SIZE",
                    help="the CPU ladder at these sizes (default: protocol.CPU_SIZES)")
  todo.add_argument("--gpu", nargs="*", metavar="SIZE",
                    help="the GPU rungs at these sizes (default: protocol.GPU_SIZES)")
  todo.add_argument("--momentum", action="store_true",
                    help="the momentum study (protocol.MOMENTUM_RUNGS, then protocol.VARIANTS), "
                         "within its budget; its read-outs go to readouts.jsonl beside the ledger")
  todo.add_argument("--merge", metavar="LEDGER", help="append a lease's ledger lines it lacks")
  todo.add_argument("--summary", action="store_true",
                    help="write summary.json beside the ledger (its figure: python -m "
                         "benchmarks.reporting --plots)")
  parser.add_argument("--corpus", default=str(corpus.LADDER_CACHE / corpus.CORPUS_FILE),
                      help="the corpus file (default: the cache's)")
  parser.add_argument("--ledger", default=ledger.PATH, help=f"default {ledger.PATH}")
  parser.add_argument("--out", default=None,
                      help="a folder that gets this run's new ledger lines and timings ($OUT)")
  parser.add_argument("--deadline-seconds", type=float, default=None,
                      help="stop before this many seconds from now, keeping finished programs")
  parser.add_argument("--chunk", type=int, default=100, help="steps a call (default 100)")
  parser.add_argument("--budget", type=float, default=None,
                      help="--gpu's budget in characters a parameter (default the protocol's)")
  parser.add_argument("--reference-budgets", type=float, nargs="+", default=None)
  parser.add_argument("--entries", nargs="+", default=list(protocol.ENTRIES),
                      choices=list(protocol.ENTRIES))
  parser.add_argument("--seeds", type=int, nargs="+", default=list(protocol.SEEDS))
  parser.add_argument("--packing-sizes", nargs="*", default=None,
                      help="--time-cpu: the sizes whose vmap packing is timed (default all)")
  return parser


def _context(args, started: float, kind: str) -> run.Context:
  from benchmarks.lm import train
  data = corpus.load(pathlib.Path(args.corpus), _context_length(args, kind))
  mirror = None
  if args.out:
    os.makedirs(args.out, exist_ok=True)
    mirror = os.path.join(args.out, "runs.jsonl")
  deadline = None if args.deadline_seconds is None else started + args.deadline_seconds
  digest = corpus.sha256_of(args.corpus)[:16]
  return run.Context(data=train.device_data(data), corpus=digest, path=args.ledger,
                     mirror=mirror, deadline=deadline, chunk=args.chunk, kind=kind,
                     readouts=ledger.readouts_beside(args.ledger))


def _context_length(args, kind: str) -> int:
  names = args.gpu if kind == "gpu" else (args.cpu or args.time_cpu)
  if args.momentum:
    names = [name for name, _ in protocol.MOMENTUM_RUNGS]
  names = names or (protocol.GPU_SIZES if kind == "gpu" else protocol.CPU_SIZES)
  contexts = {rules.SIZES[n].context for n in names}
  if len(contexts) != 1:
    raise ValueError(f"sizes {list(names)} have contexts {sorted(contexts)}; run one at a time")
  return contexts.pop()


def main(argv=None) -> None:
  started = time.time()
  args = _parser().parse_args(argv)
  if args.build_corpus:
    path = corpus.build(protocol.EVAL_CHARS)
    print(f"{path}: {path.stat().st_size:,} bytes")
    return
  if args.summary:
    from benchmarks.ladder import summary_file
    print(summary_file.write(args.ledger)["recommendation"])
    return
  if args.merge:
    print(f"{ledgers.merge(args.merge, args.ledger, ledger.key)} lines added to {args.ledger}")
    return
  run.check_versions()
  if args.time_cpu:
    from benchmarks.ladder import cpu_timing
    cpu_timing.main(_context(args, started, "cpu"), args.time_cpu, args.entries,
                    packing_sizes=args.packing_sizes)
  elif args.gpu is not None:
    from benchmarks.ladder import gpu
    ctx = _context(args, started, "gpu")
    timings = os.path.join(args.out, "timings_gpu.json") if args.out else None
    gpu.run_gpu(ctx, tuple(args.gpu or protocol.GPU_SIZES),
                args.budget or protocol.GPU_BUDGETS[0],
                tuple(args.reference_budgets or protocol.GPU_REFERENCE_BUDGETS),
                tuple(args.entries), tuple(args.seeds), timings)
  elif args.momentum:
    ctx = _context(args, started, "cpu")
    if run.run_momentum(ctx, tuple(args.seeds)):  # addendum 6's variants only after it all
      run.run_variants(ctx, tuple(args.seeds))
  else:
    run.run_cpu(_context(args, started, "cpu"), args.cpu or None, tuple(args.seeds))


if __name__ == "__main__":
  main()

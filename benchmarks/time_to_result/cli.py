"""``python -m benchmarks.time_to_result``: the command that runs the protocol (``protocol``).

It reads the operator's choices (the schedule, the workloads, the entries, the
folder), refuses in one line, before anything is trained, a run that would mix
schedules, replace an entry or add to a file of another step count, then runs
each workload from its ledger (``benchmarks.ledger``) and writes its result file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time

from benchmarks import common
from benchmarks import ledger
from benchmarks import optimizers
from benchmarks.time_to_result import protocol
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import workloads


def _check_no_mix(held: dict, schedule: str) -> str | None:
  """A line saying why writing over the result files ``held`` (workload -> its path and
  payload, None where there is none) would mix schedules, or None.
  """
  for path, payload in held.values():
    if payload is not None:
      found = schedules.schedule_of(payload)
      if found != schedule:
        return (f"{path} holds {found!r} results, not {schedule!r} ones; pass the results "
                f"folder itself as --out (a {schedule!r} run writes into "
                f"{schedules.folder('<out>', schedule)}); nothing was run")
  return None


def _check_can_add(held: dict, entries) -> str | None:
  """A line saying why ``--add`` cannot add ``entries`` to the result files ``held``, or None."""
  for path, payload in held.values():
    if payload is None:
      return f"{path} does not exist: --add adds entries to a result file; nothing was run"
    already = sorted(set(entries) & set(payload["entries"]))
    if already:
      return (f"{path} already holds {', '.join(already)}; --add never replaces an entry "
              "(run the workload again without --add); nothing was run")
  return None


def _check_same_rate(held: dict, sizing: protocol.Sizing) -> str | None:
  """A line saying why ``--same-rate`` cannot add to the result files ``held``, or None."""
  for name, (path, payload) in held.items():
    if payload is None:
      return f"{path} does not exist: --same-rate adds runs to a result file; nothing was run"
    steps = sizing.steps_on.get(name)
    if steps is not None and payload["workload"]["steps"] != steps:
      return (f"{path} holds a run of {payload['workload']['steps']} steps, not this "
              f"protocol's {steps}; nothing was run")
  return None


def _added(held: dict, new: dict) -> dict:
  """``held`` with ``new``'s entries added, each with its step cost from the new
  run (measured against Adam in that process); the run's record is kept per entry.
  """
  merged = dict(held)
  merged["entries"] = {**held["entries"], **new["entries"]}
  merged.setdefault("added", []).append(
      {"entries": list(new["entries"]), "machine": new["machine"], "wall_s": new["wall_s"]})
  return merged


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.time_to_result",
                                   description=protocol.__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="tiny models, 8 steps, 2 learning rates: checks the harness only")
  parser.add_argument("--long-horizon", action="store_true",
                      help=f"the long-horizon protocol: "
                           f"{', '.join(protocol.LONG_HORIZON_WORKLOADS)} at "
                           f"{protocol.LONG_HORIZON_STEPS:,} steps with the bfloat16 states, and "
                           f"the char LM at {protocol.CHARLM_LONG_STEPS:,} with Muon (its wide "
                           f"variant with factored_vsgd), into the results folder's "
                           f"{protocol.LONG_HORIZON_FOLDER}/ (warmup_cosine only)")
  parser.add_argument("--wide", action="store_true",
                      help="the wide protocol: factored_vsgd on "
                           f"{', '.join(workloads.wide_names())}, into the results folder's "
                           f"{common.WIDE_FOLDER}/ (warmup_cosine only)")
  parser.add_argument("--resume-across-code", action="store_true",
                      help="resume from a ledger that other training code kept (each run "
                           "keeps its code's digest; the result file names them all)")
  parser.add_argument("--add", action="store_true",
                      help="run only --entries and add them to each workload's result file, "
                           "keeping every other entry as it is (an entry already there is "
                           "refused)")
  parser.add_argument("--same-rate", action="store_true",
                      help="run only what each result file lacks of its protocol's same-rate "
                           "runs (each variant at its base optimizer's tuned rate on the base's "
                           "seeds: the bfloat16 states at vsgd's; factored_vsgd at vsgd's in "
                           "the wide and long-horizon protocols) and add them to the file")
  parser.add_argument("--schedule", default="warmup_cosine", choices=schedules.NAMES,
                      help="the learning-rate schedule of every run (default: warmup_cosine, "
                           "the main protocol)")
  parser.add_argument("--workloads", nargs="*", default=None,
                      choices=workloads.names() + workloads.wide_names(),
                      help="default: the schedule's workloads (paper_step: convmixer only)")
  parser.add_argument("--entries", nargs="*", default=None,
                      choices=[n for n in optimizers.REGISTRY if n != "vsgd+per_example"],
                      help="optimizers (per-example VSGD joins vsgd where the model allows); "
                           "default: the schedule's entries, fewer on the expensive workloads")
  parser.add_argument("--seeds", type=int, default=None,
                      help="seeds at the chosen rate, at least 2 (default: the schedule's, "
                           "else the grid's length plus one)")
  parser.add_argument("--grid", type=float, nargs="*", default=None,
                      help="learning rates to try instead of each workload's grid (a check of "
                           "the grid's resolution, say)")
  parser.add_argument("--out", default=None,
                      help="results folder; a schedule other than constant writes into its "
                           "subfolder named after the schedule (default: benchmarks/results; "
                           "--quick: a new temporary folder)")
  return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
  """Refuses, in one line that names the fix, a combination of options that cannot run."""
  if args.grid is not None and (len(args.grid) < 2 or not args.out):
    parser.error("--grid needs at least two learning rates and an --out folder of its own, "
                 "so that the workload's results are kept")
  if args.seeds is not None and args.seeds < 2:
    parser.error(f"--seeds must be at least 2 (a mean and a spread), got {args.seeds}")
  if args.long_horizon and args.schedule != "warmup_cosine":
    parser.error(f"--long-horizon runs the main protocol's schedule, warmup_cosine; "
                 f"got --schedule {args.schedule}")
  if args.wide and (args.long_horizon or args.schedule != "warmup_cosine"):
    parser.error("--wide runs the main protocol's schedule, warmup_cosine, on its own "
                 "workloads; it takes neither --long-horizon nor another --schedule")
  if args.add and not args.entries:
    parser.error("--add needs --entries: the optimizers to add to the result files")
  if args.same_rate and (args.add or args.entries or args.grid or args.seeds):
    parser.error("--same-rate takes its runs from the result files; it takes none of --add, "
                 "--entries, --grid, --seeds")


def _plan(parser: argparse.ArgumentParser, args: argparse.Namespace):
  """The protocol's sizing, its same-rate pairs, the workloads and the results folder;
  refuses a folder whose result files this run must not touch.
  """
  sizing = (protocol.LONG_HORIZON if args.long_horizon else protocol.WIDE if args.wide
            else protocol.SIZINGS[args.schedule])
  pairs = ({**protocol.SAME_RATE, **protocol.WIDE_SAME_RATE} if args.long_horizon
           else protocol.WIDE_SAME_RATE if args.wide else protocol.SAME_RATE)
  names = list(args.workloads or sizing.workloads)
  if args.quick:
    sizing = dataclasses.replace(sizing, steps_on={}, window_on={})
  default_root = (os.path.join(protocol.RESULTS, protocol.LONG_HORIZON_FOLDER)
                  if args.long_horizon else os.path.join(protocol.RESULTS, common.WIDE_FOLDER)
                  if args.wide else protocol.RESULTS)
  root = args.out or (tempfile.mkdtemp(prefix="ttr-") if args.quick else default_root)
  out = schedules.folder(root, args.schedule)
  paths = {name: os.path.join(out, f"ttr_{name}.json") for name in names}
  held = {name: (path, common.read_json(path)) for name, path in paths.items()}
  problem = _check_no_mix(held, args.schedule)
  if args.add and not problem:
    problem = _check_can_add(held, args.entries)
  if args.same_rate and not problem:
    problem = _check_same_rate(held, sizing)
  if problem:
    parser.error(problem)
  return sizing, pairs, names, out


def _run_workload(parser, args, name: str, sizing: protocol.Sizing, pairs: dict,
                  out: str) -> None:
  """One workload from its ledger: its entries tuned and repeated, or (``--same-rate``)
  its file's missing same-rate runs; its result file written, its ledger removed.
  """
  workload = workloads.build(name, quick=args.quick)
  full_steps = workload.steps
  if name in sizing.steps_on:
    workload = dataclasses.replace(workload, steps=sizing.steps_on[name])
  grid = tuple(sorted(args.grid)) if args.grid else None
  entries = args.entries or sizing.entries_on.get(name, sizing.entries)
  seeds = args.seeds or (None if args.quick else sizing.seeds_on.get(name))
  grids = None
  if grid is None and name in sizing.window_on:
    grids = {}
    for entry in entries:
      centre = protocol.window_centre(protocol.RESULTS, args.schedule, name, entry)
      if centre is not None:
        grids[entry] = protocol.window(centre, sizing.window_on[name])
  settings = {"workload": name, "steps": workload.steps, "batch_size": workload.batch_size,
              "eval_every": workload.eval_every, "schedule": args.schedule,
              "quick": args.quick}
  try:
    book = ledger.Ledger(protocol.ledger_path(out, name), settings,
                         ledger.digest_of(protocol.SOURCES),
                         across_code=args.resume_across_code).__enter__()
  except ledger.LedgerError as error:
    parser.error(f"{error}; nothing was run")
  path = os.path.join(out, f"ttr_{name}.json")
  try:
    if args.same_rate:
      payload = common.read_json(path)
    else:
      payload = protocol.run_workload(workload, entries, args.quick, args.schedule, seeds,
                                      grid, grids, sizing.per_example, sizing.pad_lanes, book)
      payload["workload"]["full_steps"] = full_steps
    if args.add:
      payload = _added(common.read_json(path), payload)
    # the pairs the file does not hold yet (all of them, in a new run)
    held = payload.get("same_rate", {}) if args.add or args.same_rate else {}
    missing = {v: b for v, b in pairs.items() if v not in held}
    payload["same_rate"] = {
        **held, **protocol.same_rate(workload, payload, args.schedule, missing, book)}
    if len(book.sources) > 1:  # resumed across a change of the training code
      payload["sources"] = sorted(set(payload.get("sources", [])) | book.sources)
    common.write_json(path, payload)
    book.finish()
  finally:
    book.__exit__()
  print(f"wrote {path} ({payload['wall_s']:.0f} s)", flush=True)


def _record_run(args, names, sizing: protocol.Sizing, out: str, t0: float) -> None:
  """The wall time of a whole run (``ttr_run.json``), or a partial rerun's tuning seeds."""
  if set(names) == set(sizing.workloads) and not (args.add or args.same_rate):
    # the wall time of a whole run; a partial rerun leaves the last one's record
    common.write_json(os.path.join(out, "ttr_run.json"),
                      {"machine": common.machine(), "quick": args.quick,
                       "schedule": args.schedule,
                       "workloads": names, "entries": args.entries or list(sizing.entries),
                       "entries_on": {k: list(v) for k, v in sizing.entries_on.items()},
                       "seeds_on": sizing.seeds_on, "steps_on": sizing.steps_on,
                       "window_on": sizing.window_on,
                       "tuning_seeds": list(protocol.TUNING_SEEDS),
                       "wall_s": time.perf_counter() - t0})
  elif common.read_json(os.path.join(out, "ttr_run.json")) is not None and not args.quick:
    # A partial rerun keeps the last whole run's record (its wall time), but the
    # workloads it reran were tuned on today's seeds: the record says so.
    record = common.read_json(os.path.join(out, "ttr_run.json"))
    record["tuning_seeds"] = sorted(set(record.get("tuning_seeds", []))
                                    | set(protocol.TUNING_SEEDS))
    common.write_json(os.path.join(out, "ttr_run.json"), record)


def main(argv=None) -> None:
  parser = _parser()
  args = parser.parse_args(argv)
  _check(parser, args)
  sizing, pairs, names, out = _plan(parser, args)
  t0 = time.perf_counter()
  for name in names:
    _run_workload(parser, args, name, sizing, pairs, out)
  _record_run(args, names, sizing, out, t0)
  print(f"done in {time.perf_counter() - t0:.0f} s; results in {out} (its pages: "
        "python -m benchmarks.reporting)", flush=True)


if __name__ == "__main__":
  main()

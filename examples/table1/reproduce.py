"""The paper's Table 1 protocol as one command: the grid, the seeds, selection on
validation, and the table next to the paper's numbers.

    python -m examples.table1 --table cifar100 --data-dir data --root runs/table1
    python -m examples.table1 --table cifar100 --worker 0 --workers 4   # one of 4 hosts
    python -m examples.table1 --table cifar100 --list                   # for a job array
    python -m examples.table1 --table cifar100 --assemble               # the table only

Each run is an ordinary trainer run in its own workdir under ``--root``
(``<config>/<optimizer>-lr..-wd..-seed..``), made in this process one after
the other, so the trainer's workdir lock, resume and graceful stop hold for
each: a rerun skips finished runs and resumes unfinished ones; a run whose
workdir another trainer holds is left to it; SIGTERM or SIGINT stops the
current run after a checkpoint and starts no other. Once every run of the
table is finished, whoever ran them, ``table1_<table>.md`` and ``.json`` are
written in ``--root``.

A run that diverges is recorded as stopped for good (``failed.json``); a run
whose checkpoint cannot be saved (a full disk) stops the command, and a rerun
once the disk is mended resumes it.

Exit status: 0 done (the table written, or this worker's share finished);
1 some runs stopped for good (a non-finite loss) or are still held by others,
or a save failed; 2 bad settings; 130/143 stopped by a signal.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from .. import configs
from .. import train
from ..errors import ConfigError
from ..errors import Diverged
from ..errors import TrainerError
from ..errors import TrainingStopped
from ..errors import WorkdirInUse
from ..runtime import stopping
from ..runtime import workdirs
from . import grid
from . import table as table_lib


def _floats(text: str) -> list[float]:
  try:
    return [float(x) for x in text.split(",")]
  except ValueError as err:
    raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from err


def _ints(text: str) -> list[int]:
  try:
    return [int(x) for x in text.split(",")]
  except ValueError as err:
    raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from err


def _names(text: str) -> list[str]:
  return [x for x in text.split(",") if x]


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="python -m examples.table1",
                                   description=__doc__.split("\n\n")[0].replace("\n", " "),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--table", required=True, choices=sorted(grid.TABLES))
  parser.add_argument("--configs", type=_names,
                      help="a subset of the table's configs, comma separated")
  parser.add_argument("--optimizers", type=_names,
                      help=f"a subset of the columns: {', '.join(grid.COLUMNS)}")
  parser.add_argument("--root", default="runs/table1", help="folder of the runs' workdirs")
  parser.add_argument("--data-dir", help="folder holding the dataset archives")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="a config setting for every run (python -m examples.main --help "
                           "lists the keys); the grid's own keys are refused")
  values = parser.add_argument_group("the grid (default: the paper's)")
  values.add_argument("--learning-rates", type=_floats, default=list(grid.LEARNING_RATE_GRID))
  values.add_argument("--weight-decays", type=_floats, default=list(grid.WEIGHT_DECAY_GRID),
                      help="the w/ L2 columns take the nonzero ones; the others take 0")
  values.add_argument("--momenta", type=_floats, default=list(grid.MOMENTUM_GRID),
                      help="SGD's momentum grid")
  values.add_argument("--seeds", type=_ints, default=list(grid.SEEDS))
  share = parser.add_argument_group("sharing the runs")
  share.add_argument("--worker", type=int, default=0, metavar="I", help="0..N-1")
  share.add_argument("--workers", type=int, default=1, metavar="N",
                     help="run only the runs i with i %% N == I")
  share.add_argument("--list", action="store_true",
                     help="print this worker's runs as trainer command lines, run nothing")
  share.add_argument("--assemble", action="store_true",
                     help="write the table from the workdirs, run nothing")
  return parser


GRID_KEYS = ("optimizer", "learning_rate", "weight_decay", "momentum", "seed")


def _check(args) -> None:
  configs_of_table = grid.TABLES[args.table]
  for name in args.configs or ():
    if name not in configs_of_table:
      raise ConfigError(f"--configs: {name!r} is not in table {args.table}; choose "
                        f"from: {', '.join(configs_of_table)}")
  for name in args.optimizers or ():
    if name not in grid.COLUMNS:
      raise ConfigError(f"--optimizers: unknown column {name!r}; choose from: "
                        f"{', '.join(grid.COLUMNS)}")
  decayed = [c for c in args.optimizers or grid.COLUMNS if grid.COLUMNS[c].decayed]
  if decayed and not any(args.weight_decays):
    raise ConfigError(f"--weight-decays has no nonzero value, which the w/ L2 columns "
                      f"({', '.join(decayed)}) take; add one, or name the other "
                      "columns with --optimizers")
  for name, values in (("--learning-rates", args.learning_rates),
                       ("--weight-decays", args.weight_decays), ("--momenta", args.momenta)):
    if len(set(values)) != len(values):
      raise ConfigError(f"{name} lists a value twice: {values}")
  validation_size = [item for item in args.set if item.partition("=")[0] == "validation_size"]
  if validation_size and validation_size[-1].partition("=")[2].strip() in ("0", "0.0"):
    raise ConfigError("--set validation_size=0 leaves nothing to choose the cells on; "
                      "keep a validation split (the authors hold out 256 images)")
  for name, values in (("--learning-rates", args.learning_rates),
                       ("--weight-decays", args.weight_decays), ("--momenta", args.momenta)):
    negative = [v for v in values if not v >= 0]
    if negative:
      raise ConfigError(f"{name} must be numbers >= 0, got {negative}")
  if not all(v > 0 for v in args.learning_rates):
    raise ConfigError(f"--learning-rates must be > 0, got {args.learning_rates}")
  if args.workers < 1:
    raise ConfigError(f"--workers must be a positive number of workers, got {args.workers}")
  if not 0 <= args.worker < args.workers:
    raise ConfigError(f"--worker must be in 0..{args.workers - 1} for --workers "
                      f"{args.workers}, got {args.worker}")
  for item in args.set:
    if item.partition("=")[0] in GRID_KEYS:
      raise ConfigError(f"--set {item}: the grid sets {', '.join(GRID_KEYS)}; use "
                        "--learning-rates, --weight-decays, --momenta, --seeds")


def all_runs(args) -> list[grid.Run]:
  return grid.grid_runs(args.configs or grid.TABLES[args.table],
                          args.optimizers or list(grid.COLUMNS), args.learning_rates,
                          args.weight_decays, args.momenta, args.seeds)


def _config_args(args, run: grid.Run) -> list[str]:
  """The trainer's arguments for ``run``: ``examples.main`` builds from them the
  config that ``run_config`` builds (both through ``configs.from_overrides``).
  """
  argv = ["--config", run.config]
  if args.data_dir:
    argv += ["--data-dir", args.data_dir]
  for item in _overrides(args, run):
    argv += ["--set", item]
  return argv


def _overrides(args, run: grid.Run) -> list[str]:
  return args.set + [f"{k}={v}" for k, v in run.settings().items()]


def run_config(args, run: grid.Run) -> configs.Config:
  return configs.from_overrides(run.config, _overrides(args, run), data_dir=args.data_dir)


def command_line(args, run: grid.Run) -> str:
  argv = ["python", "-m", "examples.main", *_config_args(args, run),
          "--workdir", run.workdir(args.root), "--record-failure"]
  return " ".join(shlex.quote(a) for a in argv)


def _describe(run: grid.Run) -> str:
  momentum = "" if run.momentum is None else f" momentum {run.momentum:g}"
  return (f"{run.config} {run.column}: lr {run.learning_rate:g} wd {run.weight_decay:g}"
          f"{momentum} seed {run.seed}")


def execute(args, runs: list[grid.Run], progress: bool = True) -> int:
  """Runs the unfinished ones of ``runs``, one after the other; the exit status."""
  held_elsewhere = stopped = 0
  for number, run in enumerate(runs, 1):
    workdir = run.workdir(args.root)
    label = f"[{number}/{len(runs)}] {_describe(run)}"
    if workdirs.read_outcome(run.workdir(args.root)) is not None:
      print(f"{label}: finished before, skipped", flush=True)
      continue
    config = run_config(args, run)
    print(f"{label}: running in {workdir}", flush=True)
    try:
      with stopping.GracefulStop() as stop:
        result = train.train_and_evaluate(config, workdir, progress=progress, stop=stop)
    except WorkdirInUse as err:
      print(f"{label}: left to the trainer that holds it ({err})", flush=True)
      held_elsewhere += 1
      continue
    except Diverged as err:
      # Rerunning would stop at the same step again: record it, so that the
      # table can be built, showing the cell as stopped.
      workdirs.write_failed(workdir, str(err))
      print(f"{label}: stopped for good: {err}", flush=True)
      stopped += 1
      continue
    except TrainingStopped as err:
      # A failed save: once the disk is mended, a rerun resumes this run.
      print(f"error: {label}: {err}", file=sys.stderr)
      return 1
    if result["interrupted"] is not None:
      print(f"stopped by {result['interrupted'].name} at step {result['step']} of {label}; "
            "rerun the same command to resume it.", file=sys.stderr)
      return stopping.exit_status(result["interrupted"])
    if stop.signal:  # came after the last step: this run is whole, start no other
      print(f"stopped by signal {stop.signal} after {label} finished; rerun the same "
            "command to go on.", file=sys.stderr)
      return stopping.exit_status(stop.signal)
    print(f"{label}: validation {100 * result.get('validation_accuracy', float('nan')):.2f}%, "
          f"test {100 * result['test_accuracy']:.2f}%", flush=True)
  if held_elsewhere:
    print(f"{held_elsewhere} runs are held by other trainers; rerun when they end.",
          file=sys.stderr)
  return 1 if held_elsewhere or stopped else 0


def write_table(args, runs: list[grid.Run]) -> tuple[str, str]:
  result = table_lib.assemble(args.table, runs, args.root)
  base = os.path.join(args.root, f"table1_{args.table}")
  workdirs.write_json(base + ".json", result)
  with open(base + ".md.tmp", "w") as f:
    f.write(table_lib.markdown(result))
  os.replace(base + ".md.tmp", base + ".md")
  return base + ".md", base + ".json"


def main(argv=None, progress: bool = True) -> int:
  args = _parser().parse_args(argv)
  try:
    _check(args)
    runs = all_runs(args)
    mine = runs[args.worker::args.workers]
    if args.list:
      for run in mine:
        print(command_line(args, run))
      return 0
    # Every run of the table is checked before anything runs: its settings must
    # be valid, and a workdir already there must hold this same run, or its
    # result, made with other settings, would be skipped and enter the table.
    for run in runs:
      settings = configs.json_settings(run_config(args, run))
      workdirs.refuse_foreign_run(run.workdir(args.root), settings,
                                  not_compared=configs.NOT_PART_OF_THE_RUN,
                                  defaults=configs.record_defaults())
    status = 0 if args.assemble else execute(args, mine, progress)
    if status not in (0, 1):
      return status
    unfinished = sum(workdirs.read_outcome(run.workdir(args.root)) is None for run in runs)
    if args.assemble and not any(os.path.isdir(run.workdir(args.root)) for run in runs):
      print(f"--assemble found no runs of table {args.table} under {args.root}; run them "
            "first (without --assemble), or pass the --root they were made in.",
            file=sys.stderr)
      return 1
    if unfinished:
      print(f"{unfinished} of {len(runs)} runs of the table are unfinished (other workers' "
            "share, or held by them); the table is written once all are done (--assemble).",
            file=sys.stderr)
      return 1 if args.assemble else status
    md, js = write_table(args, runs)
    print(f"table: {md}\njson: {js}")
    return status
  except TrainerError as err:
    print(f"error: {err}", file=sys.stderr)
    return 2


"""The trainer's command line: a config, overrides, joining a multi-process run.

    python -m examples.main [--config NAME] [--set KEY=VALUE ...] [--workdir DIR]
    python -m examples.main --config cifar100_vgg16 --data-dir data --workdir runs/vgg
    python path/to/examples/main.py --optimizer adam   # from any directory

Several processes (on one machine for testing, or one per host), each with
its own devices, train as one data-parallel run when each is started with

    --coordinator-address HOST:PORT --num-processes N --process-id I

(I = 0..N-1, the same address and N for all; process 0 hosts the coordinator
at that address). CPU processes exchange data through JAX's CPU collectives
(gloo). ``--distributed`` alone lets JAX find these in a cluster environment
it knows (SLURM, Open MPI, TPU pods, ...); JAX also reads the coordinator
address from ``JAX_COORDINATOR_ADDRESS``.

Exit status: 0 done; 1 stopped by the run itself (a non-finite loss, a
checkpoint that could not be saved); 2 refused at the start (bad settings or
data, a workdir in use or unwritable, processes that disagree or never met);
130 and 143 stopped by SIGINT and SIGTERM (after a checkpoint, unless the
signal came before the first step or twice).
"""

from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__" and not __package__:
  # Run as a script (python path/to/examples/main.py, from any directory). The
  # imports below are relative, so that a fork runs under any folder name, but
  # a script belongs to no package: so this file is imported again as the
  # module ``main`` of its folder's package, from the folder's parent, and
  # that runs. The parent replaces the folder on sys.path, where the package's
  # modules would shadow others of the same name.
  import importlib
  _folder = os.path.dirname(os.path.abspath(__file__))
  sys.path[0] = os.path.dirname(_folder)
  sys.exit(importlib.import_module(f"{os.path.basename(_folder)}.main").main())

import jax

from . import configs
from . import optimizers
from . import train
from .errors import ConfigError
from .errors import Diverged
from .errors import TrainerError
from .errors import TrainingStopped
from .runtime import stopping
from .runtime import workdirs


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="python -m examples.main",
      description=train.__doc__.splitlines()[0], epilog=configs.describe_settings(),
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--config", default="default",
                      help=f"one of: {', '.join(sorted(configs.CONFIGS))}")
  parser.add_argument("--workdir", default=None,
                      help="default: runs/<config>-<optimizer>-seed<seed>")
  parser.add_argument("--optimizer", help=f"one of: {', '.join(optimizers.OPTIMIZERS)}")
  parser.add_argument("--learning-rate", type=float)
  parser.add_argument("--steps", type=int)
  parser.add_argument("--seed", type=int)
  parser.add_argument("--data-dir")
  parser.add_argument("--download", action="store_true",
                      help="download a missing CIFAR-100 / TinyImageNet archive")
  parser.add_argument("--per-example", action="store_true", help="per-example VSGD")
  parser.add_argument("--bf16", action="store_true", help="bfloat16 compute (GPU/TPU)")
  parser.add_argument("--stop-after", type=int, metavar="N",
                      help="stop after N steps, as an interruption would; rerun to go on")
  parser.add_argument("--record-failure", action="store_true",
                      help="if the run diverges, write failed.json in its workdir (the Table 1 "
                           "protocol's record of a run that a rerun would not mend; its "
                           "--list lines set this)")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                      help="change a config setting (keys below)")
  cluster = parser.add_argument_group("multi-process runs")
  cluster.add_argument("--coordinator-address", metavar="HOST:PORT",
                       help="where process 0 hosts the coordinator, e.g. 127.0.0.1:12345")
  cluster.add_argument("--num-processes", type=int, metavar="N")
  cluster.add_argument("--process-id", type=int, metavar="I", help="0..N-1")
  cluster.add_argument("--distributed", action="store_true",
                       help="join a multi-process run that JAX detects from the cluster "
                            "environment (SLURM, Open MPI, ...)")
  cluster.add_argument("--initialization-timeout", type=float, default=300.0,
                       metavar="SECONDS",
                       help="how long a process waits for the others to start (default 300, "
                            "as JAX's)")
  return parser


def _config_from(args) -> configs.Config:
  flags = {flag: True for flag in ("per_example", "download", "bf16") if getattr(args, flag)}
  return configs.from_overrides(args.config, args.set, optimizer=args.optimizer,
                                learning_rate=args.learning_rate, steps=args.steps,
                                seed=args.seed, data_dir=args.data_dir, **flags)


def join_processes(args) -> None:
  """``jax.distributed.initialize`` from the flags; must come before any JAX work."""
  explicit = (args.coordinator_address, args.num_processes, args.process_id)
  if not args.distributed and all(v is None for v in explicit):
    return
  how = ("start each process with --coordinator-address HOST:PORT --num-processes N "
         "--process-id I (I = 0..N-1), or launch under a cluster manager that JAX detects "
         "(SLURM, Open MPI, ...)")
  if any(v is not None for v in explicit) and any(v is None for v in explicit):
    raise ConfigError(f"a multi-process run needs all three flags: {how}.")
  if args.num_processes is not None and not 0 <= args.process_id < args.num_processes:
    raise ConfigError(f"--process-id must be in 0..{args.num_processes - 1} for "
                      f"--num-processes {args.num_processes}, got {args.process_id}")
  if not args.initialization_timeout > 0:
    raise ConfigError("--initialization-timeout must be a number of seconds > 0, "
                      f"got {args.initialization_timeout:g}")
  # Imported here: a one-host run (and a fork of the trainer for one host) needs
  # none of the handshake.
  from .runtime import cluster
  if args.coordinator_address is not None:
    cluster.join(args.coordinator_address, args.num_processes, args.process_id,
                 args.initialization_timeout)
    return
  try:
    cluster.join(None, None, None, args.initialization_timeout)
  except Exception as err:  # no cluster found, ...
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    raise ConfigError(f"could not join a multi-process run ({reason}); {how}.") from err


def main(argv=None) -> int:
  args = _parser().parse_args(argv)
  try:
    if args.stop_after is not None and args.stop_after <= 0:
      raise ConfigError(f"--stop-after must be a positive integer, got {args.stop_after}")
    config = _config_from(args)
    workdir = args.workdir or f"runs/{args.config}-{config.optimizer}-seed{config.seed}"
    # From here a signal ends the run in one line: at once while starting, later
    # after a step and its checkpoint.
    with stopping.GracefulStop() as stop:
      join_processes(args)
      result = train.train_and_evaluate(config, workdir, stop_after=args.stop_after, stop=stop)
  except TrainerError as err:
    print(f"error: {err}", file=sys.stderr)
    return 2
  except TrainingStopped as err:
    if isinstance(err, Diverged) and args.record_failure and jax.process_index() == 0:
      workdirs.write_failed(workdir, str(err))
    print(f"error: {err}", file=sys.stderr)
    return 1
  if result["interrupted"] is not None:
    print(f"stopped by {result['interrupted'].name} at step {result['step']}: checkpoint "
          f"{result['step']} is saved in {result['checkpoints']}; rerun the same command "
          "to resume.", file=sys.stderr)
    return stopping.exit_status(result["interrupted"])
  if jax.process_index() == 0:
    finished_before = result["trained_steps"] == 0
    print(f"test accuracy: {100 * result['test_accuracy']:.2f}% "
          f"({config.dataset}, {config.model}, {config.optimizer}, {result['step']} steps)"
          + (f"; nothing trained: {workdir} held this finished run, evaluated again (a new "
             "--workdir trains anew)" if finished_before else ""))
    print(f"metrics: {result['metrics']}")
    print(f"plot: {result['plot']}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

"""Steps per second of one run split over two processes, against one process
holding the same two devices.

    python -m benchmarks.process_step [--rounds 3] [--steps 300]

Both train the same run of the trainer (the default ConvMixer on the digits,
batch 64): once as processes 0 and 1 of a two-process run on this machine,
one CPU device each, meeting on 127.0.0.1 and exchanging data through JAX's
CPU collectives; once as one process with two CPU devices. The processes of
a run compare stop requests only at the steps that log, evaluate or save, so
between those steps the host does not wait for the devices; were it to wait
at every step, the two-process run would fall behind. Each run's speed is
the median of its logged windows after the first (which holds the compile);
each round runs both, one after the other, so that both see the same load.
Writes ``benchmarks/results/process_step.json``. ``--baseline-checkout DIR``
also times the two-process run with another checkout's trainer (an earlier
commit), in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np

from benchmarks import common
from examples.runtime import reporting

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "benchmarks", "results", "process_step.json")
LOG_EVERY = 25


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _run(workdir: str, steps: int, processes: int, checkout: str = ROOT) -> float:
  """Trains one run as ``processes`` processes sharing two CPU devices, with the
  trainer of ``checkout``; its steps/s.
  """
  devices = 2 // processes
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
  command = [sys.executable, os.path.join(checkout, "examples", "main.py"), "--workdir", workdir,
             "--steps", str(steps), "--set", f"log_every={LOG_EVERY}",
             "--set", f"eval_every={steps}", "--set", f"checkpoint_every={steps}"]
  if processes > 1:
    port = _free_port()
    command += ["--coordinator-address", f"127.0.0.1:{port}", "--num-processes",
                str(processes)]
  procs = [subprocess.Popen(command + (["--process-id", str(i)] if processes > 1 else []),
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True) for i in range(processes)]
  for proc in procs:
    _, err = proc.communicate(timeout=1800)
    if proc.returncode != 0:
      raise RuntimeError(f"the trainer failed: {err.strip()[-2000:]}")
  windows = [r["steps_per_second"]
             for r in reporting.read_metrics(os.path.join(workdir, "metrics.jsonl"))
             if "steps_per_second" in r]
  return float(np.median(windows[1:]))


def _commit(checkout: str) -> str:
  """The commit that ``checkout`` has checked out, for the record."""
  return subprocess.run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"],
                        capture_output=True, text=True, check=True).stdout.strip()


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--out", default=OUT)
  parser.add_argument("--baseline-checkout", metavar="DIR",
                      help="also time the two-process run with the trainer of this checkout "
                           "(an earlier commit, say), in the same rounds")
  args = parser.parse_args(argv)
  rounds = []
  with tempfile.TemporaryDirectory() as tmp:
    for r in range(args.rounds):
      one = _run(os.path.join(tmp, f"one{r}"), args.steps, processes=1)
      two = _run(os.path.join(tmp, f"two{r}"), args.steps, processes=2)
      rounds.append({"one_process": one, "two_processes": two})
      print(f"round {r + 1}: one process with two devices {one:.1f} steps/s, two processes "
            f"{two:.1f} steps/s (ratio {two / one:.2f})", flush=True)
      if args.baseline_checkout:
        base = _run(os.path.join(tmp, f"base{r}"), args.steps, 2, args.baseline_checkout)
        rounds[-1]["two_processes_baseline"] = base
        print(f"round {r + 1}: two processes with {args.baseline_checkout}'s trainer "
              f"{base:.1f} steps/s", flush=True)
  ratios = [row["two_processes"] / row["one_process"] for row in rounds]
  result = {"machine": common.machine(), "steps": args.steps, "log_every": LOG_EVERY,
            "baseline_commit": _commit(args.baseline_checkout) if args.baseline_checkout else None,
            "rounds": rounds, "ratio_median": float(np.median(ratios)),
            "ratio_min": float(np.min(ratios)), "ratio_max": float(np.max(ratios)),
            "ratio": "two processes' steps/s over one process's (1: as fast)"}
  common.write_json(args.out, result)
  print(f"two processes / one process: median {result['ratio_median']:.2f} "
        f"({result['ratio_min']:.2f}-{result['ratio_max']:.2f}); wrote {args.out}")
  return result


if __name__ == "__main__":
  main()

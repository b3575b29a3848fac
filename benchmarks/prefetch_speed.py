"""Steps per second of the trainer with and without batches prepared ahead.

    python -m benchmarks.prefetch_speed [--rounds 3]
    python -m benchmarks.prefetch_speed --quick   # CI's smoke test: the tiny model, briefly

Trains in this process, alternating ``prefetch=0`` and ``prefetch=2`` in each
round, for the default ConvMixer and for the tiny test model (whose step is so
short that the host's share of the work shows). Each run's speed is the median
of its logged windows after the first (which holds the compilation); the
ratio is taken within a round, so that both runs saw the same machine load.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:
  sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import argparse
import platform
import tempfile

import jax
import numpy as np

from examples import configs
from examples import train
from examples.runtime import reporting

RUNS = {
    "default ConvMixer": configs.default().replace(steps=250, log_every=50),
    "tiny": configs.default().replace(model="tiny", model_kwargs={}, steps=3000,
                                      log_every=500),
}
# --quick: the tiny model, three logged windows (the first holds the compile).
QUICK_RUNS = {"tiny": RUNS["tiny"].replace(steps=60, log_every=20)}


def steps_per_second(config: configs.Config, workdir: str) -> float:
  config = config.replace(eval_every=10**9, checkpoint_every=10**9)
  result = train.train_and_evaluate(config, workdir, progress=False)
  windows = [r["steps_per_second"] for r in reporting.read_metrics(result["metrics"])
             if "steps_per_second" in r]
  return float(np.median(windows[1:]))


def main(argv=None) -> dict[str, list[float]]:
  """Prints each run's ratios of steps/s with prefetch to without; returns them."""
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=None, help="default 3 (--quick: 1)")
  parser.add_argument("--quick", action="store_true",
                      help="one round of the tiny model, 60 steps: a smoke test")
  args = parser.parse_args(argv)
  rounds = args.rounds or (1 if args.quick else 3)
  print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"JAX {jax.__version__}, {jax.devices()[0].platform}")
  out: dict[str, list[float]] = {}
  with tempfile.TemporaryDirectory() as tmp:
    for name, config in (QUICK_RUNS if args.quick else RUNS).items():
      ratios = []
      for r in range(rounds):
        off = steps_per_second(config.replace(prefetch=0), os.path.join(tmp, f"{name}{r}off"))
        on = steps_per_second(config.replace(prefetch=2), os.path.join(tmp, f"{name}{r}on"))
        ratios.append(on / off)
        print(f"{name}, round {r + 1}: {off:.1f} steps/s without prefetch, {on:.1f} with "
              f"(ratio {on / off:.2f})", flush=True)
      print(f"{name}: median ratio {np.median(ratios):.2f} "
            f"(range {min(ratios):.2f}-{max(ratios):.2f})", flush=True)
      out[name] = ratios
  return out


if __name__ == "__main__":
  main()

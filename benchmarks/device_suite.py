"""The accelerator checks in one command: optimizer step cost, the paper's train steps,
and the trainer end to end.

    python -m benchmarks.device_suite           # on one GPU (or TPU): at most 9.5 minutes
    python -m benchmarks.device_suite --quick   # on the CPU: a smoke test of every part

Parts, in this order, each in a fresh process under its own time limit:
  step_cost          vsgd, vsgd with bfloat16 state, Adam with a bfloat16 first
                     moment and constant_vsgd against Adam at 1M, 9.3M and 50M
                     parameters, donated and not (``benchmarks/step_cost.py``'s
                     measurement);
  trainer_synthetic  200 steps of the trainer on synthetic CIFAR-100 with bfloat16
                     compute (cifar100_convmixer), evaluation and checkpoint included;
  trainer_digits     the trainer's digits default end to end (real data);
  train_step         the six paper configs at the paper's batch sizes on random data,
                     one process each: VSGD/Adam step time, images per second, peak
                     device memory (``benchmarks/train_step.py``'s measurement). It
                     comes last and gets the time the others left, shared among the
                     configs not yet run.

A part that runs out of time is killed, and what it finished before is kept
with its status; the JSON (``--out``, default
``benchmarks/results/device_suite.json``) is rewritten after every part, so an
interrupted suite still leaves the parts it finished. ``--quick`` shrinks every
part (a small ConvMixer, a few steps) and writes to the temporary folder unless
``--out`` says otherwise: a smoke test's numbers never replace a device's.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC
from datetime import datetime

from benchmarks import common

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join("benchmarks", "results", "device_suite.json")
# ``examples.optimizers.REGISTRY``'s names. The bfloat16 state of VSGD is measured next to Adam
# with a bfloat16 first moment: each keeps 6 bytes a parameter, like against like; the
# experimental factored state with both widths of its mu.
STEP_COST_OPTIMIZERS = ("adam", "adam+bf16_mu", "vsgd", "vsgd+bf16_state", "vsgd+bf16_nearest",
                        "constant_vsgd", "factored_vsgd", "factored_vsgd+bf16_mu")
# --quick's stand-in for the paper's ConvMixer-256/8: seconds to compile on a CPU.
QUICK_CONVMIXER = {"dim": 16, "depth": 1, "kernel": 3, "patch": 2}
# Seconds each part may take (full, quick); the whole suite stops at BUDGET_S. step_cost's
# 90 s ran out on an H200 (2026-11-27) before its largest size; its 50M size alone, eight
# states donated, took 26 s (2026-11-28); three sizes twice (donated and not) get 180 (not
# yet run whole at this limit).
# --quick's limits are loose: they only bound a CI run on a busy machine.
PART_LIMITS_S = {"machine": (60, 60), "step_cost": (180, 120), "trainer_synthetic": (90, 120),
                 "trainer_digits": (70, 120), "train_step": (330, 120)}
BUDGET_S = {False: 560.0, True: 480.0}
_MB = 1e6


# ---- the parts, each run in its own process ------------------------------------

def _on_cpu() -> bool:
  import jax
  return jax.default_backend() == "cpu"


def part_machine(quick: bool, emit) -> None:
  emit({"machine": common.machine()})


def part_step_cost(quick: bool, emit) -> None:
  from benchmarks import step_cost
  sizes = [2e5] if quick else [1e6, 9.3e6, 5e7]
  repeats = 2 if quick else 20
  # On an accelerator a sample is 20 donated steps in one program: a step is shorter than
  # the host's dispatch of a call (``step_cost``'s docstring).
  steps = 1 if _on_cpu() else 20
  # --quick: donated only (the trainer's case), to halve its compilations.
  donations = (True,) if quick else (False, True)
  rows = []
  for size in sizes:
    rows += step_cost.measure(int(size), repeats, steps, optimizers=STEP_COST_OPTIMIZERS,
                              donations=donations)
    emit({"repeats": repeats, "steps_per_sample": steps, "rows": rows})


def part_train_step(quick: bool, emit, config_name: str) -> None:
  import jax

  from benchmarks import train_step
  # 10 rounds: on an H100 each config's two compilations take most of its time, and
  # six configs at 20 rounds overran the suite's budget (2026-11-27).
  batch, repeats = (4, 2) if quick else ("paper", 10)
  row = train_step.measure(config_name, batch, repeats,
                           model_kwargs=QUICK_CONVMIXER if quick else None)
  for opt in train_step.OPTIMIZERS:
    row[f"{opt}_images_per_s"] = row["batch"] / (row[f"{opt}_ms"] / 1e3)
  # The process's high-water mark of device memory (all three steps' states are
  # alive together); None where the backend keeps no statistics (the CPU).
  stats = jax.local_devices()[0].memory_stats() or {}
  peak = stats.get("peak_bytes_in_use")
  row["device_peak_mb"] = None if peak is None else peak / _MB
  emit({"rows": [row]})


def _trainer_config(which: str, quick: bool):
  from examples import configs
  if which == "trainer_digits":
    config = configs.default()
    if quick:
      config = config.replace(steps=6, log_every=2, eval_every=6, checkpoint_every=6)
    return config
  config = configs.get_config("cifar100_convmixer").replace(
      dataset="synthetic_cifar100", bf16=True, steps=200, log_every=50, eval_every=200,
      checkpoint_every=200)
  if quick:
    config = config.replace(model_kwargs=QUICK_CONVMIXER, batch_size=8, steps=6, log_every=2,
                            eval_every=6, checkpoint_every=6)
  return config


def part_trainer_synthetic(quick: bool, emit) -> None:
  _run_trainer("trainer_synthetic", quick, emit)


def part_trainer_digits(quick: bool, emit) -> None:
  _run_trainer("trainer_digits", quick, emit)


def _run_trainer(which: str, quick: bool, emit) -> None:
  from examples import datasets
  from examples import train
  from examples.runtime import reporting
  config = _trainer_config(which, quick)
  dataset = None
  if quick and config.dataset in datasets.SYNTHETIC_DATASETS:
    dataset = datasets.load_synthetic(config.dataset, config.seed, num_test=64)
  with tempfile.TemporaryDirectory() as workdir:
    t0 = time.perf_counter()
    result = train.train_and_evaluate(config, workdir, progress=False, dataset=dataset)
    wall_s = time.perf_counter() - t0
    logged = [r["steps_per_second"] for r in reporting.read_metrics(result["metrics"])
              if "steps_per_second" in r]
  # The first window holds the compilation; the speed is that of the later ones.
  steady = sorted(logged[1:] or logged)
  steps_per_s = steady[len(steady) // 2]
  emit({"config": dataclasses.asdict(config), "steps": result["step"], "wall_s": wall_s,
        "steps_per_second": steps_per_s, "images_per_second": steps_per_s * config.batch_size,
        "test_accuracy": result["test_accuracy"], "train_loss": result["train_loss"],
        "synthetic": config.dataset in datasets.SYNTHETIC_DATASETS})


# ---- running the parts -----------------------------------------------------------

def run_child(command: list[str], part_out: str, timeout_s: float) -> dict:
  """Runs ``command`` (which writes its results to ``part_out``) for at most
  ``timeout_s`` seconds; returns what it wrote, with ``status`` and ``elapsed_s``.

  A child that runs out of time is killed; the results it wrote before stay.
  """
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
  t0 = time.perf_counter()
  try:
    done = subprocess.run(command, cwd=REPO, env=env, timeout=timeout_s,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode == 0:
      status = "done"
    else:
      lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
      sys.stderr.write(done.stderr)
      status = f"failed: {lines[-1]}"
  except subprocess.TimeoutExpired:
    status = f"timed out after {timeout_s:.0f} s"
  elapsed_s = time.perf_counter() - t0
  results = common.read_json(part_out) or {}
  return {"status": status, "elapsed_s": elapsed_s, **results}


class Suite:
  """Runs the parts in order against one deadline, rewriting ``out`` after each."""

  def __init__(self, quick: bool, out: str, budget_s: float):
    self.quick, self.out = quick, out
    self.start = time.perf_counter()
    self.deadline = self.start + budget_s
    self.scratch = tempfile.mkdtemp(prefix="device_suite_")
    self.report = {"quick": quick, "budget_s": budget_s,
                   "started": datetime.now(UTC).isoformat(timespec="seconds"),
                   "machine": None, "parts": {}}

  def time_left(self) -> float:
    return self.deadline - time.perf_counter()

  def child(self, part: str, limit_s: float, argument: str | None = None) -> dict:
    timeout_s = min(limit_s, self.time_left())
    if timeout_s < 5:
      return {"status": "skipped: the suite's time was spent", "elapsed_s": 0.0}
    part_out = os.path.join(self.scratch, f"{part}-{argument or 'all'}.json")
    command = [sys.executable, "-m", "benchmarks.device_suite", "--part", part,
               "--part-out", part_out, *(["--argument", argument] if argument else []),
               *(["--quick"] if self.quick else [])]
    return run_child(command, part_out, timeout_s)

  def save(self) -> None:
    self.report["elapsed_s"] = time.perf_counter() - self.start
    common.write_json(self.out, self.report)

  def run(self) -> dict:
    try:
      return self._run_parts()
    finally:
      shutil.rmtree(self.scratch, ignore_errors=True)

  def _run_parts(self) -> dict:
    limits = {part: limit[self.quick] for part, limit in PART_LIMITS_S.items()}
    machine = self.child("machine", limits["machine"])
    if machine["status"] != "done":
      raise SystemExit(f"error: JAX did not start ({machine['status']})")
    self.report["machine"] = machine["machine"]
    if machine["machine"]["platform"] == "cpu" and not self.quick:
      raise SystemExit("error: JAX found no accelerator (its backend is cpu); the full "
                       "suite is for one GPU or TPU. Run with --quick for the CPU smoke test.")
    self._announce("machine", machine)
    for part in ("step_cost", "trainer_synthetic", "trainer_digits"):
      self.report["parts"][part] = self.child(part, limits[part])
      self._announce(part, self.report["parts"][part])
      self.save()
    # Last, so that the time the other parts left unused goes to the six configs.
    self.train_step(limits["train_step"])
    return self.report

  def train_step(self, limit_s: float) -> None:
    """One process a config (a fresh peak of device memory each), sharing the
    part's time evenly among the configs not yet run.
    """
    # Imported where needed: examples brings in JAX and Flax, which the parent
    # process otherwise leaves to the parts' processes.
    from examples import configs
    names = ["cifar100_convmixer"] if self.quick else list(configs.PAPER_CONFIGS)
    part_end = time.perf_counter() + min(limit_s, self.time_left())
    rows, statuses = [], {}
    for i, name in enumerate(names):
      share = (part_end - time.perf_counter()) / (len(names) - i)
      result = self.child("train_step", share, name)
      statuses[name] = result["status"]
      rows += result.get("rows", [])
      self._announce(f"train_step {name}", result)
      self.report["parts"]["train_step"] = {
          "status": "done" if all(s == "done" for s in statuses.values())
                    and len(statuses) == len(names) else "incomplete",
          "configs": statuses, "rows": rows}
      self.save()

  @staticmethod
  def _announce(part: str, result: dict) -> None:
    print(f"[device suite] {part}: {result['status']} ({result['elapsed_s']:.0f} s)",
          flush=True)


PARTS = {"machine": part_machine, "step_cost": part_step_cost,
         "trainer_synthetic": part_trainer_synthetic, "trainer_digits": part_trainer_digits,
         "train_step": part_train_step}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="every part shrunk, as a CPU smoke test (about a minute)")
  parser.add_argument("--out", default=None,
                      help=f"the JSON to write (default {RESULTS}; with --quick, one in "
                           "the temporary folder)")
  parser.add_argument("--budget", type=float, default=None,
                      help="seconds for the whole suite (default 560; --quick: 480)")
  # How the suite runs each part in a process of its own.
  parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)
  parser.add_argument("--part-out", help=argparse.SUPPRESS)
  parser.add_argument("--argument", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.part:
    emit = lambda payload: common.write_json(args.part_out, payload)
    extra = (args.argument,) if args.argument else ()
    PARTS[args.part](args.quick, emit, *extra)
    return
  out = args.out or (os.path.join(tempfile.gettempdir(), "device_suite_quick.json")
                     if args.quick else os.path.join(REPO, RESULTS))
  budget = args.budget if args.budget is not None else BUDGET_S[args.quick]
  if budget <= 0:
    parser.error(f"--budget must be a positive number of seconds, got {budget:g}")
  report = Suite(args.quick, out, budget).run()
  unfinished = [p for p, r in report["parts"].items() if r["status"] != "done"]
  print(f"wrote {out} ({report['elapsed_s']:.0f} s"
        + (f"; not finished: {', '.join(unfinished)})" if unfinished else ")"))


if __name__ == "__main__":
  main()

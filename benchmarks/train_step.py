"""The whole jitted train step of every paper config, VSGD against Adam: time and memory.

    python -m benchmarks.train_step                 # the six paper configs, batch 8
    python -m benchmarks.train_step --batch paper   # each at the paper's batch (64-256)
    python -m benchmarks.train_step --quick         # cifar100_convmixer only, batch 4

The step is the trainer's own (``examples/train.py``: augmentation, forward,
backward, optimizer, state donated), on random data shaped like the config's
dataset: CIFAR-100 32x32 with 100 classes, TinyImageNet 64x64 with 200. The
default batch is small and the same for every config (8: on a 2-core CPU a step
of the paper's batch takes seconds to a minute). The optimizer's cost does not
grow with the batch, so a small batch shows it at its largest share of the step;
``--batch paper`` gives each config the batch the paper trained it with. Compile
time is left out of the step times and reported on its own. VSGD and Adam steps
alternate round by round in one process, so that the machine's drift hits both
alike; the ratio is the ratio of the median step times, with the 25-75% range
of the per-round ratios.
Each round also times a second Adam step (``control``: the same compiled program
on a state of its own): its ratio to the first is what the benchmark reads when
nothing differs, so a VSGD ratio inside the control's spread is a difference the
machine cannot resolve.

Peak memory is reported two ways, per optimizer:
  xla_peak_mb  the compiled step's buffers, from ``memory_analysis()``:
               arguments + outputs + temporaries - outputs aliased to donated inputs;
  rss_peak_mb  the resident-set high-water mark (Linux VmHWM, reset before each
               step) during the timed steps: the JAX runtime and all the process
               holds (both optimizers' states among it), plus scratch memory that
               library kernels take outside XLA's buffers. Each config runs in a
               fresh process, so that no config inherits another's memory.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from examples import configs
from examples import datasets
from examples import train

# (image side, classes) of each dataset; pixels are random, so normalization is arbitrary.
DATASET_SHAPES = {"cifar100": (32, 100), "tinyimagenet": (64, 200)}
OPTIMIZERS = ("adam", "vsgd")
_MB = 1e6


def _resident_kb(field: str) -> int | None:
  """A field of /proc/self/status in KiB (VmHWM: the resident-set peak); None off Linux."""
  try:
    with open("/proc/self/status") as f:
      match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.MULTILINE)
  except OSError:
    return None
  return int(match.group(1)) if match else None


def _reset_resident_peak() -> bool:
  """Sets VmHWM back to the current resident set (Linux 4.0+)."""
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
    return True
  except OSError:
    return False


def _synthetic_dataset(name: str, batch: int) -> datasets.Dataset:
  side, classes = DATASET_SHAPES[name]
  images = np.random.default_rng(0).integers(0, 256, (batch, side, side, 3), np.uint8)
  labels = (np.arange(batch) % classes).astype(np.int32)
  return datasets.Dataset(name, images, labels, images, labels, classes,
                                (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))


def _xla_peak_bytes(compiled) -> int:
  m = compiled.memory_analysis()
  return (m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
          - m.alias_size_in_bytes)


class _Runner:
  """One optimizer's compiled step, its state, and the memory it was seen to use."""

  def __init__(self, config: configs.Config, data: datasets.Dataset,
               same_as: _Runner | None = None):
    """``same_as``: a runner of the same config, whose compiled step this one runs
    on a state of its own (the control: the same program, no second compilation).
    """
    graphdef, optimizer, self.state = train.create_train_state(config, data)
    self.args = (jnp.asarray(data.train_images), jnp.asarray(data.train_labels),
                 jax.random.key(0))
    if same_as is not None:
      self.compiled, self.compile_s = same_as.compiled, 0.0
    else:
      step = jax.jit(train.make_train_step(graphdef, optimizer, config, data),
                     donate_argnums=0)
      t0 = time.perf_counter()
      self.compiled = step.lower(self.state, *self.args).compile()
      self.compile_s = time.perf_counter() - t0
    self.xla_peak_bytes = _xla_peak_bytes(self.compiled)
    self.rss_peak_kb = 0
    self()  # the first call allocates and faults in memory: not timed

  def __call__(self) -> None:
    measured = _reset_resident_peak()
    self.state, metrics = self.compiled(self.state, *self.args)
    jax.block_until_ready(metrics)
    peak = _resident_kb("VmHWM")
    if measured and peak is not None:
      self.rss_peak_kb = max(self.rss_peak_kb, peak)


def measure(config_name: str, batch: int | str, repeats: int,
            model_kwargs: dict | None = None) -> dict:
  """One config's row; ``batch`` "paper" keeps the config's own (the paper's) batch.
  ``model_kwargs`` replaces the config's model arguments (a smaller model, say).
  """
  base = configs.get_config(config_name)
  batch = base.batch_size if batch == "paper" else batch
  base = base.replace(batch_size=batch)
  if model_kwargs is not None:
    base = base.replace(model_kwargs=model_kwargs)
  data = _synthetic_dataset(base.dataset, batch)
  runners = {opt: _Runner(base.replace(optimizer=opt), data) for opt in OPTIMIZERS}
  runners["control"] = _Runner(base.replace(optimizer="adam"), data, same_as=runners["adam"])
  for runner in runners.values():  # count the timed steps only, not the warm-up call
    runner.rss_peak_kb = 0
  samples = common.interleaved_medians(runners, repeats)
  row = {"config": config_name, "model": base.model, "dataset": base.dataset,
         "image_size": DATASET_SHAPES[base.dataset][0], "batch": batch, "repeats": repeats,
         **({"model_kwargs": model_kwargs} if model_kwargs is not None else {})}
  for opt in OPTIMIZERS:
    runner = runners[opt]
    row[f"{opt}_ms"] = 1e3 * float(np.median(samples[opt]))
    row[f"{opt}_compile_s"] = runner.compile_s
    row[f"{opt}_xla_peak_mb"] = runner.xla_peak_bytes / _MB
    row[f"{opt}_rss_peak_mb"] = runner.rss_peak_kb * 1024 / _MB or None
  row.update(common.ratio_with_spread(samples["vsgd"], samples["adam"]))
  control = common.ratio_with_spread(samples["control"], samples["adam"])
  row.update({f"control_{key}": value for key, value in control.items()})
  return row


def _batch_arg(text: str) -> int | str:
  if text == "paper":
    return text
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"expected a positive integer or 'paper', got {text!r}")
  return value


def _mb(value) -> str:
  return "-" if value is None else f"{value:.0f}"


def format_table(rows: list[dict]) -> str:
  lines = ["| config | image | batch | Adam ms | VSGD ms | VSGD/Adam (p25-p75) | "
           "Adam again/Adam (p25-p75) | XLA peak MB Adam/VSGD | RSS peak MB Adam/VSGD | "
           "compile s Adam/VSGD |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(
        f"| {r['config']} | {r['image_size']} | {r['batch']} | {r['adam_ms']:.0f} | "
        f"{r['vsgd_ms']:.0f} | {common.ratio_text(r)} | {common.ratio_text(r, 'control_')} | "
        f"{_mb(r['adam_xla_peak_mb'])}/{_mb(r['vsgd_xla_peak_mb'])} | "
        f"{_mb(r['adam_rss_peak_mb'])}/{_mb(r['vsgd_rss_peak_mb'])} | "
        f"{r['adam_compile_s']:.0f}/{r['vsgd_compile_s']:.0f} |")
  return "\n".join(lines)


def _print_row(r: dict) -> None:
  print(f"{r['config']:>24}: adam {r['adam_ms']:.0f} ms, vsgd {r['vsgd_ms']:.0f} ms, ratio "
        f"{common.ratio_text(r)}, control {common.ratio_text(r, 'control_')}, XLA peak "
        f"{r['adam_xla_peak_mb']:.0f}/{r['vsgd_xla_peak_mb']:.0f} MB", flush=True)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="cifar100_convmixer only, batch 4, 3 rounds")
  parser.add_argument("--batch", type=_batch_arg, default=None,
                      help="images a step, or 'paper': each config's own batch (default 8)")
  parser.add_argument("--repeats", type=int, default=None,
                      help="timed rounds, each one VSGD, one Adam and one control step "
                           "(default 10)")
  parser.add_argument("--configs", nargs="*", default=None, choices=configs.PAPER_CONFIGS,
                      metavar="CONFIG", help=f"any of {', '.join(configs.PAPER_CONFIGS)}")
  parser.add_argument("--out", default="benchmarks/results/train_step")
  args = parser.parse_args(argv)
  names = args.configs or (["cifar100_convmixer"] if args.quick else list(configs.PAPER_CONFIGS))
  batch = args.batch if args.batch is not None else (4 if args.quick else 8)
  repeats = args.repeats if args.repeats is not None else (3 if args.quick else 10)
  if repeats < 1:
    parser.error(f"--repeats must be at least 1, got {repeats}")
  print(f"batch {batch}, {repeats} rounds, {os.cpu_count()} CPU cores; "
        f"{jax.devices()[0].device_kind}", flush=True)
  rows = []
  # One fresh process a config (spawned: JAX does not survive a fork).
  with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
    for name in names:
      rows.append(pool.apply(measure, (name, batch, repeats)))
      _print_row(rows[-1])
  print(format_table(rows))
  common.write_json(args.out + ".json", {
      "machine": common.machine(), "batch": batch, "repeats": repeats,
      "memory": {"xla_peak_mb": "compiled step: arguments + outputs + temporaries - aliased",
                 "rss_peak_mb": "resident-set high-water mark during the timed steps, "
                                "one fresh process a config"},
      "rows": rows})
  print(f"wrote {args.out}.json; its table: python -m benchmarks.reporting")


if __name__ == "__main__":
  main()

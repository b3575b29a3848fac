"""Does VSGD train better than Adam? Test accuracy over seeds, same step budget.

    python -m benchmarks.quality             # digits, ConvMixer; lr chosen on validation
    python -m benchmarks.quality --quick     # CI smoke test: one lr, 1 seed, few steps
    python -m benchmarks.quality --set dataset=cifar100 --set model=convmixer ...

For each optimizer the learning rate is chosen from the paper's grid on a
validation split held out of the training set (seed 0), then every seed is
trained at that rate and evaluated on the test set. Per-example VSGD
(``vsgd+per_example``) runs alongside.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile

import numpy as np

from benchmarks import common
from examples import configs
from examples import input_pipeline
from examples import train

ENTRIES = {
    "vsgd": dict(optimizer="vsgd"),
    "vsgd+per_example": dict(optimizer="vsgd", per_example=True),
    "constant_vsgd": dict(optimizer="constant_vsgd"),
    "adam": dict(optimizer="adam"),
    "adamw": dict(optimizer="adamw", weight_decay=0.01),
    "sgd": dict(optimizer="sgd", momentum=0.9),
}


def _validation_dataset(dataset: input_pipeline.Dataset, fraction=0.1):
  """The training set split into train and a held-out validation 'test' set."""
  n_val = max(1, int(len(dataset.train_labels) * fraction))
  return dataclasses.replace(
      dataset, train_images=dataset.train_images[n_val:], train_labels=dataset.train_labels[n_val:],
      test_images=dataset.train_images[:n_val], test_labels=dataset.train_labels[:n_val])


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--entries", nargs="*", default=list(ENTRIES))
  parser.add_argument("--learning-rates", type=float, nargs="*", default=None,
                      help="default: the paper's grid")
  parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  parser.add_argument("--out", default="benchmarks/results/quality")
  args = parser.parse_args(argv)
  base = configs.default().replace(eval_every=10**9, checkpoint_every=10**9)
  for item in args.set:
    base = train.parse_override(base, item)
  grid = configs.LEARNING_RATE_GRID
  seeds = args.seeds
  if args.quick:
    base, grid, seeds = base.replace(steps=30, log_every=10), (0.01,), 1
  if args.steps:
    base = base.replace(steps=args.steps)
  if args.learning_rates:
    grid = tuple(args.learning_rates)
  full = input_pipeline.load_dataset(base.dataset, base.data_dir, 0)
  validation = _validation_dataset(full)
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    for name in args.entries:
      entry = base.replace(**ENTRIES[name])
      scores = {}
      for lr in grid:
        r = train.train_and_evaluate(entry.replace(learning_rate=lr),
                                     os.path.join(tmp, f"{name}-val-{lr}"), progress=False,
                                     dataset=validation)
        scores[lr] = r["test_accuracy"]
      best = max(scores, key=scores.get)
      runs = [train.train_and_evaluate(entry.replace(learning_rate=best, seed=s),
                                       os.path.join(tmp, f"{name}-{s}"), progress=False)
              for s in range(seeds)]
      acc = [r["test_accuracy"] for r in runs]
      loss = [r["train_loss"] for r in runs]
      curves = [train.reporting.read_metrics(r["metrics"]) for r in runs]
      results[name] = {"learning_rate": best, "validation_accuracy": scores,
                       "test_accuracy_mean": float(np.mean(acc)),
                       "test_accuracy_std": float(np.std(acc)),
                       "train_loss_mean": float(np.mean(loss)),
                       "train_loss_std": float(np.std(loss)), "test_accuracy": acc,
                       "curves": [[(c["step"], c["train_loss"]) for c in cs if "train_loss" in c]
                                  for cs in curves]}
      print(f"{name:>18}: lr {best:<6} test acc {100 * np.mean(acc):6.2f} +- "
            f"{100 * np.std(acc):.2f}%  train loss {np.mean(loss):.4f} +- {np.std(loss):.4f}",
            flush=True)
  payload = {"machine": common.machine(), "config": dataclasses.asdict(base),
             "seeds": seeds, "results": results}
  common.write_json(args.out + ".json", payload)
  _plot(results, args.out + ".png")
  print(f"wrote {args.out}.json and {args.out}.png")


def _plot(results, path):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(6, 4))
  for name, r in results.items():
    steps = [s for s, _ in r["curves"][0]]
    mean = np.mean([[l for _, l in c] for c in r["curves"]], axis=0)
    ax.plot(steps, mean, label=f"{name} ({100 * r['test_accuracy_mean']:.1f}%)")
  ax.set(xlabel="step", ylabel="train loss (mean over seeds)", yscale="log")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)


if __name__ == "__main__":
  main()

"""The whole jitted train step (forward, backward, optimizer), VSGD against Adam.

    python -m benchmarks.train_step            # ConvMixer-256/8, VGG16, ResNeXt-18
    python -m benchmarks.train_step --quick    # ConvMixer only, tiny batch

Models from ``examples/models.py`` on CIFAR-shaped random data; ratio of
median step times, VSGD and Adam interleaved in the same process.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from examples import configs
from examples import input_pipeline
from examples import train


def measure(model: str, batch: int, repeats: int) -> dict:
  data = input_pipeline.Dataset("cifar100", np.zeros((batch, 32, 32, 3), np.uint8),
                                np.zeros(batch, np.int32), None, None, 100,
                                (0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
  images = jnp.asarray(np.random.default_rng(0).integers(0, 256, (batch, 32, 32, 3), np.uint8))
  labels = jnp.asarray(np.arange(batch) % 100, jnp.int32)
  runners = {}
  for opt in ("adam", "vsgd"):
    config = configs.Config(dataset="cifar100", model=model, optimizer=opt, batch_size=batch)
    graphdef, optimizer, state = train.create_train_state(config, data)
    step = jax.jit(train.make_train_step(graphdef, optimizer, config, data), donate_argnums=0)
    holder = [state]

    def run(step=step, holder=holder):
      holder[0], metrics = step(holder[0], images, labels, jax.random.key(0))
      jax.block_until_ready(metrics)
    run()
    runners[opt] = run
  samples = common.interleaved_medians(runners, repeats)
  return {"model": model, "batch": batch, "adam_ms": 1e3 * float(np.median(samples["adam"])),
          "vsgd_ms": 1e3 * float(np.median(samples["vsgd"])),
          **common.ratio_with_spread(samples["vsgd"], samples["adam"])}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--batch", type=int, default=None)
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--models", nargs="*", default=None)
  parser.add_argument("--out", default="benchmarks/results/train_step")
  args = parser.parse_args(argv)
  default_models = ["convmixer"] if args.quick else ["convmixer", "vgg16", "resnext18"]
  batch = args.batch or (4 if args.quick else 16)
  repeats = args.repeats or (3 if args.quick else 10)
  models = args.models or default_models
  rows = []
  for m in models:
    r = measure(m, batch, repeats)
    rows.append(r)
    print(f"{r['model']:>10} batch {r['batch']}: adam {r['adam_ms']:.1f} ms, vsgd "
          f"{r['vsgd_ms']:.1f} ms, ratio {r['ratio']:.3f} ({r['ratio_p25']:.3f}-{r['ratio_p75']:.3f})",
          flush=True)
  common.write_json(args.out + ".json", {"machine": common.machine(), "rows": rows})
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(5, 3))
  ax.bar([r["model"] for r in rows], [r["ratio"] for r in rows])
  ax.axhline(1.0, color="k", lw=0.5)
  ax.set(ylabel="VSGD step / Adam step")
  fig.tight_layout()
  fig.savefig(args.out + ".png", dpi=100)
  print(f"wrote {args.out}.json and {args.out}.png")


if __name__ == "__main__":
  main()

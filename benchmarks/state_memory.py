"""What each optimizer keeps per parameter: its state's bytes, counted from shapes.

    python -m benchmarks.state_memory

For a 1024 x 1024 matrix and for each of the paper's models (their parameters
as ``examples.models`` builds them for CIFAR-100), the bytes of every array of
the optimizer's state (the step count aside), from ``jax.eval_shape`` of its
``init``: nothing is allocated or timed, so the figures are exact and the same
on any machine. ``factored_vsgd`` keeps its rates' row and column means for
every leaf whose two largest axes both have at least 128 elements; the share
of parameters in such leaves is given per model, and per workload of the
time-to-result benchmark.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
from flax import nnx

from benchmarks import common
from examples import optimizers
from vsgd_optax import _factored

# The optimizers counted (``examples.optimizers.REGISTRY``'s names), in the table's order.
OPTIMIZERS = ("adam", "adam+bf16_mu", "vsgd", "vsgd+bf16_state", "factored_vsgd",
              "factored_vsgd+bf16_mu", "adafactor", "adafactor+momentum", "muon")
# The paper's models, by ``examples.models`` name, for CIFAR-100.
MODELS = ("vgg16", "convmixer", "resnext18")
THRESHOLD = 128  # factored_vsgd's default min_dim_size_to_factor
OUT = "benchmarks/results/state_memory.json"


def state_bytes(name: str, params) -> int:
  """Bytes of the state ``name``'s ``init`` gives for ``params``, scalars aside."""
  state = jax.eval_shape(optimizers.REGISTRY[name].build(1e-3).init, params)
  return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state)
             if leaf.ndim > 0)


def model_params(model: str):
  """The shapes of a paper model's parameters, for CIFAR-100, built abstractly."""
  from examples import models

  def build():
    return nnx.state(models.create_model(model, num_classes=100), nnx.Param)
  return jax.eval_shape(build)


def row(title: str, params) -> dict:
  """Bytes per parameter of every optimizer, and the share that factors."""
  count = sum(leaf.size for leaf in jax.tree.leaves(params))
  return {"title": title, "params": count, "factored_share": factored_share(params),
          "bytes_per_param": {n: state_bytes(n, params) / count for n in OPTIMIZERS}}


def factored_share(params) -> float:
  """The share of ``params``' elements in leaves that factor at ``THRESHOLD``."""
  leaves = jax.tree.leaves(params)
  factored = sum(leaf.size for leaf in leaves
                 if _factored.factored_axes(tuple(leaf.shape), THRESHOLD) is not None)
  return factored / sum(leaf.size for leaf in leaves)


def workload_shares() -> dict[str, float]:
  """Per time-to-result workload, the share of its parameters that factors."""
  from benchmarks.time_to_result import workloads
  shares = {}
  for name in workloads.names() + workloads.wide_names():
    params, _ = jax.eval_shape(workloads.build(name).init, jax.random.key(0))
    shares[name] = factored_share(params)
  return shares


def rows() -> list[dict]:
  square = {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)}
  return [row("1024 x 1024 matrix", square)] + [row(m, model_params(m)) for m in MODELS]


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.state_memory",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=OUT)
  args = parser.parse_args(argv)
  payload = {"threshold": THRESHOLD, "optimizers": list(OPTIMIZERS), "rows": rows(),
             "workload_shares": workload_shares()}
  common.write_json(args.out, payload)
  for r in payload["rows"]:
    print(f"{r['title']}: {r['params']:,} parameters, "
          + ", ".join(f"{n} {r['bytes_per_param'][n]:.2f}" for n in OPTIMIZERS) + " bytes each")
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()

"""Each state's bytes a parameter, counted from its shapes, and the share that factors.

On a 1024 x 1024 float32 matrix and on the paper's models (for CIFAR-100, built
abstractly), and for each small workload the share of its parameters that
``factored_vsgd`` factors at its default threshold (the experiments' tables read
it). Counted with ``jax.eval_shape``: nothing is allocated, and the backend
does not matter.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import vsgd_optax
from examples import optimizers
from vsgd_optax import experimental

OPTIMIZERS = ("adam", "adam+bf16_mu", "muon", "vsgd", "vsgd+bf16_state", "constant_vsgd",
              "factored_vsgd", "factored_vsgd+bf16_mu", "vsgd_muon", "vsgd_muon_factored",
              "adafactor", "adafactor+momentum")
MODELS = ("vgg16", "convmixer", "resnext18")
THRESHOLD = 128  # factored_vsgd's default min_dim_size_to_factor


def state_bytes(name: str, params) -> int:
  """Bytes of the state ``name``'s ``init`` gives for ``params``, scalars aside."""
  state = jax.eval_shape(optimizers.REGISTRY[name].build(1e-3).init, params)
  return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state) if leaf.ndim)


def factored_share(params) -> float:
  """The share of ``params``' elements in leaves that factor at ``THRESHOLD``."""
  factor = experimental.factored_vsgd(1e-3, min_dim_size_to_factor=THRESHOLD)
  state = jax.eval_shape(factor.init, params)
  rates = jax.tree.leaves(state[0].b_g, is_leaf=lambda x: isinstance(x, vsgd_optax.FactoredRate))
  sizes = [leaf.size for leaf in jax.tree.leaves(params)]
  factored = sum(size for size, rate in zip(sizes, rates, strict=True)
                 if isinstance(rate, vsgd_optax.FactoredRate))
  return factored / sum(sizes)


def _model_params(model: str):
  from flax import nnx

  from examples import models
  return jax.eval_shape(lambda: nnx.state(models.create_model(model, num_classes=100), nnx.Param))


def rows() -> list[dict]:
  trees = {"1024 x 1024 matrix": {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)},
           **{model: _model_params(model) for model in MODELS}}
  out = []
  for title, params in trees.items():
    count = sum(leaf.size for leaf in jax.tree.leaves(params))
    out.append({"title": title, "params": count, "factored_share": factored_share(params),
                "bytes_per_param": {n: state_bytes(n, params) / count for n in OPTIMIZERS}})
  return out


def workload_shares() -> dict[str, float]:
  """Per small workload, the share of its parameters that factors."""
  from benchmarks.time_to_result import workloads
  return {name: factored_share(jax.eval_shape(workloads.build(name).init, jax.random.key(0))[0])
          for name in workloads.names() + workloads.wide_names()}

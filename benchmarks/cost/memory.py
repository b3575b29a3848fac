"""Each state's bytes a parameter, counted from its shapes, and the share that factors.

On a 1024 x 1024 float32 matrix and on the paper's models (for CIFAR-100, their
parameters' shapes), and for each small workload the share of its parameters that
``factored_vsgd`` factors at its default threshold (the experiments' tables read
it). Counted with ``jax.eval_shape``: nothing is allocated, and the backend
does not matter.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import vsgd_optax
from benchmarks import optimizers
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


_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def _vgg16_shapes(classes: int) -> list[tuple[int, ...]]:
  """VGG-16 with batch norm: per layer a 3x3 kernel, its bias and its norm's scale and bias."""
  shapes, channels = [], 3
  for width in (w for w in _VGG16 if w != "M"):
    shapes += [(3, 3, channels, width), (width,), (width,), (width,)]
    channels = width
  return shapes + [(channels, classes), (classes,)]


def _convmixer_shapes(classes: int, dim=256, depth=8, kernel=5, patch=2) -> list[tuple[int, ...]]:
  """ConvMixer-256/8: the patch embedding and its norm, then per block a depthwise
  and a pointwise convolution, each with its bias and norm.
  """
  shapes = [(patch, patch, 3, dim), (dim,), (dim,), (dim,)]
  for _ in range(depth):
    shapes += [(kernel, kernel, 1, dim), (dim,), (dim,), (dim,),
               (1, 1, dim, dim), (dim,), (dim,), (dim,)]
  return shapes + [(dim, classes), (classes,)]


def _resnext18_shapes(classes: int, cardinality=8, widen=4) -> list[tuple[int, ...]]:
  """ResNeXt-18 of the paper: a stem, then one bottleneck a stage (1x1, grouped 3x3,
  1x1, and a 1x1 projection where the channels change), each convolution unbiased
  and normed.
  """
  shapes, channels = [(3, 3, 3, 64), (64,), (64,)], 64
  for out in (64 * widen, 128 * widen, 256 * widen):
    width = cardinality * out // widen
    shapes += [(1, 1, channels, width), (width,), (width,),
               (3, 3, width // cardinality, width), (width,), (width,),
               (1, 1, width, out), (out,), (out,)]
    if channels != out:
      shapes += [(1, 1, channels, out), (out,), (out,)]
    channels = out
  return shapes + [(channels, classes), (classes,)]


MODEL_SHAPES = {"vgg16": _vgg16_shapes, "convmixer": _convmixer_shapes,
                "resnext18": _resnext18_shapes}


def model_params(model: str, classes: int = 100) -> dict[str, jax.ShapeDtypeStruct]:
  """The parameters of one of the paper's models (``MODELS``) for ``classes``
  classes, as float32 shapes: the example trainer's models' leaves, one by one.
  """
  return {f"{i:03d}": jax.ShapeDtypeStruct(shape, jnp.float32)
          for i, shape in enumerate(MODEL_SHAPES[model](classes))}


def rows() -> list[dict]:
  trees = {"1024 x 1024 matrix": {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)},
           **{model: model_params(model) for model in MODELS}}
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

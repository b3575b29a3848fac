"""The paper's architectures in Flax NNX, layer for layer with the authors' models.

Parameter counts (biases and norm scales included, batch statistics not) equal
the authors' PyTorch models; ``tests/examples/test_models.py`` checks them. Inits follow
the authors where they differ from Flax's defaults. BatchNorm uses PyTorch's
defaults (momentum 0.1, i.e. Flax momentum 0.9, and epsilon 1e-5).

On CPU, ResNeXt's grouped convolutions run as one ordinary convolution per
group, ConvMixer's depthwise ones as a sum over kernel taps, and VGG's
convolutions on maps of 4x4 or less as one matrix product
(``examples/cpu_conv.py``): XLA:CPU runs ``lax``'s forms of these several times
slower. Parameters keep nnx.Conv's layout.

``apply`` calls a model held as pure state, the form that the trainer's jitted
steps and the benchmarks' workloads use.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from . import cpu_conv

VGG_CONFIGS = {
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512,
              512, "M", 512, 512, 512, 512, "M"],
}

_kaiming_fan_out = nnx.initializers.variance_scaling(2.0, "fan_out", "normal")
_kaiming_fan_in = nnx.initializers.variance_scaling(2.0, "fan_in", "normal")
BatchNorm = partial(nnx.BatchNorm, momentum=0.9, epsilon=1e-5)


def _torch_default_bias(fan_in: int) -> Callable[..., jax.Array]:
  """PyTorch's default bias init, uniform(+-1/sqrt(fan_in))."""
  bound = 1.0 / math.sqrt(fan_in)
  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)
  return init


# PyTorch's default weight init (kaiming_uniform with a = sqrt(5)).
_torch_default_kernel = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def _global_average_pool(x: jax.Array) -> jax.Array:
  return jnp.mean(x, axis=(1, 2))


class ConvBNReLU(nnx.Module):
  """A VGG layer: 3x3 convolution (with bias), batch norm, ReLU."""

  def __init__(self, in_ch: int, out_ch: int, *, dtype: Any, rngs: nnx.Rngs):
    self.conv = nnx.Conv(in_ch, out_ch, (3, 3), padding=1, kernel_init=_kaiming_fan_out,
                         conv_general_dilated=cpu_conv.conv_small_maps_by_matmul,
                         dtype=dtype, rngs=rngs)
    self.bn = BatchNorm(out_ch, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    return jax.nn.relu(self.bn(self.conv(x)))


class VGG(nnx.Module):
  """VGG with batch norm: 3x3 conv (bias) -> BN -> ReLU, max-pool at 'M', GAP, linear."""

  def __init__(self, cfg: str, num_classes: int, in_channels: int = 3, *,
               dtype: Any = None, rngs: nnx.Rngs):
    layers, pool_after, channels = [], [], in_channels
    for item in VGG_CONFIGS[cfg]:
      if item == "M":
        pool_after[-1] = True
        continue
      layers.append(ConvBNReLU(channels, item, dtype=dtype, rngs=rngs))
      pool_after.append(False)
      channels = item
    self.layers = nnx.List(layers)
    self.pool_after = tuple(pool_after)
    self.head = nnx.Linear(channels, num_classes, kernel_init=nnx.initializers.normal(0.01),
                           dtype=dtype, rngs=rngs)

  def __call__(self, x):
    for layer, pool in zip(self.layers, self.pool_after, strict=True):
      x = layer(x)
      if pool:
        x = nnx.max_pool(x, (2, 2), (2, 2))
    return self.head(_global_average_pool(x))


class ConvMixerBlock(nnx.Module):
  """One ConvMixer block: a residual depthwise convolution, then a pointwise one."""

  def __init__(self, dim: int, kernel: int, *, dtype: Any, rngs: nnx.Rngs):
    self.depthwise = nnx.Conv(dim, dim, (kernel, kernel), padding="SAME",
                              feature_group_count=dim,
                              conv_general_dilated=cpu_conv.depthwise_conv_by_taps,
                              kernel_init=_torch_default_kernel,
                              bias_init=_torch_default_bias(kernel * kernel),
                              dtype=dtype, rngs=rngs)
    self.bn1 = BatchNorm(dim, dtype=dtype, rngs=rngs)
    self.pointwise = nnx.Conv(dim, dim, (1, 1), kernel_init=_torch_default_kernel,
                              bias_init=_torch_default_bias(dim), dtype=dtype, rngs=rngs)
    self.bn2 = BatchNorm(dim, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    x = x + self.bn1(jax.nn.gelu(self.depthwise(x), approximate=False))
    return self.bn2(jax.nn.gelu(self.pointwise(x), approximate=False))


class ConvMixer(nnx.Module):
  """ConvMixer: patch embedding, depth x (residual depthwise conv, 1x1 conv), GAP, linear."""

  def __init__(self, num_classes: int, dim: int = 256, depth: int = 8, kernel: int = 5,
               patch: int = 2, in_channels: int = 3, *, dtype: Any = None,
               rngs: nnx.Rngs):
    fan_in = in_channels * patch * patch
    self.embed = nnx.Conv(in_channels, dim, (patch, patch), strides=patch, padding="VALID",
                          kernel_init=_torch_default_kernel,
                          bias_init=_torch_default_bias(fan_in), dtype=dtype, rngs=rngs)
    self.bn = BatchNorm(dim, dtype=dtype, rngs=rngs)
    blocks = [ConvMixerBlock(dim, kernel, dtype=dtype, rngs=rngs) for _ in range(depth)]
    self.blocks = nnx.List(blocks)
    self.head = nnx.Linear(dim, num_classes, kernel_init=_torch_default_kernel,
                           bias_init=_torch_default_bias(dim), dtype=dtype, rngs=rngs)

  def __call__(self, x):
    x = self.bn(jax.nn.gelu(self.embed(x), approximate=False))
    for block in self.blocks:
      x = block(x)
    return self.head(_global_average_pool(x))


class Bottleneck(nnx.Module):
  """ResNeXt bottleneck: 1x1 -> grouped 3x3 (stride) -> 1x1, projection shortcut."""

  def __init__(self, in_ch: int, out_ch: int, stride: int, cardinality: int,
               widen: int, *, dtype: Any, rngs: nnx.Rngs):
    width = cardinality * out_ch // widen
    conv = partial(nnx.Conv, use_bias=False, kernel_init=_kaiming_fan_out, dtype=dtype,
                   rngs=rngs)
    self.reduce = conv(in_ch, width, (1, 1))
    self.bn_reduce = BatchNorm(width, dtype=dtype, rngs=rngs)
    self.grouped = conv(width, width, (3, 3), strides=stride, padding=1,
                        feature_group_count=cardinality,
                        conv_general_dilated=cpu_conv.conv_per_group)
    self.bn_grouped = BatchNorm(width, dtype=dtype, rngs=rngs)
    self.expand = conv(width, out_ch, (1, 1))
    self.bn_expand = BatchNorm(out_ch, dtype=dtype, rngs=rngs)
    self.project = in_ch != out_ch  # a 1x1 projection only when channels change
    if self.project:
      self.shortcut = conv(in_ch, out_ch, (1, 1), strides=stride)
      self.bn_shortcut = BatchNorm(out_ch, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    y = jax.nn.relu(self.bn_reduce(self.reduce(x)))
    y = jax.nn.relu(self.bn_grouped(self.grouped(y)))
    y = self.bn_expand(self.expand(y))
    if self.project:
      x = self.bn_shortcut(self.shortcut(x))
    return jax.nn.relu(x + y)


class ResNeXt(nnx.Module):
  """ResNeXt-18 of the paper: one bottleneck per stage, widths 64/256/512/1024."""

  def __init__(self, num_classes: int, cardinality: int = 8, widen: int = 4,
               in_channels: int = 3, *, dtype: Any = None, rngs: nnx.Rngs):
    self.stem = nnx.Conv(in_channels, 64, (3, 3), padding=1, use_bias=False,
                         kernel_init=_kaiming_fan_out, dtype=dtype, rngs=rngs)
    self.bn = BatchNorm(64, dtype=dtype, rngs=rngs)
    stages, channels = [], 64
    for out_ch, stride in ((64 * widen, 1), (128 * widen, 2), (256 * widen, 2)):
      stages.append(Bottleneck(channels, out_ch, stride, cardinality, widen, dtype=dtype,
                               rngs=rngs))
      channels = out_ch
    self.stages = nnx.List(stages)
    self.head = nnx.Linear(channels, num_classes, kernel_init=_kaiming_fan_in,
                           dtype=dtype, rngs=rngs)

  def __call__(self, x):
    x = jax.nn.relu(self.bn(self.stem(x)))
    for stage in self.stages:
      x = stage(x)
    return self.head(_global_average_pool(x))


class TinyCNN(nnx.Module):
  """A two-layer CNN for fast tests, with one batch norm like the real models."""

  def __init__(self, num_classes: int, in_channels: int = 3, *, dtype: Any = None,
               rngs: nnx.Rngs):
    self.conv = nnx.Conv(in_channels, 8, (3, 3), dtype=dtype, rngs=rngs)
    self.bn = BatchNorm(8, dtype=dtype, rngs=rngs)
    self.head = nnx.Linear(8, num_classes, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    return self.head(_global_average_pool(jax.nn.relu(self.bn(self.conv(x)))))


class MLP(nnx.Module):
  """A one-hidden-layer perceptron on flattened pixels. It has no batch
  statistics, so its per-example gradients are exact (per-example VSGD).
  """

  def __init__(self, num_classes: int, in_channels: int = 1, image_size: int = 8,
               hidden: int = 128, *, dtype: Any = None, rngs: nnx.Rngs):
    self.hidden = nnx.Linear(image_size * image_size * in_channels, hidden, dtype=dtype,
                             rngs=rngs)
    self.head = nnx.Linear(hidden, num_classes, dtype=dtype, rngs=rngs)

  def __call__(self, x):
    return self.head(jax.nn.relu(self.hidden(x.reshape(x.shape[0], -1))))


MODELS: dict[str, Callable[..., nnx.Module]] = {
    "vgg16": partial(VGG, "vgg16"),
    "vgg19": partial(VGG, "vgg19"),
    "convmixer": ConvMixer,
    "resnext18": ResNeXt,
    "tiny": TinyCNN,
    "mlp": MLP,
}


def create_model(name: str, num_classes: int, in_channels: int = 3, *, seed: int = 0,
                 dtype: Any = None, **overrides) -> nnx.Module:
  """Builds a model by name (``MODELS``); ``overrides`` go to its constructor."""
  if name not in MODELS:
    raise KeyError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
  return MODELS[name](num_classes=num_classes, in_channels=in_channels, dtype=dtype,
                      rngs=nnx.Rngs(seed), **overrides)


def apply(graphdef: nnx.GraphDef, params: nnx.State, state: nnx.State, inputs: jax.Array,
          train: bool, returned: Any = nnx.BatchStat) -> tuple[jax.Array, nnx.State]:
  """The model that ``nnx.split`` gave as ``graphdef, params, state``, called on
  ``inputs`` in training or evaluation mode, as a pure function (for jit).

  The model is a copy: ``params`` and ``state`` are not changed. Returns its
  output and the variables that the filter ``returned`` selects after the
  call: the batch statistics (which training mode updates) by default,
  ``nnx.Not(nnx.Param)`` for all that is not a parameter.
  """
  model = nnx.merge(graphdef, params, state, copy=True)
  model.train() if train else model.eval()
  outputs = model(inputs)
  return outputs, nnx.state(model, returned)


def _takes_image_size(constructor: Callable[..., nnx.Module]) -> bool:
  # nnx's metaclass hides the constructor's signature behind its own __call__.
  cls = constructor.func if isinstance(constructor, partial) else constructor
  return "image_size" in inspect.signature(cls.__init__).parameters


def count_params(name: str, num_classes: int, image_size: int = 32, in_channels: int = 3,
                 **overrides) -> int:
  """Trainable parameters (batch statistics excluded), without allocating them.

  ``image_size`` reaches the models whose constructor takes it: the MLP, whose
  first layer reads every pixel. The convolutional models end in global
  average pooling, so their count does not depend on it.
  """
  if name in MODELS and _takes_image_size(MODELS[name]):  # else create_model names the choices
    overrides = {"image_size": image_size, **overrides}
  abstract = nnx.eval_shape(
      lambda: create_model(name, num_classes, in_channels, **overrides))
  params = nnx.state(abstract, nnx.Param)
  return sum(math.prod(x.shape) for x in jax.tree.leaves(params))

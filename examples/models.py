"""The paper's architectures in Flax NNX, layer for layer with the authors' models.

Parameter counts (biases and norm scales included, batch statistics not) equal
the authors' PyTorch models; ``tests/test_models.py`` checks them. Inits follow
the authors where they differ from Flax's defaults. BatchNorm uses PyTorch's
defaults (momentum 0.1, i.e. Flax momentum 0.9, and epsilon 1e-5).

ResNeXt's grouped convolutions run as one ordinary convolution per group
(``conv_per_group``), ConvMixer's depthwise ones as a sum over kernel taps
(``depthwise_conv_by_taps``): XLA:CPU runs both ``feature_group_count`` forms
several times slower (see there). Kernels keep nnx.Conv's grouped layout.
"""

from __future__ import annotations

import itertools
import math
from functools import partial
from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

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


def conv_per_group(lhs: jax.Array, rhs: jax.Array, window_strides, padding, *,
                   dimension_numbers=None, feature_group_count: int = 1,
                   **conv_kwargs) -> jax.Array:
  """``lax.conv_general_dilated`` with feature groups; on CPU one ordinary
  convolution per group, the outputs concatenated. The same function and the
  same kernel layout (``nnx.Conv``'s ``conv_general_dilated=`` hook passes it the
  grouped kernel); other backends keep the grouped convolution.

  Why: JAX's gradient of a grouped convolution with respect to its kernel is a
  ``batch_group_count`` convolution, which XLA:CPU rewrites into a convolution
  with a third spatial dimension (the groups) and base dilation, outside its
  fast library path. At ResNeXt-18's first grouped layer (batch 8, 32x32, 512
  channels, 2-core Xeon) forward and backward took 4.8 s grouped, 0.33 s split;
  the forward alone 158 ms against 61 ms. A few groups of wide channels
  (ResNeXt's 8) suit the split; depthwise convolutions would make hundreds of
  tiny ones (``depthwise_conv_by_taps`` serves them).
  """
  def grouped(lhs, rhs):
    return lax.conv_general_dilated(lhs, rhs, window_strides, padding,
                                    dimension_numbers=dimension_numbers,
                                    feature_group_count=feature_group_count, **conv_kwargs)
  if feature_group_count == 1:
    return grouped(lhs, rhs)
  numbers = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)

  def split(lhs, rhs):
    lhs_groups = jnp.split(lhs, feature_group_count, axis=numbers.lhs_spec[1])
    rhs_groups = jnp.split(rhs, feature_group_count, axis=numbers.rhs_spec[0])
    outputs = [lax.conv_general_dilated(x, w, window_strides, padding,
                                        dimension_numbers=numbers, **conv_kwargs)
               for x, w in zip(lhs_groups, rhs_groups)]
    return jnp.concatenate(outputs, axis=numbers.out_spec[1])
  return lax.platform_dependent(lhs, rhs, cpu=split, default=grouped)


def _pad_spatial(x: jax.Array, padding) -> jax.Array:
  """Pads (or, for negative pads, crops) the spatial axes of a channels-last array."""
  return lax.pad(x, jnp.zeros((), x.dtype),
                 [(0, 0, 0), *[(low, high, 0) for low, high in padding], (0, 0, 0)])


def _sum_of_taps(padded: jax.Array, weights: jax.Array, out_shape) -> jax.Array:
  """sum over taps t of padded[:, t:t + out_shape] * weights[t]; weights (*window, C)."""
  out = None
  for tap in itertools.product(*(range(k) for k in weights.shape[:-1])):
    shifted = lax.slice(padded, (0, *tap, 0),
                        (padded.shape[0], *(t + n for t, n in zip(tap, out_shape)),
                         padded.shape[-1]))
    out = shifted * weights[tap] if out is None else out + shifted * weights[tap]
  return out


def _depthwise_taps(padding):
  """A depthwise convolution (channels last, weights (*window, C)) as a sum of
  shifted inputs, with its gradients written out: the kernel gradient is one
  product and sum per tap, taken tap after tap in a loop. Left to autodiff, XLA
  keeps all the taps' products alive at once (25 inputs' worth for 5x5)."""
  @jax.custom_vjp
  def conv(x, weights):
    window = weights.shape[:-1]
    out_shape = [n + low + high - k + 1 for n, k, (low, high) in zip(x.shape[1:-1], window, padding)]
    return _sum_of_taps(_pad_spatial(x, padding), weights, out_shape)

  def conv_fwd(x, weights):
    return conv(x, weights), (x, weights)

  def conv_bwd(residuals, grad_out):
    x, weights = residuals
    window = weights.shape[:-1]
    # Input gradient: the output gradient correlated with the flipped kernel.
    grad_padding = [(k - 1 - low, k - 1 - high) for k, (low, high) in zip(window, padding)]
    flipped = jnp.flip(weights, tuple(range(len(window))))
    grad_x = _sum_of_taps(_pad_spatial(grad_out, grad_padding), flipped, x.shape[1:-1])
    # Kernel gradient, one tap a loop step; the sum over examples and positions
    # is a matrix-vector product, which XLA:CPU runs faster than a reduction.
    padded = _pad_spatial(x, padding)
    ones = jnp.ones((grad_out.size // grad_out.shape[-1],), grad_out.dtype)

    def one_tap(carry, tap):
      zero = jnp.zeros((), tap.dtype)
      shifted = lax.dynamic_slice(padded, (zero, *tap, zero), grad_out.shape)
      return carry, ones @ (shifted * grad_out).reshape(ones.shape[0], -1)
    taps = jnp.asarray(list(itertools.product(*(range(k) for k in window))), jnp.int32)
    _, grad_weights = lax.scan(one_tap, None, taps)
    return grad_x, grad_weights.reshape(weights.shape)

  conv.defvjp(conv_fwd, conv_bwd)
  return conv


def depthwise_conv_by_taps(lhs: jax.Array, rhs: jax.Array, window_strides, padding, *,
                           dimension_numbers=None, feature_group_count: int = 1,
                           lhs_dilation=None, rhs_dilation=None,
                           **conv_kwargs) -> jax.Array:
  """``lax.conv_general_dilated`` for a depthwise convolution (one input and one
  output channel per group); on CPU a sum over the kernel's taps of shifted
  inputs times per-channel weights, with hand-written gradients (so reverse
  mode only: ``jax.grad`` and ``jax.vjp``, not ``jax.jvp``). The same function
  and the same kernel layout; other backends, and convolutions that are not
  plain depthwise ones (strided, dilated, channel multipliers, other layouts),
  keep ``lax``'s form.

  Why: XLA:CPU runs ConvMixer-256's depthwise convolution (5x5, batch 8, 16x16,
  2-core Xeon) in 64 ms forward against 4 ms by taps, and four such layers'
  forward and backward in 820 ms against 96 ms, in about the same memory.
  """
  def grouped(lhs, rhs):
    return lax.conv_general_dilated(lhs, rhs, window_strides, padding,
                                    lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                                    dimension_numbers=dimension_numbers,
                                    feature_group_count=feature_group_count, **conv_kwargs)
  numbers = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
  spatial = lhs.ndim - 2
  channels_last = (0, lhs.ndim - 1, *range(1, lhs.ndim - 1))
  depthwise = (numbers.lhs_spec == numbers.out_spec == channels_last
               and numbers.rhs_spec == (rhs.ndim - 1, rhs.ndim - 2, *range(spatial))
               and feature_group_count == lhs.shape[-1] == rhs.shape[-1] and rhs.shape[-2] == 1)
  unit = lambda v: v is None or tuple(v) == (1,) * spatial
  if not (depthwise and unit(window_strides) and unit(lhs_dilation) and unit(rhs_dilation)):
    return grouped(lhs, rhs)
  if isinstance(padding, str):
    padding = lax.padtype_to_pads(lhs.shape[1:-1], rhs.shape[:spatial], (1,) * spatial, padding)
  taps = _depthwise_taps(tuple(tuple(pair) for pair in padding))
  return lax.platform_dependent(lhs, rhs, cpu=lambda lhs, rhs: taps(lhs, rhs[..., 0, :]),
                                default=grouped)


def _global_average_pool(x: jax.Array) -> jax.Array:
  return jnp.mean(x, axis=(1, 2))


class ConvBNReLU(nnx.Module):
  def __init__(self, in_ch: int, out_ch: int, *, dtype: Any, rngs: nnx.Rngs):
    self.conv = nnx.Conv(in_ch, out_ch, (3, 3), padding=1, kernel_init=_kaiming_fan_out,
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
    for layer, pool in zip(self.layers, self.pool_after):
      x = layer(x)
      if pool:
        x = nnx.max_pool(x, (2, 2), (2, 2))
    return self.head(_global_average_pool(x))


class ConvMixerBlock(nnx.Module):
  def __init__(self, dim: int, kernel: int, *, dtype: Any, rngs: nnx.Rngs):
    self.depthwise = nnx.Conv(dim, dim, (kernel, kernel), padding="SAME",
                              feature_group_count=dim, conv_general_dilated=depthwise_conv_by_taps,
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
                        feature_group_count=cardinality, conv_general_dilated=conv_per_group)
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
  statistics, so its per-example gradients are exact (per-example VSGD)."""

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


def count_params(name: str, num_classes: int, image_size: int = 32, in_channels: int = 3,
                 **overrides) -> int:
  """Trainable parameters (batch statistics excluded), without allocating them."""
  del image_size  # the models end in global average pooling: size-independent
  abstract = nnx.eval_shape(
      lambda: create_model(name, num_classes, in_channels, **overrides))
  params = nnx.state(abstract, nnx.Param)
  return sum(math.prod(x.shape) for x in jax.tree.leaves(params))

"""The digits workloads' models, layer for layer the example trainer's ConvMixer and MLP.

The same layers, inits and CPU form of the depthwise convolution as
``examples/models.py`` (``tests/benchmarks/test_workloads.py`` checks that both
give the same parameters, outputs and gradients), kept here so that the
benchmarks run on the package alone. BatchNorm uses PyTorch's defaults
(momentum 0.1, i.e. Flax momentum 0.9, and epsilon 1e-5); inits are PyTorch's
defaults, as the authors' models use.
"""

from __future__ import annotations

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

BatchNorm = partial(nnx.BatchNorm, momentum=0.9, epsilon=1e-5)
# PyTorch's default weight init (kaiming_uniform with a = sqrt(5)).
_torch_default_kernel = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def _torch_default_bias(fan_in: int):
  """PyTorch's default bias init, uniform(+-1/sqrt(fan_in))."""
  bound = 1.0 / math.sqrt(fan_in)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)
  return init


def _pad_spatial(x: jax.Array, padding) -> jax.Array:
  """Pads (or, for negative pads, crops) the spatial axes of a channels-last array."""
  return lax.pad(x, jnp.zeros((), x.dtype),
                 [(0, 0, 0), *[(low, high, 0) for low, high in padding], (0, 0, 0)])


def _taps(window):
  """Every offset of a kernel window, in the kernel's row-major order."""
  return itertools.product(*(range(k) for k in window))


def _sum_of_taps(padded: jax.Array, weights: jax.Array, out_shape) -> jax.Array:
  """Sum over taps t of padded[:, t:t + out_shape] * weights[t]; weights (*window, C)."""
  out = None
  for tap in _taps(weights.shape[:-1]):
    end = (padded.shape[0], *(t + n for t, n in zip(tap, out_shape, strict=True)),
           padded.shape[-1])
    shifted = lax.slice(padded, (0, *tap, 0), end)
    out = shifted * weights[tap] if out is None else out + shifted * weights[tap]
  return out


def _depthwise_taps(padding):
  """A depthwise convolution (channels last, weights (*window, C)) as a sum of
  shifted inputs, with its gradients written out tap by tap (left to autodiff,
  XLA keeps every tap's product alive at once).
  """
  @jax.custom_vjp
  def conv(x, weights):
    window = weights.shape[:-1]
    out_shape = [n + low + high - k + 1
                 for n, k, (low, high) in zip(x.shape[1:-1], window, padding, strict=True)]
    return _sum_of_taps(_pad_spatial(x, padding), weights, out_shape)

  def conv_fwd(x, weights):
    return conv(x, weights), (x, weights)

  def conv_bwd(residuals, grad_out):
    x, weights = residuals
    window = weights.shape[:-1]
    # Input gradient: the output gradient correlated with the flipped kernel.
    grad_padding = [(k - 1 - low, k - 1 - high)
                    for k, (low, high) in zip(window, padding, strict=True)]
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
    taps = jnp.asarray(list(_taps(window)), jnp.int32)
    _, grad_weights = lax.scan(one_tap, None, taps)
    return grad_x, grad_weights.reshape(weights.shape)

  conv.defvjp(conv_fwd, conv_bwd)
  return conv


def depthwise_conv_by_taps(lhs: jax.Array, rhs: jax.Array, window_strides, padding, *,
                           feature_group_count: int = 1, **conv_kwargs) -> jax.Array:
  """``nnx.Conv``'s ``conv_general_dilated`` for ConvMixer's depthwise convolution
  (unit strides, channels last): on CPU a sum over the kernel's taps, which
  XLA:CPU runs several times faster; ``lax``'s convolution on other backends.
  """
  def grouped(lhs, rhs):
    return lax.conv_general_dilated(lhs, rhs, window_strides, padding,
                                    feature_group_count=feature_group_count, **conv_kwargs)
  window = rhs.shape[:lhs.ndim - 2]
  if isinstance(padding, str):
    padding = lax.padtype_to_pads(lhs.shape[1:-1], window, (1,) * len(window), padding)
  taps = _depthwise_taps(tuple(tuple(pair) for pair in padding))
  return lax.platform_dependent(lhs, rhs, cpu=lambda lhs, rhs: taps(lhs, rhs[..., 0, :]),
                                default=grouped)


class ConvMixerBlock(nnx.Module):
  """One ConvMixer block: a residual depthwise convolution, then a pointwise one."""

  def __init__(self, dim: int, kernel: int, *, rngs: nnx.Rngs):
    self.depthwise = nnx.Conv(dim, dim, (kernel, kernel), padding="SAME",
                              feature_group_count=dim,
                              conv_general_dilated=depthwise_conv_by_taps,
                              kernel_init=_torch_default_kernel,
                              bias_init=_torch_default_bias(kernel * kernel), rngs=rngs)
    self.bn1 = BatchNorm(dim, rngs=rngs)
    self.pointwise = nnx.Conv(dim, dim, (1, 1), kernel_init=_torch_default_kernel,
                              bias_init=_torch_default_bias(dim), rngs=rngs)
    self.bn2 = BatchNorm(dim, rngs=rngs)

  def __call__(self, x):
    x = x + self.bn1(jax.nn.gelu(self.depthwise(x), approximate=False))
    return self.bn2(jax.nn.gelu(self.pointwise(x), approximate=False))


class ConvMixer(nnx.Module):
  """ConvMixer: patch embedding, depth x (residual depthwise conv, 1x1 conv), GAP, linear."""

  def __init__(self, num_classes: int, dim: int, depth: int, kernel: int, patch: int,
               in_channels: int, *, rngs: nnx.Rngs):
    self.embed = nnx.Conv(in_channels, dim, (patch, patch), strides=patch, padding="VALID",
                          kernel_init=_torch_default_kernel,
                          bias_init=_torch_default_bias(in_channels * patch * patch), rngs=rngs)
    self.bn = BatchNorm(dim, rngs=rngs)
    self.blocks = nnx.List([ConvMixerBlock(dim, kernel, rngs=rngs) for _ in range(depth)])
    self.head = nnx.Linear(dim, num_classes, kernel_init=_torch_default_kernel,
                           bias_init=_torch_default_bias(dim), rngs=rngs)

  def __call__(self, x):
    x = self.bn(jax.nn.gelu(self.embed(x), approximate=False))
    for block in self.blocks:
      x = block(x)
    return self.head(jnp.mean(x, axis=(1, 2)))


class MLP(nnx.Module):
  """A one-hidden-layer perceptron on flattened pixels (no batch statistics, so its
  per-example gradients are exact).
  """

  def __init__(self, num_classes: int, pixels: int, hidden: int, *, rngs: nnx.Rngs):
    self.hidden = nnx.Linear(pixels, hidden, rngs=rngs)
    self.head = nnx.Linear(hidden, num_classes, rngs=rngs)

  def __call__(self, x):
    return self.head(jax.nn.relu(self.hidden(x.reshape(x.shape[0], -1))))


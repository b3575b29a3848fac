"""Convolutions in forms that XLA:CPU runs fast, with the function and the kernel
layout of ``lax.conv_general_dilated``.

Each is a drop-in ``conv_general_dilated=`` hook for ``nnx.Conv``, so parameters
and checkpoints are those of a plain ``nnx.Conv``. Each picks its form with
``lax.platform_dependent``: the rewritten one on CPU, ``lax``'s convolution
on other backends (where the rewrites have not been measured) and on CPU for
the shapes a form does not target.
``tests/examples/test_models.py`` checks values and gradients against ``lax`` in float64.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
from jax import lax


def _lax_conv(window_strides, padding, dimension_numbers, feature_group_count,
              lhs_dilation, rhs_dilation, conv_kwargs):
  """``lax.conv_general_dilated`` with these settings: the form each rewrite
  below falls back to, and the one other backends keep.
  """
  def conv(lhs, rhs):
    return lax.conv_general_dilated(lhs, rhs, window_strides, padding,
                                    lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                                    dimension_numbers=dimension_numbers,
                                    feature_group_count=feature_group_count, **conv_kwargs)
  return conv


def conv_per_group(lhs: jax.Array, rhs: jax.Array, window_strides, padding, *,
                   dimension_numbers=None, feature_group_count: int = 1,
                   lhs_dilation=None, rhs_dilation=None, **conv_kwargs) -> jax.Array:
  """``lax.conv_general_dilated`` with feature groups; on CPU one ordinary
  convolution per group, the outputs concatenated. The same function and the
  same kernel layout (``nnx.Conv``'s ``conv_general_dilated=`` hook passes it the
  grouped kernel); other backends keep the grouped convolution.

  Why: JAX's gradient of a grouped convolution with respect to its kernel is a
  ``batch_group_count`` convolution, which XLA:CPU rewrites into a convolution
  with a third spatial dimension (the groups) and base dilation, and runs an
  order of magnitude slower than the split form at ResNeXt-18's grouped
  layers (forward and backward). A few groups of wide channels
  (ResNeXt's 8) suit the split; depthwise convolutions would make hundreds of
  tiny ones (``depthwise_conv_by_taps`` serves them).
  """
  grouped = _lax_conv(window_strides, padding, dimension_numbers, feature_group_count,
                      lhs_dilation, rhs_dilation, conv_kwargs)
  if feature_group_count == 1:
    return grouped(lhs, rhs)
  numbers = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
  one_group = _lax_conv(window_strides, padding, numbers, 1, lhs_dilation, rhs_dilation,
                        conv_kwargs)

  def split(lhs, rhs):
    lhs_groups = jnp.split(lhs, feature_group_count, axis=numbers.lhs_spec[1])
    rhs_groups = jnp.split(rhs, feature_group_count, axis=numbers.rhs_spec[0])
    outputs = [one_group(x, w) for x, w in zip(lhs_groups, rhs_groups, strict=True)]
    return jnp.concatenate(outputs, axis=numbers.out_spec[1])
  return lax.platform_dependent(lhs, rhs, cpu=split, default=grouped)


def _pad_spatial(x: jax.Array, padding) -> jax.Array:
  """Pads (or, for negative pads, crops) the spatial axes of a channels-last array."""
  return lax.pad(x, jnp.zeros((), x.dtype),
                 [(0, 0, 0), *[(low, high, 0) for low, high in padding], (0, 0, 0)])


def _taps(window):
  """Every offset of a kernel window, in the kernel's row-major order."""
  return itertools.product(*(range(k) for k in window))


def _shifted(padded: jax.Array, tap, out_shape) -> jax.Array:
  """padded[:, tap:tap + out_shape, :]: the input one kernel tap sees."""
  return lax.slice(padded, (0, *tap, 0),
                   (padded.shape[0], *(t + n for t, n in zip(tap, out_shape, strict=True)),
                    padded.shape[-1]))


def _explicit_padding(lhs: jax.Array, window, padding):
  """``padding`` as (low, high) pairs; a string ("SAME", "VALID") is resolved at unit
  stride over the spatial axes of the channels-last ``lhs``.
  """
  if isinstance(padding, str):
    return lax.padtype_to_pads(lhs.shape[1:-1], window, (1,) * len(window), padding)
  return padding


def _sum_of_taps(padded: jax.Array, weights: jax.Array, out_shape) -> jax.Array:
  """Sum over taps t of padded[:, t:t + out_shape] * weights[t]; weights (*window, C)."""
  out = None
  for tap in _taps(weights.shape[:-1]):
    shifted = _shifted(padded, tap, out_shape)
    out = shifted * weights[tap] if out is None else out + shifted * weights[tap]
  return out


def _depthwise_taps(padding):
  """A depthwise convolution (channels last, weights (*window, C)) as a sum of
  shifted inputs, with its gradients written out: the kernel gradient is one
  product and sum per tap, taken tap after tap in a loop. Left to autodiff, XLA
  keeps all the taps' products alive at once (25 inputs' worth for 5x5).
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


def _plain_channels_last(lhs, rhs, dimension_numbers, window_strides, lhs_dilation,
                         rhs_dilation) -> bool:
  """Input and output channels last, kernel (*window, in, out), unit strides and
  no dilation: the only layout the rewrites below handle.
  """
  numbers = lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
  spatial = lhs.ndim - 2
  channels_last = (0, lhs.ndim - 1, *range(1, lhs.ndim - 1))
  unit = lambda v: v is None or tuple(v) == (1,) * spatial
  return (numbers.lhs_spec == numbers.out_spec == channels_last
          and numbers.rhs_spec == (rhs.ndim - 1, rhs.ndim - 2, *range(spatial))
          and unit(window_strides) and unit(lhs_dilation) and unit(rhs_dilation))


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

  Why: XLA:CPU runs ConvMixer-256's 5x5 depthwise convolutions several times
  slower than the sum of taps, forward and backward, in about the same memory.
  """
  grouped = _lax_conv(window_strides, padding, dimension_numbers, feature_group_count,
                      lhs_dilation, rhs_dilation, conv_kwargs)
  spatial = lhs.ndim - 2
  depthwise = (feature_group_count == lhs.shape[-1] == rhs.shape[-1] and rhs.shape[-2] == 1)
  if not (depthwise and _plain_channels_last(lhs, rhs, dimension_numbers, window_strides,
                                             lhs_dilation, rhs_dilation)):
    return grouped(lhs, rhs)
  padding = _explicit_padding(lhs, rhs.shape[:spatial], padding)
  taps = _depthwise_taps(tuple(tuple(pair) for pair in padding))
  return lax.platform_dependent(lhs, rhs, cpu=lambda lhs, rhs: taps(lhs, rhs[..., 0, :]),
                                default=grouped)


SMALL_MAP = 4  # inputs at most this wide take the matrix product


def conv_small_maps_by_matmul(lhs: jax.Array, rhs: jax.Array, window_strides, padding, *,
                              dimension_numbers=None, feature_group_count: int = 1,
                              lhs_dilation=None, rhs_dilation=None,
                              **conv_kwargs) -> jax.Array:
  """``lax.conv_general_dilated``; on CPU, for inputs of at most ``SMALL_MAP``
  positions a side, one matrix product of the shifted inputs stacked along the
  channels (im2col) with the kernel. Larger inputs, groups, strides, dilations
  and other layouts keep ``lax``'s form.

  Why: XLA:CPU's convolution is slow when the window is larger than the map.
  VGG16 on CIFAR ends with three 3x3 convolutions of 512 channels on 2x2 maps,
  which the matrix product runs many times faster; at 1x1 and 4x4 maps it is
  still the faster form.
  """
  plain = _lax_conv(window_strides, padding, dimension_numbers, feature_group_count,
                    lhs_dilation, rhs_dilation, conv_kwargs)
  spatial = lhs.ndim - 2
  if not (feature_group_count == 1 and max(lhs.shape[1:-1]) <= SMALL_MAP
          and _plain_channels_last(lhs, rhs, dimension_numbers, window_strides,
                                   lhs_dilation, rhs_dilation)):
    return plain(lhs, rhs)
  window = rhs.shape[:spatial]
  padding = _explicit_padding(lhs, window, padding)
  precision = conv_kwargs.get("precision")

  def matmul(lhs, rhs):
    padded = _pad_spatial(lhs, padding)
    out_shape = [padded.shape[1 + d] - window[d] + 1 for d in range(spatial)]
    # Taps in the kernel's row-major order, channels within: the rows of
    # rhs.reshape(-1, out_channels).
    columns = jnp.concatenate([_shifted(padded, tap, out_shape) for tap in _taps(window)],
                              axis=-1)
    return jnp.dot(columns, rhs.reshape(-1, rhs.shape[-1]), precision=precision)
  return lax.platform_dependent(lhs, rhs, cpu=matmul, default=plain)

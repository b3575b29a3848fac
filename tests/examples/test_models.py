"""The paper's models: parameter counts, and the convolutions written for XLA:CPU
(ResNeXt's one convolution per group, ConvMixer's depthwise taps, VGG's small
maps as a matrix product) against ``lax``'s, in float64, values and gradients.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax import lax

from examples import cpu_conv
from examples import models

# Trainable parameters of the authors' PyTorch models (REFERENCE.md).
PAPER_PARAMETER_COUNTS = [
    ("vgg16", 100, 14_774_436), ("vgg16", 200, 14_825_736),
    ("vgg19", 100, 20_086_692), ("vgg19", 200, 20_137_992),
    ("convmixer", 100, 617_316), ("convmixer", 200, 643_016),
    ("resnext18", 100, 11_086_756), ("resnext18", 200, 11_189_256),
]


@pytest.mark.parametrize("name,classes,expected", PAPER_PARAMETER_COUNTS)
def test_parameter_counts_equal_the_authors_models(name, classes, expected):
  assert models.count_params(name, classes) == expected


def _assert_values_and_gradients_match(conv, reference, x, w, rng):
  """conv(x, w) equals reference(x, w) in float64, and so do the input and kernel
  gradients pulled back from one cotangent drawn from ``rng``.
  """
  expected_out, expected_vjp = jax.vjp(reference, x, w)
  cotangent = jnp.asarray(rng.normal(size=expected_out.shape))
  actual_out, actual_vjp = jax.vjp(conv, x, w)
  expected = (expected_out, *expected_vjp(cotangent))
  actual = (actual_out, *actual_vjp(cotangent))
  names = ("output", "input gradient", "kernel gradient")
  for name, a, e in zip(names, actual, expected, strict=True):
    assert a.dtype == jnp.float64 and a.shape == e.shape, name
    np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12, err_msg=name)


def _grouped_reference(x, w, strides, padding, groups):
  """XLA's grouped convolution (feature_group_count), NHWC and HWIO."""
  return lax.conv_general_dilated(x, w, strides, padding,
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                  feature_group_count=groups)


def _per_group(x, w, strides, padding, groups):
  return cpu_conv.conv_per_group(x, w, strides, padding,
                               dimension_numbers=("NHWC", "HWIO", "NHWC"),
                               feature_group_count=groups)


@pytest.mark.parametrize("groups,in_ch,out_ch,strides,padding", [
    (8, 32, 32, (1, 1), ((1, 1), (1, 1))),   # ResNeXt's shape, stride 1
    (8, 64, 64, (2, 2), ((1, 1), (1, 1))),   # and stride 2
    (2, 6, 10, (1, 2), "VALID"),              # unequal in/out widths, odd strides
    (1, 4, 5, (1, 1), "SAME"),                # no groups: the plain convolution
])
def test_conv_per_group_equals_grouped_convolution_and_its_gradients(
    groups, in_ch, out_ch, strides, padding):
  rng = np.random.default_rng(12)
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=(3, 9, 7, in_ch)))
    w = jnp.asarray(rng.normal(size=(3, 3, in_ch // groups, out_ch)))
    _assert_values_and_gradients_match(
        lambda x, w: _per_group(x, w, strides, padding, groups),
        lambda x, w: _grouped_reference(x, w, strides, padding, groups), x, w, rng)


def test_conv_per_group_follows_the_dimension_numbers():
  """Channels-first layouts split and join along their own feature axes."""
  rng = np.random.default_rng(3)
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=(2, 8, 6, 5)))       # NCHW
    w = jnp.asarray(rng.normal(size=(12, 2, 3, 3)))      # OIHW, 4 groups
    numbers = ("NCHW", "OIHW", "NCHW")
    expected = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=numbers,
                                        feature_group_count=4)
    actual = cpu_conv.conv_per_group(x, w, (1, 1), "SAME", dimension_numbers=numbers,
                                   feature_group_count=4)
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,window,padding", [
    ((2, 9, 7, 6), (5, 5), "SAME"),             # ConvMixer's depthwise convolution
    ((2, 9, 7, 6), (3, 2), "VALID"),
    ((2, 6, 6, 4), (3, 3), ((2, 0), (1, 3))),   # uneven explicit padding
    ((3, 11, 5), (4,), "SAME"),                 # one spatial dimension, even window
])
def test_depthwise_taps_equal_grouped_convolution_and_its_gradients(shape, window, padding):
  rng = np.random.default_rng(7)
  channels, spatial = shape[-1], len(window)
  numbers = (("NWC", "WIO", "NWC") if spatial == 1 else ("NHWC", "HWIO", "NHWC"))
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=shape))
    w = jnp.asarray(rng.normal(size=(*window, 1, channels)))

    def bound(conv):
      return lambda x, w: conv(x, w, (1,) * spatial, padding, dimension_numbers=numbers,
                               feature_group_count=channels)
    _assert_values_and_gradients_match(bound(cpu_conv.depthwise_conv_by_taps),
                                       bound(lax.conv_general_dilated), x, w,
                                       np.random.default_rng(8))


@pytest.mark.parametrize("strides,channels_out,groups", [
    ((2, 2), 6, 6),   # strided
    ((1, 1), 12, 6),  # two output channels per input channel
    ((1, 1), 6, 3),   # groups of two channels: not depthwise
])
def test_depthwise_taps_leave_other_convolutions_to_lax(strides, channels_out, groups):
  rng = np.random.default_rng(9)
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=(2, 7, 7, 6)))
    w = jnp.asarray(rng.normal(size=(3, 3, 6 // groups, channels_out)))
    kwargs = dict(dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=groups)
    np.testing.assert_allclose(
        cpu_conv.depthwise_conv_by_taps(x, w, strides, "SAME", **kwargs),
        lax.conv_general_dilated(x, w, strides, "SAME", **kwargs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("side,window,padding", [
    (2, (3, 3), ((1, 1), (1, 1))),   # VGG16's last three layers on CIFAR
    (1, (3, 3), ((1, 1), (1, 1))),
    (4, (3, 3), "SAME"),
    (3, (2, 3), "VALID"),
])
def test_small_map_matmul_equals_convolution_and_its_gradients(side, window, padding):
  rng = np.random.default_rng(11)
  numbers = ("NHWC", "HWIO", "NHWC")
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=(3, side, side, 5)))
    w = jnp.asarray(rng.normal(size=(*window, 5, 7)))

    def bound(conv):
      return lambda x, w: conv(x, w, (1, 1), padding, dimension_numbers=numbers)
    _assert_values_and_gradients_match(bound(cpu_conv.conv_small_maps_by_matmul),
                                       bound(lax.conv_general_dilated), x, w,
                                       np.random.default_rng(12))


def test_small_map_matmul_leaves_larger_maps_to_lax():
  x, w = jnp.ones((1, cpu_conv.SMALL_MAP + 1, 2, 3)), jnp.ones((3, 3, 3, 4))
  conv = lambda x, w: cpu_conv.conv_small_maps_by_matmul(
      x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
  assert "convolution(" in jax.jit(conv).lower(x, w).compile().as_text()
  assert "convolution(" not in jax.jit(conv).lower(x[:, :2], w).compile().as_text()


@pytest.mark.parametrize("conv,groups,in_ch", [
    (cpu_conv.conv_per_group, 8, 64), (cpu_conv.depthwise_conv_by_taps, 16, 16)])
def test_compiled_cpu_step_has_no_grouped_convolution(conv, groups, in_ch):
  """The point of both forms: neither the forward pass nor either gradient
  leaves XLA:CPU a feature- or batch-grouped convolution.
  """
  x = jnp.ones((2, 8, 8, in_ch))
  w = jnp.ones((3, 3, in_ch // groups, in_ch))
  def loss(x, w):
    return jnp.sum(conv(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                        feature_group_count=groups) ** 2)
  hlo = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, w).compile().as_text()
  assert "feature_group_count" not in hlo and "batch_group_count" not in hlo
  grouped = jax.jit(jax.grad(lambda x, w: jnp.sum(lax.conv_general_dilated(
      x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
      feature_group_count=groups) ** 2), argnums=(0, 1))).lower(x, w).compile().as_text()
  assert "feature_group_count" in grouped  # the check can see a grouped convolution


def _grouped_convs(model):
  return [m for _, m in nnx.iter_graph(model)
          if isinstance(m, nnx.Conv) and m.feature_group_count > 1]


def _rewritten_convs(model):
  return [m for _, m in nnx.iter_graph(model)
          if isinstance(m, nnx.Conv) and m.conv_general_dilated is not lax.conv_general_dilated]


def test_resnext_keeps_the_grouped_kernel_layout():
  """Checkpoints hold one (3, 3, width / cardinality, width) kernel per grouped
  convolution, as nnx.Conv with feature groups (and PyTorch) lay it out.
  """
  model = nnx.eval_shape(lambda: models.create_model("resnext18", 100, 3))
  assert [m.kernel.shape for m in _grouped_convs(model)] == [
      (3, 3, 64, 512), (3, 3, 128, 1024), (3, 3, 256, 2048)]


@pytest.mark.parametrize("name,kwargs,form", [
    ("resnext18", dict(cardinality=2, widen=1), cpu_conv.conv_per_group),  # a narrow ResNeXt
    ("convmixer", dict(dim=16, depth=2, kernel=3, patch=2), cpu_conv.depthwise_conv_by_taps),
    ("vgg16", {}, cpu_conv.conv_small_maps_by_matmul),
])
@pytest.mark.slow
def test_models_compute_the_same_function_as_with_lax_convolutions(name, kwargs, form):
  """The model's convolutions take their CPU form, and the model gives the same
  logits as with ``lax.conv_general_dilated`` in their place (the forms'
  gradients are checked above).
  """
  model = models.create_model(name, 10, 3, seed=5, **kwargs)
  rewritten = _rewritten_convs(model)
  assert len(rewritten) in (2, 3, 13) and all(m.conv_general_dilated is form for m in rewritten)
  # VGG16 at 32x32 runs its last six convolutions on 4x4 and 2x2 maps.
  side = 32 if name == "vgg16" else 8
  images = jax.random.normal(jax.random.key(0), (2, side, side, 3))

  def logits(model):
    graphdef, state = nnx.split(model)
    return jax.jit(lambda state: nnx.merge(graphdef, state, copy=True)(images))(state)

  ours = logits(model)
  for m in rewritten:
    m.conv_general_dilated = lax.conv_general_dilated
  np.testing.assert_allclose(ours, logits(model), rtol=1e-5, atol=1e-5)


def test_count_params_follows_the_mlp_image_size_and_not_the_convolutional_models():
  # The MLP's first layer reads every pixel; the others pool globally before their head.
  assert models.count_params("mlp", 10, 32, 3) == 32 * 32 * 3 * 128 + 128 + 128 * 10 + 10
  built = models.create_model("mlp", 10, 1, image_size=16, hidden=4)
  built_count = sum(x.size for x in jax.tree.leaves(nnx.state(built, nnx.Param)))
  assert built_count == 16 * 16 * 4 + 4 + 4 * 10 + 10
  assert models.count_params("mlp", 10, 16, 1, hidden=4) == built_count
  assert models.count_params("tiny", 10, 8, 1) == models.count_params("tiny", 10, 64, 1)

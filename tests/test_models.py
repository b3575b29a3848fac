"""The paper's models: parameter counts, and ResNeXt's grouped convolution written
as one convolution per group, against XLA's own grouped convolution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax import lax

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


def _grouped_reference(x, w, strides, padding, groups):
  """XLA's grouped convolution (feature_group_count), NHWC and HWIO."""
  return lax.conv_general_dilated(x, w, strides, padding,
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                  feature_group_count=groups)


def _per_group(x, w, strides, padding, groups):
  return models.conv_per_group(x, w, strides, padding,
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
    cotangent = jnp.asarray(rng.normal(size=_grouped_reference(
        x, w, strides, padding, groups).shape))

    def pulled_back(conv):
      out, vjp = jax.vjp(lambda x, w: conv(x, w, strides, padding, groups), x, w)
      return (out, *vjp(cotangent))

    expected = pulled_back(_grouped_reference)
    actual = pulled_back(_per_group)
    for name, a, e in zip(("output", "input gradient", "kernel gradient"), actual, expected):
      assert a.dtype == jnp.float64 and a.shape == e.shape, name
      np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12, err_msg=name)


def test_conv_per_group_follows_the_dimension_numbers():
  """Channels-first layouts split and join along their own feature axes."""
  rng = np.random.default_rng(3)
  with jax.enable_x64(True):
    x = jnp.asarray(rng.normal(size=(2, 8, 6, 5)))       # NCHW
    w = jnp.asarray(rng.normal(size=(12, 2, 3, 3)))      # OIHW, 4 groups
    numbers = ("NCHW", "OIHW", "NCHW")
    expected = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=numbers,
                                        feature_group_count=4)
    actual = models.conv_per_group(x, w, (1, 1), "SAME", dimension_numbers=numbers,
                                   feature_group_count=4)
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


def _grouped_convs(model):
  return [m for _, m in nnx.iter_graph(model)
          if isinstance(m, nnx.Conv) and m.feature_group_count > 1]


def test_resnext_keeps_the_grouped_kernel_layout():
  """Checkpoints hold one (3, 3, width / cardinality, width) kernel per grouped
  convolution, as nnx.Conv with feature groups (and PyTorch) lay it out."""
  model = nnx.eval_shape(lambda: models.create_model("resnext18", 100, 3))
  assert [m.kernel.shape for m in _grouped_convs(model)] == [
      (3, 3, 64, 512), (3, 3, 128, 1024), (3, 3, 256, 2048)]


def test_resnext_computes_the_grouped_model():
  """A narrow ResNeXt in train mode: the same logits and gradients as the same
  parameters run through XLA's grouped convolution."""
  model = models.create_model("resnext18", 10, 3, seed=5, cardinality=2, widen=1)
  grouped = _grouped_convs(model)
  assert [m.feature_group_count for m in grouped] == [2, 2, 2]
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 3))

  def logits_and_grads(model):
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    def loss(params):
      logits = nnx.merge(graphdef, params, rest, copy=True)(images)
      return jnp.sum(jnp.sin(logits)), logits
    (_, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    return logits, grads

  logits, grads = logits_and_grads(model)
  for m in grouped:
    m.conv_general_dilated = lax.conv_general_dilated
  logits_ref, grads_ref = logits_and_grads(model)
  np.testing.assert_allclose(logits, logits_ref, rtol=1e-4, atol=1e-5)
  for (path, g), g_ref in zip(jax.tree.leaves_with_path(grads), jax.tree.leaves(grads_ref)):
    scale = float(jnp.max(jnp.abs(g_ref)))
    assert scale > 0, jax.tree_util.keystr(path)
    np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-4 * scale,
                               err_msg=jax.tree_util.keystr(path))

"""The paper's training augmentations, done on device, and normalization.

``to_unit`` turns uint8 pixels into float32 on device. Normalization happens
after augmentation, as torchvision's transforms do (padding is zero in pixel
space).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .datasets import SYNTHETIC_PREFIX


def random_shift(key, images, pad: int):
  """Random shifts by up to ``pad`` pixels (digits must not be mirrored)."""
  n, h, w, c = images.shape
  padded = jnp.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
  offsets = jax.random.randint(key, (n, 2), 0, 2 * pad + 1)
  crop = lambda img, off: jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, c))
  return jax.vmap(crop)(padded, offsets)


def random_crop_flip(key, images, pad: int):
  """RandomCrop(size, padding=pad) and RandomHorizontalFlip, per image."""
  k_crop, k_flip = jax.random.split(key)
  images = random_shift(k_crop, images, pad)
  flip = jax.random.bernoulli(k_flip, 0.5, (images.shape[0], 1, 1, 1))
  return jnp.where(flip, images[:, :, ::-1], images)


def random_affine(key, images, degrees=45.0, translate=0.1, scale=(0.9, 1.1)):
  """RandomAffine with nearest-neighbour sampling and zero fill, as torchvision's default."""
  n, h, w, _ = images.shape
  k1, k2, k3 = jax.random.split(key, 3)
  angle = jnp.deg2rad(jax.random.uniform(k1, (n,), minval=-degrees, maxval=degrees))
  shift = jax.random.uniform(k2, (n, 2), minval=-translate, maxval=translate) * jnp.array([h, w])
  zoom = jax.random.uniform(k3, (n,), minval=scale[0], maxval=scale[1])
  ys, xs = jnp.meshgrid(jnp.arange(h) - (h - 1) / 2, jnp.arange(w) - (w - 1) / 2, indexing="ij")

  def warp(img, a, s, z):
    # Inverse map: output pixel -> source pixel.
    y, x = ys - s[0], xs - s[1]
    cos, sin = jnp.cos(a) / z, jnp.sin(a) / z
    src_y = cos * y - sin * x + (h - 1) / 2
    src_x = sin * y + cos * x + (w - 1) / 2
    iy, ix = jnp.round(src_y).astype(jnp.int32), jnp.round(src_x).astype(jnp.int32)
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    out = img[jnp.clip(iy, 0, h - 1), jnp.clip(ix, 0, w - 1)]
    return jnp.where(inside[..., None], out, 0.0)

  return jax.vmap(warp)(images, angle, shift, zoom)


def _grayscale(image):
  return jnp.sum(image * jnp.array([0.299, 0.587, 0.114]), axis=-1, keepdims=True)


def _brightness(image, factor):
  return jnp.clip(image * factor, 0, 1)


def _contrast(image, factor):
  mean = jnp.mean(_grayscale(image))
  return jnp.clip(mean + factor * (image - mean), 0, 1)


def _saturation(image, factor):
  gray = _grayscale(image)
  return jnp.clip(gray + factor * (image - gray), 0, 1)


JITTERS = (_brightness, _contrast, _saturation)


def jitter_draws(key, n: int, strength: float):
  """Per image: the (brightness, contrast, saturation) factors, (n, 3), and the
  order they are applied in, a permutation of 0, 1, 2 (indices into ``JITTERS``).
  """
  k_factors, k_order = jax.random.split(key)
  factors = jax.random.uniform(k_factors, (n, 3), minval=1 - strength, maxval=1 + strength)
  orders = jax.vmap(lambda k: jax.random.permutation(k, 3))(jax.random.split(k_order, n))
  return factors, orders


def color_jitter(key, images, strength=0.2):
  """ColorJitter(s, s, s): brightness, contrast and saturation by factors in
  [1 - s, 1 + s], applied in an order drawn for each image, as torchvision does.
  """
  factors, orders = jitter_draws(key, images.shape[0], strength)

  def jitter(image, factor, order):
    # Position i applies the jitter order[i] with that jitter's own factor.
    for position in range(3):
      which = order[position]
      image = jax.lax.switch(which, JITTERS, image, factor[which])
    return image

  return jax.vmap(jitter)(images, factors, orders)


def augment(key, images, dataset: str):
  """The paper's training augmentations for ``dataset`` (digits: small shifts only;
  a synthetic dataset: those of the dataset whose shapes it has).
  """
  dataset = dataset.removeprefix(SYNTHETIC_PREFIX)
  k1, k2, k3 = jax.random.split(key, 3)
  if dataset == "digits":
    return random_shift(k1, images, pad=1)
  images = random_crop_flip(k1, images, pad=4)
  if dataset == "tinyimagenet":
    images = color_jitter(k3, random_affine(k2, images))
  return images


def to_unit(images):
  """uint8 pixels to float32 in [0, 1]; float images pass through."""
  if images.dtype == jnp.uint8:
    return images.astype(jnp.float32) / 255.0
  return images.astype(jnp.float32)


def normalize(images, mean, std):
  return (images - jnp.asarray(mean)) / jnp.asarray(std)

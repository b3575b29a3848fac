"""Datasets as arrays in memory: loading, downloading, and synthetic stand-ins.

Images are NHWC, uint8 (CIFAR-100, TinyImageNet: a quarter of the memory, so
the whole set fits on the accelerator) or float32 in [0, 1] (digits);
``examples/augment.py`` augments and normalizes them on device.

``synthetic_cifar100`` and ``synthetic_tinyimagenet`` are random images and
labels with those datasets' shapes, drawn on the device batch by batch, so that
throughput can be measured with no data on disk. They are not data: the
trainer says so when it starts, and their names stay in the run's record.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
import pickle
import tarfile
import zipfile
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


class DatasetError(Exception):
  """A dataset is missing or unreadable; the message says what was expected where."""


class DatasetMissing(DatasetError):
  """A dataset is not where it was looked for, neither archive nor folder: the one
  case that ``--download`` can mend (an unreadable one it cannot).
  """


@dataclass(frozen=True)
class Dataset:
  """A dataset's splits as arrays in memory, with how to normalize and augment them."""

  name: str
  train_images: np.ndarray  # (N, H, W, C): uint8, or float32 in [0, 1]
  train_labels: np.ndarray  # (N,) int32
  test_images: np.ndarray
  test_labels: np.ndarray
  num_classes: int
  mean: tuple[float, ...]
  std: tuple[float, ...]
  # Random stand-in data (``load_synthetic``): each training batch is drawn on
  # the devices by ``synthetic_batch``, and ``train_images`` / ``train_labels``
  # are read-only zero-stride views that carry only the training set's shape.
  synthetic: bool = False
  # The split that selects hyperparameters (None: none). TinyImageNet's is its
  # test split itself (the same arrays), as in the authors' protocol.
  validation_images: np.ndarray | None = None
  validation_labels: np.ndarray | None = None

  @property
  def validation_is_test(self) -> bool:
    return self.validation_images is not None and self.validation_images is self.test_images


# The held-out validation images are drawn with this seed, whatever the run's
# seed, so that every run of a CIFAR-100 grid is selected on the same images.
# Digits splits train from test by the run's seed first, so its held-out
# images change with the seed.
VALIDATION_SEED = 0


def hold_out(dataset: Dataset, size: int) -> Dataset:
  """``size`` training images, chosen with ``VALIDATION_SEED``, become the
  validation split; the rest train, in their order. 0: no validation split.
  """
  if size == 0:
    return dataset
  n = len(dataset.train_labels)
  if size >= n:
    raise DatasetError(f"validation_size {size} leaves no training images out of the {n} of "
                       f"{dataset.name}; use at most {n - 1}.")
  held = np.zeros(n, bool)
  held[np.random.default_rng(VALIDATION_SEED).permutation(n)[:size]] = True
  return dataclasses.replace(
      dataset, train_images=dataset.train_images[~held], train_labels=dataset.train_labels[~held],
      validation_images=dataset.train_images[held], validation_labels=dataset.train_labels[held])


SYNTHETIC_PREFIX = "synthetic_"
# What a synthetic dataset copies from the real one: (image side, classes,
# training examples, test examples).
SYNTHETIC_SHAPES = {"cifar100": (32, 100, 50_000, 10_000),
                    "tinyimagenet": (64, 200, 100_000, 10_000)}
SYNTHETIC_DATASETS = tuple(SYNTHETIC_PREFIX + name for name in SYNTHETIC_SHAPES)
DATASETS = ("digits", "cifar100", "tinyimagenet", *SYNTHETIC_DATASETS)
# Per-channel mean and std of the real training images.
NORMALIZATION = {"cifar100": ((0.5071, 0.4867, 0.4408), (0.2675, 0.2565, 0.2761)),
                 "tinyimagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))}

CIFAR100_URL = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
TINYIMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"


def load_digits(seed: int = 0) -> Dataset:
  """scikit-learn's 8x8 handwritten digits (shipped inside scikit-learn); 20% test."""
  from sklearn.datasets import load_digits as sk_load
  data = sk_load()
  images = (data.images / 16.0).astype(np.float32)[..., None]
  labels = data.target.astype(np.int32)
  order = np.random.default_rng(seed).permutation(len(labels))
  n_test = len(labels) // 5
  test, train = order[:n_test], order[n_test:]
  mean, std = float(images[train].mean()), float(images[train].std())
  return Dataset("digits", images[train], labels[train], images[test], labels[test],
                 10, (mean,), (std,))


class _CifarUnpickler(pickle.Unpickler):
  """Admits only what the CIFAR-100 files hold: a dict of lists, strings and
  numpy arrays. Anything else (``os.system``, say) could run code, so it is refused.
  """

  ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"),
             ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
             ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}

  def find_class(self, module, name):
    if (module, name) not in self.ALLOWED:
      raise DatasetError(
          f"the CIFAR-100 file asks to load {module}.{name}, which the dataset never holds "
          f"(only numpy arrays and lists); refusing it, as it could run code. Replace the "
          f"archive with a fresh copy of {CIFAR100_URL}.")
    return super().find_class(module, name)


def _read_cifar_split(members, split):
  raw = _CifarUnpickler(io.BytesIO(members(split)), encoding="latin1").load()
  images = np.asarray(raw["data"], np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  return np.ascontiguousarray(images), np.asarray(raw["fine_labels"], np.int32)


def load_cifar100(data_dir: str) -> Dataset:
  """CIFAR-100 from ``cifar-100-python.tar.gz`` or its extracted ``cifar-100-python/``."""
  folder = os.path.join(data_dir, "cifar-100-python")
  archive = os.path.join(data_dir, "cifar-100-python.tar.gz")
  try:
    if os.path.isdir(folder):
      members = lambda split: open(os.path.join(folder, split), "rb").read()
      train, test = _read_cifar_split(members, "train"), _read_cifar_split(members, "test")
    elif os.path.isfile(archive):
      with tarfile.open(archive, "r:gz") as tar:
        members = lambda split: tar.extractfile(f"cifar-100-python/{split}").read()
        train, test = _read_cifar_split(members, "train"), _read_cifar_split(members, "test")
    else:
      raise DatasetMissing(
          f"CIFAR-100 not found: expected {archive} or the folder {folder}/ (with files "
          f"'train' and 'test'). Rerun with --download, or download {CIFAR100_URL} and put "
          f"it in {data_dir}.")
  except DatasetError:
    raise
  except Exception as err:  # corrupt archive, truncated pickle, wrong layout
    raise DatasetError(
        f"CIFAR-100 under {data_dir} is unreadable ({type(err).__name__}: {err}); expected "
        f"the python version of the dataset, {CIFAR100_URL}.") from err
  return Dataset("cifar100", *train, *test, 100, *NORMALIZATION["cifar100"])


def _decode_jpeg(data: bytes, name: str) -> np.ndarray:
  from PIL import Image
  try:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.uint8)
  except Exception as err:  # truncated or not a JPEG at all
    raise DatasetError(f"cannot decode the image {name} ({err})") from err


def load_tinyimagenet(data_dir: str) -> Dataset:
  """TinyImageNet-200 from ``tiny-imagenet-200.zip`` or its extracted folder.

  Train images come from ``train/<wnid>/images/*.JPEG``; the test set is the
  official validation split, labelled by ``val/val_annotations.txt``.
  """
  folder = os.path.join(data_dir, "tiny-imagenet-200")
  archive = os.path.join(data_dir, "tiny-imagenet-200.zip")
  if os.path.isdir(folder):
    def listing():
      for root, _, files in os.walk(folder):
        for f in files:
          yield os.path.relpath(os.path.join(root, f), data_dir)
    read = lambda name: open(os.path.join(data_dir, name), "rb").read()
    zf = None
  elif os.path.isfile(archive):
    try:
      zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as err:
      raise DatasetError(f"{archive} is not a readable zip file: {err}") from err
    listing = lambda: iter(zf.namelist())
    read = zf.read
  else:
    raise DatasetMissing(
        f"TinyImageNet-200 not found: expected {archive} or the folder {folder}/. "
        f"Rerun with --download, or download {TINYIMAGENET_URL} and put it in {data_dir}.")
  try:
    names = list(listing())
    wnids = sorted(read("tiny-imagenet-200/wnids.txt").decode().split())
    index = {w: i for i, w in enumerate(wnids)}
    train_x, train_y = [], []
    for name in sorted(names):
      parts = name.split("/")
      if len(parts) == 5 and parts[1] == "train" and parts[3] == "images" and name.endswith(".JPEG"):
        train_x.append(_decode_jpeg(read(name), name))
        train_y.append(index[parts[2]])
    test_x, test_y = [], []
    for line in read("tiny-imagenet-200/val/val_annotations.txt").decode().splitlines():
      fields = line.split("\t")
      if len(fields) >= 2:
        image = f"tiny-imagenet-200/val/images/{fields[0]}"
        test_x.append(_decode_jpeg(read(image), image))
        test_y.append(index[fields[1]])
    if not train_x or not test_x:
      raise ValueError("no train or val images found")
  except Exception as err:
    raise DatasetError(
        f"TinyImageNet-200 under {data_dir} is unreadable or incomplete ({type(err).__name__}:"
        f" {err}); expected the layout of {TINYIMAGENET_URL}.") from err
  finally:
    if zf is not None:
      zf.close()
  return Dataset("tinyimagenet", np.stack(train_x), np.asarray(train_y, np.int32),
                 np.stack(test_x), np.asarray(test_y, np.int32), 200,
                 *NORMALIZATION["tinyimagenet"])


DOWNLOADS = {"cifar100": CIFAR100_URL, "tinyimagenet": TINYIMAGENET_URL}


def download(name: str, data_dir: str, url: str | None = None, timeout: float = 60.0) -> str:
  """Fetches a dataset's archive into ``data_dir`` (a partial file never stays).

  ``timeout`` bounds, in seconds, the wait for the connection and for each read,
  so that a server that stops answering ends the download with an error.
  """
  import shutil
  import urllib.request
  url = url or DOWNLOADS[name]
  os.makedirs(data_dir, exist_ok=True)
  target = os.path.join(data_dir, os.path.basename(url))
  partial = target + ".part"
  try:
    with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as out:
      shutil.copyfileobj(response, out, length=1 << 20)
  except OSError as err:  # URLError, timeouts and refused connections are OSErrors
    if os.path.exists(partial):
      os.remove(partial)
    timed_out = isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None),
                                                            TimeoutError)
    reason = f"no answer within {timeout:g} s" if timed_out else err
    raise DatasetError(f"could not download {url} ({reason}); fetch it by hand and put it "
                       f"in {data_dir}.") from err
  os.replace(partial, target)
  return target


def load_dataset(name: str, data_dir: str, seed: int = 0, allow_download: bool = False,
                 url: str | None = None, validation_size: int = 0) -> Dataset:
  """Loads ``name``; with ``allow_download``, fetches a missing archive first.

  ``validation_size`` training images of digits and CIFAR-100 are held out
  (``hold_out``); TinyImageNet's validation split is its official val split,
  also its test split, whatever the size; synthetic data has none.
  """
  if name == "digits":
    return hold_out(load_digits(seed), validation_size)
  if name in SYNTHETIC_DATASETS:
    return load_synthetic(name, seed)
  loaders = {"cifar100": load_cifar100, "tinyimagenet": load_tinyimagenet}
  if name not in loaders:
    raise KeyError(f"unknown dataset {name!r}; choose one of {list(DATASETS)}")
  try:
    dataset = loaders[name](data_dir)
  except DatasetMissing:
    if not allow_download:
      raise
    download(name, data_dir, url)
    dataset = loaders[name](data_dir)
  if name == "tinyimagenet":
    return dataclasses.replace(dataset, validation_images=dataset.test_images,
                               validation_labels=dataset.test_labels)
  return hold_out(dataset, validation_size)


# ---- synthetic data, drawn on device ------------------------------------------

def _seed_words(seed: int) -> tuple[np.uint32, np.uint32]:
  """A seed >= 0 of up to 64 bits as two uint32 words, which every backend takes."""
  high, low = divmod(seed, 2**32)
  return np.uint32(high), np.uint32(low)


@functools.lru_cache(maxsize=16)
def _sampler(image_shape: tuple[int, ...], num_classes: int, batch_size: int, sharding):
  """A jitted (seed words, step) -> (uint8 images, int32 labels), placed by
  ``sharding`` (None: the default device), so no batch crosses from the host.
  """
  def draw(seed_high, seed_low, step):
    key = jax.random.key(0)
    for word in (seed_high, seed_low, step):
      key = jax.random.fold_in(key, word)
    k_images, k_labels = jax.random.split(key)
    images = jax.random.bits(k_images, (batch_size, *image_shape), jnp.uint8)
    labels = jax.random.randint(k_labels, (batch_size,), 0, num_classes, jnp.int32)
    return images, labels
  return jax.jit(draw, out_shardings=None if sharding is None else (sharding, sharding))


def synthetic_batch(dataset: Dataset, seed: int, step: int, batch_size: int,
                    sharding: jax.sharding.Sharding | None = None) -> tuple[jax.Array, jax.Array]:
  """Training batch ``step`` of a synthetic dataset: uniform random pixels and
  labels, a pure function of (seed, step), made directly on the devices.
  """
  if not dataset.synthetic:
    raise ValueError(f"{dataset.name} is real data; its batches come from its arrays")
  draw = _sampler(dataset.train_images.shape[1:], dataset.num_classes, batch_size, sharding)
  return draw(*_seed_words(seed), np.uint32(step))


def load_synthetic(name: str, seed: int = 0, num_test: int | None = None) -> Dataset:
  """Random images and labels shaped like the dataset ``name`` names
  (``synthetic_cifar100``: CIFAR-100's), with its class count and normalization.

  The test set (``num_test`` images; default: as many as the real one has) is
  drawn once on the host, where a real one is kept; training batches come
  from ``synthetic_batch``.
  """
  if name not in SYNTHETIC_DATASETS:
    raise KeyError(f"unknown synthetic dataset {name!r}; choose one of "
                   f"{list(SYNTHETIC_DATASETS)}")
  real = name.removeprefix(SYNTHETIC_PREFIX)
  side, classes, n_train, n_test = SYNTHETIC_SHAPES[real]
  n_test = n_test if num_test is None else num_test
  image_shape = (side, side, 3)
  rng = np.random.default_rng(seed)
  test_images = rng.integers(0, 256, (n_test, *image_shape), np.uint8)
  test_labels = rng.integers(0, classes, n_test, np.int32)
  shape_only = lambda shape, dtype: np.broadcast_to(np.zeros((), dtype), shape)
  return Dataset(name, shape_only((n_train, *image_shape), np.uint8),
                 shape_only((n_train,), np.int32), test_images, test_labels, classes,
                 *NORMALIZATION[real], synthetic=True)


def synthetic_notice(dataset: Dataset) -> str:
  """The line the trainer prints for a synthetic dataset, so that nobody takes
  its accuracy for a result.
  """
  side = dataset.train_images.shape[1]
  real = dataset.name.removeprefix(SYNTHETIC_PREFIX)
  return (f"dataset {dataset.name}: SYNTHETIC, not real data: random {side}x{side} images "
          f"and random labels ({dataset.num_classes} classes) drawn on the device with "
          f"{real}'s shapes, to measure speed; its accuracy means nothing.")


# ---- augmentation on device -------------------------------------------------

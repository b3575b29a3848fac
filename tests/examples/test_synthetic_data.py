"""The synthetic datasets: random data with a real dataset's shapes, drawn on the
device, and a trainer that says it is not real data.
"""

import json

import jax
import numpy as np
import pytest

from examples import augment
from examples import configs
from examples import datasets
from examples import errors
from examples import train
from examples.runtime import batches


@pytest.mark.parametrize("name, side, classes, n_train", [
    ("synthetic_cifar100", 32, 100, 50_000), ("synthetic_tinyimagenet", 64, 200, 100_000)])
def test_synthetic_dataset_has_the_real_shapes_and_holds_no_training_images(
    name, side, classes, n_train):
  data = datasets.load_synthetic(name, seed=0, num_test=16)
  real = name.removeprefix("synthetic_")
  assert data.synthetic and data.name == name and data.num_classes == classes
  assert (data.mean, data.std) == datasets.NORMALIZATION[real]
  assert data.train_images.shape == (n_train, side, side, 3)
  assert data.train_images.dtype == np.uint8 and data.train_labels.shape == (n_train,)
  # Only the shape: no memory behind the training "images".
  assert data.train_images.strides == (0, 0, 0, 0) and not data.train_images.flags.writeable
  assert data.test_images.shape == (16, side, side, 3) and data.test_images.dtype == np.uint8
  assert data.test_labels.min() >= 0 and data.test_labels.max() < classes
  # As many test images as the real dataset has, unless told otherwise.
  assert datasets.SYNTHETIC_SHAPES[real][3] == 10_000


def test_synthetic_batches_are_uniform_random_and_a_pure_function_of_seed_and_step():
  data = datasets.load_synthetic("synthetic_cifar100", num_test=1)
  images, labels = datasets.synthetic_batch(data, seed=3, step=5, batch_size=64)
  assert isinstance(images, jax.Array) and images.shape == (64, 32, 32, 3)
  assert images.dtype == np.uint8 and labels.dtype == np.int32
  again = datasets.synthetic_batch(data, seed=3, step=5, batch_size=64)
  np.testing.assert_array_equal(images, again[0])
  np.testing.assert_array_equal(labels, again[1])
  other_step = datasets.synthetic_batch(data, seed=3, step=6, batch_size=64)[0]
  other_seed = datasets.synthetic_batch(data, seed=2**32 + 3, step=5, batch_size=64)[0]
  for other in (other_step, other_seed):
    assert np.mean(np.asarray(other) == np.asarray(images)) < 0.02  # 1/256 by chance
  pixels = np.asarray(images, np.float64)
  # Uniform on 0..255: mean 127.5, std 73.9; 196,608 pixels put the mean within +-0.5.
  assert abs(pixels.mean() - 127.5) < 1.0 and abs(pixels.std() - 73.9) < 1.0
  assert 0 <= labels.min() and labels.max() < 100 and len(np.unique(labels)) > 40


@pytest.mark.slow
def test_synthetic_batches_are_made_on_the_devices_of_the_sharding():
  mesh = jax.make_mesh((8,), ("data",), (jax.sharding.AxisType.Auto,))
  batch_sharding = jax.NamedSharding(mesh, jax.P("data"))
  data = datasets.load_synthetic("synthetic_tinyimagenet", num_test=1)
  images, labels = datasets.synthetic_batch(data, 0, 0, 16, batch_sharding)
  assert images.sharding == batch_sharding and labels.sharding == batch_sharding
  assert {s.data.shape for s in images.addressable_shards} == {(2, 64, 64, 3)}
  # The same values as drawn on one device.
  single = datasets.synthetic_batch(data, 0, 0, 16)
  np.testing.assert_array_equal(images, single[0])
  np.testing.assert_array_equal(labels, single[1])


def test_real_data_has_no_synthetic_batches():
  digits = datasets.load_digits()
  assert not digits.synthetic
  with pytest.raises(ValueError, match="digits is real data"):
    datasets.synthetic_batch(digits, 0, 0, 8)
  with pytest.raises(KeyError, match="unknown synthetic dataset 'synthetic_mnist'"):
    datasets.load_synthetic("synthetic_mnist")


@pytest.mark.slow
def test_synthetic_data_gets_the_augmentations_of_the_data_it_stands_for():
  key = jax.random.key(7)
  images = jax.random.uniform(jax.random.key(1), (2, 16, 16, 3))
  augmented = jax.jit(augment.augment, static_argnums=2)
  np.testing.assert_array_equal(augmented(key, images, "synthetic_tinyimagenet"),
                                augmented(key, images, "tinyimagenet"))
  # TinyImageNet's include the affine warp and colour jitter that CIFAR-100's lack.
  assert not np.array_equal(augmented(key, images, "synthetic_tinyimagenet"),
                            augmented(key, images, "synthetic_cifar100"))


@pytest.mark.slow
def test_trainer_runs_on_synthetic_data_and_says_it_is_not_real(tmp_path, capsys,
                                                                 monkeypatch):
  config = configs.parse_override(configs.default(), "dataset=synthetic_cifar100")
  config = config.replace(model="tiny", model_kwargs={}, batch_size=8, steps=3, eval_every=3,
                          log_every=3, checkpoint_every=3, eval_batch_size=2000)
  # Training batches never come from the (shape-only) host arrays.
  monkeypatch.setattr(batches, "batch_indices", lambda *a: pytest.fail("host batch read"))
  result = train.train_and_evaluate(config, str(tmp_path / "run"), progress=False)
  assert result["step"] == 3 and np.isfinite(result["train_loss"])
  # 10,000 random test labels over 100 classes: about 1% correct, whatever the model.
  assert result["test_accuracy"] < 0.03
  printed = capsys.readouterr().out
  assert "dataset synthetic_cifar100: SYNTHETIC, not real data" in printed
  assert "its accuracy means nothing" in printed
  record = json.load(open(tmp_path / "run" / "run.json"))
  assert record["dataset"] == "synthetic_cifar100"


def test_config_names_the_synthetic_datasets():
  for name in ("synthetic_cifar100", "synthetic_tinyimagenet"):
    configs.validate(configs.default().replace(dataset=name, model="tiny", model_kwargs={}))
  with pytest.raises(errors.ConfigError, match="unknown dataset 'synthetic'"):
    configs.validate(configs.default().replace(dataset="synthetic"))

"""The example trainers: models, loaders, end-to-end steps, resume, devices, bad input."""

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from examples import augment
from examples import configs
from examples import datasets
from examples import errors
from examples import main
from examples import models
from examples import train
from tests.support import archives
from tests.support import evaluation


def test_only_a_missing_dataset_is_downloaded_and_it_is_told_by_its_type(tmp_path):
  """``DatasetMissing`` (a subclass of ``DatasetError``) is what ``--download``
  mends; an unreadable archive is a plain ``DatasetError``, and is never
  downloaded over, whatever its message says.
  """
  for loader in (datasets.load_cifar100, datasets.load_tinyimagenet):
    with pytest.raises(datasets.DatasetMissing):
      loader(str(tmp_path / "empty"))
  corrupt = tmp_path / "corrupt"
  corrupt.mkdir()
  (corrupt / "cifar-100-python.tar.gz").write_bytes(b"not found: not a tar file")
  with pytest.raises(datasets.DatasetError) as raised:
    datasets.load_dataset("cifar100", str(corrupt), allow_download=True,
                          url=(tmp_path / "nowhere.tar.gz").as_uri())
  assert type(raised.value) is datasets.DatasetError  # unreadable, not missing: no download
  assert "unreadable" in str(raised.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vgg16", "convmixer", "resnext18"])
def test_forward_shapes(name):
  model = models.create_model(name, 10, 3, **({"dim": 16, "depth": 1} if name == "convmixer" else {}))
  model.eval()
  assert model(jnp.zeros((2, 32, 32, 3))).shape == (2, 10)


def _tiny(dataset, data_dir, **kw):
  base = dict(dataset=dataset, data_dir=str(data_dir), model="tiny", batch_size=8, steps=4,
              eval_every=2, log_every=2, checkpoint_every=2, validation_size=8)
  base.update(kw)
  return configs.Config(**base)


@pytest.mark.slow  # trains the digits model twice
def test_the_trainer_keeps_the_state_dtype_and_rounding_it_is_given(tmp_path):
  """``state_dtype`` and ``state_rounding`` reach the optimizer; VSGD's defaults
  are the library's; a bad value is refused in one line; a run record written
  before the two settings existed resumes as the defaults it ran at.
  """
  import inspect

  import vsgd_optax
  library = inspect.signature(vsgd_optax.vsgd).parameters
  default = configs.default()
  for name in ("prior_strength", "variance_ratio", "kappa_g", "kappa_ghat", "state_rounding"):
    assert getattr(default, name) == library[name].default, name
  config = configs.Config(model="tiny", batch_size=8, steps=2, eval_every=100, log_every=1,
                          checkpoint_every=2, state_dtype="bfloat16", state_rounding="nearest")
  result = train.train_and_evaluate(config, str(tmp_path / "run"), progress=False)
  inner = result["state"].opt_state[0]
  assert {x.dtype for x in jax.tree.leaves((inner.mu, inner.b_g, inner.b_ghat))} == {
      jnp.dtype(jnp.bfloat16)}
  for bad in (dict(state_dtype="float16"), dict(state_rounding="up")):
    with pytest.raises(errors.ConfigError, match=f"{next(iter(bad))} must be one of"):
      configs.validate(configs.Config(**bad))
  # A record from before the settings: the same run at their defaults resumes.
  old = configs.Config(model="tiny", batch_size=8, steps=4, eval_every=100, log_every=1,
                       checkpoint_every=2)
  workdir = tmp_path / "old"
  train.train_and_evaluate(old, str(workdir), progress=False, stop_after=2)
  record = json.loads((workdir / "run.json").read_text())
  for name in configs.ADDED_SINCE_FIRST_RECORDS:
    del record[name]
  (workdir / "run.json").write_text(json.dumps(record))
  assert train.train_and_evaluate(old, str(workdir), progress=False)["step"] == 4


@pytest.mark.slow  # three runs of the trainer
def test_cifar_format_trains_and_checkpoint_resume_is_exact(tmp_path):
  archives.write_cifar(tmp_path)
  data = datasets.load_cifar100(str(tmp_path))
  assert data.train_images.shape == (64, 32, 32, 3) and data.num_classes == 100
  config = _tiny("cifar100", tmp_path, steps=6, optimizer="vsgd")
  whole = train.train_and_evaluate(config, str(tmp_path / "whole"), progress=False)
  part = train.train_and_evaluate(config, str(tmp_path / "split"), progress=False, stop_after=3)
  assert part["step"] == 3
  resumed = train.train_and_evaluate(config, str(tmp_path / "split"), progress=False)
  assert resumed["step"] == 6
  jax.tree.map(np.testing.assert_array_equal, whole["state"].params, resumed["state"].params)
  jax.tree.map(np.testing.assert_array_equal, whole["state"].opt_state, resumed["state"].opt_state)
  assert os.path.exists(whole["plot"])
  assert whole["test_accuracy"] == pytest.approx(
      evaluation.direct_test_accuracy(config, whole["state"]), abs=1e-9)


@pytest.mark.slow
def test_tinyimagenet_format_trains(tmp_path):
  archives.write_tinyimagenet(tmp_path)
  data = datasets.load_tinyimagenet(str(tmp_path))
  assert data.train_images.shape == (12, 64, 64, 3) and data.test_images.shape == (3, 64, 64, 3)
  result = train.train_and_evaluate(_tiny("tinyimagenet", tmp_path, batch_size=8,
                                          optimizer="constant_vsgd"),
                                    str(tmp_path / "run"), progress=False)
  assert result["step"] == 4 and np.isfinite(result["test_loss"])
  # The authors' protocol: TinyImageNet validates on its val split, its test split.
  assert result["validation_accuracy"] == result["test_accuracy"]
  with open(tmp_path / "run" / "result.json") as f:
    assert "official val split" in json.load(f)["validation"]


@pytest.mark.slow
def test_eight_devices_give_the_single_device_result(tmp_path):
  devices = jax.devices("cpu")  # conftest.py sets eight host devices
  assert len(devices) == 8
  config = _tiny("digits", tmp_path, batch_size=16, steps=3, optimizer="vsgd")
  many = train.train_and_evaluate(config, str(tmp_path / "many"), progress=False,
                                  devices=devices)
  one = train.train_and_evaluate(config, str(tmp_path / "one"), progress=False,
                                 devices=devices[:1])
  assert len(many["state"].params["head"]["kernel"].sharding.device_set) == 8
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6),
               many["state"].params, one["state"].params)


@pytest.mark.slow
def test_per_example_option_runs(tmp_path):
  config = _tiny("digits", tmp_path, batch_size=8, steps=2, per_example=True)
  result = train.train_and_evaluate(config, str(tmp_path / "pe"), progress=False)
  assert result["step"] == 2 and np.isfinite(result["train_loss"])


def test_bad_inputs_give_one_line_errors(tmp_path, capsys):
  for args, expected in (
      (["--optimizer", "adagrad"], "unknown optimizer 'adagrad'; choose one of: vsgd"),
      (["--set", "model=resnet50"], "unknown model 'resnet50'; choose one of:"),
      (["--set", "dataset=mnist"], "unknown dataset 'mnist'; choose one of: digits"),
      (["--config", "imagenet"], "unknown config 'imagenet'"),
      (["--set", "dataset=cifar100", "--data-dir", str(tmp_path / "none")],
       "cifar-100-python.tar.gz"),
  ):
    code = main.main(args + ["--workdir", str(tmp_path / "w" / str(len(expected)))])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err, err
  (tmp_path / "bad").mkdir()
  (tmp_path / "bad" / "cifar-100-python.tar.gz").write_bytes(b"not a tarball")
  code = main.main(["--set", "dataset=cifar100", "--data-dir", str(tmp_path / "bad"),
                     "--workdir", str(tmp_path / "w" / "corrupt")])
  assert code == 2 and "unreadable" in capsys.readouterr().err


@pytest.mark.slow
def test_workdir_of_another_run_is_not_overwritten(tmp_path):
  config = _tiny("digits", tmp_path, steps=2)
  train.train_and_evaluate(config, str(tmp_path / "run"), progress=False)
  with pytest.raises(errors.ConfigError, match="holds another run.*learning_rate"):
    train.train_and_evaluate(config.replace(learning_rate=0.5), str(tmp_path / "run"),
                             progress=False)


@pytest.mark.slow
def test_mlp_per_example_model():
  model = models.create_model("mlp", 10, 1)
  assert model(jnp.zeros((3, 8, 8, 1))).shape == (3, 10)
  assert models.count_params("mlp", 10, 8, 1) == 64 * 128 + 128 + 128 * 10 + 10


@pytest.mark.slow
def test_augmentations_keep_shapes_and_range():
  key = jax.random.key(0)
  images = jax.random.uniform(key, (4, 64, 64, 3))
  out = augment.augment(key, images, "tinyimagenet")
  assert out.shape == images.shape and float(out.min()) >= 0 and float(out.max()) <= 1
  shifted = augment.random_crop_flip(key, images[:, :32, :32], pad=4)
  assert shifted.shape == (4, 32, 32, 3)


def test_download_fetches_a_missing_archive(tmp_path):
  source = tmp_path / "mirror"
  source.mkdir()
  archives.write_cifar(source)
  url = (source / "cifar-100-python.tar.gz").as_uri()  # a file:// URL: no network needed
  data = datasets.load_dataset("cifar100", str(tmp_path / "data"), allow_download=True,
                                     url=url)
  assert data.train_images.shape == (64, 32, 32, 3)
  with pytest.raises(datasets.DatasetError, match="could not download"):
    datasets.download("cifar100", str(tmp_path / "other"), url=url + ".missing")
  assert not list((tmp_path / "other").iterdir())  # no partial file left behind


@pytest.mark.slow
@pytest.mark.parametrize("batch_size,num_devices", [(7, 2), (64, 1), (1000, 8)])
def test_evaluation_counts_each_test_example_once(batch_size, num_devices):
  from flax import nnx
  data = datasets.load_digits(0)
  config = configs.Config(model="tiny", seed=5)
  devices = jax.devices()[:num_devices]
  mesh = jax.make_mesh((num_devices,), ("data",), (jax.sharding.AxisType.Auto,),
                       devices=devices)
  graphdef, _, state = train.create_train_state(config, data, mesh)
  eval_step = jax.jit(train.make_eval_step(graphdef, data))
  size = -(-batch_size // num_devices) * num_devices
  batch_sharding = jax.NamedSharding(mesh, jax.P("data"))
  loss, accuracy = train.evaluate(eval_step, state, data, batch_sharding, size)
  # Reference: the whole test set at once, cross-entropy in float64 with numpy.
  model = nnx.merge(graphdef, jax.device_get(state.params), jax.device_get(state.batch_stats))
  model.eval()
  images = (data.test_images - np.asarray(data.mean)) / np.asarray(data.std)
  logits = np.asarray(model(jnp.asarray(images)), np.float64)
  log_probs = logits - logits.max(-1, keepdims=True)
  log_probs -= np.log(np.exp(log_probs).sum(-1, keepdims=True))
  expected_loss = -log_probs[np.arange(len(data.test_labels)), data.test_labels].mean()
  expected_accuracy = np.mean(logits.argmax(-1) == data.test_labels)
  assert accuracy == expected_accuracy
  np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)


def _jitter_reference(image, factors, order):
  """Torchvision's ColorJitter on one float64 image, in the drawn order."""
  gray = lambda x: (x * np.array([0.299, 0.587, 0.114])).sum(-1, keepdims=True)
  ops = (lambda x, f: np.clip(x * f, 0, 1),
         lambda x, f: np.clip(gray(x).mean() + f * (x - gray(x).mean()), 0, 1),
         lambda x, f: np.clip(gray(x) + f * (x - gray(x)), 0, 1))
  for which in order:
    image = ops[which](image, factors[which])
  return image


@pytest.mark.slow
def test_color_jitter_applies_its_three_parts_in_an_order_drawn_per_image():
  key = jax.random.key(3)
  images = jax.random.uniform(jax.random.key(4), (60, 5, 5, 3))
  out = np.asarray(augment.color_jitter(key, images, strength=0.4))
  factors, orders = map(np.asarray, augment.jitter_draws(key, 60, 0.4))
  assert len({tuple(o) for o in orders}) == 6  # every order occurs among 60 images
  assert np.all(np.sort(orders, axis=1) == [0, 1, 2])
  assert np.all((factors >= 0.6) & (factors <= 1.4))
  for i in range(60):
    expected = _jitter_reference(np.asarray(images[i], np.float64), factors[i], orders[i])
    np.testing.assert_allclose(out[i], expected, atol=1e-5)
  # The order matters: applied in a fixed order, some images come out otherwise.
  fixed = np.stack([_jitter_reference(np.asarray(images[i], np.float64), factors[i], (0, 1, 2))
                    for i in range(60)])
  assert np.abs(fixed - out).max() > 1e-3


def test_adam_with_weight_decay_is_refused_naming_adamw(tmp_path, capsys):
  code = main.main(["--optimizer", "adam", "--set", "weight_decay=0.01",
                    "--workdir", str(tmp_path / "w")])
  err = capsys.readouterr().err
  assert code == 2 and "adamw" in err and len(err.strip().splitlines()) == 1, err
  assert not (tmp_path / "w").exists()


@pytest.mark.slow
def test_vsgd_hyperparameters_reach_the_optimizer(monkeypatch):
  seen = {}
  def spy(learning_rate, **kwargs):
    seen.update(kwargs)
    return optax.sgd(learning_rate)
  from examples import optimizers
  monkeypatch.setitem(optimizers.REGISTRY, "vsgd",
                      dataclasses.replace(optimizers.REGISTRY["vsgd"], build=spy))
  config = configs.parse_override(configs.default(), "prior_strength=5e-8")
  for item in ("variance_ratio=20", "kappa_g=0.7", "kappa_ghat=0.95", "weight_decay=0.01"):
    config = configs.parse_override(config, item)
  train.create_train_state(config, datasets.load_digits(0))
  assert seen == dict(prior_strength=5e-8, variance_ratio=20.0, kappa_g=0.7, kappa_ghat=0.95,
                      weight_decay=0.01, state_dtype=jnp.dtype("float32"),
                      state_rounding="stochastic")
  assert configs.default().prior_strength == 1e-8  # the authors' code default

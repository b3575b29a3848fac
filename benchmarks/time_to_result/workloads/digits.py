"""Three workloads on scikit-learn's 8x8 digits: ConvMixer, MLP, logistic regression.

The split is the example trainer's (80% train, 20% test, a permutation drawn
with seed 0), with the first fifth of its training part held out for validation.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.optimize
from flax import nnx

from benchmarks.time_to_result import workloads
from benchmarks.time_to_result.workloads import models

VALIDATION_FRACTION = 0.2
# Logistic regression: L2 strength of the convex objective (on standardized pixels).
LOGISTIC_L2 = 1e-3


@dataclasses.dataclass(frozen=True)
class Digits:
  """scikit-learn's digits as the example trainer splits them: pixels in [0, 1],
  (N, 8, 8, 1) float32, and the training part's mean and standard deviation.
  """
  train_images: np.ndarray
  train_labels: np.ndarray
  test_images: np.ndarray
  test_labels: np.ndarray
  mean: float
  std: float


def load_digits(seed: int = 0) -> Digits:
  """The digits shuffled with ``seed``, the first fifth of them the test split."""
  from sklearn.datasets import load_digits as sk_load
  data = sk_load()
  images = (data.images / 16.0).astype(np.float32)[..., None]
  labels = data.target.astype(np.int32)
  order = np.random.default_rng(seed).permutation(len(labels))
  test, train = order[:len(labels) // 5], order[len(labels) // 5:]
  return Digits(images[train], labels[train], images[test], labels[test],
                float(images[train].mean()), float(images[train].std()))


def normalize(images, digits: Digits):
  """Pixels standardized by the training part's mean and deviation."""
  return (images - jnp.asarray((digits.mean,))) / jnp.asarray((digits.std,))


def random_shift(key, images):
  """Each image shifted by up to one pixel, zero-filled (digits are not mirrored):
  the example trainer's augmentation of digits.
  """
  key = jax.random.split(key, 3)[0]  # the trainer splits one key an augmentation, of three
  n, h, w, c = images.shape
  padded = jnp.pad(images, ((0, 0), (1, 1), (1, 1), (0, 0)))
  offsets = jax.random.randint(key, (n, 2), 0, 3)
  crop = lambda img, off: jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, c))
  return jax.vmap(crop)(padded, offsets)


def _splits() -> tuple[Digits, workloads.Data]:
  full = load_digits(seed=0)
  n_val = int(len(full.train_labels) * VALIDATION_FRACTION)
  data = {"train_x": full.train_images[n_val:], "train_y": full.train_labels[n_val:],
          "val_x": full.train_images[:n_val], "val_y": full.train_labels[:n_val],
          "test_x": full.test_images, "test_y": full.test_labels}
  return full, {k: jnp.asarray(v) for k, v in data.items()}


def _draw(data, key, batch_size):
  idx = jax.random.randint(key, (batch_size,), 0, data["train_y"].shape[0])
  return data["train_x"][idx], data["train_y"][idx]


def _accuracy(logits, labels):
  return jnp.mean((jnp.argmax(logits, -1) == labels).astype(jnp.float32))


def convmixer(quick: bool) -> workloads.Workload:
  """The example trainer's default: ConvMixer (dim 64, depth 4, kernel 3, patch 1)
  with random shifts of one pixel, batch 64, on the images normalized as there.
  """
  full, data = _splits()
  kwargs = dict(dim=8, depth=1) if quick else dict(dim=64, depth=4)
  graphdef, init = workloads.functional(lambda rngs: models.ConvMixer(
      num_classes=10, kernel=3, patch=1, in_channels=1, rngs=rngs, **kwargs))
  batch_size = 64

  def standardize(x):
    return normalize(x, full)

  def loss(params, aux, data, key):
    k_batch, k_aug = jax.random.split(key)
    x, y = _draw(data, k_batch, batch_size)
    x = standardize(random_shift(k_aug, x))
    logits, aux = workloads.apply(graphdef, params, aux, x, train=True)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y)), aux

  return workloads.Workload(
      name="convmixer", title="ConvMixer on digits",
      description="The trainer's default model (ConvMixer dim 64, depth 4, kernel 3, patch 1, "
                  "batch norm) on scikit-learn's digits with one-pixel random shifts, batch 64.",
      data=data, init=init, loss=loss, validate=_accuracy_on(graphdef, standardize, "val"),
      test=_accuracy_on(graphdef, standardize, "test"),
      metric="accuracy", higher_is_better=True, target=0.95,
      steps=8 if quick else 150, eval_every=4 if quick else 15, batch_size=batch_size)


def _accuracy_on(graphdef, normalize, split: str):
  """The model's accuracy on ``split`` of the data, in evaluation mode."""
  def metric(params, aux, data):
    logits, _ = workloads.apply(graphdef, params, aux, normalize(data[split + "_x"]),
                                train=False)
    return _accuracy(logits, data[split + "_y"])
  return metric


class DeepMLP(nnx.Module):
  """pixels -> hidden -> hidden -> classes, ReLU: the wide variant's model, whose
  hidden x hidden layer factors in ``factored_vsgd``.
  """

  def __init__(self, pixels: int, hidden: int, classes: int, *, rngs: nnx.Rngs):
    self.layer1 = nnx.Linear(pixels, hidden, rngs=rngs)
    self.layer2 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.head = nnx.Linear(hidden, classes, rngs=rngs)

  def __call__(self, x):
    x = x.reshape(x.shape[0], -1)
    return self.head(jax.nn.relu(self.layer2(jax.nn.relu(self.layer1(x)))))


def mlp(quick: bool, wide: bool = False) -> workloads.Workload:
  """The trainer's MLP (one hidden layer of 128) on normalized digits, batch 32,
  no augmentation, so that per-example gradients are exact.
  """
  full, data = _splits()
  if wide:  # mlp_wide: two hidden layers of 256
    graphdef, init = workloads.functional(
        lambda rngs: DeepMLP(64, 16 if quick else 256, 10, rngs=rngs))
  else:
    graphdef, init = workloads.functional(lambda rngs: models.MLP(
        num_classes=10, pixels=64, hidden=16 if quick else 128, rngs=rngs))
  batch_size = 32

  def standardize(x):
    return normalize(x, full)

  def batch(data, key):
    x, y = _draw(data, key, batch_size)
    return standardize(x), y

  def loss(params, aux, data, key):
    x, y = batch(data, key)
    logits, _ = workloads.apply(graphdef, params, aux, x, train=True)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y)), aux

  def example_loss(params, aux, x, y):
    logits, _ = workloads.apply(graphdef, params, aux, x[None], train=True)
    return optax.softmax_cross_entropy_with_integer_labels(logits, y[None])[0]

  return workloads.Workload(
      name="mlp_wide" if wide else "mlp", title="MLP on digits" + (", wide" if wide else ""),
      description=("An MLP with two hidden layers (64-256-256-10, ReLU)" if wide else
                   "The trainer's MLP (64-128-10, ReLU)")
                  + " on normalized digits, batch 32, no augmentation"
                  + ("." if wide else "; per-example VSGD runs as an extra entry."),
      data=data, init=init, loss=loss, validate=_accuracy_on(graphdef, standardize, "val"),
      test=_accuracy_on(graphdef, standardize, "test"),
      metric="accuracy", higher_is_better=True, target=0.97,
      steps=8 if quick else 1000, eval_every=4 if quick else 50, batch_size=batch_size,
      batch=batch, example_loss=None if wide else example_loss)


def logistic_objective(w, b, x, y, l2=LOGISTIC_L2, xp=jnp):
  """Mean softmax cross-entropy of ``x @ w + b`` plus ``l2 / 2 * |w|^2``."""
  logits = x @ w + b
  shifted = logits - logits.max(axis=1, keepdims=True)
  log_z = xp.log(xp.exp(shifted).sum(axis=1))
  picked = xp.take_along_axis(shifted, y[:, None], axis=1)[:, 0]
  return xp.mean(log_z - picked) + 0.5 * l2 * xp.sum(w * w)


def logistic_optimum(x: np.ndarray, y: np.ndarray, classes: int = 10) -> tuple[float, np.ndarray]:
  """The full-batch optimum of ``logistic_objective`` by L-BFGS in float64."""
  x, d = x.astype(np.float64), x.shape[1]
  onehot = np.eye(classes)[y]

  def value_and_grad(theta):
    w, b = theta[:d * classes].reshape(d, classes), theta[d * classes:]
    logits = x @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    value = logistic_objective(w, b, x, y, xp=np)
    residual = (p - onehot) / len(y)
    grad = np.concatenate([(x.T @ residual + LOGISTIC_L2 * w).ravel(), residual.sum(0)])
    return value, grad

  result = scipy.optimize.minimize(value_and_grad, np.zeros(d * classes + classes), jac=True,
                                   method="L-BFGS-B",
                                   options=dict(maxiter=10_000, gtol=1e-10, ftol=1e-15))
  return float(result.fun), result.x


def logistic(quick: bool) -> workloads.Workload:
  """Multinomial logistic regression on standardized pixels, batch 32; the metric
  is the full training objective minus its L-BFGS optimum.
  """
  _, data = _splits()
  flat = {k: (v.reshape(v.shape[0], -1) if k.endswith("_x") else v) for k, v in data.items()}
  mean = flat["train_x"].mean(0)
  std = jnp.where(flat["train_x"].std(0) > 0, flat["train_x"].std(0), 1.0)
  for k in ("train_x", "val_x", "test_x"):
    flat[k] = (flat[k] - mean) / std
  optimum, _ = logistic_optimum(np.asarray(flat["train_x"]), np.asarray(flat["train_y"]))
  flat["optimum"] = jnp.float32(optimum)
  batch_size = 32

  def init(key):
    return {"w": 0.01 * jax.random.normal(key, (64, 10)), "b": jnp.zeros(10)}, ()

  def loss(params, aux, data, key):
    x, y = _draw(data, key, batch_size)
    return logistic_objective(params["w"], params["b"], x, y), aux

  def suboptimality(params, aux, data):
    full = logistic_objective(params["w"], params["b"], data["train_x"], data["train_y"])
    return full - data["optimum"]

  return workloads.Workload(
      name="logreg", title="Logistic regression on digits (convex)",
      description=f"Softmax regression on standardized digit pixels with L2 {LOGISTIC_L2}, "
                  "batch 32. Metric: full training objective minus the float64 L-BFGS optimum "
                  "(scipy), for validation and test alike: the problem is one of optimization.",
      data=flat, init=init, loss=loss, validate=suboptimality, test=suboptimality,
      metric="suboptimality", higher_is_better=False, target=5e-3,
      steps=8 if quick else 2000, eval_every=4 if quick else 100, batch_size=batch_size,
      log_metric=True)

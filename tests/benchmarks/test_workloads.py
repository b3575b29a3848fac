"""The time-to-result workloads' data and references: the logistic optimum and the
character-level corpus.
"""

import chex
import jax
import numpy as np
import pytest

from benchmarks.time_to_result import workloads
from benchmarks.time_to_result.workloads import charlm
from benchmarks.time_to_result.workloads import digits


def test_logistic_optimum_matches_scikit_learn():
  from sklearn.linear_model import LogisticRegression
  rng = np.random.default_rng(7)
  x = rng.normal(size=(200, 5))
  y = rng.integers(0, 3, size=200)
  value, theta = digits.logistic_optimum(x, y, classes=3)
  # scikit-learn minimizes  sum of losses + |w|^2 / (2C):  C = 1 / (n * l2) is our objective
  model = LogisticRegression(C=1 / (200 * digits.LOGISTIC_L2), tol=1e-12, max_iter=10_000)
  model.fit(x, y)
  reference = digits.logistic_objective(model.coef_.T, model.intercept_, x, y, xp=np)
  assert value == pytest.approx(reference, abs=1e-9)
  assert value <= reference + 1e-12
  np.testing.assert_allclose(theta[:15].reshape(5, 3), model.coef_.T, atol=1e-4)

def test_stdlib_sources_leave_out_tests_and_site_packages(tmp_path):
  for path in ("a.py", "pkg/b.py", "pkg/tests/c.py", "test/d.py", "site-packages/e.py",
               "idlelib/idle_test/f.py", "pkg/notes.txt", "test_like_name.py"):
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("x = 1\n")
  found = [p.relative_to(tmp_path).as_posix() for p in charlm.stdlib_sources(str(tmp_path))]
  assert found == ["a.py", "pkg/b.py", "test_like_name.py"]

def test_corpus_splits_by_file():
  files = list(range(95))
  splits = charlm.split_files(files)
  assert [len(splits[k]) for k in ("train", "val", "test")] == [77, 9, 9]
  assert sorted(splits["train"] + splits["val"] + splits["test"]) == files

def test_encoding_and_windows():
  np.testing.assert_array_equal(charlm.encode("a\n\u20ac~"), [97, 10, 127, 126])
  corpus = np.arange(100, dtype=np.uint8)
  windows = charlm.fixed_windows(corpus, 3, 10)
  np.testing.assert_array_equal(windows[:, 0], [0, 45, 90])
  np.testing.assert_array_equal(windows[-1], np.arange(90, 100))



def _trainers_loss(name, full, graphdef, batch_size):
  """The workload's training loss as the example trainer's modules compute it."""
  import jax
  import optax
  from flax import nnx

  from examples import augment
  from examples import models

  def loss(params, aux, data, key):
    if name == "convmixer":
      key, k_aug = jax.random.split(key)
    idx = jax.random.randint(key, (batch_size,), 0, data["train_y"].shape[0])
    x, y = data["train_x"][idx], data["train_y"][idx]
    if name == "convmixer":
      x = augment.augment(k_aug, x, "digits")
    x = augment.normalize(x, full.mean, full.std)
    logits, aux = models.apply(graphdef, params, aux, x, True, returned=nnx.Not(nnx.Param))
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), aux
  return loss


@pytest.mark.parametrize("name", ["convmixer", "mlp"])
def test_the_digits_workloads_are_the_example_trainers_bit_for_bit(name):
  """Data, split, augmentation, model, initial parameters and gradients: the
  benchmark's own copies equal the example trainer's, so its results stand.
  """
  import chex
  import jax
  from flax import nnx

  from benchmarks.time_to_result import workloads
  from examples import datasets
  from examples import models
  full = datasets.load_digits(seed=0)
  ours, _ = digits._splits()
  for field in ("train_images", "train_labels", "test_images", "test_labels"):
    np.testing.assert_array_equal(getattr(ours, field), getattr(full, field), err_msg=field)
  assert (ours.mean, ours.std) == (full.mean[0], full.std[0])
  size = dict(dim=8, depth=1) if name == "convmixer" else dict(hidden=16)
  model = (models.ConvMixer(10, kernel=3, patch=1, in_channels=1, rngs=nnx.Rngs(3), **size)
           if name == "convmixer" else models.MLP(10, 1, 8, rngs=nnx.Rngs(3), **size))
  graphdef, want_params, want_aux = nnx.split(model, nnx.Param, ...)
  workload = workloads.build(name, quick=True)
  params, aux = workload.init(jax.random.key(3))
  chex.assert_trees_all_equal(params, want_params)
  chex.assert_trees_all_equal(aux, want_aux)

  key = jax.random.key(5)
  theirs = _trainers_loss(name, full, graphdef, workload.batch_size)
  got = jax.grad(workload.loss, has_aux=True)(params, aux, workload.data, key)
  want = jax.grad(theirs, has_aux=True)(want_params, want_aux, workload.data, key)
  chex.assert_trees_all_equal(got, want)


@pytest.mark.slow  # compiles each workload's loss and metrics
@pytest.mark.parametrize("name", workloads.names() + workloads.wide_names())
def test_each_quick_workload_gives_a_finite_loss_gradient_and_metric(name):
  """What the protocol's quick tests leave to this one: every workload's build
  (they train two, and one wide one, since the protocol's path is the same).
  """
  w = workloads.build(name, quick=True)
  params, aux = w.init(jax.random.key(0))
  (loss, _), grads = jax.jit(jax.value_and_grad(w.loss, has_aux=True))(
      params, aux, w.data, jax.random.key(1))
  assert np.isfinite(loss) and loss > 0
  chex.assert_tree_all_finite(grads)
  assert np.isfinite(w.validate(params, aux, w.data)) and np.isfinite(w.test(params, aux, w.data))
  # per-example VSGD needs an example's loss, which batch statistics rule out
  if w.example_loss is not None:
    x, y = w.batch(w.data, jax.random.key(2))
    assert np.isfinite(w.example_loss(params, aux, x[0], y[0]))

"""A regression MLP on scikit-learn's bundled diabetes data (442 patients, 10 features)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from benchmarks.time_to_result import workloads

# An L2 penalty in the training loss keeps the optimum a model that generalizes,
# so that the final validation error measures the optimizer, not early stopping.
L2 = 1e-2


class RegressionMLP(nnx.Module):
  """features -> hidden -> hidden -> 1, ReLU."""

  def __init__(self, features: int, hidden: int, *, rngs: nnx.Rngs):
    self.layer1 = nnx.Linear(features, hidden, rngs=rngs)
    self.layer2 = nnx.Linear(hidden, hidden, rngs=rngs)
    self.out = nnx.Linear(hidden, 1, rngs=rngs)

  def __call__(self, x):
    return self.out(jax.nn.relu(self.layer2(jax.nn.relu(self.layer1(x)))))[:, 0]


def _splits() -> workloads.Data:
  """60/20/20 train/validation/test, features and target standardized on train."""
  from sklearn.datasets import load_diabetes
  x, y = load_diabetes(return_X_y=True)
  order = np.random.default_rng(0).permutation(len(y))
  n_test = n_val = len(y) // 5
  parts = {"test": order[:n_test], "val": order[n_test:n_test + n_val],
           "train": order[n_test + n_val:]}
  train = parts["train"]
  x_mean, x_std = x[train].mean(0), x[train].std(0)
  y_mean, y_std = y[train].mean(), y[train].std()
  data = {}
  for split, idx in parts.items():
    data[split + "_x"] = jnp.asarray((x[idx] - x_mean) / x_std, jnp.float32)
    data[split + "_y"] = jnp.asarray((y[idx] - y_mean) / y_std, jnp.float32)
  return data


def diabetes(quick: bool, hidden: int = 32) -> workloads.Workload:
  """The regression MLP; ``hidden`` 256 is the wide variant (``diabetes_wide``), whose
  256 x 256 layer factors in ``factored_vsgd``.
  """
  data = _splits()
  graphdef, init = workloads.functional(
      lambda rngs: RegressionMLP(10, 8 if quick else hidden, rngs=rngs))
  batch_size = 128  # of 266 training rows: gradients close to full-batch ones

  def loss(params, aux, data, key):
    idx = jax.random.randint(key, (batch_size,), 0, data["train_y"].shape[0])
    pred, _ = workloads.apply(graphdef, params, aux, data["train_x"][idx], train=True)
    penalty = sum(jnp.sum(p ** 2) for p in jax.tree.leaves(params))
    return jnp.mean((pred - data["train_y"][idx]) ** 2) + 0.5 * L2 * penalty, aux

  def mse_on(split):
    def metric(params, aux, data):
      pred, _ = workloads.apply(graphdef, params, aux, data[split + "_x"], train=False)
      return jnp.mean((pred - data[split + "_y"]) ** 2)
    return metric

  return workloads.Workload(
      name="diabetes" if hidden == 32 else "diabetes_wide",
      title="Regression MLP on diabetes" + ("" if hidden == 32 else f", width {hidden}"),
      description=f"An MLP (10-{hidden}-{hidden}-1, ReLU) on scikit-learn's diabetes data, "
                  "60/20/20 split, "
                  "features and target standardized on the training part (an MSE of 1 is the "
                  f"constant predictor), batch 128 of 266 rows, training loss MSE + {L2}/2 "
                  "times the squared norm of the parameters.",
      data=data, init=init, loss=loss, validate=mse_on("val"), test=mse_on("test"),
      metric="MSE", higher_is_better=False, target=0.55,
      steps=8 if quick else 500, eval_every=4 if quick else 25, batch_size=batch_size)

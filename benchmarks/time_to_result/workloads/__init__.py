"""The time-to-result workloads: each a model, its data and its validation target.

A workload is a handful of pure functions over explicit arrays, so that one
jitted loop can train many runs of it side by side (``jax.vmap``) or one after
another. ``build(name, quick)`` returns one; ``quick`` shrinks it for the
smoke test. How the harness tunes and drives a workload (its learning-rate
grid, its steps inside ``lax.scan`` or not) is ``harness``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

Params = Any
Aux = Any  # the model's non-trainable state (batch statistics), or an empty state
Data = dict  # name -> array, passed to every function as a jit argument


@dataclasses.dataclass(frozen=True)
class Workload:
  """One benchmark problem.

  ``loss(params, aux, data, key) -> (mean loss, new aux)`` draws its own
  training batch from ``data`` with ``key``. ``example_loss(params, aux, x, y)``
  is the loss of ONE example (per-example VSGD), present only where the model
  has no batch statistics. ``validate`` and ``test`` return the workload's
  metric on those splits; ``batch(data, key)`` gives ``(x, y)`` for
  ``example_loss``.
  """
  name: str
  title: str
  description: str
  data: Data
  init: Callable[[jax.Array], tuple[Params, Aux]]
  loss: Callable[[Params, Aux, Data, jax.Array], tuple[jax.Array, Aux]]
  validate: Callable[[Params, Aux, Data], jax.Array]
  test: Callable[[Params, Aux, Data], jax.Array]
  metric: str
  higher_is_better: bool
  target: float
  steps: int
  eval_every: int
  batch_size: int
  batch: Callable[[Data, jax.Array], tuple[jax.Array, jax.Array]] | None = None
  example_loss: Callable[..., jax.Array] | None = None
  log_metric: bool = False  # plot the metric on a log axis

  def reached(self, value: float) -> bool:
    """Whether a validation value meets the target (NaN never does)."""
    return bool(value >= self.target) if self.higher_is_better else bool(value <= self.target)


def functional(make_model: Callable[[nnx.Rngs], nnx.Module]):
  """``(graphdef, init)`` for an NNX model: ``init(key) -> (params, aux)``.

  The graph is built once here, outside any trace; ``init`` builds the model
  again from the key inside a trace and keeps only its state.
  """
  graphdef, _, _ = nnx.split(make_model(nnx.Rngs(0)), nnx.Param, ...)

  def init(key):
    _, params, aux = nnx.split(make_model(nnx.Rngs(key)), nnx.Param, ...)
    return params, aux
  return graphdef, init


def apply(graphdef, params, aux, x, train: bool):
  """Runs the model held as ``functional``'s ``graphdef, params, aux`` on ``x``, in
  training or evaluation mode, as a pure function: its output and its new ``aux``
  (every variable that is not a parameter). ``params`` and ``aux`` are not changed.
  """
  model = nnx.merge(graphdef, params, aux, copy=True)
  model.train() if train else model.eval()
  return model(x), nnx.state(model, nnx.Not(nnx.Param))


def names() -> tuple[str, ...]:
  """The main protocol's five workloads."""
  return ("mlp", "diabetes", "logreg", "charlm", "convmixer")


def wide_names() -> tuple[str, ...]:
  """Wider variants, whose large matrices ``factored_vsgd`` factors (at its default
  threshold of 128, none of the five main workloads has one).
  """
  return ("mlp_wide", "diabetes_wide", "charlm_wide")


def build(name: str, quick: bool = False) -> Workload:
  """The workload called ``name`` (one of ``names()`` or ``wide_names()``)."""
  from benchmarks.time_to_result.workloads import charlm
  from benchmarks.time_to_result.workloads import digits
  from benchmarks.time_to_result.workloads import regression
  builders = {"convmixer": digits.convmixer, "mlp": digits.mlp, "logreg": digits.logistic,
              "charlm": charlm.charlm, "diabetes": regression.diabetes,
              "mlp_wide": lambda quick: digits.mlp(quick, wide=True),
              "diabetes_wide": lambda quick: regression.diabetes(quick, hidden=256),
              "charlm_wide": lambda quick: charlm.charlm(quick, dim=128)}
  if name not in builders:
    raise ValueError(f"unknown workload {name!r}; choose from "
                     f"{', '.join(names() + wide_names())}")
  return builders[name](quick)

"""Per-example VSGD: the moments of per-example gradients.

Each example's gradient is an observation of its own (the paper's appendix
"Treating Samples Separately in a Mini-batch"); in closed form only the mean and
the biased variance of the per-example gradients enter (``docs/algorithm.md``),
so ``update(mean, state, grad_variance=variance)`` is exact.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax


def per_example_moments(per_example_grads: Any) -> tuple[Any, Any]:
  """Mean and biased variance over the leading (batch) axis of every leaf.

  Args:
    per_example_grads: a pytree whose leaves have a leading axis of size M,
      one slice per example (as ``jax.vmap(jax.grad(loss))`` returns).

  Returns:
    ``(mean, variance)``: pytrees like one example's gradient; the variance
    divides by M, as the paper's averages over the mini-batch do.

  Examples:
    >>> import jax.numpy as jnp
    >>> from vsgd_optax import per_example_moments
    >>> mean, var = per_example_moments({"w": jnp.array([[1.0], [3.0]])})
    >>> mean["w"], var["w"]
    (Array([2.], dtype=float32), Array([1.], dtype=float32))
  """
  def moments(leaf):
    if leaf.ndim == 0:
      raise ValueError(
          "per_example_grads leaves need a leading batch axis; got a scalar. "
          "Compute them with jax.vmap(jax.grad(loss), in_axes=(None, 0, ...)).")
    mean = jnp.mean(leaf, axis=0)
    # Two-pass variance: E[(g - mean)^2] does not cancel like E[g^2] - mean^2.
    variance = jnp.mean(jnp.square(leaf - mean), axis=0)
    return mean, variance
  pairs = jax.tree.map(moments, per_example_grads)
  outer = jax.tree.structure(per_example_grads)
  return jax.tree.transpose(outer, jax.tree.structure((0, 0)), pairs)


def per_example_value_and_grad(
    loss_fn: Callable[..., jax.Array],
) -> Callable[..., tuple[jax.Array, Any, Any]]:
  """Wraps ``loss_fn(params, example...)`` to return the loss and gradient moments.

  The returned function takes ``(params, *batch)`` where every array of
  ``batch`` has a leading axis of M examples, evaluates ``loss_fn`` on each
  example separately (``jax.vmap`` over ``jax.value_and_grad``), and returns
  ``(mean_loss, mean_grad, grad_variance)``, ready for
  ``opt.update(mean_grad, state, params, grad_variance=grad_variance)``.

  The per-example gradients are materialized (M times the params). With batch
  normalization, freeze the running statistics: an example alone has other ones.

  Args:
    loss_fn: a function ``(params, *example) -> scalar loss`` for ONE example
      (arrays without the batch axis).

  Returns:
    A function ``(params, *batch) -> (mean_loss, mean_grad, grad_variance)``.
  """
  value_and_grad = jax.value_and_grad(loss_fn)

  def wrapped(params: optax.Params, *batch: jax.Array):
    in_axes = (None,) + (0,) * len(batch)
    losses, grads = jax.vmap(value_and_grad, in_axes=in_axes)(params, *batch)
    mean_grad, grad_variance = per_example_moments(grads)
    return jnp.mean(losses), mean_grad, grad_variance

  return wrapped

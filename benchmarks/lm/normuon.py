r"""NorMuon (Li et al., 2025): Muon whose orthogonalized step is normalized per neuron.

From the paper (arXiv 2510.05491, Algorithm 1) and its authors' code
(``normuon_update`` of github.com/zichongli5/NorMuon), for a kernel
:math:`W` of ``(fan_in, fan_out)`` (the transpose of PyTorch's ``(out, in)``):

.. math::

  m_t &= \beta m_{t-1} + (1 - \beta) g_t, \quad
  u_t = \beta m_t + (1 - \beta) g_t \quad \text{(Nesterov; } u_t = m_t
  \text{ without)} \\
  O_t &= \operatorname{NS}_5(u_t) \\
  v_t &= \beta_2 v_{t-1} + (1 - \beta_2)\, \operatorname{mean}_\text{fan\_in}(O_t^2)
  \quad \text{(one number an output neuron; } v_0 = 0) \\
  \hat O_t &= \frac{O_t}{\sqrt{v_t} + \epsilon}
  \cdot \frac{\lVert O_t \rVert_F}{\lVert O_t / (\sqrt{v_t} + \epsilon) \rVert_F + \epsilon}
  \cdot \sqrt{\max(1, \text{fan\_out} / \text{fan\_in})} \\
  W_t &= W_{t-1} - \eta_t \hat O_t \quad \text{(decoupled decay, if any, as AdamW's)}

The step's norm is Muon's, and so is its width scale: the authors' code keeps
Muon's learning-rate scaling and renormalizes after the per-neuron division
(the paper's Algorithm 1 instead scales by :math:`0.2\sqrt{mn}/\lVert\hat
O_t\rVert_F`, to share AdamW's rate). Keeping Muon's scale lets one rate window
serve Muon and NorMuon alike. Neither :math:`m` nor :math:`v` is bias-corrected,
as in the authors' code: Newton-Schulz divides by its input's norm, and the
renormalization undoes any common scale of :math:`v`. Newton-Schulz is
``optax.contrib.scale_by_muon``'s (its coefficients and its Frobenius
preconditioning), which with ``beta=0`` and no Nesterov step orthogonalizes
its input as it is.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

BETA, BETA2, EPS = 0.95, 0.95, 1e-10  # the authors' defaults


class ScaleByNorMuonState(NamedTuple):
  """State of :func:`scale_by_normuon`."""
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates  # the momentum m, like the params
  nu: optax.Updates  # v: shape (1, fan_out) a kernel, one per output neuron


def scale_by_normuon(beta: float = BETA, beta2: float = BETA2, eps: float = EPS,
                     ns_steps: int = 5, nesterov: bool = True) -> optax.GradientTransformation:
  """NorMuon's step of every leaf, each a 2-D ``(fan_in, fan_out)`` kernel."""
  orthogonalize = optax.contrib.scale_by_muon(ns_steps=ns_steps, beta=0.0, nesterov=False)

  def init_fn(params):
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
      if leaf.ndim != 2:
        raise ValueError(f"scale_by_normuon steps 2-D kernels only; "
                         f"{jax.tree_util.keystr(path)} has shape {leaf.shape}")
    return ScaleByNorMuonState(
        count=jnp.zeros([], jnp.int32), mu=optax.tree.zeros_like(params),
        nu=jax.tree.map(lambda p: jnp.zeros((1, p.shape[1]), p.dtype), params))

  def leaf_step(g, m, v):
    m = beta * m + (1 - beta) * g
    u = beta * m + (1 - beta) * g if nesterov else m
    ortho, _ = orthogonalize.update(u, orthogonalize.init(u))
    v = beta2 * v + (1 - beta2) * jnp.mean(jnp.square(ortho), axis=0, keepdims=True)
    divided = ortho / (jnp.sqrt(v) + eps)
    step = divided * (jnp.linalg.norm(ortho) / (jnp.linalg.norm(divided) + eps))
    fan_in, fan_out = g.shape
    return step * jnp.sqrt(max(1.0, fan_out / fan_in)), m, v

  def update_fn(updates, state, params=None):
    del params
    out = jax.tree.map(leaf_step, updates, state.mu, state.nu)
    pick = lambda k: jax.tree.map(lambda _, o: o[k], updates, out)
    return pick(0), ScaleByNorMuonState(optax.safe_increment(state.count), pick(1), pick(2))

  return optax.GradientTransformation(init_fn, update_fn)


def normuon(learning_rate: optax.ScalarOrSchedule, beta: float = BETA, beta2: float = BETA2,
            eps: float = EPS, weight_decay: float = 0.0) -> optax.GradientTransformation:
  """NorMuon with decoupled decay (the authors' ``p.mul_(1 - lr * wd)``) and the rate."""
  return optax.chain(scale_by_normuon(beta, beta2, eps), optax.add_decayed_weights(weight_decay),
                     optax.scale_by_learning_rate(learning_rate))

r"""Muon-VS (Li, Fan and Li, 2026): Muon whose momentum is divided by the gradient's spread first.

The parameter-free form of variance-adaptive Muon (arXiv 2601.14603), for a
kernel :math:`W` of ``(fan_in, fan_out)``, elementwise but for
:math:`\operatorname{NS}`:

.. math::

  M_t &= \beta M_{t-1} + (1 - \beta) G_t \\
  \Gamma_t &= \beta \Gamma_{t-1} + \beta (1 - \beta) (M_{t-1} - G_t)^2 \\
  \hat M_t &= M_t / (1 - \beta^t), \quad \hat\Gamma_t = \Gamma_t / (1 - \beta^t) \\
  \tilde M_t &= G_t + \tfrac{\beta}{1 - \beta} \hat M_t \\
  \bar M_t &= \tilde M_t / \sqrt{\hat\Gamma_t + \epsilon} \\
  O_t &= \operatorname{NS}_5(\bar M_t) \cdot \sqrt{\max(1, \text{fan\_out} / \text{fan\_in})} \\
  W_t &= W_{t-1} (1 - \eta_t \lambda) - \eta_t O_t

What was confirmed and what was not: the equations above are the paper's as
its abstract describes them (a momentum and a variance tracker of the gradient
about the previous momentum, both bias-corrected, a Nesterov look-ahead
divided elementwise by the variance's square root, then Newton-Schulz) and as
a public rendering of its algorithm citing the paper writes them; the paper's
own algorithm box and its code were not reached. Not confirmed: its default
:math:`\beta` and :math:`\epsilon`, here Muon's 0.95 and 1e-8 (inside the
square root, as the rendering writes it), and its step's scale, here
``optax.contrib.muon``'s (its Newton-Schulz coefficients, Frobenius
preconditioning and width scale), so that Muon's and Muon-VS's rates share
one window.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

BETA, EPS = 0.95, 1e-8
NS_COEFFS = (3.4445, -4.775, 2.0315)  # optax.contrib.muon's


class ScaleByMuonVSState(NamedTuple):
  """State of :func:`scale_by_muon_vs`."""
  count: jax.Array  # type: ignore[assignment]  # shape=(), int32 (shadows tuple.count)
  mu: optax.Updates  # M, like the params
  gamma: optax.Updates  # Gamma, like the params


def _orthogonalize(x: jax.Array, ns_steps: int) -> jax.Array:
  # Public in optax.contrib from some release on; in its private module before.
  newton_schulz = getattr(optax.contrib, "orthogonalize_via_newton_schulz", None)
  if newton_schulz is None:
    from optax.contrib import _muon
    newton_schulz = _muon.orthogonalize_via_newton_schulz
  return newton_schulz(x, jnp.asarray(NS_COEFFS), ns_steps)


def scale_by_muon_vs(beta: float = BETA, eps: float = EPS,
                     ns_steps: int = 5) -> optax.GradientTransformation:
  """Muon-VS's step of every leaf, each a 2-D ``(fan_in, fan_out)`` kernel.

  Args:
    beta: the decay of the momentum and of the variance tracker, in [0, 1).
    eps: added to the variance inside the square root, > 0.
    ns_steps: Newton-Schulz iterations.

  Returns:
    An ``optax.GradientTransformation``.
  """
  def init_fn(params):
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
      if leaf.ndim != 2:
        raise ValueError(f"scale_by_muon_vs steps 2-D kernels only; "
                         f"{jax.tree_util.keystr(path)} has shape {leaf.shape}")
    return ScaleByMuonVSState(count=jnp.zeros([], jnp.int32), mu=optax.tree.zeros_like(params),
                              gamma=optax.tree.zeros_like(params))

  def update_fn(updates, state, params=None):
    del params
    count = optax.safe_increment(state.count)

    def leaf_step(g, m_prev, gamma_prev):
      correction = 1 - beta ** count.astype(g.dtype)  # the bias correction, in g's precision
      m = beta * m_prev + (1 - beta) * g
      gamma = beta * gamma_prev + beta * (1 - beta) * jnp.square(m_prev - g)
      lookahead = g + beta / (1 - beta) * (m / correction)
      scaled = lookahead / jnp.sqrt(gamma / correction + eps)
      fan_in, fan_out = g.shape
      step = _orthogonalize(scaled, ns_steps) * jnp.sqrt(max(1.0, fan_out / fan_in))
      return step, m, gamma

    out = jax.tree.map(leaf_step, updates, state.mu, state.gamma)
    pick = lambda k: jax.tree.map(lambda _, o: o[k], updates, out)
    return pick(0), ScaleByMuonVSState(count, pick(1), pick(2))

  return optax.GradientTransformation(init_fn, update_fn)


def muon_vs(learning_rate: optax.ScalarOrSchedule, beta: float = BETA, eps: float = EPS,
            weight_decay: float = 0.0) -> optax.GradientTransformation:
  """Muon-VS with decoupled weight decay (times the rate) and the rate.

  Args:
    learning_rate: the peak rate or a schedule.
    beta: the decay of the momentum and of the variance tracker.
    eps: added to the variance inside the square root.
    weight_decay: decoupled decay, multiplied by the rate.

  Returns:
    An ``optax.GradientTransformation``.
  """
  return optax.chain(scale_by_muon_vs(beta, eps), optax.add_decayed_weights(weight_decay),
                     optax.scale_by_learning_rate(learning_rate))

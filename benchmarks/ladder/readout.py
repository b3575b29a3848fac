"""The momentum study's read-out: VSGD-Muon's effective beta1, read between chunks of its runs.

``train_with_readout`` trains ``READOUT_ENTRY``'s lanes with the ladder's chunk
program (``lm.train.train_chunks``) and reads, after each chunk, the
quantiles of ``vsgd_optax.effective_beta1`` over every element of every hidden
kernel.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import vsgd_optax
from benchmarks.ladder import entries
from benchmarks.ladder import protocol
from benchmarks.lm import model
from benchmarks.lm import train as lm_train

READOUT_ENTRY = "vsgd_muon"  # the entry whose effective beta1 the momentum study reads
QUANTILES = (0.1, 0.5, 0.9)  # of the read-out, over every element of every hidden kernel
# The ladder's VSGD-Muon keeps vsgd_muon's own K_g and gamma (entries.RECIPE sets neither);
# the read-out rebuilds each element's factored rates from them, so it takes them from the
# same place.
_VSGD_MUON = inspect.signature(vsgd_optax.vsgd_muon).parameters
VARIANCE_RATIO = float(_VSGD_MUON["variance_ratio"].default)
PRIOR_STRENGTH = float(_VSGD_MUON["prior_strength"].default)


def matrices_state(opt_state):
  """The hidden kernels' VSGD state in a ``"vsgd_muon"`` entry's optimizer state: the
  entry is ``vsgd_optax.vsgd_muon`` itself, an ``optax.partition`` whose ``"muon"`` group
  holds them (its docstring names ``state.inner_states["muon"]`` for the read-outs).
  """
  return opt_state.inner_states["muon"]


@functools.cache
def beta1_quantiles() -> Callable:
  """Jitted over a program's lanes: ``state -> (lanes, 3)``, each lane's ``QUANTILES`` of
  ``vsgd_optax.effective_beta1`` over every element of every hidden kernel, pooled.
  """
  def one(state):
    beta1 = vsgd_optax.effective_beta1(matrices_state(state["opt"]),
                                       variance_ratio=VARIANCE_RATIO,
                                       prior_strength=PRIOR_STRENGTH)
    # The AdamW group's leaves are optax's MaskedNode, which holds no array.
    pooled = jnp.concatenate([leaf.ravel() for leaf in jax.tree.leaves(beta1)])
    return jnp.quantile(pooled, jnp.asarray(QUANTILES, jnp.float32))
  return jax.jit(jax.vmap(one))


def readout_chunk(steps: int) -> int:
  """The chunk that reads a run of ``steps`` at least ``protocol.READOUT_POINTS`` times
  (every step of a shorter one): the chunks end at evenly spread steps, the last at
  ``steps``.
  """
  return max(1, steps // protocol.READOUT_POINTS)


def train_with_readout(size: model.Size, steps: int, peaks, adam_peaks, seeds, data: dict,
                       deadline: float | None = None) -> dict:
  """``lm.train.train_chunks`` of ``READOUT_ENTRY``'s lanes, its chunk
  ``readout_chunk(steps)``, with the read-out between chunks: ``train``'s result and ``"effective_beta1"``: ``step`` (the
  steps done at each point), ``q10``, ``median`` and ``q90`` (arrays of lanes x points).
  The chunk program is the one ``run`` trains, so the lanes' bits are those it gives.
  """
  points: list[tuple[int, np.ndarray]] = []
  read = beta1_quantiles()

  def observe(state, done):
    # Read to the host now: the next chunk takes the state's buffers over.
    points.append((done, np.asarray(read(state), np.float64)))

  out = lm_train.train_chunks(entries.builder(READOUT_ENTRY), size, steps, peaks, adam_peaks,
                              seeds, data, chunk=readout_chunk(steps), deadline=deadline,
                              observe=observe)
  values = np.stack([q for _, q in points], axis=1)  # lanes x points x quantiles
  out["effective_beta1"] = {"step": [done for done, _ in points], "q10": values[..., 0],
                            "median": values[..., 1], "q90": values[..., 2]}
  return out

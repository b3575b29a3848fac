"""The studies' transformer language model, in plain JAX: a params dict, a loss.

A pre-LN causal transformer over characters: token and learned position
embeddings, ``layers`` blocks of multi-head self-attention and a GELU MLP, a
final LayerNorm and an untied head. Every projection is a 2-D kernel
``(fan_in, fan_out)``, the attention's included (queries, keys, values and
output each ``(width, width)``), so that Muon and VSGD-Muon orthogonalize the
same matrices. Plain JAX rather than Flax so that a whole grid of rates and
seeds is one ``vmap`` of one function of the params.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

VOCAB = 128


@dataclasses.dataclass(frozen=True)
class Size:
  """A model and its batch: ``width`` divides by ``heads``."""
  width: int
  layers: int
  heads: int
  context: int
  batch: int
  mlp: int = 0  # 0: four times the width

  @property
  def hidden(self) -> int:
    return self.mlp or 4 * self.width


def _dense(key, fan_in, fan_out, scale=1.0):
  return scale * jax.random.normal(key, (fan_in, fan_out)) / math.sqrt(fan_in)


def init(key: jax.Array, size: Size) -> dict:
  """Params with GPT-2's initialization: N(0, 1/fan_in) kernels, the residual
  outputs scaled down by the depth, zero biases, unit LayerNorm scales.
  """
  keys = iter(jax.random.split(key, 3 + 6 * size.layers))
  residual = 1.0 / math.sqrt(2 * size.layers)
  w, h = size.width, size.hidden
  blocks = []
  for _ in range(size.layers):
    blocks.append({
        "norm1": {"scale": jnp.ones(w), "bias": jnp.zeros(w)},
        "query": _dense(next(keys), w, w), "key": _dense(next(keys), w, w),
        "value": _dense(next(keys), w, w), "out": _dense(next(keys), w, w, residual),
        "norm2": {"scale": jnp.ones(w), "bias": jnp.zeros(w)},
        "up": _dense(next(keys), w, h), "up_bias": jnp.zeros(h),
        "down": _dense(next(keys), h, w, residual), "down_bias": jnp.zeros(w)})
  return {"embed": 0.02 * jax.random.normal(next(keys), (VOCAB, w)),
          "position": 0.02 * jax.random.normal(next(keys), (size.context, w)),
          "blocks": blocks,
          "norm": {"scale": jnp.ones(w), "bias": jnp.zeros(w)},
          "head": _dense(next(keys), w, VOCAB)}


# The leaves that Muon's users step with AdamW: the embedding, the positions and
# the head (and, as every Muon does, the vectors).
ADAMW_MATRICES = ("embed", "position", "head")


def matrix_labels(params: dict) -> dict:
  """``"matrices"`` for the hidden 2-D kernels, ``"adamw"`` for everything else."""
  def label(path, leaf):
    top = getattr(path[0], "key", None)
    return "matrices" if leaf.ndim == 2 and top not in ADAMW_MATRICES else "adamw"
  return jax.tree_util.tree_map_with_path(label, params)


def _norm(x, p):
  mean = jnp.mean(x, -1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
  return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def _attention(x, block, heads):
  batch, length, width = x.shape
  split = lambda y: y.reshape(batch, length, heads, width // heads)
  q, k, v = (split(x @ block[name]) for name in ("query", "key", "value"))
  logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(width // heads)
  causal = jnp.tril(jnp.ones((length, length), bool))
  weights = jax.nn.softmax(jnp.where(causal, logits, -1e30), axis=-1)
  return jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, length, width) @ block["out"]


def logits(params: dict, tokens: jax.Array, heads: int) -> jax.Array:
  x = params["embed"][tokens] + params["position"][:tokens.shape[-1]]
  for block in params["blocks"]:
    x = x + _attention(_norm(x, block["norm1"]), block, heads)
    hidden = jax.nn.gelu(_norm(x, block["norm2"]) @ block["up"] + block["up_bias"])
    x = x + hidden @ block["down"] + block["down_bias"]
  return _norm(x, params["norm"]) @ params["head"]


def nats(params: dict, windows: jax.Array, heads: int) -> jax.Array:
  """Mean cross-entropy of each next character of ``windows`` (context + 1 long)."""
  inputs, targets = windows[..., :-1].astype(jnp.int32), windows[..., 1:].astype(jnp.int32)
  out = logits(params, inputs, heads)
  log_probs = jax.nn.log_softmax(out.astype(jnp.float32), axis=-1)
  return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def count(size: Size) -> int:
  shapes = jax.eval_shape(lambda key: init(key, size), jax.random.key(0))
  return sum(x.size for x in jax.tree.leaves(shapes))

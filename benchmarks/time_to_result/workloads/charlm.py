"""A character-level transformer language model on the Python standard library's sources.

The corpus is on every machine that runs Python: the ``.py`` files of the
standard library (``sysconfig``'s ``stdlib`` path), without ``site-packages``
and without the test suites. Files, not characters, are split into train,
validation and test (80/10/10, a fixed shuffle), so that no file is seen in
two splits. Characters are code points, those above 127 folded into one
symbol (127), so the vocabulary has 128 entries. The metric is bits per
character on fixed windows of the validation (test) files.
"""

from __future__ import annotations

import math
import pathlib
import sysconfig

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from benchmarks.lm import corpus
from benchmarks.time_to_result import workloads

VOCAB = corpus.VOCAB
EXCLUDED_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_sources(root: str | None = None) -> list[pathlib.Path]:
  """The standard library's ``.py`` files, sorted, tests and site-packages left out."""
  base = pathlib.Path(root or sysconfig.get_paths()["stdlib"])
  found = [p for p in base.rglob("*.py")
           if not EXCLUDED_DIRS.intersection(p.relative_to(base).parts[:-1])]
  return sorted(found)


# The char LMs read text alike: code points folded to 128, files split 80/10/10.
encode = corpus.encode
split_files = corpus.split_tenths


def _corpus(files) -> np.ndarray:
  return np.concatenate([encode(p.read_text(encoding="utf-8", errors="replace") + "\n")
                         for p in files])


def fixed_windows(corpus: np.ndarray, count: int, length: int) -> np.ndarray:
  """``count`` windows of ``length`` characters, evenly spread over the corpus."""
  starts = np.linspace(0, len(corpus) - length, count).astype(np.int64)
  return np.stack([corpus[s:s + length] for s in starts])


class Block(nnx.Module):
  """Pre-norm transformer block: causal self-attention, then a 4x GELU MLP."""

  def __init__(self, dim: int, heads: int, *, rngs: nnx.Rngs):
    self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
    self.attention = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False,
                                            rngs=rngs)
    self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
    self.up = nnx.Linear(dim, 4 * dim, rngs=rngs)
    self.down = nnx.Linear(4 * dim, dim, rngs=rngs)

  def __call__(self, x, mask):
    x = x + self.attention(self.norm1(x), mask=mask, deterministic=True)
    return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


class CharTransformer(nnx.Module):
  """Token and learned position embeddings, ``layers`` blocks, a final norm, logits."""

  def __init__(self, context: int, dim: int, heads: int, layers: int, *, rngs: nnx.Rngs):
    self.embed = nnx.Embed(VOCAB, dim, rngs=rngs)
    self.position = nnx.Param(0.02 * jax.random.normal(rngs.params(), (context, dim)))
    self.blocks = nnx.List([Block(dim, heads, rngs=rngs) for _ in range(layers)])
    self.norm = nnx.LayerNorm(dim, rngs=rngs)
    self.head = nnx.Linear(dim, VOCAB, rngs=rngs)

  def __call__(self, tokens):
    length = tokens.shape[-1]
    x = self.embed(tokens) + self.position[:length]
    mask = jnp.tril(jnp.ones((length, length), bool))[None, None]
    for block in self.blocks:
      x = block(x, mask)
    return self.head(self.norm(x))


def charlm(quick: bool, dim: int = 64) -> workloads.Workload:
  """The character-level transformer; ``dim`` 128 is the wide variant (``charlm_wide``),
  whose embedding, head and feed-forward matrices factor in ``factored_vsgd``.
  """
  files = stdlib_sources()
  if quick:
    files = files[:30]
  splits = split_files(files)
  context, batch_size = (16, 4) if quick else (64, 16)
  windows = 8 if quick else 128
  data = {"train": jnp.asarray(_corpus(splits["train"]))}
  for split in ("val", "test"):
    data[split] = jnp.asarray(fixed_windows(_corpus(splits[split]), windows, context + 1))
  size = dict(dim=8, heads=2, layers=1) if quick else dict(dim=dim, heads=4, layers=2)
  graphdef, init = workloads.functional(
      lambda rngs: CharTransformer(context, rngs=rngs, **size))

  def nats(params, aux, windows):
    logits, _ = workloads.apply(graphdef, params, aux, windows[:, :-1].astype(jnp.int32),
                                train=True)
    targets = windows[:, 1:].astype(jnp.int32)
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, targets))

  def loss(params, aux, data, key):
    starts = jax.random.randint(key, (batch_size,), 0, data["train"].shape[0] - context - 1)
    windows = data["train"][starts[:, None] + jnp.arange(context + 1)]
    return nats(params, aux, windows), aux

  def bits_on(split):
    def metric(params, aux, data):
      return nats(params, aux, data[split]) / math.log(2.0)
    return metric

  chars = {k: int(v.size) for k, v in data.items()}
  return workloads.Workload(
      name="charlm" if dim == 64 else "charlm_wide",
      title="Character-level transformer on the Python standard library"
            + ("" if dim == 64 else f", width {dim}"),
      description=f"A causal transformer ({size['layers']} layers, width {size['dim']}, "
                  f"{size['heads']} heads, context {context}) on the standard library's .py "
                  f"files ({len(files)} files, split by file: {chars['train']:,} training "
                  f"characters; validation and test: {windows} fixed windows each), batch "
                  f"{batch_size}. Metric: bits per character.",
      data=data, init=init, loss=loss, validate=bits_on("val"), test=bits_on("test"),
      metric="bits per character", higher_is_better=False, target=3.4,
      steps=8 if quick else 300, eval_every=4 if quick else 25, batch_size=batch_size)

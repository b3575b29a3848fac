"""What an optimizer's step costs to compile next to Adam's, on trees of many leaves.

The step is the optimizer's ``update`` and ``optax.apply_updates`` under ``jit``
with the state and params donated, on a transformer-shaped tree: per layer q, k,
v, o, two MLP matrices, two biases and two norms' scales and offsets at width
256, and a final norm (12 leaves a layer and 2). Compile time is paid at every
start, and it grows with the number of leaves that are not alike; a tree that
stacks each of a layer's leaves over the layers (as a scan over layers holds
it) has 14 leaves whatever the depth. Each row is ``lower()`` and ``compile()``
after ``jax.clear_caches()``, the median of the repeats, taken round-robin with
Adam's in the same process; the ratio is the total over Adam's.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from benchmarks.optimizers import REGISTRY

WIDTH = 256
LAYERS = (6, 24, 83)  # 74, 290 and 998 leaves
STACKED = (24,)  # the depths measured as stacked trees too
STATES = ("adam", "vsgd", "vsgd+bf16_nearest", "vsgd+bf16_state", "factored_vsgd")


def transformer_shapes(layers: int, width: int = WIDTH,
                       stacked: bool = False) -> dict[str, tuple[int, ...]]:
  """The leaves' shapes: 12 a layer and a final norm's 2; ``stacked``, each of a
  layer's leaves once, with a leading axis of ``layers`` (14 leaves).
  """
  layer = {name: (width, width) for name in ("q", "k", "v", "o")}
  layer.update(mlp_in=(width, 4 * width), mlp_out=(4 * width, width),
               mlp_in_bias=(4 * width,), mlp_out_bias=(width,))
  for norm in ("norm1", "norm2"):
    layer[norm + "_scale"] = layer[norm + "_offset"] = (width,)
  if stacked:
    shapes = {f"layers/{name}": (layers, *shape) for name, shape in layer.items()}
  else:
    shapes = {f"layer{i:03d}/{name}": shape for i in range(layers) for name, shape in layer.items()}
  shapes["final_norm_scale"] = shapes["final_norm_offset"] = (width,)
  return shapes


def compile_seconds(opt, params) -> tuple[float, float]:
  """Seconds to lower and to compile the donated step, from a cleared cache."""
  state = jax.eval_shape(opt.init, params)
  step = jax.jit(common.optimizer_step(opt), donate_argnums=(0, 1))
  jax.clear_caches()
  t0 = time.perf_counter()
  lowered = step.lower(params, state, params)
  t1 = time.perf_counter()
  lowered.compile()
  return t1 - t0, time.perf_counter() - t1


def measure(layer_counts=LAYERS, stacked=STACKED, repeats: int = 3,
            states=STATES) -> list[dict]:
  """A row per tree and state: median lower, compile and total seconds, and the
  total over Adam's.
  """
  rows = []
  for layers, is_stacked in [(n, False) for n in layer_counts] + [(n, True) for n in stacked]:
    params = {name: jax.ShapeDtypeStruct(shape, jnp.float32)
              for name, shape in transformer_shapes(layers, stacked=is_stacked).items()}
    runs: dict[str, list] = {state: [] for state in states}
    for _ in range(repeats):
      for state in states:
        runs[state].append(compile_seconds(REGISTRY[state].build(1e-3), params))
    adam_total = float(np.median([sum(s) for s in runs["adam"]]))
    for state, samples in runs.items():
      total = float(np.median([sum(s) for s in samples]))
      rows.append({"leaves": len(params), "layers": layers, "stacked": is_stacked,
                   "optimizer": state, "lower_s": float(np.median([s[0] for s in samples])),
                   "compile_s": float(np.median([s[1] for s in samples])), "total_s": total,
                   "ratio_to_adam": total / adam_total, "repeats": repeats})
  return rows

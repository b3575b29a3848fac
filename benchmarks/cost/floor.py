"""Each optimizer state against its floor: the bytes an ideal fused step must move.

A donated step (``update`` + ``apply_updates``) must read the params, the
gradient and the state and write the params and the state, once each: its
*floor*, in bytes a parameter (float32 params and gradients). A step that sits
at its floor on a GPU is as fast as its memory allows; one above it spends
compute (a hash, divides) or temporaries. ``measure`` records, for each state,
the floor next to what XLA's ``cost_analysis`` of the compiled step counts an
element on this machine's backend (bytes accessed and flops, which on XLA:CPU
count every elementwise operation). ``BOUNDS`` are the CPU's counts a change
may not exceed: a test checks them on a small leaf, so that a step cannot grow
its work per element unnoticed.
"""

from __future__ import annotations

from benchmarks import common

SIDE = 512  # the measured leaf: a SIDE x SIDE float32 matrix
# Bytes a parameter an ideal fused step moves: params read and written (8),
# the gradient read (4), and each state array read and written.
FLOOR_BYTES = {"adam": 8 + 4 + 2 * 8, "adam+bf16_mu": 8 + 4 + 2 * 2 + 2 * 4,
               "vsgd": 8 + 4 + 3 * 8, "vsgd+bf16_nearest": 8 + 4 + 3 * 4,
               "vsgd+bf16_state": 8 + 4 + 3 * 4, "factored_vsgd": 8 + 4 + 8}
# The most that ``cost_analysis`` may count an element on the CPU: (flops, bytes),
# today's counts (2026-11-28, jax 0.10.2) with about 5% of room.
BOUNDS = {"adam": (14, 42), "adam+bf16_mu": (20, 44), "vsgd": (48, 93),
          "vsgd+bf16_nearest": (89, 108), "vsgd+bf16_state": (145, 108),
          "factored_vsgd": (75, 98)}


def _optimizers() -> dict:
  import jax.numpy as jnp
  import optax

  import vsgd_optax
  from vsgd_optax import experimental
  bf16 = jnp.bfloat16
  return {"adam": optax.adam(1e-3), "adam+bf16_mu": optax.adam(1e-3, mu_dtype=bf16),
          "vsgd": vsgd_optax.vsgd(1e-3),
          "vsgd+bf16_nearest": vsgd_optax.vsgd(1e-3, state_dtype=bf16, state_rounding="nearest"),
          "vsgd+bf16_state": vsgd_optax.vsgd(1e-3, state_dtype=bf16),
          "factored_vsgd": experimental.factored_vsgd(1e-3)}


def counts(opt, side: int = SIDE) -> tuple[float, float]:
  """(flops, bytes accessed) an element of the donated step on one square leaf."""
  import jax
  import jax.numpy as jnp
  params = {"w": jnp.zeros((side, side), jnp.float32)}
  grads = {"w": jnp.full((side, side), 1e-3, jnp.float32)}
  step = jax.jit(common.optimizer_step(opt), donate_argnums=(0, 1))
  compiled = step.lower(params, opt.init(params), grads).compile()
  analysis = compiled.cost_analysis()
  analysis = analysis[0] if isinstance(analysis, list) else analysis
  n = side * side
  return float(analysis.get("flops", 0.0)) / n, float(analysis.get("bytes accessed", 0.0)) / n


def measure(side: int = SIDE) -> list[dict]:
  """A row per state: its floor and the counts of its step on this backend."""
  rows = []
  for name, opt in _optimizers().items():
    flops, moved = counts(opt, side)
    rows.append({"state": name, "floor_bytes": FLOOR_BYTES[name],
                 "floor_vs_adam": FLOOR_BYTES[name] / FLOOR_BYTES["adam"],
                 "flops_per_element": flops, "bytes_per_element": moved, "side": side})
  return rows


def over_bounds(rows: list[dict]) -> list[str]:
  """The states whose CPU counts exceed their bounds, in words."""
  return [f"{r['state']}: {r['flops_per_element']:.1f} flops and {r['bytes_per_element']:.1f} "
          f"bytes an element, bound {BOUNDS[r['state']][0]} and {BOUNDS[r['state']][1]}"
          for r in rows if r["flops_per_element"] > BOUNDS[r["state"]][0]
          or r["bytes_per_element"] > BOUNDS[r["state"]][1]]

"""Each optimizer state against its floor: the bytes an ideal fused step must move.

    python -m benchmarks.floor            # writes benchmarks/results/floor.json
    python -m benchmarks.floor --check    # CI: fails where a state grew past its bound

A donated step (``update`` + ``apply_updates``) must read the params, the
gradient and the state and write the params and the state, once each: its
*floor*, in bytes a parameter (float32 params and gradients). A step that sits
at its floor on a GPU is as fast as its memory allows; one above it spends
compute (a hash, divides) or temporaries. This runner records, for each
state, the floor next to what XLA's ``cost_analysis`` of the compiled step
counts an element on this machine (bytes accessed and flops, which on XLA:CPU
count every elementwise operation) and, where a GPU run exists, the GPU's
counts (``gpu_counts``: ``benchmarks.gpu_ablation``'s) and the measured step
over Adam's (``gpu_step``). ``BOUNDS`` are the counts a change may not
exceed: CI checks them on a small tree (``--check``), so that a step cannot
grow its work per element unnoticed.
"""

from __future__ import annotations

import argparse
import os

from benchmarks import common

RESULTS = os.path.join(common.RESULTS, "floor.json")
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


# The states' donated GPU step at 50M parameters with today's package (one lease's
# run of the device suite's step_cost part, donated only, 20 steps in one program a
# sample); the device suite's own step_cost part where that is missing.
GPU_STATES = "step_cost_gpu_states"


def gpu_step(folder: str = common.RESULTS) -> tuple[dict, dict | None]:
  """Each state's donated GPU step over Adam's at the largest size measured, and the
  machine; ``({}, None)`` where no GPU run exists.
  """
  for name in (GPU_STATES, "device_suite"):
    result = common.load(folder, name) or {}
    if result.get("machine", {}).get("platform", "cpu") == "cpu":
      continue
    rows = result.get("rows") or result.get("parts", {}).get("step_cost", {}).get("rows", [])
    rows = [r for r in rows if r["donated"]]
    largest = max((r["params"] for r in rows), default=None)
    if largest:
      return {r["optimizer"]: r["ratio"] for r in rows if r["params"] == largest}, \
          result["machine"]
  return {}, None


def gpu_counts(folder: str = common.RESULTS) -> tuple[dict, dict | None]:
  """Each state's ``cost_analysis`` counts of its step on a GPU (``gpu_ablation.json``'s
  ``counts``: flops and bytes an element), and the machine; ``({}, None)`` where no
  GPU run exists.
  """
  result = common.load(folder, "gpu_ablation") or {}
  if result.get("machine", {}).get("platform", "cpu") == "cpu" or result.get("quick"):
    return {}, None
  return result.get("counts", {}), result["machine"]


def measure(side: int = SIDE) -> dict:
  gpu, gpu_machine = gpu_step()
  gpu_counted, gpu_counts_machine = gpu_counts()
  rows = []
  for name, opt in _optimizers().items():
    flops, moved = counts(opt, side)
    counted = gpu_counted.get(name, {})
    rows.append({"state": name, "floor_bytes": FLOOR_BYTES[name],
                 "floor_vs_adam": FLOOR_BYTES[name] / FLOOR_BYTES["adam"],
                 "flops_per_element": flops, "bytes_per_element": moved,
                 "bound": list(BOUNDS[name]), "gpu_step_vs_adam": gpu.get(name),
                 "gpu_flops_per_element": counted.get("flops_per_element"),
                 "gpu_bytes_per_element": counted.get("bytes_per_element")})
  return {"machine": common.machine(), "side": side, "rows": rows, "gpu_machine": gpu_machine,
          "gpu_counts_machine": gpu_counts_machine}


def over_bounds(result: dict) -> list[str]:
  """The states whose counts exceed their bounds, in words."""
  return [f"{r['state']}: {r['flops_per_element']:.1f} flops and {r['bytes_per_element']:.1f} "
          f"bytes an element, bound {r['bound'][0]} and {r['bound'][1]}"
          for r in result["rows"] if r["flops_per_element"] > r["bound"][0]
          or r["bytes_per_element"] > r["bound"][1]]


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.floor",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--check", action="store_true",
                      help="measure a small leaf and fail where a state exceeds its bound")
  parser.add_argument("--out", default=RESULTS, help=f"result file (default {RESULTS})")
  args = parser.parse_args(argv)
  result = measure(128 if args.check else SIDE)
  for r in result["rows"]:
    gpu = f", GPU {r['gpu_step_vs_adam']:.2f}x Adam" if r["gpu_step_vs_adam"] else ""
    print(f"{r['state']:>18}: floor {r['floor_bytes']} B ({r['floor_vs_adam']:.2f}x Adam), "
          f"{r['flops_per_element']:.1f} flops, {r['bytes_per_element']:.1f} B an element{gpu}")
  wrong = over_bounds(result)
  if args.check:
    if wrong:
      raise SystemExit("past their bounds (benchmarks/floor.py BOUNDS): " + "; ".join(wrong))
    return
  common.write_json(args.out, result)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()

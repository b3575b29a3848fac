"""What an optimizer's step costs to compile next to Adam's, on trees of many leaves.

    python -m benchmarks.compile_time                    # 74, 290 and 998 leaves
    python -m benchmarks.compile_time --before 6f906d1   # and the package at that commit
    python -m benchmarks.compile_time --quick            # 74 leaves (CI smoke test)
    python -m benchmarks.compile_time --stacked 24       # and 24 layers as 14 stacked leaves

The step is the optimizer's ``update`` and ``optax.apply_updates`` under ``jit``
with the state and params donated, on a transformer-shaped tree: per layer q, k,
v, o, two MLP matrices, two biases and two norms' scales and offsets at width
256, and a final norm (12 leaves a layer and 2). Compile time is paid at every
start, and it grows with the number of leaves that are not alike. ``--stacked``
also measures a depth's tree as a scan over layers holds it: each of a layer's 12
leaves stacked over the layers, 14 leaves whatever the depth, the same parameters
(the how-to's advice for many layers rests on these rows). Each row is
``lower()`` and ``compile()`` after ``jax.clear_caches()``, the median of
``--repeats``, taken round-robin with Adam's in the same process; the ratio is
the optimizer's total (lower + compile) over Adam's.

``--before REV`` also measures ``vsgd_optax`` as it was at commit ``REV``: its
files are copied from git into a temporary package of another name, so that both
versions compile in one process, on one machine, side by side.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks import common

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results", "compile_time.json")
WIDTH = 256
LAYERS = (6, 24, 83)  # 74, 290 and 998 leaves
STACKED = (24,)  # the depth whose stacked tree a full run measures too
# The states measured: the names of ``examples.optimizers.REGISTRY``, built here from the
# package under test so that an earlier version can stand in for today's.
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


def _params(layers: int, stacked: bool = False) -> dict:
  return {name: jnp.zeros(shape, jnp.float32)
          for name, shape in transformer_shapes(layers, stacked=stacked).items()}


def builders(package) -> dict:
  """The measured states, built with ``package`` (today's vsgd_optax or an earlier one)."""
  experimental = importlib.import_module(package.__name__ + ".experimental")
  bf16 = jnp.bfloat16
  return {
      "adam": lambda: optax.adam(1e-3),
      "vsgd": lambda: package.vsgd(1e-3),
      "vsgd+bf16_nearest": lambda: package.vsgd(1e-3, state_dtype=bf16, state_rounding="nearest"),
      "vsgd+bf16_state": lambda: package.vsgd(1e-3, state_dtype=bf16),
      "factored_vsgd": lambda: experimental.factored_vsgd(1e-3),
  }


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


def package_at(revision: str, folder: str):
  """``vsgd_optax`` as it was at ``revision``, importable as ``vsgd_optax_<revision>``
  from ``folder``; a copy already there is used as it is (a machine without the
  repository's history, such as the device machine, is handed one).
  """
  name = "vsgd_optax_" + revision.replace("-", "_").replace("~", "_").replace("^", "_")
  target = os.path.join(folder, name)
  sys.path.insert(0, os.path.abspath(folder))
  if os.path.exists(os.path.join(target, "__init__.py")):
    return importlib.import_module(name)
  os.makedirs(target)
  files = subprocess.run(["git", "-C", REPO, "ls-tree", "--name-only", revision, "vsgd_optax/"],
                         check=True, capture_output=True, text=True).stdout.split()
  for path in files:
    text = subprocess.run(["git", "-C", REPO, "show", f"{revision}:{path}"], check=True,
                          capture_output=True, text=True).stdout
    text = text.replace("from vsgd_optax import", f"from {name} import").replace(
        "from vsgd_optax.", f"from {name}.")
    with open(os.path.join(target, os.path.basename(path)), "w") as f:
      f.write(text)
  return importlib.import_module(name)


def measure(layer_counts, repeats: int, before: str | None, scratch: str, written,
            stacked=()) -> list[dict]:
  """The rows, a tree of each of ``layer_counts`` and a stacked tree of each of
  ``stacked``; ``written(rows)`` is called after each tree, so that a run stopped
  part way keeps the trees it finished.
  """
  import vsgd_optax
  versions = {"today": builders(vsgd_optax)}
  if before:
    versions[before] = builders(package_at(before, scratch))
  rows = []
  for layers, is_stacked in [(n, False) for n in layer_counts] + [(n, True) for n in stacked]:
    params = _params(layers, is_stacked)
    leaves = len(jax.tree.leaves(params))
    runs = {(version, state): [] for version in versions for state in STATES
            if not (state == "adam" and version != "today")}
    for _ in range(repeats):
      for version, state in runs:
        runs[version, state].append(compile_seconds(versions[version][state](), params))
        print(f"  {leaves} leaves, {state} ({version}): lower {runs[version, state][-1][0]:.2f} s, "
              f"compile {runs[version, state][-1][1]:.2f} s", flush=True)
    adam_total = float(np.median([sum(s) for s in runs["today", "adam"]]))
    for (version, state), samples in runs.items():
      lower = float(np.median([s[0] for s in samples]))
      compiled = float(np.median([s[1] for s in samples]))
      total = float(np.median([sum(s) for s in samples]))
      rows.append({"leaves": leaves, "layers": layers, "stacked": is_stacked,
                   "optimizer": state, "version": version,
                   "lower_s": lower, "compile_s": compiled, "total_s": total,
                   "ratio_to_adam": total / adam_total, "repeats": repeats})
    written(rows)
  return rows


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true", help="74 leaves, one repeat")
  parser.add_argument("--layers", type=int, nargs="+", default=None,
                      help=f"layer counts (default {' '.join(map(str, LAYERS))})")
  parser.add_argument("--stacked", type=int, nargs="*", default=None,
                      help="layer counts measured as stacked trees too (default "
                      f"{' '.join(map(str, STACKED))}; none with --quick)")
  parser.add_argument("--repeats", type=int, default=None, help="timings per row (default 3)")
  parser.add_argument("--before", default=None, help="also measure vsgd_optax at this commit")
  parser.add_argument("--scratch", default=None,
                      help="where --before's copy goes (default: a temporary folder)")
  parser.add_argument("--out", default=None, help=f"JSON path (default {RESULTS}; "
                      "--quick writes to the temporary folder)")
  args = parser.parse_args(argv)
  layers = args.layers or ((6,) if args.quick else LAYERS)
  repeats = args.repeats or (1 if args.quick else 3)
  out = args.out or (os.path.join(tempfile.gettempdir(), "compile_time.json") if args.quick
                     else RESULTS)
  def written(rows):
    common.write_json(out, {"machine": common.machine(), "width": WIDTH, "before": args.before,
                            "rows": rows})
  stacked = args.stacked if args.stacked is not None else (() if args.quick else STACKED)
  rows = measure(layers, repeats, args.before, args.scratch or tempfile.mkdtemp(), written,
                 stacked)
  for row in rows:
    tree = f"{row['leaves']:5d} leaves{' stacked' if row['stacked'] else ''}"
    print(f"{tree}  {row['optimizer']:18s} {row['version']:8s} {row['total_s']:7.2f} s  "
          f"{row['ratio_to_adam']:5.2f}x Adam")
  print(f"wrote {out}")


if __name__ == "__main__":
  main()

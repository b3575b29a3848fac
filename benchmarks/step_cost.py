"""What one optimizer step costs next to Adam: time, state memory, compile time.

    python -m benchmarks.step_cost            # 1M, 9.3M, 50M parameters
    python -m benchmarks.step_cost --quick    # 1M only, few repeats (CI smoke test)

One jitted step is ``update`` + ``optax.apply_updates`` on a pytree shaped like
a real network (ResNeXt-18's kernel shapes, scaled), with and without donated
buffers. Each optimizer is timed round-robin with Adam in the same process;
the table reports the ratio of medians (with the 25-75% range of per-round
ratios) and absolute times. A sample is ``--steps-per-sample`` steps and one
wait for the device (default 1 on a CPU and 20 on an accelerator). A donated
sample of several steps is one program, the steps in a ``fori_loop``: it
times the device, not the host. Called once a step, an H200 machine's host
took 0.3-0.7 ms to dispatch VSGD's states' step at 50M parameters (Adam's: 0.32;
``gpu_ablation.json``), about as long as the device took to run it (Adam's:
0.52 ms), so per-call timings measured the host as much as the step. A
step that is not donated writes new buffers at each call: it stays a call a
step, as a training loop makes it.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from examples.optimizers import REGISTRY

# ResNeXt-18-like (CIFAR-100) kernels; scaled by width to reach each size.
_RESNEXT_SHAPES = [(3, 3, 3, 64), (64,), (64,), (1, 1, 64, 512), (3, 3, 64, 512),
                   (1, 1, 512, 256), (1, 1, 64, 256), (256,), (256,), (1, 1, 256, 1024),
                   (3, 3, 128, 1024), (1, 1, 1024, 512), (1, 1, 256, 512), (512,), (512,),
                   (1, 1, 512, 2048), (3, 3, 256, 2048), (1, 1, 2048, 1024), (1024,),
                   (1024,), (1024, 100), (100,)]


def network_like_shapes(target: int) -> dict[str, tuple[int, ...]]:
  """The shapes of ``network_like_params(target)``, without making any array."""
  base = sum(math.prod(s) for s in _RESNEXT_SHAPES)
  width = math.sqrt(target / base)
  return {f"layer{i:02d}": tuple(max(1, round(d * width)) if j >= len(shape) - 2 else d
                                 for j, d in enumerate(shape))
          for i, shape in enumerate(_RESNEXT_SHAPES)}


def network_like_params(target: int) -> dict:
  """Conv-network-shaped float32 params with about ``target`` entries."""
  return {name: jnp.full(shape, 0.01, jnp.float32)
          for name, shape in network_like_shapes(target).items()}


# The optimizers measured (``REGISTRY``'s names), all at this learning rate.
OPTIMIZERS = ("adam", "adam+bf16_mu", "vsgd", "vsgd+bf16_state", "vsgd+bf16_nearest",
              "constant_vsgd", "adamw", "sgd_momentum")
LEARNING_RATE = 1e-3
# A variant and the optimizer it is timed against, in the same rounds: its row's
# "paired" entry holds the ratio of its step to that optimizer's.
PAIRED = {"vsgd+bf16_state": "vsgd", "vsgd+bf16_nearest": "vsgd", "factored_vsgd": "vsgd",
          "factored_vsgd+bf16_mu": "vsgd"}
# The experimental factored state, timed with vsgd and Adam (``--factored``).
FACTORED_OPTIMIZERS = ("adam", "vsgd", "factored_vsgd", "factored_vsgd+bf16_mu")


def _step_fn(opt, donate: bool, steps: int = 1):
  """The jitted step; ``steps`` of them in one program where ``steps > 1``
  (donated only: see the module docstring).
  """
  step = common.optimizer_step(opt)
  if steps == 1:
    return jax.jit(step, donate_argnums=(0, 1) if donate else ())
  if not donate:
    raise ValueError("steps in one program are timed donated only; a step that is not "
                     "donated is a call a step (steps=1)")

  def steps_in_one_program(params, state, grads):
    return jax.lax.fori_loop(0, steps, lambda _, carry: step(*carry, grads), (params, state))
  return jax.jit(steps_in_one_program, donate_argnums=(0, 1))


def measure(size: int, repeats: int, steps_per_sample: int = 1,
            optimizers=OPTIMIZERS, donations=(False, True)) -> list[dict]:
  """One row per optimizer and donation: median step time, its ratio to Adam's
  (timed in the same rounds), state bytes per parameter and compile time.
  """
  if "adam" not in optimizers:
    raise ValueError(f"the ratios need 'adam' among the optimizers, got {list(optimizers)}")
  params = network_like_params(size)
  n = sum(x.size for x in jax.tree.leaves(params))
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  rows = []
  for donate in donations:
    runners, info = {}, {}
    # One program of ``steps_per_sample`` steps (donated), or a call a step.
    in_one = steps_per_sample if donate else 1
    for name in optimizers:
      opt = REGISTRY[name].build(LEARNING_RATE)
      step = _step_fn(opt, donate, in_one)
      carry = [jax.tree.map(jnp.copy, params), opt.init(params)]
      t0 = time.perf_counter()
      compiled = step.lower(*carry, grads).compile()
      compile_s = time.perf_counter() - t0
      memory = compiled.memory_analysis()
      state_bytes = sum(x.nbytes for x in jax.tree.leaves(carry[1]))

      def run(step=step, carry=carry, calls=steps_per_sample // in_one):
        for _ in range(calls):
          carry[0], carry[1] = step(carry[0], carry[1], grads)
        jax.block_until_ready(carry)
      run()  # warm-up outside the timings
      runners[name] = run
      info[name] = {"compile_s": compile_s, "state_bytes_per_param": state_bytes / n,
                    "peak_temp_bytes": getattr(memory, "temp_size_in_bytes", None)}
    samples = common.interleaved_medians(runners, repeats)
    samples = {name: np.asarray(v) / steps_per_sample for name, v in samples.items()}
    for name, run in runners.items():
      info[name]["page_faults_per_step"] = common.minor_page_faults(
          run, steps=3) / steps_per_sample
    for name in optimizers:
      rows.append({"params": n, "donated": donate, "optimizer": name,
                   "steps_per_program": in_one,
                   "median_ms": 1e3 * float(np.median(samples[name])),
                   **common.ratio_with_spread(samples[name], samples["adam"]), **info[name]})
      against = PAIRED.get(name)
      if against in samples:
        rows[-1]["paired"] = {"against": against,
                              **common.ratio_with_spread(samples[name], samples[against])}
  return rows


def measure_torch_peer(size: int, repeats: int) -> dict | None:
  """The PyTorch VSGD of ``pytorch-optimizer`` and ``torch.optim.Adam`` on the same
  shapes and cores, next to this package's jitted (non-donated) vsgd step.
  """
  try:
    import torch
    from pytorch_optimizer import VSGD as TorchVSGD
  except ImportError:
    return None
  torch.set_num_threads(os.cpu_count() or 1)
  params = network_like_params(size)
  shapes = [p.shape for p in params.values()]
  runners = {}
  for name, make in (("torch_adam", lambda ps: torch.optim.Adam(ps, lr=1e-3)),
                     ("torch_vsgd", lambda ps: TorchVSGD(ps, lr=1e-3))):
    tensors = [torch.nn.Parameter(torch.full(s, 0.01)) for s in shapes]
    for t in tensors:
      t.grad = torch.full_like(t, 1e-3)
    opt = make(tensors)
    opt.step()
    runners[name] = opt.step
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  opt = REGISTRY["vsgd"].build(LEARNING_RATE)
  step = _step_fn(opt, donate=False)
  carry = [params, opt.init(params)]
  def jax_vsgd():
    carry[0], carry[1] = step(carry[0], carry[1], grads)
    jax.block_until_ready(carry)
  jax_vsgd()
  runners["vsgd_optax"] = jax_vsgd
  samples = common.interleaved_medians(runners, repeats)
  ms = {k: 1e3 * float(np.median(v)) for k, v in samples.items()}
  return {"params": sum(math.prod(s) for s in shapes), "torch": torch.__version__, **ms,
          "speedup_vs_torch_vsgd": ms["torch_vsgd"] / ms["vsgd_optax"]}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--sizes", type=float, nargs="*", default=None)
  parser.add_argument("--repeats", type=int, default=None)
  parser.add_argument("--steps-per-sample", type=int, default=None)
  parser.add_argument("--factored", action="store_true",
                      help="time factored_vsgd next to vsgd and Adam instead (default --out: "
                           "benchmarks/results/step_cost_factored)")
  parser.add_argument("--out", default=None)
  args = parser.parse_args(argv)
  optimizers = FACTORED_OPTIMIZERS if args.factored else OPTIMIZERS
  args.out = args.out or ("benchmarks/results/step_cost_factored" if args.factored
                          else "benchmarks/results/step_cost")
  sizes = args.sizes or ([1e6] if args.quick else [1e6, 9.3e6, 5e7])
  repeats = args.repeats or (5 if args.quick else 30)
  on_cpu = jax.default_backend() == "cpu"
  steps = args.steps_per_sample or (1 if on_cpu else 20)
  # The machine may be shared: its load (1, 5, 15-minute means) goes with the timings.
  load = {"start": os.getloadavg()}
  rows = [row for size in sizes for row in measure(int(size), repeats, steps, optimizers)]
  load["end"] = os.getloadavg()
  print(f"{'params':>10} {'donated':>7} {'optimizer':>14} {'ms':>8} {'x Adam':>7} "
        f"{'(p25-p75)':>13} {'state B/param':>13} {'compile s':>9} {'faults/step':>11}")
  for r in rows:
    print(f"{r['params']:>10} {str(r['donated']):>7} {r['optimizer']:>14} {r['median_ms']:8.2f} "
          f"{r['ratio']:7.2f} ({r['ratio_p25']:.2f}-{r['ratio_p75']:.2f}) "
          f"{r['state_bytes_per_param']:13.1f} {r['compile_s']:9.2f} "
          f"{r['page_faults_per_step']:11.0f}")
  for r in rows:
    if "paired" in r:
      print(f"{r['params']:>10} donated={r['donated']}: {r['optimizer']} / "
            f"{r['paired']['against']} {common.ratio_text(r['paired'])}")
  # The PyTorch VSGD takes seconds per step at 50M parameters; compare up to
  # 10M, on the CPU (its tensors live there).
  peers = [p for p in (measure_torch_peer(int(size), repeats) for size in sizes
                       if size <= 1e7 and on_cpu and not args.factored) if p]
  for p in peers:
    print(f"{p['params']:>10} torch {p['torch']}: pytorch-optimizer VSGD {p['torch_vsgd']:.2f} ms, "
          f"torch Adam {p['torch_adam']:.2f} ms, vsgd_optax {p['vsgd_optax']:.2f} ms "
          f"({p['speedup_vs_torch_vsgd']:.1f}x faster than the PyTorch VSGD)")
  if not peers:
    print("no PyTorch peer timings (torch and pytorch-optimizer are needed, "
          "and a CPU backend)")
  common.write_json(args.out + ".json", {"machine": common.machine(), "load_average": load,
                                         "repeats": repeats, "rows": rows,
                                         "torch_peer": peers})
  figure = "" if args.factored else f" (--plots: and the figure of {common.RESULTS}/step_cost.json)"
  print(f"wrote {args.out}.json; its tables: python -m benchmarks.reporting{figure}")


if __name__ == "__main__":
  main()

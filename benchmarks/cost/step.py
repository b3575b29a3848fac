"""One optimizer step next to Adam's: its time, taken two ways, and its state's bytes.

The step is ``update`` + ``optax.apply_updates`` on a pytree shaped like a real
network (ResNeXt-18's kernel shapes, scaled by width to each size), every
optimizer timed round-robin with Adam in the same process; a row holds the
ratio of medians to Adam's, with the 25-75% range of per-round ratios.

Each time says how it was taken (``method``):

* ``per call``: one jitted call a step, not donated, dispatch included, as a
  training loop calls it;
* ``in one program``: ``steps_in_program`` donated steps in one ``fori_loop``,
  one wait a sample: the device's time, not the host's. On a CPU a donated
  step is also timed one call at a time (``donated per call``), since there
  the device is the host.

"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import common
from benchmarks.optimizers import REGISTRY

# ResNeXt-18-like (CIFAR-100) kernels; scaled by width to reach each size.
_RESNEXT_SHAPES = [(3, 3, 3, 64), (64,), (64,), (1, 1, 64, 512), (3, 3, 64, 512),
                   (1, 1, 512, 256), (1, 1, 64, 256), (256,), (256,), (1, 1, 256, 1024),
                   (3, 3, 128, 1024), (1, 1, 1024, 512), (1, 1, 256, 512), (512,), (512,),
                   (1, 1, 512, 2048), (3, 3, 256, 2048), (1, 1, 2048, 1024), (1024,),
                   (1024,), (1024, 100), (100,)]
# The optimizers timed (``REGISTRY``'s names), all at this learning rate.
OPTIMIZERS = ("adam", "adam+bf16_mu", "vsgd", "vsgd+bf16_state", "vsgd+bf16_nearest",
              "constant_vsgd", "factored_vsgd", "factored_vsgd+bf16_mu")
LEARNING_RATE = 1e-3
# A variant and the optimizer it is timed against, in the same rounds: its row's
# "paired" entry holds the ratio of its step to that optimizer's.
PAIRED = {"vsgd+bf16_state": "vsgd", "vsgd+bf16_nearest": "vsgd", "factored_vsgd": "vsgd",
          "factored_vsgd+bf16_mu": "vsgd"}
METHODS = {"per call": (False, 1), "donated per call": (True, 1), "in one program": (True, None)}


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


def step_fn(opt, donate: bool, steps: int = 1):
  """The jitted step; ``steps`` of them in one program where ``steps > 1``."""
  step = common.optimizer_step(opt)
  donated = (0, 1) if donate else ()
  if steps == 1:
    return jax.jit(step, donate_argnums=donated)

  def steps_in_one_program(params, state, grads):
    return jax.lax.fori_loop(0, steps, lambda _, carry: step(*carry, grads), (params, state))
  return jax.jit(steps_in_one_program, donate_argnums=donated)


def _runner(opt, params, grads, donate: bool, steps: int):
  """A zero-argument call that takes one sample of ``steps`` steps, and the state's
  bytes; compiled and run once before it is timed.
  """
  step = step_fn(opt, donate, steps)
  carry = [jax.tree.map(jnp.copy, params), opt.init(params)]
  state_bytes = sum(x.nbytes for x in jax.tree.leaves(carry[1]))

  def run():
    carry[0], carry[1] = step(carry[0], carry[1], grads)
    jax.block_until_ready(carry)
  run()
  return run, state_bytes


def time_against(builds: dict, params, repeats: int, donate: bool, steps: int,
                 against: str = "adam") -> dict[str, dict]:
  """Each of ``builds`` (name -> optimizer) timed round-robin: its median ms a step,
  its ratio to ``against``'s and its state's bytes a parameter.
  """
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  n = sum(x.size for x in jax.tree.leaves(params))
  runners, state_bytes = {}, {}
  for name, opt in builds.items():
    runners[name], state_bytes[name] = _runner(opt, params, grads, donate, steps)
  samples = common.interleaved_medians(runners, repeats)
  samples = {name: np.asarray(v) / steps for name, v in samples.items()}
  return {name: {"median_ms": 1e3 * float(np.median(samples[name])),
                 **common.ratio_with_spread(samples[name], samples[against]),
                 "state_bytes_per_param": state_bytes[name] / n, "samples": samples[name]}
          for name in builds}


def measure(size: int, repeats: int, steps_in_program: int, methods: tuple[str, ...],
            optimizers=OPTIMIZERS) -> list[dict]:
  """One row per optimizer and method at ``size`` parameters."""
  params = network_like_params(size)
  n = sum(x.size for x in jax.tree.leaves(params))
  rows = []
  for method in methods:
    donate, steps = METHODS[method]
    steps = steps or steps_in_program
    timed = time_against({name: REGISTRY[name].build(LEARNING_RATE) for name in optimizers},
                         params, repeats, donate, steps)
    for name in optimizers:
      row = {"params": n, "method": method, "steps_in_program": steps, "optimizer": name,
             **{k: v for k, v in timed[name].items() if k != "samples"}}
      if PAIRED.get(name) in timed:
        row["paired"] = {"against": PAIRED[name], **common.ratio_with_spread(
            timed[name]["samples"], timed[PAIRED[name]]["samples"])}
      rows.append(row)
  return rows


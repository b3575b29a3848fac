"""The golden trajectory of ``tests/support/golden/``: what it holds and how it was made."""

import argparse
import os
import sys

import jax
import numpy as np
import optax

import vsgd_optax
from tests.support import golden_state
from vsgd_optax import experimental

STEPS = 30
LEARNING_RATE = 0.01
SHAPES = {"b": (5,), "w": (6, 8)}


def optimizers() -> dict:
  return {"vsgd": vsgd_optax.vsgd(LEARNING_RATE),
          "constant_vsgd": vsgd_optax.constant_vsgd(LEARNING_RATE),
          "factored_vsgd": experimental.factored_vsgd(LEARNING_RATE, min_dim_size_to_factor=4)}


def path(version: str) -> str:
  return os.path.join(golden_state.FOLDER, f"trajectory_{version}.npz")


def trajectory(opt) -> tuple[list, optax.OptState]:
  """Every step's params, and the state after the last step."""
  params, history = golden_state.initial_params(SHAPES), []
  state = opt.init(params)
  update = jax.jit(opt.update)
  for grads in golden_state.gradients(SHAPES, STEPS, first_seed=10):
    updates, state = update(grads, state, params)
    params = optax.apply_updates(params, updates)
    history.append(params)
  return history, state


def arrays() -> dict[str, np.ndarray]:
  out = {}
  for name, opt in optimizers().items():
    history, state = trajectory(opt)
    for step, params in enumerate(history):
      out |= golden_state.flatten(f"{name}/params/{step}", params)
    out |= golden_state.flatten(f"{name}/state", state)
  return out


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--version", required=True, help="the release that made it, e.g. 0.1.0")
  target = path(parser.parse_args(argv).version)
  if os.path.exists(target):
    print(f"{target} exists; a golden file is never rewritten", file=sys.stderr)
    return 1
  np.savez(target, **arrays())
  print(f"wrote {target}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

"""The golden optimizer states of ``tests/support/golden/``: what they hold and how they were made.

Each file is a checkpoint as a user keeps one: the params and the whole
optimizer state (the ``optax.chain`` of ``vsgd`` or ``constant_vsgd``) after
``SAVED_STEPS`` float32 steps, as plain arrays keyed by their tree paths
(``jax.tree_util.keystr``). ``tests/core/test_golden_state.py`` restores them with
today's code and never writes them.

A change of the state's layout or meaning fails that test. Such a change needs
a migration note in ``CHANGELOG.md`` and a new golden file, written with
``python -m tests.support.golden_state --version X.Y.Z`` (it refuses to overwrite one).
"""

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

import vsgd_optax
from tests.support import reference

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
SAVED_STEPS = 5
CONTINUED_STEPS = 10  # the test's steps after the restore
LEARNING_RATE = 0.01
OPTIMIZERS = {"vsgd": vsgd_optax.vsgd, "constant_vsgd": vsgd_optax.constant_vsgd}
SHAPES = {"b": (4,), "w": (3, 4)}


def path(version: str) -> str:
  return os.path.join(FOLDER, f"states_{version}.npz")


def initial_params() -> dict[str, jax.Array]:
  return {name: jnp.linspace(-1.0, 1.0, int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
          for name, shape in SHAPES.items()}


def gradients() -> list[dict[str, np.ndarray]]:
  """One fixed gradient stream per leaf (seeds 0 and 1): the first ``SAVED_STEPS``
  made the files, the ``CONTINUED_STEPS`` after them are the test's.
  """
  steps = SAVED_STEPS + CONTINUED_STEPS
  streams = {name: reference.gradient_stream(seed, steps, shape)
             for seed, (name, shape) in enumerate(sorted(SHAPES.items()))}
  return [{name: stream[i].astype(np.float32) for name, stream in streams.items()}
          for i in range(steps)]


def flatten(prefix: str, tree) -> dict[str, np.ndarray]:
  """``{prefix + keystr(path): leaf}``, the file's keys."""
  return {prefix + jax.tree_util.keystr(p): np.asarray(leaf)
          for p, leaf in jax.tree_util.tree_leaves_with_path(tree)}


def saved_arrays() -> dict[str, np.ndarray]:
  """Runs each optimizer ``SAVED_STEPS`` steps; its params and state, flattened."""
  arrays = {}
  for name, factory in OPTIMIZERS.items():
    opt = factory(LEARNING_RATE)
    params = initial_params()
    state = opt.init(params)
    for grads in gradients()[:SAVED_STEPS]:
      updates, state = opt.update(grads, state, params)
      params = optax.apply_updates(params, updates)
    arrays |= flatten(f"{name}/params", params) | flatten(f"{name}/state", state)
  return arrays


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--version", required=True,
                      help="the release whose state layout the file records, e.g. 0.1.0")
  target = path(parser.parse_args(argv).version)
  if os.path.exists(target):
    print(f"{target} exists; a golden file is never rewritten: give a new --version",
          file=sys.stderr)
    return 1
  os.makedirs(FOLDER, exist_ok=True)
  np.savez(target, **saved_arrays())
  print(f"wrote {target}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

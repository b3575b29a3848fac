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


# The factored states: vsgd_muon (factored by default) and experimental.factored_vsgd
# on a tree with one matrix that factors at the default threshold (128), one that
# does not and a vector. The file also keeps the params and state the continued
# steps reached with the code that wrote it, for a bit-for-bit comparison.
FACTORED_SHAPES = {"b": (16,), "small": (3, 4), "w": (128, 144)}


def factored_optimizers() -> dict:
  from vsgd_optax import experimental  # pylint: disable=import-outside-toplevel
  return {"vsgd_muon": vsgd_optax.vsgd_muon, "factored_vsgd": experimental.factored_vsgd}


def factored_path(version: str) -> str:
  return os.path.join(FOLDER, f"states_{version}_factored.npz")


def factored_initial_params() -> dict[str, jax.Array]:
  return {name: jnp.linspace(-1.0, 1.0, int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
          for name, shape in FACTORED_SHAPES.items()}


def factored_gradients() -> list[dict[str, np.ndarray]]:
  """A fixed gradient stream per leaf (seeds 0, 1, 2), as ``gradients``."""
  steps = SAVED_STEPS + CONTINUED_STEPS
  streams = {name: reference.gradient_stream(seed, steps, shape)
             for seed, (name, shape) in enumerate(sorted(FACTORED_SHAPES.items()))}
  return [{name: stream[i].astype(np.float32) for name, stream in streams.items()}
          for i in range(steps)]


def factored_saved_arrays() -> dict[str, np.ndarray]:
  """Each optimizer's params and state after ``SAVED_STEPS`` steps (``saved/``) and
  after ``CONTINUED_STEPS`` more (``continued/``), flattened.
  """
  arrays = {}
  for name, factory in factored_optimizers().items():
    opt = factory(LEARNING_RATE)
    params = factored_initial_params()
    state = opt.init(params)
    update = jax.jit(opt.update)
    for step, grads in enumerate(factored_gradients()):
      if step == SAVED_STEPS:
        arrays |= flatten(f"{name}/saved/params", params) | flatten(f"{name}/saved/state", state)
      updates, state = update(grads, state, params)
      params = optax.apply_updates(params, updates)
    arrays |= (flatten(f"{name}/continued/params", params)
               | flatten(f"{name}/continued/state", state))
  return arrays


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--version", required=True,
                      help="the release whose state layout the file records, e.g. 0.1.0")
  parser.add_argument("--factored", action="store_true",
                      help="write the factored optimizers' file (states_X.Y.Z_factored.npz)")
  args = parser.parse_args(argv)
  target = (factored_path if args.factored else path)(args.version)
  if os.path.exists(target):
    print(f"{target} exists; a golden file is never rewritten: give a new --version",
          file=sys.stderr)
    return 1
  os.makedirs(FOLDER, exist_ok=True)
  np.savez(target, **(factored_saved_arrays() if args.factored else saved_arrays()))
  print(f"wrote {target}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

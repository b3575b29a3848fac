"""The golden optimizer states of ``tests/support/golden/``: what they hold and how they were made."""

import argparse
import os
import sys

import chex
import jax
import jax.numpy as jnp
import jaxlib
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

# The versions that wrote the 0.1.0 files of FOLDER: their float32 arithmetic is compared
# bit for bit there (up to the tolerances a test states for the CPU's own matmuls).
WRITTEN_AT = {"jax": "0.10.2", "jaxlib": "0.10.2"}
# At other versions XLA may sum a factored rate's float32 mean (over up to 144 elements
# here) in another order. Each mean then moves by up to about n * 2**-24 of its terms'
# magnitudes (8.6e-6 for n = 144), and the steps carry that into mu, the other rate and
# the params; in float64 the two versions agree to 1e-13, so the maths is the same. At
# jax 0.8.0 the largest move is 6.1e-7 of a leaf's largest magnitude. So there each leaf
# is compared to within this share of its largest magnitude.
OTHER_VERSIONS_SHARE = 1e-5


def at_written_versions() -> bool:
  """Whether this jax and jaxlib are the ones that wrote the golden files."""
  return {"jax": jax.__version__, "jaxlib": jaxlib.__version__} == WRITTEN_AT


def assert_matches_golden(actual, expected, *, rtol: float = 0.0, atol: float = 0.0) -> None:
  """At ``WRITTEN_AT``: ``actual`` equals ``expected`` bit for bit, or within ``rtol`` and
  ``atol`` where given. At other versions: each leaf within ``OTHER_VERSIONS_SHARE`` of the
  expected leaf's largest magnitude.
  """
  if at_written_versions():
    if rtol == atol == 0.0:
      chex.assert_trees_all_equal(actual, expected)
    else:
      chex.assert_trees_all_close(actual, expected, rtol=rtol, atol=atol)
    return

  def leaf(got, want):
    want = np.asarray(want, np.float64)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0,
                               atol=OTHER_VERSIONS_SHARE * scale)
  jax.tree.map(leaf, actual, expected)


def path(version: str) -> str:
  return os.path.join(FOLDER, f"states_{version}.npz")


def initial_params(shapes=None) -> dict[str, jax.Array]:
  return {name: jnp.linspace(-1.0, 1.0, int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
          for name, shape in (shapes or SHAPES).items()}


def gradients(shapes=None, steps=SAVED_STEPS + CONTINUED_STEPS,
              first_seed=0) -> list[dict[str, np.ndarray]]:
  """One fixed gradient stream per leaf (seeds from ``first_seed`` in the leaves'
  order): the first ``SAVED_STEPS`` made the files, the ones after are the test's.
  """
  streams = {name: reference.gradient_stream(first_seed + seed, steps, shape)
             for seed, (name, shape) in enumerate(sorted((shapes or SHAPES).items()))}
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


# The factored states (vsgd_muon's default, factored_vsgd): a matrix that factors at
# 128, one that does not, a vector; with the continued run, to compare bit for bit.
FACTORED_SHAPES = {"b": (16,), "small": (3, 4), "w": (128, 144)}


def _vsgd_muon_as_in_0_1_0(learning_rate: float) -> optax.GradientTransformation:
  """``vsgd_muon`` with 0.1.0's default AdamW part, a tenth of the rate, which its
  files were written with (the default is 10**-0.5 of it since).
  """
  return vsgd_optax.vsgd_muon(learning_rate, adam_learning_rate=0.1 * learning_rate)


def factored_optimizers() -> dict:
  from vsgd_optax import experimental  # pylint: disable=import-outside-toplevel
  return {"vsgd_muon": _vsgd_muon_as_in_0_1_0, "factored_vsgd": experimental.factored_vsgd}


def factored_path(version: str) -> str:
  return os.path.join(FOLDER, f"states_{version}_factored.npz")


def factored_saved_arrays() -> dict[str, np.ndarray]:
  """Each optimizer's params and state after ``SAVED_STEPS`` steps (``saved/``) and
  after ``CONTINUED_STEPS`` more (``continued/``), flattened.
  """
  arrays = {}
  for name, factory in factored_optimizers().items():
    opt, params = factory(LEARNING_RATE), initial_params(FACTORED_SHAPES)
    state, update = opt.init(params), jax.jit(opt.update)
    for step, grads in enumerate(gradients(FACTORED_SHAPES) + [None]):
      if step in (SAVED_STEPS, SAVED_STEPS + CONTINUED_STEPS):
        when = "saved" if step == SAVED_STEPS else "continued"
        arrays |= flatten(f"{name}/{when}/params", params) | flatten(f"{name}/{when}/state", state)
      if grads is not None:
        updates, state = update(grads, state, params)
        params = optax.apply_updates(params, updates)
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
    print(f"{target} exists; a golden file is never rewritten", file=sys.stderr)
    return 1
  os.makedirs(FOLDER, exist_ok=True)
  np.savez(target, **(factored_saved_arrays() if args.factored else saved_arrays()))
  print(f"wrote {target}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

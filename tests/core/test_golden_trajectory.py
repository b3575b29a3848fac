"""The maths does not move: a golden trajectory written by release 0.1.0, rerun today."""

import ast
import os
import pathlib
import pickle
import subprocess
import sys
from unittest import mock

import chex
import jax
import numpy as np
import pytest

import vsgd_optax
from tests.support import golden_state
from tests.support import golden_trajectory
from vsgd_optax import _update_rules
from vsgd_optax import experimental

RTOL, ATOL = 1e-6, 1e-8


def _saved(saved, prefix, template):
  leaves = [saved[prefix + jax.tree_util.keystr(p)]
            for p, _ in jax.tree_util.tree_leaves_with_path(template)]
  return jax.tree.unflatten(jax.tree.structure(template), leaves)


# At rtol 1e-6 at the versions that wrote the file (golden_state.WRITTEN_AT), within
# golden_state's stated share elsewhere (XLA sums the factored means in another order there).
@pytest.mark.parametrize("name", ["vsgd", "constant_vsgd", "factored_vsgd"])
def test_trajectory_matches_the_golden_one(name):
  history, state = golden_trajectory.trajectory(golden_trajectory.optimizers()[name])
  with np.load(golden_trajectory.path("0.1.0")) as saved:
    expected = [_saved(saved, f"{name}/params/{step}", params)
                for step, params in enumerate(history)]
    expected_state = _saved(saved, f"{name}/state", state)
  golden_state.assert_matches_golden(history, expected, rtol=RTOL, atol=ATOL)
  golden_state.assert_matches_golden(state, expected_state, rtol=RTOL, atol=0)
  if name == "factored_vsgd":  # w factors, b does not
    rates = state[0].b_g
    assert (rates["w"].row.shape, rates["w"].col.shape, rates["b"].shape) == ((6, 1), (1, 8), (5,))


def test_a_change_of_the_maths_leaves_the_tolerance():
  """The tolerance has teeth: the shape's offset 5e-5 taken away moves the trajectory."""
  with mock.patch.object(_update_rules, "SHAPE_OFFSET", 0.0):
    history, _ = golden_trajectory.trajectory(golden_trajectory.optimizers()["vsgd"])
  with np.load(golden_trajectory.path("0.1.0")) as saved:
    last = _saved(saved, f"vsgd/params/{golden_trajectory.STEPS - 1}", history[-1])
  with pytest.raises(AssertionError):
    chex.assert_trees_all_close(history[-1], last, rtol=RTOL, atol=ATOL)


def _factored_state_and_golden(variance_ratio):
  """The factored trajectory's last state at ``variance_ratio``, and the golden one."""
  opt = experimental.factored_vsgd(golden_trajectory.LEARNING_RATE, min_dim_size_to_factor=4,
                                   variance_ratio=variance_ratio)
  _, state = golden_trajectory.trajectory(opt)
  with np.load(golden_trajectory.path("0.1.0")) as saved:
    return state, _saved(saved, "factored_vsgd/state", state)


def test_the_other_versions_share_catches_a_change_of_the_maths_of_one_in_ten_thousand():
  """The tolerance kept for other versions of jax has teeth: K_g changed by 1e-4 of itself
  moves the factored trajectory by about 20 times the share (measured 2e-4 of a leaf).
  """
  with mock.patch.object(golden_state, "at_written_versions", lambda: False):
    golden_state.assert_matches_golden(*_factored_state_and_golden(30.0))
    with pytest.raises(AssertionError):
      golden_state.assert_matches_golden(*_factored_state_and_golden(30.003))


def _pickle_of_0_1_0() -> str:
  return os.path.join(os.path.dirname(golden_trajectory.path("0.1.0")),
                      "factored_state_0.1.0.pkl")


def test_a_pickled_factored_vsgd_state_of_0_1_0_loads_as_today_s_state():
  """0.1.0 pickled ``FactoredVSGDState``; it loads as the one state, field for field."""
  with open(_pickle_of_0_1_0(), "rb") as f:
    state = pickle.load(f)  # written by this repository's 0.1.0, not downloaded
  _, expected = golden_trajectory.trajectory(golden_trajectory.optimizers()["factored_vsgd"])
  assert isinstance(state, vsgd_optax.ScaleByVSGDState)
  golden_state.assert_matches_golden(state, expected[0], rtol=RTOL, atol=0)


@pytest.mark.slow
def test_the_pickle_of_0_1_0_loads_in_a_process_that_imported_nothing_first():
  """A pickle names a module and a class alone: unpickling as a process's first act,
  ``vsgd_optax._factored`` must hold 0.1.0's ``FactoredVSGDState``.
  """
  code = "import pickle, sys; print(type(pickle.load(open(sys.argv[1], 'rb'))).__name__)"
  # This process's vsgd_optax (a mutant's scratch copy too), not an installed one.
  env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(vsgd_optax.__file__)))
  done = subprocess.run([sys.executable, "-c", code, _pickle_of_0_1_0()], env=env,
                        capture_output=True, text=True, check=True, timeout=120)
  assert done.stdout.strip() == "ScaleByVSGDState"


def _imports(package: pathlib.Path) -> dict[str, set[str]]:
  """Each module of ``package``: the modules of it that it imports, at the top or
  inside a function (a package's ``__init__`` goes by the package's name).
  """
  names = {".".join(path.relative_to(package.parent).with_suffix("").parts)
           .removesuffix(".__init__"): path for path in package.rglob("*.py")}
  found = {}
  for module, path in names.items():
    found[module] = set()
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Import):
        found[module] |= {alias.name for alias in node.names if alias.name in names}
      elif isinstance(node, ast.ImportFrom) and node.module in names:
        for alias in node.names:  # a module of the package, or a name from one
          found[module].add(f"{node.module}.{alias.name}"
                            if f"{node.module}.{alias.name}" in names else node.module)
  return found


def test_no_module_of_the_library_imports_one_that_imports_it_back():
  """0.1.0's names are set on their old modules by ``_compat``, which imports them,
  so that no module imports back one that imports it (``_factored`` did, lazily).
  """
  graph = _imports(pathlib.Path(vsgd_optax.__file__).parent)
  assert "vsgd_optax._compat" in graph["vsgd_optax"]

  def circle(module, path):
    if module in path:
      return path[path.index(module):] + [module]
    for imported in sorted(graph[module]):
      found = circle(imported, path + [module])
      if found:
        return found
    return None
  circles = [found for module in sorted(graph) if (found := circle(module, []))]
  assert not circles, circles

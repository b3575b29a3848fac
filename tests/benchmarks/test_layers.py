"""Measuring and reporting stay apart: the runners under ``benchmarks/`` write JSON
and import nothing from ``benchmarks.reporting``; the reporting reads that JSON and
imports no runner, only the shared base ``benchmarks.common``; how it shows each
optimizer is its own (``benchmarks.reporting.styles``). And the benchmarks run on the
package alone: no module under ``benchmarks/`` imports the examples or a private
module of ``vsgd_optax``.

The imports are read from the source (``ast``), every ``import`` and ``from``,
at the top of a module or inside a function, so a late import is caught too.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
REPORTING = "benchmarks.reporting"
# The package itself and the one module both sides share.
SHARED = {"benchmarks", "benchmarks.common"}
# What the reporting has no need of: it reads JSON, it never builds an optimizer or a
# model.
NOT_FOR_REPORTING = ("jax", "optax", "flax", "vsgd_optax", "examples", "torch")


def module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts.pop()
  return ".".join(parts)


def imported(path: pathlib.Path) -> set[str]:
  """Every module ``path`` imports, by full name; ``from a import b`` gives both
  ``a`` and ``a.b`` (``b`` may be a module or a name in ``a``).
  """
  name = module_name(path)
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  found = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: resolved against the module's package
        anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([base] if base else []))
      found.add(base)
      found.update(f"{base}.{alias.name}" for alias in node.names)
  return found


def modules() -> dict[str, pathlib.Path]:
  return {module_name(p): p for p in sorted(BENCHMARKS.rglob("*.py"))}


def is_reporting(name: str) -> bool:
  return name == REPORTING or name.startswith(REPORTING + ".")


def runner_modules() -> set[str]:
  """Every module under ``benchmarks/`` outside the reporting and the shared base."""
  return {n for n in modules() if not is_reporting(n) and n not in SHARED}


def crossings() -> list[str]:
  """Each import that crosses the line, as "importer -> imported"."""
  runners = runner_modules()
  out = []
  for name, path in modules().items():
    for target in sorted(imported(path)):
      if is_reporting(name):
        if target in runners or target.split(".")[0] in NOT_FOR_REPORTING:
          out.append(f"{name} -> {target}")
      elif name not in SHARED and is_reporting(target):
        out.append(f"{name} -> {target}")
  return out


def test_the_split_holds_modules_on_both_sides():
  names = modules()
  assert {"benchmarks.reporting.render", "benchmarks.reporting.plots",
          "benchmarks.reporting.costs"} <= set(names)
  assert {"benchmarks.cost.step", "benchmarks.time_to_result.protocol",
          "benchmarks.noise_scale.run", "benchmarks.contest.run"} <= runner_modules()


def test_no_import_crosses_between_running_and_reporting():
  assert crossings() == []


def test_common_imports_neither_side():
  targets = imported(BENCHMARKS / "common.py")
  assert not [t for t in targets if t.startswith("benchmarks.")]


def test_the_check_sees_a_crossing_import(tmp_path, monkeypatch):
  """The check is real: a runner that imports the reporting, late or relatively,
  and a reporting module that imports a runner are each named.
  """
  fake = tmp_path / "benchmarks"
  (fake / "reporting").mkdir(parents=True)
  for path in (fake / "__init__.py", fake / "common.py", fake / "reporting" / "__init__.py"):
    path.write_text("")
  (fake / "runner_a.py").write_text("def f():\n  from benchmarks.reporting import render\n")
  (fake / "runner_b.py").write_text("from .reporting import plots\n")
  (fake / "reporting" / "page.py").write_text(
      "from benchmarks import runner_a\nimport jax.numpy\nfrom benchmarks import common\n")
  monkeypatch.setitem(globals(), "ROOT", tmp_path)
  monkeypatch.setitem(globals(), "BENCHMARKS", fake)
  assert crossings() == [
      "benchmarks.reporting.page -> benchmarks.runner_a",
      "benchmarks.reporting.page -> jax.numpy",
      "benchmarks.runner_a -> benchmarks.reporting",
      "benchmarks.runner_a -> benchmarks.reporting.render",
      "benchmarks.runner_b -> benchmarks.reporting",
      "benchmarks.runner_b -> benchmarks.reporting.plots",
  ]


def outside_the_package() -> list[str]:
  """Each import of the examples or of a private module of ``vsgd_optax``, as
  "importer -> imported".
  """
  def barred(target: str) -> bool:
    parts = target.split(".")
    return parts[0] == "examples" or (parts[0] == "vsgd_optax"
                                      and any(p.startswith("_") for p in parts[1:]))
  return [f"{name} -> {target}" for name, path in modules().items()
          for target in sorted(imported(path)) if barred(target)]


def test_the_benchmarks_import_neither_the_examples_nor_a_private_module():
  assert outside_the_package() == []


def test_the_check_sees_an_import_of_the_examples_or_a_private_module(tmp_path, monkeypatch):
  fake = tmp_path / "benchmarks"
  fake.mkdir()
  (fake / "__init__.py").write_text("")
  (fake / "runner.py").write_text(
      "import vsgd_optax\nfrom vsgd_optax import experimental\n"
      "def f():\n  from vsgd_optax import _transforms\n  from examples.models import MLP\n")
  monkeypatch.setitem(globals(), "ROOT", tmp_path)
  monkeypatch.setitem(globals(), "BENCHMARKS", fake)
  assert outside_the_package() == ["benchmarks.runner -> examples.models",
                                   "benchmarks.runner -> examples.models.MLP",
                                   "benchmarks.runner -> vsgd_optax._transforms"]



def lab_imports_in(folders) -> list[str]:
  """Each import of ``benchmarks`` by a file below ``folders`` (relative to ``ROOT``), as
  "file -> imported": the library's and the examples' tests run without the lab.
  """
  return [f"{path.relative_to(ROOT)} -> {target}" for folder in folders
          for path in sorted((ROOT / folder).rglob("*.py"))
          for target in sorted(imported(path)) if target.split(".")[0] == "benchmarks"]


def test_the_library_and_examples_tests_import_no_benchmark():
  assert lab_imports_in(("tests/core", "tests/examples", "tests/support")) == []


def test_the_check_sees_a_test_that_imports_the_lab(tmp_path, monkeypatch):
  (tmp_path / "tests" / "core").mkdir(parents=True)
  (tmp_path / "tests" / "core" / "test_x.py").write_text(
      "import numpy\ndef test():\n  from benchmarks.ladder import run\n")
  monkeypatch.setitem(globals(), "ROOT", tmp_path)
  assert lab_imports_in(("tests/core",)) == [
      "tests/core/test_x.py -> benchmarks.ladder", "tests/core/test_x.py -> benchmarks.ladder.run"]


STUDIES = ("contest", "cost", "ladder", "noise_scale", "time_to_result")


def untied_studies() -> list[str]:
  """Each study without its declared protocol (``protocol.py``), or none of whose modules
  trains through the one runner (imports ``benchmarks.study_runner``).
  """
  out = []
  for study in STUDIES:
    folder = BENCHMARKS / study
    if not (folder / "protocol.py").exists():
      out.append(f"{study}: no protocol.py")
    if not any("benchmarks.study_runner" in imported(p) for p in sorted(folder.rglob("*.py"))):
      out.append(f"{study}: does not import benchmarks.study_runner")
  return out


def test_every_study_declares_its_protocol_and_trains_through_the_one_runner():
  assert untied_studies() == []


def test_the_check_sees_a_study_without_a_protocol_or_the_runner(tmp_path, monkeypatch):
  fake = tmp_path / "benchmarks"
  for study in STUDIES:
    (fake / study).mkdir(parents=True)
    (fake / study / "protocol.py").write_text("SEEDS = (0, 1)\n")
    (fake / study / "run.py").write_text("from benchmarks import study_runner\n")
  (fake / "cost" / "protocol.py").unlink()
  (fake / "ladder" / "run.py").write_text("from benchmarks import ledger\n")
  monkeypatch.setitem(globals(), "ROOT", tmp_path)
  monkeypatch.setitem(globals(), "BENCHMARKS", fake)
  assert untied_studies() == ["cost: no protocol.py",
                              "ladder: does not import benchmarks.study_runner"]


def test_the_ladders_rules_and_summary_import_no_driver():
  """What reads the ladder's ledger (its rules, its summary) trains nothing."""
  reading = ("rules", "summary", "momentum", "variants", "summary_file")
  drivers = {"benchmarks.ladder.run", "benchmarks.lm.train", "benchmarks.study_runner"}
  assert [f"{module} -> {target}" for module in reading
          for target in sorted(imported(BENCHMARKS / "ladder" / f"{module}.py"))
          if target in drivers] == []

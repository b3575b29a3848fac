"""The fork map of ``docs/examples.md`` is the trainer's import closure, with its line counts.

"Fork one experiment" lists the files to copy for one of the paper's
experiments on one host. They must be exactly what ``examples/main.py``
imports at module level, followed through the package (imports made inside
functions, such as the multi-process handshake, are left out on purpose), and
the line counts written there must be the files' own.
"""

import ast
import os
import re

from tests.support import REPOSITORY


def _module_level_imports(path: str) -> set[str]:
  """The files of ``examples`` that the module at ``path`` imports at its top level."""
  with open(os.path.join(REPOSITORY, path)) as f:
    tree = ast.parse(f.read())
  found = set()
  for node in tree.body:
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("examples"):
      folder = node.module.replace(".", "/")
      for alias in node.names:
        module = f"{folder}/{alias.name}.py"
        found.add(module if os.path.exists(os.path.join(REPOSITORY, module)) else folder + ".py")
  return found


def _closure() -> set[str]:
  seen, todo = set(), ["examples/main.py"]
  while todo:
    path = todo.pop()
    if path not in seen:
      seen.add(path)
      todo.extend(_module_level_imports(path))
  packages = {os.path.join(os.path.dirname(p), "__init__.py") for p in seen}
  return seen | packages


def _lines(path: str) -> int:
  with open(os.path.join(REPOSITORY, path)) as f:
    return sum(1 for _ in f)


def test_fork_map_lists_the_one_host_closure_with_its_line_counts():
  with open(os.path.join(REPOSITORY, "docs", "examples.md")) as f:
    page = f.read()
  start = page.index("### Fork one experiment")
  section = page[start:page.index("\n## ", start)]
  rows = dict(re.findall(r"^\| `(examples/[\w/]+\.py)` \| (\d+) \|", section, re.M))
  assert set(rows) == _closure()
  assert {path: int(n) for path, n in rows.items()} == {path: _lines(path) for path in rows}
  (total,) = re.findall(r"^\| \*\*total\*\* \| \*\*(\d+)\*\* \|", section, re.M)
  assert int(total) == sum(_lines(path) for path in rows)
  assert "examples/runtime/cluster.py" not in rows  # the multi-process handshake stays out

"""The fork map of ``docs/examples.md``: the files to copy to fork one experiment.

    python -m tools.fork_map            # rewrites the map's line counts from the files
    python -m tools.fork_map --check    # exits 1, changing nothing, if the page is stale

The map lists what ``examples/main.py`` imports at module level, followed
through the package (imports made inside functions, such as the
multi-process handshake, are left out on purpose: a one-host fork needs
none of them), with each file's line count and what it is for. The "what for"
column is kept as written; a file new to the closure gets a placeholder to
fill in. ``bash .ci/paperwork`` checks that the page is current.
"""

import ast
import os
import re

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(REPOSITORY, "docs", "examples.md")
ROW = re.compile(r"^\| `(examples/[\w/]+\.py)` \| (\d+) \| (.*) \|$", re.M)
PLACEHOLDER = "TO DESCRIBE"  # a file new to the closure, until someone says what it is for
TOTAL = re.compile(r"^\| \*\*total\*\* \| \*\*(\d+)\*\* \| \|$", re.M)


def _imported_module(path: str, node: ast.ImportFrom) -> str:
  """The absolute name of the module that ``node``, in the file at ``path``,
  imports from: ``from ..errors import X`` in ``examples/runtime/guard.py`` is
  ``examples.errors``.
  """
  if not node.level:
    return node.module or ""
  package = os.path.dirname(path).split("/")  # a file's package is its folder
  base = package[:len(package) - (node.level - 1)]
  return ".".join(base + ([node.module] if node.module else []))


def _module_level_imports(path: str) -> set[str]:
  """The files of ``examples`` that the module at ``path`` imports at its top
  level, absolutely (``from examples import x``) or relatively (``from . import x``).
  """
  with open(os.path.join(REPOSITORY, path)) as f:
    tree = ast.parse(f.read())
  found = set()
  for node in tree.body:
    if not isinstance(node, ast.ImportFrom):
      continue
    module = _imported_module(path, node)
    if module == "examples" or module.startswith("examples."):
      folder = module.replace(".", "/")
      for alias in node.names:
        file = f"{folder}/{alias.name}.py"  # a module of the package, or a name in one
        found.add(file if os.path.exists(os.path.join(REPOSITORY, file)) else folder + ".py")
  return found


def closure() -> list[str]:
  """``examples/main.py``'s module-level import closure, with the packages' ``__init__``."""
  seen, todo = set(), ["examples/main.py"]
  while todo:
    path = todo.pop()
    if path not in seen:
      seen.add(path)
      todo.extend(_module_level_imports(path))
  seen |= {os.path.join(os.path.dirname(p), "__init__.py") for p in seen}
  return sorted(seen, key=lambda p: (p.count("/"), p))


def lines(path: str) -> int:
  with open(os.path.join(REPOSITORY, path)) as f:
    return sum(1 for _ in f)


def section(page: str) -> str:
  """The "Fork one experiment" section of ``page``."""
  start = page.index("## Fork one experiment")
  return page[start:page.index("\n## ", start)]


def table(purposes: dict[str, str]) -> str:
  files = closure()
  rows = ["| file | lines | what for |", "|---|---|---|"]
  rows += [f"| `{f}` | {lines(f)} | {purposes.get(f, PLACEHOLDER)} |" for f in files]
  rows.append(f"| **total** | **{sum(lines(f) for f in files)}** | |")
  return "\n".join(rows)


def main(argv=None) -> int:
  import argparse
  parser = argparse.ArgumentParser(prog="python -m tools.fork_map",
                                   description="The fork map of docs/examples.md.")
  parser.add_argument("--check", action="store_true",
                      help="change nothing; exit 1 if the page is not what it would be rewritten to")
  args = parser.parse_args(argv)
  with open(PAGE) as f:
    page = f.read()
  old = section(page)
  purposes = {path: what for path, _, what in ROW.findall(old)}
  start = old.index("| file | lines | what for |")
  end = TOTAL.search(old).end()
  new = old[:start] + table(purposes) + old[end:]
  if args.check:
    if new != old:
      print(f"{PAGE}: the fork map is stale; run python -m tools.fork_map to rewrite it")
      return 1
    undescribed = [path for path, _, what in ROW.findall(new) if what == PLACEHOLDER]
    if undescribed:
      print(f"{PAGE}: the fork map does not say what {', '.join(undescribed)} is for; "
            f"write it in place of {PLACEHOLDER}")
      return 1
    print(f"{PAGE}: the fork map is current ({len(closure())} files)")
    return 0
  with open(PAGE, "w") as f:
    f.write(page.replace(old, new))
  print(f"{PAGE}: {len(closure())} files")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())

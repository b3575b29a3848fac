"""The examples import one another relatively, so that a fork may copy them under any
folder name (``docs/examples.md``, "Fork one experiment").
"""

import ast
import glob
import os

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_examples_import_their_own_modules_relatively():
  absolute = []
  for path in glob.glob(os.path.join(REPOSITORY, "examples", "**", "*.py"), recursive=True):
    with open(path) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):  # the imports inside functions too
      if isinstance(node, ast.ImportFrom) and not node.level:
        names = [node.module or ""]
      elif isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
      else:
        continue
      if any(name.split(".")[0] == "examples" for name in names):
        absolute.append(f"{os.path.relpath(path, REPOSITORY)}:{node.lineno}")
  assert not absolute

"""Writes the results pages, the learning-rate guide and two generated lines from the JSON.

    python -m benchmarks.reporting           # the pages and the lines
    python -m benchmarks.reporting --plots   # and every figure beside its JSON

Each page is its template (``templates/<page>.md``), written by hand, with every
number, verdict and table a value from the JSON (``values``). Outside the pages,
two lines are generated, each between its markers: the README's verdict and the
docs' home page's (``LINES``).
"""

from __future__ import annotations

import argparse
import os
import re

from benchmarks import common
from benchmarks.reporting import contest
from benchmarks.reporting import costs
from benchmarks.reporting import decisions
from benchmarks.reporting import ladder
from benchmarks.reporting import markdown
from benchmarks.reporting import momentum
from benchmarks.reporting import noise_scale
from benchmarks.reporting import plots
from benchmarks.reporting import small
from benchmarks.reporting import stats

RESULTS = common.RESULTS
DOCS = "docs"
PAGES = ("results", "results_appendix", "choosing_lr")
# Each generated line: the file, its marker, the template that fills it.
LINES = (("README.md", "verdict", "readme_line"), (os.path.join(DOCS, "index.md"), "verdict",
                                                   "index_line"))


def values(folder: str = RESULTS, images: str = "../" + RESULTS) -> dict[str, str]:
  """Every value a template names, from the JSON under ``folder``; ``images`` is
  ``folder`` as the pages see it.
  """
  declared = decisions.margins(folder)
  memory = (common.load(folder, "cost_cpu") or {}).get("memory", {})
  return {"confidence": f"{stats.CONFIDENCE:.0%}",
          **contest.values(folder, declared, images), **costs.values(folder),
          **small.values(folder, declared, memory.get("workload_shares", {})),
          **ladder.values(folder, images), **momentum.values(folder, images),
          **noise_scale.values(os.path.join(folder, "noise_scale"),
                               f"{images}/noise_scale")}


def pages(folder: str = RESULTS) -> dict[str, str]:
  """Each page's path and text."""
  found = values(folder)
  return {os.path.join(DOCS, f"{page}.md"): markdown.fill(page, found) for page in PAGES}


def marked(key: str) -> re.Pattern:
  """The generated line ``key`` of a file, between its two marker comments."""
  return re.compile(rf"(<!-- {key}:start -->\n)(.*?)(<!-- {key}:end -->)", re.S)


def lines(folder: str = RESULTS, root: str = ".") -> dict[str, str]:
  """Each file with a generated line, and its text with the line filled in."""
  found = values(folder, images=RESULTS)
  out = {}
  for path, key, template in LINES:
    with open(os.path.join(root, path)) as f:
      text = f.read()
    if not marked(key).search(text):
      raise ValueError(f"{path} has no <!-- {key}:start --> ... <!-- {key}:end --> to fill")
    line = markdown.fill(template, found)
    out[path] = marked(key).sub(lambda m, line=line: m.group(1) + line + m.group(3), text)
  return out


def write(folder: str = RESULTS, root: str = ".") -> list[str]:
  """Writes every page and generated line; returns the paths that changed."""
  changed = []
  for path, text in {**pages(folder), **lines(folder, root)}.items():
    full = os.path.join(root, path)
    if common.read_text(full) != text:
      with open(full, "w") as f:
        f.write(text)
      changed.append(path)
  return changed


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.reporting",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--plots", action="store_true",
                      help="draw every figure beside its JSON as well")
  args = parser.parse_args(argv)
  for path in write():
    print(f"wrote {path}")
  if args.plots:
    for path in plots.draw_all(RESULTS):
      print(f"wrote {path}")


if __name__ == "__main__":
  main()

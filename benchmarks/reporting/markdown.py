"""The pages' markdown: templates whose prose is written by hand, and tables.

A page's text lives in its template (``templates/<page>.md``), written by hand;
each ``{{name}}`` in it is a value from the JSON: a number, a verdict's word, a
table, a figure's path (``fill``). No sentence is built in Python. A template
that names a value the data lacks is an error, so that the two cannot drift.

A table has at most ``MAX_COLUMNS`` columns, so that it fits the docs' text
column at 1280 px (``tools/page_check.py`` measures each one in Chromium, in ``.ci/paperwork``):
a wide table is refused where it is built, never cut or squeezed afterwards.
"""

from __future__ import annotations

import math
import os
import re

MAX_COLUMNS = 6
TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")
_SLOT = re.compile(r"\{\{(\w+)\}\}")
_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)

# What a section says until its results land.
NOT_YET = "none yet"


def _template(page: str) -> str:
  """``templates/<page>.md`` without its comments (notes to its editor)."""
  with open(os.path.join(TEMPLATES, f"{page}.md")) as f:
    return _COMMENT.sub("", f.read())


def slots(page: str) -> set[str]:
  """The values ``templates/<page>.md`` names (outside its comments, which ``fill`` drops)."""
  return set(_SLOT.findall(_template(page)))


def fill(page: str, values: dict[str, str]) -> str:
  """``templates/<page>.md`` with each ``{{name}}`` replaced by ``values[name]``,
  its comments left out; a name ``values`` lacks is an error.
  """
  text = _template(page)
  missing = sorted(set(_SLOT.findall(text)) - set(values))
  if missing:
    raise ValueError(f"templates/{page}.md names {missing}, which the results do not give")
  return tidy(_SLOT.sub(lambda m: values[m.group(1)], text))


def table(header: list[str], rows: list[list[str]]) -> str:
  """A markdown table: ``header``, its rule, then ``rows`` (each as wide)."""
  if len(header) > MAX_COLUMNS:
    raise ValueError(f"a table of {len(header)} columns ({', '.join(header)}) is wider than "
                     f"the text column: give it at most {MAX_COLUMNS}")
  for row in rows:
    if len(row) != len(header):
      raise ValueError(f"a row of {len(row)} cells ({row}) under a header of {len(header)}")
  return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                    *("| " + " | ".join(row) + " |" for row in rows)])


def or_none_yet(found, write) -> str:
  """``write(found)`` once ``found`` has landed; ``NOT_YET`` while it is None or empty."""
  return write(found) if found else NOT_YET


def mean_sd(mean: float, sd: float) -> str:
  """A mean in bits per character and its sd over the seeds, to three decimals."""
  return f"{mean:.3f} ± {sd:.3f}"


def tidy(text: str) -> str:
  """No run of blank lines, and one newline at the end."""
  return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def interval(found: dict | None, digits: int = 3, sign: str = "+") -> str:
  """``mean [low, high]``; ``-`` where not measured, ``unbounded`` beyond a fit's floor."""
  if not found:
    return "-"
  if not math.isfinite(found["mean"]):
    return "unbounded"
  if not (math.isfinite(found["low"]) and math.isfinite(found["high"])):
    return f"{found['mean']:{sign}.{digits}f}"
  return (f"{found['mean']:{sign}.{digits}f} [{found['low']:{sign}.{digits}f}, "
          f"{found['high']:{sign}.{digits}f}]")

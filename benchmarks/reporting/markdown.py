"""The pages' markdown: tables narrow by construction, lists in words, and tidy text.

A table has at most ``MAX_COLUMNS`` columns, so that it fits the docs' text
column at 1280 px (``tools/page_check.py`` measures each one in Chromium, in CI):
a wide table is refused where it is built, never cut or squeezed afterwards. A
table with more to say puts it in fewer, wrapping cells (a tuning run's rates as
one list, a comparison's verdict and interval as one cell).
"""

from __future__ import annotations

import re

MAX_COLUMNS = 6


def table(header: list[str], rows: list[list[str]]) -> list[str]:
  """A markdown table's lines: ``header``, its rule, then ``rows`` (each as wide)."""
  if len(header) > MAX_COLUMNS:
    raise ValueError(f"a table of {len(header)} columns ({', '.join(header)}) is wider than "
                     f"the text column: give it at most {MAX_COLUMNS}")
  for row in rows:
    if len(row) != len(header):
      raise ValueError(f"a row of {len(row)} cells ({row}) under a header of {len(header)}")
  return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
          *("| " + " | ".join(row) + " |" for row in rows)]


def joined(items: list[str]) -> str:
  """``a``, ``a and b``, ``a, b and c``."""
  return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def tidy(lines: list[str]) -> str:
  """Lines joined, with no run of blank lines and one newline at the end."""
  text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
  return text.strip("\n") + "\n"

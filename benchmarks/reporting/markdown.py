"""The pages' markdown: their templates, tables narrow by construction, lists in
words, and tidy text.

A page's prose lives in its template (``templates/<page>.md``), one part a
section, each opened by ``<!-- section: name -->``; what a section computes from
the JSON (tables, numbers, short sentences) fills its ``{{slots}}``
(``section``). The modules that build the sections hold no prose of their own
beyond those sentences.

A table has at most ``MAX_COLUMNS`` columns, so that it fits the docs' text
column at 1280 px (``tools/page_check.py`` measures each one in Chromium, in CI):
a wide table is refused where it is built, never cut or squeezed afterwards. A
table with more to say puts it in fewer, wrapping cells (a tuning run's rates as
one list, a comparison's verdict and interval as one cell).
"""

from __future__ import annotations

import functools
import os
import re

MAX_COLUMNS = 6
TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")
_SECTION = re.compile(r"^<!-- section: (\w+) -->\n", re.M)
_SLOT = re.compile(r"\{\{(\w+)\}\}")


@functools.cache
def template(page: str) -> dict[str, str]:
  """The sections of ``templates/<page>.md``, by name, in their order there."""
  with open(os.path.join(TEMPLATES, f"{page}.md")) as f:
    parts = _SECTION.split(f.read())
  return dict(zip(parts[1::2], parts[2::2], strict=True))


def section(page: str, part: str, **slots: str | list[str]) -> list[str]:
  """The section ``part`` of ``page``'s template with its slots filled, as lines; a
  slot's value is a string or a list of lines. A slot left empty or a value without
  a slot is an error, so that a template and its builder cannot drift apart.
  """
  text = template(page)[part]
  wanted = set(_SLOT.findall(text))
  if wanted != set(slots):
    raise ValueError(f"{page}.md, section {part}: slots {sorted(wanted)} in the template, "
                     f"{sorted(slots)} given")
  def text_of(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "\n".join(value)
  return _SLOT.sub(lambda m: text_of(slots[m.group(1)]), text).split("\n")


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

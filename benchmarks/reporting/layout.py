"""The results report as pages a reader finishes: which sections go on the results
page and which to its appendix, and tables cut to the width of the text column.

The report (``render.report``) is markdown; ``blocks`` cuts it at its headings,
``split`` deals each block to the page, the appendix or both (a block kept short
on the page: its first paragraph, with its **Decision.** paragraphs or its first
table and figures, the whole in the appendix), and ``fit_tables`` splits every table too
wide for the column into tables of fewer columns that repeat the row's key.
"""

from __future__ import annotations

import dataclasses
import re

# A rendered column's smallest width: its longest word at about 8 px a character, plus
# 5 px. Fitted to the 56 tables of the results page as Chromium drew them in the docs'
# theme at a 1280 px window, whose text column is 688 px (``tools/page_check.py``): each
# table wider than the column measured at least 680 here, each that fitted at most 669.
CHAR_PX, CELL_PX = 8.0, 5.0
# A table estimated wider than ``COLUMN_WIDTH`` is split, into parts of at most ``PART_WIDTH``
# (a margin for the estimate's error: a part estimated at 616 px, led by the 29
# characters of "schedule_free_vsgd+short_mean", measured 703).
COLUMN_WIDTH, PART_WIDTH = 674, 580

PAGE, APPENDIX, LEAD, DECISION, TABLE = "page", "appendix", "lead", "decision", "table"


@dataclasses.dataclass
class Block:
  """A heading (level 0: the text before the first one) and the lines under it."""
  level: int
  title: str
  body: list[str]

  @property
  def heading(self) -> list[str]:
    return [f"{'#' * self.level} {self.title}", ""] if self.level else []


def blocks(text: str) -> list[Block]:
  """``text`` cut at its markdown headings, in order."""
  out = [Block(0, "", [])]
  fenced = False
  for line in text.splitlines():
    if line.startswith("```"):
      fenced = not fenced
    found = None if fenced else re.match(r"^(#{1,6}) (.*)$", line)
    if found:
      out.append(Block(len(found.group(1)), found.group(2).strip(), []))
    else:
      out[-1].body.append(line)
  return out


def paragraphs(lines: list[str]) -> list[list[str]]:
  """Lines cut at blank lines (a table, a list or an image is one paragraph)."""
  out: list[list[str]] = [[]]
  for line in lines:
    if line.strip():
      out[-1].append(line)
    elif out[-1]:
      out.append([])
  return [p for p in out if p]


def _joined(paras: list[list[str]]) -> list[str]:
  out = []
  for p in paras:
    out += p + [""]
  return out


def short(block: Block, mode: str, note: str) -> list[str]:
  """What the page keeps of a block that the appendix holds whole: its first
  paragraph (``LEAD``), its decisions alone (``DECISION``, where it has any), or its
  first paragraph, first table and figures (``TABLE``); ``note`` ends the first.
  """
  paras = paragraphs(block.body)
  kept = paras[:1]
  if mode == DECISION:
    kept = [p for p in paras if p[0].startswith("**Decision.**")] or kept
  elif mode == TABLE:
    first = next((i for i, p in enumerate(paras[1:], 1) if p[0].startswith("|")), None)
    kept += [p for i, p in enumerate(paras[1:], 1)
             if i == first or p[0].startswith("![")]
  lead = kept[0] if kept else []
  if lead and not re.match(r"\||!\[|[-*] |\d+\. ", lead[0]):  # prose, not a table or list
    kept[0] = lead[:-1] + [f"{lead[-1]} {note}"]
  else:
    kept.append([note])
  return _joined(kept)


def split(text: str, modes: dict[str, str], note: str) -> tuple[str, str]:
  """The report ``text`` dealt to (page, appendix) by each heading's mode in
  ``modes`` (by title; a heading not listed takes its parent's mode, at the top
  ``APPENDIX``): ``PAGE`` on the page alone, ``APPENDIX`` in the appendix alone,
  ``LEAD``, ``DECISION`` and ``TABLE`` short on the page (``short``, ending in
  ``note``) and whole in the appendix. The page's title (level 1) stays on the page. A heading whose block the appendix holds brings its
  parents' headings along, so that the appendix keeps the report's outline.
  """
  page: list[str] = []
  appendix: list[str] = []
  parents: list[tuple[Block, str]] = []  # the open headings above, with their modes
  shown: set[int] = set()  # ids of the blocks whose heading the appendix already shows
  for block in blocks(text):
    if block.level <= 1:
      page += block.heading + block.body
      continue
    while parents and parents[-1][0].level >= block.level:
      parents.pop()
    mode = modes.get(block.title, parents[-1][1] if parents else APPENDIX)
    parents.append((block, mode))
    if mode != APPENDIX:
      page += block.heading
      page += block.body if mode == PAGE else short(block, mode, note)
    if mode != PAGE:
      for parent, _ in parents[:-1]:
        if id(parent) not in shown:
          appendix += parent.heading
          shown.add(id(parent))
      appendix += block.heading + block.body
      shown.add(id(block))
  return _tidy(page), _tidy(appendix)


def _tidy(lines: list[str]) -> str:
  """Lines joined, with no run of blank lines and one newline at the end."""
  text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
  return text.strip("\n") + "\n"


def _cells(row: str) -> list[str]:
  return [c.strip() for c in row.strip().strip("|").split("|")]


def _plain(cell: str) -> str:
  """A cell's text as a reader sees it: no emphasis, code marks or link targets."""
  return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", re.sub(r"\*\*|`", "", cell))


def column_widths(rows: list[list[str]]) -> list[float]:
  """Each column's smallest rendered width: cells wrap at spaces, never inside a word."""
  columns = max(len(r) for r in rows)
  return [CELL_PX + CHAR_PX * max((len(w) for r in rows if i < len(r)
                                   for w in _plain(r[i]).split()), default=0)
          for i in range(columns)]


def table_width(rows: list[list[str]]) -> float:
  return sum(column_widths(rows))


def _key_columns(rows: list[list[str]]) -> int:
  """How many leading columns name a row: the first, or the first two where the
  first repeats (one entry on several workloads, say).
  """
  firsts = [r[0] for r in rows[1:]]
  return 1 if len(set(firsts)) == len(firsts) or len(rows[0]) < 3 else 2


def split_table(rows: list[list[str]], width: float = COLUMN_WIDTH,
                part: float = PART_WIDTH) -> list[list[list[str]]]:
  """``rows`` (the header first) whole where they fit ``width``, else as tables no
  wider than ``part`` where they can be: the key columns in each, then as many of
  the other columns, in order, as fit.
  """
  if table_width(rows) <= width:
    return [rows]
  keys = _key_columns(rows)
  widths = column_widths(rows)
  chunks: list[list[int]] = [[]]
  used = sum(widths[:keys])
  for i in range(keys, len(widths)):
    if chunks[-1] and used + widths[i] > part:
      chunks.append([])
      used = sum(widths[:keys])
    chunks[-1].append(i)
    used += widths[i]
  return [[[r[c] if c < len(r) else "" for c in [*range(keys), *chunk]] for r in rows]
          for chunk in chunks]


def fit_tables(text: str, width: float = COLUMN_WIDTH) -> str:
  """``text`` with every markdown table wider than ``width`` split (``split_table``),
  the parts one after another, each with its header.
  """
  out: list[str] = []
  table: list[str] = []

  def flush():
    if not table:
      return
    rows = [_cells(r) for r in table if not re.fullmatch(r"\|[-:| ]+\|", r.strip())]
    parts = split_table(rows, width)
    if len(parts) == 1:
      out.extend(table)
    else:
      for i, part in enumerate(parts):
        if i:
          out.append("")
        out.append("| " + " | ".join(part[0]) + " |")
        out.append("|" + "---|" * len(part[0]))
        out.extend("| " + " | ".join(r) + " |" for r in part[1:])
    table.clear()

  for line in text.split("\n"):
    if line.startswith("|"):
      table.append(line)
    else:
      flush()
      out.append(line)
  flush()
  return "\n".join(out)

"""How the results show each optimizer: its place in tables and its line in plots.

Both come from the repository's one table of optimizer names
(``benchmarks/optimizer_table.py``): its order puts each variant right after the
optimizer it varies, and a name missing from it is an error that says where to
add it.
"""

from __future__ import annotations

from benchmarks import optimizer_table

ORDER: tuple[str, ...] = optimizer_table.ORDER


def style(name: str) -> tuple[str, str]:
  """(colour, line style) of an optimizer's line."""
  row = optimizer_table.row(name)
  return row.colour, row.line


def rank(name: str) -> int:
  """Where ``name`` goes among the optimizers (the table's order)."""
  optimizer_table.row(name)
  return ORDER.index(name)

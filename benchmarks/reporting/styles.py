"""How the results show each optimizer: its place in tables and its line in plots.

Keyed by the names the result files use. ``ORDER`` puts each variant right after
the optimizer it varies; a name not listed here goes last, in black.
"""

from __future__ import annotations

# name -> (matplotlib colour, line style); the order of the keys is ``ORDER``.
STYLES: dict[str, tuple[str, str]] = {
    "vsgd": ("C0", "-"),
    "vsgd+bf16_state": ("C0", "--"),
    "vsgd+bf16_nearest": ("C0", "-."),
    "vsgd+per_example": ("C0", ":"),
    "factored_vsgd": ("C5", "-"),
    "factored_vsgd+bf16_mu": ("C5", "--"),
    "schedule_free_vsgd": ("C6", "-"),
    "schedule_free_vsgd+short_mean": ("C6", "--"),
    "constant_vsgd": ("C9", "-"),
    "adam": ("C3", "-"),
    "adam+bf16_mu": ("C3", "--"),
    "adamw": ("C1", "--"),
    "sgd_momentum": ("C7", "-"),
    "schedule_free_adamw": ("C2", "-"),
    "lion": ("C4", "-"),
    "muon": ("C8", "-"),
    "vsgd_muon": ("C8", "--"),
    "sgd": ("C7", "--"),
    "adafactor+momentum": ("C5", ":"),
    "adafactor": ("C5", "-."),
}
ORDER: tuple[str, ...] = tuple(STYLES)
UNLISTED = ("k", "-")


def style(name: str) -> tuple[str, str]:
  """(colour, line style) of an optimizer's line."""
  return STYLES.get(name, UNLISTED)


def rank(name: str) -> int:
  """Where ``name`` goes among the optimizers; unlisted names after all listed ones."""
  return ORDER.index(name) if name in ORDER else len(ORDER)

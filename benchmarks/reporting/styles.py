"""What the pages call each optimizer and the line the plots draw it with.

``STYLES`` has a row for every name in ``benchmarks/optimizers.py``'s
``REGISTRY``, in its order (the tables' order); the reporting reads names from
the result files and never builds an optimizer, so it keeps its own table of
how each is shown.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Style:
  """How the pages show one optimizer.

  Attributes:
    short: what a table or a legend calls it.
    colour: its line's colour in plots (matplotlib's).
    line: its line's style in plots.
  """
  short: str
  colour: str
  line: str = "-"


# Colours are compared as matplotlib draws them: "C5" is "#8c564b", so no two rows with
# one line style may share a colour under either name.
STYLES: dict[str, Style] = {
    "vsgd": Style("VSGD", "C0"),
    "vsgd+bf16_state": Style("VSGD, bfloat16 state", "C0", "--"),
    "vsgd+bf16_nearest": Style("VSGD, bfloat16 to nearest", "C0", "-."),
    "vsgd+per_example": Style("VSGD, per-example variance", "C0", ":"),
    "factored_vsgd": Style("factored VSGD", "C5"),
    "factored_vsgd+bf16_mu": Style("factored VSGD, bfloat16 mu", "C5", "--"),
    "schedule_free_vsgd": Style("schedule-free VSGD", "C6"),
    "schedule_free_vsgd+short_mean": Style("schedule-free VSGD, short mean", "C6", "--"),
    "constant_vsgd": Style("Constant VSGD", "C9"),
    "vsgd_muon": Style("VSGD-Muon", "#393b79"),
    "vsgd_muon_factored": Style("VSGD-Muon, factored rates", "#6b6ecf"),
    "adam": Style("Adam", "C3"),
    "adam+bf16_mu": Style("Adam, bfloat16 mu", "C3", "--"),
    "adamw": Style("AdamW", "C1", "--"),
    "sgd_momentum": Style("SGD with momentum", "C7"),
    "schedule_free_adamw": Style("schedule-free AdamW", "C2"),
    "lion": Style("Lion", "C4"),
    "muon": Style("Muon", "C8"),
    "normuon": Style("NorMuon", "#8c6d31"),
    "muon_vs": Style("Muon-VS", "k"),
    "muon_b0.7": Style("Muon, beta 0.7", "C8", ":"),
    "muon_b0.8": Style("Muon, beta 0.8", "C8", "--"),
    "muon_b0.9": Style("Muon, beta 0.9", "C8", "-."),
    "muon_b0.98": Style("Muon, beta 0.98", "#dbdb8d"),
    "muon_b0.99": Style("Muon, beta 0.99", "#dbdb8d", "--"),
    "vsgd_muon_nesterov": Style("VSGD-Muon, Nesterov look-ahead", "#393b79", "--"),
    "adafactor+momentum": Style("Adafactor with momentum", "#7f7f7f", ":"),
    "adafactor": Style("Adafactor", "#7f7f7f", "-."),
}
ORDER: tuple[str, ...] = tuple(STYLES)


def style(name: str) -> Style:
  """``name``'s style; a name not in the table is an error that says where to add it."""
  if name not in STYLES:
    raise KeyError(f"{name!r} is not in benchmarks/reporting/styles.py's STYLES; add its row "
                   f"there, as in benchmarks/optimizers.py (known: {', '.join(ORDER)})")
  return STYLES[name]


def short(name: str) -> str:
  """What a table or a legend calls ``name``."""
  return style(name).short

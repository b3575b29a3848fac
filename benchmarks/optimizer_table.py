"""Every optimizer name the repository uses, in one table, without JAX.

A name is what a result file, a runner's list and a config call an optimizer:
``examples.optimizers.REGISTRY`` builds the trainer's and the benchmarks'
optimizers under these names, ``benchmarks.contest.entries`` the contest's,
and the reports style, order and label them from here
(``benchmarks/reporting/styles.py``, ``benchmarks/reporting/contest.py``).
Runners and reporting both read it, as they read ``benchmarks.common``; it
imports nothing. ``tests/benchmarks/test_optimizer_table.py`` fails where a
name anywhere (a registry, a runner's list, a committed result) is missing
from this table, or where a variant's base disagrees with it.

Each row: ``short``, what a table or a legend calls it; ``colour`` and
``line``, its line in plots (matplotlib's); ``base``, the optimizer it varies
or wraps (its state, its precision, a wrapper around it), None for an
optimizer of its own. The order of the rows is the order of the tables: each
variant right after what it varies.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Row:
  """One optimizer name's row (the module's docstring says what each field is)."""
  short: str
  colour: str
  line: str = "-"
  base: str | None = None


TABLE: dict[str, Row] = {
    "vsgd": Row("VSGD", "C0"),
    "vsgd+bf16_state": Row("VSGD, bfloat16 state", "C0", "--", "vsgd"),
    "vsgd+bf16_nearest": Row("VSGD, bfloat16 to nearest", "C0", "-.", "vsgd"),
    "vsgd+per_example": Row("VSGD, per-example variance", "C0", ":", "vsgd"),
    "factored_vsgd": Row("factored VSGD", "C5", "-", "vsgd"),
    "factored_vsgd+bf16_mu": Row("factored VSGD, bfloat16 mu", "C5", "--", "factored_vsgd"),
    "schedule_free_vsgd": Row("schedule-free VSGD", "C6", "-", "vsgd"),
    "schedule_free_vsgd+short_mean": Row("schedule-free VSGD, short mean", "C6", "--",
                                         "constant_vsgd"),
    "constant_vsgd": Row("Constant VSGD", "C9", "-", "vsgd"),
    "vsgd_muon": Row("VSGD-Muon", "#8c564b", "-", "vsgd"),
    "vsgd_muon_all": Row("VSGD-Muon, every matrix", "#8c564b", "--", "vsgd_muon"),
    "vsgd_muon_direction": Row("VSGD-Muon of u", "#bcbd22", "-", "vsgd_muon"),
    "vsgd_muon_signal": Row("VSGD-Muon of ρμ", "#17becf", "-", "vsgd_muon"),
    "vsgd_muon_rows": Row("VSGD-Muon, rows by σ²", "#e377c2", "-", "vsgd_muon"),
    "vsgd_muon_factored": Row("VSGD-Muon, factored rates", "#9467bd", "-", "vsgd_muon"),
    "adam": Row("Adam", "C3"),
    "adam+bf16_mu": Row("Adam, bfloat16 mu", "C3", "--", "adam"),
    "adamw": Row("AdamW", "C1", "--", "adam"),
    "sgd_momentum": Row("SGD with momentum", "C7"),
    "sgd": Row("SGD with momentum and L2", "C7", "--", "sgd_momentum"),
    "schedule_free_adamw": Row("schedule-free AdamW", "C2", "-", "adamw"),
    "lion": Row("Lion", "C4"),
    "muon": Row("Muon", "C8"),
    "muon_all": Row("Muon, every matrix", "C8", "--", "muon"),
    "adafactor+momentum": Row("Adafactor with momentum", "#7f7f7f", ":", "adafactor"),
    "adafactor": Row("Adafactor", "#7f7f7f", "-."),
}
ORDER: tuple[str, ...] = tuple(TABLE)
# The variants of what VSGD's noise model adds to Muon, each one argument of
# vsgd_muon (name -> that argument): the contest builds and runs them
# (benchmarks.contest.entries, .protocol), the results pages judge them and the
# API page names them by it (benchmarks.reporting), all from this one table.
VSGD_MUON_VARIANT_ARGS: dict[str, dict] = {
    "vsgd_muon_direction": {"orthogonalize": "direction"},
    "vsgd_muon_signal": {"orthogonalize": "signal"},
    "vsgd_muon_rows": {"normalize": "rows"},
    # Every matrix of both contest sizes has two axes of at least 128: all factor.
    "vsgd_muon_factored": {"min_dim_size_to_factor": 128},
}
VSGD_MUON_VARIANTS: tuple[str, ...] = tuple(VSGD_MUON_VARIANT_ARGS)


def row(name: str) -> Row:
  """``name``'s row; a name not in the table is an error that says where to add it."""
  if name not in TABLE:
    raise KeyError(f"{name!r} is not in benchmarks/optimizer_table.py's TABLE; add its row "
                   f"there (known: {', '.join(ORDER)})")
  return TABLE[name]


def root(name: str) -> str:
  """The optimizer ``name`` comes from, following ``base`` to its end."""
  while row(name).base is not None:
    name = row(name).base  # type: ignore[assignment]
  return name

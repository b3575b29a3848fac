"""``summary.json``: the ladder's summary (``summary``) and the momentum study's
(``momentum``, its variants' rows included) from the ledger, in one file.

The pages' sections and figure are drawn from it by ``benchmarks.reporting``
(``python -m benchmarks.reporting --plots``).
"""

from __future__ import annotations

import os

from benchmarks import ledger as ledgers
from benchmarks.ladder import ledger
from benchmarks.ladder import momentum
from benchmarks.ladder import summary


def machine_of(line: dict) -> str:
  """A ledger line's machine in words: the processor alone where it was the device."""
  if line["device"] == "cpu":
    return f"{line['cpu']} CPU, {line['cores']} cores"
  return f"{line['device']} ({line['cpu']}, {line['cores']} cores)"


def write(path: str = ledger.PATH, folder: str | None = None) -> dict:
  """``summary.json`` beside the ledger at ``path`` (or in ``folder``): the table, the
  recommendation rule's outcome, the sensitivity check and the digests of the code behind
  the runs. Its figure is the reporting's (``python -m benchmarks.reporting --plots``).
  """
  lines = ledgers.read(path)
  folder = folder or os.path.dirname(path)
  held = summary.finals(lines)
  rows = summary.table(held)
  own = summary.own_best(lines, held)
  rule = summary.recommendation(held, own["holds"])
  readouts = ledgers.read(ledger.readouts_beside(path))
  result = {"rows": rows, "recommendation": rule,
            "momentum": momentum.report(lines, readouts, held, rule),
            "sensitivity": summary.sensitivity(lines, held), "own_best": own,
            "adamw_part_shares": summary.shares(lines, held),
            "sizes_complete": summary.sizes_complete(held),
            "reference_fits": summary.reference_fits(held),
            "sources": sorted({line["source"] for line in lines}),
            "machines": sorted({machine_of(line) for line in lines}),
            "runs": len(lines)}
  ledger.write_json(os.path.join(folder, "summary.json"), result)
  return result

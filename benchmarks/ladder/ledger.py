"""The ladder's ledger: ``runs.jsonl`` (``benchmarks.ledger``'s format), its key and digests.

A program's lines are appended at once when it ends (``benchmarks.ledger.append``),
so that an interrupted program leaves none of its lines. A run already in the
ledger (``key``: entry, size, budget, rate, AdamW-part rate, seed) is not
trained again. Each line carries the digest of the code that trained it
(``source_digest``), the machine and the library versions
(``benchmarks.ledger.machine``).
"""

from __future__ import annotations

import os

from benchmarks import common
from benchmarks import ledger as ledgers
from benchmarks.ladder import entries

PATH = os.path.join(common.RESULTS, "ladder", "runs.jsonl")
# The momentum study's read-outs of VSGD-Muon's effective beta1: runs.jsonl's line of each
# run trained again, with the read-out; keyed and appended as runs.jsonl is.
READOUTS = os.path.join(common.RESULTS, "ladder", "readouts.jsonl")


def readouts_beside(path: str) -> str:
  """The read-outs' ledger beside the ledger at ``path`` (``READOUTS`` beside ``PATH``)."""
  return os.path.join(os.path.dirname(path), os.path.basename(READOUTS))


def rounded(rate: float) -> float:
  """A rate as the ledger keys it, to 6 significant digits: rates equal there are one."""
  return float(f"{rate:.6g}")


def key(line: dict) -> tuple:
  """What makes a run the same run: the code's digest is recorded, not keyed."""
  return (line["entry"], line["size"], float(line["budget"]), rounded(line["rate"]),
          rounded(line["adam_rate"]), int(line["seed"]))


def runs_of(line: dict) -> list[tuple[tuple, dict]]:
  """The one run a line holds, keyed (``benchmarks.study_runner.Runner``'s ``runs_of``)."""
  return [(key(line), line)]


def source_digest(entry: str, root: str = ledgers.REPOSITORY) -> str:
  """A digest of the code entry ``entry``'s numbers depend on."""
  return ledgers.digest_of(entries.SHARED_SOURCES + entries.SOURCES[entry], root)


def write_json(path: str, payload: dict) -> None:
  """``common.write_json`` as the ladder's files are written: indent 1, keys sorted."""
  common.write_json(path, payload, indent=1, sort_keys=True)

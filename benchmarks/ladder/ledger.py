"""The ladder's ledger: ``runs.jsonl``, one JSON line a finished run, appended a program at once.

A program's lines are written in one ``write`` and synced before the next
program starts, so that an interrupted program leaves none of its lines (a
process killed inside the write leaves at most a damaged last line, which
``read`` drops: that program reruns). A run already in the ledger (``key``:
entry, size, budget, rate, AdamW-part rate, seed) is not trained again. Each
line carries the digest of the code that trained it (``source_digest``), the
machine and the library versions.
"""

from __future__ import annotations

import json
import os
import platform

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


def read(path: str = PATH) -> list[dict]:
  """The ledger's lines; a damaged last line (a write cut short) is dropped."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    raw = [line for line in f.read().splitlines() if line.strip()]
  lines = []
  for number, text in enumerate(raw, start=1):
    try:
      lines.append(json.loads(text))
    except json.JSONDecodeError:
      if number == len(raw):
        break
      raise ledgers.LedgerError(
          f"{path} line {number} is not JSON; the ledger is damaged") from None
  return lines


def _drop_cut_line(path: str) -> None:
  """Truncates a last line that a killed write left without its newline."""
  if not os.path.exists(path):
    return
  with open(path, "rb+") as f:
    held = f.read()
    if held and not held.endswith(b"\n"):
      f.truncate(held.rfind(b"\n") + 1)


def append(lines: list[dict], path: str = PATH) -> None:
  """Appends ``lines`` in one write, flushed and synced (after a cut last line is dropped)."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  _drop_cut_line(path)
  text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
  with open(path, "a") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())


def merge(source: str, path: str = PATH) -> int:
  """Appends the lines of the ledger ``source`` (a lease's) that ``path`` lacks; how many."""
  held = {key(line) for line in read(path)}
  new = [line for line in read(source) if key(line) not in held]
  if new:
    append(new, path)
  return len(new)


def source_digest(entry: str, root: str = ledgers.REPOSITORY) -> str:
  """A digest of the code entry ``entry``'s numbers depend on."""
  return ledgers.digest_of(entries.SHARED_SOURCES + entries.SOURCES[entry], root)


def machine() -> dict:
  """The machine and the libraries a run came from."""
  import jax
  import jaxlib
  import optax
  device = jax.devices()[0]
  return {"cpu": common._cpu_model(), "cores": os.cpu_count(), "platform": device.platform,
          "device": device.device_kind, "jax": jax.__version__, "jaxlib": jaxlib.__version__,
          "optax": optax.__version__, "python": platform.python_version(),
          "matmul_precision": str(getattr(jax.config, "jax_default_matmul_precision", None)
                                  or "default")}

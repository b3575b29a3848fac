"""The one ledger: the runs a study has finished, one JSON line a run, kept as they finish,
so that an interrupted study resumes where it stopped.

Every ledger is a JSON-lines file read by ``read`` and appended by ``append``:
lines are written in one ``write``, flushed and synced before the next runs
start, so that an interruption loses at most the runs in progress; a process
killed inside the write leaves at most a damaged last line, which ``read``
drops (those runs train again), while a damaged line before the last is
refused. Each line carries the digest of the code that trained it
(``digest_of``); ``machine`` records the machine and the library versions.
``merge`` appends another ledger's lines that a ledger lacks, by the study's
key (a lease's lines, copied back). Runs enter a ledger through the one runner
(``benchmarks.study_runner``), which asks the ledger's ``runs_of`` what a line
holds. The ladder keys its runs itself (``benchmarks/ladder/ledger.py``); the
time-to-result workloads and the contest keep theirs in a ``Ledger``.

A ``Ledger`` is one JSON-lines file a workload (``runs/ttr_<workload>.jsonl`` in
the schedule's results folder). Its first line says what the runs are of (the
workload's settings and the schedule); each further line is one finished call
of the trainer: one optimizer, one seed, the learning rates it trained and
their curves. Runs are trained (``study_runner.train_rates``) one (optimizer,
seed) at a time (on a cheap workload, whose trainer pads every call to the same
lanes, one call an optimizer), and each is written, flushed and synced before
the next starts: an interruption loses at most the run in progress. Whatever a ledger holds is
used again as it is, so the resumed protocol's result file equals an
uninterrupted one's.

A ledger lives while its workload is in progress: once the workload's result
file is written, the protocol removes it (``finish``), so that a later run
trains afresh. An operator's mistakes are refused in one line, before
anything is trained: a ledger written under other settings (another step
count, batch size or schedule), and a second process on the same ledger (a
lock file, naming the process that holds it). A ledger kept by other training
code (``source``, a digest of the files the runs depend on: ``digest_of``) is
refused too, unless the operator says to resume across the change
(``across_code``, the protocol's ``--resume-across-code``); every run then keeps
the digest of the code that trained it, and the result file names them all
(``sources``). Where the entries of one ledger depend on
different code (the contest's baselines do not depend on this package), the
digest is given per entry, and each run is checked against its own entry's.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import platform
from collections.abc import Callable
from collections.abc import Mapping

import numpy as np

from benchmarks import common

FOLDER = "runs"
RUN_FIELDS = ("val", "train_loss", "test")  # what a line keeps of each of its runs


class LedgerError(RuntimeError):
  """A ledger that this run must not use; the message says why and what to do."""


REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def digest_of(patterns, root: str = REPOSITORY) -> str:
  """A digest of the files the globs ``patterns`` name below ``root``: each one's path
  and bytes, in sorted order; 16 hex digits.
  """
  digest = hashlib.sha256()
  paths = sorted({p for pattern in patterns
                  for p in glob.glob(os.path.join(root, pattern), recursive=True)})
  for path in paths:
    digest.update(os.path.relpath(path, root).encode() + b"\0")
    with open(path, "rb") as f:
      digest.update(f.read() + b"\0")
  return digest.hexdigest()[:16]


def read(path: str) -> list[dict]:
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
        break  # the last line of a process killed while writing it: those runs are lost
      raise LedgerError(f"{path} line {number} is not JSON; the ledger is damaged (move it "
                        "away to start afresh)") from None
  return lines


def _drop_cut_line(path: str) -> None:
  """Truncates a last line that a killed write left without its newline."""
  if not os.path.exists(path):
    return
  with open(path, "rb+") as f:
    held = f.read()
    if held and not held.endswith(b"\n"):
      f.truncate(held.rfind(b"\n") + 1)


def append(lines: list[dict], path: str, sort_keys: bool = True) -> None:
  """Appends ``lines`` in one write, flushed and synced (after a cut last line is dropped);
  ``sort_keys=False`` keeps each line's order of keys, for a ledger whose lines are read
  back into a result file.
  """
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  _drop_cut_line(path)
  text = "".join(json.dumps(line, sort_keys=sort_keys) + "\n" for line in lines)
  with open(path, "a") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())


def merge(source: str, path: str, key: Callable[[dict], tuple]) -> int:
  """Appends the lines of the ledger ``source`` (a lease's) that ``path`` lacks by ``key``;
  how many.
  """
  held = {key(line) for line in read(path)}
  new = [line for line in read(source) if key(line) not in held]
  if new:
    append(new, path)
  return len(new)


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


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


class Ledger:
  """The finished runs of one workload under one set of settings.

  Use as a context manager: entering takes the ledger's lock (refusing a second
  live process) and reads what it holds; leaving releases the lock.
  """

  def __init__(self, path: str, settings: dict, source: str | Mapping[str, str],
               across_code: bool = False):
    self.path, self.settings = path, settings
    # One digest for every entry, or (a mapping) each entry's own.
    self.source_of = dict(source) if isinstance(source, Mapping) else None
    self.source = None if self.source_of is not None else source
    self.across_code = across_code
    self.lock = path + ".lock"
    self._runs: dict = {}  # (entry, seed, learning rate) -> {"val", "train_loss", "test"}
    self.sources: set[str] = set()  # the digests of the code behind the runs held

  def __enter__(self) -> Ledger:
    os.makedirs(os.path.dirname(self.path), exist_ok=True)
    self._take_lock()
    try:
      self._read()
    except BaseException:
      self._release()
      raise
    return self

  def __exit__(self, *exc) -> None:
    self._release()

  def _take_lock(self) -> None:
    for _ in range(2):
      try:
        fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
      except FileExistsError:
        with open(self.lock) as f:
          holder = f.read().strip()
        if holder.isdigit() and _alive(int(holder)):
          raise LedgerError(f"{self.path} is in use by process {holder} (its lock: "
                            f"{self.lock}); run one protocol per results folder, or wait "
                            "for it to end") from None
        os.remove(self.lock)  # the process that held it is gone
        continue
      with os.fdopen(fd, "w") as f:
        f.write(str(os.getpid()))
      return
    raise LedgerError(f"could not take the lock {self.lock}")

  def _release(self) -> None:
    with contextlib.suppress(FileNotFoundError):
      os.remove(self.lock)
    with contextlib.suppress(OSError):
      os.rmdir(os.path.dirname(self.path))  # only where no ledger is left in it

  def _read(self) -> None:
    if not os.path.exists(self.path):
      append([{"settings": self.settings, "source": self.source}], self.path)
      return
    lines = read(self.path)
    header = lines[0] if lines else {}
    held = dict(header.get("settings") or {})
    # (The first ledgers kept the digest among the settings.)
    first_source = header.get("source", held.pop("source", None))
    if held != self.settings:
      differ = sorted(k for k in set(held) | set(self.settings)
                      if held.get(k) != self.settings.get(k))
      raise LedgerError(
          f"{self.path} holds runs under other settings ({', '.join(differ)}: "
          + "; ".join(f"{k} {held.get(k)!r} there, {self.settings.get(k)!r} here"
                      for k in differ)
          + "); run with its settings, or move the ledger away to start afresh")
    if self.source_of is None and first_source != self.source and not self.across_code:
      raise LedgerError(
          f"{self.path} was kept by other training code (source {first_source}, this "
          f"checkout {self.source}); pass --resume-across-code to keep its runs (the "
          "result file then names every source), or move the ledger away to start afresh")
    for number, run in enumerate(lines[1:], start=2):
      source = run.get("source", first_source)
      if (self.source_of is not None and source != self.source_of.get(run["entry"])
          and not self.across_code):
        raise LedgerError(
            f"{self.path} line {number} holds a run of {run['entry']} kept by other code "
            f"(source {source}, this checkout {self.source_of.get(run['entry'])}); pass "
            "--resume-across-code to keep it (the result file then names every source), or "
            "move the ledger away to start afresh")
      self.sources.add(source)
      self._runs.update(runs_of(run))

  def finish(self) -> None:
    """Removes the ledger once its workload's result file is written."""
    with contextlib.suppress(FileNotFoundError):
      os.remove(self.path)

  def held(self, entry: str, seed: int, learning_rate: float) -> dict | None:
    return self._runs.get((entry, int(seed), float(learning_rate)))

  def keep(self, entry: str, runs: dict) -> None:
    """Holds ``runs`` (``{(entry, seed, rate): curves}``) of ``entry``, just written."""
    self._runs.update(runs)
    self.sources.add(self._source(entry))

  def _source(self, entry: str) -> str:
    return self.source if self.source_of is None else self.source_of[entry]

  def lines_of(self, entry: str, lanes: list[tuple[float, int]], out: dict) -> list[dict]:
    """One line a seed of a call's ``lanes`` (rate, seed): its rates and their curves
    (``out``'s arrays have a leading axis of lanes).
    """
    lines = []
    for seed in dict.fromkeys(s for _, s in lanes):
      rows = [i for i, (_, s) in enumerate(lanes) if s == seed]
      lines.append({"entry": entry, "seed": seed, "source": self._source(entry),
                    "learning_rates": [lanes[i][0] for i in rows],
                    **{k: np.asarray(out[k])[rows].tolist() for k in RUN_FIELDS}})
    return lines


def runs_of(line: dict) -> list[tuple[tuple, dict]]:
  """The runs of one ledger line, ``((entry, seed, rate), its curves)``; the header has none."""
  if "entry" not in line:
    return []
  return [((line["entry"], int(line["seed"]), float(lr)), {k: line[k][i] for k in RUN_FIELDS})
          for i, lr in enumerate(line["learning_rates"])]

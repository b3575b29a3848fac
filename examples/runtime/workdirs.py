"""A run's workdir and the files it holds outside the checkpoints: its lock,
its ``run.json`` and its final record.

A workdir belongs to one run, and to one trainer at a time: process 0 locks it
before anything is loaded or compiled, which also finds a workdir that cannot
be written. It is claimed (``run.json`` written) only once the first step has
succeeded, so a run that fails at its start leaves nothing behind. Files
outside the checkpoints (``checkpoints.py``) are written by process 0.

The final record is what the Table 1 protocol reads: ``result.json`` for a
finished run, ``failed.json`` for one that stopped for good. The trainer
writes ``result.json`` last, once a run has all its steps, so its presence
means the run is complete. ``failed.json`` is written by the protocol for a
run that would stop at the same step again (it diverged), so that the table
can be built showing the cell as stopped. A run stopped for a reason that a
rerun can mend (a failed save, a signal) gets neither.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax

from ..errors import ConfigError
from ..errors import WorkdirInUse
from ..errors import first_line
from . import reporting

RESULT_FILE = "result.json"
FAILED_FILE = "failed.json"


def read_run_record(workdir: str) -> dict | None:
  """``run.json`` as a dict, None if there is none; ConfigError if it cannot be read."""
  path = os.path.join(workdir, "run.json")
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      record = json.load(f)
    if not isinstance(record, dict):
      raise ValueError(f"holds a JSON {type(record).__name__}, not an object")
  except (OSError, ValueError) as err:
    raise ConfigError(
        f"{path} is unreadable ({first_line(err)}); it records the settings of the run "
        "whose checkpoints are here: restore it, or choose a new --workdir.") from None
  return record


def refuse_foreign_run(workdir: str, settings: dict, *, not_compared: Sequence[str] = (),
                       defaults: Mapping[str, Any] | None = None) -> None:
  """Refuses a workdir that holds another run, or checkpoints of a run it cannot
  name, so that nothing is overwritten, continued or set aside by mistake.

  Args:
    workdir: the run's folder; it need not exist.
    settings: the run's settings as ``run.json`` holds them (plain JSON values).
    not_compared: settings that may change between the parts of one run (how it
      is carried out, not what it computes).
    defaults: settings that older records lack, at the value those runs had.

  Raises:
    ConfigError: the workdir is a file, holds checkpoints without a
      ``run.json``, or holds a run whose settings differ.
  """
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise ConfigError(f"--workdir {workdir} is a file, not a folder; "
                      "choose a folder (it is created if missing).")
  record = read_run_record(workdir)
  if record is None:
    checkpoints = os.path.join(workdir, "checkpoints")
    if os.path.isdir(checkpoints) and os.listdir(checkpoints):
      raise ConfigError(
          f"{workdir} holds checkpoints but no run.json, so the settings they were "
          "trained with are unknown; restore its run.json to resume them, or choose a "
          "new --workdir.")
    return
  theirs = {k: v for k, v in record.items() if k not in not_compared}
  for name, value in (defaults or {}).items():  # an older record ran at the default
    theirs.setdefault(name, value)
  mine = {k: v for k, v in settings.items() if k not in not_compared}
  if theirs != mine:
    changed = sorted(k for k in set(mine) | set(theirs) if theirs.get(k) != mine.get(k))
    raise ConfigError(
        f"{workdir} holds another run (its run.json differs in: {', '.join(changed)}); "
        "choose a new --workdir, or rerun with the same settings to resume it.")


class Lock:
  """One trainer per workdir: an exclusive ``flock`` on ``workdir/lock``.

  The file says who holds it (pid, host, start time). The kernel drops the
  lock when its holder exits in any way, kill -9 included, so a lock file left
  by a dead trainer does not block the next one: only a live holder does.
  ``flock`` is reliable on local disks; on NFS it depends on the server.
  """

  def __init__(self, workdir: str):
    self.workdir = workdir
    self.path = os.path.join(workdir, "lock")
    self._fd: int | None = None
    self._created: str | None = None  # the outermost folder this lock made

  def _make_workdir(self) -> None:
    top, missing = os.path.abspath(self.workdir), None
    while not os.path.exists(top):
      missing, top = top, os.path.dirname(top)
    try:
      os.makedirs(self.workdir, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
      raise ConfigError(f"--workdir {self.workdir} is a file, or inside one, not a "
                        "folder; choose a folder (it is created if missing).") from None
    except OSError as err:
      raise ConfigError(f"cannot create the workdir {self.workdir}: "
                        f"{err.strerror}; choose a folder you can write to.") from None
    self._created = missing

  def acquire(self) -> None:
    """Takes the lock at once, or refuses in one line that names its holder."""
    self._make_workdir()
    while True:
      try:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
      except OSError as err:
        self.release()
        raise ConfigError(f"the workdir {self.workdir} is not writable "
                          f"({err.strerror}); choose a folder you can write to.") from None
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        self.release()
        raise WorkdirInUse(
            f"{self.workdir} is in use by another trainer ({holder}); wait for it to end "
            "or stop it, or choose another --workdir.") from None
      # The previous holder removes the file as it lets go: lock the file that is there now.
      try:
        same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
      except FileNotFoundError:
        same = False
      if same:
        break
      os.close(fd)
    self._fd = fd
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    holder = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": started})
    try:
      os.ftruncate(fd, 0)
      os.pwrite(fd, (holder + "\n").encode(), 0)
    except OSError as err:
      self.release()
      raise ConfigError(f"the workdir {self.workdir} is not writable "
                        f"({err.strerror}); choose a folder you can write to.") from None

  def release(self, keep_workdir: bool = True) -> None:
    """Lets go of the lock; removes the folders it made unless ``keep_workdir``."""
    if self._fd is not None:
      with contextlib.suppress(OSError):
        os.unlink(self.path)
      os.close(self._fd)
      self._fd = None
    if not keep_workdir and self._created is not None:
      # Only empty folders go, and only those this lock made.
      folder, outermost = os.path.abspath(self.workdir), self._created
      while True:
        try:
          os.rmdir(folder)
        except OSError:
          break
        if folder == outermost:
          break
        folder = os.path.dirname(folder)
      self._created = None


def _holder(fd: int) -> str:
  try:
    info = json.loads(os.pread(fd, 4096, 0).decode())
    return f"pid {info['pid']} on host {info['host']}, started {info['started']}"
  except (OSError, ValueError, KeyError, TypeError):
    return "it is just starting"


def claim(workdir: str, settings: dict) -> None:
  """Writes ``settings`` as ``run.json`` (process 0), marking the workdir as this run's."""
  if jax.process_index() != 0:
    return
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, "run.json")
  if not os.path.exists(path):
    write_json(path, settings)


def write_json(path: str, record) -> None:
  """Writes ``record`` as indented JSON all at once: a reader sees the old file
  or the new one, never a part (a temporary file, then a rename).
  """
  with open(path + ".tmp", "w") as f:
    json.dump(record, f, indent=2)
  os.replace(path + ".tmp", path)


def write_result(workdir: str, step: int, last: dict, settings: dict, *,
                 validation_is_test: bool, held_out: int | None) -> None:
  """``result.json``: the finished run's final numbers and settings.

  Args:
    workdir: the run's folder.
    step: the step the run finished at.
    last: its final metrics (those not named here are left out).
    settings: its settings as ``run.json`` holds them.
    validation_is_test: whether its validation split is the test split.
    held_out: how many training images were held out for validation; None
      where there is no validation split.
  """
  keys = ("test_loss", "test_accuracy", "validation_loss", "validation_accuracy",
          "train_loss", "train_accuracy")
  record = {"step": step, **{k: reporting.readable(last[k]) for k in keys if k in last},
            "validation": ("the test split (TinyImageNet's official val split, as the "
                           "authors' protocol has it)" if validation_is_test else
                           f"{held_out} held-out training images"
                           if held_out is not None else None),
            "settings": settings}
  write_json(os.path.join(workdir, RESULT_FILE), record)


def write_failed(workdir: str, message: str) -> None:
  """``failed.json``: the run stopped for good, and why."""
  os.makedirs(workdir, exist_ok=True)  # a run that failed at its first step made none
  write_json(os.path.join(workdir, FAILED_FILE), {"failed": message})


def read_outcome(workdir: str) -> dict | None:
  """The run's final record, ``{"failed": message}`` for a run that stopped
  for good, or None while it is unfinished.
  """
  for name in (RESULT_FILE, FAILED_FILE):
    path = os.path.join(workdir, name)
    if os.path.exists(path):
      with open(path) as f:
        return json.load(f)
  return None

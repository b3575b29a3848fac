"""A run's workdir: its lock, its ``run.json``, and Orbax checkpoints that survive a
corrupt one.

A workdir belongs to one run, and to one trainer at a time: process 0 locks it
before anything is loaded or compiled, which also finds a workdir that cannot
be written. It is claimed (``run.json`` written) only once the first step has
succeeded, so a run that fails at its start leaves nothing behind.
Checkpoints are saved and restored by every process, as Orbax expects; files
outside them are written by process 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import gc
import io
import json
import os
import shutil
import socket
import sys
import time
from typing import Any

import jax
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from examples import configs


def _comparable(config: configs.Config) -> dict:
  settings = json.loads(json.dumps(dataclasses.asdict(config)))
  return {k: v for k, v in settings.items() if k not in configs.NOT_PART_OF_THE_RUN}


class SaveFailed(Exception):
  """A checkpoint could not be written; the message names the path and the cause."""


def _first_line(err: BaseException) -> str:
  text = str(err).strip()
  return text.splitlines()[0] if text else type(err).__name__


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
    raise configs.ConfigError(
        f"{path} is unreadable ({_first_line(err)}); it records the settings of the run "
        "whose checkpoints are here: restore it, or choose a new --workdir.") from None
  return record


def check(workdir: str, config: configs.Config) -> None:
  """Refuses a workdir that holds another run, or checkpoints of a run it cannot
  name, so that nothing is overwritten, continued or set aside by mistake.
  """
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise configs.ConfigError(f"--workdir {workdir} is a file, not a folder; "
                              "choose a folder (it is created if missing).")
  record = read_run_record(workdir)
  if record is None:
    checkpoints = os.path.join(workdir, "checkpoints")
    if os.path.isdir(checkpoints) and os.listdir(checkpoints):
      raise configs.ConfigError(
          f"{workdir} holds checkpoints but no run.json, so the settings they were "
          "trained with are unknown; restore its run.json to resume them, or choose a "
          "new --workdir.")
    return
  theirs = {k: v for k, v in record.items() if k not in configs.NOT_PART_OF_THE_RUN}
  mine = _comparable(config)
  if theirs != mine:
    changed = sorted(k for k in set(mine) | set(theirs) if theirs.get(k) != mine.get(k))
    raise configs.ConfigError(
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
      raise configs.ConfigError(f"--workdir {self.workdir} is a file, or inside one, not a "
                                "folder; choose a folder (it is created if missing).") from None
    except OSError as err:
      raise configs.ConfigError(f"cannot create the workdir {self.workdir}: "
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
        raise configs.ConfigError(f"the workdir {self.workdir} is not writable "
                                  f"({err.strerror}); choose a folder you can write to.") from None
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        self.release()
        raise configs.ConfigError(
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
      raise configs.ConfigError(f"the workdir {self.workdir} is not writable "
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


def claim(workdir: str, config: configs.Config) -> None:
  """Writes ``run.json`` (process 0), marking the workdir as this run's."""
  if jax.process_index() != 0:
    return
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, "run.json")
  if not os.path.exists(path):
    with open(path + ".tmp", "w") as f:
      json.dump(dataclasses.asdict(config), f, indent=2)
    os.replace(path + ".tmp", path)


@contextlib.contextmanager
def _quiet_if_failing(settle_seconds: float = 1.0, longest_seconds: float = 30.0):
  """Holds back stderr and unraisable-exception reports; replays them on
  success and drops them on failure.

  When Orbax's restore fails on one array, the reads still pending for the
  others finish later on TensorStore's threads, and each reports an "Event
  loop is closed" error, a "Future exception was never retrieved" or both.
  They are noise next to the one-line report, so after a failure the capture
  stays on until the output has been quiet for ``settle_seconds``.
  """
  captured, unraisable = io.StringIO(), []
  real_stderr, real_hook = sys.stderr, sys.unraisablehook
  sys.stderr, sys.unraisablehook = captured, unraisable.append
  try:
    yield
  except BaseException:
    deadline, seen = time.monotonic() + longest_seconds, -1
    while (seen != len(captured.getvalue()) + len(unraisable)
           and time.monotonic() < deadline):
      seen = len(captured.getvalue()) + len(unraisable)
      time.sleep(settle_seconds)
      gc.collect()  # the failed futures report themselves when collected
    raise
  else:
    real_stderr.write(captured.getvalue())
    for report in unraisable:
      real_hook(report)
  finally:
    sys.stderr, sys.unraisablehook = real_stderr, real_hook


def _sync(name: str) -> None:
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)


def _root_cause(err: BaseException) -> str:
  """The innermost OSError's errno and message (``[Errno 28] No space left on
  device``), else the first line of the outermost error.
  """
  seen, found = err, None
  while seen is not None:
    if isinstance(seen, OSError) and seen.strerror:
      found = seen
    seen = seen.__cause__ or seen.__context__
  if found is not None:
    where = f": {found.filename}" if found.filename else ""
    return f"[Errno {found.errno}] {found.strerror}{where}"
  return f"{type(err).__name__}: {_first_line(err)[:200]}"


def _listdir(path: str) -> list[str]:
  try:
    return os.listdir(path)
  except OSError:
    return []


class Checkpoints:
  """The workdir's Orbax checkpoints, the newest ``max_to_keep`` of them.

  The checkpoint folder is created at the first save, not before.
  """

  def __init__(self, workdir: str, max_to_keep: int = 2):
    self.workdir = workdir
    self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    self.max_to_keep = max_to_keep
    self._manager = None

  def _open(self, create: bool) -> ocp.CheckpointManager:
    if self._manager is None:
      # Synchronous saves: a failed save surfaces at the save that failed.
      options = ocp.CheckpointManagerOptions(max_to_keep=self.max_to_keep, create=create,
                                             enable_async_checkpointing=False)
      self._manager = ocp.CheckpointManager(self.directory, options=options)
    return self._manager

  def latest_step(self) -> int | None:
    if self._manager is None and not os.path.isdir(self.directory):
      return None
    return self._open(create=False).latest_step()

  def restore_latest(self, like: Any) -> Any | None:
    """The newest intact checkpoint, restored with the shardings of ``like``.

    A checkpoint that cannot be read is reported in one line and moved to
    ``corrupt_checkpoints/`` (kept, in case it is wanted), and the next older
    one is tried. None when there is nothing to restore.
    """
    if not os.path.isdir(self.directory):
      return None
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
    for step in sorted(self._open(create=False).all_steps(), reverse=True):
      try:
        with _quiet_if_failing():
          return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))
      except Exception as err:  # any failure to read means: do not trust this one
        self._set_aside(step, err)
    if jax.process_index() == 0:
      print(f"warning: no intact checkpoint in {self.directory}; starting from step 0",
            file=sys.stderr)
    return None

  def _set_aside(self, step: int, err: Exception) -> None:
    if jax.process_index() == 0:
      aside = os.path.join(self.workdir, "corrupt_checkpoints", str(step))
      copies = 1
      while os.path.exists(aside):  # the same step may have gone bad before
        aside, copies = os.path.join(self.workdir, "corrupt_checkpoints",
                                     f"{step}-{copies}"), copies + 1
      reason = str(err).strip().splitlines()[0] if str(err).strip() else ""
      print(f"warning: checkpoint {step} in {self.directory} is unreadable "
            f"({type(err).__name__}: {reason[:200]}); moved to {aside}, "
            "trying the previous one", file=sys.stderr)
      os.makedirs(os.path.dirname(aside), exist_ok=True)
      os.replace(os.path.join(self.directory, str(step)), aside)
    _sync(f"set_aside_{step}")
    self._manager.reload()  # forget the step that was moved

  def save(self, step: int, state: Any) -> None:
    """Writes checkpoint ``step``; raises ``SaveFailed`` (one line) if it cannot.

    Orbax writes into a temporary folder and renames it at the end, so a
    failed save leaves the earlier checkpoints as they were; its partial
    folder is removed to give back the space it took.
    """
    manager = self._open(create=True)  # on every process alike: opening may synchronize
    previous = manager.latest_step()
    try:
      with _quiet_if_failing(settle_seconds=0.2, longest_seconds=5.0):
        manager.save(step, args=ocp.args.StandardSave(state))
    except Exception as err:  # disk full, no permission, a path that is a file, ...
      cause = _root_cause(err)
      for name in _listdir(self.directory):
        if name.startswith(f"{step}.") and "tmp" in name:
          shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)
      kept = (f"checkpoint {previous} is intact" if previous is not None
              else "no earlier checkpoint was saved")
      raise SaveFailed(f"could not save checkpoint {step} in {self.directory}: {cause}; "
                       f"{kept}. Free space or fix permissions there, then rerun the same "
                       "command to resume.") from err

  def close(self) -> None:
    if self._manager is not None:
      self._manager.close()
      self._manager = None

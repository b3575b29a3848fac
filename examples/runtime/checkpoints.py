"""A run's Orbax checkpoints: synchronous saves that fail in one line, and
restores that set a corrupt checkpoint aside and fall back to the one before.

Checkpoints are saved and restored by every process, as Orbax expects.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import shutil
import sys
import time
from typing import Any

import jax
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from ..errors import first_line


class SaveFailed(Exception):
  """A checkpoint could not be written; the message names the path and the cause."""


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
  return f"{type(err).__name__}: {first_line(err)[:200]}"


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

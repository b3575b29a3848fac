"""A run's workdir: its ``run.json``, and Orbax checkpoints that survive a corrupt one.

A workdir belongs to one run. It is checked before anything happens and claimed
(``run.json`` written) only once the first step has succeeded, so a run that
fails at its start leaves nothing behind. Checkpoints are saved and restored by
every process, as Orbax expects; files outside them are written by process 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import io
import json
import os
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


def check(workdir: str, config: configs.Config) -> None:
  """Refuses a workdir that holds another run, so that nothing is overwritten."""
  path = os.path.join(workdir, "run.json")
  if not os.path.exists(path):
    return
  with open(path) as f:
    theirs = {k: v for k, v in json.load(f).items() if k not in configs.NOT_PART_OF_THE_RUN}
  mine = _comparable(config)
  if theirs != mine:
    changed = sorted(k for k in set(mine) | set(theirs) if theirs.get(k) != mine.get(k))
    raise configs.ConfigError(
        f"{workdir} holds another run (its run.json differs in: {', '.join(changed)}); "
        "choose a new --workdir, or rerun with the same settings to resume it.")


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
      options = ocp.CheckpointManagerOptions(max_to_keep=self.max_to_keep, create=create)
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
    self._open(create=True).save(step, args=ocp.args.StandardSave(state))

  def wait(self) -> None:
    """Blocks until the last save is complete on disk."""
    if self._manager is not None:
      self._manager.wait_until_finished()

  def close(self) -> None:
    if self._manager is not None:
      self._manager.close()
      self._manager = None

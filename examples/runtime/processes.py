"""What the processes of one run compare: their settings once at the start, a
start-up failure, and a stop request at the steps that poll for one.

Each is a collective over all processes (``jax.experimental.multihost_utils``)
and a no-op in a one-process run. ``cluster.py`` makes the processes meet.
"""

from __future__ import annotations

import json
import zlib

import jax
import numpy as np
from jax.experimental import multihost_utils

from ..errors import ConfigError


def _digest(value) -> int:
  return zlib.crc32(json.dumps(value, sort_keys=True).encode()) & 0x7FFFFFFF


def agree(settings: dict) -> None:
  """Refuses, on every process alike, settings that differ between processes.

  Compares one hash per setting, so that the one line can name the settings
  that differ. A no-op in a one-process run.
  """
  if jax.process_count() == 1:
    return
  names = sorted(settings)
  same_names = multihost_utils.process_allgather(np.int32(_digest(names)))
  if len(set(np.asarray(same_names).tolist())) > 1:
    raise ConfigError("the processes run different versions of the trainer "
                      "(their settings have different names); run one version")
  mine = np.array([_digest(settings[n]) for n in names], np.int32)
  everyone = np.asarray(multihost_utils.process_allgather(mine))
  differing = [n for i, n in enumerate(names) if len(set(everyone[:, i].tolist())) > 1]
  if differing:
    values = ", ".join(f"{n}={json.dumps(settings[n])}" for n in differing)
    raise ConfigError(
        f"the processes' settings differ in: {', '.join(differing)} (process "
        f"{jax.process_index()} has {values}); start every process with the same settings.")


def any_process(value: int) -> int:
  """The largest of one integer over all processes (the value itself in a one-process run)."""
  if jax.process_count() == 1:
    return value
  return int(np.max(multihost_utils.process_allgather(np.int32(value))))


def first_failure(failure: Exception | None) -> None:
  """Raises on every process if any process failed a start-up check.

  A process that failed raises its own error; the others name the processes
  that failed (otherwise they would wait for them at their next collective).
  """
  if jax.process_count() > 1:
    flags = np.asarray(multihost_utils.process_allgather(np.int32(failure is not None)))
    failed = [i for i, flag in enumerate(flags.tolist()) if flag]
  else:
    failed = [0] if failure is not None else []
  if failure is not None:
    raise failure
  if failed:
    raise ConfigError(
        f"process(es) {', '.join(map(str, failed))} of this run could not start (their "
        "own output says why); this process stops too.")

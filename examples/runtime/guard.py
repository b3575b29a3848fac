"""The guard around one run's training loop: the processes agree on the run,
the workdir is held by one trainer, a failed start stops every process at
once, and a stop request reaches every process at the same step.

``train.py`` runs its loop inside ``hold`` (entered before anything is loaded
or compiled), loads the data with ``load_dataset_everywhere`` and asks
``stop_asked`` after each step. Each takes the values it needs, not the
trainer's config. In a one-process run each comparison between processes is a
no-op (``processes.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import jax

from .. import datasets
from ..errors import ConfigError
from ..errors import TrainerError
from . import processes
from . import stopping
from . import workdirs

# Settings that may differ between the processes of one run: each host has
# its own paths, and these change nothing in what the processes compute.
PER_PROCESS = ("data_dir", "prefetch", "tensorboard")


@contextlib.contextmanager
def hold(settings: dict, workdir: str, stop_after: int | None,
         stop: stopping.GracefulStop | None, *, not_compared: Sequence[str] = (),
         defaults: Mapping[str, Any] | None = None) -> Iterator[stopping.GracefulStop]:
  """Holds ``workdir`` for the run of ``settings`` while the context lasts.

  The processes first check that they hold the same settings (``stop_after``
  included); then process 0 locks the workdir and every process checks that
  it holds no other run (``workdirs.refuse_foreign_run``, which takes
  ``not_compared`` and ``defaults``). A refusal on any process stops every
  process, with nothing written (a ``TrainerError``). Yields ``stop``, or a
  stop that is never signalled in place of None; its exit at once (before the
  first step has finished) also lets go of the lock. On leaving, the lock is
  released and the empty folders that it made are removed.

  Args:
    settings: the run's settings as ``run.json`` holds them.
    workdir: the run's folder.
    stop_after: the steps this part of the run trains at most (None: all).
    stop: the caller's stop, entered; None for one that is never signalled.
    not_compared: settings that may change between the parts of one run.
    defaults: settings that older records lack, at the value those runs had.
  """
  shared = {k: v for k, v in settings.items() if k not in PER_PROCESS}
  processes.agree({**shared, "stop_after": stop_after})
  lock = workdirs.Lock(workdir)
  failure = None
  try:
    if jax.process_index() == 0:
      lock.acquire()  # before the data load and the compile: finds an unwritable workdir
    workdirs.refuse_foreign_run(workdir, settings, not_compared=not_compared,
                                defaults=defaults)
  except TrainerError as err:
    failure = err
  try:
    processes.first_failure(failure)
  except TrainerError:
    lock.release(keep_workdir=False)
    raise
  stop = stop or stopping.GracefulStop()  # not entered: never signalled

  def undo_start() -> None:
    lock.release(keep_workdir=False)
  stop.before_exit.append(undo_start)
  try:
    yield stop
  finally:
    stop.before_exit.remove(undo_start)
    lock.release(keep_workdir=False)  # removes only the empty folders it made


def load_dataset_everywhere(name: str, data_dir: str, seed: int, validation_size: int,
                            download: bool) -> datasets.Dataset:
  """Every process loads the dataset; a download is made by process 0 alone,
  while the others wait for it (all of them writing one file would clash).

  A process that cannot load it stops, and every other process stops with it
  at once, naming it: otherwise they would wait for it at their first
  collective until a timeout. The arguments are ``datasets.load_dataset``'s;
  ``download`` allows fetching a missing archive.
  """
  def load(allow_download: bool):
    try:
      return datasets.load_dataset(name, data_dir, seed, allow_download=allow_download,
                                   validation_size=validation_size), None
    except datasets.DatasetError as err:
      return None, ConfigError(str(err))

  shared_download = download and jax.process_count() > 1
  if shared_download and jax.process_index() != 0:
    processes.first_failure(None)  # the download is done, or process 0 says it failed
    dataset, failure = load(allow_download=False)
  else:
    dataset, failure = load(allow_download=download)
    if shared_download:
      processes.first_failure(failure)
  processes.first_failure(failure)
  return dataset


def stop_asked(stop: stopping.GracefulStop, done: int, polled_every: Sequence[int]) -> int:
  """The signal (its number) at which every process stops after step ``done``, or 0.

  Every process stops at the same step: the first polled one at which any
  was signalled. Polling several processes is a collective, which makes the
  host wait for the step: it is done only where the host waits anyway, at
  every step of a one-process run (no collective is needed), else at the
  steps that are a multiple of one of ``polled_every`` (the intervals at
  which the run logs, evaluates and saves).
  """
  polled = jax.process_count() == 1 or any(done % every == 0 for every in polled_every)
  return processes.any_process(stop.signal or 0) if polled else 0

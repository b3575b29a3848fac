"""Stopping a run on SIGTERM or SIGINT: after the current step, with a checkpoint.

The first signal asks the training loop to stop once its step is done; the
loop saves a checkpoint and the trainer exits 143 (SIGTERM) or 130 (SIGINT),
as shells expect. A second signal exits at once, and so does a first one that
arrives before any step has finished (in the data load or the first compile),
when there is nothing to save.

Python runs its signal handlers only between bytecodes of the main thread,
which may sit in one compile for minutes. So the signal also wakes a watcher
thread (``signal.set_wakeup_fd``), and that thread exits the process when an
exit at once is what is asked for.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _ignore(signum, frame) -> None:
  """The Python-level handler: the watcher thread does the work."""


class GracefulStop:
  """A context that turns SIGTERM and SIGINT into a request to stop.

  ``signal`` is the first signal received (None while none was). The loop sets
  ``stoppable`` once a step has finished; before that a signal exits at once,
  after calling the ``before_exit`` callables (which remove what a failed start
  made). Outside the main thread it does nothing (signals go to that thread).
  """

  def __init__(self):
    self.signal: int | None = None
    self.stoppable = False
    self.before_exit: list[Callable[[], None]] = []
    self._installed = False

  def __enter__(self) -> GracefulStop:
    if threading.current_thread() is not threading.main_thread():
      return self
    self._read_fd, self._write_fd = os.pipe()
    os.set_blocking(self._write_fd, False)
    self._old_handlers = {s: signal.signal(s, _ignore) for s in SIGNALS}
    self._old_wakeup = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
    self._watcher = threading.Thread(target=self._watch, name="signal-watcher", daemon=True)
    self._watcher.start()
    self._installed = True
    return self

  def __exit__(self, *exc) -> None:
    if not self._installed:
      return
    signal.set_wakeup_fd(self._old_wakeup)
    for s, handler in self._old_handlers.items():
      signal.signal(s, handler)
    os.close(self._write_fd)  # the watcher reads end-of-file and ends
    self._watcher.join()
    os.close(self._read_fd)
    self._installed = False

  def _watch(self) -> None:
    while True:
      received = os.read(self._read_fd, 64)
      if not received:
        return
      for signum in received:
        if signum in SIGNALS:
          self._received(signal.Signals(signum))

  def _received(self, signum: signal.Signals) -> None:
    if self.signal is None and self.stoppable:
      self.signal = signum  # the loop stops after this step
      return
    if self.signal is not None:
      why = (f"{signum.name} after {signal.Signals(self.signal).name}: exiting at once, "
             "without a checkpoint of this step; the last one saved is kept")
    else:
      why = f"stopped by {signum.name} before the first step had finished; nothing was saved"
    for undo in self.before_exit:
      try:
        undo()
      except Exception:  # an exit at once must not wait on clean-up errors
        pass
    # Straight to file descriptor 2: sys.stderr may be held back (see checkpoints.py).
    os.write(2, f"error: {why}\n".encode())
    os._exit(128 + signum)


def exit_status(signum: int) -> int:
  """What a shell expects from a program ended by ``signum``: 128 + its number."""
  return 128 + int(signum)

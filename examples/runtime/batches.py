"""Each step's global batch, each process's share of it, and batches made ahead of time.

Every process computes the same global index set for a step (a pure function
of the seed and the step, so a resumed run sees the same examples) and gathers
only the rows that its own devices hold; ``jax.make_array_from_callback`` joins
the shares into one global array. The batch size is global: it does not grow
with the number of processes.

Prefetching is a thread and a bounded queue, not Grain: the datasets sit in
host memory as arrays and augmentation runs on the device, so the host's work
per step is one gather and one transfer, and the deterministic index set
already makes resuming exact without saving an iterator's state.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from collections.abc import Sequence

import jax
import numpy as np


def batch_indices(seed: int, step: int, num_examples: int, batch_size: int) -> np.ndarray:
  """The global batch at ``step``: a fresh permutation each epoch, a pure
  function of (seed, step). Needs ``batch_size <= num_examples``.
  """
  per_epoch = num_examples // batch_size
  epoch, offset = divmod(step, per_epoch)
  order = np.random.default_rng([seed, epoch]).permutation(num_examples)
  return order[offset * batch_size:(offset + 1) * batch_size]


def global_batch(sharding: jax.sharding.Sharding, indices: np.ndarray,
                 arrays: Sequence[np.ndarray]) -> tuple[jax.Array, ...]:
  """Rows ``indices`` of each host array, as global arrays split along the batch.

  Each process reads only the rows its own devices hold.
  """
  def build(source):
    shape = (len(indices),) + source.shape[1:]
    rows = lambda index: source[indices[index[0]]]  # index[0]: this device's rows
    return jax.make_array_from_callback(shape, sharding, rows)
  return tuple(build(np.asarray(a)) for a in arrays)


def padded_batches(num_examples: int, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(indices, mask) covering 0..num_examples-1 once, in batches of ``batch_size``.

  The last batch is padded by repeating the final example with mask 0, so every
  batch has one shape (one compilation) and each example counts once.
  """
  for start in range(0, num_examples, batch_size):
    positions = np.arange(start, start + batch_size)
    yield np.minimum(positions, num_examples - 1), (positions < num_examples).astype(np.float32)


class Prefetcher:
  """Iterates ``make(step)`` for steps ``start..end-1``, up to ``depth`` ahead.

  A background thread builds the batches (host gather and transfer to the
  devices) while the device runs earlier steps. ``depth=0`` builds each batch
  when it is asked for. Use as a context manager so that the thread ends.
  """

  def __init__(self, make, start: int, end: int, depth: int):
    self._make, self._next, self._end, self._depth = make, start, end, depth
    self._queue: queue.Queue = queue.Queue(maxsize=max(depth, 1))
    self._stop = threading.Event()
    self._thread = None
    if depth > 0:
      self._thread = threading.Thread(target=self._fill, args=(start,), daemon=True)
      self._thread.start()

  def _fill(self, step: int) -> None:
    while step < self._end and not self._stop.is_set():
      try:
        item = (self._make(step), None)
      except BaseException as err:  # handed to the consumer, raised there
        item = (None, err)
      while not self._stop.is_set():
        try:
          self._queue.put(item, timeout=0.1)
          break
        except queue.Full:
          pass
      if item[1] is not None:
        return
      step += 1

  def __iter__(self):
    return self

  def __next__(self):
    if self._next >= self._end:
      raise StopIteration
    self._next += 1
    if self._thread is None:
      return self._make(self._next - 1)
    batch, err = self._queue.get()
    if err is not None:
      raise err
    return batch

  def close(self) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

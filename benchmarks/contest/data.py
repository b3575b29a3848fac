"""The contest's corpus: the Python standard library's sources, split by file.

The files are those of ``time_to_result``'s char LM (``stdlib_sources``: no
tests, no site-packages), shuffled once and split 80/10/10 by file, so that no
file is seen in two splits. Validation and test are scored on fixed windows
that tile the first characters of their split, at least ``EVAL_CHARS`` scored
characters each.
"""

from __future__ import annotations

import numpy as np

from benchmarks.time_to_result.workloads import charlm

EVAL_CHARS = 250_000  # scored characters in each of validation and test


def corpus(files) -> np.ndarray:
  return np.concatenate([charlm.encode(p.read_text(encoding="utf-8", errors="replace") + "\n")
                         for p in files])


def eval_windows(text: np.ndarray, context: int, chars: int) -> np.ndarray:
  """Consecutive windows of ``context + 1`` characters, overlapping by one, so
  that each scores ``context`` new characters: at least ``chars`` in all.
  """
  count = -(-chars // context)
  if count * context + 1 > len(text):
    raise ValueError(f"the split holds {len(text):,} characters, fewer than the "
                     f"{count * context + 1:,} that {chars:,} scored characters need")
  starts = np.arange(count) * context
  return np.stack([text[s:s + context + 1] for s in starts])


def splits(context: int, eval_chars: int = EVAL_CHARS, files: int | None = None) -> dict:
  """``train``: the training characters as one array; ``val`` and ``test``: their
  windows. ``files`` keeps only that many of the sorted files (a smoke test's).
  """
  sources = charlm.stdlib_sources()
  if files is not None:
    sources = sources[:files]
  split = charlm.split_files(sources)
  out = {"train": corpus(split["train"])}
  for name in ("val", "test"):
    out[name] = eval_windows(corpus(split[name]), context, eval_chars)
  out["files"] = {name: len(split[name]) for name in ("train", "val", "test")}
  return out

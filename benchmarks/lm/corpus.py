"""The language models' corpora: Python source from pinned PyPI wheels, read as characters.

Any machine with pip rebuilds them, whatever its own Python: each wheel
(``Wheel``: pure Python, the same bytes on every machine) is fetched once by
``pip download`` into a cache folder and checked against the sha256 committed
here. A wheel with another checksum is refused in one line, so that two
machines never train on two corpora under one name. A machine without the
network (a lent accelerator) takes the wheels, or the built corpus, copied
into its cache folder.

Two corpora are built from them:

* ``django_splits``: the contest's, the 879 ``.py`` files of ``DJANGO`` sorted
  by path, shuffled once (``SPLIT_SEED``) and split 80/10/10 by file
  (``split_tenths``), so that no file is in two splits; cached in ``CACHE``
  (or ``VSGD_CORPUS_CACHE``).
* ``build`` and ``load``: the ladder's, the ``.py`` files of the ten ``WHEELS``
  (about 120M characters) without the empty ones and without repeats, shuffled
  once and split by characters (``split_by_characters``); written once as one
  xz-compressed file (``CORPUS_FILE``) in ``LADDER_CACHE``.

Text is encoded one character a byte (``encode``). Validation and test score
every character of their split: their windows tile the whole split
(``tiled_windows``), which starts with a newline so that its first character
is scored too, and a mask leaves out only the padding of the last window.
``split_records`` says, for each split, how many files it holds, how many
were scored, how many characters were scored and the largest file's share.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
from typing import NamedTuple

import numpy as np

VOCAB = 128
SPLIT_SEED = 0  # the one shuffle of the files before a split
SPLITS = ("train", "val", "test")


class Wheel(NamedTuple):
  """One pinned wheel: its distribution, version, file name and sha256."""
  name: str
  version: str
  filename: str
  sha256: str


DJANGO = Wheel("django", "5.1.4", "Django-5.1.4-py3-none-any.whl",
               "236e023f021f5ce7dee5779de7b286565fdea5f4ab86bae5338e3f7b69896cf0")
WHEELS = (
    DJANGO,
    Wheel("diffusers", "0.31.0", "diffusers-0.31.0-py3-none-any.whl",
          "cbc498ae63f4abfc7c3a07649cdcbee229ef2f9a9a1f0d19c9bbaf22f8d30c1f"),
    Wheel("jax", "0.4.35", "jax-0.4.35-py3-none-any.whl",
          "fa99e909a31424abfec750019a6dd36f6acc18a6e7d40e2c0086b932cc351325"),
    Wheel("networkx", "3.4.2", "networkx-3.4.2-py3-none-any.whl",
          "df5d4365b724cf81b8c6a7312509d0c22386097011ad1abe274afd5e9d3bbc5f"),
    Wheel("pip", "24.3.1", "pip-24.3.1-py3-none-any.whl",
          "3790624780082365f47549d032f3770eeb2b1e8bd1f7b2e02dace1afa361b4ed"),
    Wheel("setuptools", "75.6.0", "setuptools-75.6.0-py3-none-any.whl",
          "ce74b49e8f7110f9bf04883b730f4765b774ef3ef28f722cce7c273d253aaf7d"),
    Wheel("sphinx", "8.1.3", "sphinx-8.1.3-py3-none-any.whl",
          "09719015511837b76bf6e03e42eb7595ac8c2e41eeb9c29c5b755c6b677992a2"),
    Wheel("sympy", "1.13.3", "sympy-1.13.3-py3-none-any.whl",
          "54612cf55a62755ee71824ce692986f23c88ffa77207b30c1368eda4a7060f73"),
    Wheel("transformers", "4.46.3", "transformers-4.46.3-py3-none-any.whl",
          "a12ef6f52841fd190a3e5602145b542d03507222f2c64ebb7ee92e8788093aef"),
    Wheel("twisted", "24.11.0", "twisted-24.11.0-py3-none-any.whl",
          "fe403076c71f04d5d2d789a755b687c5637ec3bcd3b2b8252d76f2ba65f54261"),
)
CACHE = os.environ.get("VSGD_CORPUS_CACHE",
                       os.path.join(os.path.expanduser("~"), ".cache", "vsgd_optax", "corpus"))
# The ladder's corpus stays where it was first built: git-ignored, beside the ladder.
LADDER_CACHE = pathlib.Path(os.environ.get(
    "LADDER_CACHE", pathlib.Path(__file__).resolve().parents[1] / "ladder" / "cache"))
CORPUS_FILE = "corpus.xz"


class CorpusError(RuntimeError):
  """A corpus could not be had; the message says why and what to do."""


def sha256_of(path: str | os.PathLike) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def _fetch(pinned: Wheel, folder: pathlib.Path) -> None:
  """``pip download`` of ``pinned`` into ``folder``, through a temporary folder, so
  that an interrupted download leaves no partial wheel behind.
  """
  folder.mkdir(parents=True, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=folder) as scratch:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "-q", f"{pinned.name}=={pinned.version}",
         "-d", scratch], capture_output=True, text=True, check=False)
    fetched = pathlib.Path(scratch, pinned.filename)
    if done.returncode != 0 or not fetched.exists():
      said = (done.stderr.strip().splitlines() or ["no wheel came back"])[-1]
      raise CorpusError(f"pip could not fetch {pinned.name}=={pinned.version} ({said}); copy "
                        f"{pinned.filename} into {folder} (or set its cache variable to a "
                        "folder that holds it)")
    shutil.move(str(fetched), folder / pinned.filename)


def wheel(folder: str | os.PathLike = CACHE, fetch: bool = True,
          pinned: Wheel = DJANGO) -> pathlib.Path:
  """The wheel ``pinned`` in ``folder``, fetched there first where it is missing, and
  checked against its sha256.
  """
  path = pathlib.Path(folder, pinned.filename)
  if not path.exists():
    if not fetch:
      raise CorpusError(f"{path} does not exist; run once where pip reaches PyPI, or copy "
                        f"{pinned.filename} there")
    _fetch(pinned, pathlib.Path(folder))
  found = sha256_of(path)
  if found != pinned.sha256:
    raise CorpusError(f"{path} has sha256 {found}, not the pinned {pinned.sha256} of "
                      f"{pinned.name} {pinned.version}: it is another file; delete it to "
                      "fetch the pinned wheel")
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


def encoded_split(files) -> np.ndarray:
  """The files' texts, each followed by a newline, after a leading newline: as if after
  a file, so that the split's first character is predicted and scored too.
  """
  return np.concatenate([encode("\n")] + [encode(text + "\n") for _, text in files])


def split_tenths(files: list, seed: int = SPLIT_SEED) -> dict[str, list]:
  """80/10/10 train/val/test by file, after a fixed shuffle."""
  order = np.random.default_rng(seed).permutation(len(files))
  n_val = n_test = max(1, len(files) // 10)
  return {"val": [files[i] for i in order[:n_val]],
          "test": [files[i] for i in order[n_val:n_val + n_test]],
          "train": [files[i] for i in order[n_val + n_test:]]}


def split_by_characters(files: list, eval_chars: int, seed: int = SPLIT_SEED) -> dict[str, list]:
  """Validation: whole files from the front of a fixed shuffle until ``eval_chars``
  characters; test: the next, likewise; training: the rest.
  """
  order = [files[i] for i in np.random.default_rng(seed).permutation(len(files))]
  out: dict[str, list] = {"val": [], "test": []}
  at = 0
  for name in ("val", "test"):
    held = 0
    while held < eval_chars and at < len(order):
      out[name].append(order[at])
      held += len(order[at][1]) + 1
      at += 1
  out["train"] = order[at:]
  return out


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


def _scored_splits(out: dict, arrays: dict, lengths: dict, context: int) -> dict:
  """``out`` with each evaluation split's windows, mask and ``split_records``."""
  for name in ("val", "test"):
    out[name], out[f"{name}_scored"] = tiled_windows(arrays[name], context)
    out["records"][name] = split_records(lengths[name], out[f"{name}_scored"], context)
  return out


def django_splits(context: int, files: int | None = None,
                  cache: str | os.PathLike = CACHE) -> dict:
  """The contest's corpus. ``train``: the training split's characters as one array;
  ``val`` and ``test``: their windows and masks over the whole split; ``records``:
  ``split_records`` of each split. ``files`` keeps only that many of the sorted
  files (a smoke test's).
  """
  found = sources(wheel(cache))
  if files is not None:
    found = found[:files]
  split = split_tenths(found)
  arrays = {name: encoded_split(split[name]) for name in split}
  out: dict = {"train": arrays["train"], "records": {}}
  lengths = {name: [len(text) + 1 for _, text in split[name]] for name in ("val", "test")}
  _scored_splits(out, arrays, lengths, context)
  out["records"]["train"] = {"files": len(split["train"]), "chars": int(len(arrays["train"]))}
  return out


def deduplicated(files: list[tuple[str, str]]) -> tuple[list, dict]:
  """``files`` without the empty ones (whitespace only) and without any text already kept."""
  kept, seen, empty, repeats = [], set(), 0, 0
  for name, text in files:
    if not text.strip():
      empty += 1
      continue
    digest = hashlib.sha256(text.encode()).digest()
    if digest in seen:
      repeats += 1
      continue
    seen.add(digest)
    kept.append((name, text))
  return kept, {"files_read": len(files), "empty_dropped": empty, "repeats_dropped": repeats,
                "files_kept": len(kept)}


def build(eval_chars: int, paths=None, cache: pathlib.Path = LADDER_CACHE,
          out: pathlib.Path | None = None) -> pathlib.Path:
  """Writes the ladder's corpus file (default ``cache/CORPUS_FILE``), with validation and
  test of ``eval_chars`` characters each, from the wheels at ``paths`` (default: the
  pinned ``WHEELS``, fetched into ``cache/wheels``) and returns its path.
  """
  if paths is None:
    paths = [wheel(cache / "wheels", pinned=pinned) for pinned in WHEELS]
  found = sorted((f"{pathlib.Path(path).name}/{name}", text)
                 for path in paths for name, text in sources(path))
  files, records = deduplicated(found)
  split = split_by_characters(files, eval_chars)
  arrays = {name: encoded_split(split[name]) for name in SPLITS}
  meta = {"wheels": [pathlib.Path(p).name for p in paths],
          "sha256": {pathlib.Path(p).name: sha256_of(p) for p in paths},
          "cleaning": records, "split_seed": SPLIT_SEED, "eval_chars": eval_chars,
          "splits": {name: {"files": len(split[name]), "chars": int(len(arrays[name])),
                            "lengths": [len(t) + 1 for _, t in split[name]]
                            if name != "train" else None} for name in SPLITS}}
  out = out or cache / CORPUS_FILE
  out.parent.mkdir(parents=True, exist_ok=True)
  header = json.dumps(meta).encode()
  partial = out.with_suffix(".partial")
  with lzma.open(partial, "wb", preset=6) as f:
    f.write(struct.pack("<Q", len(header)) + header)
    for name in SPLITS:
      f.write(arrays[name].tobytes())
  partial.replace(out)
  return out


def load(path: pathlib.Path, context: int) -> dict:
  """The corpus file at ``path`` for a model of ``context``: ``train`` (the training
  characters), ``val``/``test`` and their masks (``tiled_windows``), ``records`` (the
  cleaning and each split's ``split_records``), ``meta`` (the file's own record).
  """
  if not pathlib.Path(path).exists():
    raise CorpusError(f"{path} does not exist; build it with `python -m benchmarks.ladder "
                      "--build-corpus` where pip reaches PyPI")
  with lzma.open(path, "rb") as f:
    (length,) = struct.unpack("<Q", f.read(8))
    meta = json.loads(f.read(length))
    arrays = {name: np.frombuffer(f.read(meta["splits"][name]["chars"]), np.uint8)
              for name in SPLITS}
  out: dict = {"train": arrays["train"], "meta": meta,
               "records": {"cleaning": meta["cleaning"],
                           "train": {k: meta["splits"]["train"][k] for k in ("files", "chars")}}}
  lengths = {name: meta["splits"][name]["lengths"] for name in ("val", "test")}
  return _scored_splits(out, arrays, lengths, context)

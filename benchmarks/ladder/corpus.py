"""The ladder's corpus: the Python source of ten pinned PyPI wheels, about 120M characters.

``build`` fetches each wheel of ``WHEELS`` once with ``pip download`` into the
git-ignored cache folder (``CACHE``, or ``LADDER_CACHE``), refuses one whose
sha256 is not the pinned one, reads every ``.py`` file, drops the empty ones
and every repeat of a text already kept (first in path order), then shuffles
the files once (``SPLIT_SEED``) and splits them: validation takes whole files
from the front until it holds ``protocol.EVAL_CHARS`` characters, test the
next, training the rest. It writes one xz-compressed file (``CORPUS_FILE``)
with the three splits encoded (``contest.corpus.encode``) and the metadata of
the split, which a machine without the network (a lent accelerator) loads
with ``load``.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import pathlib
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

from benchmarks.contest import corpus as contest_corpus
from benchmarks.ladder import protocol

# (distribution, version, wheel file, sha256): pure-Python wheels, the same on every machine.
WHEELS = (
    ("django", "5.1.4", "Django-5.1.4-py3-none-any.whl",
     "236e023f021f5ce7dee5779de7b286565fdea5f4ab86bae5338e3f7b69896cf0"),
    ("diffusers", "0.31.0", "diffusers-0.31.0-py3-none-any.whl",
     "cbc498ae63f4abfc7c3a07649cdcbee229ef2f9a9a1f0d19c9bbaf22f8d30c1f"),
    ("jax", "0.4.35", "jax-0.4.35-py3-none-any.whl",
     "fa99e909a31424abfec750019a6dd36f6acc18a6e7d40e2c0086b932cc351325"),
    ("networkx", "3.4.2", "networkx-3.4.2-py3-none-any.whl",
     "df5d4365b724cf81b8c6a7312509d0c22386097011ad1abe274afd5e9d3bbc5f"),
    ("pip", "24.3.1", "pip-24.3.1-py3-none-any.whl",
     "3790624780082365f47549d032f3770eeb2b1e8bd1f7b2e02dace1afa361b4ed"),
    ("setuptools", "75.6.0", "setuptools-75.6.0-py3-none-any.whl",
     "ce74b49e8f7110f9bf04883b730f4765b774ef3ef28f722cce7c273d253aaf7d"),
    ("sphinx", "8.1.3", "sphinx-8.1.3-py3-none-any.whl",
     "09719015511837b76bf6e03e42eb7595ac8c2e41eeb9c29c5b755c6b677992a2"),
    ("sympy", "1.13.3", "sympy-1.13.3-py3-none-any.whl",
     "54612cf55a62755ee71824ce692986f23c88ffa77207b30c1368eda4a7060f73"),
    ("transformers", "4.46.3", "transformers-4.46.3-py3-none-any.whl",
     "a12ef6f52841fd190a3e5602145b542d03507222f2c64ebb7ee92e8788093aef"),
    ("twisted", "24.11.0", "twisted-24.11.0-py3-none-any.whl",
     "fe403076c71f04d5d2d789a755b687c5637ec3bcd3b2b8252d76f2ba65f54261"),
)
HERE = pathlib.Path(__file__).resolve().parent
CACHE = pathlib.Path(os.environ.get("LADDER_CACHE", HERE / "cache"))
CORPUS_FILE = "corpus.xz"
SPLIT_SEED = 0
SPLITS = ("train", "val", "test")


class CorpusError(RuntimeError):
  """The corpus could not be had; the message says why and what to do."""


def wheel(cache: pathlib.Path, name: str, version: str, filename: str, sha256: str,
          fetch: bool = True) -> pathlib.Path:
  """The pinned wheel in ``cache/wheels``, fetched there first where missing, checked."""
  path = cache / "wheels" / filename
  if not path.exists():
    if not fetch:
      raise CorpusError(f"{path} does not exist; build the corpus where pip reaches PyPI")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
      subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                      "--only-binary=:all:", "--disable-pip-version-check", "-q",
                      f"{name}=={version}", "-d", scratch], check=False, capture_output=True)
      fetched = pathlib.Path(scratch, filename)
      if not fetched.exists():
        raise CorpusError(f"pip could not fetch {name}=={version}; copy {filename} into "
                          f"{path.parent}")
      fetched.rename(path)
  found = contest_corpus.sha256_of(path)
  if found != sha256:
    raise CorpusError(f"{path} has sha256 {found}, not the pinned {sha256}; delete it")
  return path


def sources(paths) -> list[tuple[str, str]]:
  """Every ``.py`` file of the wheels at ``paths``, as ``(wheel/path, text)``, sorted."""
  found = []
  for path in paths:
    with zipfile.ZipFile(path) as archive:
      found += [(f"{pathlib.Path(path).name}/{n}", archive.read(n).decode("utf-8", "replace"))
                for n in archive.namelist() if n.endswith(".py")]
  return sorted(found)


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


def split_files(files: list, eval_chars: int, seed: int = SPLIT_SEED) -> dict[str, list]:
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


def _encoded(files) -> np.ndarray:
  # Each split starts with a newline, as if after a file, so its first character is scored.
  return np.concatenate([contest_corpus.encode("\n")]
                        + [contest_corpus.encode(text + "\n") for _, text in files])


def build(paths=None, cache: pathlib.Path = CACHE, eval_chars: int = protocol.EVAL_CHARS,
          out: pathlib.Path | None = None) -> pathlib.Path:
  """Writes the corpus file (default ``cache/CORPUS_FILE``) from the wheels at ``paths``
  (default: the pinned ``WHEELS``, fetched into ``cache``) and returns its path.
  """
  if paths is None:
    paths = [wheel(cache, *pinned) for pinned in WHEELS]
  files, records = deduplicated(sources(paths))
  split = split_files(files, eval_chars)
  arrays = {name: _encoded(split[name]) for name in SPLITS}
  meta = {"wheels": [pathlib.Path(p).name for p in paths],
          "sha256": {pathlib.Path(p).name: contest_corpus.sha256_of(p) for p in paths},
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
  characters), ``val``/``test`` and their masks (``contest.corpus.tiled_windows``),
  ``records`` (the cleaning and each split's, as ``contest.corpus.split_records``).
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
  for name in ("val", "test"):
    out[name], out[f"{name}_scored"] = contest_corpus.tiled_windows(arrays[name], context)
    out["records"][name] = contest_corpus.split_records(meta["splits"][name]["lengths"],
                                                        out[f"{name}_scored"], context)
  return out

"""Checks what the release artefacts hold: the package, its metadata, nothing else.

    python .ci/check_sdist.py SDIST WHEEL [OTHER_WHEEL]

The wheel must hold exactly the package's files (those of ``vsgd_optax/`` in
the checkout, ``py.typed`` included) and its ``.dist-info``; the sdist the
same files, the project's top-level documents and setuptools' metadata;
OTHER_WHEEL (one built another way) the same names as WHEEL. Exits 1 with one
line per file missing or not expected.
"""

import pathlib
import sys
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP_LEVEL = {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff", "PKG-INFO",
             "setup.cfg", "MANIFEST.in"}


def package_files() -> set[str]:
  return {str(p.relative_to(ROOT)) for p in (ROOT / "vsgd_optax").iterdir()
          if p.suffix == ".py" or p.name == "py.typed"}


def compare(what: str, held: set[str], expected: set[str], also_allowed) -> list[str]:
  problems = [f"{what} lacks {name}" for name in sorted(expected - held)]
  problems += [f"{what} holds {name}, which it should not" for name in sorted(held - expected)
               if not also_allowed(name)]
  return problems


def main(sdist: str, wheel: str, other_wheel: str | None = None) -> int:
  with tarfile.open(sdist) as tar:
    top = tar.getnames()[0].split("/")[0]
    in_sdist = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
  with zipfile.ZipFile(wheel) as whl:
    in_wheel = set(whl.namelist())
  package = package_files()
  problems = compare("the sdist", in_sdist, package | TOP_LEVEL,
                     lambda name: name.startswith("vsgd_optax.egg-info/"))
  problems += compare("the wheel", in_wheel, package,
                      lambda name: name.startswith(f"{top}.dist-info/"))
  if other_wheel is not None:
    with zipfile.ZipFile(other_wheel) as whl:
      problems += compare(other_wheel, set(whl.namelist()), in_wheel, lambda name: False)
  for problem in problems:
    print(problem, file=sys.stderr)
  if not problems:
    print(f"{pathlib.Path(sdist).name}: {len(in_sdist)} files; "
          f"{pathlib.Path(wheel).name}: {len(in_wheel)} files")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main(*sys.argv[1:]))

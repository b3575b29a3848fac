"""Checks what the release artefacts hold: the package, its metadata, nothing else.

    python .ci/check_sdist.py SDIST WHEEL [OTHER_WHEEL]

The wheel must hold exactly the package's files (those of ``vsgd_optax/`` and
its subpackages in the checkout, ``py.typed`` included) and its ``.dist-info``;
the sdist the same files, the project's top-level documents and setuptools'
metadata;
OTHER_WHEEL (one built another way) the same names as WHEEL. Installing needs
no compiler: each wheel is tagged ``py3-none-any`` and holds no binary or
C++ source. Exits 1 with one line per file missing or not expected, and per
wheel that is not pure Python.
"""

import pathlib
import sys
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP_LEVEL = {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff", "PKG-INFO",
             "setup.cfg", "MANIFEST.in"}
# What a wheel that needs a compiler would hold.
COMPILED = (".so", ".pyd", ".dll", ".dylib", ".cc")


def package_files() -> set[str]:
  """The package's files, its subpackages' (``experimental/``) included."""
  return {str(p.relative_to(ROOT)) for p in (ROOT / "vsgd_optax").rglob("*")
          if (p.suffix == ".py" or p.name == "py.typed") and "__pycache__" not in p.parts}


def compare(what: str, held: set[str], expected: set[str], also_allowed) -> list[str]:
  problems = [f"{what} lacks {name}" for name in sorted(expected - held)]
  problems += [f"{what} holds {name}, which it should not" for name in sorted(held - expected)
               if not also_allowed(name)]
  return problems


def pure_python(wheel: str, names: set[str]) -> list[str]:
  """A pure-Python wheel: the ``py3-none-any`` tag and no compiled file."""
  problems = []
  if not pathlib.Path(wheel).name.endswith("-py3-none-any.whl"):
    problems.append(f"{wheel} is not tagged py3-none-any: installing it would need a compiler")
  problems += [f"{wheel} holds {name}, a compiled file" for name in sorted(names)
               if name.endswith(COMPILED)]
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
  problems += pure_python(wheel, in_wheel)
  if other_wheel is not None:
    with zipfile.ZipFile(other_wheel) as whl:
      in_other = set(whl.namelist())
    problems += compare(other_wheel, in_other, in_wheel, lambda name: False)
    problems += pure_python(other_wheel, in_other)
  for problem in problems:
    print(problem, file=sys.stderr)
  if not problems:
    print(f"{pathlib.Path(sdist).name}: {len(in_sdist)} files; "
          f"{pathlib.Path(wheel).name}: {len(in_wheel)} files")
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main(*sys.argv[1:]))

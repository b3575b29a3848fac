"""Checks that every pin of a constraints file is a floor that pyproject.toml declares.

    python .ci/check_floors.py CONSTRAINTS EXTRA [EXTRA ...]

Each ``name==version`` of CONSTRAINTS must be the ``name>=version`` floor of
that package in the dependencies or one of the named extras (the highest, where
several declare one; ``jaxlib`` follows ``jax``), and every installed
distribution it names must be at that version. Exits 1 with one line per
mismatch.
"""

import importlib.metadata
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def declared_floors(extras: list[str]) -> dict[str, str]:
  project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
  requirements = list(project["dependencies"])
  for extra in extras:
    requirements += project["optional-dependencies"][extra]
  floors: dict[str, str] = {}
  for requirement in requirements:
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", requirement.strip())
    if match:
      name, version = match[1].lower(), match[2]
      if name not in floors or _key(version) > _key(floors[name]):
        floors[name] = version
  if "jax" in floors:
    floors.setdefault("jaxlib", floors["jax"])
  return floors


def _key(version: str) -> tuple[int, ...]:
  return tuple(int(part) for part in version.split("."))


def pinned(path: pathlib.Path) -> dict[str, str]:
  pins = {}
  for line in path.read_text().splitlines():
    line = line.split("#")[0].strip()
    if line:
      name, version = line.split("==")
      pins[name.strip().lower()] = version.strip()
  return pins


def main(argv: list[str]) -> int:
  constraints, *extras = argv
  floors = declared_floors(extras)
  problems = []
  for name, version in pinned(pathlib.Path(constraints)).items():
    if floors.get(name) != version:
      problems.append(f"{constraints} pins {name}=={version}, pyproject.toml declares "
                      f"{name}>={floors.get(name, '(nothing)')}")
    try:
      installed = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      continue  # not installed in this venv: nothing to compare
    if installed != version:
      problems.append(f"{name} {installed} is installed, not the floor {version}")
  for problem in problems:
    print(problem, file=sys.stderr)
  return 1 if problems else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))

"""``tools/mutants.py``'s record of a full run: CI reruns the mutants unless the
package, the core tests and the list are exactly what that run killed them on.
"""

import json

import pytest

from tools import mutants

TREES = {"vsgd_optax": "a" * 40, "tests/core": "b" * 40}


@pytest.fixture
def stamp(tmp_path, monkeypatch):
  path = tmp_path / "mutants-killed.json"
  monkeypatch.setattr(mutants, "STAMP", str(path))
  monkeypatch.setattr(mutants, "fingerprint", lambda: dict(TREES))

  def write(**changes):
    record = {"commit": "abc1234", "mutants": len(mutants.MUTANTS),
              "list": mutants.list_digest(), "trees": dict(TREES), **changes}
    path.write_text(json.dumps(record))
  return write


def test_a_record_holds_only_for_the_same_trees_and_list(stamp, monkeypatch):
  assert not mutants.stamped()  # no record: run them
  stamp()
  assert mutants.stamped()
  stamp(trees={**TREES, "vsgd_optax": "c" * 40})  # the package changed
  assert not mutants.stamped()
  stamp(list="0" * 16)  # a mutant was added, removed or edited
  assert not mutants.stamped()
  stamp(mutants=len(mutants.MUTANTS) - 1)
  assert not mutants.stamped()
  stamp()
  monkeypatch.setattr(mutants, "fingerprint", lambda: None)  # uncommitted changes
  assert not mutants.stamped()


def test_unless_stamped_skips_only_where_the_record_holds(stamp, monkeypatch, capsys):
  ran = []
  monkeypatch.setattr(mutants, "run", lambda numbers, jobs, checked: ran.append(numbers) or [])
  stamp()
  mutants.main(["--unless-stamped", "--core-tests-passed"])
  assert ran == [] and "not run again" in capsys.readouterr().out
  stamp(trees={**TREES, "tests/core": "d" * 40})
  mutants.main(["--unless-stamped", "--core-tests-passed"])
  assert ran == [list(range(1, len(mutants.MUTANTS) + 1))]


def test_the_committed_record_names_every_fingerprinted_path():
  with open(mutants.STAMP) as f:
    record = json.load(f)
  assert set(record["trees"]) == set(mutants.FINGERPRINTED)

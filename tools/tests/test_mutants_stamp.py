"""``tools/mutants.py``'s stamps by module: a change reruns the mutants of the modules
it touches and of those whose killing tests it touches, and every mutant where the
tests' shared support code changed.
"""

import pytest

from tools import mutants


@pytest.fixture
def tree(tmp_path, monkeypatch):
  """A fake committed tree: path -> hash, None for a path with uncommitted changes."""
  hashes = {path: "s" * 40 for path in mutants.SUPPORT}
  for module in mutants.modules():
    hashes[f"vsgd_optax/{module}"] = "m" * 40
  hashes.update({"tests/core/test_a.py": "a" * 40, "tests/core/test_b.py": "b" * 40})
  monkeypatch.setattr(mutants, "STAMP", str(tmp_path / "mutants-killed.json"))
  monkeypatch.setattr(mutants, "tree_hash", lambda path: hashes.get(path))
  monkeypatch.setattr(mutants, "_git", lambda *args: "abc1234")
  return hashes


def _killed_all(killer_of=lambda module: "tests/core/test_a.py"):
  return {n: killer_of(m.file) for n, m in enumerate(mutants.MUTANTS, start=1)}


def test_with_no_record_every_module_is_stale(tree):
  assert mutants.stale_modules() == mutants.modules()


def test_a_change_reruns_its_module_and_those_its_tests_killed(tree):
  muon = "_vsgd_muon.py"
  assert muon in mutants.modules() and "_update_rules.py" in mutants.modules()
  killers = _killed_all(lambda m: "tests/core/test_b.py" if m == muon else "tests/core/test_a.py")
  assert set(mutants.write_stamps(killers)) == set(mutants.modules())
  assert mutants.stale_modules() == []
  tree[f"vsgd_optax/{muon}"] = "n" * 40  # one module edited: only it reruns
  assert mutants.stale_modules() == [muon]
  tree[f"vsgd_optax/{muon}"] = None  # uncommitted changes count as changed
  assert mutants.stale_modules() == [muon]
  tree[f"vsgd_optax/{muon}"] = "m" * 40
  tree["tests/core/test_b.py"] = "c" * 40  # the test file that killed its mutants
  assert mutants.stale_modules() == [muon]
  tree["tests/core/test_a.py"] = "d" * 40  # the one that killed everyone else's
  assert set(mutants.stale_modules()) == set(mutants.modules())


def test_support_code_or_an_edited_mutant_reruns_what_it_touches(tree, monkeypatch):
  mutants.write_stamps(_killed_all())
  tree["tests/support"] = "t" * 40
  assert mutants.stale_modules() == mutants.modules()
  tree["tests/support"] = "s" * 40
  assert mutants.stale_modules() == []
  first = mutants.MUTANTS[0]
  monkeypatch.setattr(mutants, "MUTANTS", (first._replace(after="x") if hasattr(first, "_replace")
                                           else type(first)(first.file, first.before, "x",
                                                            first.why, first.first),
                                           *mutants.MUTANTS[1:]))
  assert mutants.stale_modules() == [first.file]


def test_a_module_with_a_survivor_keeps_no_stamp_and_the_others_keep_theirs(tree):
  killers = _killed_all()
  mutants.write_stamps(killers)
  survivor = next(n for n, m in enumerate(mutants.MUTANTS, start=1)
                  if m.file == "_rounding.py")
  del killers[survivor]
  tree["vsgd_optax/_rounding.py"] = "r" * 40
  assert "_rounding.py" not in mutants.write_stamps(killers)
  assert mutants.stale_modules() == ["_rounding.py"]

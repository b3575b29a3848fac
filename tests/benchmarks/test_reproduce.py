"""``python -m benchmarks.reproduce``: a recorded run trained again is compared number for
number, with the record or with the numbers of an earlier checkout on this machine.
"""

import json

import pytest

from benchmarks import reproduce


def test_differences_name_each_number_that_moved_and_its_largest_relative_size():
  recorded = {"test": [1.0, 2.0], "curves": {"val": [[4.0, 8.0]]}, "steps": 10}
  assert reproduce._differences(recorded, json.loads(json.dumps(recorded))) == []
  moved = {"test": [1.0, 2.0 + 2e-7], "curves": {"val": [[4.0, 8.0], [1.0]]}, "steps": 10}
  assert reproduce._differences(recorded, moved) == [
      ".curves.val: 1 items recorded, 2 again", f".test[1]: 2.0 recorded, {2.0 + 2e-7!r} again"]
  assert reproduce._largest_relative(recorded, moved) == pytest.approx(1e-7)


def test_a_rerun_is_judged_against_the_numbers_an_earlier_checkout_saved(tmp_path, capsys):
  saved, report = tmp_path / "before.json", tmp_path / "report.json"
  assert reproduce.main(["time_to_result", "--save", str(saved)]) in (0, 1)
  # The same code on the same machine: bit for bit, and the command says so.
  assert reproduce.main(["time_to_result", "--against", str(saved), "--out", str(report)]) == 0
  outcome = json.loads(report.read_text())["studies"]["time_to_result"]
  assert outcome["reproduced"] and outcome["largest_relative_difference"] == 0.0
  assert "time_to_result against " + str(saved) + ": bit for bit" in capsys.readouterr().out
  # One number moved by one part in 1e9: refused, and named.
  numbers = json.loads(saved.read_text())
  numbers["time_to_result"]["test"][3] *= 1 + 1e-9
  saved.write_text(json.dumps(numbers))
  assert reproduce.main(["time_to_result", "--against", str(saved)]) == 1
  said = capsys.readouterr().out
  assert "DIFFERS by up to 1.0e-09 of itself" in said and ".test[3]:" in said


def test_an_unknown_study_is_refused_in_one_line_naming_the_studies(capsys):
  with pytest.raises(SystemExit):
    reproduce.main(["ladders"])
  assert ("no study ladders; choose among cost, time_to_result, noise_scale, contest, ladder"
          in capsys.readouterr().err)

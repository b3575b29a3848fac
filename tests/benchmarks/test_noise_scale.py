"""The noise-scale validation runs end to end in its quick mode and renders its section."""

import json

import pytest

from benchmarks.noise_scale import report
from benchmarks.noise_scale import run


@pytest.mark.slow  # trains the MLP and computes its references
def test_quick_validation_writes_results_and_renders(tmp_path):
  run.main(["--quick", "--out", str(tmp_path)])
  payload = json.loads((tmp_path / "mlp.json").read_text())
  points = payload["runs"][0]["points"]
  assert len(points) >= 3
  for p in points:
    assert p["exact"] > 0 and p["reference_se"] >= 0
  inv = json.loads((tmp_path / "invariance.json").read_text())
  assert set(inv["read_out"]) == {"32", "128"}
  assert (tmp_path / "mlp.png").exists()
  lines = report.section(str(tmp_path), "img")
  assert lines[0].startswith("## Gradient noise scale")
  assert any(line.startswith("| MLP on digits | warmup_cosine |") for line in lines)
  assert "![mlp](img/mlp.png)\n" in lines


def test_phases_split_the_run_10_80_10():
  assert [run.phase(s, 100) for s in (1, 10, 11, 90, 91, 100)] == [
      "warmup", "warmup", "middle", "middle", "end", "end"]

"""The compile-time benchmark: its trees have the leaves it names, and a quick run
writes one row per state with Adam's ratio 1.
"""

import json
import math

from benchmarks import compile_time


def test_the_trees_have_74_290_and_998_leaves():
  counts = [len(compile_time.transformer_shapes(layers)) for layers in compile_time.LAYERS]
  assert counts == [74, 290, 998]
  shapes = compile_time.transformer_shapes(1, width=8)
  assert shapes["layer000/mlp_in"] == (8, 32) and shapes["final_norm_scale"] == (8,)
  # A scan over layers holds the same parameters in 14 leaves, whatever the depth.
  stacked = compile_time.transformer_shapes(24, width=8, stacked=True)
  assert len(stacked) == 14 and stacked["layers/mlp_in"] == (24, 8, 32)
  size = lambda tree: sum(math.prod(shape) for shape in tree.values())  # noqa: E731
  assert size(stacked) == size(compile_time.transformer_shapes(24, width=8))


def test_a_quick_run_writes_a_row_per_state(tmp_path):
  out = tmp_path / "compile_time.json"
  compile_time.main(["--layers", "1", "--stacked", "2", "--repeats", "1", "--out", str(out)])
  result = json.loads(out.read_text())
  stacked = [row for row in result["rows"] if row["stacked"]]
  assert {row["optimizer"] for row in stacked} == set(compile_time.STATES)
  assert all(row["leaves"] == 14 and row["layers"] == 2 for row in stacked)
  rows = {row["optimizer"]: row for row in result["rows"] if not row["stacked"]}
  assert set(rows) == set(compile_time.STATES)
  assert rows["adam"]["ratio_to_adam"] == 1.0
  assert all(row["leaves"] == 14 and row["version"] == "today" and row["total_s"] > 0
             and abs(row["total_s"] - row["lower_s"] - row["compile_s"]) < 1e-9
             for row in rows.values())

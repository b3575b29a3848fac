"""The compile-time benchmark: its trees have the leaves it names, and a quick run
writes one row per state with Adam's ratio 1.
"""

import json

from benchmarks import compile_time


def test_the_trees_have_74_290_and_998_leaves():
  counts = [len(compile_time.transformer_shapes(layers)) for layers in compile_time.LAYERS]
  assert counts == [74, 290, 998]
  shapes = compile_time.transformer_shapes(1, width=8)
  assert shapes["layer000/mlp_in"] == (8, 32) and shapes["final_norm_scale"] == (8,)


def test_a_quick_run_writes_a_row_per_state(tmp_path):
  out = tmp_path / "compile_time.json"
  compile_time.main(["--layers", "1", "--repeats", "1", "--out", str(out)])
  result = json.loads(out.read_text())
  rows = {row["optimizer"]: row for row in result["rows"]}
  assert set(rows) == set(compile_time.STATES)
  assert rows["adam"]["ratio_to_adam"] == 1.0
  assert all(row["leaves"] == 14 and row["version"] == "today" and row["total_s"] > 0
             and abs(row["total_s"] - row["lower_s"] - row["compile_s"]) < 1e-9
             for row in rows.values())

"""``tools/fork_map.py``: the fork map of ``docs/examples.md`` is the trainer's import
closure, with its line counts, and ``--check`` names a stale page without changing it.

"Fork one experiment" lists the files to copy for one of the paper's experiments on
one host: exactly what ``examples/main.py`` imports at module level, with each file's
own line count (``python -m tools.fork_map`` rewrites the counts).
"""

import os

from tools import fork_map


def test_fork_map_lists_the_one_host_closure_with_its_line_counts():
  with open(fork_map.PAGE) as f:
    section = fork_map.section(f.read())
  rows = {path: int(n) for path, n, _ in fork_map.ROW.findall(section)}
  assert sorted(rows) == sorted(fork_map.closure())
  assert rows == {path: fork_map.lines(path) for path in rows}
  (total,) = fork_map.TOTAL.findall(section)
  assert int(total) == sum(rows.values())
  assert "examples/runtime/cluster.py" not in rows  # the multi-process handshake stays out
  assert "examples/table1/reproduce.py" not in rows  # and so does the Table 1 command
  assert all(os.path.exists(os.path.join(fork_map.REPOSITORY, path)) for path in rows)


def test_check_fails_on_a_stale_page_and_changes_nothing(tmp_path, monkeypatch, capsys):
  with open(fork_map.PAGE) as f:
    page = f.read()
  assert fork_map.main(["--check"]) == 0
  path, count, _ = fork_map.ROW.findall(fork_map.section(page))[0]
  stale = page.replace(f"| `{path}` | {count} |", f"| `{path}` | {int(count) + 1} |", 1)
  copy = tmp_path / "examples.md"
  copy.write_text(stale)
  monkeypatch.setattr(fork_map, "PAGE", str(copy))
  assert fork_map.main(["--check"]) == 1
  assert "the fork map is stale" in capsys.readouterr().out
  assert copy.read_text() == stale


def test_check_fails_where_a_file_new_to_the_closure_is_not_described(tmp_path, monkeypatch,
                                                                       capsys):
  with open(fork_map.PAGE) as f:
    page = f.read()
  path, count, what = fork_map.ROW.findall(fork_map.section(page))[0]
  stale = page.replace(f"| `{path}` | {count} | {what} |",
                       f"| `{path}` | {count} | {fork_map.PLACEHOLDER} |", 1)
  copy = tmp_path / "examples.md"
  copy.write_text(stale)
  monkeypatch.setattr(fork_map, "PAGE", str(copy))
  assert fork_map.main(["--check"]) == 1
  assert f"does not say what {path} is for" in capsys.readouterr().out

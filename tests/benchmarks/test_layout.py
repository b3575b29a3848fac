"""The results report dealt to its page and its appendix, and its wide tables split."""

from benchmarks.reporting import layout

REPORT = """# Results

Intro.

## Answer

The answer.

### How it was made

Method.

## Experiment

What it is.

| a | b |
|---|---|
| 1 | 2 |

More words.

**Decision.** Keep it.

### Experiment's detail

Numbers.

## Grids

Every rate.
"""


def test_split_deals_each_section_by_its_mode_and_keeps_the_outline():
  modes = {"Answer": layout.PAGE, "How it was made": layout.APPENDIX,
           "Experiment": layout.DECISION, "Experiment's detail": layout.APPENDIX}
  page, appendix = layout.split(REPORT, modes, "(All: appendix.)")
  assert page == ("# Results\n\nIntro.\n\n## Answer\n\nThe answer.\n\n## Experiment\n\n"
                  "**Decision.** Keep it. (All: appendix.)\n")
  # The appendix keeps the parents' headings of what it holds, and the whole of each.
  assert appendix == ("## Answer\n\n### How it was made\n\nMethod.\n\n## Experiment\n\n"
                      "What it is.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nMore words.\n\n"
                      "**Decision.** Keep it.\n\n### Experiment's detail\n\nNumbers.\n\n"
                      "## Grids\n\nEvery rate.\n")


def test_a_table_mode_keeps_the_lead_the_first_table_and_the_figures():
  block = layout.Block(2, "T", ["Lead.", "", "| a |", "|---|", "| 1 |", "", "Words.", "",
                                "![plot](p.png)", "", "| b |", "|---|", "| 2 |"])
  assert layout.short(block, layout.TABLE, "(More.)") == [
      "Lead. (More.)", "", "| a |", "|---|", "| 1 |", "", "![plot](p.png)", ""]
  assert layout.short(block, layout.LEAD, "(More.)") == ["Lead. (More.)", ""]


def test_a_wide_table_splits_into_parts_that_repeat_its_key():
  header = ["optimizer"] + [f"rate {i:02d}" for i in range(12)]
  rows = [header] + [[name] + [f"{v:.4f}" for v in range(12)] for name in ("vsgd", "adam")]
  assert layout.table_width(rows) > layout.COLUMN_WIDTH
  parts = layout.split_table(rows)
  assert len(parts) > 1
  for part in parts:
    assert layout.table_width(part) <= layout.PART_WIDTH
    assert [r[0] for r in part] == ["optimizer", "vsgd", "adam"]
  # Every column is in exactly one part, in order.
  assert [c for part in parts for c in part[0][1:]] == header[1:]
  text = "\n".join(["| " + " | ".join(r) + " |" for r in rows[:1]] + ["|" + "---|" * 13]
                   + ["| " + " | ".join(r) + " |" for r in rows[1:]])
  fitted = layout.fit_tables("Before.\n\n" + text + "\n\nAfter.")
  assert fitted.count("| optimizer |") == len(parts)
  assert fitted.startswith("Before.\n\n| optimizer | rate 00 |") and fitted.endswith("After.")


def test_a_table_that_fits_is_left_alone_and_a_repeating_first_column_keeps_two():
  narrow = "| a | b |\n|---|---|\n| 1 | 2 |"
  assert layout.fit_tables(narrow) == narrow
  rows = [["entry", "workload", "x" * 40, "y" * 40],
          ["sf", "MLP", "1", "2"], ["sf", "LM", "3", "4"]]
  parts = layout.split_table(rows)
  assert len(parts) == 2 and all(p[0][:2] == ["entry", "workload"] for p in parts)

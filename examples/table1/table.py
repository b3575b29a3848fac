"""The Table 1 protocol's table, built from finished runs.

For each (config, column) the cell with the best validation accuracy, averaged
over the seeds, is chosen, and its test accuracy is reported as mean and sample
standard deviation over the seeds, next to the paper's number.
"""

from __future__ import annotations

import math

import numpy as np

from ..runtime import workdirs
from .grid import COLUMNS
from .grid import Run

# The paper's Table 1: test accuracy (%), mean of 3 seeds, in COLUMNS' order.
PAPER = {
    "cifar100_vgg16": (70.1, 70.0, 66.8, 66.6, 67.9),
    "cifar100_convmixer": (69.8, 69.1, 66.5, 67.0, 65.4),
    "cifar100_resnext18": (71.4, 71.2, 68.2, 69.7, 68.5),
    "tinyimagenet_vgg19": (51.2, 52.0, 47.6, 49.0, 50.9),
    "tinyimagenet_convmixer": (53.1, 52.6, 51.9, 52.4, 52.4),
    "tinyimagenet_resnext18": (48.7, 47.2, 48.8, 48.9, 47.0),
}



def assemble(table: str, runs: list[Run], root: str) -> dict:
  """The table from the runs' workdirs; every run must be finished."""
  outcomes = {run: workdirs.read_outcome(run.workdir(root)) for run in runs}
  missing = [run for run, outcome in outcomes.items() if outcome is None]
  if missing:
    raise ValueError(f"{len(missing)} of {len(runs)} runs are unfinished (first: "
                     f"{missing[0].workdir(root)}); run them, then assemble again.")
  rows, validation = [], set()
  for config in dict.fromkeys(run.config for run in runs):
    for column in dict.fromkeys(run.column for run in runs if run.config == config):
      mine = [run for run in runs if run.config == config and run.column == column]
      cells: dict[tuple, list[Run]] = {}
      for run in mine:
        cells.setdefault(run.cell, []).append(run)
      scored = []
      for cell, cell_runs in cells.items():
        records = [outcomes[run] for run in cell_runs]
        failed = any("failed" in r for r in records)
        score = -math.inf if failed else float(np.mean([r["validation_accuracy"]
                                                        for r in records]))
        validation.update(r.get("validation") for r in records if "failed" not in r)
        scored.append((score, cell, cell_runs, records))
      # The best mean validation accuracy; a tie goes to the cell listed first.
      score, cell, cell_runs, records = max(scored, key=lambda s: s[0])
      row = dict(config=config, column=column, title=COLUMNS[column].title,
                 optimizer=COLUMNS[column].optimizer, learning_rate=cell[0],
                 weight_decay=cell[1], momentum=cell[2],
                 seeds=[run.seed for run in cell_runs],
                 cells_tried=len(cells), paper=_paper(config, column))
      if score == -math.inf:
        row.update(failed=[r["failed"] for r in records if "failed" in r])
      else:
        test = np.array([r["test_accuracy"] for r in records], np.float64)
        row.update(validation_mean=score, test_per_seed=test.tolist(),
                   test_mean=float(test.mean()),
                   test_std=float(test.std(ddof=1)) if len(test) > 1 else 0.0)
      rows.append(row)
  return dict(table=table, validation=sorted(v for v in validation if v), rows=rows,
              std="sample standard deviation over the seeds (ddof=1)")


def _paper(config: str, column: str) -> float | None:
  if config not in PAPER:
    return None
  return PAPER[config][list(COLUMNS).index(column)]


def markdown(result: dict) -> str:
  """Table-1-shaped: a row per config, a column per optimizer, ours next to the paper's."""
  rows = result["rows"]
  columns = list(dict.fromkeys(r["column"] for r in rows))
  lines = [f"# Table 1, {result['table']}: test accuracy (%), ours (paper)\n",
           "Each entry: mean ± sample std over the seeds, at the grid cell with the best "
           "mean validation accuracy; the paper's number in parentheses.",
           f"Validation: {'; '.join(result['validation']) or 'none'}.\n",
           "| config | " + " | ".join(COLUMNS[c].title for c in columns) + " |",
           "|---|" + "---|" * len(columns)]
  by_key = {(r["config"], r["column"]): r for r in rows}
  for config in dict.fromkeys(r["config"] for r in rows):
    cells = []
    for column in columns:
      row = by_key.get((config, column))
      cells.append("" if row is None else _entry(row))
    lines.append(f"| {config} | " + " | ".join(cells) + " |")
  lines += ["", "Chosen cells (learning rate, weight decay, momentum; seeds):", ""]
  for row in rows:
    momentum = "" if row["momentum"] is None else f", momentum {row['momentum']:g}"
    lines.append(f"- {row['config']} / {row['title']}: lr {row['learning_rate']:g}, "
                 f"weight decay {row['weight_decay']:g}{momentum}; seeds {row['seeds']} "
                 f"(of {row['cells_tried']} cells)")
  return "\n".join(lines) + "\n"


def _entry(row: dict) -> str:
  paper = "" if row["paper"] is None else f" ({row['paper']:.1f})"
  if "failed" in row:
    return f"stopped{paper}"
  return f"{100 * row['test_mean']:.1f} ± {100 * row['test_std']:.1f}{paper}"

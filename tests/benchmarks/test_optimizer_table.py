"""One table of optimizer names (``benchmarks/optimizer_table.py``): every name a
registry, a runner's list or a committed result uses is in it, each variant's
base agrees with it, and the reports' styles and labels come from it.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from benchmarks import compile_time
from benchmarks import device_suite
from benchmarks import floor
from benchmarks import gpu_ablation
from benchmarks import optimizer_table
from benchmarks import state_memory
from benchmarks import step_cost
from benchmarks import train_step
from benchmarks.contest import entries as contest_entries
from benchmarks.contest import protocol as contest_protocol
from benchmarks.reporting import contest as contest_report
from benchmarks.reporting import styles
from benchmarks.time_to_result import protocol as ttr_protocol
from examples import optimizers
from tests.support import REPOSITORY

TABLE = optimizer_table.TABLE


def _result_names() -> dict[str, str]:
  """Every optimizer name in the committed results, with a file that holds it:
  the keys of each ``entries``, each row's ``optimizer``, each ledger line's ``entry``.
  """
  found: dict[str, str] = {}

  def walk(value, path):
    if isinstance(value, dict):
      if isinstance(value.get("entries"), dict):
        for name in value["entries"]:
          found.setdefault(name, path)
      if isinstance(value.get("optimizer"), str):
        found.setdefault(value["optimizer"], path)
      for v in value.values():
        walk(v, path)
    elif isinstance(value, list):
      for v in value:
        walk(v, path)
  results = os.path.join(REPOSITORY, "benchmarks", "results")
  for path in glob.glob(os.path.join(results, "**", "*.json"), recursive=True):
    with open(path) as f:
      walk(json.load(f), path)
  for path in glob.glob(os.path.join(results, "**", "*.jsonl"), recursive=True):
    with open(path) as f:
      for line in f:
        entry = json.loads(line).get("entry")  # a ledger's header line names none
        if entry is not None:
          found.setdefault(entry, path)
  return found


def test_every_name_anywhere_is_in_the_table():
  sizings = [*ttr_protocol.SIZINGS.values(), ttr_protocol.LONG_HORIZON, ttr_protocol.WIDE]
  lists = {
      "examples.optimizers.REGISTRY": optimizers.REGISTRY,
      "examples.optimizers.OPTIMIZERS": optimizers.OPTIMIZERS,
      "examples.optimizers.VSGD_OPTIMIZERS": optimizers.VSGD_OPTIMIZERS,
      "contest ENTRIES": contest_entries.ENTRIES,
      "contest ORDER": contest_protocol.ORDER, "contest VARIANTS": contest_protocol.VARIANTS,
      "contest WINDOWS": contest_protocol.WINDOWS,
      "step_cost.OPTIMIZERS": step_cost.OPTIMIZERS,
      "step_cost.FACTORED_OPTIMIZERS": step_cost.FACTORED_OPTIMIZERS,
      "step_cost.PAIRED": [*step_cost.PAIRED, *step_cost.PAIRED.values()],
      "device_suite.STEP_COST_OPTIMIZERS": device_suite.STEP_COST_OPTIMIZERS,
      "compile_time.STATES": compile_time.STATES, "floor.FLOOR_BYTES": floor.FLOOR_BYTES,
      "gpu_ablation.STAGES": gpu_ablation.STAGES,
      "state_memory.OPTIMIZERS": state_memory.OPTIMIZERS,
      "train_step.OPTIMIZERS": train_step.OPTIMIZERS,
      "time_to_result SAME_RATE": [*ttr_protocol.SAME_RATE, *ttr_protocol.SAME_RATE.values()],
      "time_to_result WIDE_SAME_RATE": [*ttr_protocol.WIDE_SAME_RATE,
                                        *ttr_protocol.WIDE_SAME_RATE.values()],
      # WINDOW_BASE also maps a workload to its narrower one: its optimizer keys.
      "time_to_result WINDOW_BASE": [n for pair in ttr_protocol.WINDOW_BASE.items()
                                     for n in pair if not n.startswith("charlm")],
      "time_to_result sizings": [n for s in sizings
                                 for n in (*s.entries, *(n for e in s.entries_on.values()
                                                         for n in e))],
      "committed results": _result_names(),
  }
  missing = {where: sorted(set(names) - set(TABLE)) for where, names in lists.items()
             if set(names) - set(TABLE)}
  assert missing == {}
  # And the other way: every name in the table is used somewhere.
  used = set().union(*(set(names) for names in lists.values()))
  assert set(TABLE) - used == set()


def test_each_variant_pairs_with_the_base_the_table_gives():
  # A precision variant runs at its base's rate on its base's seeds; a timed
  # variant is timed next to the optimizer it comes from.
  for name, base in {**ttr_protocol.SAME_RATE, **ttr_protocol.WIDE_SAME_RATE}.items():
    assert TABLE[name].base == base, name
  for name, against in step_cost.PAIRED.items():
    assert optimizer_table.root(name) == against, name
  assert optimizer_table.root("factored_vsgd+bf16_mu") == "vsgd"
  assert optimizer_table.root("vsgd_muon_rows") == "vsgd"
  assert optimizer_table.root("adam") == "adam"
  for name, row in TABLE.items():  # every base is a name of the table
    assert row.base is None or row.base in TABLE, name


def test_the_reports_style_and_label_from_the_table():
  assert styles.style("vsgd_muon") == (TABLE["vsgd_muon"].colour, TABLE["vsgd_muon"].line)
  assert styles.ORDER == tuple(TABLE)
  assert styles.rank("vsgd") < styles.rank("vsgd+bf16_state") < styles.rank("adam")
  assert contest_report.SHORT["muon_all"] == "Muon, every matrix"
  # No two lines of one plot share a colour and a line style.
  pairs = [(row.colour, row.line) for row in TABLE.values()]
  assert len(set(pairs)) == len(pairs)
  # A name outside the table is refused, with the file to add it to.
  with pytest.raises(KeyError, match="benchmarks/optimizer_table.py"):
    styles.style("adagrad")

"""The cost's protocol, declared before its runs: the sections, their sizes and repeats.

* **Sections.** ``step`` at each size of ``SIZES`` (``step.py``: each state's step
  on a network-like tree, timed by each method of ``METHODS[part]``), ``compile``
  (``compile.py``: trees of ``compile.LAYERS`` layers, the ``compile.STACKED``
  depths stacked too), ``floor`` (``floor.py``: a ``floor.SIDE``-square leaf),
  ``memory`` (``memory.py``: counted, not timed) and ``muon_family`` (the
  contest's Muon family on the contest's GPU-size model).
* **The rule every time follows.** An optimizer's time is a ratio to Adam's
  measured in the same process, round-robin with it
  (``common.interleaved_medians``), ``REPEATS[part]`` rounds; a section is
  measured in one process, so the sections of one result file may come from
  two processes of the same machine and code (a resumed run), never from two
  machines.
* **Quick** (CI's run): every section, small (``QUICK``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from benchmarks.contest import protocol as contest_protocol
from benchmarks.cost import compile as compile_time
from benchmarks.cost import floor
from benchmarks.cost import memory
from benchmarks.cost import muon_family
from benchmarks.cost import step

SIZES = (1_000_000, 9_300_000, 50_000_000)  # parameters of the step's trees
REPEATS = {"cpu": 30, "gpu": 50}
STEPS_IN_PROGRAM = 20  # steps a timed call runs "in one program" (on an accelerator)
METHODS = {"cpu": ("per call", "donated per call"), "gpu": ("per call", "in one program")}
FAMILY_REPEATS = 20
QUICK = {"sizes": (1_000_000,), "repeats": 3, "compile_layers": (6,), "compile_stacked": (),
         "compile_repeats": 1, "floor_side": 128, "family_repeats": 3}
# The code a section's numbers depend on: a section kept by other code is measured again.
SOURCES = ("vsgd_optax/**/*.py", "benchmarks/cost/*.py", "benchmarks/optimizers.py",
           "benchmarks/common.py", "benchmarks/lm/*.py", "benchmarks/time_to_result/workloads/*.py")


def sizes(quick: bool) -> tuple[int, ...]:
  return QUICK["sizes"] if quick else SIZES


def sections(part: str, quick: bool) -> dict[str, Callable[[], object]]:
  """``{name: the call that measures it}`` of the cost's sections on this ``part`` (the
  backend: ``cpu`` or ``gpu``), in the order the result file keeps them.
  """
  repeats = QUICK["repeats"] if quick else REPEATS[part]
  family_size = contest_protocol.SIZES["smoke" if quick else "gpu"]["size"]
  return {
      **{f"step {size}": functools.partial(step.measure, size, repeats, STEPS_IN_PROGRAM,
                                           METHODS[part])
         for size in sizes(quick)},
      "compile": functools.partial(
          compile_time.measure, QUICK["compile_layers"] if quick else compile_time.LAYERS,
          QUICK["compile_stacked"] if quick else compile_time.STACKED,
          QUICK["compile_repeats"] if quick else 3),
      "floor": functools.partial(floor.measure, QUICK["floor_side"] if quick else floor.SIDE),
      "memory": lambda: {"rows": memory.rows(), "workload_shares": memory.workload_shares()},
      "muon_family": lambda: {
          "size": dataclasses.asdict(family_size),
          "rows": muon_family.measure(family_size,
                                      QUICK["family_repeats"] if quick else FAMILY_REPEATS)},
  }

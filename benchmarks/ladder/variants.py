"""The momentum study's variants of VSGD-Muon (PROTOCOL.md's addendum 6): their rows.

Each variant of ``protocol.VARIANTS`` runs after every program of addendum 5, at the
rungs of ``protocol.VARIANT_RUNGS`` in order, by the rate rule the betas got, within
the study's budget (``run.run_variants``). Once it is behind the momentum-tuned Muon
at a rung (``behind``), its later rungs do not run: the rule that would make it the
default can no longer pass. ``report`` gives ``summary.json``'s rows, a rung each.
"""

from __future__ import annotations

from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import summary


def centre(lines: list[dict], entry: str, size_name: str, budget: float,
           seeds=protocol.SEEDS) -> float | None:
  """The centre of the variant ``entry``'s window at a rung: VSGD-Muon's contest rate at the
  study's smallest size; above it, the rate the variant chose at the next smaller size and
  the same budget (None until it has).
  """
  previous = rules.momentum_previous(size_name)
  if previous is None:
    return rules.contest_rate(entry)
  choice = rules.settled_choice(lines, entry, previous, budget, seeds)
  return None if choice is None else choice[0]


def _tuned_muon_test(lines: list[dict], size_name: str, budget: float, seeds) -> dict | None:
  """``{seed: test bits}`` of the momentum-tuned Muon at a rung; None until it exists."""
  best = rules.best_momentum(lines, size_name, budget, seeds)
  if best is None:
    return None
  adam = rules.chosen(lines, "adamw", size_name, budget, seeds)
  return summary._test_bits(lines, protocol.momentum_entry(best[0]), size_name, budget, best[1],
                            adam)


def row(lines: list[dict], held: dict, entry: str, size_name: str, budget: float,
        seeds=protocol.SEEDS) -> dict | None:
  """The variant's row at a rung, once its rate rule is done there: its rate, validation and
  test bits, and its paired test differences to the momentum-tuned Muon and to VSGD-Muon
  (``held``: ``summary.finals``'s rows), each None until the other side exists; else None.
  """
  choice = rules.settled_choice(lines, entry, size_name, budget, seeds)
  if choice is None:
    return None
  rate, val = choice
  adam = rules.chosen(lines, "adamw", size_name, budget, seeds)
  test = summary._test_bits(lines, entry, size_name, budget, rate, adam)
  tuned = _tuned_muon_test(lines, size_name, budget, seeds)
  vsgd = held.get((size_name, budget, "vsgd_muon"))
  return {"entry": entry, "size": size_name, "budget": budget, "rate": rate, "val_mean": val,
          "test": {s: test[s] for s in seeds},
          "versus_tuned": None if tuned is None else summary.paired(test, tuned, seeds),
          "versus_vsgd_muon": None if vsgd is None else summary.paired(test, vsgd["test"], seeds)}


def behind(found: dict | None) -> bool:
  """Whether a variant's row ``found`` is behind the momentum-tuned Muon (addendum 6)."""
  return (found is not None and found["versus_tuned"] is not None
          and found["versus_tuned"]["verdict"] == "behind")


def report(lines: list[dict], held: dict, seeds=protocol.SEEDS) -> list[dict]:
  """Each variant's part of ``summary.json``: its rows, a rung each where its rate rule is
  done, up to its early stop; the rungs not run; and whether addendum 6's rule passes.
  """
  out = []
  for entry in protocol.VARIANTS:
    rows, stopped = [], None
    for size_name, budget in protocol.VARIANT_RUNGS:
      found = row(lines, held, entry, size_name, budget, seeds)
      if found is not None:
        rows.append(found)
      if behind(found):
        stopped = f"{size_name} {budget:g}"
        break
    ran = {(r["size"], r["budget"]) for r in rows}
    not_run = [f"{s} {b:g}" for s, b in protocol.VARIANT_RUNGS if (s, b) not in ran]
    replaces = (not not_run and all(r["versus_tuned"] is not None for r in rows)
                and not any(map(behind, rows)))
    out.append({"entry": entry, "changes": protocol.VARIANTS[entry], "rows": rows,
                "stopped_at": stopped, "not_run": not_run, "replaces_default": replaces})
  return out

"""The ladder's summary from its ledger: chosen rates, speedups, paired differences, the rule.

Reads ``runs.jsonl`` (``benchmarks.ledger.read``) and computes what ``protocol.METRIC`` and
``protocol.RECOMMENDATION_RULE`` declare: at each (size, budget) each entry's
chosen rate (lowest mean validation bits over the seeds, its AdamW part at
AdamW's chosen rate), its test bits per seed there, its token-equivalent
speedup against AdamW and against Muon (read off each reference's measured
loss against data per seed, ``read_off``, by interpolation between the budgets
it ran: PROTOCOL.md's addendum 5 replaced the fit, which ``reference_fits``
keeps as a diagnostic), and its paired test differences; then the rule's
outcome, the AdamW-part sensitivity check (``protocol.SENSITIVITY_RULE``) and,
at the size that holds, each entry at its own-best AdamW part
(``protocol.OWN_BEST_RULE``), which the rule's outcome takes in. ``summary_file``
writes it, with the momentum study's section, into ``summary.json``, whose
sections and figure the pages draw (``benchmarks.reporting``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import rules

BETAS = np.linspace(0.02, 3.0, 1491)  # the exponents the fit searches, 0.002 apart
LEVEL = 0.95


def fit(chars, bits) -> tuple[float, float, float]:
  """``(E, B, beta)`` of ``L(D) = E + B D^-beta`` by least squares, ``E >= 0``, ``beta`` on
  ``BETAS``: for each beta, E and B are linear (E clipped at 0).
  """
  chars, bits = np.asarray(chars, np.float64), np.asarray(bits, np.float64)
  best = (math.inf, 0.0, 0.0, 0.0)
  for beta in BETAS:
    x = chars ** -beta
    design = np.stack([np.ones_like(x), x], axis=1)
    (e, b), *_ = np.linalg.lstsq(design, bits, rcond=None)
    if e < 0:
      e, b = 0.0, float(x @ bits / (x @ x))
    sse = float(np.sum((e + b * x - bits) ** 2))
    if sse < best[0]:
      best = (sse, float(e), float(b), float(beta))
  return best[1:]


def interval(values) -> dict:
  """Mean and the 95% t interval of ``values`` (one a seed)."""
  values = np.asarray(values, np.float64)
  mean = float(np.mean(values))
  if len(values) < 2 or not np.all(np.isfinite(values)):
    return {"mean": mean, "low": math.nan, "high": math.nan, "n": len(values)}
  half = stats.t.ppf(0.5 + LEVEL / 2, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(
      len(values))
  return {"mean": mean, "low": mean - float(half), "high": mean + float(half), "n": len(values)}


def finals(lines: list[dict], seeds=protocol.SEEDS) -> dict:
  """``(size, budget, entry) -> {"rate", "adam_rate", "test": {seed: bits}}`` at each chosen
  rate, the Muon family's AdamW part at AdamW's chosen rate there (or at 10 characters a
  parameter, for an untuned budget).
  """
  out = {}
  for size, budget in sorted({(x["size"], float(x["budget"])) for x in lines}):
    tuned_at = max(protocol.BUDGETS) if budget in protocol.UNTUNED_BUDGETS else budget
    adam = rules.chosen(lines, "adamw", size, tuned_at, seeds)
    for entry in protocol.ENTRIES:
      rate = rules.chosen(lines, entry, size, budget, seeds, adam)
      if rate is None:
        continue
      test = _test_bits(lines, entry, size, budget, rate, None if entry == "adamw" else adam)
      out[size, budget, entry] = {"rate": rate, "adam_rate": adam if entry != "adamw" else rate,
                                  "params": next(x["params"] for x in lines if x["size"] == size),
                                  "test": {s: test[s] for s in seeds if s in test}}
  return out


def _test_bits(lines: list[dict], entry: str, size: str, budget: float, rate: float,
               adam_rate: float | None, field: str = "test_bits") -> dict:
  """``{seed: test bits}`` (or another ``field``) of ``entry``'s runs at ``rate`` (and
  AdamW-part ``adam_rate``, where given) at one rung.
  """
  return {x["seed"]: x[field] for x in lines
          if (x["entry"], x["size"], float(x["budget"])) == (entry, size, budget)
          and math.isclose(x["rate"], rate, rel_tol=1e-6)
          and (adam_rate is None or math.isclose(x["adam_rate"], adam_rate, rel_tol=1e-6))}


def read_off(chars, bits, target: float) -> tuple[float, str]:
  """The characters at which a reference's measured curve (``bits`` at ``chars``, one
  seed) reaches ``target`` bits, and where that lies: ``"inside"`` the measured range,
  read off by interpolation linear in log characters and log bits between the two
  budgets that bracket it (exact on a power law without floor); ``"beyond"`` its largest
  budget, where the largest is returned as a lower bound; ``"below"`` its smallest, where
  the smallest is returned as an upper bound. The curve is read from its smallest budget
  on, so a curve that is not monotone gives the least data that reached ``target``.
  """
  points = sorted(zip(chars, bits, strict=True))
  if target > points[0][1]:
    return points[0][0], "below"
  for (d0, l0), (d1, l1) in itertools.pairwise(points):
    if l0 >= target >= l1:
      if l0 == l1:
        return d0, "inside"
      w = math.log(l0 / target) / math.log(l0 / l1)
      return math.exp(math.log(d0) + w * math.log(d1 / d0)), "inside"
  return points[-1][0], "beyond"


def speedups(held: dict, reference: str, seeds=protocol.SEEDS) -> dict:
  """``(size, budget, entry) -> interval`` of the token-equivalent speedup against
  ``reference``: per seed, the characters at which the reference's measured curve at that
  size reaches the entry's test bits (``read_off``), over the entry's. Where a seed's
  reading lies outside the reference's measured budgets, that seed's speedup is the
  range's bound (a lower bound beyond it, an upper bound below it), and the interval
  says so: ``"outside"`` counts those seeds, ``"range"`` is ``"beyond"``, ``"below"`` or
  ``"inside"``, ``"bound"`` is the bound.
  """
  out = {}
  for size in sorted({k[0] for k in held}):
    ref = {k[1]: v for k, v in held.items() if k[0] == size and k[2] == reference}
    if len(ref) < 2:
      continue
    params = next(iter(ref.values()))["params"]
    curves = {s: ([b * params for b in ref], [ref[b]["test"][s] for b in ref]) for s in seeds
              if all(s in ref[b]["test"] for b in ref)}
    for (s_name, budget, entry), v in held.items():
      if s_name != size or not curves:
        continue
      read = [read_off(*curves[s], v["test"][s]) for s in curves if s in v["test"]]
      ratios = [chars / (budget * params) for chars, _ in read]
      outside = [where for _, where in read if where != "inside"]
      found = interval(ratios)
      found.update(range=outside[0] if outside else "inside", outside=len(outside),
                   bound=(max(ref) if outside and outside[0] == "beyond" else min(ref)) / budget
                   if outside else None)
      out[size, budget, entry] = found
  return out


def reference_fits(held: dict, seeds=protocol.SEEDS) -> list[dict]:
  """The loss-against-data fit the speedups used until PROTOCOL.md's addendum 5, kept as
  a diagnostic: per size, reference and seed, ``L(D) = E + B D^-beta`` over the
  reference's budgets (``fit``) and its residuals at each budget (measured minus fitted).
  """
  rows = []
  for size in _smallest_first(held, {k[0] for k in held}):
    for reference in protocol.REFERENCES:
      ref = {k[1]: v for k, v in held.items() if k[0] == size and k[2] == reference}
      if len(ref) < 3:
        continue
      params = next(iter(ref.values()))["params"]
      budgets = sorted(ref)
      for s in seeds:
        if not all(s in ref[b]["test"] for b in budgets):
          continue
        bits = [ref[b]["test"][s] for b in budgets]
        e, b_, beta = fit([b * params for b in budgets], bits)
        residuals = [x - (e + b_ * (b * params) ** -beta) for b, x in zip(budgets, bits,
                                                                          strict=True)]
        rows.append({"size": size, "params": params, "reference": reference, "seed": s,
                     "E": e, "B": b_, "beta": beta, "budgets": budgets,
                     "residuals": residuals,
                     "rms": float(np.sqrt(np.mean(np.square(residuals))))})
  return rows


def differences(held: dict, entry: str, against: str, seeds=protocol.SEEDS) -> dict:
  """``(size, budget) -> interval`` of ``entry``'s test bits minus ``against``'s, by seed."""
  out = {}
  for (size, budget, name), v in held.items():
    other = held.get((size, budget, against))
    if name != entry or other is None:
      continue
    paired = [v["test"][s] - other["test"][s] for s in seeds
              if s in v["test"] and s in other["test"]]
    if paired:
      out[size, budget] = interval(paired)
  return out


def _complete(held: dict, size: str, budgets, seeds, names=protocol.ENTRIES) -> bool:
  return all(len(held.get((size, b, e), {"test": {}})["test"]) == len(seeds)
             for b in budgets for e in names)


def _holds(held, against_muon, against_normuon, versus_muon, size, budgets, seeds) -> dict:
  """The rule's (a), (b) and (c) at one size, each True or False."""
  top = max(budgets)
  complete = _complete(held, size, budgets, seeds)
  behind = any(d.get((size, b), {"low": math.nan})["low"] > 0
               for d in (against_muon, against_normuon) for b in budgets)
  ahead = against_muon.get((size, top), {"high": math.nan})["high"] < 0
  # A seed read below Muon's measured range gives an upper bound, which cannot show >= 1.
  found = versus_muon.get((size, top, "vsgd_muon"), {"mean": math.nan, "range": "inside"})
  speedup = found["mean"] >= 1 and found["range"] != "below"
  return {"complete": complete, "not_behind": complete and not behind,
          "ahead_at_top": complete and ahead and speedup}


def recommendation(held: dict, own_best_holds: bool | None, seeds=protocol.SEEDS,
                   cpu_sizes=None) -> dict:
  """``protocol.RECOMMENDATION_RULE``'s outcome from ``finals``, with ``own_best``'s
  ``holds`` (``protocol.OWN_BEST_RULE``: None, not run, fails the size it names).
  """
  cpu_sizes = list(cpu_sizes if cpu_sizes is not None else protocol.CPU_SIZES)
  if not cpu_sizes or not all(_complete(held, s, protocol.BUDGETS, seeds) for s in cpu_sizes):
    return {"outcome": "none: a CPU rung lacks a result", "s_star": None}
  gpu = [s for s in protocol.GPU_SIZES if _complete(held, s, protocol.GPU_BUDGETS, seeds)]
  sizes = _smallest_first(held, cpu_sizes + gpu)
  muon, normuon = (differences(held, "vsgd_muon", x, seeds) for x in ("muon", "normuon"))
  versus_muon = speedups(held, "muon", seeds)
  per_size, s_star, unbroken = {}, None, True
  for size in sizes:  # S*: the last of the run of sizes that hold, from the smallest
    holds = _holds(held, muon, normuon, versus_muon, size, _budgets(size), seeds)
    if size == protocol.OWN_BEST_SIZE:  # addendum 3: each entry at its own-best AdamW part
      holds["own_best"] = own_best_holds is True
    per_size[size] = holds
    unbroken = unbroken and all(holds.values())
    s_star = size if unbroken else s_star
  above = sizes[sizes.index(s_star) + 1:] if s_star else sizes
  normuon_minus_muon = differences(held, "normuon", "muon", seeds)
  normuon_ahead = bool(above) and all(
      normuon_minus_muon.get((s, max(_budgets(s))), {"high": math.nan})["high"] < 0
      for s in above)
  return {"outcome": ("vsgd_muon is the default up to S*" if s_star else
                      "vsgd_muon is not the default"), "s_star": s_star,
          "s_star_params": model_params(held, s_star) if s_star else None,
          "beyond": "normuon" if normuon_ahead else "muon", "per_size": per_size,
          "sizes_measured": sizes, "params": {s: model_params(held, s) for s in sizes},
          "budgets": list(protocol.BUDGETS)}


def sizes_complete(held: dict, seeds=protocol.SEEDS) -> list[str]:
  """The sizes where every rung the protocol declares holds its seeds: every entry at each
  budget, and AdamW and Muon at each of their fits' budgets, smallest first.
  """
  done = []
  for size in _smallest_first(held, {k[0] for k in held}):
    fits = (protocol.GPU_REFERENCE_BUDGETS if size in protocol.GPU_SIZES
            else protocol.REFERENCE_BUDGETS)
    if _complete(held, size, _budgets(size), seeds) and _complete(held, size, fits, seeds,
                                                                  protocol.REFERENCES):
      done.append(size)
  return done


def model_params(held: dict, size: str) -> int:
  return next(v["params"] for k, v in held.items() if k[0] == size)


def _smallest_first(held: dict, sizes) -> list[str]:
  return sorted(sizes, key=lambda s: model_params(held, s))


def _budgets(size: str) -> tuple[float, ...]:
  """The budgets every entry runs at ``size``: a GPU size's, or the CPU sizes'."""
  return protocol.GPU_BUDGETS if size in protocol.GPU_SIZES else protocol.BUDGETS


def table(held: dict, seeds=protocol.SEEDS) -> list[dict]:
  """One row a (size, budget, entry): the closing note's table."""
  versus = {ref: speedups(held, ref, seeds) for ref in protocol.REFERENCES}
  diffs = {other: differences_all(held, other, seeds)
           for other in ("muon", "normuon", "muon_vs", "adamw")}
  rows = []
  for (size, budget, entry), v in sorted(held.items(), key=lambda kv: (kv[1]["params"],
                                                                        kv[0][1], kv[0][2])):
    test = np.asarray(list(v["test"].values()))
    rows.append({"size": size, "params": v["params"], "budget": budget, "entry": entry,
                 "rate": v["rate"], "adam_rate": v["adam_rate"], "seeds": len(test),
                 "test_mean": float(test.mean()),
                 "test_sd": float(test.std(ddof=1)) if len(test) > 1 else math.nan,
                 **{f"speedup_vs_{ref}": versus[ref].get((size, budget, entry))
                    for ref in protocol.REFERENCES},
                 **{f"minus_{o}": diffs[o].get((size, budget, entry)) for o in diffs}})
  return rows


def differences_all(held: dict, against: str, seeds=protocol.SEEDS) -> dict:
  """``(size, budget, entry) -> interval`` of every entry's paired difference to ``against``."""
  return {(size, budget, entry): d for entry in protocol.ENTRIES if entry != against
          for (size, budget), d in differences(held, entry, against, seeds).items()}


def paired(first: dict, second: dict, seeds) -> dict | None:
  """``interval`` of ``first`` minus ``second`` ({seed: bits}) with its verdict; None
  unless both have every seed.
  """
  if not all(s in first and s in second for s in seeds):
    return None
  return _judged([first[s] - second[s] for s in seeds])


def _judged(differences) -> dict:
  """``interval`` of paired differences (one a seed) with its verdict by the interval:
  "ahead" below 0, "behind" above, else "tie".
  """
  found = interval(differences)
  verdict = "ahead" if found["high"] < 0 else "behind" if found["low"] > 0 else "tie"
  return {**found, "verdict": verdict}


def sensitivity(lines: list[dict], held: dict, size: str | None = None,
                seeds=protocol.SEEDS, factors=None) -> list[dict]:
  """``protocol.SENSITIVITY_RULE``'s report at ``size`` (default the contest's), one row an
  AdamW-part rate (its factor on the rate AdamW chose, at the largest CPU budget; the
  protocol's factors and 1 unless ``factors`` are given): each
  Muon-family entry's validation and test bits over the seeds at its chosen matrix rate,
  and VSGD-Muon's paired differences to Muon and NorMuon with their verdicts. Empty until
  the tuned rung is in; an entry or a factor not run yet is left out of its row.
  """
  size = size or next(name for name, s in rules.SIZES.items() if s == protocol.CONTEST_SIZE)
  top = max(protocol.BUDGETS)
  if (size, top, "adamw") not in held:
    return []
  adam = held[size, top, "adamw"]["rate"]
  rows = []
  for factor in sorted(factors or (1.0, *protocol.SENSITIVITY_FACTORS)):
    found = {}
    for entry in protocol.MUON_FAMILY:
      if (size, top, entry) in held:
        found[entry] = _at_adamw_part(lines, held, size, entry, adam * factor, seeds)
    tests = {e: t for e, t in found.items() if t is not None}
    rows.append({"factor": factor, "adam_rate": adam * factor,
                 "versus": _versus(tests, ("muon", "normuon")),
                 "entries": {e: {"rate": t["rate"], **_means(t)} for e, t in tests.items()}})
  return rows


def _at_adamw_part(lines, held, size: str, entry: str, adam_rate: float, seeds) -> dict | None:
  """``entry``'s runs at its chosen rate at the top budget with the AdamW part at
  ``adam_rate``: validation and test bits in ``seeds``' order, None until every seed ran.
  """
  top = max(protocol.BUDGETS)
  rate = held[size, top, entry]["rate"]
  val = _test_bits(lines, entry, size, top, rate, adam_rate, field="val_bits")
  test = _test_bits(lines, entry, size, top, rate, adam_rate)
  if not all(s in val for s in seeds):
    return None
  return {"rate": rate, "adam_rate": adam_rate, "val": [val[s] for s in seeds],
          "test": [test[s] for s in seeds]}


def _means(found: dict) -> dict:
  """The mean validation and test bits of ``_at_adamw_part``'s runs, and the test's sd."""
  return {"val_mean": float(np.mean(found["val"])), "test_mean": float(np.mean(found["test"])),
          "test_sd": float(np.std(found["test"], ddof=1))}


def _versus(tests: dict, others) -> dict:
  """VSGD-Muon's paired test differences to each of ``others`` held in ``tests``."""
  versus = {}
  for other in others:
    if "vsgd_muon" in tests and other in tests:
      versus[other] = _judged(np.subtract(tests["vsgd_muon"]["test"], tests[other]["test"]))
  return versus


def own_best(lines: list[dict], held: dict, seeds=protocol.SEEDS) -> dict:
  """``protocol.OWN_BEST_RULE``'s report and outcome at ``protocol.OWN_BEST_SIZE``: a row
  each AdamW part any Muon-family entry has run there, each entry's own-best part (the
  lowest mean validation bits of its window, grown at an edge by PROTOCOL.md's addendum 4),
  and VSGD-Muon's paired test differences to Muon and NorMuon each at its own best.
  ``holds`` is None until every entry's window is complete (the sensitivity check's three
  parts, grown while its best lies on an edge), and the recommendation rule takes None for
  "does not hold".
  """
  size, top = protocol.OWN_BEST_SIZE, max(protocol.BUDGETS)
  found = {"size": size, "rows": [], "best": {}, "versus": {}, "holds": None}
  if (size, top, "adamw") not in held:
    return found
  adam = held[size, top, "adamw"]["rate"]
  means = {e: rules.adamw_part_means(lines, e, size, top, held[size, top, e]["rate"], seeds)
           for e in protocol.MUON_FAMILY if (size, top, e) in held}
  parts = {ledger.rounded(p): p for m in means.values() for p in m}
  found["rows"] = sensitivity(lines, held, size, seeds, [p / adam for p in parts.values()])
  found["params"] = held[size, top, "adamw"]["params"]
  three = {ledger.rounded(adam * f) for f in (1.0, *protocol.SENSITIVITY_FACTORS)}
  if len(means) < len(protocol.MUON_FAMILY) or any(
      not three <= {ledger.rounded(p) for p in m} or rules.adamw_part_beyond(m) is not None
      for m in means.values()):
    return found
  best = {e: _at_adamw_part(lines, held, size, e, min(m, key=m.__getitem__), seeds)
          for e, m in means.items()}
  found["best"] = {e: {"adam_rate": t["adam_rate"], "val_mean": float(np.mean(t["val"])),
                       "test_mean": float(np.mean(t["test"])),
                       "on_edge": t["adam_rate"] in (min(means[e]), max(means[e]))}
                   for e, t in best.items()}
  found["versus"] = _versus(best, ("muon", "normuon"))
  found["holds"] = (found["versus"]["muon"]["verdict"] == "ahead"
                    and found["versus"]["normuon"]["verdict"] != "behind")
  return found


def shares(lines: list[dict], held: dict, seeds=protocol.SEEDS) -> dict:
  """``protocol.SHARE_RULE``'s report and outcome: at each CPU size whose top-budget rung
  is in, VSGD-Muon's validation and test bits over the seeds at each AdamW-part share of
  its chosen rate (a share not run yet is left out), and the default share the rule gives.
  """
  top = max(protocol.BUDGETS)
  sizes = []
  for size in protocol.CPU_SIZES:
    if (size, top, "vsgd_muon") not in held:
      continue
    chosen = held[size, top, "vsgd_muon"]
    at = []
    for share in protocol.ADAMW_PART_SHARES:
      adam_rate = rules.adamw_part_at_share(share, chosen["rate"], chosen["adam_rate"])
      found = _at_adamw_part(lines, held, size, "vsgd_muon", adam_rate, seeds)
      if found is not None:
        at.append({"share": share, "adam_rate": adam_rate, **_means(found)})
    sizes.append({"size": size, "params": chosen["params"], "rate": chosen["rate"],
                  "shares": at})
  return {"sizes": sizes, **default_share(sizes)}


def default_share(sizes: list[dict]) -> dict:
  """The rule's outcome from ``shares``'s sizes: each share's largest shortfall over the
  sizes (its mean validation bits minus the best share's at that size) and the default
  share, ``protocol.DEFAULT_SHARE`` until every CPU size has every share.
  """
  val = [{row["share"]: row["val_mean"] for row in s["shares"]} for s in sizes]
  complete = (len(sizes) == len(protocol.CPU_SIZES)
              and all(len(v) == len(protocol.ADAMW_PART_SHARES) for v in val))
  if not complete:
    return {"complete": False, "worst_shortfall": [], "default": protocol.DEFAULT_SHARE}
  worst = {share: max(v[share] - min(v.values()) for v in val)
           for share in protocol.ADAMW_PART_SHARES}
  best = min(worst, key=worst.get)
  replaces = worst[best] < worst[protocol.DEFAULT_SHARE] - protocol.SHARE_MARGIN
  return {"complete": True,
          "worst_shortfall": [{"share": k, "shortfall": v} for k, v in worst.items()],
          "default": best if replaces else protocol.DEFAULT_SHARE}

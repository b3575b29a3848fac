"""The contest's tables: its entries, the declared family's verdicts, the promotion rule.

From ``benchmarks/results/contest/{cpu,gpu}.json``, whose ``protocol`` record
carries what ``benchmarks/contest/protocol.py`` declared before the runs: the
family (each comparison tested for a difference and for equivalence, Holm's
correction over the family's p-values alone, both kinds together), the verdict
rule and the promotion rule. Every other comparison here is descriptive: its
p-value is printed as such and enters no correction.
"""

from __future__ import annotations

import os

from benchmarks import common
from benchmarks.reporting import decisions
from benchmarks.reporting import markdown
from benchmarks.reporting import small
from benchmarks.reporting import stats
from benchmarks.reporting import styles

FOLDER = "contest"
SIZES = ("cpu", "gpu")
# Descriptive comparisons, outside the family: what each peer adds over another.
# The promotion rule's outcome by the public default it gives (None: not promoted).
OUTCOMES = {"vsgd_muon": "promoted, with full rates", "vsgd_muon_factored":
            "promoted, with factored rates", None: "not promoted"}
DESCRIPTIVE = (("normuon", "muon"), ("muon", "adamw"), ("adamw", "adam"),
               ("vsgd_muon", "adamw"), ("vsgd", "adamw"))


def load(folder: str) -> dict[str, dict]:
  """Each size's result file that holds entries, by size."""
  out = {}
  for size in SIZES:
    payload = common.load(os.path.join(folder, FOLDER), size)
    if payload and payload.get("entries"):
      out[size] = payload
  return out


def machines(payload: dict) -> list[dict]:
  """Every machine that trained some of a contest's runs, in order (``run.run``
  keeps them; an older file names the last and the one before it).
  """
  return payload.get("machines") or [payload[k] for k in ("earlier_machine", "machine")
                                     if k in payload]


def best_baseline(payload: dict) -> str | None:
  """The baseline with the lowest mean validation bits at its chosen rate; ties go
  to the earlier in the protocol's order. The test split enters no choice.
  """
  order = payload["protocol"]["entries"]
  found = [n for n in order if n in payload["entries"] and payload["entries"][n]["baseline"]]
  if len(found) < len([n for n in order if small.is_baseline(n)]):
    return None  # not every baseline has run: the best is not known yet
  return min(found, key=lambda n: (payload["entries"][n]["val_mean"], order.index(n)),
             default=None)


def _compared(payload: dict, name: str, other: str) -> stats.Comparison:
  a, b = payload["entries"][name], payload["entries"][other]
  return stats.compare(a["test"], a["seeds"], b["test"], b["seeds"])


def family(payload: dict, margin: float) -> list[dict]:
  """The declared family's comparisons that ran, each with its difference, its two
  p-values, whether each holds under Holm's correction over the family, and its
  verdict by the declared rule. Where the best baseline is Adam, VSGD's two
  comparisons are one and count once.
  """
  declared = payload["protocol"]
  best = best_baseline(payload)
  rows = []
  for name, other in declared["family"]:
    is_best = other == declared["best"]  # the best baseline, as this run found it
    against = best if is_best else other
    ran = name in payload["entries"] and against in payload["entries"]
    if not ran or (name, against) in [(r["name"], r["other"]) for r in rows]:
      continue
    c = _compared(payload, name, against)
    rows.append({"name": name, "other": against, "best": is_best, "comparison": c,
                 "p_difference": c.p_value, "p_equivalence": stats.equivalence_p(c, margin)})
  held = decisions.holm([p for r in rows for p in (r["p_difference"], r["p_equivalence"])])
  for r, (difference, equivalence) in zip(rows, zip(held[::2], held[1::2], strict=True),
                                          strict=True):
    r["holds_difference"], r["holds_equivalence"] = difference, equivalence
    if equivalence:
      r["verdict"] = "equivalent"
    elif difference:
      r["verdict"] = "win" if r["comparison"].difference < 0 else "loss"
    else:
      r["verdict"] = "inconclusive"
  return rows


def promotion(sizes: dict[str, dict], declared: dict[str, float]) -> dict:
  """The declared promotion rule applied: for each candidate, its verdicts against
  Muon and NorMuon at each size that ran (and the factored form's against the
  full one), and whether it qualifies; then the outcome and the public default.
  """
  verdicts = {size: {(r["name"], r["other"]): r["verdict"]
                     for r in family(p, decisions.margin_for(declared, p["workload"]["name"]))}
              for size, p in sizes.items()}
  cpu, gpu = verdicts.get("cpu", {}), verdicts.get("gpu", {})
  candidates = sizes["cpu"]["protocol"]["candidates"] if "cpu" in sizes else []
  rows = {}
  for name in candidates:
    against = {other: cpu.get((name, other)) for other in ("muon", "normuon")}
    gpu_ok = all(gpu.get((name, other)) not in ("loss", None) for other in ("muon", "normuon")) \
        if gpu else True
    rows[name] = {**against, "gpu": gpu, "qualifies": (
        against["muon"] == "win" and against["normuon"] in ("win", "equivalent") and gpu_ok)}
  qualified = [n for n in candidates if rows[n]["qualifies"]]
  full, factored = candidates  # declared as the full form, then the factored one
  if not qualified:
    default = None
  elif factored in qualified and cpu.get((factored, full)) in ("win", "equivalent"):
    default = factored
  else:
    default = qualified[0]
  return {"rows": rows, "default": default,
          "complete": all(None not in (r["muon"], r["normuon"]) for r in rows.values())}


def _mean_sd(values: list[float]) -> str:
  return markdown.mean_sd(sum(values) / len(values), stats.std(values))


def entries_table(payload: dict) -> str:
  best = best_baseline(payload)
  rows = []
  for name in payload["protocol"]["entries"]:
    e = payload["entries"].get(name)
    if e is None:
      rows.append([styles.short(name), "not run yet", "", ""])
      continue
    edge = " (edge)" if e["at_edge"] else ""
    rows.append([styles.short(name) + (" (best baseline)" if name == best else ""),
                 f"{e['chosen_rate']:g}{edge}", _mean_sd(e["val"]), _mean_sd(e["test"])])
  return markdown.table(["optimizer", "rate", "validation bits/char", "test bits/char"], rows)


def _difference(c: stats.Comparison) -> str:
  return f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}]"


def family_table(rows: list[dict], declared: dict) -> str:
  """The family's comparisons that ran, then those of the declared family that have not."""
  cells = [[f"{styles.short(r['name'])} − {styles.short(r['other'])}"
             + (" (best)" if r["best"] else ""),
            _difference(r["comparison"]),
            f"{r['p_difference']:.2g}" + (" ✓" if r["holds_difference"] else "") + ", "
            + f"{r['p_equivalence']:.2g}" + (" ✓" if r["holds_equivalence"] else ""),
            f"**{r['verdict']}**"] for r in rows]
  ran = {(r["name"], declared["best"] if r["best"] else r["other"]) for r in rows}
  cells += [[f"{styles.short(name)} − " + ("the best baseline" if other == declared["best"]
                                             else styles.short(other)), "not run yet", "", ""]
            for name, other in declared["family"] if (name, other) not in ran]
  return markdown.table(["comparison", "difference [95% CI]", "p: diff., equiv.", "verdict"],
                        cells)


def promotion_table(found: dict) -> str:
  def said(value):
    return value or "not run yet"
  cells = [[styles.short(name), f"{said(row['muon'])}, {said(row['normuon'])}",
            ", ".join(f"{styles.short(o)}: {v}" for (n, o), v in row["gpu"].items() if n == name)
            or "not run yet", "**yes**" if row["qualifies"] else "no"]
           for name, row in found["rows"].items()]
  return markdown.table(["candidate", "CPU: against Muon, NorMuon", "GPU", "qualifies"],
                        cells)


def rates_table(payload: dict) -> str:
  rows = []
  for name in payload["protocol"]["entries"]:
    e = payload["entries"].get(name)
    if e is not None:
      rows.append([styles.short(name), ", ".join(f"{r:g}" for r in e["rates"]),
                   ", ".join(f"{v:.3f}" for v in e["val_by_rate"]),
                   ", ".join(f"{v:.3f}" for v in e["test_by_rate"])])
  return markdown.table(["optimizer", "rates", "validation, mean by rate",
                         "test, mean by rate"], rows)


def splits_table(payload: dict) -> str:
  splits = payload["workload"]["splits"]
  rows = [[name, f"{s['files']:,}", f"{s['files_scored']:,}", f"{s['chars_scored']:,}",
           f"{100 * s['largest_file_share']:.1f}%"] for name, s in splits.items()
          if name != "train"]
  rows.append(["train", f"{splits['train']['files']:,}", "-", f"{splits['train']['chars']:,}",
               "-"])
  return markdown.table(["split", "files", "files scored", "characters scored",
                         "largest file's share"], rows)


def descriptive_table(payload: dict) -> str:
  rows = [[f"{styles.short(a)} − {styles.short(b)}", _difference(c := _compared(payload, a, b)),
           f"{c.p_value:.2g}"] for a, b in DESCRIPTIVE
          if a in payload["entries"] and b in payload["entries"]]
  return markdown.table(["comparison", "difference [95% CI]", "p (descriptive)"], rows)


def values(folder: str, declared: dict[str, float], images: str) -> dict[str, str]:
  """The templates' contest values for each size, ``not run yet`` for a size that
  did not run; ``images`` is the results folder as the pages see it.
  """
  sizes = load(folder)
  out: dict[str, str] = {}
  for size in SIZES:
    payload = sizes.get(size)
    if payload is None:
      out.update({f"{size}_{k}": "not run yet" for k in (
          "description", "entries", "family", "rates", "splits", "descriptive", "chart",
          "seeds", "machine", "margin", "status", *(f"rate_{name}" for name in styles.STYLES))})
      continue
    entries = payload["entries"]
    out.update({f"{size}_rate_{name}": f"{entries[name]['chosen_rate']:g}" if name in entries
                else "not run yet" for name in styles.STYLES})
    margin = decisions.margin_for(declared, payload["workload"]["name"])
    out.update({
        f"{size}_description": payload["workload"]["description"],
        f"{size}_entries": entries_table(payload),
        f"{size}_family": family_table(family(payload, margin), payload["protocol"]),
        f"{size}_rates": rates_table(payload), f"{size}_splits": splits_table(payload),
        f"{size}_descriptive": descriptive_table(payload),
        f"{size}_chart": f"{images}/{FOLDER}/contest_{size}.png",
        f"{size}_seeds": str(len(payload["protocol"]["seeds"])),
        f"{size}_status": (f"{len(payload['entries'])} of {len(payload['protocol']['entries'])}"
                           f" entries run at {len(payload['protocol']['seeds'])} seeds (its"
                           " tables: the appendix)"),
        f"{size}_machine": ", resumed on ".join(map(common.machine_text, machines(payload))),
        f"{size}_margin": f"{margin:g}"})
  found = promotion(sizes, declared) if "cpu" in sizes else None
  out["promotion"] = "not run yet" if found is None else promotion_table(found)
  out["promotion_outcome"] = ("not decided yet" if found is None or not found["complete"]
                              else OUTCOMES[found["default"]])
  return out

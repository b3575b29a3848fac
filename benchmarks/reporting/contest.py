"""The results page's first section: the contest (``benchmarks.contest``).

From ``benchmarks/results/contest/{cpu,gpu}.json``: one row an optimizer (its
chosen rate, its window, validation and test bits per character), the
verdicts of this package's optimizers against the best baseline (chosen on
validation) and against Adam, the decision rules' comparisons (VSGD-Muon
against Muon; each Muon with and without its partition), Holm's correction
across every verdict of the section, and the chart of training curves.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks import common
from benchmarks import optimizer_table
from benchmarks.reporting import decisions
from benchmarks.reporting import markdown
from benchmarks.reporting import stats

FOLDER = "contest"
SIZES = ("cpu", "gpu")
HEADING = "## The contest: a transformer LM at a scale that decides"
OURS = ("vsgd", "vsgd_muon", "vsgd_muon_all")
MUON = "muon"
# The page's entries (the first two: its verdict rows); the partitions' and the
# variants' rows are the appendix's.
OVERVIEW = ("vsgd", "vsgd_muon", "adam", "adamw", "muon")
# The entries in the order the tables list them, with short names for the tables.
VARIANTS = optimizer_table.VSGD_MUON_VARIANTS
ORDER = ("vsgd", "vsgd_muon", "vsgd_muon_all", *VARIANTS, "adam", "adamw", "muon", "muon_all")
SHORT = {name: optimizer_table.row(name).short for name in ORDER}
# The rule's and the partition's comparisons: (entry, against, why).
RULES = (("vsgd_muon", "muon", "vsgd_muon's rule: against Muon as its users run it"),
         ("muon", "muon_all", "what Muon's partition is worth"),
         ("vsgd_muon", "vsgd_muon_all", "what VSGD-Muon's partition is worth"),
         *((variant, "muon", "the variants' rule: against Muon") for variant in VARIANTS))
# The chart's lines: distinct colours, VSGD against the three baselines a reader asks about.
CHART = {"vsgd": "#1f77b4", "adam": "#d62728", "muon": "#2ca02c", "best": "#ff7f0e"}


def load(folder: str) -> dict[str, dict]:
  """Each size's result file that exists, by size."""
  out = {}
  for size in SIZES:
    payload = common.load(os.path.join(folder, FOLDER), size)
    if payload and payload.get("entries"):
      out[size] = payload
  return out


def best_baseline(payload: dict) -> str | None:
  """The baseline with the lowest mean validation bits at its chosen rate; ties go
  to the earlier in ``ORDER``. The test split enters no choice.
  """
  found = [n for n in ORDER if n in payload["entries"] and payload["entries"][n]["baseline"]]
  return min(found, key=lambda n: (payload["entries"][n]["val_mean"], ORDER.index(n)),
             default=None)


def compare(payload: dict, name: str, other: str, margin: float) -> dict | None:
  """``name`` minus ``other`` in test bits per character, paired by seed, and the verdict."""
  entries = payload["entries"]
  if name not in entries or other not in entries:
    return None
  return {"name": name, "other": other,
          **stats.judged(entries[name], entries[other], False, margin)}


def verdict_rows(payload: dict, declared: dict[str, float], others=()) -> list[dict]:
  """This package's optimizers against the best baseline and Adam, then the rules'
  comparisons; each with Holm's result across all of them and the p-values
  ``others`` of the page's other verdicts (``holm``: whether a win or a loss
  holds under the correction).
  """
  margin = decisions.margin_for(declared, payload["workload"]["name"])
  best = best_baseline(payload)
  wanted = [(name, other, why) for name in OURS for other, why in
            ((best, "against the best baseline"), ("adam", "against Adam")) if other]
  wanted += list(RULES)
  rows = []
  for name, other, why in wanted:
    row = compare(payload, name, other, margin)
    if row and not any(r["name"] == name and r["other"] == other for r in rows):
      rows.append({**row, "why": why})
  held = decisions.holm([r["comparison"].p_value for r in rows] + list(others))[:len(rows)]
  for row, holds in zip(rows, held, strict=True):
    row["holm"] = holds
  return rows


def variant_rows(found: dict, declared: dict[str, float]) -> list[dict]:
  """Each variant of ``vsgd_muon`` that ran at the CPU size against Muon there, with
  Holm's correction across the variants, its comparison at the GPU size where it
  ran there too, and its decision by the rule declared before their runs
  (``benchmarks/contest/protocol.py``, ``VARIANT_RULE``): worth trying where it
  wins at the CPU size under the correction and loses nowhere else; out of
  ``experimental`` where it also wins at the GPU size.
  """
  cpu, gpu = found.get("cpu"), found.get("gpu")
  if cpu is None or MUON not in cpu["entries"]:
    return []
  margin = decisions.margin_for(declared, cpu["workload"]["name"])
  rows = [compare(cpu, v, MUON, margin) for v in VARIANTS if v in cpu["entries"]]
  held = decisions.holm([r["comparison"].p_value for r in rows])
  out = []
  for row, holds in zip(rows, held, strict=True):
    at_gpu = None
    if gpu is not None and row["name"] in gpu["entries"] and MUON in gpu["entries"]:
      at_gpu = compare(gpu, row["name"], MUON,
                       decisions.margin_for(declared, gpu["workload"]["name"]))
    wins = row["verdict"] == "win" and holds and (at_gpu is None or at_gpu["verdict"] != "loss")
    status = ("out of experimental" if wins and at_gpu and at_gpu["verdict"] == "win"
              else "worth trying" if wins else "experimental")
    out.append({**row, "holm": holds, "gpu": at_gpu, "status": status})
  return out


def base_row(found: dict, declared: dict[str, float]) -> dict | None:
  """``vsgd_muon`` itself against Muon at the CPU size: what the variants' own
  differences against Muon are to be read next to; None before both ran.
  """
  cpu = found.get("cpu")
  if cpu is None:
    return None
  return compare(cpu, "vsgd_muon", MUON, decisions.margin_for(declared, cpu["workload"]["name"]))


def _bits(value: float) -> str:
  return "diverged" if value != value else f"{value:.3f}"


def interval_text(row: dict) -> str:
  """A comparison's difference and its 95% interval, in bits per character."""
  c = row["comparison"]
  return f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}]"


def _cell(row: dict) -> str:
  """A verdict with its difference, interval and Holm's result."""
  return f"{interval_text(row)} **{row['verdict']}{decisions.unheld(row['verdict'], row['holm'])}**"


def entries_table(payload: dict) -> list[str]:
  best = best_baseline(payload)
  out = ["| optimizer | rate (tried) | val. bits/char | test bits/char | weight decay |",
         "|---|---|---|---|---|"]
  for name in ORDER:
    e = payload["entries"].get(name)
    if not e:
      continue
    mark = " (best baseline)" if name == best else ""
    tried = f"{min(e['rates']):g}-{max(e['rates']):g}, {len(e['rates'])}"
    edge = ", at an edge" if e["at_edge"] else ""
    out.append(f"| {SHORT[name]}{mark} | {e['chosen_rate']:g} ({tried}{edge}) | "
               f"{_bits(e['val_mean'])} | {_bits(e['test_mean'])} ± "
               f"{stats.std(e['test']):.3f} | {e['weight_decay']} |")
  return out


def verdict_table(rows: list[dict]) -> list[str]:
  out = ["| comparison | test bits/char difference [95% CI] |", "|---|---|"]
  for r in rows:
    out.append(f"| {SHORT[r['name']]} − {SHORT[r['other']]} ({r['why']}) | {_cell(r)} |")
  return out


def workload_line(payload: dict) -> str:
  w, m = payload["workload"], payload["machine"]
  return (f"{w['description']} Validation and test: {w['val_chars']:,} and "
          f"{w['test_chars']:,} scored characters of files never trained on. "
          f"{len(payload['entries'][next(iter(payload['entries']))]['seeds'])} seeds, "
          f"paired. Machine: {common.machine_text(m)}.")


def answer(payload: dict, rows: list[dict]) -> str:
  """VSGD's verdicts in words, for the page's first lines and the README."""
  size = payload["workload"]["size"].upper()
  best = best_baseline(payload)
  def said(name, other):
    row = next((r for r in rows if r["name"] == name and r["other"] == other), None)
    if row is None:
      return None
    word = {"win": "beat", "loss": "lost to", "equivalent": "was equivalent to",
            "inconclusive": "could not be told apart from"}[row["verdict"]]
    holm = "" if row["verdict"] not in ("win", "loss") or row["holm"] else \
        " (not under Holm's correction)"
    return f"{word} {SHORT[other]}{holm}"
  parts = []
  against_best = said("vsgd", best) if best else None
  if against_best:
    parts.append(against_best + ("" if best == "adam" else
                                 ", the best baseline (chosen on validation)"))
  if best != "adam" and said("vsgd", "adam"):
    parts.append(said("vsgd", "adam"))
  muon = said("vsgd_muon", "muon")
  text = (f"On the contest's {size}-size transformer LM "
          f"({payload['workload']['params'] / 1e6:.2f}M parameters, "
          f"{payload['workload']['steps']:,} steps), ")
  if not parts:
    ran = [SHORT[n] for n in ORDER if n in payload["entries"]]
    return text + f"only {', '.join(ran)} ran so far: no verdict yet."
  text += f"VSGD {', and '.join(parts)}"
  if muon:
    text += f"; VSGD-Muon {muon}"
  # The baselines this size's protocol runs (older files name none: all three).
  planned = payload.get("protocol", {}).get("entries", ("adamw", "muon", "muon_all"))
  waiting = [SHORT[n] for n in ("adamw", "muon", "muon_all")
             if n in planned and n not in payload["entries"]]
  if waiting:
    text += f" (baselines not yet run: {'; '.join(waiting)})"
  return text + "."


def charts(folder: str) -> list[str]:
  """Draws each size's chart beside its JSON (``chart``); returns the paths."""
  written = []
  for size, payload in load(folder).items():
    written.append(os.path.join(folder, FOLDER, f"contest_{size}.png"))
    chart(payload, written[-1])
  return written


def chart(payload: dict, path: str) -> None:
  """Training bits per character against the step: VSGD, Adam, Muon and the best
  baseline, each at its chosen rate, mean over seeds, legend outside the lines.
  """
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  best = best_baseline(payload)
  lines = {"vsgd": "vsgd", "adam": "adam", "muon": "muon"}
  if best not in lines.values():
    lines["best"] = best
  fig, ax = plt.subplots(figsize=(8.0, 2.4))
  steps = payload["workload"]["steps"]
  for key, name in lines.items():
    e = payload["entries"].get(name)
    if not e:
      continue
    curve = np.asarray(e["train_curve"], float)
    x = (np.arange(len(curve)) + 0.5) * steps / len(curve)
    label = SHORT[name] + (" (best baseline)" if name == best else "")
    ax.plot(x, curve, color=CHART[key], lw=1.8, label=f"{label}, rate {e['chosen_rate']:g}")
  ax.set_xlabel("step")
  ax.set_ylabel("training bits per character")
  tail = [v for e in payload["entries"].values() for v in e["train_curve"][2:]]
  if tail:
    ax.set_ylim(min(tail) - 0.05, max(tail) + 0.05)
  ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def readme_sentence(folder: str, docs: str = "docs/", others=()) -> str | None:
  """The README's and the docs' home page's answer: the largest size's verdicts,
  corrected as on the results page (``others``: the rest of the page's p-values);
  ``docs`` is the documentation's folder as seen from the page.
  """
  found = load(folder)
  if not found:
    return None
  size = "gpu" if "gpu" in found else "cpu"
  payload = found[size]
  if "vsgd" not in payload["entries"] or best_baseline(payload) is None:
    return None  # no verdict yet: the small workloads' sentence stands
  anchor = HEADING.lstrip("# ").lower().replace(":", "").replace(" ", "-")
  rows = page_rows(found, decisions.margins(folder), others)[0][size]
  return answer(payload, rows)[:-1] + f" ([the contest]({docs}results.md#{anchor}))."


def page_rows(found: dict, declared: dict, others=()) -> tuple[dict, int]:
  """Each size's verdict rows, Holm-corrected across every verdict on the page (both
  sizes' and the p-values ``others`` of the rest of it), and the family's size.
  """
  page = {size: [r["comparison"].p_value for r in verdict_rows(p, declared)]
          for size, p in found.items()}
  rows_of = {size: verdict_rows(p, declared, [v for other, values in page.items()
                                              if other != size for v in values] + list(others))
             for size, p in found.items()}
  return rows_of, sum(len(v) for v in page.values()) + len(others)


def scale(payload: dict) -> str:
  """A size's parameters, steps, test set and seeds, for the line under the verdicts."""
  w = payload["workload"]
  return (f"{w['size'].upper()} {w['params'] / 1e6:.2f}M parameters, {w['steps']:,} steps, "
          f"{w['test_chars'] / 1e3:.0f}k test characters, {len(_seeds(payload))} seeds")


def _seeds(payload: dict) -> list:
  return payload["entries"][next(iter(payload["entries"]))]["seeds"]


def summary_table(found: dict, rows_of: dict) -> list[str]:
  """The page's one verdict table: each of this package's optimizers that ran,
  on each size, against the best baseline and against Adam, Holm's result in
  the cell.
  """
  out = ["| size | optimizer | against the best baseline | against Adam |",
         "|---|---|---|---|"]
  for size in SIZES:
    payload = found.get(size)
    if payload is None:
      continue
    best = best_baseline(payload)
    for name in OVERVIEW[:2]:  # VSGD and VSGD-Muon; the partitions' rows: the appendix's
      cells = []
      for other in (best, "adam"):
        row = next((r for r in rows_of[size] if r["name"] == name and r["other"] == other),
                   None)
        cells.append("-" if row is None else
                     (f"{SHORT[other]}: " if other == best and best != "adam" else "")
                     + _cell(row))
      if cells != ["-", "-"]:
        out.append(f"| {size.upper()} | {SHORT[name]} | {cells[0]} | {cells[1]} |")
  return out


def entries_overview(found: dict) -> list[str]:
  """Each optimizer's chosen rate and test bits per character (mean ± std over
  its seeds), one column a size.
  """
  sizes = [s for s in SIZES if s in found]
  # A best baseline outside OVERVIEW (Muon on every matrix, say) joins it.
  best = [b for b in (best_baseline(found[s]) for s in sizes) if b and b not in OVERVIEW]
  rows = []
  for name in (*OVERVIEW, *dict.fromkeys(best)):
    cells = []
    for size in sizes:
      e = found[size]["entries"].get(name)
      mark = " (best baseline)" if name == best_baseline(found[size]) else ""
      planned = found[size].get("protocol", {}).get("entries", ORDER)
      cells.append(("not run" if name in planned else "not in this size's protocol")
                   if e is None else
                   f"{e['chosen_rate']:g}: {_bits(e['test_mean'])} ± "
                   f"{stats.std(e['test']):.3f}{mark}")
    if any(c != "not run" for c in cells):
      rows.append([SHORT[name], *cells])
  return markdown.table(["optimizer", *(f"{s.upper()}: rate, test bits/char" for s in sizes)],
                        rows)


def page_section(folder: str, images: str, others=()) -> list[str]:
  """The results page's first section: the one verdict table, each optimizer's rate
  and bits by size and the largest size's chart. The verdicts in words are the
  README's and the docs' home page's (``readme_sentence``). Holm's correction runs
  across every verdict on the page: both sizes' and the p-values ``others`` of the
  rest of the page.
  """
  found = load(folder)
  if "cpu" not in found:
    return markdown.section("results", "contest_none")
  declared = decisions.margins(folder)
  rows_of, family = page_rows(found, declared, others)
  table = summary_table(found, rows_of)
  if len(table) == 2:  # no verdict yet on either size: say who ran
    return markdown.section("results", "contest_waiting", answers=[
        f"{answer(found[size], rows_of[size])}\n" for size in SIZES if size in found])
  margins = sorted({decisions.margin_for(declared, p["workload"]["name"])
                    for p in found.values()})
  return markdown.section(
      "results", "contest", verdicts=table, margins="/".join(f"{m:g}" for m in margins),
      sizes="; ".join(scale(found[size]) for size in SIZES if size in found),
      family=str(family), entries=entries_overview(found), images=images,
      size="gpu" if "gpu" in found else "cpu")


def section(folder: str, images: str, others=()) -> list[str]:
  """The appendix's section: each size's tables, verdicts and chart, whole."""
  found = load(folder)
  if not found:
    return []
  declared = decisions.margins(folder)
  rows_of, family = page_rows(found, declared, others)
  out = markdown.section("results_appendix", "contest")
  for size in SIZES:
    payload = found.get(size)
    if payload is None:
      out += markdown.section("results_appendix", "contest_not_run", title=size.upper(),
                              size=size)
      continue
    planned = payload.get("protocol", {}).get("entries", ORDER)
    missing = [SHORT[n] for n in ORDER if n in planned and n not in payload["entries"]
               and n not in VARIANTS]
    out += markdown.section(
        "results_appendix", "contest_size", title=size.upper(), size=size, images=images,
        workload=workload_line(payload), entries=entries_table(payload), family=str(family),
        margin=f"{decisions.margin_for(declared, payload['workload']['name']):g}",
        missing=(f"Entries not yet run at this size: {', '.join(missing)}; the verdicts "
                 "below are over the entries that ran." if missing else ""),
        verdicts=(verdict_table(rows_of[size]) if rows_of[size] else
                  "No verdict yet: VSGD and the baselines have not both run."))
  return out

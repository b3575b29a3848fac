"""Runs the contest's protocol (``protocol``) at one size, resumably, and writes its results.

Each entry's finished runs are kept in a ledger (``benchmarks.ledger``:
``runs/<size>.jsonl`` beside the result file), one seed's rates a call on a
CPU and each stage's whole grid a call on an accelerator, so an interrupted
contest resumes where it stopped. Each run records the digest of the code its
entry depends on (``source_digest``): a baseline's runs stand while this
package changes. The result file is written again after each entry, holding
the entries finished so far, so that it can be committed as they land.
"""

from __future__ import annotations

import dataclasses
import os
import time

import jax
import numpy as np

from benchmarks import common
from benchmarks import ledger as ledgers
from benchmarks import study_runner
from benchmarks.contest import entries as contest_entries
from benchmarks.contest import protocol
from benchmarks.lm import corpus
from benchmarks.lm import model
from benchmarks.lm import train

FOLDER = os.path.join(common.RESULTS, "contest")


def source_digest(name: str, root: str = ledgers.REPOSITORY) -> str:
  """A digest of the code entry ``name``'s numbers depend on (``entries.SHARED_SOURCES``
  and its own ``sources``): a ledger's run of that entry kept by other code is refused.
  """
  return ledgers.digest_of(
      contest_entries.SHARED_SOURCES + contest_entries.ENTRIES[name].sources, root)


def result_path(folder: str, size: str) -> str:
  return os.path.join(folder, f"{size}.json")


def _choose(rates, val) -> int:
  """The rate with the lowest mean validation bits (``val``: rates x seeds)."""
  means = np.mean(val, axis=1)
  return int(np.argmin(np.where(np.isfinite(means), means, np.inf)))


def run_entry(name: str, settings: dict, data: dict, book: ledgers.Ledger,
              together: bool) -> dict:
  """One entry's protocol: its window on every seed, grown at an edge, then the two
  quarter-decade rates beside the best half decade; the rate chosen on validation.
  """
  entry = contest_entries.ENTRIES[name]
  seeds = list(settings["seeds"])
  started = time.perf_counter()

  def validation(rates):
    """Each rate's runs on every seed, trained where the ledger lacks them; (rates x seeds)."""
    pairs = [(lr, s) for lr in rates for s in seeds]
    out = study_runner.train_rates(book, name, runs, [lr for lr, _ in pairs],
                                   [s for _, s in pairs], together)
    return {k: v.reshape(len(rates), len(seeds), *v.shape[1:]) for k, v in out.items()}

  def runs(lrs, run_seeds):
    return train.train_drawn(entry.build, settings["size"], settings["steps"], lrs, run_seeds, data)

  window = tuple(protocol.WINDOWS[name])
  while True:
    out = validation(window)
    best_half = window[_choose(window, out["val"])]
    grown = protocol.next_rates(window, best_half)
    if grown == tuple(sorted(window)):
      break
    window = grown
  rates = tuple(sorted((*window, *protocol.quarter_rates(best_half))))
  out = validation(rates)
  best = _choose(rates, out["val"])
  val, test = out["val"], out["test"]
  return {"label": entry.label, "weight_decay": entry.weight_decay, "baseline": entry.baseline,
          "rates": list(rates), "half_decades": list(window), "best_half_decade": best_half,
          "val_by_rate": np.mean(val, 1).tolist(), "test_by_rate": np.mean(test, 1).tolist(),
          "chosen_rate": rates[best], "at_edge": best in (0, len(rates) - 1),
          "seeds": seeds, "val": val[best].tolist(), "test": test[best].tolist(),
          "val_mean": float(np.mean(val[best])), "test_mean": float(np.mean(test[best])),
          "train_curve": np.mean(out["train_loss"][best], 0).tolist(),
          "source": book.source_of[name] if book.source_of else book.source,
          "seconds": round(time.perf_counter() - started, 1)}


def run(size: str, names=None, folder: str = FOLDER, across_code: bool = False,
        together: bool | None = None) -> dict:
  """The contest at ``size`` for the entries ``names`` (default: the size's); writes
  and returns the result.
  """
  names = list(protocol.SIZES[size]["entries"] if names is None else names)
  unknown = [n for n in names if n not in contest_entries.ENTRIES]
  if unknown:
    raise ValueError(f"unknown entries {unknown}; choose among {list(contest_entries.ENTRIES)}")
  settings = protocol.SIZES[size]
  model_size = settings["size"]
  data = corpus.django_splits(model_size.context, files=settings.get("files"))
  if together is None:
    together = jax.default_backend() != "cpu"
  ledger_settings = {"size": dataclasses.asdict(model_size), "steps": settings["steps"],
                     "corpus": _corpus(settings), "scored": "every character of each split",
                     "schedule": "warmup_cosine"}
  path = result_path(folder, size)
  result = {"workload": _workload(size, settings, data), "machine": common.machine(),
            "protocol": {"seeds": list(settings["seeds"]), "windows": protocol.WINDOWS,
                         "max_rates": protocol.MAX_RATES, "entries": list(settings["entries"]),
                         # What the verdicts apply, as protocol.py declared it.
                         "family": [list(pair) for pair in protocol.FAMILY],
                         "best": protocol.BEST, "tests": list(protocol.TESTS),
                         "alpha": protocol.ALPHA, "verdict_rule": protocol.VERDICT_RULE,
                         "candidates": list(protocol.CANDIDATES),
                         "promotion_rule": protocol.PROMOTION_RULE},
            "entries": {}}
  result["machines"] = [result["machine"]]
  # Entries run earlier on the same workload stay (``--entries`` adds to a contest);
  # a result file of another workload (another size, corpus or split) is refused.
  earlier = common.read_json(path)
  if earlier is not None:
    if earlier["workload"] != result["workload"]:
      raise ValueError(f"{path} holds a contest on another workload than this run's "
                       f"({earlier['workload']['description']}); move it away or use --out")
    result["entries"] = {n: e for n, e in earlier["entries"].items() if n not in names}
    # A resumed contest may run on another machine: every machine that trained
    # some of its runs is kept, in order, for the pages to name.
    seen = earlier.get("machines") or [earlier[k] for k in ("earlier_machine", "machine")
                                       if k in earlier]
    same = [m for m in seen if {**m, "date": None} == {**result["machine"], "date": None}]
    result["machines"] = seen if same else [*seen, result["machine"]]
  with ledgers.Ledger(os.path.join(folder, ledgers.FOLDER, f"{size}.jsonl"), ledger_settings,
                      source={n: source_digest(n) for n in contest_entries.ENTRIES},
                      across_code=across_code) as book:
    for name in names:
      result["entries"][name] = run_entry(name, settings, data, book, together)
      result["sources"] = sorted(book.sources)
      common.write_json(path, result)
      print(f"{name}: rate {result['entries'][name]['chosen_rate']:g}, test "
            f"{result['entries'][name]['test_mean']:.4f} bits/char "
            f"({result['entries'][name]['seconds']:.0f} s)", flush=True)
  return result


def _corpus(settings: dict) -> dict:
  return {"package": corpus.DJANGO.name, "version": corpus.DJANGO.version,
          "sha256": corpus.DJANGO.sha256,
          "files": settings.get("files")}


def _workload(size: str, settings: dict, data: dict) -> dict:
  s = settings["size"]
  kept = settings.get("files")
  return {"name": protocol.WORKLOAD[size], "size": size,
          "title": f"Transformer char LM, {size.upper()} size",
          "description": (f"A pre-LN causal transformer ({s.layers} layers, width {s.width}, "
                          f"{s.heads} heads, MLP {s.hidden}, context {s.context}; "
                          f"{model.count(s):,} parameters) on the Python source of "
                          f"{corpus.DJANGO.name} {corpus.DJANGO.version}"
                          + (f" (its first {kept} files)" if kept else "")
                          + f", split by file, batch {s.batch}, {settings['steps']:,} steps of "
                          "warmup + cosine; validation and test score their whole split."),
          "corpus": _corpus(settings), "params": model.count(s), "steps": settings["steps"],
          "batch": s.batch, "context": s.context, "splits": data["records"],
          "metric": "bits per character", "higher_is_better": False}

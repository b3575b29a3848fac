"""python -m benchmarks.reproduce: one committed run of each study trained again, its numbers
compared bit for bit with what the study recorded.

A refactor of the lab or of the library moves no number: this is how that is
shown. Each study gives its cheapest recorded run that covers the code it
depends on, and the run is trained again exactly as it was (the same lanes in
one program, the same seeds, the same chunk), on this checkout's code:

* ``ladder``: the first VSGD-Muon program at 71,616 parameters after 2.5
  characters a parameter (its nine lanes; ``results/ladder/runs.jsonl``), so the
  library's VSGD-Muon, the chunked loop, the corpus and the LM are all in it;
* ``contest``: Adam's CPU run of seed 0 at its two quarter-decade rates (one
  line of ``results/contest/runs/cpu.jsonl``: the contest's drawn-batch loop);
* ``time_to_result``: VSGD's ten reported seeds on the logistic regression
  (``results/warmup_cosine/ttr_logreg.json``, padded to its program's lanes);
* ``noise_scale``: VSGD's noise-scale read-out along the MLP's warmup-cosine run
  (``results/noise_scale/mlp.json``), the reference's draws included;
* ``cost``: what the cost study records that is not a time (state bytes per
  parameter on every model): times are never bit for bit, and are compared as
  ratios to Adam by the study itself.

A run is reproduced where every number is equal (``==`` on the floats the
record holds); otherwise the line gives the largest relative difference. The
runs were recorded on 2-core "AMD EPYC" machines at jax 0.10.2, but not all on
one: a machine whose XLA compiles other code (another processor generation)
differs in the last float32 bit from the first step, and a long run grows that
(2,000 contest steps turn it into 1e-3 of a test loss). So a change of code is
judged on one machine: ``--save`` keeps the reruns' numbers before the change,
``--against`` compares the reruns after it with them, bit for bit. Prints one
line a study; exits non-zero unless every rerun equals what it is compared with.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

from benchmarks import common
from benchmarks import ledger as ledgers

STUDIES = ("cost", "time_to_result", "noise_scale", "contest", "ladder")


def _mismatches(recorded, again, where: str = ""):
  """``(where, recorded, again)`` for each number, list or key of two records that is not
  equal; a list of another length is one mismatch, the lists whole.
  """
  if isinstance(recorded, dict) and isinstance(again, dict):
    for k in sorted(set(recorded) | set(again)):
      yield from _mismatches(recorded.get(k), again.get(k), f"{where}.{k}")
  elif (isinstance(recorded, list | tuple) and isinstance(again, list | tuple)
        and len(recorded) == len(again)):
    for i, (a, b) in enumerate(zip(recorded, again, strict=True)):
      yield from _mismatches(a, b, f"{where}[{i}]")
  elif recorded != again:
    yield where, recorded, again


def _differences(recorded, again) -> list[str]:
  """Where two records differ, a line each."""
  return [f"{where}: {len(a)} items recorded, {len(b)} again"
          if isinstance(a, list | tuple) and isinstance(b, list | tuple)
          else f"{where}: {a!r} recorded, {b!r} again"
          for where, a, b in _mismatches(recorded, again)]


def _largest_relative(recorded, again) -> float:
  """The largest ``|again - recorded| / |recorded|`` over the numbers that differ."""
  return max([abs(b - a) / abs(a) if a else float("inf")
              for _, a, b in _mismatches(recorded, again)
              if isinstance(a, float) and isinstance(b, float)] or [0.0])


def ladder() -> tuple[str, dict, dict]:
  from benchmarks.ladder import entries
  from benchmarks.ladder import ledger
  from benchmarks.ladder import rules
  from benchmarks.lm import corpus
  from benchmarks.lm import train
  lines = ledgers.read(ledger.PATH)
  first = next(line for line in lines if (line["entry"], line["size"], line["budget"])
               == ("vsgd_muon", "xs", 2.5))
  # A program's lines are written together: the same rung, seconds and lane count.
  program = [line for line in lines
             if all(line[k] == first[k] for k in ("entry", "size", "budget", "seconds", "lanes"))]
  size = rules.SIZES["xs"]
  data = train.device_data(corpus.load(corpus.LADDER_CACHE / corpus.CORPUS_FILE, size.context))
  out = train.train_chunks(entries.builder("vsgd_muon"), size, first["steps"],
                           [line["rate"] for line in program],
                           [line["adam_rate"] for line in program],
                           [line["seed"] for line in program], data, chunk=first["chunk"])
  fields = {"train_bits": "train", "val_bits": "val", "test_bits": "test"}
  recorded = [{k: line[k] for k in fields} for line in program]
  again = [{k: float(out[v][i]) for k, v in fields.items()} for i in range(len(program))]
  what = (f"vsgd_muon at xs x 2.5: {len(program)} lanes of {first['steps']} steps "
          f"(recorded {first['date']}, source {first['source']})")
  return what, {"lanes": recorded}, {"lanes": again}


def contest() -> tuple[str, dict, dict]:
  from benchmarks.contest import entries
  from benchmarks.contest import protocol
  from benchmarks.lm import corpus
  from benchmarks.lm import train
  lines = ledgers.read(os.path.join(common.RESULTS, "contest", ledgers.FOLDER, "cpu.jsonl"))
  line = next(run for run in lines[1:] if run["entry"] == "adam" and run["seed"] == 0
              and len(run["learning_rates"]) == 2)
  settings = protocol.SIZES["cpu"]
  data = corpus.django_splits(settings["size"].context)
  rates = line["learning_rates"]
  out = train.train_drawn(entries.ENTRIES["adam"].build, settings["size"], settings["steps"],
                          rates, [line["seed"]] * len(rates), data)
  fields = ("val", "train_loss", "test")
  return (f"adam, seed 0, rates {rates}: {settings['steps']:,} steps",
          {k: line[k] for k in fields}, {k: out[k].tolist() for k in fields})


def time_to_result() -> tuple[str, dict, dict]:
  from benchmarks.time_to_result import protocol
  from benchmarks.time_to_result import trainer
  from benchmarks.time_to_result import workloads
  payload = common.read_json(os.path.join(common.RESULTS, "warmup_cosine", "ttr_logreg.json"))
  entry = payload["entries"]["vsgd"]
  seeds, rate = entry["seeds"], entry["learning_rate"]
  # The protocol's programs on a cheap workload all have one width: the tuning grid's runs.
  lanes = max(len(entry["tuning"]["grid"]) * len(protocol.TUNING_SEEDS), len(seeds))
  pad = lanes - len(seeds)
  runs = trainer.Trainer(workloads.build("logreg"), "vsgd", "warmup_cosine")
  out = runs([rate] * lanes, list(seeds) + [seeds[-1]] * pad)
  again = {"test": [float(x) for x in out["test"][:len(seeds)]],
           "val_final": [float(c[-1]) for c in out["val"][:len(seeds)]],
           "curves": {"train_loss": out["train_loss"][:len(seeds)].tolist(),
                      "val": out["val"][:len(seeds)].tolist()}}
  recorded = {k: entry[k] for k in ("test", "val_final", "curves")}
  return f"vsgd on logreg at {rate:g}: {len(seeds)} seeds in {lanes} lanes", recorded, again


def noise_scale() -> tuple[str, dict, dict]:
  from benchmarks.noise_scale import run
  payload = common.read_json(os.path.join(common.NOISE_SCALE_FOLDER, "mlp.json"))
  recorded = next(r for r in payload["runs"] if r["schedule"]["name"] == "warmup_cosine")
  again = run.run_one("mlp", "warmup_cosine", quick=payload["quick"], draws=recorded["draws"],
                      points=len(recorded["points"]))
  return (f"the MLP's warmup-cosine run: {recorded['steps']:,} steps, "
          f"{len(recorded['points'])} points of {recorded['draws']} draws"), recorded, again


def cost() -> tuple[str, dict, dict]:
  from benchmarks.cost import memory
  recorded = common.read_json(os.path.join(common.RESULTS, "cost_cpu.json"))["memory"]
  return ("state bytes per parameter, every model and optimizer", recorded,
          {"rows": memory.rows(), "workload_shares": memory.workload_shares()})


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.reproduce",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("studies", nargs="*",
                      help=f"some of {', '.join(STUDIES)} (default: every study, cheapest first)")
  parser.add_argument("--out", default=None, help="also write the outcome here (JSON)")
  parser.add_argument("--save", default=None,
                      help="write the reruns' numbers here (JSON), to compare a later checkout")
  parser.add_argument("--against", default=None,
                      help="compare the reruns with the numbers --save wrote (on this machine) "
                           "instead of with the record")
  args = parser.parse_args(argv)
  unknown = [s for s in args.studies if s not in STUDIES]
  if unknown:
    parser.error(f"no study {', '.join(unknown)}; choose among {', '.join(STUDIES)}")
  saved = json.loads(pathlib.Path(args.against).read_text()) if args.against else None
  report: dict = {"machine": ledgers.machine(), "against": args.against or "the record",
                  "studies": {}}
  reruns = {}
  for study in args.studies or STUDIES:
    started = time.perf_counter()
    what, recorded, again = globals()[study]()
    reruns[study] = again
    reference = recorded if saved is None else saved[study]
    differ = _differences(reference, again)
    outcome = {"run": what, "reproduced": not differ,
               "largest_relative_difference": _largest_relative(reference, again),
               "differences": differ[:3], "seconds": round(time.perf_counter() - started, 1)}
    report["studies"][study] = outcome
    said = ("bit for bit" if not differ
            else f"DIFFERS by up to {outcome['largest_relative_difference']:.1e} of itself")
    print(f"{study} against {report['against']}: {said}; {what} ({outcome['seconds']:.0f} s)",
          flush=True)
    for line in differ[:3]:
      print(f"  {line}")
  if args.save:
    pathlib.Path(args.save).write_text(json.dumps(reruns) + "\n")
  if args.out:
    pathlib.Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
  return 0 if all(s["reproduced"] for s in report["studies"].values()) else 1


if __name__ == "__main__":
  sys.exit(main())

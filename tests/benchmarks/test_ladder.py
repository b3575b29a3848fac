"""The ladder: its declared protocol, its corpus's cleaning and split, its schedule, its
ledger, its rate rules, its version floor, and the GPU command's whole path at a toy size
(timings, ledger lines in the ledger and in $OUT, a second call that trains nothing, a
deadline that keeps what finished).
"""

import json
import math
import os
import subprocess
import sys
import time
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from benchmarks import ledger as ledgers
from benchmarks.ladder import __main__ as cli
from benchmarks.ladder import cpu_timing
from benchmarks.ladder import entries
from benchmarks.ladder import gpu
from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import run
from benchmarks.ladder import summary
from benchmarks.ladder import summary_file
from benchmarks.lm import corpus
from benchmarks.lm import model
from benchmarks.lm import train
from benchmarks.reporting import ladder as ladder_report

LINE_FIELDS = {"entry", "size", "params", "budget", "rate", "adam_rate", "seed", "train_bits",
               "val_bits", "test_bits", "steps", "seconds", "source", "cpu", "cores", "jax",
               "jaxlib", "optax", "device", "platform", "corpus"}


def test_the_protocol_declares_the_ladder_the_issue_asks_for():
  counts = {name: model.count(size) for name, size in protocol.SIZES.items()}
  cpu = [counts[n] for n in protocol.CPU_SIZES]
  assert protocol.CPU_BUDGET_HOURS <= protocol.CPU_BUDGET_CAP_HOURS
  assert model.count(protocol.CONTEST_SIZE) == 436_736 and 436_736 in cpu
  assert max(cpu) / min(cpu) >= 6
  assert max(protocol.BUDGETS) >= 10 and max(protocol.BUDGETS) / min(protocol.BUDGETS) >= 4
  assert len(set(protocol.REFERENCE_BUDGETS) - set(protocol.UNTUNED_BUDGETS)) >= 3
  assert "adamw" in protocol.REFERENCES and len(protocol.SEEDS) >= 3
  gpu = sorted(counts[n] for n in protocol.GPU_SIZES)
  assert gpu[0] >= 3_000_000 and gpu[-1] >= 10_000_000 and protocol.GPU_BUDGETS == (10.0,)
  assert set(protocol.ENTRIES) == set(entries.BUILDERS) == set(protocol.CONTEST_RATES)
  assert protocol.window(1e-2) == (3.16e-3, 1e-2, 3.16e-2)


def _wheel(path, files):
  with zipfile.ZipFile(path, "w") as archive:
    for name, text in files.items():
      archive.writestr(name, text)
  return path


def toy_corpus(tmp_path, files=40, eval_chars=400):
  rng = np.random.default_rng(0)
  words = ["def", "return", "self", "import", "x", "(", ")", ":", "\n    ", " = ", "1"]
  texts = {f"pkg/m{i:02d}.py": "".join(rng.choice(words, size=300)) for i in range(files)}
  a = _wheel(tmp_path / "a.whl", {**texts, "pkg/__init__.py": "", "pkg/blank.py": " \n"})
  # b repeats a's first file exactly: one copy is kept, so it cannot be in two splits.
  b = _wheel(tmp_path / "b.whl", {"other/copy.py": texts["pkg/m00.py"], "other/c.py": "y = 2\n"})
  return corpus.build(eval_chars, [a, b], cache=tmp_path, out=tmp_path / "c.xz")


def test_the_corpus_drops_empty_and_repeated_files_before_its_split(tmp_path):
  path = toy_corpus(tmp_path)
  data = corpus.load(path, context=16)
  assert data["records"]["cleaning"] == {"files_read": 44, "empty_dropped": 2,
                                         "repeats_dropped": 1, "files_kept": 41}
  meta = data["meta"]
  assert sum(meta["splits"][n]["files"] for n in corpus.SPLITS) == 41
  for name in ("val", "test"):
    record = data["records"][name]
    assert record["chars_scored"] >= 400 and record["files"] == record["files_scored"]
    assert record["chars_scored"] == int(data[f"{name}_scored"].sum())
  assert len(data["train"]) == meta["splits"]["train"]["chars"] > 5_000


def test_the_schedule_with_traced_steps_is_the_contests():
  for steps in (3, 20, 37, 2000):
    counts = np.unique(np.linspace(0, steps + 2, 50).astype(int))
    want = [float(train.schedule_shape(steps)(c)) for c in counts]
    got = jax.jit(train.traced_schedule_shape)(jnp.asarray(counts), steps)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_run_that_would_repeat_data_is_refused(tmp_path):
  data = train.device_data(corpus.load(toy_corpus(tmp_path), protocol.TOY.context))
  windows = train.windows_of(len(data["train"]), protocol.TOY.context)
  with pytest.raises(ValueError, match="steps"):
    train.train_chunks(entries.builder("adamw"), protocol.TOY,
                       windows // protocol.TOY.batch + 1, [1e-3], [1e-3], [0], data)


def _line(**changes):
  base = {"entry": "muon", "size": "xs", "budget": 2.5, "rate": 0.01, "adam_rate": 0.00316,
          "seed": 0, "val_bits": 2.0}
  return {**base, **changes}


def test_the_ledger_appends_merges_and_drops_a_cut_last_line(tmp_path):
  path = str(tmp_path / "runs.jsonl")
  ledgers.append([_line(), _line(seed=1)], path)
  with open(path, "a") as f:
    f.write('{"entry": "mu')  # a write cut short
  assert [line["seed"] for line in ledgers.read(path)] == [0, 1]
  lease = str(tmp_path / "lease.jsonl")
  ledgers.append([_line(seed=1), _line(seed=2)], lease)
  assert ledgers.merge(lease, path, ledger.key) == 1  # the cut line is dropped before the append
  assert [line["seed"] for line in ledgers.read(path)] == [0, 1, 2]
  with open(path) as f:
    assert all(json.loads(text) for text in f.read().splitlines())


def test_the_rate_is_chosen_on_validation_over_every_seed_and_grown_at_an_edge():
  lines = [_line(rate=r, seed=s, val_bits=v + 0.01 * s)
           for r, v in ((3.16e-3, 2.1), (1e-2, 2.0), (3.16e-2, 1.9)) for s in (0, 1, 2)]
  lines.append(_line(rate=0.1, seed=0, val_bits=1.0))  # one seed only: not a candidate
  assert rules.chosen(lines, "muon", "xs", 2.5) == 3.16e-2
  assert rules.chosen(lines, "muon", "xs", 2.5, adam_rate=1e-3) is None
  assert rules.grown((3.16e-3, 1e-2, 3.16e-2), 3.16e-2, 6) == (3.16e-3, 1e-2, 3.16e-2, 0.1)
  assert rules.grown((3.16e-3, 1e-2, 3.16e-2), 1e-2, 6) == (3.16e-3, 1e-2, 3.16e-2)
  assert rules.grown((1e-3, 3.16e-3, 1e-2), 1e-3, 3) == (1e-3, 3.16e-3, 1e-2)


def test_an_optax_older_than_the_entries_need_is_refused(monkeypatch):
  monkeypatch.setattr(optax, "__version__", "0.2.5")
  with pytest.raises(RuntimeError, match="optax"):
    run.check_versions()
  monkeypatch.setattr(optax, "__version__", "0.2.8")
  run.check_versions()


def test_the_gpu_command_runs_its_whole_path_at_a_toy_size_and_resumes(tmp_path):
  corpus_path, runs, out = toy_corpus(tmp_path, files=60), tmp_path / "runs.jsonl", tmp_path / "o"
  argv = ["--gpu", "toy", "--corpus", str(corpus_path), "--ledger", str(runs), "--out", str(out),
          "--budget", "0.05", "--reference-budgets", "0.025", "0.05", "--entries", "adamw",
          "vsgd_muon", "--seeds", "0", "1", "--chunk", "2", "--deadline-seconds", "3000"]
  cli.main(argv)
  lines = ledgers.read(str(runs))
  # AdamW's window and VSGD-Muon's, 2 seeds each; then AdamW's other budget at its rate.
  assert len(lines) == 14 and ledgers.read(str(out / "runs.jsonl")) == lines
  assert all(LINE_FIELDS <= set(line) for line in lines)
  adam = rules.chosen(lines, "adamw", "toy", 0.05, seeds=(0, 1))
  assert {line["adam_rate"] for line in lines if line["entry"] == "vsgd_muon"} == {adam}
  assert {line["rate"] for line in lines if line["budget"] == 0.025} == {adam}
  assert all(math.isfinite(line["test_bits"]) and line["steps"] in (3, 6) for line in lines)
  timings = json.loads((out / "timings_gpu.json").read_text())
  assert [r["entry"] for r in timings["rungs"]] == ["adamw", "vsgd_muon"]
  cli.main(argv)  # resumes: every run is in the ledger already
  assert ledgers.read(str(runs)) == lines


def test_a_program_that_the_deadline_leaves_no_time_for_keeps_nothing(tmp_path):
  data = train.device_data(corpus.load(toy_corpus(tmp_path), protocol.TOY.context))
  path = str(tmp_path / "runs.jsonl")
  ctx = run.Context(data=data, corpus="toy", path=path, chunk=2, deadline=time.time() + 3000)
  assert len(run.run_program(ctx, "adamw", "toy", 0.05, [1e-3], [0], None)) == 1
  ctx.deadline = time.time() - 1  # passed: a program already begun stops at its next chunk
  assert run.run_program(ctx, "adamw", "toy", 0.05, [3.16e-3], [0], None) is None
  assert len(ledgers.read(path)) == 1


def test_a_program_at_an_adamw_part_rate_off_the_grid_finds_its_runs_once_written(tmp_path):
  data = train.device_data(corpus.load(toy_corpus(tmp_path), protocol.TOY.context))
  path = str(tmp_path / "runs.jsonl")
  ctx = run.Context(data=data, corpus="toy", path=path, chunk=2, deadline=time.time() + 3000)
  adam = 3.16e-3 * math.sqrt(10)  # the sensitivity check's: more digits than the ledger keys
  (made,) = run.run_program(ctx, "muon", "toy", 0.05, [1e-2], [0], adam)
  assert made["adam_rate"] == adam
  ctx.deadline = time.time() - 1  # a program that trained again would be skipped: None
  assert run.run_program(ctx, "muon", "toy", 0.05, [1e-2], [0], adam) == [made]
  assert ledgers.read(path) == [made]


def test_a_program_is_projected_from_the_ledger_in_proportion_to_runs_and_steps():
  def line(entry, steps, lanes, seconds, kind="cpu", size="m"):
    return {"entry": entry, "size": size, "steps": steps, "lanes": lanes, "seconds": seconds,
            "kind": kind}
  lines = [line("muon", 1000, 9, 900.0), line("muon", 4000, 9, 2700.0),
           line("muon", 4000, 3, 960.0), line("muon_vs", 1000, 9, 990.0),
           line("muon_vs", 4000, 9, 1.0, kind="gpu"), line("adamw", 4000, 9, 9.0, size="s")]
  # The entry's own program with the nearest steps; of two there, the costlier a run-step.
  assert run._from_ledger(lines, "muon", "m", 8000, 3, "cpu") == pytest.approx(960 / 3 * 2 * 3)
  # Only a shorter program of its own: scaled up from it, never from another machine's.
  assert run._from_ledger(lines, "muon_vs", "m", 4000, 9, "cpu") == pytest.approx(990 * 4)
  # None of its own: the costliest run-step of any entry's nearest program at that size.
  assert run._from_ledger(lines, "normuon", "m", 1000, 3, "cpu") == pytest.approx(990 / 3)
  assert run._from_ledger(lines, "normuon", "xs", 1000, 3, "cpu") is None


def test_a_program_the_ledger_says_will_not_fit_is_skipped_before_it_starts(tmp_path, capsys):
  data = train.device_data(corpus.load(toy_corpus(tmp_path), protocol.TOY.context))
  path = str(tmp_path / "runs.jsonl")
  ctx = run.Context(data=data, corpus="toy", path=path, chunk=2, deadline=time.time() + 3000)
  (first,) = run.run_program(ctx, "adamw", "toy", 0.05, [1e-3], [0], None)
  # Three runs of the same steps project to three times its seconds; half that is left.
  ctx.deadline = time.time() + 1.5 * first["seconds"]
  assert run.run_program(ctx, "adamw", "toy", 0.05, [3.16e-3], [0, 1, 2], None) is None
  assert "skip adamw toy 0.05" in capsys.readouterr().out
  assert ledgers.read(path) == [first]


def _synthetic(speedup_of, sizes=("xs", "s", "m")):
  """Ledger lines whose test bits follow AdamW's L(D) = 1 + 30 D^-0.3 (plus a seed's offset),
  each entry's at ``speedup_of(size, entry)`` times its data: a ladder with known answers.
  """
  lines = []
  for size in sizes:
    params = model.count(protocol.SIZES[size])
    for entry in protocol.ENTRIES:
      budgets = protocol.REFERENCE_BUDGETS if entry in protocol.REFERENCES else protocol.BUDGETS
      for budget in budgets:
        for seed in protocol.SEEDS:
          bits = 1 + 0.001 * seed + 30 * (speedup_of(size, entry) * budget * params) ** -0.3
          # A worse rate beside the chosen one: the choice is on validation.
          for rate, worse in ((protocol.CONTEST_RATES[entry], 0.0), (1.0, 0.5)):
            lines.append({"entry": entry, "size": size, "params": params, "budget": budget,
                          "rate": rate, "adam_rate": rate if entry == "adamw" else 3.16e-3,
                          "seed": seed, "val_bits": bits + worse, "test_bits": bits + worse})
  return lines


def test_the_summary_recovers_known_speedups_and_differences():
  factors = {"adamw": 1.0, "muon": 1.5, "normuon": 1.2, "muon_vs": 1.2, "vsgd_muon": 2.0}
  held = summary.finals(_synthetic(lambda size, entry: factors[entry]))
  assert held["m", 10.0, "vsgd_muon"]["rate"] == 3.16e-2
  versus_adamw = summary.speedups(held, "adamw")
  versus_muon = summary.speedups(held, "muon")
  for size in ("xs", "m"):
    for budget in protocol.BUDGETS:
      got = versus_adamw[size, budget, "vsgd_muon"]
      assert got["mean"] == pytest.approx(2.0, rel=1e-4) and got["n"] == 3
      # 2 / 1.5 puts the reading between Muon's budgets, where the log-log interpolation
      # is exact only on a law without floor; this one's floor (1) leaves it within 2%.
      assert versus_muon[size, budget, "vsgd_muon"]["mean"] == pytest.approx(2 / 1.5, rel=2e-2)
      assert versus_muon[size, budget, "vsgd_muon"]["range"] == "inside"
  params = model.count(protocol.SIZES["s"])
  law = lambda d: 30 * (d * 10.0 * params) ** -0.3
  diff = summary.differences(held, "vsgd_muon", "muon")["s", 10.0]
  assert diff["mean"] == pytest.approx(law(2.0) - law(1.5), rel=1e-9)
  rows = summary.table(held)
  assert len(rows) == 3 * (2 * 4 + 3 * 2) and rows[0]["params"] == model.count(protocol.SIZES["xs"])


def test_a_speedup_is_read_off_the_measured_curve_and_only_bounded_past_it():
  chars = [2.5e5, 5e5, 1e6, 2e6]
  law = lambda d: 30 * d ** -0.3  # no floor: linear in log-log, so read off exactly
  bits = [law(d) for d in chars]
  assert summary.read_off(chars, bits, law(7.1e5)) == (pytest.approx(7.1e5, rel=1e-12), "inside")
  assert summary.read_off(chars, bits, law(1e6)) == (pytest.approx(1e6, rel=1e-12), "inside")
  assert summary.read_off(chars, bits, law(9e6)) == (2e6, "beyond")  # a lower bound
  assert summary.read_off(chars, bits, law(1e5)) == (2.5e5, "below")  # an upper bound
  # A reference whose curve rises between two budgets: the least data that reached it.
  assert summary.read_off(chars, [3.0, 2.0, 2.5, 1.0], 2.0) == (pytest.approx(5e5), "inside")
  # An entry 4 times as data-efficient as AdamW at 10 characters a parameter lies past
  # AdamW's 20: the speedup is the bound 20 / 10 = 2 for every seed, and says so.
  held = summary.finals(_synthetic(lambda size, entry: 4.0 if entry == "vsgd_muon" else 1.0))
  found = summary.speedups(held, "adamw")["xs", 10.0, "vsgd_muon"]
  assert (found["range"], found["outside"], found["bound"], found["mean"]) == ("beyond", 3, 2.0, 2.0)
  assert ladder_report._speedup(found) == "> 2.00 (beyond the measured range)"
  mixed = {**found, "outside": 1, "low": 1.9, "high": 2.1}
  assert ladder_report._speedup(mixed) == (
      "2.00 [1.90, 2.10] (1 of 3 seeds beyond the measured range, each at its bound 2.00)")
  # The rule's speedup test cannot pass on seeds read below Muon's range (upper bounds).
  muon = summary.speedups(summary.finals(_synthetic(lambda size, entry: 0.1 if entry ==
                                                    "vsgd_muon" else 1.0)), "muon")
  assert muon["xs", 10.0, "vsgd_muon"]["range"] == "below"


def test_the_recommendation_rule_needs_every_size_and_stops_at_the_first_that_fails():
  factors = {"adamw": 1.0, "muon": 1.5, "normuon": 1.2, "muon_vs": 1.2, "vsgd_muon": 2.0}
  everywhere = summary.finals(_synthetic(lambda size, entry: factors[entry]))
  got = summary.recommendation(everywhere, True, cpu_sizes=("xs", "s", "m"))
  assert got["s_star"] == "m" and got["s_star_params"] == 436_736
  # VSGD-Muon behind Muon at the middle size: S* stops below it, whatever the largest does.
  dips = lambda size, entry: 1.0 if (size, entry) == ("s", "vsgd_muon") else factors[entry]
  got = summary.recommendation(summary.finals(_synthetic(dips)), True,
                               cpu_sizes=("xs", "s", "m"))
  assert got["s_star"] == "xs" and got["per_size"]["s"]["not_behind"] is False
  assert got["beyond"] == "muon"
  # A size that never ran: no outcome at all.
  partial = summary.finals(_synthetic(lambda size, entry: factors[entry], sizes=("xs", "s")))
  assert summary.recommendation(partial, True, cpu_sizes=("xs", "s", "m"))["s_star"] is None
  # The smallest size failing addendum 3's check, or lacking its runs, holds nothing above it.
  for own_best_holds in (False, None):
    got = summary.recommendation(everywhere, own_best_holds, cpu_sizes=("xs", "s", "m"))
    assert got["s_star"] is None and got["per_size"]["xs"]["own_best"] is False
    assert got["per_size"]["m"]["ahead_at_top"] and "own_best" not in got["per_size"]["m"]


def test_the_sensitivity_check_gives_each_adamw_part_rate_and_vsgd_muons_verdicts():
  factors = {"adamw": 1.0, "muon": 1.5, "normuon": 1.2, "muon_vs": 1.2, "vsgd_muon": 2.0}
  lines = _synthetic(lambda size, entry: factors[entry])
  params = model.count(protocol.SIZES["m"])
  law = lambda entry: 1 + 30 * (factors[entry] * 10.0 * params) ** -0.3
  up, down = protocol.SENSITIVITY_FACTORS
  # Each Muon-family entry again at its chosen rate with the AdamW part moved: a half decade
  # up, VSGD-Muon 0.05 behind every other entry; down, it differs from each by +0.01, -0.01
  # and 0 over the seeds (a tie), and Muon-VS has not run.
  for factor, entry_names in ((up, protocol.MUON_FAMILY),
                              (down, ("muon", "normuon", "vsgd_muon"))):
    for entry in entry_names:
      for seed in protocol.SEEDS:
        shift = {up: 0.05, down: (0.01, -0.01, 0.0)[seed]}[factor] if entry == "vsgd_muon" else 0
        bits = law("muon") + 0.001 * seed + shift
        lines.append({"entry": entry, "size": "m", "params": params, "budget": 10.0,
                      "rate": protocol.CONTEST_RATES[entry], "adam_rate": 3.16e-3 * factor,
                      "seed": seed, "val_bits": bits, "test_bits": bits})
  rows = summary.sensitivity(lines, summary.finals(lines))
  assert [r["factor"] for r in rows] == [down, 1.0, up]
  assert [r["adam_rate"] for r in rows] == pytest.approx([1e-3, 3.16e-3, 1e-2], rel=1e-3)
  at_choice = rows[1]["versus"]["muon"]
  assert at_choice["mean"] == pytest.approx(law("vsgd_muon") - law("muon"), rel=1e-9)
  assert at_choice["verdict"] == "ahead" and rows[1]["versus"]["normuon"]["verdict"] == "ahead"
  assert rows[1]["entries"]["muon_vs"]["test_mean"] == pytest.approx(law("muon_vs") + 0.001)
  assert rows[2]["versus"]["muon"]["mean"] == pytest.approx(0.05)
  assert rows[2]["versus"]["normuon"]["verdict"] == rows[2]["versus"]["muon"]["verdict"] == "behind"
  tie = rows[0]["versus"]["normuon"]
  assert tie["mean"] == pytest.approx(0.0, abs=1e-12) and tie["low"] < 0 < tie["high"]
  assert tie["verdict"] == "tie" and "muon_vs" not in rows[0]["entries"]
  spread = np.std([0.01, 0.001 - 0.01, 0.002], ddof=1)  # each seed's offset plus its shift
  assert rows[0]["entries"]["vsgd_muon"]["test_sd"] == pytest.approx(spread, rel=1e-6)
  # Before the tuned rung at the contest's size is in, there is nothing to report.
  assert summary.sensitivity(lines, summary.finals([x for x in lines if x["size"] != "m"])) == []


def _own_best_lines(factors, shift, parts=protocol.SENSITIVITY_FACTORS,
                    entries=protocol.MUON_FAMILY):
  """``entries``' runs at 71,616 parameters and 10 characters a parameter with the AdamW
  part at ``parts`` times AdamW's rate there: ``_synthetic``'s bits plus
  ``shift(entry, part, seed)``, a pair ``(validation, test)``.
  """
  params = model.count(protocol.SIZES["xs"])
  lines = []
  for part in parts:
    for entry in entries:
      for seed in protocol.SEEDS:
        bits = 1 + 0.001 * seed + 30 * (factors[entry] * 10.0 * params) ** -0.3
        val, test = shift(entry, part, seed)
        lines.append({"entry": entry, "size": "xs", "params": params, "budget": 10.0,
                      "rate": protocol.CONTEST_RATES[entry], "adam_rate": 3.16e-3 * part,
                      "seed": seed, "val_bits": bits + val, "test_bits": bits + test})
  return lines


FACTORS = {"adamw": 1.0, "muon": 1.5, "normuon": 1.2, "muon_vs": 1.2, "vsgd_muon": 2.0}
UP, DOWN = protocol.SENSITIVITY_FACTORS


def _helps_others(entry, part, seed):
  """A half decade up helps every entry but VSGD-Muon (by 0.02, Muon's by 0.015 + 0.002 a
  seed); a half decade down hurts every entry by 0.03, and a decade up by 0.05.
  """
  if part != UP:
    return (0.03, 0.03) if part == DOWN else (0.05, 0.05)
  if entry == "vsgd_muon":
    return 0.01, 0.01
  return (-0.015 - 0.002 * seed,) * 2 if entry == "muon" else (-0.02, -0.02)


def test_an_own_best_adamw_part_on_an_edge_grows_its_window_there_up_to_the_cap():
  assert rules.adamw_part_beyond({0.001: 2.7, 0.00316: 2.6, 0.01: 2.65}) is None
  assert rules.adamw_part_beyond({0.001: 2.7, 0.00316: 2.6, 0.01: 2.5}) == pytest.approx(0.0316,
                                                                                     rel=1e-3)
  assert rules.adamw_part_beyond({0.001: 2.5, 0.00316: 2.6, 0.01: 2.7}) == pytest.approx(3.16e-4,
                                                                                     rel=1e-3)
  capped = dict(zip((1e-3, 3.16e-3, 1e-2, 3.16e-2, 1e-1), (2.9, 2.8, 2.7, 2.6, 2.5),
                    strict=True))
  assert len(capped) == protocol.OWN_BEST_MAX_PARTS and rules.adamw_part_beyond(capped) is None
  # The ledger's parts as first written; parts equal to its 6 digits are one part.
  lines = _own_best_lines(FACTORS, _helps_others, (DOWN, 1.0, UP), ["muon"])
  lines += [{**x, "adam_rate": x["adam_rate"] * (1 + 1e-9)} for x in lines
            if x["adam_rate"] > 9e-3]  # the part a half decade up, written with more digits
  means = rules.adamw_part_means(lines, "muon", "xs", 10.0, protocol.CONTEST_RATES["muon"])
  assert sorted(means) == pytest.approx([1e-3, 3.16e-3, 1e-2], rel=1e-3)
  assert max(means) == 3.16e-3 * UP


def test_the_own_best_windows_run_the_part_beyond_each_edge_until_the_best_is_inside(
    tmp_path, monkeypatch):
  path = str(tmp_path / "runs.jsonl")
  ledgers.append(_synthetic(lambda size, entry: FACTORS[entry], sizes=("xs",))
                + _own_best_lines(FACTORS, _helps_others), path)
  ran = []
  def program(ctx, entry, size_name, budget, rates, seeds, adam_rate):
    ran.append((entry, adam_rate))
    ledgers.append(_own_best_lines(FACTORS, _helps_others, [adam_rate / 3.16e-3], [entry]),
                  ctx.path)
    return ctx.lines()
  monkeypatch.setattr(run, "run_program", program)
  ctx = run.Context(data={}, corpus="toy", path=path, chunk=1)
  assert run._own_best_windows(ctx, "s", protocol.SEEDS) and ran == []  # not the size that holds
  assert run._own_best_windows(ctx, "xs", protocol.SEEDS)
  # Each entry a half decade up was best on its window's edge: the decade up runs once,
  # then the best is inside; VSGD-Muon's best was inside from the start.
  assert [e for e, _ in ran] == ["muon", "normuon", "muon_vs"]
  assert [a for _, a in ran] == pytest.approx([3.16e-2] * 3, rel=1e-3)
  assert run._own_best_windows(ctx, "xs", protocol.SEEDS) and len(ran) == 3  # resumes: nothing


def test_the_size_that_holds_keeps_holding_only_with_every_entry_at_its_own_best_adamw_part():
  base = _synthetic(lambda size, entry: FACTORS[entry])
  params = model.count(protocol.SIZES["xs"])
  law = lambda entry: 30 * (FACTORS[entry] * 10.0 * params) ** -0.3
  three = base + _own_best_lines(FACTORS, _helps_others)
  # Three entries' best on the upper edge of their three parts: no outcome until it grows.
  got = summary.own_best(three, summary.finals(three))
  assert got["holds"] is None and got["best"] == {} and len(got["rows"]) == 3
  lines = three + _own_best_lines(FACTORS, _helps_others, [10.0])
  got = summary.own_best(lines, summary.finals(lines))
  assert [r["adam_rate"] for r in got["rows"]] == pytest.approx([1e-3, 3.16e-3, 1e-2, 3.16e-2],
                                                                rel=1e-3)
  assert got["rows"][2]["entries"]["muon"]["val_mean"] == pytest.approx(1 + law("muon") - 0.016)
  assert {e: b["adam_rate"] for e, b in got["best"].items()} == pytest.approx(
      {"muon": 3.16e-3 * UP, "normuon": 3.16e-3 * UP, "muon_vs": 3.16e-3 * UP,
       "vsgd_muon": 3.16e-3})
  assert not any(b["on_edge"] for b in got["best"].values())
  muon = got["versus"]["muon"]
  assert muon["mean"] == pytest.approx(law("vsgd_muon") - law("muon") + 0.017, rel=1e-9)
  assert muon["high"] - muon["low"] > 0.005  # Muon's gain differs by seed: a real interval
  assert muon["verdict"] == "ahead" and got["versus"]["normuon"]["verdict"] == "ahead"
  assert got["holds"] is True and got["params"] == params
  # Muon gaining 0.06 a half decade up puts VSGD-Muon behind it there: the size fails.
  def muon_gains(entry, part, seed):
    return (-0.06, -0.06) if (entry, part) == ("muon", UP) else (0.03, 0.03)
  lines = base + _own_best_lines(FACTORS, muon_gains, (UP, DOWN, 10.0))
  got = summary.own_best(lines, summary.finals(lines))
  assert got["versus"]["muon"]["verdict"] == "behind" and got["holds"] is False
  # Validation chooses: the same test gain behind a worse validation is not Muon's best.
  def test_only(entry, part, seed):
    return (0.1, -0.06) if (entry, part) == ("muon", UP) else (0.03, 0.03)
  lines = base + _own_best_lines(FACTORS, test_only)
  got = summary.own_best(lines, summary.finals(lines))
  assert got["best"]["muon"]["adam_rate"] == pytest.approx(3.16e-3) and got["holds"] is True
  # One entry's half decade down not run: no outcome, and the rule reads it as failing.
  partial = [x for x in lines if not (x["entry"] == "muon_vs" and x["adam_rate"] < 3e-3)]
  got = summary.own_best(partial, summary.finals(partial))
  assert got["holds"] is None and got["best"] == {} and "muon_vs" not in got["rows"][0]["entries"]
  # Muon better at every part up to the cap: its best is flagged on the edge, and decides.
  def muon_climbs(entry, part, seed):
    if entry == "muon":
      return {DOWN: (0.03,) * 2, UP: (-0.02,) * 2, 10.0: (-0.03,) * 2}.get(part, (-0.04,) * 2)
    return _helps_others(entry, part, seed)
  lines = base + _own_best_lines(FACTORS, muon_climbs, (UP, DOWN, 10.0))
  lines += _own_best_lines(FACTORS, muon_climbs, [10.0 * UP], ["muon"])
  got = summary.own_best(lines, summary.finals(lines))
  assert got["best"]["muon"]["on_edge"] and got["best"]["muon"]["adam_rate"] == pytest.approx(
      0.1, rel=1e-2)
  assert got["versus"]["muon"]["mean"] == pytest.approx(law("vsgd_muon") - law("muon") + 0.04)


def test_the_adamw_part_shares_reuse_the_runs_made_and_decide_the_default_by_the_worst_case():
  down, up = 1 / math.sqrt(10.0), math.sqrt(10.0)
  # Where the matrix rate is ten times AdamW's own, the share 0.1 is the tuned rung's runs.
  assert rules.adamw_part_at_share(0.1, 0.1, 0.01) == 0.01
  assert [rules.adamw_part_at_share(share, 0.0316, 3.16e-3)
          for share in protocol.ADAMW_PART_SHARES] == pytest.approx([3.16e-3, 1e-2, 3.16e-2],
                                                                    rel=1e-3)
  # At the contest's size (0.01 against AdamW's 0.00316) they are the sensitivity check's.
  key = lambda adam: ledger.key({"entry": "vsgd_muon", "size": "m", "budget": 10.0,
                                 "rate": 0.01, "adam_rate": adam, "seed": 0})
  assert [key(rules.adamw_part_at_share(share, 0.01, 3.16e-3))
          for share in protocol.ADAMW_PART_SHARES] == [key(3.16e-3 * f) for f in (down, 1, up)]

  def sizes(*rows):
    return [{"size": name, "shares": [{"share": share, "val_mean": v} for share, v in
                                      zip(protocol.ADAMW_PART_SHARES, row, strict=True)
                                      if v is not None]}
            for name, row in zip(protocol.CPU_SIZES, rows, strict=False)]  # sizes not in: none
  # The share 1 wins at the largest size by 0.041 but loses by 0.09 at the smallest: the
  # share 0.316, never more than 0.013 from the best, is the default.
  mixed = summary.default_share(sizes((2.50, 2.51, 2.59), (2.00, 2.00, 2.02),
                                      (1.708, 1.680, 1.667)))
  assert mixed["complete"] and mixed["default"] == protocol.ADAMW_PART_SHARES[1]
  assert [r["shortfall"] for r in mixed["worst_shortfall"]] == pytest.approx([0.041, 0.013, 0.09])
  # Better than 0.1 at every size, but by no more than the margin in the worst case.
  close = summary.default_share(sizes((2.515, 2.50, 2.50), (2.0, 2.0, 2.0), (1.7, 1.7, 1.7)))
  assert close["default"] == 0.1 and close["complete"]
  assert summary.default_share(sizes((2.6, 2.5, 2.5), (2.1, 2.0, 2.0),
                                     (1.8, 1.7, 1.75)))["default"] == protocol.ADAMW_PART_SHARES[1]
  # A share not yet run at one size, or a size not yet in, decides nothing.
  for partial in (sizes((2.6, 2.5, 2.4), (2.1, 2.0, None), (1.8, 1.7, 1.6)),
                  sizes((2.6, 2.5, 2.4), (2.1, 2.0, 1.9))):
    assert summary.default_share(partial) == {"complete": False, "worst_shortfall": [],
                                              "default": 0.1}


def test_the_summary_file_holds_the_table_the_rule_and_the_sources(tmp_path):
  factors = {"adamw": 1.0, "muon": 1.5, "normuon": 1.2, "muon_vs": 1.2, "vsgd_muon": 2.0}
  machine = {"source": "abc", "device": "cpu", "cpu": "x", "cores": 2}
  lines = [{**line, **machine} for line in _synthetic(lambda size, entry: factors[entry])
           + _own_best_lines(factors, lambda entry, part, seed: (0.03, 0.03))]
  path = str(tmp_path / "runs.jsonl")
  ledgers.append(lines, path)
  got = summary_file.write(path)
  assert json.loads((tmp_path / "summary.json").read_text())["runs"] == len(lines) == got["runs"]
  assert got["sources"] == ["abc"]
  assert got["machines"] == ["x CPU, 2 cores"]
  assert protocol.CPU_SIZES == ("xs", "s", "m") and got["recommendation"]["s_star"] == "m"
  assert got["sizes_complete"] == ["xs", "s", "m"] and got["own_best"]["holds"] is True
  # A ledger with one budget a size so far: the table and "no outcome", and no speedup.
  first = tmp_path / "first"
  first.mkdir()
  ledgers.append([line for line in lines if line["budget"] == 2.5], str(first / "runs.jsonl"))
  got = summary_file.write(str(first / "runs.jsonl"))
  assert got["rows"] and all(row["speedup_vs_adamw"] is None for row in got["rows"])
  assert got["recommendation"]["s_star"] is None
  assert got["sizes_complete"] == []


def test_the_ladder_hours_count_every_rung_rate_seed_and_the_sensitivity_check():
  def rung(entry):
    return {"entry": entry, "size": "m", "projected": [
        {"budget": b, "seconds": 36.0 * b, "cpu_seconds": 18.0 * b}
        for b in cpu_timing.budgets_of(entry)]}
  rungs = [rung("adamw"), rung("vsgd_muon")]
  # adamw: 4 rates x 3 seeds at 2.5, 5, 10, one rate x 3 seeds at 20; vsgd_muon: 4 x 3 at
  # 2.5 and 10, and the sensitivity check's 2 x 3 runs at 10. Halved by a vmap speedup of 2.
  seconds = 36.0 * (12 * (2.5 + 5 + 10) + 3 * 20 + 12 * (2.5 + 10) + 6 * 10)
  got = cpu_timing.ladder_hours(rungs, {"m": 2.0}, ["m"])
  assert got == {"m": round(seconds / 2 / 3600, 2)}
  assert cpu_timing.ladder_hours(rungs, {"m": 2.0}, ["m"], "cpu_seconds") == {
      "m": round(seconds / 4 / 3600, 2)}
  # The file says under what load its times were taken: the least and the most.
  loads = [{"load": [2.5, 1.0, 1.0]}, {"load": [0.75, 9.0, 9.0]}]
  assert cpu_timing.load_note(loads).startswith("1-minute load average 0.8 to 2.5 ")


def test_the_gpu_script_runs_the_module_from_the_repository_root(tmp_path):
  # Its plumbing (the folder it runs from, the interpreter, $OUT), through a merge: the
  # training path itself is the toy run above.
  lease, target = str(tmp_path / "lease.jsonl"), str(tmp_path / "runs.jsonl")
  ledgers.append([_line(seed=0), _line(seed=1)], lease)
  script = os.path.join(ledgers.REPOSITORY, "benchmarks", "ladder", "gpu.sh")
  env = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable}
  done = subprocess.run(["bash", script, "--merge", lease, "--ledger", target], env=env,
                        cwd=tmp_path, capture_output=True, text=True, check=False)
  assert done.returncode == 0, done.stderr
  assert "2 lines added" in done.stdout and len(ledgers.read(target)) == 2
  done = subprocess.run(["bash", script], env={**env, "OUT": ""}, capture_output=True,
                        text=True, check=False)
  assert done.returncode != 0 and "OUT" in done.stderr


def test_a_gpu_lease_near_its_deadline_times_nothing_and_keeps_nothing_partial(tmp_path):
  data = train.device_data(corpus.load(toy_corpus(tmp_path), protocol.TOY.context))
  path = str(tmp_path / "runs.jsonl")
  # A deadline already passed, not one a second away: a compilation served from the
  # persistent cache can finish the toy program within a second.
  ctx = run.Context(data=data, corpus="toy", path=path, chunk=1, deadline=time.time() - 1.0)
  timings = gpu.run_gpu(ctx, sizes=("toy",), budget=0.05, reference_budgets=(0.025, 0.05),
                        names=("adamw",), seeds=(0,))
  # No timing fits (it needs gpu.TIMING_RESERVE); AdamW's program starts untimed and stops
  # after its first chunk (of the toy's several), as the deadline has passed.
  assert timings["rungs"] == [] and ledgers.read(path) == []


def _rounded(value):
  """``value`` with every float at 9 significant digits (NaN and inf as themselves)."""
  if isinstance(value, float):
    return value if not math.isfinite(value) else float(f"{value:.9g}")
  if isinstance(value, dict):
    return {k: _rounded(v) for k, v in value.items()}
  if isinstance(value, list):
    return [_rounded(v) for v in value]
  return value


def test_the_committed_summary_is_what_the_committed_ledger_gives(tmp_path):
  results = os.path.join(ledgers.REPOSITORY, ledger.PATH)
  summary_file.write(results, str(tmp_path))
  with open(os.path.join(os.path.dirname(results), "summary.json")) as f:
    committed = json.load(f)
  with open(tmp_path / "summary.json") as f:
    fresh = json.load(f)
  assert committed["runs"] == fresh["runs"], (
      "summary.json is stale: run python -m benchmarks.ladder --summary")
  # json.dumps writes NaN as NaN on both sides, so the texts compare where NaN != NaN.
  assert json.dumps(_rounded(committed), sort_keys=True) == json.dumps(_rounded(fresh),
                                                                        sort_keys=True)

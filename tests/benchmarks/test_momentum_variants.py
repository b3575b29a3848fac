"""The momentum study's variant of VSGD-Muon (PROTOCOL.md's addendum 6): its entry, the rungs
it runs in order with their windows' centres, its early stop once behind the momentum-tuned
Muon, the rule that would make it the default, and its hours in the study's budget.
"""

import jax
import numpy as np
import pytest

import vsgd_optax
from benchmarks import ledger as ledgers
from benchmarks import optimizers
from benchmarks.ladder import entries
from benchmarks.ladder import protocol
from benchmarks.ladder import rules
from benchmarks.ladder import run
from benchmarks.ladder import variants
from benchmarks.lm import model
from tests.benchmarks.test_momentum_study import _study
from tests.benchmarks.test_momentum_study import _two_steps

SEEDS = protocol.SEEDS
VARIANT = "vsgd_muon_nesterov"
EFFICIENCY = {0.8: 1.4, 0.9: 1.7, 0.98: 1.2}  # Muon's betas in ``_study``: 0.9 is the best


def _ladders_vsgd_muon_with_nesterov(schedule, adam_schedule):
  """The ladder's VSGD-Muon entry with ``nesterov=True``, spelled out."""
  return vsgd_optax.vsgd_muon(
      schedule, nesterov=True, muon_weight_dimension_numbers=optimizers.hidden_kernels,
      min_dim_size_to_factor=2, weight_decay=0.1, adam_learning_rate=adam_schedule, adam_b1=0.9,
      adam_b2=0.95, adam_eps=1e-8, adam_weight_decay=0.1,
      adam_weight_decay_mask=lambda p: jax.tree.map(lambda leaf: leaf.ndim == 2, p))


def test_the_variant_is_the_ladders_vsgd_muon_with_the_look_ahead():
  assert protocol.VARIANTS == {VARIANT: {"nesterov": True}}
  assert entries.SOURCES[VARIANT] == entries.SOURCES["vsgd_muon"]
  assert rules.contest_rate(VARIANT) == protocol.CONTEST_RATES["vsgd_muon"] == 3.16e-2
  got = _two_steps(entries.builder(VARIANT))
  jax.tree.map(np.testing.assert_array_equal, got, _two_steps(_ladders_vsgd_muon_with_nesterov))
  # The look-ahead reaches the step: the second steps differ from VSGD-Muon's.
  plain = _two_steps(entries.builder("vsgd_muon"))
  kernel = lambda steps: steps[1]["blocks"][0]["up"]
  assert float(np.max(np.abs(kernel(got) - kernel(plain)))) > 1e-4
  with pytest.raises(KeyError, match="no ladder entry 'vsgd_muon_nesterovv'"):
    entries.builder("vsgd_muon_nesterovv")


def _variant_lines(size, budget, centre, efficiency):
  """The variant's window around ``centre`` at a rung, ``centre`` best, on ``_study``'s law at
  data efficiency ``efficiency``: the other rates 0.5 worse, 0.001 a seed.
  """
  params = model.count(protocol.SIZES[size])
  out = []
  for rate in protocol.window(centre):
    for seed in SEEDS:
      bits = (1 + 0.001 * seed + 30 * (efficiency * budget * params) ** -0.3
              + (0.0 if rate == centre else 0.5))
      out.append({"entry": VARIANT, "size": size, "params": params, "budget": budget,
                  "rate": rate, "adam_rate": 3.16e-3, "seed": seed, "val_bits": bits,
                  "test_bits": bits, "seconds": 18.0, "lanes": 9})
  return out


def _driven(tmp_path, monkeypatch, efficiency_at):
  """``run.run_variants`` over ``_study``'s ledger, its ``run.tune`` writing the
  variant's window at each rung (efficiency ``efficiency_at(size, budget)``); what it tuned
  and the ledger it left.
  """
  lines, held, _, _ = _study(lambda size, beta: EFFICIENCY[beta])
  path = str(tmp_path / "runs.jsonl")
  ledgers.append(lines, path)
  ran = []

  def tune(ctx, entry, size_name, budget, centre, max_rates, adam, seeds):
    ran.append((entry, size_name, budget, centre, max_rates, adam))
    ledgers.append(_variant_lines(size_name, budget, centre, efficiency_at(size_name, budget)),
                  ctx.path)
    return centre

  monkeypatch.setattr(run, "tune", tune)
  ctx = run.Context(data={}, corpus="toy", path=path, readouts=str(tmp_path / "r.jsonl"))
  assert run.run_variants(ctx)
  return ran, ledgers.read(path), held


def test_the_variant_runs_the_rungs_in_order_and_stops_once_behind_the_tuned_muon(
    tmp_path, monkeypatch, capsys):
  # Ahead of the tuned Muon (1.7) at the 2.5s, behind it at 71,616 · 10.
  ran, lines, held = _driven(tmp_path, monkeypatch,
                             lambda size, budget: 1.5 if (size, budget) == ("xs", 10.0) else 1.9)
  centre = protocol.CONTEST_RATES["vsgd_muon"]
  # 180,800 · 2.5 centres on what the variant chose at 71,616 · 2.5, its window's middle.
  assert ran == [(VARIANT, "xs", 2.5, centre, 6, 3.16e-3), (VARIANT, "s", 2.5, centre, 5, 3.16e-3),
                 (VARIANT, "xs", 10.0, centre, 6, 3.16e-3)]
  assert "behind the momentum-tuned Muon at xs 10.0" in capsys.readouterr().out
  (found,) = variants.report(lines, held)
  assert [(r["size"], r["budget"], r["rate"]) for r in found["rows"]] == [
      ("xs", 2.5, centre), ("s", 2.5, centre), ("xs", 10.0, centre)]
  law = lambda size, budget, f: 30 * (f * budget * model.count(protocol.SIZES[size])) ** -0.3
  for row, efficiency in zip(found["rows"], (1.9, 1.9, 1.5), strict=True):
    size, budget = row["size"], row["budget"]
    # Paired by seed, the seeds' offsets cancel: the differences are the law's, exactly.
    assert row["versus_tuned"]["mean"] == pytest.approx(
        law(size, budget, efficiency) - law(size, budget, 1.7), abs=1e-12)
    assert row["versus_vsgd_muon"]["mean"] == pytest.approx(
        law(size, budget, efficiency) - law(size, budget, 2.0), abs=1e-12)
  assert [r["versus_tuned"]["verdict"] for r in found["rows"]] == ["ahead", "ahead", "behind"]
  assert (found["stopped_at"], found["not_run"], found["replaces_default"]) == (
      "xs 10", ["m 2.5", "s 10", "m 10"], False)
  # The study's hours count the variant's programs (18 s over 9 lanes, once a program).
  assert rules.study_hours(lines, []) == pytest.approx(3 * 6 * 9.0 / 3600 + 3 * 18.0 / 3600)


def test_the_variant_replaces_the_default_only_run_and_not_behind_at_every_rung(
    tmp_path, monkeypatch):
  ran, lines, held = _driven(tmp_path, monkeypatch, lambda size, budget: 1.9)
  assert [(size, budget) for _, size, budget, *_ in ran] == list(protocol.VARIANT_RUNGS)
  (found,) = variants.report(lines, held)
  assert (found["stopped_at"], found["not_run"], found["replaces_default"]) == (None, [], True)
  # A rung not run (cut by the budget) fails the rule: it cannot be met by not running.
  cut = [x for x in lines if not (x["entry"] == VARIANT and (x["size"], x["budget"]) == ("m", 10.0))]
  (found,) = variants.report(cut, held)
  assert (found["not_run"], found["replaces_default"]) == (["m 10"], False)
  # So does a rung whose tuned Muon is missing, though the variant ran there.
  no_muon = [x for x in lines if not (x["entry"] == "muon_b0.98" and x["size"] == "m"
                                      and x["budget"] == 10.0)]
  (found,) = variants.report(no_muon, held)
  assert found["rows"][-1]["versus_tuned"] is None and not found["replaces_default"]


def test_a_variant_without_the_choices_it_needs_stops_and_says_so(tmp_path, capsys):
  path = str(tmp_path / "runs.jsonl")
  ctx = run.Context(data={}, corpus="toy", path=path, readouts=str(tmp_path / "r.jsonl"))
  assert not run.run_variant(ctx, VARIANT)
  assert "no window for vsgd_muon_nesterov at xs 2.5" in capsys.readouterr().out
  assert variants.centre([], VARIANT, "s", 2.5) is None


def test_the_results_page_gives_each_variants_rungs_and_the_rules_outcome(tmp_path, monkeypatch):
  from benchmarks.ladder import momentum
  from benchmarks.ladder import summary
  from benchmarks.reporting import momentum as momentum_report
  _, lines, held = _driven(tmp_path, monkeypatch,
                           lambda size, budget: 1.5 if (size, budget) == ("xs", 10.0) else 1.9)
  found = momentum.report(lines, [], held, summary.recommendation(held, own_best_holds=True))
  text = momentum_report.variants(found)
  assert text.startswith(
      "`vsgd_muon_nesterov` (nesterov=True): 3 of 6 rungs run; not run: 436,736 · 2.5, "
      "180,800 · 10, 436,736 · 10. It is behind the momentum-tuned Muon at 71,616 · 10, so its "
      "later rungs do not run. The rule's outcome: **the default stays**.")
  rows = [line.strip("| ").split(" | ") for line in text.splitlines()[4:]]
  assert [(row[0], row[1]) for row in rows] == [("71,616 · 2.5", "0.0316"),
                                                ("180,800 · 2.5", "0.0316"), ("71,616 · 10", "0.0316")]
  assert [row[3].split()[-1] for row in rows] == ["ahead", "ahead", "behind"]
  assert [row[4].split()[-1] for row in rows] == ["behind", "behind", "behind"]
  assert momentum_report.variants({**found, "variants": []}) == "none yet"

"""The ladder's momentum study: Muon's entries at each beta, the rule that picks a rung's best
beta and grows the grid at an edge, the transfer of each beta's rate, VSGD-Muon's read-out of
its effective beta1 (the ledger's runs retrained bit for bit), the study's hours and its
budget, and the GPU plan's betas.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from benchmarks import ledger as ledgers
from benchmarks.ladder import __main__ as cli
from benchmarks.ladder import entries
from benchmarks.ladder import gpu
from benchmarks.ladder import momentum
from benchmarks.ladder import protocol
from benchmarks.ladder import readout
from benchmarks.ladder import rules
from benchmarks.ladder import run
from benchmarks.ladder import summary
from benchmarks.lm import corpus
from benchmarks.lm import model
from benchmarks.lm import train
from benchmarks.reporting import momentum as momentum_report
from tests.benchmarks.test_ladder import toy_corpus

SEEDS = protocol.SEEDS
ADAM = 3.16e-3  # AdamW's chosen rate in the synthetic ledgers below


def _two_steps(build, rate=0.02, adam_rate=3e-3):
  """Two steps' updates of ``build``'s optimizer on the toy model (two gradients, so that
  the momentum counts: Muon's first step is the same at every beta after Newton-Schulz).
  """
  params = model.init(jax.random.key(0), protocol.TOY)
  opt = build(lambda count: rate, lambda count: adam_rate)
  state = opt.init(params)
  out = []
  for k in (1, 2):
    grads = jax.tree.map(lambda p, k=k: jax.random.normal(jax.random.key(k), p.shape), params)
    updates, state = opt.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out


def _by_hand(beta):
  """Muon at ``beta`` on the hidden kernels, AdamW on the rest, spelled out."""
  def build(schedule, adam_schedule):
    adamw = optax.adamw(adam_schedule, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1,
                        mask=lambda p: jax.tree.map(lambda leaf: leaf.ndim == 2, p))
    return optax.multi_transform(
        {"matrices": optax.contrib.muon(schedule, beta=beta, weight_decay=0.1),
         "adamw": adamw}, model.matrix_labels)
  return build


def test_each_beta_entry_is_muon_at_that_beta_and_muon_stays_at_optaxs():
  assert protocol.MOMENTUM_ENTRIES == ("muon_b0.7", "muon_b0.8", "muon_b0.9", "muon",
                                       "muon_b0.98", "muon_b0.99")
  assert protocol.momentum_entry(0.9) == "muon_b0.9" and protocol.momentum_entry(0.95) == "muon"
  assert set(entries.MOMENTUM_BUILDERS) == set(protocol.MOMENTUM_ENTRIES) - {"muon"}
  assert all(entries.SOURCES[e] == () for e in entries.MOMENTUM_BUILDERS)
  assert protocol.ENTRIES == ("adamw", "muon", "normuon", "muon_vs", "vsgd_muon")
  steps = {entry: _two_steps(entries.builder(entry)) for entry in protocol.MOMENTUM_ENTRIES}
  for entry, got in steps.items():
    want = _two_steps(_by_hand(protocol.momentum_of(entry)))
    jax.tree.map(np.testing.assert_array_equal, got, want)
  # The beta reaches the step: the second steps differ between 0.9 and 0.95.
  second = [steps[entry][1]["blocks"][0]["up"] for entry in ("muon_b0.9", "muon")]
  assert float(jnp.max(jnp.abs(second[0] - second[1]))) > 1e-4


def _beta_lines(beta, val, size="xs", budget=2.5, rates=(3.16e-3, 1e-2, 3.16e-2), best=1e-2,
                seeds=SEEDS):
  """Muon-at-``beta``'s window at one rung, its best rate ``best`` at mean ``val`` (+0.001 a
  seed), the others 0.1 worse; the AdamW part at ``ADAM``.
  """
  return [{"entry": protocol.momentum_entry(beta), "size": size, "budget": budget, "rate": rate,
           "adam_rate": ADAM, "seed": seed,
           "val_bits": val + 0.001 * seed + (0.0 if rate == best else 0.1)}
          for rate in rates for seed in seeds]


def _rung(vals, size="xs", budget=2.5, best=1e-2):
  """A rung's AdamW (its chosen rate ``ADAM``) and each beta of ``vals`` (beta -> mean)."""
  lines = [{"entry": "adamw", "size": size, "budget": budget, "rate": rate, "adam_rate": rate,
            "seed": seed, "val_bits": 3.0 + (0.0 if rate == ADAM else 0.2)}
           for rate in (1e-3, ADAM, 1e-2) for seed in SEEDS]
  for beta, val in vals.items():
    lines += _beta_lines(beta, val, size, budget, best=best)
  return lines


GRID = {0.8: 2.05, 0.9: 2.0, 0.95: 2.02, 0.98: 2.1}


def test_the_best_beta_is_the_lowest_validation_once_every_beta_has_chosen():
  lines = _rung(GRID)
  assert rules.best_momentum(lines, "xs", 2.5) == (0.9, 1e-2)
  assert rules.momentum_window(lines, "xs", 2.5) == protocol.MOMENTUM_ORDER
  assert rules.momentum_choices(lines, "xs", 2.5)[0.95] == (1e-2, pytest.approx(2.021))
  # A beta lacking one seed of its chosen rate: no best yet.
  short = [x for x in lines if (x["entry"], x["rate"], x["seed"]) != ("muon_b0.98", 1e-2, 2)]
  assert rules.best_momentum(short, "xs", 2.5) is None
  # A beta whose best lies on its window's edge, not yet grown there: no choice, no best.
  edge = [x for x in lines if (x["entry"], x["rate"]) != ("muon_b0.8", 3.16e-2)]
  edge = [{**x, "val_bits": x["val_bits"] - 0.2} if (x["entry"], x["rate"]) == (
      "muon_b0.8", 3.16e-3) else x for x in edge]
  assert 0.8 not in rules.momentum_choices(edge, "xs", 2.5)
  assert rules.best_momentum(edge, "xs", 2.5) is None
  # At the cap of 6 rates an edge is a choice: the rule does not grow it further.
  capped = [{**x, "val_bits": x["val_bits"] - 0.5 * (x["rate"] == 1.0)} for x in
            _beta_lines(0.8, 2.05, rates=protocol.RATE_GRID[-6:], best=0.1)]
  assert rules.momentum_choices(_rung({0.9: 2.0}) + capped, "xs", 2.5)[0.8][0] == 1.0


def test_a_best_beta_on_an_edge_of_the_grid_grows_it_once_on_that_side():
  low = _rung({**GRID, 0.8: 1.9})
  assert rules.best_momentum(low, "xs", 2.5) is None
  assert rules.momentum_window(low, "xs", 2.5) == (*protocol.MOMENTUM_ORDER, 0.7)
  assert rules.best_momentum(low + _beta_lines(0.7, 1.95), "xs", 2.5) == (0.8, 1e-2)
  # 0.7 best in turn: it is the best, and the grid grows no further (one step a side).
  grown = low + _beta_lines(0.7, 1.8, rates=(1e-2, 3.16e-2, 0.1), best=3.16e-2)
  assert rules.best_momentum(grown, "xs", 2.5) == (0.7, 3.16e-2)
  assert rules.momentum_window(grown, "xs", 2.5) == (*protocol.MOMENTUM_ORDER, 0.7)
  # A growth beta that the grid did not demand does not count.
  assert rules.best_momentum(grown + _beta_lines(0.99, 1.0), "xs", 2.5) == (0.7, 3.16e-2)
  high = _rung({**GRID, 0.98: 1.9})
  assert rules.momentum_window(high, "xs", 2.5) == (*protocol.MOMENTUM_ORDER, 0.99)
  assert rules.best_momentum(high, "xs", 2.5) is None
  assert rules.best_momentum(high + _beta_lines(0.99, 1.95), "xs", 2.5) == (0.98, 1e-2)
  assert rules.best_momentum(high + _beta_lines(0.99, 1.85), "xs", 2.5) == (0.99, 1e-2)


def test_each_betas_rate_transfers_from_its_own_choice_else_from_muons_at_the_rung():
  assert [s for s, _ in protocol.MOMENTUM_RUNGS] == ["xs", "s", "xs", "m", "s", "m"]
  lines = _rung({0.9: 2.0, 0.95: 2.0}, best=3.16e-2)  # each chose 3.16e-2 at xs
  lines += _rung({0.95: 1.8}, size="s", best=3.16e-3)  # Muon chose 3.16e-3 at s
  assert rules.momentum_centre(lines, 0.9, "xs", 2.5) == protocol.CONTEST_RATES["muon"] == 1e-2
  assert rules.momentum_centre(lines, 0.9, "s", 2.5) == 3.16e-2
  assert rules.momentum_centre(lines, 0.7, "s", 2.5) == 3.16e-3  # 0.7 did not run at xs
  assert rules.momentum_centre(lines, 0.9, "s", 10.0) is None  # nothing at budget 10 yet
  assert rules.momentum_max_rates("xs") == protocol.MAX_RATES_SMALLEST
  assert rules.momentum_max_rates("m") == protocol.MAX_RATES_TRANSFERRED


def test_the_driver_runs_each_rung_in_order_and_adamws_extension_after_the_top_budget(
    tmp_path, monkeypatch):
  monkeypatch.setattr(protocol, "MOMENTUM_RUNGS", (("xs", 2.5), ("s", 2.5), ("xs", 10.0)))
  path = str(tmp_path / "runs.jsonl")
  ledgers.append(_rung({0.95: 2.0}) + _rung({0.95: 2.0}, size="s")
                + _rung({0.95: 2.0}, budget=10.0), path)
  ran = []

  def readout(ctx, size_name, budget, seeds):
    ran.append(("readout", size_name, budget))
    return []

  def tune(ctx, entry, size_name, budget, centre, max_rates, adam, seeds):
    ran.append((entry, size_name, budget, centre, max_rates, adam))
    # The low edge wins at xs 2.5, so 0.7 must follow there; 0.7 chooses 0.1.
    beta = protocol.momentum_of(entry)
    val = 1.9 if (beta, size_name, budget) == (0.8, "xs", 2.5) else 2.1
    ledgers.append(_beta_lines(beta, val, size_name, budget, best=0.1 if beta == 0.7 else 1e-2,
                              rates=(3.16e-2, 0.1, 0.316) if beta == 0.7 else
                              (3.16e-3, 1e-2, 3.16e-2)), ctx.path)
    return centre

  def program(ctx, entry, size_name, budget, rates, seeds, adam_rate):
    ran.append((entry, size_name, budget, tuple(rates)))
    return []

  monkeypatch.setattr(run, "run_readout", readout)
  monkeypatch.setattr(run, "tune", tune)
  monkeypatch.setattr(run, "run_program", program)
  ctx = run.Context(data={}, corpus="toy", path=path, readouts=str(tmp_path / "r.jsonl"))
  assert run.run_momentum(ctx)
  betas = lambda size, budget, c, m: [(protocol.momentum_entry(b), size, budget, c, m, ADAM)
                                      for b in protocol.MOMENTUM_ORDER]
  assert ran == [("readout", "xs", 2.5), *betas("xs", 2.5, 1e-2, 6),
                 ("muon_b0.7", "xs", 2.5, 1e-2, 6, ADAM),
                 ("readout", "s", 2.5), *betas("s", 2.5, 1e-2, 5),
                 ("readout", "xs", 10.0), *betas("xs", 10.0, 1e-2, 6),
                 ("adamw", "xs", 40.0, (ADAM,))]
  assert rules.best_momentum(ctx.lines(), "xs", 2.5) == (0.8, 1e-2)


def test_the_readout_retrains_the_runs_bit_for_bit_and_reads_effective_beta1(tmp_path):
  assert (readout.VARIANCE_RATIO, readout.PRIOR_STRENGTH) == (30.0, 1e-8)  # vsgd_muon's defaults
  data = train.device_data(corpus.load(toy_corpus(tmp_path), protocol.TOY.context))
  steps = protocol.steps_for(model.count(protocol.TOY), 0.2, protocol.TOY)
  assert steps == 24 and readout.readout_chunk(steps) == 2
  # The ladder's program of two rates, and the read-out's of one: its lanes' bits are equal.
  vsgd_muon = entries.builder("vsgd_muon")
  wide = train.train_chunks(vsgd_muon, protocol.TOY, steps, [1e-2, 3.16e-2] * 2, [1e-3] * 4,
                            [0, 0, 1, 1], data, chunk=100)
  got = readout.train_with_readout(protocol.TOY, steps, [3.16e-2] * 2, [1e-3] * 2, [0, 1], data)
  for split in ("val", "test"):
    np.testing.assert_array_equal(got[split], wide[split][[1, 3]])
  beta1 = got["effective_beta1"]
  assert beta1["step"] == list(range(2, 25, 2)) and len(beta1["step"]) >= protocol.READOUT_POINTS
  q10, median, q90 = (np.asarray(beta1[q]) for q in ("q10", "median", "q90"))
  assert q10.shape == (2, 12) and np.all(0 < q10) and np.all(q90 < 1)
  assert np.all(q10 <= median) and np.all(median <= q90) and np.any(q10 < q90)
  # The last point, by hand: every element of the six hidden kernels of seed 1's state.
  final = {}
  train.train_chunks(vsgd_muon, protocol.TOY, steps, [3.16e-2] * 2, [1e-3] * 2, [0, 1], data,
                     chunk=2, observe=lambda state, done: final.update(
                         jax.block_until_ready(jax.tree.map(lambda a: a[1], state))))
  by_hand = vsgd_optax.effective_beta1(final["opt"].inner_states["muon"], variance_ratio=30.0,
                                       prior_strength=1e-8)
  leaves = jax.tree.leaves(by_hand)
  assert len(leaves) == 6 and sum(leaf.size for leaf in leaves) == 4 * 16 * 16 + 2 * 16 * 64
  pooled = np.concatenate([np.ravel(leaf) for leaf in leaves])
  np.testing.assert_allclose([q10[1, -1], median[1, -1], q90[1, -1]],
                             np.quantile(pooled, [0.1, 0.5, 0.9]), rtol=1e-6)


def test_the_study_hours_count_each_of_its_programs_once_and_nothing_else():
  def program(entry, lanes, seconds, size="xs", budget=2.5, kind="cpu"):
    return [{"entry": entry, "size": size, "budget": budget, "lanes": lanes, "seconds": seconds,
             "kind": kind}] * lanes
  lines = (program("muon_b0.9", 9, 900.0) + program("muon_b0.7", 3, 60.0)
           + program("adamw", 3, 300.0, budget=40.0) + program("adamw", 3, 30.0, "s", 40.0)
           # Not the study's: the ladder's Muon and AdamW, AdamW's 40 at m, a GPU lease's beta.
           + program("muon", 9, 5000.0) + program("adamw", 9, 5000.0, budget=10.0)
           + program("adamw", 3, 5000.0, "m", 40.0) + program("muon_b0.8", 9, 5000.0, "l", 10.0,
                                                              kind="gpu"))
  readouts = program("vsgd_muon", 3, 120.0) + program("vsgd_muon", 2, 40.0, "s")
  assert rules.study_hours(lines, readouts) == pytest.approx((900 + 60 + 300 + 30 + 120 + 40)
                                                           / 3600)
  assert rules.study_hours([], []) == 0.0


def test_the_study_stops_before_a_program_that_would_pass_its_budget_and_keeps_the_rest(
    tmp_path, monkeypatch, capsys):
  corpus_path = toy_corpus(tmp_path)
  data = train.device_data(corpus.load(corpus_path, protocol.TOY.context))
  path, readouts = tmp_path / "runs.jsonl", tmp_path / "readouts.jsonl"
  ctx = run.Context(data=data, corpus="toy", path=str(path), chunk=100)
  # The tuned rung the study reads: AdamW's choice and VSGD-Muon's at it, two seeds.
  run.run_program(ctx, "adamw", "toy", 0.1, [1e-3], [0, 1], None)
  (vsgd, _) = run.run_program(ctx, "vsgd_muon", "toy", 0.1, [3.16e-2], [0, 1], 1e-3)
  ladder = ledgers.read(str(path))
  monkeypatch.setattr(protocol, "MOMENTUM_RUNGS", (("toy", 0.1),))
  # Room for the read-out (projected from VSGD-Muon's program of as many runs), not for
  # a beta's window of 3 rates x 2 seeds after it (3 times the costliest such program).
  room = 2 * max(line["seconds"] for line in ladder) / 3600
  monkeypatch.setattr(protocol, "MOMENTUM_BUDGET_HOURS", room)
  argv = ["--momentum", "--corpus", str(corpus_path), "--ledger", str(path), "--seeds", "0",
          "1", "--chunk", "100"]
  cli.main(argv)
  assert "stop before muon_b0.9 toy 0.1" in capsys.readouterr().out
  assert ledgers.read(str(path)) == ladder
  held = ledgers.read(str(readouts))
  assert [(x["entry"], x["rate"], x["adam_rate"], x["seed"]) for x in held] == [
      ("vsgd_muon", 3.16e-2, 1e-3, 0), ("vsgd_muon", 3.16e-2, 1e-3, 1)]
  assert all(x["reproduces"] and x["chunk"] == 1 for x in held)
  assert held[0]["val_bits"] == vsgd["val_bits"] and held[0]["test_bits"] == vsgd["test_bits"]
  assert held[0]["effective_beta1"]["step"] == list(range(1, 13))
  assert 0 < rules.study_hours(ladder, held) < room
  cli.main(argv)  # resumes: the read-out is held, and the same program does not fit
  assert "stop before muon_b0.9 toy 0.1" in capsys.readouterr().out
  assert ledgers.read(str(readouts)) == held and ledgers.read(str(path)) == ladder


def test_a_gpu_size_runs_each_new_beta_at_muons_window_after_the_muon_family(tmp_path,
                                                                             monkeypatch):
  path = str(tmp_path / "runs.jsonl")
  ran = []

  def program(ctx, entry, size_name, budget, rates, seeds, adam_rate):
    ran.append((entry, tuple(rates), adam_rate))
    if entry == "adamw":
      ledgers.append([{"entry": "adamw", "size": size_name, "budget": budget, "rate": r,
                      "adam_rate": r, "seed": s, "val_bits": 3.0 + (r != ADAM)}
                     for r in rates for s in seeds], ctx.path)
    return []

  monkeypatch.setattr(run, "run_program", program)
  ctx = run.Context(data={}, corpus="toy", path=path, kind="gpu")
  assert gpu._size(ctx, "l", 10.0, SEEDS, protocol.ENTRIES) == ADAM
  window = protocol.window(protocol.CONTEST_RATES["muon"])
  assert [e for e, _, _ in ran] == ["adamw", *protocol.GPU_PRIORITY, "muon_b0.9", "muon_b0.8",
                                    "muon_b0.98"]
  assert all((rates, adam) == (window, ADAM) for e, rates, adam in ran[-3:])
  assert gpu._pending(ctx, "muon_b0.9", "l", 10.0, SEEDS)
  # Without Muon among the entries asked for, no beta runs.
  ran.clear()
  gpu._size(ctx, "l", 10.0, SEEDS, ("adamw", "vsgd_muon"))
  assert [e for e, _, _ in ran] == ["adamw", "vsgd_muon"]


def _study(factor_of, readouts=()):
  """A whole ladder (``test_ladder._synthetic``: VSGD-Muon 2.0, Muon 1.5 times AdamW's data
  efficiency) with every beta at every rung of the study, each beta's efficiency
  ``factor_of(size, beta)`` on the same law; its summary's recommendation and study report.
  """
  from tests.benchmarks.test_ladder import _synthetic
  factors = {"adamw": 1.0, "muon": 1.5, "normuon": 1.2, "muon_vs": 1.2, "vsgd_muon": 2.0}
  lines = _synthetic(lambda size, entry: factors[entry])
  for size, budget in protocol.MOMENTUM_RUNGS:
    params = model.count(protocol.SIZES[size])
    # Muon's (0.95's) window is 1e-2 and 1.0 there; a worse rate below closes its edge.
    lines += [{**x, "rate": 3.16e-3, "val_bits": x["val_bits"] + 0.5} for x in lines
              if (x["entry"], x["size"], x["budget"], x["rate"]) == ("muon", size, budget, 1e-2)]
    for beta in protocol.MOMENTUM_ORDER:
      for rate in protocol.window(1e-2):
        for seed in SEEDS:
          bits = (1 + 0.001 * seed + 30 * (factor_of(size, beta) * budget * params) ** -0.3
                  + (0.0 if rate == 1e-2 else 0.5))
          lines.append({"entry": protocol.momentum_entry(beta), "size": size, "params": params,
                        "budget": budget, "rate": rate, "adam_rate": 3.16e-3, "seed": seed,
                        "val_bits": bits, "test_bits": bits, "seconds": 9.0, "lanes": 9})
  held = summary.finals(lines)
  rule = summary.recommendation(held, own_best_holds=True)
  return lines, held, rule, momentum.report(lines, list(readouts), held, rule)


def test_the_study_report_pairs_vsgd_muon_with_the_best_beta_and_applies_its_rule():
  efficiency = {0.8: 1.4, 0.9: 1.7, 0.98: 1.2}  # 0.9 best, inside the grid: no growth
  lines, held, rule, found = _study(lambda size, beta: efficiency[beta])
  assert rule["s_star"] == "m" and [r["size"] for r in found["rungs"]] == ["xs", "s", "xs", "m",
                                                                          "s", "m"]
  law = lambda size, budget, f: 30 * (f * budget * model.count(protocol.SIZES[size])) ** -0.3
  for row in found["rungs"]:
    size, budget = row["size"], row["budget"]
    assert [b["beta"] for b in row["betas"]] == [0.8, 0.9, 0.95, 0.98]
    assert (row["best"]["beta"], row["best"]["rate"], row["best"]["on_edge"]) == (0.9, 1e-2, False)
    # Paired by seed, the seed's offset cancels: the differences are the law's, exactly.
    assert row["versus_tuned"]["mean"] == pytest.approx(law(size, budget, 2.0) -
                                                        law(size, budget, 1.7), abs=1e-12)
    assert row["versus_tuned"]["verdict"] == "ahead"
    assert row["tuned_gain"]["mean"] == pytest.approx(law(size, budget, 1.7) -
                                                      law(size, budget, 1.5), abs=1e-12)
  assert found["outcome"] == {"s_star": "m", "s_star_params": 436_736, "never_behind": True,
                              "best_beta": {f"{s} {b:g}": 0.9 for s, b in protocol.MOMENTUM_RUNGS},
                              "pending": []}
  assert found["hours"] == pytest.approx(3 * 6 * 9.0 / 3600)  # 3 betas a rung, 9 s a program
  assert momentum_report.outcome(found).startswith(
      "`vsgd_muon` is the default at sizes up to 436,736 parameters; beyond, Muon, with the "
      "best beta per rung (71,616 · 2.5: 0.9; 180,800 · 2.5: 0.9; 71,616 · 10: 0.9;")
  assert momentum_report.outcome(found).endswith(
      "436,736 · 10: 0.9); VSGD-Muon is behind the momentum-tuned Muon at no rung: Muon whose "
      "momentum needs no tuning")
  # A tuned Muon ahead of VSGD-Muon at the largest size: that size no longer holds.
  *_, behind = _study(lambda size, beta: 2.5 if (size, beta) == ("m", 0.9) else efficiency[beta])
  assert [r["versus_tuned"]["verdict"] for r in behind["rungs"]][3::2] == ["behind", "behind"]
  assert (behind["outcome"]["s_star"], behind["outcome"]["never_behind"]) == ("s", False)
  # A rung without its tuned Muon leaves the rule without an outcome...
  cut = [x for x in lines if not (x["entry"] == "muon_b0.98" and x["size"] == "m"
                                  and x["budget"] == 10.0)]
  assert momentum.report(cut, [], held, rule)["outcome"] is None
  assert momentum.report(cut, [], held, rule)["rungs"][-1]["best"] is None
  # ...unless the smallest size already fails, which no rung to come can change.
  early_lines, early_held, early_rule, _ = _study(
      lambda size, beta: 2.5 if (size, beta) == ("xs", 0.9) else efficiency[beta])
  early_cut = [x for x in early_lines if not (x["entry"] == "muon_b0.98" and x["size"] == "m"
                                              and x["budget"] == 10.0)]
  early = momentum.report(early_cut, [], early_held, early_rule)
  assert early["outcome"] == {"s_star": None, "s_star_params": None, "never_behind": False,
                              "best_beta": {f"{s} {b:g}": 0.9 for s, b in
                                            protocol.MOMENTUM_RUNGS[:-1]},
                              "pending": ["m 10"]}
  assert momentum_report.outcome(early) == (
      "`vsgd_muon` is the default at no size run; the pick is Muon, with the best beta per rung "
      "(71,616 · 2.5: 0.9; 180,800 · 2.5: 0.9; 71,616 · 10: 0.9; 436,736 · 2.5: 0.9; "
      "180,800 · 10: 0.9); decided before 436,736 · 10 ran, which cannot change it (the "
      "smallest size already fails)")


def test_the_read_out_summary_averages_the_seeds_and_says_how_close_it_came_to_the_ledger():
  efficiency = {0.8: 1.4, 0.9: 1.7, 0.98: 1.2}
  lines, *_ = _study(lambda size, beta: efficiency[beta])
  runs = [x for x in lines if (x["entry"], x["size"], x["budget"], x["rate"]) ==
          ("vsgd_muon", "xs", 2.5, protocol.CONTEST_RATES["vsgd_muon"])]
  readouts = [{**x, "val_bits": x["val_bits"] + 0.002 * x["seed"], "reproduces": x["seed"] == 0,
               "steps": 175, "seconds": 30.0, "lanes": 3,
               "effective_beta1": {"step": [14, 175], "q10": [0.5, 0.6 + 0.01 * x["seed"]],
                                   "median": [0.55, 0.65], "q90": [0.6, 0.7]}} for x in runs]
  *_, found = _study(lambda size, beta: efficiency[beta], readouts)
  read = found["rungs"][0]["readout"]
  assert read["end"] == pytest.approx({"q10": 0.61, "median": 0.65, "q90": 0.7})
  assert read["step"] == [14, 175] and read["reproduced"] == 1
  assert read["largest_gap"] == pytest.approx(0.004)
  assert all(r["readout"] is None for r in found["rungs"][1:])
  assert found["hours"] == pytest.approx((3 * 6 * 9.0 + 3 * 10.0) / 3600)
  row = momentum_report.table(found["rungs"]).splitlines()[2]
  assert row.startswith("| 71,616 · 2.5 | 0.8: ") and row.endswith("| 0.65 [0.61, 0.70] |")
  assert "| 0.9 (0.01): " in row
  edge = {**found["rungs"][0], "best": {**found["rungs"][0]["best"], "beta": 0.7, "on_edge": True}}
  assert "| 0.7 (edge) (0.01): " in momentum_report.table([edge])


def test_where_the_best_beta_is_0_95_the_page_gives_no_gain_over_it():
  """Muon's own beta best at a rung: the tuned Muon is Muon, and its row says so."""
  *_, found = _study(lambda size, beta: {0.8: 1.4, 0.9: 1.45, 0.98: 1.2}[beta])
  assert {row["best"]["beta"] for row in found["rungs"]} == {0.95}
  rows = momentum_report.table(found["rungs"]).splitlines()[2:]
  assert [row.split(" | ")[4] for row in rows] == ["0.95 itself"] * len(protocol.MOMENTUM_RUNGS)

"""The two experiments' pieces: the wide workloads factor what their rows say,
schedule-free VSGD is the composition the how-to describes, the state-memory
file is what its counting gives now, and the section decides as its rules say.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from benchmarks import state_memory
from benchmarks.reporting import experiments
from benchmarks.reporting import stats
from benchmarks.time_to_result import runner
from benchmarks.time_to_result import workloads
from examples import optimizers


@pytest.mark.slow  # traces every optimizer's state on the paper's models and the workloads
def test_the_state_memory_file_is_what_counting_gives_now():
  held = json.load(open(state_memory.OUT))
  now = json.loads(json.dumps({"rows": state_memory.rows(),
                               "workload_shares": state_memory.workload_shares()}))
  assert held["rows"] == now["rows"]
  assert held["workload_shares"] == now["workload_shares"]
  square = held["rows"][0]["bytes_per_param"]
  assert square["factored_vsgd"] <= 4.1 and square["factored_vsgd+bf16_mu"] <= 2.1
  assert square["vsgd"] == 12 and square["adam"] == 8


@pytest.mark.slow  # builds every workload's model
def test_no_main_workload_factors_and_every_wide_one_mostly_does():
  shares = state_memory.workload_shares()
  assert all(shares[name] == 0 for name in workloads.names())
  assert all(shares[name] > 0.5 for name in workloads.wide_names())


def test_schedule_free_vsgd_wraps_vsgd_with_a_warmup_only():
  """Under warmup + cosine it is optax's schedule_free around vsgd, both given the
  warmup alone: the same updates, step for step, as composing it by hand.
  """
  steps, peak = 40, 0.01
  warmup = optax.warmup_constant_schedule(0.0, peak, 2)  # 5% of 40 steps
  by_hand = optax.contrib.schedule_free(vsgd_optax.vsgd(warmup), warmup)
  ours = runner.make(optimizers.REGISTRY["schedule_free_vsgd"], peak, "warmup_cosine", steps)
  params = {"w": jnp.linspace(-1.0, 1.0, 6)}
  states = [by_hand.init(params), ours.init(params)]
  for i in range(steps):
    grads = {"w": jnp.sin(jnp.arange(6.0) + i) + params["w"]}
    (u1, states[0]), (u2, states[1]) = (opt.update(grads, s, params)
                                        for opt, s in zip((by_hand, ours), states, strict=True))
    np.testing.assert_array_equal(u1["w"], u2["w"])
    params = optax.apply_updates(params, u1)
  with pytest.raises(ValueError, match="takes no 'step' schedule"):
    runner.make(optimizers.REGISTRY["schedule_free_vsgd"], peak, "step", steps)


def test_vsgds_mean_keeps_about_six_tenths_of_its_past_on_the_mlp():
  """The how-to's reason for trying a shorter mean under schedule-free: VSGD's
  learned weight on the past (effective_beta1) on the MLP workload.
  """
  w = workloads.build("mlp")
  params, aux = w.init(jax.random.key(0))
  opt = vsgd_optax.vsgd(0.00316)
  state = opt.init(params)

  @jax.jit
  def step(params, aux, state, key):
    (_, aux), grads = jax.value_and_grad(w.loss, has_aux=True)(params, aux, w.data, key)
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), aux, state
  for t in range(1000):
    params, aux, state = step(params, aux, state, jax.random.key(t))
  beta1 = np.concatenate([np.ravel(x) for x in
                          jax.tree.leaves(vsgd_optax.effective_beta1(state))])
  assert 0.55 <= np.median(beta1) <= 0.7


def _payload(name, values, higher_is_better=True):
  entries = {n: {"test": list(v), "seeds": list(range(len(v))), "test_mean": float(np.mean(v))}
             for n, v in values.items()}
  return {"workload": {"name": name, "higher_is_better": higher_is_better},
          "entries": entries}


# Margins for the made-up workloads, in their values' units.
DECLARED = {n: 0.5 for n in ("mlp", "diabetes", "logreg", "charlm", "convmixer",
                             "w1", "w2", "w3", "w4")}


def test_the_factored_rule_counts_only_workloads_where_it_factors():
  noise = np.array([0.1, -0.2, 0.05, 0.0, 0.15, -0.1, 0.2, -0.05, 0.1, -0.15])
  main = {n: _payload(n, {"vsgd": 90 + noise, "factored_vsgd": 90 + noise, "adam": 89 + noise})
          for n in ("mlp", "diabetes", "logreg", "charlm", "convmixer")}
  def wide(name, offset):
    return _payload(name, {"vsgd": 90 + noise, "factored_vsgd": 90 + offset + noise[::-1],
                           "adam": 89 + noise})
  memory = {"rows": [{"title": "1024 x 1024 matrix", "bytes_per_param": {"factored_vsgd": 4.02}},
                     {"title": "vgg16", "bytes_per_param": {"factored_vsgd": 4.13}}]}
  names = ("w1", "w2", "w3", "w4")
  shares = dict.fromkeys(names, 0.8)
  # five trivial ties and three real ones: not the rule's four
  rows = experiments.factored_rows(main, {n: wide(n, 0) for n in names[:3]}, shares, DECLARED)
  found = experiments.factored_outcome(rows, memory)
  # the reversed noise: 0 [-0.16, +0.16] against a margin of 0.5, equivalent
  assert found["status"] == "experimental"
  assert found["why"].startswith("3 wins or equivalents against `vsgd` of the 4 needed, on "
                                 "the 3 workloads that factor")
  assert found["result"] == "equivalent on w1, w2 and w3 (where it factors); 4.02 B/param at " \
      "1024 x 1024"
  # four real equivalents: met
  rows = experiments.factored_rows(main, {n: wide(n, 0) for n in names}, shares, DECLARED)
  assert experiments.factored_outcome(rows, memory)["status"] == "public API"
  # ... but not at more bytes than the rule allows
  heavy = {"rows": [{"title": "1024 x 1024", "bytes_per_param": {"factored_vsgd": 4.2}}]}
  assert experiments.factored_outcome(rows, heavy)["status"] == "experimental"
  # a loss where it factors is named
  rows = experiments.factored_rows(main, {"w1": wide("w1", 0), "w2": wide("w2", -2)}, shares,
                                   DECLARED)
  found = experiments.factored_outcome(rows, memory)
  assert found["result"].startswith("equivalent on w1; lost on w2 (where it factors)")
  assert found["why"].startswith("1 wins or equivalents")
  assert stats.verdict(rows[-1]["vsgd"]["comparison"], True, 0.5) == "loss"
  # an interval that holds 0 and reaches past the margin does not count for the rule
  rows = experiments.factored_rows(main, {"w1": wide("w1", 0)}, shares, {**DECLARED, "w1": 0.1})
  assert rows[-1]["vsgd"]["verdict"] == "inconclusive"
  found = experiments.factored_outcome(rows, memory)
  assert found["result"].startswith("inconclusive on w1") and found["why"].startswith("0 wins")


def test_the_vsgd_muon_rule_follows_its_declaration_and_waits_for_the_char_lm():
  noise = np.array([0.1, -0.2, 0.05, 0.0, 0.15, -0.1, 0.2, -0.05, 0.1, -0.15])

  def workload(name, offset, higher_is_better=True):
    return _payload(name, {"vsgd_muon": 90 + offset + noise[::-1], "muon": 90 + noise},
                    higher_is_better)
  # The reversed noise alone: 0 [-0.16, +0.16], inside the 0.5 margin; an offset of
  # -2 (higher is better) is a loss, [-2.16, -1.84].
  main = {"mlp": workload("mlp", 0), "diabetes": workload("diabetes", -2)}
  rows = experiments.vsgd_muon_rows(main, DECLARED)
  assert [r["muon"]["verdict"] for r in rows] == ["equivalent", "loss"]
  found = experiments.vsgd_muon_outcome(rows)
  assert (found["status"], found["result"]) == ("not decided",
                                                "equivalent on MLP; lost on diabetes")
  assert found["why"] == "no char LM run yet of both, and the rule needs one"
  # The char LM equivalent and one other equivalent: worth trying, named first.
  main["charlm"] = workload("charlm", 0, higher_is_better=False)
  found = experiments.vsgd_muon_outcome(experiments.vsgd_muon_rows(main, DECLARED))
  assert found["status"] == "worth trying (in `experimental`)"
  assert found["result"] == "equivalent on char LM and MLP; lost on diabetes"
  assert found["why"] == "it holds on char LM and MLP"
  # The contest's row, where given, stands in for the main protocol's char LM.
  contest_lm = {**workload("contest_cpu", 2, higher_is_better=False), "is_charlm": True}
  given = {"payload": contest_lm, "is_charlm": True,
           "muon": experiments.comparison(contest_lm, "vsgd_muon", "muon",
                                          {**DECLARED, "contest_cpu": 0.5})}
  rows = experiments.vsgd_muon_rows(main, DECLARED, given)
  assert [r["payload"]["workload"]["name"] for r in rows] == ["contest_cpu", "mlp", "diabetes"]
  found = experiments.vsgd_muon_outcome(rows)
  assert (found["status"], found["why"]) == ("experimental", "it lost on the char LM")
  # A loss on the char LM (lower is better, +2 bits): it stays experimental.
  main["charlm"] = workload("charlm", 2, higher_is_better=False)
  found = experiments.vsgd_muon_outcome(experiments.vsgd_muon_rows(main, DECLARED))
  assert (found["status"], found["why"]) == ("experimental", "it lost on the char LM")
  # A win on the char LM but nothing held elsewhere: it stays experimental.
  main = {"charlm": workload("charlm", -2, higher_is_better=False),
          "mlp": workload("mlp", -2)}
  found = experiments.vsgd_muon_outcome(experiments.vsgd_muon_rows(main, DECLARED))
  assert (found["status"], found["why"]) == (
      "experimental", "no win or equivalent on another matrix workload")
  # Where muon did not run, there is no row.
  del main["mlp"]["entries"]["muon"]
  assert [r["payload"]["workload"]["name"]
          for r in experiments.vsgd_muon_rows(main, DECLARED)] == ["charlm"]

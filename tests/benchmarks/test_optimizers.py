"""The benchmarks' table of optimizers (``benchmarks.optimizers.REGISTRY``) and the
reporting's styles: every name a benchmark or a result file uses has its row and
its style, each result keeps its label, and the trainer's optimizers of the same
names are the same optimizers.
"""

import glob
import json
import os

import chex
import jax
import jax.numpy as jnp
import optax
import pytest
from matplotlib import colors

from benchmarks import optimizers
from benchmarks.reporting import styles
from tests.support import REPOSITORY

RESULTS = os.path.join(REPOSITORY, "benchmarks", "results")


def test_every_result_file_names_registered_optimizers_with_their_labels():
  """A result file's optimizer names are the table's keys, and the label it wrote
  is the table's today: renaming or relabelling one breaks this.
  """
  seen = 0
  for path in glob.glob(os.path.join(RESULTS, "**", "ttr_*.json"), recursive=True):
    with open(path) as f:
      payload = json.load(f)
    entries = payload.get("entries") if isinstance(payload, dict) else None
    for name, entry in (entries if isinstance(entries, dict) else {}).items():
      assert name in optimizers.REGISTRY, (path, name)
      assert entry["label"] == optimizers.REGISTRY[name].label, (path, name)
      seen += 1
  assert seen >= 100


def _result_names() -> set[str]:
  """Every optimizer name in the committed results: each ``entries`` key, each row's
  ``optimizer``, each ledger line's ``entry``.
  """
  found: set[str] = set()

  def walk(value):
    if isinstance(value, dict):
      if isinstance(value.get("entries"), dict):
        found.update(value["entries"])
      if isinstance(value.get("optimizer"), str):
        found.add(value["optimizer"])
      for v in value.values():
        walk(v)
    elif isinstance(value, list):
      for v in value:
        walk(v)
  for path in glob.glob(os.path.join(RESULTS, "**", "*.json"), recursive=True):
    with open(path) as f:
      walk(json.load(f))
  for path in glob.glob(os.path.join(RESULTS, "**", "*.jsonl"), recursive=True):
    with open(path) as f:
      found.update(e for line in f if (e := json.loads(line).get("entry")) is not None)
  return found


def test_every_name_anywhere_is_in_the_one_table_and_every_row_is_used():
  from benchmarks.contest import entries as contest_entries
  from benchmarks.contest import protocol as contest_protocol
  from benchmarks.cost import compile as compile_time
  from benchmarks.cost import floor
  from benchmarks.cost import memory
  from benchmarks.cost import muon_family
  from benchmarks.cost import step
  from benchmarks.ladder import protocol as ladder_protocol
  from benchmarks.time_to_result import protocol as ttr
  sizings = [*ttr.SIZINGS.values(), ttr.LONG_HORIZON, ttr.WIDE]
  lists = {
      "contest": [*contest_entries.ENTRIES, *contest_protocol.ORDER],
      "cost": [*step.OPTIMIZERS, *step.PAIRED.values(), *compile_time.STATES,
               *floor.FLOOR_BYTES, *memory.OPTIMIZERS, *muon_family.NAMES],
      "time_to_result": [n for s in sizings
                         for n in (*s.entries, *(n for e in s.entries_on.values() for n in e))]
      + [n for pair in {**ttr.SAME_RATE, **ttr.WIDE_SAME_RATE}.items() for n in pair],
      "ladder": [*ladder_protocol.ENTRIES, *ladder_protocol.MOMENTUM_ENTRIES,
                 *ladder_protocol.VARIANTS],
      "committed results": _result_names(),
  }
  missing = {where: sorted(set(names) - set(optimizers.REGISTRY))
             for where, names in lists.items() if set(names) - set(optimizers.REGISTRY)}
  assert missing == {}
  used = set().union(*(set(names) for names in lists.values()))
  assert set(optimizers.REGISTRY) - used == set()


def test_each_row_has_a_base_in_the_table_and_a_style_of_its_own():
  for name, row in optimizers.REGISTRY.items():
    assert row.base is None or row.base in optimizers.REGISTRY, name
  assert optimizers.root("vsgd_muon_factored") == "vsgd" and optimizers.root("adam") == "adam"
  assert styles.ORDER == optimizers.ORDER
  # As drawn: "C8" and "#bcbd22" are one colour.
  pairs = [(colors.to_hex(style.colour), style.line) for style in styles.STYLES.values()]
  assert len(set(pairs)) == len(pairs)
  assert len({style.short for style in styles.STYLES.values()}) == len(styles.STYLES)
  with pytest.raises(KeyError, match="adagrad"):
    optimizers.row("adagrad")
  with pytest.raises(KeyError, match="adagrad"):
    styles.style("adagrad")


def _updates(opt, steps=3):
  params = {"kernel": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "bias": jnp.full((4,), 0.5)}
  state, out = opt.init(params), []
  for step in range(steps):
    grads = jax.tree.map(lambda p, step=step: jnp.cos(p * (step + 1.0)) + 0.1 * p, params)
    updates, state = opt.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out


@pytest.mark.parametrize("name", ["vsgd", "constant_vsgd", "factored_vsgd", "adam", "adamw",
                                  "lion", "muon", "adafactor+momentum"])
def test_the_trainers_optimizer_of_the_same_name_is_the_same_optimizer(name):
  """The example trainer builds what the benchmarks measured: at its defaults, and
  AdamW at optax's default decay (1e-4), which the benchmarks run it at.
  """
  from examples import optimizers as trainer
  weight_decay = 1e-4 if name == "adamw" else 0.0
  chex.assert_trees_all_equal(_updates(optimizers.REGISTRY[name].build(0.01)),
                              _updates(trainer.create_optimizer(name, 0.01, weight_decay)))


@pytest.mark.parametrize("name, factoring", [("vsgd_muon", {"min_dim_size_to_factor": None}),
                                             ("vsgd_muon_factored", {})])
def test_the_trainers_vsgd_muon_is_the_packages_and_the_benchmarks_ran_its_adamw_part_at_a_tenth(
    name, factoring):
  """The trainer builds ``vsgd_muon`` at today's defaults; the benchmarks' entries of
  that name keep the AdamW part at the tenth of the rate their results were run with.
  """
  import vsgd_optax
  from examples import optimizers as trainer
  chex.assert_trees_all_equal(_updates(trainer.create_optimizer(name, 0.01, 0.0)),
                              _updates(vsgd_optax.vsgd_muon(0.01, **factoring)))
  chex.assert_trees_all_equal(
      _updates(optimizers.REGISTRY[name].build(0.01)),
      _updates(vsgd_optax.vsgd_muon(0.01, adam_learning_rate=0.1 * 0.01, **factoring)))
  # The two differ on the vector, which the AdamW part steps.
  trainers, benchmarks = (_updates(build(0.01), steps=1)[0]["bias"] for build in (
      lambda lr: trainer.create_optimizer(name, lr, 0.0), optimizers.REGISTRY[name].build))
  chex.assert_trees_all_close(trainers, 10 ** 0.5 * benchmarks, rtol=1e-5)


def _two_lm_steps(build):
  """Two updates of ``build(schedule, adam_schedule)`` on the ladder's toy LM, jitted."""
  from benchmarks.ladder import protocol
  from benchmarks.lm import model
  params = model.init(jax.random.key(0), protocol.TOY)
  opt = build(lambda count: 0.02 * (count + 1.0), lambda count: 0.002 * (count + 1.0))
  state, out = opt.init(params), []
  for k in (1, 2):
    grads = jax.tree.map(lambda p, k=k: jax.random.normal(jax.random.key(k), p.shape), params)
    updates, state = jax.jit(opt.update)(grads, state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out


def _spelled_out(adamw: dict, matrices: dict, vsgd_muon: dict) -> dict:
  """Each LM entry of a study spelled out with optax and vsgd_optax alone, as the studies
  built them before their builders joined the one table.
  """
  import vsgd_optax
  from benchmarks.lm import model
  from benchmarks.lm import muon_vs
  from benchmarks.lm import normuon
  mask = lambda p: jax.tree.map(lambda leaf: leaf.ndim == 2, p)
  part = lambda s: optax.adamw(s, **adamw, mask=mask)
  kernels = lambda p: jax.tree.map(
      lambda label: optax.contrib.MuonDimensionNumbers() if label == "matrices" else None,
      model.matrix_labels(p))

  def partition(matrix_optimizer):
    return lambda s, a: optax.multi_transform(
        {"matrices": matrix_optimizer(s, **matrices), "adamw": part(a)}, model.matrix_labels)

  def vsgd(**settings):
    return lambda s, a: vsgd_optax.vsgd_muon(s, muon_weight_dimension_numbers=kernels,
                                             adam_learning_rate=a, **{**settings, **vsgd_muon})
  return {"adamw": lambda s, a: part(a), "muon": partition(optax.contrib.muon),
          "normuon": partition(normuon.normuon), "muon_vs": partition(muon_vs.muon_vs),
          "vsgd_muon": vsgd(min_dim_size_to_factor=None),
          "vsgd_muon_factored": vsgd(min_dim_size_to_factor=128),
          "vsgd_muon_nesterov": vsgd(nesterov=True)}


def test_the_ladders_entries_are_their_spelled_out_optimizers_bit_for_bit():
  from benchmarks.ladder import entries
  adamw = {"b1": 0.9, "b2": 0.95, "eps": 1e-8, "weight_decay": 0.1}
  want = _spelled_out(adamw, {"weight_decay": 0.1}, {
      "min_dim_size_to_factor": 2, "weight_decay": 0.1, "adam_b1": 0.9, "adam_b2": 0.95,
      "adam_eps": 1e-8, "adam_weight_decay": 0.1,
      "adam_weight_decay_mask": lambda p: jax.tree.map(lambda leaf: leaf.ndim == 2, p)})
  for entry in ("adamw", "muon", "normuon", "muon_vs", "vsgd_muon", "vsgd_muon_nesterov"):
    chex.assert_trees_all_equal(_two_lm_steps(entries.builder(entry)),
                                _two_lm_steps(want[entry]))


def test_the_contests_entries_are_their_spelled_out_optimizers_bit_for_bit():
  from benchmarks.contest import entries
  want = _spelled_out({"weight_decay": 0.1}, {}, {})
  tenth = lambda build: (lambda s, a: build(s, lambda count: 0.1 * s(count)))
  for name in ("muon", "normuon", "vsgd_muon", "vsgd_muon_factored"):
    chex.assert_trees_all_equal(
        _two_lm_steps(lambda s, a, name=name: entries.ENTRIES[name].build(s)),
        _two_lm_steps(tenth(want[name])))
  # AdamW at its own rate; Adam and VSGD on every leaf, at optax's and the library's defaults.
  chex.assert_trees_all_equal(
      _two_lm_steps(lambda s, a: entries.ENTRIES["adamw"].build(s)),
      _two_lm_steps(lambda s, a: want["adamw"](s, s)))
  import vsgd_optax
  for name, by_hand in (("adam", optax.adam), ("vsgd", vsgd_optax.vsgd)):
    chex.assert_trees_all_equal(_two_lm_steps(lambda s, a, n=name: entries.ENTRIES[n].build(s)),
                                _two_lm_steps(lambda s, a, b=by_hand: b(s)))


def test_a_name_without_an_lm_form_is_refused_in_one_line_that_names_the_fix():
  with pytest.raises(KeyError, match="'lion' has no form on the LM .* give its row an lm"):
    optimizers.lm_builder("lion")
  assert optimizers.lm_builder("muon") is optimizers.REGISTRY["muon"].lm

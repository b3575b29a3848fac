"""The one optimizer registry (``examples.optimizers.REGISTRY``): what the
trainer builds from it, and that the benchmarks' result files name only its
optimizers, each with its label.
"""

import glob
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from examples import optimizers
from examples.errors import ConfigError

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _params():
  return {"kernel": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "bias": jnp.full((4,), 0.5)}


def _grads(step):
  return jax.tree.map(lambda p: jnp.cos(p * (step + 1.0)) + 0.1 * p, _params())


def _updates(opt, steps=3):
  params, state, out = _params(), opt.init(_params()), []
  for step in range(steps):
    updates, state = opt.update(_grads(step), state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out


@pytest.mark.parametrize("name", optimizers.OPTIMIZERS)
def test_every_trainer_optimizer_builds_and_steps_with_the_configs_settings(name):
  settings = optimizers.REGISTRY[name].settings
  weight_decay = 1e-4 if "weight_decay" in settings else 0.0
  opt = optimizers.create_optimizer(name, 0.01, weight_decay, 0.9, variance_ratio=30.0,
                                    prior_strength=1e-8, kappa_g=0.81, kappa_ghat=0.9,
                                    state_dtype=jnp.dtype("float32"),
                                    state_rounding="stochastic")
  for updates in _updates(opt):
    for leaf in jax.tree.leaves(updates):
      assert np.all(np.isfinite(leaf)) and np.any(leaf != 0), name


def test_the_trainers_vsgd_is_the_librarys_with_the_settings_it_was_given():
  ours = optimizers.create_optimizer("vsgd", 0.01, 1e-3, variance_ratio=10.0, kappa_g=0.5)
  want = vsgd_optax.vsgd(0.01, variance_ratio=10.0, kappa_g=0.5, weight_decay=1e-3)
  for a, b in zip(_updates(ours), _updates(want), strict=True):
    jax.tree.map(np.testing.assert_array_equal, a, b)


def test_constant_vsgd_takes_kappa_ghat_as_its_one_kappa_and_ignores_kappa_g():
  ours = optimizers.create_optimizer("constant_vsgd", 0.01, kappa_g=0.1, kappa_ghat=0.5)
  want = vsgd_optax.constant_vsgd(0.01, kappa=0.5)
  default = vsgd_optax.constant_vsgd(0.01)
  got, expected, other = _updates(ours), _updates(want), _updates(default)
  for a, b in zip(got, expected, strict=True):
    jax.tree.map(np.testing.assert_array_equal, a, b)
  assert not np.array_equal(got[-1]["kernel"], other[-1]["kernel"])


def test_the_trainers_sgd_adds_l2_decay_and_momentum():
  opt = optimizers.create_optimizer("sgd", 0.1, weight_decay=0.5, momentum=0.0)
  params = _params()
  updates, _ = opt.update(_grads(0), opt.init(params), params)
  want = jax.tree.map(lambda g, p: -0.1 * (g + 0.5 * p), _grads(0), params)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), updates, want)


def test_a_weight_decay_is_refused_where_the_optimizer_takes_none():
  with pytest.raises(ConfigError, match=r"optimizer adam takes no weight decay \(got 0.1\).*"
                                        r"adamw: Adam with decoupled weight decay"):
    optimizers.check_weight_decay("adam", 0.1)
  with pytest.raises(ConfigError, match="optimizer muon takes no weight decay"):
    optimizers.create_optimizer("muon", 0.01, weight_decay=0.1)
  optimizers.check_weight_decay("adamw", 0.1)
  optimizers.check_weight_decay("adam", 0.0)
  with pytest.raises(ConfigError, match="unknown optimizer 'adagrad'; choose one of: vsgd"):
    optimizers.create_optimizer("adagrad", 0.01)


def test_every_result_file_names_registered_optimizers_with_their_labels():
  """A result file's optimizer names are the registry's keys, and the label it
  wrote is the registry's today: renaming or relabelling one breaks this.
  """
  seen = 0
  for path in glob.glob(os.path.join(REPOSITORY, "benchmarks", "results", "**", "ttr_*.json"),
                        recursive=True):
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
  results = os.path.join(REPOSITORY, "benchmarks", "results")
  for path in glob.glob(os.path.join(results, "**", "*.json"), recursive=True):
    with open(path) as f:
      walk(json.load(f))
  for path in glob.glob(os.path.join(results, "**", "*.jsonl"), recursive=True):
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
  from benchmarks.time_to_result import protocol as ttr
  sizings = [*ttr.SIZINGS.values(), ttr.LONG_HORIZON, ttr.WIDE]
  lists = {
      "trainer": optimizers.OPTIMIZERS, "contest": [*contest_entries.ENTRIES,
                                                    *contest_protocol.ORDER],
      "cost": [*step.OPTIMIZERS, *step.PAIRED.values(), *compile_time.STATES,
               *floor.FLOOR_BYTES, *memory.OPTIMIZERS, *muon_family.NAMES],
      "time_to_result": [n for s in sizings
                         for n in (*s.entries, *(n for e in s.entries_on.values() for n in e))]
      + [n for pair in {**ttr.SAME_RATE, **ttr.WIDE_SAME_RATE}.items() for n in pair],
      "committed results": _result_names(),
  }
  missing = {where: sorted(set(names) - set(optimizers.REGISTRY))
             for where, names in lists.items() if set(names) - set(optimizers.REGISTRY)}
  assert missing == {}
  used = set().union(*(set(names) for names in lists.values()))
  assert set(optimizers.REGISTRY) - used == set()


def test_each_row_has_a_base_in_the_table_and_a_line_of_its_own():
  for name, row in optimizers.REGISTRY.items():
    assert row.base is None or row.base in optimizers.REGISTRY, name
  assert optimizers.root("vsgd_muon_factored") == "vsgd" and optimizers.root("adam") == "adam"
  pairs = [(row.colour, row.line) for row in optimizers.REGISTRY.values()]
  assert len(set(pairs)) == len(pairs)
  with pytest.raises(KeyError, match="examples/optimizers.py's REGISTRY"):
    optimizers.row("adagrad")
  with pytest.raises(ConfigError, match="built by the contest alone"):
    optimizers.create_optimizer("normuon", 0.01)

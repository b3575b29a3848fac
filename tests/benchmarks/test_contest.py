"""The contest's runner: its model, its pinned corpus and split, NorMuon against its
equations, the declared rate rule, the per-entry ledger, and the whole path at the
smoke size (every entry it names trains, the result file holds what the pages read,
and a second run resumes from the ledger without training).
"""

import json
import os
import zipfile

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import common
from benchmarks import ledger as ledgers
from benchmarks import study_runner
from benchmarks.contest import entries
from benchmarks.contest import protocol
from benchmarks.contest import run
from benchmarks.lm import corpus
from benchmarks.lm import model
from benchmarks.lm import normuon
from benchmarks.lm import train
from tests.support import reference


def test_every_projection_is_a_2d_kernel_and_muon_steps_only_the_hidden_ones():
  size = model.Size(width=16, layers=2, heads=2, context=8, batch=2)
  params = model.init(jax.random.key(0), size)
  labels = jax.tree.leaves(model.matrix_labels(params))
  leaves = jax.tree.leaves(params)
  hidden = [leaf for leaf, label in zip(leaves, labels, strict=True) if label == "matrices"]
  # query, key, value, out, up and down of each block: 6 kernels a layer.
  assert len(hidden) == 6 * size.layers and all(leaf.ndim == 2 for leaf in hidden)
  for name in model.ADAMW_MATRICES:
    assert model.matrix_labels(params)[name] == "adamw" and params[name].ndim == 2
  assert model.count(size) == sum(leaf.size for leaf in leaves)
  # The LM is causal: a later character does not change an earlier prediction.
  tokens = jnp.arange(8)[None] % model.VOCAB
  changed = tokens.at[0, 5].set(99)
  a, b = (model.logits(params, t, size.heads) for t in (tokens, changed))
  np.testing.assert_allclose(a[0, :5], b[0, :5], rtol=1e-6)
  assert not np.allclose(a[0, 5:], b[0, 5:])


def test_a_wheel_with_another_checksum_is_refused_in_one_line(tmp_path):
  with zipfile.ZipFile(tmp_path / corpus.DJANGO.filename, "w") as archive:
    archive.writestr("django/__init__.py", "VERSION = (5, 1, 4)\n")
  with pytest.raises(corpus.CorpusError) as raised:
    corpus.wheel(tmp_path, fetch=False)
  message = str(raised.value)
  assert "\n" not in message and corpus.sha256_of(tmp_path / corpus.DJANGO.filename) in message
  assert f"not the pinned {corpus.DJANGO.sha256} of django 5.1.4" in message
  with pytest.raises(corpus.CorpusError, match="does not exist"):
    corpus.wheel(tmp_path / "empty", fetch=False)


def test_the_pinned_corpus_splits_by_file_and_every_character_of_val_and_test_is_scored():
  found = corpus.sources(corpus.wheel())
  assert len(found) == 879 and [n for n, _ in found] == sorted(n for n, _ in found)
  split = corpus.split_tenths(found)
  names = {k: {n for n, _ in v} for k, v in split.items()}
  assert [len(names[k]) for k in ("train", "val", "test")] == [705, 87, 87]
  assert not (names["train"] & names["val"] or names["train"] & names["test"]
              or names["val"] & names["test"])
  data = corpus.django_splits(context=64)
  for name in ("val", "test"):
    record = data["records"][name]
    chars = sum(len(text) + 1 for _, text in split[name])
    assert record["files"] == record["files_scored"] == 87
    assert record["chars_scored"] == chars == int(data[f"{name}_scored"].sum())
    assert 0 < record["largest_file_share"] < 0.2
  assert data["records"]["train"]["chars"] == len(data["train"]) > 4_000_000


def test_tiled_windows_score_each_character_once_and_mask_only_the_padding():
  text = (np.arange(100) % 128).astype(np.uint8)
  windows, scored = corpus.tiled_windows(text, context=16)
  assert windows.shape == (7, 17) and scored.sum() == 99  # all but the first character
  np.testing.assert_array_equal(windows[1, 0], windows[0, -1])  # overlap by one
  targets = windows[:, 1:][scored]
  np.testing.assert_array_equal(targets, text[1:])
  assert not scored[-1, 3:].any() and scored[-1, :3].all()  # 96 + 3 = 99
  records = corpus.split_records([40, 59], scored, 16)  # two files after the lead character
  assert records == {"files": 2, "files_scored": 2, "chars_scored": 99,
                     "largest_file_share": round(59 / 99, 4)}


def test_normuon_matches_its_equations_in_float64():
  rng = np.random.default_rng(0)
  for shape in ((6, 4), (4, 9)):
    grads = [rng.normal(size=shape) for _ in range(5)]
    want = reference.normuon_steps(grads)
    with jax.enable_x64(True):
      opt = normuon.scale_by_normuon()
      state = opt.init(jnp.zeros(shape, jnp.float64))
      for g, expected in zip(grads, want, strict=True):
        step, state = opt.update(jnp.asarray(g), state)
        np.testing.assert_allclose(step, expected, rtol=1e-9, atol=1e-12)
    assert state.nu.shape == (1, shape[1]) and int(state.count) == 5
  # Each output neuron's step is divided by its own running root mean square.
  assert not np.allclose(np.sqrt(np.mean(want[-1] ** 2, 0)), np.sqrt(np.mean(want[-1] ** 2)))
  with pytest.raises(ValueError, match="'b'"):
    normuon.scale_by_normuon().init({"b": jnp.zeros(3)})


def test_the_rate_rule_grows_half_decades_then_adds_the_quarters():
  window = protocol.WINDOWS["adam"]
  assert protocol.next_rates(window, window[-1]) == (*window, 0.0316)
  assert protocol.next_rates(window, window[0]) == (0.000316, *window)
  assert protocol.next_rates(window, window[1]) == window
  full = protocol.RATE_GRID[:protocol.MAX_RATES]
  assert protocol.next_rates(full, full[-1]) == full
  assert protocol.quarter_rates(0.01) == (0.00562, 0.0178)
  assert protocol.quarter_rates(0.0316) == (0.0178, 0.0562)
  # Every entry starts from as many half-decade rates, and the order names them all.
  assert {len(w) for w in protocol.WINDOWS.values()} == {3}
  assert sorted(protocol.ORDER) == sorted(entries.ENTRIES) == sorted(protocol.WINDOWS)
  assert set(protocol.DECIDING) <= set(protocol.ORDER)
  # The family names entries that run, and its references are baselines or ours.
  for name, other in protocol.FAMILY:
    assert name in protocol.OURS and (other == protocol.BEST or other in protocol.ORDER)


def test_one_program_trains_a_grid_and_a_seed_gives_the_same_run_in_any_grid():
  size = protocol.SIZES["smoke"]["size"]
  splits = corpus.django_splits(size.context, files=60)
  build = entries.ENTRIES["adam"].build
  grid = train.train_drawn(build, size, 8, [1e-3, 1e-2], [3, 3], splits)
  alone = train.train_drawn(build, size, 8, [1e-2], [3], splits)
  assert grid["train_loss"].shape == (2, train.CURVE_POINTS) and grid["val"].shape == (2,)
  np.testing.assert_allclose(grid["test"][1], alone["test"][0], rtol=1e-5)
  assert grid["test"][0] != grid["test"][1]


def test_a_baselines_digest_leaves_out_the_package_and_a_changed_entry_is_refused(tmp_path):
  root = tmp_path / "checkout"
  for pattern in entries.SHARED_SOURCES + entries.VSGD_SOURCES + entries.BASELINE_SOURCES:
    if "*" not in pattern:
      (root / pattern).parent.mkdir(parents=True, exist_ok=True)
      (root / pattern).write_text(pattern)
  (root / "vsgd_optax").mkdir()
  (root / "vsgd_optax" / "core.py").write_text("one")
  before = {n: run.source_digest(n, str(root)) for n in ("adam", "vsgd")}
  (root / "vsgd_optax" / "core.py").write_text("two")
  assert run.source_digest("adam", str(root)) == before["adam"]
  assert run.source_digest("vsgd", str(root)) != before["vsgd"]
  # A ledger checks each run against its own entry's digest.
  path = str(tmp_path / "runs" / "cpu.jsonl")
  one = {"val": np.ones(1), "test": np.ones(1), "train_loss": np.ones((1, 2))}
  with ledgers.Ledger(path, {"steps": 1}, source=before) as book:
    study_runner.train_rates(book, "adam", lambda lrs, seeds: one, [0.01], [0])
    study_runner.train_rates(book, "vsgd", lambda lrs, seeds: one, [0.01], [0])
  changed = {**before, "vsgd": "another"}
  with pytest.raises(ledgers.LedgerError, match="vsgd"):
    with ledgers.Ledger(path, {"steps": 1}, source=changed):
      pass
  with ledgers.Ledger(path, {"steps": 1}, source=changed, across_code=True) as book:
    assert book.held("adam", 0, 0.01) is not None and len(book.sources) == 2


@pytest.mark.slow
def test_the_smoke_contest_runs_writes_its_result_and_resumes(tmp_path, monkeypatch):
  names = ["adam", "vsgd_muon"]  # an AdamW and a Muon-family entry take every path
  result = run.run("smoke", names, folder=str(tmp_path))
  with open(run.result_path(str(tmp_path), "smoke")) as f:
    written = json.load(f)
  assert written["entries"].keys() == set(names)
  for name in names:
    e = written["entries"][name]
    assert e["chosen_rate"] in e["rates"] and e["seeds"] == list(protocol.SIZES["smoke"]["seeds"])
    assert e["val_mean"] == pytest.approx(min(e["val_by_rate"]))
    # The quarter decades beside the best half decade ran.
    assert set(protocol.quarter_rates(e["best_half_decade"])) <= set(e["rates"])
    assert e["source"] == run.source_digest(name)
  splits = written["workload"]["splits"]
  assert splits["test"]["files"] == splits["test"]["files_scored"] == 6
  assert written["workload"]["corpus"]["sha256"] == corpus.DJANGO.sha256
  # A second run reads every run from the ledger: nothing trains.
  monkeypatch.setattr(train, "train_drawn", lambda *a, **k: pytest.fail("trained again"))
  again = run.run("smoke", names, folder=str(tmp_path))
  for name in names:
    assert again["entries"][name]["test"] == result["entries"][name]["test"]
  assert again["machines"] == [common.machine()]
  # Resumed on another machine: both are kept, in the order they ran.
  other = {**common.machine(), "cpu": "another processor"}
  monkeypatch.setattr(common, "machine", lambda: other)
  moved = run.run("smoke", names[:1], folder=str(tmp_path))
  assert moved["machines"] == [written["machine"], other] and moved["machine"] == other
  assert os.path.exists(os.path.join(str(tmp_path), "runs", "smoke.jsonl"))


def _howto_namespace() -> dict:
  """The how-to's VSGD-Muon block, run as the doctest runs it."""
  import re

  from tests.support import REPOSITORY
  with open(os.path.join(REPOSITORY, "docs", "howto.md")) as f:
    text = f.read()
  section = text[text.index("## VSGD-Muon in one call"):]
  block = re.search(r"```\{testcode\}\n(.*?)```", section, re.S).group(1)
  import optax

  import vsgd_optax
  namespace = {"jax": jax, "jnp": jnp, "optax": optax, "vsgd_optax": vsgd_optax}
  exec(compile(block, "docs/howto.md", "exec"), namespace)  # noqa: S102  (the docs' own code)
  return namespace


def test_the_howtos_vsgd_muon_is_the_contests_promoted_entry_but_for_the_adamw_parts_rate():
  """The how-to builds VSGD-Muon in one call; on the contest's CPU-size model
  (whose kernels are long enough to factor) it steps exactly as Muon's users
  would build it by hand: a multi_transform with AdamW at 10**-0.5 of the rate on
  the embedding, the positions and the head. The contest's promoted entry,
  factored rates, is the same by hand with AdamW at a tenth of the rate, as the
  contest ran it; the two differ in that part alone.
  """
  import optax

  import vsgd_optax
  from benchmarks import optimizers
  recipe = _howto_namespace()["vsgd_muon_recipe"]
  size = protocol.SIZES["cpu"]["size"]
  params = model.init(jax.random.key(0), size)
  schedule = lambda count: 0.03 * train.schedule_shape(20)(count)
  by_hand = optax.multi_transform(
      {"matrices": vsgd_optax.vsgd_muon(schedule),
       "adamw": optimizers.adamw_part(lambda count: 10 ** -0.5 * schedule(count),
                                      entries.RECIPE)},
      model.matrix_labels)
  built = {"howto": recipe(schedule), "by hand": by_hand,
           "entry": entries.ENTRIES["vsgd_muon_factored"].build(schedule),
           "entry by hand": optax.multi_transform(
               {"matrices": vsgd_optax.vsgd_muon(schedule),
                "adamw": optimizers.adamw_part(lambda count: 0.1 * schedule(count),
                                               entries.RECIPE)}, model.matrix_labels)}
  states = {name: opt.init(params) for name, opt in built.items()}
  # Every hidden kernel keeps factored rates, the public default.
  rates = jax.tree.leaves(states["howto"].inner_states["muon"].inner_state[0].b_g,
                          is_leaf=lambda x: isinstance(x, vsgd_optax.FactoredRate))
  assert rates and all(isinstance(r, vsgd_optax.FactoredRate) for r in rates)
  labels = model.matrix_labels(params)
  for step in range(4):
    grads = jax.tree.map(lambda p, s=step: jax.random.normal(jax.random.key(s), p.shape),
                         params)
    updates = {}
    for name, opt in built.items():
      updates[name], states[name] = jax.jit(opt.update)(grads, states[name], params)
    chex.assert_trees_all_equal(updates["howto"], updates["by hand"])
    chex.assert_trees_all_equal(updates["entry"], updates["entry by hand"])
    for kind, howto, entry in zip(jax.tree.leaves(labels), jax.tree.leaves(updates["howto"]),
                                  jax.tree.leaves(updates["entry"]), strict=True):
      if kind == "matrices":
        chex.assert_trees_all_equal(howto, entry)
      else:  # the AdamW part at sqrt(10) times the entry's rate, from the same state
        chex.assert_trees_all_close(howto, 10 ** 0.5 * entry, rtol=1e-5)
    params = optax.apply_updates(params, updates["howto"])


def test_every_committed_result_is_its_ledgers_runs():
  """Each entry of each committed contest result is what its ledger holds: a run for
  every rate and seed it names, and the chosen rate's validation and test bits, and
  each rate's means, the ledger's own numbers.
  """
  checked = 0
  for size in ("cpu", "gpu"):
    result = common.read_json(run.result_path(run.FOLDER, size))
    if result is None:
      continue
    runs = {}
    with open(os.path.join(run.FOLDER, ledgers.FOLDER, f"{size}.jsonl")) as f:
      for line in f:
        record = json.loads(line)
        for i, rate in enumerate(record.get("learning_rates", ())):
          runs[(record["entry"], rate, record["seed"])] = (record["val"][i], record["test"][i])
    for name, entry in result["entries"].items():
      got = {(rate, seed): runs.get((name, rate, seed)) for rate in entry["rates"]
             for seed in entry["seeds"]}
      assert None not in got.values(), (size, name, [k for k, v in got.items() if v is None])
      chosen = [got[(entry["chosen_rate"], seed)] for seed in entry["seeds"]]
      assert [v for v, _ in chosen] == entry["val"] and [t for _, t in chosen] == entry["test"]
      means = [np.mean([got[(rate, seed)][0] for seed in entry["seeds"]])
               for rate in entry["rates"]]
      np.testing.assert_allclose(means, entry["val_by_rate"], rtol=1e-12)
      checked += 1
  assert checked >= len(protocol.ORDER)  # the CPU size has every entry

"""The contest's runner: its model, its split, its declared windows, and the whole
path at the smoke size (every entry it names trains, the result file holds
what the pages read, and a second run resumes from the ledger without training).
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks.contest import data
from benchmarks.contest import entries
from benchmarks.contest import model
from benchmarks.contest import protocol
from benchmarks.contest import run
from benchmarks.contest import train


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


def test_evaluation_windows_tile_the_split_and_score_each_character_once():
  text = np.arange(1000) % 128
  windows = data.eval_windows(text, context=16, chars=100)
  assert windows.shape == (7, 17)  # 7 x 16 >= 100 scored characters
  np.testing.assert_array_equal(windows[1, 0], windows[0, -1])  # overlap by one
  with pytest.raises(ValueError, match="fewer than"):
    data.eval_windows(text, context=16, chars=10_000)


def test_a_window_grows_at_its_edge_up_to_the_declared_count():
  window = protocol.WINDOWS["adam"]
  assert protocol.next_rates(window, window[-1]) == (*window, 0.0316)
  assert protocol.next_rates(window, window[0]) == (0.000316, *window)
  assert protocol.next_rates(window, window[1]) == window
  full = protocol.RATE_GRID[:protocol.MAX_RATES]
  assert protocol.next_rates(full, full[-1]) == full
  # Every entry starts from as many half-decade rates, and the order names them all.
  assert {len(w) for w in protocol.WINDOWS.values()} == {3}
  declared = protocol.ORDER + protocol.VARIANTS
  assert sorted(declared) == sorted(entries.ENTRIES) == sorted(protocol.WINDOWS)


def test_one_program_trains_a_grid_and_a_seed_gives_the_same_run_in_any_grid():
  size = protocol.SIZES["smoke"]["size"]
  splits = data.splits(size.context, 500, files=60)
  build = entries.ENTRIES["adam"].build
  grid = train.train(build, size, 8, [1e-3, 1e-2], [3, 3], splits)
  alone = train.train(build, size, 8, [1e-2], [3], splits)
  assert grid["train_loss"].shape == (2, train.CURVE_POINTS) and grid["val"].shape == (2,)
  np.testing.assert_allclose(grid["test"][1], alone["test"][0], rtol=1e-5)
  assert grid["test"][0] != grid["test"][1]


@pytest.mark.slow
def test_the_smoke_contest_runs_writes_its_result_and_resumes(tmp_path, monkeypatch):
  names = ["adam", "vsgd_muon"]
  result = run.run("smoke", names, folder=str(tmp_path))
  with open(run.result_path(str(tmp_path), "smoke")) as f:
    written = json.load(f)
  assert written["entries"].keys() == set(names)
  for name in names:
    e = written["entries"][name]
    assert e["chosen_rate"] in e["rates"] and e["seeds"] == list(protocol.SIZES["smoke"]["seeds"])
    assert e["val_mean"] == pytest.approx(min(e["val_by_rate"]))
  assert written["workload"]["test_chars"] >= protocol.SIZES["smoke"]["eval_chars"]
  # A second run reads every run from the ledger: nothing trains.
  monkeypatch.setattr(train, "train", lambda *a, **k: pytest.fail("trained again"))
  again = run.run("smoke", names, folder=str(tmp_path))
  for name in names:
    assert again["entries"][name]["test"] == result["entries"][name]["test"]
  assert os.path.exists(os.path.join(str(tmp_path), "runs", "smoke.jsonl"))


def _entry(val, test, baseline, rate=0.01):
  return {"label": "x", "weight_decay": "none", "baseline": baseline, "rates": [rate / 3.16, rate,
          rate * 3.16], "val_by_rate": [9.0, val, 9.0], "test_by_rate": [9.0, test, 9.0],
          "chosen_rate": rate, "at_edge": False, "seeds": [0, 1, 2, 3, 4],
          "val": [val] * 5, "test": [test + d for d in (0.01, -0.02, 0.0, 0.02, -0.01)],
          "val_mean": val, "test_mean": test, "train_curve": [3.0, 2.5, 2.2], "seconds": 1.0}


def _contest(tmp_path, entries):
  from benchmarks.reporting import contest as report
  folder = tmp_path / report.FOLDER
  folder.mkdir(exist_ok=True)
  payload = {"workload": {"name": "contest_cpu", "size": "cpu", "params": 436736, "steps": 2000,
                          "description": "An LM.", "val_chars": 250048, "test_chars": 250048,
                          "higher_is_better": False, "metric": "bits per character"},
             "machine": {"date": "2026-11-28", "platform": "cpu", "device": "cpu", "cpu": "x",
                         "cores": 2, "jax": "0"}, "entries": entries}
  (folder / "cpu.json").write_text(json.dumps(payload))
  (tmp_path / "margins.json").write_text(json.dumps(
      {"margins": {"contest_cpu": {"margin": 0.02, "why": "declared"}}}))
  return report, payload


def test_the_page_chooses_the_best_baseline_on_validation_and_waits_for_vsgd(tmp_path):
  report, payload = _contest(tmp_path, {"adam": _entry(2.02, 2.36, True)})
  assert report.readme_sentence(str(tmp_path)) is None  # no verdict before VSGD ran
  assert "only Adam ran so far: no verdict yet." in "\n".join(
      report.page_section(str(tmp_path), "images"))
  # Muon is best on validation, AdamW on test: the best baseline is Muon.
  report, payload = _contest(tmp_path, {
      "adam": _entry(2.02, 2.36, True), "adamw": _entry(2.01, 2.30, True),
      "muon": _entry(1.95, 2.32, True), "vsgd": _entry(2.03, 2.40, False),
      "vsgd_muon": _entry(1.96, 2.321, False)})
  assert report.best_baseline(payload) == "muon"
  rows = report.verdict_rows(payload, {"contest_cpu": 0.02})
  by = {(r["name"], r["other"]): r for r in rows}
  assert by["vsgd", "muon"]["verdict"] == "loss" and by["vsgd", "adam"]["verdict"] == "loss"
  assert by["vsgd_muon", "muon"]["verdict"] == "equivalent"
  assert all("holm" in r for r in rows)
  sentence = report.readme_sentence(str(tmp_path))
  assert sentence.startswith("On the contest's CPU-size transformer LM (0.44M parameters, 2,000 "
                             "steps), VSGD lost to Muon, the best baseline (chosen on "
                             "validation), and lost to Adam; VSGD-Muon was equivalent to Muon")
  assert sentence.endswith("(docs/results.md#the-contest-a-transformer-lm-at-a-scale-that-decides)).")


def test_holms_family_is_every_verdict_on_the_page(tmp_path):
  vsgd = _entry(2.03, 2.40, False)
  vsgd["test"] = [2.40 + d for d in (0.02, -0.01, 0.01, 0.0, -0.02)]  # differences that vary
  report, payload = _contest(tmp_path, {"adam": _entry(2.02, 2.36, True), "vsgd": vsgd})
  alone = report.verdict_rows(payload, {"contest_cpu": 0.02})
  assert [r["verdict"] for r in alone] == ["loss"] and alone[0]["holm"]
  # Among many other verdicts its p-value no longer clears alpha / m.
  p = alone[0]["comparison"].p_value
  crowded = report.verdict_rows(payload, {"contest_cpu": 0.02}, [0.9] * int(0.05 / p + 2))
  assert crowded[0]["verdict"] == "loss" and not crowded[0]["holm"]
  assert "(not under Holm)" in report._cell(crowded[0])


def test_a_variant_is_decided_by_its_rule_declared_before_the_runs(tmp_path):
  # A variant that beats Muon by 0.1 bits at the CPU size, every seed alike: a win
  # that holds under Holm's correction across the variants: worth trying.
  base = {"adam": _entry(2.02, 2.36, True), "muon": _entry(1.95, 2.30, True)}
  better = _entry(1.90, 2.20, False)
  report, payload = _contest(tmp_path, {**base, "vsgd_muon_direction": better,
                                        "vsgd_muon_signal": _entry(1.95, 2.301, False)})
  rows = {r["name"]: r for r in report.variant_rows({"cpu": payload}, {"contest_cpu": 0.02})}
  assert rows["vsgd_muon_direction"]["verdict"] == "win" and rows["vsgd_muon_direction"]["holm"]
  assert rows["vsgd_muon_direction"]["status"] == "worth trying"
  assert rows["vsgd_muon_signal"]["verdict"] == "equivalent"
  assert rows["vsgd_muon_signal"]["status"] == "experimental"  # a tie earns nothing
  # A win at the GPU size too takes it out of experimental; a loss there keeps it in.
  gpu = {**payload, "workload": {**payload["workload"], "name": "contest_gpu", "size": "gpu"}}
  declared = {"contest_cpu": 0.02, "contest_gpu": 0.02}
  rows = report.variant_rows({"cpu": payload, "gpu": gpu}, declared)
  assert rows[0]["gpu"]["verdict"] == "win" and rows[0]["status"] == "out of experimental"
  worse = {**gpu, "entries": {**gpu["entries"], "vsgd_muon_direction": _entry(2.0, 2.40, False)}}
  rows = report.variant_rows({"cpu": payload, "gpu": worse}, declared)
  assert rows[0]["gpu"]["verdict"] == "loss" and rows[0]["status"] == "experimental"
  # Nothing ran: no rows, and the page says so.
  assert report.variant_rows({"cpu": {**payload, "entries": base}}, declared) == []

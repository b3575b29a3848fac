"""The results page and its appendix: the committed pages are what the renderer
writes; the page opens with the answer and the cost, from the JSON; the appendix
holds the detail; no table is wider than the text column; and the metrics print as
the tables always printed them.
"""

import json
import os
import shutil

import pytest

from benchmarks import common
from benchmarks.reporting import contest
from benchmarks.reporting import decisions
from benchmarks.reporting import experiments
from benchmarks.reporting import guide
from benchmarks.reporting import markdown
from benchmarks.reporting import plots
from benchmarks.reporting import reading
from benchmarks.reporting import render
from benchmarks.reporting import tables
from tests.support import REPOSITORY

RESULTS = os.path.join(REPOSITORY, "benchmarks", "results")


def _pages() -> tuple[str, str, str]:
  return render.pages(RESULTS, "../benchmarks/results")


def _section(text: str, heading: str) -> str:
  start = text.index(heading)
  end = text.find("\n## ", start + 1)
  return text[start:] if end < 0 else text[start:end]


def test_results_pages_render_the_committed_results():
  page, appendix, small = _pages()
  # The committed pages are what the renderer writes from the committed results.
  for name, text in (("results.md", page), (render.APPENDIX, appendix), (render.SMALL, small)):
    with open(os.path.join(REPOSITORY, "docs", name)) as f:
      assert text == f.read(), name
    for line in text.splitlines():
      if line.startswith("!["):
        image = line[line.index("(") + 1:line.index(")")]
        assert os.path.exists(os.path.join(REPOSITORY, "docs", image)), image
  assert f"[appendix]({render.APPENDIX})" in page and "[results page](results.md)" in appendix
  assert f"({render.SMALL})" in appendix and "[results page](results.md)" in small
  # Both train-step tables, in the appendix: the small common batch and the paper's batches.
  common_batch = appendix.index("## Whole train step, VSGD / Adam")
  paper = appendix.index("## Whole train step at the paper's batch sizes")
  assert "| cifar100_vgg16 | 8 |" in appendix[common_batch:paper]
  assert "| cifar100_vgg16 | 256 |" in appendix[paper:]
  # Nothing is lost: every section the committed results make, on the page that holds it.
  def sections(text):
    return [line[3:] for line in text.splitlines() if line.startswith("## ")]
  assert sections(page) == [contest.HEADING[3:], "Cost and memory", "The experiments"]
  assert sections(appendix) == [
      contest.HEADING[3:], "Declared margins", "The experiments",
      "Step cost next to Adam", "On an accelerator: the device suite",
      "Where the GPU step's time goes", "Compile time next to Adam", "Whole train step, VSGD / Adam",
      "Whole train step at the paper's batch sizes, VSGD / Adam",
      "Gradient noise scale: read-out against a reference",
      "The paper's Table 1 (test accuracy %, mean of 3 seeds)"]
  assert sections(small) == [
      "VSGD against the tuned baselines", "The long horizon", "Time to result", "Protocol"]
  ablation = json.load(open(os.path.join(RESULTS, "gpu_ablation.json")))
  assert all(f"| {label} | {row['median_ms']:.3f} |" in appendix
             for part in ("stages", "one_leaf") for label, row in ablation[part]["rows"].items())
  assert "### Schedule-free VSGD\n" in appendix and "### `experimental.vsgd_muon`\n" in appendix
  with open(os.path.join(REPOSITORY, "docs", "index.md")) as f:
    index = f.read()
  assert "\nresults_appendix\nresults_small_workloads\n" in index  # in the toctree


def test_the_page_is_the_contest_then_cost_then_the_experiments():
  page, appendix, small = _pages()
  headings = [line for line in page.splitlines() if line.startswith("## ")]
  assert headings == [contest.HEADING, "## Cost and memory",
                      "## The experiments"]
  first = _section(page, contest.HEADING)
  found = contest.load(RESULTS)
  declared = decisions.margins(RESULTS)
  others = experiments.decision_p_values(RESULTS)
  rows_of, family = contest.page_rows(found, declared, others)
  # One verdict table: each of ours against the best baseline and against Adam, each
  # row naming its size, whose parameters, steps and test set follow; Holm's family is the page's:
  # every size's verdicts and the experiments' decisions.
  for line in contest.summary_table(found, rows_of):
    assert line in first
  assert f"Holm's correction across the page's {family} verdicts" in first
  for size, payload in found.items():
    elsewhere = [r["comparison"].p_value for other, p in found.items() if other != size
                 for r in contest.verdict_rows(p, declared)]
    rows = contest.verdict_rows(payload, declared, elsewhere + others)
    vsgd = next(r for r in rows if r["name"] == "vsgd" and r["other"] == "adam")
    w = payload["workload"]
    assert (f"{size.upper()} {w['params'] / 1e6:.2f}M parameters, {w['steps']:,} steps, "
            f"{w['test_chars'] / 1e3:.0f}k test characters") in first
    assert f"| {size.upper()} | VSGD | " in first
    c = vsgd["comparison"]
    assert f"{c.difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}] **{vsgd['verdict']}" in first
    # Each size's tables in full: the appendix's.
    table = appendix[appendix.index(f"### {size.upper()} size"):]
    for line in contest.entries_table(payload) + contest.verdict_table(rows):
      assert line in table
    assert f"### {size.upper()} size" not in page
  for line in contest.entries_overview(found):
    assert line in first
  # The largest size's chart, one.
  largest = "gpu" if "gpu" in found else "cpu"
  assert first.count("![") == 1 and f"contest_{largest}.png" in first
  # Cost and memory: the GPU's and the CPU's step, the bytes and the compile, from the JSON.
  cost = _section(page, "## Cost and memory")
  bullets = [line for line in cost.splitlines() if line.startswith("- **")]
  assert [b[:b.index(":**") + 3] for b in bullets] == [
      "- **Cost on a GPU:**", "- **Cost on the CPU:**", "- **Memory:**", "- **Compile:**"]
  gpu, cpu, memory, compiled = bullets
  states = common.load(RESULTS, "step_cost_gpu_states")
  ratio = {r["optimizer"]: r["ratio"] for r in states["rows"] if r["params"] == 49977350}
  assert states["machine"]["platform"] == "gpu" and len(ratio) == len(states["rows"])
  assert gpu.startswith(f"- **Cost on a GPU:** {ratio['vsgd']:.2f}x Adam's donated step at 50M "
                        f"parameters on an {states['machine']['device']}")
  assert gpu.endswith(f"; {ratio['vsgd+bf16_state']:.2f}x with the bfloat16 state "
                     f"({ratio['vsgd+bf16_nearest']:.2f}x rounded to nearest).")
  step = common.load(RESULTS, "step_cost")
  vsgd = sorted((r for r in step["rows"] if r["optimizer"] == "vsgd" and r["donated"]),
                key=lambda r: r["params"])
  assert cpu == (f"- **Cost on the CPU:** {vsgd[0]['ratio']:.2f}x Adam's step at 1M parameters "
                 f"to {vsgd[-1]['ratio']:.2f}x at 50M on {step['machine']['cores']} cores of an "
                 f"{step['machine']['cpu']} (`step_cost.json`).")
  assert memory == ("- **Memory:** 12 bytes a parameter (Adam: 8); 6 with "
                    "`state_dtype=jnp.bfloat16`.")
  times = {name: {r["optimizer"]: r for r in common.load(RESULTS, name)["rows"]
                  if r["leaves"] == 290 and r["version"] == "today"}
           for name in ("compile_time_gpu", "compile_time")}
  assert compiled.startswith(
      f"- **Compile:** a 290-leaf tree's `vsgd` step, Adam's time times "
      f"{times['compile_time_gpu']['vsgd']['ratio_to_adam']:.1f}x on an "
      f"{common.load(RESULTS, 'compile_time_gpu')['machine']['device']} and "
      f"{times['compile_time']['vsgd']['ratio_to_adam']:.1f}x on "
      f"{common.load(RESULTS, 'compile_time')['machine']['cores']} cores of an ")
  assert "### Each state against its floor" in cost and "| vsgd+bf16_state | 24 (0.86) |" in cost
  # The experiments: one table on the page, each experiment's rows in the appendix.
  table = _section(page, "## The experiments")
  assert "| experiment | rule, declared before its runs (holds: wins or is equivalent) |" in table
  variants = contest.variant_rows(found, declared)
  assert ("| VSGD-Muon's variants |" in table) and (("not run yet" in table) == (not variants))
  assert "| VSGD in Muon |" in table and "| factored state |" in table
  assert "### `experimental.vsgd_muon`" in appendix and "### `experimental" not in page
  # The small workloads' verdicts: their own page's.
  heading = "## VSGD against the tuned baselines\n"
  assert heading in small and heading not in page + appendix
  assert "| workload | VSGD (rate) | best baseline (rate) |" in small


def test_the_appendix_holds_the_costs_and_the_experiments_the_small_page_the_toys():
  page, appendix, small = _pages()
  for heading in ("## Step cost next to Adam", "## Compile time next to Adam",
                  "## Gradient noise scale: read-out against a reference",
                  "## Declared margins"):
    assert heading + "\n" in appendix, heading
    assert heading + "\n" not in page + small, heading
  for heading in ("## Protocol", "### How the verdicts were made", "## The long horizon"):
    assert heading + "\n" in small, heading
    assert heading not in page + appendix, heading
  # The main protocol's test metric, every optimizer on every workload, from its JSON;
  # the rest of each entry is its file's, which the page names.
  main = reading.load_protocol(RESULTS, reading.MAIN)
  column = 1 + list(main).index("mlp")
  grid = small[small.index("| optimizer | ConvMixer"):].split("\n\n")[0]
  rows = {line.split(" | ")[0][2:]: line.strip("| ").split(" | ") for line in grid.splitlines()}
  for name in ("vsgd", "adam", "muon"):
    assert rows[name][column] == tables.mean_std(main["mlp"]["workload"],
                                                 main["mlp"]["entries"][name])
  assert "`benchmarks/results/<schedule>/ttr_<workload>.json`" in small
  # An experiment: its decision on the page, its tables in the appendix.
  factored = _section(appendix, "### `experimental.factored_vsgd`")
  assert "**Status: " in factored and "| workload | share that factors |" in appendix
  # vsgd_muon's status, as its declared rule computes it from the committed results
  results = os.path.join(REPOSITORY, common.RESULTS)
  declared = decisions.margins(results)
  rows = experiments.vsgd_muon_rows(reading.load_protocol(results, reading.MAIN), declared,
                                    experiments.contest_row(results, declared))
  assert experiments.status_line(experiments.vsgd_muon_outcome(rows)).strip() in appendix
  assert "| workload | `vsgd_muon` (rate) |" in appendix
  # The declared margins, with their reasons: the appendix's; the page points there.
  assert "## Declared margins\n" in appendix and "## Declared margins" not in page
  assert "*Declared margins*, with the reasons, in the [appendix](results_appendix.md)" in page
  assert "| state | 1024 x 1024 matrix |" in appendix


def test_no_generated_table_has_more_columns_than_the_text_column_holds():
  # By construction (markdown.table refuses a wider one); this holds the tables built
  # by hand to it too. Chromium measures the rendered widths in CI (tools/page_check.py).
  for text in (*_pages(), guide.render(RESULTS)):
    for line in text.splitlines():
      if line.startswith("|"):
        assert len(line.strip().strip("|").split("|")) <= markdown.MAX_COLUMNS, line
  with pytest.raises(ValueError, match="7 columns .* at most 6"):
    markdown.table([str(i) for i in range(7)], [])
  with pytest.raises(ValueError, match="a row of 1 cells"):
    markdown.table(["a", "b"], [["x"]])
  assert markdown.table(["a", "b"], [["1", "2"]]) == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_every_template_section_is_filled_and_a_slot_cannot_be_left_out(monkeypatch):
  # The committed results fill every section of every template, each slot exactly,
  # but the appendix's line for a contest size with no run (both sizes have runs).
  used = set()
  fill = markdown.section

  def spy(page, part, **slots):
    used.add((page, part))
    return fill(page, part, **slots)
  monkeypatch.setattr(markdown, "section", spy)
  _pages()
  guide.render(RESULTS)
  templates = {(page[:-3], part) for page in os.listdir(markdown.TEMPLATES)
               for part in markdown.template(page[:-3])}
  assert len(templates) > 30
  waiting = {("results", "contest_none"), ("results", "contest_waiting")}  # before verdicts
  assert templates - used == {("results_appendix", "contest_not_run"), *waiting}
  assert used <= templates
  # A slot left empty, or a value with no slot, is refused by name.
  with pytest.raises(ValueError, match=r"section factored: slots \['cost', 'decision', 'memory', "
                     r"'seeds', 'table', 'tuning'\] in the template, \['memory'\] given"):
    fill("results_appendix", "factored", memory="x")
  with pytest.raises(ValueError, match=r"slots \[\] in the template, \['extra'\] given"):
    fill("results", "head", extra="x")
  assert fill("results", "experiments", table=["| a |", "|---|"])[:4] == [
      "## The experiments", "", "| a |", "|---|"]


def test_each_kind_of_metric_prints_as_the_tables_print_it():
  e = {"test": [0.98, 0.99, 0.97], "test_mean": 0.98}
  accuracy, mse = {"metric": "accuracy"}, {"metric": "MSE"}
  suboptimality = {"metric": "suboptimality"}
  assert tables.metric_style(accuracy).differences([0.0123, -0.004]) == ["+1.23", "-0.40"]
  assert tables.metric_style(suboptimality).differences([2.8e-4]) == ["+2.8e-04"]
  assert tables.mean_std(mse, {"test": [0.5, float("nan")], "test_mean": float("nan")}) == (
      "diverged")
  assert tables.mean_std(accuracy, e) == "98.00 ± 1.00"
  assert tables.mean_std(mse, e) == "0.980 ± 0.010"
  assert tables.mean_std(suboptimality, {"test": [3e-4, 2e-4], "test_mean": 2.5e-4}) == (
      "2.5e-04 ± 7e-05")
  # Every other metric prints as an MSE does.
  assert tables.metric_style({"metric": "bits per character"}) == tables.metric_style(mse)


def test_writing_the_pages_draws_nothing_and_plots_draws_what_they_show(tmp_path):
  # The pages only name their figures: rendering them writes no file beside the
  # JSON, and ``--plots`` (``plots.draw_all``) draws every figure a page shows.
  results = tmp_path / "results"
  shutil.copytree(RESULTS, results, ignore=shutil.ignore_patterns("*.png", "long_horizon"))
  before = sorted(p.relative_to(results) for p in results.rglob("*"))
  page, appendix, _ = render.pages(str(results), "results")
  assert sorted(p.relative_to(results) for p in results.rglob("*")) == before
  shown = {line[line.index("(") + 1:line.index(")")] for text in (page, appendix)
           for line in text.splitlines() if line.startswith("![")}
  drawn = {os.path.relpath(path, tmp_path) for path in plots.draw_all(str(results))}
  assert shown == drawn and {"results/contest/contest_gpu.png", "results/step_cost.png"} <= drawn

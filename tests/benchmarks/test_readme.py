"""The README as a reader meets it: its snippet runs as pasted, its cost is the JSON's,
and it stays short.
"""

import os
import re

import jax.numpy as jnp
import pytest

from benchmarks import optimizer_table
from benchmarks.reporting import contest
from benchmarks.reporting import decisions
from benchmarks.reporting import experiments
from benchmarks.reporting import guide
from benchmarks.reporting import render

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme() -> str:
  with open(os.path.join(REPOSITORY, "README.md")) as f:
    return f.read()


def test_the_use_snippet_runs_as_pasted_and_trains():
  snippet = re.search(r"## Use.*?```python\n(.*?)```", _readme(), re.S).group(1)
  namespace: dict = {}
  exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102  (the README's own code)
  loss_fn, params, batch = namespace["loss_fn"], namespace["params"], namespace["batch"]
  start = float(loss_fn({"w": jnp.zeros(8)}, batch))
  assert float(loss_fn(params, batch)) < 0.01 * start


def test_it_stays_under_700_words():
  assert len(_readme().split()) <= 700


def test_every_verdict_and_cost_outside_the_pages_is_the_renderers():
  """The README's verdict sentence and its cost, and the how-to's sentences: each
  block between its marker comments is what ``python -m benchmarks.reporting``
  writes now from the JSON, the cost the same bullets as the results page's.
  """
  blocks = render.generated_blocks(os.path.join(REPOSITORY, render.RESULTS))
  assert set(blocks) == {("README.md", "verdict"), ("README.md", "cost"),
                         ("docs/index.md", "verdict"),
                         ("docs/howto.md", "bf16-horizon"), ("docs/howto.md", "schedule-free"),
                         ("docs/api.md", "vsgd-muon"), ("docs/api.md", "vsgd-muon-variants")}
  for (path, key), sentence in blocks.items():
    with open(os.path.join(REPOSITORY, path)) as f:
      text = f.read()
    assert sentence, key
    assert render.rewrite_block(text, key, sentence) == text, (path, key)
    held = render.marked(key).search(text).group(2)
    assert held.split() == sentence.split()
  with open(os.path.join(REPOSITORY, "docs", "results.md")) as f:
    page = f.read()
  for bullet in blocks["README.md", "cost"].split("\n")[2:]:
    assert bullet.startswith("- **") and bullet + "\n" in page, bullet
  readme = " ".join(_readme().split())
  assert "On the contest's" in readme and " tied " not in readme
  # The learning-rate guide's "when VSGD is worth it" opens with the same answer.
  answer = blocks["docs/index.md", "verdict"].removeprefix("**Should you use it?** ")
  guide_page = guide.render(os.path.join(REPOSITORY, render.RESULTS))
  assert f"## When VSGD is worth it\n\n{answer}\n\nOn the small workloads" in guide_page
  # The variants' statuses on the API page are their declared rule's, from the contest's JSON.
  results = os.path.join(REPOSITORY, render.RESULTS)
  found = contest.variant_rows(contest.load(results), decisions.margins(results))
  variants = " ".join(blocks["docs/api.md", "vsgd-muon-variants"].split())
  assert variants.count("documented as worth trying") == sum(
      r["status"] == "worth trying" for r in found)
  assert variants.count("has not run yet") == len(optimizer_table.VSGD_MUON_VARIANTS) - len(found)
  # The experiment's status on the API page is its declared rule's decision, the very
  # status the results pages print, from the same rows.
  api = " ".join(blocks["docs/api.md", "vsgd-muon"].split())
  outcome = experiments.outcomes(results)["vsgd_muon"]
  assert api.endswith(f"Status: {outcome['status']}.")
  with open(os.path.join(REPOSITORY, "docs", "results_appendix.md")) as f:
    page = " ".join(f.read().split())
  assert f"**Status: {outcome['status']}.**" in page


def test_a_block_the_file_lacks_is_an_error_and_a_block_is_rewritten_in_place():
  text = "before\n<!-- verdict:start -->\nold words\n<!-- verdict:end -->\nafter\n"
  assert render.rewrite_block(text, "verdict", "new words.") == (
      "before\n<!-- verdict:start -->\nnew words.\n<!-- verdict:end -->\nafter\n")
  with pytest.raises(ValueError, match="no <!-- schedule-free:start -->"):
    render.rewrite_block(text, "schedule-free", "x")
  # A block of several lines: each wrapped on its own, a bullet's continuation indented.
  long = "- **Cost:** " + "word " * 20
  assert render.rewrite_block(text, "verdict", "Lead:\n\n" + long.strip()) == (
      "before\n<!-- verdict:start -->\nLead:\n\n- **Cost:** " + "word " * 12 + "word\n"
      "  " + "word " * 6 + "word\n<!-- verdict:end -->\nafter\n")


def test_without_a_contest_the_readme_verdict_is_refused_not_guessed(tmp_path):
  with open(os.path.join(REPOSITORY, render.RESULTS, "margins.json")) as f:
    (tmp_path / "margins.json").write_text(f.read())
  (tmp_path / "warmup_cosine").mkdir()
  with pytest.raises(ValueError, match=r"needs the contest's results under .*python -m "
                                       r"benchmarks\.contest"):
    render.generated_blocks(str(tmp_path))

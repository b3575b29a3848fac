"""Writes the results pages and the learning-rate guide from the JSON.

    python -m benchmarks.reporting

Three pages, each assembled here from the sections of its template
(``templates/``), which the modules below fill from the JSON: the page
(``page``) is the contest's verdicts (``contest``), the cost and memory
(``costs``) and the experiments' table (``experiments``); the appendix
(``appendix``) holds what the page summarizes, whole: the contest's sizes,
the declared margins, the experiments' rows, the costs and the noise-scale
validation (``noise_scale``); the small workloads' page (``small_workloads``)
their verdicts (``verdict``), the long horizon (``long_horizon``) and each
schedule's time to result (``tables``). The sentences that state a verdict or a cost
outside these pages are ``generated_blocks``'s.
"""

from __future__ import annotations

import argparse
import os
import re
import textwrap

from benchmarks import optimizer_table
from benchmarks.reporting import contest
from benchmarks.reporting import costs
from benchmarks.reporting import decisions
from benchmarks.reporting import experiments
from benchmarks.reporting import guide
from benchmarks.reporting import long_horizon
from benchmarks.reporting import markdown
from benchmarks.reporting import noise_scale
from benchmarks.reporting import plots
from benchmarks.reporting import tables
from benchmarks.reporting import verdict

RESULTS = "benchmarks/results"
COMMAND = "python -m benchmarks.reporting"
APPENDIX = "results_appendix.md"
SMALL = "results_small_workloads.md"


def page(folder: str = RESULTS, images: str = "../" + RESULTS) -> str:
  """The results page: the contest's verdicts, cost and memory, and the experiments'
  table, each a section built for the page; ``images`` is ``folder`` as seen from it.
  """
  return markdown.tidy([
      *markdown.section("results", "head"),
      *contest.page_section(folder, images, experiments.decision_p_values(folder)),
      *costs.page_section(folder),
      *experiments.page_section(folder)])


def appendix(folder: str = RESULTS, images: str = "../" + RESULTS) -> str:
  """The appendix: what the page summarizes, whole: the contest's sizes, the
  declared margins, the experiments, the costs and the noise-scale validation.
  """
  others = experiments.decision_p_values(folder)
  return markdown.tidy([
      *markdown.section("results_appendix", "head"), *contest.section(folder, images, others),
      *verdict.margins_table(folder), *experiments.section(folder),
      *costs.appendix_sections(folder, images),
      *noise_scale.section(os.path.join(folder, "noise_scale"), f"{images}/noise_scale"),
      *markdown.section("results_appendix", "paper")])


def small_workloads(folder: str = RESULTS) -> str:
  """The small workloads' page: their verdicts, the long horizon, what each protocol
  ran with the main protocol's test metrics, and the protocol.
  """
  return markdown.tidy([
      *markdown.section("results_small_workloads", "head"), *verdict.section(folder),
      *long_horizon.section(folder), *tables.summary(folder)])


def pages(folder: str = RESULTS, images: str = "../" + RESULTS) -> tuple[str, str, str]:
  """(the results page, its appendix, the small workloads' page)."""
  return page(folder, images), appendix(folder, images), small_workloads(folder)


def write_page(path: str = "docs/results.md", folder: str = RESULTS) -> None:
  """Writes the results page and, beside it, its appendix (``APPENDIX``), the small
  workloads' page (``SMALL``) and the learning-rate guide (``choosing_lr.md``,
  ``guide``), all from ``folder``.
  """
  images = os.path.relpath(folder, os.path.dirname(os.path.abspath(path)) or ".")
  beside = [os.path.join(os.path.dirname(path), name) for name in (APPENDIX, SMALL)]
  for target, content in zip((path, *beside), pages(folder, images), strict=True):
    with open(target, "w") as f:
      f.write(content)
    print(f"wrote {target}")
  guide_page = os.path.join(os.path.dirname(path), "choosing_lr.md")
  with open(guide_page, "w") as f:
    f.write(guide.render(folder))
  print(f"wrote {guide_page}")


def outcome_sentence(outcome: dict, where: str) -> str:
  """An experiment's outcome (``experiments.outcomes``) as the docs state it: what its
  rule, declared before its runs, decides from the results, and where every row is.
  """
  return (f"By its rule, declared before its runs ({outcome['rule']}; {where} has every "
          f"row): {outcome['result']}. Status: {outcome['status']}.")


def vsgd_muon_variants_sentence(folder: str = RESULTS) -> str:
  """The API page's sentence on ``vsgd_muon``'s variants: each one's argument, its
  verdict against Muon at the contest's CPU size and its status by the rule declared
  before their runs (``contest.variant_rows``), or that it has not run.
  """
  found, declared = contest.load(folder), decisions.margins(folder)
  rows = {r["name"]: r for r in contest.variant_rows(found, declared)}
  said = []
  for name, args in optimizer_table.VSGD_MUON_VARIANT_ARGS.items():
    arg = ", ".join(f'{k}="{v}"' if isinstance(v, str) else f"{k}={v}" for k, v in args.items())
    r = rows.get(name)
    if r is None:
      said.append(f"`{arg}` has not run yet")
      continue
    text = f"`{arg}` {verdict.VERBS[r['verdict']]} ({contest.interval_text(r)}"
    if r["verdict"] in ("win", "loss"):
      text += ", holding under Holm's correction across the variants" if r["holm"] else \
          ", not under Holm's correction across the variants"
    said.append(text + ")" + {
        "worth trying": ": documented as worth trying; it stays in `experimental` until it "
                        "also wins at the GPU size",
        "out of experimental": ": it also won at the GPU size, so by the rule it leaves "
                               "`experimental`"}.get(r["status"], ""))
  seeds = len(next(iter(found["cpu"]["entries"].values()))["seeds"]) if "cpu" in found else 0
  base = contest.base_row(found, declared)
  itself = ("" if base is None else
            f" For comparison, `vsgd_muon` itself against Muon: {contest.interval_text(base)}.")
  return (f"Its variants, each one argument, against Muon at the contest's CPU size (test "
          f"bits/char, {seeds} seeds; the rule, declared before their runs, and each one's "
          "state, step and compile time: the [results page](results.md)'s experiments "
          "table): " + "; ".join(said) + "." + itself)


def generated_blocks(folder: str = RESULTS) -> dict[tuple[str, str], str]:
  """(file, key) -> the text the renderer writes between ``<!-- key:start -->``
  and ``<!-- key:end -->`` in that file: every sentence outside the generated
  pages that states a verdict or a cost.
  """
  others = experiments.decision_p_values(folder)  # the page's other verdicts, for Holm
  readme, docs = (contest.readme_sentence(folder, docs=d, others=others) for d in ("docs/", ""))
  if readme is None:
    raise ValueError(f"the README's verdict needs the contest's results under {folder}/"
                     f"{contest.FOLDER}: run `python -m benchmarks.contest` first")
  said = experiments.outcomes(folder)
  cost = ["Next to Adam ([results](docs/results.md)):", "",
          *costs.cost_lines(folder)]
  return {("README.md", "verdict"): readme,
          ("README.md", "cost"): "\n".join(cost),
          ("docs/index.md", "verdict"): "**Should you use it?** " + docs,
          ("docs/howto.md", "bf16-horizon"): long_horizon.howto_sentence(folder),
          ("docs/howto.md", "schedule-free"): outcome_sentence(
              said["schedule_free"], "the results' appendix, *Schedule-free VSGD*,"),
          ("docs/api.md", "vsgd-muon"): outcome_sentence(
              said["vsgd_muon"], "the results' appendix, *experimental.vsgd_muon*,"),
          ("docs/api.md", "vsgd-muon-variants"): vsgd_muon_variants_sentence(folder)}


def marked(key: str) -> re.Pattern:
  """The generated block ``key`` of a file, between its two marker comments."""
  return re.compile(rf"(<!-- {key}:start -->\n)(.*?)(<!-- {key}:end -->)", re.S)


def rewrite_block(text: str, key: str, sentence: str) -> str:
  """``text`` with the block ``key`` holding ``sentence``, each of its lines (a
  paragraph or a bullet) wrapped at 80 columns.
  """
  pattern = marked(key)
  if not pattern.search(text):
    raise ValueError(f"no <!-- {key}:start --> ... <!-- {key}:end --> block to rewrite")
  body = "".join(textwrap.fill(line, 80, break_on_hyphens=False, break_long_words=False,
                               subsequent_indent="  " if line.startswith("- ") else "") + "\n"
                 for line in sentence.split("\n"))
  return pattern.sub(lambda m: m.group(1) + body + m.group(3), text)


def write_blocks(folder: str = RESULTS, root: str = ".") -> None:
  """Rewrites every generated block (``generated_blocks``) in its file under ``root``."""
  for (path, key), sentence in generated_blocks(folder).items():
    full = os.path.join(root, path)
    with open(full) as f:
      text = f.read()
    new = rewrite_block(text, key, sentence)
    if new != text:
      with open(full, "w") as f:
        f.write(new)
      print(f"wrote {path} ({key})")


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
  parser.add_argument("--plots", action="store_true",
                      help="draw every figure beside its JSON as well")
  args = parser.parse_args(argv)
  write_page()
  write_blocks()
  if args.plots:
    for path in plots.draw_all(RESULTS):
      print(f"wrote {path}")


if __name__ == "__main__":
  main()

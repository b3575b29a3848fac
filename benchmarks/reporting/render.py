"""Writes the results page, its appendix and the learning-rate guide from the JSON.

    python -m benchmarks.reporting

Two pages, each assembled here from sections built for it: the page
(``page``) is the contest's verdicts (``contest``), the cost and memory, and
the experiments' table (``experiments``); the appendix (``appendix``) holds
every table whole: the contest's sizes, the small workloads' verdicts
(``verdict``), the long horizon, the experiments' rows, the time to result
(``tables``), the step costs (here and ``device_results``), the compile times
and the noise-scale validation (``noise_scale``). The sentences that state a
verdict outside these pages are ``generated_blocks``'s.
"""

from __future__ import annotations

import argparse
import os
import re
import textwrap

from benchmarks import common
from benchmarks.reporting import contest
from benchmarks.reporting import decisions
from benchmarks.reporting import device_results
from benchmarks.reporting import experiments
from benchmarks.reporting import guide
from benchmarks.reporting import long_horizon
from benchmarks.reporting import markdown
from benchmarks.reporting import noise_scale
from benchmarks.reporting import plots
from benchmarks.reporting import reading
from benchmarks.reporting import tables
from benchmarks.reporting import verdict

RESULTS = "benchmarks/results"
COMMAND = "python -m benchmarks.reporting"
APPENDIX = "results_appendix.md"
FLOOR_HEADING = "Each state against its floor"
COST_HEADING = "Cost and memory"
PAPER_TABLE1 = (
    "| CIFAR-100 | VSGD | Adam | AdamW | SGD-m |\n|---|---|---|---|---|\n"
    "| VGG16 | 70.0 | 66.8 | 66.6 | 67.9 |\n| ConvMixer | 69.1 | 66.5 | 67.0 | 65.4 |\n"
    "| ResNeXt-18 | 71.2 | 68.2 | 69.7 | 68.5 |\n")


def _paired_table(rows: list[dict]) -> list[str]:
  """Each variant's step over the optimizer it was timed against in the same rounds
  (``step_cost.py``'s pairs); nothing for results measured before the pairs.
  """
  paired = [r for r in rows if "paired" in r]
  if not paired:
    return []
  out = ["Variants over their base optimizer, timed in the same rounds:\n",
         "| params | donated | step time ratio | ratio (p25-p75) |", "|---|---|---|---|"]
  for r in paired:
    out.append(f"| {r['params']:,} | {r['donated']} | {r['optimizer']} / "
               f"{r['paired']['against']} | {common.ratio_text(r['paired'])} |")
  return out + [""]


def _step_cost_section(name: str, title: str, folder: str, images: str) -> list[str]:
  step = common.load(folder, name)
  if not step:
    return []
  out = [f"## {title}\n", f"Machine: {common.machine_text(step['machine'])}.\n",
         *markdown.table(
             ["params, donated", "optimizer", "median ms, x Adam (p25-p75)",
              "state bytes/param", "compile s", "page faults/step"],
             [[f"{r['params']:,}, {r['donated']}", r["optimizer"],
               f"{r['median_ms']:.2f}, {r['ratio']:.2f} ({r['ratio_p25']:.2f}-"
               f"{r['ratio_p75']:.2f})", f"{r['state_bytes_per_param']:.0f}",
               f"{r['compile_s']:.2f}", f"{r.get('page_faults_per_step', float('nan')):.0f}"]
              for r in step["rows"]])]
  out.append(f"\n![{name}]({images}/{name}.png)\n")
  out += _paired_table(step["rows"])
  if step.get("torch_peer"):
    out += ["PyTorch peers on the same machine and cores (not donated):\n",
            "| params | pytorch-optimizer VSGD ms | torch Adam ms | vsgd_optax ms | speed-up |",
            "|---|---|---|---|---|"]
    for p in step["torch_peer"]:
      out.append(f"| {p['params']:,} | {p['torch_vsgd']:.2f} | {p['torch_adam']:.2f} | "
                 f"{p['vsgd_optax']:.2f} | {p['speedup_vs_torch_vsgd']:.1f}x |")
    out.append("")
  return out


def _train_step_section(name: str, title: str, folder: str) -> list[str]:
  ts = common.load(folder, name)
  if not ts:
    return []
  out = [f"## {title}\n", f"Machine: {common.machine_text(ts['machine'])}; {ts['repeats']} "
         "interleaved rounds, the trainer's own jitted step with the state donated "
         "(`python -m benchmarks.train_step`). The control is a second, identical Adam "
         "step timed in the same rounds: the spread the machine shows when nothing "
         "differs. Each ratio is of median times and its range is of the per-round "
         "ratios, so with few rounds the two can disagree.\n",
         *([ts["note"] + "\n"] if ts.get("note") else []),
         "| config | batch | Adam ms | VSGD ms | VSGD/Adam (p25-p75) | control (p25-p75) |",
         "|---|---|---|---|---|---|"]
  for r in ts["rows"]:
    out.append(f"| {r['config']} | {r['batch']} | {r['adam_ms']:.1f} | {r['vsgd_ms']:.1f} | "
               f"{common.ratio_text(r)} | {common.ratio_text(r, 'control_')} |")
  out.append("\nThe paper reports 1.03x-1.08x on an RTX 2080 Ti (0.41/0.38, 0.38/0.36, "
             "0.87/0.84 s).\n")
  return out


def _compile_time_section(folder: str) -> list[str]:
  """``compile_time.py``'s tables: each state's step against Adam's, today's and, where
  measured, an earlier commit's, side by side (one table a machine).
  """
  out = []
  for name, where in (("compile_time", "on the CPU"), ("compile_time_gpu", "on a GPU")):
    result = common.load(folder, name)
    if not result:
      continue
    before = result.get("before")
    versions = ["today"] + ([before] if before else [])
    if not out:
      out.append("## Compile time next to Adam\n")
    out += [f"The donated step (`update` and `apply_updates`) on a transformer-shaped tree, "
            f"lowered and compiled from a cleared cache, {where}; machine: "
            f"{common.machine_text(result['machine'])}; median of "
            f"{result['rows'][0]['repeats']} (`python -m benchmarks.compile_time`). "
            "Seconds, and the ratio to Adam's in the same process"
            + (f"; `{before}` is the package before this change." if before else ".")
            + (f" {result['note']}" if result.get("note") else "") + "\n",
            "| leaves | state | " + " | ".join(f"{v} s (x Adam)" for v in versions) + " |",
            "|---|---|" + "---|" * len(versions)]
    by_key = {(r["leaves"], r["optimizer"], r["version"]): r for r in result["rows"]}
    for leaves in sorted({r["leaves"] for r in result["rows"]}):
      for state in dict.fromkeys(r["optimizer"] for r in result["rows"]):
        cells = [by_key.get((leaves, state, v)) for v in versions]
        if cells[0] is None:
          continue
        text = [f"{c['total_s']:.1f} ({c['ratio_to_adam']:.1f}x)" if c else "-" for c in cells]
        out.append(f"| {leaves} | {state} | " + " | ".join(text) + " |")
    out.append("")
  return out


def _floor_section(folder: str) -> list[str]:
  """``floor.py``'s table: each state's floor bytes, what the CPU's compiled step
  counts an element, and the GPU's measured step over Adam's.
  """
  result = common.load(folder, "floor")
  if not result:
    return []
  gpu = result.get("gpu_machine")
  out = [f"### {FLOOR_HEADING}\n",
         "Floor: bytes a parameter an ideal fused donated step moves. CPU flops and bytes an "
         f"element: XLA's `cost_analysis` of the step on a {result['side']} x "
         f"{result['side']} leaf, {common.machine_text(result['machine'])}, bounded in CI."
         + (f" GPU: the step at 50M parameters over Adam's, on an {gpu['device']} "
            f"({gpu['date']})." if gpu else " No GPU run holds these states yet.") + "\n",
         "| state | floor B | floor/Adam | CPU flops | CPU bytes | GPU/Adam |",
         "|---|---|---|---|---|---|"]
  for r in result["rows"]:
    measured = f"{r['gpu_step_vs_adam']:.2f}" if r["gpu_step_vs_adam"] else "not run"
    out.append(f"| {r['state']} | {r['floor_bytes']} | {r['floor_vs_adam']:.2f} | "
               f"{r['flops_per_element']:.0f} | {r['bytes_per_element']:.0f} | {measured} |")
  return out + [""]


def _donated_vsgd_ratios(rows: list[dict]) -> list[float]:
  return [r["ratio"] for r in rows if r["donated"] and r["optimizer"] == "vsgd"]


def cost_sentence(folder: str = RESULTS) -> str:
  """What VSGD costs, for the README: the state's bytes a parameter, the donated step
  against Adam's on a GPU (the states' run at 50M parameters, else the device suite)
  and on the CPU (``step_cost``), and the compile at ``COMPILE_LEAVES`` leaves, each
  with its machine, all from ``folder``'s JSON.
  """
  cpu = common.load(folder, "step_cost")
  bytes_of = {r["optimizer"]: r["state_bytes_per_param"] for r in cpu["rows"]}

  def span(ratios):
    return f"{min(ratios):.2f}-{max(ratios):.2f}x"
  sizes = sorted({r["params"] for r in cpu["rows"]})
  states = verdict.gpu_states(folder)
  if states:
    ratio, machine = states
    gpu_text = (f"{ratio['vsgd']:.2f}x Adam's at 50M parameters on an {machine['device']} "
                f"({ratio['vsgd+bf16_state']:.2f}x with bfloat16 state)")
  else:
    suite = common.read_json(os.path.join(folder, "device_suite.json"))
    gpu_text = (f"{span(_donated_vsgd_ratios(suite['parts']['step_cost']['rows']))} Adam's "
                f"on an {suite['machine']['device']}")
  compiles = [f"{r['ratio_to_adam']:.1f}x {where}" for name, where in
              (("compile_time_gpu", "on the GPU"), ("compile_time", "on the CPU"))
              for r in [verdict.compile_row(folder, name)] if r]
  compile_text = (f" A {verdict.COMPILE_LEAVES}-leaf tree compiles in Adam's time times "
                  f"{' and '.join(compiles)} ([scan over layers](docs/howto.md))."
                  if compiles else "")
  return (f"**Cost:** the state holds {bytes_of['vsgd']:.0f} bytes a parameter "
          f"({bytes_of['vsgd+bf16_state']:.0f} with `state_dtype=jnp.bfloat16`; Adam: "
          f"{bytes_of['adam']:.0f}). A donated step takes {gpu_text}, and "
          f"{span(_donated_vsgd_ratios(cpu['rows']))} on {cpu['machine']['cores']} cores of an "
          f"{cpu['machine']['cpu']} CPU at {sizes[0] / 1e6:.0f}M to {sizes[-1] / 1e6:.0f}M "
          f"parameters ([results](docs/results.md)).{compile_text}")


def page(folder: str = RESULTS, images: str = "../" + RESULTS) -> str:
  """The results page: the contest's verdicts, cost and memory, and the experiments'
  table, each a section built for the page; ``images`` is ``folder`` as seen from it.
  """
  return markdown.tidy([
      "# Results\n", f"Generated by `{COMMAND}` from `benchmarks/results/`; grids, "
      f"protocols and every table: the [appendix]({APPENDIX}).\n",
      *contest.page_section(folder, images, experiments.decision_p_values(folder)),
      f"## {COST_HEADING}\n", *verdict.cost_lines(folder), "",
      *_floor_section(folder),
      *experiments.page_section(folder)])


def appendix(folder: str = RESULTS, images: str = "../" + RESULTS) -> str:
  """The appendix: every section whole, the contest's first, then the small
  workloads', the experiments', the time to result's and the costs'.
  """
  out = ["# Results: the appendix\n", f"Generated by `{COMMAND}` from `benchmarks/results/`, "
         "with the [results page](results.md): every table the page summarizes, whole, "
         "and those it leaves out.\n"]
  out += contest.section(folder, images, experiments.decision_p_values(folder))
  out += verdict.section(folder)
  out += long_horizon.section(folder)
  out += experiments.section(folder)
  out += tables.summary(folder, images)
  out += tables.grid_check(folder)
  out += tables.details(folder, images)
  out += _step_cost_section("step_cost", "Step cost next to Adam", folder, images)
  out += device_results.sections(folder)
  out += _compile_time_section(folder)
  for name, title in (("train_step", "Whole train step, VSGD / Adam"),
                      ("train_step_paper_batch", "Whole train step at the paper's batch sizes, "
                                                 "VSGD / Adam")):
    out += _train_step_section(name, title, folder)
  out += noise_scale.section(os.path.join(folder, "noise_scale"), f"{images}/noise_scale")
  out += ["## The paper's Table 1 (test accuracy %, mean of 3 seeds)\n", PAPER_TABLE1]
  return markdown.tidy(out)


def pages(folder: str = RESULTS, images: str = "../" + RESULTS) -> tuple[str, str]:
  """(the results page, its appendix)."""
  return page(folder, images), appendix(folder, images)


def write_page(path: str = "docs/results.md", folder: str = RESULTS) -> None:
  """Writes the results page and, beside it, its appendix (``APPENDIX``) and the
  learning-rate guide (``choosing_lr.md``, ``guide``), all from ``folder``.
  """
  images = os.path.relpath(folder, os.path.dirname(os.path.abspath(path)) or ".")
  for target, content in zip((path, os.path.join(os.path.dirname(path), APPENDIX)),
                             pages(folder, images), strict=True):
    with open(target, "w") as f:
      f.write(content)
    print(f"wrote {target}")
  guide_page = os.path.join(os.path.dirname(path), "choosing_lr.md")
  with open(guide_page, "w") as f:
    f.write(guide.render(folder))
  print(f"wrote {guide_page}")


def schedule_free_sentence(folder: str = RESULTS) -> str:
  """The how-to's sentence on where schedule-free VSGD held its own against
  schedule-free AdamW, by the rule with the declared margins.
  """
  rows = experiments.schedule_free_rows(reading.load_protocol(folder, reading.MAIN),
                                        decisions.margins(folder))
  if not rows:
    return ""
  decided = experiments.schedule_free_findings(rows)
  tests = sorted({f"{r['sf_adamw']['comparison'].n_a} seeds, {r['sf_adamw']['comparison'].test}"
                  "-tests" for r in rows if r["sf_adamw"] is not None})
  return (f"Under the main protocol ({'; '.join(tests)}, the declared margins; the "
          "results page, *Schedule-free VSGD*, has every row): " + decided
          + ". Use it where it won or was equivalent; elsewhere "
          "schedule-free AdamW stays ahead or the runs could not tell.")


def vsgd_muon_sentence(folder: str = RESULTS) -> str:
  """The API page's sentence on ``experimental.vsgd_muon``: what its promotion
  rule, declared before the runs, decides from the results, the same rows as the
  results page's (the contest's LM in place of the 150-step char LM once both ran).
  """
  main = reading.load_protocol(folder, reading.MAIN)
  declared = decisions.margins(folder)
  rows = experiments.vsgd_muon_rows(main, declared, experiments.contest_row(folder, declared))
  decided = experiments.vsgd_muon_decision(rows).replace("**Decision.** ", "").strip()
  return (f"Measured against `optax.contrib.muon` (the results page, "
          f"*experimental.vsgd_muon*, has every row): {decided[:1].lower()}{decided[1:]}")


def generated_blocks(folder: str = RESULTS) -> dict[tuple[str, str], str]:
  """(file, key) -> the sentence the renderer writes between ``<!-- key:start -->``
  and ``<!-- key:end -->`` in that file: every sentence outside the generated
  pages that states a verdict.
  """
  others = experiments.decision_p_values(folder)  # the page's other verdicts, for Holm
  readme, docs = (contest.readme_sentence(folder, docs=d, others=others) for d in ("docs/", ""))
  if readme is None:
    raise ValueError(f"the README's verdict needs the contest's results under {folder}/"
                     f"{contest.FOLDER}: run `python -m benchmarks.contest` first")
  return {("README.md", "verdict"): readme,
          ("docs/index.md", "verdict"): "**Should you use it?** " + docs,
          ("docs/howto.md", "bf16-horizon"): long_horizon.howto_sentence(folder),
          ("docs/howto.md", "schedule-free"): schedule_free_sentence(folder),
          ("docs/api.md", "vsgd-muon"): vsgd_muon_sentence(folder)}


def marked(key: str) -> re.Pattern:
  """The generated block ``key`` of a file, between its two marker comments."""
  return re.compile(rf"(<!-- {key}:start -->\n)(.*?)(<!-- {key}:end -->)", re.S)


def rewrite_block(text: str, key: str, sentence: str) -> str:
  """``text`` with the block ``key`` holding ``sentence``, wrapped at 80 columns."""
  pattern = marked(key)
  if not pattern.search(text):
    raise ValueError(f"no <!-- {key}:start --> ... <!-- {key}:end --> block to rewrite")
  body = textwrap.fill(sentence, 80, break_on_hyphens=False, break_long_words=False) + "\n"
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

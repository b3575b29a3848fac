"""What VSGD costs next to Adam, from the cost runners' JSON.

The results page's "Cost and memory" (``page_section``: a bullet for the GPU's
step, the CPU's, the memory and the compile, ``cost_lines``, which the README
repeats, then each state against its floor) and the appendix's step-cost,
device-suite, compile-time and train-step tables (``appendix_sections``).
"""

from __future__ import annotations

import re

from benchmarks import common
from benchmarks.reporting import markdown

DEVICE_SUITE = "device_suite"


def cost_lines(folder: str) -> list[str]:
  """What VSGD costs, as bullets, each with its machine: its donated step over
  Adam's on a GPU (each state at 50M parameters, ``step_cost_gpu_states.json``,
  else the device suite's sizes) and on the CPU (``step_cost.json``), its
  state's bytes a parameter against Adam's and with a bfloat16 state, and its
  compile at ``COMPILE_LEAVES`` leaves.
  """
  out = []
  states = gpu_states(folder)
  suite = _device_suite(folder)
  suite_rows = [r for r in (suite or {}).get("parts", {}).get("step_cost", {}).get("rows", [])
                if r["optimizer"] == "vsgd" and r["donated"]]
  if states:
    ratio, machine = states
    # The other states' ratios are the floor table's (``floor_section``).
    out.append(f"- **Cost on a GPU:** {ratio['vsgd']:.2f}x Adam's donated step at 50M "
               f"parameters on an {machine['device']}; {ratio['vsgd+bf16_state']:.2f}x with "
               f"the bfloat16 state ({ratio['vsgd+bf16_nearest']:.2f}x rounded to nearest).")
  elif suite_rows:
    sizes = sorted({r["params"] for r in suite_rows})
    out.append(f"- **Cost on a GPU:** {_span([r['ratio'] for r in suite_rows])} Adam's step "
               f"on an {suite['machine']['device']}, {sizes[0] / 1e6:.0f}M to "
               f"{sizes[-1] / 1e6:.0f}M parameters (`device_suite.json`).")
  step = common.load(folder, "step_cost")
  rows = [r for r in (step or {}).get("rows", []) if r["optimizer"] == "vsgd" and r["donated"]]
  if rows:
    low = min(rows, key=lambda r: r["params"])
    high = max(rows, key=lambda r: r["params"])
    out.append(f"- **Cost on the CPU:** {low['ratio']:.2f}x Adam's step at "
               f"{low['params'] / 1e6:.0f}M parameters to {high['ratio']:.2f}x at "
               f"{high['params'] / 1e6:.0f}M on {short_machine(step)} (`step_cost.json`).")
    bytes_of = {r["optimizer"]: r["state_bytes_per_param"] for r in step["rows"]}
    bf16 = (f"; {bytes_of['vsgd+bf16_state']:.0f} with `state_dtype=jnp.bfloat16`"
            if "vsgd+bf16_state" in bytes_of else "")
    adam = f" (Adam: {bytes_of['adam']:.0f})" if "adam" in bytes_of else ""
    out.append(f"- **Memory:** {bytes_of['vsgd']:.0f} bytes a parameter{adam}{bf16}.")
  compiles = [f"{r['ratio_to_adam']:.1f}x on {short_machine(result)}"
              for name in ("compile_time_gpu", "compile_time")
              for result in [common.load(folder, name)] if result
              for r in [compile_row(result)] if r]
  if compiles:
    out.append(f"- **Compile:** a {COMPILE_LEAVES}-leaf tree's `vsgd` step, Adam's time "
               f"times {' and '.join(compiles)} (`compile_time*.json`).")
  return out


def short_machine(result: dict) -> str:
  """A result's machine in a few words: an "NVIDIA H200", "2 cores of an Intel Xeon"."""
  m = result["machine"]
  if m["platform"] != "cpu":
    return f"an {m['device']}"
  model = re.sub(r"\((R|TM)\)|\bProcessor\b|\bCPU\b|@.*|\d+-Core", "", m["cpu"]).split()
  return f"{m['cores']} cores of an {' '.join(model[:2])}"


def _span(ratios: list[float]) -> str:
  return f"{min(ratios):.2f}x" if max(ratios) - min(ratios) < 0.005 else \
      f"{min(ratios):.2f}-{max(ratios):.2f}x"


COMPILE_LEAVES = 290  # the compile targets' tree: a transformer's worth of leaves


def compile_row(result: dict, state: str = "vsgd") -> dict | None:
  """``state``'s row of today's package at ``COMPILE_LEAVES`` leaves in a compile-time
  result (``compile_time*.json``).
  """
  return next((r for r in result.get("rows", []) if r["optimizer"] == state
               and r["version"] == "today" and r["leaves"] == COMPILE_LEAVES), None)


def gpu_states(folder: str) -> tuple[dict, dict] | None:
  """Each state's donated step over Adam's at 50M parameters on a GPU, today's
  package (``step_cost_gpu_states.json``), and its machine; None where not run.
  """
  result = common.load(folder, "step_cost_gpu_states")
  if not result:
    return None
  return {r["optimizer"]: r["ratio"] for r in result["rows"]}, result["machine"]


def _device_suite(folder: str) -> dict | None:
  """The suite's results if they come from an accelerator: a ``--quick`` run or a
  CPU's numbers never stand for a device's.
  """
  suite = common.load(folder, DEVICE_SUITE)
  if not suite or suite.get("quick") or not suite.get("machine"):
    return None
  if suite["machine"]["platform"] == "cpu":
    return None
  return suite if any(p["status"] == "done" or p.get("rows") for p in suite["parts"].values()) \
      else None


def _mb(value) -> str:
  return "-" if value is None else f"{value:,.0f}"


def _step_cost_table(part: dict) -> list[str]:
  return markdown.table(
      ["params", "donated", "optimizer", "median ms", "x Adam (p25-p75)", "state bytes/param"],
      [[f"{r['params']:,}", str(r["donated"]), r["optimizer"], f"{r['median_ms']:.3f}",
        common.ratio_text(r, decimals=2),
        f"{r['state_bytes_per_param']:.1f}"] for r in part.get("rows", [])])


def _train_step_table(part: dict) -> list[str]:
  out = markdown.table(
      ["config", "batch", "Adam: ms, images/s", "VSGD: ms, images/s",
       "VSGD/Adam (p25-p75); control", "peak device MB"],
      [[r["config"], str(r["batch"]), f"{r['adam_ms']:.1f}, {r['adam_images_per_s']:,.0f}",
        f"{r['vsgd_ms']:.1f}, {r['vsgd_images_per_s']:,.0f}",
        f"{common.ratio_text(r)}; {common.ratio_text(r, 'control_')}",
        _mb(r.get("device_peak_mb"))] for r in part.get("rows", [])]) if part.get("rows") else []
  missing = [f"{name} ({status})" for name, status in part.get("configs", {}).items()
             if status != "done"]
  if missing:
    note = f"Not measured: {', '.join(missing)}."
    out += ["", note] if out else [note]
  return out


def _trainer_rows(parts: dict) -> list[str]:
  out = ["| run | steps | batch | images/s | wall s (compile, eval, checkpoint included) | "
         "test accuracy |", "|---|---|---|---|---|---|"]
  for name in ("trainer_synthetic", "trainer_digits"):
    r = parts.get(name)
    if not r or "steps" not in r:
      out.append(f"| {name} | {r['status'] if r else 'not run'} | | | | |")
      continue
    c = r["config"]
    run = f"{c['dataset']} / {c['model']} / {c['optimizer']}{' / bf16' if c['bf16'] else ''}"
    accuracy = f"{100 * r['test_accuracy']:.1f}%"
    if r["synthetic"]:
      accuracy += " (random data: meaningless)"
    out.append(f"| {run} | {r['steps']} | {c['batch_size']} | {r['images_per_second']:,.0f} | "
               f"{r['wall_s']:.0f} | {accuracy} |")
  return out


def device_suite_section(folder: str) -> list[str]:
  suite = _device_suite(folder)
  if suite is None:
    return []
  parts = suite["parts"]
  unfinished = [f"{name} ({part['status']})" for name, part in parts.items()
                if part["status"] != "done"]
  # The suite's optimizer step (its step_cost part) was timed call by call, the host's
  # dispatch where that is as long as the step: it stays in the JSON, and the device's
  # own step is gpu_ablation_section's.
  tables = markdown.section("results_appendix", "device_train_step",
                            table=_train_step_table(parts["train_step"])) \
      if "train_step" in parts else []
  return markdown.section(
      "results_appendix", "device_suite", device=common.machine_text(suite["machine"], cpu=False),
      started=suite["started"], elapsed=f"{suite['elapsed_s']:.0f}",
      budget=f"{suite['budget_s']:.0f}",
      # Written by hand where a part was measured again outside the suite.
      notes=(f" Not finished: {'; '.join(unfinished)}." if unfinished else "")
      + "".join(f" {note}" for note in suite.get("notes", [])),
      parts=tables, trainer=_trainer_rows(parts))


def _paired_table(rows: list[dict]) -> list[str]:
  """Each variant's step over the optimizer it was timed against in the same rounds
  (``step_cost.py``'s pairs); nothing for results measured before the pairs.
  """
  paired = [r for r in rows if "paired" in r]
  if not paired:
    return []
  return ["Variants over their base optimizer, timed in the same rounds:\n",
          *markdown.table(["params", "donated", "variant / base", "step time ratio (p25-p75)"],
                          [[f"{r['params']:,}", str(r["donated"]),
                            f"{r['optimizer']} / {r['paired']['against']}",
                            common.ratio_text(r["paired"])] for r in paired])]


def step_cost_section(folder: str, images: str) -> list[str]:
  step = common.load(folder, "step_cost")
  if not step:
    return []
  load = step.get("load_average")
  triple = lambda values: "/".join(f"{v:.1f}" for v in values)  # noqa: E731
  load_text = (f"; load average (1, 5, 15 min) {triple(load['start'])} at the start and "
               f"{triple(load['end'])} at the end" if load else "")
  peers = step.get("torch_peer")
  return markdown.section(
      "results_appendix", "step_cost", machine=common.machine_text(step["machine"]) + load_text,
      images=images, paired=_paired_table(step["rows"]),
      table=markdown.table(
          ["params, donated", "optimizer", "median ms, x Adam (p25-p75)",
           "state bytes/param", "compile s", "page faults/step"],
          [[f"{r['params']:,}, {r['donated']}", r["optimizer"],
            f"{r['median_ms']:.2f}, {common.ratio_text(r, decimals=2)}",
            f"{r['state_bytes_per_param']:.0f}", f"{r['compile_s']:.2f}",
            f"{r['page_faults_per_step']:.0f}" if "page_faults_per_step" in r else "-"]
           for r in step["rows"]]),
      torch=[] if not peers else [
          "PyTorch peers on the same machine and cores (not donated):\n",
          *markdown.table(["params", "pytorch-optimizer VSGD ms", "torch Adam ms",
                           "vsgd_optax ms", "speed-up"],
                          [[f"{p['params']:,}", f"{p['torch_vsgd']:.2f}",
                            f"{p['torch_adam']:.2f}", f"{p['vsgd_optax']:.2f}",
                            f"{p['speedup_vs_torch_vsgd']:.1f}x"] for p in peers])])


def train_step_section(name: str, title: str, folder: str) -> list[str]:
  ts = common.load(folder, name)
  if not ts:
    return []
  return markdown.section(
      "results_appendix", "train_step", title=title, machine=common.machine_text(ts["machine"]),
      repeats=str(ts["repeats"]), note=ts.get("note", ""),
      table=markdown.table(["config", "batch", "Adam ms", "VSGD ms", "VSGD/Adam (p25-p75)",
                            "control (p25-p75)"],
                           [[r["config"], str(r["batch"]), f"{r['adam_ms']:.1f}",
                             f"{r['vsgd_ms']:.1f}", common.ratio_text(r),
                             common.ratio_text(r, "control_")] for r in ts["rows"]]))


def compile_time_section(folder: str) -> list[str]:
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
    # A tree is its leaves, and a stacked one (a scan over layers) its layers too.
    tree = lambda r: (r["leaves"], r.get("layers", 0) if r.get("stacked") else 0)  # noqa: E731
    by_key = {(tree(r), r["optimizer"], r["version"]): r for r in result["rows"]}
    rows = []
    for leaves, layers in sorted({tree(r) for r in result["rows"]}, key=lambda t: (-t[1], t[0])):
      for state in dict.fromkeys(r["optimizer"] for r in result["rows"]):
        cells = [by_key.get(((leaves, layers), state, v)) for v in versions]
        if cells[0] is not None:
          rows.append([f"{leaves} ({layers} layers stacked)" if layers else str(leaves), state,
                       *(f"{c['total_s']:.1f} ({c['ratio_to_adam']:.1f}x)" if c else "-"
                         for c in cells)])
    out += markdown.section(
        "results_appendix", "compile_time_machine", where=where,
        machine=common.machine_text(result["machine"]), repeats=str(result["rows"][0]["repeats"]),
        before=f"; `{before}` is the package before this change." if before else ".",
        note=f" {result['note']}" if result.get("note") else "",
        table=markdown.table(["leaves", "state", *(f"{v} s (x Adam)" for v in versions)], rows))
  return markdown.section("results_appendix", "compile_time") + out if out else []


def gpu_ablation_section(folder: str) -> list[str]:
  """``gpu_ablation.py``'s two tables (each state's step with a stage left out, and
  one leaf's steps by XLA and by Pallas kernels), then the device suite's step cost
  part at every size where it ran alone (``step_cost_gpu.json``).
  """
  result = common.load(folder, "gpu_ablation")
  if not result or result.get("quick"):
    return []
  def table(rows: dict, extra: str, cell) -> list[str]:
    return markdown.table(
        ["step", "ms", "x Adam (p25-p75)", extra],
        [[label, f"{r['median_ms']:.3f}", common.ratio_text(r, decimals=2), cell(label, r)]
         for label, r in rows.items()])
  one_leaf = result["one_leaf"]
  temporaries = one_leaf["temp_bytes"]
  sizes = common.load(folder, "step_cost_gpu")
  return markdown.section(
      "results_appendix", "gpu_ablation", machine=common.machine_text(result["machine"]),
      stages=table(result["stages"]["rows"], "dispatch ms",
                   lambda _, r: f"{r['dispatch_ms']:.2f}" if "dispatch_ms" in r else ""),
      leaf=f"{one_leaf['params']:,}", matrix=" x ".join(map(str, one_leaf["matrix"])),
      one_leaf=table(one_leaf["rows"], "temporaries MB",
                     lambda label, _: f"{temporaries[label] / 1e6:.1f}"
                     if temporaries.get(label) is not None else "")) + (
      markdown.section("results_appendix", "gpu_step_sizes", elapsed=f"{sizes['elapsed_s']:.0f}",
                       limit=f"{sizes['limit_s']:.0f}", table=_step_cost_table(sizes))
      if sizes else [])


def floor_section(folder: str) -> list[str]:
  """``floor.py``'s table: each state's floor bytes, what the CPU's and the GPU's
  compiled steps count an element, and the GPU's measured step over Adam's.
  """
  result = common.load(folder, "floor")
  if not result:
    return []
  gpu = result.get("gpu_machine")
  number = lambda value, form: "not run" if value is None else format(value, form)
  return markdown.section(
      "results", "floor", side=str(result["side"]), machine=common.machine_text(result["machine"]),
      gpu=(f"GPU: {gpu['device']}, {gpu['date']}; its step at 50M parameters, device time."
           if gpu else "No GPU run holds these states yet."),
      table=markdown.table(
          ["state", "floor B (x Adam)", "CPU flops, bytes", "GPU flops, bytes", "GPU step/Adam"],
          [[r["state"], f"{r['floor_bytes']} ({r['floor_vs_adam']:.2f})",
            f"{r['flops_per_element']:.0f}, {r['bytes_per_element']:.0f}",
            "not run" if r.get("gpu_bytes_per_element") is None else
            f"{r['gpu_flops_per_element']:.0f}, {r['gpu_bytes_per_element']:.0f}",
            number(r["gpu_step_vs_adam"], ".2f")] for r in result["rows"]]))


def page_section(folder: str) -> list[str]:
  """The results page's section: the cost bullets, then each state against its floor."""
  return [*markdown.section("results", "cost", bullets=cost_lines(folder)),
          *floor_section(folder)]


def appendix_sections(folder: str, images: str) -> list[str]:
  """The appendix's sections: the CPU's step cost, the device suite, where the GPU
  step's time goes, the compile times and the whole train step; ``images`` is
  ``folder`` as seen from the page.
  """
  return [*step_cost_section(folder, images),
          *device_suite_section(folder), *gpu_ablation_section(folder),
          *compile_time_section(folder),
          *train_step_section("train_step", "Whole train step, VSGD / Adam", folder),
          *train_step_section("train_step_paper_batch",
                              "Whole train step at the paper's batch sizes, VSGD / Adam", folder)]

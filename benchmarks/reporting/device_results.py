"""Results-page sections on memory and accelerators: optimizer state per parameter
next to step time (``step_cost.json``), and the device suite (``device_suite.json``).

``render.py`` calls ``sections``; a smoke run's or a CPU's suite is not shown.
"""

from __future__ import annotations

from benchmarks import common
from benchmarks.reporting import markdown
from benchmarks.reporting import reading
from benchmarks.reporting import tables

DEVICE_SUITE = "device_suite"
# The optimizers of the state-memory table: what each keeps per parameter, and its step.
STATE_MEMORY_OPTIMIZERS = ("adam", "adam+bf16_mu", "vsgd", "vsgd+bf16_state",
                           "vsgd+bf16_nearest", "constant_vsgd")


def state_memory_rows(rows: list[dict]) -> dict[str, list[dict]]:
  """For each of ``STATE_MEMORY_OPTIMIZERS`` in ``step_cost.json``'s ``rows``, its rows
  by size, with donated buffers where they were measured (the trainer donates).
  """
  donated = any(r["donated"] for r in rows)
  chosen = sorted((r for r in rows if r["donated"] == donated), key=lambda r: r["params"])
  table = {name: [r for r in chosen if r["optimizer"] == name]
           for name in STATE_MEMORY_OPTIMIZERS}
  return {name: found for name, found in table.items() if found}


def format_state_memory(rows: list[dict]) -> str:
  """Markdown: state bytes per parameter next to the step time at each size."""
  table = state_memory_rows(rows)
  sizes = sorted({r["params"] for found in table.values() for r in found})
  lines = ["| optimizer | state bytes/param | "
           + " | ".join(f"{n:,} params: ms (x Adam)" for n in sizes) + " |",
           "|---|---|" + "---|" * len(sizes)]
  for name, found in table.items():
    by_size = {r["params"]: f"{r['median_ms']:.2f} ({r['ratio']:.2f}x)" for r in found}
    lines.append(f"| {name} | {found[-1]['state_bytes_per_param']:.1f} | "
                 + " | ".join(by_size.get(n, "-") for n in sizes) + " |")
  return "\n".join(lines)


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


def state_memory_section(folder: str) -> list[str]:
  step = common.load(folder, "step_cost")
  if not step or not state_memory_rows(step["rows"]):
    return []
  donated = any(r["donated"] for r in step["rows"])
  load = step.get("load_average")
  load_text = (f" Load average (1, 5, 15 min) {_triple(load['start'])} at the start and "
               f"{_triple(load['end'])} at the end, on {step['machine']['cores']} cores."
               if load else "")
  return ["## Optimizer state per parameter, next to step time\n",
          f"Buffers {'donated' if donated else 'not donated'}; machine: "
          f"{common.machine_text(step['machine'], cpu=False)}, {step['machine']['cpu']} "
          "(`python -m benchmarks.step_cost`).\n",
          format_state_memory(step["rows"]), "",
          f"The full table is under \"Step cost next to Adam\".{load_text} State bytes count "
          "every array the optimizer keeps, divided by the number of parameters. "
          "`adam+bf16_mu` is `optax.adam(mu_dtype=jnp.bfloat16)`; `vsgd+bf16_state` is "
          "`vsgd(state_dtype=jnp.bfloat16)`.\n"] + _state_accuracy(folder)


def _state_accuracy(folder: str) -> list[str]:
  """What each state costs in result: the same optimizers' time-to-result test
  metric under the main protocol, as its tables print it.
  """
  runs = reading.load_protocol(folder, reading.MAIN).values()
  if not runs:
    return []
  header = " | ".join(f"{r['workload']['title']} ({r['workload']['metric']})" for r in runs)
  lines = ["And the same optimizers' results in the time-to-result benchmark (main "
           "protocol, 5% warmup then cosine decay; test metric, mean ± std over the seeds "
           "at each one's tuned peak rate, accuracy in %; - where the entry was not run):\n",
           f"| optimizer | {header} |", "|---|" + "---|" * len(runs)]
  for name in STATE_MEMORY_OPTIMIZERS:
    cells = ["-" if name not in r["entries"] else tables.mean_std(r["workload"],
                                                                   r["entries"][name])
             for r in runs]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return lines + [""]


def _triple(values) -> str:
  return "/".join(f"{v:.1f}" for v in values)


def _ratio(row: dict) -> str:
  return f"{row['ratio']:.2f} ({row['ratio_p25']:.2f}-{row['ratio_p75']:.2f})"


def _mb(value) -> str:
  return "-" if value is None else f"{value:,.0f}"


def _step_cost_table(part: dict) -> list[str]:
  out = ["| params | donated | optimizer | median ms | x Adam (p25-p75) | state bytes/param |",
         "|---|---|---|---|---|---|"]
  for r in part.get("rows", []):
    out.append(f"| {r['params']:,} | {r['donated']} | {r['optimizer']} | "
               f"{r['median_ms']:.3f} | {_ratio(r)} | {r['state_bytes_per_param']:.1f} |")
  return out


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
  out = ["## On an accelerator: the device suite\n",
         f"Device: {common.machine_text(suite['machine'], cpu=False)}; started {suite['started']}, "
         f"{suite['elapsed_s']:.0f} s of its {suite['budget_s']:.0f} s "
         "(`python -m benchmarks.device_suite`)."
         + (f" Not finished: {'; '.join(unfinished)}." if unfinished else "")
         # Written by hand where a part was measured again outside the suite.
         + "".join(f" {note}" for note in suite.get("notes", [])) + "\n"]
  if "step_cost" in parts:
    out += ["### Optimizer step next to Adam\n", *_step_cost_table(parts["step_cost"]), ""]
  if "train_step" in parts:
    out += ["### The paper configs' train step at the paper's batch sizes (random data)\n",
            "The trainer's own jitted step, state donated; the control is a second Adam "
            "step timed in the same rounds. Peak device memory is the process's, with all "
            "three steps' states alive.\n", *_train_step_table(parts["train_step"]), ""]
  out += ["### The trainer end to end\n", *_trainer_rows(parts), ""]
  return out


def sections(folder: str) -> list[str]:
  """What ``render.py`` adds after the step-cost sections."""
  return state_memory_section(folder) + device_suite_section(folder)

"""The cost's tables, from ``benchmarks/results/cost_{cpu,gpu}.json`` (``python -m
benchmarks.cost`` writes this machine's part).

Every time names how it was taken, as its row's ``method`` records: ``per call``
(one jitted call a step, dispatch included), ``donated per call`` (the same,
with the params and state donated) or ``in one program`` (donated steps in one
``fori_loop``: the device's time alone).
"""

from __future__ import annotations

from benchmarks import common
from benchmarks.reporting import markdown
from benchmarks.reporting import styles

PARTS = ("cpu", "gpu")
# The states of the page's tables, in the registry's order.
STATES = ("adam", "adam+bf16_mu", "vsgd", "vsgd+bf16_state", "vsgd+bf16_nearest",
          "constant_vsgd", "factored_vsgd", "factored_vsgd+bf16_mu")
# The page's step time, per part: the methods its columns give, at the largest size.
PAGE_METHODS = {"cpu": ("donated per call",), "gpu": ("per call", "in one program")}


def load(folder: str) -> dict[str, dict]:
  return {part: found for part in PARTS
          if (found := common.load(folder, f"cost_{part}")) is not None}


def _ratio(row: dict | None) -> str:
  return "-" if row is None else common.ratio_text(row, decimals=2)


def _step(part: dict, method: str, size: int | None = None) -> dict[str, dict]:
  """The rows of one method at ``size`` (default: the largest measured), by optimizer."""
  rows = [r for r in part["step"] if r["method"] == method]
  size = size or max((r["params"] for r in rows), default=None)
  return {r["optimizer"]: r for r in rows if r["params"] == size}


def _largest(part: dict) -> str:
  return f"{max(r['params'] for r in part['step']) / 1e6:.0f}M"


def page_step_table(parts: dict) -> str:
  """Each state's bytes a parameter (of the CPU part's square matrix), and its step's
  median ratio to Adam's at the largest size, by part and method (the quartiles are in
  the appendix's tables).
  """
  columns = [(p, m) for p in PARTS if p in parts for m in PAGE_METHODS[p]]
  by = {(p, m): _step(parts[p], m) for p, m in columns}
  square = parts["cpu"]["memory"]["rows"][0]["bytes_per_param"] if "cpu" in parts else {}
  header = ["state", "bytes a parameter",
            *(f"{p.upper()}, {m}" for p, m in columns)]
  return markdown.table(header, [[styles.short(s),
                                  f"{square[s]:.2f}" if s in square else "-",
                                  *(f"{by[c][s]['ratio']:.2f}" if s in by[c] else "-"
                                    for c in columns)]
                                 for s in STATES])


def step_table(part: dict) -> str:
  """Every size and method of one part: each state's step over Adam's, and in ms."""
  rows = []
  for method in dict.fromkeys(r["method"] for r in part["step"]):
    for size in sorted({r["params"] for r in part["step"] if r["method"] == method}):
      found = _step(part, method, size)
      for s in STATES:
        if s in found:
          paired = found[s].get("paired")
          rows.append([f"{size / 1e6:.1f}M", method, styles.short(s),
                       f"{found[s]['median_ms']:.2f}", _ratio(found[s]),
                       _ratio(paired) + f" ({paired['against']})" if paired else "-"])
  return markdown.table(["params", "method", "state", "ms", "x Adam (p25-p75)",
                         "x its base"], rows)


def cpu_form_table(part: dict) -> str:
  rows = [[f"{r['params'] / 1e6:.1f}M", _ratio(r["vsgd"]), _ratio(r["vsgd, as written"]),
           _ratio(r["as_written_vs_in_place"])] for r in part.get("cpu_form", [])]
  return markdown.table(["params", "CPU form, x Adam", "as written, x Adam",
                         "as written, x CPU form"], rows)


def compile_table(part: dict) -> str:
  rows = [[f"{r['leaves']}" + (" (stacked)" if r["stacked"] else ""),
           styles.short(r["optimizer"]), f"{r['lower_s']:.2f}", f"{r['compile_s']:.2f}",
           f"{r['ratio_to_adam']:.2f}"] for r in part["compile"]]
  return markdown.table(["leaves", "state", "lower s", "compile s", "x Adam"], rows)


def floor_table(parts: dict) -> str:
  counted = {p: {r["state"]: r for r in parts[p]["floor"]} for p in PARTS if p in parts}
  states = [s for s in STATES if any(s in c for c in counted.values())]
  floor = next(iter(counted.values()))
  rows = [[styles.short(s),
           f"{floor[s]['floor_bytes']} ({floor[s]['floor_vs_adam']:.2f})",
           *(f"{c[s]['flops_per_element']:.0f}, {c[s]['bytes_per_element']:.0f}" if s in c
             else "-" for c in counted.values())] for s in states]
  return markdown.table(["state", "floor B (x Adam)",
                         *(f"{p.upper()} flops, bytes an element" for p in counted)], rows)


def memory_table(part: dict) -> str:
  """Each state's bytes a parameter on each tree the memory section counted."""
  trees = part["memory"]["rows"]
  states = [s for s in styles.ORDER if s in trees[0]["bytes_per_param"]]
  rows = [["parameters (share that factors)", *(
      f"{t['params'] / 1e6:.2f}M ({100 * t['factored_share']:.0f}%)" for t in trees)]]
  rows += [[styles.short(s), *(f"{t['bytes_per_param'][s]:.2f}" for t in trees)]
           for s in states]
  return markdown.table(["state", *(t["title"] for t in trees)], rows)


def muon_family_table(part: dict) -> str:
  rows = [[styles.short(r["optimizer"]), f"{r['state_bytes_per_param']:.2f}",
           f"{r['median_ms']:.2f}", _ratio(r), f"{r['compile_vs_muon']:.2f}"]
          for r in part["muon_family"]["rows"]]
  return markdown.table(["optimizer", "bytes a parameter", "ms", "step x Muon (p25-p75)",
                         "compile x Muon"], rows)


def values(folder: str) -> dict[str, str]:
  parts = load(folder)
  if not parts:
    raise ValueError(f"no cost results under {folder}: run `python -m benchmarks.cost`")
  largest = {p: _largest(parts[p]) for p in PARTS if p in parts}
  out = {"cost_step": page_step_table(parts),
         "cost_step_size": (f"{next(iter(largest.values()))} parameters"
                            if len(set(largest.values())) == 1
                            else ", ".join(f"{p.upper()} {v}" for p, v in largest.items()))}
  for p in PARTS:
    part = parts.get(p)
    out[f"{p}_cost_machine"] = common.machine_text(part["machine"]) if part else "not run yet"
    out[f"{p}_cost_command"] = part["command"] if part else "not run yet"
    out[f"{p}_cost_step"] = step_table(part) if part else "not run yet"
    out[f"{p}_cost_compile"] = compile_table(part) if part else "not run yet"
    out[f"{p}_cost_muon_family"] = (muon_family_table(part) if part and "muon_family" in part
                                    else "not run yet")
  out["cost_floor"] = floor_table(parts)
  out["cost_memory_all"] = memory_table(parts["cpu"]) if "cpu" in parts else "not run yet"
  out["cpu_cost_form"] = cpu_form_table(parts["cpu"]) if "cpu" in parts else "not run yet"
  gpu = _step(parts["gpu"], "in one program") if "gpu" in parts else {}
  call = _step(parts["gpu"], "per call") if "gpu" in parts else {}
  for s, key in (("vsgd", "vsgd"), ("vsgd+bf16_state", "bf16")):
    out[f"{key}_gpu_program"] = f"{gpu[s]['ratio']:.2f}x" if s in gpu else "not run yet"
    out[f"{key}_gpu_call"] = f"{call[s]['ratio']:.2f}x" if s in call else "not run yet"
  out["gpu_largest"] = _largest(parts["gpu"]) if "gpu" in parts else "not run yet"
  out["gpu_steps_in_program"] = next(
      (str(r["steps_in_program"]) for r in parts.get("gpu", {}).get("step", [])
       if r["method"] == "in one program"), "not run yet")
  out["memory_square"] = (parts["cpu"]["memory"]["rows"][0]["title"] if "cpu" in parts
                          else "not run yet")
  return out

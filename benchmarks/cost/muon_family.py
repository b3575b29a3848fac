"""The Muon family's step on the contest's model, next to Muon's.

For Muon, NorMuon and each VSGD-Muon, built as the contest builds them (AdamW
on the embedding, the positions and the head): the state's bytes a parameter,
the donated step's (``update`` + ``apply_updates``) median time over Muon's,
one call a step, round-robin in one process, and its lower + compile time
over Muon's.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import optax

from benchmarks.contest import entries as contest_entries
from benchmarks.cost import step as step_cost
from benchmarks.lm import model

NAMES = ("muon", "normuon", "vsgd_muon", "vsgd_muon_factored")
RATE = 0.01


def measure(size: model.Size, repeats: int, names=NAMES) -> list[dict]:
  """One row an entry: state bytes a parameter, step and compile over Muon's."""
  params = model.init(jax.random.key(0), size)
  builds = {name: contest_entries.ENTRIES[name].build(optax.constant_schedule(RATE))
            for name in names}
  compile_s = {}
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  for name, opt in builds.items():
    step = step_cost.step_fn(opt, donate=True)
    state = jax.eval_shape(opt.init, params)
    jax.clear_caches()
    started = time.perf_counter()
    step.lower(params, state, grads).compile()
    compile_s[name] = time.perf_counter() - started
  timed = step_cost.time_against(builds, params, repeats, donate=True, steps=1, against="muon")
  n = sum(x.size for x in jax.tree.leaves(params))
  return [{"optimizer": name, "params": n, "method": "donated per call",
           **{k: v for k, v in timed[name].items() if k != "samples"},
           "compile_s": compile_s[name], "compile_vs_muon": compile_s[name] / compile_s["muon"]}
          for name in names]

"""The ladder's protocol, declared before its runs: entries, sizes, budgets, rates, metric, rule.

Everything a verdict of the ladder depends on is fixed here, in a commit that
comes before the first ladder run (``benchmarks/results/ladder/PROTOCOL.md``
says the same in words). A later commit may only fill in what this one says is
to be fixed from the timings (``CPU_SIZES`` and ``CPU_BUDGET_HOURS``), before
any ladder run.

* **Entries** (``ENTRIES``): AdamW, Muon (``optax.contrib.muon``), NorMuon
  (``benchmarks/lm/normuon.py``), Muon-VS (variance-scaled Muon, arXiv
  2601.14603, ``benchmarks/lm/muon_vs.py``) and VSGD-Muon as users get it
  (``vsgd_optax.vsgd_muon``, factored rates, the hidden kernels' dimension
  numbers). Plain VSGD is not run on the ladder (the contest keeps it).
* **The AdamW part** (``ADAMW_PART_RULE``): every Muon-family entry steps the
  embedding, positions, head, norms and biases with one AdamW, the same for
  all, at the rate AdamW chose for itself at that size and budget, betas
  ``ADAMW_BETAS``, decay ``DECAY`` on its 2-D leaves. The matrices take
  decoupled decay ``DECAY`` times their rate, every entry alike.
* **Sizes and budgets** (``SIZES``, ``BUDGETS``): characters a parameter.
* **Rates** (``RATE_RULE``, ``GPU_RATE_RULE``), **seeds** (``SEEDS``).
* **Metric** (``METRIC``): token-equivalent speedup against AdamW and against
  Muon (Wen et al., ICLR 2026), and paired test bits/char differences.
* **Recommendation** (``RECOMMENDATION_RULE``): when ``vsgd_muon`` stays the
  recommended default.
"""

from __future__ import annotations

import math

from benchmarks.lm import model

# --- Entries -------------------------------------------------------------------------------
REFERENCES = ("adamw", "muon")  # the entries the speedups are measured against
MUON_FAMILY = ("muon", "normuon", "muon_vs", "vsgd_muon")
ENTRIES = ("adamw", *MUON_FAMILY)  # the order they train and the tables list them in

# --- The AdamW part and weight decay, the same for every entry ------------------------------
ADAMW_BETAS = (0.9, 0.95)  # the AdamW entry's, and the AdamW part's of every Muon-family entry
ADAMW_EPS = 1e-8
DECAY = 0.1  # AdamW's decoupled decay on 2-D leaves; the matrices' decay, times their rate
ADAMW_PART_RULE = (
    "Every Muon-family entry (Muon, NorMuon, Muon-VS, VSGD-Muon) steps the leaves that are not "
    "hidden kernels (embedding, positions, head, LayerNorm scales and biases, MLP biases) with "
    "one and the same AdamW: betas 0.9/0.95, eps 1e-8, decoupled decay 0.1 on its 2-D leaves, "
    "the warmup-cosine schedule, and the peak rate that the AdamW entry chose for itself (on "
    "validation) at the same size and data budget. The AdamW entry itself runs betas 0.9/0.95 "
    "and decay 0.1 on every 2-D leaf. The hidden kernels of every Muon-family entry take "
    "decoupled weight decay 0.1 times their own rate (optax.contrib.muon's weight_decay), "
    "NorMuon's and Muon-VS's included. Hence at each (size, budget) AdamW trains first.")
# The check of that rule: the AdamW part's rate times and divided by sqrt(10).
SENSITIVITY_FACTORS = (math.sqrt(10.0), 1.0 / math.sqrt(10.0))
SENSITIVITY_RULE = (
    "At the contest's size (0.44M parameters) and the largest CPU budget (10 characters a "
    "parameter), every Muon-family entry runs again at its chosen matrix rate, 3 seeds, with "
    "the AdamW part's rate multiplied by sqrt(10) and divided by sqrt(10). Reported: each "
    "entry's test bits/char at the three AdamW-part rates, and whether VSGD-Muon's paired "
    "verdicts against Muon and NorMuon change when every entry's AdamW part moves together.")
# PROTOCOL.md's addendum 3: the check runs at the size that holds as well, where each entry's
# own-best AdamW part of the three decides whether that size keeps holding.
SENSITIVITY_SIZES = ("xs", "m")  # m: the contest's size, declared above; xs: addendum 3
OWN_BEST_SIZE = "xs"  # the only size that held under the rule above
OWN_BEST_RULE = (
    "At 71,616 parameters (the only size that holds) and 10 characters a parameter, every "
    "Muon-family entry also runs at its chosen matrix rate, 3 seeds, with the AdamW part at "
    "AdamW's own rate divided and multiplied by sqrt(10). Each entry's own-best AdamW part is "
    "the one of its three with the lowest mean validation bits/char. 71,616 keeps holding only "
    "where, each entry at its own best, VSGD-Muon is ahead of Muon and not behind NorMuon "
    "(95% t interval of the paired test bits/char difference); otherwise no size holds and the "
    "recommendation rule's last branch applies.")
# PROTOCOL.md's addendum 4: while an entry's own-best AdamW part lies on an edge of the
# parts it has run there, the next half decade beyond it runs, up to this many parts.
OWN_BEST_MAX_PARTS = 5
# PROTOCOL.md's addendum 2: vsgd_muon's default AdamW-part rate, as a share of its matrices'.
ADAMW_PART_SHARES = (0.1, 1.0 / math.sqrt(10.0), 1.0)  # the shares run; 0.1 is the default
DEFAULT_SHARE = 0.1  # what the default stays at unless the rule below replaces it
SHARE_MARGIN = 0.02  # bits/char: the project's margin that changes no choice
SHARE_RULE = (
    "At every CPU size and 10 characters a parameter, VSGD-Muon runs at its chosen matrix "
    "rate, 3 seeds, with the AdamW part at the shares 0.1, 0.316 and 1 of that rate (each "
    "AdamW's own rate times the power of sqrt(10) nearest to the share). A share's shortfall "
    "at a size is its mean validation bits/char minus the best share's there. The default is "
    "the share whose largest shortfall over the sizes is smallest, and replaces 0.1 only where "
    "that is smaller than 0.1's by more than 0.02 bits/char; until every size has every "
    "share, it stays 0.1.")

# --- Sizes ---------------------------------------------------------------------------------
CONTEST_SIZE = model.Size(width=128, layers=2, heads=4, context=64, batch=16)  # 436,736
# The CPU sizes considered; CPU_SIZES below holds the ones fixed from the timings.
CPU_CANDIDATES = {
    "xs": model.Size(width=48, layers=2, heads=4, context=64, batch=16),
    "s": model.Size(width=80, layers=2, heads=4, context=64, batch=16),
    "m": CONTEST_SIZE,
}
# Fixed from the timings (timings.json, 2026-12-04, the 2 cores shared at load 9 to 22):
# projected from their CPU seconds, 2.4 times an idle machine's wall clock at the contest's
# size (the contest ran its 2,000 steps there at about 0.05 s a step), the ladder takes about
# 8.7 hours of steps on an idle machine plus about an hour of compilation and evaluation.
CPU_SIZES: tuple[str, ...] = ("xs", "s", "m")
CPU_BUDGET_HOURS: float | None = 12.0
CPU_FALLBACK = (
    "The timings are redone on an idle machine before the first ladder run; where they project "
    "more than CPU_BUDGET_HOURS, the ladder is cut, before any run, in this order until it "
    "fits: (1) the AdamW-part sensitivity check runs VSGD-Muon, Muon and NorMuon only (not "
    "Muon-VS); (2) the untuned budget 20 is dropped at the contest's size (AdamW's and Muon's "
    "fits there use 2.5, 5 and 10); (3) a transferred window is not grown at an edge (the "
    "edge is flagged). The cut is committed to this file with the idle timings.")
CPU_BUDGET_CAP_HOURS = 12.0  # the whole CPU ladder, on the 2 cores it runs on
GPU_SIZES = {
    "l": model.Size(width=256, layers=4, heads=4, context=128, batch=64),
    "xl": model.Size(width=384, layers=6, heads=6, context=128, batch=64),
}
SIZES = {**CPU_CANDIDATES, **GPU_SIZES}
# A tiny model for the tests of the whole path (never a ladder rung).
TOY = model.Size(width=16, layers=1, heads=2, context=16, batch=4)

# --- Data budgets, in training characters a parameter --------------------------------------
BUDGETS = (2.5, 10.0)  # every entry, every CPU size
REFERENCE_BUDGETS = (2.5, 5.0, 10.0, 20.0)  # AdamW and Muon, for their loss-vs-data fits
UNTUNED_BUDGETS = (20.0,)  # run at the rate chosen at 10, not tuned
GPU_BUDGETS = (10.0,)  # every entry at the GPU sizes
GPU_REFERENCE_BUDGETS = (2.5, 5.0, 10.0)  # AdamW and Muon at the GPU sizes, for their fits
SEEDS = (0, 1, 2)

# --- Rates ---------------------------------------------------------------------------------
RATE_GRID = tuple(float(f"{10 ** (k / 2):.3g}") for k in range(-9, 1))  # 3.16e-5 to 1
# Each entry's rate the contest chose at 0.44M (Muon-VS, new, starts from Muon's).
CONTEST_RATES = {"adamw": 3.16e-3, "muon": 1e-2, "normuon": 1e-2, "muon_vs": 1e-2,
                 "vsgd_muon": 3.16e-2}
MAX_RATES_SMALLEST = 6  # half decades at most at the smallest size
MAX_RATES_TRANSFERRED = 5  # at every larger size
RATE_RULE = (
    "Half decades only. At the smallest CPU size, at each budget, each entry trains a window of "
    "three half decades centred on its contest rate (AdamW 3.16e-3, Muon, NorMuon and Muon-VS "
    "1e-2, VSGD-Muon 3.16e-2), grown by one half decade at an edge while the best lies on it, "
    "up to 6 rates. At each larger CPU size the transferred rate is the rate the entry chose at "
    "the next smaller size and the same budget; it trains that rate and one half decade each "
    "side, grown at an edge up to 5 rates. The chosen rate is the one with the lowest mean "
    "validation bits/char over the seeds; the test split enters no choice. Budget 20 (AdamW and "
    "Muon only) runs at the rate chosen at 10 and is not tuned.")
GPU_RATE_RULE = (
    "The GPU rungs run before the CPU ladder's tuning is done: each entry trains the window of "
    "three half decades centred on its contest rate at 0.44M (as above), its three rates and "
    "three seeds as one vmapped program (small models leave an accelerator mostly idle, so nine "
    "runs cost about what three do). Order, so that a 15-minute lease does the most important "
    "first, a size at a time (3.25M, then 10.8M): the timing of each program the ledger still "
    "lacks, then AdamW's window (its choice sets the AdamW part), then VSGD-Muon's, Muon's, "
    "Muon-VS's and NorMuon's; then AdamW's and Muon's budgets 2.5 and 5 at their chosen rates. "
    "A program that its timing says would not end before the lease's deadline is skipped. An "
    "entry's rate is chosen on validation among the rates it has run; a choice at an edge of "
    "its window is flagged.")
GPU_PRIORITY = ("vsgd_muon", "muon", "muon_vs", "normuon")  # the Muon family's order on the GPU

# --- Training, data, evaluation ------------------------------------------------------------
SCHEDULE = "5% linear warmup, then cosine decay to 0 (benchmarks.lm.train.schedule_shape)"
EVAL_CHARS = 1 << 19  # validation and test each hold whole files, at least this many characters
DATA_RULE = (
    "One corpus for every rung: the Python source of pinned PyPI wheels (benchmarks/ladder/"
    "corpus.py, sha256-pinned). Empty files and every repeat of a file's exact text are dropped "
    "before the split (the first in path order kept), so no text is in two splits; the split's "
    "metadata records the counts. The files are shuffled once (seed 0); validation takes whole "
    "files from the front until it holds 2^19 characters, test the next, training the rest. "
    "Training draws windows of context+1 characters that overlap by one (each scores context "
    "new characters) in a permutation fixed by the seed, without replacement: no training "
    "character is seen twice in a run. A run of budget b trains round(b * params / (batch * "
    "context)) steps. Validation and test score every character of their split.")
PRECISION_RULE = (
    "float32 parameters and optimizer states; matrix products at JAX's default precision on "
    "the device, the same for every entry (recorded in each run's line).")

# --- The metric ----------------------------------------------------------------------------
METRIC = (
    "Token-equivalent speedup (Wen et al., ICLR 2026): at each size, a reference's (AdamW's, "
    "or Muon's) final test bits/char is fitted against its training characters D over its "
    "budgets as L(D) = E + B * D^-beta (least squares, E >= 0, beta > 0); an entry's speedup at "
    "a budget is L^-1(its final test bits/char) / its D. Seeds pair: the fit and the inversion "
    "are done per seed (seed s's reference runs, seed s's entry run), and the speedup is the "
    "mean over seeds with a 95% t interval. Where the entry's loss is at or below the fitted "
    "E, the speedup is reported as unbounded. Beside it, the paired test bits/char difference "
    "(entry minus Muon, minus NorMuon, minus AdamW) per seed, with its mean and 95% t interval.")

# --- The recommendation rule ---------------------------------------------------------------
RECOMMENDATION_RULE = (
    "A rung is one (size, budget). At a rung, VSGD-Muon is 'ahead of' X where the 95% t "
    "interval of its paired test bits/char difference to X lies below 0, 'behind' X where it "
    "lies above 0. A size HOLDS where (a) every entry has its 3 seeds at its chosen rate at "
    "every budget of that size, (b) at every budget VSGD-Muon is not behind Muon nor NorMuon, "
    "and (c) at the largest budget (10 characters a parameter) it is ahead of Muon and its "
    "token-equivalent speedup against Muon is at least 1. S* is the largest ladder size such "
    "that it and every smaller ladder size hold (CPU sizes always; a GPU size counts once all "
    "of its entries have run, and until then it is not measured). Outcome: while any CPU rung "
    "lacks a result, no outcome: the pages keep the present scope (char LMs of about 0.4M "
    "parameters; a tie at 3.25M) and point users beyond 0.44M to Muon. Where S* exists, "
    "vsgd_muon stays the recommended default for models up to S*'s parameter count, and the "
    "docs say: beyond it, Muon, or NorMuon where NorMuon is ahead of Muon at 10 characters a "
    "parameter at every measured size above S*. Where no size holds (the smallest fails), the "
    "docs recommend Muon (or NorMuon, by the same test over all sizes) and describe vsgd_muon "
    "by its measured result. Either way the pages state the measured range and the trend of "
    "VSGD-Muon's edge with size and data, and claim nothing beyond the range.")


def steps_for(params: int, budget: float, size: model.Size) -> int:
  """Training steps of a run of ``budget`` characters a parameter."""
  return max(1, round(budget * params / (size.batch * size.context)))


def window(centre: float) -> tuple[float, float, float]:
  """The half decade below ``centre``, ``centre`` and the half decade above, on ``RATE_GRID``."""
  grid = list(RATE_GRID)
  index = min(range(len(grid)), key=lambda i: abs(math.log(grid[i] / centre)))
  return tuple(grid[min(len(grid) - 1, max(0, index + k))] for k in (-1, 0, 1))  # type: ignore[return-value]


# --- The momentum study (a protocol addendum): does VSGD-Muon's edge survive Muon's beta tuned? --
MOMENTUM_GRID = (0.8, 0.9, 0.95, 0.98)  # Muon's beta (Nesterov); 0.95 is optax's and the ladder's
MOMENTUM_GROWTH = {"low": 0.7, "high": 0.99}  # run where the best of the grid is on that edge
MOMENTUM_ORDER = (0.9, 0.8, 0.98)  # the order the new betas train at a rung
# Cheapest first; each size's rate transfers from the next smaller size at the same budget,
# which this order trains first.
MOMENTUM_RUNGS = (("xs", 2.5), ("s", 2.5), ("xs", 10.0), ("m", 2.5), ("s", 10.0), ("m", 10.0))
MOMENTUM_BUDGET_HOURS = 8.0  # the study's programs on the 2 cores, read-outs included
# AdamW at 40 characters a parameter, at the rate it chose at 10, untuned (like budget 20).
ADAMW_EXTENSION = (("xs", 40.0), ("s", 40.0))
ADAMW_EXTENSION_FROM = 10.0  # the budget whose chosen rate it runs at, right after that rung
READOUT_POINTS = 12  # VSGD-Muon's effective beta1 is read at least this many times a run
MOMENTUM_RULE = (
    "PROTOCOL.md's addendum 5. At each rung of MOMENTUM_RUNGS, Muon runs at every beta of "
    "MOMENTUM_GRID (0.95: the ladder's own runs), each beta with its own rate by RATE_RULE "
    "(at 71,616 parameters centred on Muon's contest rate; above, on that beta's choice at the "
    "next smaller size and the same budget, else on Muon's at this rung), its AdamW part at "
    "AdamW's choice. 'Muon, momentum tuned' is the beta whose chosen rate has the lowest mean "
    "validation bits; where that is 0.8, 0.7 runs too, where 0.98, 0.99 (once a side). Before "
    "its betas, each rung's VSGD-Muon runs are trained again with effective_beta1's 10%, 50% "
    "and 90% quantiles over every hidden-kernel element read at least READOUT_POINTS times "
    "(readouts.jsonl). The study stops before any program that would take its hours past "
    "MOMENTUM_BUDGET_HOURS, cutting the tail of the order.")
MOMENTUM_RECOMMENDATION_RULE = (
    "Once every rung has its momentum-tuned Muon, a size holds where it held under "
    "RECOMMENDATION_RULE (and OWN_BEST_RULE at its size) and, at both budgets, the "
    "momentum-tuned Muon exists and VSGD-Muon is not behind it (the 95% t interval of the "
    "paired test bits/char difference not above 0); a rung without one fails its size. "
    "vsgd_muon is the default only at sizes up to S*. Where VSGD-Muon is behind the "
    "momentum-tuned Muon at no rung, the pages may call it Muon whose momentum needs no "
    "tuning; otherwise they recommend Muon with the best beta found at each size and budget, "
    "and give its paired gain over beta 0.95 at each rung.")


def momentum_entry(beta: float) -> str:
  """The ladder entry of Muon at momentum ``beta``: 0.95 is the ladder's own ``"muon"``."""
  return "muon" if beta == 0.95 else f"muon_b{beta:g}"


# Every beta's entry, the grid's and the growth's, from the lowest beta up.
MOMENTUM_ENTRIES = tuple(momentum_entry(b)
                         for b in sorted({*MOMENTUM_GRID, *MOMENTUM_GROWTH.values()}))


def momentum_of(entry: str) -> float:
  """The beta of the momentum study's entry ``entry`` (``"muon"``: 0.95)."""
  betas = {momentum_entry(b): b for b in (*MOMENTUM_GRID, *MOMENTUM_GROWTH.values())}
  return betas[entry]


# --- Addendum 6: a variant of VSGD-Muon that sets its momentum, after addendum 5's programs ------
# Each variant's entry and what it changes in the ladder's VSGD-Muon (vsgd_optax.vsgd_muon's
# arguments): the look-ahead of Muon's Nesterov step on VSGD's mean.
VARIANTS = {"vsgd_muon_nesterov": {"nesterov": True}}
VARIANT_RUNGS = MOMENTUM_RUNGS  # in this order, after every program of addendum 5
VARIANT_RULE = (
    "PROTOCOL.md's addendum 6. After every program of addendum 5, each variant runs at the "
    "rungs of VARIANT_RUNGS in order, by RATE_RULE: at 71,616 parameters centred on "
    "VSGD-Muon's contest rate, above on its own choice at the next smaller size and the same "
    "budget; its AdamW part at AdamW's choice; 3 seeds, within MOMENTUM_BUDGET_HOURS. Once it "
    "is behind the momentum-tuned Muon at a rung (the 95% t interval of the paired test "
    "bits/char difference above 0), its later rungs do not run. It replaces vsgd_muon's "
    "default only if it has run at every rung and is behind the momentum-tuned Muon at none.")

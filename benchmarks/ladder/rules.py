"""The ladder's rules, read off its ledger: the rate each entry chose, how a window grows,
the AdamW part's rules, and the momentum study's choices and hours.

Each is a function of the ledger's lines (``runs.jsonl``), so that the drivers that
train the rungs (``run``) and the summary that reports them (``summary``,
``momentum``, ``variants``) read one rule the same way; nothing here trains.
"""

from __future__ import annotations

import math

import numpy as np

from benchmarks.ladder import ledger
from benchmarks.ladder import protocol
from benchmarks.lm import model

SIZES = {**protocol.SIZES, "toy": protocol.TOY}  # the toy size: the tests' rungs


def chosen(lines: list[dict], entry: str, size_name: str, budget: float, seeds=protocol.SEEDS,
           adam_rate: float | None = None) -> float | None:
  """The rate of ``entry`` with the lowest mean validation bits over ``seeds``, among the
  rates every seed has run (at the AdamW-part rate ``adam_rate``, where given).
  """
  held = None if adam_rate is None or entry == "adamw" else ("adam_rate", adam_rate)
  means = _mean_val_by(lines, entry, size_name, budget, seeds, "rate", held)
  return min(means, key=means.__getitem__) if means else None


def _mean_val_by(lines: list[dict], entry: str, size_name: str, budget: float, seeds,
                 field: str, held: tuple[str, float] | None) -> dict[float, float]:
  """``{value of field: mean validation bits}`` of ``entry``'s runs at one rung, where the
  field ``held[0]`` is ``held[1]`` (if given), over the values every seed has run. A value
  is as the ledger first wrote it; values equal to its 6 digits are one.
  """
  by_value: dict[float, dict[int, float]] = {}
  first: dict[float, float] = {}
  for line in lines:
    if ((line["entry"], line["size"], float(line["budget"])) != (entry, size_name, budget)
        or (held is not None and not math.isclose(line[held[0]], held[1], rel_tol=1e-6))):
      continue
    value = first.setdefault(ledger.rounded(line[field]), line[field])
    by_value.setdefault(value, {})[line["seed"]] = line["val_bits"]
  return {value: float(np.mean([v[s] for s in seeds])) for value, v in by_value.items()
          if all(s in v for s in seeds)}


def grown(rates, best: float, max_rates: int) -> tuple[float, ...]:
  """``rates`` grown by one half decade where ``best`` lies on an edge and fewer than
  ``max_rates`` are held; ``rates`` otherwise.
  """
  rates = sorted(rates)
  grid = list(protocol.RATE_GRID)
  if len(rates) >= max_rates:
    return tuple(rates)
  if math.isclose(best, rates[0], rel_tol=1e-6) and grid.index(rates[0]) > 0:
    return (grid[grid.index(rates[0]) - 1], *rates)
  if math.isclose(best, rates[-1], rel_tol=1e-6) and grid.index(rates[-1]) < len(grid) - 1:
    return (*rates, grid[grid.index(rates[-1]) + 1])
  return tuple(rates)


def transferred(lines, entry: str, previous: str, budget: float, seeds) -> float | None:
  """The rate ``entry`` chose at the size ``previous`` (its AdamW part at AdamW's choice)."""
  adam = chosen(lines, "adamw", previous, budget, seeds)
  return chosen(lines, entry, previous, budget, seeds, None if entry == "adamw" else adam)


def adamw_part_means(lines: list[dict], entry: str, size_name: str, budget: float, rate: float,
                     seeds=protocol.SEEDS) -> dict[float, float]:
  """``{AdamW part: mean validation bits}`` of ``entry`` at ``rate`` at one rung, over the
  parts every seed has run (a part as the ledger first wrote it; parts equal to the
  ledger's 6 digits are one part).
  """
  return _mean_val_by(lines, entry, size_name, budget, seeds, "adam_rate", ("rate", rate))


def adamw_part_beyond(val_by_part: dict[float, float]) -> float | None:
  """PROTOCOL.md's addendum 4: the AdamW part a half decade beyond the edge of
  ``val_by_part`` (mean validation bits by part) where its lowest lies, while fewer than
  ``protocol.OWN_BEST_MAX_PARTS`` have run; None where the lowest is inside, or at the cap.
  """
  parts = sorted(val_by_part)
  best = min(parts, key=val_by_part.__getitem__)
  if len(parts) >= protocol.OWN_BEST_MAX_PARTS or parts[0] < best < parts[-1]:
    return None
  return best * math.sqrt(10.0) if best == parts[-1] else best / math.sqrt(10.0)


def adamw_part_at_share(share: float, rate: float, adam: float) -> float:
  """The AdamW-part rate that stands for ``share`` of the matrix rate ``rate``: AdamW's own
  rate ``adam`` times the power of sqrt(10) nearest to ``share * rate / adam``, so that a
  share at AdamW's own rate is the tuned rung's runs (PROTOCOL.md, addendum 2).
  """
  return adam * math.sqrt(10.0) ** round(2 * math.log10(share * rate / adam))


def contest_rate(entry: str) -> float:
  """The centre of ``entry``'s first window: its contest rate; for a momentum study's beta,
  Muon's (``protocol.CONTEST_RATES["muon"]``); for a variant of VSGD-Muon, VSGD-Muon's.
  """
  if entry in protocol.MOMENTUM_ENTRIES:
    return protocol.CONTEST_RATES["muon"]
  return protocol.CONTEST_RATES["vsgd_muon" if entry in protocol.VARIANTS else entry]


def momentum_previous(size_name: str) -> str | None:
  """The next smaller size among the study's rungs (whose choices transfer to
  ``size_name``); None at its smallest.
  """
  sizes = sorted({name for name, _ in protocol.MOMENTUM_RUNGS}, key=lambda n: model.count(SIZES[n]))
  at = sizes.index(size_name)
  return sizes[at - 1] if at else None


def momentum_max_rates(size_name: str) -> int:
  """How many rates a window may grow to at a rung of the study: more at its smallest size."""
  smallest = momentum_previous(size_name) is None
  return protocol.MAX_RATES_SMALLEST if smallest else protocol.MAX_RATES_TRANSFERRED


def momentum_centre(lines: list[dict], beta: float, size_name: str, budget: float,
                    seeds=protocol.SEEDS) -> float | None:
  """The centre of Muon-at-``beta``'s window at a rung: Muon's contest rate at the study's
  smallest size; above it, the rate ``beta`` chose at the next smaller size and the same
  budget, else (a beta that did not run there) the rate Muon (0.95) chose at this rung.
  """
  previous = momentum_previous(size_name)
  if previous is None:
    return contest_rate(protocol.momentum_entry(beta))
  own = transferred(lines, protocol.momentum_entry(beta), previous, budget, seeds)
  if own is not None:
    return own
  adam = chosen(lines, "adamw", size_name, budget, seeds)
  return None if adam is None else chosen(lines, "muon", size_name, budget, seeds, adam)


def _settled(means: dict[float, float], max_rates: int) -> float | None:
  """The chosen rate of ``means`` (mean validation bits by rate) once the rate rule is
  done with it: None while the best lies on an edge that the rule would still grow.
  """
  if not means:
    return None
  best = min(means, key=means.__getitem__)
  return best if grown(sorted(means), best, max_rates) == tuple(sorted(means)) else None


def settled_choice(lines: list[dict], entry: str, size_name: str, budget: float,
                   seeds=protocol.SEEDS) -> tuple[float, float] | None:
  """``(chosen rate, its mean validation bits)`` of ``entry`` at a rung of the momentum
  study, the AdamW part at AdamW's choice, once its rate rule is done there; else None.
  """
  adam = chosen(lines, "adamw", size_name, budget, seeds)
  if adam is None:
    return None
  means = _mean_val_by(lines, entry, size_name, budget, seeds, "rate", ("adam_rate", adam))
  rate = _settled(means, momentum_max_rates(size_name))
  return None if rate is None else (rate, means[rate])


def momentum_choices(lines: list[dict], size_name: str, budget: float,
                     seeds=protocol.SEEDS) -> dict[float, tuple[float, float]]:
  """``{beta: (chosen rate, its mean validation bits)}`` at a rung, of the betas (grid and
  growth) whose rate rule is done there, the AdamW part at AdamW's choice.
  """
  found = {beta: settled_choice(lines, protocol.momentum_entry(beta), size_name, budget, seeds)
           for beta in (*protocol.MOMENTUM_GRID, *protocol.MOMENTUM_GROWTH.values())}
  return {beta: choice for beta, choice in found.items() if choice is not None}


def _momentum_growth(choices: dict[float, tuple[float, float]]) -> float | None:
  """The growth beta that the grid's best demands (on its low or high edge), once every
  beta of the grid has chosen; None otherwise. Demanded by the grid alone, so that a side
  grows once at most.
  """
  grid = protocol.MOMENTUM_GRID
  if not all(beta in choices for beta in grid):
    return None
  best = min(grid, key=lambda beta: choices[beta][1])
  edges = {min(grid): protocol.MOMENTUM_GROWTH["low"], max(grid): protocol.MOMENTUM_GROWTH["high"]}
  return edges.get(best)


def momentum_window(lines: list[dict], size_name: str, budget: float,
                    seeds=protocol.SEEDS) -> tuple[float, ...]:
  """The betas that must run at a rung, in their order, given the ledger's ``lines``: the
  grid's new betas (``protocol.MOMENTUM_ORDER``), and the growth beta the grid's best demands.
  """
  growth = _momentum_growth(momentum_choices(lines, size_name, budget, seeds))
  return (*protocol.MOMENTUM_ORDER, *(() if growth is None else (growth,)))


def best_momentum(lines: list[dict], size_name: str, budget: float,
                  seeds=protocol.SEEDS) -> tuple[float, float] | None:
  """``(beta, its chosen rate)`` of the beta with the lowest mean validation bits at a rung,
  over the grid and the growth it demanded; None until every beta of the grid has its seeds
  at its chosen rate (its rate rule done) and the growth demanded has as well.
  """
  choices = momentum_choices(lines, size_name, budget, seeds)
  if not all(beta in choices for beta in protocol.MOMENTUM_GRID):
    return None
  growth = _momentum_growth(choices)
  if growth is not None and growth not in choices:
    return None
  held = (*protocol.MOMENTUM_GRID, *(() if growth is None else (growth,)))
  beta = min(held, key=lambda b: choices[b][1])
  return beta, choices[beta][0]


def study_hours(lines: list[dict], readout_lines: list[dict]) -> float:
  """Hours of the momentum study's programs so far: each program's seconds once (a line's
  seconds over its program's lanes) over the CPU lines of ``lines`` (runs.jsonl's) that are
  the study's (the betas other than 0.95, AdamW's ``protocol.ADAMW_EXTENSION``, the
  variants of addendum 6) and every line of ``readout_lines`` (readouts.jsonl's).
  """
  extension = {(name, float(budget)) for name, budget in protocol.ADAMW_EXTENSION}
  new = set(protocol.MOMENTUM_ENTRIES) - {"muon"} | set(protocol.VARIANTS)

  def ours(line):
    # A GPU lease's runs are paid from the lease, not the 2 cores' hours.
    return line.get("kind", "cpu") == "cpu" and (
        line["entry"] in new
        or (line["entry"] == "adamw" and (line["size"], float(line["budget"])) in extension))

  seconds = sum(line["seconds"] / line["lanes"] for line in lines if ours(line))
  seconds += sum(line["seconds"] / line["lanes"] for line in readout_lines)
  return seconds / 3600.0

"""The learning-rate schedules of the time-to-result protocols.

A schedule here turns the tuned (peak) learning rate into what the optimizer
is given. The peak is a traced value inside the benchmark's jitted loop, and
optax's schedule constructors compare their peak in Python, so each schedule
is a unit-peak optax schedule multiplied by the peak.

* ``constant``: the rate itself, every step (what the optimizer gets is
  exactly the number, as before schedules existed).
* ``warmup_cosine``: linear warmup from 0 over the first 5% of the steps, then
  cosine decay to 0 at the last step (AlgoPerf's baselines' shape). It is the
  example trainer's schedule of that name (``tests/benchmarks/test_schedules.py``
  holds them equal), so that the trainer's default trains under the schedule
  the evidence measured.
* ``paper_step``: the paper's step schedule, scaled to the run's length. The
  paper trains 30,000 iterations on CIFAR-100 and halves the rate every
  10,000 (60,000 and 20,000 on TinyImageNet): halving after each third of the
  run.
"""

from __future__ import annotations

import math

import optax

from benchmarks import common

PAPER_PARTS_PER_RUN = 3  # 30,000 iterations, halved every 10,000: two halvings
WARMUP_FRACTION = 0.05  # of the run's steps, in warmup_cosine
NAMES = common.SCHEDULES
TITLES = common.SCHEDULE_TITLES


def describe(name: str, steps: int) -> dict:
  """The schedule's identity as written into a result file."""
  if name not in NAMES:
    raise ValueError(f"unknown schedule {name!r}; choose from {', '.join(NAMES)}")
  out = {"name": name, "title": TITLES[name]}
  if name == "warmup_cosine":
    out.update(warmup_steps=warmup_steps(steps), decay_steps=steps, end_value=0.0)
  elif name == "paper_step":
    out.update(halve_every=halving_interval(steps), factor=0.5)
  return out


def warmup_steps(steps: int) -> int:
  """The warmup of ``warmup_cosine`` in a run of ``steps`` steps: at least one."""
  return max(1, round(WARMUP_FRACTION * steps))


def halving_interval(steps: int) -> int:
  # Rounded up: rounded down, a run of 3k+1 steps would halve a third time on its last step.
  return max(1, math.ceil(steps / PAPER_PARTS_PER_RUN))


def unit(name: str, steps: int) -> optax.Schedule | None:
  """The schedule at a peak of 1 (None for the constant rate)."""
  if name == "constant":
    return None
  if name == "warmup_cosine":
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=1.0, warmup_steps=warmup_steps(steps), decay_steps=steps,
        end_value=0.0)
  if name == "paper_step":
    return optax.exponential_decay(1.0, halving_interval(steps), 0.5, staircase=True)
  raise ValueError(f"unknown schedule {name!r}; choose from {', '.join(NAMES)}")


def learning_rate(name: str, steps: int, peak) -> optax.ScalarOrSchedule:
  """What an optimizer is given for a tuned rate ``peak`` (a traced scalar)."""
  shape = unit(name, steps)
  if shape is None:
    return peak
  return lambda count: peak * shape(count)


# Where a schedule's results live, and which one a file holds: ``benchmarks.common``'s,
# shared with the reporting that reads them.
schedule_of = common.schedule_of
folder = common.schedule_folder

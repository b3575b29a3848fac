"""The learning-rate schedules of the time-to-result protocols, against their definitions."""

import jax
import numpy as np
import optax
import pytest

from benchmarks import optimizers
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import trainer


def test_schedules_against_their_definitions():
  """Each schedule at a peak of 0.3 over 200 steps, against float64 formulas."""
  peak, steps = 0.3, 200
  count = np.arange(steps + 1)
  assert schedules.learning_rate("constant", steps, peak) == peak
  cosine = schedules.learning_rate("warmup_cosine", steps, peak)
  warmup = 10  # 5% of 200
  expected = np.where(count < warmup, peak * count / warmup,
                      0.5 * peak * (1 + np.cos(np.pi * (count - warmup) / (steps - warmup))))
  np.testing.assert_allclose(np.asarray(cosine(count), np.float64), expected, rtol=1e-6,
                             atol=1e-8)
  step = schedules.learning_rate("paper_step", steps, peak)
  halvings = count // 67  # 200 / 3, rounded: the paper's 10,000 of 30,000 iterations
  np.testing.assert_allclose(np.asarray(step(count), np.float64), peak * 0.5 ** halvings,
                             rtol=1e-6)
  assert schedules.describe("paper_step", steps)["halve_every"] == 67
  with pytest.raises(ValueError, match="linear"):
    schedules.describe("linear", steps)


@pytest.mark.parametrize("steps", [10, 150, 301, 1000])
def test_warmup_cosine_is_the_example_trainers_schedule_of_that_name(steps):
  """The trainer's default schedule is the one the evidence measured, bit for bit."""
  import chex

  from examples import optimizers as trainer
  count = np.arange(steps + 1)
  assert schedules.warmup_steps(steps) == trainer.warmup_steps(steps)
  chex.assert_trees_all_equal(schedules.unit("warmup_cosine", steps)(count),
                              trainer.learning_rate_schedule(1.0, "warmup_cosine", steps)(count))

def test_schedule_reaches_the_optimizer():
  """What the runner builds for an optimizer (``trainer.make``) follows the schedule:
  plain SGD's step is the rate itself, so its moves are the schedule's values.
  """
  sgd = optimizers.Optimizer(optax.sgd, "optax.sgd")
  for schedule in schedules.NAMES:
    opt = trainer.make(sgd, jax.numpy.float32(0.3), schedule, 9)
    params, moves = np.float32(0.0), []
    state = opt.init(params)
    for _ in range(9):
      updates, state = opt.update(np.float32(-1.0), state, params)  # gradient -1
      moves.append(float(updates))
    expected = schedules.learning_rate(schedule, 9, 0.3)
    expected = [expected] * 9 if schedule == "constant" else [expected(i) for i in range(9)]
    np.testing.assert_allclose(moves, expected, rtol=1e-6)
  # the last loop's schedule, paper_step: halved after steps 3 and 6 of 9
  np.testing.assert_allclose([moves[2], moves[3], moves[6]], [0.3, 0.15, 0.075], rtol=1e-6)
  with pytest.raises(ValueError, match="paper_step"):
    trainer.make(optimizers.REGISTRY["schedule_free_adamw"], 1e-2, "paper_step", 9)

@pytest.mark.parametrize("steps", [150, 1000, 301, 10])
def test_paper_step_schedule_halves_twice_whatever_the_length(steps):
  unit = schedules.unit("paper_step", steps)
  rates = [float(unit(count)) for count in range(steps)]
  assert rates[0] == 1.0 and rates[-1] == 0.25
  assert sorted(set(rates), reverse=True) == [1.0, 0.5, 0.25]

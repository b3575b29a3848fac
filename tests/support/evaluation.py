"""A trained state's test accuracy, computed in one batch outside the trainer."""

import numpy as np

from examples import train


def direct_test_accuracy(config, state) -> float:
  """Correct predictions of ``state`` over the whole test split, divided by its size."""
  dataset = train.load_dataset(config)
  graphdef, _, _ = train.create_train_state(config, dataset)
  eval_step = train.make_eval_step(graphdef, dataset)
  n = len(dataset.test_labels)
  _, correct = eval_step(state.params, state.batch_stats, dataset.test_images,
                         dataset.test_labels, np.ones(n, np.float32))
  return float(correct) / n

"""The paper's Table 1 grid: its columns, its configs, and every run of it.

Each column is an optimizer with the part of the grid that applies to it. A
"w/ L2" column takes the nonzero weight decays of the grid, a "w/o L2" column
none; SGD takes the momentum grid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# The paper's grid for every optimizer: learning rate x weight decay, and SGD's
# momentum; three seeds.
LEARNING_RATE_GRID = (0.001, 0.005, 0.01, 0.02)
WEIGHT_DECAY_GRID = (0.0, 0.01)
MOMENTUM_GRID = (0.9, 0.99)
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Column:
  """One optimizer column of the table and which weight decays it takes."""

  title: str
  optimizer: str
  decayed: bool  # takes the grid's nonzero weight decays; otherwise decay 0
  momentum_grid: bool = False


COLUMNS = {
    "vsgd_l2": Column("VSGD (w/ L2)", "vsgd", decayed=True),
    "vsgd": Column("VSGD (w/o L2)", "vsgd", decayed=False),
    "adam": Column("Adam (w/o L2)", "adam", decayed=False),
    "adamw": Column("AdamW (w/ L2)", "adamw", decayed=True),
    "sgd": Column("SGD (w/ mom)", "sgd", decayed=False, momentum_grid=True),
}

TABLES = {
    "cifar100": ("cifar100_vgg16", "cifar100_convmixer", "cifar100_resnext18"),
    "tinyimagenet": ("tinyimagenet_vgg19", "tinyimagenet_convmixer", "tinyimagenet_resnext18"),
    "digits": ("default",),  # a small stand-in, for trying the command and for tests
}

@dataclass(frozen=True)
class Run:
  """One trainer run of the grid."""
  config: str
  column: str
  learning_rate: float
  weight_decay: float
  momentum: float | None  # SGD only
  seed: int

  @property
  def optimizer(self) -> str:
    return COLUMNS[self.column].optimizer

  @property
  def cell(self) -> tuple:
    return (self.learning_rate, self.weight_decay, self.momentum)

  def workdir(self, root: str) -> str:
    name = f"{self.optimizer}-lr{self.learning_rate:g}-wd{self.weight_decay:g}"
    if self.momentum is not None:
      name += f"-mom{self.momentum:g}"
    return os.path.join(root, self.config, f"{name}-seed{self.seed}")

  def settings(self) -> dict:
    """The config keys this run sets, over the config's own."""
    keys = dict(optimizer=self.optimizer, learning_rate=self.learning_rate,
                weight_decay=self.weight_decay, seed=self.seed)
    if self.momentum is not None:
      keys["momentum"] = self.momentum
    return keys


def grid_runs(config_names, column_names, learning_rates, weight_decays, momenta,
              seeds) -> list[Run]:
  """Every run of the grid, in a fixed order (configs, columns, cells, seeds)."""
  runs = []
  for config in config_names:
    for name in column_names:
      column = COLUMNS[name]
      decays = [d for d in weight_decays if d != 0] if column.decayed else [0.0]
      for lr in learning_rates:
        for decay in decays:
          for momentum in (momenta if column.momentum_grid else [None]):
            runs.extend(Run(config, name, lr, decay, momentum, seed) for seed in seeds)
  return runs

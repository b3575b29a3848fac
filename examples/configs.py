"""One config per experiment of the paper's Table 1, plus the default.

Each config overrides ``default()``; change anything from the command line with
``--set key=value``. The paper's grid: learning rate {0.001, 0.005, 0.01,
0.02}, weight decay {0, 0.01}, SGD momentum {0.9, 0.99}, three seeds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

LEARNING_RATE_GRID = (0.001, 0.005, 0.01, 0.02)
WEIGHT_DECAY_GRID = (0.0, 0.01)
MOMENTUM_GRID = (0.9, 0.99)


@dataclass(frozen=True)
class Config:
  dataset: str = "digits"
  data_dir: str = "data"
  download: bool = False          # fetch a missing CIFAR-100 / TinyImageNet archive
  model: str = "convmixer"
  model_kwargs: dict = field(default_factory=dict)
  optimizer: str = "vsgd"
  learning_rate: float = 0.01
  weight_decay: float = 0.0
  momentum: float = 0.9           # SGD only
  per_example: bool = False       # VSGD/Constant VSGD: the paper's per-example variant
  batch_size: int = 64
  steps: int = 600
  lr_halving_every: int = 0       # halve the learning rate every N steps (0: never)
  eval_every: int = 200
  log_every: int = 50
  checkpoint_every: int = 200
  seed: int = 0
  bf16: bool = False              # bfloat16 compute (for GPU and TPU)
  tensorboard: bool = False

  def replace(self, **changes) -> "Config":
    return dataclasses.replace(self, **changes)


def default() -> Config:
  """A small ConvMixer with VSGD on the embedded digits: a few minutes on 2 CPU cores."""
  return Config(model_kwargs=dict(dim=64, depth=4, kernel=3, patch=1))


def _cifar100(model: str, batch_size: int) -> Config:
  return Config(dataset="cifar100", model=model, batch_size=batch_size, steps=30_000,
                lr_halving_every=10_000, eval_every=1000, log_every=100,
                checkpoint_every=2000)


def _tinyimagenet(model: str, batch_size: int) -> Config:
  return Config(dataset="tinyimagenet", model=model, batch_size=batch_size, steps=60_000,
                lr_halving_every=20_000, eval_every=2000, log_every=100,
                checkpoint_every=4000)


CONFIGS = {
    "default": default,
    "cifar100_vgg16": lambda: _cifar100("vgg16", 256),
    "cifar100_convmixer": lambda: _cifar100("convmixer", 256),
    "cifar100_resnext18": lambda: _cifar100("resnext18", 128),
    "tinyimagenet_vgg19": lambda: _tinyimagenet("vgg19", 128),
    "tinyimagenet_convmixer": lambda: _tinyimagenet("convmixer", 128),
    "tinyimagenet_resnext18": lambda: _tinyimagenet("resnext18", 64),
}


def get_config(name: str) -> Config:
  if name not in CONFIGS:
    raise KeyError(f"unknown config {name!r}; choose one of {sorted(CONFIGS)}")
  return CONFIGS[name]()

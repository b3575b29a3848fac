"""The trainer logs VSGD's gradient noise scale at its log steps when asked to, and only then."""

import json
import math

import pytest

from examples import configs
from examples import train
from examples.errors import ConfigError
from vsgd_optax import experimental


def _logged(tmp_path, optimizer, noise_scale):
  config = configs.Config(model="tiny", optimizer=optimizer, batch_size=8, steps=6,
                          eval_every=100, log_every=2, checkpoint_every=100, seed=3,
                          noise_scale=noise_scale)
  result = train.train_and_evaluate(config, str(tmp_path), progress=False)
  records = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  logged = [r for r in records if "train_loss" in r]
  assert [r["step"] for r in logged] == [2, 4, 6]
  return config, result, logged


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["vsgd", "constant_vsgd"])
def test_gradient_noise_scale_is_logged_when_asked(tmp_path, optimizer):
  """Each log step holds the key; the last one holds exactly the read-out of
  the final state (``null`` where it is not finite, as JSON has no inf).
  """
  config, result, logged = _logged(tmp_path, optimizer, noise_scale=True)
  assert all("gradient_noise_scale" in r for r in logged)
  want = float(experimental.gradient_noise_scale(
      result["state"].opt_state, batch_size=config.batch_size,
      prior_strength=config.prior_strength, variance_ratio=config.variance_ratio))
  got = logged[-1]["gradient_noise_scale"]
  if math.isfinite(want):
    assert got == pytest.approx(want, rel=1e-6)
  else:
    assert got is None


@pytest.mark.slow
def test_gradient_noise_scale_is_left_out_by_default(tmp_path):
  _, _, logged = _logged(tmp_path, "vsgd", noise_scale=False)
  assert not any("gradient_noise_scale" in r for r in logged)


def test_noise_scale_needs_a_vsgd_optimizer():
  with pytest.raises(ConfigError, match="noise_scale needs optimizer vsgd or constant_vsgd"):
    configs.validate(configs.Config(optimizer="adam", noise_scale=True))

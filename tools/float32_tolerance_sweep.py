"""Checks the float32 tolerances of test_trajectories.py over 200 seeds.

    python -m tools.float32_tolerance_sweep

The suite keeps one gradient stream per case; this runs the streams of seeds
0-199 at once (the optimizers are elementwise, so each seed's stream is a
block of coordinates of one parameter array) and prints, for each case and
quantity, the worst error as a fraction of the suite's tolerance. Every
number must stay below 1.
"""

import jax.numpy as jnp
import numpy as np

from tests.support import trajectory_cases as cases

SEEDS = range(200)


def _streams():
  per_seed = [np.stack(cases.gradient_stream(seed)) for seed in SEEDS]
  return list(np.concatenate(per_seed, axis=1))  # steps x (200 * 7)


def _worst(got, expected, rtol, atol):
  """Max |got - expected| / (atol + rtol |expected|), per seed then overall."""
  err = np.abs(np.asarray(got, np.float64) - expected) / (atol + rtol * np.abs(expected))
  return float(err.max())


def main() -> None:
  grads = _streams()
  params0 = np.tile(np.linspace(-1, 1, 7), len(SEEDS))
  for name, case in sorted(cases.VSGD_CASES.items()):
    expected = cases.vsgd_reference(case, grads, params0)
    got = cases.run(cases.vsgd_from_case(case), grads, params0,
                            jnp.float32)
    worst = {"params": 0.0, "mu": 0.0, "b_g": 0.0, "b_ghat": 0.0}
    mu_atol = cases.mu_tolerance(expected)
    for (p, s), (ep, emu, ebg, ebgh) in zip(got, expected, strict=True):
      worst["params"] = max(worst["params"], _worst(p, ep, 2e-4, 2e-5))
      worst["mu"] = max(worst["mu"], _worst(s.mu, emu, 2e-3, mu_atol))
      worst["b_g"] = max(worst["b_g"], _worst(s.b_g, ebg, 2e-3, 0.0))
      worst["b_ghat"] = max(worst["b_ghat"], _worst(s.b_ghat, ebgh, 2e-3, 0.0))
    print(f"vsgd {name:>13}: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()))
  for name, case in sorted(cases.CONSTANT_CASES.items()):
    expected = cases.constant_reference(case, grads, params0)
    got = cases.run(cases.constant_from_case(case), grads, params0,
                            jnp.float32)
    worst = {"params": 0.0, "b_ghat": 0.0}
    for (p, s), (ep, _, eb) in zip(got, expected, strict=True):
      worst["params"] = max(worst["params"], _worst(p, ep, 2e-4, 2e-5))
      worst["b_ghat"] = max(worst["b_ghat"], _worst(s.b_ghat, eb, 2e-3, 0.0))
    print(f"constant_vsgd {name:>13}: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()))


if __name__ == "__main__":
  main()

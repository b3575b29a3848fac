"""The trainer's optimizers (``examples.optimizers.REGISTRY``): what it builds from
each ``--optimizer`` choice and the settings of its config.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from examples import optimizers
from examples.errors import ConfigError


def _params():
  return {"kernel": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "bias": jnp.full((4,), 0.5)}


def _grads(step):
  return jax.tree.map(lambda p: jnp.cos(p * (step + 1.0)) + 0.1 * p, _params())


def _updates(opt, steps=3):
  params, state, out = _params(), opt.init(_params()), []
  for step in range(steps):
    updates, state = opt.update(_grads(step), state, params)
    params = optax.apply_updates(params, updates)
    out.append(updates)
  return out


@pytest.mark.parametrize("name", optimizers.OPTIMIZERS)
def test_every_trainer_optimizer_builds_and_steps_with_the_configs_settings(name):
  settings = optimizers.REGISTRY[name].settings
  weight_decay = 1e-4 if "weight_decay" in settings else 0.0
  opt = optimizers.create_optimizer(name, 0.01, weight_decay, 0.9, variance_ratio=30.0,
                                    prior_strength=1e-8, kappa_g=0.81, kappa_ghat=0.9,
                                    state_dtype=jnp.dtype("float32"),
                                    state_rounding="stochastic")
  for updates in _updates(opt):
    chex.assert_tree_all_finite(updates)
    assert all(np.any(leaf != 0) for leaf in jax.tree.leaves(updates)), name


def test_the_trainers_vsgd_is_the_librarys_with_the_settings_it_was_given():
  ours = optimizers.create_optimizer("vsgd", 0.01, 1e-3, variance_ratio=10.0, kappa_g=0.5)
  want = vsgd_optax.vsgd(0.01, variance_ratio=10.0, kappa_g=0.5, weight_decay=1e-3)
  chex.assert_trees_all_equal(_updates(ours), _updates(want))


def test_constant_vsgd_takes_kappa_ghat_as_its_one_kappa_and_ignores_kappa_g():
  ours = optimizers.create_optimizer("constant_vsgd", 0.01, kappa_g=0.1, kappa_ghat=0.5)
  want = vsgd_optax.constant_vsgd(0.01, kappa=0.5)
  default = vsgd_optax.constant_vsgd(0.01)
  got, expected, other = _updates(ours), _updates(want), _updates(default)
  chex.assert_trees_all_equal(got, expected)
  assert not np.array_equal(got[-1]["kernel"], other[-1]["kernel"])


def test_the_trainers_sgd_adds_l2_decay_and_momentum():
  opt = optimizers.create_optimizer("sgd", 0.1, weight_decay=0.5, momentum=0.0)
  params = _params()
  updates, _ = opt.update(_grads(0), opt.init(params), params)
  want = jax.tree.map(lambda g, p: -0.1 * (g + 0.5 * p), _grads(0), params)
  chex.assert_trees_all_close(updates, want, rtol=1e-6)


def test_a_weight_decay_is_refused_where_the_optimizer_takes_none():
  with pytest.raises(ConfigError, match="adamw"):
    optimizers.check_weight_decay("adam", 0.1)
  with pytest.raises(ConfigError, match="muon"):
    optimizers.create_optimizer("muon", 0.01, weight_decay=0.1)
  optimizers.check_weight_decay("adamw", 0.1)
  optimizers.check_weight_decay("adam", 0.0)
  with pytest.raises(ConfigError, match="adagrad"):
    optimizers.create_optimizer("adagrad", 0.01)


def test_the_trainer_offers_every_row_and_no_other():
  assert optimizers.OPTIMIZERS == tuple(optimizers.REGISTRY)
  assert set(optimizers.VSGD_OPTIMIZERS) <= set(optimizers.REGISTRY)
  with pytest.raises(ConfigError, match="normuon"):
    optimizers.create_optimizer("normuon", 0.01)

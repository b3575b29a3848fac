"""Bad hyperparameters fail at construction with a message naming them."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax

NAN, INF = float("nan"), float("inf")

VSGD_BAD = [
    ("variance_ratio", 0.0), ("variance_ratio", -1.0), ("variance_ratio", INF),
    ("variance_ratio", NAN), ("prior_strength", 0.0), ("prior_strength", -1e-8),
    ("prior_strength", INF), ("prior_strength", NAN), ("kappa_g", -0.1),
    ("kappa_g", 1.5), ("kappa_g", NAN), ("kappa_ghat", 2.0), ("kappa_ghat", NAN),
    ("eps", -1e-8), ("eps", NAN), ("weight_decay", -0.1), ("weight_decay", NAN),
]


@pytest.mark.parametrize("name,value", VSGD_BAD)
def test_vsgd_rejects(name, value):
  with pytest.raises(ValueError, match=name):
    vsgd_optax.vsgd(0.1, **{name: value})


CONSTANT_BAD = [(n, v) for n, v in VSGD_BAD if not n.startswith("kappa")] + [
    ("kappa", -0.5), ("kappa", 1.01), ("kappa", NAN)]


@pytest.mark.parametrize("name,value", CONSTANT_BAD)
def test_constant_vsgd_rejects(name, value):
  with pytest.raises(ValueError, match=name):
    vsgd_optax.constant_vsgd(0.1, **{name: value})


@pytest.mark.parametrize("lr", [NAN, INF, -INF, np.float32("nan")])
def test_non_finite_learning_rate(lr):
  for factory in (vsgd_optax.vsgd, vsgd_optax.constant_vsgd):
    with pytest.raises(ValueError, match="learning_rate"):
      factory(lr)


def test_state_dtype_rejects_float16_and_integers():
  with pytest.raises(ValueError, match="state_dtype=float16"):
    vsgd_optax.vsgd(0.1, state_dtype=jnp.float16)
  with pytest.raises(ValueError, match="state_dtype"):
    vsgd_optax.constant_vsgd(0.1, state_dtype=jnp.int32)


def test_edges_of_valid_ranges_are_accepted():
  vsgd_optax.vsgd(0.1, kappa_g=0.0, kappa_ghat=1.0, eps=0.0, weight_decay=0.0)
  vsgd_optax.constant_vsgd(optax.constant_schedule(0.1), kappa=1.0)


def test_array_values_skip_the_eager_check():
  # inject_hyperparams passes arrays; they are not inspected eagerly.
  vsgd_optax.vsgd(jnp.asarray(0.1), variance_ratio=jnp.asarray(-1.0))


def test_grad_variance_structure_is_checked():
  opt = vsgd_optax.scale_by_vsgd()
  state = opt.init({"a": jnp.ones(2)})
  with pytest.raises(ValueError, match="grad_variance must have the same tree structure"):
    opt.update({"a": jnp.ones(2)}, state, grad_variance={"b": jnp.ones(2)})

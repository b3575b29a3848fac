"""The schedule-free experiment's pieces: schedule-free VSGD is the composition the
how-to describes, and VSGD's mean keeps the share of its past that the how-to says.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import vsgd_optax
from benchmarks import optimizers
from benchmarks.time_to_result import trainer
from benchmarks.time_to_result import workloads


def test_schedule_free_vsgd_wraps_vsgd_with_a_warmup_only():
  """Under warmup + cosine it is optax's schedule_free around vsgd, both given the
  warmup alone: the same updates, step for step, as composing it by hand.
  """
  steps, peak = 40, 0.01
  warmup = optax.warmup_constant_schedule(0.0, peak, 2)  # 5% of 40 steps
  by_hand = optax.contrib.schedule_free(vsgd_optax.vsgd(warmup), warmup)
  ours = trainer.make(optimizers.REGISTRY["schedule_free_vsgd"], peak, "warmup_cosine", steps)
  params = {"w": jnp.linspace(-1.0, 1.0, 6)}
  states = [by_hand.init(params), ours.init(params)]
  for i in range(steps):
    grads = {"w": jnp.sin(jnp.arange(6.0) + i) + params["w"]}
    (u1, states[0]), (u2, states[1]) = (opt.update(grads, s, params)
                                        for opt, s in zip((by_hand, ours), states, strict=True))
    chex.assert_trees_all_equal(u1, u2)
    params = optax.apply_updates(params, u1)
  with pytest.raises(ValueError, match="'step'"):
    trainer.make(optimizers.REGISTRY["schedule_free_vsgd"], peak, "step", steps)


def test_vsgds_mean_keeps_about_six_tenths_of_its_past_on_the_mlp():
  """The how-to's reason for trying a shorter mean under schedule-free: VSGD's
  learned weight on the past (effective_beta1) on the MLP workload.
  """
  w = workloads.build("mlp")
  params, aux = w.init(jax.random.key(0))
  opt = vsgd_optax.vsgd(0.00316)
  state = opt.init(params)

  @jax.jit
  def step(params, aux, state, key):
    (_, aux), grads = jax.value_and_grad(w.loss, has_aux=True)(params, aux, w.data, key)
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), aux, state
  for t in range(1000):
    params, aux, state = step(params, aux, state, jax.random.key(t))
  beta1 = np.concatenate([np.ravel(x) for x in
                          jax.tree.leaves(vsgd_optax.effective_beta1(state))])
  assert 0.55 <= np.median(beta1) <= 0.7

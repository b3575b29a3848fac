"""Tests of the optimizers alone: they need jax and optax, not Flax or the examples."""

"""Tests of the Flax trainers in examples/."""

"""Flax trainers for the paper's experiments; ``python -m examples.main`` runs one."""

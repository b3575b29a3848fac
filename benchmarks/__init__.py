"""Benchmarks against Adam: the contest, the cost, time to result, the noise scale (README.md)."""

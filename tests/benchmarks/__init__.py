"""Tests of the benchmarks in benchmarks/."""

"""Benchmarks against Adam: step cost, train step, time to result, the device suite (README.md here)."""

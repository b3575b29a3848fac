"""Test-session setup, set before anything imports jax (JAX reads both once).

- Eight host devices for the sharding tests. Single-device tests are
  unaffected: they run on device 0.
- JAX's persistent compilation cache, in ``.pytest_cache/jax``: the tests build
  the same optimizers on the same shapes in many tests, workers and
  subprocesses, and a program compiled once is read back after (a third off
  the fast core tests' time on 2 cores). The key is the program and the
  versions, so a changed rule or another jax compiles afresh. What the
  environment sets is kept (``tools/mutants.py`` shares one cache among its
  copies).
"""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".pytest_cache", "jax"))
# Every program, however small or quick to compile: most of the tests' are both.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

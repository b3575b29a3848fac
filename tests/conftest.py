"""Test-session setup: eight host devices for the sharding tests.

XLA reads the flag once, when JAX first starts, so it is set before anything
imports jax. Single-device tests are unaffected: they run on device 0.
"""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

"""The README as a reader meets it: its snippet runs as pasted (its one generated line
is checked with the pages: ``test_reporting.py``).
"""

import os
import re

import jax.numpy as jnp

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _readme() -> str:
  with open(os.path.join(REPOSITORY, "README.md")) as f:
    return f.read()


def test_the_use_snippet_runs_as_pasted_and_trains():
  snippet = re.search(r"## Use.*?```python\n(.*?)```", _readme(), re.S).group(1)
  namespace: dict = {}
  exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102  (the README's own code)
  loss_fn, params, batch = namespace["loss_fn"], namespace["params"], namespace["batch"]
  start = float(loss_fn({"w": jnp.zeros(8)}, batch))
  assert float(loss_fn(params, batch)) < 0.01 * start


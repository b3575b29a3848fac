"""``python -m benchmarks.reporting [--plots]``: the results pages, from the JSON."""

from benchmarks.reporting import render

render.main()

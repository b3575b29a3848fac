"""The contest: every optimizer tuned and trained on a transformer LM, at a scale that decides.

    python -m benchmarks.contest                 # CPU size: 2,000 steps, 0.44M parameters
    python -m benchmarks.contest --size gpu      # 2,000 steps, 3.2M parameters: one GPU, 8 min
    python -m benchmarks.contest --size smoke    # a few steps: the whole path, for CI

``model`` is the LM in plain JAX, ``data`` the standard library's source
split by file, ``entries`` the optimizers as their users run them,
``train`` one compiled program per optimizer over its grid of rates and
seeds, ``protocol`` the declared sizes, seeds, windows and rules, and
``run`` the resumable runner that writes ``benchmarks/results/contest/``.
"""

"""The contest: every optimizer tuned and trained on a transformer LM, at a scale that decides.

    python -m benchmarks.contest                 # CPU size: 2,000 steps, 0.44M parameters
    python -m benchmarks.contest --size gpu      # 2,000 steps, 3.2M parameters, on a GPU
    python -m benchmarks.contest --size smoke    # a few steps: the whole path, for CI

``model`` is the LM in plain JAX, ``corpus`` the pinned Django release's
source split by file, ``baselines`` and ``vsgd_entries`` the optimizers as
their users run them (``normuon`` the one optax lacks), ``entries`` their
table, ``train`` one compiled program per optimizer over a grid of rates and
seeds, ``protocol`` the declared sizes, seeds, rate rule, family and
promotion rule, and ``run`` the resumable runner that writes
``benchmarks/results/contest/``.
"""

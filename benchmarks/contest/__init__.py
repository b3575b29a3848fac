"""The contest: every optimizer tuned and trained on a transformer LM, at a scale that decides.

    python -m benchmarks.contest                 # CPU size: 2,000 steps, 0.44M parameters
    python -m benchmarks.contest --size gpu      # 2,000 steps, 3.2M parameters, on a GPU
    python -m benchmarks.contest --size smoke    # a few steps: the whole path, for CI

The LM, its corpus and its training loop are ``benchmarks.lm``'s (``model``,
``corpus.django_splits``, ``train.train_drawn``); ``entries`` holds the
optimizers of ``benchmarks/optimizers.py`` as their users run them on the LM
(the contest's recipe), with their labels and sources; ``protocol`` the
declared sizes, seeds, rate rule, family and promotion rule, and ``run`` the
resumable runner that writes ``benchmarks/results/contest/``.
"""

"""Time to result: VSGD against the optimizers people use, on five workloads.

``python -m benchmarks.time_to_result`` runs it (``protocol``, whose docstring
gives the tuning protocol and the flags) and writes JSON, nothing else. The rest
of the package: ``workloads`` (the models, their data and targets), ``harness``
(each workload's learning-rate grid and how its steps are driven), ``trainer``
(the jitted training runs and the cost per step; the one runner,
``benchmarks.study_runner``, keeps them in the workload's ledger) and ``schedules`` (the
learning-rate shape over a run). The optimizers are ``benchmarks.optimizers.REGISTRY``'s,
shared with the other benchmarks. The pages made from the results are
``benchmarks.reporting``'s (``python -m benchmarks.reporting``).
"""

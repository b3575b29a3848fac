"""Time to result: VSGD against the optimizers people use, on five workloads.

``python -m benchmarks.time_to_result`` runs it (``protocol``, whose docstring
gives the tuning protocol and the flags). The rest of the package: ``workloads``
(the models, their data and targets), ``harness`` (each workload's learning-rate
grid and how its steps are driven), ``runner`` (the jitted training runs and the
cost per step), ``schedules`` (the learning-rate shape over a run), ``reading``
(loading and checking the result files), ``tables`` (the results page's tables
and how a metric is printed), ``stats`` (the comparisons behind the verdicts),
``verdict`` (the page's opening section), ``long_horizon`` (its 20,000-step
section), ``guide`` (the learning-rate guide) and ``plots`` (the figures).
The optimizers are ``benchmarks.registry``'s, shared with the other benchmarks.
"""

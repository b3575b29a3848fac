"""Time to result: VSGD against the optimizers people use, on five workloads.

``python -m benchmarks.time_to_result`` runs it (``run``, whose docstring gives
the protocol and the flags). The rest of the package: ``workloads`` (the models,
their data and targets), ``harness`` (each workload's learning-rate grid and how
its steps are driven), ``runner`` (the jitted training runs and the cost per
step), ``schedules`` (the learning-rate shape over a run), ``tables`` (reading
the result files, and the results page's sections) and ``plots`` (its figures).
The optimizers are ``benchmarks.registry``'s, shared with the other benchmarks.
"""

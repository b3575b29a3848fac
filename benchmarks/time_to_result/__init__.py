"""Time to result: VSGD against the optimizers people use, on five workloads.

``python -m benchmarks.time_to_result`` runs it (``run``, whose docstring gives
the protocol and the flags). The rest of the package: ``workloads`` (the models,
their data and targets), ``loop`` (the optimizers and the jitted training runs),
``schedules`` (the learning-rate shape over a run), ``tables`` and ``plots``
(the results page's sections and figures, from the JSON in ``benchmarks/results/``).
"""

"""The benchmarks' reporting: ``benchmarks/results/*.json`` into pages and figures.

    python -m benchmarks.reporting            # docs/results*.md and docs/choosing_lr.md
    python -m benchmarks.reporting --plots    # and every figure beside its JSON

It reads the results folder and nothing else: no module here imports a runner
(``step_cost``, ``time_to_result.protocol``, ...), and no runner imports this
package; both sides share only ``benchmarks.common`` (``tests/benchmarks/test_layers.py``
holds the line). ``render`` assembles the three results pages from sections
built for each (``contest``, ``costs``, ``experiments``, ``verdict``,
``long_horizon``, ``tables``, ``noise_scale``); ``guide`` writes the
learning-rate guide; ``markdown`` builds tables narrow by construction;
``reading`` loads and checks the time-to-result files, ``stats`` and
``decisions`` hold the comparisons and the rule behind the verdicts, ``plots``
draws the figures and ``styles`` gives each optimizer its place and its line.
"""

"""The benchmarks' reporting: ``benchmarks/results/*.json`` into pages and figures.

    python -m benchmarks.reporting            # docs/results*.md and docs/choosing_lr.md
    python -m benchmarks.reporting --plots    # and every figure beside its JSON

It reads the results folder and nothing else: no module here imports a runner
(``step_cost``, ``time_to_result.protocol``, ...), and no runner imports this
package; both sides share only ``benchmarks.common`` (``tests/benchmarks/test_layers.py``
holds the line). Each page's prose is its template (``templates/<page>.md``, a
part a section); ``render`` assembles the three results pages from the sections
that ``contest``, ``costs``, ``experiments``, ``verdict``, ``long_horizon``,
``tables`` and ``noise_scale`` fill with tables and numbers; ``guide`` fills the
learning-rate guide's; ``markdown`` fills a section's slots and builds tables
narrow by construction; ``reading`` loads and checks the time-to-result files, ``stats`` and
``decisions`` hold the comparisons and the rule behind the verdicts, ``plots``
draws the figures and ``styles`` gives each optimizer its place and its line.
"""

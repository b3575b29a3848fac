"""The benchmarks' reporting: ``benchmarks/results/*.json`` into pages and figures.

    python -m benchmarks.reporting            # docs/results*.md and docs/choosing_lr.md
    python -m benchmarks.reporting --plots    # and every figure beside its JSON

It reads the results folder and nothing else: no module here imports a runner
(``step_cost``, ``time_to_result.protocol``, ...), and no runner imports this
package; both sides share only ``benchmarks.common`` (``tests/benchmarks/test_layers.py``
holds the line). Each page's prose is its template (``templates/<page>.md``, a
part a section); ``render`` fills the two results pages, the learning-rate guide
and the two generated lines with the values that ``contest``, ``costs``, ``small``,
``ladder``, ``momentum`` and ``noise_scale`` give, tables and numbers; ``markdown``
fills a template's slots and builds tables narrow by construction; ``reading`` loads
and checks the time-to-result files, ``tables`` says how their metrics are printed,
``stats`` and ``decisions`` hold the comparisons and the rule behind the verdicts,
``plots`` draws the figures and ``styles`` gives each optimizer its place and its line.
"""

"""The cost: an optimizer's step, compile time, memory and floor, next to Adam's.

    python -m benchmarks.cost                 # this machine's part: cpu or gpu
    python -m benchmarks.cost --quick         # a small run of every section (CI)

One command, one result file a part (``benchmarks/results/cost_<part>.json``,
the part being the backend: ``cpu`` or ``gpu``), its sections declared in
``protocol`` and each kept as it finishes by the one runner
(``benchmarks.study_runner.run_parts``): ``step`` (``step.py``: each
state at three sizes, timed per call and, on an accelerator, in one program),
``compile`` (``compile.py``: trees of many leaves), ``floor`` (``floor.py``:
each state's bytes against an ideal step's, and XLA's counts), ``memory``
(``memory.py``: each state's bytes a parameter on a matrix and the paper's
models, and the share that factors) and ``muon_family`` (``muon_family.py``:
the contest's Muon family on its model, next to Muon). The committed CPU part
also holds ``cpu_form`` (VSGD's step with and without the form of the rule
XLA:CPU compiles), measured by an earlier version of this command that reached
into the package's private modules; the command no longer takes it.
"""

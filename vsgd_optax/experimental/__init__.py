"""What is measured but not yet earned its place in the public API.

``factored_vsgd`` keeps the two rates of each large matrix as row and column
means, for under a third of VSGD's memory; ``docs/algorithm.md`` derives it
and ``docs/results.md`` gives its quality against ``vsgd``.

``vsgd_muon`` is Muon whose momentum is VSGD's posterior mean ``mu``
(Newton-Schulz on ``mu`` for matrices, AdamW for the other leaves, as Muon's
users run it); ``docs/algorithm.md`` says why it has no Nesterov step, and
``benchmarks/contest/protocol.py`` declares the rule that would take it out
of here.

One file an optimizer: ``_factored_vsgd.py``, ``_vsgd_muon.py`` and
``_noise_scale.py`` (the read-outs), each beside the stable core it builds on.

The noise-scale read-outs missed the validation bar: useful, measured, not yet
trustworthy.
``gradient_noise_scale`` reads McCandlish et al.'s simple noise scale from the
state of VSGD; ``docs/results.md`` shows where it agrees with a reference and
where it does not, ``docs/algorithm.md`` derives it. ``gradient_noise_scale_parts``
gives its two halves, to average over steps; ``gradient_snr`` is its
per-parameter companion.
"""

from vsgd_optax.experimental._factored_vsgd import FactoredRate
from vsgd_optax.experimental._factored_vsgd import FactoredVSGDState
from vsgd_optax.experimental._factored_vsgd import factored_vsgd
from vsgd_optax.experimental._factored_vsgd import scale_by_factored_vsgd
from vsgd_optax.experimental._noise_scale import gradient_noise_scale
from vsgd_optax.experimental._noise_scale import gradient_noise_scale_parts
from vsgd_optax.experimental._noise_scale import gradient_snr
from vsgd_optax.experimental._vsgd_muon import scale_by_vsgd_muon
from vsgd_optax.experimental._vsgd_muon import vsgd_muon

__all__ = ("FactoredRate", "FactoredVSGDState", "factored_vsgd", "gradient_noise_scale",
           "gradient_noise_scale_parts", "gradient_snr", "scale_by_factored_vsgd",
           "scale_by_vsgd_muon", "vsgd_muon")

"""What is measured but not yet earned its place in the public API.

``factored_vsgd`` keeps the two rates of each large matrix as row and column
means, for under a third of VSGD's memory; ``docs/algorithm.md`` derives it
and ``docs/results.md`` gives its quality against ``vsgd``. Its state types,
``FactoredRate`` and ``FactoredVSGDState``, are the public ones of
:mod:`vsgd_optax` (``vsgd_muon`` keeps its matrices' rates so by default).

``vsgd_muon`` and ``scale_by_vsgd_muon`` left this package by the contest's
promotion rule (``benchmarks/contest/protocol.py``): they are
``vsgd_optax.vsgd_muon`` and ``vsgd_optax.scale_by_vsgd_muon`` now, whose
matrices keep factored rates by default. The old names still resolve, with a
``DeprecationWarning`` that says so.

One file an optimizer: ``_factored_vsgd.py`` and ``_noise_scale.py`` (the
read-outs), each beside the stable core it builds on.

The noise-scale read-outs missed the validation bar: useful, measured, not yet
trustworthy.
``gradient_noise_scale`` reads McCandlish et al.'s simple noise scale from the
state of VSGD; ``docs/results.md`` shows where it agrees with a reference and
where it does not, ``docs/algorithm.md`` derives it. ``gradient_noise_scale_parts``
gives its two halves, to average over steps; ``gradient_snr`` is its
per-parameter companion.
"""

import warnings

import vsgd_optax
from vsgd_optax._factored import FactoredRate
from vsgd_optax._factored import FactoredVSGDState
from vsgd_optax.experimental._factored_vsgd import factored_vsgd
from vsgd_optax.experimental._factored_vsgd import scale_by_factored_vsgd
from vsgd_optax.experimental._noise_scale import gradient_noise_scale
from vsgd_optax.experimental._noise_scale import gradient_noise_scale_parts
from vsgd_optax.experimental._noise_scale import gradient_snr

__all__ = ("FactoredRate", "FactoredVSGDState", "factored_vsgd", "gradient_noise_scale",
           "gradient_noise_scale_parts", "gradient_snr", "scale_by_factored_vsgd")

# Promoted out of here: the old name, and what changed with the move.
_PROMOTED = ("vsgd_muon", "scale_by_vsgd_muon")


def __getattr__(name: str):
  if name in _PROMOTED:
    warnings.warn(
        f"vsgd_optax.experimental.{name} is vsgd_optax.{name} now, promoted by the contest's "
        "rule; its matrices keep factored rates by default (min_dim_size_to_factor=128). "
        "Pass min_dim_size_to_factor=None for the full rates the experimental default kept.",
        DeprecationWarning, stacklevel=2)
    return getattr(vsgd_optax, name)
  raise AttributeError(f"module 'vsgd_optax.experimental' has no attribute {name!r}")

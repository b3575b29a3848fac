"""What is measured but not yet earned its place in the public API.

``factored_vsgd`` keeps the two rates of each large matrix as row and column
means, for under a third of VSGD's memory; its state is
:class:`vsgd_optax.ScaleByVSGDState` with :class:`vsgd_optax.FactoredRate` rates
(``FactoredVSGDState`` is the same class, under its deprecated name).
``gradient_noise_scale``, ``gradient_noise_scale_parts`` and ``gradient_snr`` read
McCandlish et al.'s simple noise scale from VSGD's state. ``docs/algorithm.md``
derives both and ``docs/results.md`` measures them. ``vsgd_muon`` and
``scale_by_vsgd_muon`` moved to :mod:`vsgd_optax`; the old names still resolve,
with a ``DeprecationWarning``.
"""

import warnings

import vsgd_optax
from vsgd_optax._factored import FactoredRate
from vsgd_optax._transforms import FactoredVSGDState
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

"""Read-outs that missed the validation bar: useful, measured, not yet trustworthy.

``gradient_noise_scale`` reads McCandlish et al.'s simple noise scale from the
state of VSGD; ``docs/results.md`` shows where it agrees with a reference and
where it does not, ``docs/algorithm.md`` derives it. ``gradient_noise_scale_parts``
gives its two halves, to average over steps; ``gradient_snr`` is its
per-parameter companion.
"""

from vsgd_optax._noise_scale import gradient_noise_scale
from vsgd_optax._noise_scale import gradient_noise_scale_parts
from vsgd_optax._noise_scale import gradient_snr

__all__ = ("gradient_noise_scale", "gradient_noise_scale_parts", "gradient_snr")

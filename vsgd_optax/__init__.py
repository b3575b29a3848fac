"""VSGD, Constant VSGD and VSGD-Muon as composable optax gradient transformations."""

from vsgd_optax import _compat  # noqa: F401  # 0.1.0's names, for its pickles
from vsgd_optax._aliases import constant_vsgd
from vsgd_optax._aliases import vsgd
from vsgd_optax._diagnostics import effective_beta1
from vsgd_optax._diagnostics import observation_noise_variance
from vsgd_optax._diagnostics import posterior_variance
from vsgd_optax._diagnostics import systematic_noise_variance
from vsgd_optax._factored import FactoredRate
from vsgd_optax._per_example import per_example_moments
from vsgd_optax._per_example import per_example_value_and_grad
from vsgd_optax._transforms import FactoredVSGDState  # deprecated: ScaleByVSGDState
from vsgd_optax._transforms import ScaleByConstantVSGDState
from vsgd_optax._transforms import ScaleByVSGDState
from vsgd_optax._transforms import scale_by_constant_vsgd
from vsgd_optax._transforms import scale_by_vsgd
from vsgd_optax._vsgd_muon import scale_by_vsgd_muon
from vsgd_optax._vsgd_muon import vsgd_muon

__version__ = "0.1.0"

__all__ = (
    "FactoredRate",
    "FactoredVSGDState",
    "ScaleByConstantVSGDState",
    "ScaleByVSGDState",
    "constant_vsgd",
    "effective_beta1",
    "observation_noise_variance",
    "per_example_moments",
    "per_example_value_and_grad",
    "posterior_variance",
    "scale_by_constant_vsgd",
    "scale_by_vsgd",
    "scale_by_vsgd_muon",
    "systematic_noise_variance",
    "vsgd",
    "vsgd_muon",
)

"""0.1.0's names in the private modules that held them, in this one place.

A pickle names a class by its module and name: 0.1.0 pickled the factored state as
``vsgd_optax._factored.FactoredVSGDState``, which is ``_transforms.ScaleByVSGDState``
now. ``_factored`` cannot import ``_transforms`` (which imports it), so the old names
are set on their old modules here, once both are imported; the package imports this
module, so anything that loads a pickle has them.
"""

import types

from vsgd_optax import _factored
from vsgd_optax import _transforms
from vsgd_optax import _update_rules

OLD_NAMES: dict[types.ModuleType, dict[str, object]] = {
    _factored: {"FactoredVSGDState": _transforms.ScaleByVSGDState,
                "factored_vsgd_leaf": _factored.vsgd_leaf},
    _update_rules: {"finite": _update_rules.clamp_to_finite},
}

for _module, _names in OLD_NAMES.items():
  for _name, _value in _names.items():
    setattr(_module, _name, _value)

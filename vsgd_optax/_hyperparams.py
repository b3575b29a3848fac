"""The keyword arguments VSGD's optimizers share, each declared once.

Every optimizer takes VSGD's hyperparameters, the state's storage and decay, and
optax's family writes such arguments out in each signature. Here each group
is a ``TypedDict``, which type checkers and editors read for the ``**args``
of a function annotated ``Unpack[...]`` with it, and ``DEFAULTS`` gives their
values. :func:`takes` builds the whole signature from the two, so that
``inspect.signature`` (and with it ``optax.inject_hyperparams``, ``help`` and
the API pages) sees every argument and its default, and fills the defaults in
before the body runs: the body reads every name of its group.
"""

import functools
import inspect
import types
import typing
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import TypedDict
from typing import TypeVar

import jax

from vsgd_optax import _validation


class PriorArgs(TypedDict, total=False):
  """The prior of both forms of VSGD."""
  variance_ratio: jax.typing.ArrayLike  # K_g
  prior_strength: jax.typing.ArrayLike  # gamma


class StorageArgs(TypedDict, total=False):
  """How the state is kept: its dtype, and the rounding of a narrow one."""
  state_dtype: jax.typing.DTypeLike | None
  state_rounding: str
  seed: int | jax.Array


class DecayArgs(TypedDict, total=False):
  """The optimizers' decoupled weight decay, as :func:`optax.adamw`'s."""
  weight_decay: jax.typing.ArrayLike
  # A tree of booleans like the params, or a function of the params returning one.
  weight_decay_mask: Any | Callable[[Any], Any] | None


class VSGDRuleArgs(PriorArgs, total=False):
  """The rest of VSGD's hyperparameters: two decay exponents and the eps."""
  kappa_g: jax.typing.ArrayLike
  kappa_ghat: jax.typing.ArrayLike
  eps: jax.typing.ArrayLike


class ConstantVSGDRuleArgs(PriorArgs, total=False):
  """The rest of Constant VSGD's: one decay exponent and the eps."""
  kappa: jax.typing.ArrayLike
  eps: jax.typing.ArrayLike


class VSGDArgs(VSGDRuleArgs, StorageArgs, total=False):
  """``scale_by_vsgd``'s, and every variant's that keeps its rule."""


class ConstantVSGDArgs(ConstantVSGDRuleArgs, StorageArgs, total=False):
  """``scale_by_constant_vsgd``'s."""


class VSGDOptimizerArgs(VSGDRuleArgs, DecayArgs, StorageArgs, total=False):
  """``vsgd``'s, and every variant's that keeps its rule, after the learning rate."""


class ConstantVSGDOptimizerArgs(ConstantVSGDRuleArgs, DecayArgs, StorageArgs, total=False):
  """``constant_vsgd``'s, after the learning rate."""


# The defaults: VSGD's hyperparameters from the table that also checks them,
# a state kept as the params are, rounded stochastically where narrower, and
# no decay.
DEFAULTS: Mapping[str, Any] = {
    **{name: row[0] for name, row in _validation.VSGD_HYPERPARAMS.items()},
    "state_dtype": None, "state_rounding": "stochastic", "seed": 0,
    "weight_decay": 0.0, "weight_decay_mask": None,
}

Factory = TypeVar("Factory", bound=Callable[..., Any])


@functools.cache
def declared(group: type) -> Mapping[str, Any]:
  """The names ``group`` declares, with their types, read-only. Cached: reading
  a ``TypedDict``'s hints takes about as long as building ``vsgd`` (some 60 µs
  each on the CI machine), and ``of`` asks at every build.
  """
  return types.MappingProxyType(typing.get_type_hints(group))


def takes(group: type, defaults: Mapping[str, Any] = DEFAULTS) -> Callable[[Factory], Factory]:
  """Gives a factory ``f(..., **args: Unpack[group])`` the signature it stands
  for: its own arguments (positional, then keyword-only), then every key of
  ``group`` by keyword with its default from ``defaults``. A call binds to that
  signature, so an unknown name fails as Python's own check does, and the body
  receives every key.
  """
  grouped = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=defaults[name],
                               annotation=annotation)
             for name, annotation in declared(group).items()]

  def decorate(factory: Factory) -> Factory:
    own = inspect.signature(factory)
    kinds = [p.kind for p in own.parameters.values()]
    if kinds[-1:] != [inspect.Parameter.VAR_KEYWORD]:
      raise TypeError(f"{factory.__name__} must end in **args to take {group.__name__}.")
    *named, _ = own.parameters.values()
    signature = own.replace(parameters=[*named, *grouped])

    @functools.wraps(factory)
    def with_defaults(*given, **by_name):
      try:
        bound = signature.bind(*given, **by_name)
      except TypeError as error:  # bind names no function: say whose arguments these are
        raise TypeError(f"{factory.__name__}() {error}") from None
      bound.apply_defaults()
      return factory(*bound.args, **bound.kwargs)

    with_defaults.__signature__ = signature  # type: ignore[attr-defined]
    with_defaults.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()
                                     if p.annotation is not inspect.Parameter.empty}
    if signature.return_annotation is not inspect.Signature.empty:
      with_defaults.__annotations__["return"] = signature.return_annotation
    return typing.cast(Factory, with_defaults)

  return decorate


def of(group: type, args: Mapping[str, Any]) -> dict[str, Any]:
  """The arguments of ``args`` that ``group`` declares: what a factory passes
  on to one that takes a smaller group.
  """
  return {name: args[name] for name in declared(group)}

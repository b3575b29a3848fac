"""Which form of one leaf's VSGD or Constant VSGD step each compiler is given.

The equations are in ``_update_rules.py``. Their cost depends on how the
backend turns elementwise arithmetic into loops over memory. A VSGD step
reads four arrays and writes four (the direction and the new ``mu``, ``b_g``,
``b_ghat``), a Constant VSGD step three and three, where Adam reads three and
writes three:

* XLA on GPU and TPU fuses several outputs into one loop, so it gets the
  equations as written.
* XLA:CPU emits one loop per output, and each loop re-reads what its output
  needs: about 22 passes over memory per VSGD step against Adam's 10, and
  more when the state is donated, since a loop may not overwrite what a later
  loop still reads. So XLA:CPU gets the compiled loop of ``_cpu_kernel.cc``,
  which reads the inputs once and writes the outputs once. It writes each
  output over its input (input/output aliasing: the direction over the
  gradient, the new state over the old) unless that input is an argument of
  the jitted computation that was not donated: such a buffer stays the
  caller's, and aliasing it would make XLA copy it first.
* Where the compiled loop cannot be used, XLA:CPU gets the in-place form of
  ``_update_rules.py``: traced hyperparameters (the loop takes them as
  compile-time constants), per-example variances, dtypes other than float32
  and float64, computations partitioned over several devices (XLA would
  gather the operands of the call), or a package built without its compiled
  module.

The choice is made while lowering, through the primitives ``vsgd_leaf_p``
and ``constant_vsgd_leaf_p``, the only place where it is known whether an
operand is a donated argument. Eager calls compile the primitive as a jitted
step would; ``vmap`` and ``jvp`` use the equations as written. Every path
computes the same numbers up to rounding, which ``tests/test_lowering.py``
checks against the float64 reference for each form.
"""

from __future__ import annotations

import functools

import jax
from jax.extend import core as jex_core
from jax.interpreters import ad
from jax.interpreters import batching
from jax.interpreters import mlir

from vsgd_optax import _cpu_kernel
from vsgd_optax._update_rules import (ConstantStep, LeafUpdate, Step,
                                      constant_vsgd_leaf, constant_vsgd_step,
                                      vsgd_leaf, vsgd_step)

# Attributes JAX puts on the arguments of a jitted computation whose buffers
# the caller donated.
_DONATION_ATTRIBUTES = ("tf.aliasing_output", "jax.buffer_donor")


def vsgd_update(g, mu, b_g, b_ghat, t, K, gamma, kappa_g, kappa_ghat, eps,
                grad_variance=None) -> LeafUpdate:
  """One VSGD step for one array, in the form that suits the compiler."""
  step = vsgd_step(t, kappa_g, kappa_ghat)
  constants = _python_floats(K=K, gamma=gamma, eps=eps)
  if grad_variance is None and constants is not None:
    return LeafUpdate(*vsgd_leaf_p.bind(g, mu, b_g, b_ghat, *step,
                                        **constants))
  def form(in_place):
    return lambda: tuple(vsgd_leaf(g, mu, b_g, b_ghat, step, K, gamma, eps,
                                   grad_variance, in_place=in_place))
  return LeafUpdate(*jax.lax.platform_dependent(cpu=form(True),
                                                default=form(False)))


def constant_vsgd_update(g, mu, b_ghat, t, K, gamma, kappa, eps,
                         grad_variance=None) -> LeafUpdate:
  """One Constant VSGD step for one array, in the form that suits the
  compiler."""
  step = constant_vsgd_step(t, kappa)
  constants = _python_floats(K=K, gamma=gamma, eps=eps)
  if grad_variance is None and constants is not None:
    direction, mu, b_ghat = constant_vsgd_leaf_p.bind(g, mu, b_ghat, *step,
                                                      **constants)
    return LeafUpdate(direction, mu, None, b_ghat)
  # Its one form suits both kinds of compiler (see constant_vsgd_leaf).
  return constant_vsgd_leaf(g, mu, b_ghat, step, K, gamma, eps, grad_variance)


def _python_floats(**values) -> dict[str, float] | None:
  """The values as Python floats, or None when any is traced.

  The compiled loop takes the hyperparameters as compile-time attributes,
  which cannot hold traced values (``optax.inject_hyperparams`` traces them).
  """
  try:
    return {name: float(v) for name, v in values.items()}
  except (jax.errors.ConcretizationTypeError, TypeError):
    return None


def _vsgd_form(in_place):
  def form(g, mu, b_g, b_ghat, first, rho_g, rho_ghat, *, K, gamma, eps):
    return tuple(vsgd_leaf(g, mu, b_g, b_ghat, Step(first, rho_g, rho_ghat),
                           K, gamma, eps, in_place=in_place))
  return form


def _constant_vsgd_form(g, mu, b_ghat, first, rho, *, K, gamma, eps):
  direction, mu, _, b_ghat = constant_vsgd_leaf(
      g, mu, b_ghat, ConstantStep(first, rho), K, gamma, eps)
  return direction, mu, b_ghat


def _compiled_form(optimizer, write_over):
  def form(*operands, K, gamma, eps):
    n_arrays = len(write_over)
    return _cpu_kernel.step(optimizer, operands[:n_arrays],
                            operands[n_arrays:], K=K, gamma=gamma, eps=eps,
                            write_over=write_over)
  return form


def _is_fresh_argument(value) -> bool:
  """Whether ``value`` is an argument of the jitted computation (not of a loop
  body or a nested function) whose buffer was not donated."""
  try:
    if not isinstance(value, mlir.ir.BlockArgument):
      return False
    function = value.owner.owner
    if mlir.ir.StringAttr(function.attributes["sym_name"]).value != "main":
      return False
    if "arg_attrs" not in function.attributes:
      return True
    attributes = mlir.ir.DictAttr(
        mlir.ir.ArrayAttr(function.attributes["arg_attrs"])[value.arg_number])
    return not any(name in attributes for name in _DONATION_ATTRIBUTES)
  except Exception:  # pylint: disable=broad-except
    # An MLIR binding that differs from the one this was written for: write
    # in place, which is right whatever the buffers.
    return False


def _runs_on_one_device(ctx) -> bool:
  """False under automatic partitioning over several devices, and in
  contexts (pmap, shard_map) whose partitioning this module does not read."""
  return getattr(ctx.module_context.axis_context, "num_devices", None) == 1


def _lowering_of(form):
  """The lowering rule that emits ``form`` in place of the primitive."""
  def rule(ctx, *operands, **constants):
    lowered = mlir.lower_fun(functools.partial(form, **constants),
                             multiple_results=True)
    return lowered(ctx, *operands)
  return rule


def _define_step_primitive(optimizer, n_arrays, as_written, in_place):
  """A primitive for one step of ``optimizer`` on one array.

  Its operands are the ``n_arrays`` arrays (the gradient, then the state) and
  the step's scalars; its results are the direction and the new state. The
  hyperparameters are Python floats: K, gamma and eps.
  """
  primitive = jex_core.Primitive(f"{optimizer}_leaf")
  primitive.multiple_results = True

  def abstract_eval(*operands, **constants):
    del constants
    return operands[:n_arrays]

  @functools.partial(jax.jit, static_argnames=("K", "gamma", "eps"))
  def evaluate(*operands, K, gamma, eps):
    # Eager calls: compiled once per shape, through the lowering rules below.
    return tuple(primitive.bind(*operands, K=K, gamma=gamma, eps=eps))

  def batch(operands, batch_dims, **constants):
    outputs = jax.vmap(functools.partial(as_written, **constants),
                       in_axes=batch_dims)(*operands)
    return outputs, (0,) * len(outputs)

  def jvp(primals, tangents, **constants):
    tangents = tuple(ad.instantiate_zeros(t) for t in tangents)
    return jax.jvp(functools.partial(as_written, **constants), primals,
                   tangents)

  def lower_on_cpu(ctx, *operands, **constants):
    _cpu_kernel.warn_unavailable()
    if _cpu_kernel.supports(ctx.avals_in[0].dtype) and _runs_on_one_device(ctx):
      # Each output takes its input's buffer (the direction takes the
      # gradient's) unless that is a caller's buffer the step must not touch.
      write_over = tuple(not _is_fresh_argument(array)
                         for array in operands[:n_arrays])
      form = _compiled_form(optimizer, write_over)
    else:
      form = in_place
    return _lowering_of(form)(ctx, *operands, **constants)

  primitive.def_abstract_eval(abstract_eval)
  primitive.def_impl(evaluate)
  batching.primitive_batchers[primitive] = batch
  ad.primitive_jvps[primitive] = jvp
  mlir.register_lowering(primitive, _lowering_of(as_written))
  try:
    # Not cached as a function of its own: its operands must be the caller's
    # values for _is_fresh_argument to see the computation's arguments.
    mlir.register_lowering(primitive, lower_on_cpu, platform="cpu",
                           cacheable=False)
  except TypeError:  # A JAX without `cacheable`: always written in place.
    mlir.register_lowering(primitive, lower_on_cpu, platform="cpu")
  return primitive


vsgd_leaf_p = _define_step_primitive(
    "vsgd", 4, as_written=_vsgd_form(in_place=False),
    in_place=_vsgd_form(in_place=True))
constant_vsgd_leaf_p = _define_step_primitive(
    "constant_vsgd", 3, as_written=_constant_vsgd_form,
    in_place=_constant_vsgd_form)

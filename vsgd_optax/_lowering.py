"""Which form of one leaf's VSGD step each compiler is given, and why.

The equations are in ``_update_rules.py``. Their cost depends on how the
backend turns elementwise arithmetic into loops over memory, and a VSGD step
reads four arrays and writes four (the direction and the new ``mu``, ``b_g``,
``b_ghat``) where Adam reads three and writes three:

* XLA on GPU and TPU fuses several outputs into one loop, so it gets the
  equations as written.
* XLA:CPU emits one loop per output, and each loop re-reads what its output
  needs: about 22 passes over memory per step against Adam's 10. One variadic
  ``reduce_window`` with a window of one element is a single loop that reads
  the four inputs once and writes the four outputs: 11 passes. But its
  outputs cannot share the input buffers, so when the state is donated, XLA
  writes them to full-size temporaries and copies them back, which costs
  more than the 22 passes. So XLA:CPU gets the one-loop form only when it
  can see that the new state needs fresh buffers anyway: when ``mu``,
  ``b_g`` and ``b_ghat`` are arguments of the jitted computation that were
  not donated. Everything else (donated state, state carried by a loop,
  state that passed through other operations, traced hyperparameters,
  per-example variances) gets the in-place form of ``_update_rules.py``.

The choice is made while lowering, through the primitive ``vsgd_leaf_p``, the
only place where it is known whether an operand is a donated argument. Eager
calls compile the primitive as a jitted step would; ``vmap`` and ``jvp`` use
the equations as written. Every path computes the same numbers up to
rounding, which ``tests/test_lowering.py`` checks against the float64
reference for each form.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core
from jax.interpreters import ad
from jax.interpreters import batching
from jax.interpreters import mlir

from vsgd_optax._update_rules import LeafUpdate, Step, vsgd_leaf, vsgd_step

# Attributes JAX puts on the arguments of a jitted computation whose buffers
# the caller donated.
_DONATION_ATTRIBUTES = ("tf.aliasing_output", "jax.buffer_donor")


def vsgd_update(g, mu, b_g, b_ghat, t, K, gamma, kappa_g, kappa_ghat, eps,
                grad_variance=None) -> LeafUpdate:
  """One VSGD step for one array, in the form that suits the compiler."""
  step = vsgd_step(t, kappa_g, kappa_ghat)
  constants = _python_floats(K, gamma, eps)
  if grad_variance is None and constants is not None and g.ndim and g.size:
    K, gamma, eps = constants
    return LeafUpdate(*vsgd_leaf_p.bind(
        g, mu, b_g, b_ghat, *step, K=K, gamma=gamma, eps=eps))
  # Traced hyperparameters or per-example variances: no one-loop form, so
  # XLA:CPU gets the in-place form whatever the buffers.
  def form(in_place):
    return lambda: tuple(vsgd_leaf(g, mu, b_g, b_ghat, step, K, gamma, eps,
                                   grad_variance, in_place=in_place))
  return LeafUpdate(*jax.lax.platform_dependent(cpu=form(True),
                                                default=form(False)))


def _python_floats(*values) -> tuple[float, ...] | None:
  """The values as Python floats, or None when any is traced.

  The one-loop form bakes the hyperparameters into its loop body, which
  cannot capture traced values (``optax.inject_hyperparams`` traces them).
  """
  try:
    return tuple(float(v) for v in values)
  except (jax.errors.ConcretizationTypeError, TypeError):
    return None


def _elementwise(g, mu, b_g, b_ghat, first, rho_g, rho_ghat, *, K, gamma, eps,
                 in_place):
  return tuple(vsgd_leaf(g, mu, b_g, b_ghat, Step(first, rho_g, rho_ghat),
                         K, gamma, eps, in_place=in_place))


_as_written = functools.partial(_elementwise, in_place=False)
_in_place = functools.partial(_elementwise, in_place=True)


def _one_loop(g, mu, b_g, b_ghat, first, rho_g, rho_ghat, *, K, gamma, eps):
  """All four outputs from one XLA:CPU loop: a reduce_window whose window is a
  single element applies its body once per coordinate. The step's scalars
  enter as the body's initial values, the one way in for traced values."""
  dtype = g.dtype
  scalars = (first.astype(dtype), rho_g.astype(dtype), rho_ghat.astype(dtype),
             jnp.zeros((), dtype))

  def body(step, coordinate):
    first, rho_g, rho_ghat, _ = step
    return _as_written(*coordinate, first > 0, rho_g, rho_ghat,
                       K=K, gamma=gamma, eps=eps)

  window = (1,) * g.ndim
  return jax.lax.reduce_window((g, mu, b_g, b_ghat), scalars, body, window,
                               window, "VALID")


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
    # An MLIR binding that differs from the one this was written for: take
    # the in-place form, which is right whatever the buffers.
    return False


def _lowering_of(form):
  """The lowering rule that emits ``form`` in place of the primitive."""
  def rule(ctx, *operands, **constants):
    lowered = mlir.lower_fun(functools.partial(form, **constants),
                             multiple_results=True)
    return lowered(ctx, *operands)
  return rule


def _lower_on_cpu(ctx, g, mu, b_g, b_ghat, *scalars, **constants):
  state_is_fresh = all(map(_is_fresh_argument, (mu, b_g, b_ghat)))
  form = _one_loop if state_is_fresh else _in_place
  return _lowering_of(form)(ctx, g, mu, b_g, b_ghat, *scalars, **constants)


def _abstract_eval(g, mu, b_g, b_ghat, *scalars, **constants):
  del scalars, constants
  return (g, mu, b_g, b_ghat)


# Eager calls: compiled once per shape, through the lowering rules below.
@functools.partial(jax.jit, static_argnames=("K", "gamma", "eps"))
def _evaluate(*operands, K, gamma, eps):
  return tuple(vsgd_leaf_p.bind(*operands, K=K, gamma=gamma, eps=eps))


def _batch(operands, batch_dims, **constants):
  outputs = jax.vmap(functools.partial(_as_written, **constants),
                     in_axes=batch_dims)(*operands)
  return outputs, (0,) * len(outputs)


def _jvp(primals, tangents, **constants):
  tangents = tuple(ad.instantiate_zeros(t) for t in tangents)
  return jax.jvp(functools.partial(_as_written, **constants), primals,
                 tangents)


vsgd_leaf_p = jex_core.Primitive("vsgd_leaf")
vsgd_leaf_p.multiple_results = True
vsgd_leaf_p.def_abstract_eval(_abstract_eval)
vsgd_leaf_p.def_impl(_evaluate)
batching.primitive_batchers[vsgd_leaf_p] = _batch
ad.primitive_jvps[vsgd_leaf_p] = _jvp
mlir.register_lowering(vsgd_leaf_p, _lowering_of(_as_written))
try:
  # Not cached as a function of its own: its operands must be the caller's
  # values for _is_fresh_argument to see the computation's arguments.
  mlir.register_lowering(vsgd_leaf_p, _lower_on_cpu, platform="cpu",
                         cacheable=False)
except TypeError:  # A JAX without `cacheable`: always the in-place form.
  mlir.register_lowering(vsgd_leaf_p, _lower_on_cpu, platform="cpu")

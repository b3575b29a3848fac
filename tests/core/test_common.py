"""One sweep of drop-in checks over every optimizer the package offers (each form of
``vsgd_muon`` included), ``optax.adam`` beside them, as optax's ``_common_test.py``
and ``sharding_test.py`` run theirs: whatever the state's layout, each must jit,
trace once, take ``optax.inject_hyperparams`` with its defaults, ``optax.MultiSteps``,
``optax.masked``, ``jax.lax.cond``, ``jax.ShapeDtypeStruct`` params, ``None`` leaves
and ``jax.export``, and keep its state's type (sharding included) on an explicit
mesh of 8 host devices, as ``optax.adam`` does.
"""

import chex
import jax
import jax.numpy as jnp
import optax
import pytest
from absl.testing import parameterized
from jax import export

from tests.support.helpers import DIMS
from tests.support.helpers import DROP_IN as OPTIMIZERS
from tests.support.helpers import make_grads
from tests.support.helpers import make_params

# Newton-Schulz's float32 matrix products round differently when XLA fuses the
# step in another program (a cond branch, an injected rate): a few ulps.
RTOL = 1e-5


def _steps(opt, params, steps, update=None):
  update = update or jax.jit(opt.update)
  state = opt.init(params)
  for i in range(steps):
    updates, state = update(make_grads(i), state, params)
    params = optax.apply_updates(params, updates)
  return params, state


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_steps_trace_once_and_keep_the_params_tree_and_dtypes(name):
  opt, params = OPTIMIZERS[name](0.01), make_params()
  traces = []

  def update(grads, state, params):
    traces.append(1)  # runs only while tracing
    return opt.update(grads, state, params)
  update = jax.jit(update)
  state = opt.init(params)
  for i in range(5):
    updates, state = update(make_grads(i), state, params)
    chex.assert_trees_all_equal_shapes_and_dtypes(updates, params)
    assert all(bool(jnp.all(jnp.isfinite(u))) for u in jax.tree.leaves(updates))
    params = optax.apply_updates(params, updates)
    if i == 1:
      # The first step may trace twice, as optax.adam's does (a fresh state's
      # weak types); from then on the program is reused.
      after_two = len(traces)
  assert after_two <= 2 and len(traces) == after_two
  # Every step moved the params off where they started.
  assert not bool(jnp.allclose(params["w"], make_params()["w"]))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_inject_hyperparams_steps_as_the_plain_optimizer(name):
  factory = OPTIMIZERS[name]
  plain, _ = _steps(factory(0.03), make_params(), 6)
  # Every argument as inject_hyperparams takes it by default: no name static.
  injected_opt = optax.inject_hyperparams(factory)(learning_rate=0.03)
  injected, state = _steps(injected_opt, make_params(), 6)
  # Not bitwise, for optax.adam too: XLA folds a Python-float rate into constants
  # that an injected (array) rate leaves as operands.
  chex.assert_trees_all_close(plain, injected, rtol=RTOL, atol=1e-6)
  # A rate set to 0 in the state stops the params, without a new trace.
  state.hyperparams["learning_rate"] = jnp.asarray(0.0)
  updates, _ = jax.jit(injected_opt.update)(make_grads(9), state, injected)
  chex.assert_trees_all_equal(updates, jax.tree.map(jnp.zeros_like, updates))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_init_on_shapes_alone_gives_the_state_init_gives(name):
  """Traced on shapes (``jax.eval_shape``), and called on ``jax.ShapeDtypeStruct``
  params themselves, as optax's sharding suite calls it.
  """
  opt, params = OPTIMIZERS[name](0.01), make_params()
  shapes = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, p.dtype), params)
  abstract = jax.eval_shape(opt.init, shapes)
  chex.assert_trees_all_equal_shapes_and_dtypes(abstract, opt.init(params))
  chex.assert_trees_all_equal_shapes_and_dtypes(opt.init(shapes), opt.init(params))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16],
                         ids=["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_states_type_holds_on_an_explicit_mesh(name, dtype):
  """Optax's sharding checks: params sharded on an explicit mesh of 8 host
  devices (``P(None, 'x')``, as optax's suite shards them; and a stack of
  matrices split along its batch axis, which each vsgd_muon form orthogonalizes
  apart), and the state's ``jax.typeof`` (shape, dtype and sharding) the same
  after ``init``, ``update``, ``jit(init)`` and ``jit(update)``. Before, a
  factored state's means lost their sharding under ``jit(init)``.
  """
  mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
  split = lambda *spec: jax.sharding.NamedSharding(mesh, jax.P(*spec))
  kwargs = {}
  if "vsgd_muon" in name:
    kwargs["muon_weight_dimension_numbers"] = {
        "w": None, "stack": DIMS(1, 2)}
  opt = OPTIMIZERS[name](1.0, **kwargs)
  with jax.set_mesh(mesh):
    params = {"w": jnp.zeros((2, 8, 4), dtype, out_sharding=split(None, "x")),
              "stack": jnp.ones((8, 4, 6), dtype, out_sharding=split("x"))}
    state = opt.init(params)
    types = [jax.tree.map(jax.typeof, s) for s in (
        state, jax.jit(opt.init)(params), opt.update(params, state, params)[1],
        jax.jit(opt.update)(params, state, params)[1])]
  for other in types[1:]:
    assert other == types[0]
  held = [t for t in jax.tree.leaves(types[0]) if t.ndim]
  assert any("@x" in str(t) for t in held), held  # the state lives where the params do


class DropInTest(chex.TestCase):
  """Each check with and without ``jit``, as optax's ``_common_test.py`` runs them."""

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.named_parameters(*((name, name) for name in OPTIMIZERS))
  def test_inside_lax_cond_a_skipped_step_keeps_the_state(self, name):
    opt, params = OPTIMIZERS[name](0.01), make_params()
    state = opt.init(params)

    @self.variant
    def maybe(flag, state):
      return jax.lax.cond(flag, lambda s: opt.update(make_grads(0), s, params),
                          lambda s: (jax.tree.map(jnp.zeros_like, params), s), state)
    taken, taken_state = maybe(True, state)
    direct, direct_state = jax.jit(opt.update)(make_grads(0), state, params)
    chex.assert_trees_all_close((taken, taken_state), (direct, direct_state), rtol=RTOL,
                                atol=1e-7)
    chex.assert_trees_all_equal(maybe(False, state)[1], state)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.named_parameters(*((name, name) for name in OPTIMIZERS))
  def test_multi_steps_steps_once_on_the_mean_gradient(self, name):
    opt, params = OPTIMIZERS[name](0.01), make_params()
    accumulated = optax.MultiSteps(opt, every_k_schedule=2)
    state = accumulated.init(params)
    for i in range(2):
      updates, state = self.variant(accumulated.update)(make_grads(i), state, params)
    mean = jax.tree.map(lambda a, b: (a + b) / 2, make_grads(0), make_grads(1))
    once, _ = jax.jit(opt.update)(mean, opt.init(params), params)
    chex.assert_trees_all_close(updates, once, rtol=RTOL, atol=1e-7)

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.named_parameters(*((name, name) for name in OPTIMIZERS))
  def test_masked_steps_its_leaves_and_passes_the_others_through(self, name):
    opt, params = OPTIMIZERS[name](0.01), make_params()
    masked = optax.masked(opt, {"w": True, "b": False})
    updates, _ = self.variant(masked.update)(make_grads(0), masked.init(params), params)
    alone, _ = jax.jit(opt.update)({"w": make_grads(0)["w"]}, opt.init({"w": params["w"]}),
                                   {"w": params["w"]})
    chex.assert_trees_all_close(updates["w"], alone["w"], rtol=RTOL, atol=1e-7)
    chex.assert_trees_all_equal(updates["b"], make_grads(0)["b"])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.named_parameters(*((name, name) for name in OPTIMIZERS))
  def test_none_leaves_stay_none(self, name):
    # Equinox marks a frozen or absent leaf None in the params and the gradients.
    opt = OPTIMIZERS[name](0.01)
    params = {**make_params(), "frozen": None}
    grads = {**make_grads(0), "frozen": None}
    updates, _ = self.variant(opt.update)(grads, opt.init(params), params)
    assert updates["frozen"] is None
    chex.assert_trees_all_equal_shapes_and_dtypes(
        {k: v for k, v in updates.items() if k != "frozen"}, make_params())


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_an_exported_step_is_the_step(name):
  # Exported over the flat leaves, as a serving system holds them.
  opt, params = OPTIMIZERS[name](0.01), make_params()
  state = opt.init(params)
  args = (make_grads(0), state, params)
  leaves, tree = jax.tree.flatten(args)

  def flat_step(leaves):
    return jax.tree.leaves(opt.update(*jax.tree.unflatten(tree, leaves)))
  exported = export.export(jax.jit(flat_step))(leaves)
  got = export.deserialize(exported.serialize()).call(leaves)
  want = jax.tree.leaves(jax.jit(opt.update)(*args))
  chex.assert_trees_all_close(got, want, rtol=RTOL, atol=1e-7)

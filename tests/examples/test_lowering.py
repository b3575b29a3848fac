"""The trainer's jitted steps lower for GPU and TPU, from this CPU-only machine.

``jax.export`` lowers the train and eval steps of the digits default and of the
six paper configs for ``cuda`` and ``tpu`` from abstract shapes: nothing is
allocated and nothing compiled, so the paper's largest models cost only their
tracing. On the accelerators the models must keep ``lax``'s convolutions, not
the forms that ``examples/cpu_conv.py`` picks on a CPU. To see which were
lowered without reading the module, the test marks every CPU form with a host
callback, which ``jax.export`` refuses to serialize: an accelerator export that
succeeds holds none of them, and a CPU export fails, which shows the mark works.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import configs
from examples import datasets
from examples import train

# Each test lowers a paper-size model's train step for two backends: tens of seconds.
pytestmark = pytest.mark.slow

ACCELERATORS = ("cuda", "tpu")
BATCH = 2  # shapes only matter for the avals; tracing costs the same at any batch


@pytest.fixture
def cpu_forms_marked(monkeypatch):
  """Wraps each CPU branch given to ``lax.platform_dependent`` (as ``cpu_conv``
  calls it) with a host callback; returns the list of branches marked.
  """
  platform_dependent = jax.lax.platform_dependent
  marked = []

  def marking(*operands, cpu=None, **branches):
    if cpu is not None:
      def cpu_with_mark(*args, cpu=cpu):
        jax.debug.callback(lambda: None)  # a host callback: jax.export cannot serialize it
        return cpu(*args)
      marked.append(cpu)
      branches["cpu"] = cpu_with_mark
    return platform_dependent(*operands, **branches)
  monkeypatch.setattr(jax.lax, "platform_dependent", marking)
  return marked


def _dataset(config: configs.Config) -> datasets.Dataset:
  """The config's dataset as the steps see it: the digits themselves (their
  normalization comes from the data), or arrays of the real dataset's shapes.
  """
  if config.dataset == "digits":
    return datasets.load_digits(config.seed)
  side, classes, _, _ = datasets.SYNTHETIC_SHAPES[config.dataset]
  images = np.zeros((BATCH, side, side, 3), np.uint8)
  labels = np.zeros((BATCH,), np.int32)
  return datasets.Dataset(config.dataset, images, labels, images, labels, classes,
                                *datasets.NORMALIZATION[config.dataset])


def _abstract_steps(config: configs.Config):
  """The jitted train and eval steps as the trainer builds them, each with
  abstract arguments of the config's shapes (the state never allocated).
  """
  dataset = _dataset(config)
  built = {}

  def initial_state():
    built["graphdef"], built["opt"], state = train.create_train_state(config, dataset)
    return state
  state = jax.eval_shape(initial_state)
  images = jax.ShapeDtypeStruct((BATCH, *dataset.train_images.shape[1:]),
                                dataset.train_images.dtype)
  labels = jax.ShapeDtypeStruct((BATCH,), jnp.int32)
  key = jax.eval_shape(lambda: jax.random.key(0))
  mask = jax.ShapeDtypeStruct((BATCH,), jnp.float32)
  train_step = jax.jit(train.make_train_step(built["graphdef"], built["opt"], config, dataset),
                       donate_argnums=0)
  eval_step = jax.jit(train.make_eval_step(built["graphdef"], dataset))
  return ((train_step, (state, images, labels, key)),
          (eval_step, (state.params, state.batch_stats, images, labels, mask)))


def _avals(tree) -> list:
  return [(x.shape, x.dtype) for x in jax.tree.leaves(tree)]


def _check_export(step, args, platforms):
  exported = jax.export.export(step, platforms=platforms)(*args)
  assert exported.platforms == platforms
  assert exported.in_tree == jax.tree.structure((args, {}))
  assert _avals(exported.in_avals) == _avals(args)
  outputs = jax.eval_shape(step, *args)
  assert exported.out_tree == jax.tree.structure(outputs)
  assert _avals(exported.out_avals) == _avals(outputs)
  return exported


@pytest.mark.parametrize("name", ["default", *configs.PAPER_CONFIGS])
def test_train_and_eval_steps_lower_for_gpu_and_tpu_with_lax_convolutions(
    name, cpu_forms_marked):
  config = configs.get_config(name).replace(batch_size=BATCH)
  (train_step, train_args), (eval_step, eval_args) = _abstract_steps(config)
  exported = _check_export(train_step, train_args, ACCELERATORS)
  # The new state has the shapes and dtypes of the old, so its buffers can be donated.
  n_state = len(jax.tree.leaves(train_args[0]))
  assert _avals(exported.out_avals[:n_state]) == _avals(train_args[0])
  _check_export(eval_step, eval_args, ACCELERATORS)
  # Every model here has convolutions that the CPU runs in another form.
  assert cpu_forms_marked


@pytest.mark.parametrize("name", ["cifar100_vgg16", "cifar100_convmixer", "cifar100_resnext18"])
def test_bf16_train_step_lowers_for_gpu_and_tpu(name, cpu_forms_marked):
  config = configs.get_config(name).replace(batch_size=BATCH, bf16=True)
  (train_step, train_args), _ = _abstract_steps(config)
  exported = _check_export(train_step, train_args, ACCELERATORS)
  # bfloat16 compute, float32 parameters and optimizer state.
  assert {dtype for _, dtype in _avals(train_args[0].params)} == {jnp.dtype(jnp.float32)}
  _, metrics = jax.tree.unflatten(exported.out_tree, exported.out_avals)
  assert metrics["train_loss"].dtype == jnp.float32


@pytest.mark.parametrize("name", ["cifar100_vgg16", "cifar100_convmixer", "cifar100_resnext18"])
def test_the_mark_catches_cpu_forms_in_a_cpu_lowering(name, cpu_forms_marked):
  # VGG's small-map matmul, ConvMixer's depthwise taps, ResNeXt's per-group split.
  config = configs.get_config(name).replace(batch_size=BATCH)
  _, (eval_step, eval_args) = _abstract_steps(config)
  with pytest.raises(Exception, match="callback"):
    jax.export.export(eval_step, platforms=("cpu",))(*eval_args)
  assert cpu_forms_marked

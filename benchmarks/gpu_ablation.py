"""Where a state's GPU step spends the time above its floor.

    python -m benchmarks.gpu_ablation           # on a GPU: about a minute (H200: 62 s)
    python -m benchmarks.gpu_ablation --quick   # on the CPU: a smoke test of every part

Each step below is donated, run ``STEPS_PER_SAMPLE`` steps in one program (the
device's time: ``benchmarks.step_cost``'s docstring says why) and timed
round-robin with Adam's in the same process (``common.interleaved_medians``); a
ratio is its median over Adam's. Parts:

* ``counts``: XLA's ``cost_analysis`` of each state's step on this backend, flops
  and bytes an element (``benchmarks.floor.counts``): on a GPU, whether the
  compiled step moves more bytes than its floor.
* ``stages``: each state's step on ``step_cost``'s 50M tree, and the same step
  with one stage left out, by swapping one function of the package for the
  length of one compile: the divides (multiplies in their place), the clamps,
  the rounding's hash (a constant word) or the per-leaf ``jit``. The results
  are wrong; the time is what matters. A stage whose removal leaves the time
  where it was is not what holds the step up. Each state's row also gives the
  host's time to dispatch one call of its step (``dispatch_ms``).
* ``streams``: one leaf, and the least work a step over VSGD's five input and
  four output arrays can do (each output a multiply-add of its inputs), with
  the state in float32 and in bfloat16: what XLA's loop over those arrays
  costs, whatever the arithmetic. Adam's step on the same leaf is the base.
* ``pallas``: the package's bfloat16 step rounded to nearest on that leaf, and
  the same rule (``_update_rules.vsgd_as_written``) written as one Pallas
  kernel over blocks of the leaf, whose loads and stores are the kernel's own;
  and ``factored_vsgd``'s step on a matrix of as many elements, by the package
  and as one Pallas kernel that sums each tile's new rates where it computes
  them (``TILES``). The kernels are measurements, not paths of the package:
  the step count and the hyperparameters are fixed in them.

``streams`` and ``pallas`` share one part of the JSON, ``one_leaf``. ``--quick``
runs every part small, Pallas in interpret mode, and writes to the
temporary folder unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time

from benchmarks import common

RESULTS = os.path.join(common.RESULTS, "gpu_ablation.json")
STEPS_PER_SAMPLE = 20
# The stages left out (``_patches``) for each state of the ``stages`` part.
STAGES = {"adam": [()], "adam+bf16_mu": [()], "constant_vsgd": [()],
          "vsgd": [(), ("per_leaf_jit",), ("divides",)],
          "vsgd+bf16_nearest": [(), ("per_leaf_jit",), ("divides",), ("clamps",),
                                ("divides", "clamps", "per_leaf_jit")],
          "vsgd+bf16_state": [(), ("hash",), ("per_leaf_jit",), ("divides", "clamps", "hash")],
          "factored_vsgd": [(), ("per_leaf_jit",)]}


# ---- the stages left out ---------------------------------------------------------

class _JaxWithoutJit:
  """``jax`` as ``_transforms`` sees it, with ``jit`` the identity: each leaf's
  step traced in place, not through the per-leaf ``jit``.
  """

  def __getattr__(self, name):
    import jax
    return getattr(jax, name)

  @staticmethod
  def jit(fn, **_):
    return fn


def _patches() -> dict:
  """Stage -> the ``(module, attribute, stand-in)`` that leave it out."""
  import jax.numpy as jnp

  from vsgd_optax import _rounding
  from vsgd_optax import _transforms
  from vsgd_optax import _update_rules
  finite = _update_rules.finite

  def variances_by_multiplies(b_g, b_ghat, gamma):
    inv_a = 1 / _update_rules.gamma_shape(gamma)
    s_g, s_ghat = finite(b_g * inv_a), finite(b_ghat * inv_a)
    total = finite(s_g + s_ghat)
    return _update_rules.Variances(s_g, s_ghat, total, s_g * (s_ghat * total), s_g * total)

  rates_and_direction = _update_rules._rates_and_direction

  def direction_by_multiply(mu, sigma2, *args, **kwargs):
    new = rates_and_direction(mu, sigma2, *args, **kwargs)
    return new._replace(direction=mu * (jnp.sqrt(jnp.square(mu) + sigma2) + kwargs["eps"]))

  return {
      "per_leaf_jit": [(_transforms, "jax", _JaxWithoutJit())],
      "divides": [(_update_rules, "variances", variances_by_multiplies),
                  (_update_rules, "_rates_and_direction", direction_by_multiply)],
      "clamps": [(_update_rules, "finite", lambda x, dtype=None: x)],
      "hash": [(_rounding, "random_word",
                lambda shape, seed: jnp.broadcast_to(jnp.asarray(seed, jnp.uint32), shape))],
  }


@contextlib.contextmanager
def left_out(stages):
  """The package with ``stages`` left out, for the length of the block."""
  patches = _patches()
  saved = []
  try:
    for stage in stages:
      for module, name, stand_in in patches[stage]:
        saved.append((module, name, getattr(module, name)))
        setattr(module, name, stand_in)
    yield
  finally:
    for module, name, original in reversed(saved):
      setattr(module, name, original)


# ---- timing ------------------------------------------------------------------------

def _donated_runner(fn, args: list, steps: int):
  """Compiles ``steps`` steps of ``fn`` as one program, a ``fori_loop`` (the
  device's time, not the host's dispatch of each call), with all but the last
  of ``args`` (the gradient) donated; returns a callable that runs it and
  waits, and the compiled program.
  """
  import jax

  def steps_in_one_program(*carry_and_grads):
    *carry, grads = carry_and_grads
    return jax.lax.fori_loop(0, steps, lambda _, c: tuple(fn(*c, grads)), tuple(carry))
  compiled = jax.jit(steps_in_one_program, donate_argnums=tuple(range(len(args) - 1))).lower(
      *args).compile()
  carry, grads = list(args[:-1]), args[-1]

  def run():
    carry[:] = compiled(*carry, grads)
    jax.block_until_ready(carry)
  run()  # warm-up, outside the timings
  return run, compiled


def dispatch_ms(fn, args: list, calls: int = 20) -> float:
  """The host's time to dispatch one call of ``fn``'s donated step, without
  waiting for the device: what a step costs where the device is faster than
  the host.
  """
  import jax
  import numpy as np
  step = jax.jit(fn, donate_argnums=tuple(range(len(args) - 1)))
  carry, grads = list(args[:-1]), args[-1]
  carry[:] = step(*carry, grads)  # compiles
  jax.block_until_ready(carry)
  times = []
  for _ in range(calls):
    t0 = time.perf_counter()
    carry[:] = step(*carry, grads)
    times.append(time.perf_counter() - t0)
  jax.block_until_ready(carry)
  return 1e3 * float(np.median(times))


def _ratios(runners: dict, repeats: int, steps: int) -> dict:
  import numpy as np
  samples = common.interleaved_medians(runners, repeats)
  base = np.asarray(samples["adam"]) / steps
  return {name: {"median_ms": 1e3 * float(np.median(np.asarray(s) / steps)),
                 **common.ratio_with_spread(np.asarray(s) / steps, base)}
          for name, s in samples.items()}


# ---- the parts ---------------------------------------------------------------------

def part_counts(side: int) -> dict:
  from benchmarks import floor
  return {name: dict(zip(("flops_per_element", "bytes_per_element"), floor.counts(opt, side),
                         strict=True))
          for name, opt in floor._optimizers().items()}


def part_stages(size: int, repeats: int) -> dict:
  import jax
  import jax.numpy as jnp

  from benchmarks import step_cost
  from examples.optimizers import REGISTRY
  params = step_cost.network_like_params(size)
  grads = jax.tree.map(lambda p: jnp.full_like(p, 1e-3), params)
  runners, temporaries, dispatch = {}, {}, {}
  for state, variants in STAGES.items():
    for stages in variants:
      label = " - ".join((state,) + stages)
      with left_out(stages):
        opt = REGISTRY[state].build(step_cost.LEARNING_RATE)
        step = common.optimizer_step(opt)
        args = [jax.tree.map(jnp.copy, params), opt.init(params), grads]
        runners[label], compiled = _donated_runner(step, args, STEPS_PER_SAMPLE)
        if not stages:
          dispatch[label] = dispatch_ms(step, [
              jax.tree.map(jnp.copy, params), opt.init(params), grads])
      temporaries[label] = getattr(compiled.memory_analysis(), "temp_size_in_bytes", None)
  rows = _ratios(runners, repeats, STEPS_PER_SAMPLE)
  for label, row in rows.items():
    row["temp_bytes"] = temporaries[label]
    if label in dispatch:
      row["dispatch_ms"] = dispatch[label]
  n = sum(x.size for x in jax.tree.leaves(params))
  return {"params": n, "rows": rows}


def _streams_step(state_dtype):
  """The least work over VSGD's arrays: each output a multiply-add of its inputs."""
  import jax.numpy as jnp

  def step(params, mu, b_g, b_ghat, grads):
    f32 = lambda x: x.astype(jnp.float32)
    return (params - 1e-3 * grads, (0.9 * f32(mu) + 0.1 * grads).astype(state_dtype),
            (0.9 * f32(b_g) + grads * grads).astype(state_dtype),
            (0.9 * f32(b_ghat) + grads).astype(state_dtype))
  return step


# The factored kernel's tiles: rows, columns and warps (the first also --quick's).
TILES = ((32, 64, 4), (16, 128, 4), (32, 128, 4), (32, 128, 8), (64, 128, 8), (16, 256, 8),
         (32, 256, 8))
# The Pallas kernel's fixed step count and hyperparameters (the package's defaults).
PALLAS_STEP = 10.0
PALLAS_LEARNING_RATE = 1e-3


def _pallas_step(n: int, block: int, interpret: bool):
  """VSGD's step for one flat leaf with a bfloat16 state rounded to nearest, as
  one Pallas kernel: each block's five inputs loaded once, its four outputs
  stored once, in place.
  """
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl

  from vsgd_optax import _rounding
  from vsgd_optax import _update_rules
  f32, bf16 = jnp.float32, jnp.bfloat16

  def kernel(p_ref, mu_ref, bg_ref, bgh_ref, g_ref, p_out, mu_out, bg_out, bgh_out):
    new = _update_rules.vsgd_as_written(
        g_ref[...], mu_ref[...].astype(f32), bg_ref[...].astype(f32), bgh_ref[...].astype(f32),
        t=PALLAS_STEP, K=_update_rules.VARIANCE_RATIO, gamma=_update_rules.PRIOR_STRENGTH,
        kappa_g=_update_rules.KAPPA_G, kappa_ghat=_update_rules.KAPPA_GHAT,
        eps=_update_rules.EPS)
    p_out[...] = p_ref[...] - PALLAS_LEARNING_RATE * new.direction
    mu_out[...] = _rounding.store(new.mu, bf16, None)
    bg_out[...] = _rounding.store(new.b_g, bf16, None)
    bgh_out[...] = _rounding.store(new.b_ghat, bf16, None)

  spec = pl.BlockSpec((block,), lambda i: (i,))
  call = pl.pallas_call(
      kernel, grid=(n // block,), in_specs=[spec] * 5, out_specs=[spec] * 4,
      out_shape=[jax.ShapeDtypeStruct((n,), f32)] + [jax.ShapeDtypeStruct((n,), bf16)] * 3,
      input_output_aliases={0: 0, 1: 1, 2: 2, 3: 3}, interpret=interpret)
  return lambda p, mu, b_g, b_ghat, g: tuple(call(p, mu, b_g, b_ghat, g))


def _pallas_factored_step(m: int, n: int, block: tuple[int, int, int], interpret: bool):
  """``factored_vsgd``'s step for one float32 ``m x n`` leaf as one Pallas kernel
  over ``block``-sized tiles: each tile rebuilds its rates from the row and
  column means, steps, and writes its params and ``mu`` and the sums of its
  new rates along each axis; the sums of the tiles' sums, ``m / block[0] +
  n / block[1]`` of them per rate, make the new means. No full-size rate is
  ever written: what ``_factored.factor`` asks of XLA in two passes over two
  temporaries. ``block[2]`` is the warps a tile (Triton's ``num_warps``).
  """
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import triton as pallas_triton

  from vsgd_optax import _update_rules
  bm, bn, warps = block
  f32 = jnp.float32
  K, gamma = _update_rules.VARIANCE_RATIO, _update_rules.PRIOR_STRENGTH
  priors = (gamma, K * gamma)

  def kernel(p_ref, mu_ref, row_g_ref, col_g_ref, row_gh_ref, col_gh_ref, g_ref,
             p_out, mu_out, row_g_sum, col_g_sum, row_gh_sum, col_gh_sum):
    rates = [_update_rules.finite(prior + row[...][:, None] * col[...][None, :])
             for prior, row, col in zip(priors, (row_g_ref, row_gh_ref),
                                        (col_g_ref, col_gh_ref), strict=True)]
    g = g_ref[...]
    g = jnp.where(jnp.abs(g) >= jnp.sqrt(jnp.finfo(f32).max) / 2, 0, g)
    new = _update_rules.vsgd_as_written(
        g, mu_ref[...], *rates, t=PALLAS_STEP, K=K, gamma=gamma,
        kappa_g=_update_rules.KAPPA_G, kappa_ghat=_update_rules.KAPPA_GHAT,
        eps=_update_rules.EPS)
    p_out[...] = p_ref[...] - PALLAS_LEARNING_RATE * new.direction
    mu_out[...] = new.mu
    for prior, rate, row_sum, col_sum in ((priors[0], new.b_g, row_g_sum, col_g_sum),
                                          (priors[1], new.b_ghat, row_gh_sum, col_gh_sum)):
      rate = jnp.where(jnp.isnan(rate), prior, rate)
      row_sum[...] = jnp.sum(rate, axis=1)
      col_sum[...] = jnp.sum(rate, axis=0)

  tile = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
  rows, cols = pl.BlockSpec((bm,), lambda i, j: (i,)), pl.BlockSpec((bn,), lambda i, j: (j,))
  row_sums = pl.BlockSpec((None, bm), lambda i, j: (j, i))  # one row of sums a column tile
  col_sums = pl.BlockSpec((None, bn), lambda i, j: (i, j))
  call = pl.pallas_call(
      kernel, grid=(m // bm, n // bn), in_specs=[tile, tile, rows, cols, rows, cols, tile],
      out_specs=[tile, tile, row_sums, col_sums, row_sums, col_sums],
      out_shape=[jax.ShapeDtypeStruct((m, n), f32)] * 2
      + [jax.ShapeDtypeStruct((n // bn, m), f32), jax.ShapeDtypeStruct((m // bm, n), f32)] * 2,
      input_output_aliases={0: 0, 1: 1}, interpret=interpret,
      compiler_params=pallas_triton.CompilerParams(num_warps=warps))

  def step(p, mu, row_g, col_g, row_gh, col_gh, g):
    means = []
    for prior, row, col in ((priors[0], row_g, col_g), (priors[1], row_gh, col_gh)):
      # ``_factored.rank_one``'s excess and its scaled column, O(m + n).
      row, col = jnp.maximum(row - prior, 0), jnp.maximum(col - prior, 0)
      total = jnp.mean(row)
      means += [row[:, 0], col[0] / jnp.where(total > 0, total, 1)]
    p, mu, *sums = call(p, mu, *means, g)
    row_g, col_g, row_gh, col_gh = (
        _update_rules.finite(jnp.sum(s, axis=0) / size).reshape(shape)
        for s, size, shape in zip(sums, (n, m, n, m), ((m, 1), (1, n), (m, 1), (1, n)),
                                  strict=True))
    return p, mu, row_g, col_g, row_gh, col_gh
  return step


def part_one_leaf(n: int, repeats: int, blocks: tuple[int, ...], matrix: tuple[int, int],
                  tiles: tuple[tuple[int, int, int], ...], interpret: bool) -> dict:
  """The ``streams`` and ``pallas`` parts: one flat leaf of ``n`` elements."""
  import jax
  import jax.numpy as jnp
  import optax

  import vsgd_optax
  from vsgd_optax import _update_rules
  from vsgd_optax import experimental
  f32, bf16 = jnp.float32, jnp.bfloat16
  params = {"w": jnp.full((n,), 0.01, f32)}
  grads = {"w": jnp.full((n,), 1e-3, f32)}
  runners, failed, temporaries = {}, {}, {}

  def add_kernel(name, make_step, args, count_temporaries=False):
    # Where the backend cannot lower the rule's clamps, the kernel without them; a
    # backend that lowers neither is named with its error, and the part goes on.
    for stages in ((), ("clamps",)):
      label = " - ".join((name,) + stages)
      try:
        with left_out(stages):
          runners[label], compiled = _donated_runner(make_step(), [jnp.copy(x) for x in args],
                                                     STEPS_PER_SAMPLE)
      except Exception as error:  # noqa: BLE001  (whatever the lowering raises)
        failed[label] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
        continue
      if count_temporaries:
        temporaries[label] = compiled.memory_analysis().temp_size_in_bytes
      return

  def add_optimizer(name, opt):
    args = [jax.tree.map(jnp.copy, params), opt.init(params), grads]
    runners[name], _ = _donated_runner(common.optimizer_step(opt), args, STEPS_PER_SAMPLE)

  add_optimizer("adam", optax.adam(PALLAS_LEARNING_RATE))
  add_optimizer("adam+bf16_mu", optax.adam(PALLAS_LEARNING_RATE, mu_dtype=bf16))
  for dtype in (f32, bf16):
    state = [jnp.full((n,), 1e-3, dtype) for _ in range(3)]
    args = [jnp.copy(params["w"]), *state, grads["w"]]
    name = f"streams, {jnp.dtype(dtype).name} state"
    runners[name], _ = _donated_runner(_streams_step(dtype), args, STEPS_PER_SAMPLE)
  add_optimizer("vsgd", vsgd_optax.vsgd(PALLAS_LEARNING_RATE))
  add_optimizer("vsgd+bf16_nearest", vsgd_optax.vsgd(PALLAS_LEARNING_RATE, state_dtype=bf16,
                                                     state_rounding="nearest"))
  add_optimizer("vsgd+bf16_state", vsgd_optax.vsgd(PALLAS_LEARNING_RATE, state_dtype=bf16))
  # The package's fresh state: mu at 0, the rates at their priors.
  prior_b_g, prior_b_ghat = _update_rules.prior_rates(_update_rules.VARIANCE_RATIO,
                                                      _update_rules.PRIOR_STRENGTH)
  args = [jnp.copy(params["w"]), jnp.zeros((n,), bf16), jnp.full((n,), prior_b_g, bf16),
          jnp.full((n,), prior_b_ghat, bf16), grads["w"]]
  for block in blocks:
    add_kernel(f"pallas, bf16 nearest, block {block}",
               lambda block=block: _pallas_step(n, block, interpret), args)
  # factored_vsgd on a matrix of as many elements, by the package and as one kernel.
  rows, cols = matrix
  matrix_params = {"w": jnp.full(matrix, 0.01, f32)}
  matrix_grads = {"w": jnp.full(matrix, 1e-3, f32)}
  opt = experimental.factored_vsgd(PALLAS_LEARNING_RATE)
  state = opt.init(matrix_params)
  runners["factored_vsgd"], compiled = _donated_runner(
      common.optimizer_step(opt), [jax.tree.map(jnp.copy, matrix_params), state, matrix_grads],
      STEPS_PER_SAMPLE)
  temporaries["factored_vsgd"] = compiled.memory_analysis().temp_size_in_bytes
  fresh = opt.init(matrix_params)[0]  # the runner above donated ``state``
  b_g, b_ghat = fresh.b_g["w"], fresh.b_ghat["w"]
  args = [jnp.copy(matrix_params["w"]), jnp.zeros(matrix, f32), b_g.row, b_g.col, b_ghat.row,
          b_ghat.col, matrix_grads["w"]]
  for tile in tiles:
    add_kernel(f"pallas, factored, tile {tile[0]}x{tile[1]}, {tile[2]} warps",
               lambda tile=tile: _pallas_factored_step(rows, cols, tile, interpret), args,
               count_temporaries=True)
  return {"params": n, "matrix": list(matrix), "rows": _ratios(runners, repeats, STEPS_PER_SAMPLE),
          "temp_bytes": temporaries, "failed": failed}


def measure(quick: bool, emit) -> dict:
  import jax
  on_cpu = jax.default_backend() == "cpu"
  result = {"machine": common.machine(), "quick": quick, "steps_per_sample": STEPS_PER_SAMPLE}
  t0 = time.perf_counter()
  result["counts"] = part_counts(128 if quick else 512)
  emit(result)
  result["stages"] = part_stages(int(2e5) if quick else int(5e7), 2 if quick else 15)
  emit(result)
  result["one_leaf"] = part_one_leaf(
      2 ** 12 if quick else 2 ** 25, 2 if quick else 15, (1024,) if quick else (1024, 4096),
      (128, 128) if quick else (4096, 8192), TILES[:1] if quick else TILES,
      interpret=on_cpu)
  result["elapsed_s"] = time.perf_counter() - t0
  emit(result)
  return result


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_ablation",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="every part small, on any backend")
  parser.add_argument("--out", default=None,
                      help=f"result file (default {RESULTS}; --quick: the temporary folder)")
  args = parser.parse_args(argv)
  out = args.out or (os.path.join(tempfile.gettempdir(), "gpu_ablation_quick.json")
                     if args.quick else RESULTS)
  result = measure(args.quick, lambda r: common.write_json(out, r))
  for part in ("stages", "one_leaf"):
    for label, row in result[part]["rows"].items():
      print(f"{part:>8}  {label:<48} {row['median_ms']:.3f} ms  {row['ratio']:.3f}x Adam "
            f"[{row['ratio_p25']:.2f}, {row['ratio_p75']:.2f}]")
  for label, why in result["one_leaf"]["failed"].items():
    print(f"  {label}: not run ({why})")
  print(f"wrote {out}")
  return result


if __name__ == "__main__":
  main()

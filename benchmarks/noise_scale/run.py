"""Trains VSGD on time-to-result workloads and compares its noise-scale read-out with
a reference at points along the run.

The reference at a point (parameters frozen there) is the two-batch estimator of
McCandlish et al. (2018, Appendix A) in its many-draw form: ``draws`` independent
mini-batch gradients from the workload's own ``loss`` (same sampling, augmentation
and batch statistics as training), accumulated in float64; the per-coordinate
unbiased variance across draws gives ``tr Sigma_B`` and ``|mean|^2 - tr Sigma_B /
draws`` gives an unbiased ``|G|^2``. Its standard error is the delete-one
jackknife over the draws. Where a workload has per-example losses (the MLP), the
exact value over the whole training set is computed too (sampling with
replacement, as the batches are drawn), to check the draw-based reference.

Each run (a workload under a schedule) and the invariance check is one part of
the study, kept in a ledger as it finishes (``benchmarks.study_runner.run_parts``,
``runs/noise_scale.jsonl`` in the results folder), so that an interrupted study
resumes where it stopped; the ledger goes once every file is written.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

import vsgd_optax
from benchmarks import common
from benchmarks import ledger as ledgers
from benchmarks import study_runner
from benchmarks.noise_scale import protocol
from benchmarks.time_to_result import schedules
from benchmarks.time_to_result import workloads
from benchmarks.time_to_result.workloads import digits
from vsgd_optax import experimental

GAMMA, K = protocol.GAMMA, protocol.K  # short, as the estimator's formulas name them


def naive_read_out(state, batch_size):
  """``B * sum(s_ghat) / sum(mu**2)``: the state read as it is, with no corrections."""
  n = vsgd_optax.observation_noise_variance(state, prior_strength=GAMMA)
  trace = batch_size * sum(jnp.sum(x) for x in jax.tree.leaves(n))
  return trace / sum(jnp.sum(jnp.square(m)) for m in jax.tree.leaves(vsgd_mean(state)))


def vsgd_mean(state):
  """``mu``, the mean of the one VSGD state inside an optimizer state (bare or chained).

  Found by the public state types (``vsgd_optax.ScaleByVSGDState`` and
  ``ScaleByConstantVSGDState``), as a user would find it.
  """
  kinds = (vsgd_optax.ScaleByVSGDState, vsgd_optax.ScaleByConstantVSGDState)
  found = [node for node in jax.tree.leaves(state, is_leaf=lambda node: isinstance(node, kinds))
           if isinstance(node, kinds)]
  if len(found) != 1:
    raise ValueError(f"expected one VSGD state in the optimizer state, found {len(found)}")
  return found[0].mu


def draw_reference(many_grads, params, aux, data, key, draws, batch_size):
  """(B_simple, jackknife standard error) from ``draws`` batch gradients, in float64.

  ``many_grads(params, aux, data, keys)`` gives one batch gradient per key (vmapped).
  """
  parts = []
  for keys in np.array_split(np.arange(draws), max(1, draws // 16)):
    sub = jax.random.split(key, draws)[keys]
    g = many_grads(params, aux, data, sub)
    parts.append(np.concatenate([np.asarray(x, np.float64).reshape(len(keys), -1)
                                 for x in jax.tree.leaves(g)], axis=1))
  g = np.concatenate(parts)
  n = g.shape[0]

  def estimate(total, total_sq, m):
    mean = total / m
    var_trace = (total_sq - m * np.sum(mean * mean)) / (m - 1)  # tr Cov of one batch gradient
    signal = np.sum(mean * mean) - var_trace / m  # unbiased |G|^2
    return batch_size * var_trace / signal if signal > 0 else np.inf

  total, total_sq = g.sum(0), float(np.sum(g * g))
  full = estimate(total, total_sq, n)
  leave = np.array([estimate(total - g[i], total_sq - float(g[i] @ g[i]), n - 1)
                    for i in range(n)])
  if not np.all(np.isfinite(leave)):
    return float(full), float("inf")
  se = float(np.sqrt((n - 1) / n * np.sum((leave - leave.mean()) ** 2)))
  return float(full), se


_PER_EXAMPLE: dict = {}


def exact_parts(workload, params, aux):
  """``(tr Sigma, G)`` over the whole training set, in float64 (G flattened)."""
  data = workload.data
  x, y = data["train_x"], data["train_y"]
  if workload.name not in _PER_EXAMPLE:
    _PER_EXAMPLE[workload.name] = jax.jit(
        jax.vmap(jax.grad(workload.example_loss), in_axes=(None, None, 0, 0)))
  g = _PER_EXAMPLE[workload.name](params, aux, _normalized(x), y)
  g = np.concatenate([np.asarray(v, np.float64).reshape(len(y), -1) for v in jax.tree.leaves(g)],
                     axis=1)
  mean = g.mean(0)
  return float(np.sum((g - mean) ** 2) / len(y)), mean


def _normalized(x):
  """The MLP's input transform (what its ``batch`` applies to each draw)."""
  full, _ = digits._splits()
  return digits.normalize(x, full)


def run_one(name: str, schedule: str, *, quick: bool, draws: int, points: int, seed: int = 0):
  w = workloads.build(name, quick)
  steps = w.steps
  lr = schedules.learning_rate(schedule, steps, protocol.PEAK_LR)
  opt = vsgd_optax.vsgd(lr)
  params, aux = w.init(jax.random.key(seed))
  state = opt.init(params)
  many_grads = jax.jit(jax.vmap(lambda p, a, d, k: jax.grad(lambda q: w.loss(q, a, d, k)[0])(p),
                                in_axes=(None, None, None, 0)))

  @jax.jit
  def step(params, aux, state, key):
    (loss, aux), g = jax.value_and_grad(w.loss, has_aux=True)(params, aux, w.data, key)
    updates, state = opt.update(g, state, params)
    return optax.apply_updates(params, updates), aux, state, loss

  read = jax.jit(lambda s: (experimental.gradient_noise_scale(
      s, batch_size=w.batch_size, prior_strength=GAMMA, variance_ratio=K),
      naive_read_out(s, w.batch_size)))
  parts = jax.jit(lambda s: jnp.stack(experimental.gradient_noise_scale_parts(
      s, batch_size=w.batch_size, prior_strength=GAMMA, variance_ratio=K)))
  at = protocol.read_points(steps, points)
  rows = []
  key = jax.random.key(seed + 1)
  window = jnp.zeros(2)  # the parts summed over the steps since the last point
  for t in range(1, steps + 1):
    key, sub = jax.random.split(key)
    params, aux, state, loss = step(params, aux, state, sub)
    window = window + parts(state)
    if t in at:
      est, naive = read(state)
      trace, signal = (float(x) for x in window)
      window = jnp.zeros(2)
      key, ref_key = jax.random.split(key)
      ref, ref_se = draw_reference(many_grads, params, aux, w.data, ref_key, draws, w.batch_size)
      row = {"step": t, "read_out": float(est), "naive": float(naive),
             "averaged": trace / signal if signal > 0 else float("inf"), "reference": ref,
             "reference_se": ref_se, "loss": float(loss)}
      if w.example_loss is not None:
        trace, gradient = exact_parts(w, params, aux)
        signal = float(gradient @ gradient)
        row["exact"] = trace / signal
        row["parts"] = {**state_parts(state, w.batch_size, gradient), "exact_trace": trace,
                        "exact_signal": signal}
      rows.append(row)
  return {"workload": name, "title": w.title, "schedule": schedules.describe(schedule, steps),
          "steps": steps, "batch_size": w.batch_size, "peak_lr": protocol.PEAK_LR, "draws": draws,
          "points": rows}


def invariance(quick: bool, draws: int, seed: int = 0) -> dict:
  """Freezes the MLP at a trained point and feeds fresh states batches of B and 4B.

  Each batch size is fed ``seeds`` independent streams. Per stream, the read-out
  at the last step and the ratio of the parts averaged over the feed's second half
  are compared with the exact value and with the draw reference at the frozen
  parameters. The feed is long because the state forgets its prior slowly (the
  rates average with weights ``t**-kappa``).
  """
  w = workloads.build("mlp", quick)
  sizes = protocol.QUICK["invariance"] if quick else protocol.INVARIANCE
  steps, feed, seeds = sizes["steps"], sizes["feed"], sizes["streams"]
  opt = vsgd_optax.vsgd(protocol.PEAK_LR)
  params, aux = w.init(jax.random.key(seed))
  state = opt.init(params)

  @jax.jit
  def step(params, state, key):
    g = jax.grad(lambda p: w.loss(p, aux, w.data, key)[0])(params)
    updates, state = opt.update(g, state, params)
    return optax.apply_updates(params, updates), state
  key = jax.random.key(seed + 1)
  for _ in range(steps):
    key, sub = jax.random.split(key)
    params, state = step(params, state, sub)
  many_grads = jax.jit(jax.vmap(lambda p, a, d, k: jax.grad(lambda q: w.loss(q, a, d, k)[0])(p),
                                in_axes=(None, None, None, 0)))
  ref, ref_se = draw_reference(many_grads, params, aux, w.data, jax.random.key(seed + 3), draws,
                               w.batch_size)
  trace, gradient = exact_parts(w, params, aux)
  signal = float(gradient @ gradient)
  out = {"workload": "mlp", "frozen_at_step": steps, "feed_steps": feed, "streams": seeds,
         "exact": trace / signal, "exact_trace": trace, "exact_signal": signal,
         "reference": ref, "reference_se": ref_se,
         "draws": draws, "read_out": {}, "read_out_se": {}, "read_outs": {}, "parts": {},
         "averaged": {}}
  per_example = jax.vmap(jax.grad(w.example_loss), in_axes=(None, None, 0, 0))
  xs = _normalized(w.data["train_x"])
  ys = w.data["train_y"]
  frozen = vsgd_optax.vsgd(0.0)
  for batch in (w.batch_size, 4 * w.batch_size):

    @jax.jit
    def feed_all(key, batch=batch):
      def body(s, k):
        idx = jax.random.randint(k, (batch,), 0, ys.shape[0])
        g = jax.tree.map(lambda v: jnp.mean(v, 0), per_example(params, aux, xs[idx], ys[idx]))
        _, s = frozen.update(g, s, params)
        return s, jnp.stack(experimental.gradient_noise_scale_parts(
            s, batch_size=batch, prior_strength=GAMMA, variance_ratio=K))
      s, parts = jax.lax.scan(body, frozen.init(params), jax.random.split(key, feed))
      return s, jnp.mean(parts[feed // 2:], axis=0)
    fed = [feed_all(jax.random.key(seed + 10 + i)) for i in range(seeds)]
    reads = [float(experimental.gradient_noise_scale(s, batch_size=batch, prior_strength=GAMMA,
                                                     variance_ratio=K)) for s, _ in fed]
    out["parts"][str(batch)] = [state_parts(s, batch, gradient) for s, _ in fed]
    out["averaged"][str(batch)] = [
        {"trace": float(m[0]), "squared_norm": float(m[1]),
         "read_out": float(m[0] / m[1]) if m[1] > 0 else float("inf")} for _, m in fed]
    out["read_outs"][str(batch)] = reads
    out["read_out"][str(batch)] = float(np.mean(reads))
    out["read_out_se"][str(batch)] = float(np.std(reads, ddof=1) / np.sqrt(seeds))
  return out


def state_parts(state, batch_size, gradient) -> dict:
  """What the read-out is made of, against the exact values at frozen parameters:
  the read-out's two halves, the state's ``sum(mu**2)``, the least-squares
  slope of ``mu`` on the true gradient (1 for an unbiased mean), and the median
  over coordinates of the weight ``w = sigma2 / n`` of a new gradient in ``mu``.
  """
  mu = np.concatenate([np.asarray(m, np.float64).ravel()
                       for m in jax.tree.leaves(vsgd_mean(state))])
  n = vsgd_optax.observation_noise_variance(state, prior_strength=GAMMA)
  sigma2 = vsgd_optax.posterior_variance(state, prior_strength=GAMMA)
  weight = np.concatenate([np.ravel(np.asarray(s2, np.float64) / np.asarray(v, np.float64))
                           for s2, v in zip(jax.tree.leaves(sigma2), jax.tree.leaves(n),
                                            strict=True)])
  trace, squared_norm = experimental.gradient_noise_scale_parts(
      state, batch_size=batch_size, prior_strength=GAMMA, variance_ratio=K)
  return {"noise_trace": float(trace), "squared_norm": float(squared_norm),
          "mean_square": float(mu @ mu),
          "slope": float(mu @ gradient / (gradient @ gradient)),
          "weight_median": float(np.median(weight))}


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--quick", action="store_true",
                      help="the tiny MLP only, few steps and draws (smoke test)")
  parser.add_argument("--out", default=protocol.RESULTS)
  parser.add_argument("--workloads", default=None, help="comma-separated; default: all three "
                      "(the MLP alone with --quick)")
  parser.add_argument("--draws", type=int, default=None)
  parser.add_argument("--points", type=int, default=None)
  parser.add_argument("--no-invariance", action="store_true")
  args = parser.parse_args(argv)
  draws = args.draws or (protocol.QUICK["draws"] if args.quick else protocol.DRAWS)
  points = args.points or (protocol.QUICK["points"] if args.quick else protocol.POINTS)
  names = ("mlp" if args.quick else ",".join(protocol.WORKLOADS)) if args.workloads is None \
      else args.workloads
  ledger = os.path.join(args.out, ledgers.FOLDER, "noise_scale.jsonl")
  settings = {"quick": args.quick, "draws": draws, "points": points,
              "source": ledgers.digest_of(protocol.SOURCES)}
  for name in filter(None, names.split(",")):  # --workloads "": the invariance check alone
    parts = study_runner.run_parts(ledger, {
        f"{name} {schedule}": functools.partial(run_one, name, schedule, quick=args.quick,
                                                draws=draws, points=points)
        for schedule in protocol.SCHEDULES}, settings)
    runs = list(parts.values())
    payload = {"machine": runs[0]["machine"], "quick": args.quick,
               "runs": [part["output"] for part in runs],
               "seconds": sum(part["seconds"] for part in runs)}
    common.write_json(os.path.join(args.out, f"{name}.json"), payload)
    print(f"{name}: {payload['seconds']:.0f} s", flush=True)
  if not args.no_invariance:
    (part,) = study_runner.run_parts(ledger, {"invariance": functools.partial(
        invariance, args.quick, draws=2 * draws)}, settings).values()
    inv = {**part["output"], "machine": part["machine"]}
    common.write_json(os.path.join(args.out, "invariance.json"), inv)
    print("invariance", inv, flush=True)
  with contextlib.suppress(FileNotFoundError):
    os.remove(ledger)  # every file is written: a later run measures afresh
  with contextlib.suppress(OSError):
    os.rmdir(os.path.dirname(ledger))  # only where no other ledger is left in it
  print(f"wrote {args.out}; its figures: python -m benchmarks.reporting --plots")

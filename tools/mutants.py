"""Mutation testing of the core: every small mistake in ``vsgd_optax/`` must fail a test.

    python -m tools.mutants            # every mutant; prints survivors, exits 1 if any
    python -m tools.mutants --list     # the mutants, one line each
    python -m tools.mutants 3 17       # only these (numbers from --list)
    python -m tools.mutants --jobs 1   # one at a time (default: as many as the cores)
    python -m tools.mutants --stale    # only the modules whose stamp no longer holds
    python -m tools.mutants --stale --stamp   # and stamp each module all of whose mutants died
    python -m tools.mutants --unless-stamped  # as --stale, and nothing if every stamp holds

``bash .ci/mutants`` runs ``--stale --stamp`` after the stamps' own tests: run it
whenever the core or its tests change (it is not part of the landing gate, .ci/run).

Each mutant changes one token (or one short expression) of the package: an
update rule in either form, the state plumbing, the stochastic rounding, the
per-example path, the diagnostics, the experimental optimizers. It is applied
to a scratch copy of the repository, and ``tests/core`` runs there, stopping at
the first failure; a mutant that no test fails has survived. A mutant whose
text is no longer in its file is an error, not a pass, so the list cannot rot
silently as the code changes: edit the list with the code.

Stamps are by module (``.ci/mutants-killed.json``, committed). A module's stamp
records, from a run that killed every one of its mutants: git's hash of the
module, a hash of its mutants, and the hashes of the test files that killed
them. It holds while all three are as they were (and the tests' shared support
code is, which every stamp records); a change to a module, to its mutants or
to a test file that killed one of them makes that module stale, and
``--stale`` and ``--unless-stamped`` rerun the stale modules' mutants alone. A
one-module edit then reruns that module's mutants, not the whole list; where
no stamp fits (the support code changed, or there is no record), every mutant
runs. A paths with uncommitted changes counts as changed.

What a module's stamp does not see: a change elsewhere that would let one of
its mutants through (a caller that stops calling it). The killing tests run
the public API end to end, and a change to them reruns the module; a
full run (``python -m tools.mutants --stamp``) re-checks everything.

The tests run in an order that finds most failures early (the references of
the rules and of the rounding first); a killed mutant costs one start of
pytest and the tests up to its first failure, a survivor the whole folder.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The folders the core tests need; the scratch copy holds only these.
COPIED = ("vsgd_optax", "tests", "pyproject.toml")
# Test files first in the order that kills fastest; the rest of tests/core follows.
FIRST = ("tests/core/test_donation_and_forms.py", "tests/core/test_factored.py",
         "tests/core/test_stochastic_rounding.py", "tests/core/test_overflow_and_streams.py",
         "tests/core/test_trajectories.py", "tests/core/test_per_example.py",
         "tests/core/test_low_precision.py", "tests/core/test_diagnostics.py",
         "tests/core/test_noise_scale.py")


@dataclasses.dataclass(frozen=True)
class Mutant:
  """One mistake: ``before`` replaced by ``after`` in ``vsgd_optax/<file>``."""
  file: str  # under vsgd_optax/
  before: str  # must occur exactly once in the file
  after: str
  why: str  # the mistake it stands for
  first: tuple[str, ...] = ()  # test files to run before FIRST: those that kill it fastest


RULES = "_update_rules.py"
PLUMBING = "_transforms.py"
ROUNDING = "_rounding.py"
FACTORED = "_factored.py"
FACTORED_RULE = "experimental/_factored_vsgd.py"  # which leaves factored_vsgd factors
MUON = "_vsgd_muon.py"
OWN_TEST = ("tests/core/test_vsgd_muon.py",)  # VSGD-Muon's own tests first

MUTANTS = (
    # The shared pieces of VSGD's rule.
    Mutant(RULES, "SHAPE_OFFSET = 5e-5", "SHAPE_OFFSET = 5e-4", "the authors' shape offset"),
    Mutant(RULES, "return gamma + 0.5 + SHAPE_OFFSET", "return gamma + 1.0 + SHAPE_OFFSET",
           "the Gamma shape"),
    Mutant(RULES, "return gamma * scale, K * gamma * scale", "return gamma * scale, gamma * scale",
           "the prior of b_ghat without K"),
    Mutant(RULES, "s_g, s_ghat = clamp_to_finite(b_g * inv_a), clamp_to_finite(b_ghat * inv_a)",
           "s_g, s_ghat = clamp_to_finite(b_g * inv_a), clamp_to_finite(b_ghat / inv_a)",
           "a rate read as a variance the wrong way"),
    Mutant(RULES, "total = clamp_to_finite(s_g + s_ghat)",
           "total = clamp_to_finite(s_g - s_ghat)", "the posterior variance"),
    # One posterior mean, Eqs. (mug) and (mugc), serves both forms and Constant VSGD.
    Mutant(RULES, "return mu_prev + w * clamp_to_finite(g - mu_prev)",
           "return mu_prev + w * clamp_to_finite(g + mu_prev)", "the posterior mean"),
    Mutant(RULES, "mu = posterior_mean(g, mu_prev, w)  # Eq. (mugc)",
           "mu = posterior_mean(mu_prev, g, w)  # Eq. (mugc)", "Constant VSGD's mean"),
    Mutant(RULES, "b_g_new = gamma + 0.5 * (sigma2 + sq_residual_g)",
           "b_g_new = gamma + 0.5 * (sigma2 + sq_residual_ghat)", "b_g fed b_ghat's residual"),
    Mutant(RULES, "b_ghat_new = K * gamma + 0.5", "b_ghat_new = gamma + 0.5",
           "b_ghat's prior floor without K"),
    Mutant(RULES, "rho_g, rho_ghat = t ** -kappa_g, t ** -kappa_ghat",
           "rho_g, rho_ghat = t ** -kappa_ghat, t ** -kappa_g", "the two decay exponents swapped"),
    Mutant(RULES, "b_g = clamp_to_finite((1 - rho_g) * b_g + rho_g * b_g_new)",
           "b_g = clamp_to_finite((1 - rho_g) * b_g + rho_ghat * b_g_new)",
           "b_g averaged with b_ghat's weight"),
    Mutant(RULES, "b_ghat = clamp_to_finite((1 - rho_ghat) * b_ghat + rho_ghat * b_ghat_new)",
           "b_ghat = clamp_to_finite((1 - rho_ghat) * b_ghat + rho_ghat * b_ghat)",
           "b_ghat never updated"),
    Mutant(RULES, "direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2) + eps)  # Eq. (vsgdt)",
           "direction = mu / (jnp.sqrt(jnp.square(mu) + sigma2 + eps))  # Eq. (vsgdt)",
           "eps inside the square root"),
    # VSGD in place (the CPU's form).
    Mutant(RULES, "w = sigma2 / v.s_ghat                      # = s_g / (s_g + s_ghat)",
           "w = sigma2 / v.s_g                      # = s_g / (s_g + s_ghat)",
           "in place: the weight on the observation"),
    Mutant(RULES, "sq_residual_g = jnp.square(residual * clamp_to_finite(v.s_g / sigma2 - 1))",
           "sq_residual_g = jnp.square(residual * clamp_to_finite(v.s_g / sigma2 + 1))",
           "in place: b_g's residual"),
    Mutant(RULES, "sq_residual_ghat = jnp.square(residual)    # (mu_t - g_t)**2",
           "sq_residual_ghat = jnp.square(residual * 0.5)    # (mu_t - g_t)**2",
           "in place: b_ghat's residual"),
    Mutant(RULES, "w_obs, w_prior = 1 - sigma2 / v.s_g, 1 - sigma2 / v.s_ghat",
           "w_obs, w_prior = 1 - sigma2 / v.s_g, 1 - sigma2 / v.s_g",
           "in place: the prior's weight on the per-example variance"),
    Mutant(RULES, "w_obs, w_prior = 1 - sigma2 / v.s_g, 1 - sigma2 / v.s_ghat",
           "w_obs, w_prior = 1 - sigma2 / v.s_ghat, 1 - sigma2 / v.s_ghat",
           "in place: the observation's weight on the per-example variance"),
    Mutant(RULES, 'VSGD_FORMS = {"cpu": vsgd_in_place, "default": vsgd_as_written}',
           'VSGD_FORMS = {"cpu": vsgd_as_written, "default": vsgd_in_place}',
           "each compiler handed the other's form", ("tests/core/test_donation_and_forms.py",)),
    # VSGD as written (every backend but the CPU).
    Mutant(RULES, "w = s_g / total\n", "w = s_ghat / total\n",
           "as written: the weight on the observation"),
    Mutant(RULES, "sq_residual_g = jnp.square(mu - mu_prev)", "sq_residual_g = jnp.square(mu - g)",
           "as written: b_g's residual"),
    Mutant(RULES, "sq_residual_ghat = jnp.square(mu - g)",
           "sq_residual_ghat = jnp.square(mu_prev - g)", "as written: b_ghat's residual"),
    # The weights on the per-example variance, w_obs and w_prior, as the call passes them.
    Mutant(RULES, "v.s_ghat / v.total, b_g, b_ghat", "v.w, b_g, b_ghat",
           "as written: the prior's weight on the per-example variance (survived in 0.1.0)"),
    Mutant(RULES, "sq_residual_g, sq_residual_ghat, v.w,\n",
           "sq_residual_g, sq_residual_ghat, 1 - v.w,\n",
           "as written: the observation's weight on the per-example variance"),
    # The per-example terms, shared by both forms.
    Mutant(RULES, "sq_residual_g = sq_residual_g + jnp.square(w_obs) * grad_variance",
           "sq_residual_g = sq_residual_g + w_obs * grad_variance",
           "per-example: w instead of w**2"),
    Mutant(RULES, "sq_residual_ghat = sq_residual_ghat + jnp.square(w_prior) * grad_variance",
           "sq_residual_ghat = sq_residual_ghat + jnp.square(w_prior) * 0",
           "per-example: b_ghat ignores it"),
    # Constant VSGD.
    Mutant(RULES, "return gamma + 1\n", "return gamma\n", "Constant VSGD's prior rate"),
    Mutant(RULES, "w = 1 / (K + 1)\n  s_ghat", "w = 1 / K\n  s_ghat", "Constant VSGD's weight"),
    Mutant(RULES, "s_g + s_ghat, w * b_ghat / (gamma + 1), w)",
           "s_g + s_ghat, w * b_ghat / (gamma + 0.5), w)", "Constant VSGD's variance"),
    Mutant(RULES, "s_g = s_ghat / K\n", "s_g = s_ghat * K\n",
           "Constant VSGD's systematic variance read-out"),
    Mutant(RULES, "sq_residual_g = jnp.square(residual / K)",
           "sq_residual_g = jnp.square(residual * K)",
           "Constant VSGD's residual of the mean's move"),
    Mutant(RULES, "sq_residual_ghat = sq_residual_ghat + jnp.square(1 - w) * grad_variance",
           "sq_residual_ghat = sq_residual_ghat + jnp.square(w) * grad_variance",
           "Constant VSGD: the per-example variance's weight"),
    Mutant(RULES, "sq_residual_g = sq_residual_g + jnp.square(w) * grad_variance\n  b_new",
           "sq_residual_g = sq_residual_g + jnp.square(1 - w) * grad_variance\n  b_new",
           "Constant VSGD: the per-example variance's weight in the mean's move"),
    Mutant(RULES, "+ 0.5 * K * (sigma2 + sq_residual_g)", "+ 0.5 * (sigma2 + sq_residual_g)",
           "Constant VSGD: the systematic term without K"),
    Mutant(RULES, "rho = t ** -kappa                   # SVI step size",
           "rho = (t + 1) ** -kappa                   # SVI step size",
           "Constant VSGD: the step count off by one"),
    # The plumbing: step count, initial state, dtypes, hyperparameters, variances.
    # VSGD (any rates) and Constant VSGD each count their steps.
    Mutant(PLUMBING, "count = optax.safe_increment(state.count)\n    direction, (mu, b_g, b_ghat)",
           "count = state.count\n    direction, (mu, b_g, b_ghat)",
           "the step count off by one (VSGD)"),
    Mutant(PLUMBING, "count = optax.safe_increment(state.count)\n    direction, (mu, b_ghat)",
           "count = state.count\n    direction, (mu, b_ghat)",
           "the step count off by one (Constant VSGD)"),
    Mutant(PLUMBING, "b_g=init_rates(params, dtype, axes, priors[1])",
           "b_g=init_rates(params, dtype, axes, priors[2])", "b_g starts at b_ghat's prior"),
    Mutant(PLUMBING, "jnp.where(t == 1, value_of(rate.dtype), rate)",
           "jnp.where(t == 2, value_of(rate.dtype), rate)",
           "the hyperparameters' prior taken at the second step, not the first",
           ("tests/core/test_optax_integration.py",)),
    Mutant(PLUMBING, "first_step_priors(k, gamma, priors=priors), settings.state_rounding",
           "(), settings.state_rounding", "a prior set after init ignored by the first step",
           ("tests/core/test_optax_integration.py",)),
    Mutant("_aliases.py", "    if decays:\n      _validation.check_decay_has_params", "    if False:\n      _validation.check_decay_has_params",
           "an update without params met by optax's error, which names no cause",
           ("tests/core/test_trees_and_params.py",)),
    Mutant(PLUMBING, "\"kappa_g\": self.kappa_g,\n            \"kappa_ghat\": self.kappa_ghat,",
           "\"kappa_g\": self.kappa_ghat,\n            \"kappa_ghat\": self.kappa_g,",
           "the exponents passed swapped"),
    Mutant("_aliases.py", "eps: jax.typing.ArrayLike = 1e-8,\n    weight_decay: jax.typing.ArrayLike = 0.0,\n"
           "    weight_decay_mask: Any | Callable[[Any], Any] | None = None,\n"
           "    state_dtype: jax.typing.DTypeLike | None = None,\n"
           "    state_rounding: _rounding.Rounding = \"stochastic\",\n"
           "    seed: int | jax.Array = 0,\n) -> optax.GradientTransformationExtraArgs:\n  r\"\"\"Variational",
           "eps: jax.typing.ArrayLike = 1e-8,\n    weight_decay: jax.typing.ArrayLike = 0.0,\n"
           "    weight_decay_mask: Any | Callable[[Any], Any] | None = None,\n"
           "    state_dtype: jax.typing.DTypeLike | None = None,\n"
           "    state_rounding: _rounding.Rounding = \"nearest\",\n"
           "    seed: int | jax.Array = 0,\n) -> optax.GradientTransformationExtraArgs:\n  r\"\"\"Variational",
           "a bfloat16 state rounded to nearest by default, which freezes it"),
    Mutant("_validation.py", "check_positive(\"variance_ratio\", variance_ratio)",
           "check_non_negative(\"variance_ratio\", variance_ratio)",
           "a variance ratio of 0 accepted", ("tests/core/test_validation.py",)),
    Mutant("_aliases.py", "prior_strength: jax.typing.ArrayLike = 1e-8,\n    kappa: jax.typing.ArrayLike = 0.9,",
           "prior_strength: jax.typing.ArrayLike = 1e-8,\n    kappa: jax.typing.ArrayLike = 0.81,",
           "Constant VSGD's kappa defaulting to another's", ("tests/core/test_validation.py",)),
    Mutant(PLUMBING, "return np.dtype(jnp.promote_types(leaf_dtype, jnp.float32))",
           "return np.dtype(leaf_dtype)", "the default state in the params' low precision"),
    Mutant(PLUMBING, "return np.dtype(jnp.result_type(jnp.float32, *(x.dtype for x in leaves)))",
           "return np.dtype(jnp.result_type(*(x.dtype for x in leaves)))",
           "computing in the params' low precision"),
    Mutant(PLUMBING, "return ((new.direction.astype(g.dtype),)", "return ((new.direction,)",
           "the update not in the gradient's dtype"),
    Mutant(PLUMBING, "\"grad_variance\": None if v is None else cast(v)}", "\"grad_variance\": None}",
           "the per-example variance dropped"),
    Mutant(PLUMBING, "lambda u, v: u if _validation.is_empty(u) else v",
           "lambda u, v: u if _validation.is_empty(u) else u",
           "the gradient passed as its own variance"),
    # The stochastic rounding.
    Mutant(ROUNDING, "carried = raw + (bits >> 16)", "carried = raw + (bits >> 17)",
           "biased rounding: up half as often as it should"),
    Mutant(ROUNDING, "kept = jnp.where(x != x, raw | jnp.uint32(_QUIET_NAN), carried)",
           "kept = carried", "NaN carried into an infinity or a zero"),
    Mutant(ROUNDING, "kept = jnp.where(x != x, raw | jnp.uint32(_QUIET_NAN), carried)",
           "kept = jnp.where(x != x, raw, carried)",
           "a NaN whose payload is in the lower half kept as an infinity"),
    Mutant(ROUNDING, "stride = math.prod(shape[axis + 1:]) * _GOLDEN % _WORD",
           "stride = _GOLDEN", "elements that share bits (the one-word key)"),
    Mutant(ROUNDING, "return _mix(_keyed_index(shape, stream_seed))",
           "return _mix(_keyed_index(shape, stream_seed + 1))", "the one-word key off the reference"),
    Mutant(ROUNDING, "return rounding == \"stochastic\" and dtype.itemsize",
           "return rounding != \"stochastic\" and dtype.itemsize", "the option inverted"),
    Mutant(ROUNDING, "x = x ^ (x >> 13)", "x = x ^ (x >> 12)", "the hash's constants"),
    Mutant(ROUNDING, "step = _mix(jnp.asarray(count).astype(jnp.uint32))",
           "step = _mix(jnp.asarray(0).astype(jnp.uint32))", "the same bits at every step"),
    Mutant(ROUNDING, "low = low + coordinate * jnp.uint32(math.prod(shape[axis + 1:]) % _WORD)",
           "low = low + coordinate", "elements that share bits"),
    Mutant(ROUNDING, "if math.prod(shape) <= _WORD:\n    low", "if math.prod(shape) <= _WORD ** 2:\n    low",
           "the index's upper word dropped: k and k + 2**32 share bits"),
    Mutant(ROUNDING, "high = high + term_high + (total < low).astype(jnp.uint32)",
           "high = high + term_high", "the carry into the upper word lost"),
    Mutant(ROUNDING, "middle = (p00 >> 16) + (p01 & jnp.uint32(0xFFFF))",
           "middle = (p00 >> 15) + (p01 & jnp.uint32(0xFFFF))", "a wrong wide product"),
    Mutant(ROUNDING, "key = stream_seed if high is None else stream_seed + _mix(high)",
           "key = stream_seed", "the upper word left out of the hash"),
    Mutant(ROUNDING, "key = stream_seed if high is None else stream_seed + _mix(high)",
           "key = stream_seed if high is None else stream_seed ^ _mix(high)",
           "the upper word combined by xor, not as the reference adds it"),
    Mutant(ROUNDING, "return (word ^ (word << 16), word, word << 16)[slot]",
           "return (word, word, word << 16)[slot]", "mu and b_g share their bits"),
    Mutant(ROUNDING, "return (word ^ (word << 16), word, word << 16)[slot]",
           "return (word ^ (word << 16), word, word)[slot]", "b_g and b_ghat share their bits"),
    Mutant(ROUNDING, "else jnp.asarray(seed).astype(jnp.uint32))",
           "else jnp.asarray(seed).astype(jnp.uint16))",
           "an array seed cut to 16 bits: 70,000 rounds as 4,464"),
    Mutant(ROUNDING, "salt = _mix(seed_word + jnp.uint32(_GOLDEN))",
           "salt = _mix(jnp.uint32(_GOLDEN))", "the seed ignored"),
    Mutant(ROUNDING, "seed_of = lambda key: _mix(step + (key ^ salt))",
           "seed_of = lambda key: _mix(step + salt)", "every stream the same bits"),
    Mutant(ROUNDING, "return trips + 1, tuple(fn(value + trips.astype(jnp.uint32)) for value in values)",
           "return trips + 1, tuple(fn(trips.astype(jnp.uint32)) for value in values)",
           "on the CPU, every stream the same bits"),
    Mutant(ROUNDING, 'digest = hashlib.blake2b(f"{path}#{shape}".encode(), digest_size=4)',
           'digest = hashlib.blake2b(f"#{shape}".encode(), digest_size=4)',
           "leaves (and multi_transform groups) share bits"),
    Mutant(ROUNDING, "if np.dtype(dtype).itemsize < np.dtype(x.dtype).itemsize:\n    x = _update",
           "if False:\n    x = _update", "float32's largest value stored as a bfloat16 inf"),
    Mutant(ROUNDING, "if math.prod(shape) <= _WORD:\n    return _mix",
           "if math.prod(shape) <= _WORD ** 2:\n    return _mix",
           "an array past 2**32 elements keyed by its lower index word alone"),
    Mutant(ROUNDING, "streams[shape] = (stream, used + 1)", "streams[shape] = (stream, used)",
           "the state's arrays share bits"),
    Mutant(ROUNDING, "seeds = stream_seeds(count, seed, keys)",
           "seeds = stream_seeds(count, 0, keys)", "the optimizer's seed not passed on"),
    Mutant(ROUNDING, "opened.append(range(first, len(keys)))",
           "opened.append(range(0, len(keys)))", "every leaf rounded with the first leaf's bits"),
    # Saturation: a huge finite gradient leaves everything finite.
    Mutant(RULES, "return mu_prev + w * clamp_to_finite(g - mu_prev)",
           "return mu_prev + w * (g - mu_prev)", "an infinite gradient into mu"),
    Mutant(RULES, "b_ghat = clamp_to_finite((1 - rho_ghat) * b_ghat + rho_ghat * b_ghat_new)",
           "b_ghat = ((1 - rho_ghat) * b_ghat + rho_ghat * b_ghat_new)",
           "an overflowing square reaches b_ghat as inf"),
    Mutant(RULES, "sq_residual_g = jnp.square(residual * clamp_to_finite(v.s_g / sigma2 - 1))",
           "sq_residual_g = jnp.square(residual * (v.s_g / sigma2 - 1))",
           "in place: an infinite ratio times a residual of 0 is NaN"),
    Mutant(RULES, "s_g, s_ghat = clamp_to_finite(b_g * inv_a), clamp_to_finite(b_ghat * inv_a)",
           "s_g, s_ghat = b_g * inv_a, b_ghat * inv_a", "a saturated rate read as an infinite variance"),
    Mutant(RULES, "total = clamp_to_finite(s_g + s_ghat)", "total = s_g + s_ghat",
           "after an infinity the element's mean stays near 1e35 for good"),
    Mutant(RULES, "b_ghat = clamp_to_finite((1 - rho) * b_ghat + rho * b_new)",
           "b_ghat = ((1 - rho) * b_ghat + rho * b_new)", "Constant VSGD's overflowing square"),
    Mutant(FACTORED, "FactoredRate(**rate) if isinstance(rate, Mapping) else rate", "rate",
           "a state handed back as mappings (nnx.Optimizer) not read as factored rates"),
    Mutant(FACTORED, "full = jnp.where(jnp.isnan(full), kept, full)", "pass",
           "one NaN element through its row's and column's means"),
    Mutant(FACTORED, "full = jnp.where(jnp.isnan(full), kept, full)",
           "full = jnp.where(jnp.isnan(full), jnp.min(kept), full)",
           "a NaN element's means filled with another value than its own rate (before: the prior)"),
    Mutant(FACTORED, "new = form(jnp.where(too_large, 0, g), mu_prev,", "new = form(g, mu_prev,",
           "a spike's saturated rates in the means: every rebuilt rate pulled to the prior"),
    Mutant(FACTORED, "too_large = jnp.abs(g) >= jnp.sqrt(jnp.finfo(g.dtype).max) / 2",
           "too_large = jnp.abs(g) >= jnp.finfo(g.dtype).max",
           "only an infinity skipped: a spike of 1e20 swamps the means"),
    Mutant(FACTORED, "return _update_rules.clamp_to_finite(jnp.mean(full, axis=over, keepdims=True))",
           "return jnp.mean(full, axis=over, keepdims=True)", "an overflowing mean"),
    Mutant(PLUMBING, "if any(map(_factored.is_factored, old)):",
           "if _factored.is_factored(old[0]):", "factored rates handed to the full rates' form"),
    Mutant("_compat.py", '{"FactoredVSGDState": _transforms', '{"FactoredState": _transforms',
           "0.1.0's pickle of a factored state no longer loads",
           ("tests/core/test_golden_trajectory.py",)),
    Mutant(PLUMBING, "_check_factoring(state.mu, rates[0], axes, optimizer)", "pass",
           "a state factored at another threshold stepped as it is"),
    # The factored rates (vsgd_muon's default; experimental.factored_vsgd).
    Mutant(FACTORED, "return _update_rules.clamp_to_finite(prior + row * (col / jnp.where(total > 0, "
           "total, 1)))", "return _update_rules.clamp_to_finite(prior + row * col)",
           "the rank-one rate not divided by the mean"),
    Mutant(FACTORED, "total = jnp.mean(row, axis=rows, keepdims=True)",
           "total = jnp.sum(row, axis=rows, keepdims=True)", "the sum for the mean"),
    Mutant(FACTORED, "row, col = jnp.maximum(rate.row - prior, 0), jnp.maximum(rate.col - prior, 0)",
           "row, col = rate.row, rate.col", "the prior factored with the residuals"),
    Mutant(FACTORED, "rebuilt_ghat = rank_one(b_g, gamma, axes[0]), rank_one(b_ghat, K * gamma, axes[0])",
           "rebuilt_ghat = rank_one(b_g, gamma, axes[0]), rank_one(b_ghat, gamma, axes[0])",
           "b_ghat's prior constant without K"),
    Mutant(FACTORED, "return FactoredRate(mean(cols), mean(rows))",
           "return FactoredRate(mean(rows), mean(cols))", "rows and columns swapped"),
    Mutant(FACTORED_RULE, "first, second = sorted(np.argsort(shape, kind=\"stable\")[-2:])",
           "first, second = sorted(np.argsort(shape, kind=\"stable\")[:2])",
           "the two smallest axes factored"),
    Mutant(FACTORED_RULE, "if min(shape[first], shape[second]) < min_dim_size_to_factor:",
           "if max(shape[first], shape[second]) < min_dim_size_to_factor:",
           "a leaf factored where one of its axes is short"),
    Mutant(PLUMBING, "dtype = np.dtype(jnp.promote_types(state_dtype_of(leaf.dtype, state_dtype), "
           "jnp.float32))", "dtype = np.dtype(state_dtype_of(leaf.dtype, state_dtype))",
           "the means kept in a bfloat16 state's dtype"),
    # VSGD's mean inside Muon (vsgd_muon).
    Mutant(MUON, "mean = mu.astype(jnp.result_type(", "mean = gradient.astype(jnp.result_type(",
           "orthogonalizing the gradient, not VSGD's mean", OWN_TEST),
    Mutant(MUON, "optax.chain(scaling, _scale_by_shape(dims_of, consistent_rms),",
           "optax.chain(scaling,", "Muon's shape scale dropped", OWN_TEST),
    Mutant(MUON, "return update * float(np.sqrt(max(1.0, fan_out / fan_in)))",
           "return update * float(np.sqrt(max(1.0, fan_in / fan_out)))",
           "the shape scale's fans swapped", OWN_TEST),
    Mutant(MUON, "beta=0.0, eps=ns_eps", "beta=0.0, eps=eps", "ns_eps silently ignored",
           OWN_TEST),
    Mutant(MUON, "                       weight_decay=adam_weight_decay,\n",
           "                       weight_decay=0.0,\n",
           "AdamW's decay silently dropped on the leaves that are not matrices", OWN_TEST),
    Mutant(MUON, "  others = optax.adamw(adam_learning_rate,", "  others = optax.adamw(learning_rate,",
           "the other leaves stepped at learning_rate, not adam_learning_rate", OWN_TEST),
    Mutant(MUON, "ADAM_SHARE = 10.0 ** -0.5", "ADAM_SHARE = 0.1",
           "the AdamW part's default back at the contest's tenth, not the ladder's share",
           OWN_TEST),
    Mutant(MUON, "mask=(_at_least_two_axes if adam_weight_decay_mask is None",
           "mask=(None if adam_weight_decay_mask is None",
           "the vectors decayed by default (the recipe decays the 2-D leaves alone)", OWN_TEST),
    Mutant(MUON, "MuonDimensionNumbers((0,), (1,)) if len(shape) == 2 and 0 not in shape",
           "MuonDimensionNumbers((0,), (1,)) if len(shape) == 1 and 0 not in shape",
           "vectors orthogonalized, matrices not", OWN_TEST),
    Mutant(MUON, "- set(reduction) - set(output))) + reduction + output",
           "- set(reduction) - set(output))) + output + reduction",
           "a leaf's dimension numbers read transposed", OWN_TEST),
    Mutant(MUON, "functools.partial(_factored_axes, dims_of), min_dim_size_to_factor,",
           "functools.partial(_factored_axes, dims_of), None,",
           "min_dim_size_to_factor ignored: full rates kept", OWN_TEST),
    Mutant(FACTORED, "return rank_one(b_g, gamma, rows), rank_one(b_ghat, K * gamma, rows)",
           "return rank_one(b_g, K * gamma, rows), rank_one(b_ghat, gamma, rows)",
           "the factored variants' variances rebuilt on each other's prior", OWN_TEST),
    # What issue 61's audit found untested, and the fixes it asked for.
    Mutant(MUON, ".transpose(np.argsort(order))", ".transpose(order)",
           "a batched leaf put back with the forward permutation", OWN_TEST),
    Mutant(MUON, "axes.append(tuple(a % ndim for a in axis))", "axes.append(axis)",
           "negative axes taken as they are", OWN_TEST),
    Mutant(MUON, "if mean.ndim != 2 or dims != ((0,), (1,)):", "if dims != ((0,), (1,)):",
           "a 3-D leaf with dimension numbers (0, 1) handed to optax as a matrix", OWN_TEST),
    Mutant(PLUMBING, "return keys[:-1] if keys[-1:] == (\".value\",) else keys", "return keys",
           "NNX's .value kept in a leaf's path: a Variable's leaf and its array differ", OWN_TEST),
    Mutant(PLUMBING, "o if value_of is None else at_prior_on_first_step(t, o, value_of)",
           "o if value_of is None or _factored.is_factored(o)\n"
           "                  else at_prior_on_first_step(t, o, value_of)",
           "the factored first step's prior ignored where injected", OWN_TEST),
    Mutant(PLUMBING, "first_step_priors(k, gamma, priors=priors)",
           "first_step_priors(gamma, priors=priors)",
           "an injected variance ratio missed where the prior strength is static",
           ("tests/core/test_optax_integration.py",)),
    Mutant("_validation.py", "if coeffs.ndim == 2 and steps is not None and not 1 <= coeffs.shape[0] <= steps:",
           "if coeffs.ndim == 2 and steps is not None and not 1 <= coeffs.shape[0] < steps:",
           "as many Newton-Schulz triples as steps refused", OWN_TEST),
    Mutant("_validation.py", "      return None\n  if isinstance(value, (bool, np.bool_))",
           "      raise\n  if isinstance(value, (bool, np.bool_))",
           "an injected ns_steps refused under jit, as optax's muon takes it", OWN_TEST),
    Mutant(FACTORED, "too_large = jnp.abs(g) >= jnp.sqrt(jnp.finfo(g.dtype).max) / 2",
           "too_large = jnp.abs(g) >= jnp.sqrt(jnp.finfo(g.dtype).max) / 4",
           "the spike bound halved: a large gradient under it read as missing",
           ("tests/core/test_overflow_and_streams.py",)),
    Mutant(FACTORED, "new = form(jnp.where(too_large, 0, g), mu_prev,",
           "new = form(jnp.where(too_large, 1, g), mu_prev,",
           "a spike read as another value than a missing gradient",
           ("tests/core/test_overflow_and_streams.py",)),
    Mutant(PLUMBING, "    zeros = init_moments(leaf, dtype)\n",
           "    zeros = jnp.zeros(np.shape(leaf), dtype)\n",
           "a factored state's means placed anywhere, not where their leaf is",
           ("tests/core/test_common.py",)),
    Mutant(MUON, "min(fans(path, dims[0]), fans(path, dims[1])) >= threshold",
           "min(shapes[path]) >= threshold",
           "a matrix factored by its axes' lengths, not its fan-in and fan-out", OWN_TEST),
    # VSGD-Muon's Nesterov look-ahead (nesterov=True, the ladder's addendum 6).
    Mutant(MUON, "return _update_rules.posterior_mean(gradient.astype(dtype), mu.astype(dtype), w)",
           "return _update_rules.posterior_mean(gradient.astype(dtype), mu.astype(dtype), 1 - w)",
           "the look-ahead weighted by beta1, not by the mean's weight on a gradient", OWN_TEST),
    Mutant(MUON, "_diagnostics.rates_of_every_element(state, {}, prior_strength, variance_ratio)",
           "_diagnostics.rates_of_every_element(state, {}, prior_strength, 1.0)",
           "a factored b_ghat rebuilt for the look-ahead on the prior without K", OWN_TEST),
    Mutant(MUON, "means = state.mu if look_ahead is None else look_ahead(updates, state)",
           "means = state.mu", "nesterov=True silently ignored", OWN_TEST),
    Mutant("_validation.py", "  if not isinstance(value, (bool, np.bool_)):",
           "  if False:", "a momentum given for nesterov read as True", OWN_TEST),
    # The per-example moments.
    Mutant("_per_example.py", "variance = jnp.mean(jnp.square(leaf - mean), axis=0)",
           "variance = jnp.var(leaf, axis=0, ddof=1)", "the unbiased variance, not the biased"),
    # The diagnostics and the noise scale.
    Mutant("_diagnostics.py", "return jax.tree.map(lambda bg, bgh: bgh / (bg + bgh)",
           "return jax.tree.map(lambda bg, bgh: bg / (bg + bgh)", "effective beta1"),
    Mutant("_diagnostics.py", "_variance(opt_state, \"sigma2\", prior_strength",
           "_variance(opt_state, \"s_g\", prior_strength", "the posterior variance read-out"),
    Mutant("_diagnostics.py", "_variance(opt_state, \"s_ghat\", prior_strength",
           "_variance(opt_state, \"total\", prior_strength", "the observation-noise read-out"),
    Mutant("_diagnostics.py", "_variance(opt_state, \"s_g\", prior_strength",
           "_variance(opt_state, \"w\", prior_strength", "the systematic-noise read-out"),
    Mutant("_diagnostics.py", "_factored.element_rates(rate_g, rate_ghat, np.shape(mu), k,",
           "_factored.element_rates(rate_g, rate_ghat, np.shape(mu), 1.0,",
           "a factored b_ghat read back on the prior without K"),
    Mutant("_diagnostics.py",
           "  b_g, b_ghat = rates_of_every_element(state, hyper, prior_strength, variance_ratio)\n",
           "  b_g, b_ghat = state.b_g, state.b_ghat\n",
           "effective beta1 of a factored state read off its means, not its elements"),
    Mutant("experimental/_noise_scale.py", "  if _factored.has_factored_rates(state):\n",
           "  if False:\n", "a noise scale read off factored rates, which hold no residuals"),
    Mutant("experimental/_noise_scale.py", "return batch_size * jnp.sum(n), ",
           "return jnp.sum(n), ", "the trace of one example's covariance"),
    Mutant("experimental/_noise_scale.py", "return excess * (2 - w) / 2", "return excess",
           "the mean's shrinkage of the residuals not undone"),
    Mutant("experimental/_noise_scale.py", "var_mu = w * n * -jnp.expm1(2 * log_keep) / (2 - w)",
           "var_mu = 0 * n", "the mean's sampling variance kept in |G|^2"),
    Mutant("experimental/_noise_scale.py", "return excess / (2 / (2 - w) + batch_size - 1)",
           "return excess / (2 / (2 - w) + batch_size)", "per-example: the batch's spread"),
)


def _copy_repository(scratch: str) -> None:
  for name in COPIED:
    source = os.path.join(REPOSITORY, name)
    target = os.path.join(scratch, name)
    if os.path.isdir(source):
      shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
      shutil.copy2(source, target)


def _apply(scratch: str, mutant: Mutant) -> None:
  path = os.path.join(scratch, "vsgd_optax", mutant.file)
  with open(path) as f:
    text = f.read()
  found = text.count(mutant.before)
  if found != 1:
    raise SystemExit(f"mutant {mutant.why!r}: its text occurs {found} times in "
                     f"vsgd_optax/{mutant.file}, not once; update tools/mutants.py with the code")
  with open(path, "w") as f:
    f.write(text.replace(mutant.before, mutant.after))


def _test_order(scratch: str, first: tuple[str, ...] = ()) -> list[str]:
  rest = sorted(os.path.join("tests/core", name)
                for name in os.listdir(os.path.join(scratch, "tests/core"))
                if name.startswith("test_") and name.endswith(".py"))
  return list(dict.fromkeys([*first, *FIRST, *rest]))


def _pytest(scratch: str, first: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
  # The scratch copy first on the path, so that its vsgd_optax, not an installed
  # one, is imported; checked before the tests run.
  # One compilation cache for every copy (tests/conftest.py's, the repository's):
  # its key is the program, so a mutant's changed program compiles afresh and the
  # rest is read back.
  env = dict(os.environ, PYTHONPATH=scratch, PYTHONDONTWRITEBYTECODE="1",
             JAX_COMPILATION_CACHE_DIR=os.path.join(REPOSITORY, ".pytest_cache", "jax"))
  check = (f"import vsgd_optax, sys; sys.exit(0 if vsgd_optax.__file__.startswith({scratch!r}) "
           "else 'the scratch copy is not the vsgd_optax imported')")
  subprocess.run([sys.executable, "-c", check], cwd=scratch, env=env, check=True)
  return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                         *_test_order(scratch, first)], cwd=scratch, env=env, capture_output=True,
                        text=True)


def _check_unmutated() -> float:
  """The tests must pass on the copy as it is, or every mutant would look killed."""
  with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
    _copy_repository(scratch)
    t0 = time.perf_counter()
    result = _pytest(scratch)
  if result.returncode != 0:
    print(result.stdout[-3000:] + result.stderr[-3000:])
    raise SystemExit("tests/core fails without any mutant; fix that first")
  return time.perf_counter() - t0


def _try(number: int) -> tuple[int, str, str | None]:
  """Runs mutant ``number`` in a scratch copy: its line of the report, and the test
  file that killed it (None where it survived).
  """
  mutant = MUTANTS[number - 1]
  with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
    _copy_repository(scratch)
    _apply(scratch, mutant)
    t0 = time.perf_counter()
    result = _pytest(scratch, mutant.first)
  seconds = time.perf_counter() - t0
  if result.returncode == 1:
    failed = next((line for line in result.stdout.splitlines()
                   if line.startswith("FAILED")), "FAILED tests/core (unnamed)")
    killer = failed.split()[1].split("::")[0]
    return (number, f"killed   {number:3d} {mutant.file}: {mutant.why} ({seconds:.0f} s; {failed})",
            killer)
  if result.returncode == 0:
    return number, f"SURVIVED {number:3d} {mutant.file}: {mutant.why} ({seconds:.0f} s)", None
  # An error of collection or of pytest itself is not a kill.
  print(result.stdout[-3000:] + result.stderr[-3000:])
  raise SystemExit(f"mutant {number} ({mutant.why}): pytest exited {result.returncode}, "
                   "which is not a test failure; fix the mutant or the tests")


# What every mutant's outcome depends on besides its module and its killing tests:
# the tests' shared code and configuration. A change to them makes every stamp stale.
SUPPORT = ("tests/support", "tests/conftest.py", "tests/core/__init__.py", "pyproject.toml")
STAMP = os.path.join(REPOSITORY, ".ci", "mutants-killed.json")


def _git(*args) -> str:
  return subprocess.run(["git", "-C", REPOSITORY, *args], capture_output=True, text=True,
                        check=True).stdout.strip()


def tree_hash(path: str) -> str | None:
  """Git's hash of ``path`` at HEAD; None where it has uncommitted changes (a hash
  of HEAD would not be what runs) or is not in HEAD.
  """
  if _git("status", "--porcelain", "--", path):
    return None
  try:
    return _git("rev-parse", f"HEAD:{path}")
  except subprocess.CalledProcessError:
    return None


def modules() -> list[str]:
  """The files the mutants change, in the list's order."""
  return list(dict.fromkeys(m.file for m in MUTANTS))


def module_digest(module: str) -> str:
  """A hash of one module's mutants (each one's change and tests)."""
  return hashlib.sha256(repr([m for m in MUTANTS if m.file == module]).encode()).hexdigest()[:16]


def read_stamps() -> dict:
  if not os.path.exists(STAMP):
    return {}
  with open(STAMP) as f:
    record = json.load(f)
  return record if "modules" in record else {}  # an older, whole-list record fits nothing


def stale_modules(record: dict | None = None) -> list[str]:
  """The modules whose stamp does not hold for the committed tree (all of them
  where the support code differs from the record's).
  """
  record = read_stamps() if record is None else record
  support = {path: tree_hash(path) for path in SUPPORT}
  if not record or record.get("support") != support or None in support.values():
    return modules()
  stale = []
  for module in modules():
    stamp = record["modules"].get(module)
    fresh = (stamp is not None and stamp["source"] == tree_hash(f"vsgd_optax/{module}")
             and stamp["mutants"] == module_digest(module)
             and all(tree_hash(test) == digest for test, digest in stamp["tests"].items()))
    if not fresh:
      stale.append(module)
  return stale


def write_stamps(killers: dict[int, str]) -> list[str]:
  """Stamps each module all of whose mutants ``killers`` (mutant number -> the test
  file that killed it) holds, keeping the other modules' stamps; returns the
  modules stamped. Nothing is stamped from a tree with uncommitted changes.
  """
  record = read_stamps()
  support = {path: tree_hash(path) for path in SUPPORT}
  if None in support.values():
    return []
  if record.get("support") != support:
    record = {}  # the old stamps were of other support code
  stamped = []
  for module in modules():
    numbers = [n for n, m in enumerate(MUTANTS, start=1) if m.file == module]
    source = tree_hash(f"vsgd_optax/{module}")
    tests = {killers[n] for n in numbers if n in killers}
    if len(tests) == 0 or any(n not in killers for n in numbers) or source is None:
      continue
    hashes = {test: tree_hash(test) for test in sorted(tests)}
    if None in hashes.values():
      continue
    record.setdefault("modules", {})[module] = {
        "commit": _git("rev-parse", "--short", "HEAD"), "source": source,
        "mutants": module_digest(module), "tests": hashes}
    stamped.append(module)
  record["support"] = support
  record.setdefault("modules", {})
  with open(STAMP, "w") as f:
    json.dump(record, f, indent=1, sort_keys=True)
    f.write("\n")
  return stamped


def run(numbers: list[int], jobs: int = 1, checked: bool = False) -> dict[int, str | None]:
  """Runs the mutants ``numbers`` (1-based), ``jobs`` at a time (each is its own
  pytest process in its own scratch copy); returns each one's killing test
  file, None for a survivor. ``checked``: tests/core has just passed on this
  checkout, so the unmutated run is not repeated.
  """
  outcome: dict[int, str | None] = {}
  t_all = time.perf_counter()
  if not checked:
    print(f"tests/core passes unmutated ({_check_unmutated():.0f} s)", flush=True)
  with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    for number, line, killer in pool.map(_try, numbers):
      print(line, flush=True)
      outcome[number] = killer
  survivors = [n for n, killer in outcome.items() if killer is None]
  print(f"{len(numbers) - len(survivors)} of {len(numbers)} mutants killed, "
        f"{len(survivors)} survived, in {time.perf_counter() - t_all:.0f} s")
  return outcome


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(prog="python -m tools.mutants",
                                   description=__doc__.splitlines()[0])
  parser.add_argument("numbers", nargs="*", type=int,
                      help=f"mutants to run, 1 to {len(MUTANTS)} (default: all)")
  parser.add_argument("--list", action="store_true", help="list the mutants and exit")
  parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                      help="mutants run at once, each in its own process (default: the cores)")
  parser.add_argument("--core-tests-passed", action="store_true",
                      help="tests/core has just passed on this checkout: skip the unmutated "
                           "run that guards against every mutant looking killed")
  parser.add_argument("--stale", action="store_true",
                      help="only the mutants of the modules whose stamp no longer holds")
  parser.add_argument("--stamp", action="store_true",
                      help=f"stamp each module all of whose mutants this run killed, in "
                           f"{os.path.relpath(STAMP, REPOSITORY)} (commit it)")
  parser.add_argument("--unless-stamped", action="store_true",
                      help="as --stale, and nothing where every module's stamp holds")
  args = parser.parse_args(argv)
  if args.list:
    for number, mutant in enumerate(MUTANTS, start=1):
      print(f"{number:3d} {mutant.file}: {mutant.why}")
    return
  bad = [n for n in args.numbers if not 1 <= n <= len(MUTANTS)]
  if bad:
    parser.error(f"mutant numbers run from 1 to {len(MUTANTS)}; got {bad}")
  if args.jobs < 1:
    parser.error(f"--jobs must be at least 1, got {args.jobs}")
  numbers = args.numbers or list(range(1, len(MUTANTS) + 1))
  if (args.stale or args.unless_stamped) and not args.numbers:
    stale = stale_modules()
    fresh = [m for m in modules() if m not in stale]
    print(f"mutants: {len(fresh)} of {len(modules())} modules stamped as they are"
          + (f" ({', '.join(fresh)})" if fresh else "")
          + (f"; rerunning {', '.join(stale)}" if stale else "; none to run"), flush=True)
    numbers = [n for n, m in enumerate(MUTANTS, start=1) if m.file in stale]
    if not numbers:
      return
  outcome = run(numbers, args.jobs, args.core_tests_passed)
  if args.stamp:
    stamped = write_stamps({n: killer for n, killer in outcome.items() if killer is not None})
    print(f"stamped {', '.join(stamped) or 'nothing'} in "
          f"{os.path.relpath(STAMP, REPOSITORY)}: commit it")
  survivors = [n for n, killer in outcome.items() if killer is None]
  if survivors:
    print("survivors: " + ", ".join(map(str, survivors)) + " (python -m tools.mutants --list)")
    sys.exit(1)


if __name__ == "__main__":
  main()

"""Float64 NumPy references written literally from the update equations (no rewriting),
so that agreement with the package checks its algebra as well as its code.
"""

import hashlib

import ml_dtypes
import numpy as np


def vsgd_shape(gamma):
  """The Gamma shape of VSGD: the paper's ``gamma + 0.5`` plus the authors' ``5e-5``."""
  return gamma + 0.5 + 5e-5


def vsgd_prior_variances(K, gamma):
  """``(s_g, s_ghat)`` of VSGD's first step: the authors' ``gamma / (a - 0.5)``
  and ``K gamma / (a - 0.5)``, whatever the step count.
  """
  # a - 0.5 written as gamma + 5e-5: the subtraction would cancel digits.
  return gamma / (gamma + 5e-5), K * gamma / (gamma + 5e-5)


def vsgd_prior_rates(K, gamma):
  """The rates ``(b_g, b_ghat)`` whose ``b / a`` are the first step's variances."""
  return tuple(vsgd_shape(gamma) * s for s in vsgd_prior_variances(K, gamma))


def constant_vsgd_prior(gamma):
  """Constant VSGD's ``(b_0, a_0)`` (paper Algorithm 2): both ``gamma``."""
  return gamma, gamma


def _fmix32(x):
  """MurmurHash3's 32-bit finalizer, in NumPy's wrapping uint32 arithmetic."""
  x = np.asarray(x, np.uint32)
  x = x ^ (x >> np.uint32(16))
  x = x * np.uint32(0x85EBCA6B)
  x = x ^ (x >> np.uint32(13))
  x = x * np.uint32(0xC2B2AE35)
  return x ^ (x >> np.uint32(16))


def rounding_stream_key(path, shape):
  """A stream's key, from the leaf's path (``jax.tree_util.keystr``: ``"['w']"``,
  or ``""`` for a bare array) and the shape of the state arrays it serves.
  """
  digest = hashlib.blake2b(f"{path}#{tuple(shape)}".encode(), digest_size=4).digest()
  return int.from_bytes(digest, "little")


def rounding_stream_seed(count, path, shape, seed=0):
  """The seed of the stream at ``path`` for state arrays of ``shape``, at step ``count``."""
  golden = np.uint32(0x9E3779B9)
  with np.errstate(over="ignore"):
    salt = _fmix32(np.uint32(seed) + golden)
    key = np.uint32(rounding_stream_key(path, shape)) ^ salt
    return _fmix32(_fmix32(np.uint32(count)) + key)


def rounding_bits_at(flat_indices, stream_seed, slot):
  """The bits of the elements at ``flat_indices`` (exact Python integers, any
  size) of an array that ``stream_seed`` serves: one finalizer round of
  the index's lower word times the golden ratio plus the stream's seed, the
  seed keyed by the mix of the upper word where the index has one (past
  2**32). Slot 0 (mu) takes the word's halves xored, slot 1 (b_g) its upper
  half, slot 2 (b_ghat) its lower half, each in the upper 16 bits.
  """
  golden = np.uint32(0x9E3779B9)
  low = np.array([int(k) % 2 ** 32 for k in flat_indices], np.uint32)
  high = np.array([int(k) // 2 ** 32 for k in flat_indices], np.uint32)
  with np.errstate(over="ignore"):
    key = np.where(high == 0, stream_seed, np.uint32(stream_seed) + _fmix32(high))
    word = _fmix32(low * golden + key.astype(np.uint32))
    upper, lower = word >> np.uint32(16), word & np.uint32(0xFFFF)
    return ((upper ^ lower) << np.uint32(16), upper << np.uint32(16),
            lower << np.uint32(16))[slot]


def rounding_bits(shape, count, path="", slot=0, seed=0):
  """The random bits of each element that the package's stochastic rounding
  draws at step ``count`` for the ``slot``-th state array of its shape in the
  leaf at ``path`` (mu 0, b_g 1, b_ghat 2 for VSGD; mu 0, b_ghat 1 for Constant
  VSGD), in an optimizer built with ``seed``; in the upper 16 bits, which the
  rounding reads (``rounding_bits_at``).
  """
  size = int(np.prod(shape))
  stream_seed = rounding_stream_seed(count, path, shape, seed)
  return rounding_bits_at(range(size), stream_seed, slot).reshape(shape)


def stochastic_bfloat16(x, bits):
  """``x`` (float64) rounded to float32, then to the bfloat16 below or above it
  in magnitude: above where the 16 bits ``bits >> 16`` plus the float32's lower
  16 bits carry into its upper half. Returned as float64.
  """
  x32 = np.asarray(x, np.float32)
  raw = x32.view(np.uint32).astype(np.uint64)
  low = raw & 0xFFFF
  up = low + (np.asarray(bits, np.uint64) >> 16) >= 0x10000
  upper = (raw >> 16) + up  # the upper half, plus the carry
  truncated = (upper.astype(np.uint32) << np.uint32(16)).view(np.float32)
  out = np.where(np.isnan(x32), x32, truncated).astype(np.float64)
  return np.asarray(np.asarray(out, ml_dtypes.bfloat16), np.float64)  # exact: checks it is one


def vsgd_steps(grads, K=30.0, gamma=1e-8, kappa_g=0.81, kappa_ghat=0.9, eps=1e-8,
               grad_variances=None, start=None, shape=None, state_dtype=None,
               stochastic=False, path="", seed=0):
  """Runs VSGD's state on a list of gradients; returns per-step (direction, mu, b_g, b_ghat).

  ``direction`` is ``u_t = mu_t / (sqrt(mu_t**2 + sigma2_t) + eps)``, computed
  before the state is stored.

  Args:
    grads: the gradients, one array a step.
    K: the variance ratio.
    gamma: the prior strength.
    kappa_g: the decay exponent of ``b_g``'s step size.
    kappa_ghat: the decay exponent of ``b_ghat``'s step size.
    eps: added to the direction's denominator.
    grad_variances: per step, the variance of per-example gradients; ``None`` for none.
    start: ``(steps_taken, mu, b_g, b_ghat)`` to go on from a stored state;
      ``steps_taken`` may be 0, and the next step then takes its variances from
      the given rates (an optimizer's initial state) instead of the priors.
      ``None`` starts afresh from the priors.
    shape: the Gamma shape ``a``; ``None`` is ``vsgd_shape(gamma)``.
    state_dtype: if given, each step's stored ``mu``, ``b_g`` and ``b_ghat`` are
      rounded to this dtype (and back to float64), as an optimizer that keeps
      its state at that precision stores it; the step itself is float64.
    stochastic: with ``state_dtype`` bfloat16, round stochastically with the
      package's bits (``rounding_bits``) instead of to nearest.
    path: the leaf's path in the optimizer's tree (``jax.tree_util.keystr``),
      which picks its rounding bits.
    seed: the optimizer's seed, which also picks them.
  """
  a = vsgd_shape(gamma) if shape is None else shape
  if start is None:
    steps_taken, mu, b_g, b_ghat = 0, 0.0, None, None
  else:
    steps_taken, *moments = start
    mu, b_g, b_ghat = (np.array(m, np.float64) for m in moments)
  def store(x, t, which):
    if state_dtype is None:
      return x
    if stochastic:
      return stochastic_bfloat16(x, rounding_bits(x.shape, t, path, which, seed))
    return np.asarray(np.asarray(x, state_dtype), np.float64)
  history = []
  for i, g in enumerate(grads):
    t = steps_taken + i + 1
    g = np.asarray(g, np.float64)
    v = 0.0 if grad_variances is None else np.asarray(grad_variances[i], np.float64)
    if b_g is None:  # a fresh start: the priors, and rates that the first step replaces
      s_g, s_gh = (np.full_like(g, s) for s in vsgd_prior_variances(K, gamma))
      mu, b_g, b_ghat = (np.zeros_like(g) for _ in range(3))
    else:
      s_g, s_gh = b_g / a, b_ghat / a
    mu_prev = mu
    mu = (s_g * g + s_gh * mu_prev) / (s_g + s_gh)
    sigma2 = s_g * s_gh / (s_g + s_gh)
    w = s_g / (s_g + s_gh)
    bp_g = gamma + 0.5 * (sigma2 + (mu - mu_prev) ** 2 + w ** 2 * v)
    bp_gh = K * gamma + 0.5 * (sigma2 + (mu - g) ** 2 + (1 - w) ** 2 * v)
    rho_g, rho_gh = t ** -kappa_g, t ** -kappa_ghat
    b_g = store((1 - rho_g) * b_g + rho_g * bp_g, t, 1)
    b_ghat = store((1 - rho_gh) * b_ghat + rho_gh * bp_gh, t, 2)
    u = mu / (np.sqrt(mu ** 2 + sigma2) + eps)
    mu = store(mu, t, 0)
    history.append((u, mu.copy(), b_g.copy(), b_ghat.copy()))
  return history


def vsgd_reference(grads, params0, lr, K=30.0, gamma=1e-8, kappa_g=0.81,
                   kappa_ghat=0.9, eps=1e-8, weight_decay=0.0,
                   grad_variances=None, start=None):
  """Runs VSGD on a list of gradients; returns per-step (params, mu, b_g, b_ghat).
  ``lr(step)`` is the 0-based step's rate; ``start`` is ``(steps_taken, mu, b_g, b_ghat)``.
  """
  if start is not None:
    assert start[0] >= 1, "the first step uses the priors, not a state"
  theta = np.array(params0, np.float64)
  history = []
  steps = vsgd_steps(grads, K=K, gamma=gamma, kappa_g=kappa_g, kappa_ghat=kappa_ghat, eps=eps,
                     grad_variances=grad_variances, start=start)
  for i, (u, mu, b_g, b_ghat) in enumerate(steps):
    theta = theta - lr(i) * (u + weight_decay * theta)
    history.append((theta.copy(), mu, b_g, b_ghat))
  return history


def constant_vsgd_reference(grads, params0, lr, K=30.0, gamma=1e-8, kappa=0.9,
                            eps=1e-8, weight_decay=0.0, grad_variances=None,
                            start=None):
  """Runs Constant VSGD (paper Algorithm 2); returns per-step (params, mu, b).
  ``start`` is ``(steps_taken, mu, b)``, past the first step (shape ``gamma + 1``).
  """
  theta = np.array(params0, np.float64)
  if start is None:
    b_0, a = constant_vsgd_prior(gamma)
    steps_taken, mu, b = 0, np.zeros_like(theta), np.full_like(theta, b_0)
  else:
    steps_taken, mu, b = start
    assert steps_taken >= 1, "the first step uses a_0 = b_0 = gamma, not a state"
    mu, b, a = np.array(mu, np.float64), np.array(b, np.float64), gamma + 1
  history = []
  for i, g in enumerate(grads):
    t = steps_taken + i + 1
    g = np.asarray(g, np.float64)
    v = 0.0 if grad_variances is None else np.asarray(grad_variances[i], np.float64)
    mu_prev = mu
    mu = K / (K + 1) * mu_prev + g / (K + 1)
    sigma2 = b / ((K + 1) * a)
    w = 1 / (K + 1)
    a = gamma + 1
    rho = t ** -kappa
    bracket = (gamma + 0.5 * (sigma2 + (mu - g) ** 2 + (1 - w) ** 2 * v)
               + 0.5 * K * (sigma2 + (mu - mu_prev) ** 2 + w ** 2 * v))
    b = (1 - rho) * b + rho * bracket
    u = mu / (np.sqrt(mu ** 2 + sigma2) + eps)
    theta = theta - lr(i) * (u + weight_decay * theta)
    history.append((theta.copy(), mu.copy(), b.copy()))
  return history


def vsgd_per_example_naive(per_example_grads, params0, lr, K=30.0, gamma=1e-8,
                           kappa_g=0.81, kappa_ghat=0.9, eps=1e-8):
  """VSGD treating each example separately, looping over them as the appendix writes."""
  theta = np.array(params0, np.float64)
  mu = np.zeros_like(theta)
  b_g = np.zeros_like(theta)
  b_ghat = np.zeros_like(theta)
  a = vsgd_shape(gamma)
  history = []
  for i, batch in enumerate(per_example_grads):
    t = i + 1
    if t == 1:
      s_g, s_gh = (np.full_like(theta, s) for s in vsgd_prior_variances(K, gamma))
    else:
      s_g, s_gh = b_g / a, b_ghat / a
    sigma2 = s_g * s_gh / (s_g + s_gh)
    mus, bp_g, bp_gh = [], 0.0, 0.0
    for g_i in batch:
      g_i = np.asarray(g_i, np.float64)
      mu_i = mu * s_gh / (s_gh + s_g) + g_i * s_g / (s_gh + s_g)
      bp_g = bp_g + gamma + 0.5 * (sigma2 + (mu_i - mu) ** 2)
      bp_gh = bp_gh + K * gamma + 0.5 * (sigma2 + (mu_i - g_i) ** 2)
      mus.append(mu_i)
    m = len(batch)
    bp_g, bp_gh = bp_g / m, bp_gh / m
    mu = sum(mus) / m
    rho_g, rho_gh = t ** -kappa_g, t ** -kappa_ghat
    b_g = (1 - rho_g) * b_g + rho_g * bp_g
    b_ghat = (1 - rho_gh) * b_ghat + rho_gh * bp_gh
    u = mu / (np.sqrt(mu ** 2 + sigma2) + eps)
    theta = theta - lr(i) * u
    history.append((theta.copy(), mu.copy(), b_g.copy(), b_ghat.copy()))
  return history


def constant_vsgd_per_example_naive(per_example_grads, params0, lr, K=30.0,
                                    gamma=1e-8, kappa=0.9, eps=1e-8):
  """Constant VSGD with each example as its own observation, looped."""
  theta = np.array(params0, np.float64)
  mu = np.zeros_like(theta)
  b_0, a = constant_vsgd_prior(gamma)
  b = np.full_like(theta, b_0)
  history = []
  for i, batch in enumerate(per_example_grads):
    t = i + 1
    sigma2 = b / ((K + 1) * a)
    mus, bracket = [], 0.0
    for g_i in batch:
      g_i = np.asarray(g_i, np.float64)
      mu_i = K / (K + 1) * mu + g_i / (K + 1)
      bracket = bracket + (gamma + 0.5 * (sigma2 + (mu_i - g_i) ** 2)
                           + 0.5 * K * (sigma2 + (mu_i - mu) ** 2))
      mus.append(mu_i)
    m = len(batch)
    mu = sum(mus) / m
    a = gamma + 1
    rho = t ** -kappa
    b = (1 - rho) * b + rho * bracket / m
    u = mu / (np.sqrt(mu ** 2 + sigma2) + eps)
    theta = theta - lr(i) * u
    history.append((theta.copy(), mu.copy(), b.copy()))
  return history


def gradient_stream(seed, steps, shape):
  """Noisy gradients around a drifting signal, with scales from 1e-3 to 1e2:
  the inputs the references and the package are both run on.
  """
  rng = np.random.default_rng(seed)
  scale = 10.0 ** rng.uniform(-3, 2, size=shape)
  signal = np.cumsum(rng.normal(size=(steps,) + tuple(shape)), axis=0) * 0.05
  return [(signal[i] + rng.normal(size=shape)) * scale for i in range(steps)]


def rebuilt_rate(row, col, c, row_axis):
  """Each element's rate from a factored rate's means: the prior constant ``c``
  plus the rank-one matrix whose row and column means are those of the excess.
  """
  total = np.mean(row - c, axis=row_axis, keepdims=True)
  return c + (row - c) * (col - c) / total


def factored_vsgd_steps(grads, row_axis, col_axis, K=30.0, gamma=1e-8, kappa_g=0.81,
                        kappa_ghat=0.9, eps=1e-8):
  """Runs factored VSGD on one array; returns per-step (direction, mu, rates), with
  ``rates`` ``{"b_g": (row, col), "b_ghat": (row, col)}`` (means over ``col_axis`` and
  ``row_axis``). Each step rebuilds every element's rate (``rebuilt_rate``), takes
  VSGD's step with it, and moves each mean by the mean of the new terms.
  """
  a = vsgd_shape(gamma)
  shape = np.shape(grads[0])
  means = {}
  for name, prior in zip(("b_g", "b_ghat"), vsgd_prior_rates(K, gamma), strict=True):
    row = np.full([1 if i == col_axis else n for i, n in enumerate(shape)], prior)
    col = np.full([1 if i == row_axis else n for i, n in enumerate(shape)], prior)
    means[name] = (row, col)
  constant = {"b_g": gamma, "b_ghat": K * gamma}
  def rebuilt(name):
    return rebuilt_rate(*means[name], constant[name], row_axis)
  mu = np.zeros(shape)
  history = []
  for i, g in enumerate(grads):
    t = i + 1
    g = np.asarray(g, np.float64)
    s_g, s_gh = rebuilt("b_g") / a, rebuilt("b_ghat") / a
    mu_prev = mu
    mu = (s_g * g + s_gh * mu_prev) / (s_g + s_gh)
    sigma2 = s_g * s_gh / (s_g + s_gh)
    new_terms = {"b_g": gamma + 0.5 * (sigma2 + (mu - mu_prev) ** 2),
                 "b_ghat": K * gamma + 0.5 * (sigma2 + (mu - g) ** 2)}
    for name, kappa in (("b_g", kappa_g), ("b_ghat", kappa_ghat)):
      rho = t ** -kappa
      row, col = means[name]
      means[name] = ((1 - rho) * row + rho * np.mean(new_terms[name], axis=col_axis, keepdims=True),
                     (1 - rho) * col + rho * np.mean(new_terms[name], axis=row_axis, keepdims=True))
    u = mu / (np.sqrt(mu ** 2 + sigma2) + eps)
    history.append((u, mu.copy(), dict(means)))
  return history


MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)


def newton_schulz(x, steps=5, coeffs=MUON_NS_COEFFS, eps=1e-8):
  """Muon's quintic Newton-Schulz iteration on a 2-D array, in float64: divided by
  its Frobenius norm (plus ``eps``), then ``X <- a X + (b A + c A A) X`` with
  ``A = X X^T``, on the wide orientation (a tall matrix is iterated transposed).
  """
  x = np.asarray(x, np.float64)
  tall = x.shape[0] > x.shape[1]
  x = x.T if tall else x
  x = x / (np.linalg.norm(x) + eps)
  a, b, c = coeffs
  for _ in range(steps):
    gram = x @ x.T
    x = a * x + (b * gram + c * gram @ gram) @ x
  return x.T if tall else x


def normuon_steps(grads, beta=0.95, beta2=0.95, eps=1e-10, nesterov=True):
  """NorMuon's steps (Li et al., 2025, and its authors' ``normuon_update``) of one
  ``(fan_in, fan_out)`` kernel on a list of gradients, in float64: the
  orthogonalized momentum divided by the root of each output neuron's running
  mean square, renormalized to its norm, times Muon's width scale.
  """
  m = np.zeros_like(np.asarray(grads[0], np.float64))
  v = np.zeros((1, m.shape[1]))
  steps = []
  for g in grads:
    g = np.asarray(g, np.float64)
    m = beta * m + (1 - beta) * g
    o = newton_schulz(beta * m + (1 - beta) * g if nesterov else m)
    v = beta2 * v + (1 - beta2) * np.mean(o ** 2, axis=0, keepdims=True)
    divided = o / (np.sqrt(v) + eps)
    step = divided * np.linalg.norm(o) / (np.linalg.norm(divided) + eps)
    fan_in, fan_out = g.shape
    steps.append(step * np.sqrt(max(1.0, fan_out / fan_in)))
  return steps

// One VSGD or Constant VSGD step for one array as a single in-place loop on
// XLA:CPU, called from JAX through the XLA FFI (see _cpu_kernel.py).
//
// XLA:CPU emits one loop per output array, so a step written in JAX makes
// about 22 passes over memory when the optimizer state is donated, where
// Adam makes 10. This loop reads the gradient and the state once and writes
// the direction and the new state once, over the gradient and the old state
// where _lowering.py lets it (JAX aliases those outputs to their inputs): 8
// passes for VSGD, 6 for Constant VSGD. The arithmetic is that of vsgd_leaf (as written) and
// constant_vsgd_leaf in _update_rules.py, except that VSGD's four divisions
// are shared as one; the results agree up to rounding, which
// tests/test_lowering.py checks against the float64 reference.

#include <Python.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// The jaxlib whose FFI headers this was compiled against (set by setup.py).
#ifndef VSGD_OPTAX_JAXLIB_VERSION
#define VSGD_OPTAX_JAXLIB_VERSION "unknown"
#endif

namespace {

// The authors' Gamma shape is a = gamma + 0.5 + kShapeOffset
// (SHAPE_OFFSET in _update_rules.py).
constexpr double kShapeOffset = 5e-5;

// Coordinates per task: large enough that scheduling costs little, small
// enough that two threads share a 10M-parameter array evenly.
constexpr int64_t kChunk = 1 << 15;

// Runs body(begin, end) over [0, n) in chunks on XLA's intra-op threads,
// which also run XLA's own loops, and on the calling thread. The calling
// thread claims chunks too, so the step finishes even when no other thread
// is free; tasks that start after every chunk is claimed do nothing, and the
// shared counters outlive the call for them.
template <typename Body>
void ParallelFor(ffi::ThreadPool& pool, int64_t n, const Body& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t threads = std::min<int64_t>(pool.num_threads(), chunks);
  if (threads <= 1) {
    body(0, n);
    return;
  }
  struct Progress {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex mutex;
    std::condition_variable all_done;
  };
  auto progress = std::make_shared<Progress>();
  auto work = [progress, chunks, n, body]() {
    int64_t finished = 0;
    for (int64_t c; (c = progress->next.fetch_add(1)) < chunks; ++finished) {
      body(c * kChunk, std::min(n, (c + 1) * kChunk));
    }
    if (finished > 0 &&
        progress->done.fetch_add(finished) + finished == chunks) {
      std::lock_guard<std::mutex> lock(progress->mutex);
      progress->all_done.notify_all();
    }
  };
  for (int64_t i = 1; i < threads; ++i) pool.Schedule(decltype(work)(work));
  work();
  std::unique_lock<std::mutex> lock(progress->mutex);
  progress->all_done.wait(lock, [&] { return progress->done.load() == chunks; });
}

// Each loop below is compiled twice: for the baseline instruction set and,
// on x86-64, for AVX2, picked at run time, as XLA compiles its own loops for
// the host CPU. Twice the vector width makes the divisions and the square
// root about 15% cheaper per step.
#if defined(__GNUC__) || defined(__clang__)
#define VSGD_OPTAX_INLINE inline __attribute__((always_inline))
#else
#define VSGD_OPTAX_INLINE inline
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VSGD_OPTAX_AVX2 1
#endif

template <typename Args, void (*Range)(const Args&, int64_t, int64_t)>
void OnBaseline(const Args& args, int64_t begin, int64_t end) {
  Range(args, begin, end);
}

#ifdef VSGD_OPTAX_AVX2
template <typename Args, void (*Range)(const Args&, int64_t, int64_t)>
__attribute__((target("avx2"))) void OnAvx2(const Args& args, int64_t begin,
                                            int64_t end) {
  Range(args, begin, end);
}
#endif

// Runs Range over [0, n) on the widest instructions this CPU has.
template <typename Args, void (*Range)(const Args&, int64_t, int64_t)>
void RunLoop(ffi::ThreadPool& pool, int64_t n, const Args& args) {
  void (*range)(const Args&, int64_t, int64_t) = &OnBaseline<Args, Range>;
#ifdef VSGD_OPTAX_AVX2
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  if (has_avx2) range = &OnAvx2<Args, Range>;
#endif
  ParallelFor(pool, n, [args, range](int64_t begin, int64_t end) {
    range(args, begin, end);
  });
}

template <typename T>
struct VsgdArgs {
  // Outputs may alias inputs: each coordinate reads all it needs first.
  const T *g, *mu, *b_g, *b_ghat;
  T *direction, *new_mu, *new_b_g, *new_b_ghat;
  T gamma, K_gamma, eps, inverse_a, prior_w, prior_sigma2;
  T rho_g, rho_ghat;
};

// kFirst: the first step, whose prior variances are the same for every
// coordinate. A template argument rather than a branch in the loop, which
// would keep the compiler from vectorizing it.
template <typename T, bool kFirst>
VSGD_OPTAX_INLINE void VsgdRange(const VsgdArgs<T>& args, int64_t begin,
                                 int64_t end) {
  // Copied out of args: the stores below could otherwise alias args, and the
  // compiler would reload every field on every coordinate.
  const VsgdArgs<T> a = args;
  const T keep_g = T(1) - a.rho_g, keep_ghat = T(1) - a.rho_ghat;
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) {
    const T g = a.g[i], mu_prev = a.mu[i], b_g = a.b_g[i], b_ghat = a.b_ghat[i];
    T w = a.prior_w, sigma2 = a.prior_sigma2;
    if constexpr (!kFirst) {
      // With s = b / a: w = s_g / (s_g + s_ghat) = b_g / (b_g + b_ghat) and
      // sigma2 = s_g * s_ghat / (s_g + s_ghat) = s_g * (b_ghat / (b_g + b_ghat)):
      // one division where the equations as written have four.
      const T inverse_sum = T(1) / (b_g + b_ghat);
      w = b_g * inverse_sum;
      sigma2 = (b_g * a.inverse_a) * (b_ghat * inverse_sum);
    }
    const T mu = mu_prev + w * (g - mu_prev);
    const T dev_g = (mu - mu_prev) * (mu - mu_prev);
    const T dev_ghat = (mu - g) * (mu - g);
    const T b_g_target = a.gamma + T(0.5) * (sigma2 + dev_g);
    const T b_ghat_target = a.K_gamma + T(0.5) * (sigma2 + dev_ghat);
    a.new_b_g[i] = keep_g * b_g + a.rho_g * b_g_target;
    a.new_b_ghat[i] = keep_ghat * b_ghat + a.rho_ghat * b_ghat_target;
    a.new_mu[i] = mu;
    a.direction[i] = mu / (std::sqrt(mu * mu + sigma2) + a.eps);
  }
}

template <typename T>
struct ConstantVsgdArgs {
  const T *g, *mu, *b_ghat;  // outputs may alias them, as for VSGD
  T *direction, *new_mu, *new_b_ghat;
  T K, gamma, eps, w, a_prev, rho;
};

template <typename T>
VSGD_OPTAX_INLINE void ConstantVsgdRange(const ConstantVsgdArgs<T>& args,
                                         int64_t begin, int64_t end) {
  const ConstantVsgdArgs<T> a = args;  // copied out, as in VsgdRange
  const T keep = T(1) - a.rho;
#pragma GCC ivdep
  for (int64_t i = begin; i < end; ++i) {
    const T g = a.g[i], mu_prev = a.mu[i], b_ghat = a.b_ghat[i];
    const T sigma2 = a.w * b_ghat / a.a_prev;
    const T mu = mu_prev + a.w * (g - mu_prev);
    const T e_ghat = g - mu;
    const T dev_ghat = e_ghat * e_ghat;
    const T dev_g = (e_ghat / a.K) * (e_ghat / a.K);
    const T target = a.gamma + T(0.5) * (sigma2 + dev_ghat) +
                     T(0.5) * a.K * (sigma2 + dev_g);
    a.new_b_ghat[i] = keep * b_ghat + a.rho * target;
    a.new_mu[i] = mu;
    a.direction[i] = mu / (std::sqrt(mu * mu + sigma2) + a.eps);
  }
}

template <ffi::DataType dtype>
using Array = ffi::Buffer<dtype>;
template <ffi::DataType dtype>
using Scalar = ffi::BufferR0<dtype>;
template <ffi::DataType dtype>
using Output = ffi::ResultBuffer<dtype>;

template <ffi::DataType dtype>
ffi::Error VsgdStep(ffi::ThreadPool pool, Array<dtype> g, Array<dtype> mu,
                    Array<dtype> b_g, Array<dtype> b_ghat, Scalar<dtype> first,
                    Scalar<dtype> rho_g, Scalar<dtype> rho_ghat,
                    Output<dtype> direction, Output<dtype> mu_out,
                    Output<dtype> b_g_out, Output<dtype> b_ghat_out, double K,
                    double gamma, double eps) {
  using T = ffi::NativeType<dtype>;
  // On the first step every coordinate has the prior variances
  // s_g = gamma / (a - 0.5) and s_ghat = K * gamma / (a - 0.5), so the weight
  // on the observation and sigma2 are constants.
  const double prior_s_g = gamma / (gamma + kShapeOffset);
  const double prior_s_ghat = K * prior_s_g;
  // Hyperparameters are rounded to T once, as JAX does with Python floats.
  const VsgdArgs<T> args = {
      g.typed_data(), mu.typed_data(), b_g.typed_data(), b_ghat.typed_data(),
      direction->typed_data(), mu_out->typed_data(), b_g_out->typed_data(),
      b_ghat_out->typed_data(), T(gamma), T(K * gamma), T(eps),
      T(1.0 / (gamma + 0.5 + kShapeOffset)),
      T(prior_s_g / (prior_s_g + prior_s_ghat)),
      T(prior_s_g * (prior_s_ghat / (prior_s_g + prior_s_ghat))),
      rho_g.typed_data()[0], rho_ghat.typed_data()[0]};
  if (first.typed_data()[0] != T(0)) {
    RunLoop<VsgdArgs<T>, VsgdRange<T, true>>(pool, g.element_count(), args);
  } else {
    RunLoop<VsgdArgs<T>, VsgdRange<T, false>>(pool, g.element_count(), args);
  }
  return ffi::Error::Success();
}

template <ffi::DataType dtype>
ffi::Error ConstantVsgdStep(ffi::ThreadPool pool, Array<dtype> g,
                            Array<dtype> mu, Array<dtype> b_ghat,
                            Scalar<dtype> first, Scalar<dtype> rho,
                            Output<dtype> direction, Output<dtype> mu_out,
                            Output<dtype> b_ghat_out, double K, double gamma,
                            double eps) {
  using T = ffi::NativeType<dtype>;
  const bool is_first = first.typed_data()[0] != T(0);
  const ConstantVsgdArgs<T> args = {
      g.typed_data(), mu.typed_data(), b_ghat.typed_data(),
      direction->typed_data(), mu_out->typed_data(), b_ghat_out->typed_data(),
      T(K), T(gamma), T(eps),
      T(1.0 / (K + 1.0)),                     // the weight on the observation
      is_first ? T(gamma) : T(gamma + 1.0),   // a_{t-1}: a_0 = gamma
      rho.typed_data()[0]};
  RunLoop<ConstantVsgdArgs<T>, ConstantVsgdRange<T>>(pool, g.element_count(),
                                                     args);
  return ffi::Error::Success();
}

template <ffi::DataType dtype>
auto BindVsgd() {
  return ffi::Ffi::Bind()
      .Ctx<ffi::ThreadPool>()
      .template Arg<Array<dtype>>()   // g
      .template Arg<Array<dtype>>()   // mu
      .template Arg<Array<dtype>>()   // b_g
      .template Arg<Array<dtype>>()   // b_ghat
      .template Arg<Scalar<dtype>>()  // first
      .template Arg<Scalar<dtype>>()  // rho_g
      .template Arg<Scalar<dtype>>()  // rho_ghat
      .template Ret<Array<dtype>>()   // direction
      .template Ret<Array<dtype>>()   // mu
      .template Ret<Array<dtype>>()   // b_g
      .template Ret<Array<dtype>>()   // b_ghat
      .template Attr<double>("K")
      .template Attr<double>("gamma")
      .template Attr<double>("eps");
}

template <ffi::DataType dtype>
auto BindConstantVsgd() {
  return ffi::Ffi::Bind()
      .Ctx<ffi::ThreadPool>()
      .template Arg<Array<dtype>>()   // g
      .template Arg<Array<dtype>>()   // mu
      .template Arg<Array<dtype>>()   // b_ghat
      .template Arg<Scalar<dtype>>()  // first
      .template Arg<Scalar<dtype>>()  // rho
      .template Ret<Array<dtype>>()   // direction
      .template Ret<Array<dtype>>()   // mu
      .template Ret<Array<dtype>>()   // b_ghat
      .template Attr<double>("K")
      .template Attr<double>("gamma")
      .template Attr<double>("eps");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(VsgdF32, VsgdStep<ffi::F32>,
                              BindVsgd<ffi::F32>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(VsgdF64, VsgdStep<ffi::F64>,
                              BindVsgd<ffi::F64>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(ConstantVsgdF32, ConstantVsgdStep<ffi::F32>,
                              BindConstantVsgd<ffi::F32>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(ConstantVsgdF64, ConstantVsgdStep<ffi::F64>,
                              BindConstantVsgd<ffi::F64>());

// The Python module: one capsule per handler, named as _cpu_kernel.py
// registers them with XLA.
namespace {

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_cpu_kernel_lib",
                       "XLA:CPU handlers of the fused VSGD steps.", -1};

bool AddHandler(PyObject* module, const char* name, XLA_FFI_Handler* handler) {
  PyObject* capsule =
      PyCapsule_New(reinterpret_cast<void*>(handler), nullptr, nullptr);
  if (capsule == nullptr) return false;
  if (PyModule_AddObject(module, name, capsule) < 0) {
    Py_DECREF(capsule);
    return false;
  }
  return true;
}

}  // namespace

PyMODINIT_FUNC PyInit__cpu_kernel_lib() {
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  if (PyModule_AddStringConstant(module, "built_with_jaxlib",
                                 VSGD_OPTAX_JAXLIB_VERSION) < 0 ||
      !AddHandler(module, "vsgd_f32", VsgdF32) ||
      !AddHandler(module, "vsgd_f64", VsgdF64) ||
      !AddHandler(module, "constant_vsgd_f32", ConstantVsgdF32) ||
      !AddHandler(module, "constant_vsgd_f64", ConstantVsgdF64)) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}

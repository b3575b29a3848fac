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
#include <type_traits>

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
                    Output<dtype> direction_out, Output<dtype> mu_out,
                    Output<dtype> b_g_out, Output<dtype> b_ghat_out, double K,
                    double gamma, double eps) {
  using T = ffi::NativeType<dtype>;
  // Hyperparameters are rounded to T once, as JAX does with Python floats.
  const T t_gamma = gamma, t_K_gamma = K * gamma, t_eps = eps;
  const T inverse_a = 1.0 / (gamma + 0.5 + kShapeOffset);
  // On the first step every coordinate has the prior variances
  // s_g = gamma / (a - 0.5) and s_ghat = K * gamma / (a - 0.5), so the weight
  // on the observation and sigma2 are constants.
  const double prior_s_g = gamma / (gamma + kShapeOffset);
  const double prior_s_ghat = K * prior_s_g;
  const T prior_w = prior_s_g / (prior_s_g + prior_s_ghat);
  const T prior_sigma2 = prior_s_g * (prior_s_ghat / (prior_s_g + prior_s_ghat));
  const bool is_first = first.typed_data()[0] != T(0);
  const T r_g = rho_g.typed_data()[0], r_ghat = rho_ghat.typed_data()[0];
  const T keep_g = T(1) - r_g, keep_ghat = T(1) - r_ghat;
  // Outputs alias inputs: each coordinate reads all it needs before writing.
  const T* gs = g.typed_data();
  const T* mus = mu.typed_data();
  const T* b_gs = b_g.typed_data();
  const T* b_ghats = b_ghat.typed_data();
  T* direction = direction_out->typed_data();
  T* new_mu = mu_out->typed_data();
  T* new_b_g = b_g_out->typed_data();
  T* new_b_ghat = b_ghat_out->typed_data();
  // One loop for the first step and one for the others: a branch inside the
  // loop would keep the compiler from vectorizing it.
  auto run = [=](auto first_step, int64_t begin, int64_t end) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const T g_i = gs[i], mu_prev = mus[i], b_g_i = b_gs[i],
              b_ghat_i = b_ghats[i];
      T w = prior_w, sigma2 = prior_sigma2;
      if constexpr (!decltype(first_step)::value) {
        // With s = b / a: w = s_g / (s_g + s_ghat) = b_g / (b_g + b_ghat) and
        // sigma2 = s_g * s_ghat / (s_g + s_ghat) = s_g * (b_ghat / (b_g + b_ghat)):
        // one division where the equations as written have four.
        const T inverse_sum = T(1) / (b_g_i + b_ghat_i);
        w = b_g_i * inverse_sum;
        sigma2 = (b_g_i * inverse_a) * (b_ghat_i * inverse_sum);
      }
      const T mu_i = mu_prev + w * (g_i - mu_prev);
      const T dev_g = (mu_i - mu_prev) * (mu_i - mu_prev);
      const T dev_ghat = (mu_i - g_i) * (mu_i - g_i);
      const T b_g_target = t_gamma + T(0.5) * (sigma2 + dev_g);
      const T b_ghat_target = t_K_gamma + T(0.5) * (sigma2 + dev_ghat);
      new_b_g[i] = keep_g * b_g_i + r_g * b_g_target;
      new_b_ghat[i] = keep_ghat * b_ghat_i + r_ghat * b_ghat_target;
      new_mu[i] = mu_i;
      direction[i] = mu_i / (std::sqrt(mu_i * mu_i + sigma2) + t_eps);
    }
  };
  ParallelFor(pool, g.element_count(), [=](int64_t begin, int64_t end) {
    if (is_first) {
      run(std::true_type(), begin, end);
    } else {
      run(std::false_type(), begin, end);
    }
  });
  return ffi::Error::Success();
}

template <ffi::DataType dtype>
ffi::Error ConstantVsgdStep(ffi::ThreadPool pool, Array<dtype> g,
                            Array<dtype> mu, Array<dtype> b_ghat,
                            Scalar<dtype> first, Scalar<dtype> rho,
                            Output<dtype> direction_out, Output<dtype> mu_out,
                            Output<dtype> b_ghat_out, double K, double gamma,
                            double eps) {
  using T = ffi::NativeType<dtype>;
  const T t_K = K, t_gamma = gamma, t_eps = eps;
  const T w = 1.0 / (K + 1.0);
  const T a_prev = first.typed_data()[0] != T(0) ? T(gamma) : T(gamma + 1.0);
  const T r = rho.typed_data()[0];
  const T keep = T(1) - r;
  const T* gs = g.typed_data();
  const T* mus = mu.typed_data();
  const T* b_ghats = b_ghat.typed_data();
  T* direction = direction_out->typed_data();
  T* new_mu = mu_out->typed_data();
  T* new_b_ghat = b_ghat_out->typed_data();
  ParallelFor(pool, g.element_count(), [=](int64_t begin, int64_t end) {
#pragma GCC ivdep
    for (int64_t i = begin; i < end; ++i) {
      const T g_i = gs[i], mu_prev = mus[i], b_ghat_i = b_ghats[i];
      const T sigma2 = w * b_ghat_i / a_prev;
      const T mu_i = mu_prev + w * (g_i - mu_prev);
      const T e_ghat = g_i - mu_i;
      const T dev_ghat = e_ghat * e_ghat;
      const T dev_g = (e_ghat / t_K) * (e_ghat / t_K);
      const T target = t_gamma + T(0.5) * (sigma2 + dev_ghat) +
                       T(0.5) * t_K * (sigma2 + dev_g);
      new_b_ghat[i] = keep * b_ghat_i + r * target;
      new_mu[i] = mu_i;
      direction[i] = mu_i / (std::sqrt(mu_i * mu_i + sigma2) + t_eps);
    }
  });
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

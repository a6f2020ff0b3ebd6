#pragma once
/// \file
/// Element-wise activations on the CPU, forward and backward: SiLU, GELU (erf form), LeakyReLU,
/// ReLU6, Hardsigmoid, Hardswish, Sigmoid and Tanh.
///
///     ops::ActivationKernels<Cpu>::gelu_forward(ctx, x, y, n);
///
/// Each activation is a rule written once over a float or a vector of floats (the machinery of
/// elementwise_apply.hpp: the vector body and the scalar tail compute the same operations in the
/// same order), run a vector at a time in entry functions compiled for AVX-512, AVX2 and the
/// baseline, with the pool's threads splitting the range. PyTorch's formulas and operation order
/// (its CPU kernels, aten/src/ATen/native/cpu/Activation.cpp); exp and erf from vector_math.hpp.
/// 16-bit elements are widened to float a chunk at a time and rounded once on store; double
/// (gradient checks) uses the C library's exp and erfc.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/vector_math.hpp"
#include "cohort/backend/ops.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort {

namespace cpu {
/// The rules: `forward(x)` and `backward(x, dy)` over V = float or vec<W>, and over double with
/// the C library's functions (non-template overloads, preferred for double arguments).

/// SiLU: y = x / (1 + e^-x); dx = dy * s * (1 + x * (1 - s)) with s = 1 / (1 + e^-x).
struct SiluRule {
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return x / (1.f + vexp(-x));
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& x, const V& dy) const noexcept {
    const V s = 1.f / (1.f + vexp(-x));
    return dy * s * (1.f + x * (1.f - s));
  }
  static double forward(double x) noexcept { return x / (1.0 + std::exp(-x)); }
  static double backward(double x, double dy) noexcept {
    const double s = 1.0 / (1.0 + std::exp(-x));
    return dy * s * (1.0 + x * (1.0 - s));
  }
};

/// GELU, approximate='none': y = x * Phi(x) with Phi(x) = 0.5 * (1 + erf(x / sqrt(2)));
/// dx = dy * (Phi(x) + x * e^(-x^2 / 2) / sqrt(2 pi)).
struct GeluRule {
  static constexpr double inv_sqrt_2pi = 0.39894228040143267794; // M_2_SQRTPI * M_SQRT1_2 * 0.5
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return x * vnormal_cdf(x);
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& x, const V& dy) const noexcept {
    const V pdf = vexp(x * x * -0.5f) * float(inv_sqrt_2pi);
    return dy * (vnormal_cdf(x) + x * pdf);
  }
  static double cdf(double x) noexcept { return 0.5 * std::erfc(-x * 0.70710678118654752440); }
  static double forward(double x) noexcept { return x * cdf(x); }
  static double backward(double x, double dy) noexcept {
    return dy * (cdf(x) + x * std::exp(-0.5 * x * x) * inv_sqrt_2pi);
  }
};

/// LeakyReLU: y = x where x > 0, else x * slope; dx = dy or dy * slope by the same test on x.
struct LeakyReluRule {
  float slope;
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return x > 0.f ? x : x * slope;
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& x, const V& dy) const noexcept {
    return x > 0.f ? dy : dy * slope;
  }
  double forward(double x) const noexcept { return x > 0 ? x : x * double(slope); }
  double backward(double x, double dy) const noexcept { return x > 0 ? dy : dy * double(slope); }
};

/// ReLU6 (torch's hardtanh(x, 0, 6)): y = min(max(x, 0), 6); dx = 0 where x <= 0 or x >= 6
/// (the kinks included, as hardtanh_backward), else dy. NaN stays NaN forward and passes dy back.
struct Relu6Rule {
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    const V low = x < 0.f ? detail::splat<V>(0.f) : x; // compare-and-select: NaN stays NaN
    return low > 6.f ? detail::splat<V>(6.f) : low;
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& x, const V& dy) const noexcept {
    return ((x <= 0.f) | (x >= 6.f)) ? detail::splat<V>(0.f) : dy;
  }
  static double forward(double x) noexcept { return x < 0 ? 0.0 : x > 6 ? 6.0 : x; }
  static double backward(double x, double dy) noexcept { return (x <= 0 || x >= 6) ? 0.0 : dy; }
};

/// Hardsigmoid: y = min(max(x + 3, 0), 6) / 6; dx = dy * (1/6) for -3 < x < 3, else 0 (torch's
/// hardsigmoid and hardsigmoid_backward, the division and the float constant 1/6 included).
struct HardsigmoidRule {
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return Relu6Rule{}.forward(V(x + 3.f)) / 6.f;
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& x, const V& dy) const noexcept {
    return ((x > -3.f) & (x < 3.f)) ? V(dy * (1.f / 6.f)) : detail::splat<V>(0.f);
  }
  static double forward(double x) noexcept { return Relu6Rule::forward(x + 3) / 6; }
  static double backward(double x, double dy) noexcept { return (x > -3 && x < 3) ? dy / 6 : 0.0; }
};

/// Hardswish: y = x * min(max(x + 3, 0), 6) / 6; dx = 0 for x <= -3, dy * (x / 3 + 0.5) for
/// -3 < x < 3, dy from 3 on: torch's hardswish_backward, whose kinks take the outer pieces (so
/// dx(-3) = 0 and dx(3) = dy, measured on torch 2.15: tests/reference/fixtures/layer_hardswish).
struct HardswishRule {
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return x * Relu6Rule{}.forward(V(x + 3.f)) / 6.f;
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& x, const V& dy) const noexcept {
    const V middle = x < 3.f ? V(dy * (x / 3.f + 0.5f)) : dy;
    return x <= -3.f ? detail::splat<V>(0.f) : middle;
  }
  static double forward(double x) noexcept { return x * Relu6Rule::forward(x + 3) / 6; }
  static double backward(double x, double dy) noexcept { return x <= -3 ? 0.0 : x < 3 ? dy * (x / 3 + 0.5) : dy; }
};

/// Sigmoid: y = 1 / (1 + e^-x); dx = dy * (1 - y) * y from the forward *output* y, as torch's
/// sigmoid_backward (the backward entries of output rules are handed y where others get x).
struct SigmoidRule {
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return 1.f / (1.f + vexp(-x));
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& y, const V& dy) const noexcept {
    return dy * (1.f - y) * y;
  }
  static double forward(double x) noexcept { return 1.0 / (1.0 + std::exp(-x)); }
  static double backward(double y, double dy) noexcept { return dy * (1.0 - y) * y; }
};

/// Tanh: y = tanh(x); dx = dy * (1 - y * y) from the forward output, as torch's tanh_backward.
struct TanhRule {
  template <class V>
  COHORT_ALWAYS_INLINE V forward(const V& x) const noexcept {
    return vtanh(x);
  }
  template <class V>
  COHORT_ALWAYS_INLINE V backward(const V& y, const V& dy) const noexcept {
    return dy * (1.f - y * y);
  }
  static double forward(double x) noexcept { return std::tanh(x); }
  static double backward(double y, double dy) noexcept { return dy * (1.0 - y * y); }
};

namespace detail {
/// y[i] = rule.forward(x[i]) for i < n, W floats at a time.
template <int W, class Rule>
COHORT_ALWAYS_INLINE void activation_forward_range(const Rule& rule, const float* __restrict x, float* __restrict y,
                                                   std::size_t n) {
  COHORT_ISA_ENTRY(isa_of_width(W));
  std::size_t i = 0;
  for (; i + W <= n; i += W) store<W>(y + i, rule.forward(load<W>(x + i)));
  for (; i < n; ++i) y[i] = rule.forward(x[i]);
}
/// dx[i] = rule.backward(x[i], dy[i]) for i < n, W floats at a time.
template <int W, class Rule>
COHORT_ALWAYS_INLINE void activation_backward_range(const Rule& rule, const float* __restrict x,
                                                    const float* __restrict dy, float* __restrict dx, std::size_t n) {
  COHORT_ISA_ENTRY(isa_of_width(W));
  std::size_t i = 0;
  for (; i + W <= n; i += W) store<W>(dx + i, rule.backward(load<W>(x + i), load<W>(dy + i)));
  for (; i < n; ++i) dx[i] = rule.backward(x[i], dy[i]);
}

template <class Rule>
void activation_forward(Isa isa, const Rule& rule, const float* x, float* y, std::size_t n) {
#if defined(__CUDACC__)
  // nvcc cannot compile the GCC-vector instantiations (see apply_elementwise): the scalar loop,
  // the same operations in the same order.
  (void)isa;
  for (std::size_t i = 0; i < n; ++i) y[i] = rule.forward(x[i]);
#else
  dispatch_isa(
      isa, [&]() COHORT_TARGET_AVX512 { activation_forward_range<16>(rule, x, y, n); },
      [&]() COHORT_TARGET_AVX2 { activation_forward_range<8>(rule, x, y, n); },
      [&] { activation_forward_range<4>(rule, x, y, n); });
#endif
}
template <class Rule>
void activation_backward(Isa isa, const Rule& rule, const float* x, const float* dy, float* dx, std::size_t n) {
#if defined(__CUDACC__)
  (void)isa;
  for (std::size_t i = 0; i < n; ++i) dx[i] = rule.backward(x[i], dy[i]);
#else
  dispatch_isa(
      isa, [&]() COHORT_TARGET_AVX512 { activation_backward_range<16>(rule, x, dy, dx, n); },
      [&]() COHORT_TARGET_AVX2 { activation_backward_range<8>(rule, x, dy, dx, n); },
      [&] { activation_backward_range<4>(rule, x, dy, dx, n); });
#endif
}
} // namespace detail
} // namespace cpu

template <>
struct ops::ActivationKernels<Cpu> {
  /// Elements per task: large enough that waking a thread pays off.
  static constexpr std::size_t grain = 16 * 1024;
  /// 16-bit elements are converted this many at a time (per-thread scratch, stays in L1/L2).
  static constexpr std::size_t chunk = 2048;

  template <class T>
  static void silu_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::SiluRule{}, x, y, n);
  }
  /// Reads the forward input x (PyTorch's silu_backward does too).
  template <class T>
  static void silu_backward(CpuContext& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::SiluRule{}, x, dy, dx, n);
  }
  template <class T>
  static void gelu_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::GeluRule{}, x, y, n);
  }
  template <class T>
  static void gelu_backward(CpuContext& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::GeluRule{}, x, dy, dx, n);
  }
  template <class T>
  static void leaky_relu_forward(CpuContext& ctx, float slope, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::LeakyReluRule{slope}, x, y, n);
  }
  template <class T>
  static void leaky_relu_backward(CpuContext& ctx, float slope, const T* x, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::LeakyReluRule{slope}, x, dy, dx, n);
  }

  template <class T>
  static void relu6_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::Relu6Rule{}, x, y, n);
  }
  template <class T>
  static void relu6_backward(CpuContext& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::Relu6Rule{}, x, dy, dx, n);
  }
  template <class T>
  static void hardsigmoid_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::HardsigmoidRule{}, x, y, n);
  }
  template <class T>
  static void hardsigmoid_backward(CpuContext& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::HardsigmoidRule{}, x, dy, dx, n);
  }
  template <class T>
  static void hardswish_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::HardswishRule{}, x, y, n);
  }
  template <class T>
  static void hardswish_backward(CpuContext& ctx, const T* x, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::HardswishRule{}, x, dy, dx, n);
  }
  template <class T>
  static void sigmoid_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::SigmoidRule{}, x, y, n);
  }
  /// Reads the forward output y, as torch's sigmoid_backward.
  template <class T>
  static void sigmoid_backward(CpuContext& ctx, const T* y, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::SigmoidRule{}, y, dy, dx, n);
  }
  template <class T>
  static void tanh_forward(CpuContext& ctx, const T* x, T* y, std::size_t n) {
    forward(ctx, cpu::TanhRule{}, x, y, n);
  }
  /// Reads the forward output y, as torch's tanh_backward.
  template <class T>
  static void tanh_backward(CpuContext& ctx, const T* y, const T* dy, T* dx, std::size_t n) {
    backward(ctx, cpu::TanhRule{}, y, dy, dx, n);
  }

 private:
  template <class Rule, class T>
  static void forward(CpuContext& ctx, const Rule& rule, const T* x, T* y, std::size_t n) {
    const Isa isa = cpu::active_isa();
    ctx.threads().parallel_for(n, grain, [=](std::size_t lo, std::size_t hi) {
      if constexpr (std::is_same_v<T, float>) {
        cpu::detail::activation_forward(isa, rule, x + lo, y + lo, hi - lo);
      } else if constexpr (cpu::is_half_type<T>) {
        float* xf = cpu::convert_scratch(0, chunk);
        float* yf = cpu::convert_scratch(1, chunk);
        for (std::size_t c0 = lo; c0 < hi; c0 += chunk) {
          const std::size_t m = std::min(chunk, hi - c0);
          cpu::load_floats(isa, x + c0, xf, m);
          cpu::detail::activation_forward(isa, rule, xf, yf, m);
          cpu::store_floats(isa, yf, y + c0, m);
        }
      } else {
        for (std::size_t i = lo; i < hi; ++i) y[i] = T(rule.forward(double(x[i])));
      }
    });
  }
  template <class Rule, class T>
  static void backward(CpuContext& ctx, const Rule& rule, const T* x, const T* dy, T* dx, std::size_t n) {
    const Isa isa = cpu::active_isa();
    ctx.threads().parallel_for(n, grain, [=](std::size_t lo, std::size_t hi) {
      if constexpr (std::is_same_v<T, float>) {
        cpu::detail::activation_backward(isa, rule, x + lo, dy + lo, dx + lo, hi - lo);
      } else if constexpr (cpu::is_half_type<T>) {
        float* xf = cpu::convert_scratch(0, chunk);
        float* gf = cpu::convert_scratch(1, chunk);
        float* df = cpu::convert_scratch(2, chunk);
        for (std::size_t c0 = lo; c0 < hi; c0 += chunk) {
          const std::size_t m = std::min(chunk, hi - c0);
          cpu::load_floats(isa, x + c0, xf, m);
          cpu::load_floats(isa, dy + c0, gf, m);
          cpu::detail::activation_backward(isa, rule, xf, gf, df, m);
          cpu::store_floats(isa, df, dx + c0, m);
        }
      } else {
        for (std::size_t i = lo; i < hi; ++i) dx[i] = T(rule.backward(double(x[i]), double(dy[i])));
      }
    });
  }
};

} // namespace cohort

#pragma GCC diagnostic pop

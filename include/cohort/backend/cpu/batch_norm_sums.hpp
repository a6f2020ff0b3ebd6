#pragma once
/// \file
/// The vector kernels of CPU BatchNorm (backend/cpu/batch_norm.hpp): per-channel sums in double
/// (moments and gradient sums, per instruction set), normalisation of a plane, and the fused
/// ReLU + 2x2 max-pool of a normalised plane.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "cohort/backend/cpu/context.hpp"
#include "cohort/backend/cpu/convert.hpp"
#include "cohort/backend/cpu/relu_pool.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/core/dtype.hpp"
#include "cohort/core/error.hpp"

namespace cohort {

namespace cpu::detail {
/// Channel sums in double, eight interleaved partial sums (element i of a sample's plane goes to
/// lane i % 8) added in a fixed order at the end: vectorisable, and the same result for any
/// thread count.
struct LaneSums {
  static constexpr std::size_t lanes = 8;
  double part[lanes] = {};

  template <class T>
  void add(const T* __restrict p, std::size_t n) noexcept {
    const std::size_t whole = n / lanes * lanes;
    for (std::size_t i = 0; i < whole; i += lanes)
      for (std::size_t l = 0; l < lanes; ++l) part[l] += double(p[i + l]);
    for (std::size_t i = whole; i < n; ++i) part[i - whole] += double(p[i]);
  }
  template <class T>
  void add_squared_deviation(const T* __restrict p, std::size_t n, double mean) noexcept {
    const std::size_t whole = n / lanes * lanes;
    for (std::size_t i = 0; i < whole; i += lanes)
      for (std::size_t l = 0; l < lanes; ++l) {
        const double d = double(p[i + l]) - mean;
        part[l] += d * d;
      }
    for (std::size_t i = whole; i < n; ++i) {
      const double d = double(p[i]) - mean;
      part[i - whole] += d * d;
    }
  }
  /// sum dy and sum dy * (x - mean) * invstd, in the same lanes.
  template <class T>
  static void add_grad(const T* __restrict x, const T* __restrict dy, std::size_t n, double mean, double invstd,
                       LaneSums& sum_dy, LaneSums& sum_dy_xhat) noexcept {
    const std::size_t whole = n / lanes * lanes;
    for (std::size_t i = 0; i < whole; i += lanes)
      for (std::size_t l = 0; l < lanes; ++l) {
        sum_dy.part[l] += double(dy[i + l]);
        sum_dy_xhat.part[l] += double(dy[i + l]) * (double(x[i + l]) - mean) * invstd;
      }
    for (std::size_t i = whole; i < n; ++i) {
      sum_dy.part[i - whole] += double(dy[i]);
      sum_dy_xhat.part[i - whole] += double(dy[i]) * (double(x[i]) - mean) * invstd;
    }
  }
  double total() const noexcept {
    return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  }
};
/// D doubles in a vector (the float path's accumulators), D = 4 or 8; fvec<D> = vec<D>.
template <int D>
struct dvec_of;
template <>
struct dvec_of<4> {
  typedef double type __attribute__((vector_size(32)));
};
template <>
struct dvec_of<8> {
  typedef double type __attribute__((vector_size(64)));
};
template <int D>
using dvec = typename dvec_of<D>::type;
template <int D>
using fvec = vec<D>;

/// Float path: channel sums in double, D lanes x 2 independent accumulators (element i of a
/// plane goes to lane i % 2D), then the lanes in a fixed order: the same result for any thread
/// count. sum x and sum x^2 in one pass.
template <int D>
COHORT_ALWAYS_INLINE void moments_impl(const float* __restrict p, std::size_t n, double* acc) {
  dvec<D> s0, s1, q0, q1;
  __builtin_memcpy(&s0, acc, sizeof s0);
  __builtin_memcpy(&s1, acc + D, sizeof s1);
  __builtin_memcpy(&q0, acc + 2 * D, sizeof q0);
  __builtin_memcpy(&q1, acc + 3 * D, sizeof q1);
  std::size_t i = 0;
  for (; i + 2 * D <= n; i += 2 * D) {
    fvec<D> a, b;
    __builtin_memcpy(&a, p + i, sizeof a);
    __builtin_memcpy(&b, p + i + D, sizeof b);
    const dvec<D> x0 = __builtin_convertvector(a, dvec<D>), x1 = __builtin_convertvector(b, dvec<D>);
    s0 += x0;
    s1 += x1;
    q0 += x0 * x0;
    q1 += x1 * x1;
  }
  __builtin_memcpy(acc, &s0, sizeof s0);
  __builtin_memcpy(acc + D, &s1, sizeof s1);
  __builtin_memcpy(acc + 2 * D, &q0, sizeof q0);
  __builtin_memcpy(acc + 3 * D, &q1, sizeof q1);
  for (std::size_t l = 0; i < n && l < 2 * D; ++i, ++l) { // the tail (< 2D): lanes 0.. of the first sums
    const double x = double(p[i]);
    acc[l] += x;
    acc[2 * D + l] += x * x;
  }
}
/// sum dy' and sum dy' * x in double, dy' = dy where mask > 0 (a fused ReLU's output) or dy.
template <int D>
COHORT_ALWAYS_INLINE void grad_sums_impl(const float* __restrict x, const float* __restrict dy,
                                         const float* __restrict mask, std::size_t n, double* acc) {
  dvec<D> s0, s1, q0, q1;
  __builtin_memcpy(&s0, acc, sizeof s0);
  __builtin_memcpy(&s1, acc + D, sizeof s1);
  __builtin_memcpy(&q0, acc + 2 * D, sizeof q0);
  __builtin_memcpy(&q1, acc + 3 * D, sizeof q1);
  const fvec<D> zero{};
  std::size_t i = 0;
  for (; i + 2 * D <= n; i += 2 * D) {
    fvec<D> xa, xb, ga, gb;
    __builtin_memcpy(&xa, x + i, sizeof xa);
    __builtin_memcpy(&xb, x + i + D, sizeof xb);
    __builtin_memcpy(&ga, dy + i, sizeof ga);
    __builtin_memcpy(&gb, dy + i + D, sizeof gb);
    if (mask) {
      fvec<D> ma, mb;
      __builtin_memcpy(&ma, mask + i, sizeof ma);
      __builtin_memcpy(&mb, mask + i + D, sizeof mb);
      ga = ma > zero ? ga : zero;
      gb = mb > zero ? gb : zero;
    }
    const dvec<D> g0 = __builtin_convertvector(ga, dvec<D>), g1 = __builtin_convertvector(gb, dvec<D>);
    s0 += g0;
    s1 += g1;
    q0 += g0 * __builtin_convertvector(xa, dvec<D>);
    q1 += g1 * __builtin_convertvector(xb, dvec<D>);
  }
  __builtin_memcpy(acc, &s0, sizeof s0);
  __builtin_memcpy(acc + D, &s1, sizeof s1);
  __builtin_memcpy(acc + 2 * D, &q0, sizeof q0);
  __builtin_memcpy(acc + 3 * D, &q1, sizeof q1);
  for (std::size_t l = 0; i < n && l < 2 * D; ++i, ++l) {
    const double g = !mask || mask[i] > 0.f ? double(dy[i]) : 0.0;
    acc[l] += g;
    acc[2 * D + l] += g * double(x[i]);
  }
}
COHORT_TARGET_AVX512 inline void moments_avx512(const float* p, std::size_t n, double* acc) {
  COHORT_ISA_ENTRY(Isa::avx512);
  moments_impl<8>(p, n, acc);
}
COHORT_TARGET_AVX2 inline void moments_avx2(const float* p, std::size_t n, double* acc) {
  COHORT_ISA_ENTRY(Isa::avx2);
  moments_impl<4>(p, n, acc);
}
COHORT_TARGET_AVX512 inline void grad_sums_avx512(const float* x, const float* dy, const float* m, std::size_t n,
                                                  double* acc) {
  COHORT_ISA_ENTRY(Isa::avx512);
  grad_sums_impl<8>(x, dy, m, n, acc);
}
COHORT_TARGET_AVX2 inline void grad_sums_avx2(const float* x, const float* dy, const float* m, std::size_t n,
                                              double* acc) {
  COHORT_ISA_ENTRY(Isa::avx2);
  grad_sums_impl<4>(x, dy, m, n, acc);
}
/// Doubles per vector of the float path for an instruction set.
inline std::size_t bn_lanes(Isa isa) noexcept { return isa == Isa::avx512 ? 8 : 4; }
inline void moments(Isa isa, const float* p, std::size_t n, double* acc) {
  if (isa == Isa::avx512)
    moments_avx512(p, n, acc);
  else if (isa == Isa::avx2)
    moments_avx2(p, n, acc);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    moments_impl<4>(p, n, acc);
  }
}
inline void grad_sums(Isa isa, const float* x, const float* dy, const float* m, std::size_t n, double* acc) {
  if (isa == Isa::avx512)
    grad_sums_avx512(x, dy, m, n, acc);
  else if (isa == Isa::avx2)
    grad_sums_avx2(x, dy, m, n, acc);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    grad_sums_impl<4>(x, dy, m, n, acc);
  }
}
/// y = x * scale + shift (then the ReLU layer's rule when `relu`), the float path's one
/// normalisation loop: fused and unfused runs share it, so they agree bit for bit.
COHORT_ALWAYS_INLINE void normalize_impl(const float* __restrict x, float* __restrict y, std::size_t n, float scale,
                                         float shift, bool relu) {
  if (relu)
    for (std::size_t i = 0; i < n; ++i) {
      const float v = x[i] * scale + shift;
      y[i] = v > 0.f ? v : 0.f;
    }
  else
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}
/// One (H, W) plane normalised into `scratch`, then ReLU + 2x2 max-pool into `pooled`/`win`.
template <int W>
COHORT_ALWAYS_INLINE void normalize_relu_pool_impl(const float* x, std::size_t h, std::size_t w, float scale,
                                                   float shift, float* scratch, float* pooled, std::uint8_t* win) {
  normalize_impl(x, scratch, h * w, scale, shift, false);
  const std::size_t pw = w / 2;
  for (std::size_t ph = 0; ph < h / 2; ++ph)
    relu_pool_rows<W>(scratch + 2 * ph * w, scratch + (2 * ph + 1) * w, pw, pooled + ph * pw, win + ph * pw);
}
COHORT_TARGET_AVX512 inline void normalize_avx512(const float* x, float* y, std::size_t n, float a, float b, bool r) {
  COHORT_ISA_ENTRY(Isa::avx512);
  normalize_impl(x, y, n, a, b, r);
}
COHORT_TARGET_AVX2 inline void normalize_avx2(const float* x, float* y, std::size_t n, float a, float b, bool r) {
  COHORT_ISA_ENTRY(Isa::avx2);
  normalize_impl(x, y, n, a, b, r);
}
inline void normalize(Isa isa, const float* x, float* y, std::size_t n, float scale, float shift, bool relu) {
  if (isa == Isa::avx512)
    normalize_avx512(x, y, n, scale, shift, relu);
  else if (isa == Isa::avx2)
    normalize_avx2(x, y, n, scale, shift, relu);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    normalize_impl(x, y, n, scale, shift, relu);
  }
}
COHORT_TARGET_AVX512 inline void normalize_relu_pool_avx512(const float* x, std::size_t h, std::size_t w, float a,
                                                            float b, float* s, float* p, std::uint8_t* win) {
  COHORT_ISA_ENTRY(Isa::avx512);
  normalize_relu_pool_impl<16>(x, h, w, a, b, s, p, win);
}
COHORT_TARGET_AVX2 inline void normalize_relu_pool_avx2(const float* x, std::size_t h, std::size_t w, float a, float b,
                                                        float* s, float* p, std::uint8_t* win) {
  COHORT_ISA_ENTRY(Isa::avx2);
  normalize_relu_pool_impl<8>(x, h, w, a, b, s, p, win);
}
inline void normalize_relu_pool(Isa isa, const float* x, std::size_t h, std::size_t w, float scale, float shift,
                                float* scratch, float* pooled, std::uint8_t* win) {
  if (isa == Isa::avx512)
    normalize_relu_pool_avx512(x, h, w, scale, shift, scratch, pooled, win);
  else if (isa == Isa::avx2)
    normalize_relu_pool_avx2(x, h, w, scale, shift, scratch, pooled, win);
  else {
    COHORT_ISA_ENTRY(Isa::generic);
    normalize_relu_pool_impl<4>(x, h, w, scale, shift, scratch, pooled, win);
  }
}
/// Per-thread room for one plane plus the slack relu_pool_rows reads past it.
inline float* plane_scratch(std::size_t n) {
  thread_local HostBuffer<float> buffer;
  if (buffer.size() < n + 64) buffer.resize(n + 64);
  return buffer.data();
}

/// The two sums of an accumulator block of 4 x D lanes: lanes of (s0, s1) then of (q0, q1),
/// pairwise in a fixed order.
inline void lane_totals(const double* acc, std::size_t d, double& first, double& second) {
  double a[16], b[16];
  for (std::size_t l = 0; l < 2 * d; ++l) a[l] = acc[l], b[l] = acc[2 * d + l];
  for (std::size_t w = d; w > 0; w /= 2)
    for (std::size_t l = 0; l < w; ++l) a[l] += a[l + w], b[l] += b[l + w];
  first = a[0];
  second = b[0];
}
} // namespace cpu::detail

} // namespace cohort

#pragma once
/// \file
/// Runs an element rule (an optimiser update) over flat arrays, a vector of lanes at a time,
/// with the pool's threads splitting the range.
///
///     cpu::apply_elementwise(rule, n, params, grads, exp_avg, exp_avg_sq);
///
/// A rule is written once as `template <class V> void operator()(V& p, const V& g, V&... state)`: with
/// V = float for the tail and V = vec<W> for the body, so both compute the same operations in the
/// same order (sqrt and division are correctly rounded in both). Each element is updated by one
/// thread, so the result does not depend on the thread count.

#include <cmath>
#include <cstddef>

#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/core/macros.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

/// Square root of a scalar or of every lane (correctly rounded, as std::sqrt).
///
/// Built from the SSE square root, which belongs to the x86-64 baseline: a wider intrinsic carries
/// a target attribute, and GCC refuses to inline it into a generic rule (rules are templates
/// compiled for the default target before they are inlined into the AVX-512/AVX2 loops). In those
/// loops this is 2 or 4 VEX-encoded square roots per vector.
/// The scalar version is also device code: optimiser rules run in CUDA kernels too.
COHORT_HOST_DEVICE COHORT_ALWAYS_INLINE float vsqrt(float x) noexcept {
#if defined(__CUDA_ARCH__)
  return ::sqrtf(x); // IEEE-rounded unless -use_fast_math
#else
  return std::sqrt(x);
#endif
}
// In place, by reference: a template returning a vector is instantiated at the end of the
// translation unit, outside this file's -Wpsabi pragma, and GCC would warn users without -march.
template <int W>
COHORT_ALWAYS_INLINE void vsqrt_lanes(vec<W>& x) noexcept {
#if COHORT_X86
  for (int i = 0; i < W; i += 4) {
    vec<4> part;
    __builtin_memcpy(&part, reinterpret_cast<const float*>(&x) + i, sizeof part);
    part = __builtin_ia32_sqrtps(part);
    __builtin_memcpy(reinterpret_cast<float*>(&x) + i, &part, sizeof part);
  }
#else
  for (int i = 0; i < W; ++i) x[i] = std::sqrt(x[i]);
#endif
}
COHORT_ALWAYS_INLINE vec<4> vsqrt(const vec<4>& x) noexcept {
  vec<4> r = x;
  vsqrt_lanes<4>(r);
  return r;
}
COHORT_ALWAYS_INLINE vec<8> vsqrt(const vec<8>& x) noexcept {
  vec<8> r = x;
  vsqrt_lanes<8>(r);
  return r;
}
COHORT_ALWAYS_INLINE vec<16> vsqrt(const vec<16>& x) noexcept {
  vec<16> r = x;
  vsqrt_lanes<16>(r);
  return r;
}

namespace detail {
template <int W, class Rule, class... State>
COHORT_ALWAYS_INLINE void apply_range(const Rule& rule, std::size_t lo, std::size_t hi, float* __restrict p,
                                      const float* __restrict g, State* __restrict... s) {
  COHORT_ISA_ENTRY(isa_of_width(W));
  std::size_t i = lo;
  for (; i + W <= hi; i += W) {
    vec<W> pv = load<W>(p + i);
    const vec<W> gv = load<W>(g + i);
    // The state lanes by reference: a vector passed by value to a function compiled for the
    // baseline makes GCC print its ABI note in users' builds without -march.
    [&](auto&&... sv) {
      rule(pv, gv, sv...);
      (store<W>(s + i, sv), ...);
    }(vec<W>(load<W>(s + i))...);
    store<W>(p + i, pv);
  }
  for (; i < hi; ++i) rule(p[i], g[i], s[i]...);
}
} // namespace detail

/// rule(p[i], g[i], state[i]...) for i in [0, n), on `pool`'s threads.
template <class Rule, class... State>
void apply_elementwise(ThreadPool& pool, const Rule& rule, std::size_t n, float* p, const float* g, State*... state) {
#if defined(__CUDACC__)
  // In a CUDA translation unit the rules are __host__ __device__, and nvcc would also compile
  // their GCC-vector instantiations as device code, which it cannot: the scalar loop (the same
  // operations in the same order, so the same results, just not vectorised).
  pool.parallel_for(n, 32 * 1024, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) rule(p[i], g[i], state[i]...);
  });
#else
  const Isa isa = active_isa();
  pool.parallel_for(n, 32 * 1024, [&](std::size_t lo, std::size_t hi) {
    dispatch_isa(
        isa, [&]() COHORT_TARGET_AVX512 { detail::apply_range<16>(rule, lo, hi, p, g, state...); },
        [&]() COHORT_TARGET_AVX2 { detail::apply_range<8>(rule, lo, hi, p, g, state...); },
        [&] { detail::apply_range<4>(rule, lo, hi, p, g, state...); });
  });
#endif
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

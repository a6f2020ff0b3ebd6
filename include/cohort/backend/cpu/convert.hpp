#pragma once
/// \file
/// Storage <-> float conversions for the CPU kernels: kernels keep their float inner loops and
/// convert where data enters (padding, packing, loading a plane) and leaves (the epilogue).
///
///     cpu::load_floats(isa, x_half, scratch, n);    // half or bfloat16 -> float
///     cpu::store_floats(isa, scratch, y_half, n);   // float -> half or bfloat16, nearest even
///
/// half uses the F16C / AVX-512 conversion instructions where the CPU has them; bfloat16 is a
/// shift one way and an integer rounding the other. Every path rounds to nearest even and gives
/// the same bits as precision/half.hpp's scalar conversions.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cohort/backend/cpu/simd.hpp"
#include "cohort/precision/half.hpp"
#include "cohort/tensor/buffer.hpp"

#if COHORT_X86
#include <immintrin.h>
#endif

namespace cohort::cpu {

/// One element in float (T = float, double, half, bfloat16).
template <class T>
COHORT_ALWAYS_INLINE float to_float(T v) noexcept {
  return float(v);
}
/// One float stored as T (rounded to nearest even for the 16-bit types).
template <class T>
COHORT_ALWAYS_INLINE T from_float(float v) noexcept {
  return T(v);
}

/// Whether T is one of the 16-bit storage types (kernels then convert at their edges).
template <class T>
inline constexpr bool is_half_type = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

namespace detail {
COHORT_ALWAYS_INLINE void bf16_to_float_impl(const bfloat16* __restrict src, float* __restrict dst, std::size_t n) {
  const std::uint16_t* s = reinterpret_cast<const std::uint16_t*>(src);
  std::uint32_t* d = reinterpret_cast<std::uint32_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) d[i] = std::uint32_t(s[i]) << 16;
}
COHORT_ALWAYS_INLINE void float_to_bf16_impl(const float* __restrict src, bfloat16* __restrict dst, std::size_t n) {
  const std::uint32_t* s = reinterpret_cast<const std::uint32_t*>(src);
  std::uint16_t* d = reinterpret_cast<std::uint16_t*>(dst);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t x = s[i];
    const std::uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
    const std::uint32_t nan = (x >> 16) | 0x40u;
    d[i] = std::uint16_t((x & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
  }
}
COHORT_ALWAYS_INLINE void half_to_float_scalar(const half* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float(src[i]);
}
COHORT_ALWAYS_INLINE void float_to_half_scalar(const float* src, half* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = half(src[i]);
}

#if COHORT_X86
COHORT_TARGET_AVX512 inline void half_to_float_avx512(const half* src, float* dst, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx512);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    // The zero-masked forms: GCC 12's unmasked ones pass an "undefined" register it then warns
    // about (-Wmaybe-uninitialized) wherever they are inlined; the instruction is the same.
    _mm512_storeu_ps(dst + i,
                     _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  half_to_float_scalar(src + i, dst + i, n - i);
}
COHORT_TARGET_AVX512 inline void float_to_half_avx512(const float* src, half* dst, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx512);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(dst + i),
        _mm512_maskz_cvtps_ph(0xFFFF, _mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  float_to_half_scalar(src + i, dst + i, n - i);
}
COHORT_TARGET_AVX2 inline void half_to_float_avx2(const half* src, float* dst, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx2);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  half_to_float_scalar(src + i, dst + i, n - i);
}
COHORT_TARGET_AVX2 inline void float_to_half_avx2(const float* src, half* dst, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx2);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  float_to_half_scalar(src + i, dst + i, n - i);
}
COHORT_TARGET_AVX512 inline void bf16_to_float_avx512(const bfloat16* s, float* d, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx512);
  bf16_to_float_impl(s, d, n);
}
COHORT_TARGET_AVX512 inline void float_to_bf16_avx512(const float* s, bfloat16* d, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx512);
  float_to_bf16_impl(s, d, n);
}
COHORT_TARGET_AVX2 inline void bf16_to_float_avx2(const bfloat16* s, float* d, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx2);
  bf16_to_float_impl(s, d, n);
}
COHORT_TARGET_AVX2 inline void float_to_bf16_avx2(const float* s, bfloat16* d, std::size_t n) {
  COHORT_ISA_ENTRY(Isa::avx2);
  float_to_bf16_impl(s, d, n);
}
#endif
} // namespace detail

/// dst[i] = float(src[i]), i < n.
template <class T>
void load_floats(Isa isa, const T* src, float* dst, std::size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (src != dst) std::memcpy(dst, src, n * sizeof(float));
  } else if constexpr (std::is_same_v<T, half>) {
#if COHORT_X86
    if (isa == Isa::avx512) return detail::half_to_float_avx512(src, dst, n);
    if (isa == Isa::avx2) return detail::half_to_float_avx2(src, dst, n);
#endif
    COHORT_ISA_ENTRY(Isa::generic);
    detail::half_to_float_scalar(src, dst, n);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
#if COHORT_X86
    if (isa == Isa::avx512) return detail::bf16_to_float_avx512(src, dst, n);
    if (isa == Isa::avx2) return detail::bf16_to_float_avx2(src, dst, n);
#endif
    COHORT_ISA_ENTRY(Isa::generic);
    detail::bf16_to_float_impl(src, dst, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = float(src[i]);
  }
  (void)isa;
}

/// dst[i] = T(src[i]) (nearest even), i < n.
template <class T>
void store_floats(Isa isa, const float* src, T* dst, std::size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (src != dst) std::memcpy(dst, src, n * sizeof(float));
  } else if constexpr (std::is_same_v<T, half>) {
#if COHORT_X86
    if (isa == Isa::avx512) return detail::float_to_half_avx512(src, dst, n);
    if (isa == Isa::avx2) return detail::float_to_half_avx2(src, dst, n);
#endif
    COHORT_ISA_ENTRY(Isa::generic);
    detail::float_to_half_scalar(src, dst, n);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
#if COHORT_X86
    if (isa == Isa::avx512) return detail::float_to_bf16_avx512(src, dst, n);
    if (isa == Isa::avx2) return detail::float_to_bf16_avx2(src, dst, n);
#endif
    COHORT_ISA_ENTRY(Isa::generic);
    detail::float_to_bf16_impl(src, dst, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  }
  (void)isa;
}

/// Per-thread float room for converted data (grows, never shrinks), one per slot.
inline float* convert_scratch(int slot, std::size_t n) {
  thread_local HostBuffer<float> buffers[4];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

} // namespace cohort::cpu

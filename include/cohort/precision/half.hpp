#pragma once
/// \file
/// 16-bit floating-point storage types for host and device code: `half` (IEEE 754 binary16, the
/// bits of CUDA's __half) and `bfloat16` (the top half of a float, the bits of __nv_bfloat16).
/// Example (compiled: tests/docs/headers.cpp, "precision/half"):
///
///     cohort::half h(0.1f);            // rounded to nearest, ties to even
///     float f = float(h);              // exact
///
/// They are storage types: arithmetic happens in float (cohort accumulates every dot product and
/// reduction in float or wider). Conversions are written with integer operations only, so they
/// give the same bits on every compiler, on the host and in CUDA code.

#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "cohort/core/macros.hpp"

namespace cohort {

namespace detail {
COHORT_HOST_DEVICE constexpr std::uint32_t float_bits(float f) noexcept { return __builtin_bit_cast(std::uint32_t, f); }
COHORT_HOST_DEVICE constexpr float bits_float(std::uint32_t u) noexcept { return __builtin_bit_cast(float, u); }

/// float -> binary16, round to nearest even; overflow to infinity, NaN stays NaN (quiet),
/// subnormals rounded correctly.
COHORT_HOST_DEVICE constexpr std::uint16_t float_to_half_bits(float f) noexcept {
  const std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exp = (x >> 23) & 0xFFu;
  std::uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFFu) return std::uint16_t(sign | 0x7C00u | (mant ? 0x200u | (mant >> 13) : 0u)); // inf / NaN
  const int e = int(exp) - 127 + 15;                                                            // rebiased
  if (e >= 0x1F) return std::uint16_t(sign | 0x7C00u);                                          // overflow
  if (e <= 0) {                                                                                 // subnormal or 0
    if (e < -10) return std::uint16_t(sign);                                                    // below half the
    mant |= 0x800000u;                                                                          // smallest one
    const int shift = 14 - e;
    const std::uint32_t rounded = mant >> shift;
    const std::uint32_t rest = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    const std::uint32_t up = rest > halfway || (rest == halfway && (rounded & 1u));
    return std::uint16_t(sign | (rounded + up)); // a carry into the exponent is the right result
  }
  const std::uint32_t rounded = (std::uint32_t(e) << 10) | (mant >> 13);
  const std::uint32_t rest = mant & 0x1FFFu;
  const std::uint32_t up = rest > 0x1000u || (rest == 0x1000u && (rounded & 1u));
  return std::uint16_t(sign | (rounded + up)); // a carry may reach infinity: correct
}

/// binary16 -> float, exact.
COHORT_HOST_DEVICE constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  if (exp == 0x1Fu) return bits_float(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  int e = -14; // subnormal: normalise
  while (!(mant & 0x400u)) {
    mant <<= 1;
    --e;
  }
  return bits_float(sign | (std::uint32_t(e + 127) << 23) | ((mant & 0x3FFu) << 13));
}

/// float -> bfloat16, round to nearest even; NaN stays NaN (quiet).
COHORT_HOST_DEVICE constexpr std::uint16_t float_to_bfloat16_bits(float f) noexcept {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((x >> 16) | 0x40u);
  return std::uint16_t((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
COHORT_HOST_DEVICE constexpr float bfloat16_bits_to_float(std::uint16_t b) noexcept {
  return bits_float(std::uint32_t(b) << 16);
}
} // namespace detail

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 fraction bits; largest finite value 65504.
struct half {
  std::uint16_t bits = 0;
  constexpr half() = default;
  COHORT_HOST_DEVICE constexpr explicit half(float f) noexcept : bits(detail::float_to_half_bits(f)) {}
  COHORT_HOST_DEVICE constexpr explicit operator float() const noexcept { return detail::half_bits_to_float(bits); }
  COHORT_HOST_DEVICE static constexpr half from_bits(std::uint16_t b) noexcept {
    half h;
    h.bits = b;
    return h;
  }
  static constexpr std::string_view name = "fp16";
  static constexpr float max = 65504.f;
};

/// bfloat16: float's 8-bit exponent, 7 fraction bits.
struct bfloat16 {
  std::uint16_t bits = 0;
  constexpr bfloat16() = default;
  COHORT_HOST_DEVICE constexpr explicit bfloat16(float f) noexcept : bits(detail::float_to_bfloat16_bits(f)) {}
  COHORT_HOST_DEVICE constexpr explicit operator float() const noexcept { return detail::bfloat16_bits_to_float(bits); }
  COHORT_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  static constexpr std::string_view name = "bf16";
};

/// The names the precision policies use: `MixedPrecision<fp16>`, `MixedPrecision<bf16>`.
using fp16 = half;
using bf16 = bfloat16;

/// A 16-bit storage type cohort computes with (in float).
template <class H>
concept HalfType = std::is_same_v<H, half> || std::is_same_v<H, bfloat16>;

static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2, "16-bit types must be 2 bytes (same bits as CUDA's)");

} // namespace cohort

// half and bfloat16: round to nearest even, checked exhaustively against the definition and
// against the compiler's _Float16; the vectorised row conversions of every instruction set give
// the scalar conversions' bits.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <cohort/backend/cpu/convert.hpp>
#include <cohort/precision/half.hpp>

#include "support/skip.hpp"

using namespace cohort;

namespace {
std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool is_nan_half(std::uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu); }
} // namespace

TEST_CASE("half: every finite value survives half -> float -> half, and float order is kept") {
  REQUIRE(half(-std::numeric_limits<float>::infinity()).bits == 0xFC00u);
  float previous = -std::numeric_limits<float>::infinity();
  for (std::uint32_t h = 0xFBFFu; h > 0x8000u; --h) { // finite negative values, most negative first
    const float f = float(half::from_bits(std::uint16_t(h)));
    REQUIRE(half(f).bits == h);
    REQUIRE(f > previous);
    previous = f;
  }
  for (std::uint32_t h = 0; h <= 0x7C00u; ++h) { // +0 ... +inf
    const float f = float(half::from_bits(std::uint16_t(h)));
    REQUIRE(half(f).bits == h);
    if (h) REQUIRE(f > previous);
    previous = f;
  }
  CHECK(float(half::from_bits(0x7BFFu)) == 65504.f);
  CHECK(float(half::from_bits(0x0001u)) == std::ldexp(1.f, -24)); // smallest subnormal
}

TEST_CASE("half: rounding to nearest even at every midpoint between neighbours, overflow and NaN") {
  for (std::uint32_t h = 0; h < 0x7BFFu; ++h) {
    const float lo = float(half::from_bits(std::uint16_t(h))), hi = float(half::from_bits(std::uint16_t(h + 1)));
    const float mid = lo + (hi - lo) / 2; // exact in float
    const std::uint16_t even = (h & 1u) ? std::uint16_t(h + 1) : std::uint16_t(h);
    REQUIRE(half(mid).bits == even);
    REQUIRE(half(std::nextafter(mid, 0.f)).bits == h);
    REQUIRE(half(std::nextafter(mid, 1e9f)).bits == h + 1);
    REQUIRE(half(-mid).bits == (even | 0x8000u));
  }
  CHECK(half(65519.f).bits == 0x7BFFu); // below the midpoint to 2^16: the largest finite value
  CHECK(half(65520.f).bits == 0x7C00u); // the midpoint rounds to even: infinity
  CHECK(half(1e9f).bits == 0x7C00u);
  CHECK(half(-1e9f).bits == 0xFC00u);
  CHECK(half(std::ldexp(1.f, -25)).bits == 0);                            // half the smallest subnormal: to even (0)
  CHECK(half(std::nextafter(std::ldexp(1.f, -25), 1.f)).bits == 0x0001u); // just above: up
  CHECK(is_nan_half(half(std::numeric_limits<float>::quiet_NaN()).bits));
  CHECK(std::isnan(float(half(std::numeric_limits<float>::quiet_NaN()))));
}

#if defined(__FLT16_MAX__)
TEST_CASE("half: the same bits as the compiler's _Float16 for 2 million random floats") {
  std::mt19937 g(7);
  for (int i = 0; i < 2'000'000; ++i) {
    std::uint32_t u = g();
    if (i % 2) u = (u & 0x8FFFFFFFu) | 0x30000000u; // bias towards half's range
    const float f = from_bits(u);
    if (std::isnan(f)) continue;
    const _Float16 ref = _Float16(f);
    std::uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    REQUIRE(half(f).bits == rb);
  }
}
#endif

TEST_CASE("bfloat16: round to nearest even, exact widening, NaN stays NaN") {
  CHECK(bfloat16(1.f).bits == 0x3F80u);
  CHECK(float(bfloat16::from_bits(0x3F80u)) == 1.f);
  CHECK(bfloat16(from_bits(0x3F808000u)).bits == 0x3F80u); // tie, even stays
  CHECK(bfloat16(from_bits(0x3F818000u)).bits == 0x3F82u); // tie, odd rounds up
  CHECK(bfloat16(from_bits(0x3F808001u)).bits == 0x3F81u); // above the tie
  CHECK(bfloat16(from_bits(0x7F7FFFFFu)).bits == 0x7F80u); // float's max rounds to infinity
  CHECK(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  std::mt19937 g(3);
  for (int i = 0; i < 1'000'000; ++i) {
    const float f = from_bits(g());
    if (std::isnan(f)) continue;
    const float back = float(bfloat16(f));
    const std::uint32_t lo = bits(f) & 0xFFFF0000u;
    const float down = from_bits(lo), up = from_bits(lo + 0x10000u);
    // back is the nearer of down and up (ties to the even one)
    const double dd = std::abs(double(f) - double(down)), du = std::abs(double(f) - double(up));
    const float expect = dd < du ? down : du < dd ? up : (((lo >> 16) & 1u) ? up : down);
    if (std::isinf(up) && !std::isinf(f)) continue; // rounding towards infinity is checked above
    REQUIRE(bits(back) == bits(expect));
  }
}

namespace {
/// The rows of `isa` (called directly, whatever COHORT_ISA says) against the scalar conversions.
void check_conversion_rows(Isa isa) {
  std::mt19937 g(11);
  std::normal_distribution<float> normal(0.f, 100.f);
  std::vector<float> src(1037);
  for (auto& v : src) v = normal(g);
  src[5] = std::numeric_limits<float>::infinity();
  src[6] = std::numeric_limits<float>::quiet_NaN();
  src[7] = 70000.f;
  src[8] = 1e-7f;
  std::vector<half> h(src.size());
  std::vector<bfloat16> b(src.size());
  cpu::store_floats(isa, src.data(), h.data(), src.size());
  cpu::store_floats(isa, src.data(), b.data(), src.size());
  std::vector<float> hf(src.size()), bf(src.size());
  cpu::load_floats(isa, h.data(), hf.data(), h.size());
  cpu::load_floats(isa, b.data(), bf.data(), b.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    INFO("isa " << isa_name(isa) << " element " << i << " value " << src[i]);
    CHECK(h[i].bits == half(src[i]).bits);
    CHECK(b[i].bits == bfloat16(src[i]).bits);
    CHECK(bits(hf[i]) == bits(float(h[i])));
    CHECK(bits(bf[i]) == bits(float(b[i])));
  }
}
} // namespace

// One case per instruction set, so a CPU without AVX-512 reports that case as skipped rather
// than passing it untested.
TEST_CASE("Conversions: the scalar rows give the scalar bits") { check_conversion_rows(Isa::generic); }
TEST_CASE("Conversions: the AVX2 (F16C) rows give the scalar bits") {
  if (cpu::detected_isa() < Isa::avx2) COHORT_SKIP("this CPU has no AVX2");
  check_conversion_rows(Isa::avx2);
}
TEST_CASE("Conversions: the AVX-512 rows give the scalar bits") {
  if (cpu::detected_isa() < Isa::avx512) COHORT_SKIP("this CPU has no AVX-512");
  check_conversion_rows(Isa::avx512);
}

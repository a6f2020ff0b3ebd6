// The bf16 GEMM engines: AVX512-BF16 against a scalar model of VDPBF16PS (bit for bit), AMX
// against exact sums within float rounding; odd k, partial panels and row blocks, accumulation,
// padded strides (never written) and subnormal inputs (read as zero).

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cohort/backend/cpu/gemm_bf16.hpp>

#include "support/skip.hpp"

using namespace cohort;

namespace {
void check_gemm_bf16(cpu::Bf16Dot engine, bool trans_b, std::size_t m, std::size_t n, std::size_t k, bool accumulate,
                     unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  const std::size_t lda = k + 3, ldb = (trans_b ? k : n) + 2, ldc = n + 5;
  std::vector<bfloat16> a(m * lda), b((trans_b ? n : k) * ldb);
  std::vector<float> c(m * ldc);
  for (auto& v : a) v = bfloat16(normal(gen));
  for (auto& v : b) v = bfloat16(normal(gen));
  for (auto& v : c) v = normal(gen);
  if (k > 2) { // subnormal bf16 inputs count as zero
    a[1] = bfloat16::from_bits(0x0001);
    b[trans_b ? 1 : ldb] = bfloat16::from_bits(0x8003);
  }
  std::vector<float> expected = c;
  std::vector<double> bound(c.size(), 0.0);
  const auto daz = [](bfloat16 v) { return std::fpclassify(float(v)) == FP_SUBNORMAL ? 0.0 : double(float(v)); };
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const bfloat16* col = trans_b ? b.data() + j * ldb : b.data() + j;
      const std::size_t stride = trans_b ? 1 : ldb;
      const float c0 = accumulate ? c[i * ldc + j] : 0.f;
      if (engine == cpu::Bf16Dot::avx512) {
        expected[i * ldc + j] = cpu::bf16_dot_reference(c0, a.data() + i * lda, col, k, stride);
      } else { // exact sum, and k + 1 float roundings of at most the running magnitude
        double sum = c0, magnitude = std::abs(c0);
        for (std::size_t p = 0; p < k; ++p) {
          const double t = daz(a[i * lda + p]) * daz(col[p * stride]);
          sum += t, magnitude += std::abs(t);
        }
        expected[i * ldc + j] = float(sum);
        bound[i * ldc + j] = double(k + 1) * std::ldexp(magnitude, -24);
      }
    }
  std::vector<bfloat16> packed(cpu::packed_bf16_size(k, n));
  cpu::pack_bf16_pairs(b.data(), trans_b, ldb, k, n, packed.data());
  ThreadPool pool(2);
  cpu::gemm_bf16(pool, engine, m, n, k, a.data(), lda, packed.data(), c.data(), ldc, accumulate);
  INFO("engine=" << int(engine) << " trans_b=" << trans_b << " m=" << m << " n=" << n << " k=" << k
                 << " accumulate=" << accumulate);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < ldc; ++j) { // padding columns keep their values too
      const std::size_t e = i * ldc + j;
      if (j >= n || engine == cpu::Bf16Dot::avx512)
        wrong += std::memcmp(&c[e], &expected[e], sizeof(float)) != 0;
      else
        wrong += !(std::abs(double(c[e]) - double(expected[e])) <= bound[e]);
    }
  CHECK(wrong == 0);
}

void check_engine(cpu::Bf16Dot engine) {
  unsigned seed = 1;
  for (bool trans_b : {false, true})
    for (bool accumulate : {false, true}) {
      check_gemm_bf16(engine, trans_b, 1, 1, 1, accumulate, seed++);
      check_gemm_bf16(engine, trans_b, 8, 16, 2, accumulate, seed++);
      check_gemm_bf16(engine, trans_b, 13, 37, 9, accumulate, seed++);    // partial tiles, odd k
      check_gemm_bf16(engine, trans_b, 17, 10, 600, accumulate, seed++);  // k spans cache blocks
      check_gemm_bf16(engine, trans_b, 64, 128, 513, accumulate, seed++); // odd k after a block edge
      check_gemm_bf16(engine, trans_b, 70, 96, 64, accumulate, seed++);   // whole AMX blocks and an edge
    }
}
} // namespace

TEST_CASE("gemm_bf16: AVX512-BF16 (VDPBF16PS) equals the scalar model bit for bit") {
  if (!cpu::has_avx512_bf16()) COHORT_SKIP("this CPU has no AVX512-BF16 (or COHORT_ISA turned AVX-512 off)");
  check_engine(cpu::Bf16Dot::avx512);
}

TEST_CASE("gemm_bf16: AMX (TDPBF16PS) equals exact sums within float rounding") {
  if (!cpu::has_amx_bf16()) COHORT_SKIP("this CPU has no AMX-BF16, or the kernel did not grant the tile state");
  check_engine(cpu::Bf16Dot::amx);
}

TEST_CASE("gemm_bf16: packing puts k pairs side by side in 16-column panels, zero-padded") {
  const std::size_t k = 3, n = 18;
  std::vector<bfloat16> b(k * n);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = bfloat16(float(i + 1));
  std::vector<bfloat16> p(cpu::packed_bf16_size(k, n));
  REQUIRE(p.size() == 2 * 16 * 32); // 2 panels x 16 pairs (padded for AMX) x 32 values
  cpu::pack_bf16_pairs(b.data(), false, n, k, n, p.data());
  CHECK(float(p[0]) == 1.f);           // b[0][0]
  CHECK(float(p[1]) == 1.f + 18.f);    // b[1][0]
  CHECK(float(p[2]) == 2.f);           // b[0][1]
  CHECK(float(p[32]) == 37.f);         // pair 1: b[2][0]
  CHECK(float(p[33]) == 0.f);          // b[3][0] does not exist
  CHECK(float(p[64]) == 0.f);          // pair 2: padding
  CHECK(float(p[16 * 32]) == 17.f);    // panel 1: b[0][16]
  CHECK(float(p[16 * 32 + 4]) == 0.f); // column 18 does not exist
}

TEST_CASE("gemm_bf16: the engine is AMX where present, else AVX512-BF16 where measured faster than FMAs, else none") {
  if (std::getenv("COHORT_BF16_DOT")) COHORT_SKIP("COHORT_BF16_DOT pins the engine in this run");
  const double speedup = cpu::avx512_bf16_speedup();
  MESSAGE("VDPBF16PS / FMA multiply-adds per second on this core: "
          << speedup << "; engine " << std::string(cpu::bf16_dot_name(cpu::bf16_dot_engine())));
  if (!cpu::has_avx512_bf16()) CHECK(speedup == 0.0);
  const cpu::Bf16Dot expected = cpu::has_amx_bf16()                       ? cpu::Bf16Dot::amx
                                : speedup >= cpu::avx512_bf16_min_speedup ? cpu::Bf16Dot::avx512
                                                                          : cpu::Bf16Dot::none;
  CHECK(cpu::bf16_dot_engine() == expected);
#if COHORT_X86
  // The measurement is stable enough to decide on: another one lands on the same side.
  if (cpu::has_avx512_bf16()) {
    double fma = 0, dot = 0;
    for (int round = 0; round < 3; ++round)
      fma = std::max(fma, cpu::detail::fma_rate(8000)), dot = std::max(dot, cpu::detail::bf16_dot_rate(8000));
    CHECK((dot / fma >= cpu::avx512_bf16_min_speedup) == (speedup >= cpu::avx512_bf16_min_speedup));
  }
#endif
}

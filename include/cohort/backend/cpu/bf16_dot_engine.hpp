#pragma once
/// \file
/// Which bf16 dot-product hardware the bf16 kernels (gemm_bf16.hpp, the AMX and AVX512-BF16
/// convolutions) run on: AMX tiles where the CPU has them and Linux grants the tile state,
/// AVX512-BF16 where it measurably beats float FMAs on this core, else none
/// (COHORT_BF16_DOT=amx|avx512|off overrides where the CPU allows).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cohort/backend/cpu/simd.hpp"

#if COHORT_X86
#include <cpuid.h>
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

/// The bf16 dot-product hardware gemm_bf16 runs on.
enum class Bf16Dot : std::uint8_t { none, avx512, amx };

/// Whether the CPU has AVX512-BF16 (and the AVX-512 kernels are enabled: COHORT_ISA not narrower).
inline bool has_avx512_bf16() noexcept {
#if COHORT_X86
  static const bool ok = [] {
    if (!compiled_isa(Isa::avx512) || active_isa() != Isa::avx512) return false;
    __builtin_cpu_init();
    return bool(__builtin_cpu_supports("avx512bf16"));
  }();
  return ok;
#else
  return false;
#endif
}

/// Whether the CPU has AMX-BF16 and the kernel lets this process use the tile registers
/// (Linux >= 5.16 grants them per process on request; the request is made once, here).
inline bool has_amx_bf16() noexcept {
#if COHORT_X86 && defined(__linux__)
  static const bool ok = [] {
    if (!has_avx512_bf16()) return false;
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = edx & (1u << 22), amx_tile = edx & (1u << 24);
    if (!amx_bf16 || !amx_tile) return false;
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

#if COHORT_X86
namespace detail {
/// Independent accumulator chains of the throughput probes: enough to cover the latency of every
/// dot-product or FMA port of current cores.
inline constexpr int probe_chains = 24;
/// Multiply-adds per second of `iters` rounds of probe_chains dependent FMAs (16 lanes).
__attribute__((target("avx512f,fma"), noinline)) inline double fma_rate(long iters) noexcept {
  __m512 acc[probe_chains];
#pragma GCC unroll 32
  for (int i = 0; i < probe_chains; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  const auto t0 = std::chrono::steady_clock::now();
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < probe_chains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float sink = 0;
#pragma GCC unroll 32
  for (int i = 0; i < probe_chains; ++i) sink += _mm512_cvtss_f32(acc[i]);
  asm volatile("" ::"x"(sink)); // the sums are used: the loop stays
  return double(iters) * probe_chains * 16 / s;
}
/// The same for VDPBF16PS (32 multiply-adds an instruction).
__attribute__((target("avx512f,avx512bf16"), noinline)) inline double bf16_dot_rate(long iters) noexcept {
  __m512 acc[probe_chains];
#pragma GCC unroll 32
  for (int i = 0; i < probe_chains; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
  const auto t0 = std::chrono::steady_clock::now();
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < probe_chains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  float sink = 0;
#pragma GCC unroll 32
  for (int i = 0; i < probe_chains; ++i) sink += _mm512_cvtss_f32(acc[i]);
  asm volatile("" ::"x"(sink));
  return double(iters) * probe_chains * 32 / s;
}
} // namespace detail
#endif

/// VDPBF16PS's multiply-adds per second over float FMAs' on this core, measured once (under a
/// millisecond: five alternating rounds of each, the best of each kept, so a busy machine slows
/// both alike); 0 without AVX512-BF16. Zen 4: 2.0. Sapphire Rapids: at most 1 (one VDPBF16PS a
/// cycle against two FMAs; a micro-benchmark there gave 0.4), and AMX is preferred there anyway.
inline double avx512_bf16_speedup() noexcept {
#if COHORT_X86
  static const double ratio = [] {
    if (!has_avx512_bf16()) return 0.0;
    constexpr long iters = 8000; // ~200k instructions a round
    double fma = 0, dot = 0;
    (void)detail::fma_rate(iters / 4), (void)detail::bf16_dot_rate(iters / 4); // wake the vector units
    for (int round = 0; round < 5; ++round)
      fma = std::max(fma, detail::fma_rate(iters)), dot = std::max(dot, detail::bf16_dot_rate(iters));
    return fma > 0 ? dot / fma : 0.0;
  }();
  return ratio;
#else
  return 0.0;
#endif
}

/// Where AVX512-BF16 is chosen without AMX: its dot products must beat FMAs by this much
/// (2.0 on Zen 4, at most 1 on Sapphire Rapids: far enough from either that timing noise cannot
/// flip the choice between runs, and with it the last bits of results).
inline constexpr double avx512_bf16_min_speedup = 1.4;

/// The engine the kernels use (see the file comment): COHORT_BF16_DOT=amx|avx512|off where the
/// CPU has it, else AMX where available, else AVX512-BF16 where measured faster than float FMAs,
/// else none.
inline Bf16Dot bf16_dot_engine() noexcept {
  static const Bf16Dot engine = [] {
    const char* env = std::getenv("COHORT_BF16_DOT");
    const std::string_view want = env ? env : "";
    if (want == "off" || want == "0") return Bf16Dot::none;
    if (want == "avx512") return has_avx512_bf16() ? Bf16Dot::avx512 : Bf16Dot::none;
    if (want == "amx") return has_amx_bf16() ? Bf16Dot::amx : Bf16Dot::none;
    if (has_amx_bf16()) return Bf16Dot::amx;
    return avx512_bf16_speedup() >= avx512_bf16_min_speedup ? Bf16Dot::avx512 : Bf16Dot::none;
  }();
  return engine;
}

/// The engine's name, for logs: "amx", "avx512-bf16" or "none".
inline const char* bf16_dot_name(Bf16Dot engine) noexcept {
  return engine == Bf16Dot::amx ? "amx" : engine == Bf16Dot::avx512 ? "avx512-bf16" : "none";
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

#pragma once
/// \file
/// bfloat16 GEMM on bf16 dot-product hardware: C (float) (+)= A (bf16) * B (bf16), fp32
/// accumulation, on Intel AMX tiles (TDPBF16PS) or AVX512-BF16 vectors (VDPBF16PS).
///
///     const cpu::Bf16Dot engine = cpu::bf16_dot_engine();   // none: use the float kernels
///     if (engine != cpu::Bf16Dot::none) {
///       cpu::pack_bf16_pairs(b, trans_b, ldb, k, n, packed);  // once per B
///       cpu::gemm_bf16(pool, engine, m, n, k, a, lda, packed.data(), c, ldc, accumulate);
///     }
///
/// Both instructions multiply *pairs* of bf16 values along k and add them to one float lane, so
/// B is packed in panels of 16 columns where consecutive k pairs are interleaved (b[2q][j],
/// b[2q+1][j]): a 16-pair slice of a panel is exactly an AMX B tile (16 rows of 64 bytes), and
/// a pair row is one zmm for VDPBF16PS. A is read in rows (a[i][2q], a[i][2q+1] are adjacent).
///
/// Which engine: AMX where the CPU has it and Linux grants the tile state. Otherwise AVX512-BF16
/// where it *measurably* beats float FMAs on the running CPU (avx512_bf16_speedup()): how fast
/// VDPBF16PS issues differs between CPUs more than the instruction sets say. On Sapphire Rapids
/// it reached 92 GFLOP/s per core against 239 for FP32 FMAs (converting to float wins there; AMX
/// reaches 3,700); on Zen 4 it does 32 multiply-adds at an FMA's rate of 16 (2.0x). Otherwise
/// none: the float kernels. COHORT_BF16_DOT=amx|avx512|off pins the choice.
///
/// Numerics: bf16 products are exact in float; the sums are rounded to nearest even in float, with
/// bf16 subnormal inputs read as zero and subnormal results flushed to zero (both instructions).
/// VDPBF16PS adds a pair's odd product first, then the even one (Intel SDM); `bf16_dot_reference`
/// computes the same bits without the instruction. AMX's order inside a tile is not specified, so
/// it is checked against exact sums with a rounding bound. Either way results differ from the float
/// path (convert, then SGEMM) in the last bits, and between machines with different engines. Each
/// element of C is summed by one thread in a fixed order: results do not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>

#include "cohort/backend/cpu/bf16_dot_engine.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/precision/half.hpp"
#include "cohort/tensor/buffer.hpp"

#if COHORT_X86
#include <immintrin.h>
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

/// Columns per packed panel (one zmm of float accumulators).
inline constexpr std::size_t bf16_panel = 16;

/// k pairs of a packed panel: rounded up to 16 (one AMX B tile) with zeros.
constexpr std::size_t packed_bf16_pairs(std::size_t k) noexcept { return ((k + 1) / 2 + 15) / 16 * 16; }
/// Panels of a packed B: n / 16 rounded up to an even count (the kernels take two at a time).
constexpr std::size_t packed_bf16_panels(std::size_t n) noexcept {
  return ((n + bf16_panel - 1) / bf16_panel + 1) / 2 * 2;
}
/// Elements of B packed for gemm_bf16.
constexpr std::size_t packed_bf16_size(std::size_t k, std::size_t n) noexcept {
  return packed_bf16_panels(n) * packed_bf16_pairs(k) * 2 * bf16_panel;
}

/// Packs B (k x n; stored as k rows of stride ldb, or, with `trans_b`, as n rows of stride ldb)
/// into panels of 16 columns: panel p holds, for each pair q, the 32 values b[2q][j], b[2q+1][j]
/// for j = 16p..16p+15. Rows past k and columns past n are zeros.
inline void pack_bf16_pairs(const bfloat16* b, bool trans_b, std::size_t ldb, std::size_t k, std::size_t n,
                            bfloat16* out) {
  const std::size_t pairs = packed_bf16_pairs(k), panels = packed_bf16_panels(n);
  std::fill(out, out + packed_bf16_size(k, n), bfloat16{});
  for (std::size_t p = 0; p < panels; ++p) {
    const std::size_t j0 = p * bf16_panel, cols = j0 < n ? std::min(bf16_panel, n - j0) : 0;
    bfloat16* panel = out + p * pairs * 2 * bf16_panel;
    // Whole pairs move as 32-bit words (the layers repack their weights every step: a
    // per-element loop cost C's 6272 x 64 layer about as much as its products).
    const std::size_t whole = k / 2;
    if (trans_b) { // b[j][row]: a pair (b[j][2q], b[j][2q+1]) is one word of the source
      for (std::size_t j = 0; j < cols; ++j) {
        const bfloat16* src = b + (j0 + j) * ldb;
        for (std::size_t q = 0; q < whole; ++q) std::memcpy(panel + (q * bf16_panel + j) * 2, src + 2 * q, 4);
        if (k % 2) panel[(whole * bf16_panel + j) * 2] = src[k - 1];
      }
    } else { // b[row][j]: rows 2q and 2q+1 interleave
      for (std::size_t q = 0; 2 * q < k; ++q) {
        std::uint16_t even[bf16_panel] = {}, odd[bf16_panel] = {};
        std::memcpy(even, b + 2 * q * ldb + j0, cols * 2);
        if (2 * q + 1 < k) std::memcpy(odd, b + (2 * q + 1) * ldb + j0, cols * 2);
        std::uint32_t words[bf16_panel];
        for (std::size_t j = 0; j < bf16_panel; ++j) words[j] = std::uint32_t(even[j]) | std::uint32_t(odd[j]) << 16;
        std::memcpy(panel + q * 2 * bf16_panel, words, sizeof words);
      }
    }
  }
}

namespace detail {

/// bf16 -> float with VDPBF16PS's input rule: subnormals read as zero.
inline float bf16_daz(bfloat16 v) noexcept {
  const float f = float(v);
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.f, f) : f;
}
/// acc + a*b rounded once, subnormal results flushed to zero.
inline float fma_ftz(float acc, float a, float b) noexcept {
  const float r = std::fma(a, b, acc);
  return std::fpclassify(r) == FP_SUBNORMAL ? std::copysign(0.f, r) : r;
}

} // namespace detail

/// One element of gemm_bf16's result, computed as VDPBF16PS does (tests compare the kernel with
/// it bit for bit): acc over pairs q of (a[2q+1]*b[2q+1], then a[2q]*b[2q]).
inline float bf16_dot_reference(float acc, const bfloat16* a, const bfloat16* b, std::size_t k, std::size_t b_stride) {
  for (std::size_t q = 0; 2 * q < k; ++q) {
    if (2 * q + 1 < k)
      acc = detail::fma_ftz(acc, detail::bf16_daz(a[2 * q + 1]), detail::bf16_daz(b[(2 * q + 1) * b_stride]));
    acc = detail::fma_ftz(acc, detail::bf16_daz(a[2 * q]), detail::bf16_daz(b[2 * q * b_stride]));
  }
  return acc;
}

#if COHORT_X86
namespace detail {

#define COHORT_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))
#define COHORT_TARGET_AMX_BF16                                                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,amx-tile,amx-bf16")))

#define COHORT_AMX_INLINE COHORT_TARGET_AMX_BF16 inline __attribute__((always_inline))

// AMX tile instructions. GCC's _tile_* macros paste their tile argument into the instruction as
// text (so it cannot be a template parameter) and declare no memory effects (so the compiler may
// move ordinary loads and stores of the same buffers across them); these take the tile number as
// a constant operand and tell the compiler that loads read and stores write memory.
template <int T>
COHORT_AMX_INLINE void tile_load(const void* p, std::size_t stride) {
  asm volatile("{tileloadd\t(%0,%1,1), %%tmm%c2|tileloadd\t%%tmm%c2, [%0+%1*1]}" ::"r"(p), "r"(stride), "i"(T)
               : "memory");
}
template <int T>
COHORT_AMX_INLINE void tile_store(void* p, std::size_t stride) {
  asm volatile("{tilestored\t%%tmm%c2, (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm%c2}" ::"r"(p), "r"(stride), "i"(T)
               : "memory");
}
template <int T>
COHORT_AMX_INLINE void tile_zero() {
  asm volatile("tilezero\t%%tmm%c0" ::"i"(T));
}
/// C += A * B over bf16 pairs (TDPBF16PS).
template <int C, int A, int B>
COHORT_AMX_INLINE void tile_dot() {
  asm volatile("{tdpbf16ps\t%%tmm%c2, %%tmm%c1, %%tmm%c0|tdpbf16ps\t%%tmm%c0, %%tmm%c1, %%tmm%c2}" ::"i"(C), "i"(A),
               "i"(B));
}

/// Rows of A per register tile, and pairs of k per cache block (the packed B block, 16 KiB per
/// panel, stays in L2 while every row block passes over it).
inline constexpr std::size_t bf16_mr = 8, bf16_kc_pairs = 256;

/// One pair of k for bf16_tile: acc[r][p] += (a_r[at], a_r[at+1]) . B pair row of panel p.
/// `Bytes` 2: the pair is (a_r[at], 0), the last of an odd k.
template <std::size_t MR, std::size_t NP, std::size_t Bytes>
COHORT_TARGET_AVX512_BF16 inline __attribute__((always_inline)) void
bf16_step(__m512 (&acc)[MR][NP], const bfloat16* const (&ar)[MR], const bfloat16* b, std::size_t panel_stride,
          std::size_t at) {
  __m512bh bv[NP];
#pragma GCC unroll 32
  for (std::size_t p = 0; p < NP; ++p) bv[p] = (__m512bh)_mm512_loadu_si512(b + p * panel_stride);
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) {
    std::uint32_t pair = 0;
    std::memcpy(&pair, ar[r] + at, Bytes);
    const __m512bh av = (__m512bh)_mm512_set1_epi32(int(pair)); // a broadcast load
#pragma GCC unroll 32
    for (std::size_t p = 0; p < NP; ++p) acc[r][p] = _mm512_dpbf16_ps(acc[r][p], av, bv[p]);
  }
}

/// C[MR x NP*16] (+)= A[MR rows, pairs q0..q1) * packed B panels, accumulators in registers.
/// `last_half`: the block ends with an odd k, whose pair is (a[k-1], 0).
template <std::size_t MR, std::size_t NP>
COHORT_TARGET_AVX512_BF16 inline void
bf16_tile(const bfloat16* a, std::size_t lda, const bfloat16* bp, std::size_t panel_stride, std::size_t q0,
          std::size_t q1, bool last_half, float* c, std::size_t ldc, bool load_c, std::size_t rows, std::size_t cols) {
  __m512 acc[MR][NP];
  const __mmask16 tail = cols >= NP * 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - (NP - 1) * 16)) - 1);
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 32
    for (std::size_t p = 0; p < NP; ++p) {
      const __mmask16 m = p + 1 < NP ? __mmask16(0xFFFF) : tail;
      acc[r][p] = load_c && r < rows ? _mm512_maskz_loadu_ps(m, c + r * ldc + p * 16) : _mm512_setzero_ps();
    }
  // Rows past `rows` repeat row 0 (their sums are dropped): no branch in the loop.
  const bfloat16* ar[MR];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) ar[r] = a + (r < rows ? r : 0) * lda;
  // The pair q of an odd k's last block is (a[k-1], 0): its second value is not read (the
  // packed B holds zeros opposite it).
  const std::size_t q_whole = last_half ? q1 - 1 : q1;
  for (std::size_t q = q0; q < q_whole; ++q)
    bf16_step<MR, NP, 4>(acc, ar, bp + (q - q0) * 2 * bf16_panel, panel_stride, 2 * q);
  if (last_half) bf16_step<MR, NP, 2>(acc, ar, bp + (q_whole - q0) * 2 * bf16_panel, panel_stride, 2 * q_whole);
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 32
    for (std::size_t p = 0; p < NP; ++p) {
      const __mmask16 m = p + 1 < NP ? __mmask16(0xFFFF) : tail;
      // r < MR with a test, not r < rows: a run-time index would keep acc in memory.
      if (r < rows) _mm512_mask_storeu_ps(c + r * ldc + p * 16, m, acc[r][p]);
    }
}

/// Rows [i0, i1) of C (+)= A * packed B, k blocked so the packed block stays in cache.
COHORT_TARGET_AVX512_BF16 inline void gemm_bf16_rows(std::size_t i0, std::size_t i1, std::size_t n, std::size_t k,
                                                     const bfloat16* a, std::size_t lda, const bfloat16* bp, float* c,
                                                     std::size_t ldc, bool accumulate) {
  // Real pairs and panels (the packed B has zero padding past them).
  const std::size_t pairs = (k + 1) / 2, panels = (n + bf16_panel - 1) / bf16_panel;
  const std::size_t panel_stride = packed_bf16_pairs(k) * 2 * bf16_panel;
  for (std::size_t q0 = 0; q0 < pairs; q0 += bf16_kc_pairs) {
    const std::size_t q1 = std::min(pairs, q0 + bf16_kc_pairs);
    const bool last_half = q1 == pairs && k % 2 == 1, load_c = accumulate || q0 > 0;
    for (std::size_t i = i0; i < i1; i += bf16_mr) {
      const std::size_t rows = std::min(bf16_mr, i1 - i);
      const bfloat16* ai = a + i * lda;
      std::size_t p = 0;
      for (; p + 2 <= panels; p += 2) {
        const std::size_t cols = std::min<std::size_t>(32, n - p * bf16_panel);
        bf16_tile<bf16_mr, 2>(ai, lda, bp + p * panel_stride + q0 * 2 * bf16_panel, panel_stride, q0, q1, last_half,
                              c + i * ldc + p * bf16_panel, ldc, load_c, rows, cols);
      }
      if (p < panels)
        bf16_tile<bf16_mr, 1>(ai, lda, bp + p * panel_stride + q0 * 2 * bf16_panel, panel_stride, q0, q1, last_half,
                              c + i * ldc + p * bf16_panel, ldc, load_c, rows, n - p * bf16_panel);
    }
  }
}

/// AMX tile configuration (palette 1): tiles 0-3 accumulate a 32 x 32 block of C (2 x 2 tiles of
/// 16 x 16 floats), 4-5 hold two 16-row slices of A, 6-7 two panels of B; all 16 rows x 64 bytes.
struct alignas(64) AmxConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

/// Rows [i0, i1) of C (+)= A * packed B on AMX tiles, in 32 x 32 blocks of C. A's rows are copied
/// into `apack` (32 x kpad, zero-padded: tiles load whole 16 x 32 slices); blocks of C at the
/// edges go through `edge` (32 x 32) so nothing past C's rows or columns is read or written.
COHORT_TARGET_AMX_BF16 inline void gemm_bf16_amx_rows(std::size_t i0, std::size_t i1, std::size_t n, std::size_t k,
                                                      const bfloat16* a, std::size_t lda, const bfloat16* bp, float* c,
                                                      std::size_t ldc, bool accumulate, bfloat16* apack) {
  const std::size_t pairs = packed_bf16_pairs(k), kpad = 2 * pairs;
  const std::size_t panel_stride = pairs * 2 * bf16_panel, real_panels = (n + bf16_panel - 1) / bf16_panel;
  alignas(64) float edge[32 * 32];
  const AmxConfig config;
  _tile_loadconfig(&config);
  for (std::size_t i = i0; i < i1; i += 32) {
    const std::size_t rows = std::min<std::size_t>(32, i1 - i);
    for (std::size_t r = 0; r < 32; ++r) {
      bfloat16* dst = apack + r * kpad;
      const std::size_t valid = r < rows ? k : 0;
      if (valid) std::copy(a + (i + r) * lda, a + (i + r) * lda + k, dst);
      std::fill(dst + valid, dst + kpad, bfloat16{});
    }
    for (std::size_t p = 0; p < real_panels; p += 2) {
      const std::size_t cols = std::min<std::size_t>(32, n - p * bf16_panel);
      const bool whole = rows == 32 && cols == 32;
      float* cb = c + i * ldc + p * bf16_panel;
      float* dst = whole ? cb : edge;
      const std::size_t ld = whole ? ldc : 32;
      if (accumulate && !whole)
        for (std::size_t r = 0; r < 32; ++r)
          for (std::size_t j = 0; j < 32; ++j) edge[r * 32 + j] = r < rows && j < cols ? cb[r * ldc + j] : 0.f;
      if (accumulate) {
        tile_load<0>(dst, ld * 4);
        tile_load<1>(dst + 16, ld * 4);
        tile_load<2>(dst + 16 * ld, ld * 4);
        tile_load<3>(dst + 16 * ld + 16, ld * 4);
      } else {
        tile_zero<0>();
        tile_zero<1>();
        tile_zero<2>();
        tile_zero<3>();
      }
      const bfloat16* b0 = bp + p * panel_stride;
      const bfloat16* b1 = b0 + panel_stride; // exists: packed panels come in pairs
      for (std::size_t kc = 0; kc < kpad; kc += 32) {
        tile_load<4>(apack + kc, kpad * 2);
        tile_load<5>(apack + 16 * kpad + kc, kpad * 2);
        tile_load<6>(b0 + kc * bf16_panel, 64);
        tile_load<7>(b1 + kc * bf16_panel, 64);
        tile_dot<0, 4, 6>();
        tile_dot<1, 4, 7>();
        tile_dot<2, 5, 6>();
        tile_dot<3, 5, 7>();
      }
      tile_store<0>(dst, ld * 4);
      tile_store<1>(dst + 16, ld * 4);
      tile_store<2>(dst + 16 * ld, ld * 4);
      tile_store<3>(dst + 16 * ld + 16, ld * 4);
      if (!whole)
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t j = 0; j < cols; ++j) cb[r * ldc + j] = edge[r * 32 + j];
    }
  }
  _tile_release(); // no tile state kept across calls (or context switches)
}

} // namespace detail
#endif

/// C (m x n, row stride ldc) = A * B, or C += A * B with `accumulate`; A is m x k bf16 (row
/// stride lda), B packed by pack_bf16_pairs. Rows of C are split between `pool`'s threads in
/// blocks. `engine` must be available on this CPU (bf16_dot_engine(), has_amx_bf16(), ...).
inline void gemm_bf16(ThreadPool& pool, Bf16Dot engine, std::size_t m, std::size_t n, std::size_t k, const bfloat16* a,
                      std::size_t lda, const bfloat16* b_packed, float* c, std::size_t ldc, bool accumulate) {
  if (engine == Bf16Dot::none) throw std::logic_error("gemm_bf16: no bf16 dot-product engine on this CPU");
  COHORT_ISA_ENTRY(Isa::avx512); // both engines are AVX-512 code (has_avx512_bf16, has_amx_bf16)
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (std::size_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
#if COHORT_X86
  if (engine == Bf16Dot::amx) {
    const std::size_t blocks = (m + 31) / 32, kpad = 2 * packed_bf16_pairs(k);
    pool.parallel_for(blocks, 1, [&](std::size_t lo, std::size_t hi) {
      thread_local HostBuffer<bfloat16> apack;
      if (apack.size() < 32 * kpad) apack.resize(32 * kpad);
      detail::gemm_bf16_amx_rows(lo * 32, std::min(m, hi * 32), n, k, a, lda, b_packed, c, ldc, accumulate,
                                 apack.data());
    });
    return;
  }
  const std::size_t blocks = (m + detail::bf16_mr - 1) / detail::bf16_mr;
  pool.parallel_for(blocks, 1, [&](std::size_t lo, std::size_t hi) {
    detail::gemm_bf16_rows(lo * detail::bf16_mr, std::min(m, hi * detail::bf16_mr), n, k, a, lda, b_packed, c, ldc,
                           accumulate);
  });
#else
  (void)pool, (void)a, (void)lda, (void)b_packed, (void)c, (void)ldc, (void)accumulate;
#endif
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

#pragma once
/// \file
/// Direct convolution of bfloat16 tensors on AVX512-BF16 vectors (VDPBF16PS, fp32 accumulation):
/// the forward pass, dX and dW of the stride-1 layers conv2d_amx.hpp runs on AMX tiles, for CPUs
/// with AVX512-BF16 and no AMX (AMD Zen 4 and 5). One VDPBF16PS does 32 multiply-adds where an
/// FMA does 16; on Zen 4 both issue at the same rate (bench/RESULTS.md), so a kernel that keeps
/// the dot-product unit as busy as the float kernel keeps the FMA unit runs twice as fast.
///
/// The data are those of the AMX kernels, so the two engines share every packing and conversion
/// routine (amx_conv::pack_weights, bias_tiles, pair_planes, transposed_pairs, dy_row):
///
///   forward, dX  acc[o][16 positions] += bcast(W[o][c pair][tap]) . pair_plane[c pair][p + offset(tap)]
///                a register tile of 8 output channels x 3 vectors of 16 wide positions; the
///                weight pair is one 32-bit word of the packed AMX A tile (a broadcast load).
///   dW           acc[o][16 channels] += bcast(dY[o][position pair]) . X^T[position pair + offset/2][channels]
///                per tap, the blocks of amx_conv::GradShape (so the drivers and the partial sums
///                are the AMX path's), 8 or 16 output channels x 2 or 1 vectors of channels.
///
/// Numerics: VDPBF16PS adds a pair's odd product, then its even one, each rounded to float, with
/// bf16 subnormal inputs read as zero and subnormal results flushed (gemm_bf16.hpp). Every
/// output is summed by one thread in a fixed order (taps, then channel pairs; dW: samples,
/// then positions), so results do not depend on the thread count; they differ from the float
/// and the AMX kernels in the last bits.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "cohort/backend/cpu/conv2d_amx.hpp"
#include "cohort/backend/cpu/gemm_bf16.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::avx512_bf16_conv {

// The layers this engine runs are exactly the AMX path's: amx_conv::applicable<Gk>.

/// Register tile of the forward/dX kernel: 8 output channels x 3 vectors of positions (24
/// accumulators, 3 position vectors and a broadcast weight: 28 of 32 zmm).
inline constexpr std::size_t forward_mr = 8, forward_nv = 3;

#if COHORT_X86
namespace detail {

#define COHORT_BF16_INLINE COHORT_TARGET_AVX512_BF16 inline __attribute__((always_inline))

/// The 32-bit word at p (two bf16 values) broadcast to every lane.
COHORT_BF16_INLINE __m512bh broadcast_pair(const void* p) {
  std::uint32_t word;
  std::memcpy(&word, p, 4);
  return (__m512bh)_mm512_set1_epi32(int(word));
}

/// forward_mr output channels from row r0 x NV vectors of wide positions from p0, over the
/// whole (tap, channel pair) reduction. `xn` is the sample's pair planes, `a` the packed weights
/// of r0's 16-row block, `bias` its bias tiles (nullptr: zero), `yn` the sample's wide output.
template <class Gk, std::size_t NV>
COHORT_BF16_INLINE void forward_tile(const std::uint32_t* __restrict xn, const bfloat16* __restrict a,
                                     const float* __restrict bias, std::size_t r0, std::size_t p0,
                                     float* __restrict yn) {
  using S = amx_conv::Shape<Gk>;
  using V = direct::Wide<Gk>;
  constexpr std::size_t MR = forward_mr, cc = S::channel_block;
  const std::size_t r_in_block = r0 % 16;
  __m512 acc[MR][NV];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r) {
    const __m512 init = _mm512_set1_ps(bias ? bias[(r0 + r) * 16] : 0.f);
#pragma GCC unroll 32
    for (std::size_t v = 0; v < NV; ++v) acc[r][v] = init;
  }
  for (std::size_t t = 0; t < S::taps; ++t) {
    const std::uint32_t* __restrict xt = xn + p0 + V::offset(t);
    for (std::size_t cb = 0; cb < S::blocks; ++cb) {
      // Row r of this (tap, channel block)'s A tile holds its cc weights: pairs are words.
      const bfloat16* __restrict at = a + (t * S::blocks + cb) * 16 * cc + r_in_block * cc;
      for (std::size_t j = 0; j < cc / 2; ++j) {
        // A compiler barrier per pair: GCC would otherwise hoist the next pairs' loads and
        // spill accumulators to make room for them (as in the float kernel).
        asm volatile("" ::: "memory");
        const std::uint32_t* __restrict xs = xt + (cb * (cc / 2) + j) * V::plane;
        __m512bh x[NV];
#pragma GCC unroll 32
        for (std::size_t v = 0; v < NV; ++v) x[v] = (__m512bh)_mm512_loadu_si512(xs + v * 16);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < MR; ++r) {
          const __m512bh w = broadcast_pair(at + r * cc + 2 * j);
#pragma GCC unroll 32
          for (std::size_t v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], w, x[v]);
        }
      }
    }
  }
#pragma GCC unroll 32
  for (std::size_t r = 0; r < MR; ++r)
#pragma GCC unroll 32
    for (std::size_t v = 0; v < NV; ++v) _mm512_storeu_ps(yn + (r0 + r) * V::positions + p0 + v * 16, acc[r][v]);
}

} // namespace detail

/// `count` samples: wide outputs (Shape::rows x Wide::positions each, consecutive) = bias +
/// conv(pair planes, packed weights), with amx_conv's layouts (amx_conv::forward_samples'
/// contract, on vectors).
template <class Gk>
COHORT_TARGET_AVX512_BF16 void forward_samples(const std::uint32_t* pairs, std::size_t count, const bfloat16* packed,
                                               const float* bias, float* yw) {
  using S = amx_conv::Shape<Gk>;
  using V = direct::Wide<Gk>;
  constexpr std::size_t NV = forward_nv, step = NV * 16, full = V::positions / step * step;
  constexpr std::size_t tail = (V::positions - full) / 16;
  constexpr std::size_t in_stride = S::pair_planes * V::plane, out_stride = S::rows * V::positions;
  static_assert(S::rows % forward_mr == 0 && V::positions % 16 == 0);
  for (std::size_t r0 = 0; r0 < S::rows; r0 += forward_mr) {
    const bfloat16* a = packed + r0 / 16 * S::row_block_stride;
    for (std::size_t n = 0; n < count; ++n) {
      const std::uint32_t* xn = pairs + n * in_stride;
      float* yn = yw + n * out_stride;
      for (std::size_t p0 = 0; p0 < full; p0 += step) detail::forward_tile<Gk, NV>(xn, a, bias, r0, p0, yn);
      if constexpr (tail > 0) detail::forward_tile<Gk, tail>(xn, a, bias, r0, full, yn);
    }
  }
}

namespace detail {

/// Rows x NB vectors of one dW block for tap t: output channels [o0, o0 + Rows), input channels
/// [c0, c0 + 16*NB), summed over `count` samples (GradShape's dY rows and transposed pairs)
/// into `part` (taps x rows x cols floats).
template <class G, std::size_t Rows, std::size_t NB>
COHORT_BF16_INLINE void grad_tile(const bfloat16* __restrict dyb, const std::uint32_t* __restrict xtp,
                                  std::size_t count, std::size_t t, std::size_t o0, std::size_t c0,
                                  float* __restrict part) {
  using S = amx_conv::GradShape<G>;
  using V = direct::Wide<G>;
  const std::size_t offset = V::offset(t), parity = offset % 2;
  __m512 acc[Rows][NB];
#pragma GCC unroll 32
  for (std::size_t r = 0; r < Rows; ++r)
#pragma GCC unroll 32
    for (std::size_t v = 0; v < NB; ++v) acc[r][v] = _mm512_setzero_ps();
  for (std::size_t n = 0; n < count; ++n) {
    const bfloat16* __restrict a = dyb + n * S::dy_size + o0 * S::k_positions;
    const std::uint32_t* __restrict b = xtp + n * S::x_size + (parity * S::pair_rows + offset / 2) * S::cols + c0;
    for (std::size_t q = 0; q < S::k_positions / 2; ++q) {
      asm volatile("" ::: "memory");
      __m512bh x[NB];
#pragma GCC unroll 32
      for (std::size_t v = 0; v < NB; ++v) x[v] = (__m512bh)_mm512_loadu_si512(b + q * S::cols + v * 16);
#pragma GCC unroll 16
      for (std::size_t r = 0; r < Rows; ++r) {
        const __m512bh d = broadcast_pair(a + r * S::k_positions + 2 * q);
#pragma GCC unroll 32
        for (std::size_t v = 0; v < NB; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], d, x[v]);
      }
    }
  }
  float* c = part + (t * S::rows + o0) * S::cols + c0;
#pragma GCC unroll 32
  for (std::size_t r = 0; r < Rows; ++r)
#pragma GCC unroll 32
    for (std::size_t v = 0; v < NB; ++v) _mm512_storeu_ps(c + r * S::cols + v * 16, acc[r][v]);
}

} // namespace detail

/// dW blocks [lo, hi) of GradShape<G>'s enumeration (tap fastest), each summed over `count`
/// samples into `part`: amx_conv::weight_grad_blocks' contract, on vectors. A block of 16*mb
/// output channels x 16*nb input channels runs as tiles of 16 channels x 1 vector or 8 x 2
/// (16 accumulators).
template <class G>
COHORT_TARGET_AVX512_BF16 void weight_grad_blocks(const bfloat16* dyb, const std::uint32_t* xtp, std::size_t count,
                                                  std::size_t lo, std::size_t hi, float* part) {
  using S = amx_conv::GradShape<G>;
  constexpr std::size_t o_blocks = S::rows / (16 * S::mb), rows = S::nb == 2 ? 8 : 16;
  for (std::size_t j = lo; j < hi; ++j) {
    const std::size_t t = j % S::taps, ob = j / S::taps % o_blocks, cb = j / (S::taps * o_blocks);
    for (std::size_t o = ob * 16 * S::mb; o < (ob + 1) * 16 * S::mb; o += rows)
      detail::grad_tile<G, rows, S::nb>(dyb, xtp, count, t, o, cb * 16 * S::nb, part);
  }
}

#undef COHORT_BF16_INLINE

#else  // declared for name lookup only: amx_conv::applicable<Gk> (this engine's layers too) is false
       // without x86, so nothing calls them
template <class Gk>
void forward_samples(const std::uint32_t* pairs, std::size_t count, const bfloat16* packed, const float* bias,
                     float* yw);
template <class G>
void weight_grad_blocks(const bfloat16* dyb, const std::uint32_t* xtp, std::size_t count, std::size_t lo,
                        std::size_t hi, float* part);
#endif // COHORT_X86

} // namespace cohort::cpu::avx512_bf16_conv

#pragma GCC diagnostic pop

#pragma once
/// \file
/// dW by Winograd (conv2d_winograd.hpp): dY's tiles as filters over the input tiles, summed per
/// position by GEMMs, then transformed back; per instruction set.

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "cohort/backend/cpu/conv2d_direct.hpp"
#include "cohort/backend/cpu/conv2d_winograd_choice.hpp"
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/tensor/buffer.hpp"

#include "cohort/backend/cpu/conv2d_winograd_transform.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::winograd {

// ---- dW ------------------------------------------------------------------------------------------

/// dW of the convolution G by Winograd F(R x R, M x M): each M x M tile of dY is a "filter" over
/// its alpha x alpha input tile, and the R x R result summed over tiles and samples is
///
///   dW = A^T [ sum_tiles (G dy G^T) (.) (B^T d B) ] A          (matrices of F(R, M))
///
/// so the sum is, per position, a GEMM Acc[pos] (Cout x Cin) += Dh[pos]^T (Cout x tiles) *
/// Xp[pos] (tiles x Cin). Tiles are those of Plan<G, M>; input channels padded to whole panels.
template <class G, std::size_t M>
struct GradPlan : Plan<G, M, 32> {
  using Base = Plan<G, M, 32>;
  using C = Coefficients<G::kernel, M>;
  /// dY as (position, channel) rows (PlainDy/PooledDy::transposed), channels padded to 16.
  static constexpr std::size_t dy_channels = direct::round_up(G::out_channels, 16);
  static constexpr std::size_t dy_size = G::out_h * G::out_w * dy_channels;
  /// Tiles per group, the depth of each accumulating GEMM: at least 192, more where few channels
  /// keep a group's Xp and Dh small (up to 2 MiB): each group costs two rounds of the thread
  /// pool, which cost more than the products of a 32-channel layer's group of 192 tiles.
  static constexpr std::size_t group_tiles =
      std::max<std::size_t>(192, (std::size_t(1) << 19) / (Base::positions * (Base::cin + dy_channels)));
  static constexpr std::size_t group = std::max<std::size_t>(1, (group_tiles + Base::tiles - 1) / Base::tiles);
  static constexpr std::size_t acc_size = Base::positions * G::out_channels * Base::cin;
  /// Floats of Xp and Dh for `count` samples.
  static constexpr std::size_t transformed(std::size_t count) noexcept {
    return Base::positions * count * Base::tiles * (Base::cin + dy_channels);
  }
  /// Per-thread scratch of one sample: wide input planes, channel-last input, dY rows.
  static constexpr std::size_t sample_scratch = direct::Wide<G>::cin * direct::Wide<G>::plane + Base::in_size + dy_size;
};

/// G dy G^T of every M x M tile of one sample's dY rows (zeros past the output's edge) into
/// Dh[pos][t][k] (rows of P::dy_channels), tiles t0, t0 + 1, ...
template <int W, class P>
COHORT_ALWAYS_INLINE void dy_tiles(const float* __restrict dyt, float* __restrict dh, std::size_t t0,
                                   std::size_t rows) {
  using C = typename P::C;
  constexpr std::size_t A = P::alpha, M = P::m, K = P::dy_channels, ho = P::Wide::ho, wo = P::Wide::wo;
  const std::size_t pos_stride = rows * K;
  for (std::size_t ty = 0; ty < P::tiles_h; ++ty)
    for (std::size_t tx = 0; tx < P::tiles_w; ++tx) {
      float* __restrict out = dh + (t0 + ty * P::tiles_w + tx) * K;
      for (std::size_t k = 0; k < K; k += W) {
        vec<W> d[M][M];
#pragma GCC unroll 4
        for (std::size_t a = 0; a < M; ++a)
#pragma GCC unroll 4
          for (std::size_t b = 0; b < M; ++b) {
            const std::size_t h = ty * M + a, w = tx * M + b;
            d[a][b] = h < ho && w < wo ? load<W>(dyt + (h * wo + w) * K + k) : vec<W>{};
          }
        vec<W> tmp[A][M]; // G dy
#pragma GCC unroll 8
        for (std::size_t i = 0; i < A; ++i)
#pragma GCC unroll 4
          for (std::size_t b = 0; b < M; ++b) tmp[i][b] = combine<W>(C::g[i], [&](std::size_t a) { return d[a][b]; });
#pragma GCC unroll 8
        for (std::size_t i = 0; i < A; ++i)
#pragma GCC unroll 8
          for (std::size_t j = 0; j < A; ++j)
            store<W>(out + (i * A + j) * pos_stride + k, combine<W>(C::g[j], [&](std::size_t b) { return tmp[i][b]; }));
      }
    }
}

/// One sample's share of a dW group: its input tiles into Xp (GEMM panels) and its dY tiles into
/// Dh, as tiles t0, t0 + 1, ... of a group of `rows` tiles. `xt`: the sample's wide planes,
/// `dyt`: its dY rows, `xh`: scratch for the channel-last input.
template <int W, class G, std::size_t M>
COHORT_ALWAYS_INLINE void grad_sample(const float* xt, const float* dyt, float* xh, float* xp, float* dh,
                                      std::size_t t0, std::size_t rows) {
  using P = GradPlan<G, M>;
  constexpr std::size_t nr = std::size_t(panel_vectors(W, P::cin)) * W, panels = P::cin / nr;
  to_channels_last<typename P::Base>(xt, xh);
  input_tiles<W, typename P::Base, typename P::C>(xh, xp, t0, {panels * rows * nr, rows * nr, nr, nr});
  dy_tiles<W, P>(dyt, dh, t0, rows);
}

/// Acc[pos] (+)= Dh[pos]^T * Xp[pos] for positions [pos0, pos1), over a group of `rows` tiles;
/// `first` overwrites.
template <int W, class G, std::size_t M>
COHORT_ALWAYS_INLINE void grad_multiply(const float* xp, const float* dh, float* acc, std::size_t rows,
                                        std::size_t pos0, std::size_t pos1, bool first) {
  using P = GradPlan<G, M>;
  using S = detail::GemmShape<W>;
  constexpr int V = panel_vectors(W, P::cin);
  constexpr std::size_t nr = std::size_t(V) * W, panels = P::cin / nr, K = P::dy_channels, cout = G::out_channels;
  for (std::size_t pos = pos0; pos < pos1; ++pos)
    for (std::size_t p = 0; p < panels; ++p) {
      const float* bp = xp + (pos * panels + p) * rows * nr;
      for (std::size_t k0 = 0; k0 < cout; k0 += S::mr)
        detail::micro_kernel_for<W, V>(rows, dh + pos * rows * K + k0, 1, K, bp,
                                       acc + (pos * cout + k0) * P::cin + p * nr, P::cin, std::min(S::mr, cout - k0),
                                       nr, 1.f, first ? 0.f : 1.f);
    }
}

/// dW[k][c] (+)= A^T Acc[.][k][c] A for output channels [k0, k1); dw is (out, in, R, R).
template <class G, std::size_t M>
void grad_output(const float* __restrict acc, float* __restrict dw, bool accumulate, std::size_t k0, std::size_t k1) {
  using P = GradPlan<G, M>;
  using C = typename P::C;
  constexpr std::size_t R = G::kernel, A = P::alpha, L = 16, plane = G::out_channels * P::cin;
  for (std::size_t k = k0; k < k1; ++k)
    for (std::size_t c0 = 0; c0 < G::in_channels; c0 += L) {
      const std::size_t lanes = std::min(L, G::in_channels - c0);
      float tmp[R][A][L]; // A^T Acc
      for (std::size_t i = 0; i < R; ++i)
        for (std::size_t b = 0; b < A; ++b)
          for (std::size_t l = 0; l < L; ++l) {
            float s = 0.f;
            for (std::size_t a = 0; a < A; ++a) s += C::at[i][a] * acc[(a * A + b) * plane + k * P::cin + c0 + l];
            tmp[i][b][l] = s;
          }
      for (std::size_t l = 0; l < lanes; ++l)
        for (std::size_t i = 0; i < R; ++i)
          for (std::size_t j = 0; j < R; ++j) {
            float s = 0.f;
            for (std::size_t b = 0; b < A; ++b) s += tmp[i][b][l] * C::at[j][b];
            float& out = dw[((k * G::in_channels + c0 + l) * R + i) * R + j];
            out = accumulate ? out + s : s;
          }
    }
}

#define COHORT_WINOGRAD_GRAD_ENTRY(SUFFIX, TARGET, WIDTH)                                                              \
  template <class G, std::size_t M>                                                                                    \
  TARGET void grad_sample_##SUFFIX(const float* xt, const float* dyt, float* xh, float* xp, float* dh, std::size_t t0, \
                                   std::size_t rows) {                                                                 \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    grad_sample<WIDTH, G, M>(xt, dyt, xh, xp, dh, t0, rows);                                                           \
  }                                                                                                                    \
  template <class G, std::size_t M>                                                                                    \
  TARGET void grad_multiply_##SUFFIX(const float* xp, const float* dh, float* acc, std::size_t rows, std::size_t pos0, \
                                     std::size_t pos1, bool first) {                                                   \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    grad_multiply<WIDTH, G, M>(xp, dh, acc, rows, pos0, pos1, first);                                                  \
  }
COHORT_WINOGRAD_GRAD_ENTRY(avx512, COHORT_TARGET_AVX512, 16)
COHORT_WINOGRAD_GRAD_ENTRY(avx2, COHORT_TARGET_AVX2, 8)
COHORT_WINOGRAD_GRAD_ENTRY(generic, , 4)
#undef COHORT_WINOGRAD_GRAD_ENTRY

template <class G, std::size_t M>
void grad_sample_dispatch(Isa isa, const float* xt, const float* dyt, float* xh, float* xp, float* dh, std::size_t t0,
                          std::size_t rows) {
  dispatch_compiled<G, M>(
      isa, [&] { grad_sample_avx512<G, M>(xt, dyt, xh, xp, dh, t0, rows); },
      [&] { grad_sample_avx2<G, M>(xt, dyt, xh, xp, dh, t0, rows); },
      [&] { grad_sample_generic<G, M>(xt, dyt, xh, xp, dh, t0, rows); });
}
template <class G, std::size_t M>
void grad_multiply_dispatch(Isa isa, const float* xp, const float* dh, float* acc, std::size_t rows, std::size_t pos0,
                            std::size_t pos1, bool first) {
  dispatch_compiled<G, M>(
      isa, [&] { grad_multiply_avx512<G, M>(xp, dh, acc, rows, pos0, pos1, first); },
      [&] { grad_multiply_avx2<G, M>(xp, dh, acc, rows, pos0, pos1, first); },
      [&] { grad_multiply_generic<G, M>(xp, dh, acc, rows, pos0, pos1, first); });
}

} // namespace cohort::cpu::winograd

#pragma GCC diagnostic pop

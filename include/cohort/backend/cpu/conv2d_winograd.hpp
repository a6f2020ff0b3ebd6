#pragma once
/// \file
/// Winograd convolution F(m x m, r x r) for stride-1 layers: fewer multiplications than the
/// direct kernel (conv2d_direct.hpp), at the price of a larger rounding error.
///
/// An output tile of m x m positions is computed from an alpha x alpha input tile (alpha = m + r - 1):
///
///   Y = A^T [ (G g G^T) (.) (B^T d B) ] A          (.) element-wise, per (output, input) channel
///
/// and the element-wise products summed over input channels become alpha^2 independent GEMMs,
///
///   M[pos] (tiles x Cout) = V[pos] (tiles x Cin) * U[pos] (Cin x Cout),
///
/// with V = B^T d B of every tile and U = G g G^T of every filter. F(2x2, 3x3) does 16 products
/// where the direct kernel does 36 (2.25x fewer), F(4x4, 3x3) 36 for 144 (4x), F(2x2, 5x5) 36 for
/// 100 (2.8x); tiles hanging over the output's edge waste part of that.
///
/// The matrices come from Toom-Cook interpolation at the points 0, +-1, +-1/2 or +-2 and
/// infinity, computed at compile time in double (Transform). The input and output arrive and
/// leave in the direct path's wide-plane layout (Wide<G>), so the pad/unpad steps of the direct
/// path (the fused ReLU and max-pool, dX from a pooled gradient) are shared unchanged. Inside,
/// planes are transposed to channel-last so every transform is vectorised over 16 channels.
///
/// Forward and dX: every output element is one fixed sequence of operations (its tile's
/// transform, a GEMM row reduced over input channels in order, the output transform), whatever
/// the batch, the grouping of samples or the thread count. dW: sums over sample groups fixed by the
/// batch size, in order: it does not depend on the thread count.
///
/// Rounding error (tests/backend/cpu/conv2d_winograd.cpp measures it per algorithm): F(2x2, 3x3)'s
/// is no larger than the direct kernel's, F(4x4)'s and the 5x5 kernels' are several times larger
/// and grow with the channel count. conv_algorithm() says which one a layer uses.

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
#include "cohort/backend/cpu/gemm.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/tensor/buffer.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu {

/// How a stride-1 convolution is computed on the CPU.
enum class ConvAlgorithm : std::uint8_t {
  automatic,   ///< per layer: what the measurements in bench/RESULTS.md chose (winograd::choose)
  direct,      ///< the direct kernel (conv2d_direct.hpp): the smallest error
  winograd_f2, ///< Winograd F(2x2, r x r)
  winograd_f4, ///< Winograd F(4x4, r x r)
};

namespace winograd {

/// Toom-Cook matrices of F(M, R) in double: at (M x alpha), g (alpha x R), bt (alpha x alpha).
/// Finite points p_j and infinity: A^T's column j holds p_j^i, G's row j p_j^k / f_j with
/// f_j = prod_{l != j} (p_j - p_l), B^T's row j the coefficients of prod_{l != j} (x - p_l); the
/// point at infinity picks the leading coefficients.
template <std::size_t M, std::size_t R>
struct Transform {
  static constexpr std::size_t alpha = M + R - 1;
  double at[M][alpha]{}, g[alpha][R]{}, bt[alpha][alpha]{};

  static constexpr double point(std::size_t j) noexcept {
    // +-1/2 before +-2 for F(4x4, 3x3): 25% less error (measured in double against float).
    constexpr double half_first[] = {0, 1, -1, 0.5, -0.5, 2, -2};
    constexpr double two_first[] = {0, 1, -1, 2, -2, 0.5, -0.5};
    return (M == 4 && R == 3) ? half_first[j] : two_first[j];
  }
  constexpr Transform() {
    constexpr std::size_t finite = alpha - 1;
    static_assert(finite <= 7, "winograd::Transform: at most 7 finite points");
    for (std::size_t j = 0; j <= finite; ++j) {
      // Coefficients of prod over the finite points other than j (all of them for infinity).
      double poly[alpha + 1]{1.0};
      std::size_t degree = 0;
      double f = 1.0;
      for (std::size_t l = 0; l < finite; ++l) {
        if (l == j) continue;
        for (std::size_t d = degree + 1; d > 0; --d) poly[d] = poly[d - 1] - point(l) * poly[d];
        poly[0] = -point(l) * poly[0];
        ++degree;
        if (j < finite) f *= point(j) - point(l);
      }
      for (std::size_t i = 0; i < alpha; ++i) bt[j][i] = poly[i];
      if (j < finite) {
        double p = 1.0;
        for (std::size_t i = 0; i < M; ++i, p *= point(j)) at[i][j] = p;
        p = 1.0;
        for (std::size_t k = 0; k < R; ++k, p *= point(j)) g[j][k] = p / f;
      } else {
        at[M - 1][j] = 1.0;
        g[j][R - 1] = 1.0;
      }
    }
  }
};

/// The same matrices in float, as the kernels use them.
template <std::size_t M, std::size_t R>
struct Coefficients {
  static constexpr Transform<M, R> t{};
  static constexpr std::size_t alpha = Transform<M, R>::alpha;
  static constexpr auto at = [] {
    std::array<std::array<float, alpha>, M> a{};
    for (std::size_t i = 0; i < M; ++i)
      for (std::size_t j = 0; j < alpha; ++j) a[i][j] = float(t.at[i][j]);
    return a;
  }();
  static constexpr auto g = [] {
    std::array<std::array<float, R>, alpha> a{};
    for (std::size_t i = 0; i < alpha; ++i)
      for (std::size_t j = 0; j < R; ++j) a[i][j] = float(t.g[i][j]);
    return a;
  }();
  static constexpr auto bt = [] {
    std::array<std::array<float, alpha>, alpha> a{};
    for (std::size_t i = 0; i < alpha; ++i)
      for (std::size_t j = 0; j < alpha; ++j) a[i][j] = float(t.bt[i][j]);
    return a;
  }();
};

/// Whether F(M x M, K x K) can run the convolution Gk (stride 1, 3x3 or 5x5, enough channels on
/// both sides for the GEMMs to beat the transforms).
template <class Gk>
inline constexpr bool applicable =
    Gk::stride == 1 &&
    (Gk::kernel == 3 || Gk::kernel == 5) && Gk::padding < Gk::kernel&& Gk::in_channels >= 8 && Gk::out_channels >= 8;

/// The layout of one Winograd pass over the convolution Gk with output tiles of M x M.
template <class Gk, std::size_t M, std::size_t InAlign = 16>
struct Plan {
  using Wide = direct::Wide<Gk>; // the layout pad() fills and unpad() reads
  static constexpr std::size_t m = M, r = Gk::kernel, alpha = M + r - 1, positions = alpha * alpha;
  static constexpr std::size_t tiles_h = (Gk::out_h + M - 1) / M, tiles_w = (Gk::out_w + M - 1) / M;
  static constexpr std::size_t tiles = tiles_h * tiles_w;
  /// Channels padded with zeros: inputs to whole vectors, outputs to whole GEMM panels (32).
  static constexpr std::size_t cin = direct::round_up(Gk::in_channels, InAlign);
  static constexpr std::size_t cout = direct::round_up(Gk::out_channels, 32);
  /// The channel-last padded input (rows x cols x cin) the tiles read, and the output
  /// (tiles_h*M x tiles_w*M x cout) they write.
  static constexpr std::size_t in_rows = tiles_h * M + r - 1, in_cols = tiles_w * M + r - 1;
  static constexpr std::size_t in_size = in_rows * in_cols * cin;
  static constexpr std::size_t out_size = tiles_h * M * tiles_w * M * cout;
  /// Padded input columns that hold data or padding (past them: zeros added here).
  static constexpr std::size_t valid_cols = Gk::in_w + 2 * Gk::padding;
  /// Samples per group: about 96 tiles, so one group's V and M stay in the outer caches.
  static constexpr std::size_t group = std::max<std::size_t>(1, (96 + tiles - 1) / tiles);
  /// Transformed weights: positions x (cout / NR panels) x cin x NR, NR = 2 vectors.
  static constexpr std::size_t packed_size = positions * cin * cout;
};

/// U = G g G^T for every (output, input) channel pair of Gk, packed for the GEMM micro-kernel of
/// vector width W: [position][panel of 2W output channels][input channel][2W], zeros for padded
/// channels. `w` holds the weights of G (out, in, K, K); with `transpose_rotate`, those of the dX
/// convolution are used instead: W'[c][o][K-1-kh][K-1-kw]. One panel's lanes are transformed
/// together and each position's 2W values written at once: written one pair at a time, the 36
/// positions 512 KiB apart cost more than the arithmetic (model D's third layer).
template <class G, class Gk, std::size_t M, class T>
void pack_weights(int width, const T* w, HostBuffer<float>& out, bool transpose_rotate) {
  using P = Plan<Gk, M>;
  using C = Coefficients<M, P::r>;
  constexpr std::size_t R = P::r, A = P::alpha, taps = R * R, max_nr = 32;
  const std::size_t nr = 2 * std::size_t(width), panels = P::cout / nr;
  if (out.size() != P::packed_size) out.resize(P::packed_size);
  for (std::size_t panel = 0; panel < panels; ++panel)
    for (std::size_t c = 0; c < P::cin; ++c) {
      float g[taps][max_nr], gt[A][R][max_nr];
      for (std::size_t lane = 0; lane < nr; ++lane) {
        const std::size_t k = panel * nr + lane;
        for (std::size_t t = 0; t < taps; ++t)
          g[t][lane] = k >= Gk::out_channels || c >= Gk::in_channels ? 0.f
                       : transpose_rotate ? float(w[(c * G::in_channels + k) * taps + (taps - 1 - t)])
                                          : float(w[(k * G::in_channels + c) * taps + t]);
      }
      for (std::size_t i = 0; i < A; ++i)
        for (std::size_t j = 0; j < R; ++j)
          for (std::size_t lane = 0; lane < nr; ++lane) {
            float s = 0.f;
            for (std::size_t l = 0; l < R; ++l) s += C::g[i][l] * g[l * R + j][lane];
            gt[i][j][lane] = s;
          }
      for (std::size_t i = 0; i < A; ++i)
        for (std::size_t j = 0; j < A; ++j) {
          float* dst = out.data() + (((i * A + j) * panels + panel) * P::cin + c) * nr;
          for (std::size_t lane = 0; lane < nr; ++lane) {
            float s = 0.f;
            for (std::size_t l = 0; l < R; ++l) s += gt[i][l][lane] * C::g[j][l];
            dst[lane] = s;
          }
        }
    }
}

/// Wide planes (cin x Wide::plane) to the channel-last input of Plan P, zeros past the data.
template <class P>
void to_channels_last(const float* __restrict xt, float* __restrict xh) {
  using Wd = typename P::Wide;
  for (std::size_t i = 0; i < P::in_rows; ++i)
    for (std::size_t j = 0; j < P::in_cols; ++j) {
      float* __restrict out = xh + (i * P::in_cols + j) * P::cin;
      if (i < Wd::hp && j < P::valid_cols) {
        const float* __restrict in = xt + i * Wd::wp + j;
        for (std::size_t c = 0; c < Wd::cin; ++c) out[c] = in[c * Wd::plane];
        std::fill(out + Wd::cin, out + P::cin, 0.f);
      } else {
        std::fill(out, out + P::cin, 0.f);
      }
    }
}

/// The channel-last output of Plan P to wide planes (cout x Wide::positions), the garbage
/// columns of each row zeroed.
template <class P, class Gk>
void to_wide(const float* __restrict yh, float* __restrict yw) {
  using Wd = typename P::Wide;
  constexpr std::size_t cols = P::tiles_w * P::m;
  for (std::size_t k = 0; k < Gk::out_channels; ++k) {
    float* __restrict plane = yw + k * Wd::positions;
    for (std::size_t h = 0; h < Wd::ho; ++h) {
      float* __restrict row = plane + h * Wd::wp;
      const float* __restrict in = yh + h * cols * P::cout + k;
      for (std::size_t w = 0; w < Wd::wo; ++w) row[w] = in[w * P::cout];
      std::fill(row + Wd::wo, row + Wd::wp, 0.f);
    }
    std::fill(plane + Wd::ho * Wd::wp, plane + Wd::positions, 0.f);
  }
}

/// s + sum_k row[k] * v(k) over one row of a transform matrix: zeros skipped, ones not multiplied
/// (the rows are compile-time constants, so once the loops are unrolled no test is left).
template <int W, std::size_t K, class Value>
COHORT_ALWAYS_INLINE vec<W> combine(const std::array<float, K>& row, Value&& v, const vec<W>& init = vec<W>{}) {
  vec<W> s = init; // (by reference: a vector argument makes GCC print an ABI note without -march)
#pragma GCC unroll 8
  for (std::size_t k = 0; k < K; ++k)
    if (row[k] != 0.f) s += row[k] == 1.f ? v(k) : broadcast<W>(row[k]) * v(k);
  return s;
}

/// Where input_tiles stores channel c of tile t at position pos: pos * pos_stride + (c / nr) *
/// panel_stride + t * t_stride + c % nr. V of the forward pass is one panel of all channels,
/// (pos, t, c); the dW pass wants GEMM panels of nr channels, (pos, c / nr, t, c % nr).
struct TileLayout {
  std::size_t pos_stride, panel_stride, t_stride, nr;
};

/// B^T d B of every tile of one sample's channel-last input (tiles t0, t0 + 1, ...), with the
/// matrices of C (Coefficients: M x M tiles of P's output for the forward pass, R x R for dW).
template <int W, class P, class C>
COHORT_ALWAYS_INLINE void input_tiles(const float* __restrict xh, float* __restrict v, std::size_t t0,
                                      TileLayout layout) {
  constexpr std::size_t A = P::alpha, M = P::m;
  static_assert(C::alpha == A, "winograd::input_tiles: coefficients of another tile size");
  for (std::size_t ty = 0; ty < P::tiles_h; ++ty)
    for (std::size_t tx = 0; tx < P::tiles_w; ++tx) {
      const float* __restrict d = xh + (ty * M * P::in_cols + tx * M) * P::cin;
      float* __restrict out = v + (t0 + ty * P::tiles_w + tx) * layout.t_stride;
      for (std::size_t c = 0; c < P::cin; c += W) {
        float* __restrict at = out + c / layout.nr * layout.panel_stride + c % layout.nr;
        vec<W> tmp[A][A]; // B^T d
#pragma GCC unroll 8
        for (std::size_t j = 0; j < A; ++j) {
          vec<W> col[A];
#pragma GCC unroll 8
          for (std::size_t k = 0; k < A; ++k) col[k] = load<W>(d + (k * P::in_cols + j) * P::cin + c);
#pragma GCC unroll 8
          for (std::size_t i = 0; i < A; ++i) tmp[i][j] = combine<W>(C::bt[i], [&](std::size_t k) { return col[k]; });
        }
#pragma GCC unroll 8
        for (std::size_t i = 0; i < A; ++i)
#pragma GCC unroll 8
          for (std::size_t j = 0; j < A; ++j)
            store<W>(at + (i * A + j) * layout.pos_stride,
                     combine<W>(C::bt[j], [&](std::size_t k) { return tmp[i][k]; }));
      }
    }
}

/// One sample's channel-last output from M rows [t0, t0 + tiles): Y = A^T m A + bias.
template <int W, class P, std::size_t M>
COHORT_ALWAYS_INLINE void output_tiles(const float* __restrict m, const float* __restrict bias, float* __restrict yh,
                                       std::size_t t0, std::size_t rows) {
  using C = Coefficients<M, P::r>;
  constexpr std::size_t A = P::alpha, cols = P::tiles_w * M;
  const std::size_t pos_stride = rows * P::cout;
  for (std::size_t ty = 0; ty < P::tiles_h; ++ty)
    for (std::size_t tx = 0; tx < P::tiles_w; ++tx) {
      const float* __restrict in = m + (t0 + ty * P::tiles_w + tx) * P::cout;
      float* __restrict out = yh + (ty * M * cols + tx * M) * P::cout;
      for (std::size_t k = 0; k < P::cout; k += W) {
        vec<W> tmp[M][A]; // A^T m
#pragma GCC unroll 8
        for (std::size_t j = 0; j < A; ++j) {
          vec<W> col[A];
#pragma GCC unroll 8
          for (std::size_t l = 0; l < A; ++l) col[l] = load<W>(in + (l * A + j) * pos_stride + k);
#pragma GCC unroll 4
          for (std::size_t i = 0; i < M; ++i) tmp[i][j] = combine<W>(C::at[i], [&](std::size_t l) { return col[l]; });
        }
        const vec<W> b = bias ? load<W>(bias + k) : vec<W>{};
#pragma GCC unroll 4
        for (std::size_t i = 0; i < M; ++i)
#pragma GCC unroll 4
          for (std::size_t j = 0; j < M; ++j)
            store<W>(out + (i * cols + j) * P::cout + k, combine<W>(
                                                             C::at[j], [&](std::size_t l) { return tmp[i][l]; }, b));
      }
    }
}

/// M[pos] = V[pos] * U[pos] for every position: rows x P::cin times P::cin x P::cout.
template <int W, class P>
COHORT_ALWAYS_INLINE void multiply(const float* __restrict v, const float* __restrict u, float* __restrict m,
                                   std::size_t rows) {
  using S = detail::GemmShape<W>;
  constexpr std::size_t panels = P::cout / S::nr;
  for (std::size_t pos = 0; pos < P::positions; ++pos) {
    const float* vp = v + pos * rows * P::cin;
    float* mp = m + pos * rows * P::cout;
    for (std::size_t p = 0; p < panels; ++p) {
      const float* up = u + (pos * panels + p) * P::cin * S::nr;
      for (std::size_t t = 0; t < rows; t += S::mr)
        detail::micro_kernel_for<W>(P::cin, vp + t * P::cin, P::cin, 1, up, mp + t * P::cout + p * S::nr, P::cout,
                                    std::min(S::mr, rows - t), S::nr, 1.f, 0.f);
    }
  }
}

/// Scratch of one group of `count` samples: the channel-last input and output of one sample,
/// V and M of the group.
template <class P>
struct GroupScratch {
  float *xh, *yh, *v, *m;
  static constexpr std::size_t floats(std::size_t count) noexcept {
    return P::in_size + P::out_size + P::positions * count * P::tiles * (P::cin + P::cout);
  }
  GroupScratch(float* base, std::size_t count) noexcept
      : xh(base), yh(base + P::in_size), v(yh + P::out_size), m(v + P::positions * count * P::tiles * P::cin) {}
};

/// The convolution Gk of samples first .. first + count, with output tiles of M x M:
/// `pad(n, xt)` fills sample n's wide planes at `xt` (Wide::cin x Wide::plane floats),
/// `unpad(n, yw)` takes its wide output (Gk::out_channels x Wide::positions, 32 floats of slack).
/// `u` from pack_weights for width W; `bias` (float, P::cout of them) or null.
template <int W, class Gk, std::size_t M, class Pad, class Unpad>
COHORT_ALWAYS_INLINE void run_group(std::size_t first, std::size_t count, const float* u, const float* bias,
                                    float* scratch, float* xt, float* yw, Pad& pad, Unpad& unpad) {
  using P = Plan<Gk, M>;
  const GroupScratch<P> s(scratch, count);
  const std::size_t rows = count * P::tiles;
  for (std::size_t i = 0; i < count; ++i) {
    pad(first + i, xt);
    to_channels_last<P>(xt, s.xh);
    input_tiles<W, P, Coefficients<M, P::r>>(s.xh, s.v, i * P::tiles, {rows * P::cin, 0, P::cin, P::cin});
  }
  multiply<W, P>(s.v, u, s.m, rows);
  for (std::size_t i = 0; i < count; ++i) {
    output_tiles<W, P, M>(s.m, bias, s.yh, i * P::tiles, rows);
    to_wide<P, Gk>(s.yh, yw);
    unpad(first + i, static_cast<const float*>(yw));
  }
}

#define COHORT_WINOGRAD_ENTRY(SUFFIX, TARGET, WIDTH)                                                                   \
  template <class Gk, std::size_t M, class Pad, class Unpad>                                                           \
  TARGET void run_group_##SUFFIX(std::size_t first, std::size_t count, const float* u, const float* bias,              \
                                 float* scratch, float* xt, float* yw, Pad& pad, Unpad& unpad) {                       \
    COHORT_ISA_ENTRY(isa_of_width(WIDTH));                                                                             \
    run_group<WIDTH, Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad);                                       \
  }
COHORT_WINOGRAD_ENTRY(avx512, COHORT_TARGET_AVX512, 16)
COHORT_WINOGRAD_ENTRY(avx2, COHORT_TARGET_AVX2, 8)
COHORT_WINOGRAD_ENTRY(generic, , 4)
#undef COHORT_WINOGRAD_ENTRY

/// run_group on the instruction set `isa` (the one `u` was packed for).
template <class Gk, std::size_t M, class Pad, class Unpad>
void run_group_dispatch(Isa isa, std::size_t first, std::size_t count, const float* u, const float* bias,
                        float* scratch, float* xt, float* yw, Pad& pad, Unpad& unpad) {
  dispatch_isa(
      isa, [&] { run_group_avx512<Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad); },
      [&] { run_group_avx2<Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad); },
      [&] { run_group_generic<Gk, M>(first, count, u, bias, scratch, xt, yw, pad, unpad); });
}

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
  constexpr std::size_t nr = 2 * W, panels = P::cin / nr;
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
  constexpr std::size_t panels = P::cin / S::nr, K = P::dy_channels, cout = G::out_channels;
  for (std::size_t pos = pos0; pos < pos1; ++pos)
    for (std::size_t p = 0; p < panels; ++p) {
      const float* bp = xp + (pos * panels + p) * rows * S::nr;
      for (std::size_t k0 = 0; k0 < cout; k0 += S::mr)
        detail::micro_kernel_for<W>(rows, dh + pos * rows * K + k0, 1, K, bp,
                                    acc + (pos * cout + k0) * P::cin + p * S::nr, P::cin, std::min(S::mr, cout - k0),
                                    S::nr, 1.f, first ? 0.f : 1.f);
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
  dispatch_isa(
      isa, [&] { grad_sample_avx512<G, M>(xt, dyt, xh, xp, dh, t0, rows); },
      [&] { grad_sample_avx2<G, M>(xt, dyt, xh, xp, dh, t0, rows); },
      [&] { grad_sample_generic<G, M>(xt, dyt, xh, xp, dh, t0, rows); });
}
template <class G, std::size_t M>
void grad_multiply_dispatch(Isa isa, const float* xp, const float* dh, float* acc, std::size_t rows, std::size_t pos0,
                            std::size_t pos1, bool first) {
  dispatch_isa(
      isa, [&] { grad_multiply_avx512<G, M>(xp, dh, acc, rows, pos0, pos1, first); },
      [&] { grad_multiply_avx2<G, M>(xp, dh, acc, rows, pos0, pos1, first); },
      [&] { grad_multiply_generic<G, M>(xp, dh, acc, rows, pos0, pos1, first); });
}

/// Floats of per-thread scratch run_group needs for groups of up to `group` samples.
template <class Gk, std::size_t M>
constexpr std::size_t scratch_floats(std::size_t group) noexcept {
  using P = Plan<Gk, M>;
  return GroupScratch<P>::floats(group) + P::Wide::cin * P::Wide::plane + Gk::out_channels * P::Wide::positions + 32;
}

// ---- which algorithm a layer uses -------------------------------------------------------------

namespace detail {
inline std::atomic<int>& algorithm_override() noexcept {
  static std::atomic<int> value{-1}; // -1: not set in code, read COHORT_CONV_ALGORITHM
  return value;
}
/// An algorithm by the name COHORT_CONV_ALGORITHM gives it: auto, direct, f2 or f4.
inline std::optional<ConvAlgorithm> parse_algorithm(std::string_view name) noexcept {
  if (name == "auto") return ConvAlgorithm::automatic;
  if (name == "direct") return ConvAlgorithm::direct;
  if (name == "f2") return ConvAlgorithm::winograd_f2;
  if (name == "f4") return ConvAlgorithm::winograd_f4;
  return std::nullopt;
}
/// COHORT_CONV_ALGORITHM, read once (a name parse_algorithm does not know: auto, with one
/// warning; not an exception, as for COHORT_ISA: a tuning knob should not stop training).
inline ConvAlgorithm algorithm_from_environment() noexcept {
  static const ConvAlgorithm a = [] {
    const char* env = std::getenv("COHORT_CONV_ALGORITHM");
    if (!env) return ConvAlgorithm::automatic;
    if (const auto known = parse_algorithm(env)) return *known;
    std::fprintf(stderr, "cohort: COHORT_CONV_ALGORITHM=\"%s\" is not auto, direct, f2 or f4; using auto\n", env);
    return ConvAlgorithm::automatic;
  }();
  return a;
}
} // namespace detail

/// What `automatic` picks for Gk: F(2x2, 3x3) where both sides have at least 32 channels, the
/// direct kernel elsewhere. F(2x2, 3x3)'s error is no larger than the direct kernel's
/// (tests/backend/cpu/conv2d_winograd.cpp); F(4x4) and 5x5 kernels err more and are opt-in. With
/// 16 channels the transforms cost more than the products save (ResNet-20's first stage: 1.4x
/// slower); model B's 5x5 layer gains forward and loses more in dW (bench/RESULTS.md, "Winograd").
template <class Gk>
constexpr ConvAlgorithm choose() noexcept {
  if constexpr (applicable<Gk> && Gk::kernel == 3 && Gk::in_channels >= 32 && Gk::out_channels >= 32)
    return ConvAlgorithm::winograd_f2;
  else
    return ConvAlgorithm::direct;
}

} // namespace winograd

/// Sets the algorithm of every stride-1 convolution the CPU backend runs from now on
/// (`automatic` restores the per-layer default). Overrides COHORT_CONV_ALGORITHM. Layers the
/// Winograd kernels cannot run (winograd::applicable) stay direct.
inline void set_conv_algorithm(ConvAlgorithm a) noexcept {
  winograd::detail::algorithm_override().store(int(a), std::memory_order_relaxed);
}

/// The algorithm the convolution Gk runs with now.
template <class Gk>
ConvAlgorithm conv_algorithm() noexcept {
  if constexpr (!winograd::applicable<Gk>) {
    return ConvAlgorithm::direct;
  } else {
    const int set = winograd::detail::algorithm_override().load(std::memory_order_relaxed);
    const ConvAlgorithm a = set >= 0 ? ConvAlgorithm(set) : winograd::detail::algorithm_from_environment();
    return a == ConvAlgorithm::automatic ? winograd::choose<Gk>() : a;
  }
}

} // namespace cohort::cpu

#pragma GCC diagnostic pop

#pragma once
/// \file
/// Winograd's matrices and layouts (conv2d_winograd.hpp): the Toom-Cook transforms of F(M, R),
/// which layers they apply to, the plan of one pass, the packed transformed weights, and the
/// moves between wide planes and the channel-last layout the kernels use.

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

namespace cohort::cpu::winograd {

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

/// Channels padded with zeros to whole GEMM panels: to 32 (two AVX-512 vectors), except where
/// padding to 16 gives a multiple of 48 and not of 32, which AVX-512 runs as panels of three vectors
/// (gemm.hpp, micro_kernel3) and AVX2 and the baseline as panels of two: padded to 64, 48 channels
/// (FastResNet's second stage) did a third more multiply-adds for nothing.
constexpr std::size_t panel_channels(std::size_t n) noexcept {
  const std::size_t n16 = direct::round_up(n, 16);
  return n16 % 32 != 0 && n16 % 48 == 0 ? n16 : direct::round_up(n, 32);
}

/// Vectors in one GEMM panel of `channels` (a panel_channels value) at vector width `width`.
constexpr int panel_vectors(int width, std::size_t channels) noexcept {
  return width == 16 && channels % 32 != 0 ? 3 : 2;
}

/// The layout of one Winograd pass over the convolution Gk with output tiles of M x M.
/// InAlign 16: input channels padded to whole vectors (the forward pass); 32: to whole GEMM
/// panels (panel_channels, the dW pass, whose products run over input channels).
template <class Gk, std::size_t M, std::size_t InAlign = 16>
struct Plan {
  using Wide = direct::Wide<Gk>; // the layout pad() fills and unpad() reads
  static constexpr std::size_t m = M, r = Gk::kernel, alpha = M + r - 1, positions = alpha * alpha;
  static constexpr std::size_t tiles_h = (Gk::out_h + M - 1) / M, tiles_w = (Gk::out_w + M - 1) / M;
  static constexpr std::size_t tiles = tiles_h * tiles_w;
  static_assert(InAlign == 16 || InAlign == 32, "winograd::Plan: InAlign is 16 (vectors) or 32 (panels)");
  /// Channels padded with zeros: inputs to whole vectors (or panels), outputs to whole panels.
  static constexpr std::size_t cin =
      InAlign == 32 ? panel_channels(Gk::in_channels) : direct::round_up(Gk::in_channels, InAlign);
  static constexpr std::size_t cout = panel_channels(Gk::out_channels);
  /// The channel-last padded input (rows x cols x cin) the tiles read, and the output
  /// (tiles_h*M x tiles_w*M x cout) they write.
  static constexpr std::size_t in_rows = tiles_h * M + r - 1, in_cols = tiles_w * M + r - 1;
  static constexpr std::size_t in_size = in_rows * in_cols * cin;
  static constexpr std::size_t out_size = tiles_h * M * tiles_w * M * cout;
  /// Padded input columns that hold data or padding (past them: zeros added here).
  static constexpr std::size_t valid_cols = Gk::in_w + 2 * Gk::padding;
  /// Samples per group: about 96 tiles, so one group's V and M stay in the outer caches.
  static constexpr std::size_t group = std::max<std::size_t>(1, (96 + tiles - 1) / tiles);
  /// Transformed weights: positions x (cout / NR panels) x cin x NR, NR = panel_vectors vectors.
  static constexpr std::size_t packed_size = positions * cin * cout;
};

/// U = G g G^T for every (output, input) channel pair of Gk, packed for the GEMM micro-kernel of
/// vector width W: [position][panel of NR output channels][input channel][NR] (NR =
/// panel_vectors * W), zeros for padded
/// channels. `w` holds the weights of G (out, in, K, K); with `transpose_rotate`, those of the dX
/// convolution are used instead: W'[c][o][K-1-kh][K-1-kw]. One panel's lanes are transformed
/// together and each position's NR values written at once: written one pair at a time, the 36
/// positions 512 KiB apart cost more than the arithmetic (model D's third layer).
template <class G, class Gk, std::size_t M, class T>
void pack_weights(int width, const T* w, HostBuffer<float>& out, bool transpose_rotate) {
  using P = Plan<Gk, M>;
  using C = Coefficients<M, P::r>;
  constexpr std::size_t R = P::r, A = P::alpha, taps = R * R, max_nr = 48;
  const std::size_t nr = std::size_t(panel_vectors(width, P::cout)) * std::size_t(width), panels = P::cout / nr;
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

} // namespace cohort::cpu::winograd

#pragma GCC diagnostic pop

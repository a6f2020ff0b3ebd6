#pragma once
/// \file
/// The direct convolution for stride S > 1 (conv2d_direct.hpp's Strided plan): filling the
/// phase planes, and dX as S x S phase convolutions.
///
/// dX of a strided convolution is a transposed convolution. Split by phase it becomes S x S
/// ordinary ones: padded-dX phase (a, b) at (i, j) is
///
///   sum over the taps (kh, kw) with kh % S == a, kw % S == b of  W[o][c][kh][kw] * dY[o][i - kh/S][j - kw/S]
///
/// a stride-1 convolution of dY (padded by (K-1)/S above and to the left) with only those taps:
/// StridedDx<G, a, b> is its plan, the forward kernel runs it, and scatter_phases interleaves the
/// S x S outputs into dX. Every tap is computed exactly once, as in the forward pass.

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "cohort/backend/cpu/conv2d_direct.hpp"

namespace cohort::cpu::direct {

/// Copies one (C, H, W) sample into Strided<G>'s phase planes (C x channel_stride, zero-padded).
template <class G>
void pad_strided(const float* __restrict x, float* __restrict xt) {
  using V = Strided<G>;
  constexpr std::size_t S = V::s, P = G::padding;
  std::memset(xt, 0, V::cin * V::channel_stride * sizeof(float));
  for (std::size_t c = 0; c < V::cin; ++c)
    for (std::size_t h = 0; h < G::in_h; ++h) {
      const std::size_t a = (h + P) % S, i = (h + P) / S;
      if (a >= V::phases) continue; // a row no tap reads (kernel smaller than the stride)
      const float* __restrict in = x + (c * G::in_h + h) * G::in_w;
      for (std::size_t b = 0; b < V::phases; ++b) {
        // Input columns w with (w + P) % S == b land at phase column (w + P) / S.
        const std::size_t w0 = (b + S - P % S) % S;
        float* __restrict out = xt + c * V::channel_stride + (a * V::phases + b) * V::plane + i * V::wp + (w0 + P) / S;
        const std::size_t n = w0 < G::in_w ? (G::in_w - w0 + S - 1) / S : 0;
        for (std::size_t j = 0; j < n; ++j) out[j] = in[w0 + j * S];
      }
    }
}

/// One sample's input in the planes of plan_t<G>: wide planes (stride 1) or phase planes.
template <class G>
void pad_input(const float* x, float* xt) {
  if constexpr (G::stride == 1)
    pad_sample<G>(x, xt);
  else
    pad_strided<G>(x, xt);
}

/// The plan of padded-dX phase (A, B) of a strided convolution G (see the file comment): a
/// forward kernel over dY's padded planes, with G's taps of that phase, Cin outputs.
template <class G, std::size_t A, std::size_t B>
struct StridedDx {
  static constexpr std::size_t s = G::stride, k = G::kernel;
  static constexpr std::size_t cin = G::out_channels, cout = G::in_channels;
  /// Phase rows/columns of padded dX (outputs), and dY's zero border above and to the left.
  static constexpr std::size_t ho = (G::in_h + 2 * G::padding + s - 1) / s, wo = (G::in_w + 2 * G::padding + s - 1) / s;
  static constexpr std::size_t pad = (k - 1) / s;
  static constexpr std::size_t wp = std::max(wo, G::out_w) + pad, hq = std::max(ho, G::out_h) + pad;
  static constexpr std::size_t positions = round_up(ho * wp, 16);
  static constexpr std::size_t plane = round_up(std::max(hq * wp, positions + pad * (wp + 1)), 16);
  static constexpr std::size_t channel_stride = plane;
  /// The phase's taps per axis: kh = A, A+S, ... < K.
  static constexpr std::size_t taps_h = A < k ? (k - A + s - 1) / s : 0, taps_w = B < k ? (k - B + s - 1) / s : 0;
  static constexpr std::size_t taps = taps_h * taps_w;
  static constexpr std::size_t kh(std::size_t t) noexcept { return A + s * (t / taps_w); }
  static constexpr std::size_t kw(std::size_t t) noexcept { return B + s * (t % taps_w); }
  static constexpr std::size_t offset(std::size_t t) noexcept { return (pad - kh(t) / s) * wp + (pad - kw(t) / s); }
};

/// Copies one dY sample (Cout, Ho, Wo) into the padded planes every StridedDx<G, ., .> reads
/// (they share one layout). With `relu_of`, dY counts only where relu_of > 0.
template <class G>
void pad_dy_strided(const float* __restrict dy, float* __restrict planes, const float* __restrict relu_of = nullptr) {
  using D = StridedDx<G, 0, 0>;
  std::memset(planes, 0, D::cin * D::plane * sizeof(float));
  for (std::size_t o = 0; o < D::cin; ++o)
    for (std::size_t h = 0; h < G::out_h; ++h) {
      const std::size_t row = (o * G::out_h + h) * G::out_w;
      float* __restrict out = planes + o * D::plane + (h + D::pad) * D::wp + D::pad;
      if (relu_of)
        for (std::size_t w = 0; w < G::out_w; ++w) out[w] = relu_of[row + w] > 0.f ? dy[row + w] : 0.f;
      else
        std::memcpy(out, dy + row, G::out_w * sizeof(float));
    }
}

/// Packs W (out, in, K, K) for StridedDx<G, A, B> and forward tiles of MR rows (input channels):
/// [block][o][tap][r], zero-padded like pack_weights.
template <class G, std::size_t A, std::size_t B, std::size_t MR, class T>
void pack_strided_dx(const T* __restrict w, float* __restrict out) {
  using D = StridedDx<G, A, B>;
  constexpr std::size_t K = G::kernel, blocks = (D::cout + MR - 1) / MR;
  for (std::size_t b = 0; b < blocks; ++b)
    for (std::size_t o = 0; o < D::cin; ++o)
      for (std::size_t t = 0; t < D::taps; ++t)
        for (std::size_t r = 0; r < MR; ++r) {
          const std::size_t c = b * MR + r;
          out[((b * D::cin + o) * D::taps + t) * MR + r] =
              c < D::cout ? float(w[((o * G::in_channels + c) * K + D::kh(t)) * K + D::kw(t)]) : 0.f;
        }
}

/// dX (Cin, H, W) of one sample from the S x S phase outputs: `phase(a, b)` gives phase (a, b)'s
/// wide output (rows x StridedDx::positions), or null for a phase no tap reaches (zeros).
template <class G, class Phase>
void scatter_phases(Phase&& phase, float* __restrict dx) {
  using D = StridedDx<G, 0, 0>;
  constexpr std::size_t S = G::stride, P = G::padding;
  for (std::size_t c = 0; c < G::in_channels; ++c)
    for (std::size_t y = 0; y < G::in_h; ++y) {
      const std::size_t a = (y + P) % S, i = (y + P) / S;
      float* __restrict out = dx + (c * G::in_h + y) * G::in_w;
      for (std::size_t b = 0; b < S; ++b) {
        const std::size_t x0 = (b + S - P % S) % S;
        const std::size_t n = x0 < G::in_w ? (G::in_w - x0 + S - 1) / S : 0;
        const float* src = phase(a, b);
        if (!src) {
          for (std::size_t j = 0; j < n; ++j) out[x0 + j * S] = 0.f;
          continue;
        }
        const float* __restrict in = src + c * D::positions + i * D::wp + (x0 + P) / S;
        for (std::size_t j = 0; j < n; ++j) out[x0 + j * S] = in[j];
      }
    }
}

} // namespace cohort::cpu::direct

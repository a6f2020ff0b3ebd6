#pragma once
/// \file
/// The direct convolution's layouts (conv2d_direct.hpp): wide planes for stride 1, phase planes
/// for larger strides, which layers the direct path takes, and the padded copy of a sample.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cohort/backend/cpu/relu_pool.hpp"
#include "cohort/backend/cpu/simd.hpp"
#include "cohort/backend/cpu/thread_pool.hpp"
#include "cohort/backend/ops.hpp"
#include "cohort/tensor/buffer.hpp"

// Vector values cross (always-inlined) function boundaries here; GCC's note that their ABI
// depends on -mavx* flags does not apply to code that is never called out of line.

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace cohort::cpu::direct {

constexpr std::size_t round_up(std::size_t n, std::size_t m) noexcept { return (n + m - 1) / m * m; }

/// The wide-plane geometry of a stride-1 convolution described by G (a Conv2dGeometry).
///
/// Rows have stride Wp = W + P, not W + 2P: the P zeros that start row r+1 double as the right
/// padding of row r (a tap past the end of a row reads them). Fewer garbage columns per row, and
/// P more zeros after the last row keep the bottom-right taps inside the plane.
template <class G>
struct Wide {
  static_assert(G::stride == 1, "direct convolution: stride 1 only");
  static constexpr std::size_t k = G::kernel, cin = G::in_channels, cout = G::out_channels;
  static constexpr std::size_t hp = G::in_h + 2 * G::padding, wp = G::in_w + G::padding;
  static constexpr std::size_t ho = G::out_h, wo = G::out_w;
  static_assert(wo <= wp, "direct convolution: needs padding < kernel");
  /// Wide output positions computed: Ho rows of Wp, rounded up to a whole widest vector.
  static constexpr std::size_t positions = round_up(ho * wp, 16);
  /// Floats per padded input plane: everything a tile may read, rounded to a cache line.
  static constexpr std::size_t plane = round_up(std::max(hp * wp + G::padding, positions + (k - 1) * (wp + 1)), 16);
  static constexpr std::size_t taps = k * k;
  // The plan interface the kernels read (see Strided): floats between input channels, and
  // where tap t reads relative to an output position (rows of tap group kh0 on, for dW tiles).
  static constexpr std::size_t channel_stride = plane;
  static constexpr std::size_t offset(std::size_t t) noexcept { return (t / k) * wp + t % k; }
  static constexpr std::size_t row_offset(std::size_t kh0) noexcept { return kh0 * wp; }
  static constexpr std::size_t row_step = 1; // dW tiles may start at any kernel row
};

/// The wide-plane geometry of a convolution with stride S > 1: the zero-padded input split into
/// S x S phase planes, phase (a, b) holding padded rows a, a+S, ... and columns b, b+S, ...
///
/// Output (h, w) reads padded input (S*h + kh, S*w + kw) = phase (kh % S, kw % S) at (h + kh/S,
/// w + kw/S): with phase rows of stride Wp, every tap is again a contiguous shifted row, now of
/// its phase's plane, and the stride-1 kernels run unchanged on offset(t). No im2col matrix, no
/// wasted taps: a 3x3 stride-2 convolution reads 4 phases, a 1x1 one only phase (0, 0).
template <class G>
struct Strided {
  static_assert(G::stride > 1 && G::padding < G::kernel, "strided direct convolution: stride > 1, padding < kernel");
  static constexpr std::size_t s = G::stride, k = G::kernel, cin = G::in_channels, cout = G::out_channels;
  static constexpr std::size_t ho = G::out_h, wo = G::out_w;
  /// Phases per axis some tap reads (all S unless the kernel is smaller than the stride).
  static constexpr std::size_t phases = std::min(s, k);
  /// How far past an output position (in phase rows/columns) the taps reach.
  static constexpr std::size_t reach = (k - 1) / s;
  static constexpr std::size_t wp = std::max((G::in_w + 2 * G::padding + s - 1) / s, wo + reach);
  static constexpr std::size_t hq = std::max((G::in_h + 2 * G::padding + s - 1) / s, ho + reach);
  static constexpr std::size_t positions = round_up(ho * wp, 16);
  /// Floats per phase plane: everything a tile may read, rounded to a cache line.
  static constexpr std::size_t plane = round_up(std::max(hq * wp, positions + reach * (wp + 1)), 16);
  static constexpr std::size_t taps = k * k;
  static constexpr std::size_t channel_stride = phases * phases * plane;
  static constexpr std::size_t offset(std::size_t t) noexcept {
    const std::size_t kh = t / k, kw = t % k;
    return ((kh % s) * phases + kw % s) * plane + (kh / s) * wp + kw / s;
  }
  /// dW tiles start at kernel rows kh0 that are multiples of S: the phase of row kh0 + r is then
  /// that of r, and offset(kh0*K + j) = row_offset(kh0) + offset(j).
  static constexpr std::size_t row_offset(std::size_t kh0) noexcept { return kh0 / s * wp; }
  static constexpr std::size_t row_step = s;
};

/// Whether the direct path handles G (otherwise the im2col path does).
template <class G>
inline constexpr bool applicable = G::stride == 1 && G::padding + 1 <= G::kernel;
template <class G>
inline constexpr bool strided_applicable = G::stride > 1 && G::padding < G::kernel;

/// A kernel "plan" (Wide, Strided, StridedDx): what forward_tile and weight_grad_block read.
template <class X>
concept KernelPlan = requires {
  X::channel_stride;
  X::positions;
};
/// The plan of X: X itself, or the input plan of a Conv2dGeometry (Wide for stride 1).
template <class X>
struct plan_of {
  using type = std::conditional_t<X::stride == 1, Wide<X>, Strided<X>>;
};
template <KernelPlan X>
struct plan_of<X> {
  using type = X;
};
template <class X>
using plan_t = typename plan_of<X>::type;

/// Copies one (C, H, W) sample into zero-padded wide planes (C x Wide::plane). With `relu_of`
/// (a tensor of the sample's shape), copies x where relu_of > 0 and 0 elsewhere: the gradient
/// through a fused ReLU.
template <class G>
void pad_sample(const float* __restrict x, float* __restrict xt, const float* __restrict relu_of = nullptr) {
  using V = Wide<G>;
  for (std::size_t c = 0; c < V::cin; ++c) {
    float* __restrict plane = xt + c * V::plane;
    std::memset(plane, 0, V::plane * sizeof(float));
    for (std::size_t h = 0; h < G::in_h; ++h) {
      const std::size_t row = (c * G::in_h + h) * G::in_w;
      float* __restrict out = plane + (h + G::padding) * V::wp + G::padding;
      if (relu_of)
        for (std::size_t w = 0; w < G::in_w; ++w) out[w] = relu_of[row + w] > 0.f ? x[row + w] : 0.f;
      else
        std::memcpy(out, x + row, G::in_w * sizeof(float));
    }
  }
}

} // namespace cohort::cpu::direct

#pragma GCC diagnostic pop

#pragma once
/// \file
/// Where the direct convolution's backward pass gets dY from, in the three layouts its kernels
/// read: transposed (valid position, channel) for dW tiles, padded planes for the dX
/// convolution, and one channel's wide row for the per-channel dW kernel.
///
///   PlainDy    dY as a tensor (Cout, Ho, Wo), masked by a fused ReLU's output when given.
///   PooledDy   Conv2d -> ReLU -> MaxPool2d<2> fused: dY is rebuilt from the pool's gradient,
///              its output and its argmax, so the full-size gradient never goes to memory.
///
/// Both give exactly the values the unfused layers would (zeros where the pool or the ReLU
/// stops the gradient), so fusion changes no result.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cohort/backend/cpu/conv2d_direct.hpp"

namespace cohort::cpu::direct {

/// dY given as a tensor; `relu_y`, when not null, is the output of a fused ReLU (dY counts only
/// where it is > 0).
template <class G>
struct PlainDy {
  const float* dy;
  const float* relu_y = nullptr;

  /// Sample n as (valid position, channel), channels padded with zeros to `padded`.
  void transposed(std::size_t n, float* dyt, std::size_t padded) const {
    transpose_dy<G>(dy + n * G::out_size, dyt, padded, relu_y ? relu_y + n * G::out_size : nullptr);
  }
  /// Sample n as the padded input planes of the dX convolution (transposed_geometry<G>).
  void padded(std::size_t n, float* planes) const {
    pad_sample<transposed_geometry<G>>(dy + n * G::out_size, planes, relu_y ? relu_y + n * G::out_size : nullptr);
  }
  /// Channel o of sample n as a wide row (Wide<G>::positions floats, zero outside valid columns).
  void wide_channel(std::size_t n, std::size_t o, float* __restrict row) const {
    using V = Wide<G>;
    const float* __restrict d = dy + (n * G::out_channels + o) * V::ho * V::wo;
    const float* __restrict m = relu_y ? relu_y + (n * G::out_channels + o) * V::ho * V::wo : nullptr;
    std::memset(row, 0, V::positions * sizeof(float));
    for (std::size_t h = 0; h < V::ho; ++h) {
      float* __restrict out = row + h * V::wp;
      const std::size_t at = h * V::wo;
      if (m)
        for (std::size_t w = 0; w < V::wo; ++w) out[w] = m[at + w] > 0.f ? d[at + w] : 0.f;
      else
        std::memcpy(out, d + at, V::wo * sizeof(float));
    }
  }
};

/// Conv2d -> ReLU -> MaxPool2d<2, 2, 0> fused: the pool's output gradient `dpool`, its output
/// `pooled` and window argmax `window` (2*down + right), each (batch, Cout, Ho/2, Wo/2). dY is
/// dpool at each window's argmax where the pooled value (the ReLU's output there) is > 0, and
/// 0 everywhere else, including the last row/column a floor-mode pool drops.
template <class G>
struct PooledDy {
  const float* dpool;
  const float* pooled;
  const std::uint8_t* window;
  static constexpr std::size_t ph = G::out_h / 2, pw = G::out_w / 2, cells = ph * pw;

  /// Calls f(channel, output row, output column, gradient) for every cell of sample n that
  /// passes a gradient on.
  template <class F>
  void each(std::size_t n, F&& f) const {
    const std::size_t base = n * G::out_channels * cells;
    for (std::size_t o = 0; o < G::out_channels; ++o) each_in_channel(base, o, f);
  }
  template <class F>
  void each_in_channel(std::size_t base, std::size_t o, F&& f) const {
    const float* __restrict g = dpool + base + o * cells;
    const float* __restrict v = pooled + base + o * cells;
    const std::uint8_t* __restrict a = window + base + o * cells;
    for (std::size_t i = 0; i < ph; ++i)
      for (std::size_t j = 0; j < pw; ++j) {
        const std::size_t c = i * pw + j;
        if (v[c] > 0.f) f(o, 2 * i + (a[c] >> 1), 2 * j + (a[c] & 1), g[c]);
      }
  }

  void transposed(std::size_t n, float* __restrict dyt, std::size_t padded) const {
    std::memset(dyt, 0, G::out_h * G::out_w * padded * sizeof(float));
    each(n, [&](std::size_t o, std::size_t h, std::size_t w, float g) { dyt[(h * G::out_w + w) * padded + o] = g; });
  }
  void padded(std::size_t n, float* __restrict planes) const {
    using Gt = transposed_geometry<G>;
    using Vt = Wide<Gt>;
    std::memset(planes, 0, Vt::cin * Vt::plane * sizeof(float));
    each(n, [&](std::size_t o, std::size_t h, std::size_t w, float g) {
      planes[o * Vt::plane + (h + Gt::padding) * Vt::wp + Gt::padding + w] = g;
    });
  }
  void wide_channel(std::size_t n, std::size_t o, float* __restrict row) const {
    using V = Wide<G>;
    std::memset(row, 0, V::positions * sizeof(float));
    each_in_channel(n * G::out_channels * cells, o,
                    [&](std::size_t, std::size_t h, std::size_t w, float g) { row[h * V::wp + w] = g; });
  }
};

} // namespace cohort::cpu::direct

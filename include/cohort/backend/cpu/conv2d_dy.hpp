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
#include "cohort/backend/cpu/conv2d_strided.hpp"
#include "cohort/backend/cpu/convert.hpp"

namespace cohort::cpu::direct {

/// `n` elements of T as floats: `p` itself for float, else a conversion into per-thread scratch
/// `slot` (the 16-bit types of mixed precision).
template <class T>
const float* as_floats(const T* p, std::size_t n, int slot) {
  if constexpr (std::is_same_v<T, float>) {
    return p;
  } else {
    float* out = convert_scratch(slot, n);
    load_floats(active_isa(), p, out, n);
    return out;
  }
}

/// dY given as a tensor of T; `relu_y`, when not null, is the output of a fused ReLU (dY counts
/// only where it is > 0).
template <class G, class T = float>
struct PlainDy {
  const T* dy;
  const T* relu_y = nullptr;

  /// Sample n as (valid position, channel), channels padded with zeros to `padded`.
  void transposed(std::size_t n, float* dyt, std::size_t padded) const {
    transpose_dy<G>(sample(dy, n, 0), dyt, padded, relu_y ? sample(relu_y, n, 1) : nullptr);
  }
  /// Sample n as the padded input planes of the dX convolution (transposed_geometry<G>).
  void padded(std::size_t n, float* planes) const {
    pad_sample<transposed_geometry<G>>(sample(dy, n, 0), planes, relu_y ? sample(relu_y, n, 1) : nullptr);
  }
  /// Sample n as the padded planes of the strided dX phase convolutions (StridedDx<G, ., .>).
  void padded_strided(std::size_t n, float* planes) const {
    pad_dy_strided<G>(sample(dy, n, 0), planes, relu_y ? sample(relu_y, n, 1) : nullptr);
  }
  /// Channel o of sample n as a wide row (Wide<G>::positions floats, zero outside valid columns).
  void wide_channel(std::size_t n, std::size_t o, float* __restrict row) const {
    using V = Wide<G>;
    constexpr std::size_t plane = V::ho * V::wo;
    const std::size_t at = (n * G::out_channels + o) * plane;
    const float* __restrict d = as_floats(dy + at, plane, 0);
    const float* __restrict m = relu_y ? as_floats(relu_y + at, plane, 1) : nullptr;
    std::memset(row, 0, V::positions * sizeof(float));
    for (std::size_t h = 0; h < V::ho; ++h) {
      float* __restrict out = row + h * V::wp;
      const std::size_t r = h * V::wo;
      if (m)
        for (std::size_t w = 0; w < V::wo; ++w) out[w] = m[r + w] > 0.f ? d[r + w] : 0.f;
      else
        std::memcpy(out, d + r, V::wo * sizeof(float));
    }
  }

 private:
  static const float* sample(const T* p, std::size_t n, int slot) {
    return as_floats(p + n * G::out_size, G::out_size, slot);
  }
};

/// Conv2d -> ReLU -> MaxPool2d<2, 2, 0> fused: the pool's output gradient `dpool`, its output
/// `pooled` and window argmax `window` (2*down + right), each (batch, Cout, Ho/2, Wo/2). dY is
/// dpool at each window's argmax where the pooled value (the ReLU's output there) is > 0, and
/// 0 everywhere else, including the last row/column a floor-mode pool drops.
template <class G, class T = float>
struct PooledDy {
  const T* dpool;
  const T* pooled;
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
    const T* __restrict g = dpool + base + o * cells;
    const T* __restrict v = pooled + base + o * cells;
    const std::uint8_t* __restrict a = window + base + o * cells;
    for (std::size_t i = 0; i < ph; ++i)
      for (std::size_t j = 0; j < pw; ++j) {
        const std::size_t c = i * pw + j;
        if (to_float(v[c]) > 0.f) f(o, 2 * i + (a[c] >> 1), 2 * j + (a[c] & 1), to_float(g[c]));
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
